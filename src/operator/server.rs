//! The operator's HTTP endpoints: `/metrics` (Prometheus text), `/healthz`
//! (the process serves) and `/readyz` (the cluster state has listed
//! everything), on the addresses the settings give (Karpenter's ports 8080
//! and 8081 by default).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;

use crate::metrics::metrics;

/// Whether the operator is ready to serve (shared with whoever decides).
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the operator ready.
    pub fn set_ready(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether it is.
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

fn respond(
    request: &Request<hyper::body::Incoming>,
    readiness: &Readiness,
) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match request.uri().path() {
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics().render(),
        ),
        "/healthz" => (StatusCode::OK, "text/plain", "ok".to_string()),
        "/readyz" if readiness.is_ready() => (StatusCode::OK, "text/plain", "ok".to_string()),
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "the cluster state has not synced".to_string(),
        ),
        _ => (StatusCode::NOT_FOUND, "text/plain", "not found".to_string()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = http::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}

/// Serves the endpoints on `addr` until the task is dropped; returns the
/// bound address (port 0 picks a free one).
pub async fn serve(
    addr: SocketAddr,
    readiness: Readiness,
) -> std::io::Result<(SocketAddr, impl std::future::Future<Output = ()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let serving = async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let readiness = readiness.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let response = respond(&request, &readiness);
                    async move { Ok::<_, Infallible>(response) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "metrics connection ended");
                }
            });
        }
    };
    Ok((bound, serving))
}
