//! The `apiserver_request` fuzz target's body (fuzz_body/) run on stable
//! with proptest: sequences of requests built from the double's own
//! vocabulary (paths, verbs, selectors, patch types, bodies) with odd
//! parts, against one double per case. `scripts/fuzz` runs it longer and
//! under cargo-fuzz.

mod fuzz_body;

use apiserver_double::ApiServer;
use fuzz_body::Req;
use proptest::prelude::*;
use serde_json::json;

fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn pick(items: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(items).prop_map(str::to_string)
}

fn path() -> impl Strategy<Value = String> {
    let prefix = pick(&[
        "/api/v1",
        "/apis/apps/v1",
        "/apis/karpenter.sh/v1",
        "/apis/policy/v1",
        "/apis/coordination.k8s.io/v1",
        "/apis/batch/v1",
        "/apis/x/y",
        "/api",
        "/apis",
        "",
        "/openapi/v2",
        "/openapi/v3",
        "/version",
        "//api//v1",
    ]);
    let namespace = proptest::option::of(pick(&[
        "default",
        "kube-system",
        "",
        "..",
        "a%2Fb",
        "UPPER",
    ]));
    let plural = pick(&[
        "pods",
        "nodes",
        "namespaces",
        "deployments",
        "replicasets",
        "leases",
        "events",
        "configmaps",
        "poddisruptionbudgets",
        "nodepools",
        "jobs",
        "foo",
        "",
    ]);
    let name = proptest::option::of(pick(&["web-1", "default", "", "%2F", "a b", "x.y", "-"]));
    let sub = proptest::option::of(pick(&[
        "status", "eviction", "scale", "binding", "log", "x", "",
    ]));
    let extra = proptest::option::weighted(0.1, pick(&["more", "a/b"]));
    (prefix, namespace, plural, name, sub, extra).prop_map(|(p, ns, plural, name, sub, extra)| {
        let mut out = p;
        if let Some(ns) = ns {
            out.push_str(&format!("/namespaces/{ns}"));
        }
        out.push_str(&format!("/{plural}"));
        for part in [name, sub, extra].into_iter().flatten() {
            out.push('/');
            out.push_str(&part);
        }
        out
    })
}

fn selector() -> impl Strategy<Value = String> {
    pick(&[
        "app=web",
        "app%20in%20(a,b)",
        "!app",
        "app%20notin%20()",
        "a==b,c!=d",
        "(",
        "x%20in%20(",
        ",",
        "=",
        "metadata.name=x",
        "spec.nodeName!=",
        "a=b=c",
        "%ZZ",
        "app%3Dweb%2C%21x",
    ])
}

fn query() -> impl Strategy<Value = String> {
    let param = prop_oneof![
        selector().prop_map(|s| format!("labelSelector={s}")),
        selector().prop_map(|s| format!("fieldSelector={s}")),
        pick(&["-1", "0", "1", "99999999999999999999", "x"]).prop_map(|n| format!("limit={n}")),
        pick(&["", "abc", "eyJ4IjoxfQ", "%FF"]).prop_map(|c| format!("continue={c}")),
        pick(&["0", "1", "-5", "x", "18446744073709551616"])
            .prop_map(|v| format!("resourceVersion={v}")),
        pick(&["NotOlderThan", "Exact", "x"]).prop_map(|v| format!("resourceVersionMatch={v}")),
        pick(&["All", "x"]).prop_map(|v| format!("dryRun={v}")),
        pick(&["m", "", "%00"]).prop_map(|v| format!("fieldManager={v}")),
        pick(&["true", "false", "x"]).prop_map(|v| format!("force={v}")),
        pick(&["Foreground", "Background", "Orphan", "x"])
            .prop_map(|v| format!("propagationPolicy={v}")),
        pick(&["-1", "0", "30", "x"]).prop_map(|v| format!("gracePeriodSeconds={v}")),
        pick(&["Strict", "Warn", "Ignore", "x"]).prop_map(|v| format!("fieldValidation={v}")),
        Just("&&=&".to_string()),
    ];
    proptest::collection::vec(param, 0..4).prop_map(|ps| {
        if ps.is_empty() {
            String::new()
        } else {
            format!("?{}", ps.join("&"))
        }
    })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    let objects = vec![
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
               "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "default"}, "data": {"a": "b"}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web-1"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}),
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-1", "namespace": "default"}}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "web-1"}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
        json!([{"op": "add", "path": "/metadata/labels/x", "value": "y"}]),
        json!([{"op": "remove", "path": "/spec/containers/9"}, {"op": "move", "from": "/a", "path": "/a/b"}]),
        json!({"metadata": {"labels": {"app": null}, "finalizers": ["x"]}, "spec": {"$patch": "replace"}}),
        json!({"metadata": {"resourceVersion": "1", "name": "other"}}),
        json!({"$setElementOrder/containers": [{"name": "c"}], "spec": {"containers": [{"name": "c", "$patch": "delete"}]}}),
    ];
    let odd = prop_oneof![
        Just(json!(null)),
        Just(json!(1)),
        Just(json!("x")),
        Just(json!([])),
        Just(json!({})),
        Just(json!(-1)),
        Just(json!(1e300)),
        Just(json!({"$patch": "delete"})),
    ];
    prop_oneof![
        4 => (proptest::sample::select(objects), proptest::option::of(("[a-z$/]{1,12}", odd)))
            .prop_map(|(mut o, edit)| {
                if let (Some((key, v)), Some(map)) = (edit, o.as_object_mut()) {
                    map.insert(key, v);
                }
                o.to_string().into_bytes()
            }),
        1 => proptest::collection::vec(any::<u8>(), 0..64),
        1 => Just(b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}\n".to_vec()),
        1 => Just(Vec::new()),
    ]
}

fn request() -> impl Strategy<Value = Req> {
    let method = pick(&[
        "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "BREW",
    ]);
    let content_type = proptest::option::of(pick(&[
        "application/json",
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
        "application/vnd.kubernetes.protobuf",
        "text/plain",
        "application/json; charset=utf-8",
    ]));
    let accept = proptest::option::of(pick(&[
        "application/json",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        "application/vnd.kubernetes.protobuf",
        "*/*",
        "application/yaml",
    ]));
    (method, path(), query(), content_type, accept, body()).prop_map(
        |(method, path, query, content_type, accept, body)| Req {
            method,
            uri: format!("{path}{query}"),
            content_type,
            accept,
            body,
        },
    )
}

proptest! {
    #![proptest_config(cases(96))]

    #[test]
    fn any_request_sequence_gets_an_answer(reqs in proptest::collection::vec(request(), 1..8)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let server = ApiServer::new("1", "33");
            let client = server.client();
            for req in &reqs {
                fuzz_body::check(&client, req).await;
            }
        });
    }

    #[test]
    fn raw_bytes_split_into_a_request_get_an_answer(data in proptest::collection::vec(any::<u8>(), 0..160)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let client = ApiServer::new("1", "33").client();
            fuzz_body::check(&client, &Req::from_bytes(&data)).await;
        });
    }
}
