//! The fault mode through `kube::Client`: each error kind answered with the
//! real Status (and `Retry-After` on a 429), a timeout that hides an
//! applied write, watches dropped and expired, slow responses, faults only
//! for the requests targeted, and the same faults for the same seed.

use std::time::{Duration, Instant};

use apiserver_double::ApiServer;
use apiserver_double::faults::{ErrorKind, Faults, Target, Verb, WatchEnd};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

/// The Status of a failed call.
fn status(result: Result<impl std::fmt::Debug, kube::Error>) -> Box<kube::core::Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn everyone(seed: u64) -> Faults {
    Faults::seeded(seed).target(Target::Everyone)
}

#[tokio::test]
async fn each_error_kind_is_the_real_status() {
    let server = ApiServer::default();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();

    server.set_faults(
        everyone(1)
            .error_rate(Verb::Get, 1.0)
            .errors([ErrorKind::Internal]),
    );
    let internal = status(api.get("a").await);
    assert_eq!(
        (internal.code, internal.reason.as_str()),
        (500, "InternalError")
    );
    assert_eq!(internal.message, "Internal error occurred: injected fault");

    server.set_faults(
        everyone(1)
            .error_rate_all(1.0)
            .errors([ErrorKind::Conflict]),
    );
    let patch = Patch::Merge(json!({"data": {"k": "w"}}));
    let conflict = status(api.patch("a", &PatchParams::default(), &patch).await);
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert!(
        conflict
            .message
            .contains("configmaps \"a\": the object has been modified; please apply your changes"),
        "{}",
        conflict.message
    );
    // Conflicts are for writes: reads and creates go through.
    api.get("a").await.unwrap();
    api.create(&PostParams::default(), &config_map("b"))
        .await
        .unwrap();

    server.set_faults(
        everyone(1)
            .error_rate(Verb::List, 1.0)
            .errors([ErrorKind::TooManyRequests])
            .retry_after(3),
    );
    let request = http::Request::get("/api/v1/namespaces/default/configmaps")
        .body(Vec::new())
        .unwrap();
    let response = server.client().send(request.map(Into::into)).await.unwrap();
    assert_eq!(response.status(), http::StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()[http::header::RETRY_AFTER], "3");
    let throttled = status(api.list(&Default::default()).await);
    assert_eq!(
        (throttled.code, throttled.reason.as_str()),
        (429, "TooManyRequests")
    );
    assert_eq!(throttled.details.map(|d| d.retry_after_seconds), Some(3));

    let counts = server.fault_counts();
    assert_eq!(counts.errors_of(ErrorKind::Internal), 1);
    assert_eq!(counts.errors_of(ErrorKind::Conflict), 1);
    assert_eq!(counts.errors_of(ErrorKind::TooManyRequests), 2);
    assert_eq!(counts.errors_on(Verb::List), 2);
}

#[tokio::test]
async fn a_timeout_is_answered_after_the_write_is_applied() {
    let server = ApiServer::builder()
        .faults(
            everyone(2)
                .error_rate(Verb::Create, 1.0)
                .errors([ErrorKind::Timeout]),
        )
        .build();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let timeout = status(api.create(&PostParams::default(), &config_map("c")).await);
    assert_eq!((timeout.code, timeout.reason.as_str()), (504, "Timeout"));
    // The caller saw an error, yet the object exists.
    assert!(api.get_opt("c").await.unwrap().is_some());
    let again = status(api.create(&PostParams::default(), &config_map("c")).await);
    assert_eq!(again.code, 504, "the retried create is applied too: a 409");
    assert_eq!(server.fault_counts().errors_of(ErrorKind::Timeout), 2);
}

#[tokio::test]
async fn faults_reach_only_the_requests_targeted() {
    let server = ApiServer::default();
    let admin = server.client();
    for (kind, object) in [
        (
            "serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ctl", "namespace": "default"}}),
        ),
        (
            "clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "all"},
                   "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        ),
        (
            "clusterrolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "all"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "all"},
                   "subjects": [{"kind": "ServiceAccount", "name": "ctl", "namespace": "default"}]}),
        ),
    ] {
        let path = match kind {
            "serviceaccounts" => "/api/v1/namespaces/default/serviceaccounts".to_string(),
            rbac => format!("/apis/rbac.authorization.k8s.io/v1/{rbac}"),
        };
        let request = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&object).unwrap())
            .unwrap();
        let response = admin.send(request.map(Into::into)).await.unwrap();
        assert!(response.status().is_success(), "{kind}: {response:?}");
    }
    let controller = server.client_with_token(&server.service_account_token("default", "ctl"));
    server.set_faults(
        Faults::seeded(3)
            .error_rate_all(1.0)
            .errors([ErrorKind::Internal]),
    );
    let as_admin: Api<ConfigMap> = Api::namespaced(admin, "default");
    let as_controller: Api<ConfigMap> = Api::namespaced(controller, "default");
    as_admin
        .create(&PostParams::default(), &config_map("d"))
        .await
        .unwrap();
    as_admin.get("d").await.unwrap();
    assert_eq!(status(as_controller.get("d").await).code, 500);
    assert_eq!(server.fault_counts().total_errors(), 1);
}

/// Watches ConfigMaps from `version` until the stream ends; the events.
async fn watch_all(api: &Api<ConfigMap>, version: &str) -> Vec<WatchEvent<ConfigMap>> {
    let stream = api.watch(&WatchParams::default(), version).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), stream.try_collect())
        .await
        .expect("the watch ends")
        .unwrap()
}

#[tokio::test]
async fn watches_are_dropped_or_expired_after_n_events() {
    let server = ApiServer::default();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for name in ["w1", "w2", "w3", "w4"] {
        api.create(&PostParams::default(), &config_map(name))
            .await
            .unwrap();
    }
    server.set_faults(everyone(4).end_watches_after(2, WatchEnd::Drop));
    let dropped = watch_all(&api, "0").await;
    assert_eq!(dropped.len(), 2, "{dropped:?}");
    assert!(dropped.iter().all(|e| matches!(e, WatchEvent::Added(_))));

    server.set_faults(everyone(4).end_watches_after(3, WatchEnd::Expire));
    let expired = watch_all(&api, "0").await;
    assert_eq!(expired.len(), 4, "three events and the error: {expired:?}");
    let WatchEvent::Error(gone) = &expired[3] else {
        panic!("{expired:?}");
    };
    assert_eq!((gone.code, gone.reason.as_str()), (410, "Expired"));

    let counts = server.fault_counts();
    assert_eq!((counts.watches_dropped, counts.watches_expired), (1, 1));
    // A watch the rate never ends lasts until its timeout.
    server.set_faults(everyone(4));
    let params = WatchParams::default().timeout(1);
    let events: Vec<_> = api
        .watch(&params, "0")
        .await
        .unwrap()
        .collect::<Vec<_>>()
        .await;
    assert_eq!(events.len(), 4);
}

#[tokio::test]
async fn a_watch_error_rate_refuses_the_watch_itself() {
    let server = ApiServer::builder()
        .faults(
            everyone(5)
                .error_rate(Verb::Watch, 1.0)
                .errors([ErrorKind::TooManyRequests]),
        )
        .build();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let refused = match api.watch(&WatchParams::default(), "0").await {
        Err(kube::Error::Api(status)) => status,
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("the watch was served"),
    };
    assert_eq!(refused.code, 429);
    api.list(&Default::default()).await.unwrap();
}

#[tokio::test]
async fn responses_are_slowed_by_the_delay() {
    let server = ApiServer::builder()
        .faults(everyone(6).delay(Duration::from_millis(100), Duration::from_millis(50)))
        .build();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let started = Instant::now();
    for _ in 0..3 {
        api.list(&Default::default()).await.unwrap();
    }
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(server.fault_counts().delayed, 3);
}

#[tokio::test]
async fn the_same_seed_meets_the_same_faults() {
    async fn outcomes(seed: u64) -> Vec<u16> {
        let server = ApiServer::builder()
            .faults(everyone(seed).error_rate_all(0.4))
            .build();
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let mut codes = Vec::new();
        for i in 0..40 {
            let name = format!("s{}", i % 5);
            let result = match i % 3 {
                0 => api
                    .create(&PostParams::default(), &config_map(&name))
                    .await
                    .map(drop),
                1 => api.get(&name).await.map(drop),
                _ => api
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"data": {"i": i.to_string()}})),
                    )
                    .await
                    .map(drop),
            };
            codes.push(match result {
                Ok(()) => 200,
                Err(kube::Error::Api(status)) => status.code,
                Err(other) => panic!("{other:?}"),
            });
        }
        codes
    }
    let first = outcomes(11).await;
    assert_eq!(first, outcomes(11).await);
    assert_ne!(first, outcomes(12).await);
    assert!(first.iter().any(|c| [500, 409, 429, 504].contains(c)));
}
