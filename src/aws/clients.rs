//! The AWS SDK clients the controller uses, on one rustls + ring TLS stack
//! (the one kube and the module downloader use), so no second crypto
//! provider is linked. Every client retries throttling and server faults in
//! the SDK's standard mode and bounds each call with timeouts.
//!
//! Standard, not adaptive: adaptive mode's client-side rate limiter, once it
//! has seen one throttle, holds every later call of that service (its
//! partition is process-wide) to a rate derived from the rate calls were
//! sent at, at least 0.5 a second. The controller sends its calls in
//! bursts of tens (one EC2NodeClass pass, one launch) at a few a second, so
//! after a single throttle such a burst waited tens of seconds: measured
//! against moto behind a proxy throttling 20 % of the calls, the class took
//! ~30 s to become Ready and a launch ~12 s. Standard mode backs off each
//! throttled call alone (exponential, full jitter, from [`INITIAL_BACKOFF`]
//! up to [`MAX_BACKOFF`]), and its retry quota (a token bucket, which only
//! failed retries drain) still stops a retry storm against a service that
//! keeps failing. Figures: docs/reliability.md, "AWS faults".

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_ec2::config::SharedCredentialsProvider;
use aws_sdk_ec2::config::retry::{RetryPartition, TokenBucket};
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};

/// Attempts per call, the first included, before an error reaches the caller.
pub const MAX_ATTEMPTS: u32 = 5;
/// The first retry waits up to this long (full jitter), each further one up
/// to twice as long as the one before.
pub const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Longest one attempt may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a call may take, retries included.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest a connection may take to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the clients connect and as whom.
#[derive(Debug, Clone, Default)]
pub struct AwsSettings {
    /// Region; `None` takes it from the environment (`AWS_REGION`, profile,
    /// instance metadata).
    pub region: Option<String>,
    /// Endpoint for every service (a local emulator); `None` uses AWS.
    pub endpoint_url: Option<String>,
    /// Fixed credentials; `None` uses the default chain (environment, web
    /// identity from IRSA or Pod Identity, instance profile).
    pub credentials: Option<aws_sdk_ec2::config::Credentials>,
}

/// How every client retries: see the module's documentation.
pub fn retry_config() -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(MAX_ATTEMPTS)
        .with_initial_backoff(INITIAL_BACKOFF)
        .with_max_backoff(MAX_BACKOFF)
}

/// The SDK configuration for `settings`.
pub async fn sdk_config(settings: &AwsSettings) -> SdkConfig {
    let http_client = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(http_client)
        .retry_config(retry_config())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .operation_timeout(OPERATION_TIMEOUT)
                .build(),
        );
    if let Some(region) = &settings.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let Some(url) = &settings.endpoint_url {
        loader = loader.endpoint_url(url);
    }
    if let Some(credentials) = &settings.credentials {
        loader = loader.credentials_provider(SharedCredentialsProvider::new(credentials.clone()));
    }
    loader.load().await
}

/// The region the Pricing API is served from for `region`'s prices: it runs
/// only in us-east-1, eu-central-1 and ap-south-1.
pub fn pricing_region(region: &str) -> &'static str {
    if region.starts_with("eu-") || region.starts_with("me-") || region.starts_with("af-") {
        "eu-central-1"
    } else if region.starts_with("ap-") {
        "ap-south-1"
    } else {
        "us-east-1"
    }
}

/// The clients AMI discovery and the launch path talk to.
#[derive(Clone)]
pub struct AwsClients {
    /// EC2: images, instance types, subnets, security groups, launch
    /// templates, fleets, instances, capacity reservations, spot prices.
    pub ec2: aws_sdk_ec2::Client,
    /// SSM: alias and `ssmParameter` image ids.
    pub ssm: aws_sdk_ssm::Client,
    /// IAM: instance profiles for `spec.role`.
    pub iam: aws_sdk_iam::Client,
    /// Pricing: on-demand prices (in its own region, see [`pricing_region`]).
    pub pricing: aws_sdk_pricing::Client,
    /// SQS: the interruption queue.
    pub sqs: aws_sdk_sqs::Client,
}

impl AwsClients {
    /// Clients sharing one SDK configuration, each service with a retry
    /// quota of its own ([`own_retry_quota`]).
    pub fn new(config: &SdkConfig) -> Self {
        let region = config
            .region()
            .map(|r| r.as_ref().to_string())
            .unwrap_or_default();
        let ec2 = aws_sdk_ec2::config::Builder::from(config)
            .retry_partition(own_retry_quota("ec2"))
            .build();
        let ssm = aws_sdk_ssm::config::Builder::from(config)
            .retry_partition(own_retry_quota("ssm"))
            .build();
        let iam = aws_sdk_iam::config::Builder::from(config)
            .retry_partition(own_retry_quota("iam"))
            .build();
        let pricing = aws_sdk_pricing::config::Builder::from(config)
            .region(Region::new(pricing_region(&region)))
            .retry_partition(own_retry_quota("pricing"))
            .build();
        let sqs = aws_sdk_sqs::config::Builder::from(config)
            .retry_partition(own_retry_quota("sqs"))
            .build();
        AwsClients {
            ec2: aws_sdk_ec2::Client::from_conf(ec2),
            ssm: aws_sdk_ssm::Client::from_conf(ssm),
            iam: aws_sdk_iam::Client::from_conf(iam),
            pricing: aws_sdk_pricing::Client::from_conf(pricing),
            sqs: aws_sdk_sqs::Client::from_conf(sqs),
        }
    }
}

/// An EKS client on `config`, with a retry quota of its own: the controller
/// asks EKS once, at start, for the cluster's endpoint and service CIDR
/// ([`crate::aws::cluster::describe`]).
pub fn eks_client(config: &SdkConfig) -> aws_sdk_eks::Client {
    let eks = aws_sdk_eks::config::Builder::from(config)
        .retry_partition(own_retry_quota("eks"))
        .build();
    aws_sdk_eks::Client::from_conf(eks)
}

/// A retry quota (the SDK's token bucket: 500 tokens, 5 per retry, 10 per
/// retried timeout, one back per first-try success) owned by one set of
/// clients and their clones. The SDK's default keeps one quota per service
/// and region for the whole process, so every sandbox a process starts
/// (tests, `nodewright sandbox` runs) would share, and drain, the same
/// one; a controller builds its clients once, so for it nothing changes.
fn own_retry_quota(service: &'static str) -> RetryPartition {
    RetryPartition::custom(service)
        .token_bucket(TokenBucket::default())
        .build()
}

#[cfg(test)]
mod tests {
    use super::pricing_region;

    #[test]
    fn the_pricing_api_is_asked_in_its_nearest_region() {
        assert_eq!(pricing_region("us-west-2"), "us-east-1");
        assert_eq!(pricing_region("eu-west-1"), "eu-central-1");
        assert_eq!(pricing_region("ap-northeast-1"), "ap-south-1");
    }
}
