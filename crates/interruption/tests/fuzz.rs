//! The `interruption_message` fuzz target's body (fuzz_body/) run on
//! stable with proptest: the fixtures mutated at one JSON path, and
//! arbitrary text. `scripts/fuzz` runs it longer and under cargo-fuzz.

mod common;
mod fuzz_body;

use common::FIXTURES;
use proptest::prelude::*;
use serde_json::{Value, json};

fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn odd_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        Just(json!(1e300)),
        proptest::sample::select(vec![
            "",
            "0",
            "aws.ec2",
            "aws.health",
            "EC2",
            "scheduledChange",
            "terminate",
            "stop",
            "stopping",
            "terminated",
            "i-0123456789abcdef0",
            "arn:aws:ec2:us-east-1:1:instance/",
            "2024-05-14T12:00:00Z",
            "Tue, 14 May 2024 12:00:00 GMT",
            "9999-99-99T99:99:99Z",
            "EC2 Spot Instance Interruption Warning",
            "AWS Health Event",
            "\u{0}",
            "é",
        ])
        .prop_map(|s| json!(s)),
        "\\PC{0,12}".prop_map(Value::String),
        Just(json!([])),
        Just(json!([{}])),
        Just(json!({})),
    ]
}

/// Every node of `value` as a list of steps (keys or indices).
fn paths(value: &Value, here: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(here.clone());
    match value {
        Value::Object(m) => m.iter().for_each(|(k, v)| {
            here.push(json!(k));
            paths(v, here, out);
            here.pop();
        }),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| {
            here.push(json!(i));
            paths(v, here, out);
            here.pop();
        }),
        _ => {}
    }
}

fn node<'a>(value: &'a mut Value, path: &[Value]) -> &'a mut Value {
    path.iter().fold(value, |v, step| match step {
        Value::String(k) => &mut v[k.as_str()],
        _ => &mut v[step.as_u64().expect("index") as usize],
    })
}

fn mutated() -> impl Strategy<Value = String> {
    let fixtures: Vec<Value> = FIXTURES
        .iter()
        .map(|(_, body)| serde_json::from_str(body).expect("fixture is JSON"))
        .collect();
    (
        proptest::sample::select(fixtures),
        proptest::collection::vec((any::<proptest::sample::Index>(), odd_value()), 1..4),
    )
        .prop_map(|(mut event, edits)| {
            for (at, new) in edits {
                let mut all = Vec::new();
                paths(&event, &mut Vec::new(), &mut all);
                let path = &all[at.index(all.len())];
                *node(&mut event, path) = new;
            }
            event.to_string()
        })
}

proptest! {
    #![proptest_config(cases(512))]

    #[test]
    fn mutated_fixtures_parse_or_name_the_field(body in mutated()) {
        fuzz_body::check(&body);
    }

    #[test]
    fn arbitrary_text_never_panics(body in "\\PC{0,64}|[{}\\[\\]\":,0-9a-z -]{0,64}") {
        fuzz_body::check(&body);
    }
}
