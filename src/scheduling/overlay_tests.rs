//! Karpenter's NodeOverlay controller and store tests
//! (`pkg/controllers/nodeoverlay/suite_test.go`, `store_test.go`), by `It`
//! text, on the pure evaluation: the statuses stand for the
//! `ValidationSucceeded` condition, `apply` for the decorated
//! `GetInstanceTypes`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::scheduling::instance_type::Overhead;
use crate::scheduling::resources::Resources;

const POOL: &str = "default";

fn instance_type(name: &str, arch: &str, offerings: Vec<Offering>) -> InstanceType {
    let mut requirements = Requirements::new();
    requirements.add(Requirement::single(labels::ARCH, arch));
    requirements.add(Requirement::single(labels::OS, "linux"));
    InstanceType::new(
        name,
        requirements,
        offerings,
        Resources::cpu_memory(4000, 16 << 30).with_pods(110),
        Overhead::default(),
    )
}

/// Karpenter's suite default: one spot offering in test-zone-1 at 1.020.
fn default_type() -> InstanceType {
    instance_type(
        "default-instance-type",
        "amd64",
        vec![Offering::new("test-zone-1", CapacityType::Spot, 1.020)],
    )
}

fn overlay(name: &str, spec: serde_json::Value) -> NodeOverlay {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("test overlay")
}

fn instance_types_in(names: &[&str]) -> serde_json::Value {
    serde_json::json!([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": names}])
}

struct Pool {
    name: &'static str,
    labels: BTreeMap<String, String>,
    types: Vec<InstanceType>,
}

fn pool(name: &'static str, types: Vec<InstanceType>) -> Pool {
    Pool {
        name,
        labels: BTreeMap::new(),
        types,
    }
}

fn evaluate(overlays: &[NodeOverlay], pools: &[Pool]) -> Overlays {
    let refs: Vec<&NodeOverlay> = overlays.iter().collect();
    let views: Vec<PoolTypes<'_>> = pools
        .iter()
        .map(|p| PoolTypes {
            pool: p.name,
            labels: &p.labels,
            types: &p.types,
        })
        .collect();
    Overlays::evaluate(&refs, &views)
}

fn status<'a>(overlays: &'a Overlays, name: &str) -> &'a OverlayStatus {
    overlays
        .statuses()
        .iter()
        .find(|s| s.name == name)
        .expect("status")
}

fn applied(overlays: &Overlays, pool: &str, types: Vec<InstanceType>) -> Vec<InstanceType> {
    overlays.apply(pool, &Arc::new(types)).to_vec()
}

fn price(types: &[InstanceType], name: &str, zone: &str, capacity_type: CapacityType) -> f64 {
    types
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| {
            t.offerings
                .iter()
                .find(|o| o.zone == zone && o.capacity_type == capacity_type)
        })
        .map(|o| o.price)
        .expect("offering")
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// The price (or adjustment) entries of Karpenter's tables.
fn price_entries() -> [(serde_json::Value, f64); 2] {
    [
        (serde_json::json!({"price": "13234.223"}), 13234.223),
        (serde_json::json!({"priceAdjustment": "+1000"}), 1001.020),
    ]
}

fn merged(mut spec: serde_json::Value, changes: &serde_json::Value) -> serde_json::Value {
    if let (Some(spec), Some(changes)) = (spec.as_object_mut(), changes.as_object()) {
        for (k, v) in changes {
            spec.insert(k.clone(), v.clone());
        }
    }
    spec
}

#[test]
fn should_return_the_same_instance_type_when_zero_overlay_are_applied() {
    let overlays = evaluate(&[], &[pool(POOL, vec![default_type()])]);
    let types = Arc::new(vec![default_type()]);
    let out = overlays.apply(POOL, &types);
    assert!(Arc::ptr_eq(&out, &types));
    assert_eq!(out[0].offerings[0].price, 1.020);
}

#[test]
fn should_pass_with_a_single_overlay() {
    let overlays = evaluate(
        &[overlay(
            "single",
            serde_json::json!({"requirements": instance_types_in(&["default-instance-type"]), "weight": 10}),
        )],
        &[pool(POOL, vec![default_type()])],
    );
    assert!(status(&overlays, "single").applied);
}

#[test]
fn should_fail_validation_for_invalid_requirements_values() {
    let key = format!("test.com.test/test-{}", "a".repeat(250));
    let overlays = evaluate(
        &[overlay(
            "bad",
            serde_json::json!({"requirements": [{"key": key, "operator": "Exists"}], "weight": 10}),
        )],
        &[pool(POOL, vec![default_type()])],
    );
    let bad = status(&overlays, "bad");
    assert!(!bad.applied);
    assert_eq!(bad.reason, Some(REASON_RUNTIME_VALIDATION));
    assert!(
        bad.message.contains("spec.requirements[0].key"),
        "{}",
        bad.message
    );
}

#[test]
fn should_fail_validation_for_invalid_capacity_values() {
    let overlays = evaluate(
        &[overlay(
            "bad",
            serde_json::json!({
                "requirements": instance_types_in(&["default-instance-type"]),
                "capacity": {"cpu": "5"},
                "weight": 10,
            }),
        )],
        &[pool(POOL, vec![default_type()])],
    );
    assert_eq!(
        status(&overlays, "bad").reason,
        Some(REASON_RUNTIME_VALIDATION)
    );
}

fn arm_and_amd() -> Vec<InstanceType> {
    let offerings = || {
        vec![
            Offering::new("test-zone-1", CapacityType::Spot, 1.0),
            Offering::new("test-zone-1", CapacityType::OnDemand, 2.0),
        ]
    };
    vec![
        instance_type("arm-instance-type", "arm64", offerings()),
        instance_type("amd-instance-type", "amd64", offerings()),
    ]
}

#[test]
fn should_fail_when_requirements_overlays_overlap() {
    let overlays = evaluate(
        &[
            overlay(
                "overlay-a",
                serde_json::json!({"requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}], "weight": 10, "price": "1.03"}),
            ),
            overlay(
                "overlay-b",
                serde_json::json!({"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "Exists"}], "weight": 10, "price": "23"}),
            ),
        ],
        &[pool(POOL, arm_and_amd())],
    );
    let a = status(&overlays, "overlay-a");
    assert!(!a.applied);
    assert_eq!(a.reason, Some(REASON_CONFLICT));
    assert!(a.message.contains("different weight"), "{}", a.message);
    assert!(status(&overlays, "overlay-b").applied);
}

#[test]
fn should_succeed_with_requirements_overlays_dont_overlap() {
    let overlays = evaluate(
        &[
            overlay(
                "overlay-a",
                serde_json::json!({"requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}], "weight": 10, "price": "1.03"}),
            ),
            overlay(
                "overlay-b",
                serde_json::json!({"requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}], "weight": 10, "price": "23"}),
            ),
        ],
        &[pool(POOL, arm_and_amd())],
    );
    assert!(status(&overlays, "overlay-a").applied);
    assert!(status(&overlays, "overlay-b").applied);
    let types = applied(&overlays, POOL, arm_and_amd());
    assert!(close(
        price(
            &types,
            "arm-instance-type",
            "test-zone-1",
            CapacityType::Spot
        ),
        1.03
    ));
    assert!(close(
        price(
            &types,
            "amd-instance-type",
            "test-zone-1",
            CapacityType::OnDemand
        ),
        23.0
    ));
}

fn zoned() -> Vec<InstanceType> {
    vec![instance_type(
        "default-instance-type",
        "amd64",
        vec![
            Offering::new("test-zone-1", CapacityType::Spot, 1.020),
            Offering::new("test-zone-2", CapacityType::OnDemand, 2.020),
            Offering::new("test-zone-4", CapacityType::Reserved, 4.020),
        ],
    )]
}

#[test]
fn should_fail_with_requirements_overlays_overlap_on_zone() {
    let overlays = evaluate(
        &[
            overlay(
                "overlay-a",
                serde_json::json!({"requirements": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-1", "test-zone-2"]}], "weight": 10, "price": "1.03"}),
            ),
            overlay(
                "overlay-b",
                serde_json::json!({"requirements": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-2", "test-zone-4"]}], "weight": 10, "price": "23"}),
            ),
        ],
        &[pool(POOL, zoned())],
    );
    assert_eq!(status(&overlays, "overlay-a").reason, Some(REASON_CONFLICT));
    assert!(status(&overlays, "overlay-b").applied);
}

#[test]
fn should_fail_with_requirements_overlays_overlap_on_capacity_type() {
    let overlays = evaluate(
        &[
            overlay(
                "overlay-a",
                serde_json::json!({"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}], "weight": 10, "price": "1.03"}),
            ),
            overlay(
                "overlay-b",
                serde_json::json!({"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "reserved"]}], "weight": 10, "price": "23"}),
            ),
        ],
        &[pool(POOL, zoned())],
    );
    assert_eq!(status(&overlays, "overlay-a").reason, Some(REASON_CONFLICT));
    assert!(status(&overlays, "overlay-b").applied);
}

#[test]
fn should_succeed_with_requirements_overlays_dont_overlap_on_offerings() {
    let overlays = evaluate(
        &[
            overlay(
                "overlay-a",
                serde_json::json!({"requirements": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-1"]}], "weight": 10, "price": "1.03"}),
            ),
            overlay(
                "overlay-b",
                serde_json::json!({"requirements": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-2"]}], "weight": 10, "price": "23"}),
            ),
        ],
        &[pool(POOL, zoned())],
    );
    assert!(status(&overlays, "overlay-a").applied);
    assert!(status(&overlays, "overlay-b").applied);
}

#[test]
fn should_fail_with_conflicting_pricing_updates_overlays_with_overlapping_requirements() {
    for (a, b) in [
        (
            serde_json::json!({"price": "1.03"}),
            serde_json::json!({"price": "23"}),
        ),
        (
            serde_json::json!({"priceAdjustment": "+54"}),
            serde_json::json!({"priceAdjustment": "-2"}),
        ),
        // Karpenter's "should fail with pricing updates are the same overlays
        // with overlapping requirements": equal values conflict too.
        (
            serde_json::json!({"price": "100"}),
            serde_json::json!({"price": "100"}),
        ),
        (
            serde_json::json!({"priceAdjustment": "+100"}),
            serde_json::json!({"priceAdjustment": "+100"}),
        ),
    ] {
        let overlays = evaluate(
            &[
                overlay(
                    "overlay-a",
                    merged(
                        serde_json::json!({"requirements": instance_types_in(&["default-instance-type", "small-instance-type"]), "weight": 10}),
                        &a,
                    ),
                ),
                overlay(
                    "overlay-b",
                    merged(
                        serde_json::json!({"requirements": instance_types_in(&["default-instance-type", "gpu-vendor-instance-type"]), "weight": 10}),
                        &b,
                    ),
                ),
            ],
            &[pool(POOL, vec![default_type()])],
        );
        assert_eq!(
            status(&overlays, "overlay-a").reason,
            Some(REASON_CONFLICT),
            "{a} {b}"
        );
        assert!(status(&overlays, "overlay-b").applied, "{a} {b}");
    }
}

#[test]
fn should_pass_with_conflicting_pricing_updates_overlays_with_mutually_exclusive_requirements() {
    let types = vec![
        default_type(),
        instance_type(
            "small-instance-type",
            "amd64",
            vec![Offering::new("test-zone-1", CapacityType::Spot, 0.5)],
        ),
    ];
    let overlays = evaluate(
        &[
            overlay(
                "overlay-a",
                serde_json::json!({"requirements": instance_types_in(&["default-instance-type"]), "weight": 10, "price": "54"}),
            ),
            overlay(
                "overlay-b",
                serde_json::json!({"requirements": instance_types_in(&["small-instance-type"]), "weight": 10, "price": "23"}),
            ),
        ],
        &[pool(POOL, types)],
    );
    assert!(status(&overlays, "overlay-a").applied);
    assert!(status(&overlays, "overlay-b").applied);
}

#[test]
fn should_pass_with_conflicting_pricing_update_overlays_with_mutually_exclusive_weights() {
    for ((a, b), expected) in [
        (
            (
                serde_json::json!({"price": "34"}),
                serde_json::json!({"price": "2"}),
            ),
            2.0,
        ),
        (
            (
                serde_json::json!({"priceAdjustment": "-4"}),
                serde_json::json!({"priceAdjustment": "+1000"}),
            ),
            1001.020,
        ),
    ] {
        let overlays = evaluate(
            &[
                overlay(
                    "overlay-a",
                    merged(
                        serde_json::json!({"requirements": instance_types_in(&["default-instance-type"]), "weight": 10}),
                        &a,
                    ),
                ),
                overlay(
                    "overlay-b",
                    merged(
                        serde_json::json!({"requirements": instance_types_in(&["default-instance-type"]), "weight": 20}),
                        &b,
                    ),
                ),
            ],
            &[pool(POOL, vec![default_type()])],
        );
        assert!(status(&overlays, "overlay-a").applied);
        assert!(status(&overlays, "overlay-b").applied);
        // The higher weight wins the offering; the lower one does not stack.
        let types = applied(&overlays, POOL, vec![default_type()]);
        let got = price(
            &types,
            "default-instance-type",
            "test-zone-1",
            CapacityType::Spot,
        );
        assert!(close(got, expected), "{got} != {expected}");
    }
}

#[test]
fn should_not_apply_pricing_updates_for_invalid_overlays() {
    for (changes, _) in price_entries() {
        // An In requirement without values fails validation.
        let overlays = evaluate(
            &[overlay(
                "invalid",
                merged(
                    serde_json::json!({"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In"}], "weight": 10}),
                    &changes,
                ),
            )],
            &[pool(POOL, vec![default_type()])],
        );
        assert!(!status(&overlays, "invalid").applied);
        let types = applied(&overlays, POOL, vec![default_type()]);
        assert_eq!(types[0].offerings[0].price, 1.020);
    }
}

#[test]
fn should_not_apply_adjustments_for_overlays_that_do_not_overlap_with_instance_types_requirements()
{
    for (changes, _) in price_entries() {
        let overlays = evaluate(
            &[overlay(
                "elsewhere",
                merged(
                    serde_json::json!({"requirements": instance_types_in(&["other-instance-type"]), "weight": 10}),
                    &changes,
                ),
            )],
            &[pool(POOL, vec![default_type()])],
        );
        assert!(status(&overlays, "elsewhere").applied);
        let types = applied(&overlays, POOL, vec![default_type()]);
        assert_eq!(types[0].offerings[0].price, 1.020);
    }
}

#[test]
fn should_apply_pricing_updates_for_instances_types() {
    for (changes, expected) in price_entries() {
        let overlays = evaluate(
            &[overlay(
                "it",
                merged(
                    serde_json::json!({"requirements": instance_types_in(&["default-instance-type"]), "weight": 10}),
                    &changes,
                ),
            )],
            &[pool(POOL, vec![default_type()])],
        );
        let types = applied(&overlays, POOL, vec![default_type()]);
        assert!(close(types[0].offerings[0].price, expected));
        // The catalog's price is kept beside the overlaid one.
        assert_eq!(types[0].offerings[0].list_price, 1.020);
        assert!(overlays.changes_prices(POOL));
    }
}

#[test]
fn should_apply_pricing_updates_for_instances_types_for_capacity_type() {
    let types = || {
        vec![instance_type(
            "default-instance-type",
            "amd64",
            vec![
                Offering::new("test-zone-1", CapacityType::Spot, 1.020),
                Offering::new("test-zone-1", CapacityType::OnDemand, 5.020),
            ],
        )]
    };
    for (changes, expected) in [
        (serde_json::json!({"price": "12321.32"}), 12321.32),
        (serde_json::json!({"priceAdjustment": "+1000"}), 1005.020),
    ] {
        let overlays = evaluate(
            &[overlay(
                "od",
                merged(
                    serde_json::json!({"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}], "weight": 10}),
                    &changes,
                ),
            )],
            &[pool(POOL, types())],
        );
        let out = applied(&overlays, POOL, types());
        let od = price(
            &out,
            "default-instance-type",
            "test-zone-1",
            CapacityType::OnDemand,
        );
        assert!(close(od, expected));
        let spot = price(
            &out,
            "default-instance-type",
            "test-zone-1",
            CapacityType::Spot,
        );
        assert!(close(spot, 1.020));
    }
}

#[test]
fn should_apply_pricing_updates_for_instances_types_for_availability_zone() {
    for (changes, expected) in [
        (serde_json::json!({"price": "121.421"}), 121.421),
        (serde_json::json!({"priceAdjustment": "+1000"}), 1001.020),
    ] {
        let overlays = evaluate(
            &[overlay(
                "zone",
                merged(
                    serde_json::json!({"requirements": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-1"]}], "weight": 10}),
                    &changes,
                ),
            )],
            &[pool(POOL, zoned())],
        );
        let out = applied(&overlays, POOL, zoned());
        assert!(close(
            price(
                &out,
                "default-instance-type",
                "test-zone-1",
                CapacityType::Spot
            ),
            expected
        ));
        assert!(close(
            price(
                &out,
                "default-instance-type",
                "test-zone-2",
                CapacityType::OnDemand
            ),
            2.020
        ));
    }
}

#[test]
fn should_update_price_updates_offerings_instance_types_from_multiple_overlays_with_different_weights()
 {
    for (a, b, one, two) in [
        (
            serde_json::json!({"price": "121.421"}),
            serde_json::json!({"price": "165.421"}),
            121.421,
            165.421,
        ),
        (
            serde_json::json!({"priceAdjustment": "+201"}),
            serde_json::json!({"priceAdjustment": "-1.5"}),
            203.020,
            2.520,
        ),
    ] {
        let overlays = evaluate(
            &[
                overlay(
                    "a-test-100",
                    merged(
                        serde_json::json!({"requirements": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-2"]}], "weight": 20}),
                        &a,
                    ),
                ),
                overlay(
                    "b-test-100",
                    merged(
                        serde_json::json!({"requirements": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-2", "test-zone-4"]}], "weight": 10}),
                        &b,
                    ),
                ),
            ],
            &[pool(POOL, zoned())],
        );
        let out = applied(&overlays, POOL, zoned());
        assert!(close(
            price(
                &out,
                "default-instance-type",
                "test-zone-2",
                CapacityType::OnDemand
            ),
            one
        ));
        assert!(close(
            price(
                &out,
                "default-instance-type",
                "test-zone-4",
                CapacityType::Reserved
            ),
            two
        ));
    }
}

#[test]
fn should_pass_with_conflicting_pricing_update_overlays_for_all_nodepools() {
    let pools = [
        pool("pool-a", vec![default_type()]),
        pool("pool-b", vec![default_type()]),
    ];
    let overlays = evaluate(
        &[
            overlay(
                "overlay-a",
                serde_json::json!({"requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["pool-a"]}], "weight": 10, "price": "3"}),
            ),
            overlay(
                "overlay-b",
                serde_json::json!({"requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["pool-b"]}], "weight": 10, "price": "4"}),
            ),
        ],
        &pools,
    );
    assert!(status(&overlays, "overlay-a").applied);
    assert!(status(&overlays, "overlay-b").applied);
    let a = applied(&overlays, "pool-a", vec![default_type()]);
    let b = applied(&overlays, "pool-b", vec![default_type()]);
    assert_eq!(a[0].offerings[0].price, 3.0);
    assert_eq!(b[0].offerings[0].price, 4.0);
}

#[test]
fn should_only_apply_pricing_updates_for_nodeclaim_spec_labels_that_defined_in_the_overlay_requirements()
 {
    let mut labelled = pool("labelled", vec![default_type()]);
    labelled.labels.insert("team".into(), "ml".into());
    let pools = [labelled, pool("plain", vec![default_type()])];
    for (changes, expected) in price_entries() {
        let overlays = evaluate(
            &[overlay(
                "team",
                merged(
                    serde_json::json!({"requirements": [{"key": "team", "operator": "In", "values": ["ml"]}], "weight": 10}),
                    &changes,
                ),
            )],
            &pools,
        );
        let labelled = applied(&overlays, "labelled", vec![default_type()]);
        let plain = applied(&overlays, "plain", vec![default_type()]);
        assert!(close(labelled[0].offerings[0].price, expected));
        assert_eq!(plain[0].offerings[0].price, 1.020);
    }
}

#[test]
fn should_not_partial_apply_for_a_subset_of_nodepools() {
    // overlay-b conflicts with overlay-a on pool-b only; it is applied on
    // no pool, not on pool-a alone.
    let pools = [
        pool("pool-a", vec![default_type()]),
        pool("pool-b", vec![default_type()]),
    ];
    let overlays = evaluate(
        &[
            overlay(
                "overlay-z",
                serde_json::json!({"requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["pool-b"]}], "weight": 10, "price": "3"}),
            ),
            overlay(
                "overlay-a",
                serde_json::json!({"requirements": instance_types_in(&["default-instance-type"]), "weight": 10, "price": "9"}),
            ),
        ],
        &pools,
    );
    assert_eq!(status(&overlays, "overlay-a").reason, Some(REASON_CONFLICT));
    let a = applied(&overlays, "pool-a", vec![default_type()]);
    assert_eq!(a[0].offerings[0].price, 1.020);
    let b = applied(&overlays, "pool-b", vec![default_type()]);
    assert_eq!(b[0].offerings[0].price, 3.0);
}

#[test]
fn should_not_partial_apply_instance_types_in_a_nodepool() {
    let types = || {
        vec![
            default_type(),
            instance_type(
                "small-instance-type",
                "amd64",
                vec![Offering::new("test-zone-1", CapacityType::Spot, 0.5)],
            ),
        ]
    };
    let overlays = evaluate(
        &[
            overlay(
                "overlay-z",
                serde_json::json!({"requirements": instance_types_in(&["small-instance-type"]), "weight": 10, "price": "3"}),
            ),
            overlay(
                "overlay-a",
                serde_json::json!({"requirements": instance_types_in(&["default-instance-type", "small-instance-type"]), "weight": 10, "price": "9"}),
            ),
        ],
        &[pool(POOL, types())],
    );
    assert_eq!(status(&overlays, "overlay-a").reason, Some(REASON_CONFLICT));
    let out = applied(&overlays, POOL, types());
    assert_eq!(
        price(
            &out,
            "default-instance-type",
            "test-zone-1",
            CapacityType::Spot
        ),
        1.020
    );
    assert_eq!(
        price(
            &out,
            "small-instance-type",
            "test-zone-1",
            CapacityType::Spot
        ),
        3.0
    );
}

#[path = "overlay_capacity_tests.rs"]
mod capacity;
