//! The Kubelet context of aws/karpenter-provider-aws
//! `ec2nodeclass_validation_cel_test.go` at v1.14.1: the typed
//! `spec.kubelet` schema nodewright's CRD keeps.

use serde_json::{Value, json};

use super::Case;
use super::ec2nodeclass::with;

/// The Kubelet context of v1.14.1 (typed `spec.kubelet`).
pub fn cases() -> Vec<Case> {
    let kubelet = |k: Value| with("/spec/kubelet", k);
    let signals = json!({
        "memory.available": "5%", "nodefs.available": "10%", "nodefs.inodesFree": "15%",
        "imagefs.available": "5%", "imagefs.inodesFree": "5%", "pid.available": "5%",
    });
    let periods = json!({
        "memory.available": "1m0s", "nodefs.available": "1m30s", "nodefs.inodesFree": "5m0s",
        "imagefs.available": "1h0m0s", "imagefs.inodesFree": "24h0m0s", "pid.available": "1m0s",
    });
    let mut cases = vec![
        Case::refuse(
            "should fail on kubeReserved with invalid keys",
            kubelet(json!({"kubeReserved": {"pods": "2"}})),
        ),
        Case::refuse(
            "should fail on systemReserved with invalid keys",
            kubelet(json!({"systemReserved": {"pods": "2"}})),
        ),
        Case::accept(
            "should succeed on evictionHard with valid keys",
            kubelet(json!({"evictionHard": signals})),
        ),
    ];
    for (name, value) in [
        (
            "should fail on evictionHard with invalid keys",
            json!({"memory": "5%"}),
        ),
        (
            "should fail on invalid formatted percentage value in evictionHard",
            json!({"memory.available": "5%3"}),
        ),
        (
            "should fail on invalid percentage value (too large) in evictionHard",
            json!({"memory.available": "110%"}),
        ),
        (
            "should fail on invalid quantity value in evictionHard",
            json!({"memory.available": "110GB"}),
        ),
    ] {
        cases.push(Case::refuse(name, kubelet(json!({"evictionHard": value}))));
    }
    for name in [
        "should succeed on evictionSoft with valid keys",
        "should succeed on evictionSoftGracePeriod with valid keys",
    ] {
        cases.push(Case::accept(
            name,
            kubelet(json!({"evictionSoft": signals, "evictionSoftGracePeriod": periods})),
        ));
    }
    for (name, key, value) in [
        (
            "should fail on evictionSoft with invalid keys",
            "memory",
            "5%",
        ),
        (
            "should fail on invalid formatted percentage value in evictionSoft",
            "memory.available",
            "5%3",
        ),
        (
            "should fail on invalid percentage value (too large) in evictionSoft",
            "memory.available",
            "110%",
        ),
        (
            "should fail on invalid quantity value in evictionSoft",
            "memory.available",
            "110GB",
        ),
    ] {
        cases.push(Case::refuse(
            name,
            kubelet(
                json!({"evictionSoft": {key: value}, "evictionSoftGracePeriod": {key: "1m0s"}}),
            ),
        ));
    }
    cases.extend([
        Case::refuse(
            "should fail when eviction soft doesn't have matching grace period",
            kubelet(json!({"evictionSoft": {"memory.available": "200Mi"}})),
        ),
        Case::accept(
            "should succeed on a valid imageGCHighThresholdPercent",
            kubelet(json!({"imageGCHighThresholdPercent": 10})),
        ),
        Case::refuse(
            "should fail when imageGCHighThresholdPercent is less than imageGCLowThresholdPercent",
            kubelet(json!({"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60})),
        ),
        Case::refuse(
            "should fail when imageGCLowThresholdPercent is greather than imageGCHighThresheldPercent",
            kubelet(json!({"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60})),
        ),
        Case::refuse(
            "should fail on evictionSoftGracePeriod with invalid keys",
            kubelet(json!({"evictionSoftGracePeriod": {"memory": "1m0s"}})),
        ),
        Case::refuse(
            "should fail when eviction soft grace period doesn't have matching threshold",
            kubelet(json!({"evictionSoftGracePeriod": {"memory.available": "1m0s"}})),
        ),
        // The default branch's "should succeed for valid inputs" holds for the typed schema too.
        Case::accept(
            "should succeed for valid inputs",
            kubelet(json!({
                "maxPods": 110, "podsPerCore": 10,
                "kubeReserved": {"cpu": "200m", "memory": "100Mi"},
                "systemReserved": {"cpu": "200m", "memory": "100Mi"},
                "evictionHard": {"memory.available": "5%"},
            })),
        ),
    ]);
    for case in &mut cases {
        case.name = format!("Kubelet: {}", case.name);
    }
    cases
}
