//! A test double of the Kubernetes API server, served in process to
//! `kube::Client` as a `tower` service (no sockets): controllers run
//! against it in tests and in simulations exactly as against a cluster.
//!
//! It keeps objects of any kind as JSON and implements what controllers
//! rely on: get, list (label and field selectors), watch from a
//! resourceVersion, create, replace with optimistic concurrency, merge /
//! JSON / apply patches, the `status` subresource, deletion with
//! finalizers, `generation`, and `/version`. It does not implement
//! admission, schema validation, field ownership for server-side apply
//! (an apply patch is merged), eviction or leases.

mod patch;
mod path;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use path::{ResourcePath, Selector};

/// Response bodies: whole JSON documents, or a stream of watch events.
type ResponseBody = UnsyncBoxBody<Bytes, Infallible>;

/// Where an object lives: (group, plural, namespace or "", name).
type Key = (String, String, String, String);

/// One change, as watchers see it.
#[derive(Debug, Clone)]
struct Change {
    resource_version: u64,
    kind: &'static str,
    group: String,
    plural: String,
    namespace: String,
    object: Value,
}

struct State {
    objects: BTreeMap<Key, Value>,
    history: Vec<Change>,
    next_version: u64,
    next_uid: u64,
}

/// The emulated API server. Clones share the same objects.
#[derive(Clone)]
pub struct ApiServer {
    state: Arc<Mutex<State>>,
    changes: broadcast::Sender<Change>,
    version: Arc<(String, String)>,
}

impl Default for ApiServer {
    fn default() -> Self {
        Self::new("1", "34")
    }
}

impl ApiServer {
    /// An empty server that reports Kubernetes `major.minor`.
    pub fn new(major: &str, minor: &str) -> Self {
        let (changes, _) = broadcast::channel(4096);
        ApiServer {
            state: Arc::new(Mutex::new(State {
                objects: BTreeMap::new(),
                history: Vec::new(),
                next_version: 1,
                next_uid: 1,
            })),
            changes,
            version: Arc::new((major.to_string(), minor.to_string())),
        }
    }

    /// A client talking to this server; `default` is its default namespace.
    pub fn client(&self) -> kube::Client {
        let server = self.clone();
        let service = tower::service_fn(move |request: Request<kube::client::Body>| {
            let server = server.clone();
            async move { Ok::<_, Infallible>(server.handle(request).await) }
        });
        kube::Client::new(service, "default")
    }

    /// Serves this API server over plain HTTP/1.1 on `listener`, until the
    /// task running it is dropped: for running the `nodewright` binary
    /// against it through a kubeconfig. Bind to 127.0.0.1 only.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        loop {
            let (stream, _) = listener.accept().await?;
            let server = self.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                        let server = server.clone();
                        async move {
                            let (parts, body) = request.into_parts();
                            let bytes = match body.collect().await {
                                Ok(collected) => collected.to_bytes(),
                                Err(e) => {
                                    return Ok::<_, Infallible>(error(
                                        StatusCode::BAD_REQUEST,
                                        "BadRequest",
                                        &e.to_string(),
                                    ));
                                }
                            };
                            let request =
                                Request::from_parts(parts, kube::client::Body::from(bytes));
                            Ok(server.handle(request).await)
                        }
                    });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "API emulator connection ended");
                }
            });
        }
    }

    /// Every stored object of `group`/`plural` (all namespaces), for test assertions.
    pub fn objects(&self, group: &str, plural: &str) -> Vec<Value> {
        self.lock()
            .objects
            .iter()
            .filter(|((g, p, _, _), _)| g == group && p == plural)
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent data behind:
        // every write is a whole-object insert or remove.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn handle(&self, request: Request<kube::client::Body>) -> Response<ResponseBody> {
        let (parts, body) = request.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) => return error(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string()),
        };
        let path = parts.uri.path();
        if path == "/version" {
            let (major, minor) = &*self.version;
            return json_response(
                StatusCode::OK,
                &json!({
                    "major": major, "minor": minor, "gitVersion": format!("v{major}.{minor}.0"),
                    "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "",
                    "compiler": "", "platform": "linux/amd64",
                }),
            );
        }
        let Some(resource) = ResourcePath::parse(path) else {
            return error(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("no route for {path}"),
            );
        };
        let query = parts.uri.query().unwrap_or_default();
        let params = path::query_params(query);
        let content_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
            .to_string();
        let result = match (&parts.method, &resource.name) {
            (&Method::GET, None) if params.get("watch").is_some_and(|w| w == "true") => {
                return self.watch(&resource, &params);
            }
            (&Method::GET, None) => self.list(&resource, &params),
            (&Method::GET, Some(_)) => self.get(&resource),
            (&Method::POST, None) => self.create(&resource, &body),
            (&Method::PUT, Some(_)) => self.replace(&resource, &body),
            (&Method::PATCH, Some(_)) => self.patch(&resource, &content_type, &body),
            (&Method::DELETE, Some(_)) => self.delete(&resource),
            (method, _) => Err(ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                format!("{method} is not supported on {path}"),
            )),
        };
        match result {
            Ok((status, object)) => json_response(status, &object),
            Err(e) => error(e.status, e.reason, &e.message),
        }
    }

    fn get(&self, resource: &ResourcePath) -> Result<(StatusCode, Value), ApiError> {
        let (_, object) = stored(&self.lock(), resource)?;
        Ok((StatusCode::OK, object))
    }

    fn list(
        &self,
        resource: &ResourcePath,
        params: &BTreeMap<String, String>,
    ) -> Result<(StatusCode, Value), ApiError> {
        let selector = Selector::from_params(params).map_err(bad_request)?;
        let state = self.lock();
        let items: Vec<Value> = state
            .objects
            .iter()
            .filter(|(key, object)| resource.matches(key) && selector.matches(object))
            .map(|(_, object)| object.clone())
            .collect();
        Ok((
            StatusCode::OK,
            json!({
                "apiVersion": resource.api_version(),
                "kind": "List",
                "metadata": {"resourceVersion": (state.next_version - 1).to_string()},
                "items": items,
            }),
        ))
    }

    /// Streams changes after `resourceVersion` (or every current object as
    /// `ADDED` when it is empty or `0`), then live changes, until
    /// `timeoutSeconds` passes.
    fn watch(
        &self,
        resource: &ResourcePath,
        params: &BTreeMap<String, String>,
    ) -> Response<ResponseBody> {
        let selector = match Selector::from_params(params) {
            Ok(selector) => selector,
            Err(e) => return error(StatusCode::BAD_REQUEST, "BadRequest", &e),
        };
        let since: u64 = params
            .get("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let timeout = params
            .get("timeoutSeconds")
            .and_then(|v| v.parse().ok())
            .map_or(Duration::from_secs(300), Duration::from_secs);
        let mut live = self.changes.subscribe();
        let (backlog, mut sent_up_to) = {
            let state = self.lock();
            let backlog: Vec<(&'static str, Value)> = if since == 0 {
                state
                    .objects
                    .iter()
                    .filter(|(key, object)| resource.matches(key) && selector.matches(object))
                    .map(|(_, object)| ("ADDED", object.clone()))
                    .collect()
            } else {
                state
                    .history
                    .iter()
                    .filter(|c| c.resource_version > since && resource.matches_change(c))
                    .filter(|c| selector.matches(&c.object))
                    .map(|c| (c.kind, c.object.clone()))
                    .collect()
            };
            (backlog, state.next_version - 1)
        };
        let resource = resource.clone();
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
        tokio::spawn(async move {
            for (kind, object) in backlog {
                if tx.send(watch_line(kind, &object)).await.is_err() {
                    return;
                }
            }
            let deadline = tokio::time::sleep(timeout);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    _ = &mut deadline => return,
                    change = live.recv() => match change {
                        Ok(change) => {
                            if change.resource_version <= sent_up_to
                                || !resource.matches_change(&change)
                                || !selector.matches(&change.object)
                            {
                                continue;
                            }
                            sent_up_to = change.resource_version;
                            if tx.send(watch_line(change.kind, &change.object)).await.is_err() {
                                return;
                            }
                        }
                        // Fell behind or closed: end the stream; the
                        // client re-lists, as after a real 410.
                        Err(_) => return,
                    },
                }
            }
        });
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|line| (Ok::<_, Infallible>(http_body::Frame::data(line)), rx))
        });
        let mut response = Response::new(StreamBody::new(stream).boxed_unsync());
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    }

    fn create(
        &self,
        resource: &ResourcePath,
        body: &Bytes,
    ) -> Result<(StatusCode, Value), ApiError> {
        let mut object = parse_json(body)?;
        let mut state = self.lock();
        let metadata = object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .ok_or_else(|| bad_request("metadata is required".to_string()))?;
        if metadata.get("name").and_then(Value::as_str).is_none() {
            let prefix = metadata
                .get("generateName")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    bad_request("metadata.name or metadata.generateName is required".to_string())
                })?
                .to_string();
            let n = state.next_uid;
            metadata.insert("name".to_string(), json!(format!("{prefix}{n:05x}")));
        }
        if !resource.namespace.is_empty() {
            metadata.insert("namespace".to_string(), json!(resource.namespace));
        }
        let name = metadata
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let key = resource.key_for(&name);
        if state.objects.contains_key(&key) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "AlreadyExists",
                format!("{} {name:?} already exists", resource.plural),
            ));
        }
        let uid = state.next_uid;
        state.next_uid += 1;
        metadata.insert(
            "uid".to_string(),
            json!(format!("00000000-0000-0000-0000-{uid:012}")),
        );
        metadata.insert("creationTimestamp".to_string(), json!(now()));
        metadata.insert("generation".to_string(), json!(1));
        self.store(&mut state, resource, key, object, "ADDED")
            .map(|stored| (StatusCode::CREATED, stored))
    }

    fn replace(
        &self,
        resource: &ResourcePath,
        body: &Bytes,
    ) -> Result<(StatusCode, Value), ApiError> {
        let new = parse_json(body)?;
        let mut state = self.lock();
        let (key, current) = stored(&state, resource)?;
        check_version(&current, &new)?;
        let updated = resource.apply_write(&current, new);
        self.store(&mut state, resource, key, updated, "MODIFIED")
            .map(|stored| (StatusCode::OK, stored))
    }

    fn patch(
        &self,
        resource: &ResourcePath,
        content_type: &str,
        body: &Bytes,
    ) -> Result<(StatusCode, Value), ApiError> {
        let document = parse_json(body)?;
        let mut state = self.lock();
        let (key, current) = stored(&state, resource)?;
        let mut patched = current.clone();
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media {
            "application/merge-patch+json"
            | "application/apply-patch+yaml"
            | "application/strategic-merge-patch+json" => {
                patch::merge(&mut patched, &document);
            }
            "application/json-patch+json" => {
                patch::json_patch(&mut patched, &document)
                    .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", e))?;
            }
            other => {
                return Err(ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "UnsupportedMediaType",
                    format!("patch type {other} is not supported"),
                ));
            }
        }
        check_version(&current, &patched)?;
        let updated = resource.apply_write(&current, patched);
        self.store(&mut state, resource, key, updated, "MODIFIED")
            .map(|stored| (StatusCode::OK, stored))
    }

    fn delete(&self, resource: &ResourcePath) -> Result<(StatusCode, Value), ApiError> {
        let mut state = self.lock();
        let (key, mut object) = stored(&state, resource)?;
        if has_finalizers(&object) {
            if object.pointer("/metadata/deletionTimestamp").is_none()
                && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
            {
                metadata.insert("deletionTimestamp".to_string(), json!(now()));
            }
            return self
                .store(&mut state, resource, key, object, "MODIFIED")
                .map(|stored| (StatusCode::OK, stored));
        }
        Ok((StatusCode::OK, self.remove(&mut state, resource, &key)))
    }

    /// Stores a write, bumping `resourceVersion` (and `generation` when
    /// anything outside metadata and status changed), or removes the object
    /// when it is being deleted and has no finalizers left.
    fn store(
        &self,
        state: &mut State,
        resource: &ResourcePath,
        key: Key,
        mut object: Value,
        kind: &'static str,
    ) -> Result<Value, ApiError> {
        let previous = state.objects.get(&key);
        if let Some(previous) = previous {
            let generation = previous
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let bumped = if spec_of(previous) != spec_of(&object) {
                generation + 1
            } else {
                generation
            };
            if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.insert("generation".to_string(), json!(bumped));
            }
        }
        if object.pointer("/metadata/deletionTimestamp").is_some() && !has_finalizers(&object) {
            state.objects.insert(key.clone(), object);
            return Ok(self.remove(state, resource, &key));
        }
        let version = state.next_version;
        state.next_version += 1;
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("resourceVersion".to_string(), json!(version.to_string()));
        }
        state.objects.insert(key, object.clone());
        self.record(state, resource, kind, version, object.clone());
        Ok(object)
    }

    fn remove(&self, state: &mut State, resource: &ResourcePath, key: &Key) -> Value {
        let mut object = state.objects.remove(key).unwrap_or(Value::Null);
        let version = state.next_version;
        state.next_version += 1;
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("resourceVersion".to_string(), json!(version.to_string()));
        }
        self.record(state, resource, "DELETED", version, object.clone());
        object
    }

    fn record(
        &self,
        state: &mut State,
        resource: &ResourcePath,
        kind: &'static str,
        version: u64,
        object: Value,
    ) {
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let change = Change {
            resource_version: version,
            kind,
            group: resource.group.clone(),
            plural: resource.plural.clone(),
            namespace,
            object,
        };
        state.history.push(change.clone());
        // No receivers is fine: nobody is watching.
        let _ = self.changes.send(change);
    }
}

/// The named object and its key, or NotFound.
fn stored(state: &State, resource: &ResourcePath) -> Result<(Key, Value), ApiError> {
    let key = resource.key();
    let object = state
        .objects
        .get(&key)
        .cloned()
        .ok_or_else(|| not_found(resource))?;
    Ok((key, object))
}

/// Optimistic concurrency: a write that names a resourceVersion (a PUT
/// body, or a patch that sets one) must name the stored one.
fn check_version(current: &Value, written: &Value) -> Result<(), ApiError> {
    let version = |object: &Value| {
        object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (given, stored) = (version(written), version(current));
    if given.is_empty() || given == stored {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::CONFLICT,
        "Conflict",
        format!(
            "the object has been modified; please apply your changes to the latest version (resourceVersion {given} is not {stored})"
        ),
    ))
}

/// A request body as JSON, or BadRequest.
fn parse_json(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| bad_request(e.to_string()))
}

/// Everything but metadata and status: what `generation` counts.
fn spec_of(object: &Value) -> Value {
    match object {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "metadata" && k.as_str() != "status")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn has_finalizers(object: &Value) -> bool {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

/// The current time as the API server writes timestamps (whole seconds).
fn now() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    k8s_openapi::jiff::Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}

fn watch_line(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// An API error with its HTTP status and Kubernetes reason.
struct ApiError {
    status: StatusCode,
    reason: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, reason: &'static str, message: String) -> Self {
        ApiError {
            status,
            reason,
            message,
        }
    }
}

fn not_found(resource: &ResourcePath) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!(
            "{} {:?} not found",
            resource.plural,
            resource.name.as_deref().unwrap_or_default()
        ),
    )
}

fn bad_request(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "BadRequest", message)
}

fn json_response(status: StatusCode, value: &Value) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())).boxed_unsync());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn error(status: StatusCode, reason: &str, message: &str) -> Response<ResponseBody> {
    json_response(
        status,
        &json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason, "code": status.as_u16(),
        }),
    )
}
