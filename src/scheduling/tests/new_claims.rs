//! New NodeClaims: instance-type choice, requirements, taints, limits,
//! daemonset overhead, reserved capacity and blocked pools.

use super::*;

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
    Arc::make_mut(&mut pool.instance_types)[1] = reserved_type();
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
    pool.priority_scores = Some(std::sync::Arc::new(HashMap::from([
        ("fake-it-4".to_string(), 10),
        ("fake-it-3".to_string(), 5),
    ])));
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
fn a_blocked_pool_launches_nothing_and_says_why() {
    let mut blocked = pool("blocked", 4);
    blocked.weight = 100;
    blocked.blocked = Some(Blocked::of_node_class(
        BlockedReason::ModuleFailed,
        "x",
        "filter failed: boom",
    ));
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

#[test]
fn should_not_schedule_if_limits_would_be_exceeded_node() {
    let mut limited = pool("default", 4);
    limited.limits.insert("nodes".into(), 2);
    let apart = |name: &str| {
        let mut p = pod(name, 1500, 0).with_label("app", "foo");
        p.pod_anti_affinity = vec![PodAffinityTerm::new(
            LabelSelector::match_labels(&[("app", "foo")]),
            labels::HOSTNAME,
        )];
        p
    };
    // One solve: two nodes may be launched, the third pod is refused.
    let result = solve(
        vec![limited.clone()],
        vec![apart("a"), apart("b"), apart("c")],
    );
    assert_eq!(result.new_node_claims.len(), 2);
    assert_eq!(result.errors.len(), 1);
    let reason = &result.errors[0].reason;
    assert!(reason.contains("nodes limit (2) is reached"), "{reason}");

    // Later rounds: a node and an in-flight NodeClaim of the pool use the limit up.
    let owned = |name: &str| ExistingNode {
        name: name.into(),
        labels: BTreeMap::from([(labels::NODE_POOL.to_string(), "default".to_string())]),
        allocatable: Resources::cpu_memory(2000, GIB).with_pods(10),
        capacity: Resources::cpu_memory(2000, GIB).with_pods(10),
        pods: vec![apart(&format!("{name}-pod"))],
        initialized: true,
        ..ExistingNode::default()
    };
    let result = Scheduler::new(SchedulerInput {
        node_pools: vec![limited.clone()],
        existing_nodes: vec![owned("node-1")],
        in_flight: vec![owned("claim-1")],
        pods: vec![apart("d")],
        ..SchedulerInput::default()
    })
    .solve();
    assert!(result.new_node_claims.is_empty());
    assert!(
        result.errors[0]
            .reason
            .contains("nodes limit (2) is reached"),
        "{}",
        result.errors[0].reason
    );
    // With one node only, one more may be launched.
    let result = Scheduler::new(SchedulerInput {
        node_pools: vec![limited],
        existing_nodes: vec![owned("node-1")],
        pods: vec![apart("d")],
        ..SchedulerInput::default()
    })
    .solve();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(result.new_node_claims.len(), 1);
}

#[test]
fn should_label_nodes() {
    let mut np = pool("default", 2);
    np.labels.insert("test-key-1".into(), "test-value-1".into());
    for r in [
        req("test-key-2", Operator::In, &["test-value-2"]),
        req("test-key-3", Operator::NotIn, &["test-value-3"]),
        req("test-key-4", Operator::Lt, &["4"]),
        req("test-key-5", Operator::Gt, &["5"]),
        req("test-key-6", Operator::Exists, &[]),
        req("test-key-7", Operator::DoesNotExist, &[]),
        req("test-key-8", Operator::In, &["b", "a"]),
        req("test-key-9", Operator::NotIn, &["0", "1"]),
    ] {
        np.requirements.add(r);
    }
    let result = solve(vec![np], vec![pod("a", 100, 0)]);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let labels = &claim_of(&result, "a").labels;
    let get = |k: &str| labels.get(k).map(String::as_str);
    assert_eq!(get(labels::NODE_POOL), Some("default"));
    assert_eq!(get("test-key-1"), Some("test-value-1"));
    assert_eq!(get("test-key-2"), Some("test-value-2"));
    // Generated values: the smallest integer the requirement admits, or the
    // first value in sorted order for In.
    assert_eq!(get("test-key-3"), Some("0"));
    assert_eq!(get("test-key-4"), Some("0"));
    assert_eq!(get("test-key-5"), Some("6"));
    assert_eq!(get("test-key-6"), Some("0"));
    assert_eq!(get("test-key-7"), None);
    assert_eq!(get("test-key-8"), Some("a"));
    assert_eq!(get("test-key-9"), Some("2"));
    // Values the instance decides are not generated.
    assert_eq!(get(labels::ZONE), None);
    assert_eq!(get(labels::INSTANCE_TYPE), None);
    assert_eq!(get(labels::HOSTNAME), None);
}

/// fake-it-0's cheapest offering (spot): 0.7 × (0.1 × 1 cpu + 0.1 × 2 GiB).
const FAKE_0_SPOT: f64 = 0.7 * (0.1 + 0.1 * (2 * GIB) as f64 / 1e9);

fn apart(n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = pod(&format!("p-{i}"), 500, 0).with_label("app", "x");
            p.pod_anti_affinity = vec![anti("x", labels::HOSTNAME)];
            p
        })
        .collect()
}

#[test]
fn a_price_limit_stops_new_claims_once_their_planned_prices_reach_it() {
    let mut priced = pool("priced", 4);
    priced.price_limit = Some(2.0 * FAKE_0_SPOT + 0.01);
    let result = solve(vec![priced], apart(3));
    assert_eq!(result.new_node_claims.len(), 2, "{:?}", result.errors);
    let planned: f64 = result.new_node_claims.iter().map(|c| c.price).sum();
    assert!(planned <= 2.0 * FAKE_0_SPOT + 0.01, "{planned}");
    assert_eq!(result.errors.len(), 1);
    let reason = &result.errors[0].reason;
    assert!(
        reason.contains("price limit") && reason.contains("nodewright.io/price-limit-per-hour"),
        "{reason}"
    );
    // Without the annotation the same pods get a node each.
    assert_eq!(
        solve(vec![pool("free", 4)], apart(3)).new_node_claims.len(),
        3
    );
}

#[test]
fn a_claim_keeps_only_the_options_the_price_left_can_pay() {
    let mut priced = pool("priced", 4);
    // Less than fake-it-1's cheapest offering (2 × fake-it-0's).
    priced.price_limit = Some(1.5 * FAKE_0_SPOT);
    let result = solve(vec![priced], apart(1));
    let claim = &result.new_node_claims[0];
    assert_eq!(claim.instance_type, "fake-it-0");
    assert_eq!(
        claim
            .instance_type_options
            .iter()
            .map(|o| o.name.as_str())
            .collect::<Vec<_>>(),
        ["fake-it-0"],
        "dearer options would launch past the limit"
    );
}

#[test]
fn existing_nodes_of_the_pool_count_at_their_offering_price() {
    let mut priced = pool("priced", 4);
    priced.price_limit = Some(1.5 * FAKE_0_SPOT);
    let mut node = ExistingNode {
        name: "running".to_string(),
        labels: BTreeMap::from([
            (labels::NODE_POOL.to_string(), "priced".to_string()),
            (labels::INSTANCE_TYPE.to_string(), "fake-it-0".to_string()),
            (labels::ZONE.to_string(), "test-zone-1".to_string()),
            (labels::CAPACITY_TYPE.to_string(), "spot".to_string()),
        ]),
        capacity: Resources::cpu_memory(1000, 2 * GIB).with_pods(10),
        allocatable: Resources::cpu_memory(900, 2 * GIB).with_pods(10),
        initialized: true,
        ..ExistingNode::default()
    };
    // The running node fills it with one pod; another needs a new node,
    // which the half node's worth of price left cannot pay.
    node.pods = vec![pod("on-node", 500, 0).with_label("app", "x")];
    let input = SchedulerInput {
        node_pools: vec![priced],
        existing_nodes: vec![node.clone()],
        pods: vec![apart(1).remove(0)],
        ..SchedulerInput::default()
    };
    let scheduler = Scheduler::new(input);
    let result = scheduler.solve();
    assert!(result.new_node_claims.is_empty());
    assert!(
        result.errors[0].reason.contains("price limit"),
        "{:?}",
        result.errors
    );
    // What the pool spends against its limit, as `simulate` reports it.
    let spend = scheduler.price_limits();
    assert_eq!(spend.len(), 1);
    assert_eq!(spend[0].node_pool, "priced");
    assert!((spend[0].limit_per_hour - 1.5 * FAKE_0_SPOT).abs() < 1e-9);
    assert!(
        (spend[0].nodes_per_hour - FAKE_0_SPOT).abs() < 1e-9,
        "{spend:?}"
    );
    // The same node on-demand costs more than the whole limit: still nothing.
    node.labels
        .insert(labels::CAPACITY_TYPE.to_string(), "on-demand".to_string());
    let input = SchedulerInput {
        node_pools: vec![{
            let mut p = pool("priced", 4);
            p.price_limit = Some(3.0 * FAKE_0_SPOT);
            p
        }],
        existing_nodes: vec![node],
        pods: vec![apart(1).remove(0)],
        ..SchedulerInput::default()
    };
    let result = Scheduler::new(input).solve();
    assert_eq!(
        result.new_node_claims.len(),
        1,
        "3 × 0.22 less an on-demand 0.31 leaves room for one spot node: {:?}",
        result.errors
    );
}

#[test]
fn a_price_limit_of_zero_launches_nothing() {
    let mut closed = pool("closed", 4);
    closed.price_limit = Some(0.0);
    let result = solve(vec![closed], apart(1));
    assert!(result.new_node_claims.is_empty());
    assert!(result.errors[0].reason.contains("price limit"));
}

#[test]
fn a_claim_still_launching_counts_at_its_cheapest_type() {
    let mut priced = pool("priced", 4);
    priced.price_limit = Some(1.5 * FAKE_0_SPOT);
    // Launching, no instance type yet, and full.
    let launching = ExistingNode {
        name: "priced-abcde".to_string(),
        labels: BTreeMap::from([(labels::NODE_POOL.to_string(), "priced".to_string())]),
        ..ExistingNode::default()
    };
    let input = SchedulerInput {
        node_pools: vec![priced.clone()],
        in_flight: vec![launching],
        pods: apart(1),
        ..SchedulerInput::default()
    };
    let result = Scheduler::new(input).solve();
    assert!(
        result.new_node_claims.is_empty(),
        "{:?}",
        result.new_node_claims
    );
    assert!(result.errors[0].reason.contains("price limit"));
    // Without it, the pod gets a NodeClaim.
    let alone = solve(vec![priced], apart(1));
    assert_eq!(alone.new_node_claims.len(), 1);
}
