//! The binder, standing in for kube-scheduler: pending pods are placed on
//! the Nodes that take pods now by nodewright's own scheduler (a snapshot
//! of the cluster with no NodePools and no NodeClaims, so only existing
//! nodes are candidates: requests, node selectors, affinities, taints and
//! topology spread are the scheduler's), bound through `pods/binding` and
//! started as their kubelet would start them; pods no node can take get
//! `PodScheduled=False`, reason `Unschedulable`, which is what the
//! provisioner acts on.
//!
//! A Node takes pods when it is `Ready`, not cordoned
//! (`spec.unschedulable`), not tainted `karpenter.sh/disrupted` and not
//! being deleted; the Node is read again before pods are bound to it, as
//! its watch can lag the pods'. Pods of another `schedulerName`, pods with
//! scheduling gates and pods being deleted are left alone. Like
//! kube-scheduler, the binder remembers what it bound until its watch shows
//! it, so it never places two pods on the same free room.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::{Event, EventType};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::node::{internal_ip, is_ready, is_simulated};
use super::pod_status::{
    is_marked_unschedulable, running_patch, unschedulable_patch, waits_to_start,
};
use crate::apis::labels::DISRUPTED_TAINT_KEY;
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cluster::{
    ClusterSnapshot, ClusterState, ConvertedPods, cluster_input, pod_key, pods,
    pods::owned_by_daemon_set, pool_specs,
};
use crate::controllers::ControllerError;
use crate::controllers::recorder::Recorder;
use crate::scheduling::{PodKey, Scheduler, SchedulerOptions, SchedulingResult, convert};

/// The scheduler name the binder serves, as kube-scheduler's default profile.
pub const SCHEDULER_NAME: &str = "default-scheduler";

/// A binding not seen in the watch after this long is forgotten.
const ASSUME_TTL: Duration = Duration::from_secs(30);

/// A round runs at least this often, even without changes.
const RESYNC: Duration = Duration::from_secs(10);

/// Writes of one round in flight at once (bindings, `Unschedulable`
/// conditions, pod starts): kube-scheduler binds each pod in its own
/// goroutine and every node's kubelet starts its pods on its own, so no
/// write waits for another pod's. One at a time, a 5,000-pod burst took
/// minutes of request round trips.
const PARALLEL_WRITES: usize = 32;

/// What one binding round did.
#[derive(Debug, Default, Clone)]
pub struct BindRound {
    /// `(pod, node)` bound.
    pub bound: Vec<(PodKey, String)>,
    /// `(pod, message)` marked unschedulable.
    pub unschedulable: Vec<(PodKey, String)>,
    /// Bound pods started (`namespace/name`).
    pub started: Vec<String>,
}

/// What the binder wrote and the watch may not show yet, by pod uid.
#[derive(Default)]
struct Memory {
    /// Pods bound here, to which node, since when.
    assumed: HashMap<String, (String, Instant)>,
    /// The unschedulable message last written per pod.
    reported: HashMap<String, String>,
    /// Pods started here.
    started: HashSet<String>,
    /// Terminating pods whose deletion was finished here.
    finished: HashSet<String>,
}

/// The binder.
pub struct Binder {
    client: Client,
    state: Arc<ClusterState>,
    instance_types: Arc<InstanceTypeProvider>,
    recorder: Recorder,
    memory: Mutex<Memory>,
    /// False on a real cluster, where kube-scheduler binds: the binder
    /// then only does the kubelet's part for the simulated nodes.
    binds: bool,
}

impl Binder {
    /// A binder over `state`, writing through `client`; `recorder` publishes
    /// its `Scheduled` events.
    pub fn new(
        client: Client,
        state: Arc<ClusterState>,
        instance_types: Arc<InstanceTypeProvider>,
        recorder: Recorder,
    ) -> Self {
        Binder {
            client,
            state,
            instance_types,
            recorder,
            memory: Mutex::new(Memory::default()),
            binds: true,
        }
    }

    /// The binder on a real cluster: kube-scheduler binds and marks pods
    /// unschedulable, so this one binds nothing; it starts the pods bound
    /// to the simulated kubelet's Ready nodes and, as their kubelet would
    /// once the containers stopped, finishes the deletion of their
    /// terminating pods (a real API server keeps a deleted pod until its
    /// kubelet confirms; the double removes it at once).
    pub fn stepping_aside(mut self) -> Self {
        self.binds = false;
        self
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        // Plain data: still consistent if a holder panicked.
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs until dropped: a round whenever pods or nodes change (changes
    /// during a round make one more), and every 10 seconds.
    pub async fn run(self: Arc<Self>) {
        let wake = Notify::new();
        let feeder = async {
            let mut changes = std::pin::pin!(futures::stream::select(
                self.state.pods.changes().map(|_| ()),
                self.state.nodes.changes().map(|_| ()),
            ));
            while changes.next().await.is_some() {
                wake.notify_one();
            }
        };
        let rounds = async {
            tracing::debug!("binder: waiting for the cluster state");
            self.state.synced().await;
            tracing::debug!("binder: cluster state synced");
            loop {
                if let Err(error) = self.round().await {
                    tracing::warn!(%error, "binding round failed; retrying");
                }
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(RESYNC) => {}
                }
            }
        };
        tokio::select! {
            _ = feeder => {}
            _ = rounds => {}
        }
    }

    /// One round on the cluster state as it is now: bind what fits, mark
    /// what does not, start what is bound.
    pub async fn round(&self) -> Result<BindRound, ControllerError> {
        let snapshot = self.state.snapshot();
        tracing::debug!("binder: snapshot taken");
        self.forget(&snapshot.pods);
        let (snapshot, pending) = self.prepare(snapshot);
        tracing::debug!(pending = pending.len(), "binder: prepared");
        let node_count = snapshot.nodes.len();
        let mut round = BindRound::default();
        if !self.binds {
            round.started = self.start_bound_pods().await;
            self.finish_terminating_pods().await;
            return Ok(round);
        }
        if !pending.is_empty() {
            let result = self.solve(snapshot, &pending).await?;
            tracing::debug!(
                pending = pending.len(),
                placed = result.existing_node_placements.len(),
                unschedulable = result.errors.len(),
                "binding round"
            );
            // Futures built first and then driven together: the stream
            // holds no closure over borrowed data, which a spawned task
            // could not prove `Send`.
            let mut binds = Vec::new();
            let mut still_taking: HashMap<String, bool> = HashMap::new();
            for placement in &result.existing_node_placements {
                let Some(pod) = pending.get(&placement.pod) else {
                    continue;
                };
                let takes = match still_taking.get(&placement.node) {
                    Some(takes) => *takes,
                    None => {
                        let takes = self.still_takes_pods(&placement.node).await;
                        still_taking.insert(placement.node.clone(), takes);
                        takes
                    }
                };
                if takes {
                    binds.push(self.bind_placed(
                        pod.clone(),
                        placement.pod.clone(),
                        placement.node.clone(),
                    ));
                }
            }
            round.bound = all(binds).await;
            let mut marks = Vec::new();
            for error in &result.errors {
                let Some(pod) = pending.get(&error.pod) else {
                    continue;
                };
                let message = match node_count {
                    0 => "no nodes available to schedule pods".to_string(),
                    n => format!("0/{n} nodes are available: {}", error.reason),
                };
                marks.push(self.mark_placed(pod.clone(), error.pod.clone(), message));
            }
            round.unschedulable = all(marks).await;
        }
        round.started = self.start_bound_pods().await;
        Ok(round)
    }

    /// [`Self::bind`] on owned data: `(pod, node)` when bound.
    async fn bind_placed(
        &self,
        pod: Arc<Pod>,
        key: PodKey,
        node: String,
    ) -> Option<(PodKey, String)> {
        self.bind(&pod, &node).await.then_some((key, node))
    }

    /// [`Self::mark_unschedulable`] on owned data: `(pod, message)` when written.
    async fn mark_placed(
        &self,
        pod: Arc<Pod>,
        key: PodKey,
        message: String,
    ) -> Option<(PodKey, String)> {
        self.mark_unschedulable(&pod, &message)
            .await
            .then_some((key, message))
    }

    /// Drops what the watch has caught up with, and pods that are gone.
    fn forget(&self, pods: &[Arc<Pod>]) {
        let now = Instant::now();
        let mut memory = self.memory();
        let mut existing = HashSet::new();
        for pod in pods {
            let uid = pod.uid().unwrap_or_default();
            if bound_node(pod).is_some() {
                memory.assumed.remove(&uid);
                memory.reported.remove(&uid);
            }
            existing.insert(uid);
        }
        memory
            .assumed
            .retain(|uid, (_, since)| existing.contains(uid) && now - *since < ASSUME_TTL);
        memory.reported.retain(|uid, _| existing.contains(uid));
        memory.started.retain(|uid| existing.contains(uid));
        memory.finished.retain(|uid| existing.contains(uid));
    }

    /// The snapshot the scheduler sees — no NodePools, no NodeClaims, no
    /// nominations; nodes that take no pods flagged as being deleted (their
    /// pods still count); pods bound here shown bound — and the pods to
    /// place by `namespace/name`.
    fn prepare(
        &self,
        mut snapshot: ClusterSnapshot,
    ) -> (ClusterSnapshot, BTreeMap<PodKey, Arc<Pod>>) {
        snapshot.node_pools.clear();
        snapshot.node_claims.clear();
        snapshot.nominated.clear();
        snapshot.nodes = snapshot
            .nodes
            .into_iter()
            .map(|node| {
                if self.takes_pods(&node) || node.metadata.deletion_timestamp.is_some() {
                    node
                } else {
                    let mut flagged = Node::clone(&node);
                    flagged.metadata.deletion_timestamp =
                        Some(Time(k8s_openapi::jiff::Timestamp::now()));
                    Arc::new(flagged)
                }
            })
            .collect();
        let memory = self.memory();
        let mut pending = BTreeMap::new();
        let mut pods = Vec::with_capacity(snapshot.pods.len());
        for pod in snapshot.pods {
            if bound_node(&pod).is_some() {
                pods.push(pod);
                continue;
            }
            if let Some((node, _)) = memory.assumed.get(&pod.uid().unwrap_or_default()) {
                let mut assumed = Pod::clone(&pod);
                assumed.spec.get_or_insert_with(Default::default).node_name = Some(node.clone());
                pods.push(Arc::new(assumed));
                continue;
            }
            if is_ours_to_place(&pod) {
                pending.insert(pod_key(&pod), pod.clone());
                pods.push(pod);
            }
        }
        snapshot.pods = pods;
        (snapshot, pending)
    }

    /// Whether `node` takes new pods.
    fn takes_pods(&self, node: &Node) -> bool {
        let spec = node.spec.as_ref();
        let cordoned = spec.and_then(|s| s.unschedulable).unwrap_or(false);
        let disrupted = spec
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == DISRUPTED_TAINT_KEY));
        is_ready(node)
            && !cordoned
            && !disrupted
            && node.metadata.deletion_timestamp.is_none()
            && !self.state.is_marked_for_deletion(node)
    }

    /// Whether the Node named `name`, read from the API server now, takes
    /// pods: the node watch can lag the pod watch, so a cordon written just
    /// before a pod was created may not be in the snapshot yet.
    async fn still_takes_pods(&self, name: &str) -> bool {
        let api: Api<Node> = Api::all(self.client.clone());
        match api.get(name).await {
            Ok(node) => {
                let takes = self.takes_pods(&node);
                if !takes {
                    tracing::debug!(%name, "binder: node no longer takes pods");
                }
                takes
            }
            Err(error) => {
                tracing::debug!(%name, %error, "binder: cannot read node; not binding to it");
                false
            }
        }
    }

    /// Runs the scheduler on `snapshot`, DaemonSet pods included (the
    /// scheduler input leaves them to their controller; here they are
    /// placed like any pod, pinned to their node by its affinity).
    async fn solve(
        &self,
        snapshot: ClusterSnapshot,
        pending: &BTreeMap<PodKey, Arc<Pod>>,
    ) -> Result<SchedulingResult, ControllerError> {
        let daemon_pods: Vec<Arc<Pod>> = pending
            .values()
            .filter(|p| owned_by_daemon_set(p))
            .cloned()
            .collect();
        let instance_types = self.instance_types.clone();
        let result = tokio::task::spawn_blocking(move || {
            let pools = pool_specs(&snapshot, &instance_types);
            let cluster = cluster_input(&snapshot, &ConvertedPods::default(), &HashSet::new());
            let mut prepared = pools.prepare(cluster, SchedulerOptions::default());
            for problem in &prepared.problems {
                tracing::debug!(%problem, "binder: left out");
            }
            for pod in daemon_pods {
                match convert::pod_from_k8s(&pod) {
                    Ok(pod) => prepared.input.pods.push(pod),
                    Err(error) => tracing::debug!(%error, "binder: DaemonSet pod left out"),
                }
            }
            Scheduler::new(prepared.input).solve()
        })
        .await?;
        Ok(result)
    }

    /// Binds `pod` to `node` and starts it; false when the binding failed.
    async fn bind(&self, pod: &Pod, node: &str) -> bool {
        let (namespace, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let binding = serde_json::json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let result: Result<serde_json::Value, kube::Error> = api
            .create_subresource("binding", &name, &PostParams::default(), &binding)
            .await;
        match result {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {
                tracing::debug!(pod = %pod_key(pod), message = %status.message, "binder: not bound");
                return false;
            }
            Err(error) => {
                tracing::warn!(pod = %pod_key(pod), %node, %error, "cannot bind pod; retrying");
                return false;
            }
        }
        let uid = pod.uid().unwrap_or_default();
        self.memory()
            .assumed
            .insert(uid, (node.to_string(), Instant::now()));
        tracing::info!(pod = %pod_key(pod), %node, "pod bound");
        let event = Event {
            type_: EventType::Normal,
            reason: "Scheduled".to_string(),
            note: Some(format!(
                "Successfully assigned {namespace}/{name} to {node}"
            )),
            action: "Binding".to_string(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &pod.object_ref(&())).await {
            tracing::debug!(%error, "binder: cannot publish event");
        }
        true
    }

    /// Writes `PodScheduled=False`/`Unschedulable` unless the pod already
    /// says so; true when written.
    async fn mark_unschedulable(&self, pod: &Pod, message: &str) -> bool {
        let uid = pod.uid().unwrap_or_default();
        let already = is_marked_unschedulable(pod, message)
            || self.memory().reported.get(&uid).map(String::as_str) == Some(message);
        if already {
            return false;
        }
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let patch = unschedulable_patch(pod, message);
        match api
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {
                self.memory().reported.insert(uid, message.to_string());
                tracing::info!(pod = %pod_key(pod), reason = %message, "pod unschedulable");
                true
            }
            Err(kube::Error::Api(status)) if status.code == 404 => false,
            Err(error) => {
                tracing::warn!(pod = %pod_key(pod), %error, "cannot mark pod unschedulable");
                false
            }
        }
    }

    /// Starts the pods bound to a `Ready` node that have not started, as
    /// their kubelet would; returns them.
    async fn start_bound_pods(&self) -> Vec<String> {
        let nodes: HashMap<String, Arc<Node>> = self
            .state
            .nodes
            .all()
            .into_iter()
            .map(|n| (n.name_any(), n))
            .collect();
        let assumed: HashMap<String, String> = self
            .memory()
            .assumed
            .iter()
            .map(|(uid, (node, _))| (uid.clone(), node.clone()))
            .collect();
        let to_start: Vec<(Arc<Pod>, String, Option<String>)> = {
            let memory = self.memory();
            self.state
                .pods
                .all()
                .into_iter()
                .filter_map(|pod| {
                    let uid = pod.uid().unwrap_or_default();
                    let node_name = bound_node(&pod).or_else(|| assumed.get(&uid).cloned())?;
                    let node = nodes
                        .get(&node_name)
                        .filter(|n| is_ready(n) && (self.binds || is_simulated(n)))?;
                    if !waits_to_start(&pod) || memory.started.contains(&uid) {
                        return None;
                    }
                    let ip = internal_ip(node);
                    Some((pod, node_name, ip))
                })
                .collect()
        };
        let starts = to_start
            .into_iter()
            .map(|(pod, node_name, ip)| self.start(pod, node_name, ip))
            .collect();
        all(starts).await
    }

    /// Marks `pod`, bound to `node_name`, Running; its key when written.
    async fn start(&self, pod: Arc<Pod>, node_name: String, ip: Option<String>) -> Option<String> {
        let pod = pod.as_ref();
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let patch = running_patch(pod, ip.as_deref());
        match api
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {
                self.memory().started.insert(pod.uid().unwrap_or_default());
                tracing::info!(pod = %pod_key(pod), node = %node_name, "pod Running");
                Some(pod_key(pod).to_string())
            }
            Err(kube::Error::Api(status)) if status.code == 404 => None,
            Err(error) => {
                tracing::warn!(pod = %pod_key(pod), %error, "cannot start pod");
                None
            }
        }
    }
}

impl Binder {
    /// Deletes at once (grace period 0, this pod's uid only) the terminating
    /// pods bound to a simulated node: their containers stop as soon as
    /// they are told to.
    async fn finish_terminating_pods(&self) {
        let simulated: HashSet<String> = self
            .state
            .nodes
            .all()
            .into_iter()
            .filter(|n| is_simulated(n))
            .map(|n| n.name_any())
            .collect();
        let to_finish: Vec<Arc<Pod>> = {
            let memory = self.memory();
            self.state
                .pods
                .all()
                .into_iter()
                .filter(|pod| {
                    pod.metadata.deletion_timestamp.is_some()
                        && bound_node(pod).is_some_and(|n| simulated.contains(&n))
                        && !memory.finished.contains(&pod.uid().unwrap_or_default())
                })
                .collect()
        };
        let deletes = to_finish.into_iter().map(|pod| self.finish(pod)).collect();
        all(deletes).await;
    }

    async fn finish(&self, pod: Arc<Pod>) -> Option<()> {
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let uid = pod.uid().unwrap_or_default();
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&pod.name_any(), &params).await {
            Ok(_) => {
                self.memory().finished.insert(uid);
                tracing::info!(pod = %pod_key(&pod), "pod terminated");
                Some(())
            }
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                self.memory().finished.insert(uid);
                None
            }
            Err(error) => {
                tracing::warn!(pod = %pod_key(&pod), %error, "cannot finish the pod's deletion; retrying");
                None
            }
        }
    }
}

/// Drives `writes`, at most [`PARALLEL_WRITES`] at once; what succeeded.
async fn all<T>(writes: Vec<impl Future<Output = Option<T>>>) -> Vec<T> {
    let done: Vec<Option<T>> = futures::stream::iter(writes)
        .buffer_unordered(PARALLEL_WRITES)
        .collect()
        .await;
    done.into_iter().flatten().collect()
}

fn bound_node(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|s| s.node_name.clone())
}

/// Whether an unbound pod is for this scheduler to place now.
fn is_ours_to_place(pod: &Pod) -> bool {
    let scheduler = pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref());
    scheduler.is_none_or(|s| s == SCHEDULER_NAME) && !pods::is_gated(pod) && pods::is_active(pod)
}
