//! kubernetes-sigs/karpenter `pkg/apis/v1/nodepool_validation_cel_test.go`
//! ("CEL/Validation") and aws/karpenter-provider-aws
//! `pkg/apis/v1/nodepool_validation_cel_test.go`: the admission verdicts
//! (the `RuntimeValidate` halves are the controller's, not the CRD's).

use serde_json::{Value, json};

use super::{Case, set};

/// Karpenter's test NodePool as its typed client sends it: the unset
/// `NillableDuration`s go out as `Never`.
pub fn base() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {},
        "spec": {
            "template": {
                "metadata": {},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
                    "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "Exists"}],
                    "expireAfter": "Never",
                },
            },
            "disruption": {"consolidateAfter": "Never"},
        },
    })
}

fn with(pointer: &str, value: Value) -> Value {
    set(base(), pointer, value)
}

const EXPIRE: &str = "/spec/template/spec/expireAfter";
const CONSOLIDATE: &str = "/spec/disruption/consolidateAfter";
const POLICY: &str = "/spec/disruption/consolidationPolicy";
const BUDGETS: &str = "/spec/disruption/budgets";
const TAINTS: &str = "/spec/template/spec/taints";
pub const REQUIREMENTS: &str = "/spec/template/spec/requirements";
pub const LABELS: &str = "/spec/template/metadata/labels";
const GRACE: &str = "/spec/template/spec/terminationGracePeriod";
const REF: &str = "/spec/template/spec/nodeClassRef";

fn budgets(list: Value) -> Value {
    with(BUDGETS, list)
}

fn requirement(r: Value) -> Value {
    with(REQUIREMENTS, json!([r]))
}

fn taint(t: Value) -> Value {
    with(TAINTS, json!([t]))
}

fn static_pool(replicas: i64) -> Value {
    with("/spec/replicas", json!(replicas))
}

/// The core labels Karpenter knows (`WellKnownLabels`) and the AWS
/// provider's additions.
pub const CORE_WELL_KNOWN: [&str; 8] = [
    "karpenter.sh/nodepool",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "karpenter.sh/capacity-type",
    "node.kubernetes.io/windows-build",
];

/// `RestrictedLabelDomains` with the AWS provider's addition.
pub const RESTRICTED_DOMAINS: [&str; 2] = ["karpenter.sh", "karpenter.k8s.aws"];

/// A label key of 250+ characters in a valid shape (Karpenter uses random
/// alphanumerics; any will do).
pub fn long(prefix: &str, suffix: &str) -> String {
    format!("{prefix}{}{suffix}", "a1".repeat(125))
}

/// Malformed label keys, as Karpenter tries them.
pub const INVALID_KEYS: [&str; 5] = [
    "test.com.com}",
    "Test.com/test",
    "test/test/test",
    "test/",
    "/test",
];

fn disruption_cases() -> Vec<Case> {
    let mut cases = vec![
        Case::accept(
            "should succeed on a disabled expireAfter",
            with(EXPIRE, json!("Never")),
        ),
        Case::accept(
            "should succeed on a disabled consolidateAfter",
            with(CONSOLIDATE, json!("Never")),
        ),
    ];
    for (entry, value) in [
        ("single unit", "30s"),
        ("multiple units", "1h30m5s"),
        ("never", "Never"),
    ] {
        cases.push(Case::accept(
            format!("should succeed on a valid expireAfter / {entry}"),
            with(EXPIRE, json!(value)),
        ));
        cases.push(Case::accept(
            format!("should succeed on a valid consolidateAfter / {entry}"),
            with(CONSOLIDATE, json!(value)),
        ));
    }
    for (entry, value) in [
        ("negative", "-1s"),
        ("invalid unit", "1hr"),
        ("partial match", "FooNever"),
    ] {
        cases.push(Case::refuse(
            format!("should fail on an invalid expireAfter / {entry}"),
            with(EXPIRE, json!(value)),
        ));
        cases.push(Case::refuse(
            format!("should fail on an invalid consolidateAfter / {entry}"),
            with(CONSOLIDATE, json!(value)),
        ));
    }
    for (name, after, policy) in [
        (
            "should succeed when setting consolidateAfter with consolidationPolicy=WhenEmpty",
            "30s",
            "WhenEmpty",
        ),
        (
            "should succeed when setting consolidateAfter with consolidationPolicy=WhenUnderutilized",
            "30s",
            "WhenEmptyOrUnderutilized",
        ),
        (
            "should succeed when setting consolidateAfter to 'Never' with consolidationPolicy=WhenUnderutilized",
            "Never",
            "WhenEmptyOrUnderutilized",
        ),
        (
            "should succeed when setting consolidateAfter to 'Never' with consolidationPolicy=WhenEmpty",
            "Never",
            "WhenEmpty",
        ),
    ] {
        cases.push(Case::accept(
            name,
            set(with(CONSOLIDATE, json!(after)), POLICY, json!(policy)),
        ));
    }
    cases.push(
        Case::accept(
            "should default consolidateAfter to '0s' when omitted on a dynamic NodePool",
            with(CONSOLIDATE, Value::Null),
        )
        .defaulted(CONSOLIDATE, json!("0s")),
    );
    for policy in ["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"] {
        cases.push(Case::accept(
            format!("should succeed on a valid consolidationPolicy / {policy}"),
            with(POLICY, json!(policy)),
        ));
    }
    for (entry, policy) in [
        ("quoted 1", "1"),
        ("quoted 2", "2"),
        ("quoted 3", "3"),
        ("level 0", "0"),
        ("level 4", "4"),
        ("level 10", "10"),
        ("lowercase balanced", "balanced"),
        ("lowercase whenempty", "whenempty"),
        ("empty string", ""),
        ("WhenUnderutilized", "WhenUnderutilized"),
        ("arbitrary string", "foo"),
    ] {
        cases.push(Case::refuse(
            format!("should fail on an invalid consolidationPolicy / {entry}"),
            with(POLICY, json!(policy)),
        ));
    }
    let budget = |nodes: &str, schedule: Option<&str>, duration: Option<&str>| {
        let mut b = json!({"nodes": nodes});
        if let Some(s) = schedule {
            b["schedule"] = json!(s);
        }
        if let Some(d) = duration {
            b["duration"] = json!(d);
        }
        b
    };
    for (name, list, accept) in [
        (
            "should fail when creating a budget with an invalid cron",
            vec![budget("10", Some("*"), Some("20m0s"))],
            false,
        ),
        (
            "should fail when creating a schedule with less than 5 entries",
            vec![budget("10", Some("* * * * "), Some("20m0s"))],
            false,
        ),
        (
            "should fail when creating a budget with a negative duration",
            vec![budget("10", Some("* * * * *"), Some("-20m0s"))],
            false,
        ),
        (
            "should fail when creating a budget with a seconds duration",
            vec![budget("10", Some("* * * * *"), Some("30s"))],
            false,
        ),
        (
            "should fail when creating a budget with a negative value int",
            vec![budget("-10", None, None)],
            false,
        ),
        (
            "should fail when creating a budget with a negative value percent",
            vec![budget("-10%", None, None)],
            false,
        ),
        (
            "should fail when creating a budget with a value percent with more than 3 digits",
            vec![budget("1000%", None, None)],
            false,
        ),
        (
            "should fail when creating a budget with a cron but no duration",
            vec![budget("10", Some("* * * * *"), None)],
            false,
        ),
        (
            "should fail when creating a budget with a duration but no cron",
            vec![budget("10", None, Some("20m0s"))],
            false,
        ),
        (
            "should succeed when creating a budget with both duration and cron",
            vec![budget("10", Some("* * * * *"), Some("20m0s"))],
            true,
        ),
        (
            "should succeed when creating a budget with hours and minutes in duration",
            vec![budget("10", Some("* * * * *"), Some("2h20m0s"))],
            true,
        ),
        (
            "should succeed when creating a budget with neither duration nor cron",
            vec![budget("10", None, None)],
            true,
        ),
        (
            "should succeed when creating a budget with special cased crons",
            vec![budget("10", Some("@annually"), Some("20m0s"))],
            true,
        ),
        (
            "should fail when creating two budgets where one has an invalid crontab",
            vec![
                budget("10", Some("@annually"), Some("20m0s")),
                budget("10", Some("*"), Some("20m0s")),
            ],
            false,
        ),
        (
            "should fail when creating multiple budgets where one doesn't have both schedule and duration",
            vec![
                budget("10", None, Some("20m0s")),
                budget("10", Some("* * * * *"), Some("20m0s")),
                budget("10", None, None),
            ],
            false,
        ),
    ] {
        let object = budgets(Value::Array(list));
        cases.push(if accept {
            Case::accept(name, object)
        } else {
            Case::refuse(name, object)
        });
    }
    let with_reasons = |reasons: Value| {
        let mut b = budget("10", Some("* * * * *"), Some("20m0s"));
        b["reasons"] = reasons;
        budgets(json!([b]))
    };
    for (entry, reason) in [
        ("should allow disruption reason Drifted", "Drifted"),
        (
            "should allow disruption reason Underutilized",
            "Underutilized",
        ),
        ("should allow disruption reason Empty", "Empty"),
    ] {
        cases.push(Case::accept(
            format!("should succeed when creating a budget with valid reasons / {entry}"),
            with_reasons(json!([reason])),
        ));
    }
    for (entry, reason) in [
        ("should not allow invalid reason", "invalid"),
        ("should not allow expired disruption reason", "expired"),
        ("should not allow empty reason", ""),
    ] {
        cases.push(Case::refuse(
            format!("should fail when creating a budget with invalid reasons / {entry}"),
            with_reasons(json!([reason])),
        ));
    }
    cases.push(Case::accept(
        "should allow setting multiple reasons",
        with_reasons(json!(["Drifted", "Empty"])),
    ));
    cases
}

fn taint_cases() -> Vec<Case> {
    let mut cases = vec![Case::accept(
        "should succeed for valid taints",
        with(
            TAINTS,
            json!([
                {"key": "a", "value": "b", "effect": "NoSchedule"},
                {"key": "c", "value": "d", "effect": "NoExecute"},
                {"key": "e", "value": "f", "effect": "PreferNoSchedule"},
                {"key": "Test", "value": "f", "effect": "PreferNoSchedule"},
                {"key": "test.com/Test", "value": "f", "effect": "PreferNoSchedule"},
                {"key": "test.com.com/test", "value": "f", "effect": "PreferNoSchedule"},
                {"key": "key-only", "effect": "NoExecute"},
            ]),
        ),
    )];
    for key in INVALID_KEYS {
        cases.push(Case::refuse(
            format!("should fail for invalid taint keys / {key}"),
            taint(json!({"key": key, "effect": "NoSchedule"})),
        ));
    }
    for key in [
        long("test.com.test.", "/test"),
        long("test.com.test/test-", ""),
    ] {
        cases.push(Case::accept(
            format!("should fail at runtime for taint keys that are too long / {key}"),
            taint(json!({"key": key, "effect": "NoSchedule"})),
        ));
    }
    cases.extend([
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
    ]);
    cases
}

/// The Requirements cases shared by NodePool and NodeClaim: `object` puts a
/// requirement list in place.
pub fn requirement_cases(object: &dyn Fn(Value) -> Value) -> Vec<Case> {
    let one = |r: Value| object(json!([r]));
    let mut cases = vec![Case::accept(
        "should allow supported ops",
        object(json!([
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test"]},
            {"key": "topology.kubernetes.io/zone", "operator": "Gt", "values": ["1"]},
            {"key": "topology.kubernetes.io/zone", "operator": "Lt", "values": ["1"]},
            {"key": "topology.kubernetes.io/zone", "operator": "NotIn"},
            {"key": "topology.kubernetes.io/zone", "operator": "Exists"},
        ])),
    )];
    cases.push(Case::refuse(
        "should fail for unsupported ops / unknown",
        one(json!({"key": "topology.kubernetes.io/zone", "operator": "unknown", "values": ["test"]})),
    ));
    for domain in RESTRICTED_DOMAINS {
        cases.push(Case::refuse(
            format!("should fail for restricted domains / {domain}"),
            one(json!({"key": format!("{domain}/test"), "operator": "In", "values": ["test"]})),
        ));
    }
    cases.push(Case::refuse(
        "should fail for restricted labels / kubernetes.io/hostname",
        one(json!({"key": "kubernetes.io/hostname/test", "operator": "In", "values": ["test"]})),
    ));
    for domain in ["kubernetes.io", "k8s.io"] {
        cases.push(Case::accept(
            format!("should allow kubernetes domains / {domain}"),
            one(json!({"key": format!("{domain}/test"), "operator": "In", "values": ["test"]})),
        ));
    }
    cases.push(Case::accept(
        "should allow non-empty set after removing overlapped value",
        object(json!([
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test", "foo"]},
            {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["test", "bar"]},
        ])),
    ));
    cases.push(Case::accept(
        "should allow empty requirements",
        object(json!([])),
    ));
    for (it, ops) in [
        ("should fail with invalid GT or LT values", ["Gt", "Lt"]),
        ("should fail with invalid GTE or LTE values", ["Gte", "Lte"]),
    ] {
        for op in ops {
            for values in [json!([]), json!(["1", "2"]), json!(["a"]), json!(["-1"])] {
                let mut r = json!({"key": "topology.kubernetes.io/zone", "operator": op});
                if values.as_array().is_some_and(|v| !v.is_empty()) {
                    r["values"] = values.clone();
                }
                cases.push(Case::refuse(format!("{it} / {op} {values}"), one(r)));
            }
        }
    }
    let instance_type = "node.kubernetes.io/instance-type";
    for (name, min) in [
        ("should error when minValues is negative", -1),
        ("should error when minValues is zero", 0),
    ] {
        cases.push(Case::refuse(
            name,
            one(json!({"key": instance_type, "operator": "In", "values": ["insance-type-1"], "minValues": min})),
        ));
    }
    cases.push(Case::refuse(
        "should error when minValues is more than 50",
        one(json!({"key": instance_type, "operator": "Exists", "minValues": 51})),
    ));
    let ninety: Vec<String> = (0..90).map(|i| format!("instance{i}")).collect();
    cases.push(Case::accept(
        "should allow more than 50 values if minValues is not specified.",
        one(json!({"key": instance_type, "operator": "In", "values": ninety})),
    ));
    cases.push(Case::refuse(
        "should error when minValues is greater than the number of unique values specified within In operator",
        one(json!({"key": instance_type, "operator": "In", "values": ["insance-type-1"], "minValues": 2})),
    ));
    cases
}

fn requirements_cases() -> Vec<Case> {
    let mut cases = vec![Case::accept(
        "should succeed for valid requirement keys",
        with(
            REQUIREMENTS,
            json!([
                {"key": "Test", "operator": "Exists"},
                {"key": "test.com/Test", "operator": "Exists"},
                {"key": "test.com.com/test", "operator": "Exists"},
                {"key": "key-only", "operator": "Exists"},
            ]),
        ),
    )];
    for key in INVALID_KEYS {
        cases.push(Case::refuse(
            format!("should fail for invalid requirement keys / {key}"),
            requirement(json!({"key": key, "operator": "Exists"})),
        ));
    }
    for key in [
        long("test.com.test.", "/test"),
        long("test.com.test/test-", ""),
    ] {
        cases.push(Case::accept(
            format!("should fail at runtime for requirement keys that are too long / {key}"),
            requirement(json!({"key": key, "operator": "Exists"})),
        ));
    }
    cases.push(Case::refuse(
        "should fail for the karpenter.sh/nodepool label",
        requirement(json!({"key": "karpenter.sh/nodepool", "operator": "In", "values": ["silly"]})),
    ));
    cases.extend(requirement_cases(&|list| with(REQUIREMENTS, list)));
    for domain in ["kubernetes.io", "k8s.io"] {
        cases.push(Case::accept(
            format!("should allow kubernetes subdomains exceptions / {domain}"),
            requirement(json!({"key": format!("subdomain.{domain}/test"), "operator": "In", "values": ["test"]})),
        ));
    }
    // Core: WellKnownLabels without nodepool and capacity-type (runtime-validated).
    for label in CORE_WELL_KNOWN
        .into_iter()
        .filter(|l| !matches!(*l, "karpenter.sh/nodepool" | "karpenter.sh/capacity-type"))
    {
        cases.push(Case::accept(
            format!("should allow well known label exceptions / {label}"),
            requirement(json!({"key": label, "operator": "In", "values": ["test"]})),
        ));
    }
    cases
}

fn label_cases() -> Vec<Case> {
    let labels = |map: Value| with(LABELS, map);
    let mut cases = vec![
        Case::accept(
            "should allow unrecognized labels",
            labels(json!({"foo": "silly"})),
        ),
        Case::refuse(
            "should fail for the karpenter.sh/nodepool label",
            labels(json!({"karpenter.sh/nodepool": "silly"})),
        ),
        Case::accept(
            "should fail for invalid label keys",
            labels(json!({"spaces are not allowed": "silly"})),
        ),
    ];
    for key in [
        long("test.com.test.", "/test"),
        long("test.com.test/test-", ""),
    ] {
        cases.push(Case::accept(
            format!("should fail at runtime for label keys that are too long / {key}"),
            labels(json!({key: "silly"})),
        ));
    }
    cases.push(Case::refuse(
        "should fail for invalid label values",
        labels(json!({"silly": "/ is not allowed"})),
    ));
    for domain in RESTRICTED_DOMAINS {
        cases.push(Case::refuse(
            format!("should fail for restricted label domains / {domain}"),
            labels(json!({format!("{domain}/unknown"): "silly"})),
        ));
    }
    cases.push(Case::accept(
        "should allow labels kOps require",
        labels(json!({"kops.k8s.io/instancegroup": "karpenter-nodes", "kops.k8s.io/gpu": "1"})),
    ));
    for domain in ["kubernetes.io", "k8s.io"] {
        for (it, key) in [
            (
                "should allow labels in kubernetes domains",
                domain.to_string(),
            ),
            (
                "should allow labels prefixed with the kubernetes domain",
                format!("{domain}/key"),
            ),
            (
                "should allow subdomain labels in restricted domains exceptions list",
                format!("subdomain.{domain}"),
            ),
            (
                "should allow subdomain labels prefixed with the kubernetes domain",
                format!("subdomain.{domain}/key"),
            ),
        ] {
            cases.push(Case::accept(
                format!("{it} / {domain}"),
                labels(json!({key: "test-value"})),
            ));
        }
    }
    cases
}

fn grace_and_ref_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (entry, value) in [("single unit", "30s"), ("multiple units", "1h30m5s")] {
        cases.push(Case::accept(
            format!("should succeed on a valid terminationGracePeriod / {entry}"),
            with(GRACE, json!(value)),
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
            with(GRACE, json!(value)),
        ));
    }
    // Karpenter's two mutation cases call Create twice (AlreadyExists); the
    // update they mean is what is checked here.
    cases.push(
        Case::refuse(
            "should fail to mutate group",
            with(&format!("{REF}/group"), json!("karpenter.test.mutated.sh")),
        )
        .updating(base()),
    );
    cases.push(
        Case::refuse(
            "should fail to mutate kind",
            with(&format!("{REF}/group"), json!("TestNodeClass2")),
        )
        .updating(base()),
    );
    for field in ["group", "kind", "name"] {
        cases.push(Case::refuse(
            format!("should fail if {field} is unset"),
            with(&format!("{REF}/{field}"), json!("")),
        ));
    }
    cases
}

fn replicas_cases() -> Vec<Case> {
    let mut cases = vec![
        Case::accept(
            "should succeed when replicas is set to a positive value",
            static_pool(5),
        ),
        Case::accept(
            "should succeed when replicas is set to zero",
            static_pool(0),
        ),
        Case::accept(
            "should succeed when replicas is set to a large value",
            static_pool(1000),
        ),
        Case::refuse(
            "should fail when replicas is set to a negative value",
            static_pool(-100),
        ),
    ];
    let ten = || static_pool(10);
    for (entry, pointer, value) in [
        ("limits.cpu", "/spec/limits", json!({"cpu": "1k"})),
        ("limits.memory", "/spec/limits", json!({"memory": "2000Gi"})),
        ("limits.pods", "/spec/limits", json!({"pods": "10"})),
        (
            "limits.ephemeral-storage",
            "/spec/limits",
            json!({"ephemeral-storage": "10Gi"}),
        ),
        ("weight", "/spec/weight", json!(25)),
    ] {
        cases.push(Case::refuse(
            format!("should fail for incompatible fields / {entry}"),
            set(ten(), pointer, value),
        ));
    }
    for (entry, pointer, value) in [
        ("limits.nodes", "/spec/limits", json!({"nodes": "100"})),
        (
            "disruption with multiple budgets",
            "/spec/disruption",
            json!({
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "5m0s",
                "budgets": [
                    {"nodes": "20%", "schedule": "0 9 * * mon-fri", "duration": "8h0m0s", "reasons": ["Drifted", "Empty"]},
                    {"nodes": "30%", "schedule": "0 22 * * sat,sun", "duration": "4h0m0s", "reasons": ["Underutilized"]},
                    {"nodes": "5"},
                ],
            }),
        ),
        (
            "template labels",
            LABELS,
            json!({"environment": "production"}),
        ),
        (
            "template annotations",
            "/spec/template/metadata/annotations",
            json!({"example.com/last-updated": "2024-01-01"}),
        ),
        (
            "taints",
            TAINTS,
            json!([{"key": "gpu-workload", "value": "enabled", "effect": "NoSchedule"}]),
        ),
        (
            "startup taints",
            "/spec/template/spec/startupTaints",
            json!([{"key": "example.com/initializing", "value": "true", "effect": "NoSchedule"}]),
        ),
        (
            "requirements",
            REQUIREMENTS,
            json!([
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge", "m5.2xlarge", "c5.large", "c5.xlarge", "r5.large", "r5.xlarge"], "minValues": 3},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a", "us-west-2b", "us-west-2c"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                {"key": "karpenter.k8s.aws/instance-memory", "operator": "Gt", "values": ["8192"]},
                {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["64"]},
            ]),
        ),
        ("expireAfter", EXPIRE, json!("72h0m0s")),
        ("terminationGracePeriod", GRACE, json!("5m0s")),
    ] {
        cases.push(Case::accept(
            format!("should succeed for compatible fields / {entry}"),
            set(ten(), pointer, value),
        ));
    }
    cases.push(Case::accept(
        "should succeed when consolidateAfter is omitted on a static NodePool",
        set(static_pool(3), CONSOLIDATE, Value::Null),
    ));
    cases.push(
        Case::accept(
            "should succeed when increasing replicas in a NodePool",
            static_pool(5),
        )
        .updating(static_pool(3)),
    );
    cases.push(
        Case::refuse(
            "should fail when changing the NodePool from static to dynamic",
            base(),
        )
        .updating(static_pool(3)),
    );
    cases.push(
        Case::refuse(
            "should fail when changing the NodePool from dynamic to static",
            static_pool(3),
        )
        .updating(base()),
    );
    let limited = |n: &str| set(static_pool(3), "/spec/limits", json!({"nodes": n}));
    cases.push(
        Case::accept(
            "should succeed when changing the static NodePool nodes limit",
            limited("100"),
        )
        .updating(limited("10")),
    );
    cases
}

/// Every ported NodePool case.
pub fn cases() -> Vec<Case> {
    let mut cases = disruption_cases();
    cases.extend(taint_cases());
    cases.extend(requirements_cases());
    cases.extend(label_cases());
    cases.extend(grace_and_ref_cases());
    cases.extend(replicas_cases());
    cases.extend(super::nodepool_aws::cases());
    // Defaulting (Karpenter's CRD defaults, no `It` of their own).
    cases.push(
        Case::accept(
            "(defaults) disruption and expireAfter",
            set(with("/spec/disruption", Value::Null), EXPIRE, Value::Null),
        )
        .defaulted(
            "/spec/disruption",
            json!({"consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "10%"}]}),
        )
        .defaulted(EXPIRE, json!("720h")),
    );
    cases.push(
        Case::accept(
            "(defaults) a budget without nodes gets 10%",
            with(BUDGETS, json!([{"reasons": ["Empty"]}])),
        )
        .defaulted(BUDGETS, json!([{"nodes": "10%", "reasons": ["Empty"]}])),
    );
    for case in &mut cases {
        case.name = format!("NodePool: {}", case.name);
    }
    cases
}
