//! The NodePool controller against the API server double: readiness from
//! validation and the class, counters from its NodeClaims, the template
//! hash, and re-stamping NodeClaims of another hash version.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams, PostParams};
use nodewright::apis::{EC2NodeClass, NodeClaim, NodePool};
use nodewright::cluster::ClusterState;
use nodewright::controllers::nodepool::{NODE_POOL_HASH_VERSION, NodePoolContext, reconcile};
use serde_json::json;

fn pool(taint: Option<&str>) -> NodePool {
    let mut value = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []
        }}}
    });
    if let Some(key) = taint {
        value["spec"]["template"]["spec"]["taints"] = json!([{"key": key, "effect": "NoSchedule"}]);
    }
    serde_json::from_value(value).unwrap()
}

fn class() -> EC2NodeClass {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}]}
    }))
    .unwrap()
}

fn claim(name: &str, cpu: &str, hash_version: &str) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "general"},
                     "annotations": {"karpenter.sh/nodepool-hash": "1234", "karpenter.sh/nodepool-hash-version": hash_version}},
        "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        "status": {"capacity": {"cpu": cpu, "memory": "8Gi", "pods": "29"}}
    }))
    .unwrap()
}

/// Creates `object`, then writes its status (the API server drops a new
/// object's status).
async fn create_with_status(claims: &Api<NodeClaim>, object: &NodeClaim) {
    claims.create(&PostParams::default(), object).await.unwrap();
    let status = json!({"status": object.status});
    claims
        .patch_status(
            &object.metadata.name.clone().unwrap(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .unwrap();
}

fn condition(pool: &NodePool, type_: &str) -> (String, String) {
    let c = pool
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap();
    (
        format!("{:?}", c.status),
        c.reason.clone().unwrap_or_default(),
    )
}

async fn settled(state: &ClusterState, claims: usize, class_ready: bool) {
    for _ in 0..300 {
        let ready = state.node_classes.all().first().is_some_and(|c| {
            c.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some()
                == class_ready
        });
        if state.node_claims.all().len() == claims && state.node_pools.all().len() == 1 && ready {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("state did not settle");
}

#[tokio::test]
async fn readiness_counters_and_the_hash_are_written() {
    let server = nodewright::sim::double::server();
    let client = server.client();
    let pools: Api<NodePool> = Api::all(client.clone());
    let classes: Api<EC2NodeClass> = Api::all(client.clone());
    let claims: Api<NodeClaim> = Api::all(client.clone());
    pools
        .create(&PostParams::default(), &pool(None))
        .await
        .unwrap();
    classes
        .create(&PostParams::default(), &class())
        .await
        .unwrap();
    for (name, cpu, version) in [
        ("general-a", "2", "v3"),
        ("general-b", "4", NODE_POOL_HASH_VERSION),
    ] {
        create_with_status(&claims, &claim(name, cpu, version)).await;
    }
    let (state, driver) = ClusterState::start(client.clone());
    let driver = tokio::spawn(driver);
    state.synced().await;
    settled(&state, 2, false).await;
    let ctx = NodePoolContext {
        client: client.clone(),
        state: state.clone(),
    };

    reconcile(&ctx, &pools.get("general").await.unwrap())
        .await
        .unwrap();
    let written = pools.get("general").await.unwrap();
    assert_eq!(condition(&written, "ValidationSucceeded").0, "True");
    assert_eq!(
        condition(&written, "NodeClassReady"),
        (
            "Unknown".to_string(),
            "NodeClassReadinessUnknown".to_string()
        )
    );
    assert_eq!(condition(&written, "Ready").0, "False");
    let status = written.status.clone().unwrap();
    assert_eq!(status.nodes, Some(2));
    assert_eq!(status.resources.unwrap()["cpu"].0, "6");
    let annotations = written.metadata.annotations.clone().unwrap();
    let hash = annotations["karpenter.sh/nodepool-hash"].clone();
    assert_eq!(
        annotations["karpenter.sh/nodepool-hash-version"],
        NODE_POOL_HASH_VERSION
    );
    // The claim of another hash version was re-stamped; ours was left.
    let a = claims.get("general-a").await.unwrap();
    assert_eq!(
        a.metadata.annotations.as_ref().unwrap()["karpenter.sh/nodepool-hash"],
        hash
    );
    let b = claims.get("general-b").await.unwrap();
    assert_eq!(
        b.metadata.annotations.as_ref().unwrap()["karpenter.sh/nodepool-hash"],
        "1234"
    );

    // The class becomes ready: so does the pool.
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    classes
        .patch_status("default", &PatchParams::default(), &Patch::Merge(&ready))
        .await
        .unwrap();
    settled(&state, 2, true).await;
    reconcile(&ctx, &pools.get("general").await.unwrap())
        .await
        .unwrap();
    let ready_pool = pools.get("general").await.unwrap();
    assert_eq!(condition(&ready_pool, "Ready").0, "True");

    // A template change moves the hash.
    let tainted = json!({"spec": {"template": {"spec": {"taints": [{"key": "dedicated", "effect": "NoSchedule"}]}}}});
    pools
        .patch("general", &PatchParams::default(), &Patch::Merge(&tainted))
        .await
        .unwrap();
    reconcile(&ctx, &pools.get("general").await.unwrap())
        .await
        .unwrap();
    let changed = pools.get("general").await.unwrap();
    assert_ne!(
        changed.metadata.annotations.unwrap()["karpenter.sh/nodepool-hash"],
        hash
    );
    driver.abort();
}

#[tokio::test]
async fn an_invalid_template_or_a_missing_class_is_not_ready() {
    // Runtime validation is for what slipped past the CRD's rules (an
    // older CRD, say): the double admits it here as such a server would.
    let server = nodewright::sim::double::builder()
        .validate_custom_resources(false)
        .build();
    let client = server.client();
    let pools: Api<NodePool> = Api::all(client.clone());
    let mut invalid = pool(None);
    invalid.spec.template.metadata =
        Some(serde_json::from_value(json!({"labels": {"karpenter.sh/nodepool": "x"}})).unwrap());
    pools
        .create(&PostParams::default(), &invalid)
        .await
        .unwrap();
    let (state, driver) = ClusterState::start(client.clone());
    let driver = tokio::spawn(driver);
    state.synced().await;
    let ctx = NodePoolContext {
        client: client.clone(),
        state: Arc::clone(&state),
    };
    reconcile(&ctx, &pools.get("general").await.unwrap())
        .await
        .unwrap();
    let written = pools.get("general").await.unwrap();
    let (status, reason) = condition(&written, "ValidationSucceeded");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ValidationFailed")
    );
    assert_eq!(condition(&written, "NodeClassReady").1, "NodeClassNotFound");
    assert_eq!(condition(&written, "Ready").0, "False");
    driver.abort();
}

#[tokio::test]
async fn a_priority_migration_annotation_that_is_not_a_boolean_fails_validation() {
    annotation_is_validated("nodewright.io/priority-migration", "yes", "true").await;
}

#[tokio::test]
async fn a_price_limit_annotation_that_is_not_a_price_fails_validation() {
    annotation_is_validated("nodewright.io/price-limit-per-hour", "12 USD", "12.50").await;
}

/// A pool annotated `key: bad` is `ValidationSucceeded=False` naming the
/// annotation and the value; `key: good` is `True`.
async fn annotation_is_validated(key: &str, bad: &str, good: &str) {
    let server = nodewright::sim::double::builder().build();
    let client = server.client();
    let pools: Api<NodePool> = Api::all(client.clone());
    let mut annotated = pool(None);
    annotated.metadata.annotations = Some([(key.to_string(), bad.to_string())].into());
    pools
        .create(&PostParams::default(), &annotated)
        .await
        .unwrap();
    let (state, driver) = ClusterState::start(client.clone());
    let driver = tokio::spawn(driver);
    state.synced().await;
    let ctx = NodePoolContext {
        client: client.clone(),
        state: Arc::clone(&state),
    };
    reconcile(&ctx, &pools.get("general").await.unwrap())
        .await
        .unwrap();
    let written = pools.get("general").await.unwrap();
    let message = written
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "ValidationSucceeded"))
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains(&format!("metadata.annotations[{key}]"))
            && message.contains(&format!("{bad:?}")),
        "{message}"
    );
    assert_eq!(condition(&written, "ValidationSucceeded").0, "False");

    let patch = json!({"metadata": {"annotations": {key: good}}});
    pools
        .patch("general", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    reconcile(&ctx, &pools.get("general").await.unwrap())
        .await
        .unwrap();
    let written = pools.get("general").await.unwrap();
    assert_eq!(condition(&written, "ValidationSucceeded").0, "True");
    driver.abort();
}

/// A NodeClaim of class `default` with a class hash of `version`, `Drifted`
/// or not.
fn class_claim(name: &str, version: &str, drifted: bool) -> NodeClaim {
    let mut claim = claim(name, "2", NODE_POOL_HASH_VERSION);
    let annotations = claim.metadata.annotations.get_or_insert_default();
    annotations.insert("karpenter.k8s.aws/ec2nodeclass-hash".into(), "1234".into());
    annotations.insert(
        "karpenter.k8s.aws/ec2nodeclass-hash-version".into(),
        version.into(),
    );
    if drifted {
        claim.status.get_or_insert_default().conditions = Some(vec![
            serde_json::from_value(
                json!({"type": "Drifted", "status": "True", "reason": "NodeClassDrift",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
            )
            .unwrap(),
        ]);
    }
    claim
}

// Karpenter's nodeclass hash controller suite: the hash and its version are
// written on the class; NodeClaims of another hash version get the new
// version and hash, except a Drifted one, which keeps its hash; a claim of
// our version is left alone.
#[tokio::test]
async fn the_class_hash_is_written_and_claims_of_another_version_restamped() {
    use nodewright::apis::ec2nodeclass::EC2_NODE_CLASS_HASH_VERSION;
    use nodewright::controllers::nodeclass::hash::{HashContext, reconcile as reconcile_hash};

    let server = nodewright::sim::double::server();
    let client = server.client();
    let pools: Api<NodePool> = Api::all(client.clone());
    let classes: Api<EC2NodeClass> = Api::all(client.clone());
    let claims: Api<NodeClaim> = Api::all(client.clone());
    pools
        .create(&PostParams::default(), &pool(None))
        .await
        .unwrap();
    let mut karpenter_class = class();
    karpenter_class.metadata.annotations = Some(
        [
            (
                "karpenter.k8s.aws/ec2nodeclass-hash".to_string(),
                "1234".to_string(),
            ),
            (
                "karpenter.k8s.aws/ec2nodeclass-hash-version".to_string(),
                "v4".to_string(),
            ),
        ]
        .into(),
    );
    classes
        .create(&PostParams::default(), &karpenter_class)
        .await
        .unwrap();
    for (name, version, drifted) in [
        ("general-a", "v4", false),
        ("general-b", "v4", true),
        ("general-c", EC2_NODE_CLASS_HASH_VERSION, false),
    ] {
        create_with_status(&claims, &class_claim(name, version, drifted)).await;
    }
    let (state, driver) = ClusterState::start(client.clone());
    let driver = tokio::spawn(driver);
    state.synced().await;
    settled(&state, 3, false).await;
    let ctx = HashContext {
        client: client.clone(),
        state: state.clone(),
    };
    reconcile_hash(&ctx, &classes.get("default").await.unwrap())
        .await
        .unwrap();

    let written = classes.get("default").await.unwrap();
    let hash = written.hash();
    let annotations = written.metadata.annotations.unwrap();
    assert_eq!(annotations["karpenter.k8s.aws/ec2nodeclass-hash"], hash);
    assert_eq!(
        annotations["karpenter.k8s.aws/ec2nodeclass-hash-version"],
        EC2_NODE_CLASS_HASH_VERSION
    );
    let stamped = |claim: NodeClaim| {
        let a = claim.metadata.annotations.unwrap();
        (
            a["karpenter.k8s.aws/ec2nodeclass-hash"].clone(),
            a["karpenter.k8s.aws/ec2nodeclass-hash-version"].clone(),
        )
    };
    let ours = EC2_NODE_CLASS_HASH_VERSION.to_string();
    assert_eq!(
        stamped(claims.get("general-a").await.unwrap()),
        (hash.clone(), ours.clone())
    );
    assert_eq!(
        stamped(claims.get("general-b").await.unwrap()),
        ("1234".to_string(), ours.clone())
    );
    assert_eq!(
        stamped(claims.get("general-c").await.unwrap()),
        ("1234".to_string(), ours)
    );

    // A spec change moves the class's hash.
    let changed = json!({"spec": {"userData": "echo changed"}});
    classes
        .patch("default", &PatchParams::default(), &Patch::Merge(&changed))
        .await
        .unwrap();
    reconcile_hash(&ctx, &classes.get("default").await.unwrap())
        .await
        .unwrap();
    let after = classes.get("default").await.unwrap();
    assert_ne!(
        after.metadata.annotations.unwrap()["karpenter.k8s.aws/ec2nodeclass-hash"],
        hash
    );
    driver.abort();
}
