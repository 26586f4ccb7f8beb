//! What can be wrong with a message body.

use std::fmt;

use serde_json::Value;

/// Why a message body could not be read as an EventBridge event.
///
/// Returned inside [`Parsed::Malformed`](crate::Parsed::Malformed). The
/// `Display` text names the offending field by its JSON path, so it can be
/// logged as is.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The body is empty or only whitespace.
    #[error("message body is empty")]
    Empty,
    /// The body is not valid JSON.
    #[error("message body is not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// The body is valid JSON but not an object.
    #[error("message body is {found}, not a JSON object")]
    NotAnObject {
        /// What the body is instead.
        found: JsonType,
    },
    /// A field of the EventBridge envelope is missing or invalid.
    #[error("invalid EventBridge envelope: {0}")]
    Envelope(#[source] FieldError),
    /// A field of the `detail` of a handled event is missing or invalid.
    #[error("invalid {detail_type:?} event: {error}")]
    Detail {
        /// The envelope's `detail-type`.
        detail_type: String,
        /// The offending field.
        #[source]
        error: FieldError,
    },
}

/// A field that is missing or holds the wrong kind of value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{path}` {problem}")]
pub struct FieldError {
    /// JSON path of the field, e.g. `detail.affectedEntities[0].entityValue`.
    pub path: String,
    /// What is wrong with it.
    pub problem: FieldProblem,
}

/// What is wrong with a field; see [`FieldError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldProblem {
    /// The field is absent.
    Missing,
    /// The field holds a value of another JSON type.
    WrongType {
        /// The JSON type the field must have.
        expected: JsonType,
        /// The JSON type it has.
        found: JsonType,
    },
    /// The field is an empty string where an identifier is required.
    Empty,
    /// The field is a string but not a timestamp in the expected format.
    InvalidTimestamp {
        /// The string as received.
        value: String,
        /// Why it could not be read.
        reason: String,
    },
}

impl fmt::Display for FieldProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing => f.write_str("is missing"),
            Self::WrongType { expected, found } => {
                write!(f, "must be {expected}, found {found}")
            }
            Self::Empty => f.write_str("is empty"),
            Self::InvalidTimestamp { value, reason } => {
                write!(f, "is not an RFC 3339 timestamp ({value:?}): {reason}")
            }
        }
    }
}

/// The type of a JSON value, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JsonType {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool,
    /// A number.
    Number,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

impl JsonType {
    /// The type of `value`.
    pub fn of(value: &Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(_) => Self::Bool,
            Value::Number(_) => Self::Number,
            Value::String(_) => Self::String,
            Value::Array(_) => Self::Array,
            Value::Object(_) => Self::Object,
        }
    }
}

impl fmt::Display for JsonType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Null => "null",
            Self::Bool => "a boolean",
            Self::Number => "a number",
            Self::String => "a string",
            Self::Array => "an array",
            Self::Object => "an object",
        })
    }
}
