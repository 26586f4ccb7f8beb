//! Watches: 410 Gone past the history window, surviving it through a
//! relist, bookmarks, streaming lists, selectors.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

use super::config_map;

#[tokio::test]
async fn a_too_old_resource_version_is_a_410_expired_event() {
    let server = nodewright::sim::double::builder().history(10).build();
    let maps: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let first = maps
        .create(&PostParams::default(), &config_map("first", json!({})))
        .await
        .unwrap();
    for i in 0..20 {
        maps.create(
            &PostParams::default(),
            &config_map(&format!("m{i}"), json!({})),
        )
        .await
        .unwrap();
    }
    let old = first.metadata.resource_version.unwrap();
    let mut events = maps
        .watch(&WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    match events.try_next().await.unwrap() {
        Some(WatchEvent::Error(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(
                status.message.starts_with("too old resource version"),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 410 error event, got {other:?}"),
    }
}

#[tokio::test]
async fn a_reflector_survives_a_410_through_a_relist() {
    let server = nodewright::sim::double::builder().history(20).build();
    let maps: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    maps.create(&PostParams::default(), &config_map("before", json!({})))
        .await
        .unwrap();
    let (store, writer) = reflector::store();
    let mut stream = watcher(maps.clone(), watcher::Config::default())
        .reflect(writer)
        .boxed();
    let mut inits = 0;
    // The initial listing.
    while let Some(event) = stream.try_next().await.unwrap() {
        match event {
            watcher::Event::Init => inits += 1,
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    // While nobody reads the watch, far more changes happen than the
    // history keeps (and than the stream buffers).
    for i in 0..400 {
        maps.create(
            &PostParams::default(),
            &config_map(&format!("m{i:03}"), json!({})),
        )
        .await
        .unwrap();
    }
    let mut gone = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while store.state().len() < 401 || inits < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} objects, {inits} listings",
            store.state().len()
        );
        match tokio::time::timeout(Duration::from_secs(5), stream.next()).await {
            Ok(Some(Ok(watcher::Event::Init))) => inits += 1,
            // The watcher reports the 410, then relists.
            Ok(Some(Err(watcher::Error::WatchError(status)))) if status.code == 410 => gone += 1,
            Ok(Some(Err(other))) => panic!("unexpected watcher error: {other}"),
            _ => {}
        }
    }
    assert!(gone >= 1, "the watch never expired");
    // After the relist the watch goes on.
    maps.create(&PostParams::default(), &config_map("after", json!({})))
        .await
        .unwrap();
    while store
        .get(&reflector::ObjectRef::new("after").within("default"))
        .is_none()
    {
        stream.try_next().await.unwrap();
    }
    assert_eq!(store.state().len(), 402);
}

#[tokio::test]
async fn idle_watches_get_bookmarks_and_streaming_lists_end_with_one() {
    let server = nodewright::sim::double::builder()
        .bookmark_interval(Duration::from_millis(100))
        .build();
    let maps: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let created = maps
        .create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .unwrap();
    let version = created.metadata.resource_version.unwrap();
    let mut events = maps
        .watch(&WatchParams::default(), &version)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        Some(WatchEvent::Bookmark(bookmark)) => {
            assert_eq!(bookmark.metadata.resource_version, version)
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }

    let mut initial = maps
        .watch(&WatchParams::default().initial_events(), "0")
        .await
        .unwrap()
        .boxed();
    assert!(matches!(
        initial.try_next().await.unwrap(),
        Some(WatchEvent::Added(_))
    ));
    match initial.try_next().await.unwrap() {
        Some(WatchEvent::Bookmark(bookmark)) => {
            assert_eq!(
                bookmark.metadata.annotations["k8s.io/initial-events-end"],
                "true"
            );
        }
        other => panic!("expected the initial-events-end bookmark, got {other:?}"),
    }
    // kube's streaming-list watcher works end to end.
    let config = watcher::Config::default().streaming_lists();
    let seen: Vec<ConfigMap> = watcher(maps.clone(), config)
        .applied_objects()
        .take(1)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(seen[0].metadata.name.as_deref(), Some("a"));
}

#[tokio::test]
async fn an_object_leaving_a_label_selector_is_deleted_for_the_watcher() {
    let server = nodewright::sim::double::server();
    let maps: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let created = maps
        .create(
            &PostParams::default(),
            &config_map("m", json!({"tier": "web"})),
        )
        .await
        .unwrap();
    let version = created.metadata.resource_version.unwrap();
    let params = WatchParams::default().labels("tier=web");
    let mut events = maps.watch(&params, &version).await.unwrap().boxed();
    let relabel = json!({"metadata": {"labels": {"tier": "db"}}});
    maps.patch("m", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .unwrap();
    let back = json!({"metadata": {"labels": {"tier": "web"}}});
    maps.patch("m", &PatchParams::default(), &Patch::Merge(&back))
        .await
        .unwrap();
    let kinds: Vec<&str> = [
        events.try_next().await.unwrap(),
        events.try_next().await.unwrap(),
    ]
    .iter()
    .map(|e| match e {
        Some(WatchEvent::Deleted(_)) => "deleted",
        Some(WatchEvent::Added(_)) => "added",
        _ => "other",
    })
    .collect();
    assert_eq!(kinds, ["deleted", "added"]);
}
