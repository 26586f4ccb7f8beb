//! EC2 Capacity Reservation Instance Interruption Warning.

use jiff::Timestamp;

use crate::envelope::EC2_SOURCE;
use crate::error::FieldError;
use crate::fields::Fields;

/// EC2's two-minute warning that an instance running in an interruptible
/// Capacity Reservation is about to be reclaimed by the reservation's owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityReservationInterruption {
    /// `detail.instance-id`: the instance being interrupted.
    pub instance_id: String,
    /// `detail.instance-action`: what will happen to it (`terminate`), if present.
    pub instance_action: Option<String>,
    /// `detail.instance-termination-time` as received, if present.
    ///
    /// Kept as text so that an unexpected format never costs the warning
    /// itself; [`termination_timestamp`](Self::termination_timestamp) reads it.
    pub instance_termination_time: Option<String>,
}

impl CapacityReservationInterruption {
    /// The envelope `source` of this event.
    pub const SOURCE: &str = EC2_SOURCE;
    /// The envelope `detail-type` of this event.
    pub const DETAIL_TYPE: &str = "EC2 Capacity Reservation Instance Interruption Warning";

    /// Reads the event's `detail`.
    pub(crate) fn read(detail: &Fields<'_>) -> Result<Self, FieldError> {
        Ok(Self {
            instance_id: detail.required_id("instance-id")?.to_owned(),
            instance_action: detail.optional_str("instance-action")?.map(str::to_owned),
            instance_termination_time: detail
                .optional_str("instance-termination-time")?
                .map(str::to_owned),
        })
    }

    /// `instance-termination-time` as a timestamp, when present and in
    /// RFC 3339.
    pub fn termination_timestamp(&self) -> Option<Timestamp> {
        self.instance_termination_time
            .as_deref()
            .and_then(|text| text.parse().ok())
    }
}
