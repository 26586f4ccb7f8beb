//! Registration: once a Node with the claim's provider ID appears and the
//! cloud provider's registration hook lets it through (the AWS provider
//! waits for an instance's placement group partition), the claim's labels,
//! annotations and taints (unless the node opts out with
//! `karpenter.sh/do-not-sync-taints`), the termination finalizer and an owner
//! reference are synced onto it, the `karpenter.sh/unregistered` taint is
//! removed, and the node is labelled `karpenter.sh/registered`. Startup
//! taints are synced only onto a node without that label: a pass that read
//! the claim before its registration was written must not put them back
//! after the daemon that owns them removed them (the node would never be
//! initialized).

use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};

use super::{NodeClaimContext, conditions_mut, nodes_of};
use crate::apis::conditions::{NODE_CLAIM_REGISTERED, is_condition_true, set_condition};
use crate::apis::labels::{
    NODE_DO_NOT_SYNC_TAINTS_LABEL_KEY, NODE_REGISTERED_LABEL_KEY, TERMINATION_FINALIZER,
    UNREGISTERED_TAINT_KEY,
};
use crate::apis::{ConditionStatus, NodeClaim, NodeClaimStatus};
use crate::cloudprovider::Registration;
use crate::controllers::ControllerError;

/// Registers `claim` if its Node has appeared; updates it in place.
pub async fn register(
    ctx: &NodeClaimContext,
    claim: &mut NodeClaim,
) -> Result<(), ControllerError> {
    let status = claim.status.get_or_insert_with(NodeClaimStatus::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if is_condition_true(conditions, NODE_CLAIM_REGISTERED) {
        return Ok(());
    }
    let nodes = nodes_of(&ctx.state, claim);
    let node = match nodes.as_slice() {
        [] => {
            set_unregistered(
                claim,
                ConditionStatus::Unknown,
                "NodeNotFound",
                "Node not registered with cluster",
            );
            return Ok(());
        }
        [node] => node.clone(),
        _ => {
            set_unregistered(
                claim,
                ConditionStatus::False,
                "MultipleNodesFound",
                "Invariant violated, matched multiple nodes",
            );
            return Ok(());
        }
    };
    if let Registration::Wait(why) = ctx.cloud.before_registration(claim).await? {
        set_unregistered(
            claim,
            ConditionStatus::Unknown,
            "RegistrationHookPending",
            &why,
        );
        return Ok(());
    }
    let registered_before = node.labels().contains_key(NODE_REGISTERED_LABEL_KEY);
    let has_unregistered_taint = taints(&node)
        .iter()
        .any(|t| t.key == UNREGISTERED_TAINT_KEY);
    if !registered_before && !has_unregistered_taint {
        let event = Event {
            type_: EventType::Warning,
            reason: "UnregisteredTaintMissing".to_string(),
            note: Some(format!(
                "Node {} registered without the {UNREGISTERED_TAINT_KEY}:NoExecute taint that keeps pods off it until its labels and taints are synced",
                node.name_any()
            )),
            action: "Register".to_string(),
            secondary: None,
        };
        if let Err(error) = ctx.recorder.publish(&event, &claim.object_ref(&())).await {
            tracing::warn!(%error, "cannot publish event");
        }
    }
    let synced = synced_node(claim, &node);
    if &synced != node.as_ref() {
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": node.metadata.resource_version,
                "labels": synced.metadata.labels,
                "annotations": synced.metadata.annotations,
                "finalizers": synced.metadata.finalizers,
                "ownerReferences": synced.metadata.owner_references,
            },
            "spec": {"taints": synced.spec.as_ref().and_then(|s| s.taints.clone())},
        });
        Api::<Node>::all(ctx.client.clone())
            .patch(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
    }
    let status = claim.status.get_or_insert_with(NodeClaimStatus::default);
    status.node_name = Some(node.name_any());
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    set_condition(
        conditions,
        NODE_CLAIM_REGISTERED,
        ConditionStatus::True,
        "Registered",
        "",
        None,
    );
    tracing::info!(nodeclaim = %claim.name_any(), node = %node.name_any(), "registered NodeClaim");
    let (pool, zone) = super::pool_and_zone(claim.metadata.labels.as_ref());
    crate::metrics::metrics()
        .nodes_created
        .get_or_create(&crate::metrics::labels(&[
            ("nodepool", &pool),
            ("zone", &zone),
        ]))
        .inc();
    Ok(())
}

fn set_unregistered(claim: &mut NodeClaim, status: ConditionStatus, reason: &str, message: &str) {
    let conditions = conditions_mut(claim);
    set_condition(
        conditions,
        NODE_CLAIM_REGISTERED,
        status,
        reason,
        message,
        None,
    );
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

/// `node` with the claim's labels, annotations, taints, finalizer and owner
/// reference, without the unregistered taint, labelled registered. Startup
/// taints are added only to a node not labelled registered yet.
pub fn synced_node(claim: &NodeClaim, node: &Node) -> Node {
    let mut out = node.clone();
    let labels = out.metadata.labels.get_or_insert_with(Default::default);
    let registered_before = labels.contains_key(NODE_REGISTERED_LABEL_KEY);
    let sync_taints = labels
        .get(NODE_DO_NOT_SYNC_TAINTS_LABEL_KEY)
        .map(String::as_str)
        != Some("true");
    labels.extend(claim.labels().clone());
    labels.insert(NODE_REGISTERED_LABEL_KEY.to_string(), "true".to_string());
    if !claim.annotations().is_empty() {
        out.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .extend(claim.annotations().clone());
    }
    let finalizers = out.metadata.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
        finalizers.push(TERMINATION_FINALIZER.to_string());
    }
    let owner = OwnerReference {
        api_version: "karpenter.sh/v1".to_string(),
        kind: "NodeClaim".to_string(),
        name: claim.name_any(),
        uid: claim.metadata.uid.clone().unwrap_or_default(),
        block_owner_deletion: Some(true),
        controller: None,
    };
    let owners = out.metadata.owner_references.get_or_insert_with(Vec::new);
    if !owners
        .iter()
        .any(|o| o.kind == "NodeClaim" && o.uid == owner.uid)
    {
        owners.push(owner);
    }
    // Startup taints go on once, with the registered label: whatever removes
    // them later (the daemon that owns them) is not undone by a pass that
    // read the claim before its registration was written.
    let startup = (!registered_before)
        .then_some(claim.spec.startup_taints.iter().flatten())
        .into_iter()
        .flatten();
    let mut taints = taints(&out);
    if sync_taints {
        for taint in claim.spec.taints.iter().flatten().chain(startup) {
            let present = taints
                .iter()
                .any(|t| t.key == taint.key && t.effect == taint.effect);
            if !present {
                taints.push(taint.clone());
            }
        }
    }
    taints.retain(|t| !(t.key == UNREGISTERED_TAINT_KEY && t.effect == "NoExecute"));
    let spec = out.spec.get_or_insert_with(Default::default);
    spec.taints = (!taints.is_empty()).then_some(taints);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim() -> NodeClaim {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "uid": "u1"},
            "spec": {
                "requirements": [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "agent.example.com/starting", "effect": "NoSchedule"}]
            }
        }))
        .expect("a NodeClaim")
    }

    fn node(labels: serde_json::Value, taints: serde_json::Value) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n", "labels": labels},
            "spec": {"taints": taints}
        }))
        .expect("a Node")
    }

    fn taint_keys(node: &Node) -> Vec<String> {
        taints(node).into_iter().map(|t| t.key).collect()
    }

    #[test]
    fn a_new_node_gets_the_claims_taints_and_startup_taints_instead_of_unregistered() {
        let registering = node(
            serde_json::json!({}),
            serde_json::json!([{"key": UNREGISTERED_TAINT_KEY, "effect": "NoExecute"}]),
        );
        let synced = synced_node(&claim(), &registering);
        assert_eq!(
            taint_keys(&synced),
            ["dedicated", "agent.example.com/starting"]
        );
        assert_eq!(synced.labels()[NODE_REGISTERED_LABEL_KEY], "true");
    }

    #[test]
    fn startup_taints_removed_after_registration_are_not_put_back() {
        // The owning daemon removed the startup taint from a registered node;
        // a pass that read the claim before its registration was written
        // syncs it again.
        let registered = node(
            serde_json::json!({NODE_REGISTERED_LABEL_KEY: "true"}),
            serde_json::json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
        );
        let synced = synced_node(&claim(), &registered);
        assert_eq!(taint_keys(&synced), ["dedicated"]);
    }
}
