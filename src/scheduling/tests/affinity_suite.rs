//! Pod affinity and anti-affinity cases ported from Karpenter's
//! `topology_test.go`, named after its `It`s.

use super::*;

fn term(labels: &[(&str, &str)], key: &str) -> PodAffinityTerm {
    PodAffinityTerm::new(LabelSelector::match_labels(labels), key)
}

const S2: (&str, &str) = ("security", "s2");

fn scheduled(result: &SchedulingResult) -> usize {
    result.new_node_claims.iter().map(|c| c.pods.len()).sum()
}

#[test]
fn should_schedule_a_pod_with_empty_pod_affinity_and_anti_affinity() {
    let result = solve(vec![pool("default", 4)], vec![pod("a", 100, 0)]);
    assert!(result.errors.is_empty());
    claim_of(&result, "a");
}

#[test]
fn should_respect_self_pod_affinity_hostname() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = pod(&format!("p-{i}"), 100, 0).with_label(S2.0, S2.1);
            p.pod_affinity = vec![term(&[S2], labels::HOSTNAME)];
            p
        })
        .collect();
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(result.new_node_claims.len(), 1);
}

#[test]
fn should_respect_self_pod_affinity_for_first_empty_topology_domain_only_hostname() {
    // The largest type holds 5 of these pods: one node with 5, the rest pending.
    let mut np = pool("default", 4);
    np.instance_types = Arc::new(vec![fake_type(4)]);
    let pods: Vec<Pod> = (0..10)
        .map(|i| {
            let mut p = pod(&format!("p-{i}"), 950, 0).with_label(S2.0, S2.1);
            p.pod_affinity = vec![term(&[S2], labels::HOSTNAME)];
            p
        })
        .collect();
    let result = solve(vec![np], pods);
    assert_eq!(result.new_node_claims.len(), 1);
    assert_eq!(scheduled(&result), 5);
    assert_eq!(result.errors.len(), 5);
}

#[test]
fn should_respect_self_pod_affinity_zone() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = pod(&format!("p-{i}"), 100, 0).with_label(S2.0, S2.1);
            p.pod_affinity = vec![term(&[S2], labels::ZONE)];
            p
        })
        .collect();
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let zones: std::collections::BTreeSet<&str> = result
        .new_node_claims
        .iter()
        .map(|c| c.zone.as_str())
        .collect();
    assert_eq!(zones.len(), 1);
}

#[test]
fn should_respect_self_pod_affinity_zone_w_constraint() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = pod(&format!("p-{i}"), 100, 0).with_label(S2.0, S2.1);
            p.pod_affinity = vec![term(&[S2], labels::ZONE)];
            p.node_selector
                .insert(labels::ZONE.into(), "test-zone-3".into());
            p
        })
        .collect();
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert!(
        result
            .new_node_claims
            .iter()
            .all(|c| c.zone == "test-zone-3")
    );
}

#[test]
fn should_separate_nodes_using_simple_pod_anti_affinity_on_hostname() {
    let target = pod("target", 100, 0).with_label(S2.0, S2.1);
    let mut avoider = pod("avoider", 100, 0);
    avoider.pod_anti_affinity = vec![term(&[S2], labels::HOSTNAME)];
    for pods in [
        vec![avoider.clone(), target.clone()],
        vec![target.clone(), avoider.clone()],
    ] {
        let result = solve(vec![pool("default", 4)], pods);
        assert!(result.errors.is_empty(), "{:?}", result.errors);
        assert_ne!(claim_of(&result, "target"), claim_of(&result, "avoider"));
    }
}

#[test]
fn should_not_violate_pod_anti_affinity_on_zone() {
    let mut pods: Vec<Pod> = ["test-zone-1", "test-zone-2", "test-zone-3"]
        .iter()
        .enumerate()
        .map(|(i, z)| {
            let mut p = pod(&format!("zone-{i}"), 2000, 0).with_label(S2.0, S2.1);
            p.node_selector.insert(labels::ZONE.into(), z.to_string());
            p
        })
        .collect();
    let mut aff = pod("aff", 100, 0);
    aff.pod_anti_affinity = vec![term(&[S2], labels::ZONE)];
    pods.push(aff);
    let result = solve(vec![pool("default", 4)], pods);
    assert_eq!(scheduled(&result), 3);
    assert_eq!(result.errors.len(), 1);
    assert_eq!(result.errors[0].pod, "default/aff");
}

#[test]
fn should_not_violate_pod_anti_affinity_on_zone_other_schedules_first() {
    let target = pod("target", 2000, 0).with_label(S2.0, S2.1);
    let mut aff = pod("aff", 100, 0);
    aff.pod_anti_affinity = vec![term(&[S2], labels::ZONE)];
    let result = solve(vec![pool("default", 4)], vec![target, aff]);
    claim_of(&result, "target");
    assert_eq!(result.errors.len(), 1);
    assert_eq!(result.errors[0].pod, "default/aff");
}

#[test]
fn should_not_violate_pod_anti_affinity_on_zone_inverse() {
    let mut pods: Vec<Pod> = ["test-zone-1", "test-zone-2", "test-zone-3"]
        .iter()
        .enumerate()
        .map(|(i, z)| {
            let mut p = pod(&format!("zone-{i}"), 2000, 0);
            p.pod_anti_affinity = vec![term(&[S2], labels::ZONE)];
            p.node_selector.insert(labels::ZONE.into(), z.to_string());
            p
        })
        .collect();
    pods.push(pod("aff", 100, 0).with_label(S2.0, S2.1));
    let result = solve(vec![pool("default", 4)], pods);
    assert_eq!(scheduled(&result), 3);
    assert_eq!(result.errors.len(), 1);
    assert_eq!(result.errors[0].pod, "default/aff");
}

#[test]
fn should_not_violate_pod_anti_affinity_on_zone_schrodinger() {
    // The pod with anti-affinity may land in any zone, so the selected pod
    // cannot schedule in the same batch.
    let mut anywhere = pod("anywhere", 2000, 0);
    anywhere.pod_anti_affinity = vec![term(&[S2], labels::ZONE)];
    let aff = pod("aff", 100, 0).with_label(S2.0, S2.1);
    let result = solve(vec![pool("default", 4)], vec![anywhere, aff]);
    claim_of(&result, "anywhere");
    assert_eq!(result.errors.len(), 1);
    assert_eq!(result.errors[0].pod, "default/aff");
}

#[test]
fn should_not_schedule_pods_with_affinity_to_a_non_existent_pod() {
    let pods: Vec<Pod> = (0..10)
        .map(|i| {
            let mut p = pod(&format!("p-{i}"), 100, 0);
            p.pod_affinity = vec![term(&[S2], labels::ZONE)];
            p
        })
        .collect();
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.new_node_claims.is_empty());
    assert_eq!(result.errors.len(), 10);
}

#[test]
fn should_fail_to_schedule_pods_with_unsatisfiable_dependencies() {
    let mut db = pod("db", 100, 0)
        .with_label("type", "db")
        .with_label("spread", "spread");
    db.pod_affinity = vec![term(
        &[("type", "web"), ("spread", "spread")],
        labels::HOSTNAME,
    )];
    let result = solve(vec![pool("default", 4)], vec![db]);
    assert!(result.new_node_claims.is_empty());
    assert_eq!(result.errors.len(), 1);
}

#[test]
fn should_allow_violation_of_preferred_pod_affinity() {
    let mut p = pod("p", 100, 0);
    p.preferred_pod_affinity = vec![Weighted {
        weight: 50,
        term: term(&[S2], labels::HOSTNAME),
    }];
    let result = solve(vec![pool("default", 4)], vec![p]);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    claim_of(&result, "p");
}

#[test]
fn should_allow_violation_of_preferred_pod_anti_affinity() {
    // Each pod prefers to avoid the others' zones; with more pods than zones
    // the preference is relaxed and every pod is placed.
    let pods: Vec<Pod> = (0..10)
        .map(|i| {
            let mut p = pod(&format!("p-{i}"), 100, 0).with_label(S2.0, S2.1);
            p.preferred_pod_anti_affinity = vec![Weighted {
                weight: 50,
                term: term(&[S2], labels::ZONE),
            }];
            p
        })
        .collect();
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(scheduled(&result), 10);
}

#[test]
fn should_support_pod_anti_affinity_with_a_zone_topology() {
    // Late committal: a batch places one pod, whose zone is only known once
    // its node exists; later batches fill the other zones, then nothing.
    let batch = || -> Vec<Pod> {
        (0..3)
            .map(|i| {
                let mut p = pod(&format!("p-{i}"), 100, 0).with_label(S2.0, S2.1);
                p.pod_anti_affinity = vec![term(&[S2], labels::ZONE)];
                p
            })
            .collect()
    };
    let node_in = |zone: &str| {
        let mut running = pod(&format!("running-{zone}"), 100, 0).with_label(S2.0, S2.1);
        running.pod_anti_affinity = vec![term(&[S2], labels::ZONE)];
        ExistingNode {
            name: format!("node-{zone}"),
            labels: BTreeMap::from([(labels::ZONE.to_string(), zone.to_string())]),
            pods: vec![running],
            initialized: true,
            ..ExistingNode::default()
        }
    };
    let run = |nodes: Vec<ExistingNode>| {
        Scheduler::new(SchedulerInput {
            node_pools: vec![pool("default", 4)],
            existing_nodes: nodes,
            pods: batch(),
            ..SchedulerInput::default()
        })
        .solve()
    };
    let result = run(Vec::new());
    assert_eq!(scheduled(&result), 1);
    assert_eq!(result.errors.len(), 2);
    let result = run(vec![node_in("test-zone-1"), node_in("test-zone-2")]);
    assert_eq!(scheduled(&result), 1);
    assert_eq!(result.new_node_claims[0].zone, "test-zone-3");
    let result = run(vec![
        node_in("test-zone-1"),
        node_in("test-zone-2"),
        node_in("test-zone-3"),
    ]);
    assert_eq!(scheduled(&result), 0);
    assert_eq!(result.errors.len(), 3);
}

#[test]
fn should_filter_pod_affinity_topologies_by_namespace_no_matching_pods() {
    // The target runs in another namespace than the term looks at.
    let mut target = pod("target", 100, 0).with_label(S2.0, S2.1);
    target.namespace = "other".into();
    let node = ExistingNode {
        name: "n1".into(),
        labels: BTreeMap::from([(labels::ZONE.to_string(), "test-zone-1".to_string())]),
        pods: vec![target],
        initialized: true,
        ..ExistingNode::default()
    };
    let mut p = pod("p", 100, 0);
    p.pod_affinity = vec![term(&[S2], labels::ZONE)];
    let result = Scheduler::new(SchedulerInput {
        node_pools: vec![pool("default", 4)],
        existing_nodes: vec![node],
        pods: vec![p],
        ..SchedulerInput::default()
    })
    .solve();
    assert!(result.new_node_claims.is_empty());
    assert_eq!(result.errors.len(), 1);
}

#[test]
fn should_filter_pod_affinity_topologies_by_namespace_matching_pods_namespace_list() {
    let mut target = pod("target", 100, 0).with_label(S2.0, S2.1);
    target.namespace = "other".into();
    let node = ExistingNode {
        name: "n1".into(),
        labels: BTreeMap::from([(labels::ZONE.to_string(), "test-zone-2".to_string())]),
        pods: vec![target],
        initialized: true,
        ..ExistingNode::default()
    };
    let mut p = pod("p", 100, 0);
    p.pod_affinity = vec![PodAffinityTerm {
        namespaces: NamespaceScope::Listed(vec!["other".into()]),
        ..term(&[S2], labels::ZONE)
    }];
    let result = Scheduler::new(SchedulerInput {
        node_pools: vec![pool("default", 4)],
        existing_nodes: vec![node],
        pods: vec![p],
        ..SchedulerInput::default()
    })
    .solve();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(claim_of(&result, "p").zone, "test-zone-2");
}

#[test]
fn should_respect_pod_affinity_hostname() {
    let mut pods: Vec<Pod> = (0..10)
        .map(|i| {
            let mut p = pod(&format!("s-{i}"), 100, 0).with_label("app", "s");
            p.topology_spread = vec![TopologySpreadConstraint::new(
                labels::HOSTNAME,
                1,
                LabelSelector::match_labels(&[("app", "s")]),
            )];
            p
        })
        .collect();
    pods.push(pod("target", 100, 0).with_label(S2.0, S2.1));
    let mut follower = pod("follower", 100, 0);
    follower.pod_affinity = vec![term(&[S2], labels::HOSTNAME)];
    pods.push(follower);
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(claim_of(&result, "target"), claim_of(&result, "follower"));
}

#[test]
fn should_support_pod_affinity_with_zone_topology_unconstrained_target() {
    let followers = || -> Vec<Pod> {
        (0..10)
            .map(|i| {
                let mut p = pod(&format!("f-{i}"), 100, 0);
                p.pod_affinity = vec![term(&[S2], labels::ZONE)];
                p
            })
            .collect()
    };
    // The target's zone is undetermined: the followers cannot schedule.
    let mut pods = followers();
    pods.push(pod("target", 100, 0).with_label(S2.0, S2.1));
    let result = solve(vec![pool("default", 4)], pods);
    claim_of(&result, "target");
    assert_eq!(result.errors.len(), 10);
    // Once the target runs in a zone, they all go there.
    let node = ExistingNode {
        name: "target-node".into(),
        labels: BTreeMap::from([(labels::ZONE.to_string(), "test-zone-2".to_string())]),
        pods: vec![pod("target", 100, 0).with_label(S2.0, S2.1)],
        initialized: true,
        ..ExistingNode::default()
    };
    let result = Scheduler::new(SchedulerInput {
        node_pools: vec![pool("default", 4)],
        existing_nodes: vec![node],
        pods: followers(),
        ..SchedulerInput::default()
    })
    .solve();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert!(
        result
            .new_node_claims
            .iter()
            .all(|c| c.zone == "test-zone-2")
    );
}

#[test]
fn should_support_pod_affinity_with_zone_topology_constrained_target() {
    let mut pods: Vec<Pod> = (0..10)
        .map(|i| {
            let mut p = pod(&format!("f-{i}"), 100, 0);
            p.pod_affinity = vec![term(&[S2], labels::ZONE)];
            p
        })
        .collect();
    let mut target = pod("target", 100, 0).with_label(S2.0, S2.1);
    target.required_node_affinity = vec![
        [req(labels::ZONE, Operator::In, &["test-zone-1"])]
            .into_iter()
            .collect(),
    ];
    pods.push(target);
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(scheduled(&result), 11);
    assert!(
        result
            .new_node_claims
            .iter()
            .all(|c| c.zone == "test-zone-1")
    );
}

#[test]
fn should_handle_multiple_dependent_affinities() {
    let labelled = |name: &str, kind: &str| {
        pod(name, 100, 0)
            .with_label("type", kind)
            .with_label("spread", "spread")
    };
    let following = |name: &str, kind: &str, after: &str| {
        let mut p = labelled(name, kind);
        p.pod_affinity = vec![term(
            &[("type", after), ("spread", "spread")],
            labels::HOSTNAME,
        )];
        p
    };
    // Given in reverse dependency order: the queue retries until all fit.
    let pods = vec![
        following("ui", "ui", "cache"),
        following("cache", "cache", "web"),
        following("web", "web", "db"),
        labelled("db", "db"),
    ];
    let result = solve(vec![pool("default", 4)], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(result.new_node_claims.len(), 1);
}
