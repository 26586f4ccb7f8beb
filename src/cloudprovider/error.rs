//! What a cloud provider call can fail with. Each variant is something a
//! controller decides on differently; the provider's own error (an AWS error
//! code, say) stays reachable through `source()`.

use std::error::Error as StdError;

/// A source error as the providers keep it: any thread-safe error.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// One (instance type, zone, capacity type) a launch could not get.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OfferingKey {
    /// Instance type name.
    pub instance_type: String,
    /// Availability zone.
    pub zone: String,
    /// `on-demand`, `spot` or `reserved`.
    pub capacity_type: String,
}

impl std::fmt::Display for OfferingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} in {}",
            self.capacity_type, self.instance_type, self.zone
        )
    }
}

/// Why a cloud provider call failed.
#[derive(Debug, thiserror::Error)]
pub enum CloudProviderError {
    /// The instance behind a NodeClaim or provider ID does not exist (any more).
    #[error("instance {provider_id} not found")]
    NotFound {
        /// The provider ID (`aws:///zone/i-…`) or NodeClaim name asked for.
        provider_id: String,
        /// The provider's own error, when it gave one.
        #[source]
        source: Option<BoxError>,
    },
    /// No offering the NodeClaim allows had capacity. The offerings tried are
    /// marked unavailable, so the next solve avoids them.
    #[error("insufficient capacity for every offering tried ({})", list(.offerings))]
    InsufficientCapacity {
        /// The offerings that were refused.
        offerings: Vec<OfferingKey>,
        /// The provider's own error (e.g. `InsufficientInstanceCapacity`).
        #[source]
        source: Option<BoxError>,
    },
    /// The NodeClaim's EC2NodeClass cannot launch yet (no AMI, subnet, …, or
    /// its extensions block it); retried when the class changes.
    #[error("EC2NodeClass {node_class:?} is not ready: {reason}")]
    NodeClassNotReady {
        /// The class.
        node_class: String,
        /// What it lacks, in words that name the field or condition.
        reason: String,
    },
    /// The NodeClaim cannot be launched as it is written (no instance type
    /// satisfies its requirements, …); `reason` is the condition reason the
    /// lifecycle controller writes on `Launched`.
    #[error("{message}")]
    Create {
        /// A condition reason (`CamelCase`).
        reason: &'static str,
        /// What is wrong, naming the requirement or field.
        message: String,
        /// The provider's own error, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// The provider's API failed in another way (throttling that outlasted
    /// the retries, a network error, an unexpected response); retried.
    #[error("{operation}: {source}")]
    Api {
        /// The call that failed, e.g. `ec2:CreateFleet`.
        operation: &'static str,
        /// The provider's error.
        #[source]
        source: BoxError,
    },
}

impl CloudProviderError {
    /// Whether the error means the instance is gone.
    pub fn is_not_found(&self) -> bool {
        matches!(self, CloudProviderError::NotFound { .. })
    }
}

fn list(offerings: &[OfferingKey]) -> String {
    let names: Vec<String> = offerings.iter().map(ToString::to_string).collect();
    names.join(", ")
}
