//! Which nodes a disruption pass may consider (Karpenter's `NewCandidate`,
//! `ValidateNodeDisruptable` and `ValidatePodsDisruptable`), from the
//! pass's [records](super::record): a registered, initialized node with a
//! NodeClaim of a known NodePool and an `EC2NodeClass`, not already being
//! disrupted, not nominated, without `karpenter.sh/do-not-disrupt` on the
//! Node. A pod that blocks eviction — `do-not-disrupt` on a running pod,
//! or a PodDisruptionBudget — makes the candidate `blocked`: graceful
//! methods keep it, eventual ones may take it (see [`Candidate::blocked`]).
//! Every other node is kept, with the first reason and a message saying
//! what to change.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod as K8sPod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::record::NodeRecord;
use super::types::{Candidate, Kept, KeptReason, Verdict};
use crate::apis::labels::{
    DO_NOT_DISRUPT_ANNOTATION_KEY, INTERRUPTION_CORDONED_ANNOTATION_KEY, NODE_POOL_LABEL_KEY,
};
use crate::apis::{NodeClaim, NodePool};
use crate::cluster::pod_key;
use crate::cluster::pods::{
    do_not_disrupt_active_at, is_active, owned_by_node, tolerates_disrupted_taint,
};
use crate::scheduling::convert::label_selector;

/// The records split into candidates and kept nodes, at `now`; candidates
/// in Karpenter's order (cheapest to disrupt first).
pub fn candidates(
    records: &[NodeRecord],
    pdbs: &[Arc<PodDisruptionBudget>],
    now: Timestamp,
) -> (Vec<Candidate>, Vec<Kept>) {
    let mut out = Vec::new();
    let mut kept = Vec::new();
    for record in records {
        match candidate(record, pdbs, now) {
            Ok(c) => out.push(c),
            Err((reason, message)) => kept.push(Kept {
                node: record.name.clone(),
                node_claim: record.claim.as_ref().map(|c| c.name_any()),
                node_pool: record.pool_name.clone(),
                reason,
                message,
            }),
        }
    }
    out.sort_by(|a, b| {
        a.disruption_cost
            .total_cmp(&b.disruption_cost)
            .then_with(|| a.name.cmp(&b.name))
    });
    (out, kept)
}

fn candidate(
    record: &NodeRecord,
    pdbs: &[Arc<PodDisruptionBudget>],
    now: Timestamp,
) -> Result<Candidate, Verdict> {
    let Some(claim) = &record.claim else {
        return Err((
            KeptReason::NotManaged,
            "no NodeClaim has this Node's providerID; nodewright disrupts only the nodes it launched".to_string(),
        ));
    };
    let class = &claim.spec.node_class_ref;
    if !class.is_ec2_node_class() {
        return Err((
            KeptReason::NotManaged,
            format!(
                "the NodeClaim's nodeClassRef is a {} of {:?}, not an EC2NodeClass of karpenter.k8s.aws; another provisioner manages it",
                class.kind, class.group
            ),
        ));
    }
    let Some(node) = &record.node else {
        return Err((
            KeptReason::NotInitialized,
            "the NodeClaim has no Node yet".to_string(),
        ));
    };
    if !record.initialized {
        return Err((
            KeptReason::NotInitialized,
            "the NodeClaim is not initialized yet".to_string(),
        ));
    }
    if record.deleting {
        return Err((
            KeptReason::AlreadyDisrupting,
            "the node is already being deleted".to_string(),
        ));
    }
    if record.marked || record.nominated {
        return Err((
            KeptReason::AlreadyDisrupting,
            "another command is disrupting the node, or pods are nominated to it".to_string(),
        ));
    }
    if node.annotations().get(DO_NOT_DISRUPT_ANNOTATION_KEY) == Some(&"true".to_string()) {
        return Err((
            KeptReason::DoNotDisrupt,
            format!(
                "the Node has {DO_NOT_DISRUPT_ANNOTATION_KEY}: \"true\"; remove it to let the node go"
            ),
        ));
    }
    let Some(pool_name) = &record.pool_name else {
        return Err((
            KeptReason::NotManaged,
            format!("the NodeClaim has no {NODE_POOL_LABEL_KEY} label"),
        ));
    };
    let Some(pool) = &record.pool else {
        return Err((
            KeptReason::NotManaged,
            format!("NodePool {pool_name:?} does not exist; its nodes are left alone"),
        ));
    };
    Ok(of_record(
        record,
        claim,
        pool,
        pool_name,
        pods_block(&record.pods, pdbs, now),
    ))
}

fn of_record(
    record: &NodeRecord,
    claim: &Arc<NodeClaim>,
    pool: &Arc<NodePool>,
    pool_name: &str,
    blocked: Option<Verdict>,
) -> Candidate {
    Candidate {
        name: record.name.clone(),
        node_claim: claim.clone(),
        node_pool: pool.clone(),
        pool: pool_name.to_string(),
        instance_type: record.instance_type.clone(),
        capacity_type: record.capacity_type,
        zone: record.zone.clone(),
        price: record.price,
        pods: record.reschedulable.clone(),
        disruption_cost: record.disruption_cost,
        reschedule_cost: record.reschedule_cost,
        marks: record.marks.clone(),
        interruption_cordon: record.node.as_ref().and_then(|n| interruption_cordon(n)),
        blocked,
    }
}

/// The kind of message the interruption controller cordoned `node` for,
/// while it is cordoned.
fn interruption_cordon(node: &Node) -> Option<String> {
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    cordoned
        .then(|| node.annotations().get(INTERRUPTION_CORDONED_ANNOTATION_KEY))
        .flatten()
        .cloned()
}

/// The first expired NodeClaim not already going (Karpenter's expiration
/// controller, which `simulate --disruption` plays): expiration is
/// forceful, so nothing else keeps it — not `do-not-disrupt`, a
/// PodDisruptionBudget, initialization, or its Node missing.
pub fn expired(records: &[NodeRecord]) -> Option<Candidate> {
    records.iter().find_map(|record| {
        let claim = record.claim.as_ref()?;
        let pool = record.pool.as_ref()?;
        let pool_name = record.pool_name.as_deref()?;
        (record.marks.expired
            && !record.is_disrupting()
            && claim.spec.node_class_ref.is_ec2_node_class())
        .then(|| of_record(record, claim, pool, pool_name, None))
    })
}

/// Why one of `pods` blocks eviction (Karpenter's
/// `ValidatePodsDisruptable`): `do-not-disrupt` on a pod that still runs,
/// then the PodDisruptionBudgets of the pods a drain would evict.
fn pods_block(
    pods: &[Arc<K8sPod>],
    pdbs: &[Arc<PodDisruptionBudget>],
    now: Timestamp,
) -> Option<Verdict> {
    let seconds = now.as_second();
    // A pod that finished or is being deleted holds nothing: only running
    // pods' annotations count (Karpenter's `IsDisruptable`).
    if let Some(pod) = pods
        .iter()
        .find(|p| is_active(p) && do_not_disrupt_active_at(p, seconds))
    {
        return Some((
            KeptReason::DoNotDisrupt,
            format!(
                "pod {} has {DO_NOT_DISRUPT_ANNOTATION_KEY}; the node stays while it runs",
                pod_key(pod)
            ),
        ));
    }
    pdb_blocks(pods, pdbs, seconds).map(|m| (KeptReason::Pdb, m))
}

/// Why a PodDisruptionBudget keeps one of `pods` (Karpenter's
/// `CanEvictPods`): of the pods a drain evicts (running, not static, not
/// tolerating the disrupted taint, not held by `do-not-disrupt` — a
/// DaemonSet's pods included), one is selected by more than one budget
/// (the eviction API refuses it), or by a budget allowing no disruption
/// now, unless the budget lets unhealthy pods go (`unhealthyPodEvictionPolicy:
/// AlwaysAllow`) and the pod is not ready.
fn pdb_blocks(pods: &[Arc<K8sPod>], pdbs: &[Arc<PodDisruptionBudget>], now: i64) -> Option<String> {
    let evicted = pods.iter().filter(|p| {
        is_active(p)
            && !owned_by_node(p)
            && !tolerates_disrupted_taint(p)
            && !do_not_disrupt_active_at(p, now)
    });
    for pod in evicted {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let selecting: Vec<&Arc<PodDisruptionBudget>> = pdbs
            .iter()
            .filter(|pdb| pdb.metadata.namespace.as_deref().unwrap_or("default") == namespace)
            .filter(|pdb| selects(pdb, pod))
            .collect();
        let key = |pdb: &PodDisruptionBudget| format!("{namespace}/{}", pdb.name_any());
        if selecting.len() > 1 {
            let names: Vec<String> = selecting.iter().map(|p| key(p)).collect();
            return Some(format!(
                "pod {} is selected by more than one PodDisruptionBudget ({}): eviction does not support multiple PDBs",
                pod_key(pod),
                names.join(", ")
            ));
        }
        let Some(pdb) = selecting.first() else {
            continue;
        };
        if always_allows_unhealthy(pdb) && !pod_is_ready(pod) {
            continue;
        }
        let allowed = pdb
            .status
            .as_ref()
            .and_then(|s| s.disruptions_allowed)
            .unwrap_or(0);
        if allowed <= 0 {
            return Some(format!(
                "PodDisruptionBudget {} allows no disruption of pod {} now",
                key(pdb),
                pod_key(pod)
            ));
        }
    }
    None
}

/// Whether `pdb` selects `pod`: a budget without a selector selects
/// nothing; one whose selector cannot be read selects it (fail closed).
fn selects(pdb: &PodDisruptionBudget, pod: &K8sPod) -> bool {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    pdb.spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .is_some_and(|s| {
            label_selector("PodDisruptionBudget", "spec.selector", s)
                .map_or(true, |s| s.matches(&labels))
        })
}

/// `unhealthyPodEvictionPolicy: AlwaysAllow`.
fn always_allows_unhealthy(pdb: &PodDisruptionBudget) -> bool {
    pdb.spec
        .as_ref()
        .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
        == Some("AlwaysAllow")
}

/// Whether the pod's `Ready` condition is not `False` (Karpenter treats a
/// pod as unhealthy only when it says so).
fn pod_is_ready(pod: &K8sPod) -> bool {
    !pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "False"))
}
