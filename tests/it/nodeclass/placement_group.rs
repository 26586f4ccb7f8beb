//! `status.placementGroup` and `PlacementGroupReady` through the whole
//! EC2NodeClass reconcile (Karpenter's "NodeClass Placement Group
//! Reconciler" cases), and what the resolved group does to the class's
//! instance types.

use kube::api::{Api, Patch, PatchParams};
use nodewright::apis::ec2nodeclass::{PlacementGroupStatus, PlacementGroupStrategy};
use nodewright::apis::{ConditionStatus, EC2NodeClass};
use nodewright::controllers::Context;
use nodewright::controllers::nodeclass::reconcile_node_class;
use serde_json::json;

use super::{FakeAws, class, condition, context_on, create_and_reconcile};

fn selecting(name: &str, selector: serde_json::Value) -> EC2NodeClass {
    let mut class = class(name);
    class.spec.placement_group_selector = Some(serde_json::from_value(selector).unwrap());
    class
}

fn group_of(class: &EC2NodeClass) -> Option<PlacementGroupStatus> {
    class
        .status
        .as_ref()
        .and_then(|s| s.placement_group.clone())
}

/// Sets `spec.placementGroupSelector` to `selector` (null removes it) and reconciles.
async fn reselect(context: &Context, name: &str, selector: serde_json::Value) -> EC2NodeClass {
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    let patch = json!({"spec": {"placementGroupSelector": selector}});
    let changed = api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    reconcile_node_class(context, &changed).await.unwrap();
    api.get(name).await.unwrap()
}

#[tokio::test]
async fn should_have_placement_group_ready_condition_set_to_true_when_no_placement_group_selector_is_specified()
 {
    let server = nodewright::sim::double::server();
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    let stored = create_and_reconcile(&context, class("plain")).await;
    assert_eq!(
        condition(&stored, "PlacementGroupReady").status,
        ConditionStatus::True
    );
    assert_eq!(group_of(&stored), None);
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::True);
}

#[tokio::test]
async fn should_resolve_cluster_partition_and_spread_placement_groups_by_name_or_id() {
    let server = nodewright::sim::double::server();
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    let cases = [
        (
            "by-name",
            json!({"name": "my-cluster-pg"}),
            "pg-cluster123",
            PlacementGroupStrategy::Cluster,
        ),
        (
            "by-id",
            json!({"id": "pg-cluster123"}),
            "pg-cluster123",
            PlacementGroupStrategy::Cluster,
        ),
        (
            "partition",
            json!({"name": "my-partition-pg"}),
            "pg-partition456",
            PlacementGroupStrategy::Partition,
        ),
        (
            "spread",
            json!({"name": "my-spread-pg"}),
            "pg-spread789",
            PlacementGroupStrategy::Spread,
        ),
    ];
    for (name, selector, id, strategy) in cases {
        let stored = create_and_reconcile(&context, selecting(name, selector)).await;
        let group = group_of(&stored).unwrap_or_else(|| panic!("{name}: no status.placementGroup"));
        assert_eq!(
            (group.id.as_str(), group.strategy),
            (id, strategy),
            "{name}"
        );
        assert_eq!(
            condition(&stored, "PlacementGroupReady").status,
            ConditionStatus::True,
            "{name}"
        );
        assert_eq!(
            condition(&stored, "Ready").status,
            ConditionStatus::True,
            "{name}"
        );
        match strategy {
            PlacementGroupStrategy::Partition => assert_eq!(group.partition_count, Some(7)),
            PlacementGroupStrategy::Spread => {
                assert_eq!(group.spread_level.as_deref(), Some("rack"))
            }
            PlacementGroupStrategy::Cluster => {
                assert_eq!((group.partition_count, group.spread_level), (None, None))
            }
        }
    }
}

#[tokio::test]
async fn should_set_condition_false_when_placement_group_is_not_found_or_not_available() {
    let server = nodewright::sim::double::server();
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    for (name, group) in [("missing", "nonexistent-pg"), ("pending", "my-pending-pg")] {
        let stored = create_and_reconcile(&context, selecting(name, json!({"name": group}))).await;
        let placement = condition(&stored, "PlacementGroupReady");
        assert_eq!(placement.status, ConditionStatus::False, "{name}");
        assert_eq!(placement.reason.as_deref(), Some("PlacementGroupNotFound"));
        let message = placement.message.as_deref().unwrap_or_default();
        assert!(
            message.contains(group) && message.contains("spec.placementGroupSelector"),
            "{message}"
        );
        assert_eq!(group_of(&stored), None);
        assert_eq!(condition(&stored, "Ready").status, ConditionStatus::False);
    }
}

#[tokio::test]
async fn should_clear_the_status_and_condition_when_placement_group_selector_is_removed() {
    let server = nodewright::sim::double::server();
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    let stored = create_and_reconcile(
        &context,
        selecting("removed", json!({"name": "my-cluster-pg"})),
    )
    .await;
    assert!(group_of(&stored).is_some());
    let cleared = reselect(&context, "removed", serde_json::Value::Null).await;
    assert_eq!(group_of(&cleared), None);
    assert_eq!(
        condition(&cleared, "PlacementGroupReady").status,
        ConditionStatus::True
    );
}

#[tokio::test]
async fn should_update_the_status_when_placement_group_selector_changes() {
    let server = nodewright::sim::double::server();
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    let stored = create_and_reconcile(
        &context,
        selecting("changed", json!({"name": "my-cluster-pg"})),
    )
    .await;
    assert_eq!(group_of(&stored).unwrap().id, "pg-cluster123");
    let changed = reselect(&context, "changed", json!({"name": "my-spread-pg"})).await;
    let group = group_of(&changed).unwrap();
    assert_eq!(group.id, "pg-spread789");
    assert_eq!(group.strategy, PlacementGroupStrategy::Spread);
}

#[tokio::test]
async fn a_resolved_group_limits_and_labels_the_class_instance_types() {
    let server = nodewright::sim::double::server();
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    let plain = create_and_reconcile(&context, class("ungrouped")).await;
    let cluster = create_and_reconcile(
        &context,
        selecting("clustered", json!({"name": "my-cluster-pg"})),
    )
    .await;
    let partition = create_and_reconcile(
        &context,
        selecting("partitioned", json!({"name": "my-partition-pg"})),
    )
    .await;
    let types = |class: &EC2NodeClass| context.instance_types.resolve(class).unwrap();
    let all = types(&plain);
    assert!(
        all.iter().all(|t| t
            .requirements
            .get("karpenter.k8s.aws/placement-group-id")
            .is_none()),
        "no group, no group label"
    );
    // Burstable types (t3, …) cannot join a cluster group.
    let in_cluster = types(&cluster);
    assert!(in_cluster.len() < all.len());
    assert!(!in_cluster.iter().any(|t| t.name == "t3.medium"));
    assert!(in_cluster.iter().any(|t| t.name == "m5.large"));
    let m5 = in_cluster.iter().find(|t| t.name == "m5.large").unwrap();
    assert!(
        m5.requirements
            .get("karpenter.k8s.aws/placement-group-id")
            .unwrap()
            .has("pg-cluster123")
    );
    assert!(
        m5.requirements
            .get("karpenter.k8s.aws/placement-group-partition")
            .is_none()
    );
    let partitioned = types(&partition);
    let m5 = partitioned.iter().find(|t| t.name == "m5.large").unwrap();
    let partitions = m5
        .requirements
        .get("karpenter.k8s.aws/placement-group-partition")
        .unwrap();
    assert!((1..=7).all(|p| partitions.has(&p.to_string())) && !partitions.has("8"));
    assert!(
        partitioned.iter().any(|t| t.name == "t3.medium"),
        "burstable types join partition groups"
    );
}
