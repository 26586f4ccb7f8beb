//! The shared cluster view fed by watches (`nodewright::cluster::ClusterState`),
//! against the API server double through `kube::Client`.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use nodewright::apis::NodeClaim;
use nodewright::cluster::ClusterState;
use nodewright::scheduling::PodKey;
use serde_json::json;

fn pod(name: &str, node: Option<&str>) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default",
                     "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "app"}]}
    }))
    .unwrap()
}

fn claim(name: &str) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "general"}},
        "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}
    }))
    .unwrap()
}

/// The next object from a change feed; fails the test after 5 s without one.
async fn next_change<T>(changes: &mut (impl futures::Stream<Item = T> + Unpin)) -> T {
    tokio::time::timeout(Duration::from_secs(5), changes.next())
        .await
        .expect("a change within 5 s")
        .expect("the feed is open")
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn stores_follow_the_api_server_and_changes_are_fed_to_subscribers() {
    let server = nodewright::sim::double::server();
    let client = server.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("before", None))
        .await
        .unwrap();

    let (state, driver) = ClusterState::start(client.clone());
    let driver = tokio::spawn(driver);
    state.synced().await;
    assert_eq!(state.pods.all().len(), 1);
    // Stored without managedFields.
    assert!(
        state.pods.all()[0]
            .metadata
            .managed_fields
            .as_deref()
            .unwrap_or_default()
            .is_empty()
    );

    // A subscriber that starts after the lists (a replica that just became
    // leader) gets what exists first, then what changes.
    let mut changes = Box::pin(state.pods.changes());
    let existing = next_change(&mut changes).await;
    assert_eq!(existing.metadata.name.as_deref(), Some("before"));
    pods.create(&PostParams::default(), &pod("after", None))
        .await
        .unwrap();
    let changed = next_change(&mut changes).await;
    assert_eq!(changed.metadata.name.as_deref(), Some("after"));
    pods.delete("before", &DeleteParams::default())
        .await
        .unwrap();
    let deleted = next_change(&mut changes).await;
    assert_eq!(deleted.metadata.name.as_deref(), Some("before"));
    eventually("the deleted pod to leave the store", || {
        state.pods.all().len() == 1
    })
    .await;
    driver.abort();
}

#[tokio::test]
async fn the_feed_sends_a_list_once_stored_and_shares_the_stored_objects() {
    let server = nodewright::sim::double::server();
    let client = server.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b", "c"] {
        pods.create(&PostParams::default(), &pod(name, None))
            .await
            .unwrap();
    }
    let (state, driver) = ClusterState::start(client.clone());
    // Subscribed before the first list: the listed pods come through the
    // feed, each one already in the store when it arrives.
    let mut changes = Box::pin(state.pods.changes());
    let driver = tokio::spawn(driver);
    let stored = |pod: &std::sync::Arc<Pod>| {
        state
            .pods
            .all()
            .iter()
            .any(|p| std::sync::Arc::ptr_eq(p, pod))
    };
    let mut listed = Vec::new();
    while listed.len() < 3 {
        let pod = next_change(&mut changes).await;
        assert!(
            stored(&pod),
            "{:?} is not the stored object",
            pod.metadata.name
        );
        listed.push(pod.metadata.name.clone().unwrap_or_default());
    }
    listed.sort();
    assert_eq!(listed, ["a", "b", "c"]);
    // A change is the stored object too, not a copy of it.
    pods.create(&PostParams::default(), &pod("d", None))
        .await
        .unwrap();
    let created = next_change(&mut changes).await;
    assert_eq!(created.metadata.name.as_deref(), Some("d"));
    assert!(stored(&created));
    driver.abort();
}

#[tokio::test]
async fn the_snapshot_holds_created_claims_nominations_and_marked_nodes() {
    let server = nodewright::sim::double::server();
    let client = server.client();
    let (state, driver) = ClusterState::start(client.clone());
    let driver = tokio::spawn(driver);
    state.synced().await;

    // A claim created here is in the snapshot before the watch shows it,
    // and once only after.
    state.record_created(claim("general-abc"));
    assert_eq!(state.snapshot().node_claims.len(), 1);
    let claims: Api<NodeClaim> = Api::all(client.clone());
    claims
        .create(&PostParams::default(), &claim("general-abc"))
        .await
        .unwrap();
    eventually("the claim in the store", || {
        state.node_claims.all().len() == 1
    })
    .await;
    assert_eq!(state.snapshot().node_claims.len(), 1);

    // A nomination holds until the pod binds or it expires.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("web-0", None))
        .await
        .unwrap();
    state.nominate(
        &PodKey::new("default", "web-0"),
        "node-b",
        Duration::from_secs(60),
    );
    state.nominate(&PodKey::new("default", "web-1"), "node-b", Duration::ZERO);
    // A claim still launching holds its pods past the period.
    state.nominate(
        &PodKey::new("default", "web-2"),
        "general-abc",
        Duration::ZERO,
    );
    eventually("the pod in the store", || state.pods.all().len() == 1).await;
    let nominated = state.snapshot().nominated;
    assert_eq!(
        nominated
            .get(&PodKey::new("default", "web-0"))
            .map(String::as_str),
        Some("node-b")
    );
    assert!(
        !nominated.contains_key(&PodKey::new("default", "web-1")),
        "expired"
    );
    assert_eq!(
        nominated
            .get(&PodKey::new("default", "web-2"))
            .map(String::as_str),
        Some("general-abc")
    );
    state.release_nominations("general-abc");
    assert!(
        !state
            .snapshot()
            .nominated
            .contains_key(&PodKey::new("default", "web-2"))
    );
    pods.delete("web-0", &DeleteParams::default())
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("web-0", Some("node-b")))
        .await
        .unwrap();
    eventually("the bound pod in the store", || {
        state
            .pods
            .all()
            .iter()
            .any(|p| p.spec.as_ref().unwrap().node_name.is_some())
    })
    .await;
    assert!(
        state.snapshot().nominated.is_empty(),
        "bound pods drop their nomination"
    );

    // A node marked for deletion is seen as being deleted.
    let nodes: Api<Node> = Api::all(client);
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "node-a"}})).unwrap(),
        )
        .await
        .unwrap();
    eventually("the node in the store", || state.nodes.all().len() == 1).await;
    state.mark_for_deletion("node-a");
    let snapshot = state.snapshot();
    assert!(snapshot.nodes[0].metadata.deletion_timestamp.is_some());
    state.unmark_for_deletion("node-a");
    assert!(
        state.snapshot().nodes[0]
            .metadata
            .deletion_timestamp
            .is_none()
    );
    driver.abort();
}

#[tokio::test]
async fn any_number_of_tasks_may_wait_for_the_first_lists() {
    let server = nodewright::sim::double::server();
    let (state, driver) = ClusterState::start(server.client());
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let state = state.clone();
            tokio::spawn(async move { state.synced().await })
        })
        .collect();
    tokio::task::yield_now().await;
    let driver = tokio::spawn(driver);
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("every waiter is woken")
            .unwrap();
    }
    driver.abort();
}

// A NodeClaim created here and deleted before the store ever held it (its
// launch failed at once) must leave the snapshot: pods nominated to it
// would otherwise wait for capacity that never comes.
#[tokio::test]
async fn a_created_claim_deleted_before_the_store_held_it_leaves_the_snapshot() {
    let server = nodewright::sim::double::server();
    let client = server.client();
    let (state, driver) = ClusterState::start(client.clone());
    let driver = tokio::spawn(driver);
    state.synced().await;
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let mut watched = Box::pin(state.node_claims.changes());

    // Recorded, then created and deleted at once.
    state.record_created(claim("general-gone"));
    claims
        .create(&PostParams::default(), &claim("general-gone"))
        .await
        .unwrap();
    claims
        .delete("general-gone", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deletion watched", || {
        state.node_claims.all().is_empty() && state.snapshot().node_claims.is_empty()
    })
    .await;
    assert!(!state.is_created_unwatched("general-gone"));

    // A creation recorded only after the watch already reported the claim
    // (created and deleted) is not kept either.
    claims
        .create(&PostParams::default(), &claim("general-late"))
        .await
        .unwrap();
    claims
        .delete("general-late", &DeleteParams::default())
        .await
        .unwrap();
    // Both reports (created, deleted) delivered: the hook ran before each.
    let mut reports = 0;
    while reports < 2 {
        let seen = next_change(&mut watched).await;
        reports += usize::from(seen.metadata.name.as_deref() == Some("general-late"));
    }
    state.record_created(claim("general-late"));
    assert!(
        state.snapshot().node_claims.is_empty(),
        "a claim the watch already reported is not capacity"
    );
    driver.abort();
}
