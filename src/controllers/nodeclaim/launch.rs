//! Launch: asks the cloud provider for an instance and writes what it got
//! onto the NodeClaim (labels, provider ID, image, capacity, allocatable,
//! `Launched`). A claim that cannot launch because capacity ran out or its
//! class is not ready is deleted, so its pods are provisioned again (the
//! refused offerings are by then marked unavailable).

use std::time::Duration;

use kube::api::{Api, DeleteParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};

use super::NodeClaimContext;
use crate::apis::conditions::{NODE_CLAIM_LAUNCHED, is_condition_true, set_condition};
use crate::apis::{ConditionStatus, NodeClaim, NodeClaimStatus};
use crate::cloudprovider::CloudProviderError;
use crate::controllers::ControllerError;

/// How long a claim whose launch failed for another reason waits before
/// the next attempt.
const RETRY: Duration = Duration::from_secs(10);
/// Longest launch-failure message kept on the condition.
const MAX_MESSAGE: usize = 300;

/// What the launch step did.
pub enum Launch {
    /// The claim is launched (now or before).
    Done,
    /// The claim was deleted; nothing more to do for it.
    Deleted,
    /// The launch failed and is retried after this long.
    Retry(Duration),
}

/// Launches `claim` unless it already is; updates it in place.
pub async fn launch(
    ctx: &NodeClaimContext,
    claim: &mut NodeClaim,
) -> Result<Launch, ControllerError> {
    let conditions = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    if is_condition_true(conditions, NODE_CLAIM_LAUNCHED) {
        return Ok(Launch::Done);
    }
    let class_name = claim.spec.node_class_ref.name.clone();
    let Some(class) = ctx.state.node_class_context(&class_name) else {
        let why = format!("EC2NodeClass {class_name:?} not found");
        delete(ctx, claim, "NodeClassNotReady", &why).await?;
        return Ok(Launch::Deleted);
    };
    match ctx.cloud.create(claim, &class).await {
        Ok(launched) => {
            populate(claim, launched);
            let status = claim.status.get_or_insert_with(NodeClaimStatus::default);
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            set_condition(
                conditions,
                NODE_CLAIM_LAUNCHED,
                ConditionStatus::True,
                "Launched",
                "",
                None,
            );
            tracing::info!(
                nodeclaim = %claim.name_any(),
                provider_id = claim.status.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or_default(),
                instance_type = claim.labels().get(crate::apis::labels::INSTANCE_TYPE_LABEL_KEY).map(String::as_str).unwrap_or_default(),
                zone = claim.labels().get(crate::apis::labels::ZONE_LABEL_KEY).map(String::as_str).unwrap_or_default(),
                "launched NodeClaim"
            );
            Ok(Launch::Done)
        }
        Err(error @ CloudProviderError::InsufficientCapacity { .. }) => {
            delete(ctx, claim, "InsufficientCapacityError", &error.to_string()).await?;
            super::record_disrupted(claim, "insufficient_capacity");
            Ok(Launch::Deleted)
        }
        Err(error @ CloudProviderError::NodeClassNotReady { .. }) => {
            delete(ctx, claim, "NodeClassNotReady", &error.to_string()).await?;
            super::record_disrupted(claim, "nodeclass_not_ready");
            Ok(Launch::Deleted)
        }
        Err(error) => {
            let (reason, message) = match &error {
                CloudProviderError::Create {
                    reason, message, ..
                } => (*reason, message.clone()),
                other => ("LaunchFailed", other.to_string()),
            };
            let message = crate::controllers::truncate(message, MAX_MESSAGE);
            tracing::warn!(nodeclaim = %claim.name_any(), %error, "launch failed; retrying");
            let status = claim.status.get_or_insert_with(NodeClaimStatus::default);
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            set_condition(
                conditions,
                NODE_CLAIM_LAUNCHED,
                ConditionStatus::Unknown,
                reason,
                &message,
                None,
            );
            Ok(Launch::Retry(RETRY))
        }
    }
}

/// Copies what the provider launched onto `claim`: its labels under the
/// claim's own (the claim's win), its annotations, and the status fields.
fn populate(claim: &mut NodeClaim, launched: NodeClaim) {
    let mut labels = launched.metadata.labels.unwrap_or_default();
    labels.extend(claim.metadata.labels.take().unwrap_or_default());
    claim.metadata.labels = Some(labels);
    let mut annotations = claim.metadata.annotations.take().unwrap_or_default();
    annotations.extend(launched.metadata.annotations.unwrap_or_default());
    claim.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    let from = launched.status.unwrap_or_default();
    let status = claim.status.get_or_insert_with(NodeClaimStatus::default);
    status.provider_id = from.provider_id;
    status.image_id = from.image_id;
    status.capacity = from.capacity;
    status.allocatable = from.allocatable;
}

/// Deletes a claim that cannot launch, with a Warning event saying why, and
/// frees its pods for the next provisioning round.
async fn delete(
    ctx: &NodeClaimContext,
    claim: &NodeClaim,
    reason: &str,
    why: &str,
) -> Result<(), ControllerError> {
    let name = claim.name_any();
    tracing::warn!(nodeclaim = %name, reason, why, "deleting NodeClaim that cannot launch");
    let event = Event {
        type_: EventType::Warning,
        reason: reason.to_string(),
        note: Some(crate::controllers::truncate(why.to_string(), 1024)),
        action: "Launch".to_string(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &claim.object_ref(&())).await {
        tracing::warn!(%error, "cannot publish event");
    }
    match Api::<NodeClaim>::all(ctx.client.clone())
        .delete(&name, &DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => return Err(error.into()),
    }
    ctx.state.release_nominations(&name);
    Ok(())
}
