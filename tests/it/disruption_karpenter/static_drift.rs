//! Static drift (Karpenter's `staticdrift_test.go`): a static NodePool's
//! drifted nodes are replaced by NodeClaims from its template, within its
//! `Drifted` budget and `limits.nodes`, once any scale-down is done.

use serde_json::{Value, json};

use super::super::disruption_fixture::{
    NodeSpec, cluster, decisions, doc, kept, kept_reason, node, pool, run,
};

fn drifted(docs: &mut [Value], claim: &str) {
    doc(docs, "NodeClaim", claim)["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(
            json!({"type": "Drifted", "status": "True", "reason": "SubnetDrift",
                     "lastTransitionTime": "2026-11-26T11:00:00Z"}),
        );
}

fn busy(name: &'static str) -> NodeSpec<'static> {
    NodeSpec {
        name,
        instance_type: "m5.large",
        capacity_type: "on-demand",
        pods: &[],
    }
}

/// A static pool `default` of `replicas` with `budget` for every reason,
/// `limits`, and the named nodes (all drifted).
fn static_cluster(
    replicas: i64,
    budget: &str,
    limits: Option<&str>,
    nodes: &[&'static str],
) -> Vec<Value> {
    let specs: Vec<NodeSpec> = nodes.iter().map(|n| busy(n)).collect();
    let mut docs = cluster(
        json!({"consolidateAfter": "Never", "budgets": [{"nodes": budget}]}),
        &specs,
    );
    let spec = &mut doc(&mut docs, "NodePool", "default")["spec"];
    spec["replicas"] = json!(replicas);
    if let Some(limit) = limits {
        spec["limits"] = json!({"nodes": limit});
    }
    for n in nodes {
        drifted(&mut docs, &format!("claim-{n}"));
    }
    docs
}

/// The nodes every drift decision takes, in order.
fn drifts(docs: &[Value]) -> Vec<String> {
    let out = run(docs, false);
    decisions(&out)
        .into_iter()
        .filter(|d| d.0 == "drift")
        .flat_map(|d| d.2)
        .collect()
}

/// "should respect disruption budgets (Nodes Count) for static drift"
#[test]
fn should_respect_disruption_budgets_nodes_count_for_static_drift() {
    let docs = static_cluster(3, "1", None, &["a", "b", "c"]);
    let out = run(&docs, false);
    let d = decisions(&out);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!((d[0].0.as_str(), d[0].1.as_str()), ("drift", "replace"));
    let decision = &out.disruption.decisions[0];
    // The replacement is the pool's template: no pods planned onto it,
    // every type the template allows as options.
    assert_eq!(decision.replacements.len(), 1);
    assert!(decision.replacements[0].pods.is_empty());
    assert!(decision.replacements[0].instance_type_options.len() > 1);
    assert_eq!(decision.replacements[0].node_pool, "default");
    let kept_nodes: Vec<String> = kept(&out).into_iter().map(|k| k.0).collect();
    assert_eq!(kept_nodes, ["b", "c"]);
}

/// "should respect disruption budgets (Nodes Percentage) for static drift"
#[test]
fn should_respect_disruption_budgets_nodes_percentage_for_static_drift() {
    let docs = static_cluster(4, "50%", None, &["a", "b", "c", "d"]);
    // Both in one command, as Karpenter reserves them in one computation.
    let out = run(&docs, false);
    let d = decisions(&out);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].2, ["a", "b"]);
    assert_eq!(out.disruption.decisions[0].replacements.len(), 2);
}

/// "should respect budgets for multiple static nodepools" and "should
/// handle drift for multiple static NodePools independently"
#[test]
fn should_handle_drift_for_multiple_static_node_pools_independently() {
    let mut docs = static_cluster(2, "1", None, &["a", "b"]);
    let mut other = pool(
        "other",
        json!({"consolidateAfter": "Never", "budgets": [{"nodes": "2"}]}),
        &["on-demand"],
    );
    other["spec"]["replicas"] = json!(2);
    docs.push(other);
    for n in ["x", "y"] {
        node(&busy(n), "other", &mut docs);
        drifted(&mut docs, &format!("claim-{n}"));
    }
    let mut taken = drifts(&docs);
    taken.sort();
    // One of `default`'s (budget 1), both of `other`'s (budget 2).
    assert_eq!(taken.len(), 3, "{taken:?}");
    assert!(taken.contains(&"x".to_string()) && taken.contains(&"y".to_string()));
}

/// "should not drift nodes when we cannot acquire limits"
#[test]
fn should_not_drift_nodes_when_we_cannot_acquire_limits() {
    let docs = static_cluster(2, "100%", Some("2"), &["a", "b"]);
    assert!(drifts(&docs).is_empty(), "{:?}", drifts(&docs));
}

/// "should drift nodes when we can acquire limits"
#[test]
fn should_drift_nodes_when_we_can_acquire_limits() {
    let docs = static_cluster(2, "100%", Some("4"), &["a", "b"]);
    assert_eq!(drifts(&docs).len(), 2, "{:?}", drifts(&docs));
}

/// "should drift partially when we can acquire some limits"
#[test]
fn should_drift_partially_when_we_can_acquire_some_limits() {
    let docs = static_cluster(3, "100%", Some("4"), &["a", "b", "c"]);
    assert_eq!(drifts(&docs).len(), 1, "{:?}", drifts(&docs));
}

/// "should wait until nodes are deprovisioned when we are overscaled"
#[test]
fn should_wait_until_nodes_are_deprovisioned_when_we_are_overscaled() {
    let docs = static_cluster(1, "100%", None, &["a", "b"]);
    let out = run(&docs, false);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    assert_eq!(kept_reason(&out, "a"), "policy");
}

/// "should handle zero replicas"
#[test]
fn should_handle_zero_replicas() {
    let docs = static_cluster(0, "100%", None, &["a"]);
    assert!(drifts(&docs).is_empty());
}

/// "should handle missing node limits gracefully"
#[test]
fn should_handle_missing_node_limits_gracefully() {
    let docs = static_cluster(3, "100%", None, &["a", "b", "c"]);
    assert_eq!(drifts(&docs).len(), 3, "{:?}", drifts(&docs));
}

/// "should ignore nodes without the drifted status condition"
#[test]
fn should_ignore_nodes_without_the_drifted_status_condition() {
    let mut docs = static_cluster(1, "100%", None, &[]);
    node(&busy("a"), "default", &mut docs);
    assert!(drifts(&docs).is_empty());
}

/// "should ignore nodes with the karpenter.sh/do-not-disrupt annotation"
#[test]
fn should_ignore_nodes_with_the_do_not_disrupt_annotation() {
    let mut docs = static_cluster(1, "100%", None, &["a"]);
    doc(&mut docs, "Node", "a")["metadata"]["annotations"] =
        json!({"karpenter.sh/do-not-disrupt": "true"});
    let out = run(&docs, false);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    assert_eq!(kept_reason(&out, "a"), "do-not-disrupt", "{:?}", kept(&out));
}
