//! An HTTP proxy the tests put between the controller and moto, on
//! 127.0.0.1: it forwards every call and lets a test rewrite the answer to
//! an operation, to show the controller what moto cannot produce (an
//! instance that landed in an open capacity reservation). Stopped when
//! dropped.
//!
//! With a [`FaultPlan`] it also answers a share of the calls itself, the
//! way AWS does when it throttles or fails, without forwarding them (the
//! call never reaches moto, as a throttled call never reaches EC2): each
//! service in its own protocol's error shape (see [`fault_answer`]), so the
//! SDK's own retry classifiers and the controller's error handling see what
//! they would see from AWS. Faults are drawn from a seeded PRNG: a seed
//! gives the same sequence of decisions (which call gets one depends on the
//! order calls arrive in, which concurrency varies a little). A plan can
//! also show EC2's eventual consistency after a launch
//! ([`FaultPlan::hide_launched_for`], see [`consistency`]).

pub mod consistency;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Rewrites the body of an answer: (operation, body) → new body.
pub type Rewrite = Arc<dyn Fn(&str, Bytes) -> Bytes + Send + Sync>;

/// A rewrite that changes nothing.
pub fn unchanged() -> Rewrite {
    Arc::new(|_: &str, body: Bytes| body)
}

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

/// What the proxy answers instead of forwarding a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// The service's throttling error.
    Throttle,
    /// An internal error (HTTP 500).
    ServerError,
}

/// Calls seen by a [`FaultPlan`] for one service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Calls forwarded to moto.
    pub forwarded: u64,
    /// Calls answered with the service's throttling error.
    pub throttled: u64,
    /// Calls answered with a 500.
    pub failed: u64,
}

/// Which calls the proxy fails and how: a share of throttles and a share
/// of 500s drawn from a seeded PRNG, after any scripted faults.
pub struct FaultPlan {
    /// The shares of throttled and of failed calls.
    shares: Mutex<(f64, f64)>,
    state: Mutex<u64>,
    /// Faults answered first, one per call, before the drawn ones.
    scripted: Mutex<VecDeque<Fault>>,
    /// Per service (the signing name: `ec2`, `iam`, `sqs`, …).
    tally: Mutex<BTreeMap<String, Tally>>,
    /// Instances EC2 does not know yet after their launch.
    lag: consistency::LaunchLag,
}

impl FaultPlan {
    /// Throttles a share `throttle` of the calls and fails a share `error`
    /// of them with a 500 (both in 0..=1), drawn from `seed`.
    pub fn new(seed: u64, throttle: f64, error: f64) -> Arc<Self> {
        check_shares(throttle, error);
        Arc::new(FaultPlan {
            shares: Mutex::new((throttle, error)),
            state: Mutex::new(seed),
            scripted: Mutex::new(VecDeque::new()),
            tally: Mutex::new(BTreeMap::new()),
            lag: consistency::LaunchLag::default(),
        })
    }

    /// From now on, EC2 does not know an instance for `span` after the
    /// CreateFleet that launched it: DescribeInstances leaves it out and
    /// DescribeInstances or TerminateInstances naming it fails with
    /// `InvalidInstanceID.NotFound`.
    pub fn hide_launched_for(&self, span: std::time::Duration) {
        self.lag.hide_for(span);
    }

    /// What hiding launched instances did so far.
    pub fn lag(&self) -> consistency::LagTally {
        self.lag.tally()
    }

    /// From now on throttles a share `throttle` of the calls and fails a
    /// share `error` of them.
    pub fn set_shares(&self, throttle: f64, error: f64) {
        check_shares(throttle, error);
        *self.shares.lock().unwrap() = (throttle, error);
    }

    /// Answers the next calls with `faults`, one each, in order.
    pub fn script(&self, faults: &[Fault]) {
        self.scripted.lock().unwrap().extend(faults.iter().copied());
    }

    /// What each service's calls met so far.
    pub fn tally(&self) -> BTreeMap<String, Tally> {
        self.tally.lock().unwrap().clone()
    }

    /// The calls of every service together.
    pub fn total(&self) -> Tally {
        self.tally()
            .values()
            .fold(Tally::default(), |sum, t| Tally {
                forwarded: sum.forwarded + t.forwarded,
                throttled: sum.throttled + t.throttled,
                failed: sum.failed + t.failed,
            })
    }

    /// splitmix64: a uniform draw in [0, 1).
    fn draw(&self) -> f64 {
        let mut state = self.state.lock().unwrap();
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The fault for the next call of `service`, if any, counted.
    fn decide(&self, service: &str) -> Option<Fault> {
        let scripted = self.scripted.lock().unwrap().pop_front();
        let fault = scripted.or_else(|| {
            let (throttle, error) = *self.shares.lock().unwrap();
            let draw = self.draw();
            if draw < throttle {
                Some(Fault::Throttle)
            } else if draw < throttle + error {
                Some(Fault::ServerError)
            } else {
                None
            }
        });
        let mut tally = self.tally.lock().unwrap();
        let entry = tally.entry(service.to_string()).or_default();
        match fault {
            None => entry.forwarded += 1,
            Some(Fault::Throttle) => entry.throttled += 1,
            Some(Fault::ServerError) => entry.failed += 1,
        }
        fault
    }
}

/// Shares of calls to fail, each in 0..=1 and together at most 1.
fn check_shares(throttle: f64, error: f64) {
    assert!(
        throttle >= 0.0 && error >= 0.0 && throttle + error <= 1.0,
        "shares of calls: {throttle} + {error}"
    );
}

/// Starts a proxy to `upstream` (`http://127.0.0.1:PORT`, moto's endpoint).
pub async fn start(upstream: &str, rewrite: Rewrite) -> AwsProxy {
    start_with_faults(upstream, rewrite, None).await
}

/// Starts a proxy to `upstream` that fails calls as `faults` says.
pub async fn start_with_faults(
    upstream: &str,
    rewrite: Rewrite,
    faults: Option<Arc<FaultPlan>>,
) -> AwsProxy {
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
            let faults = faults.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    forward(upstream, request, rewrite.clone(), faults.clone())
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

/// The service a call is for: the signing name in its SigV4 credential
/// scope (`Credential=AKID/20260101/us-east-1/ec2/aws4_request`).
fn service(headers: &http::HeaderMap) -> String {
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|auth| auth.split("Credential=").nth(1))
        .and_then(|scope| scope.split('/').nth(3))
        .unwrap_or_default()
        .to_string()
}

/// The protocols the controller's services speak, as far as errors go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    /// EC2's query protocol: `<Response><Errors><Error>…`.
    Ec2Query,
    /// The AWS query protocol (IAM, STS): `<ErrorResponse><Error>…`.
    AwsQuery,
    /// The AWS JSON protocols (SQS, SSM, Pricing): `{"__type": …}` and the
    /// `x-amzn-ErrorType` header.
    Json,
}

fn protocol(service: &str, headers: &http::HeaderMap) -> Protocol {
    if headers.contains_key("x-amz-target") {
        Protocol::Json
    } else if service == "ec2" {
        Protocol::Ec2Query
    } else {
        Protocol::AwsQuery
    }
}

/// The answer AWS gives for `fault` in `protocol`: EC2 throttles with
/// `RequestLimitExceeded` and HTTP 503, IAM with `Throttling` and 400, the
/// JSON services with `ThrottlingException` and 400; a server fault is a
/// 500 with `InternalError` (EC2) or `InternalFailure` (the others).
fn fault_answer(fault: Fault, protocol: Protocol, request_id: u64) -> Response<Full<Bytes>> {
    let (status, code, message) = match (fault, protocol) {
        (Fault::Throttle, Protocol::Ec2Query) => {
            (503, "RequestLimitExceeded", "Request limit exceeded.")
        }
        (Fault::Throttle, _) => (
            400,
            if protocol == Protocol::Json {
                "ThrottlingException"
            } else {
                "Throttling"
            },
            "Rate exceeded",
        ),
        (Fault::ServerError, Protocol::Ec2Query) => {
            (500, "InternalError", "An internal error has occurred")
        }
        (Fault::ServerError, _) => (
            500,
            "InternalFailure",
            "The request processing has failed because of an unknown error",
        ),
    };
    let kind = if status == 500 { "Receiver" } else { "Sender" };
    let id = format!("00000000-0000-4000-8000-{request_id:012x}");
    let builder = Response::builder().status(status);
    let (builder, body) = match protocol {
        Protocol::Ec2Query => (
            builder.header("content-type", "text/xml;charset=UTF-8"),
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>{id}</RequestID></Response>"
            ),
        ),
        Protocol::AwsQuery => (
            builder.header("content-type", "text/xml"),
            format!(
                "<ErrorResponse xmlns=\"https://iam.amazonaws.com/doc/2010-05-08/\"><Error><Type>{kind}</Type><Code>{code}</Code><Message>{message}</Message></Error><RequestId>{id}</RequestId></ErrorResponse>"
            ),
        ),
        Protocol::Json => (
            builder
                .header("content-type", "application/x-amz-json-1.1")
                .header("x-amzn-errortype", code)
                .header("x-amzn-requestid", &id),
            format!("{{\"__type\":\"{code}\",\"message\":\"{message}\"}}"),
        ),
    };
    builder
        .body(Full::new(Bytes::from(body)))
        .expect("a well-formed error answer")
}

/// EC2's answer to a call naming an instance it does not know.
fn not_found_answer(instance: &str) -> Response<Full<Bytes>> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code><Message>The instance ID '{instance}' does not exist</Message></Error></Errors><RequestID>00000000-0000-4000-8000-000000000000</RequestID></Response>"
    );
    Response::builder()
        .status(400)
        .header("content-type", "text/xml;charset=UTF-8")
        .body(Full::new(Bytes::from(body)))
        .expect("a well-formed error answer")
}

async fn forward(
    upstream: SocketAddr,
    request: Request<Incoming>,
    rewrite: Rewrite,
    faults: Option<Arc<FaultPlan>>,
) -> Result<Response<Full<Bytes>>, Box<dyn std::error::Error + Send + Sync>> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await?.to_bytes();
    let operation = operation(&parts.headers, &body);
    let service = service(&parts.headers);
    let lag = faults.as_ref().filter(|_| service == "ec2").map(|p| &p.lag);
    if let Some(plan) = &faults {
        if let Some(fault) = plan.decide(&service) {
            let id = plan.total().throttled + plan.total().failed;
            return Ok(fault_answer(fault, protocol(&service, &parts.headers), id));
        }
        if let Some(instance) = lag.and_then(|lag| lag.refuses(&operation, &body)) {
            return Ok(not_found_answer(&instance));
        }
    }
    let stream = TcpStream::connect(upstream).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let answer = sender
        .send_request(Request::from_parts(parts, Full::new(body)))
        .await?;
    let (mut parts, body) = answer.into_parts();
    let mut body = body.collect().await?.to_bytes();
    if let Some(lag) = lag {
        if operation == "CreateFleet" {
            lag.launched(&body);
        }
        body = lag.filter(&operation, body);
    }
    let body = rewrite(&operation, body);
    parts.headers.remove(http::header::CONTENT_LENGTH);
    parts.headers.remove(http::header::TRANSFER_ENCODING);
    Ok(Response::from_parts(parts, Full::new(body)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::error::ProvideErrorMetadata;
    use nodewright::aws::clients::{AwsClients, AwsSettings, sdk_config};
    use nodewright::aws::errors::{AwsError, ErrorKind};

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

    #[test]
    fn the_service_is_the_signing_name_of_the_credential_scope() {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::AUTHORIZATION,
            "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=00"
                .parse()
                .unwrap(),
        );
        assert_eq!(service(&headers), "iam");
        assert_eq!(protocol("iam", &headers), Protocol::AwsQuery);
        assert_eq!(protocol("ec2", &headers), Protocol::Ec2Query);
        headers.insert("x-amz-target", "AmazonSSM.GetParameter".parse().unwrap());
        assert_eq!(protocol("ssm", &headers), Protocol::Json);
    }

    #[test]
    fn faults_come_in_their_shares_and_repeat_with_the_seed() {
        let draws = |seed| {
            let plan = FaultPlan::new(seed, 0.2, 0.05);
            let faults: Vec<_> = (0..10_000).map(|_| plan.decide("ec2")).collect();
            (faults, plan.total())
        };
        let (first, tally) = draws(7);
        assert!((1_850..=2_150).contains(&tally.throttled), "{tally:?}");
        assert!((420..=580).contains(&tally.failed), "{tally:?}");
        assert_eq!(tally.forwarded + tally.throttled + tally.failed, 10_000);
        assert_eq!(draws(7).0, first, "the same seed, the same faults");
        assert_ne!(draws(8).0, first, "another seed, other faults");
        let plan = FaultPlan::new(7, 0.0, 0.0);
        plan.script(&[Fault::ServerError]);
        assert_eq!(plan.decide("iam"), Some(Fault::ServerError));
        assert_eq!(plan.decide("iam"), None);
    }

    /// Clients through `endpoint`; with `retries` false, every error
    /// reaches the caller as the service sent it.
    async fn clients(endpoint: &str, retries: bool) -> AwsClients {
        let settings = AwsSettings {
            region: Some("us-east-1".to_string()),
            endpoint_url: Some(endpoint.to_string()),
            credentials: Some(aws_sdk_ec2::config::Credentials::new(
                "testing", "testing", None, None, "moto",
            )),
        };
        let mut config = sdk_config(&settings).await;
        if !retries {
            config = config
                .into_builder()
                .retry_config(aws_config::retry::RetryConfig::disabled())
                .build();
        }
        AwsClients::new(&config)
    }

    /// One call of each service the controller uses: its error code and
    /// the controller's classification of it, or `None` if it succeeded.
    async fn call(clients: &AwsClients, service: &str) -> Option<(Option<String>, ErrorKind)> {
        fn seen<E>(
            operation: &'static str,
            error: SdkErrorOf<E>,
        ) -> Option<(Option<String>, ErrorKind)>
        where
            E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        {
            let code = error.code().map(str::to_string);
            Some((code, AwsError::from_sdk(operation, &error).kind))
        }
        match service {
            "ec2" => clients
                .ec2
                .describe_availability_zones()
                .send()
                .await
                .err()
                .and_then(|e| seen("ec2:DescribeAvailabilityZones", e)),
            "iam" => clients
                .iam
                .list_roles()
                .send()
                .await
                .err()
                .and_then(|e| seen("iam:ListRoles", e)),
            "sqs" => clients
                .sqs
                .list_queues()
                .send()
                .await
                .err()
                .and_then(|e| seen("sqs:ListQueues", e)),
            "ssm" => clients
                .ssm
                .describe_parameters()
                .send()
                .await
                .err()
                .and_then(|e| seen("ssm:DescribeParameters", e)),
            "pricing" => clients
                .pricing
                .describe_services()
                .send()
                .await
                .err()
                .and_then(|e| seen("pricing:DescribeServices", e)),
            other => panic!("no call for {other}"),
        }
    }

    type SdkErrorOf<E> = aws_sdk_ec2::error::SdkError<E>;

    #[tokio::test]
    async fn each_service_answers_in_its_own_error_shape() {
        let plan = FaultPlan::new(1, 0.0, 0.0);
        let proxy = start_with_faults(
            &crate::moto::moto().endpoint,
            unchanged(),
            Some(plan.clone()),
        )
        .await;
        let clients = clients(&proxy.endpoint, false).await;
        let cases = [
            (
                "ec2",
                Fault::Throttle,
                "RequestLimitExceeded",
                ErrorKind::Throttled,
            ),
            (
                "ec2",
                Fault::ServerError,
                "InternalError",
                ErrorKind::Transient,
            ),
            ("iam", Fault::Throttle, "Throttling", ErrorKind::Throttled),
            (
                "iam",
                Fault::ServerError,
                "InternalFailure",
                ErrorKind::Transient,
            ),
            (
                "sqs",
                Fault::Throttle,
                "ThrottlingException",
                ErrorKind::Throttled,
            ),
            (
                "sqs",
                Fault::ServerError,
                "InternalFailure",
                ErrorKind::Transient,
            ),
            (
                "ssm",
                Fault::Throttle,
                "ThrottlingException",
                ErrorKind::Throttled,
            ),
            (
                "ssm",
                Fault::ServerError,
                "InternalFailure",
                ErrorKind::Transient,
            ),
            (
                "pricing",
                Fault::Throttle,
                "ThrottlingException",
                ErrorKind::Throttled,
            ),
            (
                "pricing",
                Fault::ServerError,
                "InternalFailure",
                ErrorKind::Transient,
            ),
        ];
        for (service, fault, code, kind) in cases {
            plan.script(&[fault]);
            let seen = call(&clients, service).await;
            assert_eq!(
                seen,
                Some((Some(code.to_string()), kind)),
                "{service} answering {fault:?}"
            );
            // The SDK's list of throttling codes (mirrored by the controller's
            // classification) is what makes the standard retry strategy
            // treat these as throttling.
            assert_eq!(
                nodewright::aws::errors::is_throttling_code(code),
                fault == Fault::Throttle,
                "{code}"
            );
        }
        // moto answers the same calls (Pricing aside, which moto lacks).
        for service in ["ec2", "iam", "sqs", "ssm"] {
            assert_eq!(
                call(&clients, service).await,
                None,
                "{service} through the proxy"
            );
        }
    }

    #[tokio::test]
    async fn the_sdk_retries_each_shape_away() {
        let plan = FaultPlan::new(1, 0.0, 0.0);
        let proxy = start_with_faults(
            &crate::moto::moto().endpoint,
            unchanged(),
            Some(plan.clone()),
        )
        .await;
        let clients = clients(&proxy.endpoint, true).await;
        for service in ["ec2", "iam", "sqs", "ssm"] {
            plan.script(&[Fault::Throttle, Fault::ServerError]);
            assert_eq!(call(&clients, service).await, None, "{service} retried");
            assert_eq!(
                plan.tally()[service],
                Tally {
                    forwarded: 1,
                    throttled: 1,
                    failed: 1
                },
                "{service}"
            );
        }
    }
}
