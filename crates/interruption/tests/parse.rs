//! Reading the documented event shapes, and the routing rules of
//! Karpenter's parser (`pkg/controllers/interruption/parser.go` and the
//! message parsers under `messages/`).

mod common;

use common::{fixture, fixture_value, known, state_change_message, unknown};
use interruption::{
    CapacityReservationInterruption, INTERRUPTION_NOTICE, InstanceState, Kind, Message, NO_OP_KIND,
    Parsed, RebalanceRecommendation, ScheduledChange, SpotInterruption, StateChange, UnknownReason,
};
use jiff::Timestamp;
use serde_json::json;

fn ts(text: &str) -> Timestamp {
    text.parse().expect("test timestamps are RFC 3339")
}

#[test]
fn spot_interruption_fixture() {
    let event = known(fixture("spot_interruption.json"));
    assert_eq!(event.kind(), Kind::SpotInterrupted);
    assert_eq!(
        event.message,
        Message::SpotInterruption(SpotInterruption {
            instance_id: "i-1234567890abcdef0".to_owned(),
            instance_action: Some("terminate".to_owned()),
        })
    );
    let envelope = &event.envelope;
    assert_eq!(envelope.version, "0");
    assert_eq!(
        envelope.id.as_deref(),
        Some("12345678-1234-1234-1234-123456789012")
    );
    assert_eq!(envelope.source, "aws.ec2");
    assert_eq!(
        envelope.detail_type,
        "EC2 Spot Instance Interruption Warning"
    );
    assert_eq!(envelope.account.as_deref(), Some("123456789012"));
    assert_eq!(envelope.region.as_deref(), Some("us-east-2"));
    assert_eq!(
        envelope.resources,
        ["arn:aws:ec2:us-east-2a:instance/i-1234567890abcdef0"]
    );
    assert_eq!(event.time(), Some(ts("2024-05-14T09:30:00Z")));
    assert_eq!(event.action_time(), Some(ts("2024-05-14T09:32:00Z")));
}

#[test]
fn rebalance_recommendation_fixture() {
    let event = known(fixture("rebalance_recommendation.json"));
    assert_eq!(event.kind(), Kind::RebalanceRecommendation);
    assert_eq!(event.kind().as_str(), "rebalance_recommendation");
    assert_eq!(
        event.message,
        Message::RebalanceRecommendation(RebalanceRecommendation {
            instance_id: "i-1234567890abcdef0".to_owned(),
        })
    );
    assert_eq!(event.action_time(), None);
}

#[test]
fn state_change_fixture() {
    let event = known(fixture("state_change.json"));
    assert_eq!(event.kind(), Kind::InstanceTerminated);
    assert_eq!(
        event.message,
        Message::StateChange(StateChange {
            instance_id: "i-abcd1111".to_owned(),
            state: InstanceState::Terminated,
        })
    );
    assert_eq!(event.time(), Some(ts("2015-11-11T21:29:54Z")));
    assert_eq!(event.action_time(), None);
}

#[test]
fn scheduled_change_fixture() {
    let event = known(fixture("scheduled_change.json"));
    assert_eq!(event.kind(), Kind::ScheduledChange);
    assert_eq!(
        event.instance_ids(),
        ["i-0123456789abcdef0", "i-0fedcba9876543210"]
    );
    let Message::ScheduledChange(change) = &event.message else {
        panic!("expected a scheduled change, got {:?}", event.message);
    };
    assert_eq!(
        change.event_type_code,
        "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED"
    );
    assert!(
        change
            .event_arn
            .as_deref()
            .is_some_and(|arn| arn.starts_with("arn:aws:health:us-west-2::event/EC2/"))
    );
    assert_eq!(
        change.start_time.as_deref(),
        Some("Sat, 11 Feb 2023 03:00:00 GMT")
    );
    assert_eq!(change.start_timestamp(), Some(ts("2023-02-11T03:00:00Z")));
    assert_eq!(change.end_timestamp(), Some(ts("2023-02-11T05:00:00Z")));
    assert_eq!(event.action_time(), Some(ts("2023-02-11T03:00:00Z")));
}

#[test]
fn capacity_reservation_interruption_fixture() {
    let event = known(fixture("capacity_reservation_interruption.json"));
    assert_eq!(event.kind(), Kind::CapacityReservationInterrupted);
    assert_eq!(
        event.message,
        Message::CapacityReservationInterruption(CapacityReservationInterruption {
            instance_id: "i-0a1b2c3d4e5f67890".to_owned(),
            instance_action: Some("terminate".to_owned()),
            instance_termination_time: Some("2025-11-20T10:02:00Z".to_owned()),
        })
    );
    assert_eq!(event.action_time(), Some(ts("2025-11-20T10:02:00Z")));
}

#[test]
fn capacity_reservation_action_time_falls_back_to_the_notice() {
    let mut value = fixture_value("capacity_reservation_interruption.json");
    value["detail"]["instance-termination-time"] = json!("soon");
    let event = known(&value.to_string());
    let Message::CapacityReservationInterruption(warning) = &event.message else {
        panic!("expected a capacity reservation warning");
    };
    assert_eq!(warning.instance_termination_time.as_deref(), Some("soon"));
    assert_eq!(warning.termination_timestamp(), None);
    let expected = ts("2025-11-20T10:00:00Z")
        .checked_add(INTERRUPTION_NOTICE)
        .ok();
    assert_eq!(event.action_time(), expected);
}

#[test]
fn every_handled_state_is_known_and_others_are_not() {
    let handled = [
        ("stopping", InstanceState::Stopping, Kind::InstanceStopped),
        ("stopped", InstanceState::Stopped, Kind::InstanceStopped),
        (
            "shutting-down",
            InstanceState::ShuttingDown,
            Kind::InstanceTerminated,
        ),
        (
            "terminated",
            InstanceState::Terminated,
            Kind::InstanceTerminated,
        ),
    ];
    for (raw, state, kind) in handled {
        let event = known(&state_change_message("i-1", raw));
        assert_eq!(event.kind(), kind, "{raw}");
        let Message::StateChange(change) = &event.message else {
            panic!("expected a state change for {raw}");
        };
        assert_eq!(change.state, state);
        assert_eq!(change.state.as_str(), raw);
    }
    for raw in ["pending", "running", "rebooting", "creating", ""] {
        let unknown = unknown(&state_change_message("i-1", raw));
        assert_eq!(
            unknown.reason,
            UnknownReason::IgnoredState {
                state: raw.to_owned()
            }
        );
        assert_eq!(unknown.detail_type(), StateChange::DETAIL_TYPE);
    }
}

// Karpenter lower-cases the state before checking it.
#[test]
fn state_is_matched_ignoring_case() {
    let event = known(&state_change_message("i-1", "Shutting-Down"));
    assert_eq!(event.kind(), Kind::InstanceTerminated);
    let event = known(&state_change_message("i-1", "STOPPED"));
    assert_eq!(event.kind(), Kind::InstanceStopped);
}

#[test]
fn ignored_state_does_not_need_an_instance_id() {
    let unknown = unknown(
        &json!({
            "version": "0",
            "source": "aws.ec2",
            "detail-type": "EC2 Instance State-change Notification",
            "detail": {"state": "running"},
        })
        .to_string(),
    );
    assert_eq!(
        unknown.reason,
        UnknownReason::IgnoredState {
            state: "running".to_owned()
        }
    );
}

#[test]
fn health_events_other_than_ec2_scheduled_changes_are_ignored() {
    let issue = unknown(fixture("health_issue.json"));
    assert_eq!(issue.source(), "aws.health");
    assert_eq!(issue.detail_type(), "AWS Health Event");
    assert_eq!(
        issue.reason,
        UnknownReason::IgnoredHealthEvent {
            service: "EC2".to_owned(),
            event_type_category: "issue".to_owned(),
        }
    );
    // Service and category are compared exactly, as Karpenter does.
    for (service, category) in [
        ("RDS", "scheduledChange"),
        ("ec2", "scheduledChange"),
        ("EC2", "ScheduledChange"),
        ("EC2", "accountNotification"),
    ] {
        let mut value = fixture_value("scheduled_change.json");
        value["detail"]["service"] = json!(service);
        value["detail"]["eventTypeCategory"] = json!(category);
        let unknown = unknown(&value.to_string());
        assert_eq!(
            unknown.reason,
            UnknownReason::IgnoredHealthEvent {
                service: service.to_owned(),
                event_type_category: category.to_owned(),
            }
        );
    }
}

#[test]
fn scheduled_change_without_entities_concerns_no_instance() {
    let mut value = fixture_value("scheduled_change.json");
    let detail = value["detail"]
        .as_object_mut()
        .expect("detail is an object");
    detail.remove("affectedEntities");
    detail.remove("startTime");
    let event = known(&value.to_string());
    assert_eq!(event.kind(), Kind::ScheduledChange);
    assert!(event.instance_ids().is_empty());
    assert_eq!(event.action_time(), None);

    value["detail"]["affectedEntities"] = json!([]);
    assert!(known(&value.to_string()).instance_ids().is_empty());
}

#[test]
fn health_start_time_may_be_rfc_3339() {
    let mut value = fixture_value("scheduled_change.json");
    value["detail"]["startTime"] = json!("2023-02-11T03:00:00Z");
    let event = known(&value.to_string());
    assert_eq!(event.action_time(), Some(ts("2023-02-11T03:00:00Z")));
}

#[test]
fn unknown_detail_type_or_source_is_unknown() {
    let cases = [
        ("aws.ec2", "EC2 Instance Launch Successful"),
        ("aws.autoscaling", "EC2 Instance-terminate Lifecycle Action"),
        (
            "aws.ec2",
            "EC2 Capacity Reservation Interruptible Reclamation Complete",
        ),
        // A handled detail-type under another source.
        ("aws.health", SpotInterruption::DETAIL_TYPE),
        ("aws.ec2", ScheduledChange::DETAIL_TYPE),
        // Routing is exact, case included.
        ("aws.ec2", "ec2 spot instance interruption warning"),
        ("AWS.EC2", SpotInterruption::DETAIL_TYPE),
    ];
    for (source, detail_type) in cases {
        let mut value = fixture_value("spot_interruption.json");
        value["source"] = json!(source);
        value["detail-type"] = json!(detail_type);
        let unknown = unknown(&value.to_string());
        assert_eq!(unknown.reason, UnknownReason::UnhandledType);
        assert_eq!(unknown.source(), source);
        assert_eq!(unknown.detail_type(), detail_type);
    }
}

#[test]
fn unknown_event_needs_no_detail() {
    let unknown = unknown(r#"{"version":"0","source":"my.app","detail-type":"Hello"}"#);
    assert_eq!(unknown.source(), "my.app");
    assert_eq!(unknown.detail_type(), "Hello");
    assert_eq!(unknown.reason, UnknownReason::UnhandledType);
}

// Karpenter's parsers are keyed by version "0" too.
#[test]
fn other_envelope_versions_are_unknown() {
    for version in ["1", "", "00", "0.0"] {
        let mut value = fixture_value("spot_interruption.json");
        value["version"] = json!(version);
        let unknown = unknown(&value.to_string());
        assert_eq!(unknown.envelope.version, version);
        assert_eq!(unknown.reason, UnknownReason::UnhandledType);
        assert_eq!(unknown.detail_type(), SpotInterruption::DETAIL_TYPE);
    }
}

// Only version, source and detail-type are required of the envelope, as
// Go's zero values make every other field optional in Karpenter.
#[test]
fn optional_envelope_fields_may_be_absent_or_null() {
    let minimal = known(
        r#"{"version":"0","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":{"instance-id":"i-1"}}"#,
    );
    assert_eq!(minimal.instance_ids(), ["i-1"]);
    assert_eq!(minimal.envelope.id, None);
    assert_eq!(minimal.envelope.time, None);
    assert!(minimal.envelope.resources.is_empty());
    assert_eq!(minimal.action_time(), None);
    let Message::SpotInterruption(spot) = &minimal.message else {
        panic!("expected a spot interruption");
    };
    assert_eq!(spot.instance_action, None);

    let mut value = fixture_value("spot_interruption.json");
    for field in ["id", "account", "time", "region", "resources"] {
        value[field] = json!(null);
    }
    value["detail"]["instance-action"] = json!(null);
    let event = known(&value.to_string());
    assert_eq!(event.envelope.account, None);
    assert_eq!(event.instance_ids(), ["i-1234567890abcdef0"]);
}

#[test]
fn unrecognised_fields_are_ignored() {
    let mut value = fixture_value("rebalance_recommendation.json");
    value["extra"] = json!({"nested": [1, 2, 3]});
    value["detail"]["future-field"] = json!(true);
    assert_eq!(
        known(&value.to_string()).instance_ids(),
        ["i-1234567890abcdef0"]
    );
}

#[test]
fn envelope_time_keeps_its_instant_across_offsets() {
    let mut value = fixture_value("spot_interruption.json");
    value["time"] = json!("2024-05-14T02:30:00.5-07:00");
    let event = known(&value.to_string());
    assert_eq!(event.time(), Some(ts("2024-05-14T09:30:00.5Z")));
}

#[test]
fn metric_labels_match_karpenter() {
    let labels: Vec<_> = Kind::ALL.iter().map(|kind| kind.as_str()).collect();
    assert_eq!(
        labels,
        [
            "spot_interrupted",
            "rebalance_recommendation",
            "scheduled_change",
            "instance_stopped",
            "instance_terminated",
            "capacity_reservation_interrupted",
            "instance_status",
            "system_status",
            "event_status",
        ]
    );
    assert_eq!(Kind::InstanceStopped.to_string(), "instance_stopped");
    assert_eq!(NO_OP_KIND, "no_op");
    let parsed = interruption::parse(fixture("spot_interruption.json"));
    assert_eq!(parsed.metric_kind(), Some("spot_interrupted"));
    assert!(parsed.known().is_some());
    let parsed = interruption::parse(fixture("health_issue.json"));
    assert_eq!(parsed.metric_kind(), Some("no_op"));
    assert!(parsed.known().is_none());
    assert_eq!(interruption::parse("{").metric_kind(), None);
}

#[test]
fn routing_constants_are_the_documented_strings() {
    assert_eq!(
        (SpotInterruption::SOURCE, SpotInterruption::DETAIL_TYPE),
        ("aws.ec2", "EC2 Spot Instance Interruption Warning")
    );
    assert_eq!(
        (
            RebalanceRecommendation::SOURCE,
            RebalanceRecommendation::DETAIL_TYPE
        ),
        ("aws.ec2", "EC2 Instance Rebalance Recommendation")
    );
    assert_eq!(
        (StateChange::SOURCE, StateChange::DETAIL_TYPE),
        ("aws.ec2", "EC2 Instance State-change Notification")
    );
    assert_eq!(
        (ScheduledChange::SOURCE, ScheduledChange::DETAIL_TYPE),
        ("aws.health", "AWS Health Event")
    );
    assert_eq!(
        (
            CapacityReservationInterruption::SOURCE,
            CapacityReservationInterruption::DETAIL_TYPE
        ),
        (
            "aws.ec2",
            "EC2 Capacity Reservation Instance Interruption Warning"
        )
    );
    assert_eq!(
        (
            ScheduledChange::SERVICE,
            ScheduledChange::EVENT_TYPE_CATEGORY
        ),
        ("EC2", "scheduledChange")
    );
}

#[test]
fn unknown_reasons_read_well_in_logs() {
    assert_eq!(
        UnknownReason::IgnoredState {
            state: "running".to_owned()
        }
        .to_string(),
        r#"instance state "running" is not handled"#
    );
    assert_eq!(
        UnknownReason::UnhandledType.to_string(),
        "event type is not handled"
    );
    let Parsed::Unknown(issue) = interruption::parse(fixture("health_issue.json")) else {
        panic!("expected the Health issue to be unknown");
    };
    assert_eq!(
        issue.reason.to_string(),
        r#"AWS Health event for service "EC2", category "issue" is not handled"#
    );
}
