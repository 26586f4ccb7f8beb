//! Which domains a topology spread counts: only those of NodePools and nodes
//! the pod could use (`nodeAffinityPolicy: Honor`), from the pod's required
//! constraints and never its preferences.

use super::*;

const US_EAST_1: [&str; 6] = [
    "us-east-1a",
    "us-east-1b",
    "us-east-1c",
    "us-east-1d",
    "us-east-1e",
    "us-east-1f",
];

/// An on-demand type offered in every zone of us-east-1.
fn us_east_type(cpu: i64) -> InstanceType {
    let offerings = US_EAST_1
        .iter()
        .map(|z| Offering::new(z, CapacityType::OnDemand, 0.05 * cpu as f64))
        .collect();
    InstanceType::new(
        &format!("m-{cpu}"),
        Requirements::new(),
        offerings,
        Resources::cpu_memory(cpu * 1000, 4 * cpu * GIB).with_pods(20),
        Overhead::default(),
    )
}

/// `dedicated` (label `team=a`, zones a–c) and `general` (no label, all six zones).
fn dedicated_and_general() -> Vec<NodePoolSpec> {
    let types = Arc::new(vec![us_east_type(2), us_east_type(8)]);
    let mut dedicated = NodePoolSpec {
        name: "dedicated".into(),
        instance_types: types.clone(),
        labels: BTreeMap::from([("team".to_string(), "a".to_string())]),
        ..NodePoolSpec::default()
    };
    dedicated.requirements.add(req(
        labels::ZONE,
        Operator::In,
        &["us-east-1a", "us-east-1b", "us-east-1c"],
    ));
    let general = NodePoolSpec {
        name: "general".into(),
        instance_types: types,
        ..NodePoolSpec::default()
    };
    vec![dedicated, general]
}

fn web_pods(n: usize, shape: impl Fn(&mut Pod)) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = pod(&format!("web-{i}"), 500, GIB).with_label("app", "web");
            shape(&mut p);
            p
        })
        .collect()
}

fn zone_spread() -> TopologySpreadConstraint {
    TopologySpreadConstraint::new(
        labels::ZONE,
        1,
        LabelSelector::match_labels(&[("app", "web")]),
    )
}

/// Pods per zone over the new NodeClaims.
fn per_zone(result: &SchedulingResult) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for c in &result.new_node_claims {
        *out.entry(c.zone.clone()).or_insert(0) += c.pods.len();
    }
    out
}

fn two_per_zone_in_a_b_c() -> BTreeMap<String, usize> {
    ["us-east-1a", "us-east-1b", "us-east-1c"]
        .into_iter()
        .map(|z| (z.to_string(), 2))
        .collect()
}

#[test]
fn should_only_count_domains_of_nodepools_compatible_with_the_node_selector() {
    let pods = web_pods(6, |p| {
        p.node_selector.insert("team".into(), "a".into());
        p.topology_spread = vec![zone_spread()];
    });
    let result = solve(dedicated_and_general(), pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(per_zone(&result), two_per_zone_in_a_b_c());
    assert!(
        result
            .new_node_claims
            .iter()
            .all(|c| c.node_pool == "dedicated")
    );
}

#[test]
fn should_only_count_domains_of_nodepools_compatible_with_required_node_affinity() {
    // Terms are ORed: the second term matches no NodePool, so only the
    // dedicated pool's zones are domains.
    let pods = web_pods(6, |p| {
        p.required_node_affinity = vec![
            [req("team", Operator::In, &["a"])].into_iter().collect(),
            [req("team", Operator::In, &["nobody"])]
                .into_iter()
                .collect(),
        ];
        p.topology_spread = vec![zone_spread()];
    });
    let result = solve(dedicated_and_general(), pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(per_zone(&result), two_per_zone_in_a_b_c());
}

#[test]
fn min_domains_counts_only_domains_the_pod_can_use() {
    // Three usable domains satisfy minDomains 3: the skew is over them alone.
    let pods = web_pods(6, |p| {
        p.node_selector.insert("team".into(), "a".into());
        p.topology_spread = vec![TopologySpreadConstraint {
            min_domains: Some(3),
            ..zone_spread()
        }];
    });
    let result = solve(dedicated_and_general(), pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(per_zone(&result), two_per_zone_in_a_b_c());

    // minDomains 4 with three usable domains: the global minimum is taken as
    // 0, so each domain takes one pod only.
    let pods = web_pods(6, |p| {
        p.node_selector.insert("team".into(), "a".into());
        p.topology_spread = vec![TopologySpreadConstraint {
            min_domains: Some(4),
            ..zone_spread()
        }];
    });
    let result = solve(dedicated_and_general(), pods);
    assert_eq!(result.errors.len(), 3, "{:?}", result.errors);
    assert!(per_zone(&result).values().all(|n| *n == 1));
}

#[test]
fn hostname_spread_with_a_node_selector_ignores_nodes_the_pod_cannot_use() {
    // An existing node of the general pool (no team label) holds two
    // matching pods; it neither takes the pods nor counts towards their skew.
    let other = ExistingNode {
        name: "general-node".into(),
        labels: BTreeMap::from([
            (labels::NODE_POOL.to_string(), "general".to_string()),
            (labels::ZONE.to_string(), "us-east-1d".to_string()),
        ]),
        allocatable: Resources::cpu_memory(8000, 32 * GIB).with_pods(20),
        capacity: Resources::cpu_memory(8000, 32 * GIB).with_pods(20),
        pods: (0..2)
            .map(|i| pod(&format!("old-{i}"), 100, 0).with_label("app", "web"))
            .collect(),
        initialized: true,
        ..ExistingNode::default()
    };
    let pods = web_pods(4, |p| {
        p.node_selector.insert("team".into(), "a".into());
        p.topology_spread = vec![TopologySpreadConstraint::new(
            labels::HOSTNAME,
            1,
            LabelSelector::match_labels(&[("app", "web")]),
        )];
    });
    let result = Scheduler::new(SchedulerInput {
        node_pools: dedicated_and_general(),
        existing_nodes: vec![other],
        pods,
        ..SchedulerInput::default()
    })
    .solve();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert!(result.existing_node_placements.is_empty());
    assert_eq!(result.new_node_claims.len(), 4);
    assert!(result.new_node_claims.iter().all(|c| c.pods.len() == 1));
}

#[test]
fn should_not_limit_spread_options_by_preferred_node_affinity() {
    let prefer_1_and_2: Requirements = [req(
        labels::ZONE,
        Operator::In,
        &["test-zone-1", "test-zone-2"],
    )]
    .into_iter()
    .collect();
    let pods = (0..6)
        .map(|i| {
            let mut p = pod(&format!("s-{i}"), 100, 0).with_label("app", "s");
            p.preferred_node_affinity = vec![Weighted {
                weight: 1,
                term: prefer_1_and_2.clone(),
            }];
            p.topology_spread = vec![TopologySpreadConstraint::new(
                labels::ZONE,
                1,
                LabelSelector::match_labels(&[("app", "s")]),
            )];
            p
        })
        .collect();
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(
        per_zone(&result),
        BTreeMap::from([
            ("test-zone-1".to_string(), 2),
            ("test-zone-2".to_string(), 2),
            ("test-zone-3".to_string(), 2),
        ])
    );
}

/// Karpenter's NodeAffinityPolicy cases: a NodePool labelled
/// `fake-label=baz, selector=value` and two nodes in domains `foo` and `bar`
/// whose `selector` label does not match the pods' node selector.
fn node_affinity_policy_case(policy: NodeInclusionPolicy) -> SchedulingResult {
    let mut np = pool("default", 4);
    np.labels = BTreeMap::from([
        ("fake-label".to_string(), "baz".to_string()),
        ("selector".to_string(), "value".to_string()),
    ]);
    let node = |name: &str, domain: &str| ExistingNode {
        name: name.into(),
        labels: BTreeMap::from([
            ("fake-label".to_string(), domain.to_string()),
            ("selector".to_string(), "mismatch".to_string()),
        ]),
        allocatable: Resources::cpu_memory(100, GIB).with_pods(10),
        capacity: Resources::cpu_memory(100, GIB).with_pods(10),
        initialized: true,
        ..ExistingNode::default()
    };
    let pods = (0..5)
        .map(|i| {
            let mut p = pod(&format!("p-{i}"), 1000, 0).with_label("app", "x");
            p.node_selector.insert("selector".into(), "value".into());
            p.topology_spread = vec![TopologySpreadConstraint {
                node_affinity_policy: policy,
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

fn scheduled(result: &SchedulingResult) -> usize {
    result
        .new_node_claims
        .iter()
        .map(|c| c.pods.len())
        .sum::<usize>()
        + result.existing_node_placements.len()
}

#[test]
fn should_balance_pods_across_a_label_node_affinity_policy_honor() {
    // Only the NodePool's domain `baz` counts: every pod lands there.
    let result = node_affinity_policy_case(NodeInclusionPolicy::Honor);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(scheduled(&result), 5);
    assert!(
        result
            .new_node_claims
            .iter()
            .all(|c| c.labels.get("fake-label").map(String::as_str) == Some("baz"))
    );
}

#[test]
fn should_balance_pods_across_a_label_node_affinity_policy_ignore() {
    // foo and bar count (empty) but cannot take the pods: one pod only.
    let result = node_affinity_policy_case(NodeInclusionPolicy::Ignore);
    assert_eq!(scheduled(&result), 1);
    assert_eq!(result.errors.len(), 4);
}
