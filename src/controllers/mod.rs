//! Controllers: reconcile loops over the cluster's objects, one module
//! each. `operator::Operator` starts them, all on one shared
//! [`ClusterState`]. [`Context`] is the EC2NodeClass status controller's
//! (subnets, security groups, instance profile, capacity reservations,
//! AMIs, extensions, dry-run validation, readiness).

pub mod disruption;
pub mod gauges;
pub mod interruption;
pub mod node;
pub mod nodeclaim;
pub mod nodeclass;
pub mod nodeoverlay;
pub mod nodepool;
pub mod provisioning;
pub mod recorder;
pub mod static_capacity;

use std::sync::Arc;

use self::recorder::Recorder;
use kube::runtime::events::Reporter;

use crate::aws::amis::AmiProvider;
use crate::aws::capacity_reservations::CapacityReservationProvider;
use crate::aws::clients::AwsClients;
use crate::aws::dry_run::DryRunProvider;
use crate::aws::instance_profile::InstanceProfileProvider;
use crate::aws::instance_types::InstanceTypeProvider;
use crate::aws::launch_template::LaunchTemplateProvider;
use crate::aws::placement_groups::PlacementGroupProvider;
use crate::aws::security_groups::SecurityGroupProvider;
use crate::aws::subnets::SubnetProvider;
use crate::cluster::ClusterState;

/// Settings of the controllers that come from flags.
#[derive(Debug, Clone, Default)]
pub struct ControllerSettings {
    /// `major.minor` of the cluster, for AMI alias paths.
    pub kubernetes_version: String,
    /// The cluster's name (`--cluster-name`): in instance profile names,
    /// paths and tags, and in the tags of launched resources.
    pub cluster_name: String,
    /// Skip the dry-run permission checks (`--disable-dry-run`).
    pub disable_dry_run: bool,
}

/// What the EC2NodeClass controller is made from before the cluster state
/// exists: its AWS clients and settings. The operator builds the
/// [`Context`] when it starts the controllers.
#[derive(Clone)]
pub struct NodeClassSetup {
    /// The AWS clients the class's providers call.
    pub clients: AwsClients,
    /// Settings from flags.
    pub settings: ControllerSettings,
}

/// The EC2NodeClass controllers' context: the AWS providers, and the
/// shared cluster state they read NodePools and ConfigMaps from.
pub struct Context {
    /// The API server.
    pub client: kube::Client,
    /// The shared cluster view (NodePools, ConfigMaps, NodeClaims).
    pub state: Arc<ClusterState>,
    /// Each NodePool's instance types: catalog, resolver, extensions.
    pub instance_types: Arc<InstanceTypeProvider>,
    /// Finds the images an EC2NodeClass selects.
    pub amis: AmiProvider,
    /// Finds the subnets an EC2NodeClass selects.
    pub subnets: SubnetProvider,
    /// Finds the security groups an EC2NodeClass selects.
    pub security_groups: SecurityGroupProvider,
    /// Finds the placement group an EC2NodeClass names.
    pub placement_groups: PlacementGroupProvider,
    /// Makes and finds instance profiles.
    pub instance_profiles: InstanceProfileProvider,
    /// Deletes a deleted class's launch templates.
    pub launch_templates: LaunchTemplateProvider,
    /// Finds capacity reservations and keeps their free counts (shared
    /// with `instance_types`).
    pub capacity_reservations: CapacityReservationProvider,
    /// Dry-runs the calls a launch makes.
    pub dry_run: DryRunProvider,
    /// `major.minor` of the cluster, for AMI alias paths.
    pub kubernetes_version: String,
    /// The cluster's name (`--cluster-name`).
    pub cluster_name: String,
    /// Skip the dry-run permission checks (`--disable-dry-run`).
    pub disable_dry_run: bool,
    /// Publishes events as `nodewright`.
    pub recorder: Recorder,
}

impl NodeClassSetup {
    /// The controller's context over `state`.
    pub fn context(
        &self,
        client: kube::Client,
        state: Arc<ClusterState>,
        instance_types: Arc<InstanceTypeProvider>,
    ) -> Context {
        Context::new(
            client,
            state,
            instance_types,
            &self.clients,
            self.settings.clone(),
        )
    }
}

impl Context {
    /// A context over `aws` and `state` whose events are reported by the
    /// `nodewright` controller. The capacity reservation provider keeps its
    /// free counts where `instance_types` reads them. A reconcile waits for
    /// `state`'s first lists, so its driver must be running.
    pub fn new(
        client: kube::Client,
        state: Arc<ClusterState>,
        instance_types: Arc<InstanceTypeProvider>,
        aws: &AwsClients,
        settings: ControllerSettings,
    ) -> Self {
        let reporter = Reporter {
            controller: "nodewright".to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let availability = instance_types.reservation_availability().clone();
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            state,
            amis: AmiProvider::new(aws.ec2.clone(), aws.ssm.clone()),
            subnets: SubnetProvider::new(aws.ec2.clone()),
            security_groups: SecurityGroupProvider::new(aws.ec2.clone()),
            placement_groups: PlacementGroupProvider::new(aws.ec2.clone()),
            instance_profiles: InstanceProfileProvider::new(aws.iam.clone()),
            launch_templates: LaunchTemplateProvider::new(aws.ec2.clone(), &settings.cluster_name),
            capacity_reservations: CapacityReservationProvider::new(aws.ec2.clone(), availability),
            dry_run: DryRunProvider::new(aws.ec2.clone()),
            instance_types,
            kubernetes_version: settings.kubernetes_version,
            cluster_name: settings.cluster_name,
            disable_dry_run: settings.disable_dry_run,
        }
    }

    /// The AWS region the controllers work in (the catalog's).
    pub fn region(&self) -> String {
        self.instance_types.catalog().region().to_string()
    }
}

/// Why a controller stopped or a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The API server refused or failed a request; retried with backoff.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// A cloud provider call failed; retried.
    #[error("cloud provider: {0}")]
    Cloud(#[from] crate::cloudprovider::CloudProviderError),
    /// Deleting a class's launch templates failed; retried.
    #[error("{0}")]
    LaunchTemplate(#[from] crate::aws::launch_template::LaunchTemplateError),
    /// Listing or deleting a class's instance profiles failed; retried.
    #[error("{0}")]
    InstanceProfile(#[from] crate::aws::instance_profile::InstanceProfileError),
    /// A blocking extension task panicked or was cancelled.
    #[error("extension task: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// A disruption command could not be carried out; the next pass decides again.
    #[error("disruption: {0}")]
    Disruption(String),
}

impl ControllerError {
    /// A write lost a race with another writer (409 Conflict): routine
    /// while objects change fast, and retried soon against the newer
    /// version rather than logged as a failure and backed off.
    pub fn is_conflict(&self) -> bool {
        matches!(self, ControllerError::Kube(kube::Error::Api(status)) if status.code == 409)
    }

    /// How soon a failed reconcile is retried: `backoff`, or one second
    /// after a conflict.
    pub fn retry_after(&self, backoff: std::time::Duration) -> std::time::Duration {
        if self.is_conflict() {
            std::time::Duration::from_secs(1)
        } else {
            backoff
        }
    }
}

/// `text` cut to at most `max` bytes on a character boundary (event notes
/// and condition messages have limits the API server enforces).
pub fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::core::Status;

    use super::ControllerError;

    fn api_error(code: u16) -> ControllerError {
        let status = Status::failure("refused", "Refused").with_code(code);
        ControllerError::Kube(kube::Error::Api(status.boxed()))
    }

    #[test]
    fn a_conflict_is_retried_soon_and_other_errors_after_the_backoff() {
        let backoff = Duration::from_secs(10);
        assert!(api_error(409).is_conflict());
        assert_eq!(api_error(409).retry_after(backoff), Duration::from_secs(1));
        for code in [404, 422, 500] {
            assert!(!api_error(code).is_conflict());
            assert_eq!(api_error(code).retry_after(backoff), backoff);
        }
    }
}
