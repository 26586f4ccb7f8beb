//! Karpenter v1 API types — NodePool, NodeClaim, EC2NodeClass (with
//! nodewright's `spec.extensions`), and the alpha NodeOverlay — their CRDs,
//! labels and conditions.
//!
//! The types are field-for-field compatible with the Karpenter v1.14.1 AWS
//! provider, so manifests written for Karpenter v1.0 or later apply unchanged.

#![warn(missing_docs)]

pub mod conditions;
pub mod crds;
pub mod duration;
pub mod ec2nodeclass;
pub mod extensions;
pub mod hash;
pub mod labels;
pub mod nodeclaim;
pub mod nodeoverlay;
pub mod nodepool;
pub mod requirements;
pub mod schema;
pub mod validation;

pub use conditions::{Condition, ConditionStatus};
pub use duration::NillableDuration;
pub use ec2nodeclass::{EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus};
pub use extensions::{
    EffectiveExtensions, ExtensionError, ExtensionModule, Extensions, FailurePolicy, ModuleSource,
    ResolvedModule, ResolvedScorer,
};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus, NodeClassReference};
pub use nodeoverlay::{NodeOverlay, NodeOverlaySpec, NodeOverlayStatus, PriceChange};
pub use nodepool::{NodePool, NodePoolSpec, NodePoolStatus};
pub use requirements::{NodeSelectorRequirementWithMinValues, RequirementOperator};
