//! Fixtures and event builders shared by the integration tests.

#![allow(dead_code)]

use interruption::{Event, ParseError, Parsed, Unknown};
use serde_json::{Value, json};

/// Every fixture under `testdata/`, by file name.
pub const FIXTURES: [(&str, &str); 6] = [
    (
        "spot_interruption.json",
        include_str!("../../testdata/spot_interruption.json"),
    ),
    (
        "rebalance_recommendation.json",
        include_str!("../../testdata/rebalance_recommendation.json"),
    ),
    (
        "state_change.json",
        include_str!("../../testdata/state_change.json"),
    ),
    (
        "scheduled_change.json",
        include_str!("../../testdata/scheduled_change.json"),
    ),
    (
        "health_issue.json",
        include_str!("../../testdata/health_issue.json"),
    ),
    (
        "capacity_reservation_interruption.json",
        include_str!("../../testdata/capacity_reservation_interruption.json"),
    ),
];

/// The fixture named `name`.
pub fn fixture(name: &str) -> &'static str {
    FIXTURES
        .iter()
        .find(|(file, _)| *file == name)
        .map(|(_, body)| *body)
        .unwrap_or_else(|| panic!("no fixture {name}"))
}

/// The fixture named `name` as a JSON value, to be edited by a test.
pub fn fixture_value(name: &str) -> Value {
    serde_json::from_str(fixture(name)).expect("fixtures are valid JSON")
}

/// Parses `body`, expecting a handled event.
pub fn known(body: &str) -> Event {
    match interruption::parse(body) {
        Parsed::Known(event) => event,
        other => panic!("expected a known event, got {other:?} for {body}"),
    }
}

/// Parses `body`, expecting a well-formed but unhandled event.
pub fn unknown(body: &str) -> Unknown {
    match interruption::parse(body) {
        Parsed::Unknown(unknown) => unknown,
        other => panic!("expected an unknown event, got {other:?} for {body}"),
    }
}

/// Parses `body`, expecting it to be malformed.
pub fn malformed(body: &str) -> ParseError {
    match interruption::parse(body) {
        Parsed::Malformed(error) => error,
        other => panic!("expected a malformed body, got {other:?} for {body}"),
    }
}

/// The envelope that Karpenter's test helpers give every message, as Go's
/// `encoding/json` writes it: every field present, `time` with nanoseconds
/// and a local offset.
fn karpenter_envelope(source: &str, detail_type: &str, instance_id: &str, detail: Value) -> Value {
    json!({
        "account": "000000000000",
        "detail-type": detail_type,
        "id": "5c2a4a43-3a5e-4a4b-9b8e-0d7f3a1c2b9e",
        "region": "us-west-2",
        "resources": [format!("arn:aws:ec2:us-west-2:instance/{instance_id}")],
        "source": source,
        "time": "2024-05-14T09:30:00.123456789-07:00",
        "version": "0",
        "detail": detail,
    })
}

/// Karpenter's `spotInterruptionMessage` test helper.
pub fn spot_interruption_message(instance_id: &str) -> String {
    karpenter_envelope(
        "aws.ec2",
        "EC2 Spot Instance Interruption Warning",
        instance_id,
        json!({"instance-id": instance_id, "instance-action": "terminate"}),
    )
    .to_string()
}

/// Karpenter's `capacityReservationInterruptionMessage` test helper.
pub fn capacity_reservation_interruption_message(instance_id: &str) -> String {
    karpenter_envelope(
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
        instance_id,
        json!({"instance-id": instance_id, "instance-action": "terminate"}),
    )
    .to_string()
}

/// Karpenter's `stateChangeMessage` test helper.
pub fn state_change_message(instance_id: &str, state: &str) -> String {
    karpenter_envelope(
        "aws.ec2",
        "EC2 Instance State-change Notification",
        instance_id,
        json!({"instance-id": instance_id, "state": state}),
    )
    .to_string()
}

/// Karpenter's `scheduledChangeMessage` test helper: the Go struct's
/// zero-valued fields are written out as empty strings and `null`.
pub fn scheduled_change_message(instance_id: &str) -> String {
    karpenter_envelope(
        "aws.health",
        "AWS Health Event",
        instance_id,
        json!({
            "eventArn": "",
            "eventTypeCode": "",
            "service": "EC2",
            "eventDescription": null,
            "startTime": "",
            "endTime": "",
            "eventTypeCategory": "scheduledChange",
            "affectedEntities": [{"entityValue": instance_id}],
        }),
    )
    .to_string()
}

/// A distinct, well-formed EC2 instance ID for index `i`.
pub fn instance_id(i: usize) -> String {
    format!("i-{i:017x}")
}
