//! The NodeOverlay CRD's schema and CEL rules: the `env.Client.Create`
//! half of Karpenter's `nodeoverlay_validation_test.go`, by `It` text,
//! checked with the validator the API server double uses. (The Rust-side
//! half is in `src/apis/nodeoverlay_tests.rs`.)

use super::*;

fn overlay(spec: Value) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "test"},
        "spec": spec,
    })
}

fn base(extra: Value) -> Value {
    let mut spec =
        json!({"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "Exists"}]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    overlay(spec)
}

fn with_requirements(requirements: Value) -> Value {
    overlay(json!({ "requirements": requirements }))
}

fn errors(document: &Value) -> Vec<String> {
    validator::validate(&schema_for("NodeOverlay"), document, None)
}

#[track_caller]
fn accepted(document: &Value) {
    let errors = errors(document);
    assert!(errors.is_empty(), "{document}: {errors:#?}");
}

#[track_caller]
fn refused(document: &Value, message: &str) {
    let errors = errors(document);
    assert!(
        errors.iter().any(|e| e.contains(message)),
        "{document}: expected an error containing {message:?}, got {errors:#?}"
    );
}

#[test]
fn should_fail_for_no_values_for_in_and_not_in_operators() {
    for operator in ["In", "NotIn"] {
        // Without `values` the rule cannot be evaluated (as on kube-apiserver):
        // refused either way.
        refused(
            &with_requirements(json!([{"key": "Test", "operator": operator}])),
            "spec.requirements",
        );
        refused(
            &with_requirements(json!([{"key": "Test", "operator": operator, "values": []}])),
            &format!("requirements with operator '{operator}' must have a value defined"),
        );
    }
}

#[test]
fn should_succeed_for_valid_requirement_keys() {
    accepted(&with_requirements(json!([
        {"key": "Test", "operator": "Exists"},
        {"key": "test.com/Test", "operator": "Exists"},
        {"key": "test.com.com/test", "operator": "Exists"},
        {"key": "key-only", "operator": "Exists"},
    ])));
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
        refused(
            &with_requirements(json!([{"key": key, "operator": "Exists"}])),
            "requirements[0].key",
        );
    }
}

#[test]
fn should_allow_for_the_karpenter_sh_nodepool_label() {
    accepted(&with_requirements(
        json!([{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["a-pool"]}]),
    ));
}

#[test]
fn should_allow_supported_ops_and_fail_for_unsupported_ops() {
    accepted(&with_requirements(json!([
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test"]},
        {"key": "topology.kubernetes.io/zone", "operator": "Gt", "values": ["1"]},
        {"key": "topology.kubernetes.io/zone", "operator": "Lt", "values": ["1"]},
        {"key": "topology.kubernetes.io/zone", "operator": "Gte", "values": ["1"]},
        {"key": "topology.kubernetes.io/zone", "operator": "Lte", "values": ["1"]},
        {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["1"]},
        {"key": "topology.kubernetes.io/zone", "operator": "Exists"},
    ])));
    refused(
        &with_requirements(
            json!([{"key": "topology.kubernetes.io/zone", "operator": "unknown", "values": ["test"]}]),
        ),
        "requirements[0].operator",
    );
}

#[test]
fn should_fail_for_restricted_domains() {
    refused(
        &with_requirements(
            json!([{"key": "karpenter.sh/test", "operator": "In", "values": ["test"]}]),
        ),
        "label domain \"karpenter.sh\" is restricted",
    );
    refused(
        &with_requirements(
            json!([{"key": "kubernetes.io/hostname", "operator": "In", "values": ["test"]}]),
        ),
        "label \"kubernetes.io/hostname\" is restricted",
    );
}

#[test]
fn should_allow_kubernetes_domains_and_subdomains_exceptions() {
    for key in [
        "kubernetes.io/test",
        "k8s.io/test",
        "subdomain.kubernetes.io/test",
        "subdomain.k8s.io/test",
    ] {
        accepted(&with_requirements(
            json!([{"key": key, "operator": "In", "values": ["test"]}]),
        ));
    }
}

#[test]
fn should_fail_with_invalid_gt_lt_gte_or_lte_values() {
    for operator in ["Gt", "Lt", "Gte", "Lte"] {
        for values in [json!(["1", "2"]), json!(["-1"])] {
            refused(
                &with_requirements(json!([
                    {"key": "topology.kubernetes.io/zone", "operator": operator, "values": values},
                ])),
                "must have a single positive integer value",
            );
        }
    }
}

#[test]
fn shout_not_be_able_to_set_both_price_and_price_adjustment() {
    refused(
        &base(json!({"price": "0.432", "priceAdjustment": "+10%"})),
        "cannot set both 'price' and 'priceAdjustment'",
    );
}

#[test]
fn price_and_price_adjustment_patterns() {
    for price in [
        "+42",
        ".5",
        "42.",
        "42%",
        "3,14",
        "1e10",
        "0x42",
        "forty-two",
        "-.42",
    ] {
        refused(&base(json!({"price": price})), "spec.price");
    }
    for price in ["43", "34.43"] {
        accepted(&base(json!({"price": price})));
    }
    for adjustment in ["1%", "1", "1.3", "-100.0%", "-101.1%"] {
        refused(
            &base(json!({"priceAdjustment": adjustment})),
            "spec.priceAdjustment",
        );
    }
    for adjustment in [
        "+1%",
        "-1%",
        "-100%",
        "+100.102%",
        "+298%",
        "+43",
        "-43",
        "+34.43",
        "-34.43",
    ] {
        accepted(&base(json!({"priceAdjustment": adjustment})));
    }
}

#[test]
fn capacity_allows_custom_resources_only() {
    accepted(&base(json!({"capacity": {"smarter-devices/fuse": "1"}})));
    for resource in ["cpu", "memory", "pods", "ephemeral-storage"] {
        refused(
            &base(json!({"capacity": {resource: "1"}})),
            "invalid resource restricted",
        );
    }
}

#[test]
fn weight_is_bounded() {
    accepted(&base(json!({"weight": 10000})));
    refused(&base(json!({"weight": 0})), "spec.weight");
    refused(&base(json!({"weight": 10001})), "spec.weight");
}
