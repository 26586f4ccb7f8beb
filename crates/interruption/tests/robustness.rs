//! Property-style checks: no input makes `parse` panic.

mod common;

use common::FIXTURES;
use interruption::Parsed;

/// Every strict prefix of every fixture, cut at every byte offset, parses
/// without panicking; those that are not the whole event (up to trailing
/// whitespace) are malformed.
#[test]
fn truncation_at_every_byte_offset_never_panics() {
    for (name, body) in FIXTURES {
        let bytes = body.as_bytes();
        let whole = body.trim_end().len();
        for end in 0..bytes.len() {
            let prefix = String::from_utf8_lossy(&bytes[..end]);
            let parsed = interruption::parse(&prefix);
            if end < whole {
                assert!(
                    matches!(parsed, Parsed::Malformed(_)),
                    "{name} cut at {end} gave {parsed:?}"
                );
            }
        }
    }
}

/// Every byte of every fixture, replaced by each of a few structural
/// characters (or dropped), parses without panicking.
#[test]
fn single_byte_edits_never_panic() {
    let replacements: [&[u8]; 9] = [b"", b"\"", b"{", b"}", b"[", b"]", b"0", b"n", b"\\"];
    for (_, body) in FIXTURES {
        let bytes = body.as_bytes();
        for at in 0..bytes.len() {
            for replacement in replacements {
                let mut edited = Vec::with_capacity(bytes.len() + 1);
                edited.extend_from_slice(&bytes[..at]);
                edited.extend_from_slice(replacement);
                edited.extend_from_slice(&bytes[at + 1..]);
                let _ = interruption::parse(&String::from_utf8_lossy(&edited));
            }
        }
    }
}

/// Deep nesting is refused by the JSON reader's recursion limit rather
/// than overflowing the stack.
#[test]
fn deep_nesting_is_malformed() {
    let depth = 100_000;
    let body = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert!(matches!(interruption::parse(&body), Parsed::Malformed(_)));
    let body = format!(
        r#"{{"version":"0","source":"x","detail-type":"y","detail":{}{}}}"#,
        r#"{"a":"#.repeat(depth),
        "}".repeat(depth)
    );
    assert!(matches!(interruption::parse(&body), Parsed::Malformed(_)));
}
