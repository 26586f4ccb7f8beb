//! The in-memory cluster view the controllers share (Karpenter's
//! `state.Cluster`): one watch per kind feeding a reflector store that every
//! controller reads, so no controller lists the API server on each
//! reconcile; a change feed per kind that controllers are triggered from;
//! and what the API server does not know yet — NodeClaims created but not
//! yet seen in a watch, pods nominated to a NodeClaim or Node that has not
//! taken them, nodes marked for deletion — so a pod is never provisioned for
//! twice.
//!
//! Objects are stored without `managedFields`, which controllers never read
//! and which is often the largest part of a pod.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt, future::BoxFuture};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;

use super::nodes::{NodeRecords, StateNode};
use super::{ClusterSnapshot, pod_key};
use crate::apis::{EC2NodeClass, NodeClaim, NodePool};
use crate::cloudprovider::NodeClassContext;
use crate::extensions::is_config_map;
use crate::scheduling::PodKey;

/// Changes kept for a slow subscriber before it falls behind and is sent a
/// full resync instead.
const CHANGE_BUFFER: usize = 4096;

/// What a watch tells the per-node records, after its store changed and
/// before anyone hears of it.
enum Change<K> {
    Applied(Arc<K>),
    Deleted(Arc<K>),
    /// A (re)list finished: the store holds these.
    Listed(Vec<Arc<K>>),
}

/// A kind's hook into the per-node records.
type Hook<K> = Box<dyn Fn(Change<K>) + Send + Sync>;

/// One kind's store and change feed.
pub struct Watched<K: Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    changes: broadcast::Sender<Arc<K>>,
}

impl<K> Watched<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    /// Every object, as last seen.
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// Every object, as last seen.
    pub fn all(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    /// Every stored object, then objects as they are created, changed or
    /// deleted (a deleted object is sent as last seen) — so a controller
    /// that starts late (a replica that just became leader) looks at what
    /// exists, not only at what changes after it started. A subscriber that
    /// falls more than [`CHANGE_BUFFER`] changes behind gets every stored
    /// object again.
    pub fn changes(&self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        // Subscribed before the stored objects are read: a change in
        // between is seen twice rather than never.
        let receiver = self.changes.subscribe();
        let existing = self.store.state();
        let store = self.store.clone();
        let live = futures::stream::unfold(receiver, move |mut receiver| {
            let store = store.clone();
            async move {
                match receiver.recv().await {
                    Ok(object) => Some((vec![object], receiver)),
                    Err(broadcast::error::RecvError::Lagged(_)) => Some((store.state(), receiver)),
                    Err(broadcast::error::RecvError::Closed) => None,
                }
            }
        });
        futures::stream::iter(vec![existing])
            .chain(live)
            .flat_map(futures::stream::iter)
    }
}

/// How many reported NodeClaim names [`Tracking`] remembers.
const WATCHED_CLAIMS: usize = 256;

/// What the cluster state tracks beyond what the API server holds.
#[derive(Debug, Default)]
struct Tracking {
    /// Pod → (NodeClaim or Node name, until when the nomination holds).
    nominations: HashMap<PodKey, (String, Instant)>,
    /// NodeClaims created here and not yet seen in the NodeClaim store.
    created: BTreeMap<String, Arc<NodeClaim>>,
    /// The last [`WATCHED_CLAIMS`] NodeClaim names the watch reported, so a
    /// creation recorded after its claim was already seen (and perhaps
    /// deleted) is not kept.
    watched_claims: std::collections::VecDeque<String>,
    /// Nodes (by name) a controller is about to delete or drain.
    marked_for_deletion: BTreeSet<String>,
    /// Nodes or NodeClaims (by name) held for pods on their way to them,
    /// until when (a disruption's replacement while its candidates drain).
    nominated_nodes: HashMap<String, Instant>,
}

/// The shared cluster view.
pub struct ClusterState {
    /// Nodes.
    pub nodes: Watched<Node>,
    /// NodeClaims.
    pub node_claims: Watched<NodeClaim>,
    /// Pods.
    pub pods: Watched<Pod>,
    /// NodePools.
    pub node_pools: Watched<NodePool>,
    /// EC2NodeClasses.
    pub node_classes: Watched<EC2NodeClass>,
    /// DaemonSets.
    pub daemon_sets: Watched<DaemonSet>,
    /// PodDisruptionBudgets.
    pub pdbs: Watched<PodDisruptionBudget>,
    /// Namespaces.
    pub namespaces: Watched<Namespace>,
    /// ConfigMaps (extension modules may be stored in them).
    pub config_maps: Watched<ConfigMap>,
    /// One record per node, kept current by the Node, NodeClaim and pod watches.
    records: Arc<Mutex<NodeRecords>>,
    tracking: Arc<Mutex<Tracking>>,
    /// Bumped by every watched change and every change to the tracking.
    change_count: Arc<AtomicU64>,
    /// `true` once every store holds its first list. One task waits on the
    /// stores (a store's readiness wakes only one of several waiters);
    /// everyone else waits on this.
    synced: tokio::sync::watch::Sender<bool>,
}

/// Drives every watch of a [`ClusterState`]; it ends only when the process does.
pub type StateDriver = BoxFuture<'static, ()>;

impl ClusterState {
    /// Starts watching the cluster behind `client`. Poll the returned driver
    /// (spawn it) for the stores to fill; [`ClusterState::synced`] waits for
    /// every first list.
    pub fn start(client: Client) -> (Arc<ClusterState>, StateDriver) {
        let mut drivers = Vec::new();
        let change_count = Arc::new(AtomicU64::new(0));
        let records = Arc::new(Mutex::new(NodeRecords::default()));
        let tracking = Arc::new(Mutex::new(Tracking::default()));
        let count = &change_count;
        let d = &mut drivers;
        let state = ClusterState {
            nodes: watched(Api::all(client.clone()), count, d, node_hook(&records)),
            node_claims: watched(
                Api::all(client.clone()),
                count,
                d,
                claim_hook(&records, &tracking),
            ),
            pods: watched(Api::all(client.clone()), count, d, pod_hook(&records)),
            node_pools: watched(Api::all(client.clone()), count, d, None),
            node_classes: watched(Api::all(client.clone()), count, d, None),
            daemon_sets: watched(Api::all(client.clone()), count, d, None),
            pdbs: watched(Api::all(client.clone()), count, d, None),
            namespaces: watched(Api::all(client.clone()), count, d, None),
            config_maps: watched(Api::all(client), count, d, None),
            records,
            tracking,
            change_count,
            synced: tokio::sync::watch::Sender::new(false),
        };
        let state = Arc::new(state);
        let lists = {
            let state = state.clone();
            async move {
                state.first_lists().await;
                state.synced.send_replace(true);
            }
        };
        let driver = Box::pin(async move {
            futures::future::join(futures::future::join_all(drivers), lists).await;
        });
        (state, driver)
    }

    /// Waits until every store holds its first full list. Any number of
    /// tasks may wait at once.
    pub async fn synced(&self) {
        let mut synced = self.synced.subscribe();
        // The sender lives as long as the state does.
        let _ = synced.wait_for(|done| *done).await;
    }

    /// Waits for every store's first list; run by one task only.
    async fn first_lists(&self) {
        // A dropped writer means the driver ended; the stores stay as they were.
        let _ = self.nodes.store.wait_until_ready().await;
        let _ = self.node_claims.store.wait_until_ready().await;
        let _ = self.pods.store.wait_until_ready().await;
        let _ = self.node_pools.store.wait_until_ready().await;
        let _ = self.node_classes.store.wait_until_ready().await;
        let _ = self.daemon_sets.store.wait_until_ready().await;
        let _ = self.pdbs.store.wait_until_ready().await;
        let _ = self.namespaces.store.wait_until_ready().await;
        let _ = self.config_maps.store.wait_until_ready().await;
    }

    fn tracking(&self) -> std::sync::MutexGuard<'_, Tracking> {
        // The tracked data stays consistent even if a holder panicked.
        self.tracking.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn records(&self) -> std::sync::MutexGuard<'_, NodeRecords> {
        lock(&self.records)
    }

    /// Node `name`'s record as the watches last showed it (whether it is
    /// marked for deletion or nominated to is in [`ClusterState::snapshot`]'s).
    pub fn state_node(&self, name: &str) -> Option<StateNode> {
        self.records().get(name).cloned()
    }

    /// NodeClaims whose `status.providerID` `wanted` accepts, each with its
    /// Node if registered: a lookup for many events at once (an
    /// interruption batch) that copies only what it returns.
    pub fn claims_with_provider_id(
        &self,
        wanted: impl FnMut(&str) -> bool,
    ) -> Vec<(Arc<NodeClaim>, Option<Arc<Node>>)> {
        self.records().claims_with_provider_id(wanted)
    }

    /// The NodeClaims of each instance in `instances` (the last segment of
    /// their providerID), each with its Node if registered: looked up by
    /// index, so a batch of interruption messages costs what it names.
    pub fn claims_of_instances<'a>(
        &self,
        instances: impl IntoIterator<Item = &'a str>,
    ) -> Vec<(Arc<NodeClaim>, Option<Arc<Node>>)> {
        let records = self.records();
        instances
            .into_iter()
            .flat_map(|id| records.claims_of_instance(id))
            .collect()
    }

    /// The tracking, to change it: counted as a change.
    fn tracking_mut(&self) -> std::sync::MutexGuard<'_, Tracking> {
        self.change_count.fetch_add(1, Ordering::SeqCst);
        self.tracking()
    }

    /// A number that changes whenever a watched object or the tracking
    /// (nominations, created NodeClaims, marks for deletion) changes: a
    /// decision computed from a snapshot taken after reading it still holds
    /// while it reads the same (only time has passed).
    pub fn change_count(&self) -> u64 {
        self.change_count.load(Ordering::SeqCst)
    }

    /// Records that `pod` is planned onto `target` (a
    /// NodeClaim or Node) for `period`: until it binds or the period ends
    /// (or, for a NodeClaim still launching, until it launches or is
    /// deleted), it is not provisioned for again.
    pub fn nominate(&self, pod: &PodKey, target: &str, period: Duration) {
        self.nominate_all([pod], target, period);
    }

    /// [`ClusterState::nominate`] for many pods at once (a new NodeClaim's),
    /// under one lock.
    pub fn nominate_all<'a>(
        &self,
        pods: impl IntoIterator<Item = &'a PodKey>,
        target: &str,
        period: Duration,
    ) {
        let until = Instant::now() + period;
        let mut tracking = self.tracking_mut();
        for pod in pods {
            tracking
                .nominations
                .insert(pod.clone(), (target.to_string(), until));
        }
    }

    /// Holds node or NodeClaim `name` for pods on their way to it for
    /// `period` (Karpenter's node nomination): until then it is no
    /// disruption candidate.
    pub fn nominate_node(&self, name: &str, period: Duration) {
        let until = Instant::now() + period;
        self.tracking_mut()
            .nominated_nodes
            .insert(name.to_string(), until);
    }

    /// Where `pod` is nominated, while the nomination holds.
    pub fn nomination(&self, pod: &PodKey) -> Option<String> {
        let now = Instant::now();
        self.tracking()
            .nominations
            .get(pod)
            .filter(|(_, until)| *until > now)
            .map(|(target, _)| target.clone())
    }

    /// Drops every nomination to `target` (a NodeClaim that was deleted
    /// before its node came up), so its pods are provisioned again.
    pub fn release_nominations(&self, target: &str) {
        self.tracking_mut()
            .nominations
            .retain(|_, (nominee, _)| nominee != target);
    }

    /// Records a NodeClaim this process created, until the watch shows it.
    pub fn record_created(&self, claim: NodeClaim) {
        let name = claim.name_any();
        let mut tracking = self.tracking_mut();
        if !tracking.watched_claims.contains(&name) {
            tracking.created.insert(name, Arc::new(claim));
        }
    }

    /// Whether NodeClaim `name` was created here and the watch has not
    /// shown it yet.
    pub fn is_created_unwatched(&self, name: &str) -> bool {
        self.tracking().created.contains_key(name)
            && self
                .node_claims
                .store()
                .get(&kube::runtime::reflector::ObjectRef::new(name))
                .is_none()
    }

    /// Marks a node as about to be deleted: it takes no new pods.
    pub fn mark_for_deletion(&self, node: &str) {
        self.tracking_mut()
            .marked_for_deletion
            .insert(node.to_string());
    }

    /// Takes back [`ClusterState::mark_for_deletion`].
    pub fn unmark_for_deletion(&self, node: &str) {
        self.tracking_mut().marked_for_deletion.remove(node);
    }

    /// Whether a node is marked for deletion (here or by its deletionTimestamp).
    pub fn is_marked_for_deletion(&self, node: &Node) -> bool {
        node.metadata.deletion_timestamp.is_some()
            || self
                .tracking()
                .marked_for_deletion
                .contains(&node.name_any())
    }

    /// EC2NodeClass `name` with the ConfigMaps its extension modules are
    /// stored in, for a cloud provider call; `None` when the class does not exist.
    pub fn node_class_context(&self, name: &str) -> Option<NodeClassContext> {
        let class = self
            .node_classes
            .store
            .get(&kube::runtime::reflector::ObjectRef::new(name))?;
        let config_maps = self.config_maps_of(&class);
        Some(NodeClassContext {
            class,
            config_maps: Arc::new(config_maps),
        })
    }

    /// The stored ConfigMaps that `class`'s extensions reference (a missing
    /// one is reported by the module that needs it).
    pub fn config_maps_of(&self, class: &EC2NodeClass) -> Vec<ConfigMap> {
        let effective = class.spec.effective_extensions().ok();
        let referenced = effective
            .as_ref()
            .map(|e| e.config_map_references())
            .unwrap_or_default();
        if referenced.is_empty() {
            return Vec::new();
        }
        self.config_maps
            .all()
            .into_iter()
            .filter(|cm| {
                referenced
                    .iter()
                    .any(|(namespace, name)| is_config_map(cm, namespace, name))
            })
            .map(|cm| ConfigMap::clone(&cm))
            .collect()
    }

    /// Names of the stored NodePools whose template uses EC2NodeClass
    /// `class`, sorted.
    pub fn node_pools_of(&self, class: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .node_pools
            .all()
            .iter()
            .filter(|p| p.spec.template.spec.node_class_ref.name == class)
            .map(|p| p.name_any())
            .collect();
        names.sort();
        names
    }

    /// The cluster as a provisioning decision sees it now: the stores,
    /// NodeClaims created here but not yet watched, active nominations of
    /// pods not yet bound, and nodes marked for deletion flagged as being
    /// deleted.
    pub fn snapshot(&self) -> ClusterSnapshot {
        let now = Instant::now();
        let mut node_claims = self.node_claims.all();
        let pods = self.pods.all();
        let mut tracking = self.tracking();
        let seen: BTreeSet<String> = node_claims.iter().map(|c| c.name_any()).collect();
        tracking.created.retain(|name, _| !seen.contains(name));
        node_claims.extend(tracking.created.values().cloned());
        let bound: BTreeSet<PodKey> = pods
            .iter()
            .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
            .map(|p| pod_key(p))
            .collect();
        // A nomination to a NodeClaim still launching holds past its period:
        // the claim offers no capacity to place the pod on until it launches.
        let launching: BTreeSet<String> = node_claims
            .iter()
            .filter(|c| c.status.as_ref().is_none_or(|s| s.allocatable.is_none()))
            .map(|c| c.name_any())
            .collect();
        tracking.nominations.retain(|pod, (target, until)| {
            !bound.contains(pod) && (*until > now || launching.contains(target))
        });
        let nominated = tracking
            .nominations
            .iter()
            .map(|(pod, (target, _))| (pod.clone(), target.clone()))
            .collect();
        let marked = tracking.marked_for_deletion.clone();
        tracking.nominated_nodes.retain(|_, until| *until > now);
        let mut nominees: BTreeSet<String> = tracking
            .nominations
            .values()
            .map(|(n, _)| n.clone())
            .collect();
        nominees.extend(tracking.nominated_nodes.keys().cloned());
        let mut state_nodes = self.records().all();
        for (name, record) in &mut state_nodes {
            record.marked_for_deletion = marked.contains(name)
                || record
                    .node()
                    .is_some_and(|n| n.metadata.deletion_timestamp.is_some());
            record.nominated = nominees.contains(name);
        }
        drop(nominees);
        drop(tracking);
        let nodes = self
            .nodes
            .all()
            .into_iter()
            .map(|node| {
                if marked.contains(&node.name_any()) && node.metadata.deletion_timestamp.is_none() {
                    let mut flagged = Node::clone(&node);
                    flagged.metadata.deletion_timestamp =
                        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                            k8s_openapi::jiff::Timestamp::now(),
                        ));
                    Arc::new(flagged)
                } else {
                    node
                }
            })
            .collect();
        ClusterSnapshot {
            node_pools: self.node_pools.all(),
            node_classes: self.node_classes.all(),
            node_claims,
            nodes,
            pods,
            daemon_sets: self.daemon_sets.all(),
            namespaces: self.namespaces.all(),
            pdbs: self.pdbs.all(),
            config_maps: self.config_maps.all(),
            nominated,
            state_nodes: Some(state_nodes),
        }
    }
}

/// `object` as the store holds it, so a change waiting in the feed is not a
/// second copy of a stored object; `object` itself when it is no longer
/// stored (a deleted object).
fn shared<K>(store: &Store<K>, object: K) -> Arc<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    match store.get(&reflector::ObjectRef::from_obj(&object)) {
        Some(stored) if stored.resource_version() == object.resource_version() => stored,
        _ => Arc::new(object),
    }
}

/// A store and change feed for `api`'s kind, and the future that drives its
/// watch (pushed onto `drivers`), which tells `hook` of every change and
/// then bumps `change_count`.
fn watched<K>(
    api: Api<K>,
    change_count: &Arc<AtomicU64>,
    drivers: &mut Vec<StateDriver>,
    hook: Option<Hook<K>>,
) -> Watched<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let (changes, _) = broadcast::channel(CHANGE_BUFFER);
    let sender = changes.clone();
    let stored = store.clone();
    let change_count = change_count.clone();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|object: &mut K| object.managed_fields_mut().clear())
        .reflect(writer);
    drivers.push(Box::pin(async move {
        let mut stream = std::pin::pin!(stream);
        // What the store held when a (re)list began: after it, whatever the
        // list no longer holds is sent as deleted.
        let mut before_list: Vec<Arc<K>> = Vec::new();
        while let Some(event) = stream.next().await {
            let tell = |change: Change<K>| {
                if let Some(hook) = &hook {
                    hook(change);
                }
            };
            // Nobody listening is fine: the store is updated all the same.
            match event {
                Ok(watcher::Event::Apply(object)) => {
                    let object = shared(&stored, object);
                    tell(Change::Applied(object.clone()));
                    // After the store changed, before anyone hears of it.
                    change_count.fetch_add(1, Ordering::SeqCst);
                    let _ = sender.send(object);
                }
                Ok(watcher::Event::Delete(object)) => {
                    let object = shared(&stored, object);
                    tell(Change::Deleted(object.clone()));
                    change_count.fetch_add(1, Ordering::SeqCst);
                    let _ = sender.send(object);
                }
                Ok(watcher::Event::Init) => before_list = stored.state(),
                // Listed objects are sent once the store holds the whole
                // list: a subscriber that falls behind and reads the store
                // instead then sees the list, not the store before it.
                Ok(watcher::Event::InitApply(_)) => {}
                Ok(watcher::Event::InitDone) => {
                    let listed = stored.state();
                    tell(Change::Listed(listed.clone()));
                    change_count.fetch_add(1, Ordering::SeqCst);
                    for object in std::mem::take(&mut before_list) {
                        if stored
                            .get(&reflector::ObjectRef::from_obj(&*object))
                            .is_none()
                        {
                            let _ = sender.send(object);
                        }
                    }
                    for object in listed {
                        let _ = sender.send(object);
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, kind = %K::kind(&()), "watch failed; retrying")
                }
            }
        }
    }));
    Watched { store, changes }
}

/// `mutex`'s data; plain data stays consistent even if a holder panicked.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps the records' Nodes current.
fn node_hook(records: &Arc<Mutex<NodeRecords>>) -> Option<Hook<Node>> {
    let records = records.clone();
    Some(Box::new(move |change: Change<Node>| match change {
        Change::Applied(node) => lock(&records).apply_node(node),
        Change::Deleted(node) => lock(&records).delete_node(&node),
        Change::Listed(nodes) => lock(&records).relist_nodes(nodes),
    }))
}

/// Keeps the records' NodeClaims current.
/// Keeps the records' NodeClaims current, and forgets a NodeClaim created
/// here once the watch has reported it — created or deleted: one deleted
/// before the store ever held it (a launch that failed at once) must not
/// stay behind as capacity that pods wait for.
fn claim_hook(
    records: &Arc<Mutex<NodeRecords>>,
    tracking: &Arc<Mutex<Tracking>>,
) -> Option<Hook<NodeClaim>> {
    let records = records.clone();
    let tracking = tracking.clone();
    Some(Box::new(move |change: Change<NodeClaim>| match change {
        Change::Applied(claim) => {
            lock(&tracking).watched(claim.name_any());
            lock(&records).apply_claim(claim);
        }
        Change::Deleted(claim) => {
            lock(&tracking).watched(claim.name_any());
            lock(&records).delete_claim(&claim);
        }
        Change::Listed(claims) => lock(&records).relist_claims(claims),
    }))
}

impl Tracking {
    /// The watch reported NodeClaim `name`: it is no longer only ours.
    fn watched(&mut self, name: String) {
        self.created.remove(&name);
        if !self.watched_claims.contains(&name) {
            if self.watched_claims.len() >= WATCHED_CLAIMS {
                self.watched_claims.pop_front();
            }
            self.watched_claims.push_back(name);
        }
    }
}

/// Keeps the records' bound pods current.
fn pod_hook(records: &Arc<Mutex<NodeRecords>>) -> Option<Hook<Pod>> {
    let records = records.clone();
    Some(Box::new(move |change: Change<Pod>| match change {
        Change::Applied(pod) => lock(&records).apply_pod(pod),
        Change::Deleted(pod) => lock(&records).delete_pod(&pod),
        Change::Listed(pods) => lock(&records).relist_pods(pods),
    }))
}
