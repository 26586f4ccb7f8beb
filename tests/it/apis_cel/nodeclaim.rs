//! kubernetes-sigs/karpenter `pkg/apis/v1/nodeclaim_validation_cel_test.go`
//! ("Validation").

use serde_json::{Value, json};

use super::nodepool::{CORE_WELL_KNOWN, requirement_cases};
use super::{Case, set};

/// Karpenter's test NodeClaim as its typed client sends it.
fn base() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {},
        "spec": {
            "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClaim", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "Exists"}],
            "expireAfter": "Never",
        },
    })
}

fn with(pointer: &str, value: Value) -> Value {
    set(base(), pointer, value)
}

const TAINTS: &str = "/spec/taints";
const REQUIREMENTS: &str = "/spec/requirements";

fn taint(t: Value) -> Value {
    with(TAINTS, json!([t]))
}

fn requirement(r: Value) -> Value {
    with(REQUIREMENTS, json!([r]))
}

/// Every ported NodeClaim case.
pub fn cases() -> Vec<Case> {
    let mut cases = vec![
        Case::accept(
            "should succeed for valid taints",
            with(
                TAINTS,
                json!([
                    {"key": "a", "value": "b", "effect": "NoSchedule"},
                    {"key": "c", "value": "d", "effect": "NoExecute"},
                    {"key": "e", "value": "f", "effect": "PreferNoSchedule"},
                    {"key": "key-only", "effect": "NoExecute"},
                ]),
            ),
        ),
        Case::refuse(
            "should fail for invalid taint keys",
            taint(json!({"key": "???", "effect": ""})),
        ),
        Case::refuse(
            "should fail for missing taint key",
            taint(json!({"key": "", "effect": "NoSchedule"})),
        ),
        Case::refuse(
            "should fail for invalid taint value",
            taint(json!({"key": "invalid-value", "effect": "NoSchedule", "value": "???"})),
        ),
        Case::refuse(
            "should fail for invalid taint effect",
            taint(json!({"key": "invalid-effect", "effect": "???"})),
        ),
        Case::accept(
            "should not fail for same key with different effects",
            with(
                TAINTS,
                json!([{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}]),
            ),
        ),
        Case::accept(
            "should succeed for valid group",
            with(
                "/spec/nodeClassRef",
                json!({"kind": "TestNodeClass", "name": "nodeclass-test", "group": "karpenter.test.sh"}),
            ),
        ),
        Case::refuse(
            "should fail for invalid group",
            with(
                "/spec/nodeClassRef",
                json!({"kind": "TestNodeClass", "name": "nodeclass-test", "group": "karpenter.test.sh/v1"}),
            ),
        ),
    ];
    cases.extend(requirement_cases(&|list| with(REQUIREMENTS, list)));
    for domain in ["kubernetes.io", "k8s.io"] {
        cases.push(Case::accept(
            format!("should allow kubernetes subdomains / {domain}"),
            requirement(json!({"key": format!("subdomain.{domain}/test"), "operator": "In", "values": ["test"]})),
        ));
    }
    for label in CORE_WELL_KNOWN
        .into_iter()
        .filter(|l| *l != "karpenter.sh/nodepool")
    {
        cases.push(Case::accept(
            format!("should allow well known label exceptions / {label}"),
            requirement(json!({"key": label, "operator": "In", "values": ["test"]})),
        ));
    }
    let many: Vec<Value> = (0..101)
        .map(|i| json!({"key": format!("key-{i}"), "operator": "In", "values": [format!("value-{i}")]}))
        .collect();
    cases.push(Case::refuse(
        "should error when requirements is greater than 100",
        with(REQUIREMENTS, Value::Array(many)),
    ));
    for (entry, value) in [("single unit", "30s"), ("multiple units", "1h30m5s")] {
        cases.push(Case::accept(
            format!("should succeed on a valid terminationGracePeriod / {entry}"),
            with("/spec/terminationGracePeriod", json!(value)),
        ));
    }
    for (entry, value) in [
        ("negative", "-1s"),
        ("invalid unit", "1hr"),
        ("never", "Never"),
        ("partial match", "FooNever"),
    ] {
        cases.push(Case::refuse(
            format!("should fail on an invalid terminationGracePeriod / {entry}"),
            with("/spec/terminationGracePeriod", json!(value)),
        ));
    }
    for (entry, value) in [
        ("single unit", "30s"),
        ("multiple units", "1h30m5s"),
        ("never", "Never"),
    ] {
        cases.push(Case::accept(
            format!("should succeed on a valid expireAfter / {entry}"),
            with("/spec/expireAfter", json!(value)),
        ));
    }
    for (entry, value) in [
        ("negative", "-1s"),
        ("invalid unit", "1hr"),
        ("partial match", "FooNever"),
    ] {
        cases.push(Case::refuse(
            format!("should fail on an invalid expireAfter / {entry}"),
            with("/spec/expireAfter", json!(value)),
        ));
    }
    // Defaulting (Karpenter's CRD default, no `It` of its own).
    cases.push(
        Case::accept(
            "(defaults) expireAfter defaults to 720h",
            with("/spec/expireAfter", Value::Null),
        )
        .defaulted("/spec/expireAfter", json!("720h")),
    );
    for case in &mut cases {
        case.name = format!("NodeClaim: {}", case.name);
    }
    cases
}
