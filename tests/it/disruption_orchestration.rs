//! Carrying out a replace command against the API server double (the cases
//! of Karpenter's disruption `queue_test.go` that apply): the candidate is
//! tainted and marked before the replacement is created; it is deleted
//! only once the replacement is initialized; a replacement deleted or not
//! initialized in time rolls the command back (taint off, mark off, the
//! candidate's NodeClaim kept); a delete the API server refuses is tried
//! again.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use nodewright::apis::{NodeClaim, NodePool};
use nodewright::cluster::ClusterState;
use nodewright::controllers::disruption::queue::{Started, finish, start};
use nodewright::controllers::disruption::types::{Candidate, Command, Marks, Method};
use nodewright::scheduling::{
    CapacityType, InstanceTypeOption, NewNodeClaim, Requirements, Resources,
};
use serde_json::json;

use crate::fixture::eventually_within;

struct Cluster {
    server: apiserver_double::ApiServer,
    client: kube::Client,
    state: Arc<ClusterState>,
    pool: Arc<NodePool>,
    candidate: Candidate,
    driver: tokio::task::JoinHandle<()>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

async fn cluster() -> Cluster {
    let server = nodewright::sim::double::builder().build();
    let client = server.client();
    let pp = PostParams::default();
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"requirements": [],
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}
    }))
    .unwrap();
    let pool = Api::<NodePool>::all(client.clone())
        .create(&pp, &pool)
        .await
        .unwrap();
    let claim: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "claim-a", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"requirements": [],
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}
    }))
    .unwrap();
    let claim = Api::<NodeClaim>::all(client.clone())
        .create(&pp, &claim)
        .await
        .unwrap();
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
        "spec": {"taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}]}
    }))
    .unwrap();
    Api::<Node>::all(client.clone())
        .create(&pp, &node)
        .await
        .unwrap();
    let (state, driver) = ClusterState::start(client.clone());
    let driver = tokio::spawn(driver);
    state.synced().await;
    let pool = Arc::new(pool);
    let candidate = Candidate {
        name: "node-a".to_string(),
        node_claim: Arc::new(claim),
        node_pool: pool.clone(),
        pool: "default".to_string(),
        instance_type: Some("m5.xlarge".to_string()),
        capacity_type: Some(CapacityType::OnDemand),
        zone: Some("us-east-1a".to_string()),
        price: 0.192,
        pods: Vec::new(),
        disruption_cost: 1.0,
        reschedule_cost: 1.0,
        marks: Marks::default(),
        interruption_cordon: None,
        blocked: None,
    };
    Cluster {
        server,
        client,
        state,
        pool,
        candidate,
        driver,
    }
}

fn replace(candidate: &Candidate) -> Command {
    let option = InstanceTypeOption {
        name: "m5.large".to_string(),
        price: 0.096,
        score: None,
    };
    Command {
        method: Method::SingleNodeConsolidation,
        candidates: vec![candidate.clone()],
        replacements: vec![NewNodeClaim {
            node_pool: "default".to_string(),
            instance_type_options: vec![option],
            instance_type: "m5.large".to_string(),
            zone: "us-east-1a".to_string(),
            capacity_type: CapacityType::OnDemand,
            price: 0.096,
            reservation_id: None,
            pods: Vec::new(),
            requests: Resources::cpu_memory(500, 1 << 30),
            requirements: Requirements::new(),
            labels: Default::default(),
            taints: Vec::new(),
        }],
        moves: Vec::new(),
    }
}

/// The taint keys on node-a.
async fn taints(client: &kube::Client) -> Vec<String> {
    let node = Api::<Node>::all(client.clone())
        .get("node-a")
        .await
        .unwrap();
    node.spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .collect()
}

async fn started(c: &Cluster) -> Started {
    let started = start(
        &c.client,
        &c.state,
        std::slice::from_ref(&c.pool),
        replace(&c.candidate),
    )
    .await
    .unwrap();
    assert_eq!(started.replacements.len(), 1);
    assert_eq!(
        taints(&c.client).await,
        ["team", "karpenter.sh/disrupted"],
        "tainted, its own taints kept"
    );
    let node = Api::<Node>::all(c.client.clone())
        .get("node-a")
        .await
        .unwrap();
    assert!(c.state.is_marked_for_deletion(&node));
    let claims = Api::<NodeClaim>::all(c.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(claims.items.len(), 2, "the replacement was created");
    started
}

/// The command was taken back: taint and mark off, claim-a kept.
async fn rolled_back(c: &Cluster) {
    assert_eq!(taints(&c.client).await, ["team"]);
    let node = Api::<Node>::all(c.client.clone())
        .get("node-a")
        .await
        .unwrap();
    assert!(!c.state.is_marked_for_deletion(&node));
    let claim = Api::<NodeClaim>::all(c.client.clone())
        .get("claim-a")
        .await
        .unwrap();
    assert!(claim.metadata.deletion_timestamp.is_none());
}

#[tokio::test]
async fn the_candidate_goes_once_its_replacement_is_initialized() {
    let c = cluster().await;
    let started = started(&c).await;
    let replacement = started.replacements[0].clone();
    let claims: Api<NodeClaim> = Api::all(c.client.clone());
    initialize(&claims, &replacement).await;
    assert!(finish(&c.client, &c.state, &started, Duration::from_secs(30)).await);
    eventually_within("claim-a deleted", Duration::from_secs(10), || async {
        match claims.get_opt("claim-a").await.unwrap() {
            None => Some(()),
            Some(claim) => claim.metadata.deletion_timestamp.map(|_| ()),
        }
    })
    .await;
}

/// Initialized, as the lifecycle controller marks a claim.
async fn initialize(claims: &Api<NodeClaim>, name: &str) {
    let initialized = json!({"status": {"conditions": [{
        "type": "Initialized", "status": "True", "reason": "Initialized", "message": "",
        "lastTransitionTime": "2026-11-26T12:00:00Z"
    }]}});
    claims
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&initialized))
        .await
        .unwrap();
}

/// The API server answers the candidate's delete with conflicts for a few
/// seconds: the delete is tried again, not taken for "already replaced".
#[tokio::test]
async fn a_refused_delete_of_the_candidate_is_tried_again() {
    use apiserver_double::faults::{ErrorKind, Faults, Target, Verb};

    let c = cluster().await;
    let started = started(&c).await;
    let claims: Api<NodeClaim> = Api::all(c.client.clone());
    initialize(&claims, &started.replacements[0]).await;
    c.server.set_faults(
        Faults::seeded(7)
            .target(Target::Everyone)
            .only_resources(["nodeclaims"])
            .error_rate(Verb::Delete, 1.0)
            .errors([ErrorKind::Conflict, ErrorKind::Internal]),
    );
    let heal = async {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        c.server.set_faults(Faults::default());
    };
    let (deleted, ()) = tokio::join!(
        finish(&c.client, &c.state, &started, Duration::from_secs(30)),
        heal
    );
    assert!(deleted);
    let claim = claims.get_opt("claim-a").await.unwrap();
    assert!(claim.is_none_or(|c| c.metadata.deletion_timestamp.is_some()));
}

#[tokio::test]
async fn a_deleted_replacement_rolls_the_command_back() {
    let c = cluster().await;
    let started = started(&c).await;
    let replacement = started.replacements[0].clone();
    Api::<NodeClaim>::all(c.client.clone())
        .delete(&replacement, &Default::default())
        .await
        .unwrap();
    assert!(!finish(&c.client, &c.state, &started, Duration::from_secs(30)).await);
    rolled_back(&c).await;
}

#[tokio::test]
async fn a_replacement_not_initialized_in_time_rolls_the_command_back() {
    let c = cluster().await;
    let started = started(&c).await;
    assert!(!finish(&c.client, &c.state, &started, Duration::from_secs(2)).await);
    rolled_back(&c).await;
}
