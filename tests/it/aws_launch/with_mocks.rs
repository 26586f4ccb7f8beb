//! What moto cannot do: capacity errors, partial fleets, pagination, the
//! exact CreateFleet request, call counts, drift of a described instance.

use std::collections::BTreeSet;

use nodewright::cloudprovider::PlacementScope;

use super::*;

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
        sqs: mock_client!(aws_sdk_sqs, []),
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

/// A create retried before the claim's status was written (its write
/// conflicted, say) while EC2 does not list the fresh instance yet — the
/// mocked DescribeInstances finds nothing — returns the instance it
/// launched instead of launching a second one.
#[tokio::test]
async fn a_retried_create_returns_its_launch_while_ec2_does_not_list_it_yet() {
    let mock = mock_ec2(|_| {
        CreateFleetOutput::builder()
            .instances(fleet_instance("m5.large", "us-east-1a"))
            .build()
    });
    let (cloud, _) = mocked_provider(&mock, "retry-cluster");
    let class = class("retry-class", &mock_net(), "");
    let retried = claim("retry-1", "retry-class", &["m5.large"], "on-demand");
    let first = cloud.create(&retried, &class).await.unwrap();
    let again = cloud.create(&retried, &class).await.unwrap();
    assert_eq!(provider_id(&again), provider_id(&first));
    assert_eq!(mock.fleets.lock().unwrap().len(), 1, "one CreateFleet");
    // Another claim (of the same UID here) launches its own instance.
    let other = claim("retry-2", "retry-class", &["m5.large"], "on-demand");
    cloud.create(&other, &class).await.unwrap();
    assert_eq!(mock.fleets.lock().unwrap().len(), 2);
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
        sqs: mock_client!(aws_sdk_sqs, []),
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
        sqs: mock_client!(aws_sdk_sqs, []),
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
        sqs: mock_client!(aws_sdk_sqs, []),
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
        sqs: mock_client!(aws_sdk_sqs, []),
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
    broad.spec.requirements[0] = nodewright::yaml::from_str(
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

/// `class` launching into spread placement group `pg-spread` (its status
/// resolved).
fn spread_class(name: &str) -> NodeClassContext {
    let base = class(
        name,
        &mock_net(),
        "  placementGroupSelector: {name: spread}\n",
    );
    let mut grouped = EC2NodeClass::clone(&base.class);
    grouped.status.as_mut().unwrap().placement_group = Some(
        nodewright::yaml::from_str(
            "{id: pg-spread, name: spread, strategy: spread, spreadLevel: rack}",
        )
        .unwrap(),
    );
    NodeClassContext::new(grouped)
}

/// A spread group full in a zone (seven instances) refuses every type
/// there for that group only (Karpenter's spread limit handling): the next
/// launch into the group skips the zone, a launch outside it does not.
#[tokio::test]
async fn a_full_spread_group_marks_every_type_in_the_zone_for_that_group_only() {
    let mock = mock_ec2(|input| {
        if input
            .launch_template_configs()
            .iter()
            .flat_map(|c| c.overrides())
            .all(|o| o.availability_zone() != Some("us-east-1a"))
        {
            return CreateFleetOutput::builder()
                .instances(fleet_instance("m5.large", "us-east-1b"))
                .build();
        }
        let mut error = fleet_error("InsufficientInstanceCapacity", "m5.large", "us-east-1a");
        error.error_message = Some("You've reached the limit of instances in this spread placement group. A spread placement group can have up to seven instances per Availability Zone.".to_string());
        CreateFleetOutput::builder().errors(error).build()
    });
    let (cloud, unavailable) = mocked_provider(&mock, "spread-cluster");
    let grouped = spread_class("spread-class");
    let types = ["m5.large", "m5.xlarge"];
    let err = cloud
        .create(
            &claim("spread-1", "spread-class", &types, "on-demand"),
            &grouped,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, CloudProviderError::InsufficientCapacity { .. }),
        "{err}"
    );
    let scope = Some(PlacementScope::group("pg-spread"));
    assert_eq!(
        unavailable.scoped_entries(),
        [
            (
                offering("m5.large", "us-east-1a", "on-demand"),
                scope.clone()
            ),
            (offering("m5.xlarge", "us-east-1a", "on-demand"), scope)
        ]
    );
    // Into the group again: us-east-1b only.
    cloud
        .create(
            &claim("spread-2", "spread-class", &types, "on-demand"),
            &grouped,
        )
        .await
        .unwrap();
    let zones = |i: usize| -> BTreeSet<String> {
        overrides(&mock.fleets.lock().unwrap()[i])
            .into_iter()
            .map(|(_, zone, _)| zone)
            .collect()
    };
    assert_eq!(zones(1), BTreeSet::from(["us-east-1b".to_string()]));
    // Outside the group the zone is still offered.
    let ungrouped = class("plain-class", &mock_net(), "");
    let _ = cloud
        .create(
            &claim("plain", "plain-class", &types, "on-demand"),
            &ungrouped,
        )
        .await;
    assert!(zones(2).contains("us-east-1a"), "{:?}", zones(2));
}
