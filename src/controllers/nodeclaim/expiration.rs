//! The expiration controller (Karpenter's `nodeclaim.expiration`): a
//! NodeClaim whose `spec.expireAfter` has passed since its creation is
//! deleted. Expiration is forceful and not budgeted: the termination
//! controller drains the node, bounded by `terminationGracePeriod`, and the
//! pods are provisioned for again like any others.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;

use super::marks::expires_at;
use super::{NodeClaimContext, delete_claim, record_disrupted};
use crate::apis::NodeClaim;
use crate::apis::labels::NODE_POOL_LABEL_KEY;
use crate::controllers::ControllerError;

/// Runs the controller until the cluster state's feeds end.
pub async fn run(ctx: Arc<NodeClaimContext>) {
    let trigger = ctx
        .state
        .node_claims
        .changes()
        .map(|claim| Ok::<NodeClaim, watcher::Error>(NodeClaim::clone(&claim)));
    Controller::for_stream(trigger, ctx.state.node_claims.store().clone())
        .run(
            |claim, ctx| async move { reconcile(&ctx, &claim, Timestamp::now()).await },
            |claim, error, _| {
                tracing::warn!(nodeclaim = %claim.name_any(), %error, "expiring a NodeClaim failed; retrying");
                Action::requeue(error.retry_after(Duration::from_secs(10)))
            },
            ctx,
        )
        .for_each(|_| async {})
        .await;
}

/// One pass over a NodeClaim at `now`: deleted when expired, otherwise
/// looked at again when it expires.
pub async fn reconcile(
    ctx: &NodeClaimContext,
    claim: &NodeClaim,
    now: Timestamp,
) -> Result<Action, ControllerError> {
    // Claims nodewright did not make (no NodePool, another provisioner's
    // node class) are not its to expire; one already being deleted is
    // expired once.
    if claim.metadata.deletion_timestamp.is_some()
        || !claim.labels().contains_key(NODE_POOL_LABEL_KEY)
        || !claim.spec.node_class_ref.is_ec2_node_class()
    {
        return Ok(Action::await_change());
    }
    let expiry = match expires_at(claim) {
        Ok(Some(at)) => at,
        Ok(None) => return Ok(Action::await_change()),
        Err(error) => {
            // The API server validates the field; an older object that
            // slipped through is reported, not expired.
            tracing::warn!(nodeclaim = %claim.name_any(), %error, "spec.expireAfter cannot be read; the NodeClaim is not expired");
            return Ok(Action::await_change());
        }
    };
    if now < expiry {
        let left = Duration::try_from(now.duration_until(expiry)).unwrap_or_default();
        return Ok(Action::requeue(left + Duration::from_millis(100)));
    }
    if !delete_claim(&ctx.client, claim).await? {
        return Ok(Action::await_change());
    }
    tracing::info!(nodeclaim = %claim.name_any(), expired_at = %expiry, "deleting expired NodeClaim");
    record_disrupted(claim, "expired");
    Ok(Action::await_change())
}
