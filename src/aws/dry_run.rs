//! Dry runs of the EC2 calls a launch makes — `CreateLaunchTemplate`,
//! `CreateFleet`, `RunInstances`, with `DryRun` set and the class's tags,
//! image, instance profile, subnets, security groups and metadata options —
//! to learn before any launch whether the controller may make them. EC2
//! answers `DryRunOperation` when it would have allowed a call and
//! `UnauthorizedOperation` when it would not; both are answers, anything
//! else is not.
//!
//! `RunInstances` is tried in each given subnet until one is allowed; the
//! first subnet's refusal counts when none is (permissions are rarely per
//! subnet). A fault (throttling, a server error) ends the check at once.
//!
//! Cache: answers per request live [`VALIDATION_TTL`] (30 minutes,
//! Karpenter's `ValidationTTL`). Faults (throttling, server errors, after
//! the SDK's retries) and a missing instance profile (often IAM's eventual
//! consistency) are never cached.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetType,
    IamInstanceProfileSpecification, InstanceMetadataOptionsRequest,
    InstanceNetworkInterfaceSpecification, LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateTagSpecificationRequest,
    RequestLaunchTemplateData, ResourceType, Tag, TagSpecification,
    TargetCapacitySpecificationRequest,
};

use super::errors::AwsError;
use super::ttl_cache;
use crate::apis::ec2nodeclass::{EnabledDisabled, HttpTokens, MetadataOptions};

/// How long an answer is reused.
pub const VALIDATION_TTL: Duration = Duration::from_secs(30 * 60);
/// Requests whose answers are kept at once.
const MAX_CACHED: u64 = 4096;
/// The launch template the dry runs name; it need not exist.
pub const DRY_RUN_LAUNCH_TEMPLATE: &str = "nodewright-dry-run";

/// One of the calls a launch makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LaunchCall {
    /// `ec2:CreateLaunchTemplate`.
    CreateLaunchTemplate,
    /// `ec2:CreateFleet`.
    CreateFleet,
    /// `ec2:RunInstances` (which CreateFleet runs on the caller's behalf).
    RunInstances,
}

impl LaunchCall {
    /// The IAM action, e.g. `ec2:CreateFleet`.
    pub fn action(self) -> &'static str {
        match self {
            LaunchCall::CreateLaunchTemplate => "ec2:CreateLaunchTemplate",
            LaunchCall::CreateFleet => "ec2:CreateFleet",
            LaunchCall::RunInstances => "ec2:RunInstances",
        }
    }
}

/// What to dry-run: everything a launch of the class would send.
#[derive(Debug, Clone, PartialEq, Hash)]
pub struct DryRunRequest {
    /// The class (answers are cached per class).
    pub class_name: String,
    /// The image to boot.
    pub image_id: String,
    /// An instance type the image can boot.
    pub instance_type: String,
    /// The instance profile the instance gets.
    pub instance_profile: String,
    /// Subnets to try, in order (one per zone is enough).
    pub subnet_ids: Vec<String>,
    /// Security groups of the instance.
    pub security_group_ids: Vec<String>,
    /// Metadata service settings, defaults filled in.
    pub metadata_options: MetadataOptionsKey,
    /// Tags of the instance, its volumes, interfaces, fleet and template.
    pub tags: BTreeMap<String, String>,
}

/// The metadata options as plain values (hashable, cacheable).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MetadataOptionsKey {
    /// `enabled` or `disabled`.
    pub http_endpoint: &'static str,
    /// `enabled` or `disabled`.
    pub http_protocol_ipv6: &'static str,
    /// Hop limit.
    pub http_put_response_hop_limit: i32,
    /// `required` or `optional`.
    pub http_tokens: &'static str,
}

impl From<&MetadataOptions> for MetadataOptionsKey {
    fn from(options: &MetadataOptions) -> Self {
        let state = |s: Option<EnabledDisabled>, default| match s {
            Some(EnabledDisabled::Enabled) => "enabled",
            Some(EnabledDisabled::Disabled) => "disabled",
            None => default,
        };
        MetadataOptionsKey {
            http_endpoint: state(options.http_endpoint, "enabled"),
            http_protocol_ipv6: state(options.http_protocol_ipv6, "disabled"),
            http_put_response_hop_limit: options
                .http_put_response_hop_limit
                .and_then(|h| i32::try_from(h).ok())
                .unwrap_or(1),
            http_tokens: match options.http_tokens {
                Some(HttpTokens::Optional) => "optional",
                _ => "required",
            },
        }
    }
}

/// EC2's answer to the dry runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DryRunVerdict {
    /// Every call would have been allowed.
    Authorized,
    /// A call would have been refused for lack of permission.
    Unauthorized {
        /// The call.
        call: LaunchCall,
        /// EC2's message (it may name the policy that denied it).
        message: String,
    },
    /// `RunInstances` does not know the instance profile.
    InstanceProfileNotFound {
        /// EC2's message.
        message: String,
    },
    /// A call failed for another reason (a bad parameter, a mismatch
    /// between subnets and security groups, …).
    Rejected {
        /// The call.
        call: LaunchCall,
        /// The error.
        error: AwsError,
    },
}

/// Runs and caches the dry runs.
pub struct DryRunProvider {
    ec2: aws_sdk_ec2::Client,
    cache: moka::sync::Cache<(String, u64), DryRunVerdict>,
}

/// How one dry-run call ended.
enum Answer {
    Allowed,
    Verdict(DryRunVerdict),
}

impl DryRunProvider {
    /// A provider over `ec2` (real AWS, moto, or SDK mocks).
    pub fn new(ec2: aws_sdk_ec2::Client) -> Self {
        DryRunProvider {
            ec2,
            // Each answer lives VALIDATION_TTL; at most MAX_CACHED answers.
            cache: ttl_cache(VALIDATION_TTL, MAX_CACHED),
        }
    }

    /// EC2's verdict on `request`, from the cache when the same request was
    /// answered within [`VALIDATION_TTL`]. An error is a fault worth
    /// waiting out (throttling, a server error); nothing is cached then.
    pub async fn check(&self, request: &DryRunRequest) -> Result<DryRunVerdict, AwsError> {
        let key = (request.class_name.clone(), fingerprint(request));
        if let Some(hit) = self.cache.get(&key) {
            return Ok(hit);
        }
        let verdict = self.run(request).await?;
        if !matches!(verdict, DryRunVerdict::InstanceProfileNotFound { .. }) {
            self.cache.insert(key, verdict.clone());
        }
        Ok(verdict)
    }

    /// Forgets every answer about class `class_name` (it was deleted).
    pub fn forget(&self, class_name: &str) {
        for (key, _) in self.cache.iter() {
            if key.0 == class_name {
                self.cache.invalidate(key.as_ref());
            }
        }
    }

    async fn run(&self, request: &DryRunRequest) -> Result<DryRunVerdict, AwsError> {
        if let Answer::Verdict(v) = self.create_launch_template(request).await? {
            return Ok(v);
        }
        if let Answer::Verdict(v) = self.create_fleet(request).await? {
            return Ok(v);
        }
        if let Answer::Verdict(v) = self.run_instances(request).await? {
            return Ok(v);
        }
        Ok(DryRunVerdict::Authorized)
    }

    async fn create_launch_template(&self, request: &DryRunRequest) -> Result<Answer, AwsError> {
        let metadata = &request.metadata_options;
        let data = RequestLaunchTemplateData::builder()
            .image_id(&request.image_id)
            .instance_type(request.instance_type.as_str().into())
            .iam_instance_profile(
                LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                    .name(&request.instance_profile)
                    .build(),
            )
            .set_security_group_ids(Some(request.security_group_ids.clone()))
            .metadata_options(
                LaunchTemplateInstanceMetadataOptionsRequest::builder()
                    .http_endpoint(metadata.http_endpoint.into())
                    .http_protocol_ipv6(metadata.http_protocol_ipv6.into())
                    .http_put_response_hop_limit(metadata.http_put_response_hop_limit)
                    .http_tokens(metadata.http_tokens.into())
                    .build(),
            )
            .set_tag_specifications(Some(
                [ResourceType::Instance, ResourceType::Volume]
                    .into_iter()
                    .map(|resource| {
                        LaunchTemplateTagSpecificationRequest::builder()
                            .resource_type(resource)
                            .set_tags(Some(tags(&request.tags)))
                            .build()
                    })
                    .collect(),
            ))
            .build();
        let result = self
            .ec2
            .create_launch_template()
            .dry_run(true)
            .launch_template_name(DRY_RUN_LAUNCH_TEMPLATE)
            .launch_template_data(data)
            .tag_specifications(tag_specification(
                ResourceType::LaunchTemplate,
                &request.tags,
            ))
            .send()
            .await;
        answer(LaunchCall::CreateLaunchTemplate, result)
    }

    async fn create_fleet(&self, request: &DryRunRequest) -> Result<Answer, AwsError> {
        let overrides = request
            .subnet_ids
            .iter()
            .map(|subnet| {
                FleetLaunchTemplateOverridesRequest::builder()
                    .instance_type(request.instance_type.as_str().into())
                    .subnet_id(subnet)
                    .build()
            })
            .collect();
        let config = FleetLaunchTemplateConfigRequest::builder()
            .launch_template_specification(
                FleetLaunchTemplateSpecificationRequest::builder()
                    .launch_template_name(DRY_RUN_LAUNCH_TEMPLATE)
                    .version("$Latest")
                    .build(),
            )
            .set_overrides(Some(overrides))
            .build();
        let result = self
            .ec2
            .create_fleet()
            .dry_run(true)
            .r#type(FleetType::Instant)
            .target_capacity_specification(
                TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(1)
                    .default_target_capacity_type(DefaultTargetCapacityType::OnDemand)
                    .build(),
            )
            .launch_template_configs(config)
            .set_tag_specifications(Some(
                [
                    ResourceType::Fleet,
                    ResourceType::Instance,
                    ResourceType::Volume,
                ]
                .into_iter()
                .map(|resource| tag_specification(resource, &request.tags))
                .collect(),
            ))
            .send()
            .await;
        answer(LaunchCall::CreateFleet, result)
    }

    async fn run_instances(&self, request: &DryRunRequest) -> Result<Answer, AwsError> {
        let metadata = &request.metadata_options;
        let mut first: Option<Answer> = None;
        for subnet in &request.subnet_ids {
            let result = self
                .ec2
                .run_instances()
                .dry_run(true)
                .image_id(&request.image_id)
                .instance_type(request.instance_type.as_str().into())
                .min_count(1)
                .max_count(1)
                .iam_instance_profile(
                    IamInstanceProfileSpecification::builder()
                        .name(&request.instance_profile)
                        .build(),
                )
                .network_interfaces(
                    InstanceNetworkInterfaceSpecification::builder()
                        .device_index(0)
                        .subnet_id(subnet)
                        .set_groups(Some(request.security_group_ids.clone()))
                        .build(),
                )
                .metadata_options(
                    InstanceMetadataOptionsRequest::builder()
                        .http_endpoint(metadata.http_endpoint.into())
                        .http_protocol_ipv6(metadata.http_protocol_ipv6.into())
                        .http_put_response_hop_limit(metadata.http_put_response_hop_limit)
                        .http_tokens(metadata.http_tokens.into())
                        .build(),
                )
                .set_tag_specifications(Some(
                    [
                        ResourceType::Instance,
                        ResourceType::Volume,
                        ResourceType::NetworkInterface,
                    ]
                    .into_iter()
                    .map(|resource| tag_specification(resource, &request.tags))
                    .collect(),
                ))
                .send()
                .await;
            match run_instances_answer(result)? {
                Answer::Allowed => return Ok(Answer::Allowed),
                // A fault is waited out, not tried in every subnet.
                refused => {
                    if first.is_none() {
                        first = Some(refused);
                    }
                }
            }
        }
        Ok(first.unwrap_or(Answer::Allowed))
    }
}

/// The hash of everything a request sends.
fn fingerprint(request: &DryRunRequest) -> u64 {
    let mut hasher = DefaultHasher::new();
    request.hash(&mut hasher);
    hasher.finish()
}

fn tags(tags: &BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter()
        .map(|(key, value)| Tag::builder().key(key).value(value).build())
        .collect()
}

fn tag_specification(
    resource: ResourceType,
    values: &BTreeMap<String, String>,
) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(resource)
        .set_tags(Some(tags(values)))
        .build()
}

/// What a dry run's result means: `DryRunOperation` is allowed,
/// `UnauthorizedOperation` is refused, a fault is an error.
fn answer<O, E>(call: LaunchCall, result: Result<O, SdkError<E>>) -> Result<Answer, AwsError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let error = match result {
        // A dry run never succeeds; a service that ignores the flag allowed it.
        Ok(_) => return Ok(Answer::Allowed),
        Err(e) => AwsError::from_sdk(call.action(), &e),
    };
    if error.has_code("DryRunOperation") {
        return Ok(Answer::Allowed);
    }
    if error.is_transient() {
        return Err(error);
    }
    if error.has_code("UnauthorizedOperation") {
        return Ok(Answer::Verdict(DryRunVerdict::Unauthorized {
            call,
            message: error.message,
        }));
    }
    Ok(Answer::Verdict(DryRunVerdict::Rejected { call, error }))
}

/// [`answer`] for `RunInstances`, which also reports an unknown instance
/// profile (EC2: `InvalidParameterValue` … `Invalid IAM Instance Profile
/// name`; IAM-backed emulators: `NoSuchEntity`).
fn run_instances_answer<O, E>(result: Result<O, SdkError<E>>) -> Result<Answer, AwsError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match answer(LaunchCall::RunInstances, result)? {
        Answer::Verdict(DryRunVerdict::Rejected { error, .. })
            if (error.has_code("InvalidParameterValue")
                && error.message.contains("Invalid IAM Instance Profile name"))
                || error.has_code("NoSuchEntity") =>
        {
            Ok(Answer::Verdict(DryRunVerdict::InstanceProfileNotFound {
                message: error.message,
            }))
        }
        other => Ok(other),
    }
}
