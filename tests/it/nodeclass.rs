//! The EC2NodeClass status controller end to end against the in-process API
//! server, with AWS played by SDK mocks: every status field and condition in
//! one reconcile, selectors that match nothing, another controller's
//! condition, and throttled dry runs that must not unready a class.
//!
//! [`FakeAws`] answers like a small account: two subnets in us-east-1a and
//! one in us-east-1b tagged `karpenter.sh/discovery=demo`, one such security
//! group, the AL2023 alias images (a `pending` standard image and an
//! available GPU image), IAM with the role `KarpenterNodeRole`, and dry runs
//! as configured.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_ec2::operation::describe_capacity_reservations::DescribeCapacityReservationsOutput;
use aws_sdk_ec2::operation::describe_images::DescribeImagesOutput;
use aws_sdk_ec2::operation::describe_security_groups::DescribeSecurityGroupsOutput;
use aws_sdk_ec2::operation::describe_subnets::DescribeSubnetsOutput;
use aws_sdk_ec2::types::{
    ArchitectureValues, CapacityReservation, Filter, Image, ImageState, SecurityGroup, Subnet,
};
use aws_sdk_iam::error::ErrorMetadata;
use aws_sdk_iam::operation::add_role_to_instance_profile::{
    AddRoleToInstanceProfileError, AddRoleToInstanceProfileOutput,
};
use aws_sdk_iam::operation::create_instance_profile::CreateInstanceProfileOutput;
use aws_sdk_iam::operation::delete_instance_profile::DeleteInstanceProfileOutput;
use aws_sdk_iam::operation::get_instance_profile::{
    GetInstanceProfileError, GetInstanceProfileOutput,
};
use aws_sdk_iam::operation::remove_role_from_instance_profile::RemoveRoleFromInstanceProfileOutput;
use aws_sdk_iam::primitives::DateTime;
use aws_sdk_ssm::operation::get_parameter::{GetParameterError, GetParameterOutput};
use aws_sdk_ssm::types::Parameter;
use aws_sdk_ssm::types::error::ParameterNotFound;
use aws_smithy_mocks::{MockResponse, Rule, RuleMode, mock, mock_client};
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodewright::apis::{Condition, ConditionStatus, EC2NodeClass};
use nodewright::aws::catalog::Catalog;
use nodewright::aws::clients::AwsClients;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::controllers::nodeclass::reconcile_node_class;
use nodewright::controllers::{Context, ControllerSettings};
use nodewright::extensions::Extensions;
use nodewright::sim::apiserver::ApiServer;
use nodewright_host::HostConfig;
use serde_json::json;

/// The role IAM knows.
pub const ROLE: &str = "KarpenterNodeRole";
const STANDARD: &str =
    "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/recommended/image_id";
const NVIDIA: &str =
    "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/nvidia/recommended/image_id";

/// How the fake answers the dry runs of the launch calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DryRun {
    /// `DryRunOperation`: allowed.
    Allowed,
    /// `RequestLimitExceeded`, every time.
    Throttled,
    /// `UnauthorizedOperation` for `CreateFleet`.
    FleetUnauthorized,
}

/// A small AWS account answered by SDK mocks. Clones share the IAM state,
/// so two controllers (a restart) see the same instance profiles.
#[derive(Clone)]
pub struct FakeAws {
    /// Instance profile name → its role.
    pub profiles: Arc<Mutex<BTreeMap<String, Option<String>>>>,
    /// The answer to every dry run.
    pub dry_run: DryRun,
    /// What `DescribeCapacityReservations` lists (one page).
    pub reservations: Vec<CapacityReservation>,
}

/// The mocked clients and the rules whose calls tests count.
pub struct Mocked {
    /// The clients.
    pub clients: AwsClients,
    /// `CreateLaunchTemplate` dry runs (every attempt, retries included).
    pub launch_template_dry_runs: Rule,
}

impl Default for FakeAws {
    fn default() -> Self {
        FakeAws {
            profiles: Arc::default(),
            dry_run: DryRun::Allowed,
            reservations: Vec::new(),
        }
    }
}

fn values(filters: &[Filter], name: &str) -> Vec<String> {
    filters
        .iter()
        .filter(|f| f.name() == Some(name))
        .flat_map(|f| f.values().iter().cloned())
        .collect()
}

fn subnet(id: &str, zone: &str, zone_id: &str, free: i32) -> Subnet {
    Subnet::builder()
        .subnet_id(id)
        .availability_zone(zone)
        .availability_zone_id(zone_id)
        .available_ip_address_count(free)
        .build()
}

fn image(id: &str, state: ImageState) -> Image {
    Image::builder()
        .image_id(id)
        .name(format!("{id}-name"))
        .owner_id("602401143452")
        .state(state)
        .creation_date("2026-10-01T00:00:00.000Z")
        .architecture(ArchitectureValues::X8664)
        .build()
}

/// An EC2 query-protocol error body.
pub fn ec2_error(code: &str, message: &str) -> String {
    format!(
        "<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>req-1</RequestID></Response>"
    )
}

fn iam_error(message: &str) -> ErrorMetadata {
    ErrorMetadata::builder()
        .code("NoSuchEntity")
        .message(message)
        .build()
}

fn iam_profile(name: &str, role: Option<&str>) -> aws_sdk_iam::types::InstanceProfile {
    let roles = role.map(|role| {
        aws_sdk_iam::types::Role::builder()
            .path("/")
            .role_name(role)
            .role_id("AROA1")
            .arn(format!("arn:aws:iam::123456789012:role/{role}"))
            .create_date(DateTime::from_secs(0))
            .build()
            .unwrap()
    });
    aws_sdk_iam::types::InstanceProfile::builder()
        .path("/karpenter/")
        .instance_profile_name(name)
        .instance_profile_id("AIPA1")
        .arn(format!("arn:aws:iam::123456789012:instance-profile/{name}"))
        .create_date(DateTime::from_secs(0))
        .set_roles(Some(roles.into_iter().collect()))
        .build()
        .unwrap()
}

/// Retries fast, so throttling costs milliseconds in tests.
macro_rules! fast_retries {
    ($crate_name:ident) => {
        |c: $crate_name::config::Builder| {
            c.retry_config(
                $crate_name::config::retry::RetryConfig::standard()
                    .with_max_attempts(3)
                    .with_initial_backoff(Duration::from_millis(5)),
            )
        }
    };
}

impl FakeAws {
    /// Clients answering like this account.
    pub fn mocked(&self) -> Mocked {
        let subnets = mock!(aws_sdk_ec2::Client::describe_subnets).then_compute_output(|req| {
            let all = [
                subnet("subnet-a1", "us-east-1a", "use1-az1", 100),
                subnet("subnet-a2", "us-east-1a", "use1-az1", 250),
                subnet("subnet-b1", "us-east-1b", "use1-az2", 50),
            ];
            let filters = req.filters();
            let tagged = values(filters, "tag:karpenter.sh/discovery") == ["demo"]
                || values(filters, "tag-key") == ["karpenter.sh/discovery"];
            let ids = values(filters, "subnet-id");
            let found = all
                .into_iter()
                .filter(|s| tagged || ids.iter().any(|id| Some(id.as_str()) == s.subnet_id()));
            DescribeSubnetsOutput::builder()
                .set_subnets(Some(found.collect()))
                .build()
        });
        let groups =
            mock!(aws_sdk_ec2::Client::describe_security_groups).then_compute_output(|req| {
                let filters = req.filters();
                let hit = values(filters, "tag:karpenter.sh/discovery") == ["demo"]
                    || values(filters, "group-id").iter().any(|v| v == "sg-nodes")
                    || values(filters, "group-name").iter().any(|v| v == "nodes");
                let found = hit.then(|| {
                    SecurityGroup::builder()
                        .group_id("sg-nodes")
                        .group_name("nodes")
                        .build()
                });
                DescribeSecurityGroupsOutput::builder()
                    .set_security_groups(Some(found.into_iter().collect()))
                    .build()
            });
        let images = mock!(aws_sdk_ec2::Client::describe_images).then_output(|| {
            DescribeImagesOutput::builder()
                .images(image("ami-pending", ImageState::Pending))
                .images(image("ami-gpu", ImageState::Available))
                .build()
        });
        let listed = self.reservations.clone();
        let reservations = mock!(aws_sdk_ec2::Client::describe_capacity_reservations)
            .then_compute_output(move |_| {
                DescribeCapacityReservationsOutput::builder()
                    .set_capacity_reservations(Some(listed.clone()))
                    .build()
            });
        let answer = |dry_run: DryRun, fleet: bool| match dry_run {
            DryRun::Allowed => (
                412,
                ec2_error(
                    "DryRunOperation",
                    "Request would have succeeded, but DryRun flag is set.",
                ),
            ),
            DryRun::Throttled => (
                503,
                ec2_error("RequestLimitExceeded", "Request limit exceeded."),
            ),
            DryRun::FleetUnauthorized if fleet => (
                403,
                ec2_error(
                    "UnauthorizedOperation",
                    "You are not authorized to perform this operation. User: arn:aws:sts::1:assumed-role/nodewright is not authorized to perform: ec2:CreateFleet with an explicit deny in a service control policy",
                ),
            ),
            DryRun::FleetUnauthorized => (
                412,
                ec2_error(
                    "DryRunOperation",
                    "Request would have succeeded, but DryRun flag is set.",
                ),
            ),
        };
        let (status, body) = answer(self.dry_run, false);
        let launch_template = mock!(aws_sdk_ec2::Client::create_launch_template)
            .match_requests(|r| r.dry_run() == Some(true))
            .sequence()
            .http_status(status, Some(body))
            .repeatedly()
            .build();
        let (status, body) = answer(self.dry_run, true);
        let fleet = mock!(aws_sdk_ec2::Client::create_fleet)
            .match_requests(|r| r.dry_run() == Some(true))
            .sequence()
            .http_status(status, Some(body))
            .repeatedly()
            .build();
        let (status, body) = answer(self.dry_run, false);
        let run = mock!(aws_sdk_ec2::Client::run_instances)
            .match_requests(|r| r.dry_run() == Some(true))
            .sequence()
            .http_status(status, Some(body))
            .repeatedly()
            .build();
        let ec2 = mock_client!(
            aws_sdk_ec2,
            RuleMode::MatchAny,
            [
                &subnets,
                &groups,
                &images,
                &reservations,
                &launch_template,
                &fleet,
                &run
            ],
            fast_retries!(aws_sdk_ec2)
        );

        let parameter = mock!(aws_sdk_ssm::Client::get_parameter).then_compute_response(|req| {
            let value = match req.name() {
                Some(STANDARD) => "ami-pending",
                Some(NVIDIA) => "ami-gpu",
                _ => {
                    return MockResponse::Error(GetParameterError::ParameterNotFound(
                        ParameterNotFound::builder().build(),
                    ));
                }
            };
            MockResponse::Output(
                GetParameterOutput::builder()
                    .parameter(Parameter::builder().value(value).build())
                    .build(),
            )
        });
        let ssm = mock_client!(aws_sdk_ssm, RuleMode::MatchAny, [&parameter]);

        let iam = self.iam();
        let pricing = mock_client!(aws_sdk_pricing, RuleMode::MatchAny, Vec::<&Rule>::new());
        Mocked {
            clients: AwsClients {
                ec2,
                ssm,
                iam,
                pricing,
            },
            launch_template_dry_runs: launch_template,
        }
    }

    fn iam(&self) -> aws_sdk_iam::Client {
        let profiles = self.profiles.clone();
        let get =
            mock!(aws_sdk_iam::Client::get_instance_profile).then_compute_response(move |req| {
                let name = req.instance_profile_name().unwrap_or_default();
                match profiles.lock().unwrap().get(name) {
                    Some(role) => MockResponse::Output(
                        GetInstanceProfileOutput::builder()
                            .instance_profile(iam_profile(name, role.as_deref()))
                            .build(),
                    ),
                    None => MockResponse::Error(GetInstanceProfileError::generic(iam_error(
                        &format!("Instance Profile {name} cannot be found."),
                    ))),
                }
            });
        let profiles = self.profiles.clone();
        let create =
            mock!(aws_sdk_iam::Client::create_instance_profile).then_compute_output(move |req| {
                let name = req.instance_profile_name().unwrap_or_default();
                profiles.lock().unwrap().insert(name.to_string(), None);
                CreateInstanceProfileOutput::builder()
                    .instance_profile(iam_profile(name, None))
                    .build()
            });
        let profiles = self.profiles.clone();
        let add = mock!(aws_sdk_iam::Client::add_role_to_instance_profile).then_compute_response(
            move |req| {
                let role = req.role_name().unwrap_or_default();
                if role != ROLE {
                    return MockResponse::Error(AddRoleToInstanceProfileError::generic(iam_error(
                        &format!("The role with name {role} cannot be found."),
                    )));
                }
                let name = req.instance_profile_name().unwrap_or_default();
                profiles
                    .lock()
                    .unwrap()
                    .insert(name.to_string(), Some(role.to_string()));
                MockResponse::Output(AddRoleToInstanceProfileOutput::builder().build())
            },
        );
        let profiles = self.profiles.clone();
        let remove = mock!(aws_sdk_iam::Client::remove_role_from_instance_profile)
            .then_compute_output(move |req| {
                let name = req.instance_profile_name().unwrap_or_default();
                profiles.lock().unwrap().insert(name.to_string(), None);
                RemoveRoleFromInstanceProfileOutput::builder().build()
            });
        let profiles = self.profiles.clone();
        let delete =
            mock!(aws_sdk_iam::Client::delete_instance_profile).then_compute_output(move |req| {
                let name = req.instance_profile_name().unwrap_or_default();
                profiles.lock().unwrap().remove(name);
                DeleteInstanceProfileOutput::builder().build()
            });
        mock_client!(
            aws_sdk_iam,
            RuleMode::MatchAny,
            [&get, &create, &add, &remove, &delete],
            fast_retries!(aws_sdk_iam)
        )
    }
}

/// A controller context on `server` over `clients`, for cluster `demo`.
pub fn context_on(server: &ApiServer, clients: &AwsClients) -> Arc<Context> {
    Arc::new(Context::new(
        server.client(),
        Arc::new(InstanceTypeProvider::new(
            Arc::new(Catalog::embedded("us-east-1").unwrap()),
            Arc::new(Extensions::new(HostConfig::default()).unwrap()),
            Arc::default(),
        )),
        clients,
        ControllerSettings {
            kubernetes_version: "1.34".to_string(),
            cluster_name: "demo".to_string(),
            disable_dry_run: false,
        },
    ))
}

/// A class selecting the fake account's subnets and group by tag.
pub fn class(name: &str) -> EC2NodeClass {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": ROLE,
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        },
    }))
    .unwrap()
}

/// The condition `type_` of `class`.
pub fn condition<'a>(class: &'a EC2NodeClass, type_: &str) -> &'a Condition {
    class
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
        .unwrap_or_else(|| panic!("no {type_} condition on {:?}", class.metadata.name))
}

/// `(type, reason, note)` of every event about EC2NodeClass `name`.
pub fn events_about(server: &ApiServer, name: &str) -> Vec<(String, String, String)> {
    server
        .objects("events.k8s.io", "events")
        .iter()
        .filter(|e| e["regarding"]["name"] == name && e["regarding"]["kind"] == "EC2NodeClass")
        .map(|e| {
            let text = |field: &str| e[field].as_str().unwrap_or_default().to_string();
            (text("type"), text("reason"), text("note"))
        })
        .collect()
}

async fn create_and_reconcile(context: &Context, class: EC2NodeClass) -> EC2NodeClass {
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    let created = api.create(&PostParams::default(), &class).await.unwrap();
    reconcile_node_class(context, &created).await.unwrap();
    api.get(&created.metadata.name.unwrap()).await.unwrap()
}

#[tokio::test]
async fn a_class_with_working_selectors_is_ready_with_every_status_field_in_one_reconcile() {
    let server = ApiServer::default();
    let fake = FakeAws::default();
    let context = context_on(&server, &fake.mocked().clients);
    let stored = create_and_reconcile(&context, class("default")).await;

    for type_ in [
        "SubnetsReady",
        "SecurityGroupsReady",
        "InstanceProfileReady",
        "CapacityReservationsReady",
        "AMIsReady",
        "ExtensionsReady",
        "PlacementGroupReady",
        "ValidationSucceeded",
        "Ready",
    ] {
        let c = condition(&stored, type_);
        assert_eq!(c.status, ConditionStatus::True, "{c:?}");
        assert_eq!(c.observed_generation, Some(1), "{c:?}");
    }
    let status = stored.status.as_ref().unwrap();
    let subnets: Vec<(&str, &str, Option<&str>)> = status
        .subnets
        .iter()
        .flatten()
        .map(|s| (s.id.as_str(), s.zone.as_str(), s.zone_id.as_deref()))
        .collect();
    assert_eq!(
        subnets,
        [
            ("subnet-a2", "us-east-1a", Some("use1-az1")),
            ("subnet-a1", "us-east-1a", Some("use1-az1")),
            ("subnet-b1", "us-east-1b", Some("use1-az2")),
        ],
        "most available addresses first"
    );
    let groups = status.security_groups.as_ref().unwrap();
    assert_eq!(groups[0].id, "sg-nodes");
    assert_eq!(groups[0].name.as_deref(), Some("nodes"));
    let profile = status.instance_profile.as_deref().unwrap();
    assert!(profile.starts_with("demo_"), "{profile}");
    assert_eq!(
        fake.profiles.lock().unwrap().get(profile),
        Some(&Some(ROLE.to_string()))
    );
    assert_eq!(
        status
            .amis
            .as_ref()
            .unwrap()
            .iter()
            .map(|a| a.id.as_str())
            .collect::<Vec<_>>(),
        ["ami-gpu"]
    );
    assert!(status.capacity_reservations.is_none());
    assert!(events_about(&server, "default").is_empty());
}

#[tokio::test]
async fn a_subnet_selector_that_matches_nothing_names_the_term_and_warns() {
    let server = ApiServer::default();
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    let mut lost = class("lost");
    lost.spec.subnet_selector_terms = serde_json::from_value(json!([
        {"tags": {"karpenter.sh/discovery": "elsewhere"}},
        {"id": "subnet-gone"},
    ]))
    .unwrap();
    let stored = create_and_reconcile(&context, lost).await;

    let subnets = condition(&stored, "SubnetsReady");
    assert_eq!(subnets.status, ConditionStatus::False);
    assert_eq!(subnets.reason.as_deref(), Some("SubnetsNotFound"));
    let message = subnets.message.as_deref().unwrap();
    assert!(
        message.contains("subnetSelectorTerms[0] (tags karpenter.sh/discovery=elsewhere)")
            && message.contains("subnetSelectorTerms[1] (id subnet-gone)")
            && message.ends_with("matched no subnet"),
        "{message}"
    );
    let ready = condition(&stored, "Ready");
    assert_eq!(ready.status, ConditionStatus::False);
    assert_eq!(ready.reason.as_deref(), Some("UnhealthyDependents"));
    assert!(
        ready
            .message
            .as_deref()
            .unwrap()
            .contains("SubnetsReady=False"),
        "{ready:?}"
    );
    let validation = condition(&stored, "ValidationSucceeded");
    assert_eq!(validation.status, ConditionStatus::False);
    assert_eq!(validation.reason.as_deref(), Some("DependenciesNotReady"));
    assert!(stored.status.as_ref().unwrap().subnets.is_none());
    let events = events_about(&server, "lost");
    assert!(
        events.iter().any(|(t, r, note)| t == "Warning"
            && r == "SubnetsNotFound"
            && note.contains("subnetSelectorTerms[0]")),
        "{events:?}"
    );

    // One term matching is enough; the other is still named.
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    let fix = json!({"spec": {"subnetSelectorTerms": [
        {"tags": {"karpenter.sh/discovery": "elsewhere"}},
        {"id": "subnet-b1"},
    ]}});
    let fixed = api
        .patch("lost", &PatchParams::default(), &Patch::Merge(&fix))
        .await
        .unwrap();
    reconcile_node_class(&context, &fixed).await.unwrap();
    let stored = api.get("lost").await.unwrap();
    let subnets = condition(&stored, "SubnetsReady");
    assert_eq!(subnets.status, ConditionStatus::True);
    assert!(
        subnets.message.as_deref().unwrap().contains(
            "subnetSelectorTerms[0] (tags karpenter.sh/discovery=elsewhere) matched no subnet"
        ),
        "{subnets:?}"
    );
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::True);
    assert!(
        events_about(&server, "lost")
            .iter()
            .any(|(t, r, _)| t == "Normal" && r == "Ready")
    );
}

#[tokio::test]
async fn another_controllers_condition_is_kept() {
    let server = ApiServer::default();
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    api.create(&PostParams::default(), &class("shared"))
        .await
        .unwrap();
    let theirs = json!({"status": {"conditions": [{
        "type": "example.com/Audited", "status": "True", "reason": "Audited",
        "message": "checked by the auditor", "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    api.patch_status("shared", &PatchParams::default(), &Patch::Merge(&theirs))
        .await
        .unwrap();
    let current = api.get("shared").await.unwrap();
    reconcile_node_class(&context, &current).await.unwrap();

    let stored = api.get("shared").await.unwrap();
    let audited = condition(&stored, "example.com/Audited");
    assert_eq!(audited.message.as_deref(), Some("checked by the auditor"));
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::True);
}

#[tokio::test]
async fn a_condition_written_after_the_class_was_read_is_kept() {
    let server = ApiServer::default();
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    let created = api
        .create(&PostParams::default(), &class("raced"))
        .await
        .unwrap();
    // Another writer changes the status after this pass read the class but
    // before it writes: the write carries the old resourceVersion.
    let theirs = json!({"status": {"conditions": [{
        "type": "example.com/Audited", "status": "True", "reason": "Audited",
        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    api.patch_status("raced", &PatchParams::default(), &Patch::Merge(&theirs))
        .await
        .unwrap();
    // The pass reads the stored class itself, so it merges with theirs.
    reconcile_node_class(&context, &created).await.unwrap();
    let stored = api.get("raced").await.unwrap();
    assert_eq!(
        condition(&stored, "example.com/Audited").status,
        ConditionStatus::True
    );
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::True);
}

#[tokio::test]
async fn throttling_during_validation_keeps_the_class_ready() {
    let server = ApiServer::default();
    let fake = FakeAws::default();
    let first = context_on(&server, &fake.mocked().clients);
    let stored = create_and_reconcile(&first, class("steady")).await;
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::True);
    let validated = condition(&stored, "ValidationSucceeded").clone();

    // A restarted controller (nothing cached) whose dry runs are throttled.
    let throttled = FakeAws {
        dry_run: DryRun::Throttled,
        ..fake.clone()
    }
    .mocked();
    let second = context_on(&server, &throttled.clients);
    let result = reconcile_node_class(&second, &stored)
        .await
        .unwrap()
        .unwrap();
    assert!(
        throttled.launch_template_dry_runs.num_calls() >= 3,
        "the SDK retries a throttled call with backoff ({} attempts)",
        throttled.launch_template_dry_runs.num_calls()
    );
    assert_eq!(
        result.requeue_after,
        Duration::from_secs(60),
        "looked at again soon"
    );

    let api: Api<EC2NodeClass> = Api::all(server.client());
    let after = api.get("steady").await.unwrap();
    assert_eq!(condition(&after, "ValidationSucceeded"), &validated);
    assert_eq!(condition(&after, "Ready").status, ConditionStatus::True);
    assert!(events_about(&server, "steady").is_empty());
}

#[tokio::test]
async fn an_unauthorized_dry_run_names_the_call() {
    let server = ApiServer::default();
    let fake = FakeAws {
        dry_run: DryRun::FleetUnauthorized,
        ..FakeAws::default()
    };
    let context = context_on(&server, &fake.mocked().clients);
    let stored = create_and_reconcile(&context, class("denied")).await;
    let validation = condition(&stored, "ValidationSucceeded");
    assert_eq!(validation.status, ConditionStatus::False);
    assert_eq!(
        validation.reason.as_deref(),
        Some("CreateFleetAuthCheckFailed")
    );
    assert_eq!(
        validation.message.as_deref(),
        Some(
            "Controller isn't authorized to call ec2:CreateFleet: User is not authorized to perform this operation due to a service control policy"
        )
    );
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::False);
}

#[tokio::test]
async fn dry_runs_can_be_disabled() {
    let server = ApiServer::default();
    let fake = FakeAws {
        dry_run: DryRun::FleetUnauthorized,
        ..FakeAws::default()
    };
    let mocked = fake.mocked();
    let mut context = Arc::try_unwrap(context_on(&server, &mocked.clients))
        .unwrap_or_else(|_| panic!("one owner"));
    context.disable_dry_run = true;
    let stored = create_and_reconcile(&context, class("trusting")).await;
    let validation = condition(&stored, "ValidationSucceeded");
    assert_eq!(validation.status, ConditionStatus::True);
    assert!(
        validation
            .message
            .as_deref()
            .unwrap()
            .contains("--disable-dry-run")
    );
    assert_eq!(mocked.launch_template_dry_runs.num_calls(), 0);
}

#[tokio::test]
async fn a_placement_group_selector_is_not_launched_without() {
    let server = ApiServer::default();
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    let mut grouped = class("grouped");
    grouped.spec.placement_group_selector =
        Some(serde_json::from_value(json!({"name": "tight"})).unwrap());
    let stored = create_and_reconcile(&context, grouped).await;
    let placement = condition(&stored, "PlacementGroupReady");
    assert_eq!(placement.status, ConditionStatus::False);
    assert!(
        placement
            .message
            .as_deref()
            .unwrap()
            .contains("spec.placementGroupSelector")
    );
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::False);
}

fn reservation(
    id: &str,
    instance_type: &str,
    zone: &str,
) -> aws_sdk_ec2::types::builders::CapacityReservationBuilder {
    aws_sdk_ec2::types::CapacityReservation::builder()
        .capacity_reservation_id(id)
        .instance_type(instance_type)
        .availability_zone(zone)
        .owner_id("012345678901")
        .instance_match_criteria(aws_sdk_ec2::types::InstanceMatchCriteria::Targeted)
        .state(aws_sdk_ec2::types::CapacityReservationState::Active)
        .available_instance_count(3)
}

#[tokio::test]
async fn capacity_reservations_reach_the_status_and_become_reserved_offerings() {
    use aws_sdk_ec2::primitives::DateTime as Ec2Time;
    use aws_sdk_ec2::types::CapacityReservationType;
    use nodewright::apis::ec2nodeclass::{
        CapacityReservationState, CapacityReservationType as Kind,
    };
    use nodewright::scheduling::CapacityType;

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let block = reservation("cr-block", "p5.48xlarge", "us-east-1a")
        .reservation_type(CapacityReservationType::CapacityBlock)
        .end_date(Ec2Time::from_secs(now + 30 * 60))
        .interruptible(true);
    let expired = reservation("cr-expired", "m5.large", "us-east-1a")
        .end_date(Ec2Time::from_secs(now - 60))
        .build();
    let odd = reservation("cr-odd", "m5.large", "us-east-1a")
        .reservation_type(CapacityReservationType::from("future-kind"))
        .build();
    let fake = FakeAws {
        reservations: vec![
            reservation("cr-default", "m5.large", "us-east-1a").build(),
            block.build(),
            expired,
            odd,
        ],
        ..FakeAws::default()
    };
    let server = ApiServer::default();
    let context = context_on(&server, &fake.mocked().clients);
    let mut reserved = class("reserved");
    reserved.spec.capacity_reservation_selector_terms =
        Some(serde_json::from_value(json!([{"tags": {"team": "ml"}}])).unwrap());
    let stored = create_and_reconcile(&context, reserved).await;

    let ready = condition(&stored, "CapacityReservationsReady");
    assert_eq!(ready.status, ConditionStatus::True);
    assert!(
        ready.message.as_deref().unwrap().contains(
            "capacity reservation cr-odd left out: unsupported reservation type \"future-kind\""
        ),
        "{ready:?}"
    );
    let entries = stored
        .status
        .as_ref()
        .unwrap()
        .capacity_reservations
        .clone()
        .unwrap();
    let ids: Vec<&str> = entries.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        ["cr-block", "cr-default"],
        "expired and unsupported ones are left out"
    );
    assert_eq!(entries[0].state, Some(CapacityReservationState::Expiring));
    assert_eq!(entries[0].reservation_type, Some(Kind::CapacityBlock));
    assert_eq!(entries[0].interruptible, Some(true));
    assert!(entries[0].end_time.is_some());
    assert_eq!(entries[1].state, Some(CapacityReservationState::Active));
    assert_eq!(entries[1].owner_id, "012345678901");

    // The scheduler's view: a reserved offering for the reservation's type
    // and zone, with its free count, priced near zero.
    let outcome = context
        .instance_types
        .for_pool(&stored, "general", &Vec::new())
        .unwrap();
    let m5 = outcome
        .instance_types
        .iter()
        .find(|t| t.name == "m5.large")
        .unwrap();
    let on_demand = m5
        .offerings
        .iter()
        .find(|o| o.capacity_type == CapacityType::OnDemand && o.zone == "us-east-1a")
        .unwrap()
        .price;
    let reserved: Vec<_> = m5
        .offerings
        .iter()
        .filter(|o| o.capacity_type == CapacityType::Reserved)
        .collect();
    assert_eq!(reserved.len(), 1);
    assert_eq!(reserved[0].reservation_id.as_deref(), Some("cr-default"));
    assert_eq!(reserved[0].zone, "us-east-1a");
    assert_eq!(reserved[0].reservation_capacity, Some(3));
    assert!(reserved[0].available);
    assert_eq!(reserved[0].price, on_demand / 10_000_000.0);
    let labels = &m5.requirements;
    assert!(
        labels
            .get("karpenter.k8s.aws/capacity-reservation-id")
            .unwrap()
            .has("cr-default")
    );
    assert!(
        labels
            .get("karpenter.k8s.aws/capacity-reservation-type")
            .unwrap()
            .has("default")
    );
    assert!(
        labels
            .get("karpenter.k8s.aws/capacity-reservation-interruptible")
            .unwrap()
            .has("false")
    );
    if let Some(p5) = outcome
        .instance_types
        .iter()
        .find(|t| t.name == "p5.48xlarge")
    {
        let block = p5
            .offerings
            .iter()
            .find(|o| o.reservation_id.as_deref() == Some("cr-block"));
        assert!(
            block.is_none_or(|o| !o.available),
            "an expiring block takes no launches"
        );
    }
    let c5 = outcome
        .instance_types
        .iter()
        .find(|t| t.name == "c5.large")
        .unwrap();
    assert!(c5.offerings.iter().all(|o| o.reservation_id.is_none()));
}
