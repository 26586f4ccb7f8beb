//! Drift and expiration (Karpenter's `drift_test.go` and
//! `nodeclaim/expiration/suite_test.go`).

use serde_json::{Value, json};

use super::super::disruption_fixture::{
    NodeSpec, cluster, decisions, default_disruption, doc, run,
};

fn drifted(docs: &mut [Value], claim: &str, at: &str) {
    doc(docs, "NodeClaim", claim)["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(
            json!({"type": "Drifted", "status": "True", "reason": "SubnetDrift",
                     "lastTransitionTime": at}),
        );
}

fn busy(name: &'static str, pods: &'static [(&'static str, &'static str)]) -> NodeSpec<'static> {
    NodeSpec {
        name,
        instance_type: "m5.xlarge",
        capacity_type: "on-demand",
        pods,
    }
}

/// "should drift one non-empty node at a time, starting with the earliest
/// drift": one command per pass, the node that drifted first going first.
#[test]
fn drift_replaces_one_node_per_command_earliest_drift_first() {
    let mut docs = cluster(
        default_disruption(),
        &[busy("late", &[("p1", "3")]), busy("early", &[("p2", "3")])],
    );
    drifted(&mut docs, "claim-late", "2026-11-26T11:30:00Z");
    drifted(&mut docs, "claim-early", "2026-11-26T11:00:00Z");
    let out = run(&docs, false);
    let d = decisions(&out);
    let drift: Vec<_> = d.iter().filter(|d| d.0 == "drift").collect();
    assert_eq!(drift.len(), 2, "{d:?}");
    assert_eq!(drift[0].2, ["early"], "{d:?}");
    assert_eq!(drift[1].2, ["late"], "{d:?}");
    assert!(drift.iter().all(|d| d.2.len() == 1));
}

/// Empty drifted nodes go before the others (Karpenter: so that pods do not
/// move onto nodes about to go).
#[test]
fn empty_drifted_nodes_go_first() {
    let mut docs = cluster(
        json!({"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}),
        &[busy("busy", &[("p1", "3")]), busy("empty", &[])],
    );
    drifted(&mut docs, "claim-busy", "2026-11-26T11:00:00Z");
    drifted(&mut docs, "claim-empty", "2026-11-26T11:30:00Z");
    let out = run(&docs, false);
    assert_eq!(decisions(&out)[0].2, ["empty"], "{:?}", decisions(&out));
}

/// "should not consider static nodepool for drift": a static NodePool's
/// node is not rescheduled by drift; static drift replaces it with a
/// NodeClaim from the template and plans none of its pods, which
/// kube-scheduler places on the replacement.
#[test]
fn drift_leaves_a_static_node_pools_nodes_to_static_drift() {
    let mut docs = cluster(default_disruption(), &[busy("a", &[("p1", "3")])]);
    doc(&mut docs, "NodePool", "default")["spec"]["replicas"] = json!(1);
    drifted(&mut docs, "claim-a", "2026-11-26T11:00:00Z");
    let out = run(&docs, false);
    let d = decisions(&out);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!((d[0].0.as_str(), d[0].1.as_str()), ("drift", "replace"));
    let decision = &out.disruption.decisions[0];
    assert!(decision.replacements[0].pods.is_empty());
    assert_eq!(decision.pods.len(), 1);
    assert_eq!(decision.pods[0].to, None, "{:?}", decision.pods);
}

/// "Expiration should remove nodeclaims that are expired" and "should
/// delete NodeClaims if the nodeClaim is expired but the node isn't":
/// expiration is a delete, whatever holds the node; its pods are left to
/// provisioning (a node with room, or capacity launched for them).
#[test]
fn an_expired_claim_is_deleted_and_its_pods_left_to_provisioning() {
    let mut docs = cluster(
        default_disruption(),
        &[
            busy("old", &[("p1", "3")]),
            busy("roomy", &[("p2", "500m")]),
        ],
    );
    doc(&mut docs, "NodeClaim", "claim-old")["spec"]["expireAfter"] = json!("1h");
    doc(&mut docs, "Pod", "p1")["metadata"]["annotations"] =
        json!({"karpenter.sh/do-not-disrupt": "true"});
    let out = run(&docs, false);
    let first = &out.disruption.decisions[0];
    assert_eq!(first.method, "expiration");
    assert_eq!(first.decision, "delete");
    assert!(first.replacements.is_empty());
    assert_eq!(first.candidates[0].node, "old");
    // p1 (3 CPU) fits on `roomy` (4 CPU, 0.5 used): provisioning would bind
    // it there.
    assert_eq!(
        first.pods[0].to.as_deref(),
        Some("roomy"),
        "{:?}",
        first.pods
    );
}

/// "shouldn't expire the same NodeClaim multiple times": once per
/// NodeClaim, and never one already being deleted.
#[test]
fn an_expired_claim_is_expired_once() {
    let mut docs = cluster(default_disruption(), &[busy("old", &[("p1", "3")])]);
    doc(&mut docs, "NodeClaim", "claim-old")["spec"]["expireAfter"] = json!("1h");
    let out = run(&docs, false);
    let expirations = decisions(&out)
        .into_iter()
        .filter(|d| d.0 == "expiration")
        .count();
    assert_eq!(expirations, 1, "{:?}", decisions(&out));
    doc(&mut docs, "NodeClaim", "claim-old")["metadata"]["deletionTimestamp"] =
        json!("2026-11-26T11:59:00Z");
    let out = run(&docs, false);
    assert!(
        decisions(&out).iter().all(|d| d.0 != "expiration"),
        "{:?}",
        decisions(&out)
    );
}

/// "should detect stale instance type drift if the instance type label
/// doesn't exist", "… if the instance type doesn't exist", "… if the
/// instance type offerings aren't compatible with the nodeclaim": for a
/// claim older than an hour, offline as in the controller.
#[test]
fn a_claim_whose_instance_type_is_gone_drifts() {
    type Edit<'a> = &'a dyn Fn(&mut Value);
    let cases: [(&str, Edit); 3] = [
        ("label gone", &|claim| {
            claim["metadata"]["labels"]
                .as_object_mut()
                .unwrap()
                .remove("node.kubernetes.io/instance-type");
        }),
        ("type gone", &|claim| {
            claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] = json!("m5.retired");
        }),
        ("no offering there", &|claim| {
            claim["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!("us-east-1z");
        }),
    ];
    for (case, edit) in cases {
        let mut docs = cluster(default_disruption(), &[busy("a", &[("p1", "3")])]);
        edit(doc(&mut docs, "NodeClaim", "claim-a"));
        let out = run(&docs, false);
        assert_eq!(
            out.disruption.marked[0].drifted.as_deref(),
            Some("InstanceTypeNotFound"),
            "{case}"
        );
    }
}

/// "should remove the status condition from the nodeClaim if the
/// nodeClaim is no longer drifted" and "should remove multiple disruption
/// conditions simultaneously": marks are what the objects say now; only a
/// drift offline cannot see (subnet, security groups, reservation) is
/// taken from the condition.
#[test]
fn stale_marks_are_dropped_and_unseen_drift_kept() {
    let mut docs = cluster(
        json!({"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}),
        &[busy("a", &[("p1", "3")])],
    );
    let conditions = doc(&mut docs, "NodeClaim", "claim-a")["status"]["conditions"]
        .as_array_mut()
        .unwrap();
    conditions.push(
        json!({"type": "Drifted", "status": "True", "reason": "Drifted",
                           "lastTransitionTime": "2026-11-26T11:00:00Z"}),
    );
    conditions.push(
        json!({"type": "Consolidatable", "status": "True", "reason": "Consolidatable",
                           "lastTransitionTime": "2026-11-26T11:00:00Z"}),
    );
    let out = run(&docs, false);
    let marked = &out.disruption.marked[0];
    assert_eq!(marked.drifted, None);
    assert!(!marked.consolidatable);
    for condition in doc(&mut docs, "NodeClaim", "claim-a")["status"]["conditions"]
        .as_array_mut()
        .unwrap()
    {
        if condition["type"] == "Drifted" {
            condition["reason"] = json!("SubnetDrift");
        }
    }
    let out = run(&docs, false);
    assert_eq!(
        out.disruption.marked[0].drifted.as_deref(),
        Some("SubnetDrift")
    );
}
