//! The body of the `component_text` fuzz target, shared by the test run
//! (tests/fuzz.rs, on stable) and by cargo-fuzz
//! (fuzz/fuzz_targets/component_text.rs): the host's decoding of what a
//! component wrote (errors, drop reasons, logs, stdout/stderr) into text
//! fit for logs, events and terminals.

use nodewright_host::text::{Keep, multi_line, one_line, one_line_owned};

/// For any text, cap and side: the result escapes every control character
/// (newlines too, unless multi-line), shows at most `max` bytes of the text
/// plus a marker, the marker counts exactly the bytes cut, and what is
/// shown is the escaped head (or tail) of the text.
pub fn check(text: &str, max: usize, tail: bool) {
    let keep = if tail { Keep::Tail } else { Keep::Head };
    let line = one_line(text, max, keep);
    assert_eq!(one_line_owned(text.to_string(), max, keep), line);
    assert!(!line.chars().any(char::is_control), "{line:?}");
    let lines = multi_line(text, max, keep);
    assert!(
        !lines.chars().any(|c| c.is_control() && c != '\n'),
        "{lines:?}"
    );

    // Text that was not cut is shown whole, even if it looks like a marker.
    let (shown, cut) = if line == one_line(text, usize::MAX, keep) {
        (line.as_str(), 0)
    } else {
        split_marker(&line, keep)
    };
    assert!(
        cut == 0 || shown.len() <= max,
        "{} bytes shown, cap {max}",
        shown.len()
    );
    assert!(
        cut > 0 || line.len() <= max,
        "{line:?} exceeds {max} bytes uncut"
    );
    let kept = match keep {
        Keep::Head => &text[..text.len() - cut],
        Keep::Tail => &text[cut..],
    };
    assert_eq!(
        one_line(kept, usize::MAX, keep),
        shown,
        "cut {cut} of {text:?}"
    );
    if cut == 0 {
        assert_eq!(kept, text);
    }
    if text.len() <= max && !text.chars().any(char::is_control) {
        assert_eq!(line, text, "short clean text is unchanged");
    }
}

/// The shown text and the byte count of `… (N more bytes)`, if present.
fn split_marker(line: &str, keep: Keep) -> (&str, usize) {
    let parse = |marker: &str| -> Option<usize> {
        marker
            .strip_prefix("… (")?
            .strip_suffix(" more bytes)")?
            .parse()
            .ok()
    };
    match keep {
        Keep::Head => match line.rfind("… (") {
            Some(at) if parse(&line[at..]).is_some() => {
                (&line[..at], parse(&line[at..]).unwrap_or_default())
            }
            _ => (line, 0),
        },
        Keep::Tail => match line.find(" more bytes)") {
            Some(at) if line.starts_with("… (") => {
                let end = at + " more bytes)".len();
                match parse(&line[..end]) {
                    Some(cut) => (&line[end..], cut),
                    None => (line, 0),
                }
            }
            _ => (line, 0),
        },
    }
}
