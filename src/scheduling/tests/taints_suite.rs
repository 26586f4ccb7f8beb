//! Taint and `nodeTaintsPolicy` cases ported from Karpenter's
//! `topology_test.go`, named after its `It`s.

use super::*;

fn tainted_pool() -> NodePoolSpec {
    let mut np = pool("default", 4);
    np.taints = vec![Taint::new(
        "test-key",
        "test-value",
        TaintEffect::NoSchedule,
    )];
    np
}

fn tolerating(name: &str, toleration: Toleration) -> Pod {
    let mut p = pod(name, 100, 0);
    p.tolerations = vec![toleration];
    p
}

#[test]
fn should_taint_nodes_with_nodepool_taints() {
    let p = tolerating(
        "a",
        Toleration::exists("test-key", Some(TaintEffect::NoSchedule)),
    );
    let result = solve(vec![tainted_pool()], vec![p]);
    assert_eq!(
        claim_of(&result, "a").taints,
        vec![Taint::new(
            "test-key",
            "test-value",
            TaintEffect::NoSchedule
        )]
    );
}

#[test]
fn should_schedule_pods_that_tolerate_nodepool_constraints() {
    let tolerant = vec![
        tolerating(
            "exists",
            Toleration::exists("test-key", Some(TaintEffect::NoSchedule)),
        ),
        tolerating(
            "equal",
            Toleration::equal("test-key", "test-value", Some(TaintEffect::NoSchedule)),
        ),
    ];
    let result = solve(vec![tainted_pool()], tolerant);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let intolerant = vec![
        pod("missing", 100, 0),
        tolerating("key-mismatch", Toleration::exists("invalid", None)),
        tolerating(
            "value-mismatch",
            Toleration::equal("test-key", "", Some(TaintEffect::NoSchedule)),
        ),
    ];
    let result = solve(vec![tainted_pool()], intolerant);
    assert!(result.new_node_claims.is_empty());
    assert_eq!(result.errors.len(), 3);
}

#[test]
fn should_provision_nodes_with_taints_and_schedule_pods_if_the_taint_is_only_a_startup_taint() {
    let mut np = pool("default", 4);
    np.startup_taints = vec![Taint::new(
        "ignore-me",
        "nothing-to-see-here",
        TaintEffect::NoSchedule,
    )];
    let result = solve(vec![np], vec![pod("a", 100, 0)]);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert!(claim_of(&result, "a").taints.is_empty());
}

#[test]
fn should_not_generate_taints_for_op_exists() {
    let p = tolerating(
        "a",
        Toleration::exists("test-key", Some(TaintEffect::NoExecute)),
    );
    let result = solve(vec![pool("default", 4)], vec![p]);
    assert!(claim_of(&result, "a").taints.is_empty());
}

/// Karpenter's NodeTaintsPolicy cases: a NodePool labelled `fake-label=baz`
/// and two tainted nodes in domains `foo` and `bar` the pods do not tolerate.
fn node_taints_policy_case(policy: NodeInclusionPolicy) -> SchedulingResult {
    let mut np = pool("default", 4);
    np.labels.insert("fake-label".into(), "baz".into());
    let node = |name: &str, domain: &str| ExistingNode {
        name: name.into(),
        labels: BTreeMap::from([("fake-label".to_string(), domain.to_string())]),
        taints: vec![Taint::new(
            "taintname",
            "taintvalue",
            TaintEffect::NoSchedule,
        )],
        allocatable: Resources::cpu_memory(100, GIB).with_pods(10),
        capacity: Resources::cpu_memory(100, GIB).with_pods(10),
        initialized: true,
        ..ExistingNode::default()
    };
    let pods = (0..5)
        .map(|i| {
            let mut p = pod(&format!("p-{i}"), 1000, 0).with_label("app", "x");
            p.topology_spread = vec![TopologySpreadConstraint {
                node_taints_policy: policy,
                ..TopologySpreadConstraint::new(
                    "fake-label",
                    1,
                    LabelSelector::match_labels(&[("app", "x")]),
                )
            }];
            p
        })
        .collect();
    Scheduler::new(SchedulerInput {
        node_pools: vec![np],
        existing_nodes: vec![node("node-1", "foo"), node("node-2", "bar")],
        pods,
        ..SchedulerInput::default()
    })
    .solve()
}

#[test]
fn should_balance_pods_across_a_label_node_taints_policy_ignore() {
    let result = node_taints_policy_case(NodeInclusionPolicy::Ignore);
    let placed: usize = result.new_node_claims.iter().map(|c| c.pods.len()).sum();
    assert_eq!(placed, 1);
    assert_eq!(result.errors.len(), 4);
}

#[test]
fn should_balance_pods_across_a_label_node_taints_policy_honor() {
    let result = node_taints_policy_case(NodeInclusionPolicy::Honor);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let placed: usize = result.new_node_claims.iter().map(|c| c.pods.len()).sum();
    assert_eq!(placed, 5);
}
