//! The parse entry point: envelope first, then routing to a message family.

use std::fmt;

use serde_json::Value;

use crate::capacity_reservation::CapacityReservationInterruption;
use crate::envelope::{EVENT_VERSION, Envelope};
use crate::error::{FieldError, JsonType, ParseError};
use crate::fields::Fields;
use crate::message::{Event, Message, NO_OP_KIND};
use crate::rebalance::RebalanceRecommendation;
use crate::scheduled_change::ScheduledChange;
use crate::spot::SpotInterruption;
use crate::state_change::StateChange;

/// The outcome of reading one message body.
#[derive(Debug)]
pub enum Parsed {
    /// A handled event.
    Known(Event),
    /// A well-formed EventBridge event that is not handled: the caller may
    /// count or log it, and should drop it.
    Unknown(Unknown),
    /// A body that is not a well-formed event, or a handled event whose
    /// `detail` is missing or invalid.
    Malformed(ParseError),
}

impl Parsed {
    /// The metric label for the outcome: the [`Kind`](crate::Kind) label of
    /// a known event, [`NO_OP_KIND`] for an unknown one, `None` when
    /// malformed (as Karpenter counts it).
    pub fn metric_kind(&self) -> Option<&'static str> {
        match self {
            Self::Known(event) => Some(event.kind().as_str()),
            Self::Unknown(_) => Some(NO_OP_KIND),
            Self::Malformed(_) => None,
        }
    }

    /// The event, if it is a handled one.
    pub fn known(&self) -> Option<&Event> {
        match self {
            Self::Known(event) => Some(event),
            Self::Unknown(_) | Self::Malformed(_) => None,
        }
    }
}

/// A well-formed event that is not handled, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// The event's envelope.
    pub envelope: Envelope,
    /// Why it is not handled.
    pub reason: UnknownReason,
}

impl Unknown {
    /// The envelope `source`.
    pub fn source(&self) -> &str {
        &self.envelope.source
    }

    /// The envelope `detail-type`.
    pub fn detail_type(&self) -> &str {
        &self.envelope.detail_type
    }
}

/// Why a well-formed event is not handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnknownReason {
    /// No message family is read for this `version`, `source` and
    /// `detail-type`.
    UnhandledType,
    /// An instance state change into a state other than `stopping`,
    /// `stopped`, `shutting-down` or `terminated`.
    IgnoredState {
        /// `detail.state` as received.
        state: String,
    },
    /// An AWS Health event for another service than `EC2` or another
    /// category than `scheduledChange`.
    IgnoredHealthEvent {
        /// `detail.service` as received.
        service: String,
        /// `detail.eventTypeCategory` as received.
        event_type_category: String,
    },
}

impl fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnhandledType => f.write_str("event type is not handled"),
            Self::IgnoredState { state } => {
                write!(f, "instance state {state:?} is not handled")
            }
            Self::IgnoredHealthEvent {
                service,
                event_type_category,
            } => write!(
                f,
                "AWS Health event for service {service:?}, category \
                 {event_type_category:?} is not handled"
            ),
        }
    }
}

/// What a message family made of a `detail`.
#[derive(Debug)]
pub(crate) enum Read<T> {
    /// A handled message.
    Message(T),
    /// A well-formed `detail` that is not handled.
    Ignored(UnknownReason),
}

impl<T> Read<T> {
    /// Converts the message, keeping an ignore as is.
    fn map<U>(self, f: impl FnOnce(T) -> U) -> Read<U> {
        match self {
            Self::Message(message) => Read::Message(f(message)),
            Self::Ignored(reason) => Read::Ignored(reason),
        }
    }
}

/// Reads an SQS message body from the interruption queue.
///
/// The envelope is read first; its `version`, `source` and `detail-type`
/// then pick the message family that reads the `detail`, as Karpenter's
/// parser does. Never panics, whatever the input.
pub fn parse(body: &str) -> Parsed {
    match read(body) {
        Ok(parsed) => parsed,
        Err(error) => Parsed::Malformed(error),
    }
}

fn read(body: &str) -> Result<Parsed, ParseError> {
    if body.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let value: Value = serde_json::from_str(body).map_err(ParseError::Json)?;
    let Value::Object(map) = &value else {
        return Err(ParseError::NotAnObject {
            found: JsonType::of(&value),
        });
    };
    let root = Fields::root(map);
    let envelope = Envelope::read(&root).map_err(ParseError::Envelope)?;
    let read = match route(&envelope) {
        Some(family) => family.read(&root).map_err(|error| ParseError::Detail {
            detail_type: envelope.detail_type.clone(),
            error,
        })?,
        None => Read::Ignored(UnknownReason::UnhandledType),
    };
    Ok(match read {
        Read::Message(message) => Parsed::Known(Event { envelope, message }),
        Read::Ignored(reason) => Parsed::Unknown(Unknown { envelope, reason }),
    })
}

/// The message families, one per handled (`source`, `detail-type`).
#[derive(Debug, Clone, Copy)]
enum Family {
    Spot,
    Rebalance,
    StateChange,
    ScheduledChange,
    CapacityReservation,
}

/// Picks the family for an envelope; `None` when none is handled.
fn route(envelope: &Envelope) -> Option<Family> {
    if envelope.version != EVENT_VERSION {
        return None;
    }
    let family = match (envelope.source.as_str(), envelope.detail_type.as_str()) {
        (SpotInterruption::SOURCE, SpotInterruption::DETAIL_TYPE) => Family::Spot,
        (RebalanceRecommendation::SOURCE, RebalanceRecommendation::DETAIL_TYPE) => {
            Family::Rebalance
        }
        (StateChange::SOURCE, StateChange::DETAIL_TYPE) => Family::StateChange,
        (ScheduledChange::SOURCE, ScheduledChange::DETAIL_TYPE) => Family::ScheduledChange,
        (CapacityReservationInterruption::SOURCE, CapacityReservationInterruption::DETAIL_TYPE) => {
            Family::CapacityReservation
        }
        _ => return None,
    };
    Some(family)
}

impl Family {
    /// Reads the root's `detail`, which every handled event must carry as
    /// an object.
    fn read(self, root: &Fields<'_>) -> Result<Read<Message>, FieldError> {
        let detail = root.required_object("detail")?;
        Ok(match self {
            Self::Spot => {
                Read::Message(Message::SpotInterruption(SpotInterruption::read(&detail)?))
            }
            Self::Rebalance => Read::Message(Message::RebalanceRecommendation(
                RebalanceRecommendation::read(&detail)?,
            )),
            Self::StateChange => StateChange::read(&detail)?.map(Message::StateChange),
            Self::ScheduledChange => ScheduledChange::read(&detail)?.map(Message::ScheduledChange),
            Self::CapacityReservation => Read::Message(Message::CapacityReservationInterruption(
                CapacityReservationInterruption::read(&detail)?,
            )),
        })
    }
}
