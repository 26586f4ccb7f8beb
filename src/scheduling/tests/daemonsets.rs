//! DaemonSet overhead and host ports on new NodeClaims, per instance type.

use super::*;

const INSTANCE_CPU: &str = crate::apis::labels::INSTANCE_CPU_LABEL_KEY;

/// A type with `karpenter.k8s.aws/instance-cpu` set to its vCPU count.
fn sized_type(cpu: i64) -> InstanceType {
    let reqs: Requirements = [Requirement::single(INSTANCE_CPU, &cpu.to_string())]
        .into_iter()
        .collect();
    InstanceType::new(
        &format!("m-{cpu}"),
        reqs,
        vec![Offering::new(
            "test-zone-1",
            CapacityType::OnDemand,
            0.05 * cpu as f64,
        )],
        Resources::cpu_memory(cpu * 1000, 4 * cpu * GIB).with_pods(30),
        Overhead::default(),
    )
}

fn sized_pool(cpus: &[i64]) -> NodePoolSpec {
    NodePoolSpec {
        name: "default".into(),
        instance_types: Arc::new(cpus.iter().map(|c| sized_type(*c)).collect()),
        ..NodePoolSpec::default()
    }
}

fn daemonset(name: &str, cpu: i64, terms: Vec<Requirements>) -> Pod {
    let mut ds = Pod::new("kube-system", name, Resources::cpu_memory(cpu, 0));
    ds.owner_kind = Some("DaemonSet".into());
    ds.required_node_affinity = terms;
    ds
}

fn only_cpus(values: &[&str]) -> Vec<Requirements> {
    vec![
        [req(INSTANCE_CPU, Operator::In, values)]
            .into_iter()
            .collect(),
    ]
}

fn solve_with(pools: Vec<NodePoolSpec>, daemonsets: Vec<Pod>, pods: Vec<Pod>) -> SchedulingResult {
    Scheduler::new(SchedulerInput {
        node_pools: pools,
        daemonsets,
        pods,
        ..SchedulerInput::default()
    })
    .solve()
}

fn host_port(port: i32) -> HostPort {
    HostPort {
        port,
        protocol: "TCP".into(),
        host_ip: String::new(),
    }
}

#[test]
fn should_filter_out_daemonsets_based_on_instance_type_requirements() {
    // A 12-vCPU daemonset runs only on the 16-vCPU type: the 2-vCPU type
    // carries none of it and is the cheapest fit.
    let result = solve_with(
        vec![sized_pool(&[2, 4, 16])],
        vec![daemonset("big-agent", 12_000, only_cpus(&["16"]))],
        vec![pod("a", 1500, GIB)],
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let claim = claim_of(&result, "a");
    assert_eq!(claim.instance_type, "m-2");
    // The 16-vCPU option stays, with room for the pod plus its daemonset.
    assert!(claim.instance_type_options.iter().any(|o| o.name == "m-16"));
    assert_eq!(claim.requests.cpu_millis, 1500);

    // Without the small types, the pod still fits next to the daemonset
    // only if the overhead is not counted twice.
    let result = solve_with(
        vec![sized_pool(&[16])],
        vec![daemonset("big-agent", 14_000, only_cpus(&["16"]))],
        vec![pod("b", 1500, GIB)],
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(claim_of(&result, "b").requests.cpu_millis, 15_500);
}

#[test]
fn a_daemonset_that_runs_on_no_type_of_the_pool_leaves_a_pod_that_fits() {
    // Karpenter "should ignore daemonsets when no instance types meet the
    // daemonset requirements".
    let result = solve_with(
        vec![sized_pool(&[2])],
        vec![daemonset("agent", 1500, only_cpus(&["96"]))],
        vec![pod("a", 1500, GIB)],
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(claim_of(&result, "a").instance_type, "m-2");
}

#[test]
fn should_consider_a_daemonset_schedulable_with_multiple_node_affinity_terms() {
    let mut np = sized_pool(&[2, 4, 8]);
    np.labels.insert("foo".into(), "bar".into());
    // The first term matches no pool; the second matches this one.
    let terms = vec![
        [req("foo", Operator::In, &["voo"])].into_iter().collect(),
        [req("foo", Operator::In, &["bar"])].into_iter().collect(),
    ];
    let result = solve_with(
        vec![np],
        vec![daemonset("agent", 2000, terms)],
        vec![pod("a", 1000, GIB)],
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let claim = claim_of(&result, "a");
    assert_eq!(claim.instance_type, "m-4");
    assert_eq!(claim.requests.cpu_millis, 3000);
}

#[test]
fn should_account_for_daemonset_hostports() {
    let mut agent = daemonset("agent", 100, Vec::new());
    agent.host_ports = vec![host_port(8080)];
    let mut p = pod("a", 1000, GIB);
    p.host_ports = vec![host_port(8080)];
    let result = solve_with(vec![sized_pool(&[2, 4])], vec![agent], vec![p]);
    assert!(result.new_node_claims.is_empty());
    assert_eq!(result.errors.len(), 1);
    assert!(
        result.errors[0].reason.contains("8080"),
        "{}",
        result.errors[0].reason
    );
}

#[test]
fn should_not_account_for_daemonset_hostports_when_daemonset_would_not_schedule_on_selected_node() {
    // The agent binding 8080 runs on 16-vCPU types only; the pod asks for
    // small types and port 8080.
    let mut large = daemonset("large-agent", 4000, only_cpus(&["16"]));
    large.host_ports = vec![host_port(8080)];
    let mut small = daemonset("small-agent", 500, only_cpus(&["2", "4"]));
    small.host_ports = vec![host_port(8081)];
    let mut p = pod("a", 1000, GIB);
    p.host_ports = vec![host_port(8080)];
    p.required_node_affinity = only_cpus(&["2", "4"]);
    let result = solve_with(vec![sized_pool(&[2, 4, 16])], vec![large, small], vec![p]);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let claim = claim_of(&result, "a");
    assert_eq!(claim.instance_type, "m-2");
    assert_eq!(claim.requests.cpu_millis, 1500);

    // Without the affinity, the 16-vCPU type is not an option for the pod.
    let mut p = pod("b", 1000, GIB);
    p.host_ports = vec![host_port(8080)];
    let mut large = daemonset("large-agent", 100, only_cpus(&["16"]));
    large.host_ports = vec![host_port(8080)];
    let result = solve_with(vec![sized_pool(&[2, 16])], vec![large], vec![p]);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let claim = claim_of(&result, "b");
    assert!(claim.instance_type_options.iter().all(|o| o.name != "m-16"));
}

fn initialized_node(name: &str, cpu: i64, pods: Vec<Pod>) -> ExistingNode {
    ExistingNode {
        name: name.into(),
        labels: BTreeMap::from([(labels::ZONE.to_string(), "test-zone-1".to_string())]),
        allocatable: Resources::cpu_memory(cpu, 64 * GIB).with_pods(110),
        capacity: Resources::cpu_memory(cpu, 64 * GIB).with_pods(110),
        pods,
        initialized: true,
        ..ExistingNode::default()
    }
}

fn on_node(node: ExistingNode, daemonsets: Vec<Pod>, p: Pod) -> SchedulingResult {
    Scheduler::new(SchedulerInput {
        node_pools: vec![sized_pool(&[2])],
        existing_nodes: vec![node],
        daemonsets,
        pods: vec![p],
        ..SchedulerInput::default()
    })
    .solve()
}

#[test]
fn should_track_daemonset_usage_separately_so_we_know_how_many_ds_resources_are_remaining_to_be_scheduled()
 {
    let agent = || daemonset("agent", 1000, Vec::new());
    // The daemonset pod is bound: the rest of the node is free.
    let mut bound = agent();
    bound.name = "agent-abcde".into();
    let node = initialized_node("node-1", 15_900, vec![bound]);
    let result = on_node(node, vec![agent()], pod("a", 14_900, GIB));
    assert_eq!(result.existing_node_placements.len(), 1, "{result:?}");
    // Not bound yet: its requests are kept free for it.
    let node = initialized_node("node-1", 15_900, Vec::new());
    let result = on_node(node, vec![agent()], pod("a", 15_000, GIB));
    assert!(result.existing_node_placements.is_empty(), "{result:?}");
}

#[test]
fn should_not_subtract_daemonset_overhead_that_is_not_strictly_compatible_with_an_existing_node() {
    // The daemonset wants test-zone-2; the node is in test-zone-1.
    let agent = || {
        daemonset(
            "agent",
            100_000,
            vec![
                [req(labels::ZONE, Operator::In, &["test-zone-2"])]
                    .into_iter()
                    .collect(),
            ],
        )
    };
    let node = initialized_node("node-1", 1000, Vec::new());
    let result = on_node(node, vec![agent()], pod("a", 1000, GIB));
    assert_eq!(result.existing_node_placements.len(), 1, "{result:?}");
}

#[test]
fn should_properly_handle_daemonset_resources_with_node_affinity_for_karpenter_sh_initialized_and_karpenter_sh_registered()
 {
    use crate::apis::labels::{NODE_INITIALIZED_LABEL_KEY, NODE_REGISTERED_LABEL_KEY};
    let on = |key: &str| {
        daemonset(
            key,
            1000,
            vec![[req(key, Operator::In, &["true"])].into_iter().collect()],
        )
    };
    let result = solve_with(
        vec![sized_pool(&[2, 4, 8])],
        vec![
            on(NODE_INITIALIZED_LABEL_KEY),
            on(NODE_REGISTERED_LABEL_KEY),
        ],
        vec![pod("a", 2000, GIB)],
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let claim = claim_of(&result, "a");
    assert_eq!(claim.instance_type, "m-4");
    assert_eq!(claim.requests.cpu_millis, 4000);
    // The labels the daemonsets select on are not put on the NodeClaim.
    for key in [NODE_INITIALIZED_LABEL_KEY, NODE_REGISTERED_LABEL_KEY] {
        assert!(!claim.labels.contains_key(key));
        assert!(claim.requirements.get(key).is_none());
    }
}

#[test]
fn should_create_a_nodeclaim_with_resource_requests_with_daemon_overhead() {
    let result = solve_with(
        vec![sized_pool(&[4, 8])],
        vec![daemonset("agent", 1000, Vec::new())],
        vec![pod("a", 1000, GIB), pod("b", 1000, GIB)],
    );
    assert_eq!(result.new_node_claims.len(), 1);
    // Two pods plus one daemonset, counted once.
    assert_eq!(result.new_node_claims[0].requests.cpu_millis, 3000);
    assert_eq!(result.new_node_claims[0].requests.pods, 3);

    // A daemonset that only the cheapest option runs is not in the requests:
    // they hold what every option runs.
    let result = solve_with(
        vec![sized_pool(&[4, 8])],
        vec![daemonset("agent", 1000, only_cpus(&["4"]))],
        vec![pod("a", 1000, GIB)],
    );
    let claim = claim_of(&result, "a");
    assert_eq!(claim.instance_type, "m-4");
    assert!(claim.instance_type_options.iter().any(|o| o.name == "m-8"));
    assert_eq!(claim.requests.cpu_millis, 1000);
}

/// A cheap type offered in every zone and an expensive one offered only in
/// `test-zone-3`, with a DaemonSet too large for either that runs only in
/// `test-zone-1`.
fn zonal_daemonset_case() -> SchedulingResult {
    let offered = |name: &str, zones: &[&str], price: f64| {
        InstanceType::new(
            name,
            Requirements::new(),
            zones
                .iter()
                .map(|z| Offering::new(z, CapacityType::OnDemand, price))
                .collect(),
            Resources::cpu_memory(8000, 32 * GIB).with_pods(30),
            Overhead::default(),
        )
    };
    let pool = NodePoolSpec {
        name: "default".into(),
        instance_types: Arc::new(vec![
            offered("cheap", &["test-zone-1", "test-zone-2", "test-zone-3"], 0.1),
            offered("expensive", &["test-zone-3"], 1.3),
        ]),
        ..NodePoolSpec::default()
    };
    let zone_1 = vec![
        [req(labels::ZONE, Operator::In, &["test-zone-1"])]
            .into_iter()
            .collect(),
    ];
    let huge = daemonset("zonal-agent", 1_000_000, zone_1);
    solve_with(vec![pool], vec![huge], vec![pod("small", 1000, 0)])
}

#[test]
fn a_daemonset_of_one_zone_counts_on_every_type_the_pool_may_launch_there() {
    // Whether the DaemonSet runs depends on the offering (zone), not on the
    // type: the expensive type, offered only where the DaemonSet does not
    // run, is no way around it (Karpenter leaves the pod pending too).
    let result = zonal_daemonset_case();
    assert!(result.new_node_claims.is_empty(), "{result:?}");
    assert_eq!(result.errors.len(), 1);
    assert!(
        result.errors[0].reason.contains("daemonsets"),
        "{}",
        result.errors[0].reason
    );
}

#[test]
fn a_daemonset_of_one_zone_takes_no_room_where_the_pool_excludes_that_zone() {
    let mut pool = sized_pool(&[2]);
    pool.requirements = [req(labels::ZONE, Operator::In, &["test-zone-1"])]
        .into_iter()
        .collect();
    let elsewhere = vec![
        [req(labels::ZONE, Operator::In, &["test-zone-2"])]
            .into_iter()
            .collect(),
    ];
    let huge = daemonset("zonal-agent", 1_000_000, elsewhere);
    let result = solve_with(vec![pool], vec![huge], vec![pod("small", 1000, 0)]);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(result.new_node_claims.len(), 1);
}
