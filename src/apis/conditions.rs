//! Status conditions shared by NodePool, NodeClaim and EC2NodeClass, and the
//! condition type names Karpenter sets on each.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `True`, `False` or `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not yet determined.
    Unknown,
}

/// One status condition (metav1.Condition as Karpenter uses it).
///
/// `reason` and `message` are optional here because NodeClaim conditions may
/// omit them; the NodePool and EC2NodeClass CRDs still require them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Status of the condition.
    pub status: ConditionStatus,
    /// The `.metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the status last changed.
    pub last_transition_time: Time,
    /// Programmatic reason in CamelCase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Condition {
    /// Whether this condition's status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == ConditionStatus::True
    }
}

/// Finds a condition by type in a status condition list.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Sets condition `type_` in `conditions` (adding it when missing). The
/// transition time moves only when the status changes; returns whether
/// anything about the condition changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
) -> bool {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            let changed = existing.status != status
                || existing.reason.as_deref() != Some(reason)
                || existing.message.as_deref() != Some(message)
                || existing.observed_generation != observed_generation;
            if existing.status != status {
                existing.last_transition_time = now;
            }
            existing.status = status;
            existing.reason = Some(reason.to_string());
            existing.message = Some(message.to_string());
            existing.observed_generation = observed_generation;
            changed
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_string(),
                status,
                observed_generation,
                last_transition_time: now,
                reason: Some(reason.to_string()),
                message: Some(message.to_string()),
            });
            true
        }
    }
}

/// Whether condition `type_` is present and `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(Condition::is_true)
}

/// The root condition of every resource; computed from the others.
pub const READY: &str = "Ready";

/// Whether a Node's `Ready` condition is `True`: the one rule every
/// controller reads a Node's readiness by.
pub fn node_is_ready(node: &k8s_openapi::api::core::v1::Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == READY && c.status == "True"))
}

// NodePool
/// NodePool passed runtime validation.
pub const NODE_POOL_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// The NodePool's NodeClass is Ready.
pub const NODE_POOL_NODE_CLASS_READY: &str = "NodeClassReady";
/// NodeOverlay: valid and in conflict with no other overlay (Karpenter's
/// `ConditionTypeValidationSucceeded`; `Ready` follows it).
pub const NODE_OVERLAY_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// Recent launches from this NodePool registered (not part of Ready).
pub const NODE_POOL_NODE_REGISTRATION_HEALTHY: &str = "NodeRegistrationHealthy";

// NodeClaim
/// The instance was launched.
pub const NODE_CLAIM_LAUNCHED: &str = "Launched";
/// The Node registered.
pub const NODE_CLAIM_REGISTERED: &str = "Registered";
/// The Node is initialized (ready, startup taints gone, resources present).
pub const NODE_CLAIM_INITIALIZED: &str = "Initialized";
/// The node may be consolidated.
pub const NODE_CLAIM_CONSOLIDATABLE: &str = "Consolidatable";
/// The NodeClaim drifted from its NodePool/NodeClass.
pub const NODE_CLAIM_DRIFTED: &str = "Drifted";
/// The node was drained.
pub const NODE_CLAIM_DRAINED: &str = "Drained";
/// Volumes were detached.
pub const NODE_CLAIM_VOLUMES_DETACHED: &str = "VolumesDetached";
/// The instance is terminating.
pub const NODE_CLAIM_INSTANCE_TERMINATING: &str = "InstanceTerminating";
/// The node's shape matches the NodeClaim.
pub const NODE_CLAIM_CONSISTENT_STATE_FOUND: &str = "ConsistentStateFound";
/// Why the NodeClaim is being disrupted.
pub const NODE_CLAIM_DISRUPTION_REASON: &str = "DisruptionReason";

/// Conditions that make up a NodePool's Ready.
pub const NODE_POOL_READY_DEPENDENCIES: &[&str] =
    &[NODE_POOL_VALIDATION_SUCCEEDED, NODE_POOL_NODE_CLASS_READY];
/// Conditions that make up a NodeClaim's Ready.
pub const NODE_CLAIM_READY_DEPENDENCIES: &[&str] = &[
    NODE_CLAIM_LAUNCHED,
    NODE_CLAIM_REGISTERED,
    NODE_CLAIM_INITIALIZED,
];

// EC2NodeClass
/// AMIs were resolved.
pub const EC2_NODE_CLASS_AMIS_READY: &str = "AMIsReady";
/// Subnets were resolved.
pub const EC2_NODE_CLASS_SUBNETS_READY: &str = "SubnetsReady";
/// Security groups were resolved.
pub const EC2_NODE_CLASS_SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
/// The instance profile exists.
pub const EC2_NODE_CLASS_INSTANCE_PROFILE_READY: &str = "InstanceProfileReady";
/// Dry-run and configuration checks passed.
pub const EC2_NODE_CLASS_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// The placement group was resolved (or none was requested).
pub const EC2_NODE_CLASS_PLACEMENT_GROUP_READY: &str = "PlacementGroupReady";
/// Capacity reservations were resolved (only with the ReservedCapacity gate).
pub const EC2_NODE_CLASS_CAPACITY_RESERVATIONS_READY: &str = "CapacityReservationsReady";
/// Our addition: every extension module referenced by the class loaded and
/// verified (digest, compile). Not part of Karpenter's Ready set; the
/// extensions controller decides whether it gates Ready.
pub const EC2_NODE_CLASS_EXTENSIONS_READY: &str = "ExtensionsReady";

/// Conditions that make up an EC2NodeClass's Ready (add
/// [`EC2_NODE_CLASS_CAPACITY_RESERVATIONS_READY`] when reserved capacity is enabled).
pub const EC2_NODE_CLASS_READY_DEPENDENCIES: &[&str] = &[
    EC2_NODE_CLASS_AMIS_READY,
    EC2_NODE_CLASS_SUBNETS_READY,
    EC2_NODE_CLASS_SECURITY_GROUPS_READY,
    EC2_NODE_CLASS_INSTANCE_PROFILE_READY,
    EC2_NODE_CLASS_VALIDATION_SUCCEEDED,
    EC2_NODE_CLASS_PLACEMENT_GROUP_READY,
];
