//! One record per node per pass (Karpenter's `StateNode` as a disruption
//! pass sees it): the Node, its NodeClaim and NodePool, the pods bound to
//! it, its offering's price, its disruption costs, and whether it is
//! initialized, ready, marked or being deleted. Built once from the
//! cluster; candidates, budgets, `Balanced` totals and prices all read it,
//! and the offline passes mark records rather than editing objects.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod as K8sPod};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::types::Marks;
use crate::apis::conditions::{
    NODE_CLAIM_CONSOLIDATABLE, NODE_CLAIM_DRIFTED, NODE_CLAIM_INITIALIZED,
    NODE_CLAIM_INSTANCE_TERMINATING, find_condition, is_condition_true, node_is_ready,
};
use crate::apis::labels::{
    CAPACITY_TYPE_LABEL_KEY, INSTANCE_TYPE_LABEL_KEY, NODE_POOL_LABEL_KEY, ZONE_LABEL_KEY,
};
use crate::apis::{NodeClaim, NodePool};
use crate::cluster::pods::is_reschedulable;
use crate::cluster::{ClusterSnapshot, pod_key};
use crate::controllers::nodeclaim::marks::expires_at;
use crate::scheduling::{CapacityType, InstanceType, PodKey};

/// Each NodePool's instance types, by NodePool name.
pub type PoolTypes = BTreeMap<String, Arc<Vec<InstanceType>>>;

/// Karpenter's `PerNodeBaseDisruptionCost`: the cost of draining a node at
/// all (cordon, drain, replacement latency), before its pods.
pub const NODE_BASE_DISRUPTION_COST: f64 = 1.0;

/// A node as one disruption pass sees it.
#[derive(Clone, Debug)]
pub struct NodeRecord {
    /// The Node's name, what pods are bound by (the NodeClaim's while it
    /// has no Node).
    pub name: String,
    /// The Node, once registered.
    pub node: Option<Arc<Node>>,
    /// The NodeClaim that stands for it (by provider ID), if nodewright
    /// launched it.
    pub claim: Option<Arc<NodeClaim>>,
    /// `karpenter.sh/nodepool`, from the NodeClaim or else the Node.
    pub pool_name: Option<String>,
    /// The NodePool, when it exists.
    pub pool: Option<Arc<NodePool>>,
    /// `node.kubernetes.io/instance-type`, from the Node or else the
    /// NodeClaim.
    pub instance_type: Option<String>,
    /// `karpenter.sh/capacity-type`, likewise (`None` when absent or not a
    /// capacity type).
    pub capacity_type: Option<CapacityType>,
    /// `topology.kubernetes.io/zone`, likewise.
    pub zone: Option<String>,
    /// Hourly price of its offering in its NodePool's instance types (0
    /// when the catalog has none, as Karpenter's `resolveNodePrice`).
    pub price: f64,
    /// Every pod bound to it.
    pub pods: Vec<Arc<K8sPod>>,
    /// The pods that need room elsewhere before it goes.
    pub reschedulable: Vec<PodKey>,
    /// Karpenter's disruption cost: every pod's eviction cost times the
    /// share of the NodeClaim's lifetime left.
    pub disruption_cost: f64,
    /// Karpenter's `RescheduleDisruptionCost`: 1 plus the reschedulable
    /// pods' positive eviction costs.
    pub reschedule_cost: f64,
    /// The NodeClaim is `Initialized` (a node without one never is).
    pub initialized: bool,
    /// The Node's `Ready` condition is `True`.
    pub ready: bool,
    /// The NodeClaim's `InstanceTerminating` condition is true.
    pub instance_terminating: bool,
    /// The Node or the NodeClaim has a deletion timestamp.
    pub deleting: bool,
    /// A command marked it for deletion (the controller's state, or an
    /// earlier pass of the offline plan).
    pub marked: bool,
    /// Pods are nominated to it (a provisioning round or a replace command
    /// counts on it).
    pub nominated: bool,
    /// The NodeClaim's disruption marks.
    pub marks: Marks,
}

impl NodeRecord {
    /// Deleting, or marked for deletion by a command.
    pub fn is_disrupting(&self) -> bool {
        self.deleting || self.marked
    }

    /// Whether it may take displaced pods: a registered, ready node that,
    /// when nodewright launched it, is initialized and not disrupting
    /// (Karpenter's `UninitializedNodeError` otherwise).
    pub fn is_safe_destination(&self) -> bool {
        self.node.is_some()
            && self.ready
            && (self.claim.is_none() || self.initialized)
            && !self.is_disrupting()
    }
}

/// What a pass knows beyond the objects: each NodePool's instance types,
/// each NodeClaim's marks, and the nodes a command marked.
pub struct RecordInputs<'a> {
    /// Each NodePool's instance types, for prices.
    pub types: &'a PoolTypes,
    /// Each NodeClaim's marks, by name.
    pub marks: &'a dyn Fn(&NodeClaim) -> Marks,
    /// Nodes (or NodeClaims) marked for deletion by an earlier offline
    /// pass, by name.
    pub marked: &'a BTreeSet<String>,
    /// The time costs and expiry are judged at.
    pub now: Timestamp,
}

/// One record per Node, then one per NodeClaim without a Node, in the
/// snapshot's order.
pub fn records(snapshot: &ClusterSnapshot, inputs: &RecordInputs) -> Vec<NodeRecord> {
    let pools: HashMap<String, &Arc<NodePool>> = snapshot
        .node_pools
        .iter()
        .map(|p| (p.name_any(), p))
        .collect();
    let mut pods_by_node: HashMap<&str, Vec<Arc<K8sPod>>> = HashMap::new();
    for pod in &snapshot.pods {
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            pods_by_node.entry(node).or_default().push(pod.clone());
        }
    }
    let mut out = Vec::with_capacity(snapshot.nodes.len());
    let mut with_node = BTreeSet::new();
    for (node, claim) in snapshot.nodes_with_claims() {
        if let Some(claim) = claim {
            with_node.insert(claim.name_any());
        }
        let name = node.name_any();
        let pods = pods_by_node.remove(name.as_str()).unwrap_or_default();
        out.push(record(
            snapshot,
            inputs,
            &pools,
            name,
            Some(node),
            claim,
            pods,
        ));
    }
    for claim in &snapshot.node_claims {
        if with_node.contains(&claim.name_any()) {
            continue;
        }
        let name = claim.name_any();
        let pods = pods_by_node.remove(name.as_str()).unwrap_or_default();
        out.push(record(
            snapshot,
            inputs,
            &pools,
            name,
            None,
            Some(claim),
            pods,
        ));
    }
    out
}

fn record(
    snapshot: &ClusterSnapshot,
    inputs: &RecordInputs,
    pools: &HashMap<String, &Arc<NodePool>>,
    name: String,
    node: Option<&Arc<Node>>,
    claim: Option<&Arc<NodeClaim>>,
    pods: Vec<Arc<K8sPod>>,
) -> NodeRecord {
    // A label is read from the Node, or from the NodeClaim when the Node
    // lacks it (Karpenter's StateNode reads the NodeClaim's labels until
    // the Node is initialized).
    let label = |key: &str| -> Option<String> {
        node.and_then(|n| n.labels().get(key))
            .or_else(|| claim.and_then(|c| c.labels().get(key)))
            .cloned()
    };
    let pool_name = claim
        .and_then(|c| c.labels().get(NODE_POOL_LABEL_KEY).cloned())
        .or_else(|| label(NODE_POOL_LABEL_KEY));
    let pool = pool_name
        .as_ref()
        .and_then(|p| pools.get(p))
        .map(|p| Arc::clone(p));
    let instance_type = label(INSTANCE_TYPE_LABEL_KEY);
    let capacity_type =
        label(CAPACITY_TYPE_LABEL_KEY).and_then(|c| CapacityType::from_label_value(&c));
    let zone = label(ZONE_LABEL_KEY);
    let price = match (&pool_name, &instance_type, &zone, capacity_type) {
        (Some(pool), Some(ty), Some(zone), Some(ct)) => {
            offering_price(inputs.types, pool, ty, zone, ct)
        }
        _ => 0.0,
    };
    let conditions = claim
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let state = snapshot.state_nodes.as_ref().and_then(|s| s.get(&name));
    let reschedulable: Vec<&Arc<K8sPod>> = pods.iter().filter(|p| is_reschedulable(p)).collect();
    let lifetime = claim.map_or(1.0, |c| lifetime_remaining(c, inputs.now));
    NodeRecord {
        disruption_cost: pods.iter().map(|p| eviction_cost(p)).sum::<f64>() * lifetime,
        reschedule_cost: NODE_BASE_DISRUPTION_COST
            + reschedulable
                .iter()
                .map(|p| eviction_cost(p).max(0.0))
                .sum::<f64>(),
        reschedulable: reschedulable.iter().map(|p| pod_key(p)).collect(),
        initialized: is_condition_true(conditions, NODE_CLAIM_INITIALIZED),
        ready: node.is_some_and(|n| node_is_ready(n)),
        instance_terminating: is_condition_true(conditions, NODE_CLAIM_INSTANCE_TERMINATING),
        deleting: node.is_some_and(|n| n.metadata.deletion_timestamp.is_some())
            || claim.is_some_and(|c| c.metadata.deletion_timestamp.is_some()),
        marked: inputs.marked.contains(&name) || state.is_some_and(|s| s.marked_for_deletion),
        nominated: state.is_some_and(|s| s.nominated),
        marks: claim.map(|c| (inputs.marks)(c)).unwrap_or_default(),
        name,
        node: node.cloned(),
        claim: claim.cloned(),
        pool_name,
        pool,
        instance_type,
        capacity_type,
        zone,
        price,
        pods,
    }
}

/// The hourly price of `instance_type` in `zone` with `capacity_type`
/// among `pool`'s instance types (Karpenter's `OfferingPrice`: the
/// cheapest such offering; 0 when the catalog has none).
pub fn offering_price(
    types: &PoolTypes,
    pool: &str,
    instance_type: &str,
    zone: &str,
    capacity_type: CapacityType,
) -> f64 {
    types
        .get(pool)
        .and_then(|types| types.iter().find(|t| t.name == instance_type))
        .and_then(|t| {
            t.offerings
                .iter()
                .filter(|o| o.zone == zone && o.capacity_type == capacity_type)
                .map(|o| o.price)
                .filter(|p| !p.is_nan())
                .min_by(f64::total_cmp)
        })
        .unwrap_or(0.0)
}

/// Karpenter's `EvictionCost`: 1, plus the pod's deletion cost and
/// priority scaled down, clamped to [-10, 10].
pub fn eviction_cost(pod: &K8sPod) -> f64 {
    let mut cost = 1.0;
    if let Some(deletion) = pod
        .annotations()
        .get("controller.kubernetes.io/pod-deletion-cost")
        .and_then(|v| v.parse::<f64>().ok())
    {
        cost += deletion / 2f64.powi(27);
    }
    if let Some(priority) = pod.spec.as_ref().and_then(|s| s.priority) {
        cost += f64::from(priority) / 2f64.powi(25);
    }
    cost.clamp(-10.0, 10.0)
}

/// Karpenter's `LifetimeRemaining`: the share of `expireAfter` left (1
/// without expiry), in [0, 1].
pub fn lifetime_remaining(claim: &NodeClaim, now: Timestamp) -> f64 {
    let (Ok(Some(expiry)), Some(created)) = (
        expires_at(claim),
        claim.metadata.creation_timestamp.as_ref(),
    ) else {
        return 1.0;
    };
    let total = expiry.duration_since(created.0).as_secs_f64();
    if total <= 0.0 {
        return 0.0;
    }
    (expiry.duration_since(now).as_secs_f64() / total).clamp(0.0, 1.0)
}

/// A NodeClaim's marks as its conditions hold them (the controller's
/// source; expiry is the expiration controller's, never marked here).
pub fn marks_from_conditions(claim: &NodeClaim) -> Marks {
    let conditions = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    Marks {
        consolidatable: is_condition_true(conditions, NODE_CLAIM_CONSOLIDATABLE),
        drifted: find_condition(conditions, NODE_CLAIM_DRIFTED)
            .filter(|c| c.is_true())
            .map(|c| c.reason.clone().unwrap_or_else(|| "Drifted".to_string())),
        expired: false,
    }
}
