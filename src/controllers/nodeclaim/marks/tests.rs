//! Karpenter's NodeClaim disruption tests (`consolidation_test.go`,
//! `drift_test.go`) and expiration tests, case by case where they apply to
//! the marks themselves; writing the conditions is tested with the
//! controller.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::*;
use crate::scheduling::{CapacityType, Offering, Overhead, Resources};

const INITIALIZED_AT: &str = "2026-01-01T00:00:00Z";

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn pool(spec_extra: Value, annotations: Value) -> NodePool {
    let mut value = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default", "annotations": annotations},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []
        }}}
    });
    if let Value::Object(extra) = spec_extra {
        for (k, v) in extra {
            value["spec"][k] = v;
        }
    }
    serde_json::from_value(value).unwrap()
}

fn with_consolidate_after(after: &str) -> NodePool {
    pool(
        json!({"disruption": {"consolidateAfter": after}}),
        json!({}),
    )
}

fn claim(labels: Value, annotations: Value, status: Value) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-a", "labels": labels, "annotations": annotations,
                     "creationTimestamp": INITIALIZED_AT},
        "spec": {"requirements": [], "expireAfter": "720h",
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        "status": status
    }))
    .unwrap()
}

fn initialized(status: &str, last_pod_event: Option<&str>) -> NodeClaim {
    let mut s = json!({"conditions": [{"type": "Initialized", "status": status,
                                        "lastTransitionTime": INITIALIZED_AT}]});
    if let Some(t) = last_pod_event {
        s["lastPodEventTime"] = json!(t);
    }
    claim(json!({}), json!({}), s)
}

#[test]
fn marks_nodeclaims_consolidatable() {
    let pool = with_consolidate_after("30s");
    let claim = initialized("True", Some("2026-01-01T00:10:00Z"));
    assert_eq!(
        consolidatable(&pool, &claim, at("2026-01-01T00:10:30Z")).unwrap(),
        Consolidatable::Yes
    );
}

#[test]
fn marks_consolidatable_from_the_initialized_time_without_pod_events() {
    let pool = with_consolidate_after("1m");
    let claim = initialized("True", None);
    assert_eq!(
        consolidatable(&pool, &claim, at("2026-01-01T00:00:59Z")).unwrap(),
        Consolidatable::Waiting {
            until: at("2026-01-01T00:01:00Z")
        }
    );
    assert_eq!(
        consolidatable(&pool, &claim, at("2026-01-01T00:01:00Z")).unwrap(),
        Consolidatable::Yes
    );
}

#[test]
fn is_not_consolidatable_while_the_last_pod_event_is_too_recent() {
    let pool = with_consolidate_after("5m");
    let claim = initialized("True", Some("2026-01-01T01:00:00Z"));
    assert_eq!(
        consolidatable(&pool, &claim, at("2026-01-01T01:04:00Z")).unwrap(),
        Consolidatable::Waiting {
            until: at("2026-01-01T01:05:00Z")
        }
    );
}

#[test]
fn is_not_consolidatable_when_consolidate_after_is_never() {
    let pool = with_consolidate_after("Never");
    let claim = initialized("True", None);
    assert_eq!(
        consolidatable(&pool, &claim, at("2027-01-01T00:00:00Z")).unwrap(),
        Consolidatable::Disabled
    );
}

#[test]
fn is_not_consolidatable_when_initialization_is_unknown_or_false() {
    let pool = with_consolidate_after("0s");
    for status in ["Unknown", "False"] {
        let claim = initialized(status, None);
        assert_eq!(
            consolidatable(&pool, &claim, at("2027-01-01T00:00:00Z")).unwrap(),
            Consolidatable::NotInitialized,
            "{status}"
        );
    }
    let bare = claim(json!({}), json!({}), json!({}));
    assert_eq!(
        consolidatable(&pool, &bare, at("2027-01-01T00:00:00Z")).unwrap(),
        Consolidatable::NotInitialized
    );
}

#[test]
fn the_default_consolidate_after_is_zero() {
    let pool = pool(json!({}), json!({}));
    let claim = initialized("True", Some("2026-01-01T00:10:00Z"));
    assert_eq!(
        consolidatable(&pool, &claim, at("2026-01-01T00:10:00Z")).unwrap(),
        Consolidatable::Yes
    );
}

fn hashed(hash: &str, version: &str) -> Value {
    json!({"karpenter.sh/nodepool-hash": hash, "karpenter.sh/nodepool-hash-version": version})
}

#[test]
fn static_drift_compares_hashes_of_the_same_version() {
    let np = pool(json!({}), hashed("111", "nw1"));
    let same = claim(json!({}), hashed("111", "nw1"), json!({}));
    assert_eq!(node_pool_drift(&np, &same), None);
    let other = claim(json!({}), hashed("222", "nw1"), json!({}));
    assert_eq!(
        node_pool_drift(&np, &other),
        Some(DriftReason::NodePoolDrifted)
    );
}

#[test]
fn no_static_drift_without_a_hash_on_the_nodepool() {
    let np = pool(json!({}), json!({}));
    let c = claim(json!({}), hashed("222", "nw1"), json!({}));
    assert_eq!(node_pool_drift(&np, &c), None);
}

#[test]
fn no_static_drift_without_a_hash_on_the_nodeclaim() {
    let np = pool(json!({}), hashed("111", "nw1"));
    let c = claim(
        json!({}),
        json!({"karpenter.sh/nodepool-hash-version": "nw1"}),
        json!({}),
    );
    assert_eq!(node_pool_drift(&np, &c), None);
}

#[test]
fn no_static_drift_when_the_hash_versions_differ() {
    let np = pool(json!({}), hashed("111", "nw1"));
    let karpenters = claim(json!({}), hashed("222", "v3"), json!({}));
    assert_eq!(node_pool_drift(&np, &karpenters), None);
}

#[test]
fn no_static_drift_without_a_hash_version_on_the_nodeclaim() {
    let np = pool(json!({}), hashed("111", "nw1"));
    let c = claim(
        json!({}),
        json!({"karpenter.sh/nodepool-hash": "222"}),
        json!({}),
    );
    assert_eq!(node_pool_drift(&np, &c), None);
}

fn requirement(key: &str, op: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": op, "values": values})
}

fn requirements_drifted(new: Vec<Value>, labels: Value) -> bool {
    let mut np = pool(json!({}), json!({}));
    np.spec.template.spec.requirements = serde_json::from_value(Value::Array(new)).unwrap();
    let c = claim(labels, json!({}), json!({}));
    requirements_drift(&np, &c).unwrap() == Some(DriftReason::RequirementsDrifted)
}

const CT: &str = "karpenter.sh/capacity-type";
const ARCH: &str = "kubernetes.io/arch";
const OS: &str = "kubernetes.io/os";

#[test]
fn drifts_when_a_requirement_is_updated() {
    assert!(requirements_drifted(
        vec![requirement(CT, "In", &["spot"])],
        json!({CT: "on-demand", ARCH: "amd64", OS: "linux"})
    ));
}

#[test]
fn drifts_when_a_requirement_is_added() {
    assert!(requirements_drifted(
        vec![
            requirement(CT, "In", &["on-demand"]),
            requirement(OS, "In", &["linux"]),
            requirement(ARCH, "In", &["amd64"]),
        ],
        json!({CT: "on-demand", OS: "linux"})
    ));
}

#[test]
fn drifts_when_a_requirement_is_reduced() {
    assert!(requirements_drifted(
        vec![
            requirement(CT, "In", &["on-demand"]),
            requirement(OS, "In", &["windows"])
        ],
        json!({CT: "on-demand", OS: "linux"})
    ));
}

#[test]
fn does_not_drift_when_a_requirement_is_expanded() {
    assert!(!requirements_drifted(
        vec![
            requirement(CT, "In", &["on-demand"]),
            requirement(OS, "In", &["linux", "windows"]),
        ],
        json!({CT: "on-demand", OS: "linux"})
    ));
}

#[test]
fn does_not_drift_when_a_requirement_becomes_exists() {
    assert!(!requirements_drifted(
        vec![
            requirement(CT, "In", &["on-demand"]),
            requirement(OS, "Exists", &[])
        ],
        json!({CT: "on-demand", OS: "linux"})
    ));
}

#[test]
fn drifts_when_a_requirement_becomes_does_not_exist() {
    assert!(requirements_drifted(
        vec![
            requirement(CT, "In", &["on-demand"]),
            requirement(OS, "DoesNotExist", &[])
        ],
        json!({CT: "on-demand", OS: "linux"})
    ));
}

#[test]
fn drifts_when_the_label_is_no_longer_greater_or_less_than_required() {
    assert!(requirements_drifted(
        vec![
            requirement(CT, "In", &["on-demand"]),
            requirement("test-label", "Gt", &["10"])
        ],
        json!({CT: "on-demand", "test-label": "5"})
    ));
    assert!(requirements_drifted(
        vec![
            requirement(CT, "In", &["on-demand"]),
            requirement("test-label", "Lt", &["1"])
        ],
        json!({CT: "on-demand", "test-label": "2"})
    ));
    assert!(!requirements_drifted(
        vec![requirement("test-label", "Gt", &["2"])],
        json!({"test-label": "5"})
    ));
}

fn instance_type(offerings: Vec<Offering>) -> InstanceType {
    InstanceType::new(
        "m5.large",
        Requirements::new(),
        offerings,
        Resources::parse([("cpu", "2"), ("memory", "8Gi"), ("pods", "29")]).unwrap(),
        Overhead::default(),
    )
}

fn launched(instance_type: Option<&str>, zone: &str, capacity: &str) -> NodeClaim {
    let mut labels = json!({"topology.kubernetes.io/zone": zone, CT: capacity});
    if let Some(name) = instance_type {
        labels["node.kubernetes.io/instance-type"] = json!(name);
    }
    claim(labels, json!({}), json!({}))
}

#[test]
fn drifts_when_the_instance_type_label_is_missing() {
    let types = vec![instance_type(vec![Offering::new(
        "us-east-1a",
        CapacityType::OnDemand,
        0.1,
    )])];
    assert_eq!(
        instance_type_drift(&types, &launched(None, "us-east-1a", "on-demand")),
        Some(DriftReason::InstanceTypeNotFound)
    );
}

#[test]
fn drifts_when_the_instance_type_is_gone() {
    assert_eq!(
        instance_type_drift(&[], &launched(Some("m5.large"), "us-east-1a", "on-demand")),
        Some(DriftReason::InstanceTypeNotFound)
    );
}

#[test]
fn drifts_when_the_instance_type_has_no_offerings() {
    let types = vec![instance_type(Vec::new())];
    assert_eq!(
        instance_type_drift(
            &types,
            &launched(Some("m5.large"), "us-east-1a", "on-demand")
        ),
        Some(DriftReason::InstanceTypeNotFound)
    );
}

#[test]
fn drifts_when_no_offering_matches_the_zone_and_capacity_type() {
    let types = vec![instance_type(vec![
        Offering::new("us-east-1b", CapacityType::OnDemand, 0.1),
        Offering::new("us-east-1a", CapacityType::Spot, 0.03),
    ])];
    let c = launched(Some("m5.large"), "us-east-1a", "on-demand");
    assert_eq!(
        instance_type_drift(&types, &c),
        Some(DriftReason::InstanceTypeNotFound)
    );
    let spot = launched(Some("m5.large"), "us-east-1a", "spot");
    assert_eq!(instance_type_drift(&types, &spot), None);
}

#[test]
fn a_reserved_claim_matches_reserved_or_on_demand_offerings_but_not_spot() {
    let reserved = Offering::reserved("us-east-1a", 0.0, "cr-1", 1);
    let on_demand = Offering::new("us-east-1a", CapacityType::OnDemand, 0.1);
    let spot = Offering::new("us-east-1a", CapacityType::Spot, 0.03);
    let c = launched(Some("m5.large"), "us-east-1a", "reserved");
    for (offerings, drifted) in [
        (vec![reserved.clone(), on_demand.clone()], false),
        (vec![reserved], false),
        (vec![on_demand], false),
        (vec![spot], true),
        (vec![], true),
    ] {
        let types = vec![instance_type(offerings.clone())];
        assert_eq!(
            instance_type_drift(&types, &c).is_some(),
            drifted,
            "{offerings:?}"
        );
    }
}

#[test]
fn expiry_is_creation_plus_expire_after() {
    let c = initialized("True", None);
    assert_eq!(
        expires_at(&c).unwrap(),
        Some(at(INITIALIZED_AT) + SignedDuration::from_hours(720))
    );
}

#[test]
fn expiry_is_disabled_by_never_or_absence() {
    let mut c = initialized("True", None);
    c.spec.expire_after = Some(crate::apis::duration::NillableDuration::never());
    assert_eq!(expires_at(&c).unwrap(), None);
    c.spec.expire_after = None;
    assert_eq!(expires_at(&c).unwrap(), None);
}
