//! The scheduler: decides, for a batch of pending pods, which existing nodes
//! they fit on and which new NodeClaims (with which instance-type options) to
//! create, following Karpenter v1's semantics.
//!
//! It knows nothing of AWS, Kubernetes clients or Wasm: every input is plain
//! data. Providers build [`InstanceType`]s; the simulator and controllers build
//! pods (or convert them from `k8s_openapi` objects).

pub mod instance_type;
pub mod labels;
pub mod requirements;
pub mod resources;

pub use instance_type::{CapacityType, InstanceType, Offering, Overhead};
pub use requirements::{
    Incompatibility, Operator, Requirement, RequirementError, Requirements, ValueSet,
};
pub use resources::{QuantityError, Resources, parse_quantity};
