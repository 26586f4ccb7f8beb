//! An HTTP proxy the tests put between the controller and moto, on
//! 127.0.0.1: it forwards every call and lets a test rewrite the answer to
//! an operation, to show the controller what moto cannot produce (an
//! instance that landed in an open capacity reservation). Stopped when
//! dropped.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Rewrites the body of an answer: (operation, body) → new body.
pub type Rewrite = Arc<dyn Fn(&str, Bytes) -> Bytes + Send + Sync>;

/// A running proxy.
pub struct AwsProxy {
    /// `http://127.0.0.1:PORT`: the endpoint to give the SDK.
    pub endpoint: String,
    task: JoinHandle<()>,
}

impl Drop for AwsProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a proxy to `upstream` (`http://127.0.0.1:PORT`, moto's endpoint).
pub async fn start(upstream: &str, rewrite: Rewrite) -> AwsProxy {
    let upstream: SocketAddr = upstream
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("moto listens on an address");
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let endpoint = format!("http://{}", listener.local_addr().expect("local address"));
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let rewrite = rewrite.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    forward(upstream, request, rewrite.clone())
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    AwsProxy { endpoint, task }
}

/// The operation of an AWS call: the JSON protocols' `X-Amz-Target`
/// (`AmazonSQS.ReceiveMessage`), or the query protocols' `Action` form field.
fn operation(headers: &http::HeaderMap, body: &[u8]) -> String {
    if let Some(target) = headers.get("x-amz-target").and_then(|v| v.to_str().ok()) {
        return target.rsplit('.').next().unwrap_or(target).to_string();
    }
    String::from_utf8_lossy(body)
        .split('&')
        .find_map(|pair| pair.strip_prefix("Action="))
        .unwrap_or_default()
        .to_string()
}

async fn forward(
    upstream: SocketAddr,
    request: Request<Incoming>,
    rewrite: Rewrite,
) -> Result<Response<Full<Bytes>>, Box<dyn std::error::Error + Send + Sync>> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await?.to_bytes();
    let operation = operation(&parts.headers, &body);
    let stream = TcpStream::connect(upstream).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let answer = sender
        .send_request(Request::from_parts(parts, Full::new(body)))
        .await?;
    let (mut parts, body) = answer.into_parts();
    let body = rewrite(&operation, body.collect().await?.to_bytes());
    parts.headers.remove(http::header::CONTENT_LENGTH);
    parts.headers.remove(http::header::TRANSFER_ENCODING);
    Ok(Response::from_parts(parts, Full::new(body)))
}

#[test]
fn the_operation_is_read_from_either_protocol() {
    let mut headers = http::HeaderMap::new();
    assert_eq!(
        operation(&headers, b"Action=DescribeInstances&Version=2016-11-15"),
        "DescribeInstances"
    );
    headers.insert("x-amz-target", "AmazonSQS.ReceiveMessage".parse().unwrap());
    assert_eq!(operation(&headers, b"{}"), "ReceiveMessage");
}
