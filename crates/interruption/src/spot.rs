//! EC2 Spot Instance Interruption Warning.

use crate::envelope::EC2_SOURCE;
use crate::error::FieldError;
use crate::fields::Fields;

/// EC2's two-minute warning that it is about to reclaim a Spot Instance.
///
/// The event carries no action time of its own: EC2 documents that the
/// action (`instance-action`) takes place two minutes after the event's
/// `time`; see [`Event::action_time`](crate::Event::action_time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpotInterruption {
    /// `detail.instance-id`: the instance being interrupted.
    pub instance_id: String,
    /// `detail.instance-action`: `terminate`, `stop` or `hibernate`, if present.
    pub instance_action: Option<String>,
}

impl SpotInterruption {
    /// The envelope `source` of this event.
    pub const SOURCE: &str = EC2_SOURCE;
    /// The envelope `detail-type` of this event.
    pub const DETAIL_TYPE: &str = "EC2 Spot Instance Interruption Warning";

    /// Reads the event's `detail`.
    pub(crate) fn read(detail: &Fields<'_>) -> Result<Self, FieldError> {
        Ok(Self {
            instance_id: detail.required_id("instance-id")?.to_owned(),
            instance_action: detail.optional_str("instance-action")?.map(str::to_owned),
        })
    }
}
