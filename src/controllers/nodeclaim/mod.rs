//! NodeClaim controllers: the lifecycle (launch → registration →
//! initialization, with the liveness timeouts) and finalization (the Node
//! removed, then the instance), Karpenter's `nodeclaim.lifecycle`; the
//! disruption marks (`Drifted`, `Consolidatable`: what they are in
//! [`marks`], the controller that writes them in [`disruption`]),
//! expiration, the pod events `consolidateAfter` counts from, and garbage
//! collection. The disruption controllers read what these write; nothing
//! here depends on them.

pub mod disruption;
pub mod expiration;
mod finalize;
pub mod garbage_collection;
mod initialization;
mod launch;
mod lifecycle;
pub mod marks;
pub mod pod_events;
mod registration;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};

pub use lifecycle::{reconcile, run};

use crate::apis::conditions::{
    NODE_CLAIM_INSTANCE_TERMINATING, NODE_CLAIM_LAUNCHED, find_condition, is_condition_true,
};
use crate::apis::{Condition, NodeClaim, NodeClaimStatus};
use crate::cloudprovider::CloudProvider;
use crate::cluster::ClusterState;
use crate::controllers::ControllerError;
use crate::controllers::recorder::Recorder;

/// A NodeClaim that has not registered this long after it launched is
/// deleted, and its pods provisioned again (Karpenter: 15 minutes).
pub const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// A NodeClaim that could not launch this long after its first attempt is
/// deleted (Karpenter: 5 minutes).
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// How long after a launch EC2 may still not know the instance: for a few
/// seconds after CreateFleet returned it, DescribeInstances leaves it out
/// and answers `InvalidInstanceID.NotFound` for it, and so may
/// TerminateInstances (EC2's eventual consistency). Until then a claim's
/// instance the cloud says it does not find is not believed gone. Kept
/// short, as it delays the cleanup of an instance that really died at
/// once; an instance EC2 takes longer to know is left to garbage
/// collection's orphan pass ([`garbage_collection::ORPHAN_GRACE`]).
pub const LAUNCH_SETTLING: Duration = Duration::from_secs(15);

/// What the NodeClaim controllers share.
pub struct NodeClaimContext {
    /// The API server.
    pub client: Client,
    /// The shared cluster view.
    pub state: Arc<ClusterState>,
    /// Where instances are launched and terminated.
    pub cloud: Arc<dyn CloudProvider>,
    /// Publishes events as `nodewright`.
    pub recorder: Recorder,
}

/// Writes `conditions` as NodeClaim `name`'s status conditions (a merge
/// patch of the status); a claim that is already gone is not an error.
pub async fn patch_conditions(
    ctx: &NodeClaimContext,
    name: &str,
    conditions: &[Condition],
) -> Result<(), ControllerError> {
    let patch = serde_json::json!({"status": {"conditions": conditions}});
    patch_status(ctx, name, &patch).await?;
    Ok(())
}

/// Merge-patches NodeClaim `name`'s status with `patch`; `false` when the
/// claim is already gone, which is not an error.
pub async fn patch_status(
    ctx: &NodeClaimContext,
    name: &str,
    patch: &serde_json::Value,
) -> Result<bool, kube::Error> {
    match Api::<NodeClaim>::all(ctx.client.clone())
        .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

/// Merge-patches NodeClaim `name`'s annotations with `annotations` (a hash
/// re-stamp); a claim that is already gone is not an error.
pub async fn patch_annotations(
    client: &kube::Client,
    name: &str,
    annotations: &std::collections::BTreeMap<&'static str, String>,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    match Api::<NodeClaim>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}

/// A claim's status conditions, created empty when it has none yet.
fn conditions_mut(claim: &mut NodeClaim) -> &mut Vec<Condition> {
    claim
        .status
        .get_or_insert_with(NodeClaimStatus::default)
        .conditions
        .get_or_insert_with(Vec::new)
}

/// Deletes `claim` — that object: a claim made again under its name is not
/// touched (a UID precondition). `false` when it is already gone or was
/// replaced, which is not an error.
///
/// A 409 is only taken for "replaced" once a read shows another UID under
/// the name (or the claim already being deleted): after a conflict the
/// server answers for any other reason the claim still stands, and a
/// caller that believed it replaced would never delete it.
pub async fn delete_claim(client: &Client, claim: &NodeClaim) -> Result<bool, kube::Error> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: claim.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let api = Api::<NodeClaim>::all(client.clone());
    match api.delete(name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(kube::Error::Api(status)) if status.code == 409 => match api.get_opt(name).await? {
            Some(current)
                if current.metadata.uid == claim.metadata.uid
                    && current.metadata.deletion_timestamp.is_none() =>
            {
                Err(kube::Error::Api(status))
            }
            _ => Ok(false),
        },
        Err(error) => Err(error),
    }
}

/// Whether the cloud's "not found" for `claim`'s instance means it is gone:
/// its termination was already accepted (`InstanceTerminating`), or it
/// launched more than [`LAUNCH_SETTLING`] ago (or has no launch time).
/// Otherwise the instance may be one EC2 does not list yet, and a caller
/// that believed it would orphan it or drop a claim that stands for it.
pub fn gone_for_sure(claim: &NodeClaim, now: k8s_openapi::jiff::Timestamp) -> bool {
    let conditions = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    if is_condition_true(conditions, NODE_CLAIM_INSTANCE_TERMINATING) {
        return true;
    }
    match find_condition(conditions, NODE_CLAIM_LAUNCHED).filter(|c| c.is_true()) {
        Some(launched) => {
            let since = now.as_second() - launched.last_transition_time.0.as_second();
            since >= LAUNCH_SETTLING.as_secs() as i64
        }
        None => true,
    }
}

/// The Nodes that stand for `claim`: those with its provider ID.
pub fn nodes_of(state: &ClusterState, claim: &NodeClaim) -> Vec<Arc<Node>> {
    let Some(provider_id) = claim.status.as_ref().and_then(|s| s.provider_id.as_deref()) else {
        return Vec::new();
    };
    state
        .nodes
        .all()
        .into_iter()
        .filter(|node| {
            node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id)
        })
        .collect()
}

/// The NodeClaim a Node stands for, by provider ID.
pub fn node_claim_of(state: &ClusterState, node: &Node) -> Option<Arc<NodeClaim>> {
    let provider_id = node.spec.as_ref()?.provider_id.as_deref()?;
    state.node_claims.all().into_iter().find(|claim| {
        claim.status.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id)
    })
}

/// Counts a NodeClaim nodewright removed, by `reason`
/// (`karpenter_nodeclaims_disrupted_total`).
pub fn record_disrupted(claim: &NodeClaim, reason: &str) {
    let label = |key: &str| {
        claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key).cloned())
            .unwrap_or_default()
    };
    crate::metrics::metrics()
        .nodeclaims_disrupted
        .get_or_create(&crate::metrics::labels(&[
            ("reason", reason),
            ("nodepool", &label(crate::apis::labels::NODE_POOL_LABEL_KEY)),
            (
                "capacity_type",
                &label(crate::apis::labels::CAPACITY_TYPE_LABEL_KEY),
            ),
        ]))
        .inc();
}

/// `(nodepool, zone)` label values of a NodeClaim or Node's labels.
pub fn pool_and_zone(
    labels: Option<&std::collections::BTreeMap<String, String>>,
) -> (String, String) {
    let get = |key: &str| labels.and_then(|l| l.get(key).cloned()).unwrap_or_default();
    (
        get(crate::apis::labels::NODE_POOL_LABEL_KEY),
        get(crate::apis::labels::ZONE_LABEL_KEY),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};

    fn claim(conditions: serde_json::Value) -> NodeClaim {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c"},
            "spec": {
                "requirements": [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
            },
            "status": {"conditions": conditions}
        }))
        .expect("a NodeClaim")
    }

    fn condition(type_: &str, at: Timestamp) -> serde_json::Value {
        serde_json::json!({
            "type": type_, "status": "True", "reason": type_, "message": "",
            "lastTransitionTime": at.to_string()
        })
    }

    #[test]
    fn not_found_is_believed_only_once_a_launch_has_settled_or_termination_began() {
        let now = Timestamp::now();
        let at = |secs: i64| now - SignedDuration::from_secs(secs);
        let fresh = claim(serde_json::json!([condition(NODE_CLAIM_LAUNCHED, at(5))]));
        assert!(!gone_for_sure(&fresh, now), "launched 5 s ago");
        let settled = claim(serde_json::json!([condition(NODE_CLAIM_LAUNCHED, at(16))]));
        assert!(gone_for_sure(&settled, now), "launched 16 s ago");
        let terminating = claim(serde_json::json!([
            condition(NODE_CLAIM_LAUNCHED, at(5)),
            condition(NODE_CLAIM_INSTANCE_TERMINATING, at(1)),
        ]));
        assert!(gone_for_sure(&terminating, now), "its termination began");
        assert!(
            gone_for_sure(&claim(serde_json::json!([])), now),
            "never launched"
        );
    }
}
