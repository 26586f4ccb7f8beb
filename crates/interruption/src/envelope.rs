//! The EventBridge envelope shared by every event.

use jiff::Timestamp;

use crate::error::{FieldError, FieldProblem};
use crate::fields::Fields;

/// The only envelope `version` that EventBridge sends, and the only one
/// routed to a message parser.
pub const EVENT_VERSION: &str = "0";

/// The `source` of events emitted by EC2.
pub const EC2_SOURCE: &str = "aws.ec2";

/// The `source` of events emitted by AWS Health.
pub const HEALTH_SOURCE: &str = "aws.health";

/// The top-level fields of an EventBridge event (everything but `detail`).
///
/// `version`, `source` and `detail-type` are required: together they decide
/// which message parser, if any, reads the `detail`. The other fields may be
/// absent or `null`, but must have the right JSON type when present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// `version`: the envelope format; always `"0"` today.
    pub version: String,
    /// `id`: the event's unique ID, if present.
    pub id: Option<String>,
    /// `detail-type`: what happened, e.g. `EC2 Spot Instance Interruption Warning`.
    pub detail_type: String,
    /// `source`: the emitting service, e.g. `aws.ec2`.
    pub source: String,
    /// `account`: the AWS account the event concerns, if present.
    pub account: Option<String>,
    /// `time`: when the event was emitted, if present (RFC 3339 in the body).
    pub time: Option<Timestamp>,
    /// `region`: the AWS Region the event concerns, if present.
    pub region: Option<String>,
    /// `resources`: ARNs or IDs of the resources involved; empty when absent.
    pub resources: Vec<String>,
}

impl Envelope {
    /// Reads the envelope fields of the body's root object.
    pub(crate) fn read(root: &Fields<'_>) -> Result<Self, FieldError> {
        let version = root.required_str("version")?.to_owned();
        let id = root.optional_str("id")?.map(str::to_owned);
        let detail_type = root.required_str("detail-type")?.to_owned();
        let source = root.required_str("source")?.to_owned();
        let account = root.optional_str("account")?.map(str::to_owned);
        let time = root
            .optional_str("time")?
            .map(|text| parse_time(root, text))
            .transpose()?;
        let region = root.optional_str("region")?.map(str::to_owned);
        let resources = root
            .optional_array("resources")?
            .iter()
            .enumerate()
            .map(|(index, value)| {
                Fields::string(format!("{}[{index}]", root.path_of("resources")), value)
                    .map(str::to_owned)
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            version,
            id,
            detail_type,
            source,
            account,
            time,
            region,
            resources,
        })
    }
}

/// Reads the envelope `time`, which EventBridge writes in RFC 3339.
fn parse_time(root: &Fields<'_>, text: &str) -> Result<Timestamp, FieldError> {
    text.parse::<Timestamp>().map_err(|error| {
        root.error(
            "time",
            FieldProblem::InvalidTimestamp {
                value: text.to_owned(),
                reason: error.to_string(),
            },
        )
    })
}
