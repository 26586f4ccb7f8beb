//! Existing and in-flight nodes, the queue and preference relaxation.

use super::*;

#[test]
fn preferences_are_honoured_then_relaxed() {
    let mut prefers_zone2 = pod("z2", 100, 0);
    prefers_zone2.preferred_node_affinity = vec![
        Weighted {
            weight: 1,
            term: [req(labels::ZONE, Operator::In, &["test-zone-3"])]
                .into_iter()
                .collect(),
        },
        Weighted {
            weight: 50,
            term: [req(labels::ZONE, Operator::In, &["test-zone-2"])]
                .into_iter()
                .collect(),
        },
    ];
    let mut impossible = pod("nowhere", 100, 0);
    impossible.preferred_node_affinity = vec![Weighted {
        weight: 10,
        term: [req(labels::ZONE, Operator::In, &["mars-1"])]
            .into_iter()
            .collect(),
    }];
    let mut or_terms = pod("or", 100, 0);
    or_terms.required_node_affinity = vec![
        [req(labels::ZONE, Operator::In, &["mars-1"])]
            .into_iter()
            .collect(),
        [req(labels::ZONE, Operator::In, &["test-zone-3"])]
            .into_iter()
            .collect(),
    ];
    let mut strict = pod("strict", 100, 0);
    strict.required_node_affinity = vec![
        [req(labels::ZONE, Operator::In, &["mars-1"])]
            .into_iter()
            .collect(),
    ];
    let result = solve(
        vec![pool("default", 4)],
        vec![prefers_zone2, impossible, or_terms, strict],
    );
    assert_eq!(claim_of(&result, "z2").zone, "test-zone-2");
    claim_of(&result, "nowhere");
    assert_eq!(claim_of(&result, "or").zone, "test-zone-3");
    assert_eq!(
        result.errors.len(),
        1,
        "the last required term is never relaxed"
    );
    assert_eq!(result.errors[0].pod, "default/strict");
}

#[test]
fn ignore_preferences_drops_them_up_front() {
    let mk = |i: usize| {
        let mut p = pod(&format!("p-{i}"), 100, 0).with_label("app", "nginx");
        p.preferred_pod_anti_affinity = vec![Weighted {
            weight: 1,
            term: anti("nginx", labels::HOSTNAME),
        }];
        p
    };
    let respect = solve(vec![pool("default", 4)], (0..3).map(mk).collect());
    assert_eq!(respect.new_node_claims.len(), 3);
    let input = SchedulerInput {
        node_pools: vec![pool("default", 4)],
        pods: (0..3).map(mk).collect(),
        options: SchedulerOptions {
            ignore_preferences: true,
            ..SchedulerOptions::default()
        },
        ..SchedulerInput::default()
    };
    let ignore = Scheduler::new(input).solve();
    assert_eq!(ignore.new_node_claims.len(), 1);
}

#[test]
fn existing_and_in_flight_nodes_are_used_before_new_claims() {
    let existing = ExistingNode {
        name: "full".into(),
        allocatable: Resources::cpu_memory(1000, GIB).with_pods(10),
        capacity: Resources::cpu_memory(1000, GIB).with_pods(10),
        pods: vec![pod("old", 900, 0)],
        initialized: true,
        ..ExistingNode::default()
    };
    let in_flight = ExistingNode {
        name: "starting".into(),
        labels: [(labels::NODE_POOL.to_string(), "default".to_string())].into(),
        taints: vec![
            Taint::new(
                crate::apis::labels::NOT_READY_TAINT_KEY,
                "",
                TaintEffect::NoSchedule,
            ),
            Taint::new("boot", "", TaintEffect::NoSchedule),
        ],
        allocatable: Resources::cpu_memory(2000, GIB).with_pods(10),
        capacity: Resources::cpu_memory(2000, GIB).with_pods(10),
        initialized: false,
        ..ExistingNode::default()
    };
    let mut pool = pool("default", 4);
    pool.startup_taints = vec![Taint::new("boot", "", TaintEffect::NoSchedule)];
    let input = SchedulerInput {
        node_pools: vec![pool],
        existing_nodes: vec![existing],
        in_flight: vec![in_flight],
        pods: vec![pod("a", 1500, 0), pod("b", 200, 0)],
        ..SchedulerInput::default()
    };
    let result = Scheduler::new(input).solve();
    assert!(result.errors.is_empty());
    assert!(result.new_node_claims.is_empty());
    let on = |p: &str| {
        result
            .existing_node_placements
            .iter()
            .find(|x| x.pod == format!("default/{p}"))
            .map(|x| x.node.as_str())
    };
    assert_eq!(
        on("a"),
        Some("starting"),
        "1500m does not fit on the full node"
    );
    assert_eq!(
        on("b"),
        Some("starting"),
        "100m left on the full node is not enough for 200m"
    );
}

fn roomy_node(name: &str, initialized: bool) -> ExistingNode {
    ExistingNode {
        name: name.into(),
        allocatable: Resources::cpu_memory(4000, 8 * GIB).with_pods(20),
        capacity: Resources::cpu_memory(4000, 8 * GIB).with_pods(20),
        initialized,
        ..ExistingNode::default()
    }
}

fn placed_on<'a>(result: &'a SchedulingResult, pod: &str) -> Option<&'a str> {
    result
        .existing_node_placements
        .iter()
        .find(|x| x.pod == format!("default/{pod}"))
        .map(|x| x.node.as_str())
}

#[test]
fn existing_nodes_are_tried_initialized_first_then_by_name() {
    // Given in an order that is neither: an uninitialized node named first
    // alphabetically, an initialized one, and two in-flight claims.
    let input = SchedulerInput {
        node_pools: vec![pool("default", 4)],
        existing_nodes: vec![roomy_node("a-starting", false), roomy_node("z-ready", true)],
        in_flight: vec![roomy_node("claim-b", false), roomy_node("claim-a", false)],
        pods: vec![pod("p", 100, 0)],
        ..SchedulerInput::default()
    };
    let result = Scheduler::new(input.clone()).solve();
    assert_eq!(placed_on(&result, "p"), Some("z-ready"));
    // Without the initialized node, names decide; in-flight claims and
    // uninitialized nodes are ordered together, not by input order.
    let input = SchedulerInput {
        existing_nodes: vec![roomy_node("a-starting", false)],
        ..input
    };
    let result = Scheduler::new(input.clone()).solve();
    assert_eq!(placed_on(&result, "p"), Some("a-starting"));
    let input = SchedulerInput {
        existing_nodes: Vec::new(),
        ..input
    };
    let result = Scheduler::new(input).solve();
    assert_eq!(
        placed_on(&result, "p"),
        Some("claim-a"),
        "not claim-b, the first given"
    );
}

#[test]
fn new_claims_are_tried_in_creation_order() {
    // fake-it-3: 4 vCPU, 3900m allocatable. "big" opens claim A; "mid" does
    // not fit beside it and opens claim B; "one" joins A, the older; "small"
    // joins A too while it has room, although B holds fewer pods (Karpenter
    // would try B first; see the note in `Solver::place`).
    let mut only = pool("default", 4);
    Arc::make_mut(&mut only.instance_types).retain(|t| t.name == "fake-it-3");
    let result = solve(
        vec![only],
        vec![
            pod("big", 2500, 0),
            pod("mid", 2000, 0),
            pod("one", 1000, 0),
            pod("small", 300, 0),
        ],
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(result.new_node_claims.len(), 2);
    let a = claim_of(&result, "big");
    for p in ["default/one", "default/small"] {
        assert!(a.pods.iter().any(|k| k == p), "{p}: {:?}", a.pods);
    }
    let b = claim_of(&result, "mid");
    assert_eq!(b.pods, vec!["default/mid".to_string()]);
}

#[test]
fn failed_pods_are_retried_after_the_rest_of_the_queue_with_preferences_restored() {
    // "follower" is larger, so it is tried before "db", the pod its required
    // zone affinity needs; it fails, goes back on the queue, and lands beside
    // db once db is placed. Retried with its preference (on-demand) restored,
    // it turns db's NodeClaim on-demand instead of the cheaper spot.
    let mut follower = pod("follower", 1000, 0);
    follower.pod_affinity = vec![PodAffinityTerm::new(
        LabelSelector::match_labels(&[("app", "db")]),
        labels::ZONE,
    )];
    follower.preferred_node_affinity = vec![Weighted {
        weight: 10,
        term: [req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"])]
            .into_iter()
            .collect(),
    }];
    let mut db = pod("db", 100, 0).with_label("app", "db");
    db.node_selector
        .insert(labels::ZONE.into(), "test-zone-2".into());
    // Its affinity matches nothing in the batch: retried, it still fails,
    // and the solve ends.
    let mut orphan = pod("orphan", 1000, 0);
    orphan.pod_affinity = vec![PodAffinityTerm::new(
        LabelSelector::match_labels(&[("app", "nothing")]),
        labels::ZONE,
    )];
    let result = solve(vec![pool("default", 4)], vec![follower, orphan, db]);
    assert_eq!(result.errors.len(), 1, "{:?}", result.errors);
    assert_eq!(result.errors[0].pod, "default/orphan");
    assert!(result.errors[0].reason.contains("pod affinity"));
    let claim = claim_of(&result, "follower");
    assert!(claim.pods.iter().any(|k| k == "default/db"));
    assert_eq!(claim.zone, "test-zone-2");
    assert_eq!(claim.capacity_type, CapacityType::OnDemand);
}

fn by_name(op: Operator, names: &[&str]) -> Requirements {
    [req("metadata.name", op, names)].into_iter().collect()
}

#[test]
fn match_fields_pick_existing_nodes_by_name_and_never_new_nodes() {
    let nodes = vec![roomy_node("node-a", true), roomy_node("node-b", true)];
    let named = |name: &str, op: Operator, names: &[&str]| {
        let mut p = pod(name, 100, 0);
        p.required_node_affinity = vec![Requirements::new()];
        p.required_node_fields = vec![by_name(op, names)];
        p
    };
    // node-a comes first in order, but only node-b satisfies the fields.
    let input = SchedulerInput {
        node_pools: vec![pool("default", 4)],
        existing_nodes: nodes,
        pods: vec![
            named("in-b", Operator::In, &["node-b"]),
            named("not-a", Operator::NotIn, &["node-a"]),
            named("gone", Operator::In, &["node-gone"]),
        ],
        ..SchedulerInput::default()
    };
    let result = Scheduler::new(input.clone()).solve();
    assert_eq!(placed_on(&result, "in-b"), Some("node-b"));
    assert_eq!(placed_on(&result, "not-a"), Some("node-b"));
    // No node has that name, and no NodeClaim is created for it.
    assert!(result.new_node_claims.is_empty());
    assert_eq!(result.errors.len(), 1);
    assert_eq!(result.errors[0].pod, "default/gone");
    assert!(
        result.errors[0].reason.contains("matchFields"),
        "{}",
        result.errors[0].reason
    );
    // Another required term without matchFields still does not let
    // Karpenter provision for the pod; it may use an existing node through
    // that term, though.
    let mut either = pod("either", 100, 0);
    either.required_node_affinity = vec![
        Requirements::new(),
        [req(labels::ARCH, Operator::In, &["amd64"])]
            .into_iter()
            .collect(),
    ];
    either.required_node_fields = vec![by_name(Operator::In, &["node-gone"]), Requirements::new()];
    let alone = SchedulerInput {
        existing_nodes: Vec::new(),
        pods: vec![either.clone()],
        ..input.clone()
    };
    let result = Scheduler::new(alone).solve();
    assert!(result.new_node_claims.is_empty());
    assert_eq!(result.errors.len(), 1, "{:?}", result.new_node_claims);
    let mut amd64 = roomy_node("node-c", true);
    amd64.labels.insert(labels::ARCH.into(), "amd64".into());
    let with_node = SchedulerInput {
        existing_nodes: vec![amd64],
        pods: vec![either],
        ..input
    };
    let result = Scheduler::new(with_node).solve();
    assert_eq!(placed_on(&result, "either"), Some("node-c"));
}
