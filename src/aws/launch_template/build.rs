//! From an EC2NodeClass (its spec and resolved status), a NodeClaim and the
//! launch's choices (capacity type, AMI, pods per node, reservation) to the
//! launch template that launch needs.

use std::collections::BTreeMap;

use base64::Engine;

use super::user_data::{self, BootstrapInput, UserDataError};
use super::{LaunchSettings, LaunchTemplateSpec, ReservationTarget, default_block_device_mappings};
use crate::apis::RequirementOperator;
use crate::apis::ec2nodeclass::PlacementGroupStrategy;
use crate::apis::labels::INSTANCE_TENANCY_LABEL_KEY;
use crate::apis::{EC2NodeClass, NodeClaim};
use crate::cloudprovider::targeted_partition;

/// Why a class cannot produce a launch template; each names its field.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The class status lacks what a launch needs.
    #[error("status.{0} is empty: the EC2NodeClass has not been resolved yet")]
    MissingStatus(&'static str),
    /// The class has no AMI family and no alias.
    #[error("spec.amiFamily is required when amiSelectorTerms has no alias")]
    NoAmiFamily,
    /// User data could not be rendered.
    #[error(transparent)]
    UserData(#[from] UserDataError),
}

/// The choices of one launch that shape its templates.
#[derive(Debug, Clone)]
pub struct TemplateChoice<'a> {
    /// `on-demand`, `spot` or `reserved`.
    pub capacity_type: &'a str,
    /// AMI.
    pub image_id: &'a str,
    /// Pods per node of the instance types this template serves.
    pub max_pods: Option<i64>,
    /// The reservation a reserved launch targets.
    pub reservation: Option<ReservationTarget>,
    /// Tags of the template (and of the interfaces it creates).
    pub tags: &'a BTreeMap<String, String>,
}

/// The launch template `claim` needs from `class` for `choice`.
pub fn build_spec(
    class: &EC2NodeClass,
    claim: &NodeClaim,
    settings: &LaunchSettings,
    choice: &TemplateChoice<'_>,
) -> Result<LaunchTemplateSpec, BuildError> {
    let spec = &class.spec;
    let status = class.status.clone().unwrap_or_default();
    let family = spec.effective_ami_family().ok_or(BuildError::NoAmiFamily)?;
    let instance_profile = status
        .instance_profile
        .filter(|p| !p.is_empty())
        .ok_or(BuildError::MissingStatus("instanceProfile"))?;
    let security_group_ids: Vec<String> = status
        .security_groups
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.id)
        .collect();
    if security_group_ids.is_empty() {
        return Err(BuildError::MissingStatus("securityGroups"));
    }
    let claim_labels = claim.metadata.labels.clone().unwrap_or_default();
    let taints = user_data::registration_taints(
        claim.spec.taints.as_deref().unwrap_or_default(),
        claim.spec.startup_taints.as_deref().unwrap_or_default(),
    );
    let input = BootstrapInput {
        family,
        settings,
        kubelet: spec.kubelet.as_ref(),
        max_pods: choice.max_pods,
        labels: user_data::node_labels(&claim_labels, choice.capacity_type, family),
        taints,
        custom: spec.user_data.as_deref(),
        instance_store_raid0: spec.instance_store_policy.is_some(),
    };
    let user_data = user_data::render(&input)?;
    let block_device_mappings = match spec.block_device_mappings.as_ref() {
        Some(mappings) if !mappings.is_empty() => mappings.clone(),
        _ => default_block_device_mappings(family),
    };
    Ok(LaunchTemplateSpec {
        node_class: class.metadata.name.clone().unwrap_or_default(),
        image_id: choice.image_id.to_string(),
        instance_profile,
        security_group_ids,
        user_data: base64::engine::general_purpose::STANDARD.encode(user_data),
        block_device_mappings,
        metadata_options: spec.effective_metadata_options(),
        detailed_monitoring: spec.detailed_monitoring.unwrap_or(false),
        associate_public_ip_address: spec.associate_public_ip_address,
        ip_prefix_count: spec.ip_prefix_count,
        network_interfaces: spec.network_interfaces.clone().unwrap_or_default(),
        connection_tracking: spec.connection_tracking.clone(),
        cpu_options: spec.cpu_options.clone(),
        ip_family: settings.ip_family,
        capacity_type: choice.capacity_type.to_string(),
        reservation: choice.reservation.clone(),
        dedicated_tenancy: dedicated_only(claim),
        placement_group_id: status.placement_group.as_ref().map(|g| g.id.clone()),
        placement_group_partition: status
            .placement_group
            .as_ref()
            .filter(|g| g.strategy == PlacementGroupStrategy::Partition)
            .and_then(|_| targeted_partition(claim)),
        tags: choice.tags.clone(),
    })
}

/// Whether the NodeClaim allows dedicated tenancy and not the default.
pub fn dedicated_only(claim: &NodeClaim) -> bool {
    claim
        .spec
        .requirements
        .iter()
        .find(|r| r.key == INSTANCE_TENANCY_LABEL_KEY)
        .is_some_and(|r| {
            r.operator == RequirementOperator::In
                && r.values().iter().any(|v| v == "dedicated")
                && !r.values().iter().any(|v| v == "default")
        })
}
