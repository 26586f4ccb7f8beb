//! `kube::runtime` against the double: a `Controller` with
//! `kube::runtime::finalizer`, and events recorded through
//! `events.k8s.io` read back as core Events.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Reporter};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::{Controller, watcher};
use kube::{Resource, ResourceExt};
use nodewright::controllers::recorder::Recorder;
use serde_json::json;

use super::{config_map, status};

const FINALIZER: &str = "example.com/cleanup";

#[derive(Debug, thiserror::Error)]
#[error("reconcile failed: {0}")]
struct Failed(String);

struct Context {
    api: Api<ConfigMap>,
    cleaned: AtomicUsize,
}

async fn reconcile(map: Arc<ConfigMap>, context: Arc<Context>) -> Result<Action, Failed> {
    let ctx = context.clone();
    finalizer(&context.api, FINALIZER, map, |event| async move {
        match event {
            Finalizer::Apply(map) => {
                let seen = json!({"metadata": {"annotations": {"example.com/seen": "true"}}});
                ctx.api
                    .patch(
                        &map.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&seen),
                    )
                    .await
                    .map_err(|e| Failed(e.to_string()))?;
                Ok(Action::await_change())
            }
            Finalizer::Cleanup(_) => {
                ctx.cleaned.fetch_add(1, Ordering::SeqCst);
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e: kube::runtime::finalizer::Error<Failed>| Failed(e.to_string()))
}

fn error_policy(_: Arc<ConfigMap>, _: &Failed, _: Arc<Context>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

async fn eventually(mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached in time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_controller_with_a_finalizer_reconciles_and_cleans_up() {
    let server = nodewright::sim::double::server();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let context = Arc::new(Context {
        api: api.clone(),
        cleaned: AtomicUsize::new(0),
    });
    let controller = Controller::new(
        api.clone(),
        watcher::Config::default().labels("managed=yes"),
    )
    .run(reconcile, error_policy, context.clone())
    .for_each(|_| async {});
    let running = tokio::spawn(controller);

    api.create(
        &PostParams::default(),
        &config_map("m", json!({"managed": "yes"})),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &config_map("ignored", json!({})))
        .await
        .unwrap();
    eventually(async || {
        let map = api.get("m").await.unwrap();
        map.finalizers().contains(&FINALIZER.to_string())
            && map.annotations().contains_key("example.com/seen")
    })
    .await;
    assert!(api.get("ignored").await.unwrap().finalizers().is_empty());

    api.delete("m", &DeleteParams::default()).await.unwrap();
    eventually(async || api.get("m").await.is_err()).await;
    assert_eq!(status(api.get("m").await.unwrap_err()).code, 404);
    assert_eq!(context.cleaned.load(Ordering::SeqCst), 1);
    running.abort();
}

#[tokio::test]
async fn recorded_events_show_as_core_events() {
    let server = nodewright::sim::double::server();
    let maps: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let map = maps
        .create(&PostParams::default(), &config_map("m", json!({})))
        .await
        .unwrap();
    let recorder = Recorder::new(
        server.client(),
        Reporter {
            controller: "tester".into(),
            instance: None,
        },
    );
    recorder
        .publish(
            &Event {
                type_: EventType::Warning,
                reason: "Broken".into(),
                note: Some("it broke".into()),
                action: "Check".into(),
                secondary: None,
            },
            &map.object_ref(&()),
        )
        .await
        .unwrap();
    let events: Api<CoreEvent> = Api::namespaced(server.client(), "default");
    let listed = events
        .list(&ListParams::default().fields("involvedObject.name=m,involvedObject.kind=ConfigMap"))
        .await
        .unwrap()
        .items;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].message.as_deref(), Some("it broke"));
    assert_eq!(listed[0].reason.as_deref(), Some("Broken"));
    assert_eq!(listed[0].reporting_component.as_deref(), Some("tester"));
}
