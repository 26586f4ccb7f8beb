//! Topology spread, pod affinity and anti-affinity, and host ports.

use super::*;

#[test]
fn host_ports_force_separate_nodes() {
    let port = HostPort {
        port: 8080,
        protocol: "TCP".into(),
        host_ip: String::new(),
    };
    let mut a = pod("a", 100, 0);
    a.host_ports = vec![port.clone()];
    let mut b = pod("b", 100, 0);
    b.host_ports = vec![port.clone()];
    let mut c = pod("c", 100, 0);
    c.host_ports = vec![HostPort { port: 9090, ..port }];
    let result = solve(vec![pool("default", 4)], vec![a, b, c]);
    assert!(result.errors.is_empty());
    assert_eq!(result.new_node_claims.len(), 2);
    assert_ne!(claim_of(&result, "a").pods, claim_of(&result, "b").pods);
}

#[test]
fn hostname_anti_affinity_forces_separate_nodes() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = pod(&format!("web-{i}"), 100, 0).with_label("app", "web");
            p.pod_anti_affinity = vec![anti("web", labels::HOSTNAME)];
            p
        })
        .collect();
    let mut others: Vec<Pod> = (0..3).map(|i| pod(&format!("other-{i}"), 100, 0)).collect();
    others.extend(pods);
    let result = solve(vec![pool("default", 4)], others);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(result.new_node_claims.len(), 3);
    for c in &result.new_node_claims {
        assert_eq!(c.pods.iter().filter(|p| p.name.contains("web")).count(), 1);
    }
}

#[test]
fn anti_affinity_of_running_pod_repels_matching_pods() {
    let mut running = pod("db-0", 100, 0).with_label("app", "db");
    running.pod_anti_affinity = vec![anti("web", labels::HOSTNAME)];
    let node = ExistingNode {
        name: "node-1".into(),
        labels: [(labels::ZONE.to_string(), "test-zone-1".to_string())].into(),
        allocatable: Resources::cpu_memory(8000, 16 * GIB).with_pods(100),
        capacity: Resources::cpu_memory(8000, 16 * GIB).with_pods(100),
        pods: vec![running],
        initialized: true,
        ..ExistingNode::default()
    };
    let input = SchedulerInput {
        node_pools: vec![pool("default", 4)],
        existing_nodes: vec![node],
        pods: vec![
            pod("web", 100, 0).with_label("app", "web"),
            pod("api", 100, 0).with_label("app", "api"),
        ],
        ..SchedulerInput::default()
    };
    let result = Scheduler::new(input).solve();
    assert_eq!(
        result.existing_node_placements,
        vec![ExistingPlacement {
            pod: PodKey::new("default", "api"),
            node: "node-1".into()
        }]
    );
    assert_eq!(
        claim_of(&result, "web").pods,
        vec!["default/web".to_string()]
    );
}

#[test]
fn zone_anti_affinity_blocks_every_possible_zone() {
    let pods: Vec<Pod> = (0..2)
        .map(|i| {
            let mut p = pod(&format!("z-{i}"), 100, 0).with_label("app", "z");
            p.pod_anti_affinity = vec![anti("z", labels::ZONE)];
            p
        })
        .collect();
    let result = solve(vec![pool("default", 4)], pods);
    // The first pod's NodeClaim could land in any zone, so all are blocked.
    assert_eq!(result.new_node_claims.len(), 1);
    assert_eq!(result.errors.len(), 1);
    assert!(
        result.errors[0].reason.contains("anti-affinity"),
        "{}",
        result.errors[0].reason
    );
}

#[test]
fn zone_spread_counts_running_pods() {
    let running: Vec<Pod> = (0..2)
        .map(|i| pod(&format!("old-{i}"), 100, 0).with_label("app", "s"))
        .collect();
    let node = ExistingNode {
        name: "node-1".into(),
        labels: [(labels::ZONE.to_string(), "test-zone-1".to_string())].into(),
        allocatable: Resources::cpu_memory(8000, 16 * GIB).with_pods(100),
        capacity: Resources::cpu_memory(8000, 16 * GIB).with_pods(100),
        pods: running,
        initialized: true,
        ..ExistingNode::default()
    };
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = pod(&format!("s-{i}"), 100, 0).with_label("app", "s");
            p.topology_spread = vec![spread(labels::ZONE, "s")];
            p
        })
        .collect();
    let input = SchedulerInput {
        node_pools: vec![pool("default", 4)],
        existing_nodes: vec![node],
        pods,
        ..SchedulerInput::default()
    };
    let result = Scheduler::new(input).solve();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert!(
        result.existing_node_placements.is_empty(),
        "zone 1 already has 2 pods"
    );
    let mut zones: Vec<&str> = result
        .new_node_claims
        .iter()
        .map(|c| c.zone.as_str())
        .collect();
    zones.sort();
    assert!(!zones.contains(&"test-zone-1"));
    let per_zone = |z: &str| -> usize {
        result
            .new_node_claims
            .iter()
            .filter(|c| c.zone == z)
            .map(|c| c.pods.len())
            .sum()
    };
    assert_eq!(per_zone("test-zone-2") + per_zone("test-zone-3"), 3);
    assert!(per_zone("test-zone-2").abs_diff(per_zone("test-zone-3")) <= 1);
}

#[test]
fn hostname_spread_limits_pods_per_node() {
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            let mut p = pod(&format!("h-{i}"), 100, 0).with_label("app", "h");
            p.topology_spread = vec![TopologySpreadConstraint {
                max_skew: 2,
                ..spread(labels::HOSTNAME, "h")
            }];
            p
        })
        .collect();
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty());
    assert_eq!(result.new_node_claims.len(), 2);
    assert!(result.new_node_claims.iter().all(|c| c.pods.len() == 2));
}

#[test]
fn self_affinity_on_zone_keeps_pods_together_and_unmatched_affinity_fails() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = pod(&format!("a-{i}"), 2500, 0).with_label("team", "x");
            p.pod_affinity = vec![PodAffinityTerm::new(
                LabelSelector::match_labels(&[("team", "x")]),
                labels::ZONE,
            )];
            p
        })
        .collect();
    let mut lonely = pod("lonely", 100, 0);
    lonely.pod_affinity = vec![PodAffinityTerm::new(
        LabelSelector::match_labels(&[("team", "nobody")]),
        labels::ZONE,
    )];
    let mut all = pods;
    all.push(lonely);
    let result = solve(vec![pool("default", 3)], all);
    let zones: Vec<&str> = ["a-0", "a-1", "a-2"]
        .iter()
        .map(|p| claim_of(&result, p).zone.as_str())
        .collect();
    assert!(zones.windows(2).all(|w| w[0] == w[1]), "{zones:?}");
    assert_eq!(result.errors.len(), 1);
    assert_eq!(result.errors[0].pod, "default/lonely");
}

#[test]
fn nodes_without_the_topology_label_are_not_spread_domains() {
    let unlabelled = ExistingNode {
        name: "bare".into(),
        allocatable: Resources::cpu_memory(8000, 16 * GIB).with_pods(100),
        capacity: Resources::cpu_memory(8000, 16 * GIB).with_pods(100),
        initialized: true,
        ..ExistingNode::default()
    };
    let mut spread_pod = pod("s", 100, 0).with_label("app", "s");
    spread_pod.topology_spread = vec![spread(labels::ZONE, "s")];
    let input = SchedulerInput {
        node_pools: vec![pool("default", 4)],
        existing_nodes: vec![unlabelled],
        pods: vec![spread_pod, pod("plain", 100, 0)],
        ..SchedulerInput::default()
    };
    let result = Scheduler::new(input).solve();
    assert_eq!(
        result.existing_node_placements,
        vec![ExistingPlacement {
            pod: PodKey::new("default", "plain"),
            node: "bare".into()
        }]
    );
    assert!(claim_of(&result, "s").zone.starts_with("test-zone-"));
}

fn spread_pods(n: usize, constraint: &TopologySpreadConstraint) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = pod(&format!("s-{i}"), 100, 0).with_label("app", "s");
            p.topology_spread = vec![constraint.clone()];
            p
        })
        .collect()
}

#[test]
fn min_domains_caps_pods_per_zone_when_domains_are_too_few() {
    let plain = spread(labels::ZONE, "s");
    let result = solve(vec![pool("default", 4)], spread_pods(4, &plain));
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let with_min = TopologySpreadConstraint {
        min_domains: Some(5),
        ..plain
    };
    let result = solve(vec![pool("default", 4)], spread_pods(4, &with_min));
    // Only 3 zones exist, so the global minimum counts as 0: one pod per zone.
    assert_eq!(result.errors.len(), 1, "{:?}", result.new_node_claims);
    assert!(result.errors[0].reason.contains("topology spread"));
}

#[test]
fn schedule_anyway_is_relaxed_and_node_affinity_policy_ignore_counts_all_zones() {
    let hard = TopologySpreadConstraint {
        node_affinity_policy: NodeInclusionPolicy::Ignore,
        ..spread(labels::ZONE, "s")
    };
    let pinned = |c: &TopologySpreadConstraint| -> Vec<Pod> {
        spread_pods(2, c)
            .into_iter()
            .map(|mut p| {
                p.node_selector
                    .insert(labels::ZONE.into(), "test-zone-1".into());
                p
            })
            .collect()
    };
    // Ignore: zones 2 and 3 count with 0 pods, so a second pod in zone 1 breaks maxSkew.
    let result = solve(vec![pool("default", 4)], pinned(&hard));
    assert_eq!(result.errors.len(), 1);
    // Honor (default): only zone 1 is eligible for these pods, so both fit.
    let honor = spread(labels::ZONE, "s");
    let result = solve(vec![pool("default", 4)], pinned(&honor));
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    // ScheduleAnyway: the constraint is relaxed instead of failing.
    let soft = TopologySpreadConstraint {
        when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
        ..hard
    };
    let result = solve(vec![pool("default", 4)], pinned(&soft));
    assert!(result.errors.is_empty(), "{:?}", result.errors);
}

#[test]
fn match_label_keys_split_spread_groups_by_label_value() {
    let mut constraint = spread(labels::HOSTNAME, "s");
    constraint.match_label_keys = vec!["rev".into()];
    let pods: Vec<Pod> = spread_pods(2, &constraint)
        .into_iter()
        .enumerate()
        .map(|(i, p)| p.with_label("rev", &i.to_string()))
        .collect();
    // Different revisions are counted separately, so both share one node.
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty());
    assert_eq!(result.new_node_claims.len(), 1);
    // Without matchLabelKeys, maxSkew 1 on hostname puts them on separate nodes.
    let result = solve(
        vec![pool("default", 4)],
        spread_pods(2, &spread(labels::HOSTNAME, "s")),
    );
    assert_eq!(result.new_node_claims.len(), 2);
}

#[test]
fn node_taints_policy_honor_leaves_out_domains_of_untolerated_pools() {
    // "open" reaches test-zone-1 and -2 (spot); "tainted" alone reaches
    // test-zone-3.
    let mut open = pool("open", 4);
    open.requirements.add(req(
        labels::ZONE,
        Operator::In,
        &["test-zone-1", "test-zone-2"],
    ));
    let mut tainted = pool("tainted", 4);
    tainted.taints = vec![Taint::new("dedicated", "x", TaintEffect::NoSchedule)];
    tainted
        .requirements
        .add(req(labels::ZONE, Operator::In, &["test-zone-3"]));
    let honor = TopologySpreadConstraint {
        node_taints_policy: NodeInclusionPolicy::Honor,
        ..spread(labels::ZONE, "s")
    };
    let zones = |result: &SchedulingResult| -> BTreeMap<String, usize> {
        let mut per_zone = BTreeMap::new();
        for c in &result.new_node_claims {
            *per_zone.entry(c.zone.clone()).or_insert(0) += c.pods.len();
        }
        per_zone
    };
    // Honor: zone 3 is not eligible, so the skew is over zones 1 and 2 only.
    let result = solve(vec![open.clone(), tainted.clone()], spread_pods(4, &honor));
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(
        zones(&result),
        BTreeMap::from([
            ("test-zone-1".to_string(), 2),
            ("test-zone-2".to_string(), 2)
        ])
    );
    // Ignore (the default): empty zone 3 holds the minimum at 0, and no pod
    // may go there, so only one pod per reachable zone fits.
    let result = solve(
        vec![open.clone(), tainted.clone()],
        spread_pods(4, &spread(labels::ZONE, "s")),
    );
    assert_eq!(result.errors.len(), 2, "{:?}", result.new_node_claims);
    // A pod that tolerates the taint counts zone 3 again and uses it.
    let tolerant: Vec<Pod> = spread_pods(3, &honor)
        .into_iter()
        .map(|mut p| {
            p.tolerations = vec![Toleration::exists("dedicated", None)];
            p
        })
        .collect();
    let result = solve(vec![open, tainted], tolerant);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(zones(&result).len(), 3, "{:?}", zones(&result));
}
