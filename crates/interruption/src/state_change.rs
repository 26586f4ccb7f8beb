//! EC2 Instance State-change Notification.

use std::fmt;

use crate::envelope::EC2_SOURCE;
use crate::error::FieldError;
use crate::fields::Fields;
use crate::message::Kind;
use crate::parse::{Read, UnknownReason};

/// EC2's notice that an instance entered one of the states that take it
/// out of service.
///
/// Transitions into other states (`pending`, `running`, ...) are read as
/// [`UnknownReason::IgnoredState`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateChange {
    /// `detail.instance-id`: the instance whose state changed.
    pub instance_id: String,
    /// `detail.state`: the state it entered.
    pub state: InstanceState,
}

impl StateChange {
    /// The envelope `source` of this event.
    pub const SOURCE: &str = EC2_SOURCE;
    /// The envelope `detail-type` of this event.
    pub const DETAIL_TYPE: &str = "EC2 Instance State-change Notification";

    /// The message kind: [`Kind::InstanceStopped`] for `stopping` and
    /// `stopped`, [`Kind::InstanceTerminated`] for `shutting-down` and
    /// `terminated`.
    pub fn kind(&self) -> Kind {
        match self.state {
            InstanceState::Stopping | InstanceState::Stopped => Kind::InstanceStopped,
            InstanceState::ShuttingDown | InstanceState::Terminated => Kind::InstanceTerminated,
        }
    }

    /// Reads the event's `detail`. The state is read first: a transition
    /// into a state that is not handled is ignored whatever the rest holds.
    pub(crate) fn read(detail: &Fields<'_>) -> Result<Read<Self>, FieldError> {
        let raw_state = detail.required_str("state")?;
        let Some(state) = InstanceState::from_ec2(raw_state) else {
            return Ok(Read::Ignored(UnknownReason::IgnoredState {
                state: raw_state.to_owned(),
            }));
        };
        Ok(Read::Message(Self {
            instance_id: detail.required_id("instance-id")?.to_owned(),
            state,
        }))
    }
}

/// The EC2 instance states a [`StateChange`] is read for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstanceState {
    /// `stopping`.
    Stopping,
    /// `stopped`.
    Stopped,
    /// `shutting-down`.
    ShuttingDown,
    /// `terminated`.
    Terminated,
}

impl InstanceState {
    /// Every handled state.
    pub const ALL: [Self; 4] = [
        Self::Stopping,
        Self::Stopped,
        Self::ShuttingDown,
        Self::Terminated,
    ];

    /// The state as EC2 spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
            Self::ShuttingDown => "shutting-down",
            Self::Terminated => "terminated",
        }
    }

    /// Reads an EC2 state name, ignoring ASCII case; `None` for the states
    /// that are not handled.
    pub fn from_ec2(state: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|candidate| candidate.as_str().eq_ignore_ascii_case(state))
    }
}

impl fmt::Display for InstanceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
