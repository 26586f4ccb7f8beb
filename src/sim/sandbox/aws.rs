//! `nodewright sandbox --cloud-provider aws`: the AWS cloud provider and the
//! real EC2NodeClass controller, against the endpoints of the default
//! credential chain (`AWS_ENDPOINT_URL` for moto). Instance types come from
//! the region's embedded catalog; the API server nodes would join is the
//! sandbox's own.

use std::sync::Arc;

use super::SandboxSettings;
use crate::aws::clients::{AwsClients, AwsSettings, sdk_config};
use crate::aws::cloudprovider::AwsCloudProvider;
use crate::aws::instance_types::InstanceTypeProvider;
use crate::aws::launch_template::{IpFamily, LaunchSettings};
use crate::cloudprovider::{CloudProvider, UnavailableOfferings};
use crate::controllers::{ControllerSettings, NodeClassSetup};

/// The sandbox's service CIDR, written into AL2023 user data.
const SERVICE_CIDR: &str = "10.100.0.0/16";
/// The sandbox's cluster DNS IP, inside [`SERVICE_CIDR`].
const CLUSTER_DNS_IP: &str = "10.100.0.10";

/// The AWS cloud provider and what the EC2NodeClass controller is made from.
pub async fn providers(
    settings: &SandboxSettings,
    url: &str,
    instance_types: &Arc<InstanceTypeProvider>,
    unavailable: Arc<UnavailableOfferings>,
    kubernetes_version: &str,
) -> (Arc<dyn CloudProvider>, NodeClassSetup) {
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
    (cloud, setup)
}
