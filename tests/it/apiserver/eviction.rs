//! PodDisruptionBudget status, `pods/eviction` and `pods/binding`.

use apiserver_double::ApiServer;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Binding, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, ListParams, PostParams};
use serde_json::{Value, json};

use super::{from_json, make_ready, pod, status};

async fn ready_deployment(server: &ApiServer, name: &str, replicas: i32) -> Vec<String> {
    let deployments: Api<Deployment> = Api::namespaced(server.client(), "default");
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let deployment: Deployment = from_json(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "c:1"}]}}},
    }));
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let mut names = Vec::new();
    for pod in pods
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await
        .unwrap()
        .items
    {
        let name = pod.metadata.name.unwrap();
        make_ready(&pods, &name).await;
        names.push(name);
    }
    names
}

fn budget(name: &str, app: &str, rule: Value) -> PodDisruptionBudget {
    let mut spec = json!({"selector": {"matchLabels": {"app": app}}});
    if let (Some(spec), Some(rule)) = (spec.as_object_mut(), rule.as_object()) {
        spec.extend(rule.clone());
    }
    from_json(json!({"metadata": {"name": name}, "spec": spec}))
}

fn counts(pdb: &PodDisruptionBudget) -> (i32, i32, i32, i32) {
    let status = pdb.status.as_ref().unwrap();
    (
        status.expected_pods.unwrap_or_default(),
        status.desired_healthy.unwrap_or_default(),
        status.current_healthy.unwrap_or_default(),
        status.disruptions_allowed.unwrap_or_default(),
    )
}

#[tokio::test]
async fn budgets_track_their_pods_with_integers_and_percentages() {
    let server = nodewright::sim::double::server();
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(server.client(), "default");
    ready_deployment(&server, "web", 3).await;
    budgets
        .create(
            &PostParams::default(),
            &budget("min-int", "web", json!({"minAvailable": 2})),
        )
        .await
        .unwrap();
    assert_eq!(counts(&budgets.get("min-int").await.unwrap()), (3, 2, 3, 1));
    budgets
        .delete("min-int", &Default::default())
        .await
        .unwrap();
    budgets
        .create(
            &PostParams::default(),
            &budget("max-pct", "web", json!({"maxUnavailable": "50%"})),
        )
        .await
        .unwrap();
    // 50% of 3 rounds up to 2 unavailable: 1 must stay healthy.
    assert_eq!(counts(&budgets.get("max-pct").await.unwrap()), (3, 1, 3, 2));
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let first = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .remove(0);
    let unready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    pods.patch_status(
        first.metadata.name.as_deref().unwrap(),
        &Default::default(),
        &kube::api::Patch::Merge(&unready),
    )
    .await
    .unwrap();
    assert_eq!(counts(&budgets.get("max-pct").await.unwrap()), (3, 1, 2, 1));
    let allowed = budgets
        .get("max-pct")
        .await
        .unwrap()
        .status
        .unwrap()
        .conditions
        .unwrap();
    assert_eq!(
        (allowed[0].type_.as_str(), allowed[0].status.as_str()),
        ("DisruptionAllowed", "True")
    );
}

#[tokio::test]
async fn an_eviction_is_allowed_then_refused_by_the_budget() {
    let server = nodewright::sim::double::server();
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(server.client(), "default");
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let names = ready_deployment(&server, "web", 3).await;
    budgets
        .create(
            &PostParams::default(),
            &budget("web", "web", json!({"minAvailable": 2})),
        )
        .await
        .unwrap();

    pods.evict(&names[0], &EvictParams::default())
        .await
        .unwrap();
    assert_eq!(status(pods.get(&names[0]).await.unwrap_err()).code, 404);
    // The ReplicaSet replaced the pod, but the replacement is not ready.
    assert_eq!(counts(&budgets.get("web").await.unwrap()), (3, 2, 2, 0));

    let refused = status(
        pods.evict(&names[1], &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (refused.code, refused.reason.as_str()),
        (429, "TooManyRequests")
    );
    assert_eq!(
        refused.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let cause = &refused.details.unwrap().causes[0];
    assert_eq!(cause.reason, "DisruptionBudget");
    assert_eq!(
        cause.message,
        "The disruption budget web needs 2 healthy pods and has 2 currently"
    );
    assert!(pods.get(&names[1]).await.is_ok());

    // Pending pods are not protected: the replacement goes.
    let pending: Vec<Pod> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.status.as_ref().unwrap().phase.as_deref() == Some("Pending"))
        .collect();
    pods.evict(
        pending[0].metadata.name.as_deref().unwrap(),
        &EvictParams::default(),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_pod_under_two_budgets_cannot_be_evicted() {
    let server = nodewright::sim::double::server();
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(server.client(), "default");
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let names = ready_deployment(&server, "web", 2).await;
    budgets
        .create(
            &PostParams::default(),
            &budget("one", "web", json!({"maxUnavailable": 1})),
        )
        .await
        .unwrap();
    budgets
        .create(
            &PostParams::default(),
            &budget("two", "web", json!({"maxUnavailable": 1})),
        )
        .await
        .unwrap();
    let refused = status(
        pods.evict(&names[0], &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 500);
    assert_eq!(
        refused.message,
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
}

#[tokio::test]
async fn binding_assigns_a_node_once() {
    let server = nodewright::sim::double::server();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("p", json!({})))
        .await
        .unwrap();
    let binding: Binding = from_json(json!({
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"},
    }));
    let _: Value = pods
        .create_subresource("binding", "p", &PostParams::default(), &binding)
        .await
        .unwrap();
    let bound = pods.get("p").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));
    let scheduled = bound.status.unwrap().conditions.unwrap();
    assert!(
        scheduled
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );
    let again: Result<Value, _> = pods
        .create_subresource("binding", "p", &PostParams::default(), &binding)
        .await;
    assert_eq!(status(again.unwrap_err()).code, 409);
}
