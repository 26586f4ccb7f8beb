//! Launching into a placement group (moto has none, so SDK mocks): the
//! launch template's placement, the labels Karpenter sets, the partition
//! read back before registration, and placement group drift (Karpenter's
//! launch template, cloud provider, registration hook and drift cases).

use aws_sdk_ec2::operation::create_launch_template::CreateLaunchTemplateInput;
use nodewright::cloudprovider::Registration;

use super::*;

const GROUP: &str = "pg-0123456789abcdef0";

/// EC2 that launches every fleet in us-east-1a, records each launch
/// template created, and describes the launched instance in `partition`.
struct GroupEc2 {
    rules: Vec<Rule>,
    templates: Arc<Mutex<Vec<CreateLaunchTemplateInput>>>,
}

fn group_ec2(partition: Option<i32>) -> GroupEc2 {
    let templates = Arc::new(Mutex::new(Vec::new()));
    let seen = templates.clone();
    let template =
        mock!(aws_sdk_ec2::Client::create_launch_template).then_compute_output(move |input| {
            seen.lock().unwrap().push(input.clone());
            CreateLaunchTemplateOutput::builder()
                .launch_template(LaunchTemplate::builder().launch_template_id("lt-1").build())
                .build()
        });
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet).then_compute_output(|input| {
        let first = input.launch_template_configs()[0].overrides()[0].clone();
        let instance_type = first.instance_type().unwrap().as_str().to_string();
        let first = FleetLaunchTemplateOverrides::builder()
            .instance_type(Ec2Type::from(instance_type.as_str()))
            .availability_zone(first.availability_zone().unwrap_or("us-east-1a"))
            .build();
        CreateFleetOutput::builder()
            .instances(
                CreateFleetInstance::builder()
                    .instance_ids("i-00000000000000001")
                    .instance_type(Ec2Type::from(instance_type.as_str()))
                    .launch_template_and_overrides(
                        LaunchTemplateAndOverridesResponse::builder()
                            .overrides(first)
                            .build(),
                    )
                    .build(),
            )
            .build()
    });
    // Nothing is listed for a claim before its launch; the launched
    // instance is described by id.
    let by_id = mock!(aws_sdk_ec2::Client::describe_instances)
        .match_requests(|r| !r.instance_ids().is_empty())
        .then_output(move || {
            let placement = Placement::builder()
                .availability_zone("us-east-1a")
                .group_id(GROUP)
                .set_partition_number(partition)
                .build();
            DescribeInstancesOutput::builder()
                .reservations(
                    Reservation::builder()
                        .instances(
                            Ec2Instance::builder()
                                .instance_id("i-00000000000000001")
                                .instance_type(Ec2Type::M5Large)
                                .subnet_id("subnet-a")
                                .security_groups(
                                    GroupIdentifier::builder().group_id("sg-1").build(),
                                )
                                .placement(placement)
                                .state(
                                    InstanceState::builder()
                                        .name(InstanceStateName::Running)
                                        .build(),
                                )
                                .build(),
                        )
                        .build(),
                )
                .build()
        });
    let listed = mock!(aws_sdk_ec2::Client::describe_instances)
        .then_output(|| DescribeInstancesOutput::builder().build());
    GroupEc2 {
        rules: vec![template, fleet, by_id, listed],
        templates,
    }
}

fn group_provider(ec2: &GroupEc2) -> AwsCloudProvider {
    let r = &ec2.rules;
    let clients = AwsClients {
        ec2: mock_client!(
            aws_sdk_ec2,
            RuleMode::MatchAny,
            [&r[0], &r[1], &r[2], &r[3]]
        ),
        ssm: mock_client!(aws_sdk_ssm, []),
        iam: mock_client!(aws_sdk_iam, []),
        pricing: mock_client!(aws_sdk_pricing, []),
        sqs: mock_client!(aws_sdk_sqs, []),
    };
    provider(clients, "placement").0
}

/// A class whose status holds `group` (YAML of `status.placementGroup`).
fn grouped_class(group: &str) -> NodeClassContext {
    let base = class(
        "grouped",
        &mock_net_for_groups(),
        "  placementGroupSelector: {name: tight}\n",
    );
    let mut class = EC2NodeClass::clone(&base.class);
    class.status.as_mut().unwrap().placement_group =
        Some(nodewright::yaml::from_str(group).unwrap());
    NodeClassContext::new(class)
}

fn mock_net_for_groups() -> Network {
    Network {
        subnet_a: "subnet-a".to_string(),
        subnet_b: "subnet-b".to_string(),
        security_group: "sg-1".to_string(),
        image: "ami-amd64".to_string(),
    }
}

fn partition_group() -> String {
    format!("{{id: {GROUP}, name: tight, strategy: partition, partitionCount: 7}}")
}

fn with_partitions(mut claim: NodeClaim, partitions: &[&str]) -> NodeClaim {
    claim.spec.requirements.push(
        serde_json::from_value(serde_json::json!({
            "key": "karpenter.k8s.aws/placement-group-partition",
            "operator": "In",
            "values": partitions,
        }))
        .unwrap(),
    );
    claim
}

fn placement(input: &CreateLaunchTemplateInput) -> (Option<String>, Option<i32>) {
    let placement = input
        .launch_template_data()
        .and_then(|d| d.placement())
        .expect("the template places its instances");
    (
        placement.group_id().map(str::to_string),
        placement.partition_number(),
    )
}

#[tokio::test]
async fn a_partition_group_launch_targets_the_lowest_partition_the_claim_allows() {
    let ec2 = group_ec2(Some(2));
    let cloud = group_provider(&ec2);
    let claim = with_partitions(
        claim("pg-claim", "grouped", &["m5.large"], "on-demand"),
        &["5", "2", "3"],
    );
    let launched = cloud
        .create(&claim, &grouped_class(&partition_group()))
        .await
        .unwrap();
    let templates = ec2.templates.lock().unwrap().clone();
    assert_eq!(placement(&templates[0]), (Some(GROUP.to_string()), Some(2)));
    assert_eq!(
        label(&launched, "karpenter.k8s.aws/placement-group-id"),
        GROUP
    );
    assert_eq!(
        label(&launched, "karpenter.k8s.aws/placement-group-partition"),
        "2"
    );
}

#[tokio::test]
async fn an_untargeted_partition_launch_waits_for_the_partition_ec2_picked() {
    let ec2 = group_ec2(Some(4));
    let cloud = group_provider(&ec2);
    let mut launched = cloud
        .create(
            &claim("pg-free", "grouped", &["m5.large"], "on-demand"),
            &grouped_class(&partition_group()),
        )
        .await
        .unwrap();
    let templates = ec2.templates.lock().unwrap().clone();
    assert_eq!(placement(&templates[0]), (Some(GROUP.to_string()), None));
    assert_eq!(
        label(&launched, "karpenter.k8s.aws/placement-group-partition"),
        ""
    );
    assert_eq!(
        cloud.before_registration(&mut launched).await.unwrap(),
        Registration::Proceed
    );
    assert_eq!(
        label(&launched, "karpenter.k8s.aws/placement-group-partition"),
        "4"
    );

    // EC2 not saying yet holds the registration; a claim with no provider
    // ID yet too.
    let quiet = group_provider(&group_ec2(None));
    let mut unknown = launched.clone();
    unknown.metadata.labels.as_mut().unwrap().insert(
        "karpenter.k8s.aws/placement-group-partition".to_string(),
        String::new(),
    );
    assert!(matches!(
        quiet.before_registration(&mut unknown).await.unwrap(),
        Registration::Wait(_)
    ));
    unknown.status.as_mut().unwrap().provider_id = None;
    assert!(matches!(
        quiet.before_registration(&mut unknown).await.unwrap(),
        Registration::Wait(_)
    ));
}

#[tokio::test]
async fn cluster_and_spread_groups_label_only_the_id_and_register_at_once() {
    for strategy in ["cluster", "spread"] {
        let ec2 = group_ec2(None);
        let cloud = group_provider(&ec2);
        let group = format!("{{id: {GROUP}, name: tight, strategy: {strategy}}}");
        let mut launched = cloud
            .create(
                &with_partitions(
                    claim("pg-flat", "grouped", &["m5.large"], "on-demand"),
                    &["1"],
                ),
                &grouped_class(&group),
            )
            .await
            .unwrap();
        let templates = ec2.templates.lock().unwrap().clone();
        assert_eq!(
            placement(&templates[0]),
            (Some(GROUP.to_string()), None),
            "{strategy}: no partition number outside a partition group"
        );
        let labels = launched.metadata.labels.clone().unwrap();
        assert_eq!(labels["karpenter.k8s.aws/placement-group-id"], GROUP);
        assert!(!labels.contains_key("karpenter.k8s.aws/placement-group-partition"));
        assert_eq!(
            cloud.before_registration(&mut launched).await.unwrap(),
            Registration::Proceed
        );
    }
}

#[tokio::test]
async fn a_class_without_a_group_places_nothing_and_labels_nothing() {
    let ec2 = group_ec2(None);
    let cloud = group_provider(&ec2);
    let plain = class("plain", &mock_net_for_groups(), "");
    let launched = cloud
        .create(
            &claim("pg-none", "plain", &["m5.large"], "on-demand"),
            &plain,
        )
        .await
        .unwrap();
    let templates = ec2.templates.lock().unwrap().clone();
    assert!(
        templates[0]
            .launch_template_data()
            .unwrap()
            .placement()
            .is_none()
    );
    assert!(
        !launched
            .metadata
            .labels
            .unwrap()
            .contains_key("karpenter.k8s.aws/placement-group-id")
    );
}

#[tokio::test]
async fn a_selector_not_resolved_yet_launches_nothing() {
    let ec2 = group_ec2(None);
    let cloud = group_provider(&ec2);
    let unresolved = class(
        "grouped",
        &mock_net_for_groups(),
        "  placementGroupSelector: {name: tight}\n",
    );
    let error = cloud
        .create(
            &claim("pg-early", "grouped", &["m5.large"], "on-demand"),
            &unresolved,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&error, CloudProviderError::NodeClassNotReady { reason, .. } if reason.contains("status.placementGroup")),
        "{error}"
    );
    assert!(ec2.templates.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_node_in_another_group_than_the_class_resolves_to_has_drifted() {
    let ec2 = group_ec2(None);
    let cloud = group_provider(&ec2);
    let grouped = grouped_class(&format!("{{id: {GROUP}, name: tight, strategy: cluster}}"));
    let launched = cloud
        .create(
            &claim("pg-drift", "grouped", &["m5.large"], "on-demand"),
            &grouped,
        )
        .await
        .unwrap();
    let drift = |class: NodeClassContext| {
        let (cloud, claim) = (&cloud, launched.clone());
        async move { cloud.is_drifted(&claim, &class).await.unwrap() }
    };
    assert_eq!(drift(grouped.clone()).await, None);
    let other = grouped_class("{id: pg-0fedcba987654321f, name: other, strategy: cluster}");
    assert_eq!(drift(other).await, Some(DriftReason::PlacementGroupDrift));
    let mut gone = EC2NodeClass::clone(&grouped.class);
    gone.status.as_mut().unwrap().placement_group = None;
    assert_eq!(
        drift(NodeClassContext::new(gone)).await,
        Some(DriftReason::PlacementGroupDrift),
        "the group the selector named is gone"
    );
    // The selector is part of the class's static hash, as in Karpenter:
    // changing or removing it is static drift, found first.
    let mut removed = EC2NodeClass::clone(&grouped.class);
    removed.spec.placement_group_selector = None;
    removed.status.as_mut().unwrap().placement_group = None;
    assert_eq!(
        drift(NodeClassContext::new(removed)).await,
        Some(DriftReason::NodeClassDrift)
    );
}
