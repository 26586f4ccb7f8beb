//! Initialization: a registered node is initialized once it is `Ready`, its
//! startup taints and the known ephemeral taints (not-ready, unreachable,
//! uninitialized, unregistered) are gone, and every extended resource the
//! claim requested shows in its allocatable; it is then labelled
//! `karpenter.sh/initialized`.

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};

use super::{NodeClaimContext, conditions_mut, nodes_of};
use crate::apis::conditions::{
    NODE_CLAIM_INITIALIZED, NODE_CLAIM_REGISTERED, is_condition_true, set_condition,
};
use crate::apis::labels::NODE_INITIALIZED_LABEL_KEY;
use crate::apis::{ConditionStatus, NodeClaim};
use crate::controllers::ControllerError;
use crate::scheduling::taints::is_known_ephemeral;
use crate::scheduling::{Resources, convert::taint_from_k8s};

/// Marks `claim` initialized when its node is; updates it in place.
pub async fn initialize(
    ctx: &NodeClaimContext,
    claim: &mut NodeClaim,
) -> Result<(), ControllerError> {
    let conditions = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    if is_condition_true(conditions, NODE_CLAIM_INITIALIZED)
        || !is_condition_true(conditions, NODE_CLAIM_REGISTERED)
    {
        return Ok(());
    }
    let Some(node) = nodes_of(&ctx.state, claim).into_iter().next() else {
        set(claim, "NodeNotFound", "Node not registered with cluster");
        return Ok(());
    };
    if let Some((reason, message)) = not_initialized_because(claim, &node) {
        set(claim, reason, &message);
        return Ok(());
    }
    if node
        .labels()
        .get(NODE_INITIALIZED_LABEL_KEY)
        .map(String::as_str)
        != Some("true")
    {
        let patch =
            serde_json::json!({"metadata": {"labels": {NODE_INITIALIZED_LABEL_KEY: "true"}}});
        Api::<Node>::all(ctx.client.clone())
            .patch(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
    }
    let conditions = conditions_mut(claim);
    set_condition(
        conditions,
        NODE_CLAIM_INITIALIZED,
        ConditionStatus::True,
        "Initialized",
        "",
        None,
    );
    tracing::info!(nodeclaim = %claim.name_any(), node = %node.name_any(), "initialized NodeClaim");
    Ok(())
}

fn set(claim: &mut NodeClaim, reason: &str, message: &str) {
    let conditions = conditions_mut(claim);
    set_condition(
        conditions,
        NODE_CLAIM_INITIALIZED,
        ConditionStatus::Unknown,
        reason,
        message,
        None,
    );
}

/// The condition reason and message of what still keeps `node` from being
/// initialized, or `None` when nothing does.
pub fn not_initialized_because(claim: &NodeClaim, node: &Node) -> Option<(&'static str, String)> {
    if !crate::apis::conditions::node_is_ready(node) {
        return Some(("NodeNotReady", "Node status is NotReady".to_string()));
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    for startup in claim.spec.startup_taints.iter().flatten() {
        if taints
            .iter()
            .any(|t| t.key == startup.key && t.effect == startup.effect)
        {
            return Some((
                "StartupTaintsExist",
                format!(
                    "StartupTaint \"{}:{}\" still exists",
                    startup.key, startup.effect
                ),
            ));
        }
    }
    let object = format!("node {}", node.name_any());
    for (i, taint) in taints.iter().enumerate() {
        let ephemeral = taint_from_k8s(&object, &format!("spec.taints[{i}]"), taint)
            .is_ok_and(|t| is_known_ephemeral(&t));
        if ephemeral {
            return Some((
                "KnownEphemeralTaintsExist",
                format!(
                    "KnownEphemeralTaint \"{}:{}\" still exists",
                    taint.key, taint.effect
                ),
            ));
        }
    }
    let requested = claim
        .spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref());
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let allocatable = Resources::parse(
        allocatable
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.0.as_str())),
    )
    .unwrap_or_default();
    for (name, quantity) in requested.into_iter().flatten() {
        let is_extended = !matches!(
            name.as_str(),
            "cpu" | "memory" | "ephemeral-storage" | "pods"
        );
        let wanted = Resources::parse([(name.as_str(), quantity.0.as_str())]).unwrap_or_default();
        if is_extended && !wanted.is_zero() && allocatable.get(name) == 0 {
            return Some((
                "ResourceNotRegistered",
                format!("Resource \"{name}\" was requested but not registered"),
            ));
        }
    }
    None
}
