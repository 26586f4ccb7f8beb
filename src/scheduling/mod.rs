//! The scheduler: decides, for a batch of pending pods, which existing nodes
//! they fit on and which new NodeClaims (with which instance-type options) to
//! create, following Karpenter v1's semantics.
//!
//! It knows nothing of AWS, Kubernetes clients or Wasm: every input is plain
//! data. Providers build [`InstanceType`]s; the simulator and controllers build
//! pods (or convert them from `k8s_openapi` objects).

pub mod blocked;
pub mod convert;
mod index;
pub mod input;
pub mod instance_type;
pub mod labels;
pub mod launch_order;
pub mod node_pool;
pub mod overlay;
pub mod pod;
pub mod pod_key;
pub mod requirements;
pub mod resources;
mod solver;
pub mod static_claim;
pub mod taints;

pub use blocked::{Blocked, BlockedReason};
pub use convert::{ConvertError, daemonset_pod_from_k8s, node_from_k8s, pod_from_k8s};
pub use input::{
    ExistingNode, ExistingPlacement, InstanceTypeOption, MinValuesPolicy, NewNodeClaim,
    NodePoolSpec, PodError, SchedulerInput, SchedulerOptions, SchedulingResult,
};
pub use instance_type::{CapacityType, InstanceType, Offering, Overhead};
pub use launch_order::{LaunchRank, launch_order};
pub use pod::{
    ContainerRequests, HostPort, LabelSelector, NamespaceScope, NodeInclusionPolicy, Pod,
    PodAffinityTerm, SelectorExpression, TopologySpreadConstraint, Weighted, WhenUnsatisfiable,
    effective_requests,
};
pub use pod_key::PodKey;
pub use requirements::{
    Incompatibility, Operator, Requirement, RequirementError, Requirements, ValueSet,
};
pub use resources::{QuantityError, Resources, parse_quantity};
pub use solver::{Model, PoolSpend, Scheduler};
pub use static_claim::static_node_claim;
pub use taints::{Taint, TaintEffect, Toleration};

#[cfg(test)]
mod tests;
