//! Node repair (`node.health`) against the API server double, with the
//! AWS repair policies (the simulated cloud's): tolerations, the condition
//! whose toleration ends first, the 20% rule per NodePool or cluster, the
//! termination timestamp, the metrics, and what is left alone. Time is
//! passed to the reconciler, so nothing waits for a toleration to run out.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use nodewright::apis::{NodeClaim, NodePool};
use nodewright::controllers::node::health::{self, BLOCKED_RETRY, Repair};
use nodewright::metrics::{labels, metrics};
use serde_json::{Value, json};

use crate::fixture::{Cluster, cluster, eventually_within};

const TERMINATION_TIMESTAMP: &str = "karpenter.sh/nodeclaim-termination-timestamp";

/// When every test's conditions turned unhealthy.
fn since() -> Timestamp {
    "2027-01-15T08:00:00Z".parse().unwrap()
}

/// `minutes` after [`since`].
fn after(minutes: i64) -> Timestamp {
    Timestamp::from_second(since().as_second() + minutes * 60).unwrap()
}

/// A Node condition that turned `status` at [`since`].
fn condition(type_: &str, status: &str) -> Value {
    json!({"type": type_, "status": status, "lastTransitionTime": since().to_string()})
}

fn ready() -> Value {
    condition("Ready", "True")
}

fn not_ready() -> Value {
    condition("Ready", "False")
}

/// A NodePool named `name` (the blocked event names pools that exist).
async fn add_pool(cluster: &Cluster, name: &str) {
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []
        }}}
    }))
    .unwrap();
    kube::Api::<NodePool>::all(cluster.ctx.client.clone())
        .create(&PostParams::default(), &pool)
        .await
        .unwrap();
    eventually_within(
        "the pool in the cluster state",
        Duration::from_secs(10),
        || {
            let seen = cluster.ctx.state.node_pools.all().len();
            async move { (seen > 0).then_some(()) }
        },
    )
    .await;
}

/// A launched NodeClaim `name` (in `pool`, if any) and its Node with
/// `conditions`; `annotations` go on the claim.
async fn add(
    cluster: &Cluster,
    name: &str,
    pool: Option<&str>,
    conditions: Value,
    annotations: Value,
) {
    let mut labels = json!({"karpenter.sh/capacity-type": "on-demand"});
    if let Some(pool) = pool {
        labels["karpenter.sh/nodepool"] = json!(pool);
    }
    let provider_id = format!("aws:///us-east-1a/i-{name}");
    let claim: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {
            "name": name, "labels": labels, "annotations": annotations,
            "finalizers": ["karpenter.sh/termination"]
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []
        }
    }))
    .unwrap();
    cluster
        .claims()
        .create(&PostParams::default(), &claim)
        .await
        .unwrap();
    let status = json!({"status": {"providerID": provider_id, "imageID": "ami-0123"}});
    cluster
        .claims()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": provider_id},
        "status": {"conditions": conditions}
    }))
    .unwrap();
    cluster
        .nodes()
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
}

/// Waits until the cluster state holds `count` nodes and as many claims
/// with a provider ID.
async fn settle(cluster: &Cluster, count: usize) {
    eventually_within(
        "nodes and claims in the cluster state",
        Duration::from_secs(10),
        || {
            let state = &cluster.ctx.state;
            let nodes = state.nodes.all().len();
            let launched = state
                .node_claims
                .all()
                .iter()
                .filter(|c| c.status.as_ref().is_some_and(|s| s.provider_id.is_some()))
                .count();
            async move { (nodes == count && launched == count).then_some(()) }
        },
    )
    .await;
}

/// One pass over node `name` at `now`.
async fn repair(cluster: &Cluster, name: &str, now: Timestamp) -> Repair {
    let node = cluster.nodes().get(name).await.unwrap();
    health::reconcile(&cluster.ctx, &node, now).await.unwrap()
}

async fn claim(cluster: &Cluster, name: &str) -> NodeClaim {
    cluster.claims().get(name).await.unwrap()
}

fn deleting(claim: &NodeClaim) -> bool {
    claim.metadata.deletion_timestamp.is_some()
}

fn termination_timestamp(claim: &NodeClaim) -> Option<&str> {
    claim
        .annotations()
        .get(TERMINATION_TIMESTAMP)
        .map(String::as_str)
}

/// Writes `ready` ([`ready`] or [`not_ready`]) as node `name`'s only
/// condition and waits until the cluster state holds it.
async fn set_ready(cluster: &Cluster, name: &str, ready: Value) {
    let status = ready["status"].as_str().unwrap_or_default().to_string();
    let conditions = json!({"status": {"conditions": [ready]}});
    cluster
        .nodes()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&conditions))
        .await
        .unwrap();
    let what = format!("{name} Ready={status} in the cluster state");
    eventually_within(&what, Duration::from_secs(10), || {
        let seen = cluster.ctx.state.nodes.all().iter().any(|n| {
            n.name_any() == name
                && n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == status))
        });
        async move { seen.then_some(()) }
    })
    .await;
}

fn blocked_events(cluster: &Cluster, node: &str) -> Vec<String> {
    cluster
        .server
        .objects("events.k8s.io", "events")
        .iter()
        .filter(|e| e["reason"] == "NodeRepairBlocked" && e["regarding"]["name"] == node)
        .map(|e| {
            format!(
                "{} {}",
                e["type"].as_str().unwrap_or(""),
                e["note"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn disrupted(pool: &str) -> u64 {
    metrics()
        .nodeclaims_disrupted
        .get_or_create(&labels(&[
            ("reason", "unhealthy"),
            ("nodepool", pool),
            ("capacity_type", "on-demand"),
        ]))
        .get()
}

fn unhealthy_disrupted(condition: &str, pool: &str) -> u64 {
    metrics()
        .nodeclaims_unhealthy_disrupted
        .get_or_create(&labels(&[
            ("condition", condition),
            ("nodepool", pool),
            ("capacity_type", "on-demand"),
            ("image_id", "ami-0123"),
        ]))
        .get()
}

#[tokio::test]
async fn an_unhealthy_node_past_its_toleration_is_annotated_deleted_and_counted() {
    let cluster = cluster().await;
    let pool = "repair-past";
    add(&cluster, "a", Some(pool), json!([not_ready()]), json!({})).await;
    settle(&cluster, 1).await;
    let (before, before_unhealthy) = (disrupted(pool), unhealthy_disrupted("ready", pool));

    let now = after(31);
    assert_eq!(
        repair(&cluster, "a", now).await,
        Repair::Repaired("Ready".into())
    );
    let repaired = claim(&cluster, "a").await;
    assert!(deleting(&repaired), "the claim is deleted");
    assert_eq!(
        termination_timestamp(&repaired),
        Some("2027-01-15T08:31:00Z")
    );
    assert_eq!(disrupted(pool), before + 1);
    assert_eq!(unhealthy_disrupted("ready", pool), before_unhealthy + 1);
    cluster.driver.abort();
}

#[tokio::test]
async fn an_unhealthy_node_within_its_toleration_is_looked_at_when_it_ends() {
    let cluster = cluster().await;
    add(
        &cluster,
        "a",
        Some("general"),
        json!([not_ready()]),
        json!({}),
    )
    .await;
    settle(&cluster, 1).await;
    let outcome = repair(&cluster, "a", after(20)).await;
    assert_eq!(outcome, Repair::Tolerated(Duration::from_secs(10 * 60)));
    assert_eq!(
        format!("{:?}", outcome.action()),
        format!(
            "{:?}",
            kube::runtime::controller::Action::requeue(Duration::from_secs(600))
        )
    );
    let kept = claim(&cluster, "a").await;
    assert!(!deleting(&kept));
    assert!(termination_timestamp(&kept).is_none());
    // Exactly at the end of the toleration it is repaired.
    assert_eq!(
        repair(&cluster, "a", after(30)).await,
        Repair::Repaired("Ready".into())
    );
    cluster.driver.abort();
}

#[tokio::test]
async fn conditions_no_policy_names_leave_the_node_alone() {
    let cluster = cluster().await;
    // A type no policy names, and a named type with a healthy status.
    add(
        &cluster,
        "a",
        Some("general"),
        json!([
            condition("FakeHealthyNode", "False"),
            ready(),
            condition("StorageReady", "True")
        ]),
        json!({}),
    )
    .await;
    settle(&cluster, 1).await;
    assert_eq!(repair(&cluster, "a", after(600)).await, Repair::Healthy);
    assert!(!deleting(&claim(&cluster, "a").await));
    cluster.driver.abort();
}

#[tokio::test]
async fn the_condition_whose_toleration_ends_first_decides() {
    let cluster = cluster().await;
    let pool = "repair-soonest";
    // Ready (30 minutes) and AcceleratedHardwareReady (10 minutes), both
    // unhealthy since the same moment: the accelerator decides.
    add(
        &cluster,
        "a",
        Some(pool),
        json!([not_ready(), condition("AcceleratedHardwareReady", "False")]),
        json!({}),
    )
    .await;
    settle(&cluster, 1).await;
    assert_eq!(
        repair(&cluster, "a", after(7)).await,
        Repair::Tolerated(Duration::from_secs(3 * 60))
    );
    let before = unhealthy_disrupted("accelerated_hardware_ready", pool);
    assert_eq!(
        repair(&cluster, "a", after(11)).await,
        Repair::Repaired("AcceleratedHardwareReady".into())
    );
    assert_eq!(
        unhealthy_disrupted("accelerated_hardware_ready", pool),
        before + 1
    );
    assert!(deleting(&claim(&cluster, "a").await));
    cluster.driver.abort();
}

#[tokio::test]
async fn more_than_twenty_percent_unhealthy_in_a_pool_blocks_repair() {
    let cluster = cluster().await;
    let pool = "repair-blocked";
    add_pool(&cluster, pool).await;
    for i in 0..10 {
        let conditions = if i < 3 {
            json!([not_ready()])
        } else {
            json!([ready()])
        };
        add(
            &cluster,
            &format!("n{i}"),
            Some(pool),
            conditions,
            json!({}),
        )
        .await;
    }
    settle(&cluster, 10).await;
    for name in ["n0", "n1", "n2"] {
        let outcome = repair(&cluster, name, after(60)).await;
        assert_eq!(outcome, Repair::Blocked, "{name}");
        assert_eq!(
            format!("{:?}", outcome.action()),
            format!(
                "{:?}",
                kube::runtime::controller::Action::requeue(BLOCKED_RETRY)
            )
        );
        let kept = claim(&cluster, name).await;
        assert!(!deleting(&kept), "{name}");
        assert!(termination_timestamp(&kept).is_none());
    }
    assert_eq!(BLOCKED_RETRY, Duration::from_secs(300));
    let events = blocked_events(&cluster, "n0");
    assert_eq!(
        events.first().map(String::as_str),
        Some("Warning more than 20% nodes are unhealthy in the nodepool"),
        "{events:?}"
    );

    // One recovers: two of ten is within 20%, so repair goes on.
    set_ready(&cluster, "n2", ready()).await;
    assert_eq!(
        repair(&cluster, "n0", after(60)).await,
        Repair::Repaired("Ready".into())
    );
    cluster.driver.abort();
}

#[tokio::test]
async fn one_unhealthy_node_of_three_may_be_repaired_as_twenty_percent_rounds_up() {
    let cluster = cluster().await;
    for (name, conditions) in [
        ("a", json!([not_ready()])),
        ("b", json!([ready()])),
        ("c", json!([ready()])),
    ] {
        add(&cluster, name, Some("general"), conditions, json!({})).await;
    }
    settle(&cluster, 3).await;
    assert_eq!(
        repair(&cluster, "a", after(60)).await,
        Repair::Repaired("Ready".into())
    );
    assert!(deleting(&claim(&cluster, "a").await));
    cluster.driver.abort();
}

#[tokio::test]
async fn the_threshold_counts_the_claims_pool_and_a_standalone_claim_counts_the_cluster() {
    let cluster = cluster().await;
    // Pool "general": one unhealthy node of five. Pool "other": five
    // unhealthy. A standalone claim's node is unhealthy too.
    for i in 0..5 {
        let conditions = if i == 0 {
            json!([not_ready()])
        } else {
            json!([ready()])
        };
        add(
            &cluster,
            &format!("g{i}"),
            Some("general"),
            conditions,
            json!({}),
        )
        .await;
        add(
            &cluster,
            &format!("o{i}"),
            Some("other"),
            json!([not_ready()]),
            json!({}),
        )
        .await;
    }
    add(&cluster, "lone", None, json!([not_ready()]), json!({})).await;
    settle(&cluster, 11).await;
    // "general" alone is counted: 1 of 5 is within 20%.
    assert_eq!(
        repair(&cluster, "g0", after(60)).await,
        Repair::Repaired("Ready".into())
    );
    // The standalone claim counts every node: 7 of 11 unhealthy.
    assert_eq!(repair(&cluster, "lone", after(60)).await, Repair::Blocked);
    assert!(!deleting(&claim(&cluster, "lone").await));
    let events = blocked_events(&cluster, "lone");
    assert_eq!(
        events.first().map(String::as_str),
        Some("Warning more than 20% nodes are unhealthy in the cluster"),
        "{events:?}"
    );
    cluster.driver.abort();
}

#[tokio::test]
async fn a_termination_timestamp_already_past_is_kept_and_a_later_one_brought_forward() {
    let cluster = cluster().await;
    let past = "2027-01-15T08:57:00Z";
    add(
        &cluster,
        "past",
        Some("general"),
        json!([not_ready()]),
        json!({TERMINATION_TIMESTAMP: past}),
    )
    .await;
    // As the claim's terminationGracePeriod would set it, two hours on.
    add(
        &cluster,
        "later",
        Some("general"),
        json!([ready()]),
        json!({TERMINATION_TIMESTAMP: "2027-01-15T11:00:00Z"}),
    )
    .await;
    for i in 0..8 {
        add(
            &cluster,
            &format!("well{i}"),
            Some("general"),
            json!([ready()]),
            json!({}),
        )
        .await;
    }
    settle(&cluster, 10).await;
    set_ready(&cluster, "later", not_ready()).await;

    assert_eq!(
        repair(&cluster, "past", after(60)).await,
        Repair::Repaired("Ready".into())
    );
    let kept = claim(&cluster, "past").await;
    assert_eq!(termination_timestamp(&kept), Some(past));

    assert_eq!(
        repair(&cluster, "later", after(60)).await,
        Repair::Repaired("Ready".into())
    );
    let forward = claim(&cluster, "later").await;
    assert_eq!(
        termination_timestamp(&forward),
        Some("2027-01-15T09:00:00Z")
    );
    cluster.driver.abort();
}

#[tokio::test]
async fn a_claim_already_deleting_is_not_deleted_again_or_counted() {
    let cluster = cluster().await;
    let pool = "repair-deleting";
    add(&cluster, "a", Some(pool), json!([not_ready()]), json!({})).await;
    cluster
        .claims()
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    settle(&cluster, 1).await;
    eventually_within(
        "the deletion in the cluster state",
        Duration::from_secs(10),
        || {
            let seen = cluster
                .ctx
                .state
                .node_claims
                .all()
                .iter()
                .any(|c| c.metadata.deletion_timestamp.is_some());
            async move { seen.then_some(()) }
        },
    )
    .await;
    let deleted_at = claim(&cluster, "a").await.metadata.deletion_timestamp;
    let before = (disrupted(pool), unhealthy_disrupted("ready", pool));

    assert_eq!(repair(&cluster, "a", after(60)).await, Repair::Deleting);
    assert_eq!(
        (disrupted(pool), unhealthy_disrupted("ready", pool)),
        before
    );
    let still = claim(&cluster, "a").await;
    assert_eq!(still.metadata.deletion_timestamp, deleted_at);
    // As in Karpenter, its drain is no longer held by budgets.
    assert_eq!(termination_timestamp(&still), Some("2027-01-15T09:00:00Z"));
    cluster.driver.abort();
}

#[tokio::test]
async fn a_node_no_nodeclaim_stands_for_is_ignored() {
    let cluster = cluster().await;
    add(
        &cluster,
        "managed",
        Some("general"),
        json!([ready()]),
        json!({}),
    )
    .await;
    let unmanaged: Node = serde_json::from_value(json!({
        "metadata": {"name": "unmanaged", "labels": {"karpenter.sh/nodepool": "general"}},
        "spec": {"providerID": "aws:///us-east-1a/i-unmanaged"},
        "status": {"conditions": [not_ready()]}
    }))
    .unwrap();
    cluster
        .nodes()
        .create(&PostParams::default(), &unmanaged)
        .await
        .unwrap();
    eventually_within(
        "two nodes in the cluster state",
        Duration::from_secs(10),
        || {
            let count = cluster.ctx.state.nodes.all().len();
            async move { (count == 2).then_some(()) }
        },
    )
    .await;
    assert_eq!(
        repair(&cluster, "unmanaged", after(600)).await,
        Repair::Healthy
    );
    assert!(
        cluster
            .nodes()
            .get_opt("unmanaged")
            .await
            .unwrap()
            .is_some()
    );
    assert!(!deleting(&claim(&cluster, "managed").await));
    cluster.driver.abort();
}
