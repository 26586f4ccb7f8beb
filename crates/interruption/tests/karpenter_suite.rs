//! The message-parsing side of Karpenter's interruption controller suite
//! (`pkg/controllers/interruption/suite_test.go` and the message mix of
//! `interruption_benchmark_test.go`), on the bodies its test helpers send.

mod common;

use common::{
    capacity_reservation_interruption_message, instance_id, known, malformed,
    scheduled_change_message, spot_interruption_message, state_change_message, unknown,
};
use interruption::{Kind, Message, Parsed, UnknownReason};

// "should delete the NodeClaim when receiving a spot interruption warning"
#[test]
fn spot_interruption_warning_is_spot_interrupted() {
    let event = known(&spot_interruption_message("i-0123456789abcdef0"));
    assert_eq!(event.kind(), Kind::SpotInterrupted);
    assert_eq!(event.kind().as_str(), "spot_interrupted");
    assert_eq!(event.instance_ids(), ["i-0123456789abcdef0"]);
}

// "should delete the NodeClaim when receiving a capacity reservation
// interruption warning"
#[test]
fn capacity_reservation_warning_is_capacity_reservation_interrupted() {
    let event = known(&capacity_reservation_interruption_message(
        "i-0123456789abcdef0",
    ));
    assert_eq!(event.kind(), Kind::CapacityReservationInterrupted);
    assert_eq!(event.kind().as_str(), "capacity_reservation_interrupted");
    assert_eq!(event.instance_ids(), ["i-0123456789abcdef0"]);
}

// "should delete the NodeClaim when receiving a scheduled change message"
#[test]
fn scheduled_change_is_scheduled_change() {
    let event = known(&scheduled_change_message("i-0123456789abcdef0"));
    assert_eq!(event.kind(), Kind::ScheduledChange);
    assert_eq!(event.kind().as_str(), "scheduled_change");
    assert_eq!(event.instance_ids(), ["i-0123456789abcdef0"]);
    let Message::ScheduledChange(change) = &event.message else {
        panic!("expected a scheduled change, got {:?}", event.message);
    };
    // The Go helper leaves these zero-valued: they arrive as empty strings.
    assert_eq!(change.event_type_code, "");
    assert_eq!(change.event_arn.as_deref(), Some(""));
    assert_eq!(change.start_timestamp(), None);
}

// "should delete the NodeClaim when receiving a state change message":
// two of the four states count as instance_terminated, two as
// instance_stopped.
#[test]
fn state_changes_split_into_stopped_and_terminated() {
    let mut stopped = 0;
    let mut terminated = 0;
    for (i, state) in ["terminated", "stopped", "stopping", "shutting-down"]
        .into_iter()
        .enumerate()
    {
        let id = instance_id(i);
        let event = known(&state_change_message(&id, state));
        assert_eq!(event.instance_ids(), [id]);
        match event.kind() {
            Kind::InstanceStopped => stopped += 1,
            Kind::InstanceTerminated => terminated += 1,
            other => panic!("unexpected kind {other} for state {state}"),
        }
    }
    assert_eq!((stopped, terminated), (2, 2));
    assert_eq!(
        known(&state_change_message("i-1", "stopping"))
            .kind()
            .as_str(),
        "instance_stopped"
    );
    assert_eq!(
        known(&state_change_message("i-1", "shutting-down"))
            .kind()
            .as_str(),
        "instance_terminated"
    );
}

// "should handle multiple messages that cause nodeClaim deletion", both
// entries: 100 messages, each read with its own instance.
#[test]
fn many_messages_each_concern_their_instance() {
    type Builder = fn(&str) -> String;
    let builders: [(Builder, Kind); 2] = [
        (spot_interruption_message, Kind::SpotInterrupted),
        (
            capacity_reservation_interruption_message,
            Kind::CapacityReservationInterrupted,
        ),
    ];
    for (build, kind) in builders {
        for i in 0..100 {
            let id = instance_id(i);
            let event = known(&build(&id));
            assert_eq!(event.kind(), kind);
            assert_eq!(event.instance_ids(), [id]);
        }
    }
}

// "should delete a message when the message can't be parsed": a JSON
// object that is no EventBridge event. Karpenter deletes it without
// acting; here it reads as malformed (see the crate's notes on `{}`).
#[test]
fn object_without_envelope_is_not_acted_on() {
    let error = malformed(r#"{"field1":"value1","field2":"value2"}"#);
    assert_eq!(
        error.to_string(),
        "invalid EventBridge envelope: `version` is missing"
    );
}

// "should delete a state change message when the state isn't in accepted
// states"
#[test]
fn state_change_into_creating_is_ignored() {
    let unknown = unknown(&state_change_message("i-0123456789abcdef0", "creating"));
    assert_eq!(
        unknown.reason,
        UnknownReason::IgnoredState {
            state: "creating".to_owned()
        }
    );
    assert_eq!(unknown.source(), "aws.ec2");
    assert_eq!(
        unknown.detail_type(),
        "EC2 Instance State-change Notification"
    );
}

// "should not return an error when deleting a nodeClaim that is already
// deleted": the messages for an unknown instance still parse.
#[test]
fn messages_for_unknown_instances_still_parse() {
    for body in [
        spot_interruption_message("i-ffffffffffffffff0"),
        capacity_reservation_interruption_message("i-ffffffffffffffff0"),
    ] {
        assert_eq!(known(&body).instance_ids(), ["i-ffffffffffffffff0"]);
    }
}

// The benchmark's diverse mix: a third scheduled changes, a third spot
// interruptions, the rest state changes across the four handled states.
#[test]
fn diverse_message_mix_is_all_known() {
    let states = ["stopping", "stopped", "shutting-down", "terminated"];
    let count = 300;
    let mut bodies = Vec::new();
    for i in 0..count / 3 {
        bodies.push(scheduled_change_message(&instance_id(i)));
    }
    for i in count / 3..2 * (count / 3) {
        bodies.push(spot_interruption_message(&instance_id(i)));
    }
    for i in bodies.len()..count {
        bodies.push(state_change_message(
            &instance_id(i),
            states[i % states.len()],
        ));
    }
    let mut per_kind = std::collections::BTreeMap::new();
    for (i, body) in bodies.iter().enumerate() {
        let parsed = interruption::parse(body);
        let Parsed::Known(event) = &parsed else {
            panic!("message {i} did not parse: {parsed:?}");
        };
        assert_eq!(event.instance_ids(), [instance_id(i)]);
        *per_kind.entry(event.kind()).or_insert(0) += 1;
    }
    assert_eq!(per_kind[&Kind::ScheduledChange], 100);
    assert_eq!(per_kind[&Kind::SpotInterrupted], 100);
    assert_eq!(
        per_kind[&Kind::InstanceStopped] + per_kind[&Kind::InstanceTerminated],
        100
    );
}
