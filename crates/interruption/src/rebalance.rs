//! EC2 Instance Rebalance Recommendation.

use crate::envelope::EC2_SOURCE;
use crate::error::FieldError;
use crate::fields::Fields;

/// EC2's signal that a Spot Instance is at elevated risk of interruption.
///
/// It often precedes a [`SpotInterruption`](crate::SpotInterruption) but
/// promises nothing about timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebalanceRecommendation {
    /// `detail.instance-id`: the instance at risk.
    pub instance_id: String,
}

impl RebalanceRecommendation {
    /// The envelope `source` of this event.
    pub const SOURCE: &str = EC2_SOURCE;
    /// The envelope `detail-type` of this event.
    pub const DETAIL_TYPE: &str = "EC2 Instance Rebalance Recommendation";

    /// Reads the event's `detail`.
    pub(crate) fn read(detail: &Fields<'_>) -> Result<Self, FieldError> {
        Ok(Self {
            instance_id: detail.required_id("instance-id")?.to_owned(),
        })
    }
}
