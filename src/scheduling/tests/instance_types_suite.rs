//! Instance-type compatibility and bin-packing cases ported from Karpenter's
//! scheduling `suite_test.go`, named after its `It`s.

use super::*;

/// A type with the given arch and OS in test-zone-1..2.
fn typed(name: &str, arch: &str, os: &str, cpu: i64, mem: i64) -> InstanceType {
    let reqs: Requirements = [
        Requirement::single(labels::ARCH, arch),
        Requirement::single(labels::OS, os),
    ]
    .into_iter()
    .collect();
    let price = 0.01 * cpu as f64;
    InstanceType::new(
        name,
        reqs,
        vec![
            Offering::new("test-zone-1", CapacityType::OnDemand, price),
            Offering::new("test-zone-2", CapacityType::OnDemand, price),
        ],
        Resources::cpu_memory(cpu * 1000, mem).with_pods(110),
        Overhead::default(),
    )
}

/// An amd64/linux default type, a small one, an arm64 one with the most CPU,
/// and a windows one.
fn mixed_pool(archs: &[&str]) -> NodePoolSpec {
    let mut np = NodePoolSpec {
        name: "default".into(),
        instance_types: Arc::new(vec![
            typed("default-instance-type", "amd64", "linux", 4, 4 * GIB),
            typed("small-instance-type", "amd64", "linux", 2, 2 * GIB),
            typed("arm-instance-type", "arm64", "ios", 16, 128 * GIB),
            typed("windows-instance-type", "amd64", "windows", 4, 4 * GIB),
        ]),
        ..NodePoolSpec::default()
    };
    np.requirements.add(req(labels::ARCH, Operator::In, archs));
    np
}

fn selecting(name: &str, key: &str, value: &str) -> Pod {
    let mut p = pod(name, 100, 0);
    p.node_selector.insert(key.into(), value.into());
    p
}

fn on_separate_claims(result: &SchedulingResult, a: &str, b: &str) {
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_ne!(claim_of(result, a), claim_of(result, b));
}

#[test]
fn should_not_schedule_if_requesting_more_resources_than_any_instance_type_has() {
    let result = solve(vec![pool("default", 4)], vec![pod("a", 512_000, 0)]);
    assert!(result.new_node_claims.is_empty());
    assert_eq!(result.errors.len(), 1);
}

#[test]
fn should_launch_pods_with_different_archs_on_different_instances() {
    let result = solve(
        vec![mixed_pool(&["arm64", "amd64"])],
        vec![
            selecting("a", labels::ARCH, "amd64"),
            selecting("b", labels::ARCH, "arm64"),
        ],
    );
    on_separate_claims(&result, "a", "b");
}

#[test]
fn should_exclude_instance_types_that_are_not_supported_by_the_pod_constraints_node_affinity_instance_type()
 {
    let mut p = pod("a", 100, 0);
    p.required_node_affinity = vec![
        [req(
            labels::INSTANCE_TYPE,
            Operator::In,
            &["arm-instance-type"],
        )]
        .into_iter()
        .collect(),
    ];
    let result = solve(vec![mixed_pool(&["amd64"])], vec![p]);
    assert!(result.new_node_claims.is_empty());
}

#[test]
fn should_exclude_instance_types_that_are_not_supported_by_the_pod_constraints_node_affinity_operating_system()
 {
    let mut p = pod("a", 100, 0);
    p.required_node_affinity = vec![
        [req(labels::OS, Operator::In, &["ios"])]
            .into_iter()
            .collect(),
    ];
    let result = solve(vec![mixed_pool(&["amd64"])], vec![p]);
    assert!(result.new_node_claims.is_empty());
}

#[test]
fn should_exclude_instance_types_that_are_not_supported_by_the_provider_constraints_arch() {
    // Only the arm64 type has 14 CPUs, and the pool is amd64 only.
    let result = solve(vec![mixed_pool(&["amd64"])], vec![pod("a", 14_000, 0)]);
    assert!(result.new_node_claims.is_empty());
}

#[test]
fn should_launch_pods_with_different_operating_systems_on_different_instances() {
    let result = solve(
        vec![mixed_pool(&["arm64", "amd64"])],
        vec![
            selecting("a", labels::OS, "linux"),
            selecting("b", labels::OS, "windows"),
        ],
    );
    on_separate_claims(&result, "a", "b");
}

#[test]
fn should_launch_pods_with_different_instance_type_node_selectors_on_different_instances() {
    // The deprecated beta key is normalized to the stable one.
    let result = solve(
        vec![mixed_pool(&["arm64", "amd64"])],
        vec![
            selecting(
                "a",
                "beta.kubernetes.io/instance-type",
                "small-instance-type",
            ),
            selecting("b", labels::INSTANCE_TYPE, "default-instance-type"),
        ],
    );
    on_separate_claims(&result, "a", "b");
    assert_eq!(claim_of(&result, "a").instance_type, "small-instance-type");
}

#[test]
fn should_launch_pods_with_different_zone_selectors_on_different_instances() {
    let result = solve(
        vec![mixed_pool(&["arm64", "amd64"])],
        vec![
            selecting("a", labels::ZONE, "test-zone-1"),
            selecting("b", labels::ZONE, "test-zone-2"),
        ],
    );
    on_separate_claims(&result, "a", "b");
}

const GPU1: &str = "example.com/super-great-gpu";
const GPU2: &str = "example.com/even-better-gpu";

fn gpu_pool() -> NodePoolSpec {
    let mut np = pool("default", 5);
    let types = Arc::make_mut(&mut np.instance_types);
    types[0].capacity = types[0].capacity.clone().with_extended(GPU1, 25);
    types[1].capacity = types[1].capacity.clone().with_extended(GPU2, 25);
    np
}

#[test]
fn should_launch_pods_with_resources_that_arent_on_any_single_instance_type_on_different_instances()
{
    let a = Pod::new("default", "a", Resources::zero().with_extended(GPU1, 1));
    let b = Pod::new("default", "b", Resources::zero().with_extended(GPU2, 1));
    let result = solve(vec![gpu_pool()], vec![a, b]);
    on_separate_claims(&result, "a", "b");
}

#[test]
fn should_fail_to_schedule_a_pod_with_resources_requests_that_arent_on_a_single_instance_type() {
    let a = Pod::new(
        "default",
        "a",
        Resources::zero()
            .with_extended(GPU1, 1)
            .with_extended(GPU2, 1),
    );
    let result = solve(vec![gpu_pool()], vec![a]);
    assert!(result.new_node_claims.is_empty());
    assert_eq!(result.errors.len(), 1);
}

#[test]
fn should_schedule_a_small_pod_on_the_smallest_instance() {
    let result = solve(vec![pool("default", 6)], vec![pod("a", 100, 100 << 20)]);
    assert_eq!(claim_of(&result, "a").instance_type, "fake-it-0");
}

#[test]
fn should_schedule_multiple_small_pods_on_the_smallest_possible_instance_type() {
    let pods: Vec<Pod> = (0..5)
        .map(|i| pod(&format!("p-{i}"), 10, 10 << 20))
        .collect();
    let result = solve(vec![pool("default", 6)], pods);
    assert_eq!(result.new_node_claims.len(), 1);
    assert_eq!(result.new_node_claims[0].instance_type, "fake-it-0");
}

#[test]
fn should_create_new_nodes_when_a_node_is_at_capacity() {
    // Two of these pods fit the largest type.
    let mut np = pool("default", 4);
    np.instance_types = Arc::new(vec![typed(
        "default-instance-type",
        "amd64",
        "linux",
        4,
        4 * GIB,
    )]);
    let pods: Vec<Pod> = (0..40)
        .map(|i| pod(&format!("p-{i}"), 0, 1_800_000_000))
        .collect();
    let result = solve(vec![np], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(result.new_node_claims.len(), 20);
}

#[test]
fn should_pack_small_and_large_pods_together() {
    let mut np = pool("default", 4);
    np.instance_types = Arc::new(vec![typed(
        "default-instance-type",
        "amd64",
        "linux",
        4,
        4 * GIB,
    )]);
    let mut pods: Vec<Pod> = (0..40)
        .map(|i| pod(&format!("large-{i}"), 0, 1_800_000_000))
        .collect();
    pods.extend((0..20).map(|i| pod(&format!("small-{i}"), 0, 400_000_000)));
    let result = solve(vec![np], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(result.new_node_claims.len(), 20);
}

#[test]
fn should_pack_nodes_tightly() {
    let result = solve(
        vec![pool("default", 5)],
        vec![pod("big", 4500, 0), pod("small", 1000, 0)],
    );
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let big = claim_of(&result, "big");
    let small = claim_of(&result, "small");
    assert_ne!(big, small);
    assert_ne!(big.instance_type, small.instance_type);
}

#[test]
fn should_handle_zero_quantity_resource_requests() {
    let p = Pod::new(
        "default",
        "a",
        Resources::zero().with_extended("foo.com/weird-resources", 0),
    );
    let result = solve(vec![pool("default", 4)], vec![p]);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
}

#[test]
fn should_not_schedule_pods_that_exceed_every_instance_types_capacity() {
    let result = solve(vec![pool("default", 4)], vec![pod("a", 0, 2 << 40)]);
    assert!(result.new_node_claims.is_empty());
}

#[test]
fn should_create_new_nodes_when_a_node_is_at_capacity_due_to_pod_limits_per_node() {
    // fake-it-0 holds 10 pods.
    let mut np = pool("default", 1);
    np.instance_types = Arc::new(vec![fake_type(0)]);
    let pods: Vec<Pod> = (0..25).map(|i| pod(&format!("p-{i}"), 1, 1)).collect();
    let result = solve(vec![np], pods);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(result.new_node_claims.len(), 3);
}
