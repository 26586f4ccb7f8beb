//! Static capacity (Karpenter's `static.provisioning` and
//! `static.deprovisioning`, behind the `StaticCapacity` gate): a NodePool
//! with `spec.replicas` keeps that many NodeClaims whatever the pods want.
//! Missing ones are opened from the template ([`static_node_claim`]) within
//! `limits.nodes`; a surplus is deleted in the order [`plan`] chooses. One
//! task reconciles every static pool in turn — when a NodePool or NodeClaim
//! changes and every [`RESYNC`] — so scaling up and down never race each
//! other. Provisioning never plans for a static pool (its spec is blocked
//! with `StaticNodePool`), and its nodes are capacity like any other.

pub mod plan;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Client, Resource, ResourceExt};

pub use plan::{StaticCounts, StaticPlan, StaticPool, plan_static_pool, static_pools};

use super::ControllerError;
use super::nodeclaim::delete_claim;
use super::provisioning::{count_created, generate_name, node_claim_object};
use super::recorder::Recorder;
use crate::apis::{NodeClaim, NodePool};
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cluster::{ClusterSnapshot, ClusterState, pool_specs};
use crate::scheduling::{NewNodeClaim, static_node_claim};

/// How often every static pool is looked at without a change (Karpenter
/// requeues each one every minute).
pub const RESYNC: Duration = Duration::from_secs(30);

/// What the static capacity controller needs.
pub struct StaticCapacityContext {
    /// The API server.
    pub client: Client,
    /// The shared cluster view.
    pub state: Arc<ClusterState>,
    /// Each pool's instance types, for the NodeClaims it opens.
    pub instance_types: Arc<InstanceTypeProvider>,
    /// Instance types a NodeClaim names at most.
    pub max_instance_types: usize,
    /// Publishes events as `nodewright`.
    pub recorder: Recorder,
}

/// Runs until the cluster state's feeds end.
pub async fn run(ctx: Arc<StaticCapacityContext>) {
    ctx.state.synced().await;
    let pools = ctx.state.node_pools.changes().map(|_| ());
    let claims = ctx.state.node_claims.changes().map(|_| ());
    let mut changes = std::pin::pin!(futures::stream::select(pools, claims));
    let mut every = tokio::time::interval(RESYNC);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if let Err(error) = reconcile(&ctx, Timestamp::now()).await {
            tracing::warn!(%error, "static capacity: reconciling failed; retrying");
        }
        tokio::select! {
            change = changes.next() => if change.is_none() { return },
            _ = every.tick() => {}
        }
        // A burst of changes (a scale of many replicas) is one reconcile.
        tokio::time::sleep(Duration::from_millis(200)).await;
        while let Some(Some(())) = changes.next().now_or_never() {}
    }
}

/// Brings every static pool to its replicas once; the plans acted on.
pub async fn reconcile(
    ctx: &StaticCapacityContext,
    now: Timestamp,
) -> Result<Vec<StaticPlan>, ControllerError> {
    let snapshot = ctx.state.snapshot();
    let plans: Vec<(Arc<NodePool>, StaticPlan)> = snapshot
        .node_pools
        .iter()
        .filter_map(|pool| {
            let plan = plan_static_pool(&snapshot, pool, &BTreeSet::new(), now)?;
            Some((pool.clone(), plan))
        })
        .collect();
    if plans.is_empty() {
        return Ok(Vec::new());
    }
    let opening = plans.iter().any(|(_, plan)| plan.open > 0);
    let templates = if opening {
        let (snapshot, types, max) = (
            snapshot.clone(),
            ctx.instance_types.clone(),
            ctx.max_instance_types,
        );
        tokio::task::spawn_blocking(move || templates(&snapshot, &types, max)).await?
    } else {
        Vec::new()
    };
    let mut first_error = None;
    for (pool, plan) in &plans {
        if let Some(why) = &plan.held {
            tracing::debug!(nodepool = %plan.node_pool, reason = %why, "static NodePool held");
        }
        let result = if plan.open > 0 {
            let template = templates
                .iter()
                .find(|(name, _)| *name == plan.node_pool)
                .map(|(_, template)| template.clone())
                .unwrap_or_else(|| {
                    Err("the NodePool cannot be read (see the provisioning warnings)".to_string())
                });
            open(ctx, pool, plan, template).await
        } else {
            remove(ctx, &snapshot, plan).await
        };
        if let Err(error) = result {
            first_error.get_or_insert(error);
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(plans.into_iter().map(|(_, plan)| plan).collect()),
    }
}

/// The NodeClaim each static pool opens, or why it cannot open one (its
/// class is missing or blocked).
fn templates(
    snapshot: &ClusterSnapshot,
    instance_types: &InstanceTypeProvider,
    max_instance_types: usize,
) -> Vec<(String, Result<NewNodeClaim, String>)> {
    pool_specs(snapshot, instance_types)
        .node_pools
        .into_iter()
        .map(|spec| {
            let template = static_node_claim(&spec, max_instance_types);
            (spec.name, template)
        })
        .collect()
}

/// Opens `plan.open` NodeClaims of `pool` from `template`.
async fn open(
    ctx: &StaticCapacityContext,
    pool: &NodePool,
    plan: &StaticPlan,
    template: Result<NewNodeClaim, String>,
) -> Result<(), ControllerError> {
    let template = match template {
        Ok(template) => template,
        Err(why) => {
            tracing::warn!(nodepool = %plan.node_pool, reason = %why, "static NodePool cannot open NodeClaims");
            // On the pool: its class is missing or blocked, or no instance
            // type fits its template.
            let event = Event {
                type_: EventType::Warning,
                reason: "StaticCapacityBlocked".to_string(),
                note: Some(super::truncate(
                    format!(
                        "cannot open the {} NodeClaims spec.replicas asks for: {why}",
                        plan.open
                    ),
                    1024,
                )),
                action: "Provisioning".to_string(),
                secondary: None,
            };
            if let Err(error) = ctx.recorder.publish(&event, &pool.object_ref(&())).await {
                tracing::warn!(%error, "cannot publish event");
            }
            return Ok(());
        }
    };
    tracing::info!(
        nodepool = %plan.node_pool,
        current = plan.counts.active,
        desired = plan.replicas,
        open = plan.open,
        "provisioning NodeClaims to satisfy the replica count"
    );
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    for _ in 0..plan.open {
        let object = node_claim_object(pool, &template, generate_name(&plan.node_pool));
        let created = api.create(&PostParams::default(), &object).await?;
        tracing::info!(nodeclaim = %created.name_any(), nodepool = %plan.node_pool, "created NodeClaim");
        ctx.state.record_created(created);
        count_created(&plan.node_pool, "provisioning");
    }
    Ok(())
}

/// Deletes the NodeClaims `plan` removes.
async fn remove(
    ctx: &StaticCapacityContext,
    snapshot: &ClusterSnapshot,
    plan: &StaticPlan,
) -> Result<(), ControllerError> {
    if plan.remove.is_empty() {
        return Ok(());
    }
    tracing::info!(
        nodepool = %plan.node_pool,
        current = plan.counts.active,
        desired = plan.replicas,
        remove = plan.remove.len(),
        "deprovisioning NodeClaims to satisfy the replica count"
    );
    for name in &plan.remove {
        let Some(claim) = snapshot
            .node_claims
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name.as_str()))
        else {
            continue;
        };
        if delete_claim(&ctx.client, claim).await? {
            tracing::info!(nodeclaim = %name, nodepool = %plan.node_pool, "deleting NodeClaim");
        }
    }
    Ok(())
}
