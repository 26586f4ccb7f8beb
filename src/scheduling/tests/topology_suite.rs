//! Cases ported from Karpenter's `topology_test.go`, named after its `It`s.
//! The fake instance types offer on-demand capacity in test-zone-1..3 and
//! spot in test-zone-1..2.

use super::*;

fn app_pods(n: usize, prefix: &str, shape: impl Fn(&mut Pod)) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = pod(&format!("{prefix}-{i}"), 100, 0).with_label("app", "s");
            shape(&mut p);
            p
        })
        .collect()
}

fn spread_on(key: &str, max_skew: i32) -> TopologySpreadConstraint {
    TopologySpreadConstraint::new(key, max_skew, LabelSelector::match_labels(&[("app", "s")]))
}

/// Sorted pod counts per value of `key` over the new NodeClaims (Karpenter's
/// `ExpectSkew(...).To(ConsistOf(...))`), plus counts already placed.
fn skew(result: &SchedulingResult, key: &str, existing: &[(&str, usize)]) -> Vec<usize> {
    let mut per: BTreeMap<String, usize> =
        existing.iter().map(|(d, n)| (d.to_string(), *n)).collect();
    for c in &result.new_node_claims {
        let domain = if key == labels::ZONE {
            c.zone.clone()
        } else if key == labels::CAPACITY_TYPE {
            c.capacity_type.label_value().to_string()
        } else {
            c.labels.get(key).cloned().unwrap_or_default()
        };
        *per.entry(domain).or_insert(0) += c.pods.len();
    }
    let mut counts: Vec<usize> = per.into_values().filter(|n| *n > 0).collect();
    counts.sort_unstable();
    counts
}

fn zones_pool(zones: &[&str]) -> NodePoolSpec {
    let mut p = pool("default", 4);
    p.requirements.add(req(labels::ZONE, Operator::In, zones));
    p
}

/// A node in `zone` with `n` pods labelled `app=s` already running.
fn zone_node(name: &str, zone: &str, n: usize) -> ExistingNode {
    ExistingNode {
        name: name.into(),
        labels: BTreeMap::from([(labels::ZONE.to_string(), zone.to_string())]),
        allocatable: Resources::cpu_memory(1000, GIB).with_pods(20),
        capacity: Resources::cpu_memory(1000, GIB).with_pods(20),
        pods: (0..n)
            .map(|i| pod(&format!("{name}-old-{i}"), 100, 0).with_label("app", "s"))
            .collect(),
        initialized: true,
        ..ExistingNode::default()
    }
}

fn solve_with_nodes(
    pools: Vec<NodePoolSpec>,
    nodes: Vec<ExistingNode>,
    pods: Vec<Pod>,
) -> SchedulingResult {
    Scheduler::new(SchedulerInput {
        node_pools: pools,
        existing_nodes: nodes,
        pods,
        ..SchedulerInput::default()
    })
    .solve()
}

#[test]
fn should_ignore_unknown_topology_keys() {
    let mut spread = app_pods(1, "s", |p| {
        p.topology_spread = vec![spread_on("unknown", 1)]
    });
    spread.push(pod("plain", 100, 0));
    let result = solve(vec![pool("default", 4)], spread);
    assert_eq!(result.errors.len(), 1);
    assert_eq!(result.errors[0].pod, "default/s-0");
    claim_of(&result, "plain");
}

#[test]
fn should_not_spread_when_a_nil_label_selector_is_defined() {
    let pods = app_pods(2, "s", |p| {
        p.topology_spread = vec![TopologySpreadConstraint {
            selector: None,
            ..spread_on(labels::ZONE, 1)
        }]
    });
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(skew(&result, labels::ZONE, &[]), vec![2]);
}

#[test]
fn should_balance_pods_across_zones_match_labels() {
    let pods = app_pods(4, "s", |p| {
        p.topology_spread = vec![spread_on(labels::ZONE, 1)]
    });
    let result = solve(vec![pool("default", 4)], pods);
    assert_eq!(skew(&result, labels::ZONE, &[]), vec![1, 1, 2]);
}

#[test]
fn should_balance_pods_across_zones_match_expressions() {
    let pods = app_pods(4, "s", |p| {
        p.topology_spread = vec![TopologySpreadConstraint {
            selector: Some(LabelSelector {
                expressions: vec![SelectorExpression {
                    key: "app".into(),
                    operator: Operator::In,
                    values: vec!["s".into()],
                }],
            }),
            ..spread_on(labels::ZONE, 1)
        }]
    });
    let result = solve(vec![pool("default", 4)], pods);
    assert_eq!(skew(&result, labels::ZONE, &[]), vec![1, 1, 2]);
}

#[test]
fn should_respect_nodepool_zonal_constraints_subset_with_requirements() {
    let pods = app_pods(4, "s", |p| {
        p.topology_spread = vec![spread_on(labels::ZONE, 1)]
    });
    let result = solve(vec![zones_pool(&["test-zone-1", "test-zone-2"])], pods);
    assert_eq!(skew(&result, labels::ZONE, &[]), vec![2, 2]);
}

#[test]
fn should_respect_nodepool_zonal_constraints_subset_with_labels() {
    let mut np = pool("default", 4);
    np.labels.insert(labels::ZONE.into(), "test-zone-1".into());
    let pods = app_pods(4, "s", |p| {
        p.topology_spread = vec![spread_on(labels::ZONE, 1)]
    });
    let result = solve(vec![np], pods);
    assert_eq!(skew(&result, labels::ZONE, &[]), vec![4]);
}

#[test]
fn should_respect_nodepool_zonal_constraints_subset_with_requirements_and_labels() {
    let mut np = zones_pool(&["test-zone-1", "test-zone-2"]);
    np.labels.insert(labels::ZONE.into(), "test-zone-1".into());
    let pods = app_pods(4, "s", |p| {
        p.topology_spread = vec![spread_on(labels::ZONE, 1)]
    });
    let result = solve(vec![np], pods);
    assert_eq!(skew(&result, labels::ZONE, &[]), vec![4]);
}

#[test]
fn should_respect_nodepool_zonal_constraints_subset_with_labels_across_nodepools() {
    let mut first = zones_pool(&["test-zone-1", "test-zone-2"]);
    first
        .labels
        .insert(labels::ZONE.into(), "test-zone-1".into());
    let mut second = pool("second", 4);
    second
        .labels
        .insert(labels::ZONE.into(), "test-zone-2".into());
    let pods = app_pods(4, "s", |p| {
        p.topology_spread = vec![spread_on(labels::ZONE, 1)]
    });
    let result = solve(vec![first, second], pods);
    assert_eq!(skew(&result, labels::ZONE, &[]), vec![2, 2]);
}

#[test]
fn should_schedule_to_the_non_minimum_domain_if_its_all_thats_available() {
    // Zones 1 and 2 hold one pod each; the pool now offers zone 3 only.
    let pods = app_pods(10, "s", |p| {
        p.requests = Resources::cpu_memory(1100, 0);
        p.topology_spread = vec![spread_on(labels::ZONE, 5)];
    });
    let result = solve_with_nodes(
        vec![zones_pool(&["test-zone-3"])],
        vec![
            zone_node("n1", "test-zone-1", 1),
            zone_node("n2", "test-zone-2", 1),
        ],
        pods,
    );
    assert_eq!(
        skew(
            &result,
            labels::ZONE,
            &[("test-zone-1", 1), ("test-zone-2", 1)]
        ),
        vec![1, 1, 6]
    );
    assert_eq!(result.errors.len(), 4);
}

#[test]
fn should_only_schedule_to_minimum_domains_if_already_violating_max_skew() {
    let pods = app_pods(3, "s", |p| {
        p.requests = Resources::cpu_memory(1100, 0);
        p.topology_spread = vec![spread_on(labels::ZONE, 1)];
    });
    let result = solve_with_nodes(
        vec![pool("default", 4)],
        vec![zone_node("n1", "test-zone-1", 3)],
        pods,
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(
        skew(&result, labels::ZONE, &[("test-zone-1", 3)]),
        vec![1, 2, 3]
    );
}

#[test]
fn should_not_violate_max_skew_when_unsat_do_not_schedule() {
    let pods = app_pods(10, "s", |p| {
        p.requests = Resources::cpu_memory(1100, 0);
        p.topology_spread = vec![spread_on(labels::ZONE, 1)];
    });
    let result = solve_with_nodes(
        vec![zones_pool(&["test-zone-2", "test-zone-3"])],
        vec![zone_node("n1", "test-zone-1", 1)],
        pods,
    );
    assert_eq!(
        skew(&result, labels::ZONE, &[("test-zone-1", 1)]),
        vec![1, 2, 2]
    );
    assert_eq!(result.errors.len(), 6);
}

#[test]
fn should_only_count_running_scheduled_pods_with_matching_labels_scheduled_to_nodes_with_a_corresponding_domain()
 {
    let mut first = zone_node("first", "test-zone-1", 2);
    first.pods.push(pod("unlabelled", 100, 0));
    let mut other_ns = pod("other-ns", 100, 0).with_label("app", "s");
    other_ns.namespace = "elsewhere".into();
    first.pods.push(other_ns);
    let second = zone_node("second", "test-zone-2", 1);
    // No zone label: its pod is not counted.
    let mut third = zone_node("third", "", 1);
    third.labels.clear();
    // Full nodes: the pending pods need new ones.
    let mut nodes = vec![first, second, third];
    for n in &mut nodes {
        n.allocatable = Resources::cpu_memory(0, 0);
    }
    let pods = app_pods(2, "s", |p| {
        p.topology_spread = vec![spread_on(labels::ZONE, 1)]
    });
    let result = solve_with_nodes(vec![pool("default", 4)], nodes, pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(
        skew(
            &result,
            labels::ZONE,
            &[("test-zone-1", 2), ("test-zone-2", 1)]
        ),
        vec![1, 2, 2]
    );
}

#[test]
fn should_respect_min_domains_constraints() {
    let pods = app_pods(3, "s", |p| {
        p.topology_spread = vec![TopologySpreadConstraint {
            min_domains: Some(3),
            ..spread_on(labels::ZONE, 1)
        }]
    });
    let result = solve(vec![zones_pool(&["test-zone-1", "test-zone-2"])], pods);
    assert_eq!(skew(&result, labels::ZONE, &[]), vec![1, 1]);
    assert_eq!(result.errors.len(), 1);
}

#[test]
fn satisfied_min_domains_constraints_equal_should_allow_expected_pod_scheduling() {
    let pods = app_pods(11, "s", |p| {
        p.topology_spread = vec![TopologySpreadConstraint {
            min_domains: Some(3),
            ..spread_on(labels::ZONE, 1)
        }]
    });
    let result = solve(
        vec![zones_pool(&["test-zone-1", "test-zone-2", "test-zone-3"])],
        pods,
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(skew(&result, labels::ZONE, &[]), vec![3, 4, 4]);
}

#[test]
fn satisfied_min_domains_constraints_greater_than_minimum_should_allow_expected_pod_scheduling() {
    let pods = app_pods(11, "s", |p| {
        p.topology_spread = vec![TopologySpreadConstraint {
            min_domains: Some(2),
            ..spread_on(labels::ZONE, 1)
        }]
    });
    let result = solve(
        vec![zones_pool(&["test-zone-1", "test-zone-2", "test-zone-3"])],
        pods,
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(skew(&result, labels::ZONE, &[]), vec![3, 4, 4]);
}

#[test]
fn should_balance_pods_across_nodes() {
    let pods = app_pods(4, "s", |p| {
        p.topology_spread = vec![spread_on(labels::HOSTNAME, 1)]
    });
    let result = solve(vec![pool("default", 4)], pods);
    assert_eq!(result.new_node_claims.len(), 4);
    assert!(result.new_node_claims.iter().all(|c| c.pods.len() == 1));
}

#[test]
fn should_balance_pods_on_the_same_hostname_up_to_maxskew() {
    let pods = app_pods(4, "s", |p| {
        p.topology_spread = vec![spread_on(labels::HOSTNAME, 4)]
    });
    let result = solve(vec![pool("default", 4)], pods);
    assert_eq!(result.new_node_claims.len(), 1);
    assert_eq!(result.new_node_claims[0].pods.len(), 4);
}

#[test]
fn balance_multiple_deployments_with_hostname_topology_spread() {
    let mut pods = Vec::new();
    for app in ["app1", "app2"] {
        for i in 0..2 {
            let mut p = pod(&format!("{app}-{i}"), 100, 0).with_label("app", app);
            p.topology_spread = vec![TopologySpreadConstraint::new(
                labels::HOSTNAME,
                1,
                LabelSelector::match_labels(&[("app", app)]),
            )];
            pods.push(p);
        }
    }
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    // Each node holds one pod of each deployment at most.
    assert_eq!(result.new_node_claims.len(), 2);
    for c in &result.new_node_claims {
        assert_eq!(c.pods.len(), 2);
    }
}

#[test]
fn should_balance_pods_across_capacity_types() {
    let pods = app_pods(4, "s", |p| {
        p.topology_spread = vec![spread_on(labels::CAPACITY_TYPE, 1)]
    });
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(skew(&result, labels::CAPACITY_TYPE, &[]), vec![2, 2]);
}

#[test]
fn should_respect_nodepool_capacity_type_constraints() {
    let mut np = pool("default", 4);
    np.requirements.add(req(
        labels::CAPACITY_TYPE,
        Operator::In,
        &["spot", "on-demand"],
    ));
    let pods = app_pods(4, "s", |p| {
        p.topology_spread = vec![spread_on(labels::CAPACITY_TYPE, 1)]
    });
    let result = solve(vec![np], pods);
    assert_eq!(skew(&result, labels::CAPACITY_TYPE, &[]), vec![2, 2]);
}

#[test]
fn should_limit_spread_options_by_node_selector() {
    let mut pods = app_pods(5, "one", |p| {
        p.topology_spread = vec![spread_on(labels::ZONE, 1)];
        p.node_selector
            .insert(labels::ZONE.into(), "test-zone-1".into());
    });
    pods.extend(app_pods(10, "two", |p| {
        p.topology_spread = vec![spread_on(labels::ZONE, 1)];
        p.node_selector
            .insert(labels::ZONE.into(), "test-zone-2".into());
    }));
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(skew(&result, labels::ZONE, &[]), vec![5, 10]);
}

#[test]
fn should_limit_spread_options_by_node_requirements() {
    let pods = app_pods(10, "s", |p| {
        p.topology_spread = vec![spread_on(labels::ZONE, 1)];
        p.required_node_affinity = vec![
            [req(
                labels::ZONE,
                Operator::In,
                &["test-zone-1", "test-zone-2"],
            )]
            .into_iter()
            .collect(),
        ];
    });
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(skew(&result, labels::ZONE, &[]), vec![5, 5]);
}

#[test]
fn should_limit_spread_options_by_required_node_affinity() {
    let zone_nodes = |a: usize, b: usize| {
        vec![
            zone_node("n1", "test-zone-1", a),
            zone_node("n2", "test-zone-2", b),
        ]
    };
    // Zones 1 and 2 hold three pods each; a pod for zones 2 or 3 goes to the
    // empty zone 3 even though the skew is exceeded, as it improves it.
    let pods = app_pods(1, "s", |p| {
        p.topology_spread = vec![spread_on(labels::ZONE, 1)];
        p.required_node_affinity = vec![
            [req(
                labels::ZONE,
                Operator::In,
                &["test-zone-2", "test-zone-3"],
            )]
            .into_iter()
            .collect(),
        ];
    });
    let mut nodes = zone_nodes(3, 3);
    for n in &mut nodes {
        n.allocatable = Resources::cpu_memory(0, 0);
    }
    let result = solve_with_nodes(vec![pool("default", 4)], nodes, pods);
    assert_eq!(
        skew(
            &result,
            labels::ZONE,
            &[("test-zone-1", 3), ("test-zone-2", 3)]
        ),
        vec![1, 3, 3]
    );
}

#[test]
fn should_limit_spread_options_by_node_affinity_capacity_type() {
    let pods = app_pods(3, "s", |p| {
        p.topology_spread = vec![spread_on(labels::CAPACITY_TYPE, 1)];
        p.required_node_affinity = vec![
            [req(labels::CAPACITY_TYPE, Operator::In, &["spot"])]
                .into_iter()
                .collect(),
        ];
    });
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(skew(&result, labels::CAPACITY_TYPE, &[]), vec![3]);
}

/// A full node with `labels` and one pod labelled `app=s`.
fn full_node(name: &str, node_labels: &[(&str, &str)]) -> ExistingNode {
    ExistingNode {
        name: name.into(),
        labels: node_labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        pods: vec![pod(&format!("{name}-old"), 100, 0).with_label("app", "s")],
        initialized: true,
        ..ExistingNode::default()
    }
}

fn ct_pool(capacity_type: &str) -> NodePoolSpec {
    let mut np = pool("default", 4);
    np.requirements
        .add(req(labels::CAPACITY_TYPE, Operator::In, &[capacity_type]));
    np
}

#[test]
fn should_not_violate_max_skew_when_unsat_do_not_schedule_capacity_type() {
    let pods = app_pods(5, "s", |p| {
        p.requests = Resources::cpu_memory(1100, 0);
        p.topology_spread = vec![spread_on(labels::CAPACITY_TYPE, 1)];
    });
    let result = solve_with_nodes(
        vec![ct_pool("on-demand")],
        vec![full_node("spot-node", &[(labels::CAPACITY_TYPE, "spot")])],
        pods,
    );
    assert_eq!(
        skew(&result, labels::CAPACITY_TYPE, &[("spot", 1)]),
        vec![1, 2]
    );
    assert_eq!(result.errors.len(), 3);
}

#[test]
fn should_violate_max_skew_when_unsat_schedule_anyway_capacity_type() {
    let pods = app_pods(5, "s", |p| {
        p.requests = Resources::cpu_memory(1100, 0);
        p.topology_spread = vec![TopologySpreadConstraint {
            when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
            ..spread_on(labels::CAPACITY_TYPE, 1)
        }];
    });
    let result = solve_with_nodes(
        vec![ct_pool("on-demand")],
        vec![full_node("spot-node", &[(labels::CAPACITY_TYPE, "spot")])],
        pods,
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(
        skew(&result, labels::CAPACITY_TYPE, &[("spot", 1)]),
        vec![1, 5]
    );
}

#[test]
fn should_balance_pods_across_capacity_types_node_required_affinity_constrained() {
    // The on-demand pod in zone 1 is on a node the new pods' affinity
    // excludes, so it does not count: all five go to one spot domain.
    let pods = app_pods(5, "s", |p| {
        p.topology_spread = vec![spread_on(labels::CAPACITY_TYPE, 1)];
        p.required_node_affinity = vec![
            [
                req(labels::ZONE, Operator::In, &["test-zone-2"]),
                req(labels::CAPACITY_TYPE, Operator::In, &["spot"]),
            ]
            .into_iter()
            .collect(),
        ];
    });
    let result = solve_with_nodes(
        vec![pool("default", 4)],
        vec![full_node(
            "od-node",
            &[
                (labels::CAPACITY_TYPE, "on-demand"),
                (labels::ZONE, "test-zone-1"),
            ],
        )],
        pods,
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(
        skew(&result, labels::CAPACITY_TYPE, &[("on-demand", 1)]),
        vec![1, 5]
    );
}

#[test]
fn should_balance_pods_across_capacity_types_no_constraints() {
    // Without a selector the on-demand pod counts: two spot pods at most.
    let pods = app_pods(5, "s", |p| {
        p.requests = Resources::cpu_memory(2000, 0);
        p.topology_spread = vec![spread_on(labels::CAPACITY_TYPE, 1)];
    });
    let result = solve_with_nodes(
        vec![ct_pool("spot")],
        vec![full_node(
            "od-node",
            &[(labels::CAPACITY_TYPE, "on-demand")],
        )],
        pods,
    );
    assert_eq!(
        skew(&result, labels::CAPACITY_TYPE, &[("on-demand", 1)]),
        vec![1, 2]
    );
    assert_eq!(result.errors.len(), 3);
}
