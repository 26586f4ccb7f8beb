//! `meta.k8s.io/v1` Table output, as `kubectl get` asks for it
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`): custom
//! resources get their CRD's `additionalPrinterColumns`, built-in kinds
//! the columns of the real server's printers ([`super::printers`]), other
//! kinds Name and Age.

use serde_json::{Value, json};

use super::jsonpath;
use super::meta;
use super::printers;
use super::resources::ResourceDef;

/// One column of a table.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub type_: &'static str,
    pub format: &'static str,
    pub description: String,
    pub priority: i64,
}

impl Column {
    pub fn new(name: &str, type_: &'static str, priority: i64) -> Self {
        Column {
            name: name.to_string(),
            type_,
            format: if name == "Name" { "name" } else { "" },
            description: String::new(),
            priority,
        }
    }
}

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn from_param(value: Option<&str>) -> Self {
        match value {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// `HumanDuration` of the real printers (`5s`, `3m20s`, `4h`, `12d`).
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of a timestamp as the printers show it.
pub fn age(timestamp: &str) -> Value {
    match meta::age_seconds(timestamp) {
        Some(seconds) => json!(human_duration(seconds)),
        None => json!("<unknown>"),
    }
}

fn custom_columns(def: &ResourceDef) -> Vec<Column> {
    let mut columns = vec![Column {
        name: "Name".into(),
        type_: "string",
        format: "name",
        description: "Name must be unique within a namespace.".into(),
        priority: 0,
    }];
    if def.columns.is_empty() {
        columns.push(Column::new("Age", "date", 0));
    }
    for column in &def.columns {
        let type_ = match column.type_.as_str() {
            "integer" => "integer",
            "number" => "number",
            "boolean" => "boolean",
            "date" => "date",
            _ => "string",
        };
        columns.push(Column {
            name: column.name.clone(),
            type_,
            format: "",
            description: column.description.clone(),
            priority: column.priority,
        });
    }
    columns
}

fn custom_cells(def: &ResourceDef, object: &Value) -> Vec<Value> {
    let mut cells = vec![json!(meta::name(object))];
    if def.columns.is_empty() {
        cells.push(age(meta::text(object, "/metadata/creationTimestamp")));
    }
    for column in &def.columns {
        let found = jsonpath::find(object, &column.json_path).unwrap_or_default();
        let cell = match (found.as_slice(), column.type_.as_str()) {
            ([], _) => Value::Null,
            ([Value::String(t)], "date") => age(t),
            ([one], _) => (*one).clone(),
            (many, _) => json!(
                many.iter()
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        cells.push(cell);
    }
    cells
}

/// The columns of `def`'s table.
fn columns(def: &ResourceDef) -> Vec<Column> {
    if def.is_custom() {
        custom_columns(def)
    } else {
        printers::columns(&def.kind)
    }
}

fn cells(def: &ResourceDef, object: &Value) -> Vec<Value> {
    if def.is_custom() {
        custom_cells(def, object)
    } else {
        printers::cells(&def.kind, object)
    }
}

fn row(def: &ResourceDef, object: &Value, include: IncludeObject) -> Value {
    let mut row = json!({"cells": cells(def, object)});
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": object.get("metadata").cloned().unwrap_or(json!({})),
            });
        }
        IncludeObject::Object => row["object"] = object.clone(),
    }
    row
}

/// A Table of `objects` with list metadata `metadata`.
pub fn table(
    def: &ResourceDef,
    objects: &[Value],
    metadata: Value,
    include: IncludeObject,
) -> Value {
    let columns: Vec<Value> = columns(def)
        .into_iter()
        .map(|c| {
            json!({"name": c.name, "type": c.type_, "format": c.format,
                   "description": c.description, "priority": c.priority})
        })
        .collect();
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": objects.iter().map(|o| row(def, o, include)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(3 * 86400), "3d");
        assert_eq!(human_duration(400 * 86400), "400d");
    }
}
