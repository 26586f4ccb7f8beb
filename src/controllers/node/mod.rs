//! Node controllers: termination — the Node's `karpenter.sh/termination`
//! finalizer, held while the node is cordoned, tainted and drained and its
//! instance terminated (Karpenter's `node.termination`) — and repair of
//! unhealthy nodes (Karpenter's `node.health`, behind `NodeRepair`).

mod drain;
pub mod health;
mod termination;
mod unhealthy;

use k8s_openapi::api::core::v1::Node;
use kube::runtime::events::{Event, EventType};

pub use drain::{Removal, next_tier, remove};
pub use termination::{reconcile, run};

use crate::controllers::nodeclaim::NodeClaimContext;

/// `taints` with `karpenter.sh/disrupted:NoSchedule` added (`on`) or
/// removed, or `None` when they already are so: what the termination
/// controller and a disruption command write to a Node.
pub fn with_disrupted_taint(
    taints: &[k8s_openapi::api::core::v1::Taint],
    on: bool,
) -> Option<Vec<k8s_openapi::api::core::v1::Taint>> {
    use crate::apis::labels::DISRUPTED_TAINT_KEY;
    let has = taints
        .iter()
        .any(|t| t.key == DISRUPTED_TAINT_KEY && t.effect == "NoSchedule");
    if has == on {
        return None;
    }
    let mut out: Vec<_> = taints
        .iter()
        .filter(|t| t.key != DISRUPTED_TAINT_KEY)
        .cloned()
        .collect();
    if on {
        out.push(k8s_openapi::api::core::v1::Taint {
            key: DISRUPTED_TAINT_KEY.to_string(),
            effect: "NoSchedule".to_string(),
            ..Default::default()
        });
    }
    Some(out)
}

/// Publishes a Warning event about `node` (a failed drain, a blocked
/// repair); a failure to publish is logged, never fatal.
async fn warn(ctx: &NodeClaimContext, node: &Node, action: &str, reason: &str, note: &str) {
    let event = Event {
        type_: EventType::Warning,
        reason: reason.to_string(),
        note: Some(crate::controllers::truncate(note.to_string(), 1024)),
        action: action.to_string(),
        secondary: None,
    };
    let reference = kube::Resource::object_ref(node, &());
    if let Err(error) = ctx.recorder.publish(&event, &reference).await {
        tracing::warn!(%error, reason, "cannot publish event");
    }
}
