//! Which nodes may be disrupted (Karpenter's `suite_test.go`, candidate
//! cases, and the eventual-disruption class).

use serde_json::json;

use super::super::disruption_fixture::{
    NodeSpec, cluster, decisions, default_disruption, doc, kept, kept_reason, pod, run,
};

fn one(name: &'static str, pods: &'static [(&'static str, &'static str)]) -> NodeSpec<'static> {
    NodeSpec {
        name,
        instance_type: "m5.xlarge",
        capacity_type: "on-demand",
        pods,
    }
}

fn pdb(name: &str, max_unavailable: i32, allowed: i32) -> serde_json::Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"test": "value"}}},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1,
                   "expectedPods": 1, "observedGeneration": 1}
    })
}

/// "should consider candidates that have do-not-disrupt terminal pods":
/// a finished pod holds nothing; the node is empty and goes.
#[test]
fn do_not_disrupt_on_a_finished_pod_holds_nothing() {
    let mut docs = cluster(default_disruption(), &[one("a", &[])]);
    for (name, phase) in [("succeeded", "Succeeded"), ("failed", "Failed")] {
        docs.push(pod(
            name,
            "a",
            "500m",
            json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}},
                   "status": {"phase": phase}}),
        ));
    }
    let out = run(&docs, false);
    assert_eq!(
        decisions(&out),
        [("emptiness".into(), "delete".into(), vec!["a".to_string()])]
    );
}

/// "should consider candidates that have do-not-disrupt terminating pods".
#[test]
fn do_not_disrupt_on_a_terminating_pod_holds_nothing() {
    let mut docs = cluster(default_disruption(), &[one("a", &[])]);
    docs.push(pod(
        "leaving",
        "a",
        "500m",
        json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"},
                            "deletionTimestamp": "2026-11-26T11:59:50Z"}}),
    ));
    let out = run(&docs, false);
    assert_eq!(decisions(&out)[0].2, ["a"], "{:?}", kept(&out));
}

/// "should not consider candidates that have do-not-disrupt mirror pods"
/// and "… daemonset pods": a running pod's annotation holds its node even
/// when the pod goes with the node.
#[test]
fn do_not_disrupt_on_a_daemonset_pod_holds_the_node() {
    let mut docs = cluster(default_disruption(), &[one("a", &[])]);
    docs.push(pod(
        "agent",
        "a",
        "100m",
        json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"},
               "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                    "uid": "ds-1", "controller": true}]}}),
    ));
    let out = run(&docs, false);
    assert!(decisions(&out).is_empty());
    assert_eq!(kept_reason(&out, "a"), "do-not-disrupt");
}

/// "should not consider candidates that have fully blocking PDBs on
/// daemonset pods": the drain would evict the DaemonSet's pod, and its
/// budget refuses.
#[test]
fn a_blocking_pdb_on_a_daemonset_pod_keeps_the_node() {
    let mut docs = cluster(default_disruption(), &[one("a", &[])]);
    docs.push(pod(
        "agent",
        "a",
        "100m",
        json!({"metadata": {"labels": {"test": "value"},
               "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                    "uid": "ds-1", "controller": true}]}}),
    ));
    docs.push(pdb("agents", 0, 0));
    let out = run(&docs, false);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    assert_eq!(kept_reason(&out, "a"), "pdb");
}

/// "should consider candidates that have fully blocking PDBs on mirror
/// pods": a static pod is never evicted, so its budget does not matter.
#[test]
fn a_blocking_pdb_on_a_static_pod_does_not_keep_the_node() {
    let mut docs = cluster(default_disruption(), &[one("a", &[])]);
    docs.push(pod(
        "static",
        "a",
        "100m",
        json!({"metadata": {"labels": {"test": "value"},
               "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "a", "uid": "n-1"}]}}),
    ));
    docs.push(pdb("static", 0, 0));
    let out = run(&docs, false);
    assert_eq!(decisions(&out)[0].2, ["a"], "{:?}", kept(&out));
}

/// "should not consider candidates that have multiple PDBs on the same
/// pod": the eviction API refuses such a pod; the message names both
/// budgets as `namespace/name`.
#[test]
fn a_pod_under_two_pdbs_keeps_its_node_and_both_are_named() {
    let mut docs = cluster(default_disruption(), &[one("a", &[])]);
    docs.push(pod(
        "web",
        "a",
        "500m",
        json!({"metadata": {"labels": {"test": "value"}}}),
    ));
    docs.push(pdb("pdb1", 1, 1));
    docs.push(pdb("pdb2", 1, 1));
    let out = run(&docs, false);
    let kept = out
        .disruption
        .kept
        .iter()
        .find(|k| k.node == "a")
        .expect("a is kept");
    assert_eq!(kept.reason, "pdb");
    for needle in ["default/pdb1", "default/pdb2", "multiple PDBs"] {
        assert!(kept.message.contains(needle), "{needle}: {}", kept.message);
    }
}

/// "can replace nodes, considers PDB policy if the candidate is on-demand
/// node" (and "… spot node"): a budget that lets unhealthy pods go
/// (`unhealthyPodEvictionPolicy: AlwaysAllow`) does not hold pods that are
/// not ready.
#[test]
fn a_pdb_that_always_allows_unhealthy_pods_does_not_hold_them() {
    for (capacity_type, spot_to_spot) in [("on-demand", false), ("spot", true)] {
        let mut docs = vec![
            super::super::disruption_fixture::pool(
                "default",
                default_disruption(),
                &[capacity_type],
            ),
            super::super::disruption_fixture::class(),
        ];
        super::super::disruption_fixture::node(
            &NodeSpec {
                name: "a",
                instance_type: "m5.2xlarge",
                capacity_type,
                pods: &[],
            },
            "default",
            &mut docs,
        );
        for i in 0..3 {
            docs.push(pod(
                &format!("p{i}"),
                "a",
                "100m",
                json!({"metadata": {"labels": {"test": "value"}},
                       "status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            ));
        }
        let mut budget = pdb("unhealthy", 0, 0);
        budget["spec"]["unhealthyPodEvictionPolicy"] = json!("AlwaysAllow");
        docs.push(budget);
        let out = run(&docs, spot_to_spot);
        let d = decisions(&out);
        assert_eq!(d.len(), 1, "{capacity_type}: {d:?} {:?}", kept(&out));
        assert_eq!(d[0].1, "replace", "{capacity_type}");
        // A ready pod under the same budget holds the node again.
        doc(&mut docs, "Pod", "p0")["status"]["conditions"] =
            json!([{"type": "Ready", "status": "True"}]);
        let out = run(&docs, spot_to_spot);
        assert_eq!(kept_reason(&out, "a"), "pdb", "{capacity_type}");
    }
}

/// "should consider candidates that have do-not-disrupt pods scheduled
/// with a terminationGracePeriod set for eventual disruption" and "… PDB-
/// blocked pods …": drift is eventual; with `terminationGracePeriod` on
/// the NodeClaim the node is replaced and the grace period bounds the
/// drain. Without it (and for consolidation, which is graceful) the node
/// stays.
#[test]
fn drift_takes_a_blocked_node_whose_claim_has_a_termination_grace_period() {
    for blocker in ["do-not-disrupt", "pdb"] {
        let mut docs = cluster(default_disruption(), &[one("a", &[])]);
        let extra = match blocker {
            "do-not-disrupt" => {
                json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}})
            }
            _ => json!({"metadata": {"labels": {"test": "value"}}}),
        };
        docs.push(pod("db", "a", "500m", extra));
        docs.push(pdb("db", 0, 0));
        let conditions = &mut doc(&mut docs, "NodeClaim", "claim-a")["status"]["conditions"];
        conditions.as_array_mut().unwrap().push(json!({
            "type": "Drifted", "status": "True", "reason": "SubnetDrift",
            "lastTransitionTime": "2026-11-26T11:00:00Z"}));
        let out = run(&docs, false);
        assert!(
            decisions(&out).is_empty(),
            "{blocker}: without a grace period"
        );
        assert!(
            ["do-not-disrupt", "pdb"].contains(&kept_reason(&out, "a").as_str()),
            "{blocker}"
        );
        doc(&mut docs, "NodeClaim", "claim-a")["spec"]["terminationGracePeriod"] = json!("300s");
        let out = run(&docs, false);
        let d = decisions(&out);
        assert_eq!(d.len(), 1, "{blocker}: {:?}", kept(&out));
        assert_eq!(d[0].0, "drift", "{blocker}");
        assert_eq!(d[0].2, ["a"], "{blocker}");
    }
}

/// "should not consider candidates that have do-not-disrupt pods scheduled
/// with a terminationGracePeriod set for graceful disruption":
/// consolidation still keeps the node.
#[test]
fn consolidation_keeps_a_blocked_node_even_with_a_termination_grace_period() {
    let mut docs = cluster(
        default_disruption(),
        &[NodeSpec {
            name: "a",
            instance_type: "m5.2xlarge",
            capacity_type: "on-demand",
            pods: &[],
        }],
    );
    docs.push(pod(
        "db",
        "a",
        "500m",
        json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
    ));
    doc(&mut docs, "NodeClaim", "claim-a")["spec"]["terminationGracePeriod"] = json!("300s");
    let out = run(&docs, false);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    assert_eq!(kept_reason(&out, "a"), "do-not-disrupt");
}

/// "should consider candidates that do not have the karpenter.sh/
/// capacity-type label" (and the zone and instance-type labels): the Node
/// lacks them, the NodeClaim has them; the node is a candidate.
#[test]
fn labels_missing_on_the_node_are_read_from_its_claim() {
    for label in [
        "karpenter.sh/capacity-type",
        "topology.kubernetes.io/zone",
        "node.kubernetes.io/instance-type",
    ] {
        let mut docs = cluster(default_disruption(), &[one("a", &[])]);
        let labels = doc(&mut docs, "Node", "a")["metadata"]["labels"]
            .as_object_mut()
            .unwrap();
        labels.remove(label);
        let out = run(&docs, false);
        assert_eq!(decisions(&out)[0].2, ["a"], "{label}: {:?}", kept(&out));
    }
}

/// "should not consider candidates that are not managed by this
/// Karpenter" / "Drift should ignore drift for NodeClaims not managed by
/// this Karpenter instance" / "Expiration should ignore expired
/// NodeClaims that are not managed by this Karpenter instance": a
/// NodeClaim of another provider's node class is never marked, expired
/// or disrupted.
#[test]
fn a_claim_of_another_node_class_is_never_disrupted() {
    let mut docs = cluster(default_disruption(), &[one("a", &[])]);
    let claim = doc(&mut docs, "NodeClaim", "claim-a");
    claim["spec"]["nodeClassRef"] =
        json!({"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"});
    claim["spec"]["expireAfter"] = json!("1h");
    claim["status"]["conditions"].as_array_mut().unwrap().push(
        json!({"type": "Drifted", "status": "True", "reason": "SubnetDrift",
                     "lastTransitionTime": "2026-11-26T11:00:00Z"}),
    );
    let out = run(&docs, false);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    assert_eq!(kept_reason(&out, "a"), "not-managed");
    let marked = &out.disruption.marked[0];
    assert!(!marked.expired && marked.drifted.is_none() && !marked.consolidatable);
}

/// nodewright's own: a node the interruption controller cordoned under its
/// NodePool's `Cordon` policy is not consolidated while it stays cordoned
/// (its pods wait for an operator); uncordoned, or cordoned by hand, it is
/// a candidate as in Karpenter.
#[test]
fn a_node_cordoned_by_the_interruption_policy_is_not_consolidated() {
    let nodes = [NodeSpec {
        name: "a",
        instance_type: "m5.2xlarge",
        capacity_type: "on-demand",
        pods: &[("p1", "500m")],
    }];
    let mut docs = cluster(default_disruption(), &nodes);
    let node = doc(&mut docs, "Node", "a");
    node["spec"]["unschedulable"] = json!(true);
    node["metadata"]["annotations"] =
        json!({"nodewright.io/cordoned-by-interruption": "scheduled_change"});
    let out = run(&docs, false);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    assert_eq!(kept_reason(&out, "a"), "policy");
    // Cordoned by hand: consolidated as Karpenter would.
    let mut docs = cluster(default_disruption(), &nodes);
    doc(&mut docs, "Node", "a")["spec"]["unschedulable"] = json!(true);
    assert_eq!(decisions(&run(&docs, false))[0].2, ["a"]);
}
