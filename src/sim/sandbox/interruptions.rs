//! Interruption messages a sandbox user injects with `kubectl`, to see what
//! their NodePools' interruption policies do without AWS:
//!
//! ```text
//! kubectl annotate node NODE sandbox.nodewright.io/interruption=spot_interrupted
//! ```
//!
//! The annotation is taken off, and an EventBridge event of that kind for
//! the node's instance goes through the controller's own interruption
//! handler, as if it had arrived on the queue. Kinds: `spot_interrupted`,
//! `instance_stopped`, `instance_terminated`, `scheduled_change`,
//! `rebalance_recommendation`, `capacity_reservation_interrupted`. Any other
//! value gets a Warning event on the node listing them. A message whose
//! action fails (the API server refused a write) is delivered again, as
//! the queue would.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::json;
use tokio::task::JoinSet;

use crate::cloudprovider::ProviderId;
use crate::cluster::ClusterState;
use crate::controllers::interruption::InterruptionHandler;
use crate::controllers::recorder::Recorder;

/// The annotation that injects a message.
pub const INJECT_ANNOTATION_KEY: &str = "sandbox.nodewright.io/interruption";

/// The kinds that can be injected.
pub const KINDS: [&str; 6] = [
    "spot_interrupted",
    "instance_stopped",
    "instance_terminated",
    "scheduled_change",
    "rebalance_recommendation",
    "capacity_reservation_interrupted",
];

/// The EventBridge body of a message of `kind` for `instance`, as AWS
/// sends it; `None` for a kind not in [`KINDS`].
pub fn body_for(kind: &str, instance: &str) -> Option<String> {
    let (source, detail_type, detail) = match kind {
        "spot_interrupted" => (
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": instance, "instance-action": "terminate"}),
        ),
        "instance_stopped" => (
            "aws.ec2",
            "EC2 Instance State-change Notification",
            json!({"instance-id": instance, "state": "stopping"}),
        ),
        "instance_terminated" => (
            "aws.ec2",
            "EC2 Instance State-change Notification",
            json!({"instance-id": instance, "state": "shutting-down"}),
        ),
        "scheduled_change" => (
            "aws.health",
            "AWS Health Event",
            json!({"service": "EC2", "eventTypeCategory": "scheduledChange",
                   "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                   "affectedEntities": [{"entityValue": instance}]}),
        ),
        "rebalance_recommendation" => (
            "aws.ec2",
            "EC2 Instance Rebalance Recommendation",
            json!({"instance-id": instance}),
        ),
        "capacity_reservation_interrupted" => (
            "aws.ec2",
            "EC2 Capacity Reservation Instance Interruption Warning",
            json!({"instance-id": instance, "instance-action": "terminate"}),
        ),
        _ => return None,
    };
    let time = k8s_openapi::jiff::Timestamp::now().round(k8s_openapi::jiff::Unit::Second);
    Some(
        json!({
            "version": "0", "id": "sandbox", "detail-type": detail_type, "source": source,
            "account": "000000000000", "time": time.map(|t| t.to_string()).unwrap_or_default(),
            "region": "sandbox", "resources": [], "detail": detail
        })
        .to_string(),
    )
}

/// Watches Nodes for [`INJECT_ANNOTATION_KEY`] and hands each injected
/// message to the handler.
pub struct Injector {
    /// The API server.
    pub client: kube::Client,
    /// The sandbox's view of the cluster.
    pub state: Arc<ClusterState>,
    /// The controller's interruption handler.
    pub handler: InterruptionHandler,
    /// For the Warning on a kind that does not exist.
    pub recorder: Recorder,
}

/// The first wait before a message whose action failed is delivered again;
/// it doubles up to [`REDELIVERY_MAX`].
const REDELIVERY_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two deliveries of one message.
const REDELIVERY_MAX: Duration = Duration::from_secs(30);

/// How long a message is delivered again: the interruption queue's message
/// retention (`MessageRetentionPeriod` 300 s in the CloudFormation stack).
const RETENTION: Duration = Duration::from_secs(300);

impl Injector {
    /// Runs until the Node feed ends. Each message is delivered on a task of
    /// its own, so one that is delivered again does not hold up the others;
    /// the tasks end with this future.
    pub async fn run(self) {
        let this = Arc::new(self);
        let mut deliveries = JoinSet::new();
        let mut changes = std::pin::pin!(this.state.nodes.changes());
        while let Some(node) = changes.next().await {
            while deliveries.try_join_next().is_some() {}
            let Some(kind) = node.annotations().get(INJECT_ANNOTATION_KEY).cloned() else {
                continue;
            };
            if let Err(error) = this.take_annotation(&node).await {
                tracing::warn!(%error, node = %node.name_any(), "cannot take the interruption annotation off");
                continue;
            }
            let this = this.clone();
            deliveries.spawn(async move { this.inject(&node, &kind).await });
        }
    }

    /// Delivers a message of `kind` for `node`'s instance until the handler
    /// has acted on it, as SQS delivers a message again that was not deleted:
    /// waiting 1 s, then twice as long each time up to 30 s, for as long as
    /// the queue would keep it.
    async fn inject(&self, node: &Node, kind: &str) {
        let instance = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .and_then(ProviderId::parse);
        let instance = instance.as_ref().map_or("", ProviderId::instance_id);
        let Some(body) = body_for(kind, instance) else {
            let note = format!(
                "{INJECT_ANNOTATION_KEY}={kind:?} is not a kind the sandbox injects; use one of {}",
                KINDS.join(", ")
            );
            let event = Event {
                type_: EventType::Warning,
                reason: "InterruptionNotInjected".to_string(),
                note: Some(note),
                action: "Interruption".to_string(),
                secondary: None,
            };
            if let Err(error) = self.recorder.publish(&event, &node.object_ref(&())).await {
                tracing::warn!(%error, "cannot publish event");
            }
            return;
        };
        tracing::info!(node = %node.name_any(), %instance, kind, "injecting an interruption message");
        let parsed = interruption::parse(&body);
        let started = Instant::now();
        let mut wait = REDELIVERY_FIRST;
        while !self
            .handler
            .handle_parsed("sandbox", &parsed, body.len())
            .await
        {
            if started.elapsed() + wait > RETENTION {
                tracing::warn!(node = %node.name_any(), %instance, kind, "an interruption message was not acted on while the queue would keep it; dropped");
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(REDELIVERY_MAX);
        }
    }

    async fn take_annotation(&self, node: &Node) -> Result<(), kube::Error> {
        let patch = json!({"metadata": {"annotations": {INJECT_ANNOTATION_KEY: null}}});
        Api::<Node>::all(self.client.clone())
            .patch(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_injects_a_message_of_that_kind_for_the_instance() {
        for kind in KINDS {
            let body = body_for(kind, "i-0123").unwrap();
            let parsed = interruption::parse(&body);
            let event = parsed
                .known()
                .unwrap_or_else(|| panic!("{kind}: {parsed:?}"));
            assert_eq!(event.kind().as_str(), kind);
            assert_eq!(event.instance_ids(), ["i-0123"]);
        }
        assert!(body_for("meteor_strike", "i-0123").is_none());
    }
}
