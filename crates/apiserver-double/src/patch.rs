//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902) for the emulated
//! API server.

use serde_json::Value;

/// Applies a merge patch: objects merge key by key, `null` removes a key,
/// anything else replaces.
pub(super) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(map) = target {
        for (key, value) in patch {
            if value.is_null() {
                map.remove(key);
            } else {
                merge(map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// Applies a JSON patch (`add`, `remove`, `replace`, `test`); the whole
/// patch fails if one operation does.
pub(super) fn json_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    let operations = patch
        .as_array()
        .ok_or("a JSON patch must be an array of operations")?;
    let mut work = target.clone();
    for (i, operation) in operations.iter().enumerate() {
        let op = operation
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let path = operation
            .get("path")
            .and_then(Value::as_str)
            .ok_or(format!("operation {i} has no path"))?;
        let value = operation.get("value").cloned();
        match op {
            "add" => add(
                &mut work,
                path,
                value.ok_or(format!("operation {i} (add) has no value"))?,
            )?,
            "remove" => remove(&mut work, path)?,
            "replace" => {
                let slot = work
                    .pointer_mut(path)
                    .ok_or(format!("operation {i}: {path} does not exist"))?;
                *slot = value.ok_or(format!("operation {i} (replace) has no value"))?;
            }
            "test" => {
                // As the API server does, a missing path tests equal to null.
                let actual = work.pointer(path).unwrap_or(&Value::Null);
                if Some(actual) != value.as_ref() {
                    return Err(format!("operation {i}: test of {path} failed"));
                }
            }
            other => return Err(format!("operation {i}: op {other:?} is not supported")),
        }
    }
    *target = work;
    Ok(())
}

/// Splits a JSON pointer into its parent pointer and last token (unescaped).
fn split(path: &str) -> Result<(&str, String), String> {
    let index = path
        .rfind('/')
        .ok_or(format!("{path:?} is not a JSON pointer"))?;
    let token = path[index + 1..].replace("~1", "/").replace("~0", "~");
    Ok((&path[..index], token))
}

fn add(target: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *target = value;
        return Ok(());
    }
    let (parent, token) = split(path)?;
    match target.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(token, value);
            Ok(())
        }
        Some(Value::Array(items)) => {
            if token == "-" {
                items.push(value);
                return Ok(());
            }
            let index: usize = token
                .parse()
                .map_err(|_| format!("{path}: bad array index"))?;
            if index > items.len() {
                return Err(format!("{path}: index out of range"));
            }
            items.insert(index, value);
            Ok(())
        }
        _ => Err(format!("{path}: parent does not exist")),
    }
}

fn remove(target: &mut Value, path: &str) -> Result<(), String> {
    let (parent, token) = split(path)?;
    match target.pointer_mut(parent) {
        Some(Value::Object(map)) => map
            .remove(&token)
            .map(|_| ())
            .ok_or(format!("{path} does not exist")),
        Some(Value::Array(items)) => {
            let index: usize = token
                .parse()
                .map_err(|_| format!("{path}: bad array index"))?;
            if index >= items.len() {
                return Err(format!("{path}: index out of range"));
            }
            items.remove(index);
            Ok(())
        }
        _ => Err(format!("{path}: parent does not exist")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_merges_objects_and_removes_nulls() {
        let mut doc = json!({"a": {"b": 1, "c": 2}, "d": [1]});
        merge(&mut doc, &json!({"a": {"b": null, "e": 3}, "d": [2]}));
        assert_eq!(doc, json!({"a": {"c": 2, "e": 3}, "d": [2]}));
    }

    #[test]
    fn json_patch_is_all_or_nothing() {
        let mut doc = json!({"metadata": {"finalizers": ["a", "b"]}});
        json_patch(
            &mut doc,
            &json!([
                {"op": "test", "path": "/metadata/finalizers/0", "value": "a"},
                {"op": "remove", "path": "/metadata/finalizers/0"},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "c"},
            ]),
        )
        .unwrap();
        assert_eq!(doc, json!({"metadata": {"finalizers": ["b", "c"]}}));
        let before = doc.clone();
        let failed = json_patch(
            &mut doc,
            &json!([
                {"op": "remove", "path": "/metadata/finalizers/0"},
                {"op": "test", "path": "/metadata/finalizers/0", "value": "zzz"},
            ]),
        );
        assert!(failed.is_err());
        assert_eq!(doc, before);
        let absent = json!([{"op": "test", "path": "/metadata/labels", "value": null}]);
        json_patch(&mut doc, &absent).unwrap();
    }
}
