//! Typed reads of the fields of a JSON object, with path-naming errors.
//!
//! EventBridge events are read field by field rather than through derived
//! deserializers so that every error names the JSON path of the field at
//! fault, and so that an array is never accepted where an object is required.

use serde_json::{Map, Value};

use crate::error::{FieldError, FieldProblem, JsonType};

/// A JSON object together with its path from the root of the body.
#[derive(Debug, Clone)]
pub(crate) struct Fields<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

impl<'a> Fields<'a> {
    /// The root object of a message body.
    pub(crate) fn root(map: &'a Map<String, Value>) -> Self {
        Self {
            map,
            path: String::new(),
        }
    }

    /// The path of `key` in this object.
    pub(crate) fn path_of(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The value of `key`, treating `null` as absent (as EventBridge
    /// consumers conventionally do).
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|value| !value.is_null())
    }

    /// A string field that must be present.
    pub(crate) fn required_str(&self, key: &str) -> Result<&'a str, FieldError> {
        match self.map.get(key) {
            None => Err(self.error(key, FieldProblem::Missing)),
            Some(value) => self.as_str(key, value),
        }
    }

    /// A string field that must be present and non-empty, such as an
    /// instance ID.
    pub(crate) fn required_id(&self, key: &str) -> Result<&'a str, FieldError> {
        let value = self.required_str(key)?;
        if value.is_empty() {
            return Err(self.error(key, FieldProblem::Empty));
        }
        Ok(value)
    }

    /// A string field that may be absent or `null`.
    pub(crate) fn optional_str(&self, key: &str) -> Result<Option<&'a str>, FieldError> {
        self.get(key)
            .map(|value| self.as_str(key, value))
            .transpose()
    }

    /// An array field; absent or `null` reads as empty.
    pub(crate) fn optional_array(&self, key: &str) -> Result<&'a [Value], FieldError> {
        match self.get(key) {
            None => Ok(&[]),
            Some(Value::Array(items)) => Ok(items),
            Some(other) => Err(self.wrong_type(key, JsonType::Array, other)),
        }
    }

    /// An object field that must be present.
    pub(crate) fn required_object(&self, key: &str) -> Result<Fields<'a>, FieldError> {
        match self.map.get(key) {
            None => Err(self.error(key, FieldProblem::Missing)),
            Some(value) => Self::object(self.path_of(key), value),
        }
    }

    /// `value`, found at `path`, as an object.
    pub(crate) fn object(path: String, value: &'a Value) -> Result<Fields<'a>, FieldError> {
        match value {
            Value::Object(map) => Ok(Fields { map, path }),
            other => Err(FieldError {
                path,
                problem: FieldProblem::WrongType {
                    expected: JsonType::Object,
                    found: JsonType::of(other),
                },
            }),
        }
    }

    /// `value`, found at `path`, as a string.
    pub(crate) fn string(path: String, value: &'a Value) -> Result<&'a str, FieldError> {
        match value {
            Value::String(text) => Ok(text),
            other => Err(FieldError {
                path,
                problem: FieldProblem::WrongType {
                    expected: JsonType::String,
                    found: JsonType::of(other),
                },
            }),
        }
    }

    /// An error about `key` in this object.
    pub(crate) fn error(&self, key: &str, problem: FieldProblem) -> FieldError {
        FieldError {
            path: self.path_of(key),
            problem,
        }
    }

    fn as_str(&self, key: &str, value: &'a Value) -> Result<&'a str, FieldError> {
        Self::string(self.path_of(key), value)
    }

    fn wrong_type(&self, key: &str, expected: JsonType, found: &Value) -> FieldError {
        self.error(
            key,
            FieldProblem::WrongType {
                expected,
                found: JsonType::of(found),
            },
        )
    }
}
