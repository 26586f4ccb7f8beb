//! The handled messages, their kinds, and an event as a whole.

use std::fmt;

use jiff::{SignedDuration, Timestamp};

use crate::capacity_reservation::CapacityReservationInterruption;
use crate::envelope::Envelope;
use crate::rebalance::RebalanceRecommendation;
use crate::scheduled_change::ScheduledChange;
use crate::spot::SpotInterruption;
use crate::state_change::StateChange;

/// How long before the action EC2 sends a Spot or Capacity Reservation
/// interruption warning: two minutes, as EC2 documents.
pub const INTERRUPTION_NOTICE: SignedDuration = SignedDuration::from_mins(2);

/// The metric label of a well-formed event that is not handled
/// ([`Parsed::Unknown`](crate::Parsed::Unknown)); Karpenter's `no_op`.
pub const NO_OP_KIND: &str = "no_op";

/// The kind of a handled message: a closed set, usable as a metric label.
///
/// The labels are Karpenter's message kinds, so dashboards and alerts
/// written for Karpenter's interruption metrics keep working.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A Spot interruption warning: `spot_interrupted`.
    SpotInterrupted,
    /// A rebalance recommendation: `rebalance_recommendation`.
    RebalanceRecommendation,
    /// An AWS Health scheduled change: `scheduled_change`.
    ScheduledChange,
    /// A state change to `stopping` or `stopped`: `instance_stopped`.
    InstanceStopped,
    /// A state change to `shutting-down` or `terminated`: `instance_terminated`.
    InstanceTerminated,
    /// A Capacity Reservation interruption warning:
    /// `capacity_reservation_interrupted`.
    CapacityReservationInterrupted,
    /// A failed instance status check, impaired for two minutes:
    /// `instance_status`. Found by polling `DescribeInstanceStatus`, never
    /// parsed from the queue.
    InstanceStatus,
    /// A failed system status check, impaired for two minutes:
    /// `system_status`. Found by polling, as [`Kind::InstanceStatus`].
    SystemStatus,
    /// A scheduled instance event (reboot, maintenance, retirement, stop):
    /// `event_status`. Found by polling, as [`Kind::InstanceStatus`].
    EventStatus,
}

impl Kind {
    /// Every kind, e.g. to initialise metric series.
    pub const ALL: [Self; 9] = [
        Self::SpotInterrupted,
        Self::RebalanceRecommendation,
        Self::ScheduledChange,
        Self::InstanceStopped,
        Self::InstanceTerminated,
        Self::CapacityReservationInterrupted,
        Self::InstanceStatus,
        Self::SystemStatus,
        Self::EventStatus,
    ];

    /// The stable label of the kind.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SpotInterrupted => "spot_interrupted",
            Self::RebalanceRecommendation => "rebalance_recommendation",
            Self::ScheduledChange => "scheduled_change",
            Self::InstanceStopped => "instance_stopped",
            Self::InstanceTerminated => "instance_terminated",
            Self::CapacityReservationInterrupted => "capacity_reservation_interrupted",
            Self::InstanceStatus => "instance_status",
            Self::SystemStatus => "system_status",
            Self::EventStatus => "event_status",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `detail` of a handled event, by family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// EC2 Spot Instance Interruption Warning.
    SpotInterruption(SpotInterruption),
    /// EC2 Instance Rebalance Recommendation.
    RebalanceRecommendation(RebalanceRecommendation),
    /// EC2 Instance State-change Notification, into a handled state.
    StateChange(StateChange),
    /// AWS Health Event: an EC2 scheduled change.
    ScheduledChange(ScheduledChange),
    /// EC2 Capacity Reservation Instance Interruption Warning.
    CapacityReservationInterruption(CapacityReservationInterruption),
}

impl Message {
    /// The message's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Self::SpotInterruption(_) => Kind::SpotInterrupted,
            Self::RebalanceRecommendation(_) => Kind::RebalanceRecommendation,
            Self::StateChange(change) => change.kind(),
            Self::ScheduledChange(_) => Kind::ScheduledChange,
            Self::CapacityReservationInterruption(_) => Kind::CapacityReservationInterrupted,
        }
    }

    /// The IDs of the EC2 instances the message concerns, in the event's
    /// order. One for every kind but a scheduled change, which may list
    /// any number (including none).
    pub fn instance_ids(&self) -> &[String] {
        match self {
            Self::SpotInterruption(m) => std::slice::from_ref(&m.instance_id),
            Self::RebalanceRecommendation(m) => std::slice::from_ref(&m.instance_id),
            Self::StateChange(m) => std::slice::from_ref(&m.instance_id),
            Self::ScheduledChange(m) => &m.instance_ids,
            Self::CapacityReservationInterruption(m) => std::slice::from_ref(&m.instance_id),
        }
    }
}

/// A handled event: its envelope and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The EventBridge envelope.
    pub envelope: Envelope,
    /// The typed `detail`.
    pub message: Message,
}

impl Event {
    /// The message's kind; see [`Message::kind`].
    pub fn kind(&self) -> Kind {
        self.message.kind()
    }

    /// The instances the message concerns; see [`Message::instance_ids`].
    pub fn instance_ids(&self) -> &[String] {
        self.message.instance_ids()
    }

    /// When the event was emitted (the envelope `time`), if it says.
    /// Karpenter measures its message latency from this time.
    pub fn time(&self) -> Option<Timestamp> {
        self.envelope.time
    }

    /// When the action the event announces is due, as far as the event
    /// tells:
    ///
    /// - Spot interruption: the envelope `time` plus [`INTERRUPTION_NOTICE`];
    /// - Capacity Reservation interruption: `instance-termination-time` when
    ///   readable, else the envelope `time` plus [`INTERRUPTION_NOTICE`];
    /// - scheduled change: `startTime` when readable;
    /// - rebalance recommendation and state change: `None` (no action is
    ///   announced, or it already happened).
    pub fn action_time(&self) -> Option<Timestamp> {
        let after_notice = || {
            self.envelope
                .time
                .and_then(|time| time.checked_add(INTERRUPTION_NOTICE).ok())
        };
        match &self.message {
            Message::SpotInterruption(_) => after_notice(),
            Message::CapacityReservationInterruption(m) => {
                m.termination_timestamp().or_else(after_notice)
            }
            Message::ScheduledChange(m) => m.start_timestamp(),
            Message::RebalanceRecommendation(_) | Message::StateChange(_) => None,
        }
    }
}
