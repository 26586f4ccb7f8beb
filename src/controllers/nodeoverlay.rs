//! The NodeOverlay controller (run with `--feature-gates NodeOverlay=true`):
//! Karpenter's `nodeoverlay.controller`. Whenever a NodeOverlay, NodePool or
//! EC2NodeClass changes (and every five minutes, for catalog refreshes), it
//! evaluates every overlay against every NodePool's instance types, writes
//! each overlay's `ValidationSucceeded` and `Ready` conditions, and hands
//! the result to the instance-type provider, which applies it to what the
//! scheduler, consolidation and launches see.

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use super::ControllerError;
use crate::apis::conditions::{NODE_OVERLAY_VALIDATION_SUCCEEDED, READY, set_condition};
use crate::apis::{Condition, ConditionStatus, NodeOverlay};
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cluster::{ClusterState, evaluate_overlays};
use crate::scheduling::overlay::OverlayStatus;

/// How often overlays are evaluated again without a change (the catalog's
/// prices may have been refreshed).
pub const RESYNC: Duration = Duration::from_secs(300);

/// What the NodeOverlay controller needs.
pub struct NodeOverlayContext {
    /// The API server.
    pub client: Client,
    /// The shared cluster view (NodePools, EC2NodeClasses, ConfigMaps).
    pub state: Arc<ClusterState>,
    /// Where the evaluated overlays are set.
    pub instance_types: Arc<InstanceTypeProvider>,
}

/// Runs the controller until its triggers end.
pub async fn run(ctx: Arc<NodeOverlayContext>) {
    ctx.state.synced().await;
    let overlays = watcher(
        Api::<NodeOverlay>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects()
    .map(|_| ());
    let mut triggers = futures::stream::select_all([
        overlays.boxed(),
        ctx.state.node_pools.changes().map(|_| ()).boxed(),
        ctx.state.node_classes.changes().map(|_| ()).boxed(),
    ]);
    loop {
        match reconcile(&ctx).await {
            Ok(()) => {}
            Err(error) => {
                tracing::warn!(%error, "NodeOverlay reconcile failed; retrying");
                tokio::time::sleep(error.retry_after(Duration::from_secs(10))).await;
                continue;
            }
        }
        // A trigger, or the resync timer; the end of the triggers ends the loop.
        if let Ok(None) = tokio::time::timeout(RESYNC, triggers.next()).await {
            return;
        }
        // One evaluation for a burst of changes.
        tokio::time::sleep(Duration::from_secs(1)).await;
        while let Some(Some(())) = triggers.next().now_or_never() {}
    }
}

/// One evaluation of every overlay: statuses written, then the overlays
/// set on the provider (not set when a status write lost a race: the next
/// pass sees the newer overlays).
pub async fn reconcile(ctx: &NodeOverlayContext) -> Result<(), ControllerError> {
    let api: Api<NodeOverlay> = Api::all(ctx.client.clone());
    let items = api.list(&ListParams::default()).await?.items;
    let snapshot = ctx.state.snapshot();
    let provider = ctx.instance_types.clone();
    let (items, overlays) = tokio::task::spawn_blocking(move || {
        let refs: Vec<&NodeOverlay> = items.iter().collect();
        let overlays = evaluate_overlays(&snapshot, &refs, &provider);
        (items, overlays)
    })
    .await?;
    for overlay in &items {
        let name = overlay.name_any();
        let Some(status) = overlays.statuses().iter().find(|s| s.name == name) else {
            continue;
        };
        let existing = overlay
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let Some(conditions) = conditions(existing, status, overlay.metadata.generation) else {
            continue;
        };
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": overlay.metadata.resource_version},
            "status": {"conditions": conditions},
        });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
    }
    ctx.instance_types.set_overlays(Arc::new(overlays));
    Ok(())
}

/// The overlay's conditions after `status` (Karpenter's: `ValidationSucceeded`
/// with the reason and message of a failure, `Ready` following it), or
/// `None` when nothing changed.
pub fn conditions(
    mut existing: Vec<Condition>,
    status: &OverlayStatus,
    generation: Option<i64>,
) -> Option<Vec<Condition>> {
    let mut changed = if status.applied {
        set_condition(
            &mut existing,
            NODE_OVERLAY_VALIDATION_SUCCEEDED,
            ConditionStatus::True,
            NODE_OVERLAY_VALIDATION_SUCCEEDED,
            "",
            generation,
        )
    } else {
        set_condition(
            &mut existing,
            NODE_OVERLAY_VALIDATION_SUCCEEDED,
            ConditionStatus::False,
            status.reason.unwrap_or("ValidationFailed"),
            &super::truncate(status.message.clone(), 32_000),
            generation,
        )
    };
    changed |= if status.applied {
        set_condition(
            &mut existing,
            READY,
            ConditionStatus::True,
            READY,
            "",
            generation,
        )
    } else {
        set_condition(
            &mut existing,
            READY,
            ConditionStatus::False,
            "UnhealthyDependents",
            &format!("{NODE_OVERLAY_VALIDATION_SUCCEEDED}=False"),
            generation,
        )
    };
    changed.then_some(existing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apis::conditions::find_condition;

    fn status(applied: bool, reason: Option<&'static str>) -> OverlayStatus {
        OverlayStatus {
            name: "o".into(),
            applied,
            reason,
            message: "why".into(),
        }
    }

    #[test]
    fn a_valid_overlay_is_ready_and_a_conflicting_one_says_why() {
        let ok = conditions(Vec::new(), &status(true, None), Some(1)).unwrap();
        let validated = find_condition(&ok, NODE_OVERLAY_VALIDATION_SUCCEEDED).unwrap();
        assert!(validated.is_true());
        assert!(find_condition(&ok, READY).unwrap().is_true());
        // Nothing changes on the next pass: no write.
        assert!(conditions(ok.clone(), &status(true, None), Some(1)).is_none());

        let conflict = conditions(ok, &status(false, Some("Conflict")), Some(2)).unwrap();
        let validated = find_condition(&conflict, NODE_OVERLAY_VALIDATION_SUCCEEDED).unwrap();
        assert_eq!(validated.status, ConditionStatus::False);
        assert_eq!(validated.reason.as_deref(), Some("Conflict"));
        assert_eq!(validated.message.as_deref(), Some("why"));
        let ready = find_condition(&conflict, READY).unwrap();
        assert_eq!(ready.status, ConditionStatus::False);
        assert_eq!(ready.observed_generation, Some(2));
    }
}
