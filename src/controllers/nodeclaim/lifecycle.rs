//! The NodeClaim lifecycle reconciler: finalizer, launch, registration,
//! initialization, the liveness timeouts and `Ready`, written back as one
//! metadata patch and one status patch guarded by the resourceVersion read.
//! Triggered by NodeClaim changes and by changes to the Node that stands
//! for a claim.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;

use super::finalize::finalize;
use super::initialization::initialize;
use super::launch::{Launch, launch};
use super::registration::register;
use super::{LAUNCH_TIMEOUT, NodeClaimContext, REGISTRATION_TIMEOUT, node_claim_of};
use crate::apis::conditions::{
    NODE_CLAIM_INITIALIZED, NODE_CLAIM_LAUNCHED, NODE_CLAIM_READY_DEPENDENCIES,
    NODE_CLAIM_REGISTERED, READY, find_condition, is_condition_true, set_condition,
};
use crate::apis::labels::TERMINATION_FINALIZER;
use crate::apis::{ConditionStatus, NodeClaim};
use crate::controllers::ControllerError;

/// How often a claim whose node has not come up yet is looked at again
/// (node events wake it sooner).
const WAITING_POLL: Duration = Duration::from_secs(30);

/// Runs the lifecycle controller until the cluster state's feeds end. It
/// starts once every store holds its first list: a deleted claim seen
/// before its Node would look node-less, and its instance be terminated
/// without a drain.
pub async fn run(ctx: Arc<NodeClaimContext>) {
    ctx.state.synced().await;
    let state = ctx.state.clone();
    let from_nodes = ctx
        .state
        .nodes
        .changes()
        .filter_map(move |node| std::future::ready(node_claim_of(&state, &node)));
    let trigger = futures::stream::select(ctx.state.node_claims.changes(), from_nodes)
        .map(|claim| Ok::<NodeClaim, watcher::Error>(NodeClaim::clone(&claim)));
    Controller::for_stream(trigger, ctx.state.node_claims.store().clone())
        .run(
            |claim, ctx| async move { reconcile(&ctx, &claim).await },
            |claim, error, _| {
                if error.is_conflict() {
                    tracing::debug!(nodeclaim = %claim.name_any(), %error, "NodeClaim changed while reconciling; retrying");
                } else {
                    tracing::warn!(nodeclaim = %claim.name_any(), %error, "NodeClaim reconcile failed; retrying");
                }
                Action::requeue(error.retry_after(Duration::from_secs(5)))
            },
            ctx,
        )
        .for_each(|_| async {})
        .await;
}

/// One pass over a NodeClaim.
pub async fn reconcile(
    ctx: &NodeClaimContext,
    claim: &NodeClaim,
) -> Result<Action, ControllerError> {
    if claim.metadata.deletion_timestamp.is_some() {
        return finalize(ctx, claim).await;
    }
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let name = claim.name_any();
    let with_finalizer;
    let claim = if claim
        .finalizers()
        .iter()
        .any(|f| f == TERMINATION_FINALIZER)
    {
        claim
    } else {
        // Nothing is launched before the finalizer is stored, or an
        // instance could outlive its claim; the pass goes on with the
        // object the patch returned.
        let mut finalizers = claim.finalizers().to_vec();
        finalizers.push(TERMINATION_FINALIZER.to_string());
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": claim.metadata.resource_version, "finalizers": finalizers}
        });
        with_finalizer = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        &with_finalizer
    };

    let mut updated = claim.clone();
    let retry = match launch(ctx, &mut updated).await? {
        Launch::Deleted => return Ok(Action::await_change()),
        Launch::Retry(after) => Some(after),
        Launch::Done => None,
    };
    if retry.is_none() {
        register(ctx, &mut updated).await?;
        initialize(ctx, &mut updated).await?;
    }
    let conditions = updated
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    if let Some((reason, why)) = timed_out(&conditions) {
        tracing::warn!(nodeclaim = %name, why, "deleting NodeClaim");
        super::record_disrupted(claim, reason);
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
        ctx.state.release_nominations(&name);
        return Ok(Action::await_change());
    }
    set_ready(&mut updated);
    write(ctx, claim, &updated).await?;

    let conditions = updated
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    Ok(match retry {
        Some(after) => Action::requeue(after),
        None if is_condition_true(&conditions, NODE_CLAIM_INITIALIZED) => Action::await_change(),
        None => Action::requeue(WAITING_POLL),
    })
}

/// Why a claim that is taking too long should be deleted: not launched
/// [`LAUNCH_TIMEOUT`] after its first launch attempt, or not registered
/// [`REGISTRATION_TIMEOUT`] after it launched.
fn timed_out(conditions: &[crate::apis::Condition]) -> Option<(&'static str, &'static str)> {
    if is_condition_true(conditions, NODE_CLAIM_REGISTERED) {
        return None;
    }
    let age = |type_: &str| {
        find_condition(conditions, type_).map(|c| {
            let since = k8s_openapi::jiff::Timestamp::now().as_second()
                - c.last_transition_time.0.as_second();
            Duration::from_secs(u64::try_from(since).unwrap_or(0))
        })
    };
    if !is_condition_true(conditions, NODE_CLAIM_LAUNCHED) {
        return age(NODE_CLAIM_LAUNCHED)
            .filter(|a| *a >= LAUNCH_TIMEOUT)
            .map(|_| {
                (
                    "launch_timeout",
                    "not launched within the launch timeout (5m)",
                )
            });
    }
    age(NODE_CLAIM_REGISTERED)
        .filter(|a| *a >= REGISTRATION_TIMEOUT)
        .map(|_| {
            (
                "registration_timeout",
                "its node did not register within the registration timeout (15m)",
            )
        })
}

/// `Ready` from `Launched`, `Registered` and `Initialized`.
fn set_ready(claim: &mut NodeClaim) {
    let status = claim.status.get_or_insert_with(Default::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let not_ready = NODE_CLAIM_READY_DEPENDENCIES
        .iter()
        .find(|type_| !is_condition_true(conditions, type_));
    match not_ready {
        None => set_condition(conditions, READY, ConditionStatus::True, "Ready", "", None),
        Some(type_) => set_condition(
            conditions,
            READY,
            ConditionStatus::Unknown,
            "NotReady",
            &format!("{type_} is not True"),
            None,
        ),
    };
}

/// Writes what a pass changed: labels and annotations on the object, the
/// rest on the status, each only when it changed and only over the version
/// the pass read (a conflict retries the pass).
async fn write(
    ctx: &NodeClaimContext,
    before: &NodeClaim,
    after: &NodeClaim,
) -> Result<(), ControllerError> {
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let name = after.name_any();
    let result = async {
        let mut version = before.metadata.resource_version.clone();
        if before.metadata.labels != after.metadata.labels
            || before.metadata.annotations != after.metadata.annotations
        {
            let patch = serde_json::json!({
                "metadata": {
                    "resourceVersion": version,
                    "labels": after.metadata.labels,
                    "annotations": after.metadata.annotations,
                }
            });
            let written = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            version = written.metadata.resource_version;
        }
        if before.status != after.status {
            let patch = serde_json::json!({
                "metadata": {"resourceVersion": version},
                "status": after.status,
            });
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Ok::<(), kube::Error>(())
    }
    .await;
    match result {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}
