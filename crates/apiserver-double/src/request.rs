//! The vocabulary every verb handler shares: what a request asked for
//! ([`Context`]: method, query parameters, response [`Shape`], field
//! manager, body, write and delete options) and how an answer is shaped and
//! written (served objects, Tables, metadata, JSON and Status responses).

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use super::error::ApiError;
use super::resources::ResourceDef;
use super::table::IncludeObject;
use super::write::{DeleteOptions, Propagation, WriteOptions};
use super::{ResponseBody, events};

/// How a read answers: plain objects, a Table, or metadata only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Object,
    Table(IncludeObject),
    Metadata,
}

impl Shape {
    pub fn from_accept(accept: &str, params: &BTreeMap<String, String>) -> Self {
        for range in accept.split(',') {
            let parts: Vec<&str> = range.split(';').map(str::trim).collect();
            let has = |p: &str| parts.contains(&p);
            if has("as=Table") && has("g=meta.k8s.io") {
                return Shape::Table(IncludeObject::from_param(
                    params.get("includeObject").map(String::as_str),
                ));
            }
            if (has("as=PartialObjectMetadata") || has("as=PartialObjectMetadataList"))
                && has("g=meta.k8s.io")
            {
                return Shape::Metadata;
            }
            if parts
                .first()
                .is_some_and(|m| *m == "application/json" || *m == "*/*")
            {
                return Shape::Object;
            }
        }
        Shape::Object
    }
}

/// A stored object as `def` serves it (its apiVersion; Events renamed).
pub fn output(def: &ResourceDef, object: &Value) -> Value {
    if def.is_event_alias() {
        return events::from_core(object);
    }
    let mut object = object.clone();
    if object.is_object() {
        object["apiVersion"] = json!(def.api_version());
    }
    object
}

/// An object shaped as the request asked, serialized; plain objects
/// whose apiVersion is already the served one are written without a copy.
pub fn shaped_text(def: &ResourceDef, object: &Value, shape: Shape) -> String {
    let served =
        object.get("apiVersion").and_then(Value::as_str) == Some(def.api_version().as_str());
    if shape == Shape::Object && served && !def.is_event_alias() {
        object.to_string()
    } else {
        shaped(def, object, shape).to_string()
    }
}

/// An object shaped as the request asked.
pub fn shaped(def: &ResourceDef, object: &Value, shape: Shape) -> Value {
    match shape {
        Shape::Object => output(def, object),
        Shape::Metadata => json!({
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": object.get("metadata").cloned().unwrap_or(json!({})),
        }),
        Shape::Table(include) => {
            let metadata =
                json!({"resourceVersion": super::meta::text(object, "/metadata/resourceVersion")});
            super::table::table(def, &[output(def, object)], metadata, include)
        }
    }
}

pub fn json_response_with_type(
    status: StatusCode,
    value: &Value,
    content_type: &str,
) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())).boxed_unsync());
    *response.status_mut() = status;
    if let Ok(value) = http::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}

/// A 200 response of already serialized JSON.
pub fn text_json_response(text: String) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed_unsync());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

pub fn json_response(status: StatusCode, value: &Value) -> Response<ResponseBody> {
    json_response_with_type(status, value, "application/json")
}

/// A Status response; one asking the client to wait (`retryAfterSeconds`)
/// also carries the `Retry-After` header, as kube-apiserver writes it.
pub fn error_response(error: &ApiError) -> Response<ResponseBody> {
    let mut response = json_response(error.status, &error.to_status());
    let retry_after = error
        .details
        .as_ref()
        .and_then(|d| d.get("retryAfterSeconds"))
        .and_then(Value::as_u64)
        .filter(|seconds| *seconds > 0);
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
    }
    response
}

pub fn text_response(status: StatusCode, text: &str) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_string())).boxed_unsync());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// What a request asked for beyond its path.
pub struct Context {
    pub method: Method,
    pub params: BTreeMap<String, String>,
    pub shape: Shape,
    pub content_type: String,
    pub manager: String,
    pub body: Bytes,
}

impl Context {
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    pub fn dry_run(&self) -> bool {
        self.param("dryRun").is_some_and(|d| d == "All")
    }

    pub fn write_options(&self) -> WriteOptions {
        WriteOptions {
            manager: self.manager.clone(),
            dry_run: self.dry_run(),
            strict: self.param("fieldValidation") == Some("Strict"),
            applied: false,
        }
    }

    /// The request body as JSON (YAML for apply patches).
    pub fn body_json(&self) -> Result<Value, ApiError> {
        if self.content_type.contains("protobuf") {
            return super::protobuf::decode(&self.body).map_err(|e| {
                ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "UnsupportedMediaType",
                    format!("the protobuf body could not be decoded: {e}; send JSON instead"),
                )
            });
        }
        match serde_json::from_slice(&self.body) {
            Ok(value) => Ok(value),
            Err(json_error) if self.content_type.contains("yaml") => {
                let text = std::str::from_utf8(&self.body)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?;
                crate::yaml::to_json(text)
                    .map_err(|e| ApiError::bad_request(format!("{json_error}; as YAML: {e}")))
            }
            Err(e) => Err(ApiError::bad_request(format!(
                "the request body is not valid JSON: {e}"
            ))),
        }
    }

    /// DeleteOptions from the query and the body.
    pub fn delete_options(&self) -> Result<DeleteOptions, ApiError> {
        let body: Value = if self.body.is_empty() {
            json!({})
        } else {
            self.body_json()?
        };
        let policy = self
            .param("propagationPolicy")
            .map(str::to_string)
            .or_else(|| {
                body.get("propagationPolicy")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .or_else(
                || match body.get("orphanDependents").and_then(Value::as_bool) {
                    Some(true) => Some("Orphan".into()),
                    _ => None,
                },
            );
        let propagation = match policy.as_deref() {
            None | Some("Background") => Propagation::Background,
            Some("Foreground") => Propagation::Foreground,
            Some("Orphan") => Propagation::Orphan,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "propagationPolicy {other:?} is not one of Background, Foreground, Orphan"
                )));
            }
        };
        let precondition = |key: &str| {
            body.pointer(&format!("/preconditions/{key}"))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let dry_run = self.dry_run()
            || body
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|d| !d.is_empty());
        Ok(DeleteOptions {
            propagation,
            uid: precondition("uid"),
            resource_version: precondition("resourceVersion"),
            dry_run,
        })
    }
}

/// The field manager of a request: `fieldManager`, else the user agent's name.
pub fn manager(params: &BTreeMap<String, String>, headers: &http::HeaderMap) -> String {
    if let Some(manager) = params.get("fieldManager").filter(|m| !m.is_empty()) {
        return manager.clone();
    }
    headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split('/').next())
        .filter(|name| !name.is_empty())
        .unwrap_or("unknown")
        .to_string()
}
