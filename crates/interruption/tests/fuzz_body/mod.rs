//! The body of the `interruption_message` fuzz target, shared by the test
//! run (tests/fuzz.rs, on stable) and by cargo-fuzz
//! (fuzz/fuzz_targets/interruption_message.rs).

use interruption::{ParseError, Parsed};
use serde_json::Value;

/// Whatever the body: `parse` returns (no panic), twice the same; a field
/// error names its path; every instance id it reports is a string of the
/// body; and the same JSON written another way parses the same.
pub fn check(body: &str) {
    let parsed = interruption::parse(body);
    assert_eq!(
        format!("{parsed:?}"),
        format!("{:?}", interruption::parse(body)),
        "parse is deterministic"
    );
    let json: Option<Value> = serde_json::from_str(body).ok();
    match &parsed {
        Parsed::Known(event) => {
            let json = json.as_ref().expect("a known event is JSON");
            let mut strings = Vec::new();
            collect_strings(json, &mut strings);
            for id in event.instance_ids() {
                assert!(
                    strings.iter().any(|s| s.contains(id.as_str())),
                    "instance id {id:?} is not in the message"
                );
            }
        }
        Parsed::Malformed(ParseError::Envelope(e) | ParseError::Detail { error: e, .. }) => {
            assert!(!e.path.is_empty(), "field error without a path: {e}");
            assert!(parsed_text(&parsed).contains(&e.path), "{e}");
        }
        Parsed::Malformed(_) | Parsed::Unknown(_) => {}
    }
    if let Some(json) = json {
        for rewritten in [json.to_string(), pretty(&json)] {
            assert_eq!(
                format!("{:?}", interruption::parse(&rewritten)),
                format!("{parsed:?}"),
                "the same JSON written as {rewritten}"
            );
        }
    }
}

fn parsed_text(parsed: &Parsed) -> String {
    match parsed {
        Parsed::Malformed(e) => e.to_string(),
        other => format!("{other:?}"),
    }
}

fn pretty(json: &Value) -> String {
    serde_json::to_string_pretty(json).expect("a Value serializes")
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(fields) => fields.iter().for_each(|(k, v)| {
            out.push(k);
            collect_strings(v, out);
        }),
        _ => {}
    }
}
