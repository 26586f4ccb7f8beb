//! API errors in the shape the Kubernetes API server gives them: a
//! `meta.k8s.io/v1` `Status` with its HTTP code, reason, message and, where
//! the real server sets them, `details` (name, group, kind, causes).

use http::StatusCode;
use serde_json::{Value, json};

use super::resources::ResourceDef;

/// One field-level cause of an `Invalid` (422) error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`, …
    pub reason: &'static str,
    /// The message without the field path (`Required value`).
    pub message: String,
    /// The field path (`spec.template.spec.requirements[0].operator`).
    pub field: String,
}

impl Cause {
    /// A cause naming `field`.
    pub fn new(reason: &'static str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Cause {
            reason,
            message: message.into(),
            field: field.into(),
        }
    }
}

/// An API error with its HTTP status, Kubernetes reason and details.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    /// Empty for the few errors the real server sends without a reason.
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// `<plural>[.<group>] "<name>" not found`.
    pub fn not_found(def: &ResourceDef, name: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{} {name:?} not found", def.group_resource()),
        )
        .with_details(json!({"name": name, "group": def.group, "kind": def.plural}))
    }

    /// A namespace that does not exist.
    pub fn namespace_not_found(namespace: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("namespaces {namespace:?} not found"),
        )
        .with_details(json!({"name": namespace, "kind": "namespaces"}))
    }

    /// A path the server does not serve.
    pub fn no_route() -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]}))
    }

    /// `<plural>[.<group>] "<name>" already exists`.
    pub fn already_exists(def: &ResourceDef, name: &str) -> Self {
        ApiError::new(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!("{} {name:?} already exists", def.group_resource()),
        )
        .with_details(json!({"name": name, "group": def.group, "kind": def.plural}))
    }

    /// Optimistic concurrency failed: the write named an old resourceVersion.
    pub fn conflict(def: &ResourceDef, name: &str, why: &str) -> Self {
        ApiError::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {name:?}: {why}",
                def.group_resource()
            ),
        )
        .with_details(json!({"name": name, "group": def.group, "kind": def.plural}))
    }

    /// The stale-write conflict every client retries on.
    pub fn modified(def: &ResourceDef, name: &str) -> Self {
        Self::conflict(
            def,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// `<Kind>.<group> "<name>" is invalid: <field>: <message>` with one cause per field.
    pub fn invalid(def: &ResourceDef, name: &str, causes: Vec<Cause>) -> Self {
        let listed: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let summary = match listed.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let kind = if def.group.is_empty() {
            def.kind.clone()
        } else {
            format!("{}.{}", def.kind, def.group)
        };
        let causes: Vec<Value> = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            format!("{kind} {name:?} is invalid: {summary}"),
        )
        .with_details(json!({"name": name, "group": def.group, "kind": def.kind, "causes": causes}))
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", message)
    }

    /// `410 Gone` with reason `Expired`: a resourceVersion or continue token
    /// older than the kept history.
    pub fn expired(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::GONE, "Expired", message)
    }

    /// `429` with a retry hint and causes, as eviction refusals are.
    /// `429`; as kube-apiserver, a `retryAfterSeconds` of 0 is left out
    /// (and so is the `Retry-After` header).
    pub fn too_many_requests(message: &str, retry_after: u32, causes: Vec<Value>) -> Self {
        let mut details = json!({"causes": causes});
        if retry_after > 0 {
            details["retryAfterSeconds"] = json!(retry_after);
        }
        ApiError::new(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", message)
            .with_details(details)
    }

    pub fn forbidden(def: &ResourceDef, name: &str, why: &str) -> Self {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "Forbidden",
            format!("{} {name:?} is forbidden: {why}", def.group_resource()),
        )
        .with_details(json!({"name": name, "group": def.group, "kind": def.plural}))
    }

    /// The `meta.k8s.io/v1` Status body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "code": self.status.as_u16(),
        });
        if !self.reason.is_empty() {
            status["reason"] = json!(self.reason);
        }
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

/// A `Status` with `status: Success`, as deletes of collections and
/// evictions answer.
pub fn success_status() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
}
