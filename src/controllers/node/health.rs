//! Node repair (Karpenter's `node.health`, behind the `NodeRepair` feature
//! gate): a managed Node whose condition matches one of the cloud
//! provider's repair policies for longer than the policy tolerates has its
//! NodeClaim deleted, with the `karpenter.sh/nodeclaim-termination-timestamp`
//! annotation set to now so the drain does not wait on PodDisruptionBudgets
//! or `do-not-disrupt` for a node that is broken anyway. Repair stops while
//! more than 20% of the node's NodePool (of the cluster, for a NodeClaim
//! without a NodePool) is unhealthy: replacing many nodes at once is more
//! likely to hurt than help. Nodes and NodeClaims are read from the cluster
//! state; time is passed in, so the decisions are tested without waiting.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{PredicateConfig, WatchStreamExt, watcher};

use super::unhealthy::{
    ALLOWED_UNHEALTHY_PERCENT, Unhealthy, conditions_fingerprint, snake_case, too_many_unhealthy,
    unhealthy_condition,
};
use crate::apis::NodeClaim;
use crate::apis::labels::{
    CAPACITY_TYPE_LABEL_KEY, NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION_KEY, NODE_POOL_LABEL_KEY,
};
use crate::controllers::ControllerError;
use crate::controllers::nodeclaim::{NodeClaimContext, node_claim_of, record_disrupted};

/// How long a blocked repair waits before the node is looked at again.
pub const BLOCKED_RETRY: Duration = Duration::from_secs(5 * 60);

/// What one pass decided about a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// Nothing to do: no NodeClaim stands for the node, or no condition of
    /// it matches a repair policy.
    Healthy,
    /// Unhealthy, and tolerated for this much longer.
    Tolerated(Duration),
    /// Past its toleration, but too many nodes of its NodePool (or of the
    /// cluster) are unhealthy; looked at again after [`BLOCKED_RETRY`].
    Blocked,
    /// Its NodeClaim was annotated and deleted, for this condition.
    Repaired(String),
    /// Its NodeClaim was being deleted already (or is gone): the
    /// termination timestamp was brought forward, nothing else done.
    Deleting,
}

impl Repair {
    /// When the controller looks at the node again without a change to it.
    pub fn action(&self) -> Action {
        match self {
            Repair::Tolerated(wait) => Action::requeue(*wait),
            Repair::Blocked => Action::requeue(BLOCKED_RETRY),
            Repair::Healthy | Repair::Repaired(_) | Repair::Deleting => Action::await_change(),
        }
    }
}

/// Runs node repair until the cluster state's feeds end, once the state
/// has listed everything (the 20% rule counts every node).
pub async fn run(ctx: Arc<NodeClaimContext>) {
    ctx.state.synced().await;
    let trigger = ctx
        .state
        .nodes
        .changes()
        .map(|node| Ok::<Node, watcher::Error>(Node::clone(&node)))
        .predicate_filter(conditions_fingerprint, PredicateConfig::default());
    Controller::for_stream(trigger, ctx.state.nodes.store().clone())
        .run(
            |node, ctx| async move {
                reconcile(&ctx, &node, Timestamp::now())
                    .await
                    .map(|repair| repair.action())
            },
            |node, error, _| {
                tracing::warn!(node = %node.name_any(), %error, "node repair failed; retrying");
                Action::requeue(Duration::from_secs(5))
            },
            ctx,
        )
        .for_each(|_| async {})
        .await;
}

/// One pass over `node` at `now`.
pub async fn reconcile(
    ctx: &NodeClaimContext,
    node: &Node,
    now: Timestamp,
) -> Result<Repair, ControllerError> {
    let Some(claim) = node_claim_of(&ctx.state, node) else {
        return Ok(Repair::Healthy);
    };
    let policies = ctx.cloud.repair_policies();
    let Some(unhealthy) = unhealthy_condition(node, &policies) else {
        return Ok(Repair::Healthy);
    };
    if let Some(wait) = unhealthy.wait(now) {
        return Ok(Repair::Tolerated(wait));
    }
    let pool = claim.labels().get(NODE_POOL_LABEL_KEY);
    let nodes = ctx.state.nodes.all();
    let group = nodes
        .iter()
        .map(Arc::as_ref)
        .filter(|n| pool.is_none_or(|pool| n.labels().get(NODE_POOL_LABEL_KEY) == Some(pool)));
    if too_many_unhealthy(group, &policies) {
        publish_blocked(ctx, node, pool.map(String::as_str)).await;
        return Ok(Repair::Blocked);
    }
    if !annotate(ctx, &claim, now).await? || claim.metadata.deletion_timestamp.is_some() {
        return Ok(Repair::Deleting);
    }
    delete(ctx, node, &claim, &unhealthy).await
}

/// Sets the claim's termination timestamp to `now`, unless it holds one
/// already past. `false` when the claim is gone.
async fn annotate(
    ctx: &NodeClaimContext,
    claim: &NodeClaim,
    now: Timestamp,
) -> Result<bool, ControllerError> {
    let past = claim
        .annotations()
        .get(NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION_KEY)
        .and_then(|t| t.parse::<Timestamp>().ok())
        .is_some_and(|t| t < now);
    if past {
        return Ok(true);
    }
    // RFC 3339 in whole seconds, as Karpenter writes it.
    let stamp = Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string();
    let patch = serde_json::json!({
        "metadata": {"annotations": {NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION_KEY: stamp}}
    });
    match Api::<NodeClaim>::all(ctx.client.clone())
        .patch(
            &claim.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => {
            tracing::info!(nodeclaim = %claim.name_any(), termination_timestamp = %stamp, "annotated nodeclaim");
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// Deletes the claim and counts it.
async fn delete(
    ctx: &NodeClaimContext,
    node: &Node,
    claim: &NodeClaim,
    unhealthy: &Unhealthy,
) -> Result<Repair, ControllerError> {
    match Api::<NodeClaim>::all(ctx.client.clone())
        .delete(&claim.name_any(), &DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Repair::Deleting),
        Err(error) => return Err(error.into()),
    }
    tracing::info!(
        node = %node.name_any(),
        nodeclaim = %claim.name_any(),
        condition = %unhealthy.condition_type,
        "deleting unhealthy node"
    );
    record_disrupted(claim, "unhealthy");
    let label = |key: &str| claim.labels().get(key).cloned().unwrap_or_default();
    let image = claim
        .status
        .as_ref()
        .and_then(|s| s.image_id.clone())
        .unwrap_or_default();
    crate::metrics::metrics()
        .nodeclaims_unhealthy_disrupted
        .get_or_create(&crate::metrics::labels(&[
            ("condition", &snake_case(&unhealthy.condition_type)),
            ("nodepool", &label(NODE_POOL_LABEL_KEY)),
            ("capacity_type", &label(CAPACITY_TYPE_LABEL_KEY)),
            ("image_id", &image),
        ]))
        .inc();
    Ok(Repair::Repaired(unhealthy.condition_type.clone()))
}

/// Warns on the node that repair is blocked. As in Karpenter, a NodePool
/// that does not exist (any more) gets no event.
async fn publish_blocked(ctx: &NodeClaimContext, node: &Node, pool: Option<&str>) {
    let scope = match pool {
        Some(pool) => {
            if ctx
                .state
                .node_pools
                .store()
                .get(&ObjectRef::new(pool))
                .is_none()
            {
                return;
            }
            "nodepool"
        }
        None => "cluster",
    };
    let note = format!("more than {ALLOWED_UNHEALTHY_PERCENT}% nodes are unhealthy in the {scope}");
    super::warn(ctx, node, "Repair", "NodeRepairBlocked", &note).await;
}
