//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902: add, remove,
//! replace, move, copy, test) for the emulated API server, by the
//! `json-patch` crate. Strategic merge patch and server-side apply, which
//! the crate does not do, live in `strategic.rs` and `apply.rs`.

use json_patch::{AddOperation, Patch, PatchOperation};
use serde_json::Value;

/// Applies a merge patch: objects merge key by key, `null` removes a key,
/// anything else replaces.
pub(super) fn merge(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// Why a JSON patch was not applied; kube-apiserver answers a body that is
/// not a list of operations with 400 and an operation that does not apply
/// with 422.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum JsonPatchError {
    /// The body is not an array of operations (400 BadRequest).
    Decode(String),
    /// An operation does not apply (422); nothing was changed.
    Apply(String),
}

/// Applies a JSON patch; the whole patch fails if one operation does.
///
/// Two differences from the crate, kept because kube-apiserver (its
/// `evanphx/json-patch` v4) does them: a `test` of `null` passes on a key
/// that an existing object does not have, and a `replace` of such a key
/// adds it.
pub(super) fn json_patch(target: &mut Value, patch: &Value) -> Result<(), JsonPatchError> {
    if !patch.is_array() {
        return Err(JsonPatchError::Decode(
            "a JSON patch must be an array of operations".to_string(),
        ));
    }
    let operations: Patch = serde_json::from_value(patch.clone()).map_err(|e| {
        JsonPatchError::Apply(format!(
            "the JSON patch's operations need op (add, remove, replace, move, copy, test), path, and value or from as the op requires: {e}"
        ))
    })?;
    let mut work = target.clone();
    for (i, operation) in operations.iter().enumerate() {
        let operation = match operation {
            PatchOperation::Test(test)
                if test.value.is_null() && absent_key_of_object(&work, test.path.as_str()) =>
            {
                continue;
            }
            PatchOperation::Replace(replace)
                if absent_key_of_object(&work, replace.path.as_str()) =>
            {
                &PatchOperation::Add(AddOperation {
                    path: replace.path.clone(),
                    value: replace.value.clone(),
                })
            }
            other => other,
        };
        json_patch::patch(&mut work, std::slice::from_ref(operation)).map_err(|e| {
            JsonPatchError::Apply(format!(
                "operation {i} ({}) failed at path {:?}: {}",
                op_name(operation),
                e.path.as_str(),
                e.kind
            ))
        })?;
    }
    *target = work;
    Ok(())
}

/// Whether `pointer` names a key that the object at its parent lacks.
fn absent_key_of_object(doc: &Value, pointer: &str) -> bool {
    let Some(index) = pointer.rfind('/') else {
        return false;
    };
    let key = pointer[index + 1..].replace("~1", "/").replace("~0", "~");
    doc.pointer(&pointer[..index])
        .and_then(Value::as_object)
        .is_some_and(|object| !object.contains_key(&key))
}

fn op_name(operation: &PatchOperation) -> &'static str {
    match operation {
        PatchOperation::Add(_) => "add",
        PatchOperation::Remove(_) => "remove",
        PatchOperation::Replace(_) => "replace",
        PatchOperation::Move(_) => "move",
        PatchOperation::Copy(_) => "copy",
        PatchOperation::Test(_) => "test",
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
        assert!(
            matches!(failed, Err(JsonPatchError::Apply(_))),
            "{failed:?}"
        );
        assert_eq!(doc, before);
        let absent = json!([{"op": "test", "path": "/metadata/labels", "value": null}]);
        json_patch(&mut doc, &absent).unwrap();
        let absent_parent = json!([{"op": "test", "path": "/spec/x", "value": null}]);
        assert!(json_patch(&mut doc, &absent_parent).is_err());
        let replace_absent =
            json!([{"op": "replace", "path": "/metadata/labels", "value": {"a": "b"}}]);
        json_patch(&mut doc, &replace_absent).unwrap();
        assert_eq!(doc["metadata"]["labels"], json!({"a": "b"}));
        let replace_under_absent = json!([{"op": "replace", "path": "/spec/x", "value": 1}]);
        assert!(json_patch(&mut doc, &replace_under_absent).is_err());
    }

    #[test]
    fn move_and_copy_work_and_bad_bodies_are_told_apart() {
        let mut doc = json!({"metadata": {"labels": {"a": "1"}, "annotations": {}}});
        json_patch(
            &mut doc,
            &json!([
                {"op": "copy", "from": "/metadata/labels/a", "path": "/metadata/annotations/a"},
                {"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels/b"},
            ]),
        )
        .unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"labels": {"b": "1"}, "annotations": {"a": "1"}}})
        );
        assert!(matches!(
            json_patch(&mut doc, &json!({"op": "add"})),
            Err(JsonPatchError::Decode(_))
        ));
        assert!(matches!(
            json_patch(&mut doc, &json!([{"op": "frobnicate", "path": "/a"}])),
            Err(JsonPatchError::Apply(_))
        ));
    }
}
