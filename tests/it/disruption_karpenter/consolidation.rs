//! Consolidation (Karpenter's `consolidation_test.go`): spot-to-spot,
//! unsafe destinations, an invalid NodePool beside valid ones.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use nodewright::controllers::disruption::sim::{DisruptionPlan, MarkSource, PlanOptions, plan};
use nodewright::scheduling::{CapacityType, SchedulerOptions};
use serde_json::{Value, json};

use super::super::disruption_fixture::{
    AT, NodeSpec, class, cluster, decisions, default_disruption, doc, input, kept, kept_reason,
    node, pool, run,
};

fn spot_cluster(instance_type: &'static str, requirements: &[Value]) -> Vec<Value> {
    let mut spot_pool = pool("default", default_disruption(), &["spot"]);
    let list = spot_pool["spec"]["template"]["spec"]["requirements"]
        .as_array_mut()
        .unwrap();
    list.extend(requirements.iter().cloned());
    let mut docs = vec![spot_pool, class()];
    node(
        &NodeSpec {
            name: "a",
            instance_type,
            capacity_type: "spot",
            pods: &[("p1", "500m")],
        },
        "default",
        &mut docs,
    );
    docs
}

fn spot_plan(docs: &[Value]) -> DisruptionPlan {
    let (manifests, provider) = input(docs);
    plan(
        &manifests.snapshot(),
        &provider,
        &PlanOptions {
            at: AT.parse::<Timestamp>().unwrap(),
            spot_to_spot: true,
            scheduler: SchedulerOptions::default(),
            marks: MarkSource::Recompute,
            max_passes: Some(1),
            exhaustive: false,
        },
    )
}

fn kept_message(out: &nodewright::sim::disruption::DisruptionOutput, node: &str) -> String {
    out.disruption
        .kept
        .iter()
        .find(|k| k.node == node)
        .map(|k| k.message.clone())
        .unwrap_or_default()
}

/// "cannot replace spot with spot if the spotToSpotConsolidation is
/// disabled".
#[test]
fn spot_is_not_replaced_by_spot_with_the_gate_off() {
    let out = run(&spot_cluster("m5.2xlarge", &[]), false);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    assert_eq!(kept_reason(&out, "a"), "spot-to-spot");
    assert!(
        kept_message(&out, "a").contains("SpotToSpotConsolidation is disabled"),
        "{}",
        kept_message(&out, "a")
    );
}

/// "cannot replace spot with spot if it is part of the 15 cheapest
/// instance types." and "cannot replace spot with spot if less than
/// minimum InstanceTypes flexibility": fewer than 15 cheaper types, so the
/// replacement could be the next interrupted and replaced again.
#[test]
fn spot_is_not_replaced_by_spot_with_fewer_than_15_cheaper_types() {
    // Among the cheapest types that fit (a handful are cheaper).
    let out = run(&spot_cluster("c6a.large", &[]), true);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    assert_eq!(kept_reason(&out, "a"), "spot-to-spot", "{:?}", kept(&out));
    assert!(kept_message(&out, "a").contains("requires 15 cheaper instance type options"));
    // A pool of five types, the node the dearest of them.
    let five = json!({"key": "node.kubernetes.io/instance-type", "operator": "In",
                      "values": ["m5.large", "m5.xlarge", "c5.large", "c5.xlarge", "m5.2xlarge"]});
    let out = run(&spot_cluster("m5.2xlarge", &[five]), true);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    let message = kept_message(&out, "a");
    assert!(
        message.contains(
            "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, got 4"
        ),
        "{message}"
    );
}

/// The spot price a launch of `name` may pay at most in this pool (any
/// zone): the dearest spot offering.
fn worst_spot_price(found: &DisruptionPlan, name: &str) -> f64 {
    found.instance_types["default"]
        .iter()
        .find(|t| t.name == name)
        .into_iter()
        .flat_map(|t| &t.offerings)
        .filter(|o| o.capacity_type == CapacityType::Spot && o.available)
        .map(|o| o.price)
        .fold(f64::NEG_INFINITY, f64::max)
}

/// "spot to spot consolidation should order the instance types by price
/// before enforcing minimum flexibility.": the replacement launches among
/// the 15 cheapest types that fit, whatever order they came in, and keeps
/// `karpenter.sh/capacity-type In [spot]`.
#[test]
fn spot_to_spot_keeps_the_15_cheapest_types_and_spot_only() {
    let docs = spot_cluster("m5.2xlarge", &[]);
    let found = spot_plan(&docs);
    let decision = found.decisions.first().expect("a spot-to-spot replace");
    let replacement = &decision.command.replacements[0];
    let options: Vec<&str> = replacement
        .instance_type_options
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(options.len(), 15, "{options:?}");
    let ct = replacement
        .requirements
        .get("karpenter.sh/capacity-type")
        .expect("a capacity-type requirement");
    assert!(ct.has("spot") && !ct.has("on-demand"), "{ct:?}");
    assert_eq!(replacement.capacity_type, CapacityType::Spot);
    // No type left out launches for less than one kept.
    let before = decision.command.price_before();
    let dearest_kept = options
        .iter()
        .map(|o| worst_spot_price(&found, o))
        .fold(f64::NEG_INFINITY, f64::max);
    assert!(dearest_kept < before);
    // The pool's types: categories m and c, amd64.
    let fitting: BTreeMap<&str, f64> = found.instance_types["default"]
        .iter()
        .filter(|t| t.name.starts_with('m') || t.name.starts_with('c'))
        .filter(|t| {
            t.requirements
                .get("kubernetes.io/arch")
                .is_some_and(|a| a.has("amd64"))
        })
        .map(|t| (t.name.as_str(), worst_spot_price(&found, &t.name)))
        .filter(|(_, p)| p.is_finite())
        .collect();
    let cheaper_left_out: Vec<_> = fitting
        .iter()
        .filter(|(name, price)| !options.contains(name) && **price < dearest_kept)
        .filter(|(name, _)| {
            // Only types the solver offered (they fit the pod) count.
            found.instance_types["default"]
                .iter()
                .any(|t| &t.name == *name && t.capacity.get("cpu") >= 2000)
        })
        .collect();
    assert!(
        cheaper_left_out.is_empty(),
        "cheaper types left out: {cheaper_left_out:?}, kept {options:?}"
    );
}

/// "spot to spot consolidation should consider the max of default and
/// minimum number of instanceTypeOptions from minValues in requirement for
/// truncation if minimum number of instanceTypeOptions from minValues in
/// requirement is greater than 15." and "… the default for truncation if
/// … less than 15.".
#[test]
fn spot_to_spot_keeps_as_many_types_as_min_values_needs_above_15() {
    for (min_values, kept_types) in [(16, 16), (2, 15)] {
        let requirement = json!({"key": "node.kubernetes.io/instance-type", "operator": "Exists",
                                 "minValues": min_values});
        let found = spot_plan(&spot_cluster("m5.2xlarge", &[requirement]));
        let decision = found
            .decisions
            .first()
            .unwrap_or_else(|| panic!("minValues {min_values}: no command"));
        let options = &decision.command.replacements[0].instance_type_options;
        assert_eq!(options.len(), kept_types, "minValues {min_values}");
    }
}

/// "won't replace node if any spot replacement is more expensive" (an
/// on-demand node that may be replaced by spot or on-demand): the
/// replacement is spot only, so a launch that falls back to on-demand
/// cannot cost more than the node.
#[test]
fn an_on_demand_node_replaced_where_spot_is_allowed_becomes_spot_only() {
    let mut docs = vec![
        pool("default", default_disruption(), &["spot", "on-demand"]),
        class(),
    ];
    node(
        &NodeSpec {
            name: "a",
            instance_type: "m5.2xlarge",
            capacity_type: "on-demand",
            pods: &[("p1", "500m")],
        },
        "default",
        &mut docs,
    );
    let found = spot_plan(&docs);
    let replacement = &found.decisions[0].command.replacements[0];
    let ct = replacement
        .requirements
        .get("karpenter.sh/capacity-type")
        .expect("a capacity-type requirement");
    assert!(ct.has("spot") && !ct.has("on-demand"), "{ct:?}");
}

/// "won't delete node if it would require pods to schedule on an
/// uninitialized node": the pod of `b` fits only on `a`, whose NodeClaim
/// is not initialized; if `a` never came up, the pod would be stranded.
#[test]
fn pods_are_not_planned_onto_an_uninitialized_node() {
    let mut docs = cluster(
        default_disruption(),
        &[
            NodeSpec {
                name: "a",
                instance_type: "m5.large",
                capacity_type: "on-demand",
                pods: &[("p0", "300m"), ("p1", "300m")],
            },
            NodeSpec {
                name: "b",
                instance_type: "m5.large",
                capacity_type: "on-demand",
                pods: &[("p2", "300m")],
            },
        ],
    );
    let conditions = doc(&mut docs, "NodeClaim", "claim-a")["status"]["conditions"]
        .as_array_mut()
        .unwrap();
    conditions.retain(|c| c["type"] != "Initialized");
    doc(&mut docs, "Node", "a")["status"]["conditions"] =
        json!([{"type": "Ready", "status": "False"}]);
    let out = run(&docs, false);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    assert_eq!(kept_reason(&out, "b"), "pods-do-not-fit");
    let message = kept_message(&out, "b");
    assert!(message.contains("which is not initialized"), "{message}");
    // Once `a` is initialized, `b` goes.
    let docs = cluster(
        default_disruption(),
        &[
            NodeSpec {
                name: "a",
                instance_type: "m5.large",
                capacity_type: "on-demand",
                pods: &[("p0", "300m"), ("p1", "300m")],
            },
            NodeSpec {
                name: "b",
                instance_type: "m5.large",
                capacity_type: "on-demand",
                pods: &[("p2", "300m")],
            },
        ],
    );
    assert!(!decisions(&run(&docs, false)).is_empty());
}

/// "should not consolidate pods onto a destination node that is under its
/// consolidateAfter window" (v1.14): both nodes are of the pool's only
/// type, so the only move is deleting `b` onto `a`; `a` had a pod event
/// 30 s ago, so consolidation does not move `b`'s pod onto it. Once the
/// window has passed, it does.
#[test]
fn pods_are_not_consolidated_onto_a_node_within_its_consolidate_after() {
    let disruption = json!({"consolidateAfter": "1m", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "100%"}]});
    let nodes = [
        NodeSpec {
            name: "a",
            instance_type: "m5.large",
            capacity_type: "on-demand",
            pods: &[("p0", "300m"), ("p1", "300m")],
        },
        NodeSpec {
            name: "b",
            instance_type: "m5.large",
            capacity_type: "on-demand",
            pods: &[("p2", "300m")],
        },
    ];
    let only_m5_large = |docs: &mut Vec<Value>| {
        doc(docs, "NodePool", "default")["spec"]["template"]["spec"]["requirements"]
            .as_array_mut()
            .unwrap()
            .push(json!({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}));
    };
    let mut docs = cluster(disruption.clone(), &nodes);
    only_m5_large(&mut docs);
    doc(&mut docs, "NodeClaim", "claim-a")["status"]["lastPodEventTime"] =
        json!("2026-11-26T11:59:30Z");
    let out = run(&docs, false);
    assert!(
        decisions(&out)
            .iter()
            .all(|d| !d.2.contains(&"b".to_string())),
        "{:?}",
        decisions(&out)
    );
    assert_ne!(
        kept_reason(&out, "b"),
        "not-consolidatable",
        "b itself may go"
    );
    // Later, `a` is past its window: `b` is deleted onto it.
    let mut docs = cluster(disruption, &nodes);
    only_m5_large(&mut docs);
    let out = run(&docs, false);
    let d = decisions(&out);
    assert!(
        d.iter().any(|d| d.1 == "delete" && d.2 == ["b"]),
        "{d:?} {:?}",
        kept(&out)
    );
}

/// "can delete nodes while an invalid node pool exists": a NodePool of
/// another provider's node class is reported and left out; the others are
/// planned.
#[test]
fn an_invalid_node_pool_does_not_stop_the_others() {
    let mut docs = cluster(
        default_disruption(),
        &[NodeSpec {
            name: "a",
            instance_type: "m5.large",
            capacity_type: "on-demand",
            pods: &[],
        }],
    );
    docs.push(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "bad-nodepool"},
        "spec": {"template": {"spec": {"requirements": [],
            "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "non-existent"}}}}
    }));
    let out = run(&docs, false);
    assert_eq!(decisions(&out)[0].2, ["a"]);
    assert!(
        out.disruption
            .problems
            .iter()
            .any(|p| p.contains("bad-nodepool")),
        "{:?}",
        out.disruption.problems
    );
}
