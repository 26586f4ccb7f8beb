//! The NodeClaim disruption controller (Karpenter's `nodeclaim.disruption`):
//! keeps each NodeClaim's `Drifted` and `Consolidatable` conditions true to
//! its NodePool, its EC2NodeClass and its instance, so the disruption
//! methods only read conditions. Triggered by NodeClaim changes and by
//! changes to NodePools and EC2NodeClasses (for their claims), and again
//! when a claim's `consolidateAfter` runs out; drift is looked at again
//! every five minutes, as Karpenter does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use super::marks::{
    Consolidatable, INSTANCE_TYPE_CHECK_AGE, consolidatable, instance_type_drift, node_pool_drift,
    requirements_drift,
};
use super::{NodeClaimContext, patch_status};
use crate::apis::conditions::{
    NODE_CLAIM_CONSOLIDATABLE, NODE_CLAIM_DRIFTED, NODE_CLAIM_LAUNCHED, is_condition_true,
    set_condition,
};
use crate::apis::labels::NODE_POOL_LABEL_KEY;
use crate::apis::{ConditionStatus, NodeClaim, NodePool};
use crate::cloudprovider::DriftReason;
use crate::controllers::ControllerError;

/// How often drift is checked again without a trigger.
const DRIFT_POLL: Duration = Duration::from_secs(5 * 60);
/// How long a claim found on an offered instance type is not checked again
/// (Karpenter: 30 minutes).
const INSTANCE_TYPE_CHECK_TTL: Duration = Duration::from_secs(30 * 60);

/// The controller's memory: claims (by UID) whose instance type was found
/// offered, and when.
#[derive(Default)]
pub struct DisruptionMarks {
    instance_type_checked: Mutex<HashMap<String, Instant>>,
}

/// Runs the controller until the cluster state's feeds end.
pub async fn run(ctx: Arc<NodeClaimContext>) {
    let marks = Arc::new(DisruptionMarks::default());
    let state = ctx.state.clone();
    let of_pool = {
        let state = state.clone();
        ctx.state.node_pools.changes().flat_map(move |pool| {
            let name = pool.name_any();
            futures::stream::iter(claims_where(&state, |claim| {
                claim.labels().get(NODE_POOL_LABEL_KEY) == Some(&name)
            }))
        })
    };
    let of_class = {
        let state = state.clone();
        ctx.state.node_classes.changes().flat_map(move |class| {
            let name = class.name_any();
            futures::stream::iter(claims_where(&state, |claim| {
                claim.spec.node_class_ref.name == name
            }))
        })
    };
    let trigger = futures::stream::select(
        ctx.state.node_claims.changes(),
        futures::stream::select(of_pool, of_class),
    )
    .map(|claim| Ok::<NodeClaim, watcher::Error>(NodeClaim::clone(&claim)));
    Controller::for_stream(trigger, ctx.state.node_claims.store().clone())
        .run(
            move |claim, ctx| {
                let marks = marks.clone();
                async move { reconcile(&ctx, &marks, &claim, Timestamp::now()).await }
            },
            |claim, error, _| {
                if !error.is_conflict() {
                    tracing::warn!(nodeclaim = %claim.name_any(), %error, "marking a NodeClaim for disruption failed; retrying");
                }
                Action::requeue(error.retry_after(Duration::from_secs(10)))
            },
            ctx,
        )
        .for_each(|_| async {})
        .await;
}

fn claims_where(
    state: &crate::cluster::ClusterState,
    keep: impl Fn(&NodeClaim) -> bool,
) -> Vec<Arc<NodeClaim>> {
    state
        .node_claims
        .all()
        .into_iter()
        .filter(|c| keep(c))
        .collect()
}

/// One pass over a NodeClaim at `now`: its conditions recomputed and
/// written when they changed (guarded by the resourceVersion read).
pub async fn reconcile(
    ctx: &NodeClaimContext,
    marks: &DisruptionMarks,
    claim: &NodeClaim,
    now: Timestamp,
) -> Result<Action, ControllerError> {
    ctx.state.synced().await;
    // A claim of another provisioner's node class is not ours to mark.
    if claim.metadata.deletion_timestamp.is_some() || !claim.spec.node_class_ref.is_ec2_node_class()
    {
        return Ok(Action::await_change());
    }
    let Some(pool_name) = claim.labels().get(NODE_POOL_LABEL_KEY) else {
        return Ok(Action::await_change());
    };
    let Some(pool) = ctx.state.node_pools.store().get(&ObjectRef::new(pool_name)) else {
        return Ok(Action::await_change());
    };
    let before = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut conditions = before.clone();
    let mut requeue = DRIFT_POLL;

    if !is_condition_true(&conditions, NODE_CLAIM_LAUNCHED) {
        conditions.retain(|c| c.type_ != NODE_CLAIM_DRIFTED);
    } else {
        // A drift that cannot be judged now (the class missing, the
        // instance not answering) leaves the condition as it was.
        match drift(ctx, marks, &pool, claim, now).await {
            Ok(Some(reason)) => {
                set_condition(
                    &mut conditions,
                    NODE_CLAIM_DRIFTED,
                    ConditionStatus::True,
                    reason.as_str(),
                    reason.as_str(),
                    None,
                );
            }
            Ok(None) => conditions.retain(|c| c.type_ != NODE_CLAIM_DRIFTED),
            Err(error) => tracing::debug!(
                nodeclaim = %claim.name_any(), %error,
                "drift of a NodeClaim cannot be judged now; its condition is left as it is"
            ),
        }
    }

    // Static NodePools are never consolidated (Karpenter leaves their
    // claims' condition alone).
    if pool.spec.replicas.is_none() {
        match consolidatable(&pool, claim, now) {
            Ok(Consolidatable::Yes) => {
                set_condition(
                    &mut conditions,
                    NODE_CLAIM_CONSOLIDATABLE,
                    ConditionStatus::True,
                    NODE_CLAIM_CONSOLIDATABLE,
                    "",
                    None,
                );
            }
            Ok(Consolidatable::Waiting { until }) => {
                conditions.retain(|c| c.type_ != NODE_CLAIM_CONSOLIDATABLE);
                let left = now.duration_until(until);
                let left = Duration::try_from(left).unwrap_or_default();
                requeue = requeue.min(left + Duration::from_millis(100));
            }
            Ok(Consolidatable::Disabled | Consolidatable::NotInitialized) => {
                conditions.retain(|c| c.type_ != NODE_CLAIM_CONSOLIDATABLE);
            }
            // The NodePool controller reports a malformed `consolidateAfter`
            // on the pool; nothing is consolidatable meanwhile.
            Err(_) => conditions.retain(|c| c.type_ != NODE_CLAIM_CONSOLIDATABLE),
        }
    }

    if conditions != before {
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": claim.metadata.resource_version},
            "status": {"conditions": conditions},
        });
        if !patch_status(ctx, &claim.name_any(), &patch).await? {
            return Ok(Action::await_change());
        }
    }
    Ok(Action::requeue(requeue))
}

/// The first drift `claim` shows, in Karpenter's order: the NodePool's
/// template hash, its requirements, the instance type (for claims older
/// than an hour), then the cloud provider (EC2NodeClass hash, AMI, subnet,
/// security groups, capacity reservation).
async fn drift(
    ctx: &NodeClaimContext,
    marks: &DisruptionMarks,
    pool: &NodePool,
    claim: &NodeClaim,
    now: Timestamp,
) -> Result<Option<DriftReason>, ControllerError> {
    if let Some(reason) = node_pool_drift(pool, claim) {
        return Ok(Some(reason));
    }
    match requirements_drift(pool, claim) {
        Ok(Some(reason)) => return Ok(Some(reason)),
        Ok(None) => {}
        // The NodePool controller reports malformed requirements.
        Err(_) => return Ok(None),
    }
    let Some(class) = ctx
        .state
        .node_class_context(&pool.spec.template.spec.node_class_ref.name)
    else {
        return Ok(None);
    };
    let uid = claim.uid().unwrap_or_default();
    let old_enough = claim
        .metadata
        .creation_timestamp
        .as_ref()
        .is_some_and(|t| now.duration_since(t.0) > INSTANCE_TYPE_CHECK_AGE);
    if old_enough && !marks.recently_checked(&uid) {
        let types = ctx.cloud.instance_types(pool, &class).await?;
        if let Some(reason) = instance_type_drift(&types.instance_types, claim) {
            return Ok(Some(reason));
        }
        marks.checked(uid);
    }
    Ok(ctx.cloud.is_drifted(claim, &class).await?)
}

impl DisruptionMarks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.instance_type_checked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn recently_checked(&self, uid: &str) -> bool {
        self.lock()
            .get(uid)
            .is_some_and(|at| at.elapsed() < INSTANCE_TYPE_CHECK_TTL)
    }

    fn checked(&self, uid: String) {
        let mut checked = self.lock();
        checked.retain(|_, at| at.elapsed() < INSTANCE_TYPE_CHECK_TTL);
        checked.insert(uid, Instant::now());
    }
}
