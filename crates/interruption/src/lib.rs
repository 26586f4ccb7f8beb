//! Typed parsing of the messages on Karpenter's interruption queue.
//!
//! As with Karpenter, the controller can be given an SQS queue
//! (`--interruption-queue`) into which EventBridge rules deliver the EC2 and
//! AWS Health events that announce the loss of an instance. The interruption
//! controller polls that queue so that it can drain the nodes concerned
//! before their instances go away. This crate reads one message body into
//! typed data, following the rules of Karpenter's parser; it does no I/O and
//! makes no decision, leaving both to the controller.
//!
//! Handled events, keyed by envelope `version` (`"0"`), `source` and
//! `detail-type`:
//!
//! | `source`     | `detail-type`                                           | [`Kind`]                                  |
//! |--------------|---------------------------------------------------------|-------------------------------------------|
//! | `aws.ec2`    | `EC2 Spot Instance Interruption Warning`                | `spot_interrupted`                        |
//! | `aws.ec2`    | `EC2 Instance Rebalance Recommendation`                 | `rebalance_recommendation`                |
//! | `aws.ec2`    | `EC2 Instance State-change Notification`                | `instance_stopped`, `instance_terminated` |
//! | `aws.health` | `AWS Health Event`                                      | `scheduled_change`                        |
//! | `aws.ec2`    | `EC2 Capacity Reservation Instance Interruption Warning` | `capacity_reservation_interrupted`        |
//!
//! State changes are handled only into `stopping`, `stopped`,
//! `shutting-down` and `terminated`; AWS Health events only when
//! `detail.service` is `EC2` and `detail.eventTypeCategory` is
//! `scheduledChange`. Every other well-formed event is
//! [`Parsed::Unknown`].
//!
//! ```
//! let body = r#"{
//!     "version": "0",
//!     "id": "1e5527d7-bb36-4607-3370-4164db56a40e",
//!     "detail-type": "EC2 Spot Instance Interruption Warning",
//!     "source": "aws.ec2",
//!     "account": "123456789012",
//!     "time": "2024-05-14T12:00:00Z",
//!     "region": "us-east-1",
//!     "resources": ["arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0"],
//!     "detail": {"instance-id": "i-0b662ef9931388ba0", "instance-action": "terminate"}
//! }"#;
//! match interruption::parse(body) {
//!     interruption::Parsed::Known(event) => {
//!         assert_eq!(event.kind().as_str(), "spot_interrupted");
//!         assert_eq!(event.instance_ids(), ["i-0b662ef9931388ba0"]);
//!     }
//!     other => panic!("unexpected {other:?}"),
//! }
//! ```

mod capacity_reservation;
mod envelope;
mod error;
mod fields;
mod message;
mod parse;
mod rebalance;
mod scheduled_change;
mod spot;
mod state_change;

pub use capacity_reservation::CapacityReservationInterruption;
pub use envelope::{EC2_SOURCE, EVENT_VERSION, Envelope, HEALTH_SOURCE};
pub use error::{FieldError, FieldProblem, JsonType, ParseError};
pub use message::{Event, INTERRUPTION_NOTICE, Kind, Message, NO_OP_KIND};
pub use parse::{Parsed, Unknown, UnknownReason, parse};
pub use rebalance::RebalanceRecommendation;
pub use scheduled_change::ScheduledChange;
pub use spot::SpotInterruption;
pub use state_change::{InstanceState, StateChange};
