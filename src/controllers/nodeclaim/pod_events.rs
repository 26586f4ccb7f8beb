//! The pod events controller (Karpenter's `nodeclaim.podevents`): when a pod
//! is bound to a node, finishes, starts terminating or is deleted, the
//! node's NodeClaim gets `status.lastPodEventTime`, from which
//! `consolidateAfter` counts. DaemonSet pods do not count. Writes are
//! spaced at least ten seconds apart per claim, as Karpenter's, since pods
//! come and go often.
//!
//! A pod event is seen as a change in the set of active, non-DaemonSet pods
//! bound to the node. The sets found when the controller starts are taken
//! as they are: a restart does not restart every node's `consolidateAfter`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

use super::{NodeClaimContext, patch_status};
use crate::cluster::ClusterState;
use crate::cluster::pod_key;
use crate::cluster::pods::owned_by_daemon_set;
use crate::scheduling::PodKey;

/// The least time between two writes of one claim's `lastPodEventTime`.
pub const DEDUPE: SignedDuration = SignedDuration::from_secs(10);

/// Runs the controller until the cluster state's feeds end.
pub async fn run(ctx: Arc<NodeClaimContext>) {
    ctx.state.synced().await;
    let mut seen: HashMap<String, BTreeSet<PodKey>> = HashMap::new();
    for name in node_names(&ctx.state) {
        seen.insert(name.clone(), workload_pods(&ctx.state, &name));
    }
    let mut changes = Box::pin(ctx.state.pods.changes());
    while let Some(pod) = changes.next().await {
        let Some(node) = node_of(&pod) else { continue };
        if owned_by_daemon_set(&pod) {
            continue;
        }
        let now = workload_pods(&ctx.state, &node);
        if seen.get(&node) == Some(&now) {
            continue;
        }
        seen.insert(node.clone(), now);
        if let Err(error) = record(&ctx, &node, Timestamp::now()).await {
            tracing::warn!(%node, %error, "recording a pod event on the node's NodeClaim failed");
        }
        // Nodes that are gone are forgotten.
        if seen.len() > 2 * ctx.state.nodes.store().state().len().max(16) {
            let live: BTreeSet<String> = node_names(&ctx.state).into_iter().collect();
            seen.retain(|name, _| live.contains(name));
        }
    }
}

fn node_of(pod: &Pod) -> Option<String> {
    pod.spec.as_ref()?.node_name.clone()
}

fn node_names(state: &ClusterState) -> Vec<String> {
    state.nodes.all().iter().map(|n| n.name_any()).collect()
}

/// The active pods bound to `node` that are not DaemonSet pods.
fn workload_pods(state: &ClusterState, node: &str) -> BTreeSet<PodKey> {
    let Some(record) = state.state_node(node) else {
        return BTreeSet::new();
    };
    record
        .pods()
        .filter(|p| !owned_by_daemon_set(p.object()))
        .map(|p| pod_key(p.object()))
        .collect()
}

/// Sets `lastPodEventTime` to `now` on the NodeClaim of `node`, unless it
/// was set less than [`DEDUPE`] ago.
pub async fn record(ctx: &NodeClaimContext, node: &str, now: Timestamp) -> Result<(), kube::Error> {
    let Some(claim) = ctx
        .state
        .state_node(node)
        .and_then(|r| r.node_claim().cloned())
    else {
        return Ok(());
    };
    if claim.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let last = claim
        .status
        .as_ref()
        .and_then(|s| s.last_pod_event_time.as_ref());
    if last.is_some_and(|t| now.duration_since(t.0) < DEDUPE) {
        return Ok(());
    }
    let patch = serde_json::json!({"status": {"lastPodEventTime": Time(now)}});
    patch_status(ctx, &claim.name_any(), &patch).await?;
    Ok(())
}
