//! Which nodes a disruption pass may consider (Karpenter's
//! `NewCandidate`): a node of a known NodePool with its NodeClaim,
//! initialized, not already being disrupted, not held by a
//! `karpenter.sh/do-not-disrupt` annotation on it or on one of its pods, and
//! whose pods no PodDisruptionBudget keeps. Every other node is kept, with
//! the first reason that kept it and a message saying what to change.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod as K8sPod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::marking::expires_at;
use crate::apis::conditions::{NODE_CLAIM_INITIALIZED, is_condition_true};
use crate::apis::labels::{
    CAPACITY_TYPE_LABEL_KEY, DO_NOT_DISRUPT_ANNOTATION_KEY, INSTANCE_TYPE_LABEL_KEY,
    NODE_POOL_LABEL_KEY, ZONE_LABEL_KEY,
};
use crate::apis::{NodeClaim, NodePool};
use crate::cluster::pods::{do_not_disrupt_active_at, is_reschedulable};
use crate::cluster::{ClusterSnapshot, pod_key};
use crate::scheduling::convert::label_selector;
use crate::scheduling::{InstanceType, PodKey};

/// Why a node is in no disruption decision (the `kept[].reason` of
/// `simulate --disruption`), in the order they are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeptReason {
    /// No NodePool label, an unknown NodePool, or no NodeClaim.
    NotManaged,
    /// Not initialized yet.
    NotInitialized,
    /// Being deleted, or marked for deletion by another command.
    AlreadyDisrupting,
    /// `karpenter.sh/do-not-disrupt` on the node or one of its pods.
    DoNotDisrupt,
    /// A PodDisruptionBudget keeps one of its pods.
    Pdb,
    /// The NodePool's policy keeps it (`WhenEmpty` on a non-empty node,
    /// `consolidateAfter: Never`, a static NodePool).
    Policy,
    /// Not `Consolidatable` (`consolidateAfter` has not passed).
    NotConsolidatable,
    /// The NodePool's disruption budget is used up.
    Budget,
    /// Its pods would not all fit elsewhere.
    PodsDoNotFit,
    /// No replacement would be cheaper.
    NoCheaperOption,
    /// A spot node would only be replaced by spot (needs the
    /// `SpotToSpotConsolidation` gate and enough cheaper types).
    SpotToSpot,
    /// A replacement would break the NodePool's `minValues`.
    MinValues,
}

impl KeptReason {
    /// The reason as `simulate --disruption` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            KeptReason::NotManaged => "not-managed",
            KeptReason::NotInitialized => "not-initialized",
            KeptReason::AlreadyDisrupting => "already-disrupting",
            KeptReason::DoNotDisrupt => "do-not-disrupt",
            KeptReason::Pdb => "pdb",
            KeptReason::Policy => "policy",
            KeptReason::NotConsolidatable => "not-consolidatable",
            KeptReason::Budget => "budget",
            KeptReason::PodsDoNotFit => "pods-do-not-fit",
            KeptReason::NoCheaperOption => "no-cheaper-option",
            KeptReason::SpotToSpot => "spot-to-spot",
            KeptReason::MinValues => "min-values",
        }
    }
}

/// A node no decision takes, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Kept {
    /// The Node's name (the NodeClaim's when it has no Node).
    pub node: String,
    /// The NodeClaim, if any.
    pub node_claim: Option<String>,
    /// Its NodePool, if known.
    pub node_pool: Option<String>,
    /// The first reason that kept it.
    pub reason: KeptReason,
    /// What a user would change.
    pub message: String,
}

/// What the disruption marks say of a NodeClaim (computed by the caller:
/// read from its conditions in the controller, recomputed offline).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Marks {
    /// `Consolidatable` holds.
    pub consolidatable: bool,
    /// `Drifted` holds, with this reason.
    pub drifted: Option<String>,
}

/// A node a disruption method may take.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The Node's name: what pods are bound by.
    pub name: String,
    /// Its NodeClaim.
    pub node_claim: Arc<NodeClaim>,
    /// Its NodePool.
    pub node_pool: Arc<NodePool>,
    /// `node.kubernetes.io/instance-type`.
    pub instance_type: String,
    /// `karpenter.sh/capacity-type`.
    pub capacity_type: String,
    /// `topology.kubernetes.io/zone`.
    pub zone: String,
    /// Hourly price of its offering (0 when the catalog has none).
    pub price: f64,
    /// The pods that need room elsewhere before it goes.
    pub pods: Vec<PodKey>,
    /// Karpenter's disruption cost: the pods' eviction costs times the
    /// share of its lifetime left; cheaper candidates go first.
    pub disruption_cost: f64,
    /// Karpenter's `RescheduleDisruptionCost`, what `Balanced` weighs: 1
    /// for the node plus its pods' positive eviction costs.
    pub reschedule_cost: f64,
    /// Its marks.
    pub marks: Marks,
}

/// The snapshot's nodes split into candidates and kept nodes, at `now`.
/// `types` are each NodePool's instance types (for prices); `marks` gives
/// each NodeClaim's marks.
pub fn candidates(
    snapshot: &ClusterSnapshot,
    types: &BTreeMap<String, Arc<Vec<InstanceType>>>,
    marks: impl Fn(&NodeClaim, &NodePool) -> Marks,
    now: Timestamp,
) -> (Vec<Candidate>, Vec<Kept>) {
    let pools: BTreeMap<String, &Arc<NodePool>> = snapshot
        .node_pools
        .iter()
        .map(|p| (p.name_any(), p))
        .collect();
    let mut pods_by_node: BTreeMap<&str, Vec<&Arc<K8sPod>>> = BTreeMap::new();
    for pod in &snapshot.pods {
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            pods_by_node.entry(node).or_default().push(pod);
        }
    }
    let mut out = Vec::new();
    let mut kept = Vec::new();
    let mut with_node = std::collections::BTreeSet::new();
    for (node, claim) in snapshot.nodes_with_claims() {
        let name = node.name_any();
        if let Some(claim) = claim {
            with_node.insert(claim.name_any());
        }
        let pods = pods_by_node.remove(name.as_str()).unwrap_or_default();
        match candidate(node, claim, &pools, &pods, snapshot, types, &marks, now) {
            Ok(c) => out.push(c),
            Err((reason, message)) => kept.push(Kept {
                node: name,
                node_claim: claim.map(|c| c.name_any()),
                node_pool: claim
                    .and_then(|c| c.labels().get(NODE_POOL_LABEL_KEY).cloned())
                    .or_else(|| node.labels().get(NODE_POOL_LABEL_KEY).cloned()),
                reason,
                message,
            }),
        }
    }
    // NodeClaims without a Node are launching: nothing to disrupt yet.
    for claim in &snapshot.node_claims {
        if !with_node.contains(&claim.name_any()) {
            kept.push(Kept {
                node: claim.name_any(),
                node_claim: Some(claim.name_any()),
                node_pool: claim.labels().get(NODE_POOL_LABEL_KEY).cloned(),
                reason: KeptReason::NotInitialized,
                message: "the NodeClaim has no Node yet".to_string(),
            });
        }
    }
    out.sort_by(|a, b| {
        a.disruption_cost
            .total_cmp(&b.disruption_cost)
            .then_with(|| a.name.cmp(&b.name))
    });
    (out, kept)
}

type Refusal = (KeptReason, String);

#[allow(clippy::too_many_arguments)]
fn candidate(
    node: &Arc<Node>,
    claim: Option<&Arc<NodeClaim>>,
    pools: &BTreeMap<String, &Arc<NodePool>>,
    pods: &[&Arc<K8sPod>],
    snapshot: &ClusterSnapshot,
    types: &BTreeMap<String, Arc<Vec<InstanceType>>>,
    marks: &impl Fn(&NodeClaim, &NodePool) -> Marks,
    now: Timestamp,
) -> Result<Candidate, Refusal> {
    let Some(claim) = claim else {
        return Err((
            KeptReason::NotManaged,
            "no NodeClaim has this Node's providerID; nodewright disrupts only the nodes it launched".to_string(),
        ));
    };
    let Some(pool_name) = claim.labels().get(NODE_POOL_LABEL_KEY) else {
        return Err((
            KeptReason::NotManaged,
            format!("the NodeClaim has no {NODE_POOL_LABEL_KEY} label"),
        ));
    };
    let Some(pool) = pools.get(pool_name) else {
        return Err((
            KeptReason::NotManaged,
            format!("NodePool {pool_name:?} does not exist; its nodes are left alone"),
        ));
    };
    let claim_conditions = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    if !is_condition_true(claim_conditions, NODE_CLAIM_INITIALIZED) {
        return Err((
            KeptReason::NotInitialized,
            "the NodeClaim is not initialized yet".to_string(),
        ));
    }
    let label = |key: &str| claim.labels().get(key).or_else(|| node.labels().get(key));
    let (Some(instance_type), Some(capacity_type), Some(zone)) = (
        label(INSTANCE_TYPE_LABEL_KEY),
        label(CAPACITY_TYPE_LABEL_KEY),
        label(ZONE_LABEL_KEY),
    ) else {
        return Err((
            KeptReason::NotManaged,
            format!(
                "the node lacks one of {INSTANCE_TYPE_LABEL_KEY}, {CAPACITY_TYPE_LABEL_KEY}, {ZONE_LABEL_KEY}"
            ),
        ));
    };
    if claim.metadata.deletion_timestamp.is_some() || node.metadata.deletion_timestamp.is_some() {
        return Err((
            KeptReason::AlreadyDisrupting,
            "the node is already being deleted".to_string(),
        ));
    }
    if snapshot
        .state_nodes
        .as_ref()
        .and_then(|records| records.get(&node.name_any()))
        .is_some_and(|r| r.marked_for_deletion || r.nominated)
    {
        return Err((
            KeptReason::AlreadyDisrupting,
            "another command is disrupting the node, or pods are nominated to it".to_string(),
        ));
    }
    // Expiration is forceful: holds are for the drain, not the decision.
    let expired = expires_at(claim).ok().flatten().is_some_and(|e| e <= now);
    if !expired
        && node.annotations().get(DO_NOT_DISRUPT_ANNOTATION_KEY) == Some(&"true".to_string())
    {
        return Err((
            KeptReason::DoNotDisrupt,
            format!(
                "the Node has {DO_NOT_DISRUPT_ANNOTATION_KEY}: \"true\"; remove it to let the node go"
            ),
        ));
    }
    let seconds = now.as_second();
    let held = pods.iter().find(|p| do_not_disrupt_active_at(p, seconds));
    if !expired && let Some(pod) = held {
        return Err((
            KeptReason::DoNotDisrupt,
            format!(
                "pod {} has {DO_NOT_DISRUPT_ANNOTATION_KEY}; the node stays while it runs",
                pod_key(pod)
            ),
        ));
    }
    let reschedulable: Vec<&Arc<K8sPod>> = pods
        .iter()
        .copied()
        .filter(|p| is_reschedulable(p))
        .collect();
    if !expired && let Some(message) = pdb_blocks(&reschedulable, &snapshot.pdbs) {
        return Err((KeptReason::Pdb, message));
    }
    let price = offering_price(types, pool_name, instance_type, zone, capacity_type);
    let cost: f64 = reschedulable.iter().map(|p| eviction_cost(p)).sum();
    Ok(Candidate {
        name: node.name_any(),
        node_claim: claim.clone(),
        node_pool: Arc::clone(pool),
        instance_type: instance_type.clone(),
        capacity_type: capacity_type.clone(),
        zone: zone.clone(),
        price,
        pods: reschedulable.iter().map(|p| pod_key(p)).collect(),
        disruption_cost: cost * lifetime_remaining(claim, now),
        reschedule_cost: super::balanced::node_disruption_cost(reschedulable.iter().copied()),
        marks: marks(claim, pool),
    })
}

/// The hourly price of `instance_type` in `zone` with `capacity_type`
/// among `pool`'s instance types (the cheapest such offering; 0 when the
/// catalog has none).
pub fn offering_price(
    types: &BTreeMap<String, Arc<Vec<InstanceType>>>,
    pool: &str,
    instance_type: &str,
    zone: &str,
    capacity_type: &str,
) -> f64 {
    types
        .get(pool)
        .and_then(|types| types.iter().find(|t| t.name == instance_type))
        .and_then(|t| {
            t.offerings
                .iter()
                .filter(|o| o.zone == zone && o.capacity_type.label_value() == capacity_type)
                .map(|o| o.price)
                .min_by(f64::total_cmp)
        })
        .unwrap_or(0.0)
}

/// Why a PodDisruptionBudget keeps one of `pods` (Karpenter's
/// `CanEvictPods`): a budget selecting it allows no disruption now, or more
/// than one budget selects it (the eviction API refuses such pods).
fn pdb_blocks(pods: &[&Arc<K8sPod>], pdbs: &[Arc<PodDisruptionBudget>]) -> Option<String> {
    for pod in pods {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let selecting: Vec<&Arc<PodDisruptionBudget>> = pdbs
            .iter()
            .filter(|pdb| pdb.metadata.namespace.as_deref().unwrap_or("default") == namespace)
            .filter(|pdb| {
                // A budget without a selector selects nothing; one that
                // cannot be read is treated as selecting the pod.
                pdb.spec
                    .as_ref()
                    .and_then(|s| s.selector.as_ref())
                    .is_some_and(|s| {
                        label_selector("PodDisruptionBudget", "spec.selector", s)
                            .map_or(true, |s| s.matches(&labels))
                    })
            })
            .collect();
        if selecting.len() > 1 {
            return Some(format!(
                "pod {} is selected by more than one PodDisruptionBudget ({}); it cannot be evicted",
                pod_key(pod),
                selecting
                    .iter()
                    .map(|p| p.name_any())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(pdb) = selecting.first() {
            let allowed = pdb
                .status
                .as_ref()
                .and_then(|s| s.disruptions_allowed)
                .unwrap_or(0);
            if allowed <= 0 {
                return Some(format!(
                    "PodDisruptionBudget {}/{} allows no disruption of pod {} now",
                    namespace,
                    pdb.name_any(),
                    pod_key(pod)
                ));
            }
        }
    }
    None
}

/// Karpenter's `EvictionCost`: 1, plus the pod's deletion cost and
/// priority scaled down, clamped to [-10, 10].
pub(crate) fn eviction_cost(pod: &K8sPod) -> f64 {
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
fn lifetime_remaining(claim: &NodeClaim, now: Timestamp) -> f64 {
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
