//! The AWS SDK clients the controller uses, on one rustls + ring TLS stack
//! (the one kube and the module downloader use), so no second crypto
//! provider is linked.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_ec2::config::SharedCredentialsProvider;
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};

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

/// The SDK configuration for `settings`.
pub async fn sdk_config(settings: &AwsSettings) -> SdkConfig {
    let http_client = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).http_client(http_client);
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

/// The clients AMI discovery (and later the launch path) talk to.
#[derive(Clone)]
pub struct AwsClients {
    /// EC2: images, and later instances and fleets.
    pub ec2: aws_sdk_ec2::Client,
    /// SSM: alias and `ssmParameter` image ids.
    pub ssm: aws_sdk_ssm::Client,
}

impl AwsClients {
    /// Clients sharing one SDK configuration.
    pub fn new(config: &SdkConfig) -> Self {
        AwsClients {
            ec2: aws_sdk_ec2::Client::new(config),
            ssm: aws_sdk_ssm::Client::new(config),
        }
    }
}
