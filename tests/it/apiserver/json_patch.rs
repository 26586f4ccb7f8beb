//! JSON patch (RFC 6902) requests as `kubectl patch --type=json` sends them
//! (`application/json-patch+json`): move, copy and test, all or nothing,
//! 422 for an operation that does not apply and 400 for a body that is not
//! a list of operations — on the double and on kube-apiserver.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use super::{from_json, status};

/// `PATCH` of the ConfigMap `namespace/name` with a JSON patch body.
async fn json_patch(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    body: Value,
) -> Result<ConfigMap, kube::Error> {
    let request = http::Request::patch(format!("/api/v1/namespaces/{namespace}/configmaps/{name}"))
        .header(http::header::CONTENT_TYPE, "application/json-patch+json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    client.request::<ConfigMap>(request).await
}

async fn moves_copies_and_tests(client: kube::Client, namespace: &str) {
    let created: Namespace = from_json(json!({"metadata": {"name": namespace}}));
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &created)
        .await
        .unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let map: ConfigMap = from_json(json!({
        "metadata": {"name": "patched", "labels": {"keep": "yes"},
                     "finalizers": ["example.com/first", "example.com/second"]},
        "data": {"a": "1"},
    }));
    maps.create(&PostParams::default(), &map).await.unwrap();

    let patched = json_patch(
        &client,
        namespace,
        "patched",
        json!([
            {"op": "test", "path": "/data/a", "value": "1"},
            // kube-apiserver: a key the object lacks tests equal to null.
            {"op": "test", "path": "/metadata/labels/absent", "value": null},
            {"op": "copy", "from": "/data/a", "path": "/data/b"},
            {"op": "move", "from": "/data/a", "path": "/data/c"},
            {"op": "move", "from": "/metadata/labels/keep", "path": "/metadata/labels/kept"},
            {"op": "move", "from": "/metadata/finalizers/0", "path": "/metadata/finalizers/-"},
        ]),
    )
    .await
    .unwrap();
    assert_eq!(
        serde_json::to_value(&patched.data).unwrap(),
        json!({"b": "1", "c": "1"})
    );
    assert_eq!(
        serde_json::to_value(&patched.metadata.labels).unwrap(),
        json!({"kept": "yes"})
    );
    assert_eq!(
        patched.metadata.finalizers.clone().unwrap_or_default(),
        ["example.com/second", "example.com/first"]
    );

    // A failed test: 422, and the operations before it are not kept.
    let failed = json_patch(
        &client,
        namespace,
        "patched",
        json!([
            {"op": "remove", "path": "/data/b"},
            {"op": "test", "path": "/data/c", "value": "2"},
        ]),
    )
    .await
    .unwrap_err();
    let failed = status(failed);
    assert_eq!((failed.code, failed.reason.as_str()), (422, "Invalid"));
    // An operation the RFC does not have, and paths the object lacks: 422.
    for body in [
        json!([{"op": "frobnicate", "path": "/data/b"}]),
        json!([{"op": "replace", "path": "/metadata/annotations/x", "value": "x"}]),
        json!([{"op": "move", "from": "/data/missing", "path": "/data/d"}]),
    ] {
        let refused = status(
            json_patch(&client, namespace, "patched", body.clone())
                .await
                .unwrap_err(),
        );
        assert_eq!(refused.code, 422, "{body}: {refused:?}");
    }
    // Not a list of operations: 400.
    let refused = status(
        json_patch(&client, namespace, "patched", json!({"op": "add"}))
            .await
            .unwrap_err(),
    );
    assert_eq!((refused.code, refused.reason.as_str()), (400, "BadRequest"));
    let unchanged = maps.get("patched").await.unwrap();
    assert_eq!(unchanged.data, patched.data);
    assert_eq!(
        unchanged.metadata.resource_version,
        patched.metadata.resource_version
    );

    let released = json_patch(
        &client,
        namespace,
        "patched",
        json!([
            {"op": "remove", "path": "/metadata/finalizers"},
            // kube-apiserver: replacing a key an existing object lacks adds it.
            {"op": "replace", "path": "/data/d", "value": "4"},
        ]),
    )
    .await
    .unwrap();
    assert_eq!(released.metadata.finalizers, None);
    assert_eq!(
        serde_json::to_value(&released.data).unwrap(),
        json!({"b": "1", "c": "1", "d": "4"})
    );
}

#[tokio::test]
async fn json_patches_move_copy_and_test_as_kube_apiserver_does() {
    let server = nodewright::sim::double::server();
    moves_copies_and_tests(server.client(), "json-patch").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_patches_move_copy_and_test_on_kube_apiserver() {
    let plane = tokio::task::spawn_blocking(crate::control_plane::shared)
        .await
        .unwrap();
    moves_copies_and_tests(plane.client().await, "json-patch").await;
}
