//! What a static NodePool (`spec.replicas`) needs now, decided from a
//! [`ClusterSnapshot`] so the controller and `simulate` decide alike:
//! how many NodeClaims to open (Karpenter's static provisioning) or which
//! to delete (its static deprovisioning).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::apis::labels::NODE_POOL_LABEL_KEY;
use crate::apis::{NodeClaim, NodePool};
use crate::cluster::ClusterSnapshot;
use crate::cluster::pods::{do_not_disrupt_active_at, is_terminal, owned_by_daemon_set};
use crate::controllers::disruption::record::{eviction_cost, lifetime_remaining};
use crate::scheduling::{NewNodeClaim, NodePoolSpec, static_node_claim};

/// A static pool's NodeClaims counted as Karpenter's `NodePoolState` counts
/// them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StaticCounts {
    /// Not being deleted and not taken by a disruption command.
    pub active: i64,
    /// Taken by a disruption command whose replacements are on their way.
    pub pending_disruption: i64,
    /// Being deleted.
    pub deleting: i64,
}

/// What a static pool needs now.
#[derive(Clone, Debug, PartialEq)]
pub struct StaticPlan {
    /// The NodePool.
    pub node_pool: String,
    /// `spec.replicas`.
    pub replicas: i64,
    /// Its NodeClaims, counted.
    pub counts: StaticCounts,
    /// `limits.nodes`, if set: NodeClaims it may have at once, those being
    /// deleted or replaced included.
    pub node_limit: Option<i64>,
    /// NodeClaims to open from the template.
    pub open: i64,
    /// NodeClaims to delete, in the order chosen.
    pub remove: Vec<String>,
    /// Why fewer are opened than the replicas ask for, if so.
    pub held: Option<String>,
}

/// The plan of static pool `pool` (`None` for a dynamic pool) on
/// `snapshot` at `now`, the Nodes in `marked` (taken by earlier offline
/// disruption passes) counted as pending disruption. A pool being deleted
/// does nothing; one whose `Ready` condition is present and not `True`
/// opens nothing (Karpenter's provisioning waits for it) but still scales
/// down.
pub fn plan_static_pool(
    snapshot: &ClusterSnapshot,
    pool: &NodePool,
    marked: &BTreeSet<String>,
    now: Timestamp,
) -> Option<StaticPlan> {
    let replicas = pool.spec.replicas?;
    let name = pool.name_any();
    let claims = pool_claims(snapshot, &name, marked);
    let counts = count(&claims);
    let mut plan = StaticPlan {
        node_pool: name,
        replicas,
        counts,
        node_limit: node_limit(pool),
        open: 0,
        remove: Vec::new(),
        held: None,
    };
    if pool.metadata.deletion_timestamp.is_some() {
        plan.held = Some("the NodePool is being deleted".to_string());
        return Some(plan);
    }
    // Scale down counts only active claims, so the replacements of a
    // disruption command in flight are never taken for a surplus.
    let surplus = counts.active - replicas;
    if surplus > 0 {
        plan.remove = deprovisioning_order(&claims, now)
            .into_iter()
            .take(surplus as usize)
            .collect();
        return Some(plan);
    }
    // Scale up counts claims pending disruption too: their replacements
    // are already active.
    let missing = replicas - counts.active;
    if counts.active + counts.pending_disruption >= replicas {
        return Some(plan);
    }
    if let Some(why) = crate::cluster::pool_not_ready(pool) {
        plan.held = Some(why.message);
        return Some(plan);
    }
    let room = plan.room();
    plan.open = missing.min(room).max(0);
    if plan.open < missing {
        plan.held = Some(format!(
            "limits.nodes allows {} more NodeClaims ({} active, {} being deleted, {} pending disruption)",
            room.max(0),
            counts.active,
            counts.deleting,
            counts.pending_disruption
        ));
    }
    Some(plan)
}

impl StaticPlan {
    /// NodeClaims `limits.nodes` lets it add now (Karpenter's
    /// `ReserveNodeCount`: the limit less those active, being deleted and
    /// pending disruption).
    pub fn room(&self) -> i64 {
        let c = self.counts;
        self.node_limit.map_or(i64::MAX, |limit| {
            limit - c.active - c.deleting - c.pending_disruption
        })
    }
}

/// A static pool's plan and the NodeClaim it opens (or why it cannot):
/// what disruption's static drift and `simulate` read.
#[derive(Clone, Debug)]
pub struct StaticPool {
    /// The pool's counts and limit.
    pub plan: StaticPlan,
    /// The NodeClaim it opens per replica or replacement, or why it cannot.
    pub template: Result<NewNodeClaim, String>,
}

/// Every static pool of `cluster` (specs `specs`), the Nodes in `marked`
/// counted as pending disruption.
pub fn static_pools(
    cluster: &ClusterSnapshot,
    specs: &[NodePoolSpec],
    marked: &BTreeSet<String>,
    at: Timestamp,
    max_instance_types: usize,
) -> BTreeMap<String, StaticPool> {
    cluster
        .node_pools
        .iter()
        .filter_map(|pool| plan_static_pool(cluster, pool, marked, at))
        .map(|plan| {
            let template = specs
                .iter()
                .find(|s| s.name == plan.node_pool)
                .ok_or_else(|| "the NodePool cannot be read".to_string())
                .and_then(|spec| static_node_claim(spec, max_instance_types));
            (plan.node_pool.clone(), StaticPool { plan, template })
        })
        .collect()
}

/// One of the pool's NodeClaims, with what deciding needs.
struct PoolClaim<'a> {
    claim: &'a Arc<NodeClaim>,
    /// The Node stands and is marked for deletion (a disruption command).
    node_marked: bool,
    /// The pods bound to its Node that still run.
    pods: Vec<&'a Arc<Pod>>,
}

/// The pool's NodeClaims in the snapshot's order.
fn pool_claims<'a>(
    snapshot: &'a ClusterSnapshot,
    pool: &str,
    marked: &BTreeSet<String>,
) -> Vec<PoolClaim<'a>> {
    let node_of_claim: HashMap<&str, &Arc<k8s_openapi::api::core::v1::Node>> = snapshot
        .nodes_with_claims()
        .into_iter()
        .filter_map(|(node, claim)| Some((claim?.metadata.name.as_deref()?, node)))
        .collect();
    let mut pods_of_node: HashMap<&str, Vec<&Arc<Pod>>> = HashMap::new();
    for pod in &snapshot.pods {
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
            && !is_terminal(pod)
        {
            pods_of_node.entry(node).or_default().push(pod);
        }
    }
    snapshot
        .node_claims
        .iter()
        .filter(|c| c.labels().get(NODE_POOL_LABEL_KEY).map(String::as_str) == Some(pool))
        .map(|claim| {
            let node = claim
                .metadata
                .name
                .as_deref()
                .and_then(|n| node_of_claim.get(n));
            PoolClaim {
                claim,
                node_marked: node.is_some_and(|n| {
                    n.metadata.deletion_timestamp.is_some()
                        || n.metadata.name.as_ref().is_some_and(|n| marked.contains(n))
                }),
                pods: node
                    .and_then(|n| n.metadata.name.as_deref())
                    .and_then(|n| pods_of_node.get(n))
                    .cloned()
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// Karpenter's `GetNodeCount`.
fn count(claims: &[PoolClaim<'_>]) -> StaticCounts {
    let mut counts = StaticCounts::default();
    for c in claims {
        if c.claim.metadata.deletion_timestamp.is_some() {
            counts.deleting += 1;
        } else if c.node_marked {
            counts.pending_disruption += 1;
        } else {
            counts.active += 1;
        }
    }
    counts
}

/// The pool's active NodeClaims in the order static deprovisioning takes
/// them (Karpenter's `getDeprovisioningCandidates`): those not launched
/// yet (no `status.providerID`), then those whose Node runs only
/// DaemonSet pods none of which is `do-not-disrupt`, then the rest —
/// nodes without `do-not-disrupt` pods first, each group by rescheduling
/// cost times the share of its lifetime left.
fn deprovisioning_order(claims: &[PoolClaim<'_>], now: Timestamp) -> Vec<String> {
    let seconds = now.as_second();
    let active = claims
        .iter()
        .filter(|c| c.claim.metadata.deletion_timestamp.is_none() && !c.node_marked);
    let unresolved = |c: &&PoolClaim<'_>| {
        c.claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .is_none_or(str::is_empty)
    };
    let mut order: Vec<String> = active
        .clone()
        .filter(unresolved)
        .map(|c| c.claim.name_any())
        .collect();
    let resolved: Vec<&PoolClaim<'_>> = active.filter(|c| !unresolved(c)).collect();
    let held = |c: &PoolClaim<'_>| c.pods.iter().any(|p| do_not_disrupt_active_at(p, seconds));
    let empty = |c: &PoolClaim<'_>| c.pods.iter().all(|p| owned_by_daemon_set(p)) && !held(c);
    order.extend(
        resolved
            .iter()
            .filter(|c| empty(c))
            .map(|c| c.claim.name_any()),
    );
    let mut rest: Vec<(bool, f64, String)> = resolved
        .iter()
        .filter(|c| !empty(c))
        .map(|c| {
            let rescheduling: f64 = c.pods.iter().map(|p| eviction_cost(p)).sum();
            let cost = rescheduling * lifetime_remaining(c.claim, now);
            (held(c), cost, c.claim.name_any())
        })
        .collect();
    rest.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    order.extend(rest.into_iter().map(|(_, _, name)| name));
    order
}

/// `limits.nodes` of the pool, if set and readable.
fn node_limit(pool: &NodePool) -> Option<i64> {
    let quantity = pool.spec.limits.as_ref()?.get("nodes")?;
    crate::scheduling::parse_quantity("nodes", &quantity.0, 0).ok()
}
