use super::*;
use serde_json::json;

/// A pod kube-scheduler marked unschedulable, with `extra` merged in.
fn pod(extra: serde_json::Value) -> Pod {
    let mut value = json!({
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    });
    merge(&mut value, extra);
    serde_json::from_value(value).unwrap()
}

fn merge(base: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(base), serde_json::Value::Object(extra)) = (base.as_object_mut(), extra) {
        for (k, v) in extra {
            match (base.get_mut(&k), v) {
                (Some(b @ serde_json::Value::Object(_)), v @ serde_json::Value::Object(_)) => {
                    merge(b, v)
                }
                (_, v) => {
                    base.insert(k, v);
                }
            }
        }
    }
}

fn owner(api_version: &str, kind: &str, controller: Option<bool>) -> serde_json::Value {
    json!({"metadata": {"ownerReferences": [
        {"apiVersion": api_version, "kind": kind, "name": "o", "uid": "u", "controller": controller}]}})
}

const DELETED: &str = "2026-01-01T00:00:00Z";

fn seconds(rfc3339: &str) -> i64 {
    rfc3339
        .parse::<k8s_openapi::jiff::Timestamp>()
        .unwrap()
        .as_second()
}

#[test]
fn only_unschedulable_unbound_pods_are_provisioned_for() {
    assert!(is_provisionable(&pod(json!({}))));
    let not = [
        json!({"spec": {"nodeName": "n"}}),
        json!({"status": {"nominatedNodeName": "n"}}),
        json!({"status": {"conditions": []}}),
        json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}}),
        json!({"spec": {"schedulingGates": [{"name": "wait"}]}}),
        json!({"status": {"phase": "Succeeded"}}),
        json!({"status": {"phase": "Failed"}}),
        json!({"metadata": {"deletionTimestamp": DELETED}}),
        owner("apps/v1", "DaemonSet", None),
        owner("v1", "Node", None),
    ];
    for extra in not {
        assert!(!is_provisionable(&pod(extra.clone())), "{extra}");
    }
}

#[test]
fn terminal_and_active_follow_the_phase_and_the_deletion() {
    for (phase, terminal) in [
        ("Pending", false),
        ("Running", false),
        ("Succeeded", true),
        ("Failed", true),
        ("Unknown", false),
    ] {
        let p = pod(json!({"status": {"phase": phase}}));
        assert_eq!(is_terminal(&p), terminal, "{phase}");
        assert_eq!(is_active(&p), !terminal, "{phase}");
    }
    let deleting = pod(json!({"metadata": {"deletionTimestamp": DELETED}}));
    assert!(is_terminating(&deleting) && !is_terminal(&deleting) && !is_active(&deleting));
}

#[test]
fn owners_are_told_by_api_version_and_kind_controller_or_not() {
    for controller in [Some(true), Some(false), None] {
        assert!(owned_by_daemon_set(&pod(owner(
            "apps/v1",
            "DaemonSet",
            controller
        ))));
        assert!(owned_by_node(&pod(owner("v1", "Node", controller))));
        assert!(owned_by_stateful_set(&pod(owner(
            "apps/v1",
            "StatefulSet",
            controller
        ))));
    }
    // Another group's kind of the same name is not the built-in one.
    assert!(!owned_by_daemon_set(&pod(owner(
        "apps.kruise.io/v1alpha1",
        "DaemonSet",
        Some(true)
    ))));
    assert!(!owned_by_daemon_set(&pod(owner(
        "apps/v1",
        "ReplicaSet",
        Some(true)
    ))));
    assert!(!owned_by_node(&pod(owner("example.com/v1", "Node", None))));
    assert!(!owned_by_daemon_set(&pod(json!({}))));
}

#[test]
fn reschedulable_pods_are_active_or_a_terminating_stateful_sets_and_not_daemons_or_static() {
    assert!(is_reschedulable(&pod(json!({}))));
    let deleting = json!({"metadata": {"deletionTimestamp": DELETED}});
    assert!(!is_reschedulable(&pod(deleting.clone())));
    let mut stateful = owner("apps/v1", "StatefulSet", Some(true));
    merge(&mut stateful, deleting);
    assert!(is_reschedulable(&pod(stateful)));
    assert!(!is_reschedulable(&pod(
        json!({"status": {"phase": "Succeeded"}})
    )));
    assert!(!is_reschedulable(&pod(owner(
        "apps/v1",
        "DaemonSet",
        Some(true)
    ))));
    assert!(!is_reschedulable(&pod(owner("v1", "Node", None))));
}

#[test]
fn do_not_disrupt_holds_for_true_or_until_its_duration_from_the_start() {
    let annotated = |value: &str, start: Option<&str>| {
        pod(json!({
            "metadata": {"annotations": {"karpenter.sh/do-not-disrupt": value}},
            "status": {"startTime": start},
        }))
    };
    let start = "2026-01-01T00:00:00Z";
    let now = seconds(start);
    assert!(do_not_disrupt_active_at(
        &annotated("true", Some(start)),
        now + 100_000
    ));
    assert!(do_not_disrupt_active_at(
        &annotated("5m", Some(start)),
        now + 299
    ));
    assert!(!do_not_disrupt_active_at(
        &annotated("5m", Some(start)),
        now + 300
    ));
    // Not started: held.
    assert!(do_not_disrupt_active_at(
        &annotated("5m", None),
        now + 1_000
    ));
    // Values that are neither are ignored.
    assert!(!do_not_disrupt_active_at(
        &annotated("false", Some(start)),
        now
    ));
    assert!(!do_not_disrupt_active_at(
        &annotated("soon", Some(start)),
        now
    ));
    assert!(!do_not_disrupt_active_at(&pod(json!({})), now));
}

#[test]
fn disruptable_and_evictable_respect_do_not_disrupt_while_the_pod_is_active() {
    let held = json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}});
    assert!(is_disruptable(&pod(json!({}))));
    assert!(!is_disruptable(&pod(held.clone())));
    let mut finished_held = held.clone();
    merge(
        &mut finished_held,
        json!({"status": {"phase": "Succeeded"}}),
    );
    assert!(is_disruptable(&pod(finished_held)));

    assert!(is_evictable(&pod(json!({}))));
    assert!(!is_evictable(&pod(held)));
    assert!(!is_evictable(&pod(owner("v1", "Node", None))));
    assert!(!is_evictable(&pod(json!({"status": {"phase": "Failed"}}))));
    let tolerates =
        json!({"spec": {"tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]}});
    assert!(tolerates_disrupted_taint(&pod(tolerates.clone())));
    assert!(!is_evictable(&pod(tolerates)));
}

#[test]
fn a_drain_waits_for_pods_except_finished_static_tolerating_or_stuck_ones() {
    assert!(is_waiting_eviction(&pod(json!({}))));
    // do-not-disrupt pods are waited for though not evicted.
    assert!(is_waiting_eviction(&pod(
        json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}})
    )));
    assert!(!is_waiting_eviction(&pod(
        json!({"status": {"phase": "Succeeded"}})
    )));
    assert!(!is_waiting_eviction(&pod(owner("v1", "Node", None))));
    assert!(!is_waiting_eviction(&pod(
        json!({"spec": {"tolerations": [{"operator": "Exists"}]}})
    )));
    let deleted = pod(json!({"metadata": {"deletionTimestamp": DELETED}}));
    let at = seconds(DELETED);
    assert!(is_drainable_at(&deleted, at + 60));
    assert!(!is_drainable_at(&deleted, at + 61));
    assert!(is_stuck_terminating_at(&deleted, at + 61));
}
