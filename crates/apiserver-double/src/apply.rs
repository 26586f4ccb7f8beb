//! Field ownership (`metadata.managedFields`) and server-side apply.
//!
//! Ownership is tracked per leaf field: a scalar, a list (lists are atomic:
//! one owner for the whole list) or an empty object, with map keys such as
//! labels as separate leaves. Every write records its manager: an `Update`
//! entry takes the fields it changed; an `Apply` takes the fields of its
//! configuration, conflicts (409) with other managers that own a field it
//! sets to a different value unless `force=true` is given, and removes
//! fields it applied before and no longer applies when nobody else owns
//! them — the behaviour controllers and `kubectl apply --server-side` rely on.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::meta;

/// A set of leaf field paths.
pub type FieldSet = BTreeSet<Vec<String>>;

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    subresource: String,
    time: String,
    fields: FieldSet,
}

/// Whose write this is and through which endpoint.
#[derive(Debug, Clone)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    /// "" for the main resource, `status` for the status subresource.
    pub subresource: &'a str,
    /// Whether `.status` belongs to the status subresource (not the main resource).
    pub status_is_subresource: bool,
}

impl Writer<'_> {
    /// The top-level fields this write may set.
    fn owns_top(&self, key: &str) -> bool {
        match key {
            "apiVersion" | "kind" => false,
            "status" => !self.status_is_subresource || self.subresource == "status",
            _ => self.subresource != "status",
        }
    }
}

/// The leaf fields of `object` this writer can set.
pub fn leaves(object: &Value, writer: &Writer) -> FieldSet {
    let mut out = FieldSet::new();
    let Value::Object(map) = object else {
        return out;
    };
    for (key, value) in map {
        if !writer.owns_top(key) {
            continue;
        }
        if key == "metadata" {
            for field in ["labels", "annotations", "finalizers", "ownerReferences"] {
                if let Some(value) = value.get(field) {
                    walk(value, vec!["metadata".into(), field.into()], &mut out);
                }
            }
        } else {
            walk(value, vec![key.clone()], &mut out);
        }
    }
    out
}

fn walk(value: &Value, path: Vec<String>, out: &mut FieldSet) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let mut next = path.clone();
                next.push(key.clone());
                walk(child, next, out);
            }
        }
        _ => {
            out.insert(path);
        }
    }
}

fn value_at<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(object, |v, key| v.get(key))
}

fn remove_at(object: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = object;
    for key in parents {
        match current.get_mut(key) {
            Some(next) => current = next,
            None => return,
        }
    }
    if let Value::Object(map) = current {
        map.remove(last);
    }
}

fn to_fields_v1(fields: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in fields {
        let mut node = &mut root;
        for key in path {
            let entry = node
                .entry(format!("f:{key}"))
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            node = match entry {
                Value::Object(map) => map,
                _ => unreachable!("entry was just made an object"),
            };
        }
    }
    Value::Object(root)
}

fn from_fields_v1(value: &Value, path: Vec<String>, out: &mut FieldSet) {
    let Value::Object(map) = value else {
        return;
    };
    let mut leaf = map.is_empty() && !path.is_empty();
    for (key, child) in map {
        match key.strip_prefix("f:") {
            Some(field) => {
                let mut next = path.clone();
                next.push(field.to_string());
                from_fields_v1(child, next, out);
            }
            // `.`, `k:{…}`, `v:…`, `i:…`: the node itself (or parts of a list) is owned.
            None => leaf = !path.is_empty(),
        }
    }
    if leaf {
        out.insert(path);
    }
}

fn read_entries(object: &Value) -> Vec<Entry> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    let mut fields = FieldSet::new();
                    if let Some(v1) = e.get("fieldsV1") {
                        from_fields_v1(v1, Vec::new(), &mut fields);
                    }
                    Entry {
                        manager: meta::text(e, "/manager").to_string(),
                        operation: meta::text(e, "/operation").to_string(),
                        api_version: meta::text(e, "/apiVersion").to_string(),
                        subresource: meta::text(e, "/subresource").to_string(),
                        time: meta::text(e, "/time").to_string(),
                        fields,
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

fn write_entries(object: &mut Value, entries: Vec<Entry>) {
    let entries: Vec<Value> = entries
        .into_iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut entry = json!({
                "manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
                "time": e.time, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                entry["subresource"] = json!(e.subresource);
            }
            entry
        })
        .collect();
    let metadata = meta::metadata_mut(object);
    if entries.is_empty() {
        metadata.remove("managedFields");
    } else {
        metadata.insert("managedFields".into(), Value::Array(entries));
    }
}

/// The entry of (`manager`, `operation`, subresource), created when missing.
fn entry_for<'e>(entries: &'e mut Vec<Entry>, writer: &Writer, operation: &str) -> &'e mut Entry {
    let position = entries.iter().position(|e| {
        e.manager == writer.manager
            && e.operation == operation
            && e.subresource == writer.subresource
    });
    let index = match position {
        Some(i) => i,
        None => {
            entries.push(Entry {
                manager: writer.manager.to_string(),
                operation: operation.to_string(),
                api_version: writer.api_version.to_string(),
                subresource: writer.subresource.to_string(),
                time: String::new(),
                fields: FieldSet::new(),
            });
            entries.len() - 1
        }
    };
    let entry = &mut entries[index];
    entry.api_version = writer.api_version.to_string();
    entry.time = meta::now();
    entry
}

/// Drops owned paths that no longer exist in `object`.
fn forget_missing(entries: &mut [Entry], object: &Value) {
    for entry in entries.iter_mut() {
        entry.fields.retain(|path| value_at(object, path).is_some());
    }
}

/// Records an `Update` by `writer`: it takes ownership of the fields it
/// changed from whoever owned them. `new` gets the resulting managedFields.
pub fn record_update(old: Option<&Value>, new: &mut Value, writer: &Writer) {
    let mut entries = old.map(read_entries).unwrap_or_default();
    let changed: FieldSet = leaves(new, writer)
        .into_iter()
        .filter(|path| old.and_then(|o| value_at(o, path)) != value_at(new, path))
        .collect();
    if !changed.is_empty() {
        for entry in entries.iter_mut() {
            entry.fields.retain(|p| !changed.contains(p));
        }
        entry_for(&mut entries, writer, "Update")
            .fields
            .extend(changed);
    }
    forget_missing(&mut entries, new);
    write_entries(new, entries);
}

/// One apply conflict: another manager owns `field` with a different value.
#[derive(Debug, Clone)]
pub struct Conflict {
    pub manager: String,
    pub api_version: String,
    pub field: String,
}

/// Server-side apply of `config` by `writer` onto `current` (or onto
/// nothing, for a create). Returns the new object with its managedFields.
pub fn apply(
    current: Option<&Value>,
    config: &Value,
    writer: &Writer,
    force: bool,
) -> Result<Value, Vec<Conflict>> {
    let mut entries = current.map(read_entries).unwrap_or_default();
    let applied = leaves(config, writer);
    let mine = |e: &Entry| {
        e.manager == writer.manager && e.operation == "Apply" && e.subresource == writer.subresource
    };
    let mut conflicts = Vec::new();
    if let Some(current) = current {
        for entry in entries.iter().filter(|e| !mine(e)) {
            for path in entry.fields.intersection(&applied) {
                if value_at(current, path) != value_at(config, path) {
                    conflicts.push(Conflict {
                        manager: entry.manager.clone(),
                        api_version: entry.api_version.clone(),
                        field: format!(".{}", path.join(".")),
                    });
                }
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    let mut object = current.cloned().unwrap_or_else(|| json!({}));
    // Fields this manager applied before and no longer applies go, unless
    // someone else owns them too.
    let previous: FieldSet = entries
        .iter()
        .filter(|e| mine(e))
        .flat_map(|e| e.fields.clone())
        .collect();
    for path in previous.difference(&applied) {
        let shared = entries.iter().any(|e| !mine(e) && e.fields.contains(path));
        if !shared {
            remove_at(&mut object, path);
        }
    }
    if force {
        let taken: BTreeSet<&str> = conflicts.iter().map(|c| c.field.as_str()).collect();
        for entry in entries.iter_mut().filter(|e| !mine(e)) {
            entry
                .fields
                .retain(|p| !taken.contains(format!(".{}", p.join(".")).as_str()));
        }
    }
    merge(&mut object, config, writer);
    entry_for(&mut entries, writer, "Apply").fields = applied;
    forget_missing(&mut entries, &object);
    write_entries(&mut object, entries);
    Ok(object)
}

/// Merges an apply configuration: objects key by key, anything else replaces.
fn merge(target: &mut Value, config: &Value, writer: &Writer) {
    let (Value::Object(target), Value::Object(config)) = (target, config) else {
        return;
    };
    for (key, value) in config {
        if key == "metadata" {
            let metadata = target.entry("metadata").or_insert_with(|| json!({}));
            merge_value(metadata, value);
        } else if writer.owns_top(key) || key == "apiVersion" || key == "kind" {
            merge_value(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

fn merge_value(target: &mut Value, value: &Value) {
    match (target, value) {
        (Value::Object(target), Value::Object(value)) => {
            for (key, child) in value {
                merge_value(target.entry(key.clone()).or_insert(Value::Null), child);
            }
        }
        (target, value) => *target = value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITER: Writer = Writer {
        manager: "a",
        api_version: "v1",
        subresource: "",
        status_is_subresource: true,
    };

    #[test]
    fn apply_owns_conflicts_and_removes_dropped_fields() {
        let config = json!({"metadata": {"name": "x", "labels": {"team": "a", "tier": "web"}}, "data": {"k": "1"}});
        let created = apply(None, &config, &WRITER, false).unwrap();
        assert_eq!(created["data"]["k"], "1");

        // Another manager changes `data.k` with an update: it owns it now.
        let mut updated = created.clone();
        updated["data"]["k"] = json!("2");
        let other = Writer {
            manager: "b",
            ..WRITER
        };
        record_update(Some(&created), &mut updated, &other);

        // Re-applying the old value conflicts; with force it wins.
        let conflicts = apply(Some(&updated), &config, &WRITER, false).unwrap_err();
        assert_eq!(conflicts[0].manager, "b");
        assert_eq!(conflicts[0].field, ".data.k");
        let forced = apply(Some(&updated), &config, &WRITER, true).unwrap();
        assert_eq!(forced["data"]["k"], "1");

        // Dropping a label from the configuration removes it.
        let smaller =
            json!({"metadata": {"name": "x", "labels": {"team": "a"}}, "data": {"k": "1"}});
        let applied = apply(Some(&forced), &smaller, &WRITER, false).unwrap();
        assert_eq!(applied["metadata"]["labels"], json!({"team": "a"}));
        let managers: Vec<&str> = applied["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["a"]);
    }
}
