//! In-flight and existing node cases ported from Karpenter's scheduling
//! `suite_test.go`, named after its `It`s.

use super::*;

/// An in-flight NodeClaim of the default pool in `zone` with room for small pods.
fn in_flight(name: &str, zone: &str) -> ExistingNode {
    ExistingNode {
        name: name.into(),
        labels: BTreeMap::from([
            (labels::NODE_POOL.to_string(), "default".to_string()),
            (labels::ZONE.to_string(), zone.to_string()),
            (labels::ARCH.to_string(), "amd64".to_string()),
        ]),
        allocatable: Resources::cpu_memory(1900, 4 * GIB).with_pods(20),
        capacity: Resources::cpu_memory(2000, 4 * GIB).with_pods(20),
        ..ExistingNode::default()
    }
}

fn solve_in_flight(claims: Vec<ExistingNode>, pods: Vec<Pod>) -> SchedulingResult {
    Scheduler::new(SchedulerInput {
        node_pools: vec![pool("default", 4)],
        in_flight: claims,
        pods,
        ..SchedulerInput::default()
    })
    .solve()
}

fn in_zones(name: &str, zones: &[&str]) -> Pod {
    let mut p = pod(name, 10, 0);
    p.required_node_affinity = vec![
        [req(labels::ZONE, Operator::In, zones)]
            .into_iter()
            .collect(),
    ];
    p
}

fn placed_on<'a>(result: &'a SchedulingResult, pod: &str) -> Option<&'a str> {
    result
        .existing_node_placements
        .iter()
        .find(|x| x.pod == format!("default/{pod}"))
        .map(|x| x.node.as_str())
}

#[test]
fn should_not_launch_a_second_node_if_there_is_an_in_flight_node_that_can_support_the_pod() {
    let result = solve_in_flight(
        vec![in_flight("claim-1", "test-zone-1")],
        vec![pod("b", 10, 0)],
    );
    assert!(result.new_node_claims.is_empty());
    assert_eq!(placed_on(&result, "b"), Some("claim-1"));
}

#[test]
fn should_not_launch_a_second_node_if_there_is_an_in_flight_node_that_can_support_the_pod_node_selectors()
 {
    let claims = || vec![in_flight("claim-1", "test-zone-2")];
    let result = solve_in_flight(
        claims(),
        vec![in_zones("b", &["test-zone-1", "test-zone-2"])],
    );
    assert_eq!(placed_on(&result, "b"), Some("claim-1"));
    let result = solve_in_flight(
        claims(),
        vec![in_zones("c", &["test-zone-1", "test-zone-3"])],
    );
    assert_eq!(placed_on(&result, "c"), None);
    claim_of(&result, "c");
}

#[test]
fn should_launch_a_second_node_if_a_pod_wont_fit_on_the_existing_nodes_node() {
    let mut claim = in_flight("claim-1", "test-zone-1");
    claim.pods = vec![pod("a", 1001, 0)];
    let result = solve_in_flight(vec![claim], vec![pod("b", 1000, 0)]);
    assert_eq!(placed_on(&result, "b"), None);
    claim_of(&result, "b");
}

#[test]
fn should_launch_a_second_node_if_a_pod_isnt_compatible_with_the_existing_nodes_node_node_selector()
{
    let mut np = pool("default", 4);
    Arc::make_mut(&mut np.instance_types).push({
        let reqs: Requirements = [Requirement::single(labels::ARCH, "arm64")]
            .into_iter()
            .collect();
        InstanceType::new(
            "arm",
            reqs,
            vec![Offering::new("test-zone-1", CapacityType::OnDemand, 0.1)],
            Resources::cpu_memory(2000, 4 * GIB).with_pods(20),
            Overhead::default(),
        )
    });
    let mut p = pod("b", 10, 0);
    p.node_selector.insert(labels::ARCH.into(), "arm64".into());
    let result = Scheduler::new(SchedulerInput {
        node_pools: vec![np],
        in_flight: vec![in_flight("claim-1", "test-zone-1")],
        pods: vec![p],
        ..SchedulerInput::default()
    })
    .solve();
    assert_eq!(placed_on(&result, "b"), None);
    assert_eq!(claim_of(&result, "b").instance_type, "arm");
}

#[test]
fn should_launch_a_second_node_if_an_in_flight_node_is_terminating() {
    let mut claim = in_flight("claim-1", "test-zone-1");
    claim.marked_for_deletion = true;
    let result = solve_in_flight(vec![claim], vec![pod("b", 10, 0)]);
    assert_eq!(placed_on(&result, "b"), None);
    claim_of(&result, "b");
}

#[test]
fn should_balance_pods_across_zones_with_in_flight_nodes() {
    // Zones 1 and 2 have full in-flight nodes with one spread pod each.
    let spread = TopologySpreadConstraint::new(
        labels::ZONE,
        1,
        LabelSelector::match_labels(&[("app", "s")]),
    );
    let full = |name: &str, zone: &str| {
        let mut n = in_flight(name, zone);
        n.pods = vec![pod(&format!("{name}-old"), 10, 0).with_label("app", "s")];
        n.allocatable = Resources::cpu_memory(10, GIB).with_pods(20);
        n
    };
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            let mut p = pod(&format!("s-{i}"), 10, 0).with_label("app", "s");
            p.topology_spread = vec![spread.clone()];
            p
        })
        .collect();
    let result = solve_in_flight(
        vec![
            full("claim-1", "test-zone-1"),
            full("claim-2", "test-zone-2"),
        ],
        pods,
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::from([
        ("test-zone-1".to_string(), 1),
        ("test-zone-2".to_string(), 1),
    ]);
    for c in &result.new_node_claims {
        *per_zone.entry(c.zone.clone()).or_insert(0) += c.pods.len();
    }
    let mut counts: Vec<usize> = per_zone.into_values().collect();
    counts.sort_unstable();
    assert_eq!(counts, vec![2, 2, 2]);
}

#[test]
fn should_schedule_pods_with_the_same_host_port_to_different_nodes() {
    let with_port = |name: &str| {
        let mut p = pod(name, 10, 0);
        p.host_ports = vec![HostPort {
            port: 80,
            protocol: "TCP".into(),
            host_ip: String::new(),
        }];
        p
    };
    let result = solve(
        vec![pool("default", 4)],
        vec![with_port("a"), with_port("b")],
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_ne!(claim_of(&result, "a"), claim_of(&result, "b"));
}

#[test]
fn should_schedule_a_pod_to_an_existing_node_unowned_by_karpenter() {
    let node = ExistingNode {
        name: "unowned".into(),
        allocatable: Resources::cpu_memory(4000, 8 * GIB).with_pods(20),
        capacity: Resources::cpu_memory(4000, 8 * GIB).with_pods(20),
        initialized: true,
        ..ExistingNode::default()
    };
    let result = Scheduler::new(SchedulerInput {
        node_pools: vec![pool("default", 4)],
        existing_nodes: vec![node],
        pods: (0..3).map(|i| pod(&format!("p-{i}"), 100, 0)).collect(),
        ..SchedulerInput::default()
    })
    .solve();
    assert!(result.new_node_claims.is_empty());
    assert_eq!(result.existing_node_placements.len(), 3);
}

#[test]
fn should_consider_a_pod_incompatible_with_an_existing_node_but_compatible_with_nodepool() {
    let node = ExistingNode {
        name: "other-zone".into(),
        labels: BTreeMap::from([(labels::ZONE.to_string(), "test-zone-1".to_string())]),
        allocatable: Resources::cpu_memory(4000, 8 * GIB).with_pods(20),
        capacity: Resources::cpu_memory(4000, 8 * GIB).with_pods(20),
        initialized: true,
        ..ExistingNode::default()
    };
    let mut p = pod("p", 100, 0);
    p.node_selector
        .insert(labels::ZONE.into(), "test-zone-2".into());
    let result = Scheduler::new(SchedulerInput {
        node_pools: vec![pool("default", 4)],
        existing_nodes: vec![node],
        pods: vec![p],
        ..SchedulerInput::default()
    })
    .solve();
    assert!(result.existing_node_placements.is_empty());
    assert_eq!(claim_of(&result, "p").zone, "test-zone-2");
}

/// A node of the default pool (whose startup taint is `ignore-me`) with
/// `taints`; `initialized` says whether it finished starting.
fn tainted_node_case(taints: Vec<Taint>, initialized: bool) -> SchedulingResult {
    let mut np = pool("default", 4);
    np.startup_taints = vec![Taint::new(
        "ignore-me",
        "nothing-to-see-here",
        TaintEffect::NoSchedule,
    )];
    let mut node = in_flight("node-1", "test-zone-1");
    node.taints = taints;
    node.initialized = initialized;
    Scheduler::new(SchedulerInput {
        node_pools: vec![np],
        existing_nodes: vec![node],
        pods: vec![pod("b", 10, 0)],
        ..SchedulerInput::default()
    })
    .solve()
}

#[test]
fn should_assume_pod_will_schedule_to_a_tainted_node_with_no_taints() {
    let result = tainted_node_case(Vec::new(), false);
    assert_eq!(placed_on(&result, "b"), Some("node-1"));
}

#[test]
fn should_assume_pod_will_schedule_to_a_node_with_ephemeral_taint_node_kubernetes_io_not_ready_no_execute_when_the_node_is_uninitialized()
 {
    let not_ready = || {
        vec![Taint::new(
            crate::apis::labels::NOT_READY_TAINT_KEY,
            "",
            TaintEffect::NoExecute,
        )]
    };
    let result = tainted_node_case(not_ready(), false);
    assert_eq!(placed_on(&result, "b"), Some("node-1"));
    let result = tainted_node_case(not_ready(), true);
    assert_eq!(placed_on(&result, "b"), None);
}

#[test]
fn should_not_assume_pod_will_schedule_to_a_tainted_node() {
    let taint = Taint::new("foo.com/taint", "tainted", TaintEffect::NoSchedule);
    let result = tainted_node_case(vec![taint], true);
    assert_eq!(placed_on(&result, "b"), None);
    claim_of(&result, "b");
}

#[test]
fn should_assume_pod_will_schedule_to_a_tainted_node_with_a_custom_startup_taint() {
    let startup = Taint::new("ignore-me", "nothing-to-see-here", TaintEffect::NoSchedule);
    let result = tainted_node_case(vec![startup], false);
    assert_eq!(placed_on(&result, "b"), Some("node-1"));
}

#[test]
fn should_not_assume_pod_will_schedule_to_a_node_with_startup_taints_after_initialization() {
    let startup = Taint::new("ignore-me", "nothing-to-see-here", TaintEffect::NoSchedule);
    let result = tainted_node_case(vec![startup], true);
    assert_eq!(placed_on(&result, "b"), None);
    claim_of(&result, "b");
}
