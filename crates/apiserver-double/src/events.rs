//! `events.k8s.io/v1` Events are core Events seen through other field
//! names, as in a real cluster: one storage, two views. An event a
//! controller records through `events.k8s.io` shows in `kubectl describe`
//! (which reads core Events) and the other way round.

use serde_json::{Map, Value, json};

/// `(events.k8s.io name, core name)` of the renamed fields.
const RENAMED: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn rename(object: &Value, to_core: bool, api_version: &str) -> Value {
    let Value::Object(map) = object else {
        return object.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let renamed = RENAMED.iter().find_map(|(new, core)| {
            if to_core && key == new {
                Some(*core)
            } else if !to_core && key == core {
                Some(*new)
            } else {
                None
            }
        });
        out.insert(renamed.unwrap_or(key).to_string(), value.clone());
    }
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    Value::Object(out)
}

/// An `events.k8s.io/v1` Event as the core Event it is stored as.
pub fn to_core(event: &Value) -> Value {
    rename(event, true, "v1")
}

/// A stored core Event as `events.k8s.io/v1` shows it.
pub fn from_core(event: &Value) -> Value {
    rename(event, false, "events.k8s.io/v1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let event = json!({"metadata": {"name": "e"}, "regarding": {"name": "x"}, "note": "hello", "reason": "R"});
        let core = to_core(&event);
        assert_eq!(core["involvedObject"]["name"], "x");
        assert_eq!(core["message"], "hello");
        let back = from_core(&core);
        assert_eq!(back["note"], "hello");
        assert_eq!(back["apiVersion"], "events.k8s.io/v1");
    }
}
