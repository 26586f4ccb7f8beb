//! The AWS launch path: launch templates, CreateFleet, describe and
//! terminate against moto over the wire, and what moto cannot do
//! (capacity errors, partial fleets, pagination, the exact request) with
//! SDK mocks. Each moto test uses its own cluster name, so the shared moto
//! server's instances of other tests stay out of its lists.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_sdk_ec2::operation::create_fleet::{CreateFleetInput, CreateFleetOutput};
use aws_sdk_ec2::operation::create_launch_template::CreateLaunchTemplateOutput;
use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
use aws_sdk_ec2::types::{
    CapacityReservationPreference, CapacityReservationSpecificationResponse, CreateFleetError,
    CreateFleetInstance, Filter, FleetLaunchTemplateOverrides, GroupIdentifier,
    Instance as Ec2Instance, InstanceState, InstanceStateName, InstanceType as Ec2Type,
    LaunchTemplate, LaunchTemplateAndOverridesResponse, Placement, Reservation,
};
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use base64::Engine;
use nodewright::apis::{EC2NodeClass, NodeClaim};
use nodewright::aws::catalog::Catalog;
use nodewright::aws::clients::AwsClients;
use nodewright::aws::cloudprovider::AwsCloudProvider;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::aws::launch_template::{IpFamily, LaunchSettings};
use nodewright::cloudprovider::{
    CloudProvider, CloudProviderError, DriftReason, NodeClassContext, OfferingKey,
    UnavailableOfferings,
};
use nodewright::extensions::Extensions;
use nodewright_host::HostConfig;
use tokio::sync::OnceCell;

use crate::moto::moto_clients;

/// The VPC, subnets, security group and image every moto test launches with.
#[derive(Debug, Clone)]
struct Network {
    subnet_a: String,
    subnet_b: String,
    security_group: String,
    image: String,
}

async fn network(clients: &AwsClients) -> Network {
    static NETWORK: OnceCell<Network> = OnceCell::const_new();
    NETWORK
        .get_or_init(|| async {
            let ec2 = &clients.ec2;
            let vpc = ec2
                .create_vpc()
                .cidr_block("10.42.0.0/16")
                .send()
                .await
                .unwrap()
                .vpc
                .unwrap()
                .vpc_id
                .unwrap();
            let subnet = |cidr: &'static str, zone: &'static str| {
                let vpc = vpc.clone();
                async move {
                    ec2.create_subnet()
                        .vpc_id(vpc)
                        .cidr_block(cidr)
                        .availability_zone(zone)
                        .send()
                        .await
                        .unwrap()
                        .subnet
                        .unwrap()
                        .subnet_id
                        .unwrap()
                }
            };
            let subnet_a = subnet("10.42.1.0/24", "us-east-1a").await;
            let subnet_b = subnet("10.42.2.0/24", "us-east-1b").await;
            let security_group = ec2
                .create_security_group()
                .group_name("aws-launch-nodes")
                .description("nodes")
                .vpc_id(&vpc)
                .send()
                .await
                .unwrap()
                .group_id
                .unwrap();
            let image = ec2
                .describe_images()
                .owners("amazon")
                .filters(
                    Filter::builder()
                        .name("architecture")
                        .values("x86_64")
                        .build(),
                )
                .send()
                .await
                .unwrap()
                .images
                .unwrap_or_default()
                .into_iter()
                .find_map(|i| i.image_id)
                .expect("moto serves x86_64 images");
            Network {
                subnet_a,
                subnet_b,
                security_group,
                image,
            }
        })
        .await
        .clone()
}

fn class(name: &str, net: &Network, extra_spec: &str) -> NodeClassContext {
    let yaml = format!(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: {name}
  annotations:
    karpenter.k8s.aws/ec2nodeclass-hash: "1234"
    karpenter.k8s.aws/ec2nodeclass-hash-version: v4
spec:
  role: NodeRole
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{team: web}}}}]
  securityGroupSelectorTerms: [{{tags: {{team: web}}}}]
  tags: {{team: web}}
{extra_spec}status:
  subnets:
  - {{id: {a}, zone: us-east-1a, zoneID: use1-az1}}
  - {{id: {b}, zone: us-east-1b, zoneID: use1-az2}}
  securityGroups: [{{id: {sg}}}]
  instanceProfile: nodes-profile
  amis:
  - id: {image}
    requirements: [{{key: kubernetes.io/arch, operator: In, values: [amd64]}}]
"#,
        a = net.subnet_a,
        b = net.subnet_b,
        sg = net.security_group,
        image = net.image,
    );
    NodeClassContext::new(nodewright::yaml::from_str::<EC2NodeClass>(&yaml).unwrap())
}

fn claim(name: &str, class: &str, types: &[&str], capacity_type: &str) -> NodeClaim {
    nodewright::yaml::from_str(&format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: {name}
  uid: 6c1b5d2e-0000-4000-8000-{uid:0>12}
  labels: {{karpenter.sh/nodepool: general, karpenter.k8s.aws/ec2nodeclass: {class}, team: web}}
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {class}}}
  resources: {{requests: {{cpu: "1", memory: 1Gi}}}}
  taints: [{{key: dedicated, value: web, effect: NoSchedule}}]
  requirements:
  - {{key: node.kubernetes.io/instance-type, operator: In, values: [{types}]}}
  - {{key: karpenter.sh/capacity-type, operator: In, values: [{capacity_type}]}}
  - {{key: karpenter.sh/nodepool, operator: In, values: [general]}}
"#,
        uid = name.len(),
        types = types.join(", "),
    ))
    .unwrap()
}

fn settings(cluster: &str) -> LaunchSettings {
    LaunchSettings {
        cluster_name: cluster.to_string(),
        cluster_endpoint: "https://cluster.example".to_string(),
        ca_bundle: Some("Y2EtYnVuZGxlCg==".to_string()),
        service_cidr: Some("10.100.0.0/16".to_string()),
        cluster_dns_ip: Some("10.100.0.10".to_string()),
        ip_family: IpFamily::Ipv4,
    }
}

fn provider(clients: AwsClients, cluster: &str) -> (AwsCloudProvider, Arc<UnavailableOfferings>) {
    let unavailable = Arc::new(UnavailableOfferings::default());
    let types = Arc::new(InstanceTypeProvider::new(
        Arc::new(Catalog::embedded("us-east-1").unwrap()),
        Arc::new(Extensions::new(HostConfig::default()).unwrap()),
        unavailable.clone(),
    ));
    let cloud = AwsCloudProvider::new(clients, types, unavailable.clone(), settings(cluster));
    (cloud, unavailable)
}

fn label<'a>(claim: &'a NodeClaim, key: &str) -> &'a str {
    claim.metadata.labels.as_ref().unwrap()[key].as_str()
}

fn provider_id(claim: &NodeClaim) -> String {
    claim.status.as_ref().unwrap().provider_id.clone().unwrap()
}

fn instance_id(claim: &NodeClaim) -> String {
    provider_id(claim).rsplit('/').next().unwrap().to_string()
}

async fn describe(clients: &AwsClients, id: &str) -> Ec2Instance {
    clients
        .ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .unwrap()
        .reservations()[0]
        .instances()[0]
        .clone()
}

fn tags(tags: &[aws_sdk_ec2::types::Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string()))
        .collect()
}

mod over_moto;
mod placement_groups;
mod through_controllers;
mod with_mocks;
