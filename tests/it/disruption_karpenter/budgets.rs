//! Budgets (Karpenter's `BuildDisruptionBudgetMapping` cases in
//! `suite_test.go`, `nodepool_budgets_test.go`, and the empty-node budget
//! cases of `emptiness_test.go` and `consolidation_test.go`).

use k8s_openapi::jiff::Timestamp;
use nodewright::apis::nodepool::DisruptionReason;
use nodewright::controllers::disruption::sim::{DisruptionPlan, MarkSource, PlanOptions, plan};
use nodewright::scheduling::SchedulerOptions;
use serde_json::{Value, json};

use super::super::disruption_fixture::{
    AT, NodeSpec, cluster, decisions, doc, input, kept, kept_reason, run,
};

const NAMES: [&str; 10] = ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"];

/// Ten running nodes of NodePool `default` with `budgets`.
fn ten(budgets: Value) -> Vec<Value> {
    let nodes: Vec<NodeSpec> = NAMES
        .iter()
        .map(|name| NodeSpec {
            name,
            instance_type: "m5.large",
            capacity_type: "on-demand",
            pods: &[],
        })
        .collect();
    let mut docs = cluster(
        json!({"consolidateAfter": "Never", "consolidationPolicy": "WhenEmptyOrUnderutilized",
               "budgets": budgets}),
        &nodes,
    );
    // Each node runs a pod, so nothing is empty.
    for name in NAMES {
        docs.push(super::super::disruption_fixture::pod(
            &format!("{name}-pod"),
            name,
            "1",
            json!({}),
        ));
    }
    docs
}

fn one_pass(docs: &[Value]) -> DisruptionPlan {
    let (manifests, provider) = input(docs);
    plan(
        &manifests.snapshot(),
        &provider,
        &PlanOptions {
            at: AT.parse::<Timestamp>().unwrap(),
            spot_to_spot: false,
            scheduler: SchedulerOptions::default(),
            marks: MarkSource::Conditions,
            max_passes: Some(1),
            exhaustive: false,
        },
    )
}

fn remaining(found: &DisruptionPlan) -> Vec<usize> {
    DisruptionReason::ALL
        .iter()
        .map(|r| found.budgets.remaining[&("default".to_string(), *r)])
        .collect()
}

/// "should not consider nodes that have the terminating status condition
/// as part of disruption count": an eleventh node whose instance is
/// terminating neither counts nor uses the budget.
#[test]
fn a_node_whose_instance_is_terminating_does_not_count() {
    let mut docs = ten(json!([{"nodes": "100%"}]));
    super::super::disruption_fixture::node(
        &NodeSpec {
            name: "leaving",
            instance_type: "m5.large",
            capacity_type: "on-demand",
            pods: &[],
        },
        "default",
        &mut docs,
    );
    doc(&mut docs, "NodeClaim", "claim-leaving")["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(
            json!({"type": "InstanceTerminating", "status": "True", "reason": "InstanceTerminating",
                     "lastTransitionTime": "2026-11-26T11:59:00Z"}),
        );
    assert_eq!(remaining(&one_pass(&docs)), [10, 10, 10]);
}

/// "should consider not ready nodes to the disruption count".
#[test]
fn nodes_not_ready_use_the_budget() {
    let mut docs = ten(json!([{"nodes": "100%"}]));
    for name in ["n0", "n1"] {
        doc(&mut docs, "Node", name)["status"]["conditions"] =
            json!([{"type": "Ready", "status": "False"}]);
    }
    assert_eq!(remaining(&one_pass(&docs)), [8, 8, 8]);
}

/// "should consider nodes with a deletion timestamp set and
/// MarkedForDeletion to the disruption count" and "should not return a
/// negative disruption value".
#[test]
fn nodes_being_deleted_use_the_budget_and_it_never_goes_negative() {
    let mut docs = ten(json!([{"nodes": "100%"}]));
    for name in ["n0", "n1"] {
        doc(&mut docs, "NodeClaim", &format!("claim-{name}"))["metadata"]["deletionTimestamp"] =
            json!("2026-11-26T11:59:00Z");
    }
    assert_eq!(remaining(&one_pass(&docs)), [8, 8, 8]);
    let mut docs = ten(json!([{"nodes": "10%"}]));
    for name in NAMES {
        doc(&mut docs, "Node", name)["metadata"]["deletionTimestamp"] =
            json!("2026-11-26T11:59:00Z");
    }
    assert_eq!(remaining(&one_pass(&docs)), [0, 0, 0]);
}

/// "should get the minimum budget for each reason": a budget for `Empty`
/// only, and the reason-less default.
#[test]
fn each_reason_gets_the_least_of_the_budgets_that_apply() {
    let docs = ten(json!([
        {"nodes": "5"},
        {"nodes": "4", "reasons": ["Empty"], "schedule": "* * * * *", "duration": "1h"},
        {"nodes": "100%", "reasons": ["Underutilized"]},
    ]));
    let found = one_pass(&docs);
    assert_eq!(remaining(&found), [4, 5, 5]);
    // The gauge reports what the budgets allow before nodes disrupting are
    // taken off, by reason as NodePools spell it.
    assert_eq!(
        found.budgets.allowed[&("default".to_string(), DisruptionReason::Empty)],
        4
    );
}

/// "should allow no empty nodes to be disrupted" (emptiness and
/// consolidation): with an `Empty` budget of zero, empty nodes stay, and
/// consolidation does not take them under the `Underutilized` budget.
#[test]
fn an_empty_budget_of_zero_keeps_empty_nodes_from_every_method() {
    let nodes: Vec<NodeSpec> = ["a", "b"]
        .iter()
        .map(|name| NodeSpec {
            name,
            instance_type: "m5.large",
            capacity_type: "on-demand",
            pods: &[],
        })
        .collect();
    let docs = cluster(
        json!({"consolidateAfter": "30s", "consolidationPolicy": "WhenEmptyOrUnderutilized",
               "budgets": [{"nodes": "0%", "reasons": ["Empty"]}, {"nodes": "100%"}]}),
        &nodes,
    );
    let out = run(&docs, false);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    assert_eq!(kept_reason(&out, "a"), "budget", "{:?}", kept(&out));
}

/// "should ignore nodes with the consolidatable status condition set to
/// false" and "should ignore nodes without the consolidatable status
/// condition": in the controller, marks are the conditions; an empty node
/// without `Consolidatable=True` is kept as not consolidatable.
#[test]
fn a_node_not_marked_consolidatable_is_kept_as_such() {
    for condition in [
        Some(
            json!({"type": "Consolidatable", "status": "False", "reason": "NotEmpty",
                    "lastTransitionTime": "2026-11-26T11:00:00Z"}),
        ),
        None,
    ] {
        let mut docs = cluster(
            json!({"consolidateAfter": "30s", "consolidationPolicy": "WhenEmptyOrUnderutilized",
                   "budgets": [{"nodes": "100%"}]}),
            &[NodeSpec {
                name: "a",
                instance_type: "m5.large",
                capacity_type: "on-demand",
                pods: &[],
            }],
        );
        if let Some(condition) = &condition {
            doc(&mut docs, "NodeClaim", "claim-a")["status"]["conditions"]
                .as_array_mut()
                .unwrap()
                .push(condition.clone());
        }
        let found = one_pass(&docs);
        assert!(found.decisions.is_empty(), "{condition:?}");
        let kept = found.kept.iter().find(|k| k.node == "a").expect("a kept");
        assert_eq!(kept.reason.as_str(), "not-consolidatable", "{condition:?}");
    }
}
