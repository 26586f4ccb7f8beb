//! The API server double (a test double, and the engine of `nodewright
//! sandbox`) driven only through `kube::Api` and `kube::runtime`, one
//! semantic at a time.

mod basics;
mod eviction;
mod json_patch;
mod runtime;
mod watch;
mod workloads;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{DynamicObject, Status};
use kube::discovery::{ApiResource, Discovery, Scope};
use nodewright::apis::NodePool;
use serde_json::{Value, json};

/// The Status of an API error.
pub fn status(error: kube::Error) -> Box<Status> {
    match error {
        kube::Error::Api(status) => status,
        other => panic!("not an API error: {other}"),
    }
}

pub fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

pub fn config_map(name: &str, labels: Value) -> ConfigMap {
    from_json(json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}))
}

pub fn pod(name: &str, labels: Value) -> Pod {
    from_json(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
    }))
}

pub fn node(name: &str, labels: Value) -> Node {
    from_json(json!({"metadata": {"name": name, "labels": labels}}))
}

/// A pod that a kubelet reported Running and Ready.
pub async fn make_ready(pods: &Api<Pod>, name: &str) {
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

pub fn names<K: kube::Resource>(items: &[K]) -> Vec<String> {
    let mut names: Vec<String> = items
        .iter()
        .map(|i| i.meta().name.clone().unwrap_or_default())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn discovery_serves_real_scopes_subresources_and_the_crds() {
    let server = nodewright::sim::double::server();
    let discovery = Discovery::new(server.client()).run().await.unwrap();
    let find = |group: &str, kind: &str| {
        discovery
            .groups()
            .flat_map(|g| g.recommended_resources())
            .find(|(r, _)| r.group == group && r.kind == kind)
            .unwrap_or_else(|| panic!("{group}/{kind} is not discovered"))
    };
    assert_eq!(find("", "Pod").1.scope, Scope::Namespaced);
    assert_eq!(find("", "Node").1.scope, Scope::Cluster);
    assert_eq!(find("karpenter.sh", "NodePool").1.scope, Scope::Cluster);
    assert_eq!(
        find("karpenter.k8s.aws", "EC2NodeClass").1.scope,
        Scope::Cluster
    );
    assert_eq!(
        find("coordination.k8s.io", "Lease").1.scope,
        Scope::Namespaced
    );
    assert_eq!(
        find("policy", "PodDisruptionBudget").1.scope,
        Scope::Namespaced
    );
    let pods = find("", "Pod").1;
    let subresources: Vec<&str> = pods
        .subresources
        .iter()
        .map(|(r, _)| r.plural.as_str())
        .collect();
    for sub in ["status", "binding", "eviction"] {
        assert!(
            subresources.iter().any(|s| s.ends_with(sub)),
            "pods/{sub} missing: {subresources:?}"
        );
    }
    let pools = find("karpenter.sh", "NodePool").1;
    assert!(
        pools
            .subresources
            .iter()
            .any(|(r, _)| r.plural.ends_with("scale")),
        "nodepools/scale missing"
    );

    // A resource nobody serves is a 404, as on a real server.
    let widgets = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(server.client(), &widgets);
    assert_eq!(
        status(api.list(&ListParams::default()).await.unwrap_err()).code,
        404
    );
}

#[tokio::test]
async fn a_stale_update_is_answered_409_and_a_missing_namespace_404() {
    let server = nodewright::sim::double::server();
    let maps: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let created = maps
        .create(&PostParams::default(), &config_map("c", json!({})))
        .await
        .unwrap();
    let mut first = created.clone();
    first.data = Some([("k".to_string(), "first".to_string())].into());
    maps.replace("c", &PostParams::default(), &first)
        .await
        .unwrap();
    let mut stale = created;
    stale.data = Some([("k".to_string(), "stale".to_string())].into());
    let conflict = status(
        maps.replace("c", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert!(
        conflict.message.contains("the object has been modified"),
        "{}",
        conflict.message
    );
    assert_eq!(maps.get("c").await.unwrap().data.unwrap()["k"], "first");

    let elsewhere: Api<ConfigMap> = Api::namespaced(server.client(), "nowhere");
    let missing = status(
        elsewhere
            .create(&PostParams::default(), &config_map("c", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(missing.code, 404);
    assert!(
        missing.message.contains("namespaces \"nowhere\" not found"),
        "{}",
        missing.message
    );
}

#[tokio::test]
async fn list_pagination_serves_a_consistent_snapshot() {
    let server = nodewright::sim::double::server();
    let maps: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for i in 0..7 {
        maps.create(
            &PostParams::default(),
            &config_map(&format!("c{i}"), json!({"n": i.to_string()})),
        )
        .await
        .unwrap();
    }
    let first = maps.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(names(&first.items), ["c0", "c1", "c2"]);
    assert_eq!(first.metadata.remaining_item_count, Some(4));
    let token = first.metadata.continue_.clone().unwrap();
    // Changes after the first page do not show in the next ones.
    maps.delete("c4", &DeleteParams::default()).await.unwrap();
    maps.create(&PostParams::default(), &config_map("c9", json!({})))
        .await
        .unwrap();
    let second = maps
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(&second.items), ["c3", "c4", "c5"]);
    let third = maps
        .list(
            &ListParams::default()
                .limit(3)
                .continue_token(second.metadata.continue_.as_ref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(names(&third.items), ["c6"]);
    assert!(third.metadata.continue_.is_none());
    assert_eq!(
        first.metadata.resource_version,
        third.metadata.resource_version
    );

    // Selectors apply across pages.
    let selected = maps
        .list(&ListParams::default().labels("n in (1,5,6)").limit(2))
        .await
        .unwrap();
    assert_eq!(names(&selected.items), ["c1", "c5"]);
    assert_eq!(selected.metadata.remaining_item_count, Some(1));
}

#[tokio::test]
async fn a_continue_token_older_than_the_history_is_410_gone() {
    let server = nodewright::sim::double::builder().history(5).build();
    let maps: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for i in 0..4 {
        maps.create(
            &PostParams::default(),
            &config_map(&format!("c{i}"), json!({})),
        )
        .await
        .unwrap();
    }
    let first = maps.list(&ListParams::default().limit(2)).await.unwrap();
    for i in 0..6 {
        maps.create(
            &PostParams::default(),
            &config_map(&format!("d{i}"), json!({})),
        )
        .await
        .unwrap();
    }
    let token = first.metadata.continue_.unwrap();
    let gone = status(
        maps.list(&ListParams::default().limit(2).continue_token(&token))
            .await
            .unwrap_err(),
    );
    assert_eq!((gone.code, gone.reason.as_str()), (410, "Expired"));
}

#[tokio::test]
async fn an_invalid_node_pool_is_422_naming_the_field_and_defaults_are_applied() {
    let server = nodewright::sim::double::server();
    let pools: Api<NodePool> = Api::all(server.client());
    let mut pool: NodePool = from_json(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "general"},
        "spec": {"template": {"spec": {
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        }}},
    }));
    let created = pools.create(&PostParams::default(), &pool).await.unwrap();
    let stored = serde_json::to_value(&created).unwrap();
    assert_eq!(
        stored["spec"]["disruption"]["consolidateAfter"], "0s",
        "{stored:#}"
    );
    assert_eq!(
        stored["spec"]["disruption"]["budgets"],
        json!([{"nodes": "10%"}])
    );

    pool.metadata.name = Some("heavy".into());
    pool.spec.weight = Some(1000);
    let invalid = status(
        pools
            .create(&PostParams::default(), &pool)
            .await
            .unwrap_err(),
    );
    assert_eq!((invalid.code, invalid.reason.as_str()), (422, "Invalid"));
    assert!(
        invalid
            .message
            .starts_with("NodePool.karpenter.sh \"heavy\" is invalid: spec.weight"),
        "{}",
        invalid.message
    );
    let details = invalid.details.unwrap();
    assert_eq!(details.kind, "NodePool");
    let cause = &details.causes[0];
    assert_eq!(
        (cause.field.as_str(), cause.reason.as_str()),
        ("spec.weight", "FieldValueInvalid")
    );
    assert!(
        cause.message.contains("less than or equal to 100"),
        "{}",
        cause.message
    );

    // CEL rules too: a requirement with operator In and no values.
    let mut value = serde_json::to_value(&pool).unwrap();
    value["spec"]["weight"] = json!(10);
    value["spec"]["template"]["spec"]["requirements"][0] =
        json!({"key": "team", "operator": "In", "values": []});
    let refused = status(
        pools
            .create(&PostParams::default(), &from_json(value))
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 422);
    assert!(
        refused
            .details
            .unwrap()
            .causes
            .iter()
            .any(|c| c.field.starts_with("spec.template.spec.requirements")),
        "{}",
        refused.message
    );
}

#[tokio::test]
async fn server_side_apply_tracks_managers_conflicts_and_dropped_fields() {
    let server = nodewright::sim::double::server();
    let maps: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let apply = |manager: &str, force: bool| {
        let mut params = PatchParams::apply(manager);
        params.force = force;
        params
    };
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                        "data": {"mode": "fast", "level": "1"}});
    let created = maps
        .patch(
            "settings",
            &apply("deployer", false),
            &Patch::Apply(&config),
        )
        .await
        .unwrap();
    assert_eq!(created.data.as_ref().unwrap()["mode"], "fast");
    let managers = |cm: &ConfigMap| -> Vec<String> {
        cm.metadata
            .managed_fields
            .iter()
            .flatten()
            .map(|m| m.manager.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(managers(&created), ["deployer"]);

    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"mode": "slow"}});
    let conflict = status(
        maps.patch("settings", &apply("tuner", false), &Patch::Apply(&other))
            .await
            .unwrap_err(),
    );
    assert_eq!(conflict.code, 409);
    assert!(
        conflict.message.contains("conflict with \"deployer\""),
        "{}",
        conflict.message
    );
    let forced = maps
        .patch("settings", &apply("tuner", true), &Patch::Apply(&other))
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["mode"], "slow");

    // The deployer stops applying `level`: it goes; `mode` now belongs to the tuner.
    let smaller = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {}});
    let applied = maps
        .patch(
            "settings",
            &apply("deployer", false),
            &Patch::Apply(&smaller),
        )
        .await
        .unwrap();
    let data = applied.data.unwrap_or_default();
    assert!(!data.contains_key("level"), "{data:?}");
    assert_eq!(data["mode"], "slow");
}

#[tokio::test]
async fn finalizers_hold_pods_and_nodes_until_removed() {
    let server = nodewright::sim::double::server();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let nodes: Api<Node> = Api::all(server.client());
    let mut held = pod("held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    pods.create(&PostParams::default(), &held).await.unwrap();
    let mut held_node = node("n1", json!({}));
    held_node.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    nodes
        .create(&PostParams::default(), &held_node)
        .await
        .unwrap();

    pods.delete("held", &DeleteParams::default()).await.unwrap();
    nodes.delete("n1", &DeleteParams::default()).await.unwrap();
    assert!(
        pods.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    assert!(
        nodes
            .get("n1")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    // No new finalizers on an object being deleted.
    let add = json!({"metadata": {"finalizers": ["example.com/keep", "example.com/more"]}});
    assert_eq!(
        status(
            pods.patch("held", &PatchParams::default(), &Patch::Merge(&add))
                .await
                .unwrap_err()
        )
        .code,
        422
    );

    let release = json!({"metadata": {"finalizers": null}});
    pods.patch("held", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    assert_eq!(status(pods.get("held").await.unwrap_err()).code, 404);
    assert_eq!(status(nodes.get("n1").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn table_output_uses_the_crd_printer_columns() {
    let server = nodewright::sim::double::server();
    let client = server.client();
    let request = http::Request::get("/apis/karpenter.sh/v1/nodepools")
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap();
    let table: Value = client.request(request).await.unwrap();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        [
            "Name",
            "NodeClass",
            "Nodes",
            "Ready",
            "Age",
            "Weight",
            "CPU",
            "Memory"
        ]
    );
}
