//! Karpenter's `nodeoverlay_validation_test.go`, by `It` text: each case
//! is checked against the runtime validation and, for the fields a pattern
//! guards, against the CRD's pattern too (so the CRD and the Rust side
//! cannot disagree).

use super::*;

fn spec(requirements: serde_json::Value) -> NodeOverlaySpec {
    serde_json::from_value(serde_json::json!({ "requirements": requirements })).expect("test spec")
}

fn base() -> NodeOverlaySpec {
    spec(serde_json::json!([{"key": "karpenter.sh/capacity-type", "operator": "Exists"}]))
}

fn with_requirements(requirements: serde_json::Value) -> NodeOverlaySpec {
    spec(requirements)
}

fn valid(spec: &NodeOverlaySpec) -> bool {
    spec.validate().is_ok()
}

fn price_ok(text: &str) -> bool {
    let rust = parse_price(text).is_some();
    let crd = regex::Regex::new(PRICE_PATTERN)
        .expect("pattern")
        .is_match(text);
    assert_eq!(rust, crd, "price {text:?}: Rust and CRD pattern disagree");
    rust
}

fn adjustment_ok(text: &str) -> bool {
    let rust = parse_price_adjustment(text).is_some();
    let crd = regex::Regex::new(PRICE_ADJUSTMENT_PATTERN)
        .expect("pattern")
        .is_match(text);
    assert_eq!(
        rust, crd,
        "priceAdjustment {text:?}: Rust and CRD pattern disagree"
    );
    rust
}

#[test]
fn should_fail_for_no_values_for_in_operator() {
    assert!(!valid(&with_requirements(
        serde_json::json!([{"key": "Test", "operator": "In"}])
    )));
}

#[test]
fn should_fail_for_no_values_for_not_in_operator() {
    let spec = with_requirements(serde_json::json!([{"key": "Test", "operator": "NotIn"}]));
    let errors = spec.validate().unwrap_err();
    assert!(
        errors
            .iter()
            .any(|e| e.to_string().contains("spec.requirements[0]")
                && e.to_string().contains("NotIn")),
        "{errors:?}"
    );
}

#[test]
fn should_succeed_for_valid_requirement_keys() {
    assert!(valid(&with_requirements(serde_json::json!([
        {"key": "Test", "operator": "Exists"},
        {"key": "test.com/Test", "operator": "Exists"},
        {"key": "test.com.com/test", "operator": "Exists"},
        {"key": "key-only", "operator": "Exists"},
    ]))));
}

#[test]
fn should_fail_for_invalid_requirement_keys() {
    for key in [
        "test.com.com}",
        "Test.com/test",
        "test/test/test",
        "test/",
        "/test",
    ] {
        let spec = with_requirements(serde_json::json!([{"key": key, "operator": "Exists"}]));
        assert!(!valid(&spec), "{key}");
    }
}

#[test]
fn should_allow_for_the_karpenter_sh_nodepool_label() {
    assert!(valid(&with_requirements(serde_json::json!([
        {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["silly-name"]},
    ]))));
}

#[test]
fn should_fail_at_runtime_for_requirement_keys_that_are_too_long() {
    let long = "a".repeat(250);
    for key in [
        format!("test.com.test.{long}/test"),
        format!("test.com.test/test-{long}"),
    ] {
        let spec = with_requirements(serde_json::json!([{"key": key, "operator": "Exists"}]));
        assert!(!valid(&spec), "{key}");
    }
}

#[test]
fn should_allow_supported_ops() {
    assert!(valid(&with_requirements(serde_json::json!([
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test"]},
        {"key": "topology.kubernetes.io/zone", "operator": "Gt", "values": ["1"]},
        {"key": "topology.kubernetes.io/zone", "operator": "Lt", "values": ["1"]},
        {"key": "topology.kubernetes.io/zone", "operator": "Gte", "values": ["1"]},
        {"key": "topology.kubernetes.io/zone", "operator": "Lte", "values": ["1"]},
        {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["1"]},
        {"key": "topology.kubernetes.io/zone", "operator": "Exists"},
    ]))));
}

#[test]
fn should_fail_for_unsupported_ops() {
    // An unknown operator does not even parse into the typed spec.
    let parsed = serde_json::from_value::<NodeOverlaySpec>(serde_json::json!({
        "requirements": [{"key": "topology.kubernetes.io/zone", "operator": "unknown", "values": ["test"]}],
    }));
    assert!(parsed.is_err());
}

#[test]
fn should_fail_for_restricted_domains() {
    for domain in ["karpenter.sh", "karpenter.k8s.aws", "sub.karpenter.sh"] {
        let key = format!("{domain}/test");
        let spec = with_requirements(
            serde_json::json!([{"key": key, "operator": "In", "values": ["test"]}]),
        );
        let errors = spec.validate().unwrap_err();
        assert!(
            errors.iter().any(|e| e.to_string().contains("restricted")),
            "{key}: {errors:?}"
        );
    }
}

#[test]
fn should_allow_kubernetes_domains_exceptions() {
    for domain in ["kubernetes.io", "k8s.io"] {
        let key = format!("{domain}/test");
        let spec = with_requirements(
            serde_json::json!([{"key": key, "operator": "In", "values": ["test"]}]),
        );
        assert!(valid(&spec), "{key}");
    }
}

#[test]
fn should_allow_kubernetes_subdomains_exceptions() {
    for domain in ["kubernetes.io", "k8s.io"] {
        let key = format!("subdomain.{domain}/test");
        let spec = with_requirements(
            serde_json::json!([{"key": key, "operator": "In", "values": ["test"]}]),
        );
        assert!(valid(&spec), "{key}");
    }
}

#[test]
fn should_allow_well_known_label_exceptions() {
    // Capacity type is validated against its known values, as in Karpenter.
    for key in crate::apis::labels::WELL_KNOWN_LABELS.iter().filter(|k| {
        **k != crate::apis::labels::NODE_POOL_LABEL_KEY
            && **k != crate::apis::labels::CAPACITY_TYPE_LABEL_KEY
            && crate::apis::labels::well_known_values(k).is_none()
    }) {
        let spec = with_requirements(
            serde_json::json!([{"key": key, "operator": "In", "values": ["test"]}]),
        );
        assert!(valid(&spec), "{key}: {:?}", spec.validate());
    }
}

#[test]
fn should_allow_non_empty_set_after_removing_overlapped_value() {
    assert!(valid(&with_requirements(serde_json::json!([
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test", "foo"]},
        {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["test", "bar"]},
    ]))));
}

#[test]
fn should_allow_empty_requirements() {
    assert!(valid(&with_requirements(
        serde_json::json!([{"key": "test", "operator": "Exists"}])
    )));
}

#[test]
fn should_fail_with_invalid_gt_or_lt_values() {
    for operator in ["Gt", "Lt"] {
        for values in [
            serde_json::json!([]),
            serde_json::json!(["1", "2"]),
            serde_json::json!(["a"]),
            serde_json::json!(["-1"]),
        ] {
            let spec = with_requirements(serde_json::json!([
                {"key": "topology.kubernetes.io/zone", "operator": operator, "values": values},
            ]));
            assert!(!valid(&spec), "{operator} {values}");
        }
    }
}

#[test]
fn should_fail_with_invalid_gte_or_lte_values() {
    for operator in ["Gte", "Lte"] {
        for values in [
            serde_json::json!([]),
            serde_json::json!(["1", "2"]),
            serde_json::json!(["a"]),
            serde_json::json!(["-1"]),
        ] {
            let spec = with_requirements(serde_json::json!([
                {"key": "topology.kubernetes.io/zone", "operator": operator, "values": values},
            ]));
            assert!(!valid(&spec), "{operator} {values}");
        }
    }
}

#[test]
fn shout_not_be_able_to_set_both_price_and_price_adjustment() {
    let mut spec = base();
    spec.price = Some("0.432".into());
    spec.price_adjustment = Some("+10%".into());
    let errors = spec.validate().unwrap_err();
    assert!(
        errors.iter().any(|e| e
            .to_string()
            .contains("cannot set both 'price' and 'priceAdjustment'")),
        "{errors:?}"
    );
}

/// Karpenter's `priceAdjustment` "Invalid Input" table sets `price`, not
/// `priceAdjustment` (so `-129` fails there as a price); here each entry
/// is checked as a price, and as an adjustment where the pattern says so.
#[test]
fn price_adjustment_invalid_input() {
    for text in [
        "+42",
        ".5",
        "42.",
        "42%",
        "3,14",
        "1e10",
        "0x42",
        "forty-two",
        "42a",
        "42 ",
        " 42",
        "42.0.0",
        "-",
        ".",
        "-100.0%",
        "-101.1%",
        "-129",
    ] {
        assert!(!price_ok(text), "price {text:?}");
    }
    for text in [
        "42.", "42%", "3,14", "1e10", "-", ".", "-100.0%", "-101.1%", "+", "+%",
    ] {
        assert!(!adjustment_ok(text), "priceAdjustment {text:?}");
    }
}

#[test]
fn should_not_allow_an_unsigned_price_adjustment_percentage() {
    assert!(!adjustment_ok("1%"));
}

#[test]
fn should_not_allow_an_unsigned_price_adjustment_integer() {
    assert!(!adjustment_ok("1"));
}

#[test]
fn should_not_allow_an_unsigned_price_adjustment_float() {
    assert!(!adjustment_ok("1.3"));
}

#[test]
fn should_allow_positive_percentage_value_for_price_adjustment_field() {
    assert!(adjustment_ok("+1%"));
    assert_eq!(
        parse_price_adjustment("+1%"),
        Some(PriceChange::Percent(1.0))
    );
}

#[test]
fn should_allow_negative_percentage_less_then_0_percent() {
    assert_eq!(
        parse_price_adjustment("-1%"),
        Some(PriceChange::Percent(-1.0))
    );
    assert!(adjustment_ok("-1%"));
}

#[test]
fn should_allow_negative_percentage_minus_100_percent() {
    assert!(adjustment_ok("-100%"));
    assert_eq!(PriceChange::Percent(-100.0).apply(0.5), 0.0);
}

#[test]
fn should_allow_positive_percentage_greater_then_100_percent() {
    assert!(adjustment_ok("+100.102%"));
}

#[test]
fn should_allow_positive_percentage_greater_then_100_percent_with_an_integer() {
    assert!(adjustment_ok("+298%"));
}

#[test]
fn should_allow_positive_integer_value() {
    assert_eq!(parse_price_adjustment("+43"), Some(PriceChange::Add(43.0)));
    assert!(adjustment_ok("+43"));
}

#[test]
fn should_allow_negative_integer_value() {
    assert_eq!(parse_price_adjustment("-43"), Some(PriceChange::Add(-43.0)));
    assert!(adjustment_ok("-43"));
}

#[test]
fn should_allow_positive_float_value() {
    assert!(adjustment_ok("+34.43"));
}

#[test]
fn should_allow_negative_float_value() {
    assert!(adjustment_ok("-34.43"));
    // Never below zero.
    assert_eq!(PriceChange::Add(-34.43).apply(1.0), 0.0);
}

#[test]
fn price_invalid_input() {
    for text in [
        "+42",
        ".5",
        "42.",
        "42%",
        "3,14",
        "1e10",
        "0x42",
        "forty-two",
        "42a",
        "42 ",
        " 42",
        "42.0.0",
        "-",
        ".",
        "-.42",
    ] {
        assert!(!price_ok(text), "price {text:?}");
        let mut spec = base();
        spec.price = Some(text.into());
        let errors = spec.validate().unwrap_err();
        assert!(errors[0].to_string().contains("spec.price"), "{errors:?}");
    }
}

#[test]
fn should_allow_integer_value() {
    assert!(price_ok("43"));
    assert_eq!(parse_price("43"), Some(43.0));
}

#[test]
fn should_allow_float_value() {
    assert!(price_ok("34.43"));
    let mut spec = base();
    spec.price = Some("34.43".into());
    assert_eq!(spec.parsed().unwrap().price, Some(PriceChange::Set(34.43)));
}

fn with_capacity(name: &str, quantity: &str) -> NodeOverlaySpec {
    let mut spec = base();
    spec.capacity = Some(BTreeMap::from([(
        name.to_string(),
        Quantity(quantity.into()),
    )]));
    spec
}

#[test]
fn should_allow_custom_resources() {
    let spec = with_capacity("smarter-devices/fuse", "1");
    assert_eq!(
        spec.parsed().unwrap().capacity,
        BTreeMap::from([("smarter-devices/fuse".to_string(), "1".to_string())])
    );
}

#[test]
fn should_not_allow_cpu_resources_override() {
    let errors = with_capacity("cpu", "1").validate().unwrap_err();
    assert!(
        errors[0].to_string().contains("spec.capacity[cpu]"),
        "{errors:?}"
    );
}

#[test]
fn should_not_allow_memory_resources_override() {
    assert!(!valid(&with_capacity("memory", "34Gi")));
}

#[test]
fn should_not_allow_pod_resources_override() {
    assert!(!valid(&with_capacity("pods", "324")));
}

#[test]
fn weight_out_of_range_names_the_field() {
    let mut spec = base();
    spec.weight = Some(0);
    let errors = spec.validate().unwrap_err();
    assert!(errors[0].to_string().contains("spec.weight"), "{errors:?}");
    spec.weight = None;
    assert_eq!(spec.parsed().unwrap().weight, 0);
}

#[test]
fn min_values_is_refused_with_the_fix() {
    let spec = with_requirements(serde_json::json!([
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"], "minValues": 1},
    ]));
    let errors = spec.validate().unwrap_err();
    assert!(
        errors[0].to_string().contains("minValues") && errors[0].to_string().contains("remove it"),
        "{errors:?}"
    );
}
