//! AWS Health Event, for scheduled changes to EC2 instances.

use jiff::Timestamp;

use crate::envelope::HEALTH_SOURCE;
use crate::error::FieldError;
use crate::fields::Fields;
use crate::parse::{Read, UnknownReason};

/// An AWS Health scheduled change (such as an instance retirement or a
/// maintenance reboot) affecting EC2 instances.
///
/// Health events of any other service or category are read as
/// [`UnknownReason::IgnoredHealthEvent`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledChange {
    /// `detail.eventArn`, if present.
    pub event_arn: Option<String>,
    /// `detail.eventTypeCode`, e.g. `AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED`.
    pub event_type_code: String,
    /// `detail.startTime` as received, if present.
    ///
    /// AWS Health writes RFC 2822 dates (`Sat, 05 Jun 2021 14:00:00 GMT`).
    /// Kept as text so that an unexpected format never costs the event;
    /// [`start_timestamp`](Self::start_timestamp) reads it.
    pub start_time: Option<String>,
    /// `detail.endTime` as received, if present; see
    /// [`end_timestamp`](Self::end_timestamp).
    pub end_time: Option<String>,
    /// The `entityValue` of each of `detail.affectedEntities`, in order:
    /// the IDs of the affected instances. Empty when the list is absent.
    pub instance_ids: Vec<String>,
}

impl ScheduledChange {
    /// The envelope `source` of this event.
    pub const SOURCE: &str = HEALTH_SOURCE;
    /// The envelope `detail-type` of this event.
    pub const DETAIL_TYPE: &str = "AWS Health Event";
    /// The `detail.service` of the Health events that are read.
    pub const SERVICE: &str = "EC2";
    /// The `detail.eventTypeCategory` of the Health events that are read.
    pub const EVENT_TYPE_CATEGORY: &str = "scheduledChange";

    /// Reads the event's `detail`. The service and category are read first
    /// (and compared exactly, case included): any other Health event is
    /// ignored whatever the rest holds.
    pub(crate) fn read(detail: &Fields<'_>) -> Result<Read<Self>, FieldError> {
        let service = detail.required_str("service")?;
        let category = detail.required_str("eventTypeCategory")?;
        if service != Self::SERVICE || category != Self::EVENT_TYPE_CATEGORY {
            return Ok(Read::Ignored(UnknownReason::IgnoredHealthEvent {
                service: service.to_owned(),
                event_type_category: category.to_owned(),
            }));
        }
        let entities_path = detail.path_of("affectedEntities");
        let instance_ids = detail
            .optional_array("affectedEntities")?
            .iter()
            .enumerate()
            .map(|(index, value)| {
                let entity = Fields::object(format!("{entities_path}[{index}]"), value)?;
                entity.required_str("entityValue").map(str::to_owned)
            })
            .collect::<Result<_, _>>()?;
        Ok(Read::Message(Self {
            event_arn: detail.optional_str("eventArn")?.map(str::to_owned),
            event_type_code: detail.required_str("eventTypeCode")?.to_owned(),
            start_time: detail.optional_str("startTime")?.map(str::to_owned),
            end_time: detail.optional_str("endTime")?.map(str::to_owned),
            instance_ids,
        }))
    }

    /// `startTime` as a timestamp, when present and in RFC 2822 or RFC 3339.
    pub fn start_timestamp(&self) -> Option<Timestamp> {
        self.start_time.as_deref().and_then(health_timestamp)
    }

    /// `endTime` as a timestamp, when present and in RFC 2822 or RFC 3339.
    pub fn end_timestamp(&self) -> Option<Timestamp> {
        self.end_time.as_deref().and_then(health_timestamp)
    }
}

/// Reads an AWS Health date: RFC 2822 as Health writes it, or RFC 3339.
fn health_timestamp(text: &str) -> Option<Timestamp> {
    jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(text)
        .ok()
        .or_else(|| text.parse().ok())
}
