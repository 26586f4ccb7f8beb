//! Provisioning latency and controller memory.
//!
//! Latency: a burst of pending pods against the operator (every controller,
//! the simulated cloud) on the API server double, in process; for each pod,
//! the time from its creation to the NodeClaim that takes it (see
//! benches/README.md for what exactly is timed).
//!
//! Memory: the `nodewright controller` binary, as a child process, against
//! the double served over HTTP on 127.0.0.1 with 1,000 Nodes, their
//! NodeClaims and 10,000 running pods; its peak RSS once synced.
//!
//! `cargo bench --bench provisioning` runs the criterion benchmark (a burst
//! of 1,000 pods). One round, with figures printed:
//! `NODEWRIGHT_BENCH_ONCE=latency:1000` (or `latency:10000`; the idle batch
//! window from `NODEWRIGHT_BENCH_IDLE_MS`, default 1000;
//! `NODEWRIGHT_BENCH_CRD_VALIDATION=off` skips the double's CRD validation,
//! to see its share) and
//! `NODEWRIGHT_BENCH_ONCE=memory` (the binary is `NODEWRIGHT_BIN`, by
//! default `nodewright` next to the `deps/` directory of this bench).
//!
//! Both single rounds run against a real cluster instead of the double when
//! `NODEWRIGHT_BENCH_KUBECONFIG` names a cluster-admin kubeconfig (an empty
//! control plane of `scripts/control-plane start DIR`: `DIR/kubeconfig`);
//! the bench installs the CRDs and leaves its objects there, so use a fresh
//! control plane per run.

use std::io::BufRead;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apiserver_double::ApiServer;
use criterion::{Criterion, criterion_group};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodewright::apis::{EC2NodeClass, NodeClaim, NodePool};
use nodewright::aws::catalog::Catalog;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::cloudprovider::UnavailableOfferings;
use nodewright::cloudprovider::simulated::{SimulatedCloudProvider, SimulatedSettings};
use nodewright::controllers::provisioning::{BatchWindows, ProvisioningSettings};
use nodewright::extensions::Extensions;
use nodewright::operator::{Operator, OperatorSettings};
use nodewright::sim::sandbox::cluster::Cluster;
use nodewright_host::HostConfig;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;

/// Writes in flight at once while filling the double.
const CONCURRENCY: usize = 16;
/// Changes the double keeps, so no watcher is sent back to a full list.
const HISTORY: usize = 200_000;
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

/// What the provisioning controller logged, with when.
#[derive(Debug, Clone, Copy)]
enum Logged {
    /// A NodeClaim create request was sent, and its response came back.
    Create { sent: Instant, done: Instant },
    /// A round that had pending pods ended.
    Round {
        at: Instant,
        pending: u64,
        created: u64,
        unschedulable: u64,
        prepare_ms: u64,
        solve_ms: u64,
        /// Planned while the batch was still open.
        planned_ahead: bool,
    },
}

static LOG: Mutex<Vec<Logged>> = Mutex::new(Vec::new());

fn log() -> std::sync::MutexGuard<'static, Vec<Logged>> {
    LOG.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records the provisioning controller's round and NodeClaim log lines.
struct Capture;

#[derive(Default)]
struct Fields {
    message: String,
    numbers: Vec<(&'static str, u64)>,
    planned_ahead: bool,
}

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.numbers.push((field.name(), value));
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        if field.name() == "planned_ahead" {
            self.planned_ahead = value;
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let at = Instant::now();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let number = |name: &str| {
            let found = fields.numbers.iter().find(|(n, _)| *n == name);
            found.map_or(0, |(_, v)| *v)
        };
        let logged = match fields.message.as_str() {
            "provisioned" => Logged::Round {
                at,
                pending: number("pending"),
                created: number("created"),
                unschedulable: number("unschedulable"),
                prepare_ms: number("prepare_ms"),
                solve_ms: number("solve_ms"),
                planned_ahead: fields.planned_ahead,
            },
            _ => return,
        };
        log().push(logged);
    }
}

fn init_tracing() {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    let capture = Capture.with_filter(
        Targets::new().with_target("nodewright::controllers::provisioning", LevelFilter::INFO),
    );
    let warnings = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(LevelFilter::WARN);
    let subscriber = tracing_subscriber::registry().with(capture).with(warnings);
    let _ = tracing::subscriber::set_global_default(subscriber);
}

fn class_and_pool() -> (Value, Value, NodePool) {
    let class = json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {"role": "NodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
            "securityGroupSelectorTerms": [{"id": "sg-1"}]},
    });
    // The status the EC2NodeClass controller would write, Ready.
    let status = json!({
        "subnets": ZONES.iter().map(|z| json!({"id": format!("subnet-{z}"), "zone": z})).collect::<Vec<_>>(),
        "securityGroups": [{"id": "sg-1"}],
        "amis": [{"id": "ami-amd64", "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}],
        "instanceProfile": "bench_NodeRole",
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}],
    });
    let pool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "general"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
        }}},
    }))
    .expect("a valid NodePool");
    (class, status, pool)
}

/// Where a round sends its requests: the double, in process, or a real
/// cluster (`NODEWRIGHT_BENCH_KUBECONFIG`).
enum Target {
    Double(ApiServer),
    Cluster(Box<Cluster>, std::path::PathBuf),
}

impl Target {
    /// The cluster `NODEWRIGHT_BENCH_KUBECONFIG` names, with the CRDs
    /// installed, or a new double (`validate`: its CRD validation).
    async fn from_env(validate: bool) -> Target {
        let Some(path) = std::env::var_os("NODEWRIGHT_BENCH_KUBECONFIG") else {
            let server = nodewright::sim::double::builder()
                .history(HISTORY)
                .validate_custom_resources(validate)
                .build();
            return Target::Double(server);
        };
        let path = std::path::PathBuf::from(path);
        let cluster = Cluster::connect(&path)
            .await
            .unwrap_or_else(|e| panic!("NODEWRIGHT_BENCH_KUBECONFIG={}: {e}", path.display()));
        cluster
            .install_crds(&nodewright::apis::crds::definitions())
            .await
            .unwrap_or_else(|e| panic!("installing the CRDs: {e}"));
        Target::Cluster(Box::new(cluster), path)
    }

    fn client(&self) -> kube::Client {
        match self {
            Target::Double(server) => server.client(),
            Target::Cluster(cluster, _) => cluster.client(),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Target::Double(_) => "the double",
            Target::Cluster(..) => "kube-apiserver",
        }
    }

    async fn node_claims(&self) -> usize {
        let api: Api<NodeClaim> = Api::all(self.client());
        let list = api.list(&Default::default()).await;
        list.expect("the NodeClaims are listed").items.len()
    }
}

async fn create_class_and_pool(client: &kube::Client) {
    let (class, status, pool) = class_and_pool();
    let classes: Api<EC2NodeClass> = Api::all(client.clone());
    let written = create(&classes, class, status).await;
    written.expect("the class is created");
    Api::<NodePool>::all(client.clone())
        .create(&PostParams::default(), &pool)
        .await
        .expect("the pool is created");
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Creates `object` through `api`, then writes its `status`; returns when
/// the object was created.
async fn create<K>(api: &Api<K>, object: Value, status: Value) -> Result<Instant, BoxError>
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object)?;
    let created = api.create(&PostParams::default(), &object).await?;
    let at = Instant::now();
    let status = json!({ "status": status });
    let name = created.name_any();
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(at)
}

/// A client like `inner` that logs when each NodeClaim create is sent and answered.
fn timed_client(inner: kube::Client) -> kube::Client {
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        async move {
            let create = request.method() == http::Method::POST
                && request.uri().path().ends_with("/nodeclaims");
            let sent = Instant::now();
            let response = inner.send(request).await;
            if create && response.as_ref().is_ok_and(|r| r.status().is_success()) {
                log().push(Logged::Create {
                    sent,
                    done: Instant::now(),
                });
            }
            response
        }
    });
    kube::Client::new(service, "default")
}

fn operator(client: kube::Client, windows: BatchWindows) -> Operator {
    let unavailable = Arc::new(UnavailableOfferings::default());
    let instance_types = Arc::new(InstanceTypeProvider::new(
        Arc::new(Catalog::embedded("us-east-1").expect("the embedded catalog")),
        Arc::new(Extensions::new(HostConfig::default()).expect("the extension host")),
        unavailable.clone(),
    ));
    // Launches outlast a round: with no kubelet to bind the pods, a launched
    // claim's pods would be pending again once their nomination lapses (20 s)
    // and be counted twice; a claim still launching keeps them nominated.
    let cloud = Arc::new(SimulatedCloudProvider::new(
        instance_types.clone(),
        unavailable,
        SimulatedSettings {
            launch_delay: Duration::from_secs(3600),
            ..SimulatedSettings::default()
        },
    ));
    let local: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    Operator {
        client: timed_client(client),
        instance_types,
        cloud: Some(cloud),
        node_classes: None,
        interruption_queue: None,
        instance_status: None,
        settings: OperatorSettings {
            provisioning: ProvisioningSettings {
                batch: windows,
                ..ProvisioningSettings::default()
            },
            leader_election: None,
            metrics_addr: local,
            health_addr: local,
            node_repair: false,
            spot_to_spot_consolidation: false,
            node_overlay: false,
            static_capacity: false,
        },
    }
}

async fn wait_for(what: &str, limit: Duration, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done().await {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates a pod requesting one CPU and marks it unschedulable, as
/// kube-scheduler would; returns when it was created and when marked.
async fn pending_pod(pods: &Api<Pod>, name: &str) -> Result<(Instant, Instant), BoxError> {
    pending_pod_of(pods, name, "1").await
}

/// [`pending_pod`] requesting `cpu`.
async fn pending_pod_of(
    pods: &Api<Pod>,
    name: &str,
    cpu: &str,
) -> Result<(Instant, Instant), BoxError> {
    let pod = json!({"metadata": {"name": name}, "spec": {"containers": [
        {"name": "c", "image": "c", "resources": {"requests": {"cpu": cpu}}}]}});
    let status = json!({"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]});
    let created = create(pods, pod, status).await?;
    Ok((created, Instant::now()))
}

/// Creates `count` pending pods while the operator runs; returns when every
/// pod was in a provisioning round that ended, with the time from the first
/// pod to then; `report` prints the figures. `validate` is the double's
/// validation of custom resources against their CRDs (on in every figure of
/// record; off only to see what that validation costs).
async fn burst(count: usize, windows: BatchWindows, validate: bool, report: bool) -> Duration {
    let target = Target::from_env(validate).await;
    let client = target.client();
    create_class_and_pool(&client).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(operator(client.clone(), windows).run(
        async {
            let _ = stopped.await;
        },
        |_| {},
    ));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // One pending pod first: once a round has placed it, the operator has
    // listed the cluster and provisions, and its start stays out of the figures.
    pending_pod(&pods, "probe")
        .await
        .expect("the probe pod is created");
    wait_for("a first round", Duration::from_secs(120), async || {
        log().iter().any(|l| matches!(l, Logged::Round { .. }))
    })
    .await;
    let probe_claims = target.node_claims().await;
    log().clear();

    let start = Instant::now();
    // (created, pending) per pod.
    let mut times: Vec<(Instant, Instant)> = futures::stream::iter(0..count)
        .map(|i| {
            let pods = pods.clone();
            async move { pending_pod(&pods, &format!("web-{i:05}")).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await
        .expect("the pods are created");
    let burst = start.elapsed();

    let covered = || {
        let pending: u64 = log()
            .iter()
            .map(|l| match l {
                Logged::Round { pending, .. } => *pending,
                _ => 0,
            })
            .sum();
        pending as usize >= count
    };
    wait_for(
        "every pod in a round",
        Duration::from_secs(900),
        async || covered(),
    )
    .await;
    let total = start.elapsed();
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(30), running).await;

    // Rounds take pending pods in the order they became pending: each
    // round's pods are the next `pending` of them. A pod's time is that of
    // the round's last NodeClaim create answered (the round's end if it
    // created none).
    times.sort_by_key(|(_, pending)| *pending);
    let logged = log().clone();
    let mut latencies = Vec::with_capacity(count);
    let mut rounds = Vec::new();
    let mut next = times.iter();
    let mut creates: Option<(Instant, Instant)> = None;
    let mut tail = Duration::ZERO;
    for entry in &logged {
        match *entry {
            Logged::Create { sent, done } => {
                let first = creates.map_or(sent, |(first, _)| first.min(sent));
                creates = Some((first, done));
            }
            Logged::Round {
                at,
                pending,
                created,
                unschedulable,
                prepare_ms,
                solve_ms,
                planned_ahead,
            } => {
                assert_eq!(unschedulable, 0, "pods left unschedulable in a round");
                let (first, placed) = creates.take().unwrap_or((at, at));
                for (created, became_pending) in next.by_ref().take(pending as usize) {
                    latencies.push(placed - *created);
                    tail = at - *became_pending;
                }
                let timings = (prepare_ms, solve_ms, planned_ahead, placed - first);
                rounds.push((at - start, pending, created, timings));
            }
        }
    }
    latencies.sort();
    if report {
        let claims = target.node_claims().await - probe_claims;
        let per_second = count as f64 / burst.as_secs_f64();
        let idle = windows.idle;
        if !validate {
            println!("custom resources NOT validated against their CRDs (diagnostic run)");
        }
        println!(
            "{count} pods on {}, idle window {idle:?}: created in {burst:?} ({per_second:.0} pods/s), all on NodeClaims {total:?} after the first",
            target.name()
        );
        let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
        let max = latencies.last().copied().unwrap_or_default();
        println!(
            "pod created -> its NodeClaim created: p50 {p50:?}, p99 {p99:?}, max {max:?}; {claims} NodeClaims, {} rounds",
            rounds.len()
        );
        for (end, pending, created, (prepare_ms, solve_ms, ahead, creating)) in &rounds {
            let when = if *ahead {
                "planned ahead"
            } else {
                "after the window"
            };
            println!(
                "  round ending {end:?} after the first pod: {pending} pods, {created} NodeClaims, input {prepare_ms} ms, solve {solve_ms} ms ({when}), creating the NodeClaims {creating:?}"
            );
        }
        let beyond = tail.saturating_sub(idle);
        println!(
            "last pod pending -> end of its round: {tail:?} ({beyond:?} beyond the idle window)"
        );
    }
    total
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

// ---- memory ----

/// The filled cluster: a Ready pool and class, `nodes` Ready Nodes with
/// their registered NodeClaims, and `pods_per_node` running pods on each.
async fn fill(client: &kube::Client, nodes: usize, pods_per_node: usize) {
    create_class_and_pool(client).await;
    let node_api: Api<Node> = Api::all(client.clone());
    let claim_api: Api<NodeClaim> = Api::all(client.clone());
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let resources = json!({"cpu": "8", "memory": "32Gi", "pods": "58"});
    let allocatable = json!({"cpu": "7910m", "memory": "31Gi", "pods": "58"});
    futures::stream::iter(0..nodes)
        .map(|i| {
            let (node_api, claim_api) = (node_api.clone(), claim_api.clone());
            let (resources, allocatable) = (resources.clone(), allocatable.clone());
            async move {
                let zone = ZONES[i % ZONES.len()];
                let (node, claim) = (format!("bench-node-{i:04}"), format!("general-{i:04}"));
                let provider_id = format!("aws:///{zone}/i-{i:017x}");
                let labels = json!({
                    "karpenter.sh/nodepool": "general", "karpenter.k8s.aws/ec2nodeclass": "default",
                    "node.kubernetes.io/instance-type": "m5.2xlarge", "topology.kubernetes.io/zone": zone,
                    "topology.kubernetes.io/region": "us-east-1", "karpenter.sh/capacity-type": "on-demand",
                    "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": node,
                    "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true",
                });
                let condition = |type_: &str| json!({"type": type_, "status": "True", "reason": type_,
                    "message": "", "lastTransitionTime": "2026-11-23T00:00:00Z"});
                let object = json!({
                    "metadata": {"name": claim, "labels": labels, "finalizers": ["karpenter.sh/termination"]},
                    "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.2xlarge"]}],
                        "resources": {"requests": {"cpu": "5", "memory": "5Gi", "pods": pods_per_node.to_string()}}},
                });
                let conditions = ["Launched", "Registered", "Initialized", "Ready"].map(condition);
                let status = json!({"providerID": provider_id, "nodeName": node, "imageID": "ami-amd64",
                    "capacity": resources, "allocatable": allocatable, "conditions": conditions});
                create(&claim_api, object, status).await?;
                let object = json!({
                    "metadata": {"name": node, "labels": labels, "finalizers": ["karpenter.sh/termination"]},
                    "spec": {"providerID": provider_id},
                });
                let status = json!({"capacity": resources, "allocatable": allocatable,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "",
                        "lastHeartbeatTime": "2026-11-23T00:00:00Z", "lastTransitionTime": "2026-11-23T00:00:00Z"}]});
                create(&node_api, object, status).await?;
                Ok::<_, BoxError>(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .expect("the nodes and NodeClaims are created");
    futures::stream::iter(0..nodes * pods_per_node)
        .map(|i| {
            let pod_api = pod_api.clone();
            async move {
                let pod = json!({
                    "metadata": {"name": format!("app-{i:05}"), "labels": {"app": format!("app-{}", i % 100)}},
                    "spec": {"nodeName": format!("bench-node-{:04}", i / pods_per_node),
                        "containers": [{"name": "c", "image": "c",
                            "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}
                });
                let status = json!({"phase": "Running", "conditions": [
                    {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]});
                create(&pod_api, pod, status).await?;
                Ok::<_, BoxError>(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .expect("the pods are created");
    // One pending pod that fits on no filled node (on a cluster kube-scheduler
    // would bind a smaller one): the controller's first round shows it has
    // listed everything.
    pending_pod_of(&pod_api, "probe", "7")
        .await
        .expect("the probe pod is created");
}

/// What the controller's log showed.
#[derive(Debug, Default, Clone)]
struct Seen {
    health: Option<String>,
    provisioned: Option<Instant>,
    lines: Vec<String>,
}

/// Kills the controller when dropped, whatever happened.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn controller_binary() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("NODEWRIGHT_BIN") {
        return path.into();
    }
    let bench = std::env::current_exe().expect("the bench's path");
    let deps = bench.parent().expect("the bench's directory");
    deps.parent().unwrap_or(deps).join("nodewright")
}

async fn status_code(addr: &str, path: &str) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    response.split(' ').nth(1)?.parse().ok()
}

/// `VmHWM` (peak RSS) and `VmRSS` of `pid`, in KiB.
fn memory_of(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name));
        let kib = line.and_then(|l| l.split_whitespace().nth(1)?.parse().ok());
        kib.unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
    };
    (field("VmHWM:"), field("VmRSS:"))
}

async fn memory(nodes: usize, pods_per_node: usize, settle: Duration) {
    let target = Target::from_env(true).await;
    let started = Instant::now();
    fill(&target.client(), nodes, pods_per_node).await;
    println!(
        "filled {} with {nodes} nodes and NodeClaims and {} running pods in {:?}",
        target.name(),
        nodes * pods_per_node,
        started.elapsed()
    );
    let dir = std::env::temp_dir().join(format!("nodewright-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    // The double is served over HTTP for the controller; a cluster already is.
    let (kubeconfig, serving) = match &target {
        Target::Cluster(_, path) => (path.clone(), None),
        Target::Double(server) => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a port");
            let port = listener.local_addr().expect("the address").port();
            let serving = tokio::spawn(server.clone().serve(listener));
            let kubeconfig = dir.join("kubeconfig");
            let config = format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: bench, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\nusers: [{{name: bench, user: {{}}}}]\ncontexts: [{{name: bench, context: {{cluster: bench, user: bench}}}}]\ncurrent-context: bench\n"
            );
            std::fs::write(&kubeconfig, config).expect("the kubeconfig is written");
            (kubeconfig, Some(serving))
        }
    };

    let binary = controller_binary();
    let spawned = std::process::Command::new(&binary)
        .args(
            "controller --cloud-provider simulated --cluster-name bench --bind-address 127.0.0.1 \
             --metrics-port 0 --health-probe-port 0 --leader-elect false"
                .split_whitespace(),
        )
        .env("KUBECONFIG", &kubeconfig)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {}: {e} (set NODEWRIGHT_BIN)",
                binary.display()
            )
        });
    let mut child = Child(spawned);
    let spawned_at = Instant::now();
    let pid = child.0.id();
    // From its log: where it serves health probes, when it first
    // provisioned (the pending probe pod), and every line for failures.
    let seen = Arc::new(Mutex::new(Seen::default()));
    if let Some(stdout) = child.0.stdout.take() {
        let seen = seen.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let value = serde_json::from_str::<Value>(&line).unwrap_or_default();
                let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(health) = value["fields"]["health"].as_str() {
                    seen.health = Some(health.to_string());
                }
                if value["fields"]["message"] == "provisioned" && seen.provisioned.is_none() {
                    seen.provisioned = Some(Instant::now());
                }
                seen.lines.push(line);
            }
        });
    }
    let seen = || seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let deadline = Instant::now() + Duration::from_secs(300);
    let (health, provisioned) = loop {
        let now = seen();
        if let (Some(health), Some(provisioned)) = (now.health, now.provisioned) {
            break (health, provisioned);
        }
        let log = now.lines.join("\n");
        assert!(
            Instant::now() < deadline,
            "no provisioning round within 300 s:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let ready = provisioned - spawned_at;
    let readyz = status_code(&health, "/readyz").await;
    let (_, rss_ready) = memory_of(pid);
    tokio::time::sleep(settle).await;
    let (peak, rss) = memory_of(pid);
    let readyz_later = status_code(&health, "/readyz").await;
    drop(child);
    if let Some(serving) = serving {
        serving.abort();
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "{nodes} nodes, {} pods on {}; controller ({}): first provisioning round {ready:?} after start (/readyz then {readyz:?}, {readyz_later:?} {settle:?} later)",
        nodes * pods_per_node,
        target.name(),
        binary.display()
    );
    println!(
        "RSS {:.1} MiB at the first round, {:.1} MiB {settle:?} later; peak RSS (VmHWM) {:.1} MiB",
        mib(rss_ready),
        mib(rss),
        mib(peak)
    );
    let lines = seen().lines;
    for line in lines
        .iter()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
    {
        println!("  {}", line.chars().take(400).collect::<String>());
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn bench_burst(c: &mut Criterion) {
    let runtime = runtime();
    let mut group = c.benchmark_group("provisioning");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(120));
    group.bench_function("burst-1000-pods-to-nodeclaims", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| runtime.block_on(burst(1000, BatchWindows::default(), true, false)))
                .sum()
        });
    });
    group.finish();
}

criterion_group!(benches, bench_burst);

fn main() {
    init_tracing();
    if let Ok(once) = std::env::var("NODEWRIGHT_BENCH_ONCE") {
        if let Some(nodes) = once.strip_prefix("memory") {
            // `memory` is 1,000 nodes; `memory:N` N nodes (10 pods each).
            let nodes = nodes.strip_prefix(':').map_or(1000, |n| {
                n.parse().expect("NODEWRIGHT_BENCH_ONCE=memory:<nodes>")
            });
            runtime().block_on(memory(nodes, 10, Duration::from_secs(10)));
            return;
        }
        let count: usize = once
            .strip_prefix("latency:")
            .and_then(|n| n.parse().ok())
            .expect("NODEWRIGHT_BENCH_ONCE is latency:<pods> or memory");
        let idle = std::env::var("NODEWRIGHT_BENCH_IDLE_MS")
            .ok()
            .map(|ms| Duration::from_millis(ms.parse().expect("NODEWRIGHT_BENCH_IDLE_MS in ms")));
        let windows = BatchWindows {
            idle: idle.unwrap_or(BatchWindows::default().idle),
            ..BatchWindows::default()
        };
        let validate = match std::env::var("NODEWRIGHT_BENCH_CRD_VALIDATION").as_deref() {
            Ok("off") => false,
            Ok("on") | Err(_) => true,
            Ok(other) => panic!("NODEWRIGHT_BENCH_CRD_VALIDATION is on or off, not {other:?}"),
        };
        runtime().block_on(burst(count, windows, validate, true));
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
