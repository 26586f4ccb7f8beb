//! The AWS [`CloudProvider`]: launches a NodeClaim's instance with one
//! CreateFleet call, through launch templates built from the EC2NodeClass's
//! resolved status (as Karpenter reads it: `status.subnets`,
//! `securityGroups`, `instanceProfile`, `amis`, `capacityReservations`),
//! finds, lists and terminates instances, and says whether a node drifted.
//!
//! `create`: class status checked → an instance already launched for the
//! claim is returned as is (idempotency, besides CreateFleet's client
//! token: first from what this provider launched lately, as EC2 may not
//! list a fresh instance yet, then from DescribeInstances) → `launch_options` → launch filters and capacity type
//! ([`plan`](crate::aws::instance::plan)) → launch templates ensured →
//! CreateFleet (retried once if a template vanished) → the launched claim,
//! annotated with the class hash and instance profile as Karpenter does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sha2::{Digest, Sha256};

use crate::apis::labels::{
    CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL_KEY, CAPACITY_RESERVATION_TYPE_LABEL_KEY,
    CAPACITY_TYPE_LABEL_KEY, EC2_NODE_CLASS_LABEL_KEY, INSTANCE_PROFILE_ANNOTATION_KEY,
    INSTANCE_TENANCY_LABEL_KEY, INSTANCE_TYPE_LABEL_KEY, NODE_POOL_LABEL_KEY,
    PLACEMENT_GROUP_ID_LABEL_KEY, PLACEMENT_GROUP_PARTITION_LABEL_KEY, ZONE_ID_LABEL_KEY,
    ZONE_LABEL_KEY, is_restricted_tag,
};
use crate::apis::{EC2NodeClass, NodeClaim, NodeClaimStatus, NodePool};
use crate::aws::clients::AwsClients;
use crate::aws::instance::filter::ReservationKind;
use crate::aws::instance::plan::{self, LaunchPlan};
use crate::aws::instance::{
    FleetRequest, FleetTemplate, Instance, InstanceProvider, NODE_CLAIM_TAG_KEY,
};
use crate::aws::launch_template::{
    BuildError, CLUSTER_NAME_TAG_KEY, LaunchSettings, LaunchTemplateProvider, ReservationTarget,
    TemplateChoice, build_spec, dedicated_only,
};
use crate::cloudprovider::launch::{Launched, image_for, launch_options, launched_node_claim};
use crate::cloudprovider::{
    CloudProvider, CloudProviderError, DriftReason, InstanceTypeSource, LaunchableTypes,
    NodeClassContext, PlacementScope, ProviderId, Registration, RepairPolicy, UnavailableOfferings,
    launchable_off_thread, node_class_hash_drifted, placement_group_drifted,
    placement_group_labels, stamp_node_class_hash, targeted_partition,
};
use crate::scheduling::{InstanceType, Offering, node_pool::node_claim_requirements};

mod drift;

pub use drift::instance_drift;

/// The AWS cloud provider.
pub struct AwsCloudProvider {
    types: Arc<dyn InstanceTypeSource>,
    settings: LaunchSettings,
    templates: LaunchTemplateProvider,
    instances: InstanceProvider,
    /// What was launched lately, by claim (see [`launch_key`]), for
    /// [`RECENT_LAUNCHES_TTL`]: a create retried before the claim's status
    /// was written (a conflicting write, say) returns the same launch even
    /// while EC2 does not list the instance yet (its eventual consistency),
    /// where DescribeInstances would find nothing and a second instance be
    /// launched.
    recent: moka::sync::Cache<String, NodeClaim>,
}

/// How long a launch is remembered: far longer than EC2 takes to list a
/// new instance and than a claim's status takes to be written.
pub const RECENT_LAUNCHES_TTL: std::time::Duration = std::time::Duration::from_secs(300);

/// What a launch is remembered by: the claim's name and UID (a claim made
/// again under the same name is another claim).
fn launch_key(claim: &NodeClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.name.as_deref().unwrap_or_default(),
        claim.metadata.uid.as_deref().unwrap_or_default()
    )
}

impl AwsCloudProvider {
    /// A provider launching with `clients`, serving instance types from
    /// `types`, recording capacity errors in `unavailable` (the cache `types`
    /// reads), for the cluster `settings` describe.
    pub fn new(
        clients: AwsClients,
        types: Arc<dyn InstanceTypeSource>,
        unavailable: Arc<UnavailableOfferings>,
        settings: LaunchSettings,
    ) -> Self {
        AwsCloudProvider {
            templates: LaunchTemplateProvider::new(clients.ec2.clone(), &settings.cluster_name),
            instances: InstanceProvider::new(clients.ec2, &settings.cluster_name, unavailable),
            types,
            settings,
            recent: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(RECENT_LAUNCHES_TTL)
                .build(),
        }
    }

    /// The launch templates (for the garbage collector and the class finalizer).
    pub fn launch_templates(&self) -> &LaunchTemplateProvider {
        &self.templates
    }

    /// The instances.
    pub fn instances(&self) -> &InstanceProvider {
        &self.instances
    }

    async fn launchable(
        &self,
        pool: String,
        class: &NodeClassContext,
    ) -> Result<Arc<LaunchableTypes>, CloudProviderError> {
        launchable_off_thread(&self.types, pool, class).await
    }

    /// Tags of the launch templates: `spec.tags` and the cluster, class and
    /// pool tags. Restricted keys in `spec.tags` make the class not ready.
    fn template_tags(
        &self,
        class: &EC2NodeClass,
        pool: &str,
    ) -> Result<BTreeMap<String, String>, CloudProviderError> {
        let user = class.spec.tags.clone().unwrap_or_default();
        let restricted: Vec<&String> = user.keys().filter(|k| is_restricted_tag(k)).collect();
        if !restricted.is_empty() {
            return Err(CloudProviderError::NodeClassNotReady {
                node_class: class.metadata.name.clone().unwrap_or_default(),
                reason: format!(
                    "spec.tags sets tags nodewright owns ({restricted:?}); remove them"
                ),
            });
        }
        let cluster = &self.settings.cluster_name;
        let mut tags = user;
        tags.insert(
            format!("kubernetes.io/cluster/{cluster}"),
            "owned".to_string(),
        );
        tags.insert(CLUSTER_NAME_TAG_KEY.to_string(), cluster.clone());
        tags.insert(
            EC2_NODE_CLASS_LABEL_KEY.to_string(),
            class.metadata.name.clone().unwrap_or_default(),
        );
        tags.insert(NODE_POOL_LABEL_KEY.to_string(), pool.to_string());
        Ok(tags)
    }

    async fn ensure_templates(
        &self,
        class: &EC2NodeClass,
        claim: &NodeClaim,
        launch: &LaunchPlan,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<FleetTemplate>, CloudProviderError> {
        let node_class = class.metadata.name.clone().unwrap_or_default();
        let mut out = Vec::new();
        for planned in &launch.templates {
            let reservation = planned.reservation_id.as_ref().map(|id| ReservationTarget {
                id: id.clone(),
                capacity_block: launch.reservation_kind == Some(ReservationKind::CapacityBlock),
                interruptible: launch.reservation_kind == Some(ReservationKind::Interruptible),
            });
            let choice = TemplateChoice {
                capacity_type: launch.capacity_type.label_value(),
                image_id: &planned.image_id,
                max_pods: planned.max_pods,
                reservation,
                tags,
            };
            let spec = build_spec(class, claim, &self.settings, &choice).map_err(|e| match e {
                BuildError::MissingStatus(_)
                | BuildError::NoAmiFamily
                | BuildError::UserData(_) => CloudProviderError::NodeClassNotReady {
                    node_class: node_class.clone(),
                    reason: e.to_string(),
                },
            })?;
            let template =
                self.templates
                    .ensure(&spec)
                    .await
                    .map_err(|e| CloudProviderError::Api {
                        operation: e.operation,
                        source: Box::new(e),
                    })?;
            out.push(FleetTemplate {
                name: template.name,
                overrides: planned.overrides.clone(),
            });
        }
        Ok(out)
    }

    /// `claim` as the instance it got.
    fn launched(
        claim: &NodeClaim,
        class: &EC2NodeClass,
        instance_type: Option<&InstanceType>,
        offering: &Offering,
        instance_id: &str,
        image_id: &str,
        partition: Option<i32>,
    ) -> NodeClaim {
        let provider_id = ProviderId::new(&offering.zone, instance_id);
        let mut out = match instance_type {
            Some(it) => launched_node_claim(
                claim,
                &Launched {
                    instance_type: it,
                    offering,
                    provider_id: provider_id.clone(),
                    image_id: image_id.to_string(),
                },
            ),
            None => claim.clone(),
        };
        let labels = out.metadata.labels.get_or_insert_with(BTreeMap::new);
        if instance_type.is_none() {
            labels.insert(ZONE_LABEL_KEY.to_string(), offering.zone.clone());
            labels.insert(
                CAPACITY_TYPE_LABEL_KEY.to_string(),
                offering.capacity_type.label_value().to_string(),
            );
        }
        if let Some(zone_id) = class
            .status
            .as_ref()
            .and_then(|s| s.subnets.as_ref())
            .and_then(|subnets| subnets.iter().find(|s| s.zone == offering.zone))
            .and_then(|s| s.zone_id.clone())
        {
            labels.insert(ZONE_ID_LABEL_KEY.to_string(), zone_id);
        }
        labels.insert(
            INSTANCE_TENANCY_LABEL_KEY.to_string(),
            if dedicated_only(claim) {
                "dedicated"
            } else {
                "default"
            }
            .to_string(),
        );
        if let Some(id) = &offering.reservation_id {
            let kind = plan::reservation_kinds(class)
                .get(id)
                .copied()
                .unwrap_or(ReservationKind::Default);
            labels.insert(
                CAPACITY_RESERVATION_TYPE_LABEL_KEY.to_string(),
                if kind == ReservationKind::CapacityBlock {
                    "capacity-block"
                } else {
                    "default"
                }
                .to_string(),
            );
            labels.insert(
                CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL_KEY.to_string(),
                (kind == ReservationKind::Interruptible).to_string(),
            );
        }
        // The partition targeted, or "" until `before_registration` reads
        // the one EC2 picked.
        for (key, value) in placement_group_labels(class, partition) {
            labels.insert(key.to_string(), value);
        }
        let status = out.status.get_or_insert_with(NodeClaimStatus::default);
        status.provider_id = Some(provider_id.to_string());
        status.image_id = Some(image_id.to_string());
        stamp_node_class_hash(&mut out, class);
        let annotations = out.metadata.annotations.get_or_insert_with(BTreeMap::new);
        if let Some(profile) = class
            .status
            .as_ref()
            .and_then(|s| s.instance_profile.clone())
        {
            annotations.insert(INSTANCE_PROFILE_ANNOTATION_KEY.to_string(), profile);
        }
        out
    }

    /// The claim for an instance launched for it earlier (a retried create).
    async fn already_launched(
        &self,
        claim: &NodeClaim,
        class: &NodeClassContext,
        pool: &str,
        instance: &Instance,
    ) -> Result<NodeClaim, CloudProviderError> {
        let launchable = self.launchable(pool.to_string(), class).await?;
        let instance_type = launchable
            .instance_types
            .iter()
            .find(|it| it.name == instance.instance_type);
        let mut offering = Offering::new(&instance.zone, instance.capacity_type, 0.0);
        offering.reservation_id = instance.capacity_reservation_id.clone();
        let mut out = Self::launched(
            claim,
            &class.class,
            instance_type,
            &offering,
            &instance.id,
            instance.image_id.as_deref().unwrap_or_default(),
            instance.partition_number,
        );
        out.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(
                INSTANCE_TYPE_LABEL_KEY.to_string(),
                instance.instance_type.clone(),
            );
        Ok(out)
    }
}

/// The idempotency token of `claim`'s launch: a hash of its UID (its name
/// when it has none) and of what `request` asks for. A retry of the same
/// launch reuses the token, so EC2 launches nothing new; a launch that
/// changed (an offering marked unavailable since, a new AMI) gets a new one
/// instead of EC2's `IdempotentParameterMismatch`.
pub fn client_token(claim: &NodeClaim, request: &FleetRequest) -> String {
    let identity = claim
        .metadata
        .uid
        .as_deref()
        .filter(|u| !u.is_empty())
        .or(claim.metadata.name.as_deref())
        .unwrap_or_default();
    let mut hasher = Sha256::new();
    hasher.update(identity.as_bytes());
    hasher.update(request.capacity_type.label_value().as_bytes());
    hasher.update(request.context.as_deref().unwrap_or_default().as_bytes());
    for template in &request.templates {
        hasher.update(format!("\n{}", template.name).as_bytes());
        for o in &template.overrides {
            hasher.update(
                format!(
                    "\n{} {} {} {} {:?}",
                    o.instance_type, o.zone, o.subnet_id, o.image_id, o.priority
                )
                .as_bytes(),
            );
        }
    }
    let digest = hasher.finalize();
    let hex: String = digest[..20].iter().map(|b| format!("{b:02x}")).collect();
    format!("nodewright-{hex}")
}

/// What the launch path needs from the class status, or which field is missing.
fn check_status(class: &EC2NodeClass) -> Result<(), CloudProviderError> {
    let status = class.status.clone().unwrap_or_default();
    let missing = if status.subnets.as_ref().is_none_or(Vec::is_empty) {
        Some("status.subnets")
    } else if status.security_groups.as_ref().is_none_or(Vec::is_empty) {
        Some("status.securityGroups")
    } else if status
        .instance_profile
        .as_ref()
        .is_none_or(String::is_empty)
    {
        Some("status.instanceProfile")
    } else if status.amis.as_ref().is_none_or(Vec::is_empty) {
        Some("status.amis")
    } else if class
        .spec
        .capacity_reservation_selector_terms
        .as_ref()
        .is_some_and(|terms| !terms.is_empty())
        && status.capacity_reservations.is_none()
    {
        Some("status.capacityReservations")
    } else if class.spec.placement_group_selector.is_some() && status.placement_group.is_none() {
        Some("status.placementGroup")
    } else {
        None
    };
    match missing {
        Some(field) => Err(CloudProviderError::NodeClassNotReady {
            node_class: class.metadata.name.clone().unwrap_or_default(),
            reason: format!("{field} is empty: the EC2NodeClass has not been resolved yet"),
        }),
        None => Ok(()),
    }
}

fn pool_of(claim: &NodeClaim) -> String {
    claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NODE_POOL_LABEL_KEY).cloned())
        .unwrap_or_default()
}

/// An instance as a NodeClaim, for `get` and `list`: named after its
/// `karpenter.sh/nodeclaim` tag, labelled with its type, zone, capacity
/// type, pool and class; capacity is not known here.
pub fn instance_node_claim(instance: &Instance) -> NodeClaim {
    let mut labels = BTreeMap::new();
    labels.insert(
        INSTANCE_TYPE_LABEL_KEY.to_string(),
        instance.instance_type.clone(),
    );
    labels.insert(ZONE_LABEL_KEY.to_string(), instance.zone.clone());
    labels.insert(
        CAPACITY_TYPE_LABEL_KEY.to_string(),
        instance.capacity_type.label_value().to_string(),
    );
    if let Some(zone_id) = &instance.zone_id {
        labels.insert(ZONE_ID_LABEL_KEY.to_string(), zone_id.clone());
    }
    for key in [NODE_POOL_LABEL_KEY, EC2_NODE_CLASS_LABEL_KEY] {
        if let Some(value) = instance.tags.get(key) {
            labels.insert(key.to_string(), value.clone());
        }
    }
    let class = instance
        .tags
        .get(EC2_NODE_CLASS_LABEL_KEY)
        .cloned()
        .unwrap_or_default();
    let mut claim: NodeClaim = NodeClaim::new(
        instance
            .tags
            .get(NODE_CLAIM_TAG_KEY)
            .map_or("", String::as_str),
        crate::apis::nodeclaim::NodeClaimSpec {
            taints: None,
            startup_taints: None,
            requirements: Vec::new(),
            resources: None,
            node_class_ref: crate::apis::nodeclaim::NodeClassReference {
                kind: "EC2NodeClass".to_string(),
                name: class,
                group: crate::apis::labels::AWS_GROUP.to_string(),
            },
            termination_grace_period: None,
            expire_after: None,
        },
    );
    if claim.metadata.name.as_deref() == Some("") {
        claim.metadata.name = None;
    }
    claim.metadata.labels = Some(labels);
    let time = |seconds: i64| {
        k8s_openapi::jiff::Timestamp::from_second(seconds)
            .ok()
            .map(Time)
    };
    claim.metadata.creation_timestamp = instance.launch_time.and_then(time);
    if instance.is_terminating() {
        claim.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    }
    claim.status = Some(NodeClaimStatus {
        provider_id: Some(ProviderId::new(&instance.zone, &instance.id).to_string()),
        image_id: instance.image_id.clone(),
        ..NodeClaimStatus::default()
    });
    claim
}

#[async_trait]
impl CloudProvider for AwsCloudProvider {
    fn name(&self) -> &'static str {
        "aws"
    }

    async fn create(
        &self,
        claim: &NodeClaim,
        class: &NodeClassContext,
    ) -> Result<NodeClaim, CloudProviderError> {
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        if claim_name.is_empty() {
            return Err(CloudProviderError::Create {
                reason: "InvalidNodeClaim",
                message: "the NodeClaim has no metadata.name".to_string(),
                source: None,
            });
        }
        check_status(&class.class)?;
        if let Some(launched) = self.recent.get(&launch_key(claim)) {
            tracing::debug!(node_claim = %claim_name, "launched lately; returning that launch");
            return Ok(launched);
        }
        let pool = pool_of(claim);
        let template_tags = self.template_tags(&class.class, &pool)?;
        if let Some(instance) = self.instances.find_by_node_claim(&claim_name).await? {
            tracing::debug!(node_claim = %claim_name, instance = %instance.id, "instance already launched");
            return self.already_launched(claim, class, &pool, &instance).await;
        }
        let launchable = self.launchable(pool.clone(), class).await?;
        let options = launch_options(claim, class.name(), &launchable)?;
        let has_min_values = node_claim_requirements(claim)
            .map(|r| r.iter().any(|req| req.min_values.is_some()))
            .unwrap_or(false);
        let launch = plan::plan(&class.class, options, has_min_values)?;
        for rejected in &launch.rejected {
            tracing::debug!(filter = rejected.filter, instance_types = ?rejected.instance_types, "filtered out instance types from launch");
        }
        let mut instance_tags = template_tags.clone();
        instance_tags.insert(NODE_CLAIM_TAG_KEY.to_string(), claim_name.clone());
        let mut request = FleetRequest {
            capacity_type: launch.capacity_type,
            reservation_kind: launch.reservation_kind,
            templates: self
                .ensure_templates(&class.class, claim, &launch, &template_tags)
                .await?,
            prioritized: launch.prioritized,
            tags: instance_tags,
            client_token: String::new(),
            context: class
                .class
                .spec
                .context
                .clone()
                .filter(|_| !min_values_relaxed(claim)),
            placement: class
                .class
                .status
                .as_ref()
                .and_then(|s| s.placement_group.as_ref())
                .map(|group| PlacementScope {
                    group_id: group.id.clone(),
                    partition: targeted_partition(claim),
                }),
        };
        request.client_token = client_token(claim, &request);
        let outcome = match self.instances.create_fleet(&request).await {
            Err(e) if e.is_launch_template_not_found() => {
                // Deleted behind our back while cached: create it again, once.
                for template in &request.templates {
                    self.templates.invalidate(&template.name);
                }
                request.templates = self
                    .ensure_templates(&class.class, claim, &launch, &template_tags)
                    .await?;
                self.instances.create_fleet(&request).await
            }
            other => other,
        }
        .map_err(|e| CloudProviderError::Create {
            reason: "FleetRequestFailed",
            message: format!("creating fleet request: {e}"),
            source: Some(Box::new(e)),
        })?;
        let Some(launched) = outcome.instance else {
            let refused =
                crate::aws::instance::unavailable_offerings(&outcome.errors, launch.capacity_type);
            let codes: BTreeSet<String> = outcome
                .errors
                .iter()
                .map(|e| format!("{}: {}", e.code, e.message))
                .collect();
            let summary = codes.into_iter().collect::<Vec<_>>().join("; ");
            if !outcome.errors.is_empty()
                && outcome.errors.iter().all(|e| e.is_unfulfillable_capacity())
            {
                return Err(CloudProviderError::InsufficientCapacity {
                    offerings: refused,
                    source: Some(summary.into()),
                });
            }
            return Err(CloudProviderError::Create {
                reason: "LaunchFailed",
                message: if summary.is_empty() {
                    "CreateFleet launched no instance and reported no error".to_string()
                } else {
                    format!("CreateFleet launched no instance: {summary}")
                },
                source: None,
            });
        };
        let zone = launched
            .zone
            .clone()
            .or_else(|| {
                request.templates.iter().find_map(|t| {
                    t.overrides
                        .iter()
                        .find(|o| o.instance_type == launched.instance_type)
                        .map(|o| o.zone.clone())
                })
            })
            .unwrap_or_default();
        let (option, offering) =
            launch
                .offering(&launched.instance_type, &zone)
                .ok_or_else(|| CloudProviderError::Create {
                    reason: "LaunchFailed",
                    message: format!(
                        "CreateFleet launched {} ({} in {zone}), which was not requested",
                        launched.instance_id, launched.instance_type
                    ),
                    source: None,
                })?;
        let image_id = request
            .find(&launched.instance_type, &zone)
            .map(|(_, o)| o.image_id.clone())
            .unwrap_or_default();
        let out = Self::launched(
            claim,
            &class.class,
            Some(&option.instance_type),
            offering,
            &launched.instance_id,
            &image_id,
            targeted_partition(claim),
        );
        self.recent.insert(launch_key(claim), out.clone());
        Ok(out)
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<(), CloudProviderError> {
        let id = ProviderId::of_claim(claim)?;
        self.instances.terminate(id.instance_id()).await
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        let id = ProviderId::parse(provider_id).ok_or_else(|| CloudProviderError::NotFound {
            provider_id: provider_id.to_string(),
            source: Some("not an aws:///<zone>/<instance-id> provider ID".into()),
        })?;
        let instance = self.instances.get(id.instance_id()).await?;
        Ok(instance_node_claim(&instance))
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        Ok(self
            .instances
            .list()
            .await?
            .iter()
            .map(instance_node_claim)
            .collect())
    }

    async fn instance_types(
        &self,
        pool: &NodePool,
        class: &NodeClassContext,
    ) -> Result<Arc<LaunchableTypes>, CloudProviderError> {
        self.launchable(pool.metadata.name.clone().unwrap_or_default(), class)
            .await
    }

    async fn is_drifted(
        &self,
        claim: &NodeClaim,
        class: &NodeClassContext,
    ) -> Result<Option<DriftReason>, CloudProviderError> {
        if node_class_hash_drifted(claim, &class.class) {
            return Ok(Some(DriftReason::NodeClassDrift));
        }
        let Some(provider_id) = claim.status.as_ref().and_then(|s| s.provider_id.clone()) else {
            return Ok(None);
        };
        if self.ami_drifted(claim, class).await? {
            return Ok(Some(DriftReason::AmiDrift));
        }
        let id = ProviderId::parse(&provider_id).ok_or_else(|| CloudProviderError::NotFound {
            provider_id: provider_id.clone(),
            source: Some("not an aws:///<zone>/<instance-id> provider ID".into()),
        })?;
        let instance = self.instances.get(id.instance_id()).await?;
        if let Some(reason) = instance_drift(&instance, &class.class)? {
            return Ok(Some(reason));
        }
        Ok(
            placement_group_drifted(claim, &class.class)
                .then_some(DriftReason::PlacementGroupDrift),
        )
    }

    fn repair_policies(&self) -> Vec<RepairPolicy> {
        crate::cloudprovider::repair_policies()
    }

    /// Karpenter's placement group registration hook: a NodeClaim launched
    /// into a partition group without a targeted partition waits until
    /// DescribeInstances says which partition EC2 picked, so topology
    /// spread over `karpenter.k8s.aws/placement-group-partition` never sees
    /// a node without it.
    async fn before_registration(
        &self,
        claim: &mut NodeClaim,
    ) -> Result<Registration, CloudProviderError> {
        let label = |key: &str| claim.metadata.labels.as_ref().and_then(|l| l.get(key));
        if label(PLACEMENT_GROUP_ID_LABEL_KEY).is_none()
            || label(PLACEMENT_GROUP_PARTITION_LABEL_KEY).is_none_or(|p| !p.is_empty())
        {
            return Ok(Registration::Proceed);
        }
        if claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_ref())
            .is_none()
        {
            return Ok(Registration::Wait(
                "waiting for the launched instance's provider ID to read its placement group partition"
                    .to_string(),
            ));
        }
        let id = ProviderId::of_claim(claim)?;
        let instance = self.instances.get(id.instance_id()).await?;
        let Some(partition) = instance.partition_number else {
            return Ok(Registration::Wait(format!(
                "waiting for EC2 to report the placement group partition of {}",
                instance.id
            )));
        };
        claim
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(
                PLACEMENT_GROUP_PARTITION_LABEL_KEY.to_string(),
                partition.to_string(),
            );
        Ok(Registration::Proceed)
    }
}

impl AwsCloudProvider {
    /// Whether the claim's image is not the one the class would boot on its
    /// instance type today. A type the pool no longer offers is not judged.
    async fn ami_drifted(
        &self,
        claim: &NodeClaim,
        class: &NodeClassContext,
    ) -> Result<bool, CloudProviderError> {
        let Some(image) = claim.status.as_ref().and_then(|s| s.image_id.clone()) else {
            return Ok(false);
        };
        if class
            .class
            .status
            .as_ref()
            .and_then(|s| s.amis.as_ref())
            .is_none_or(Vec::is_empty)
        {
            return Err(CloudProviderError::NodeClassNotReady {
                node_class: class.name().to_string(),
                reason: "status.amis is empty: the EC2NodeClass has not been resolved yet"
                    .to_string(),
            });
        }
        let Some(type_name) = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(INSTANCE_TYPE_LABEL_KEY).cloned())
        else {
            return Ok(false);
        };
        let launchable = self.launchable(pool_of(claim), class).await?;
        let Some(instance_type) = launchable
            .instance_types
            .iter()
            .find(|it| it.name == type_name)
        else {
            return Ok(false);
        };
        Ok(image_for(&class.class, instance_type).is_none_or(|ami| ami.id != image))
    }
}

fn min_values_relaxed(claim: &NodeClaim) -> bool {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::apis::labels::NODE_CLAIM_MIN_VALUES_RELAXED_ANNOTATION_KEY))
        .is_some_and(|v| v == "true")
}

#[cfg(test)]
mod tests;
