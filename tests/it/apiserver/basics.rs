//! The emulator through `kube::Api`, as controllers use it.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use nodewright::apis::EC2NodeClass;

fn config_map(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"k": "v"},
    }))
    .unwrap()
}

fn node_class(name: &str) -> EC2NodeClass {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": "node",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"a": "b"}}],
            "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
        },
    }))
    .unwrap()
}

fn api_status(error: kube::Error) -> u16 {
    match error {
        kube::Error::Api(status) => status.code,
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
async fn create_get_list_and_errors() {
    let server = nodewright::sim::double::server();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "kube-system");
    let created = api
        .create(
            &PostParams::default(),
            &config_map("a", json!({"team": "x"})),
        )
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert_eq!(created.metadata.namespace.as_deref(), Some("kube-system"));
    api.create(
        &PostParams::default(),
        &config_map("b", json!({"team": "y"})),
    )
    .await
    .unwrap();
    let again = api
        .create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .unwrap_err();
    assert_eq!(api_status(again), 409);
    assert_eq!(api_status(api.get("missing").await.unwrap_err()), 404);

    let x = api
        .list(&ListParams::default().labels("team=x"))
        .await
        .unwrap();
    let names: Vec<_> = x
        .items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a"]);
    let not_x = api
        .list(&ListParams::default().labels("team!=x"))
        .await
        .unwrap();
    assert_eq!(not_x.items.len(), 1);
    let other_ns: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    assert!(
        other_ns
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let all: Api<ConfigMap> = Api::all(server.client());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
}

#[tokio::test]
async fn a_write_that_changes_nothing_keeps_the_version_and_a_label_keeps_the_generation() {
    let server = nodewright::sim::double::server();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let created = api
        .create(&PostParams::default(), &config_map("c", json!({"a": "1"})))
        .await
        .unwrap();
    let version = |c: &ConfigMap| c.metadata.resource_version.clone().unwrap();

    let same = json!({"data": {"k": "v"}, "metadata": {"labels": {"a": "1"}}});
    let unchanged = api
        .patch("c", &PatchParams::default(), &Patch::Merge(&same))
        .await
        .unwrap();
    assert_eq!(version(&unchanged), version(&created));

    let label = json!({"metadata": {"labels": {"a": "2"}}});
    let relabelled = api
        .patch("c", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    assert_ne!(version(&relabelled), version(&created));
    assert_eq!(relabelled.metadata.generation, created.metadata.generation);

    let data = json!({"data": {"k": "w"}});
    let changed = api
        .patch("c", &PatchParams::default(), &Patch::Merge(&data))
        .await
        .unwrap();
    assert_ne!(version(&changed), version(&relabelled));
    assert_eq!(
        changed.metadata.generation,
        created.metadata.generation.map(|g| g + 1)
    );
}

#[tokio::test]
async fn status_writes_touch_only_status_and_generation_counts_spec_changes() {
    let server = nodewright::sim::double::server();
    let api: Api<EC2NodeClass> = Api::all(server.client());
    let created = api
        .create(&PostParams::default(), &node_class("c"))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));

    let status = json!({"status": {"instanceProfile": "p"}, "spec": {"role": "changed"}});
    let after_status = api
        .patch_status("c", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(after_status.spec.role.as_deref(), Some("node"));
    assert_eq!(
        after_status.status.unwrap().instance_profile.as_deref(),
        Some("p")
    );
    assert_eq!(after_status.metadata.generation, Some(1));

    let spec = json!({"spec": {"role": "other"}, "status": {"instanceProfile": "q"}});
    let after_spec = api
        .patch("c", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .unwrap();
    assert_eq!(after_spec.spec.role.as_deref(), Some("other"));
    assert_eq!(
        after_spec.status.unwrap().instance_profile.as_deref(),
        Some("p")
    );
    assert_eq!(after_spec.metadata.generation, Some(2));

    let mut stale = created.clone();
    stale.spec.role = Some("stale".to_string());
    let conflict = api
        .replace("c", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(api_status(conflict), 409);
    let stale_status = json!({
        "metadata": {"resourceVersion": created.metadata.resource_version},
        "status": {"instanceProfile": "stale"},
    });
    let refused = api
        .patch_status("c", &PatchParams::default(), &Patch::Merge(&stale_status))
        .await
        .unwrap_err();
    assert_eq!(api_status(refused), 409);
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let server = nodewright::sim::double::server();
    let api: Api<EC2NodeClass> = Api::all(server.client());
    let mut class = node_class("f");
    class.metadata.finalizers = Some(vec!["karpenter.k8s.aws/termination".to_string()]);
    api.create(&PostParams::default(), &class).await.unwrap();
    api.delete("f", &DeleteParams::default()).await.unwrap();
    let held = api.get("f").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    let remove = json!({"metadata": {"finalizers": null}});
    api.patch("f", &PatchParams::default(), &Patch::Merge(&remove))
        .await
        .unwrap();
    assert_eq!(api_status(api.get("f").await.unwrap_err()), 404);
}

#[tokio::test]
async fn a_watcher_sees_creates_updates_and_deletes() {
    let server = nodewright::sim::double::server();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("before", json!({})))
        .await
        .unwrap();
    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut seen = Vec::new();
    // The initial listing ends with InitDone.
    while let Some(event) = events.next().await {
        match event.unwrap() {
            watcher::Event::InitApply(cm) => {
                seen.push(format!("init {}", cm.metadata.name.unwrap()))
            }
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    api.create(&PostParams::default(), &config_map("after", json!({})))
        .await
        .unwrap();
    api.delete("before", &DeleteParams::default())
        .await
        .unwrap();
    while seen.len() < 3 {
        match events.next().await.unwrap().unwrap() {
            watcher::Event::Apply(cm) => seen.push(format!("apply {}", cm.metadata.name.unwrap())),
            watcher::Event::Delete(cm) => {
                seen.push(format!("delete {}", cm.metadata.name.unwrap()))
            }
            _ => {}
        }
    }
    assert_eq!(seen, ["init before", "apply after", "delete before"]);
}
