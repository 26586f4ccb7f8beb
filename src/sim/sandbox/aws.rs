//! `nodewright sandbox --cloud-provider aws`: the AWS cloud provider and the
//! real EC2NodeClass controller, against the endpoints of the default
//! credential chain (`AWS_ENDPOINT_URL` for moto). Instance types come from
//! the region's embedded catalog; the API server nodes would join is the
//! sandbox's own.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::SandboxSettings;
use crate::aws::clients::{AwsClients, AwsSettings, sdk_config};
use crate::aws::cloudprovider::AwsCloudProvider;
use crate::aws::instance_types::InstanceTypeProvider;
use crate::aws::launch_template::{IpFamily, LaunchSettings};
use crate::cloudprovider::{CloudProvider, CloudProviderError, UnavailableOfferings};
use crate::controllers::{ControllerSettings, NodeClassSetup};

/// The sandbox's service CIDR, written into AL2023 user data.
const SERVICE_CIDR: &str = "10.100.0.0/16";
/// The sandbox's cluster DNS IP, inside [`SERVICE_CIDR`].
const CLUSTER_DNS_IP: &str = "10.100.0.10";

/// The AWS cloud providers and what the EC2NodeClass controller is made from.
pub struct AwsProviders {
    /// The cloud provider the controllers launch and terminate with.
    pub cloud: Arc<dyn CloudProvider>,
    /// The same provider over clients of its own, for the clean-up when the
    /// sandbox stops: the SDK's retry quota of the controllers' clients may
    /// be spent by then (a run against a throttling EC2 spends it, and it
    /// only comes back one token per call that succeeds at once), and a
    /// clean-up without the SDK's retries leaves instances running.
    pub cleanup: Arc<dyn CloudProvider>,
    /// What the EC2NodeClass controller is made from.
    pub setup: NodeClassSetup,
}

/// Builds the [`AwsProviders`] of a sandbox from its settings, against the
/// endpoints of the default credential chain.
pub async fn providers(
    settings: &SandboxSettings,
    url: &str,
    instance_types: &Arc<InstanceTypeProvider>,
    unavailable: Arc<UnavailableOfferings>,
    kubernetes_version: &str,
) -> AwsProviders {
    let sdk = sdk_config(&AwsSettings {
        region: Some(settings.region.clone()),
        ..settings.aws.clone()
    })
    .await;
    let clients = AwsClients::new(&sdk);
    let launch = LaunchSettings {
        cluster_name: settings.cluster_name.clone(),
        cluster_endpoint: url.to_string(),
        ca_bundle: None,
        service_cidr: Some(SERVICE_CIDR.to_string()),
        cluster_dns_ip: Some(CLUSTER_DNS_IP.to_string()),
        ip_family: IpFamily::Ipv4,
    };
    let cloud = Arc::new(AwsCloudProvider::new(
        clients.clone(),
        instance_types.clone(),
        unavailable.clone(),
        launch.clone(),
    ));
    let cleanup = Arc::new(AwsCloudProvider::new(
        AwsClients::new(&sdk),
        instance_types.clone(),
        unavailable,
        launch,
    ));
    let setup = NodeClassSetup {
        clients,
        settings: ControllerSettings {
            kubernetes_version: kubernetes_version.to_string(),
            cluster_name: settings.cluster_name.clone(),
            disable_dry_run: false,
        },
    };
    AwsProviders {
        cloud,
        cleanup,
        setup,
    }
}

/// Attempts at each call that cleans up when the sandbox stops (listing its
/// instances, terminating one), each after the SDK's own retries: a
/// throttled or failing EC2 at that moment must not leave instances running
/// that nothing will look at again.
pub const STOP_ATTEMPTS: u32 = 5;
/// The pause before the first repeated attempt; doubled for each next one.
pub const STOP_PAUSE: Duration = Duration::from_secs(1);

/// `call` until it succeeds, says the instance is gone, or failed
/// [`STOP_ATTEMPTS`] times (the last error is returned); each failure but
/// the last is logged at warn naming `what`.
pub async fn with_retries<T, F, Fut>(what: &str, mut call: F) -> Result<T, CloudProviderError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, CloudProviderError>>,
{
    let mut pause = STOP_PAUSE;
    let mut attempt = 1;
    loop {
        match call().await {
            Ok(done) => return Ok(done),
            Err(error) if error.is_not_found() || attempt == STOP_ATTEMPTS => return Err(error),
            Err(error) => {
                tracing::warn!(%error, attempt, of = STOP_ATTEMPTS, "cannot {what}; retrying");
                tokio::time::sleep(pause).await;
                pause *= 2;
                attempt += 1;
            }
        }
    }
}

/// Terminates the instances launched for the sandbox's cluster: they
/// cannot outlive the cluster they were launched for.
pub async fn terminate_instances(cloud: &dyn CloudProvider) {
    let listing = with_retries("list the sandbox's instances", || cloud.list());
    let launched = match listing.await {
        Ok(launched) => launched,
        Err(error) => {
            tracing::error!(%error, "cannot list the sandbox's instances; terminate them by their eks:eks-cluster-name tag");
            return;
        }
    };
    for claim in launched {
        let id = claim.status.as_ref().and_then(|s| s.provider_id.clone());
        match with_retries("terminate an instance", || cloud.delete(&claim)).await {
            Ok(()) => tracing::info!(instance = ?id, "instance terminated"),
            Err(error) if error.is_not_found() => {}
            Err(error) => tracing::error!(instance = ?id, %error, "cannot terminate instance"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn throttled() -> CloudProviderError {
        CloudProviderError::Api {
            operation: "ec2:DescribeInstances",
            source: "RequestLimitExceeded: Request limit exceeded.".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn listing_at_stop_is_retried_before_giving_up() {
        let calls = AtomicU32::new(0);
        let listed = with_retries("list", || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => Err(throttled()),
                _ => Ok(vec!["i-1"]),
            }
        })
        .await;
        assert_eq!(listed.ok(), Some(vec!["i-1"]));
        assert_eq!(calls.load(Ordering::SeqCst), 3);

        let calls = AtomicU32::new(0);
        let started = tokio::time::Instant::now();
        let listed: Result<(), _> = with_retries("list", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(throttled())
        })
        .await;
        assert!(listed.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), STOP_ATTEMPTS);
        // 1 + 2 + 4 + 8 s of pauses between the five attempts.
        assert_eq!(started.elapsed(), Duration::from_secs(15));
    }

    #[tokio::test(start_paused = true)]
    async fn an_instance_already_gone_is_not_retried() {
        let calls = AtomicU32::new(0);
        let deleted: Result<(), _> = with_retries("terminate", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(CloudProviderError::NotFound {
                provider_id: "aws:///us-east-1a/i-1".to_string(),
                source: None,
            })
        })
        .await;
        assert!(deleted.is_err_and(|e| e.is_not_found()));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
