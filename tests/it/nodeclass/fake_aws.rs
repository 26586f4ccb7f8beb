//! AWS for the controller tests, played by SDK mocks: a small account with
//! two subnets in us-east-1a and one in us-east-1b tagged
//! `karpenter.sh/discovery=demo`, one such security group, the AL2023 alias
//! images (a `pending` standard image and an available GPU image), IAM with
//! the role `KarpenterNodeRole`, the placement groups of
//! [`crate::placement_groups::groups`], capacity reservations and dry-run
//! answers as configured.

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
use nodewright::aws::clients::AwsClients;

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

/// A hook on `CreateInstanceProfile`, given the profile's name.
pub type OnCreate = Arc<dyn Fn(&str) + Send + Sync>;

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
    /// `DescribeImages` answers `RequestLimitExceeded`, every time.
    pub images_throttled: bool,
    /// Called with the profile's name as IAM makes it.
    pub on_create: Option<OnCreate>,
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
            images_throttled: false,
            on_create: None,
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
        let images = if self.images_throttled {
            mock!(aws_sdk_ec2::Client::describe_images)
                .sequence()
                .http_status(
                    503,
                    Some(ec2_error("RequestLimitExceeded", "Request limit exceeded.")),
                )
                .repeatedly()
                .build()
        } else {
            mock!(aws_sdk_ec2::Client::describe_images).then_output(|| {
                DescribeImagesOutput::builder()
                    .images(image("ami-pending", ImageState::Pending))
                    .images(image("ami-gpu", ImageState::Available))
                    .build()
            })
        };
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
        // EC2 knows only the profiles IAM has.
        let profiles = self.profiles.clone();
        let unknown_profile = mock!(aws_sdk_ec2::Client::run_instances)
            .match_requests(move |r| {
                let name = r
                    .iam_instance_profile()
                    .and_then(|p| p.name())
                    .unwrap_or_default();
                r.dry_run() == Some(true) && !profiles.lock().unwrap().contains_key(name)
            })
            .sequence()
            .http_status(
                400,
                Some(ec2_error(
                    "InvalidParameterValue",
                    "Value (gone) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name",
                )),
            )
            .repeatedly()
            .build();
        let (status, body) = answer(self.dry_run, false);
        let run = mock!(aws_sdk_ec2::Client::run_instances)
            .match_requests(|r| r.dry_run() == Some(true))
            .sequence()
            .http_status(status, Some(body))
            .repeatedly()
            .build();
        let placement_groups = crate::placement_groups::describe_rule(
            crate::placement_groups::groups(),
            Arc::default(),
        );
        let ec2 = mock_client!(
            aws_sdk_ec2,
            RuleMode::MatchAny,
            [
                &placement_groups,
                &subnets,
                &groups,
                &images,
                &reservations,
                &launch_template,
                &fleet,
                &unknown_profile,
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
                sqs: mock_client!(aws_sdk_sqs, RuleMode::MatchAny, Vec::<&Rule>::new()),
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
        let on_create = self.on_create.clone();
        let create =
            mock!(aws_sdk_iam::Client::create_instance_profile).then_compute_output(move |req| {
                let name = req.instance_profile_name().unwrap_or_default();
                if let Some(hook) = &on_create {
                    hook(name);
                }
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
