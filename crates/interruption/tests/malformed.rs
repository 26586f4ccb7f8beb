//! Bodies that are not well-formed events, or handled events with a bad
//! `detail`: each gives [`Parsed::Malformed`] with an error naming the fault.

mod common;

use common::{fixture_value, malformed};
use interruption::{FieldError, FieldProblem, JsonType, ParseError};
use serde_json::{Value, json};

/// Expects `body` to be malformed in `field` for `problem`, whether in the
/// envelope or in a handled event's `detail`.
fn field_error(body: &Value) -> FieldError {
    match malformed(&body.to_string()) {
        ParseError::Envelope(error) | ParseError::Detail { error, .. } => error,
        other => panic!("expected a field error, got {other:?}"),
    }
}

fn wrong_type(expected: JsonType, found: JsonType) -> FieldProblem {
    FieldProblem::WrongType { expected, found }
}

#[test]
fn empty_bodies() {
    for body in ["", " ", "\n\t "] {
        assert!(matches!(malformed(body), ParseError::Empty), "{body:?}");
    }
    assert_eq!(ParseError::Empty.to_string(), "message body is empty");
}

#[test]
fn bodies_that_are_not_json() {
    for body in [
        "{",
        "not json",
        "{\"version\": \"0\",}",
        "\u{feff}{}",
        "{} {}",
    ] {
        let error = malformed(body);
        assert!(matches!(error, ParseError::Json(_)), "{body:?}: {error:?}");
        assert!(
            error
                .to_string()
                .starts_with("message body is not valid JSON: ")
        );
    }
}

#[test]
fn bodies_that_are_not_objects() {
    let cases = [
        ("[]", JsonType::Array),
        (r#"[{"version":"0"}]"#, JsonType::Array),
        ("null", JsonType::Null),
        ("true", JsonType::Bool),
        ("42", JsonType::Number),
        (
            r#""EC2 Spot Instance Interruption Warning""#,
            JsonType::String,
        ),
    ];
    for (body, expected) in cases {
        match malformed(body) {
            ParseError::NotAnObject { found } => assert_eq!(found, expected, "{body}"),
            other => panic!("{body}: expected NotAnObject, got {other:?}"),
        }
    }
    assert_eq!(
        malformed("[]").to_string(),
        "message body is an array, not a JSON object"
    );
}

#[test]
fn empty_object() {
    let error = malformed("{}");
    assert!(matches!(
        &error,
        ParseError::Envelope(FieldError { path, problem: FieldProblem::Missing }) if path == "version"
    ));
    assert_eq!(
        error.to_string(),
        "invalid EventBridge envelope: `version` is missing"
    );
}

#[test]
fn required_envelope_fields() {
    for field in ["version", "source", "detail-type"] {
        let mut value = fixture_value("spot_interruption.json");
        value.as_object_mut().expect("an object").remove(field);
        assert_eq!(
            field_error(&value),
            FieldError {
                path: field.to_owned(),
                problem: FieldProblem::Missing
            }
        );
        value[field] = json!(null);
        assert_eq!(
            field_error(&value).problem,
            wrong_type(JsonType::String, JsonType::Null)
        );
    }
}

#[test]
fn envelope_fields_of_the_wrong_type() {
    let cases = [
        (
            "version",
            json!(0),
            "version",
            JsonType::String,
            JsonType::Number,
        ),
        (
            "source",
            json!(["aws.ec2"]),
            "source",
            JsonType::String,
            JsonType::Array,
        ),
        (
            "detail-type",
            json!({}),
            "detail-type",
            JsonType::String,
            JsonType::Object,
        ),
        ("id", json!(7), "id", JsonType::String, JsonType::Number),
        (
            "account",
            json!(123456789012_u64),
            "account",
            JsonType::String,
            JsonType::Number,
        ),
        (
            "region",
            json!(false),
            "region",
            JsonType::String,
            JsonType::Bool,
        ),
        (
            "time",
            json!(1715679000),
            "time",
            JsonType::String,
            JsonType::Number,
        ),
        // The AWS documentation's placeholder for some events is a string.
        (
            "resources",
            json!("arn:aws:ec2:us-east-2a:instance/i-1"),
            "resources",
            JsonType::Array,
            JsonType::String,
        ),
        (
            "resources",
            json!(["arn", 5]),
            "resources[1]",
            JsonType::String,
            JsonType::Number,
        ),
    ];
    for (field, bad, path, expected, found) in cases {
        let mut value = fixture_value("spot_interruption.json");
        value[field] = bad;
        let error = field_error(&value);
        assert_eq!(error.path, path, "{field}");
        assert_eq!(error.problem, wrong_type(expected, found), "{field}");
    }
}

#[test]
fn envelope_time_must_be_rfc_3339() {
    for bad in [
        "yyyy-mm-ddThh:mm:ssZ",
        "2024-05-14 09:30:00",
        "2024-05-14T09:30:00",
        "",
    ] {
        let mut value = fixture_value("spot_interruption.json");
        value["time"] = json!(bad);
        let error = field_error(&value);
        assert_eq!(error.path, "time");
        assert!(
            matches!(&error.problem, FieldProblem::InvalidTimestamp { value, .. } if value == bad),
            "{bad}: {error:?}"
        );
    }
}

#[test]
fn spot_interruption_without_instance_id() {
    let mut value = fixture_value("spot_interruption.json");
    value["detail"]
        .as_object_mut()
        .expect("detail is an object")
        .remove("instance-id");
    let error = malformed(&value.to_string());
    match &error {
        ParseError::Detail { detail_type, error } => {
            assert_eq!(detail_type, "EC2 Spot Instance Interruption Warning");
            assert_eq!(error.path, "detail.instance-id");
            assert_eq!(error.problem, FieldProblem::Missing);
        }
        other => panic!("expected a detail error, got {other:?}"),
    }
    assert_eq!(
        error.to_string(),
        "invalid \"EC2 Spot Instance Interruption Warning\" event: `detail.instance-id` is missing"
    );
}

#[test]
fn instance_ids_must_be_non_empty_strings() {
    let fixtures = [
        "spot_interruption.json",
        "rebalance_recommendation.json",
        "state_change.json",
        "capacity_reservation_interruption.json",
    ];
    for name in fixtures {
        let mut value = fixture_value(name);
        value["detail"]["instance-id"] = json!("");
        assert_eq!(field_error(&value).problem, FieldProblem::Empty, "{name}");
        value["detail"]["instance-id"] = json!(1234);
        assert_eq!(
            field_error(&value).problem,
            wrong_type(JsonType::String, JsonType::Number),
            "{name}"
        );
        value["detail"]["instance-id"] = json!(null);
        assert_eq!(
            field_error(&value).problem,
            wrong_type(JsonType::String, JsonType::Null),
            "{name}"
        );
    }
}

#[test]
fn handled_events_need_an_object_detail() {
    let fixtures = [
        "spot_interruption.json",
        "rebalance_recommendation.json",
        "state_change.json",
        "scheduled_change.json",
        "capacity_reservation_interruption.json",
    ];
    for name in fixtures {
        let mut value = fixture_value(name);
        value.as_object_mut().expect("an object").remove("detail");
        assert_eq!(
            field_error(&value),
            FieldError {
                path: "detail".to_owned(),
                problem: FieldProblem::Missing
            },
            "{name}"
        );
        for (bad, found) in [
            (json!(null), JsonType::Null),
            (json!(["i-1234567890abcdef0", "terminate"]), JsonType::Array),
            (json!("i-1234567890abcdef0"), JsonType::String),
        ] {
            value["detail"] = bad;
            assert_eq!(
                field_error(&value),
                FieldError {
                    path: "detail".to_owned(),
                    problem: wrong_type(JsonType::Object, found)
                },
                "{name}"
            );
        }
    }
}

#[test]
fn optional_detail_fields_of_the_wrong_type() {
    let cases = [
        ("spot_interruption.json", "instance-action", json!(1)),
        (
            "capacity_reservation_interruption.json",
            "instance-action",
            json!([]),
        ),
        (
            "capacity_reservation_interruption.json",
            "instance-termination-time",
            json!(0),
        ),
        ("scheduled_change.json", "eventArn", json!({})),
        ("scheduled_change.json", "startTime", json!(1676084400)),
        ("scheduled_change.json", "endTime", json!(true)),
    ];
    for (name, field, bad) in cases {
        let mut value = fixture_value(name);
        value["detail"][field] = bad;
        let error = field_error(&value);
        assert_eq!(error.path, format!("detail.{field}"), "{name}");
        assert!(
            matches!(error.problem, FieldProblem::WrongType { .. }),
            "{name}"
        );
    }
}

#[test]
fn state_change_state_must_be_a_string() {
    let mut value = fixture_value("state_change.json");
    value["detail"]
        .as_object_mut()
        .expect("an object")
        .remove("state");
    assert_eq!(
        field_error(&value),
        FieldError {
            path: "detail.state".to_owned(),
            problem: FieldProblem::Missing
        }
    );
    value["detail"]["state"] = json!({"name": "terminated", "code": 48});
    assert_eq!(
        field_error(&value).problem,
        wrong_type(JsonType::String, JsonType::Object)
    );
}

#[test]
fn scheduled_change_fields() {
    let remove = |field: &str| {
        let mut value = fixture_value("scheduled_change.json");
        value["detail"]
            .as_object_mut()
            .expect("an object")
            .remove(field);
        field_error(&value)
    };
    for field in ["service", "eventTypeCategory", "eventTypeCode"] {
        assert_eq!(
            remove(field),
            FieldError {
                path: format!("detail.{field}"),
                problem: FieldProblem::Missing
            }
        );
    }

    let mut value = fixture_value("scheduled_change.json");
    value["detail"]["affectedEntities"] = json!({"entityValue": "i-1"});
    assert_eq!(
        field_error(&value),
        FieldError {
            path: "detail.affectedEntities".to_owned(),
            problem: wrong_type(JsonType::Array, JsonType::Object)
        }
    );
    value["detail"]["affectedEntities"] = json!([{"entityValue": "i-1"}, "i-2"]);
    assert_eq!(
        field_error(&value),
        FieldError {
            path: "detail.affectedEntities[1]".to_owned(),
            problem: wrong_type(JsonType::Object, JsonType::String)
        }
    );
    value["detail"]["affectedEntities"] = json!([{"entityValue": "i-1"}, {"entity": "i-2"}]);
    assert_eq!(
        field_error(&value),
        FieldError {
            path: "detail.affectedEntities[1].entityValue".to_owned(),
            problem: FieldProblem::Missing
        }
    );
    value["detail"]["affectedEntities"] = json!([{"entityValue": 2}]);
    assert_eq!(
        field_error(&value).problem,
        wrong_type(JsonType::String, JsonType::Number)
    );
}

#[test]
fn errors_have_sources() {
    use std::error::Error as _;
    let error = malformed("{}");
    assert!(error.source().is_some());
    let error = malformed("{");
    assert!(error.source().is_some());
    assert!(malformed("").source().is_none());
}
