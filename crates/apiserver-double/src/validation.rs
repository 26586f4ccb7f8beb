//! Validation of custom resources against their CRD's structural OpenAPI v3
//! schema, the way the API server does it: unknown fields are pruned (or
//! refused under `fieldValidation=Strict`), schema defaults are applied,
//! then types, required fields, enums, patterns, bounds, list types and
//! int-or-string are checked, and finally the `x-kubernetes-validations`
//! CEL rules run through kube's client-side evaluator. Every problem is a
//! [`Cause`] naming its field, in the real server's wording.
//!
//! The integration tests validate the examples against the CRDs with the
//! same code ([`validate`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use kube::core::cel::{ValidationError, Validator};
use regex::Regex;
use serde_json::Value;

use super::cel::SchemaRules;
use super::error::Cause;

/// A CRD version's schema with its CEL rules compiled once.
#[derive(Debug)]
pub struct CrdSchema {
    pub schema: Value,
    rules: SchemaRules,
}

/// Why an object was refused.
#[derive(Debug)]
pub enum Refusal {
    /// Unknown fields under `fieldValidation=Strict` (their paths).
    UnknownFields(Vec<String>),
    /// Schema or CEL violations.
    Invalid(Vec<Cause>),
}

impl CrdSchema {
    pub fn new(schema: Value) -> Self {
        let rules = SchemaRules::new(&schema);
        CrdSchema { schema, rules }
    }

    /// Prunes, defaults and validates `object` (`old` is the stored object on
    /// updates, for transition rules); returns the object as it is stored.
    pub fn admit(
        &self,
        object: Value,
        old: Option<&Value>,
        strict: bool,
    ) -> Result<Value, Refusal> {
        let mut object = object;
        let mut unknown = Vec::new();
        prune(&self.schema, &mut object, "", &mut unknown);
        if strict && !unknown.is_empty() {
            return Err(Refusal::UnknownFields(unknown));
        }
        let object = defaulted(&self.schema, object);
        let mut causes = Vec::new();
        structural(&self.schema, &object, "", &mut causes);
        let errors = with_validator(|v| self.rules.validate(v, &object, old));
        causes.extend(cel_causes(errors, &object));
        if causes.is_empty() {
            Ok(object)
        } else {
            Err(Refusal::Invalid(causes))
        }
    }
}

/// Schema defaults, filled in where fields are missing, in place: a
/// defaulted value gets the defaults of its own fields too. As in
/// kube-apiserver, a `null` for a field that is not `nullable` is dropped
/// first (or defaulted, when the field has a default).
fn defaulted(schema: &Value, mut object: Value) -> Value {
    default_in_place(schema, &mut object, 0);
    object
}

/// Nesting past which nothing is defaulted (kube's evaluator stops there
/// and refuses the object as too deep).
const MAX_DEFAULT_DEPTH: usize = 64;

/// Walks `properties`, `items` and `additionalProperties` as kube's
/// `apply_defaults` does (a map never gains entries from a default, and
/// `x-kubernetes-preserve-unknown-fields` ends the walk into map values),
/// without copying the object at every level.
fn default_in_place(schema: &Value, value: &mut Value, depth: usize) {
    if depth > MAX_DEFAULT_DEPTH {
        return;
    }
    match value {
        Value::Object(object) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let preserve_unknown = schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true);
            let additional = schema
                .get("additionalProperties")
                .filter(|a| a.is_object() && !preserve_unknown);
            if let Some(properties) = properties {
                // A null where null is not allowed counts as absent: it is
                // dropped, or replaced by the default when there is one.
                object.retain(|key, v| {
                    !(v.is_null()
                        && properties
                            .get(key)
                            .is_some_and(|p| p.get("default").is_none() && !flag(p, "nullable")))
                });
                for (key, property) in properties {
                    let absent = match object.get(key) {
                        None => true,
                        Some(Value::Null) => !flag(property, "nullable"),
                        Some(_) => false,
                    };
                    if absent && let Some(default) = property.get("default") {
                        object.insert(key.clone(), default.clone());
                    }
                }
            }
            for (key, child) in object.iter_mut() {
                let child_schema = properties.and_then(|p| p.get(key)).or(additional);
                if let Some(child_schema) = child_schema {
                    default_in_place(child_schema, child, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    default_in_place(item_schema, item, depth + 1);
                }
            }
        }
        _ => {}
    }
}

fn with_validator<T>(f: impl FnOnce(&Validator) -> T) -> T {
    thread_local! {
        static VALIDATOR: Validator = Validator::new();
    }
    VALIDATOR.with(f)
}

/// Structural + CEL validation of `object` against `schema` (an
/// `openAPIV3Schema` as JSON) after defaulting, every problem as
/// `"<field path>: <message>"`; unknown fields are reported as
/// `field not declared in schema`. `old` enables transition rules.
pub fn validate(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<String> {
    let mut pruned = object.clone();
    let mut unknown = Vec::new();
    prune(schema, &mut pruned, "", &mut unknown);
    let mut errors: Vec<String> = unknown
        .iter()
        .map(|path| format!("{path}: field not declared in schema"))
        .collect();
    let defaulted = defaulted(schema, object.clone());
    let mut causes = Vec::new();
    structural(schema, &defaulted, "", &mut causes);
    let failed = with_validator(|v| v.validate(schema, object, old))
        .err()
        .map(|failed| failed.into_vec())
        .unwrap_or_default();
    causes.extend(cel_causes(failed, &defaulted));
    errors.extend(causes.iter().map(|c| format!("{}: {}", c.field, c.message)));
    errors
}

/// CEL failures as causes: `Invalid value: "<type>": <message>`.
fn cel_causes(errors: Vec<ValidationError>, object: &Value) -> Vec<Cause> {
    errors
        .iter()
        .map(|error| {
            let field = error.field_path.clone();
            let type_name = value_at(object, &field).map_or("object", json_type);
            let (reason, message) = match error.reason.as_deref() {
                Some("FieldValueForbidden") => (
                    "FieldValueForbidden",
                    format!("Forbidden: {}", error.message),
                ),
                Some("FieldValueRequired") => (
                    "FieldValueRequired",
                    format!("Required value: {}", error.message),
                ),
                Some("FieldValueDuplicate") => (
                    "FieldValueDuplicate",
                    format!("Duplicate value: {}", error.message),
                ),
                _ => (
                    "FieldValueInvalid",
                    format!("Invalid value: {type_name:?}: {}", error.message),
                ),
            };
            Cause::new(reason, field, message)
        })
        .collect()
}

/// The value at a dotted field path with `[i]` indexes (`spec.a[0].b`).
fn value_at<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let mut current = object;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            current = current.get(name)?;
        }
        for index in indexes.split('[').filter(|s| !s.is_empty()) {
            let index = index.trim_end_matches(']');
            current = match index.parse::<usize>() {
                Ok(i) => current.get(i)?,
                Err(_) => current.get(index)?,
            };
        }
    }
    Some(current)
}

/// The compiled `pattern`, shared: a cloned `Regex` would build its
/// search cache again on every match.
fn regex(pattern: &str) -> Result<Arc<Regex>, String> {
    type Compiled = Result<Arc<Regex>, String>;
    static CACHE: OnceLock<Mutex<HashMap<String, Compiled>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(compiled) = cache.get(pattern) {
        return compiled.clone();
    }
    let compiled = Regex::new(pattern).map(Arc::new).map_err(|e| e.to_string());
    cache.insert(pattern.to_string(), compiled.clone());
    compiled
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value as the API server quotes it in `Invalid value: …`.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => format!("{:?}", json_type(other)),
    }
}

fn num(schema: &Value, key: &str) -> Option<f64> {
    schema.get(key).and_then(Value::as_f64)
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// Removes fields the schema does not declare (unless it preserves unknown
/// fields), recording their paths.
pub fn prune(schema: &Value, value: &mut Value, path: &str, unknown: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if flag(schema, "x-kubernetes-preserve-unknown-fields")
                && schema.get("properties").is_none()
            {
                return;
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let child_path = join(path, &key);
                let child_schema = properties.and_then(|p| p.get(&key)).or(match additional {
                    Some(Value::Bool(_)) | None => None,
                    Some(schema) => Some(schema),
                });
                match child_schema {
                    Some(child_schema) => {
                        if let Some(child) = map.get_mut(&key) {
                            prune(child_schema, child, &child_path, unknown);
                        }
                    }
                    None if additional == Some(&Value::Bool(true)) || preserve => {}
                    // `type: object` without properties (root `metadata`):
                    // validated elsewhere, kept as it is.
                    None if properties.is_none() && additional.is_none() => {}
                    None => {
                        map.remove(&key);
                        unknown.push(child_path);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune(item_schema, item, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

/// The structural part of validation (no CEL, no unknown fields).
pub fn structural(schema: &Value, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    let here = if path.is_empty() { "<root>" } else { path };
    let invalid = |message: String| Cause::new("FieldValueInvalid", here, message);
    let type_invalid = |expected: &str| {
        Cause::new(
            "FieldValueTypeInvalid",
            here,
            format!(
                "Invalid value: {:?}: {here} in body must be of type {expected}: {}",
                json_type(value),
                shown(value)
            ),
        )
    };
    if value.is_null() {
        if !flag(schema, "nullable") {
            let expected = schema
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("object");
            causes.push(type_invalid(expected));
        }
        return;
    }
    let int_or_string = flag(schema, "x-kubernetes-int-or-string");
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let actual = json_type(value);
    if int_or_string {
        if actual != "integer" && actual != "string" {
            causes.push(type_invalid("integer,string"));
            return;
        }
    } else if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        if expected != actual && !(expected == "number" && actual == "integer") {
            causes.push(type_invalid(expected));
            return;
        }
    } else if !preserve && schema.get("anyOf").is_none() {
        causes.push(invalid("schema has no type (not structural)".to_string()));
        return;
    }

    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let allowed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        causes.push(Cause::new(
            "FieldValueNotSupported",
            here,
            format!(
                "Unsupported value: {value}: supported values: {}",
                allowed.join(", ")
            ),
        ));
    }

    match value {
        Value::String(s) => {
            let length = s.chars().count() as f64;
            if let Some(max) = num(schema, "maxLength")
                && length > max
            {
                causes.push(Cause::new(
                    "FieldValueTooLong",
                    here,
                    format!("Too long: may not be more than {max} bytes"),
                ));
            }
            if let Some(min) = num(schema, "minLength")
                && length < min
            {
                causes.push(invalid(format!(
                    "Invalid value: {s:?}: {here} in body should be at least {min} chars long"
                )));
            }
            if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
                match regex(pattern) {
                    Ok(re) if re.is_match(s) => {}
                    Ok(_) => causes.push(invalid(format!(
                        "Invalid value: {s:?}: {here} in body should match '{pattern}'"
                    ))),
                    Err(e) => causes.push(invalid(format!("bad pattern {pattern}: {e}"))),
                }
            }
            if schema.get("format").and_then(Value::as_str) == Some("date-time") {
                let valid =
                    regex(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
                        .is_ok_and(|re| re.is_match(s));
                if !valid {
                    causes.push(invalid(format!(
                        "Invalid value: {s:?}: {here} in body must be of type date-time: {s:?}"
                    )));
                }
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = num(schema, "minimum")
                && x < min
            {
                causes.push(invalid(format!(
                    "Invalid value: {n}: {here} in body should be greater than or equal to {min}"
                )));
            }
            if let Some(max) = num(schema, "maximum")
                && x > max
            {
                causes.push(invalid(format!(
                    "Invalid value: {n}: {here} in body should be less than or equal to {max}"
                )));
            }
        }
        Value::Array(items) => {
            let count = items.len() as f64;
            if let Some(max) = num(schema, "maxItems")
                && count > max
            {
                causes.push(Cause::new(
                    "FieldValueTooMany",
                    here,
                    format!("Too many: {count}: must have at most {max} items"),
                ));
            }
            if let Some(min) = num(schema, "minItems")
                && count < min
            {
                causes.push(invalid(format!(
                    "Invalid value: {count}: {here} in body should have at least {min} items"
                )));
            }
            list_type(schema, items, path, causes);
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    structural(item_schema, item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        Value::Object(map) => {
            let count = map.len() as f64;
            if let Some(max) = num(schema, "maxProperties")
                && count > max
            {
                causes.push(Cause::new(
                    "FieldValueTooMany",
                    here,
                    format!("Too many: {count}: must have at most {max} items"),
                ));
            }
            if let Some(min) = num(schema, "minProperties")
                && count < min
            {
                causes.push(invalid(format!(
                    "Invalid value: {count}: {here} in body should have at least {min} properties"
                )));
            }
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for key in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(key) {
                        causes.push(Cause::new(
                            "FieldValueRequired",
                            join(path, key),
                            "Required value",
                        ));
                    }
                }
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            for (key, child) in map {
                let child_path = join(path, key);
                if let Some(child_schema) = properties.and_then(|p| p.get(key)) {
                    structural(child_schema, child, &child_path, causes);
                } else if let Some(additional) = additional.filter(|a| a.is_object()) {
                    structural(additional, child, &child_path, causes);
                }
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}

/// `x-kubernetes-list-type: set` and `map` uniqueness.
fn list_type(schema: &Value, items: &[Value], path: &str, causes: &mut Vec<Cause>) {
    let here = if path.is_empty() { "<root>" } else { path };
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    causes.push(Cause::new(
                        "FieldValueDuplicate",
                        format!("{here}[{i}]"),
                        format!("Duplicate value: {item}"),
                    ));
                }
            }
        }
        Some("map") => {
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| k.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let key_of = |item: &Value| -> Vec<Value> {
                keys.iter()
                    .map(|k| item.get(*k).cloned().unwrap_or(Value::Null))
                    .collect()
            };
            for (i, item) in items.iter().enumerate() {
                if items[..i]
                    .iter()
                    .any(|earlier| key_of(earlier) == key_of(item))
                {
                    let shown: serde_json::Map<String, Value> = keys
                        .iter()
                        .map(|k| (k.to_string(), item.get(*k).cloned().unwrap_or(Value::Null)))
                        .collect();
                    causes.push(Cause::new(
                        "FieldValueDuplicate",
                        format!("{here}[{i}]"),
                        format!("Duplicate value: {}", Value::Object(shown)),
                    ));
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 10},
                        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                        "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                    },
                    "x-kubernetes-validations": [{"rule": "self.size != 7", "message": "seven is unlucky"}],
                },
            },
        })
    }

    #[test]
    fn admit_prunes_defaults_and_names_each_field() {
        let crd = CrdSchema::new(schema());
        let admitted = crd
            .admit(json!({"metadata": {"name": "x", "anything": 1}, "spec": {"size": 2, "extra": true}}), None, false)
            .unwrap();
        assert_eq!(admitted["spec"], json!({"size": 2, "mode": "a"}));
        assert_eq!(admitted["metadata"]["anything"], 1);

        let Err(Refusal::UnknownFields(unknown)) =
            crd.admit(json!({"spec": {"size": 2, "extra": true}}), None, true)
        else {
            panic!("strict validation must refuse unknown fields");
        };
        assert_eq!(unknown, ["spec.extra"]);

        let Err(Refusal::Invalid(causes)) = crd.admit(
            json!({"spec": {"size": 11, "mode": "c", "name": "ABCDEFG", "tags": ["a", "b", "c"]}}),
            None,
            false,
        ) else {
            panic!("must be invalid");
        };
        let fields: Vec<(&str, &str)> = causes
            .iter()
            .map(|c| (c.field.as_str(), c.reason))
            .collect();
        assert!(
            fields.contains(&("spec.size", "FieldValueInvalid")),
            "{causes:?}"
        );
        assert!(
            fields.contains(&("spec.mode", "FieldValueNotSupported")),
            "{causes:?}"
        );
        assert!(
            fields.contains(&("spec.name", "FieldValueTooLong")),
            "{causes:?}"
        );
        assert!(
            fields.contains(&("spec.tags", "FieldValueTooMany")),
            "{causes:?}"
        );

        let Err(Refusal::Invalid(causes)) = crd.admit(json!({"spec": {"size": 7}}), None, false)
        else {
            panic!("the CEL rule must refuse 7");
        };
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec");
        assert!(causes[0].message.contains("seven is unlucky"), "{causes:?}");

        let Err(Refusal::Invalid(causes)) = crd.admit(json!({"spec": {}}), None, false) else {
            panic!("size is required");
        };
        assert_eq!(causes[0].field, "spec.size");
        assert_eq!(causes[0].message, "Required value");
    }

    /// kube's `apply_defaults`, applied until nothing changes.
    fn kube_defaulted(schema: &Value, object: &Value) -> Value {
        let mut object = object.clone();
        loop {
            let next = kube::core::cel::apply_defaults(schema, &object);
            if next == object {
                return object;
            }
            object = next;
        }
    }

    #[test]
    fn defaults_are_what_kubes_defaulting_gives() {
        let nested = json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "mode": {"type": "string", "default": "a"},
                        "limits": {
                            "type": "object",
                            "default": {"cpu": "1"},
                            "properties": {"cpu": {"type": "string"}, "pods": {"type": "integer", "default": 110}},
                        },
                        "items": {
                            "type": "array",
                            "items": {"type": "object", "properties": {"weight": {"type": "integer", "default": 1}}},
                        },
                        "byName": {
                            "type": "object",
                            "additionalProperties": {"type": "object", "properties": {"on": {"type": "boolean", "default": true}}},
                        },
                        "free": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": true,
                            "additionalProperties": {"type": "object", "properties": {"on": {"type": "boolean", "default": true}}},
                        },
                    },
                },
            },
        });
        let objects = [
            json!({}),
            json!({"spec": {"items": [{}, {"weight": 3}], "byName": {"x": {}, "y": {"on": false}}, "free": {"z": {}}}}),
            json!({"spec": {"mode": "b", "limits": {}}}),
        ];
        for object in &objects {
            assert_eq!(
                defaulted(&nested, object.clone()),
                kube_defaulted(&nested, object)
            );
        }
        let all = defaulted(&nested, objects[1].clone());
        assert_eq!(all["spec"]["limits"], json!({"cpu": "1", "pods": 110}));
        assert_eq!(all["spec"]["items"][0]["weight"], 1);
        assert_eq!(all["spec"]["byName"]["x"]["on"], true);
        assert_eq!(all["spec"]["free"]["z"], json!({}));

        for (kind, dir) in [
            ("NodeClaim", "nodeclaims"),
            ("NodePool", "nodepools"),
            ("EC2NodeClass", "ec2nodeclasses"),
        ] {
            let schema = &crate::fixtures::schema(kind);
            for example in crate::fixtures::examples(dir) {
                assert_eq!(
                    defaulted(schema, example.clone()),
                    kube_defaulted(schema, &example),
                    "{kind}"
                );
            }
        }
    }
}
