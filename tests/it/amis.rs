//! AMI discovery and selection: the class's terms against moto's EC2 and SSM
//! over the wire, then the AMI selector and `status.amis`. What moto cannot
//! serve (the reserved `/aws/service/...` alias parameters, `pending`
//! images, distinct creation dates, pagination) is covered with SDK mocks.

use aws_sdk_ec2::operation::describe_images::DescribeImagesOutput;
use aws_sdk_ec2::types::{ArchitectureValues, Image, ImageState, Tag};
use aws_sdk_ssm::operation::get_parameter::{GetParameterError, GetParameterOutput};
use aws_sdk_ssm::types::Parameter;
use aws_sdk_ssm::types::error::ParameterNotFound;
use aws_smithy_mocks::{RuleMode, mock, mock_client};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nodewright::apis::{ConditionStatus, EC2NodeClass};
use nodewright::aws::amis::{AmiError, AmiProvider, status_amis};
use nodewright::aws::clients::AwsClients;
use nodewright::controllers::nodeclass::amis_ready_condition;
use nodewright::extensions::Extensions;
use nodewright_filter::{AmiState, Architecture};
use nodewright_host::HostConfig;

use crate::moto::moto_clients;

/// 2026-11-22T00:00:00Z.
const NOW: i64 = 1_795_305_600;

fn node_class(terms: serde_json::Value, extensions: Option<serde_json::Value>) -> EC2NodeClass {
    let mut class = serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "golden", "generation": 1},
        "spec": {
            "role": "node",
            "amiFamily": "AL2023",
            "amiSelectorTerms": terms,
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
        },
    });
    if let Some(extensions) = extensions {
        class["spec"]["extensions"] = extensions;
    }
    serde_json::from_value(class).unwrap()
}

/// Copies one of moto's own images of `arch` under `name` and tags it,
/// returning the copy's id. (moto's `RegisterImage` records no
/// architecture, so copies of its built-in images stand in.)
pub async fn register(
    clients: &AwsClients,
    name: &str,
    arch: ArchitectureValues,
    tags: &[(&str, &str)],
) -> String {
    let source = clients
        .ec2
        .describe_images()
        .owners("amazon")
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("architecture")
                .values(arch.as_str())
                .build(),
        )
        .send()
        .await
        .unwrap()
        .images
        .unwrap_or_default()
        .into_iter()
        .find_map(|image| image.image_id)
        .expect("moto serves images of every architecture");
    let id = clients
        .ec2
        .copy_image()
        .source_image_id(source)
        .source_region("us-east-1")
        .name(name)
        .send()
        .await
        .unwrap()
        .image_id
        .unwrap();
    let tags = tags
        .iter()
        .map(|(k, v)| Tag::builder().key(*k).value(*v).build());
    clients
        .ec2
        .create_tags()
        .resources(&id)
        .set_tags(Some(tags.collect()))
        .send()
        .await
        .unwrap();
    id
}

#[tokio::test]
async fn terms_find_images_by_tags_name_id_and_ssm_parameter_in_moto() {
    let clients = moto_clients().await;
    let team = "terms-test";
    let amd = register(
        &clients,
        "terms-test-amd64",
        ArchitectureValues::X8664,
        &[("team", team)],
    )
    .await;
    let arm = register(
        &clients,
        "terms-test-arm64",
        ArchitectureValues::Arm64,
        &[("team", team)],
    )
    .await;
    let other = register(
        &clients,
        "other-image",
        ArchitectureValues::X8664,
        &[("team", "other")],
    )
    .await;
    clients
        .ssm
        .put_parameter()
        .name("/terms-test/golden")
        .value(&other)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
    let provider = AmiProvider::new(clients.ec2.clone(), clients.ssm.clone());

    let by_tag = provider
        .discover(
            &node_class(serde_json::json!([{"tags": {"team": team}}]), None).spec,
            "1.34",
        )
        .await
        .unwrap();
    let mut ids: Vec<&str> = by_tag.iter().map(|a| a.id.as_str()).collect();
    ids.sort();
    let mut expected = vec![amd.as_str(), arm.as_str()];
    expected.sort();
    assert_eq!(ids, expected);
    let arm_record = by_tag.iter().find(|a| a.id == arm).unwrap();
    assert_eq!(arm_record.architecture, Architecture::Arm64);
    assert_eq!(arm_record.state, AmiState::Available);
    assert_eq!(arm_record.tags.get("team").map(String::as_str), Some(team));
    assert_eq!(arm_record.source, format!("tag:team={team}"));
    assert_eq!(
        arm_record.variant, "",
        "custom terms do not know the variant"
    );

    let by_name_and_param = provider
        .discover(
            &node_class(
                serde_json::json!([
                    {"name": "terms-test-amd64", "owner": "self"},
                    {"ssmParameter": "/terms-test/golden"},
                    {"id": arm},
                ]),
                None,
            )
            .spec,
            "1.34",
        )
        .await
        .unwrap();
    let found: Vec<(&str, &str)> = by_name_and_param
        .iter()
        .map(|a| (a.id.as_str(), a.source.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (other.as_str(), "/terms-test/golden"),
            (arm.as_str(), &*format!("id:{arm}")),
            (amd.as_str(), "name:terms-test-amd64,owner:self"),
        ]
    );
}

#[tokio::test]
async fn a_missing_parameter_is_skipped_and_a_non_image_value_is_an_error() {
    let clients = moto_clients().await;
    let provider = AmiProvider::new(clients.ec2.clone(), clients.ssm.clone());
    let none = provider
        .discover(
            &node_class(
                serde_json::json!([{"ssmParameter": "/param-test/absent"}]),
                None,
            )
            .spec,
            "1.34",
        )
        .await
        .unwrap();
    assert!(none.is_empty());

    clients
        .ssm
        .put_parameter()
        .name("/param-test/not-an-image")
        .value("hello")
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
    let err = provider
        .discover(
            &node_class(
                serde_json::json!([{"ssmParameter": "/param-test/not-an-image"}]),
                None,
            )
            .spec,
            "1.34",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, AmiError::NotAnImageId { .. }), "{err}");
    assert!(
        err.to_string().contains("/param-test/not-an-image"),
        "{err}"
    );
}

#[tokio::test]
async fn the_default_selector_never_offers_a_disabled_image_from_moto() {
    let clients = moto_clients().await;
    let team = "disabled-test";
    let good = register(
        &clients,
        "disabled-test-good",
        ArchitectureValues::X8664,
        &[("team", team)],
    )
    .await;
    let off = register(
        &clients,
        "disabled-test-off",
        ArchitectureValues::X8664,
        &[("team", team)],
    )
    .await;
    clients
        .ec2
        .disable_image()
        .image_id(&off)
        .send()
        .await
        .unwrap();
    let provider = AmiProvider::new(clients.ec2.clone(), clients.ssm.clone());
    let class = node_class(serde_json::json!([{"tags": {"team": team}}]), None);

    let found = provider.discover(&class.spec, "1.34").await.unwrap();
    let disabled = found
        .iter()
        .find(|a| a.id == off)
        .expect("discovery does not filter states");
    assert_eq!(disabled.state, AmiState::Disabled);

    let extensions = Extensions::new(HostConfig::default()).unwrap();
    let selection = extensions.select_amis(&class, "us-east-1", found, &Vec::new(), NOW);
    assert!(selection.blocked.is_none());
    let ids: Vec<&str> = selection.amis.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, [good.as_str()]);
    let report = selection.report.unwrap();
    assert_eq!(
        report.dropped,
        [(off.clone(), "not selected (state disabled)".to_string())]
    );
    let status = status_amis(&selection.amis, NOW);
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].id, good);
}

fn image(id: &str, state: ImageState, created: &str) -> Image {
    Image::builder()
        .image_id(id)
        .name(format!("{id}-name"))
        .owner_id("602401143452")
        .state(state)
        .creation_date(created)
        .architecture(ArchitectureValues::X8664)
        .build()
}

pub const STANDARD: &str =
    "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/recommended/image_id";
pub const NVIDIA: &str =
    "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/nvidia/recommended/image_id";

/// An alias whose SSM parameters point at a `pending` image (the newest) and an
/// available GPU image, as after a Packer build was registered but not
/// finished; the other alias parameters do not exist. Every rule answers
/// any number of calls, for controllers that reconcile more than once.
pub fn alias_clients() -> (aws_sdk_ec2::Client, aws_sdk_ssm::Client) {
    let parameter = |name: &'static str, value: &'static str| {
        mock!(aws_sdk_ssm::Client::get_parameter)
            .match_requests(move |r| r.name() == Some(name))
            .sequence()
            .output(move || {
                GetParameterOutput::builder()
                    .parameter(Parameter::builder().name(name).value(value).build())
                    .build()
            })
            .repeatedly()
            .build()
    };
    let standard = parameter(STANDARD, "ami-pending");
    let nvidia = parameter(NVIDIA, "ami-gpu");
    let absent = mock!(aws_sdk_ssm::Client::get_parameter)
        .match_requests(|r| r.name() != Some(STANDARD) && r.name() != Some(NVIDIA))
        .sequence()
        .error(|| GetParameterError::ParameterNotFound(ParameterNotFound::builder().build()))
        .repeatedly()
        .build();
    let ssm = mock_client!(
        aws_sdk_ssm,
        RuleMode::MatchAny,
        [&standard, &nvidia, &absent]
    );

    // Two pages, to exercise pagination.
    let first = mock!(aws_sdk_ec2::Client::describe_images)
        .match_requests(|r| r.next_token().is_none() && r.include_deprecated() == Some(true))
        .sequence()
        .output(|| {
            DescribeImagesOutput::builder()
                .images(image(
                    "ami-pending",
                    ImageState::Pending,
                    "2026-11-20T00:00:00.000Z",
                ))
                .images(image(
                    "ami-gpu",
                    ImageState::Available,
                    "2026-10-01T00:00:00.000Z",
                ))
                .next_token("page-2")
                .build()
        })
        .repeatedly()
        .build();
    let second = mock!(aws_sdk_ec2::Client::describe_images)
        .match_requests(|r| r.next_token() == Some("page-2"))
        .sequence()
        .output(|| DescribeImagesOutput::builder().build())
        .repeatedly()
        .build();
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, [&first, &second]);
    (ec2, ssm)
}

#[tokio::test]
async fn an_alias_reads_its_ssm_paths_and_a_pending_image_is_never_selected() {
    let (ec2, ssm) = alias_clients();
    let provider = AmiProvider::new(ec2, ssm);
    let class = node_class(serde_json::json!([{"alias": "al2023@latest"}]), None);
    let found = provider.discover(&class.spec, "1.34").await.unwrap();
    let records: Vec<(&str, &str, AmiState)> = found
        .iter()
        .map(|a| (a.id.as_str(), a.variant.as_str(), a.state))
        .collect();
    assert_eq!(
        records,
        [
            ("ami-pending", "standard", AmiState::Pending),
            ("ami-gpu", "nvidia", AmiState::Available),
        ]
    );
    assert_eq!(found[0].source, STANDARD);
    assert_eq!(found[0].creation_time, 1_795_132_800);

    let extensions = Extensions::new(HostConfig::default()).unwrap();
    let selection = extensions.select_amis(&class, "us-east-1", found, &Vec::new(), NOW);
    let status = status_amis(&selection.amis, NOW);
    let ids: Vec<&str> = status.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        ["ami-gpu"],
        "the pending standard image must not be offered"
    );
    let condition = amis_ready_condition(&status, None, Some(1), Time(Default::default()));
    assert_eq!(condition.status, ConditionStatus::True);
    assert_eq!(
        amis_ready_condition(&[], None, Some(1), Time(Default::default()))
            .reason
            .as_deref(),
        Some("AMINotFound")
    );
}

#[tokio::test]
async fn a_failing_selector_blocks_with_fail_and_falls_back_to_the_default_with_ignore() {
    let (ec2, ssm) = alias_clients();
    let provider = AmiProvider::new(ec2, ssm);
    let selector = |policy: &str| {
        serde_json::json!({
            "amiSelector": {
                "name": "broken",
                "path": "/nonexistent/selector.wasm",
                "sha256": "0000000000000000000000000000000000000000000000000000000000000000",
                "failurePolicy": policy,
            }
        })
    };
    let extensions = Extensions::new(HostConfig::default()).unwrap();

    let fail = node_class(
        serde_json::json!([{"alias": "al2023@latest"}]),
        Some(selector("Fail")),
    );
    let found = provider.discover(&fail.spec, "1.34").await.unwrap();
    let blocked = extensions.select_amis(&fail, "us-east-1", found.clone(), &Vec::new(), NOW);
    assert!(blocked.amis.is_empty());
    let why = blocked.blocked.expect("Fail blocks the class").to_string();
    assert!(
        why.contains("spec.extensions.amiSelector (broken)"),
        "{why}"
    );

    let ignore = node_class(
        serde_json::json!([{"alias": "al2023@latest"}]),
        Some(selector("Ignore")),
    );
    let skipped = extensions.select_amis(&ignore, "us-east-1", found, &Vec::new(), NOW);
    assert!(skipped.blocked.is_none());
    assert!(skipped.report.unwrap().error.is_some());
    let ids: Vec<&str> = skipped.amis.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(
        ids,
        ["ami-gpu"],
        "the built-in default decides in its place"
    );
}
