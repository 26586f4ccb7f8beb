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
    NodeClassContext::new(serde_yaml::from_str::<EC2NodeClass>(&yaml).unwrap())
}

fn claim(name: &str, class: &str, types: &[&str], capacity_type: &str) -> NodeClaim {
    serde_yaml::from_str(&format!(
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

#[tokio::test]
async fn the_launch_template_holds_the_class_settings_in_moto() {
    let clients = moto_clients().await;
    let net = network(&clients).await;
    let (cloud, _) = provider(clients.clone(), "lt-cluster");
    let class = class(
        "lt-class",
        &net,
        "  detailedMonitoring: true\n  associatePublicIPAddress: false\n  metadataOptions: {httpPutResponseHopLimit: 2}\n  blockDeviceMappings:\n  - {deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 100G, volumeType: gp3, encrypted: true, deleteOnTermination: true}}\n",
    );
    cloud
        .create(
            &claim("lt-claim", "lt-class", &["m5.large"], "on-demand"),
            &class,
        )
        .await
        .unwrap();

    let templates = cloud
        .launch_templates()
        .list_for_class("lt-class")
        .await
        .unwrap();
    assert_eq!(templates.len(), 1, "{templates:?}");
    assert!(templates[0].name.starts_with("karpenter.k8s.aws/"));
    let described = clients
        .ec2
        .describe_launch_templates()
        .launch_template_names(&templates[0].name)
        .send()
        .await
        .unwrap();
    let template_tags = tags(described.launch_templates()[0].tags());
    assert_eq!(template_tags["eks:eks-cluster-name"], "lt-cluster");
    assert_eq!(template_tags["kubernetes.io/cluster/lt-cluster"], "owned");
    assert_eq!(template_tags["karpenter.k8s.aws/ec2nodeclass"], "lt-class");
    assert_eq!(template_tags["karpenter.sh/nodepool"], "general");
    assert_eq!(template_tags["team"], "web");
    assert!(
        !template_tags.contains_key("karpenter.sh/nodeclaim"),
        "templates are shared by claims"
    );

    let versions = clients
        .ec2
        .describe_launch_template_versions()
        .launch_template_name(&templates[0].name)
        .send()
        .await
        .unwrap();
    let data = versions.launch_template_versions()[0]
        .launch_template_data()
        .unwrap();
    assert_eq!(data.image_id(), Some(net.image.as_str()));
    assert_eq!(
        data.iam_instance_profile().unwrap().name(),
        Some("nodes-profile")
    );
    assert_eq!(data.monitoring().unwrap().enabled(), Some(true));
    let metadata = data.metadata_options().unwrap();
    assert_eq!(metadata.http_tokens().map(|t| t.as_str()), Some("required"));
    assert_eq!(metadata.http_put_response_hop_limit(), Some(2));
    assert_eq!(
        metadata.http_endpoint().map(|e| e.as_str()),
        Some("enabled")
    );
    let devices = data.block_device_mappings();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].device_name(), Some("/dev/xvda"));
    let ebs = devices[0].ebs().unwrap();
    assert_eq!(ebs.volume_size(), Some(94), "100G rounds up to 94 GiB");
    assert_eq!(ebs.encrypted(), Some(true));
    let interfaces = data.network_interfaces();
    assert_eq!(
        interfaces.len(),
        1,
        "associatePublicIPAddress lives on the primary interface"
    );
    assert_eq!(interfaces[0].associate_public_ip_address(), Some(false));
    assert_eq!(
        interfaces[0].groups(),
        std::slice::from_ref(&net.security_group)
    );
    let user_data = base64::engine::general_purpose::STANDARD
        .decode(data.user_data().unwrap())
        .unwrap();
    let user_data = String::from_utf8(user_data).unwrap();
    assert!(user_data.starts_with("MIME-Version: 1.0\n"), "{user_data}");
    assert!(
        user_data.contains("# nodewright generated NodeConfig"),
        "{user_data}"
    );
    assert!(user_data.contains("name: lt-cluster"), "{user_data}");
    assert!(user_data.contains("cidr: 10.100.0.0/16"), "{user_data}");
    assert!(user_data.contains("maxPods: 29"), "{user_data}");
    assert!(user_data.contains("key: dedicated"), "{user_data}");
    assert!(
        user_data.contains("karpenter.sh/unregistered"),
        "{user_data}"
    );
    assert!(
        user_data.contains("karpenter.sh/capacity-type=on-demand"),
        "{user_data}"
    );

    // The same launch again uses the same template; deleting the class's
    // templates removes it.
    cloud
        .create(
            &claim("lt-claim-2", "lt-class", &["m5.large"], "on-demand"),
            &class,
        )
        .await
        .unwrap();
    assert_eq!(
        cloud
            .launch_templates()
            .list_for_class("lt-class")
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        cloud
            .launch_templates()
            .delete_for_class("lt-class")
            .await
            .unwrap(),
        1
    );
    assert!(
        cloud
            .launch_templates()
            .list_for_class("lt-class")
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn on_demand_and_spot_fleets_tag_what_they_launch_in_moto() {
    let clients = moto_clients().await;
    let net = network(&clients).await;
    let (cloud, _) = provider(clients.clone(), "fleet-cluster");
    let class = class("fleet-class", &net, "");

    let on_demand = cloud
        .create(
            &claim(
                "fleet-od",
                "fleet-class",
                &["m5.large", "m5.xlarge"],
                "on-demand",
            ),
            &class,
        )
        .await
        .unwrap();
    assert_eq!(
        label(&on_demand, "node.kubernetes.io/instance-type"),
        "m5.large"
    );
    assert_eq!(label(&on_demand, "karpenter.sh/capacity-type"), "on-demand");
    assert_eq!(
        label(&on_demand, "karpenter.k8s.aws/instance-tenancy"),
        "default"
    );
    let zone = label(&on_demand, "topology.kubernetes.io/zone").to_string();
    let zone_id = label(&on_demand, "topology.k8s.aws/zone-id");
    assert_eq!(
        zone_id,
        if zone == "us-east-1a" {
            "use1-az1"
        } else {
            "use1-az2"
        }
    );
    let status = on_demand.status.clone().unwrap();
    assert_eq!(status.image_id.as_deref(), Some(net.image.as_str()));
    assert_eq!(status.capacity.unwrap()["cpu"].0, "2");
    let annotations = on_demand.metadata.annotations.clone().unwrap();
    assert_eq!(annotations["karpenter.k8s.aws/ec2nodeclass-hash"], "1234");
    assert_eq!(
        annotations["karpenter.k8s.aws/ec2nodeclass-hash-version"],
        "v4"
    );
    assert_eq!(
        annotations["karpenter.k8s.aws/instance-profile-name"],
        "nodes-profile"
    );

    let instance = describe(&clients, &instance_id(&on_demand)).await;
    let instance_tags = tags(instance.tags());
    for (key, value) in [
        ("karpenter.sh/nodepool", "general"),
        ("karpenter.sh/nodeclaim", "fleet-od"),
        ("karpenter.k8s.aws/ec2nodeclass", "fleet-class"),
        ("eks:eks-cluster-name", "fleet-cluster"),
        ("kubernetes.io/cluster/fleet-cluster", "owned"),
        ("team", "web"),
    ] {
        assert_eq!(
            instance_tags.get(key).map(String::as_str),
            Some(value),
            "{key}"
        );
    }
    assert_eq!(instance.image_id(), Some(net.image.as_str()));
    assert_eq!(
        instance.placement().unwrap().availability_zone(),
        Some(zone.as_str())
    );

    let spot = cloud
        .create(
            &claim("fleet-spot", "fleet-class", &["m5.large"], "spot"),
            &class,
        )
        .await
        .unwrap();
    assert_eq!(label(&spot, "karpenter.sh/capacity-type"), "spot");
    let instance = describe(&clients, &instance_id(&spot)).await;
    assert_eq!(
        tags(instance.tags())["karpenter.sh/nodeclaim"],
        "fleet-spot"
    );
}

#[tokio::test]
async fn get_list_and_delete_find_and_terminate_instances_in_moto() {
    let clients = moto_clients().await;
    let net = network(&clients).await;
    let (cloud, _) = provider(clients.clone(), "gld-cluster");
    let class = class("gld-class", &net, "");
    let launched = cloud
        .create(
            &claim("gld-claim", "gld-class", &["m5.large"], "on-demand"),
            &class,
        )
        .await
        .unwrap();

    let got = cloud.get(&provider_id(&launched)).await.unwrap();
    assert_eq!(got.metadata.name.as_deref(), Some("gld-claim"));
    assert_eq!(label(&got, "node.kubernetes.io/instance-type"), "m5.large");
    assert_eq!(label(&got, "karpenter.sh/nodepool"), "general");
    assert_eq!(got.spec.node_class_ref.name, "gld-class");
    assert_eq!(
        got.status.unwrap().provider_id,
        Some(provider_id(&launched))
    );

    let listed = cloud.list().await.unwrap();
    let names: Vec<Option<&str>> = listed.iter().map(|c| c.metadata.name.as_deref()).collect();
    assert_eq!(names, [Some("gld-claim")], "only this cluster's instances");

    cloud.delete(&launched).await.unwrap();
    assert!(cloud.list().await.unwrap().is_empty());
    let again = cloud.delete(&launched).await.unwrap_err();
    assert!(again.is_not_found(), "{again}");
    assert!(
        cloud
            .get(&provider_id(&launched))
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn terminating_an_instance_that_never_existed_is_not_found_in_moto() {
    let clients = moto_clients().await;
    let (cloud, _) = provider(clients, "gone-cluster");
    let mut gone = claim("gone", "gone-class", &["m5.large"], "on-demand");
    gone.status = Some(nodewright::apis::NodeClaimStatus {
        provider_id: Some("aws:///us-east-1a/i-0123456789abcdef0".to_string()),
        ..Default::default()
    });
    let err = cloud.delete(&gone).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    let err = cloud
        .get("aws:///us-east-1a/i-0123456789abcdef0")
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[tokio::test]
async fn a_retried_create_launches_one_instance_in_moto() {
    let clients = moto_clients().await;
    let net = network(&clients).await;
    let (cloud, _) = provider(clients.clone(), "retry-cluster");
    let class = class("retry-class", &net, "");
    let request = claim("retry-claim", "retry-class", &["m5.large"], "on-demand");
    let first = cloud.create(&request, &class).await.unwrap();
    let second = cloud.create(&request, &class).await.unwrap();
    assert_eq!(provider_id(&first), provider_id(&second));
    assert_eq!(
        label(&second, "node.kubernetes.io/instance-type"),
        label(&first, "node.kubernetes.io/instance-type")
    );
    assert_eq!(cloud.list().await.unwrap().len(), 1);
}

// ---- SDK mocks -------------------------------------------------------------

/// What the mocked EC2 saw and answers.
struct MockEc2 {
    rules: Vec<Rule>,
    fleets: Arc<Mutex<Vec<aws_sdk_ec2::operation::create_fleet::CreateFleetInput>>>,
}

fn mock_net() -> Network {
    Network {
        subnet_a: "subnet-a".to_string(),
        subnet_b: "subnet-b".to_string(),
        security_group: "sg-1".to_string(),
        image: "ami-amd64".to_string(),
    }
}

fn fleet_instance(instance_type: &str, zone: &str) -> CreateFleetInstance {
    CreateFleetInstance::builder()
        .instance_ids("i-00000000000000001")
        .instance_type(Ec2Type::from(instance_type))
        .launch_template_and_overrides(
            LaunchTemplateAndOverridesResponse::builder()
                .overrides(
                    FleetLaunchTemplateOverrides::builder()
                        .instance_type(Ec2Type::from(instance_type))
                        .availability_zone(zone)
                        .build(),
                )
                .build(),
        )
        .build()
}

fn fleet_error(code: &str, instance_type: &str, zone: &str) -> CreateFleetError {
    CreateFleetError::builder()
        .error_code(code)
        .error_message(format!("{code} for {instance_type} in {zone}"))
        .launch_template_and_overrides(
            LaunchTemplateAndOverridesResponse::builder()
                .overrides(
                    FleetLaunchTemplateOverrides::builder()
                        .instance_type(Ec2Type::from(instance_type))
                        .availability_zone(zone)
                        .build(),
                )
                .build(),
        )
        .build()
}

/// EC2 that has no instance for any claim yet, creates any template, and
/// answers CreateFleet with `answer`, recording each request.
fn mock_ec2(
    answer: impl Fn(&CreateFleetInput) -> CreateFleetOutput + Send + Sync + 'static,
) -> MockEc2 {
    let fleets = Arc::new(Mutex::new(Vec::new()));
    let seen = fleets.clone();
    let describe = mock!(aws_sdk_ec2::Client::describe_instances)
        .sequence()
        .output(|| DescribeInstancesOutput::builder().build())
        .repeatedly()
        .build();
    let template = mock!(aws_sdk_ec2::Client::create_launch_template)
        .sequence()
        .output(|| {
            CreateLaunchTemplateOutput::builder()
                .launch_template(LaunchTemplate::builder().launch_template_id("lt-1").build())
                .build()
        })
        .repeatedly()
        .build();
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet).then_compute_output(move |input| {
        seen.lock().unwrap().push(input.clone());
        answer(input)
    });
    MockEc2 {
        rules: vec![describe, template, fleet],
        fleets,
    }
}

fn mocked_provider(mock: &MockEc2, cluster: &str) -> (AwsCloudProvider, Arc<UnavailableOfferings>) {
    let ec2 = mock_client!(
        aws_sdk_ec2,
        RuleMode::MatchAny,
        [&mock.rules[0], &mock.rules[1], &mock.rules[2]]
    );
    let clients = AwsClients {
        ec2,
        ssm: mock_client!(aws_sdk_ssm, []),
        iam: mock_client!(aws_sdk_iam, []),
        pricing: mock_client!(aws_sdk_pricing, []),
    };
    provider(clients, cluster)
}

fn overrides(
    input: &aws_sdk_ec2::operation::create_fleet::CreateFleetInput,
) -> Vec<(String, String, Option<f64>)> {
    input
        .launch_template_configs()
        .iter()
        .flat_map(|c| c.overrides())
        .map(|o| {
            (
                o.instance_type().unwrap().as_str().to_string(),
                o.availability_zone().unwrap().to_string(),
                o.priority(),
            )
        })
        .collect()
}

fn offering(instance_type: &str, zone: &str, capacity_type: &str) -> OfferingKey {
    OfferingKey {
        instance_type: instance_type.to_string(),
        zone: zone.to_string(),
        capacity_type: capacity_type.to_string(),
    }
}

#[tokio::test]
async fn insufficient_capacity_on_the_cheapest_offering_falls_back_and_is_remembered() {
    let mock = mock_ec2(|_| {
        CreateFleetOutput::builder()
            .errors(fleet_error(
                "InsufficientInstanceCapacity",
                "m5.large",
                "us-east-1a",
            ))
            .instances(fleet_instance("m5.xlarge", "us-east-1a"))
            .build()
    });
    let (cloud, unavailable) = mocked_provider(&mock, "ice-cluster");
    let class = class("ice-class", &mock_net(), "");
    let launched = cloud
        .create(
            &claim(
                "ice-claim",
                "ice-class",
                &["m5.large", "m5.xlarge"],
                "on-demand",
            ),
            &class,
        )
        .await
        .unwrap();
    assert_eq!(
        label(&launched, "node.kubernetes.io/instance-type"),
        "m5.xlarge"
    );
    assert_eq!(
        provider_id(&launched),
        "aws:///us-east-1a/i-00000000000000001"
    );

    let request = mock.fleets.lock().unwrap()[0].clone();
    let first = &overrides(&request)[0];
    assert_eq!(first.0, "m5.large", "the cheapest type is tried first");
    assert_eq!(
        unavailable.entries(),
        [offering("m5.large", "us-east-1a", "on-demand")]
    );

    // The next launch no longer offers the refused offering.
    cloud
        .create(
            &claim(
                "ice-claim-2",
                "ice-class",
                &["m5.large", "m5.xlarge"],
                "on-demand",
            ),
            &class,
        )
        .await
        .unwrap();
    let retried = mock.fleets.lock().unwrap()[1].clone();
    assert!(
        !overrides(&retried)
            .iter()
            .any(|(t, z, _)| t == "m5.large" && z == "us-east-1a"),
        "{:?}",
        overrides(&retried)
    );
}

#[tokio::test]
async fn a_partial_fleet_launches_and_marks_only_capacity_errors() {
    let mock = mock_ec2(|_| {
        CreateFleetOutput::builder()
            .errors(fleet_error(
                "UnfulfillableCapacity",
                "m5.large",
                "us-east-1a",
            ))
            .errors(fleet_error(
                "InvalidParameterValue",
                "m5.large",
                "us-east-1b",
            ))
            .instances(fleet_instance("m5.xlarge", "us-east-1b"))
            .build()
    });
    let (cloud, unavailable) = mocked_provider(&mock, "partial-cluster");
    let class = class("partial-class", &mock_net(), "");
    let launched = cloud
        .create(
            &claim(
                "partial",
                "partial-class",
                &["m5.large", "m5.xlarge"],
                "spot",
            ),
            &class,
        )
        .await
        .unwrap();
    assert_eq!(
        label(&launched, "node.kubernetes.io/instance-type"),
        "m5.xlarge"
    );
    assert_eq!(
        label(&launched, "topology.kubernetes.io/zone"),
        "us-east-1b"
    );
    assert_eq!(label(&launched, "karpenter.sh/capacity-type"), "spot");
    assert_eq!(
        unavailable.entries(),
        [offering("m5.large", "us-east-1a", "spot")]
    );
}

#[tokio::test]
async fn a_fleet_that_launches_nothing_reports_every_refused_offering() {
    let mock = mock_ec2(|_| {
        CreateFleetOutput::builder()
            .errors(fleet_error(
                "InsufficientInstanceCapacity",
                "m5.large",
                "us-east-1a",
            ))
            .errors(fleet_error(
                "InsufficientInstanceCapacity",
                "m5.large",
                "us-east-1b",
            ))
            .build()
    });
    let (cloud, unavailable) = mocked_provider(&mock, "none-cluster");
    let class = class("none-class", &mock_net(), "");
    let err = cloud
        .create(
            &claim("none", "none-class", &["m5.large"], "on-demand"),
            &class,
        )
        .await
        .unwrap_err();
    match &err {
        CloudProviderError::InsufficientCapacity { offerings, .. } => assert_eq!(
            offerings,
            &[
                offering("m5.large", "us-east-1a", "on-demand"),
                offering("m5.large", "us-east-1b", "on-demand")
            ]
        ),
        other => panic!("{other}"),
    }
    assert_eq!(unavailable.entries().len(), 2);
    assert!(
        std::error::Error::source(&err)
            .unwrap()
            .to_string()
            .contains("InsufficientInstanceCapacity")
    );
}

#[tokio::test]
async fn fleet_priorities_follow_the_scorers_launch_order() {
    let mock = mock_ec2(|_| {
        CreateFleetOutput::builder()
            .instances(fleet_instance("m7i-flex.large", "us-east-1a"))
            .build()
    });
    let (cloud, _) = mocked_provider(&mock, "prio-cluster");
    let class = class("prio-class", &mock_net(), "");
    cloud
        .create(
            &claim(
                "prio",
                "prio-class",
                &["m5.large", "m7i-flex.large", "c5.xlarge"],
                "on-demand",
            ),
            &class,
        )
        .await
        .unwrap();
    let request = mock.fleets.lock().unwrap()[0].clone();
    assert_eq!(
        request
            .on_demand_options()
            .unwrap()
            .allocation_strategy()
            .map(|s| s.as_str()),
        Some("prioritized")
    );
    assert_eq!(request.r#type().map(|t| t.as_str()), Some("instant"));
    let token = request.client_token().unwrap();
    assert!(
        token.starts_with("nodewright-") && token.len() <= 64,
        "{token}"
    );
    let got = overrides(&request);
    assert_eq!(
        got[0].0, "m7i-flex.large",
        "flex-first puts -flex types first: {got:?}"
    );
    let mut last = -1.0;
    let mut last_type = String::new();
    for (instance_type, _, priority) in &got {
        let priority = priority.expect("every override has a priority");
        if *instance_type == last_type {
            assert_eq!(priority, last, "one priority per type");
        } else {
            assert!(priority > last, "{got:?}");
        }
        last = priority;
        last_type = instance_type.clone();
    }
    let tag_types: Vec<&str> = request
        .tag_specifications()
        .iter()
        .map(|t| t.resource_type().unwrap().as_str())
        .collect();
    assert_eq!(tag_types, ["instance", "volume", "fleet"]);
}

#[tokio::test]
async fn one_create_makes_three_calls_cold_and_two_warm() {
    let mock = mock_ec2(|_| {
        CreateFleetOutput::builder()
            .instances(fleet_instance("m5.large", "us-east-1a"))
            .build()
    });
    let (cloud, _) = mocked_provider(&mock, "count-cluster");
    let class = class("count-class", &mock_net(), "");
    let calls = |mock: &MockEc2| -> Vec<usize> { mock.rules.iter().map(Rule::num_calls).collect() };
    cloud
        .create(
            &claim("count-1", "count-class", &["m5.large"], "on-demand"),
            &class,
        )
        .await
        .unwrap();
    // DescribeInstances (already launched?), CreateLaunchTemplate, CreateFleet.
    assert_eq!(calls(&mock), [1, 1, 1]);
    cloud
        .create(
            &claim("count-2", "count-class", &["m5.large"], "on-demand"),
            &class,
        )
        .await
        .unwrap();
    assert_eq!(calls(&mock), [2, 1, 2], "the template is cached");
}

#[tokio::test]
async fn list_reads_every_page_of_describe_instances() {
    let instance = |id: &str| {
        Ec2Instance::builder()
            .instance_id(id)
            .instance_type(Ec2Type::M5Large)
            .placement(Placement::builder().availability_zone("us-east-1a").build())
            .state(
                InstanceState::builder()
                    .name(InstanceStateName::Running)
                    .build(),
            )
            .tags(
                aws_sdk_ec2::types::Tag::builder()
                    .key("karpenter.sh/nodeclaim")
                    .value(id)
                    .build(),
            )
            .build()
    };
    let first = mock!(aws_sdk_ec2::Client::describe_instances)
        .match_requests(|r| r.next_token().is_none())
        .then_output(move || {
            DescribeInstancesOutput::builder()
                .reservations(Reservation::builder().instances(instance("i-1")).build())
                .next_token("page-2")
                .build()
        });
    let second = mock!(aws_sdk_ec2::Client::describe_instances)
        .match_requests(|r| r.next_token() == Some("page-2"))
        .then_output(move || {
            DescribeInstancesOutput::builder()
                .reservations(Reservation::builder().instances(instance("i-2")).build())
                .build()
        });
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, [&first, &second]);
    let clients = AwsClients {
        ec2,
        ssm: mock_client!(aws_sdk_ssm, []),
        iam: mock_client!(aws_sdk_iam, []),
        pricing: mock_client!(aws_sdk_pricing, []),
    };
    let (cloud, _) = provider(clients, "pages-cluster");
    let listed = cloud.list().await.unwrap();
    let names: Vec<&str> = listed
        .iter()
        .filter_map(|c| c.metadata.name.as_deref())
        .collect();
    assert_eq!(names, ["i-1", "i-2"]);
    assert_eq!((first.num_calls(), second.num_calls()), (1, 1));
}

/// A running instance in `us-east-1a`'s subnet with the class's group, in
/// reservation `cr-gone` with `preference`.
fn reserved_instance(preference: CapacityReservationPreference) -> Ec2Instance {
    Ec2Instance::builder()
        .instance_id("i-0000000000000000a")
        .instance_type(Ec2Type::M5Large)
        .image_id("ami-amd64")
        .subnet_id("subnet-a")
        .placement(Placement::builder().availability_zone("us-east-1a").build())
        .state(
            InstanceState::builder()
                .name(InstanceStateName::Running)
                .build(),
        )
        .security_groups(GroupIdentifier::builder().group_id("sg-1").build())
        .capacity_reservation_id("cr-gone")
        .capacity_reservation_specification(
            CapacityReservationSpecificationResponse::builder()
                .capacity_reservation_preference(preference)
                .build(),
        )
        .build()
}

async fn drift_of(instance: Ec2Instance) -> Option<DriftReason> {
    let describe = mock!(aws_sdk_ec2::Client::describe_instances).then_output(move || {
        DescribeInstancesOutput::builder()
            .reservations(Reservation::builder().instances(instance.clone()).build())
            .build()
    });
    let clients = AwsClients {
        ec2: mock_client!(aws_sdk_ec2, [&describe]),
        ssm: mock_client!(aws_sdk_ssm, []),
        iam: mock_client!(aws_sdk_iam, []),
        pricing: mock_client!(aws_sdk_pricing, []),
    };
    let (cloud, _) = provider(clients, "drift-cluster");
    let class = class("drift-class", &mock_net(), "");
    let mut launched = claim("drift", "drift-class", &["m5.large"], "on-demand");
    launched.metadata.labels.as_mut().unwrap().insert(
        "node.kubernetes.io/instance-type".to_string(),
        "m5.large".to_string(),
    );
    launched.status = Some(nodewright::apis::NodeClaimStatus {
        provider_id: Some("aws:///us-east-1a/i-0000000000000000a".to_string()),
        image_id: Some("ami-amd64".to_string()),
        ..Default::default()
    });
    cloud.is_drifted(&launched, &class).await.unwrap()
}

#[tokio::test]
async fn an_instance_in_an_open_reservation_is_not_drifted_but_a_targeted_one_is() {
    assert_eq!(
        drift_of(reserved_instance(CapacityReservationPreference::Open)).await,
        None
    );
    assert_eq!(
        drift_of(reserved_instance(
            CapacityReservationPreference::CapacityReservationsOnly
        ))
        .await,
        Some(DriftReason::CapacityReservationDrift)
    );
}

#[tokio::test]
async fn an_ami_that_is_no_longer_the_class_image_is_drift() {
    let instance = reserved_instance(CapacityReservationPreference::Open);
    let describe = mock!(aws_sdk_ec2::Client::describe_instances).then_output(move || {
        DescribeInstancesOutput::builder()
            .reservations(Reservation::builder().instances(instance.clone()).build())
            .build()
    });
    let clients = AwsClients {
        ec2: mock_client!(aws_sdk_ec2, [&describe]),
        ssm: mock_client!(aws_sdk_ssm, []),
        iam: mock_client!(aws_sdk_iam, []),
        pricing: mock_client!(aws_sdk_pricing, []),
    };
    let (cloud, _) = provider(clients, "ami-drift-cluster");
    let class = class("ami-drift-class", &mock_net(), "");
    let mut launched = claim("ami-drift", "ami-drift-class", &["m5.large"], "on-demand");
    launched.metadata.labels.as_mut().unwrap().insert(
        "node.kubernetes.io/instance-type".to_string(),
        "m5.large".to_string(),
    );
    launched.status = Some(nodewright::apis::NodeClaimStatus {
        provider_id: Some("aws:///us-east-1a/i-0000000000000000a".to_string()),
        image_id: Some("ami-old".to_string()),
        ..Default::default()
    });
    assert_eq!(
        cloud.is_drifted(&launched, &class).await.unwrap(),
        Some(DriftReason::AmiDrift)
    );
    assert_eq!(
        describe.num_calls(),
        0,
        "AMI drift needs no instance lookup"
    );
}

#[tokio::test]
async fn a_template_created_by_someone_else_meanwhile_is_described_and_used() {
    use aws_sdk_ec2::error::ErrorMetadata;
    use aws_sdk_ec2::operation::create_launch_template::CreateLaunchTemplateError;
    use aws_sdk_ec2::operation::describe_launch_templates::DescribeLaunchTemplatesOutput;
    let create = mock!(aws_sdk_ec2::Client::create_launch_template).then_error(|| {
        CreateLaunchTemplateError::generic(
            ErrorMetadata::builder()
                .code("InvalidLaunchTemplateName.AlreadyExistsException")
                .build(),
        )
    });
    let describe =
        mock!(aws_sdk_ec2::Client::describe_launch_templates).then_compute_output(|input| {
            let name = input.launch_template_names()[0].clone();
            DescribeLaunchTemplatesOutput::builder()
                .launch_templates(
                    LaunchTemplate::builder()
                        .launch_template_name(name)
                        .launch_template_id("lt-theirs")
                        .build(),
                )
                .build()
        });
    let clients = AwsClients {
        ec2: mock_client!(aws_sdk_ec2, RuleMode::MatchAny, [&create, &describe]),
        ssm: mock_client!(aws_sdk_ssm, []),
        iam: mock_client!(aws_sdk_iam, []),
        pricing: mock_client!(aws_sdk_pricing, []),
    };
    let (cloud, _) = provider(clients, "race-cluster");
    let class = class("race-class", &mock_net(), "");
    let spec = nodewright::aws::launch_template::build_spec(
        &class.class,
        &claim("race", "race-class", &["m5.large"], "on-demand"),
        &settings("race-cluster"),
        &nodewright::aws::launch_template::TemplateChoice {
            capacity_type: "on-demand",
            image_id: "ami-amd64",
            max_pods: Some(29),
            reservation: None,
            tags: &BTreeMap::new(),
        },
    )
    .unwrap();
    let ensured = cloud.launch_templates().ensure(&spec).await.unwrap();
    assert_eq!(ensured.id.as_deref(), Some("lt-theirs"));
    assert_eq!(ensured.name, spec.name());
    cloud.launch_templates().ensure(&spec).await.unwrap();
    assert_eq!(
        (create.num_calls(), describe.num_calls()),
        (1, 1),
        "then cached"
    );
}

#[tokio::test]
async fn a_template_deleted_behind_the_cache_is_created_again_once() {
    use aws_sdk_ec2::error::ErrorMetadata;
    use aws_sdk_ec2::operation::create_fleet::CreateFleetError as CreateFleetCallError;
    let mut mock = mock_ec2(|_| unreachable!("replaced below"));
    mock.rules[2] = mock!(aws_sdk_ec2::Client::create_fleet)
        .sequence()
        .error(|| {
            CreateFleetCallError::generic(
                ErrorMetadata::builder()
                    .code("InvalidLaunchTemplateName.NotFoundException")
                    .build(),
            )
        })
        .output(|| {
            CreateFleetOutput::builder()
                .instances(fleet_instance("m5.large", "us-east-1a"))
                .build()
        })
        .build();
    let (cloud, _) = mocked_provider(&mock, "vanished-cluster");
    let class = class("vanished-class", &mock_net(), "");
    cloud
        .create(
            &claim("vanished", "vanished-class", &["m5.large"], "on-demand"),
            &class,
        )
        .await
        .unwrap();
    let calls: Vec<usize> = mock.rules.iter().map(Rule::num_calls).collect();
    assert_eq!(
        calls,
        [1, 2, 2],
        "template created again, fleet retried once"
    );
}

#[tokio::test]
async fn a_broad_claim_makes_one_template_per_pod_count_and_one_call_each_when_cold() {
    let mock = mock_ec2(|input| {
        let (instance_type, zone, _) = overrides(input).remove(0);
        CreateFleetOutput::builder()
            .instances(fleet_instance(&instance_type, &zone))
            .build()
    });
    let (cloud, _) = mocked_provider(&mock, "broad-cluster");
    let class = class("broad-class", &mock_net(), "");
    let mut broad: NodeClaim = claim("broad", "broad-class", &["m5.large"], "on-demand");
    broad.spec.requirements[0] = serde_yaml::from_str(
        "{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}",
    )
    .unwrap();
    cloud.create(&broad, &class).await.unwrap();
    let request = mock.fleets.lock().unwrap()[0].clone();
    let templates = request.launch_template_configs().len();
    let overrides = overrides(&request).len();
    let calls: Vec<usize> = mock.rules.iter().map(Rule::num_calls).collect();
    eprintln!(
        "broad claim: {overrides} overrides, {templates} launch templates, calls (DescribeInstances, CreateLaunchTemplate, CreateFleet) = {calls:?}"
    );
    assert_eq!(overrides, 60);
    assert!(
        templates > 1,
        "types with different pod counts need their own user data"
    );
    assert_eq!(calls, [1, templates, 1]);
}
