//! Termination of a deleted Node that nodewright manages: its NodeClaim is
//! deleted too; the node is cordoned, tainted `karpenter.sh/disrupted:NoSchedule`
//! and labelled out of external load balancers; its pods are drained (see
//! `drain`); then its instance is terminated and waited for, and the
//! finalizer removed. A node whose instance is already gone (and which is
//! not Ready) is released at once, so finalization never waits on an
//! instance that does not exist — unless its claim launched moments ago
//! (see `nodeclaim::gone_for_sure`): EC2 may not know that instance yet.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;

use super::drain::{DRAIN_RETRY, Removal, next_tier, remove};
use crate::apis::conditions::{NODE_CLAIM_DRAINED, NODE_CLAIM_INSTANCE_TERMINATING, set_condition};
use crate::apis::labels::{
    EXCLUDE_FROM_LOAD_BALANCERS_LABEL_KEY, NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION_KEY,
    NODE_POOL_LABEL_KEY, TERMINATION_FINALIZER,
};
use crate::apis::{ConditionStatus, NodeClaim};
use crate::cluster::pods::is_waiting_eviction;
use crate::controllers::ControllerError;
use crate::controllers::nodeclaim::{
    NodeClaimContext, gone_for_sure, node_claim_of, patch_conditions,
};

/// How often a terminating instance is checked again.
const TERMINATING_POLL: Duration = Duration::from_secs(5);

/// Runs the controller until the cluster state's feeds end: deleted nodes
/// are reconciled on their own changes and on changes of their pods. It
/// starts once every store holds its first list: a node seen before its
/// pods would look drained, and be deleted with its pods on it.
pub async fn run(ctx: Arc<NodeClaimContext>) {
    ctx.state.synced().await;
    let state = ctx.state.clone();
    let node_of_pod = ctx.state.pods.changes().filter_map(move |pod| {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .and_then(|name| {
                state
                    .nodes
                    .store()
                    .get(&kube::runtime::reflector::ObjectRef::new(&name))
            });
        std::future::ready(node.filter(|n| n.metadata.deletion_timestamp.is_some()))
    });
    let trigger = futures::stream::select(ctx.state.nodes.changes(), node_of_pod)
        .map(|node| Ok::<Node, watcher::Error>(Node::clone(&node)));
    Controller::for_stream(trigger, ctx.state.nodes.store().clone())
        .run(
            |node, ctx| async move { reconcile(&ctx, &node).await },
            |node, error, _| {
                tracing::warn!(node = %node.name_any(), %error, "node termination failed; retrying");
                Action::requeue(Duration::from_secs(5))
            },
            ctx,
        )
        .for_each(|_| async {})
        .await;
}

/// One pass over a Node.
pub async fn reconcile(ctx: &NodeClaimContext, node: &Node) -> Result<Action, ControllerError> {
    let managed = node.labels().contains_key(NODE_POOL_LABEL_KEY);
    if node.metadata.deletion_timestamp.is_none()
        || !managed
        || !node.finalizers().iter().any(|f| f == TERMINATION_FINALIZER)
    {
        return Ok(Action::await_change());
    }
    let name = node.name_any();
    let claim = node_claim_of(&ctx.state, node);
    if let Some(claim) = &claim
        && claim.metadata.deletion_timestamp.is_none()
    {
        match Api::<NodeClaim>::all(ctx.client.clone())
            .delete(&claim.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
    }
    if !is_ready(node)
        && claim
            .as_deref()
            .is_none_or(|c| gone_for_sure(c, Timestamp::now()))
        && let Some(provider_id) = node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
        && let Err(error) = ctx.cloud.get(provider_id).await
        && error.is_not_found()
    {
        tracing::info!(node = %name, "instance already gone; releasing node");
        return release(ctx, node).await;
    }

    taint_and_cordon(ctx, node).await?;
    let deadline = claim.as_deref().and_then(termination_deadline);
    let pods: Vec<Arc<Pod>> = ctx
        .state
        .pods
        .all()
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str()))
        .collect();
    let waiting: Vec<&Pod> = pods
        .iter()
        .map(Arc::as_ref)
        .filter(|p| is_waiting_eviction(p))
        .collect();
    if !waiting.is_empty() {
        if let Some(claim) = &claim {
            set_claim_condition(
                ctx,
                claim,
                NODE_CLAIM_DRAINED,
                ConditionStatus::Unknown,
                "Draining",
            )
            .await?;
        }
        let mut blocked = Vec::new();
        for pod in next_tier(&waiting) {
            if let Removal::Blocked(why) = remove(&ctx.client, &pod, deadline).await? {
                blocked.push(why);
            }
        }
        if !blocked.is_empty() {
            super::warn(
                ctx,
                node,
                "Drain",
                "FailedDraining",
                &format!("Failed to drain node, {}", blocked.join("; ")),
            )
            .await;
        }
        return Ok(Action::requeue(DRAIN_RETRY));
    }
    if let Some(claim) = &claim {
        let newly_drained = claim
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .and_then(|c| crate::apis::conditions::find_condition(c, NODE_CLAIM_DRAINED))
            .is_none_or(|c| !c.is_true());
        set_claim_condition(
            ctx,
            claim,
            NODE_CLAIM_DRAINED,
            ConditionStatus::True,
            "Drained",
        )
        .await?;
        if newly_drained {
            let (pool, _) =
                crate::controllers::nodeclaim::pool_and_zone(node.metadata.labels.as_ref());
            crate::metrics::metrics()
                .nodes_drained
                .get_or_create(&crate::metrics::labels(&[("nodepool", &pool)]))
                .inc();
        }
        match ctx.cloud.delete(claim).await {
            Err(error) if error.is_not_found() && !gone_for_sure(claim, Timestamp::now()) => {
                // EC2 may not know an instance it has just launched.
                tracing::debug!(node = %name, %error, "instance of a fresh launch not found; trying again");
                return Ok(Action::requeue(TERMINATING_POLL));
            }
            Err(error) if error.is_not_found() => {}
            Ok(()) => {
                set_claim_condition(
                    ctx,
                    claim,
                    NODE_CLAIM_INSTANCE_TERMINATING,
                    ConditionStatus::True,
                    "InstanceTerminating",
                )
                .await?;
                return Ok(Action::requeue(TERMINATING_POLL));
            }
            Err(error) => {
                tracing::warn!(node = %name, %error, "cannot terminate instance; retrying");
                return Ok(Action::requeue(TERMINATING_POLL));
            }
        }
    }
    release(ctx, node).await
}

fn is_ready(node: &Node) -> bool {
    crate::apis::conditions::node_is_ready(node)
}

/// When the node must be gone, in seconds since the epoch: the earlier of
/// the claim's `karpenter.sh/nodeclaim-termination-timestamp` (node repair
/// sets it to the moment it deleted the claim) and the claim's deletion plus
/// its `terminationGracePeriod`; `None` without either. Past it, pods are
/// deleted rather than evicted. An unreadable timestamp is ignored.
fn termination_deadline(claim: &NodeClaim) -> Option<i64> {
    let annotated = claim
        .annotations()
        .get(NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION_KEY)
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map(|t| t.as_second());
    let graced = claim
        .metadata
        .deletion_timestamp
        .as_ref()
        .zip(claim.spec.termination_grace_period.as_deref())
        .and_then(|(deleted, period)| {
            let period = crate::apis::duration::parse_go_duration(period).ok()?;
            Some(
                deleted
                    .0
                    .as_second()
                    .saturating_add(i64::try_from(period.as_secs()).unwrap_or(i64::MAX)),
            )
        });
    annotated.into_iter().chain(graced).min()
}

/// Cordons the node, adds the disrupted taint and the load-balancer
/// exclusion label, unless they are there already.
async fn taint_and_cordon(ctx: &NodeClaimContext, node: &Node) -> Result<(), ControllerError> {
    let current: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let retainted = super::with_disrupted_taint(&current, true);
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    let labelled = node
        .labels()
        .get(EXCLUDE_FROM_LOAD_BALANCERS_LABEL_KEY)
        .is_some();
    if retainted.is_none() && cordoned && labelled {
        return Ok(());
    }
    let taints = retainted.unwrap_or(current);
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": node.metadata.resource_version,
            "labels": {EXCLUDE_FROM_LOAD_BALANCERS_LABEL_KEY: "karpenter"},
        },
        "spec": {"unschedulable": true, "taints": taints},
    });
    Api::<Node>::all(ctx.client.clone())
        .patch(
            &node.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    tracing::info!(node = %node.name_any(), "tainted and cordoned node");
    Ok(())
}

/// Removes the termination finalizer: the node may go.
async fn release(ctx: &NodeClaimContext, node: &Node) -> Result<Action, ControllerError> {
    let remaining: Vec<String> = node
        .finalizers()
        .iter()
        .filter(|f| *f != TERMINATION_FINALIZER)
        .cloned()
        .collect();
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": node.metadata.resource_version, "finalizers": remaining}
    });
    match Api::<Node>::all(ctx.client.clone())
        .patch(
            &node.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(error) => return Err(error.into()),
    }
    tracing::info!(node = %node.name_any(), "deleted node");
    let (pool, zone) = crate::controllers::nodeclaim::pool_and_zone(node.metadata.labels.as_ref());
    crate::metrics::metrics()
        .nodes_terminated
        .get_or_create(&crate::metrics::labels(&[
            ("nodepool", &pool),
            ("zone", &zone),
        ]))
        .inc();
    Ok(Action::await_change())
}

/// Sets a condition on the node's NodeClaim (drain progress, instance termination).
async fn set_claim_condition(
    ctx: &NodeClaimContext,
    claim: &NodeClaim,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
) -> Result<(), ControllerError> {
    let mut conditions = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    if !set_condition(&mut conditions, type_, status, reason, reason, None) {
        return Ok(());
    }
    patch_conditions(ctx, &claim.name_any(), &conditions).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(annotation: Option<&str>, deleted: Option<&str>, grace: Option<&str>) -> NodeClaim {
        let mut value = serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c"},
            "spec": {
                "requirements": [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
            }
        });
        if let Some(at) = annotation {
            value["metadata"]["annotations"] =
                serde_json::json!({NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION_KEY: at});
        }
        if let Some(at) = deleted {
            value["metadata"]["deletionTimestamp"] = serde_json::json!(at);
        }
        if let Some(grace) = grace {
            value["spec"]["terminationGracePeriod"] = serde_json::json!(grace);
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_deadline_is_the_earlier_of_the_timestamp_and_the_grace_period() {
        let second = |at: &str| {
            at.parse::<k8s_openapi::jiff::Timestamp>()
                .unwrap()
                .as_second()
        };
        let deleted = Some("2027-01-01T00:00:00Z");
        assert_eq!(termination_deadline(&claim(None, deleted, None)), None);
        assert_eq!(
            termination_deadline(&claim(None, deleted, Some("1h"))),
            Some(second("2027-01-01T01:00:00Z"))
        );
        assert_eq!(
            termination_deadline(&claim(Some("2026-12-31T23:30:00Z"), deleted, None)),
            Some(second("2026-12-31T23:30:00Z")),
            "the annotation alone bounds the drain"
        );
        assert_eq!(
            termination_deadline(&claim(Some("2027-01-01T00:10:00Z"), deleted, Some("1h"))),
            Some(second("2027-01-01T00:10:00Z"))
        );
        assert_eq!(
            termination_deadline(&claim(Some("2027-01-01T03:00:00Z"), deleted, Some("1h"))),
            Some(second("2027-01-01T01:00:00Z"))
        );
        assert_eq!(
            termination_deadline(&claim(Some("soon"), deleted, Some("1h"))),
            Some(second("2027-01-01T01:00:00Z")),
            "an unreadable timestamp is ignored"
        );
    }
}
