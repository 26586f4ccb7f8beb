//! Strategic merge patch for built-in kinds, as `kubectl apply`, `cordon`,
//! `label` and `patch` send it: lists of the core types merge by their
//! patch merge key (containers by `name`, tolerations replace, …), the
//! `$patch`, `$retainKeys`, `$setElementOrder/…` and
//! `$deleteFromPrimitiveList/…` directives are honoured, `null` removes.
//!
//! Merge keys come from a table of the list fields of the core types
//! (keyed by field name) instead of the OpenAPI schema: enough for the
//! kinds the double serves.

use serde_json::{Map, Value};

/// How a list field of the core types is patched.
enum ListStrategy {
    /// Items merge by this key.
    MergeKey(&'static str),
    /// A set of scalars: the patch's values are added.
    PrimitiveMerge,
    /// The patch's list replaces the list.
    Replace,
}

fn strategy(field: &str, items: &[Value]) -> ListStrategy {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "containerStatuses"
        | "initContainerStatuses"
        | "schedulingGates"
        | "readinessGates" => {
            if field == "readinessGates" {
                ListStrategy::MergeKey("conditionType")
            } else {
                ListStrategy::MergeKey("name")
            }
        }
        "ports" => {
            // Container ports merge by containerPort, Service ports by port.
            if items.iter().any(|i| i.get("containerPort").is_some()) {
                ListStrategy::MergeKey("containerPort")
            } else {
                ListStrategy::MergeKey("port")
            }
        }
        "volumeMounts" => ListStrategy::MergeKey("mountPath"),
        "volumeDevices" => ListStrategy::MergeKey("devicePath"),
        "conditions" => ListStrategy::MergeKey("type"),
        "addresses" => ListStrategy::MergeKey("type"),
        "taints" => ListStrategy::MergeKey("key"),
        "ownerReferences" => ListStrategy::MergeKey("uid"),
        "hostAliases" => ListStrategy::MergeKey("ip"),
        "topologySpreadConstraints" => ListStrategy::MergeKey("topologyKey"),
        "finalizers" => ListStrategy::PrimitiveMerge,
        _ => ListStrategy::Replace,
    }
}

/// Applies a strategic merge patch to `target`.
pub fn apply(target: &mut Value, patch: &Value) -> Result<(), String> {
    let Value::Object(patch) = patch else {
        return Err("a strategic merge patch must be a JSON object".to_string());
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(map) = target else {
        return Ok(());
    };
    merge_map(map, patch)
}

fn merge_map(target: &mut Map<String, Value>, patch: &Map<String, Value>) -> Result<(), String> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *target = patch
                .iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            return Ok(());
        }
        Some("delete") => {
            target.clear();
            return Ok(());
        }
        Some(other) => return Err(format!("unknown patch directive $patch: {other}")),
        None => {}
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Some(remove)) =
                (target.get_mut(field), value.as_array())
            {
                items.retain(|item| !remove.contains(item));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() {
            target.remove(key);
            continue;
        }
        match value {
            Value::Object(child)
                if child.get("$patch").and_then(Value::as_str) == Some("delete") =>
            {
                target.remove(key);
            }
            Value::Object(child) => {
                let slot = target
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                if let Value::Object(slot) = slot {
                    merge_map(slot, child)?;
                }
            }
            Value::Array(items) => {
                let current = target.remove(key);
                let merged = merge_list(key, current, items)?;
                target.insert(key.clone(), merged);
            }
            scalar => {
                target.insert(key.clone(), scalar.clone());
            }
        }
    }
    // `$retainKeys` keeps only the listed fields; `$setElementOrder` orders a list.
    if let Some(retain) = patch.get("$retainKeys").and_then(Value::as_array) {
        target.retain(|k, _| retain.iter().any(|r| r.as_str() == Some(k)));
    }
    for (key, order) in patch {
        if let (Some(field), Some(order)) =
            (key.strip_prefix("$setElementOrder/"), order.as_array())
            && let Some(Value::Array(items)) = target.get_mut(field)
        {
            let merge_key = match strategy(field, items) {
                ListStrategy::MergeKey(k) => Some(k),
                _ => None,
            };
            let position = |item: &Value| {
                order
                    .iter()
                    .position(|o| match merge_key {
                        Some(k) => o.get(k) == item.get(k),
                        None => o == item,
                    })
                    .unwrap_or(usize::MAX)
            };
            items.sort_by_key(position);
        }
    }
    Ok(())
}

fn merge_list(field: &str, current: Option<Value>, patch: &[Value]) -> Result<Value, String> {
    if patch
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        let kept = patch
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .cloned()
            .collect();
        return Ok(Value::Array(kept));
    }
    let mut items = match current {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    match strategy(field, patch) {
        ListStrategy::Replace => Ok(Value::Array(patch.to_vec())),
        ListStrategy::PrimitiveMerge => {
            for value in patch {
                if !items.contains(value) {
                    items.push(value.clone());
                }
            }
            Ok(Value::Array(items))
        }
        ListStrategy::MergeKey(merge_key) => {
            for entry in patch {
                let Some(key) = entry.get(merge_key) else {
                    // Not keyed (a list of scalars under a keyed name): replace.
                    return Ok(Value::Array(patch.to_vec()));
                };
                let position = items.iter().position(|i| i.get(merge_key) == Some(key));
                let delete = entry.get("$patch").and_then(Value::as_str) == Some("delete");
                match (position, delete) {
                    (Some(i), true) => {
                        items.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => {
                        if let (Value::Object(slot), Value::Object(entry)) = (&mut items[i], entry)
                        {
                            merge_map(slot, entry)?;
                        }
                    }
                    (None, false) => {
                        let mut fresh = Value::Object(Map::new());
                        if let (Value::Object(slot), Value::Object(entry)) = (&mut fresh, entry) {
                            merge_map(slot, entry)?;
                        }
                        items.push(fresh);
                    }
                }
            }
            Ok(Value::Array(items))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name_and_directives_apply() {
        let mut pod = json!({"spec": {
            "containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}],
            "tolerations": [{"key": "x"}],
        }, "metadata": {"finalizers": ["f1"], "labels": {"x": "1", "y": "2"}}});
        apply(
            &mut pod,
            &json!({
                "spec": {
                    "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}, {"name": "c"}],
                    "containers": [{"name": "a", "image": "a:2"}, {"name": "c", "image": "c:1"}],
                    "tolerations": [{"key": "y"}],
                },
                "metadata": {"finalizers": ["f2"], "labels": {"x": null}},
            }),
        )
        .unwrap();
        assert_eq!(
            pod["spec"]["containers"],
            json!([{"name": "b", "image": "b:1"}, {"name": "a", "image": "a:2"}, {"name": "c", "image": "c:1"}])
        );
        assert_eq!(pod["spec"]["tolerations"], json!([{"key": "y"}]));
        assert_eq!(pod["metadata"]["finalizers"], json!(["f1", "f2"]));
        assert_eq!(pod["metadata"]["labels"], json!({"y": "2"}));

        apply(
            &mut pod,
            &json!({"spec": {"containers": [{"name": "b", "$patch": "delete"}]},
                    "metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]}}),
        )
        .unwrap();
        assert_eq!(pod["spec"]["containers"].as_array().unwrap().len(), 2);
        assert_eq!(pod["metadata"]["finalizers"], json!(["f2"]));
    }
}
