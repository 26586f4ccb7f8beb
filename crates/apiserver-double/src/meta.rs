//! Small accessors for object metadata kept as JSON.

use serde_json::{Map, Value, json};

/// The value at a JSON pointer: `Value::pointer` without the string it
/// allocates per segment to unescape `~0`/`~1` (unless the pointer has
/// them). The workload controllers read a few fields of every pod they
/// own after every write, so this is on the double's hottest path.
pub fn at<'a>(object: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.contains('~') || !pointer.starts_with('/') {
        return object.pointer(pointer);
    }
    pointer
        .split('/')
        .skip(1)
        .try_fold(object, |value, token| match value {
            Value::Object(map) => map.get(token),
            Value::Array(list) => token.parse::<usize>().ok().and_then(|i| list.get(i)),
            _ => None,
        })
}

/// A string at a JSON pointer, or "".
pub fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    at(object, pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

pub fn name(object: &Value) -> &str {
    text(object, "/metadata/name")
}

pub fn namespace(object: &Value) -> &str {
    text(object, "/metadata/namespace")
}

pub fn uid(object: &Value) -> &str {
    text(object, "/metadata/uid")
}

/// The metadata map, created when missing.
pub fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    match object.get_mut("metadata") {
        Some(Value::Object(map)) => map,
        _ => unreachable!("metadata was just made an object"),
    }
}

pub fn has_finalizers(object: &Value) -> bool {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

pub fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub fn is_being_deleted(object: &Value) -> bool {
    at(object, "/metadata/deletionTimestamp").is_some_and(|t| !t.is_null())
}

/// One owner reference.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub controller: bool,
}

pub fn owner_refs(object: &Value) -> Vec<OwnerRef> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .map(|r| OwnerRef {
                    api_version: text(r, "/apiVersion").to_string(),
                    kind: text(r, "/kind").to_string(),
                    name: text(r, "/name").to_string(),
                    uid: text(r, "/uid").to_string(),
                    controller: r.get("controller").and_then(Value::as_bool) == Some(true),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The owner reference marked `controller: true`.
pub fn controller_of(object: &Value) -> Option<OwnerRef> {
    owner_refs(object).into_iter().find(|r| r.controller)
}

/// The uid of the controller owner, without copying the reference.
pub fn controller_uid(object: &Value) -> Option<&str> {
    at(object, "/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|r| text(r, "/uid"))
}

/// A controller owner reference to `owner` (`blockOwnerDeletion` set, as controllers set it).
pub fn controller_ref(owner: &Value) -> Value {
    json!({
        "apiVersion": text(owner, "/apiVersion"),
        "kind": text(owner, "/kind"),
        "name": name(owner),
        "uid": uid(owner),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// The current time as the API server writes timestamps (whole seconds).
pub fn now() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    k8s_openapi::jiff::Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}

/// Seconds since an RFC 3339 timestamp, if it parses.
pub fn age_seconds(timestamp: &str) -> Option<i64> {
    let then: k8s_openapi::jiff::Timestamp = timestamp.parse().ok()?;
    Some(k8s_openapi::jiff::Timestamp::now().as_second() - then.as_second())
}

/// Whether a pod's `Ready` condition is `True`.
pub fn is_pod_ready(pod: &Value) -> bool {
    at(pod, "/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| text(c, "/type") == "Ready" && text(c, "/status") == "True")
        })
}

/// Whether a pod counts as a running replica: not finished and not being deleted.
pub fn is_active_pod(pod: &Value) -> bool {
    !is_being_deleted(pod) && !is_pod_terminal(pod)
}

/// Whether a pod has finished (`Succeeded` or `Failed`).
pub fn is_pod_terminal(pod: &Value) -> bool {
    matches!(text(pod, "/status/phase"), "Succeeded" | "Failed")
}

/// An integer at a pointer, or `default`.
pub fn int(object: &Value, pointer: &str, default: i64) -> i64 {
    at(object, pointer)
        .and_then(Value::as_i64)
        .unwrap_or(default)
}

/// Sets or replaces the condition of `type_` in `status.conditions`,
/// keeping `lastTransitionTime` when the status does not change.
pub fn set_condition(object: &mut Value, mut condition: Value) {
    let type_ = text(&condition, "/type").to_string();
    if !object.get("status").is_some_and(Value::is_object) {
        object["status"] = json!({});
    }
    if !object["status"]
        .get("conditions")
        .is_some_and(Value::is_array)
    {
        object["status"]["conditions"] = json!([]);
    }
    let Some(conditions) = object["status"]["conditions"].as_array_mut() else {
        return;
    };
    match conditions.iter_mut().find(|c| text(c, "/type") == type_) {
        Some(existing) => {
            if text(existing, "/status") == text(&condition, "/status") {
                for key in ["lastTransitionTime", "lastUpdateTime", "lastProbeTime"] {
                    if let Some(kept) = existing.get(key) {
                        condition[key] = kept.clone();
                    }
                }
            }
            *existing = condition;
        }
        None => conditions.push(condition),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn at_reads_what_value_pointer_reads() {
        let object = json!({"a": {"b/c": [1, {"d": "x"}]}, "e": "y"});
        for pointer in [
            "",
            "/e",
            "/a/b~1c/1/d",
            "/a/b~1c/0",
            "/a/missing",
            "/e/f",
            "/a/b~1c/9",
        ] {
            assert_eq!(at(&object, pointer), object.pointer(pointer), "{pointer}");
        }
        assert_eq!(text(&object, "/e"), "y");
    }
}
