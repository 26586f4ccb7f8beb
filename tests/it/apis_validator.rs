//! Test support: validates an object against a CRD's structural OpenAPI v3
//! schema the way the API server would (types, required, enum, pattern,
//! bounds, unknown fields, preserve-unknown-fields, int-or-string, list
//! types), after applying schema defaults, and then evaluates the CEL
//! `x-kubernetes-validations` rules with kube's client-side CEL evaluator.
//!
//! Every error is `"<field path>: <message>"`.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use kube::core::cel::{Validator, apply_defaults};
use regex::Regex;
use serde_json::Value;

/// Structural + CEL validation of `object` against `schema` (an `openAPIV3Schema` as JSON).
/// `old` enables transition rules (`oldSelf`).
pub fn validate(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<String> {
    let defaulted = apply_defaults(schema, object);
    let mut errors = Vec::new();
    structural(schema, &defaulted, "", &mut errors);
    if let Err(cel_errors) = Validator::new().validate(schema, object, old) {
        for error in cel_errors.iter() {
            errors.push(error.to_string());
        }
    }
    errors
}

fn regex(pattern: &str) -> Result<Regex, String> {
    static CACHE: OnceLock<Mutex<HashMap<String, Result<Regex, String>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = cache.lock().unwrap();
    cache
        .entry(pattern.to_string())
        .or_insert_with(|| Regex::new(pattern).map_err(|e| e.to_string()))
        .clone()
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn type_name(value: &Value) -> &'static str {
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

fn num(schema: &Value, key: &str) -> Option<f64> {
    schema.get(key).and_then(Value::as_f64)
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// The structural part of validation (no CEL).
pub fn structural(schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    let here = if path.is_empty() { "<root>" } else { path };
    if value.is_null() {
        if !flag(schema, "nullable") {
            errors.push(format!("{here}: must not be null"));
        }
        return;
    }
    let int_or_string = flag(schema, "x-kubernetes-int-or-string");
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let actual = type_name(value);
    if int_or_string {
        if actual != "integer" && actual != "string" {
            errors.push(format!(
                "{here}: must be an integer or a string, got {actual}"
            ));
            return;
        }
    } else if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        let ok = expected == actual || (expected == "number" && actual == "integer");
        if !ok {
            errors.push(format!("{here}: must be of type {expected}, got {actual}"));
            return;
        }
    } else if !preserve && schema.get("anyOf").is_none() {
        // Structural schemas always carry a type unless they preserve unknown fields.
        errors.push(format!("{here}: schema has no type (not structural)"));
        return;
    }

    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let allowed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        errors.push(format!(
            "{here}: unsupported value {value}; supported values: {}",
            allowed.join(", ")
        ));
    }

    match value {
        Value::String(s) => {
            let length = s.chars().count() as f64;
            if let Some(max) = num(schema, "maxLength")
                && length > max
            {
                errors.push(format!("{here}: may not be longer than {max} characters"));
            }
            if let Some(min) = num(schema, "minLength")
                && length < min
            {
                errors.push(format!("{here}: must be at least {min} characters long"));
            }
            if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
                match regex(pattern) {
                    Ok(re) if re.is_match(s) => {}
                    Ok(_) => errors.push(format!("{here}: {s:?} does not match pattern {pattern}")),
                    Err(e) => errors.push(format!("{here}: bad pattern {pattern}: {e}")),
                }
            }
            if schema.get("format").and_then(Value::as_str) == Some("date-time") {
                let re = regex(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
                    .unwrap();
                if !re.is_match(s) {
                    errors.push(format!("{here}: {s:?} is not an RFC 3339 date-time"));
                }
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = num(schema, "minimum")
                && x < min
            {
                errors.push(format!("{here}: must be greater than or equal to {min}"));
            }
            if let Some(max) = num(schema, "maximum")
                && x > max
            {
                errors.push(format!("{here}: must be less than or equal to {max}"));
            }
        }
        Value::Array(items) => {
            let count = items.len() as f64;
            if let Some(max) = num(schema, "maxItems")
                && count > max
            {
                errors.push(format!("{here}: must have at most {max} items"));
            }
            if let Some(min) = num(schema, "minItems")
                && count < min
            {
                errors.push(format!("{here}: must have at least {min} items"));
            }
            match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => {
                    for (i, item) in items.iter().enumerate() {
                        if items[..i].contains(item) {
                            errors.push(format!("{here}[{i}]: duplicate value {item}"));
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
                            errors.push(format!("{here}[{i}]: duplicate entry for keys {keys:?}"));
                        }
                    }
                }
                _ => {}
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    structural(item_schema, item, &format!("{path}[{i}]"), errors);
                }
            }
        }
        Value::Object(map) => {
            let count = map.len() as f64;
            if let Some(max) = num(schema, "maxProperties")
                && count > max
            {
                errors.push(format!("{here}: must have at most {max} entries"));
            }
            if let Some(min) = num(schema, "minProperties")
                && count < min
            {
                errors.push(format!("{here}: must have at least {min} entries"));
            }
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for key in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(key) {
                        errors.push(format!("{}: Required value", join(path, key)));
                    }
                }
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            for (key, child) in map {
                let child_path = join(path, key);
                if let Some(child_schema) = properties.and_then(|p| p.get(key)) {
                    structural(child_schema, child, &child_path, errors);
                } else if let Some(additional) = additional {
                    match additional {
                        Value::Bool(true) => {}
                        Value::Bool(false) => {
                            errors.push(format!("{child_path}: field not declared in schema"))
                        }
                        additional_schema => {
                            structural(additional_schema, child, &child_path, errors)
                        }
                    }
                } else if preserve {
                    // Unknown fields are kept as they are.
                } else if properties.is_none() {
                    // `type: object` with no properties (root `metadata`): the API server
                    // validates it separately.
                } else {
                    errors.push(format!("{child_path}: field not declared in schema"));
                }
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}
