//! Scheduler behaviour tests: each semantic with a case that must place a pod
//! and one where a pod must NOT land somewhere.

use std::collections::{BTreeMap, HashMap};

use super::*;

const GIB: i64 = 1 << 30;

fn fake_type(i: usize) -> InstanceType {
    let cpu = (i + 1) as i64;
    let mem = 2 * cpu * GIB;
    let price = 0.1 * cpu as f64 + 0.1 * mem as f64 / 1e9;
    let mut offerings = Vec::new();
    for zone in ["test-zone-1", "test-zone-2"] {
        offerings.push(Offering::new(zone, CapacityType::Spot, price * 0.7));
    }
    for zone in ["test-zone-1", "test-zone-2", "test-zone-3"] {
        offerings.push(Offering::new(zone, CapacityType::OnDemand, price));
    }
    let reqs: Requirements = [Requirement::single(labels::ARCH, "amd64")]
        .into_iter()
        .collect();
    InstanceType::new(
        &format!("fake-it-{i}"),
        reqs,
        offerings,
        Resources::cpu_memory(cpu * 1000, mem).with_pods(10 * cpu),
        Overhead {
            kube_reserved: Resources::cpu_memory(100, 10 << 20),
            ..Overhead::default()
        },
    )
}

fn types(n: usize) -> Vec<InstanceType> {
    (0..n).map(fake_type).collect()
}

fn pool(name: &str, n: usize) -> NodePoolSpec {
    NodePoolSpec {
        name: name.to_string(),
        instance_types: types(n),
        ..NodePoolSpec::default()
    }
}

fn pod(name: &str, cpu: i64, mem: i64) -> Pod {
    Pod::new("default", name, Resources::cpu_memory(cpu, mem))
}

fn solve(pools: Vec<NodePoolSpec>, pods: Vec<Pod>) -> SchedulingResult {
    Scheduler::new(SchedulerInput {
        node_pools: pools,
        pods,
        ..SchedulerInput::default()
    })
    .solve()
}

fn claim_of<'a>(result: &'a SchedulingResult, pod: &str) -> &'a NewNodeClaim {
    let reference = format!("default/{pod}");
    result
        .new_node_claims
        .iter()
        .find(|c| c.pods.contains(&reference))
        .unwrap_or_else(|| panic!("{pod} not on a new claim: {:?}", result.errors))
}

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values).unwrap()
}

#[test]
fn small_pods_pack_onto_the_cheapest_fitting_type() {
    let result = solve(
        vec![pool("default", 10)],
        vec![pod("a", 500, GIB / 2), pod("b", 500, GIB / 2)],
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(result.new_node_claims.len(), 1);
    let claim = &result.new_node_claims[0];
    // 1000m + pods need more than fake-it-0's 900m allocatable.
    assert_eq!(claim.instance_type, "fake-it-1");
    assert_eq!(claim.capacity_type, CapacityType::Spot);
    assert!(
        claim
            .instance_type_options
            .windows(2)
            .all(|w| w[0].price <= w[1].price)
    );
    assert!(
        !claim
            .instance_type_options
            .iter()
            .any(|o| o.name == "fake-it-0")
    );
    assert_eq!(
        claim.labels.get(labels::NODE_POOL).map(String::as_str),
        Some("default")
    );
}

#[test]
fn too_large_pod_gets_a_resource_error() {
    let result = solve(vec![pool("default", 4)], vec![pod("huge", 64_000, GIB)]);
    assert!(result.new_node_claims.is_empty());
    assert_eq!(result.errors.len(), 1);
    let reason = &result.errors[0].reason;
    assert!(
        reason.contains("nodepool \"default\"") && reason.contains("cpu"),
        "{reason}"
    );
}

#[test]
fn no_pools_is_an_error_not_a_panic() {
    let result = solve(vec![], vec![pod("a", 100, 0)]);
    assert!(result.errors[0].reason.contains("no NodePool"));
}

#[test]
fn taints_block_untolerating_pods_and_startup_taints_do_not() {
    let mut tainted = pool("gpu", 4);
    tainted.taints = vec![Taint::new("gpu", "true", TaintEffect::NoSchedule)];
    tainted.startup_taints = vec![Taint::new("init", "", TaintEffect::NoSchedule)];
    let plain = pod("plain", 100, 0);
    let mut tolerant = pod("tolerant", 100, 0);
    tolerant.tolerations = vec![Toleration::equal(
        "gpu",
        "true",
        Some(TaintEffect::NoSchedule),
    )];
    let result = solve(vec![tainted], vec![plain, tolerant]);
    assert_eq!(result.errors.len(), 1);
    assert_eq!(result.errors[0].pod, "default/plain");
    assert!(
        result.errors[0]
            .reason
            .contains("did not tolerate taint gpu=true"),
        "{}",
        result.errors[0].reason
    );
    assert_eq!(claim_of(&result, "tolerant").taints.len(), 1);
}

#[test]
fn prefer_no_schedule_is_avoided_then_relaxed() {
    let mut soft = pool("soft", 4);
    soft.weight = 100;
    soft.taints = vec![Taint::new("spot-only", "", TaintEffect::PreferNoSchedule)];
    let plain = pool("plain", 4);
    let result = solve(vec![soft.clone(), plain], vec![pod("a", 100, 0)]);
    assert_eq!(claim_of(&result, "a").node_pool, "plain");
    let result = solve(vec![soft], vec![pod("a", 100, 0)]);
    assert_eq!(claim_of(&result, "a").node_pool, "soft");
}

#[test]
fn node_selectors_narrow_and_custom_labels_need_a_pool_label() {
    let mut zonal = pod("zonal", 100, 0);
    zonal
        .node_selector
        .insert(labels::ZONE.into(), "test-zone-3".into());
    let mut team = pod("team", 100, 0);
    team.node_selector.insert("team".into(), "a".into());
    let result = solve(vec![pool("default", 4)], vec![zonal.clone(), team.clone()]);
    let claim = claim_of(&result, "zonal");
    assert_eq!(claim.zone, "test-zone-3");
    assert_eq!(
        claim.capacity_type,
        CapacityType::OnDemand,
        "no spot in zone 3"
    );
    assert_eq!(result.errors.len(), 1);
    assert!(
        result.errors[0]
            .reason
            .contains("\"team\" does not have known values")
    );
    let mut labelled = pool("team-a", 4);
    labelled.labels.insert("team".into(), "a".into());
    let result = solve(vec![labelled], vec![team]);
    assert!(result.errors.is_empty());
    assert_eq!(
        claim_of(&result, "team")
            .labels
            .get("team")
            .map(String::as_str),
        Some("a")
    );
}

#[test]
fn hostname_and_restricted_selectors_cannot_create_nodes() {
    let mut host = pod("host", 100, 0);
    host.node_selector
        .insert(labels::HOSTNAME.into(), "node-1".into());
    let mut restricted = pod("restricted", 100, 0);
    restricted
        .node_selector
        .insert("karpenter.sh/custom".into(), "x".into());
    let result = solve(vec![pool("default", 4)], vec![host, restricted]);
    assert_eq!(result.errors.len(), 2);
    assert!(
        result
            .errors
            .iter()
            .all(|e| e.reason.contains("restricted"))
    );
}

#[test]
fn gt_lt_requirements_select_types() {
    let mut p = pod("big", 100, 0);
    p.required_node_affinity = vec![
        [req(
            labels::INSTANCE_TYPE,
            Operator::In,
            &["fake-it-2", "fake-it-5", "fake-it-9"],
        )]
        .into_iter()
        .collect(),
    ];
    let mut pool = pool("default", 10);
    pool.requirements
        .add(req(labels::INSTANCE_TYPE, Operator::NotIn, &["fake-it-2"]));
    let result = solve(vec![pool], vec![p]);
    let claim = claim_of(&result, "big");
    assert_eq!(claim.instance_type, "fake-it-5");
    assert_eq!(claim.instance_type_options.len(), 2);
}

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

fn anti(app: &str, key: &str) -> PodAffinityTerm {
    PodAffinityTerm::new(LabelSelector::match_labels(&[("app", app)]), key)
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
        assert_eq!(c.pods.iter().filter(|p| p.contains("web")).count(), 1);
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
            pod: "default/api".into(),
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

fn spread(key: &str, app: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint::new(key, 1, LabelSelector::match_labels(&[("app", app)]))
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
fn min_values_keeps_enough_instance_types() {
    let mut p = pool("default", 10);
    p.requirements
        .add(req(labels::INSTANCE_TYPE, Operator::Exists, &[]).with_min_values(5));
    let result = solve(vec![p.clone()], vec![pod("a", 100, 0)]);
    assert!(result.errors.is_empty());
    assert!(claim_of(&result, "a").instance_type_options.len() >= 5);
    // A pod so large that only 3 types fit cannot satisfy minValues 5.
    let result = solve(vec![p.clone()], vec![pod("big", 7500, 0)]);
    assert_eq!(result.errors.len(), 1);
    assert!(
        result.errors[0].reason.contains("minValues 5"),
        "{}",
        result.errors[0].reason
    );
    // Truncation to fewer options than minValues is an error too.
    let input = SchedulerInput {
        node_pools: vec![p],
        pods: vec![pod("a", 100, 0)],
        options: SchedulerOptions {
            max_instance_types: 3,
            ..SchedulerOptions::default()
        },
        ..SchedulerInput::default()
    };
    let result = Scheduler::new(input).solve();
    assert!(result.new_node_claims.is_empty());
    assert!(result.errors[0].reason.contains("minValues"));
}

#[test]
fn heavier_pools_first_and_limits_are_not_overrun() {
    let mut heavy = pool("heavy", 4);
    heavy.weight = 50;
    heavy.limits = BTreeMap::from([("cpu".to_string(), 4000)]);
    let light = pool("light", 4);
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = pod(&format!("p-{i}"), 1500, 0).with_label("app", "x");
            p.pod_anti_affinity = vec![anti("x", labels::HOSTNAME)];
            p
        })
        .collect();
    let result = solve(vec![light, heavy], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let heavy_claims: Vec<_> = result
        .new_node_claims
        .iter()
        .filter(|c| c.node_pool == "heavy")
        .collect();
    let heavy_cpu: i64 = heavy_claims
        .iter()
        .map(|c| {
            c.instance_type
                .trim_start_matches("fake-it-")
                .parse::<i64>()
                .unwrap()
                + 1
        })
        .sum();
    assert!(!heavy_claims.is_empty());
    assert!(
        heavy_cpu <= 4,
        "heavy pool used {heavy_cpu} cpus over its limit of 4"
    );
    assert!(
        result
            .new_node_claims
            .iter()
            .any(|c| c.node_pool == "light")
    );
}

#[test]
fn a_pool_at_its_limits_reports_what_the_pod_lacks_first() {
    let mut limited = pool("limited", 4);
    limited.limits = BTreeMap::from([("cpu".to_string(), 2000)]);
    let mut gpu = pod("gpu", 100, 0);
    gpu.requests.set("nvidia.com/gpu", 1);
    let result = solve(
        vec![limited],
        vec![pod("a", 1500, 0), pod("b", 1500, 0), gpu],
    );
    assert_eq!(result.new_node_claims.len(), 1);
    let reason = |p: &str| {
        result
            .errors
            .iter()
            .find(|e| e.pod == format!("default/{p}"))
            .map(|e| e.reason.clone())
            .unwrap_or_default()
    };
    // b would fit the pool but for its limits.
    assert!(reason("b").contains("limits (cpu)"), "{}", reason("b"));
    // The GPU pod fits no instance type at all, limits or not.
    assert!(
        reason("gpu").contains("nvidia.com/gpu"),
        "{}",
        reason("gpu")
    );
    assert!(!reason("gpu").contains("limits"), "{}", reason("gpu"));
}

#[test]
fn daemonset_overhead_counts_only_where_daemonsets_run() {
    let mut ds = pod("ds", 1000, 0);
    ds.owner_kind = Some("DaemonSet".into());
    let mut gpu_only = pod("gpu-ds", 2000, 0);
    gpu_only
        .node_selector
        .insert("accelerator".into(), "gpu".into());
    let input = SchedulerInput {
        node_pools: vec![pool("default", 6)],
        pods: vec![pod("a", 500, 0)],
        daemonsets: vec![ds, gpu_only],
        ..SchedulerInput::default()
    };
    let result = Scheduler::new(input).solve();
    let claim = claim_of(&result, "a");
    assert_eq!(
        claim.requests.cpu_millis, 1500,
        "the gpu daemonset must not count"
    );
    assert_eq!(claim.requests.pods, 2);
    assert_eq!(claim.instance_type, "fake-it-1");
}

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
fn init_containers_size_the_node() {
    let requests = effective_requests(
        &[ContainerRequests {
            requests: Resources::cpu_memory(100, 0),
            restartable: false,
        }],
        &[ContainerRequests {
            requests: Resources::cpu_memory(2500, 0),
            restartable: false,
        }],
        &Resources::zero(),
    );
    let result = solve(
        vec![pool("default", 6)],
        vec![Pod::new("default", "init", requests)],
    );
    assert_eq!(claim_of(&result, "init").instance_type, "fake-it-2");
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
            Taint::new("node.kubernetes.io/not-ready", "", TaintEffect::NoSchedule),
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

fn reserved_type() -> InstanceType {
    let mut it = fake_type(1);
    it.offerings
        .push(Offering::reserved("test-zone-1", 0.00001, "cr-1", 1));
    InstanceType::new(
        &it.name.clone(),
        Requirements::new(),
        it.offerings,
        it.capacity,
        it.overhead,
    )
}

#[test]
fn reserved_capacity_is_preferred_while_it_has_room() {
    let mut pool = pool("default", 4);
    pool.instance_types[1] = reserved_type();
    let pods: Vec<Pod> = (0..2)
        .map(|i| {
            let mut p = pod(&format!("r-{i}"), 1000, 0).with_label("app", "r");
            p.pod_anti_affinity = vec![anti("r", labels::HOSTNAME)];
            p
        })
        .collect();
    let result = solve(vec![pool.clone()], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let reserved: Vec<_> = result
        .new_node_claims
        .iter()
        .filter(|c| c.capacity_type == CapacityType::Reserved)
        .collect();
    assert_eq!(
        reserved.len(),
        1,
        "the reservation has room for one instance"
    );
    assert_eq!(reserved[0].reservation_id.as_deref(), Some("cr-1"));
    assert_eq!(reserved[0].instance_type, "fake-it-1");
    assert_eq!(
        reserved[0].instance_type_options.len(),
        1,
        "pinned to reserved offerings"
    );
    let other = result
        .new_node_claims
        .iter()
        .find(|c| c.capacity_type != CapacityType::Reserved)
        .unwrap();
    assert!(other.reservation_id.is_none());
    // A reserved-only pool fails once the reservation is used up.
    pool.requirements
        .add(req(labels::CAPACITY_TYPE, Operator::In, &["reserved"]));
    let pods: Vec<Pod> = (0..2)
        .map(|i| {
            let mut p = pod(&format!("r-{i}"), 1000, 0).with_label("app", "r");
            p.pod_anti_affinity = vec![anti("r", labels::HOSTNAME)];
            p
        })
        .collect();
    let result = solve(vec![pool], pods);
    assert_eq!(result.new_node_claims.len(), 1);
    assert_eq!(result.errors.len(), 1);
}

#[test]
fn priority_scores_order_options_before_price() {
    let mut pool = pool("default", 6);
    pool.priority_scores = Some(HashMap::from([
        ("fake-it-4".to_string(), 10),
        ("fake-it-3".to_string(), 5),
    ]));
    let result = solve(vec![pool], vec![pod("a", 100, 0)]);
    let claim = claim_of(&result, "a");
    assert_eq!(claim.instance_type, "fake-it-4");
    let names: Vec<&str> = claim
        .instance_type_options
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(&names[..3], &["fake-it-4", "fake-it-3", "fake-it-0"]);
    assert_eq!(claim.instance_type_options[0].score, Some(10));
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
            pod: "default/plain".into(),
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
    only.instance_types.retain(|t| t.name == "fake-it-3");
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
        assert!(a.pods.contains(&p.to_string()), "{p}: {:?}", a.pods);
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
    assert!(claim.pods.contains(&"default/db".to_string()));
    assert_eq!(claim.zone, "test-zone-2");
    assert_eq!(claim.capacity_type, CapacityType::OnDemand);
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

#[test]
fn a_blocked_pool_launches_nothing_and_says_why() {
    let mut blocked = pool("blocked", 4);
    blocked.weight = 100;
    blocked.blocked = Some("EC2NodeClass \"x\": filter failed: boom".into());
    let mut only_blocked = pod("pinned", 100, 0);
    only_blocked
        .node_selector
        .insert(labels::NODE_POOL.into(), "blocked".into());
    let result = solve(
        vec![blocked, pool("fallback", 4)],
        vec![pod("free", 100, 0), only_blocked],
    );
    // The heavier pool is skipped, not used.
    assert_eq!(claim_of(&result, "free").node_pool, "fallback");
    assert!(
        result
            .new_node_claims
            .iter()
            .all(|c| c.node_pool != "blocked")
    );
    assert_eq!(result.errors.len(), 1);
    let reason = &result.errors[0].reason;
    assert!(
        reason.contains(
            "nodepool \"blocked\": launches are blocked: EC2NodeClass \"x\": filter failed: boom"
        ),
        "{reason}"
    );
    assert!(!reason.contains("no instance type"), "{reason}");
}
