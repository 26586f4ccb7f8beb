//! Garbage collection between the cluster and the cloud, every two minutes
//! (every ten seconds for the first few passes after start):
//! - an instance launched for the cluster that no NodeClaim stands for, and
//!   older than 30 seconds, is terminated and its Node deleted (a launch
//!   whose NodeClaim was deleted meanwhile, say);
//! - a registered NodeClaim whose instance the cloud no longer lists is
//!   deleted, unless its Node is still Ready (the kubelet runs, so the cloud
//!   may just be lagging) or it launched less than
//!   [`super::LAUNCH_SETTLING`] ago (EC2 may not list a fresh instance yet),
//!   so its pods are provisioned again.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};

use super::{NodeClaimContext, gone_for_sure, nodes_of};
use crate::apis::NodeClaim;
use crate::apis::conditions::{NODE_CLAIM_REGISTERED, is_condition_true};
use crate::controllers::ControllerError;

/// How old an instance without a NodeClaim must be before it is terminated.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(30);

/// What one pass removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Collected {
    /// Provider IDs of instances terminated.
    pub instances: Vec<String>,
    /// NodeClaims deleted because their instance is gone.
    pub node_claims: Vec<String>,
}

/// Runs garbage collection until the process ends.
pub async fn run(ctx: Arc<NodeClaimContext>) {
    ctx.state.synced().await;
    let mut passes = 0u32;
    loop {
        match collect(&ctx).await {
            Ok(done) if done != Collected::default() => tracing::info!(
                instances = ?done.instances,
                nodeclaims = ?done.node_claims,
                "garbage collected"
            ),
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "garbage collection failed; retrying"),
        }
        passes += 1;
        let pause = if passes <= 20 { 10 } else { 120 };
        tokio::time::sleep(Duration::from_secs(pause)).await;
    }
}

/// One pass.
pub async fn collect(ctx: &NodeClaimContext) -> Result<Collected, ControllerError> {
    let mut collected = Collected::default();
    // The cloud is listed before the cluster is read, so a claim created
    // meanwhile is seen and its instance kept.
    let instances: Vec<NodeClaim> = ctx
        .cloud
        .list()
        .await?
        .into_iter()
        .filter(|i| i.metadata.deletion_timestamp.is_none())
        .collect();
    let snapshot = ctx.state.snapshot();
    let claimed: BTreeSet<String> = snapshot
        .node_claims
        .iter()
        .filter_map(|c| c.status.as_ref().and_then(|s| s.provider_id.clone()))
        .collect();
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    for instance in &instances {
        let Some(provider_id) = instance.status.as_ref().and_then(|s| s.provider_id.clone()) else {
            continue;
        };
        let old_enough = instance
            .metadata
            .creation_timestamp
            .as_ref()
            .is_some_and(|t| now - t.0.as_second() > ORPHAN_GRACE.as_secs() as i64);
        if claimed.contains(&provider_id) || !old_enough {
            continue;
        }
        match ctx.cloud.delete(instance).await {
            Ok(()) => {}
            Err(error) if error.is_not_found() => {}
            Err(error) => return Err(error.into()),
        }
        for node in ctx.state.nodes.all() {
            if node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
                == Some(provider_id.as_str())
            {
                match nodes
                    .delete(&node.name_any(), &DeleteParams::default())
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        tracing::info!(
            provider_id,
            "terminated an instance no NodeClaim stands for"
        );
        collected.instances.push(provider_id);
    }

    let listed: BTreeSet<String> = instances
        .iter()
        .filter_map(|i| i.status.as_ref().and_then(|s| s.provider_id.clone()))
        .collect();
    let claims: Api<NodeClaim> = Api::all(ctx.client.clone());
    for claim in ctx.state.node_claims.all() {
        let conditions = claim
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        let provider_id = claim.status.as_ref().and_then(|s| s.provider_id.clone());
        let vanished = provider_id.as_ref().is_some_and(|id| !listed.contains(id));
        if claim.metadata.deletion_timestamp.is_some()
            || !is_condition_true(conditions, NODE_CLAIM_REGISTERED)
            || !vanished
            || !gone_for_sure(&claim, k8s_openapi::jiff::Timestamp::now())
        {
            continue;
        }
        let node_ready = nodes_of(&ctx.state, &claim)
            .iter()
            .any(|n| crate::apis::conditions::node_is_ready(n));
        if node_ready {
            continue;
        }
        match claims
            .delete(&claim.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
        tracing::info!(nodeclaim = %claim.name_any(), "deleted a NodeClaim whose instance is gone");
        super::record_disrupted(&claim, "garbage_collected");
        collected.node_claims.push(claim.name_any());
    }
    Ok(collected)
}
