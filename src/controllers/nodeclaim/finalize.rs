//! Finalization of a deleted NodeClaim: its Node is deleted first (the node
//! termination controller drains it), then its instance is terminated and
//! waited for, then the finalizer is removed. An instance the provider no
//! longer finds counts as terminated, so a claim whose instance vanished
//! always finalizes — once its termination was accepted or its launch is
//! [`super::LAUNCH_SETTLING`] old: EC2 may not know an instance it has just
//! launched, and believing it would leave that instance running.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::Action;

use super::{NodeClaimContext, gone_for_sure, nodes_of, patch_conditions};
use crate::apis::ConditionStatus;
use crate::apis::NodeClaim;
use crate::apis::conditions::{NODE_CLAIM_INSTANCE_TERMINATING, set_condition};
use crate::apis::labels::TERMINATION_FINALIZER;
use crate::controllers::ControllerError;

/// How often a terminating instance is checked again.
const TERMINATING_POLL: Duration = Duration::from_secs(5);

/// Finalizes a NodeClaim being deleted.
pub async fn finalize(
    ctx: &NodeClaimContext,
    claim: &NodeClaim,
) -> Result<Action, ControllerError> {
    if !claim
        .finalizers()
        .iter()
        .any(|f| f == TERMINATION_FINALIZER)
    {
        return Ok(Action::await_change());
    }
    let name = claim.name_any();
    let nodes = nodes_of(&ctx.state, claim);
    if !nodes.is_empty() {
        let api: Api<Node> = Api::all(ctx.client.clone());
        for node in nodes
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_none())
        {
            match api.delete(&node.name_any(), &DeleteParams::default()).await {
                Ok(_) => {
                    tracing::info!(nodeclaim = %name, node = %node.name_any(), "deleting node")
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error.into()),
            }
        }
        // Woken by the node's deletion; polled too in case a watch event is missed.
        return Ok(Action::requeue(TERMINATING_POLL));
    }
    let launched = claim
        .status
        .as_ref()
        .and_then(|s| s.provider_id.as_ref())
        .is_some();
    if launched {
        match ctx.cloud.delete(claim).await {
            Err(error) if error.is_not_found() && !gone_for_sure(claim, Timestamp::now()) => {
                // Launched moments ago: EC2 may not know the instance yet;
                // finalizing now would leave it running without a claim.
                tracing::debug!(nodeclaim = %name, %error, "instance of a fresh launch not found; trying again");
                return Ok(Action::requeue(TERMINATING_POLL));
            }
            Err(error) if error.is_not_found() => {}
            Ok(()) => {
                mark_terminating(ctx, claim).await?;
                return Ok(Action::requeue(TERMINATING_POLL));
            }
            Err(error) => {
                tracing::warn!(nodeclaim = %name, %error, "cannot terminate instance; retrying");
                return Ok(Action::requeue(TERMINATING_POLL));
            }
        }
    }
    let remaining: Vec<String> = claim
        .finalizers()
        .iter()
        .filter(|f| *f != TERMINATION_FINALIZER)
        .cloned()
        .collect();
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": claim.metadata.resource_version, "finalizers": remaining}
    });
    match Api::<NodeClaim>::all(ctx.client.clone())
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => return Err(error.into()),
    }
    ctx.state.release_nominations(&name);
    tracing::info!(nodeclaim = %name, "deleted NodeClaim");
    let (pool, zone) = super::pool_and_zone(claim.metadata.labels.as_ref());
    let capacity_type = claim
        .labels()
        .get(crate::apis::labels::CAPACITY_TYPE_LABEL_KEY)
        .cloned()
        .unwrap_or_default();
    crate::metrics::metrics()
        .nodeclaims_terminated
        .get_or_create(&crate::metrics::labels(&[
            ("nodepool", &pool),
            ("capacity_type", &capacity_type),
            ("zone", &zone),
        ]))
        .inc();
    Ok(Action::await_change())
}

/// Sets `InstanceTerminating` while the provider terminates the instance.
async fn mark_terminating(
    ctx: &NodeClaimContext,
    claim: &NodeClaim,
) -> Result<(), ControllerError> {
    let mut status = claim.status.clone().unwrap_or_default();
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if !set_condition(
        conditions,
        NODE_CLAIM_INSTANCE_TERMINATING,
        ConditionStatus::True,
        "InstanceTerminating",
        "",
        None,
    ) {
        return Ok(());
    }
    patch_conditions(ctx, &claim.name_any(), conditions).await
}
