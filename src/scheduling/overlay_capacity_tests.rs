//! Karpenter's NodeOverlay capacity Its and the cases that mix prices,
//! capacity and pools, on the same fixtures as the price Its.

use super::*;

fn capacity_overlay(
    name: &str,
    types: &[&str],
    weight: i32,
    capacity: serde_json::Value,
) -> NodeOverlay {
    overlay(
        name,
        serde_json::json!({"requirements": instance_types_in(types), "weight": weight, "capacity": capacity}),
    )
}

#[test]
fn should_fail_with_conflicting_capacity_overlays_with_overlapping_requirements() {
    let overlays = evaluate(
        &[
            capacity_overlay(
                "overlay-a",
                &["default-instance-type", "small-instance-type"],
                10,
                serde_json::json!({"smarter-devices/fuse": "1"}),
            ),
            capacity_overlay(
                "overlay-b",
                &["default-instance-type", "gpu-vendor-instance-type"],
                10,
                serde_json::json!({"smarter-devices/fuse": "2"}),
            ),
        ],
        &[pool(POOL, vec![default_type()])],
    );
    assert_eq!(status(&overlays, "overlay-a").reason, Some(REASON_CONFLICT));
    assert!(status(&overlays, "overlay-b").applied);
}

#[test]
fn should_pass_with_capacity_adjustment_are_the_same_overlays_with_overlapping_requirements() {
    // Despite its text, Karpenter's test expects a conflict: same weight,
    // same resource, even with the same quantity.
    let overlays = evaluate(
        &[
            capacity_overlay(
                "overlay-a",
                &["default-instance-type"],
                10,
                serde_json::json!({"smarter-devices/fuse": "54"}),
            ),
            capacity_overlay(
                "overlay-b",
                &["default-instance-type"],
                10,
                serde_json::json!({"smarter-devices/fuse": "54"}),
            ),
        ],
        &[pool(POOL, vec![default_type()])],
    );
    assert_eq!(status(&overlays, "overlay-a").reason, Some(REASON_CONFLICT));
    assert!(status(&overlays, "overlay-b").applied);
}

#[test]
fn should_pass_with_conflicting_capacity_overlays_with_mutually_exclusive_weights() {
    let overlays = evaluate(
        &[
            capacity_overlay(
                "overlay-a",
                &["default-instance-type"],
                10,
                serde_json::json!({"smarter-devices/fuse": "1"}),
            ),
            capacity_overlay(
                "overlay-b",
                &["default-instance-type"],
                20,
                serde_json::json!({"smarter-devices/fuse": "2"}),
            ),
        ],
        &[pool(POOL, vec![default_type()])],
    );
    assert!(status(&overlays, "overlay-a").applied);
    assert!(status(&overlays, "overlay-b").applied);
    let out = applied(&overlays, POOL, vec![default_type()]);
    assert_eq!(out[0].capacity.get("smarter-devices/fuse"), 2);
}

#[test]
fn should_pass_with_non_conflicting_capacity_overlays_with_overlapping_requirements() {
    let overlays = evaluate(
        &[
            capacity_overlay(
                "overlay-a",
                &["default-instance-type"],
                10,
                serde_json::json!({"smarter-devices/fuse": "1"}),
            ),
            capacity_overlay(
                "overlay-b",
                &["default-instance-type"],
                10,
                serde_json::json!({"hugepages-2Mi": "100"}),
            ),
        ],
        &[pool(POOL, vec![default_type()])],
    );
    assert!(status(&overlays, "overlay-a").applied);
    assert!(status(&overlays, "overlay-b").applied);
    let out = applied(&overlays, POOL, vec![default_type()]);
    assert_eq!(out[0].capacity.get("smarter-devices/fuse"), 1);
    assert_eq!(out[0].capacity.get("hugepages-2Mi"), 100);
}

#[test]
fn should_update_capacity_for_instance_types_from_multiple_overlays() {
    let overlays = evaluate(
        &[
            capacity_overlay(
                "overlay-a",
                &["default-instance-type"],
                20,
                serde_json::json!({"smarter-devices/fuse": "1", "example.com/dongle": "3"}),
            ),
            capacity_overlay(
                "overlay-b",
                &["default-instance-type"],
                10,
                serde_json::json!({"smarter-devices/fuse": "9", "example.com/other": "4"}),
            ),
        ],
        &[pool(POOL, vec![default_type()])],
    );
    let out = applied(&overlays, POOL, vec![default_type()]);
    let capacity = &out[0].capacity;
    assert_eq!(
        capacity.get("smarter-devices/fuse"),
        1,
        "higher weight wins"
    );
    assert_eq!(capacity.get("example.com/dongle"), 3);
    assert_eq!(capacity.get("example.com/other"), 4);
    // Standard resources are untouched.
    assert_eq!(capacity.cpu_millis, 4000);
}

#[test]
fn should_apply_pricing_and_capacity_adjustment_from_two_overlays_on_the_same_instance_type() {
    let overlays = evaluate(
        &[
            overlay(
                "price",
                serde_json::json!({"requirements": instance_types_in(&["default-instance-type"]), "weight": 10, "priceAdjustment": "-10%"}),
            ),
            capacity_overlay(
                "capacity",
                &["default-instance-type"],
                10,
                serde_json::json!({"smarter-devices/fuse": "2"}),
            ),
        ],
        &[pool(POOL, vec![default_type()])],
    );
    let out = applied(&overlays, POOL, vec![default_type()]);
    assert!(close(out[0].offerings[0].price, 1.020 * 0.9));
    assert_eq!(out[0].capacity.get("smarter-devices/fuse"), 2);
    assert_eq!(default_type().capacity.get("smarter-devices/fuse"), 0);
}

#[test]
fn should_have_an_empty_instance_types_set_when_cloudprovider_does_not_return_instance_types() {
    let overlays = evaluate(
        &[overlay(
            "any",
            serde_json::json!({"requirements": instance_types_in(&["default-instance-type"]), "price": "1"}),
        )],
        &[pool(POOL, Vec::new())],
    );
    assert!(applied(&overlays, POOL, Vec::new()).is_empty());
    assert!(status(&overlays, "any").message.contains("no offering"));
}

#[test]
fn should_apply_different_overlays_to_different_node_pools() {
    let pools = [
        pool("nodepool-a", vec![default_type()]),
        pool("nodepool-b", vec![default_type()]),
    ];
    let overlays = evaluate(
        &[
            overlay(
                "a",
                serde_json::json!({"requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["nodepool-a"]}], "priceAdjustment": "+10%"}),
            ),
            overlay(
                "b",
                serde_json::json!({"requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["nodepool-b"]}], "priceAdjustment": "-10%"}),
            ),
        ],
        &pools,
    );
    let a = applied(&overlays, "nodepool-a", vec![default_type()]);
    let b = applied(&overlays, "nodepool-b", vec![default_type()]);
    assert!(close(a[0].offerings[0].price, 1.020 * 1.1));
    assert!(close(b[0].offerings[0].price, 1.020 * 0.9));
}

#[test]
fn one_bad_overlay_never_stops_the_others() {
    let overlays = evaluate(
        &[
            overlay(
                "bad",
                serde_json::json!({"requirements": instance_types_in(&["default-instance-type"]), "price": "1", "priceAdjustment": "+1"}),
            ),
            overlay(
                "good",
                serde_json::json!({"requirements": instance_types_in(&["default-instance-type"]), "price": "0.5"}),
            ),
        ],
        &[pool(POOL, vec![default_type()])],
    );
    assert_eq!(
        status(&overlays, "bad").reason,
        Some(REASON_RUNTIME_VALIDATION)
    );
    assert!(status(&overlays, "bad").message.contains("keep one"));
    assert!(status(&overlays, "good").applied);
    let out = applied(&overlays, POOL, vec![default_type()]);
    assert_eq!(out[0].offerings[0].price, 0.5);
}

#[test]
fn gate_off_lists_every_overlay_as_not_applied() {
    let read = [
        overlay("z", serde_json::json!({"requirements": []})),
        overlay("a", serde_json::json!({"requirements": []})),
    ];
    let refs: Vec<&NodeOverlay> = read.iter().collect();
    let statuses = gate_off(&refs);
    assert_eq!(statuses.len(), 2);
    assert_eq!(statuses[0].name, "a");
    assert!(
        statuses
            .iter()
            .all(|s| !s.applied && s.reason == Some(REASON_GATE_OFF))
    );
}

/// Where nodewright differs on purpose (docs/pricing.md): a NodePool the
/// last evaluation did not see gets its types without overlays, where
/// Karpenter returns none until its controller has run.
#[test]
fn a_node_pool_not_yet_evaluated_gets_its_types_without_overlays() {
    let overlays = evaluate(
        &[overlay(
            "cheap",
            serde_json::json!({"requirements": instance_types_in(&["default-instance-type"]), "price": "0.5"}),
        )],
        &[pool(POOL, vec![default_type()])],
    );
    let types = Arc::new(vec![default_type()]);
    let served = overlays.apply("created-since", &types);
    assert!(Arc::ptr_eq(&served, &types));
    assert_eq!(served[0].offerings[0].price, 1.020);
}

/// As Karpenter's code (not its field description): an overlay's quantity
/// replaces the catalog's for an extended resource the type already has.
#[test]
fn an_overlays_capacity_replaces_an_extended_resource_the_type_has() {
    let mut gpu = default_type();
    gpu.capacity.set("nvidia.com/gpu", 1);
    let overlays = evaluate(
        &[capacity_overlay(
            "more-gpus",
            &["default-instance-type"],
            10,
            serde_json::json!({"nvidia.com/gpu": "4"}),
        )],
        &[pool(POOL, vec![gpu.clone()])],
    );
    let out = applied(&overlays, POOL, vec![gpu]);
    assert_eq!(out[0].capacity.get("nvidia.com/gpu"), 4);
}
