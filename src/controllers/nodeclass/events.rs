//! Events about a class, published when a condition changes (not on every
//! pass):
//!
//! - `ExtensionModuleFailed` / `ExtensionModuleSkipped` (Warning) naming the
//!   module (shadow modules that fail are skipped), `ExtensionShadowResult`
//!   (Normal) saying what a shadow module would have changed, and
//!   `ExtensionsReady` (Normal) on recovery;
//! - `AMINotFound` (Warning);
//! - for `SubnetsReady`, `SecurityGroupsReady`, `InstanceProfileReady`,
//!   `CapacityReservationsReady`, `ValidationSucceeded` and
//!   `PlacementGroupReady` turning or staying `False` with a new reason or
//!   message, a Warning whose reason is the condition's (`SubnetsNotFound`,
//!   `RoleNotFound`, …) and whose note is its message;
//! - `Ready` (Normal) when the class becomes ready again.

use kube::Resource;
use kube::runtime::events::{Event, EventType};

use crate::apis::conditions::{
    EC2_NODE_CLASS_AMIS_READY, EC2_NODE_CLASS_CAPACITY_RESERVATIONS_READY,
    EC2_NODE_CLASS_EXTENSIONS_READY, EC2_NODE_CLASS_INSTANCE_PROFILE_READY,
    EC2_NODE_CLASS_PLACEMENT_GROUP_READY, EC2_NODE_CLASS_SECURITY_GROUPS_READY,
    EC2_NODE_CLASS_SUBNETS_READY, EC2_NODE_CLASS_VALIDATION_SUCCEEDED, READY, find_condition,
};
use crate::apis::{Condition, ConditionStatus, EC2NodeClass};
use crate::extensions::AmiSelection;

use super::super::{Context, truncate};
use super::conditions::changed;
use super::extensions::{ExtensionOutcomes, combined};

/// Longest event note the API server accepts.
const MAX_NOTE_BYTES: usize = 1024;

/// Conditions whose turning `False` is published with the condition's reason.
const WARNED: [&str; 6] = [
    EC2_NODE_CLASS_SUBNETS_READY,
    EC2_NODE_CLASS_SECURITY_GROUPS_READY,
    EC2_NODE_CLASS_INSTANCE_PROFILE_READY,
    EC2_NODE_CLASS_CAPACITY_RESERVATIONS_READY,
    EC2_NODE_CLASS_VALIDATION_SUCCEEDED,
    EC2_NODE_CLASS_PLACEMENT_GROUP_READY,
];

/// Publishes events for the conditions of `updates` that changed from
/// `previous`.
pub async fn publish(
    context: &Context,
    class: &EC2NodeClass,
    previous: &[Condition],
    updates: &[Condition],
    extensions: &ExtensionOutcomes,
    selection: Option<&AmiSelection>,
) {
    let mut events: Vec<(EventType, String, String)> = Vec::new();
    let update = |type_: &str| find_condition(updates, type_).filter(|c| changed(previous, c));

    if let Some(ready) = update(EC2_NODE_CLASS_EXTENSIONS_READY) {
        for event in combined(&extensions.outcomes, selection).events() {
            let type_ = if event.warning {
                EventType::Warning
            } else {
                EventType::Normal
            };
            events.push((type_, event.reason.into(), event.note));
        }
        let before = find_condition(previous, EC2_NODE_CLASS_EXTENSIONS_READY);
        let was_ready = before.is_some_and(|c| c.reason.as_deref() == Some("Ready"));
        if ready.reason.as_deref() == Some("Ready") && before.is_some() && !was_ready {
            events.push((
                EventType::Normal,
                "ExtensionsReady".into(),
                "all extension modules ran".into(),
            ));
        }
    }
    if let Some(amis) = update(EC2_NODE_CLASS_AMIS_READY)
        && amis.status == ConditionStatus::False
    {
        events.push((
            EventType::Warning,
            "AMINotFound".into(),
            amis.message.clone().unwrap_or_default(),
        ));
    }
    for type_ in WARNED {
        if let Some(condition) = update(type_)
            && condition.status == ConditionStatus::False
        {
            events.push((
                EventType::Warning,
                condition
                    .reason
                    .clone()
                    .unwrap_or_else(|| type_.to_string()),
                condition.message.clone().unwrap_or_default(),
            ));
        }
    }
    if let Some(ready) = update(READY)
        && ready.is_true()
        && find_condition(previous, READY).is_some()
    {
        events.push((
            EventType::Normal,
            READY.into(),
            "every condition the class needs to launch nodes is True".into(),
        ));
    }

    let reference = class.object_ref(&());
    for (type_, reason, note) in events {
        let event = Event {
            type_,
            reason: reason.clone(),
            note: Some(truncate(note, MAX_NOTE_BYTES)),
            action: "Reconcile".to_string(),
            secondary: None,
        };
        if let Err(error) = context.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, reason, "cannot publish event");
        }
    }
}
