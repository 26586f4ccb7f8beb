//! A **test double** of the Kubernetes API server, and the engine of
//! `nodewright sandbox` (this crate lives in the nodewright workspace as
//! `crates/apiserver-double`): objects live in memory, served to `kube::Client`
//! in process as a `tower` service ([`ApiServer::client`]) or over plain
//! HTTP on 127.0.0.1 ([`ApiServer::serve`]) so that the real `kubectl`
//! (1.32) and the `nodewright` binary work against it through a
//! kubeconfig. It is not a Kubernetes distribution: no admission webhooks,
//! no etcd, one process, and authentication only by the tokens it issues.
//!
//! # What it implements
//!
//! - **Resources with their real scopes, short names and categories**:
//!   Pods (`status`, `binding`, `eviction`), Nodes, Namespaces, Events
//!   (core and `events.k8s.io/v1`, one storage), ConfigMaps, Secrets,
//!   ServiceAccounts, Services, PersistentVolumeClaims, PersistentVolumes,
//!   Deployments, ReplicaSets, StatefulSets (`scale`), DaemonSets, Jobs,
//!   PodDisruptionBudgets, Leases, StorageClasses, CSINodes,
//!   PriorityClasses, ClusterRoles, ClusterRoleBindings, Roles and
//!   RoleBindings,
//!   CustomResourceDefinitions, and the CRDs the caller
//!   installs at start ([`ApiServerBuilder::crds`]: nodewright passes its
//!   NodePool with `scale`, NodeClaim and EC2NodeClass); more CRDs can be
//!   created through the API. Unknown resources are 404.
//! - **Discovery**: `/api`, `/apis`, the per-version resource lists and the
//!   aggregated `apidiscovery.k8s.io/v2` format; `/version`.
//! - **Reads**: get; list with label selectors (equality and set-based),
//!   field selectors on any field path, `limit`/`continue` pagination over
//!   a consistent snapshot, and `resourceVersionMatch=Exact`; Table output
//!   (CRD printer columns, the real printers' columns for built-in kinds)
//!   and `PartialObjectMetadata`.
//! - **Watch** from a resourceVersion, with label/field selectors (objects
//!   leaving a selector are reported `DELETED`), `BOOKMARK` events
//!   (`allowWatchBookmarks`), streaming lists (`sendInitialEvents`), and
//!   `410 Gone` (reason `Expired`) when the resourceVersion is older than
//!   the kept history ([`ApiServerBuilder::history`]).
//! - **Writes**: create (`generateName`, uids, timestamps, namespace
//!   existence), update with optimistic concurrency (409 on a stale
//!   resourceVersion; unchanged writes are no-ops), JSON / merge /
//!   strategic merge patches (the last refused for custom resources, as
//!   the real server does), server-side apply with field ownership
//!   ([`apply`](self) module: leaf fields, atomic lists, conflicts and
//!   `force`), the `status` subresource, `generation`, `dryRun=All`,
//!   `fieldValidation=Strict`.
//! - **Deletion**: finalizers and `deletionTimestamp` (pods and nodes
//!   too), preconditions, `propagationPolicy` Background (default),
//!   Foreground and Orphan, garbage collection through owner references,
//!   namespace termination, deletion of pods bound to a removed node.
//! - **Validation of custom resources** against the CRD schema (types,
//!   enums, required, patterns, bounds, list types) and its CEL rules,
//!   with schema defaults applied and unknown fields pruned, answered
//!   with the real 422 `Invalid` Status naming each field. Built-in kinds
//!   get their common defaults and a few basic checks only.
//! - **Controllers of the control plane** ([`workloads`](self) module):
//!   Deployments, ReplicaSets, StatefulSets, Jobs and DaemonSets create
//!   their pods (Pending, unbound); `scale` works; PodDisruptionBudget
//!   status is kept current, and `pods/eviction` honours budgets exactly
//!   as the real server does (429 when exhausted, 500 for several
//!   budgets); `pods/binding` sets `spec.nodeName`.
//!
//! - **RBAC for ServiceAccounts** ([`authz`](self) module): a request with a
//!   token from [`ApiServer::service_account_token`] is authorized by the
//!   rules bound to that ServiceAccount and refused with the real 403;
//!   requests without a token act as a cluster admin.
//! - **Faults on demand** ([`faults`] module): a seeded plan of errors per
//!   verb (500, 409, 429 with `Retry-After`, 504 after the write), dropped
//!   and expired watches and slow responses, for the requests it targets
//!   ([`ApiServerBuilder::faults`], [`ApiServer::set_faults`],
//!   [`ApiServer::fault_counts`]).
//!
//! # What it does not implement
//!
//! Other authentication (certificates, users, groups), aggregated
//! ClusterRoles, impersonation, admission webhooks and most admission plugins,
//! full validation of built-in kinds, protobuf responses (protobuf request
//! bodies of the served kinds are decoded), OpenAPI v2 and schemas of
//! built-in kinds in OpenAPI v3 (only what kubectl needs is served), graceful
//! pod termination (a deleted pod without finalizers disappears at once:
//! there is no kubelet to confirm it), `pods/log`, `exec` and
//! port-forwarding, API versions other than the ones listed (no
//! conversion), rolling-update pacing, and the scheduler and kubelet
//! themselves (`sandbox` adds stand-ins for both).

mod apply;
mod authz;
mod builtin;
mod cel;
mod control;
mod discovery;
mod disruption;
mod error;
mod events;
mod expiry;
pub mod faults;
#[cfg(test)]
mod fixtures;
mod gc;
mod jsonpath;
mod meta;
mod openapi;
mod patch;
mod path;
mod printers;
mod protobuf;
mod request;
mod resources;
mod router;
mod selector;
mod store;
mod strategic;
mod subresources;
mod table;
pub mod validation;
mod verbs;
mod watch;
mod workloads;
mod write;
mod yaml;
pub use yaml::reading_options as yaml_reading_options;

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

pub use authz::{AuthorizationReport, Denial, RuleRef, ServiceAccount, UnusedRule};
pub use faults::{FaultCounts, Faults};
use resources::Registry;
use store::Store;
use write::WriteOptions;

/// Response bodies: whole JSON documents, or a stream of watch events.
type ResponseBody = UnsyncBoxBody<Bytes, Infallible>;

/// Settings of a double.
#[derive(Debug, Clone)]
struct Options {
    validate_custom_resources: bool,
    workload_controllers: bool,
    bookmark_interval: Duration,
    event_ttl: Duration,
}

/// Everything behind the lock.
struct State {
    store: Store,
    registry: Registry,
    options: Options,
    authz: authz::Authorization,
    expiry: expiry::EventExpiry,
}

struct Inner {
    state: Mutex<State>,
    /// The latest resourceVersion, for watches to wake on.
    version: tokio::sync::watch::Sender<u64>,
    kubernetes_version: (String, String),
    bookmark_interval: Duration,
    /// The fault plan in force; its own lock, so drawing a fault never
    /// waits on the objects.
    faults: Mutex<faults::Injector>,
}

/// The API server double. Clones share the same objects.
#[derive(Clone)]
pub struct ApiServer {
    inner: Arc<Inner>,
}

/// Settings for an [`ApiServer`].
#[derive(Debug, Clone)]
pub struct ApiServerBuilder {
    major: String,
    minor: String,
    history: usize,
    options: Options,
    /// CRDs installed at start, as JSON objects.
    crds: Vec<Value>,
    faults: Faults,
}

impl ApiServerBuilder {
    /// The Kubernetes version `/version` reports (default 1.34).
    pub fn kubernetes_version(mut self, major: &str, minor: &str) -> Self {
        self.major = major.to_string();
        self.minor = minor.to_string();
        self
    }

    /// How many changes are kept for watches and paginated lists (default
    /// 20,000); older resourceVersions get `410 Gone`.
    pub fn history(mut self, changes: usize) -> Self {
        self.history = changes;
        self
    }

    /// How long an Event is kept after its last write (default one hour,
    /// as kube-apiserver's `--event-ttl`); expired Events are deleted at
    /// the next write.
    pub fn event_ttl(mut self, ttl: Duration) -> Self {
        self.options.event_ttl = ttl;
        self
    }

    /// How often an idle watch with `allowWatchBookmarks` gets a BOOKMARK (default 5 s).
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.options.bookmark_interval = interval;
        self
    }

    /// Whether custom resources are validated against their CRD schema
    /// (default on). Off lets a test store objects a real server would
    /// refuse, to check how controllers treat them.
    pub fn validate_custom_resources(mut self, on: bool) -> Self {
        self.options.validate_custom_resources = on;
        self
    }

    /// Whether the workload controllers run (default on). Off leaves
    /// Deployments and the like without pods.
    pub fn workload_controllers(mut self, on: bool) -> Self {
        self.options.workload_controllers = on;
        self
    }

    /// The faults the server injects from the start (default none); see
    /// [`faults`] and [`ApiServer::set_faults`].
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// CustomResourceDefinitions installed when the server starts (default
    /// none), so that a caller's custom resources are served from the first
    /// request: the double knows no API of its own beyond the built-in kinds.
    /// A definition that does not serialize is logged and left out.
    pub fn crds(mut self, crds: impl IntoIterator<Item = CustomResourceDefinition>) -> Self {
        for crd in crds {
            match serde_json::to_value(&crd) {
                Ok(value) => self.crds.push(value),
                Err(e) => {
                    tracing::error!(error = %e, "API server double: a CRD does not serialize");
                }
            }
        }
        self
    }

    /// The server, with the CRDs given to [`crds`](Self::crds) and the
    /// standard namespaces.
    pub fn build(self) -> ApiServer {
        let (version, _) = tokio::sync::watch::channel(0);
        let mut state = State {
            store: Store::new(self.history),
            registry: Registry::builtin(),
            options: self.options.clone(),
            authz: authz::Authorization::default(),
            expiry: expiry::EventExpiry::new(self.options.event_ttl),
        };
        state.seed(self.crds);
        let _ = version.send_replace(state.store.current_version());
        ApiServer {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                version,
                kubernetes_version: (self.major, self.minor),
                bookmark_interval: self.options.bookmark_interval,
                faults: Mutex::new(faults::Injector::new(self.faults)),
            }),
        }
    }
}

impl State {
    /// The caller's CRDs and the namespaces every cluster has.
    fn seed(&mut self, crds: Vec<Value>) {
        let options = WriteOptions::controller("nodewright");
        if let Some(crd_def) =
            self.registry
                .lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        {
            for crd in crds {
                if let Err(e) = self.create(&crd_def, "", crd, &options) {
                    tracing::error!(error = %e.message, "API server double: a CRD given at start does not install");
                }
            }
        }
        if let Some(ns_def) = self.registry.lookup("", "v1", "namespaces") {
            for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
                let namespace =
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
                if let Err(e) = self.create(&ns_def, "", namespace, &options) {
                    tracing::error!(error = %e.message, "API server double: namespace {name} not created");
                }
            }
        }
        self.settle();
    }
}

impl Default for ApiServer {
    fn default() -> Self {
        Self::builder().build()
    }
}

impl ApiServer {
    /// Settings for a new server.
    pub fn builder() -> ApiServerBuilder {
        ApiServerBuilder {
            major: "1".into(),
            minor: "34".into(),
            history: 20_000,
            crds: Vec::new(),
            faults: Faults::default(),
            options: Options {
                validate_custom_resources: true,
                workload_controllers: true,
                bookmark_interval: Duration::from_secs(5),
                event_ttl: Duration::from_secs(60 * 60),
            },
        }
    }

    /// A server that reports Kubernetes `major.minor`, with default settings
    /// (no CRDs).
    pub fn new(major: &str, minor: &str) -> Self {
        Self::builder().kubernetes_version(major, minor).build()
    }

    /// A client talking to this server in process; `default` is its default namespace.
    pub fn client(&self) -> kube::Client {
        let server = self.clone();
        let service = tower::service_fn(move |request: Request<kube::client::Body>| {
            let server = server.clone();
            async move {
                let (parts, body) = request.into_parts();
                let bytes = match body.collect().await {
                    Ok(collected) => collected.to_bytes(),
                    Err(e) => {
                        return Ok::<_, Infallible>(request::error_response(
                            &error::ApiError::bad_request(e.to_string()),
                        ));
                    }
                };
                Ok(server.handle(Request::from_parts(parts, bytes)).await)
            }
        });
        kube::Client::new(service, "default")
    }

    /// A bearer token that makes requests act as the ServiceAccount
    /// `namespace/name`: RBAC then allows them only by the ClusterRoles and
    /// Roles bound to it (requests without a token act as a cluster admin).
    /// The token is refused (401) while the ServiceAccount does not exist.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        self.lock().authz.issue(ServiceAccount {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }

    /// A client in process whose requests carry `token` (see
    /// [`Self::service_account_token`]); `default` is its default namespace.
    pub fn client_with_token(&self, token: &str) -> kube::Client {
        let server = self.clone();
        let bearer = http::HeaderValue::from_str(&format!("Bearer {token}")).ok();
        let service = tower::service_fn(move |request: Request<kube::client::Body>| {
            let server = server.clone();
            let bearer = bearer.clone();
            async move {
                let (mut parts, body) = request.into_parts();
                match bearer {
                    Some(value) => {
                        parts.headers.insert(http::header::AUTHORIZATION, value);
                    }
                    None => {
                        return Ok::<_, Infallible>(request::error_response(
                            &error::ApiError::bad_request("the token is not a valid header value"),
                        ));
                    }
                }
                let bytes = match body.collect().await {
                    Ok(collected) => collected.to_bytes(),
                    Err(e) => {
                        return Ok(request::error_response(&error::ApiError::bad_request(
                            e.to_string(),
                        )));
                    }
                };
                Ok(server.handle(Request::from_parts(parts, bytes)).await)
            }
        });
        kube::Client::new(service, "default")
    }

    /// What RBAC decided for the ServiceAccount `namespace/name` so far: the
    /// requests it refused, and the rules bound to it that allowed none.
    pub fn authorization_report(&self, namespace: &str, name: &str) -> AuthorizationReport {
        let state = self.lock();
        let account = ServiceAccount {
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        state.authz.report(&state.store, &account)
    }

    /// Serves this API server over plain HTTP/1.1 on `listener`, until the
    /// task running it is dropped: for `kubectl` and the `nodewright`
    /// binary through a kubeconfig. Bind to 127.0.0.1 only.
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
                                    return Ok::<_, Infallible>(request::error_response(
                                        &error::ApiError::bad_request(e.to_string()),
                                    ));
                                }
                            };
                            Ok(server.handle(Request::from_parts(parts, bytes)).await)
                        }
                    });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "API server double: connection ended");
                }
            });
        }
    }

    /// Every stored object of `group`/`plural` (all namespaces), as that
    /// resource serves it: for test assertions.
    pub fn objects(&self, group: &str, plural: &str) -> Vec<Value> {
        let state = self.lock();
        let Some(def) = state
            .registry
            .all()
            .iter()
            .find(|d| d.group == group && d.plural == plural)
            .cloned()
        else {
            return Vec::new();
        };
        state
            .store
            .list(&def.storage, None)
            .map(|o| request::output(&def, o))
            .collect()
    }

    /// Puts a fault plan in force from the next request on (watches already
    /// open keep the plan they started with); `Faults::default()` stops
    /// injecting. The counts go on.
    pub fn set_faults(&self, faults: Faults) {
        self.faults().set(faults);
    }

    /// Watch streams open now: each holds one subscription to the
    /// version channel until its client goes away (noticed at the next
    /// event it is sent) or it times out. For leak checks.
    pub fn live_watches(&self) -> usize {
        self.inner.version.receiver_count()
    }

    /// The faults injected since the server started.
    pub fn fault_counts(&self) -> FaultCounts {
        self.faults().counts()
    }

    fn faults(&self) -> MutexGuard<'_, faults::Injector> {
        // Plain counters and a generator: consistent after a panic.
        self.inner.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent data behind:
        // every write is a whole-object insert or remove.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes watches after a write.
    fn notify(&self, version: u64) {
        self.inner.version.send_replace(version);
    }

    async fn handle(&self, request: Request<Bytes>) -> Response<ResponseBody> {
        router::handle(self, request).await
    }
}
