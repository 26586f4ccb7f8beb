//! The Kubernetes client the controllers use: kube's stack, whose retry of
//! 429, 503 and 504 (up to 15 times, backing off from 5 ms) is kept for
//! every request except evictions.
//!
//! A `429` from `pods/eviction` is a PodDisruptionBudget saying "not now"
//! (with no `Retry-After` when the budget is exhausted). kube 5 retries it
//! by default, so one blocked eviction would hold a drain pass for minutes
//! and send the server sixteen requests; client-go, which Karpenter uses,
//! gives that answer back at once. Here the drain gets the 429 on the first
//! answer and decides itself when to try again (`DRAIN_RETRY`).

use http::{Method, Request, Response};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder};
use tower::BoxError;
use tower::buffer::BufferLayer;
use tower::retry::{Policy, RetryLayer};

/// Requests the buffer in front of the connection holds (the retry layer
/// needs a cloneable service).
const BUFFER: usize = 1024;

/// A client for `config` that retries as kube does, except evictions.
pub fn client(mut config: kube::Config) -> Result<kube::Client, kube::Error> {
    config.default_retry = false;
    let layers = tower::ServiceBuilder::new()
        .layer(retry_layer())
        .layer(BufferLayer::<Request<Body>>::new(BUFFER));
    Ok(ClientBuilder::try_from(config)?.with_layer(&layers).build())
}

/// kube's server-aware retry, never applied to an eviction.
pub fn retry_layer() -> RetryLayer<RetryExceptEvictions> {
    RetryLayer::new(RetryExceptEvictions(RetryPolicy::server_retry()))
}

/// kube's [`RetryPolicy`], except that `POST …/pods/NAME/eviction` is
/// answered as the server answered it.
#[derive(Clone)]
pub struct RetryExceptEvictions(RetryPolicy);

/// Whether `request` asks the eviction subresource to evict a pod.
pub fn is_eviction<B>(request: &Request<B>) -> bool {
    request.method() == Method::POST && request.uri().path().ends_with("/eviction")
}

impl<Res> Policy<Request<Body>, Response<Res>, BoxError> for RetryExceptEvictions {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        request: &mut Request<Body>,
        result: &mut Result<Response<Res>, BoxError>,
    ) -> Option<Self::Future> {
        if is_eviction(request) {
            return None;
        }
        self.0.retry(request, result)
    }

    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        if is_eviction(request) {
            return None;
        }
        <RetryPolicy as Policy<Request<Body>, Response<Res>, BoxError>>::clone_request(
            &mut self.0,
            request,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http::StatusCode;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, EvictParams};

    use super::*;

    fn too_many() -> Response<Body> {
        let status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
            "reason": "TooManyRequests",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        });
        let mut response = Response::new(Body::from(status.to_string().into_bytes()));
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        response
    }

    #[tokio::test]
    async fn an_eviction_refused_with_429_is_sent_once_and_other_requests_are_retried() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let server = tower::service_fn(move |_request: Request<Body>| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, BoxError>(too_many()) }
        });
        let service = tower::ServiceBuilder::new()
            .layer(retry_layer())
            .service(server);
        let client = kube::Client::new(service, "default");
        let pods: Api<Pod> = Api::namespaced(client, "default");
        let refused = pods.evict("web", &EvictParams::default()).await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(s)) if s.code == 429),
            "{refused:?}"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1, "one eviction request");

        // Anything else meets kube's retry.
        let mut policy = RetryExceptEvictions(RetryPolicy::server_retry());
        let mut get = Request::get("/api/v1/namespaces/default/pods/web")
            .body(Body::empty())
            .unwrap();
        let mut answer: Result<Response<Body>, BoxError> = Ok(too_many());
        assert!(policy.retry(&mut get, &mut answer).is_some());
        let mut evict = Request::post("/api/v1/namespaces/default/pods/web/eviction")
            .body(Body::empty())
            .unwrap();
        assert!(policy.retry(&mut evict, &mut answer).is_none());
    }
}
