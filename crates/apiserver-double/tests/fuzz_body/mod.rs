//! The body of the `apiserver_request` fuzz target, shared by the test run
//! (tests/fuzz.rs, on stable) and by cargo-fuzz
//! (fuzz/fuzz_targets/apiserver_request.rs).

use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::Value;

/// One request as the double receives it.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    pub uri: String,
    pub content_type: Option<String>,
    pub accept: Option<String>,
    pub body: Vec<u8>,
}

impl Req {
    /// Splits raw fuzzer bytes at newlines into method, URI, content type,
    /// accept and body.
    pub fn from_bytes(data: &[u8]) -> Req {
        let mut parts = data.splitn(5, |b| *b == b'\n');
        let mut text = || {
            parts
                .next()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .unwrap_or_default()
        };
        let method = text();
        let uri = text();
        let content_type = Some(text()).filter(|s| !s.is_empty());
        let accept = Some(text()).filter(|s| !s.is_empty());
        let body = parts.next().unwrap_or_default().to_vec();
        Req {
            method,
            uri,
            content_type,
            accept,
            body,
        }
    }
}

/// Sends `req`: the double answers (no panic, no dropped connection); an
/// error is a Kubernetes `Status` whose code is the HTTP status; a 500 only
/// where Kubernetes answers one (an eviction under two PDBs); and the
/// double still serves a plain list afterwards.
pub async fn check(client: &kube::Client, req: &Req) {
    let Ok(method) = http::Method::from_bytes(req.method.as_bytes()) else {
        return;
    };
    let mut builder = http::Request::builder()
        .method(method)
        .uri(req.uri.as_str());
    if let Some(ct) = &req.content_type {
        builder = builder.header(http::header::CONTENT_TYPE, ct.as_str());
    }
    if let Some(accept) = &req.accept {
        builder = builder.header(http::header::ACCEPT, accept.as_str());
    }
    let Ok(request) = builder.body(kube::client::Body::from(req.body.clone())) else {
        return; // not a request http can even express
    };
    let path = request.uri().path().to_string();
    let streams = req.uri.to_ascii_lowercase().contains("watch")
        || req.uri.to_ascii_lowercase().contains("follow");
    let response = client
        .send(request)
        .await
        .unwrap_or_else(|e| panic!("{req:?}: the double did not answer: {e}"));
    let status = response.status();
    if status.is_client_error() || status.is_server_error() {
        let body = tokio::time::timeout(Duration::from_secs(5), response.into_body().collect())
            .await
            .unwrap_or_else(|_| panic!("{req:?}: error body never ended"))
            .unwrap_or_else(|e| panic!("{req:?}: error body failed: {e}"))
            .to_bytes();
        let status_object: Value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{req:?}: {status} body is not JSON ({e}): {body:?}"));
        assert_eq!(status_object["kind"], "Status", "{req:?}: {status_object}");
        assert_eq!(
            status_object["code"].as_u64(),
            Some(u64::from(status.as_u16())),
            "{req:?}: {status_object}"
        );
        if status.is_server_error() {
            assert!(
                path.ends_with("/eviction"),
                "{req:?}: internal error {status_object}"
            );
        }
    } else if !streams {
        tokio::time::timeout(Duration::from_secs(5), response.into_body().collect())
            .await
            .unwrap_or_else(|_| panic!("{req:?}: response body never ended"))
            .unwrap_or_else(|e| panic!("{req:?}: response body failed: {e}"));
    }
    let after = client
        .send(
            http::Request::get("/api/v1/namespaces")
                .body(kube::client::Body::empty())
                .expect("a plain request"),
        )
        .await
        .unwrap_or_else(|e| panic!("after {req:?}: the double stopped answering: {e}"));
    assert_eq!(after.status(), http::StatusCode::OK, "after {req:?}");
}
