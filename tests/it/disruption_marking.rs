//! The NodeClaim disruption marks against the API server double: the
//! `Consolidatable` and `Drifted` conditions written by the marking
//! controller, expiration deleting a NodeClaim, and pod events stamping
//! `lastPodEventTime`. Time is passed in, so no test waits for it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodewright::apis::{NodeClaim, NodePool};
use nodewright::controllers::nodeclaim::disruption::{DisruptionMarks, reconcile};
use nodewright::controllers::nodeclaim::{NodeClaimContext, expiration, pod_events};
use serde_json::json;

use crate::fixture::{Cluster, claim, cluster, eventually_within};

const PROVIDER_ID: &str = "aws:///us-east-1a/i-0123456789abcdef0";

fn pool(hash: &str) -> NodePool {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "general", "annotations": {
            "karpenter.sh/nodepool-hash": hash, "karpenter.sh/nodepool-hash-version": "nw1"}},
        "spec": {
            "disruption": {"consolidateAfter": "30s"},
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
            }}
        }
    }))
    .unwrap()
}

/// A launched, initialized NodeClaim of the pool made at `at`, expiring an
/// hour after its creation.
async fn launched_claim(cluster: &Cluster, at: Timestamp) -> NodeClaim {
    let mut object = claim("general-a");
    object.metadata.annotations = Some(
        [
            ("karpenter.sh/nodepool-hash", "111"),
            ("karpenter.sh/nodepool-hash-version", "nw1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    object.metadata.labels.get_or_insert_default().insert(
        "karpenter.sh/capacity-type".to_string(),
        "on-demand".to_string(),
    );
    object.spec.expire_after = Some("1h".into());
    cluster
        .claims()
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let status = json!({"status": {
        "providerID": PROVIDER_ID,
        "conditions": [
            {"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": at},
            {"type": "Initialized", "status": "True", "reason": "Initialized", "lastTransitionTime": at}
        ]
    }});
    let written = cluster
        .claims()
        .patch_status("general-a", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    seen(cluster, &written).await
}

/// `claim` once the cluster state holds this version of it.
async fn seen(cluster: &Cluster, claim: &NodeClaim) -> NodeClaim {
    let version = claim.metadata.resource_version.clone();
    let state = cluster.ctx.state.clone();
    eventually_within("the state to see the claim", Duration::from_secs(5), || {
        let state = state.clone();
        let version = version.clone();
        async move {
            state
                .node_claims
                .all()
                .into_iter()
                .find(|c| c.metadata.resource_version == version)
                .map(|c| NodeClaim::clone(&c))
        }
    })
    .await
}

async fn stored(cluster: &Cluster) -> NodeClaim {
    let claim = cluster.claims().get("general-a").await.unwrap();
    seen(cluster, &claim).await
}

fn has(claim: &NodeClaim, type_: &str) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == type_))
}

async fn pool_seen(cluster: &Cluster, hash: &str) {
    let state = cluster.ctx.state.clone();
    eventually_within("the state to see the pool", Duration::from_secs(5), || {
        let state = state.clone();
        async move {
            state
                .node_pools
                .all()
                .iter()
                .any(|p| {
                    p.metadata
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a["karpenter.sh/nodepool-hash"] == hash)
                })
                .then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn consolidatable_after_consolidate_after_and_drifted_when_the_template_changes() {
    let cluster = cluster().await;
    let pools: Api<NodePool> = Api::all(cluster.ctx.client.clone());
    pools
        .create(&PostParams::default(), &pool("111"))
        .await
        .unwrap();
    pool_seen(&cluster, "111").await;
    let t0 = Timestamp::now();
    let claim = launched_claim(&cluster, t0).await;
    let marks = DisruptionMarks::default();

    // 10 s after initialization: not yet, and looked at again when due.
    let action = reconcile(
        &cluster.ctx,
        &marks,
        &claim,
        t0 + SignedDuration::from_secs(10),
    )
    .await
    .unwrap();
    assert!(
        format!("{action:?}").contains("20.1"),
        "requeued when consolidateAfter runs out: {action:?}"
    );
    let claim = stored(&cluster).await;
    assert!(!has(&claim, "Consolidatable"));
    assert!(!has(&claim, "Drifted"));

    reconcile(
        &cluster.ctx,
        &marks,
        &claim,
        t0 + SignedDuration::from_secs(31),
    )
    .await
    .unwrap();
    let claim = stored(&cluster).await;
    assert_eq!(Cluster::condition(&claim, "Consolidatable").0, "True");

    // A pod event restarts the wait: the condition goes.
    let event = json!({"status": {"lastPodEventTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0 + SignedDuration::from_secs(40))}});
    let written = cluster
        .claims()
        .patch_status("general-a", &PatchParams::default(), &Patch::Merge(&event))
        .await
        .unwrap();
    let claim = seen(&cluster, &written).await;
    reconcile(
        &cluster.ctx,
        &marks,
        &claim,
        t0 + SignedDuration::from_secs(50),
    )
    .await
    .unwrap();
    let claim = stored(&cluster).await;
    assert!(!has(&claim, "Consolidatable"));

    // The template changes (its hash): drifted, with Karpenter's reason.
    let changed = json!({"metadata": {"annotations": {"karpenter.sh/nodepool-hash": "222"}}});
    pools
        .patch("general", &PatchParams::default(), &Patch::Merge(&changed))
        .await
        .unwrap();
    pool_seen(&cluster, "222").await;
    reconcile(
        &cluster.ctx,
        &marks,
        &claim,
        t0 + SignedDuration::from_secs(80),
    )
    .await
    .unwrap();
    let claim = stored(&cluster).await;
    assert_eq!(
        Cluster::condition(&claim, "Drifted"),
        ("True".to_string(), "NodePoolDrifted".to_string())
    );
    assert_eq!(Cluster::condition(&claim, "Consolidatable").0, "True");

    // Back to the claim's template: no longer drifted.
    let back = json!({"metadata": {"annotations": {"karpenter.sh/nodepool-hash": "111"}}});
    pools
        .patch("general", &PatchParams::default(), &Patch::Merge(&back))
        .await
        .unwrap();
    pool_seen(&cluster, "111").await;
    reconcile(
        &cluster.ctx,
        &marks,
        &claim,
        t0 + SignedDuration::from_secs(90),
    )
    .await
    .unwrap();
    assert!(!has(&stored(&cluster).await, "Drifted"));
    cluster.driver.abort();
}

#[tokio::test]
async fn a_requirement_the_claim_no_longer_meets_drifts_it() {
    let cluster = cluster().await;
    let pools: Api<NodePool> = Api::all(cluster.ctx.client.clone());
    let mut spot_only = pool("111");
    spot_only.spec.template.spec.requirements = serde_json::from_value(
        json!([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]),
    )
    .unwrap();
    pools
        .create(&PostParams::default(), &spot_only)
        .await
        .unwrap();
    pool_seen(&cluster, "111").await;
    let t0 = Timestamp::now();
    let claim = launched_claim(&cluster, t0).await;
    reconcile(&cluster.ctx, &DisruptionMarks::default(), &claim, t0)
        .await
        .unwrap();
    assert_eq!(
        Cluster::condition(&stored(&cluster).await, "Drifted").1,
        "RequirementsDrifted"
    );
    cluster.driver.abort();
}

#[tokio::test]
async fn an_expired_claim_is_deleted_and_a_live_one_waits() {
    let cluster = cluster().await;
    let t0 = Timestamp::now();
    let claim = launched_claim(&cluster, t0).await;
    let action = expiration::reconcile(&cluster.ctx, &claim, t0 + SignedDuration::from_mins(30))
        .await
        .unwrap();
    assert!(
        format!("{action:?}").contains("requeue_after: Some"),
        "{action:?}"
    );
    assert!(
        cluster
            .claims()
            .get_opt("general-a")
            .await
            .unwrap()
            .is_some()
    );
    expiration::reconcile(&cluster.ctx, &claim, t0 + SignedDuration::from_mins(61))
        .await
        .unwrap();
    assert!(
        cluster
            .claims()
            .get_opt("general-a")
            .await
            .unwrap()
            .is_none()
    );
    cluster.driver.abort();
}

/// "should fire a karpenter_nodeclaims_disrupted_total metric when
/// expired", "shouldn't expire the same NodeClaim multiple times" and
/// "Expiration should ignore expired NodeClaims that are not managed by
/// this Karpenter instance": once per NodeClaim, counted once; a claim of
/// another node class is left alone.
#[tokio::test]
async fn an_expired_claim_is_expired_and_counted_once() {
    let cluster = cluster().await;
    let t0 = Timestamp::now();
    let mut claim = launched_claim(&cluster, t0).await;
    // A NodePool label only this test uses, so that its counter is its own.
    claim.metadata.labels.get_or_insert_default().insert(
        "karpenter.sh/nodepool".to_string(),
        "expiry-counted".to_string(),
    );
    let counted = || {
        nodewright::metrics::metrics()
            .nodeclaims_disrupted
            .get_or_create(&nodewright::metrics::labels(&[
                ("reason", "expired"),
                ("nodepool", "expiry-counted"),
                ("capacity_type", "on-demand"),
            ]))
            .get()
    };
    let later = t0 + SignedDuration::from_mins(61);
    let mut unmanaged = claim.clone();
    unmanaged.spec.node_class_ref.group = "karpenter.test.sh".to_string();
    unmanaged.spec.node_class_ref.kind = "TestNodeClass".to_string();
    expiration::reconcile(&cluster.ctx, &unmanaged, later)
        .await
        .unwrap();
    assert!(
        cluster
            .claims()
            .get_opt("general-a")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(counted(), 0);
    expiration::reconcile(&cluster.ctx, &claim, later)
        .await
        .unwrap();
    assert_eq!(counted(), 1);
    // Reconciled again with the same (now stale) object: the claim is gone,
    // nothing more is counted.
    expiration::reconcile(&cluster.ctx, &claim, later)
        .await
        .unwrap();
    assert_eq!(counted(), 1);
    cluster.driver.abort();
}

fn node() -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": "ip-10-0-0-1.ec2.internal", "labels": {"karpenter.sh/nodepool": "general"}},
        "spec": {"providerID": PROVIDER_ID},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap()
}

fn pod(name: &str, daemon: bool) -> Pod {
    let mut value = json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": "ip-10-0-0-1.ec2.internal", "containers": [{"name": "app", "image": "app"}]},
        "status": {"phase": "Running"}
    });
    if daemon {
        value["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet",
            "name": "agent", "uid": "u1", "controller": true}]);
    }
    serde_json::from_value(value).unwrap()
}

fn last_pod_event(claim: &NodeClaim) -> Option<Timestamp> {
    claim
        .status
        .as_ref()?
        .last_pod_event_time
        .as_ref()
        .map(|t| t.0)
}

#[tokio::test]
async fn pod_events_stamp_the_claim_at_most_every_ten_seconds() {
    let cluster = cluster().await;
    let t0 = Timestamp::now();
    launched_claim(&cluster, t0).await;
    cluster
        .nodes()
        .create(&PostParams::default(), &node())
        .await
        .unwrap();
    cluster.settle_nodes(1).await;
    let node = "ip-10-0-0-1.ec2.internal";
    let state = cluster.ctx.state.clone();
    eventually_within("the node's claim", Duration::from_secs(5), || {
        let state = state.clone();
        async move { state.state_node(node)?.node_claim().map(|_| ()) }
    })
    .await;

    // Stamps a minute in the past, so the controller below is not
    // deduplicated against them.
    let base = t0 - SignedDuration::from_mins(1);
    pod_events::record(&cluster.ctx, node, base).await.unwrap();
    let first = last_pod_event(&stored(&cluster).await).expect("stamped");
    assert_eq!(first.as_second(), base.as_second());
    pod_events::record(&cluster.ctx, node, base + SignedDuration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        last_pod_event(&stored(&cluster).await),
        Some(first),
        "deduplicated"
    );
    pod_events::record(&cluster.ctx, node, base + SignedDuration::from_secs(11))
        .await
        .unwrap();
    assert_eq!(
        last_pod_event(&stored(&cluster).await).map(|t| t.as_second()),
        Some(base.as_second() + 11)
    );

    // The controller: a DaemonSet pod is not an event; a workload pod is.
    let ctx = Arc::new(NodeClaimContext {
        client: cluster.ctx.client.clone(),
        state: cluster.ctx.state.clone(),
        cloud: cluster.cloud.clone(),
        recorder: cluster.ctx.recorder.clone(),
    });
    let controller = tokio::spawn(pod_events::run(ctx));
    let pods: Api<Pod> = Api::namespaced(cluster.ctx.client.clone(), "default");
    let before = last_pod_event(&stored(&cluster).await);
    pods.create(&PostParams::default(), &pod("agent-x", true))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        last_pod_event(&stored(&cluster).await),
        before,
        "DaemonSet pods do not count"
    );
    pods.create(&PostParams::default(), &pod("web-1", false))
        .await
        .unwrap();
    let claims = cluster.claims();
    eventually_within("lastPodEventTime to move", Duration::from_secs(10), || {
        let claims = claims.clone();
        async move {
            let claim = claims.get("general-a").await.ok()?;
            (last_pod_event(&claim) != before).then_some(())
        }
    })
    .await;
    controller.abort();
    cluster.driver.abort();
}
