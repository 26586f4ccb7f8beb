//! The boundary between the controllers and the cloud: launch an instance
//! for a NodeClaim, find it again, terminate it, say which instance types a
//! NodePool may launch and whether a launched node has drifted from its
//! EC2NodeClass. Two implementations: the AWS provider (`crate::aws`) and
//! [`simulated::SimulatedCloudProvider`], an in-memory provider that
//! "launches" instances from the catalog for `sandbox` and tests.
//!
//! Providers return data and typed errors ([`CloudProviderError`]); the
//! controllers decide what to do with them and write the conditions.

mod drift;
mod error;
pub mod launch;
pub mod metered;
mod placement_group;
mod provider_id;
mod repair;
pub mod simulated;
mod unavailable_offerings;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ConfigMap;

use crate::apis::{EC2NodeClass, NodeClaim, NodePool};
use crate::scheduling::{Blocked, InstanceType};

pub use drift::{node_class_hash_drifted, restamped_class_annotations, stamp_node_class_hash};
pub use error::{BoxError, CloudProviderError, OfferingKey};
pub use placement_group::{placement_group_drifted, placement_group_labels, targeted_partition};
pub use provider_id::ProviderId;
pub use repair::repair_policies;
pub use unavailable_offerings::{PlacementScope, UNAVAILABLE_OFFERINGS_TTL, UnavailableOfferings};

/// An EC2NodeClass as a provider call needs it: the class, and the
/// ConfigMaps its extension modules may be stored in.
#[derive(Debug, Clone)]
pub struct NodeClassContext {
    /// The class.
    pub class: Arc<EC2NodeClass>,
    /// ConfigMaps referenced by `spec.extensions` (those that exist).
    pub config_maps: Arc<Vec<ConfigMap>>,
}

impl NodeClassContext {
    /// A class whose extensions reference no ConfigMap.
    pub fn new(class: EC2NodeClass) -> Self {
        NodeClassContext {
            class: Arc::new(class),
            config_maps: Arc::new(Vec::new()),
        }
    }

    /// The class's name.
    pub fn name(&self) -> &str {
        self.class.metadata.name.as_deref().unwrap_or_default()
    }
}

/// What a NodePool may launch: its class's instance types after the class's
/// instance filters, with the priority scorers' scores.
#[derive(Debug, Clone, Default)]
pub struct LaunchableTypes {
    /// Instance types the filters kept, offerings marked unavailable where
    /// capacity recently ran out.
    pub instance_types: Arc<Vec<InstanceType>>,
    /// Weighted scorer totals per type (higher first); `None` without scorers.
    pub priority_scores: Option<Arc<HashMap<String, i32>>>,
    /// Set when the class may not launch (a `failurePolicy: Fail` module
    /// failed, its settings are invalid): why.
    pub blocked: Option<Blocked>,
}

/// Where a provider gets a NodePool's launchable instance types from (the
/// instance-type provider: catalog → resolver → extensions → cache).
/// Blocking: it may run Wasm modules.
pub trait InstanceTypeSource: Send + Sync {
    /// The instance types `pool` of `class` may launch.
    fn launchable(&self, pool: &str, class: &NodeClassContext) -> Arc<LaunchableTypes>;
}

/// [`InstanceTypeSource::launchable`] off the async threads: resolving and
/// running a class's extension modules is blocking work.
pub async fn launchable_off_thread(
    types: &Arc<dyn InstanceTypeSource>,
    pool: String,
    class: &NodeClassContext,
) -> Result<Arc<LaunchableTypes>, CloudProviderError> {
    let (types, class) = (types.clone(), class.clone());
    tokio::task::spawn_blocking(move || types.launchable(&pool, &class))
        .await
        .map_err(|e| CloudProviderError::Api {
            operation: "instance types",
            source: Box::new(e),
        })
}

/// Why a launched node no longer matches what its NodePool and EC2NodeClass
/// would launch today (the NodeClaim's `Drifted` condition reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriftReason {
    /// The NodePool's template changed (its hash).
    NodePoolDrifted,
    /// Its labels no longer satisfy the NodePool's requirements.
    RequirementsDrifted,
    /// Its instance type, or an offering of it matching its zone and
    /// capacity type, is no longer among the NodePool's.
    InstanceTypeNotFound,
    /// The image it booted is no longer among the class's AMIs.
    AmiDrift,
    /// Its subnet is no longer selected.
    SubnetDrift,
    /// Its security groups differ from the selected ones.
    SecurityGroupDrift,
    /// Its capacity reservation is no longer selected.
    CapacityReservationDrift,
    /// It is not in the class's placement group (the group was recreated
    /// or is gone, or the claim was launched outside it).
    PlacementGroupDrift,
    /// The class's spec changed (hash).
    NodeClassDrift,
}

impl DriftReason {
    /// The condition reason.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftReason::NodePoolDrifted => "NodePoolDrifted",
            DriftReason::RequirementsDrifted => "RequirementsDrifted",
            DriftReason::InstanceTypeNotFound => "InstanceTypeNotFound",
            DriftReason::AmiDrift => "AMIDrift",
            DriftReason::SubnetDrift => "SubnetDrift",
            DriftReason::SecurityGroupDrift => "SecurityGroupDrift",
            DriftReason::CapacityReservationDrift => "CapacityReservationDrift",
            DriftReason::PlacementGroupDrift => "PlacementGroupDrift",
            DriftReason::NodeClassDrift => "NodeClassDrift",
        }
    }
}

/// A Node condition that, held for `toleration`, makes the node unhealthy
/// enough to replace (node repair).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairPolicy {
    /// Node condition type, e.g. `Ready`.
    pub condition_type: &'static str,
    /// The status that counts as unhealthy, e.g. `False`.
    pub condition_status: &'static str,
    /// How long the condition may hold before the node is repaired.
    pub toleration: Duration,
}

/// The cloud, as the controllers use it.
#[async_trait]
pub trait CloudProvider: Send + Sync {
    /// A short name for logs and metrics (`aws`, `simulated`).
    fn name(&self) -> &'static str;

    /// Launches an instance for `claim` (a NodeClaim of a NodePool using
    /// `class`) and returns the claim as launched: `status.providerID`,
    /// `imageID`, `capacity`, `allocatable`, and the labels of the instance
    /// type and offering it got.
    async fn create(
        &self,
        claim: &NodeClaim,
        class: &NodeClassContext,
    ) -> Result<NodeClaim, CloudProviderError>;

    /// Terminates the instance behind `claim`. `NotFound` when it is already gone.
    async fn delete(&self, claim: &NodeClaim) -> Result<(), CloudProviderError>;

    /// The instance with `provider_id`, as a NodeClaim. `NotFound` when it is gone.
    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError>;

    /// Every instance this provider launched for the cluster and that is not
    /// terminated, as NodeClaims (name from its tags, when known).
    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError>;

    /// The instance types `pool` may launch with `class`.
    async fn instance_types(
        &self,
        pool: &NodePool,
        class: &NodeClassContext,
    ) -> Result<Arc<LaunchableTypes>, CloudProviderError>;

    /// Whether the instance behind `claim` drifted from `class`, and why.
    async fn is_drifted(
        &self,
        claim: &NodeClaim,
        class: &NodeClassContext,
    ) -> Result<Option<DriftReason>, CloudProviderError>;

    /// Node conditions that make a node eligible for repair.
    fn repair_policies(&self) -> Vec<RepairPolicy>;

    /// Runs before `claim`'s Node is registered (its labels synced, its
    /// `karpenter.sh/unregistered` taint removed), as Karpenter's
    /// registration hooks do: completes labels only the launched instance
    /// can tell, updating `claim` in place. [`Registration::Wait`] holds
    /// the registration until a later pass. (No default: a wrapper that
    /// forgot to forward it would register nodes too early.)
    async fn before_registration(
        &self,
        claim: &mut NodeClaim,
    ) -> Result<Registration, CloudProviderError>;
}

/// Whether a Node may be registered now ([`CloudProvider::before_registration`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// Register it.
    Proceed,
    /// Not yet, for the reason given (a condition message).
    Wait(String),
}
