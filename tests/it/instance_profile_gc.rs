//! Garbage collection of instance profiles in moto: a class whose
//! `spec.role` changed leaves its old profile behind; the collector keeps
//! what a class or NodeClaim names and what was just replaced, deletes the
//! rest under the cluster's path, and never looks at another cluster's.
//! Ports Karpenter's "Instance Profile GarbageCollection" cases.

use std::sync::Arc;

use kube::api::{Api, Patch, PatchParams, PostParams};
use nodewright::apis::labels::INSTANCE_PROFILE_ANNOTATION_KEY;
use nodewright::apis::{EC2NodeClass, NodeClaim};
use nodewright::aws::clients::AwsClients;
use nodewright::controllers::nodeclass::garbage_collection::collect;
use nodewright::controllers::nodeclass::reconcile_node_class;
use serde_json::json;

use crate::moto::{create_role, moto_clients, profile_exists};
use crate::nodeclass::{context_in, instance_profile_of};

const CLUSTER: &str = "gc-cluster";

async fn create_profile(clients: &AwsClients, name: &str, path: &str) {
    clients
        .iam
        .create_instance_profile()
        .instance_profile_name(name)
        .path(path)
        .send()
        .await
        .unwrap();
}

fn class(role: &str) -> EC2NodeClass {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "gc"},
        "spec": {
            "role": role,
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"discovery": "gc"}}],
            "securityGroupSelectorTerms": [{"tags": {"discovery": "gc"}}],
        },
    }))
    .unwrap()
}

fn claim_launched_with(profile: &str) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "gc-claim", "annotations": {INSTANCE_PROFILE_ANNOTATION_KEY: profile}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gc"},
            "requirements": [],
        },
    }))
    .unwrap()
}

/// Every object `api` lists, shared as the cluster state's stores hand them out.
async fn stored<K>(api: &Api<K>) -> Vec<Arc<K>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let listed = api.list(&Default::default()).await.unwrap();
    listed.items.into_iter().map(Arc::new).collect()
}

#[tokio::test]
async fn profiles_nothing_names_are_deleted_and_the_rest_kept_in_moto() {
    let clients = moto_clients().await;
    create_role(&clients, "gc-role-1").await;
    create_role(&clients, "gc-role-2").await;
    let server = nodewright::sim::double::server();
    let context = context_in(CLUSTER, &server, &clients);
    let classes: Api<EC2NodeClass> = Api::all(context.client.clone());
    let claims: Api<NodeClaim> = Api::all(context.client.clone());

    // The class's first profile, then a new one once its role changes.
    classes
        .create(&PostParams::default(), &class("gc-role-1"))
        .await
        .unwrap();
    reconcile_node_class(&context, &classes.get("gc").await.unwrap())
        .await
        .unwrap();
    let first = instance_profile_of(&classes.get("gc").await.unwrap());
    classes
        .patch(
            "gc",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"role": "gc-role-2"}})),
        )
        .await
        .unwrap();
    reconcile_node_class(&context, &classes.get("gc").await.unwrap())
        .await
        .unwrap();
    let second = instance_profile_of(&classes.get("gc").await.unwrap());
    assert_ne!(first, second, "a new role gets a new profile");

    // Profiles under the cluster's path that nodewright did not just make.
    let path = |cluster: &str| format!("/karpenter/us-east-1/{cluster}/some-class-uid/");
    create_profile(&clients, "gc-active", &path(CLUSTER)).await;
    create_profile(&clients, "gc-orphan", &path(CLUSTER)).await;
    create_profile(&clients, "gc-other-cluster", &path("gc-elsewhere")).await;
    claims
        .create(&PostParams::default(), &claim_launched_with("gc-active"))
        .await
        .unwrap();

    let stored_classes = stored(&classes).await;
    let stored_claims = stored(&claims).await;

    // The replaced profile is protected: only the orphan goes.
    let deleted = collect(&context, &stored_classes, &stored_claims)
        .await
        .unwrap();
    assert_eq!(deleted, ["gc-orphan"]);
    for kept in [&first, &second, "gc-active", "gc-other-cluster"] {
        assert!(profile_exists(&clients, kept).await, "{kept} kept");
    }
    assert!(!profile_exists(&clients, "gc-orphan").await);

    // A controller that did not replace it (a restart) deletes the replaced
    // profile, which nothing names; the claim's and the class's stay.
    let restarted = context_in(CLUSTER, &server, &clients);
    let deleted = collect(&restarted, &stored_classes, &stored_claims)
        .await
        .unwrap();
    assert_eq!(deleted, vec![first.clone()]);
    assert!(!profile_exists(&clients, &first).await);
    for kept in [&second, "gc-active", "gc-other-cluster"] {
        assert!(profile_exists(&clients, kept).await, "{kept} kept");
    }

    // Nothing left to collect.
    let deleted = collect(&restarted, &stored_classes, &stored_claims)
        .await
        .unwrap();
    assert!(deleted.is_empty(), "deleted {deleted:?}");
}
