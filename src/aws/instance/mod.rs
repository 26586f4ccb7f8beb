//! EC2 instances: launch one with CreateFleet, find it again with
//! DescribeInstances, terminate it. Capacity errors in a fleet answer mark
//! the offering unavailable in the shared [`UnavailableOfferings`] cache.

pub mod filter;
pub mod fleet;
pub mod plan;

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::{
    CapacityReservationPreference, Filter, InstanceLifecycleType, InstanceStateName,
};

pub use fleet::{
    FleetError, FleetInstance, FleetOutcome, FleetOverride, FleetRequest, FleetTemplate,
};

use crate::apis::labels::NODE_POOL_LABEL_KEY;
use crate::aws::errors::ServiceFailure;
use crate::aws::launch_template::{CLUSTER_NAME_TAG_KEY, tag_filter};
use crate::cloudprovider::{
    BoxError, CloudProviderError, OfferingKey, PlacementScope, UnavailableOfferings,
};
use crate::scheduling::CapacityType;

/// The tag holding the NodeClaim an instance was launched for.
pub const NODE_CLAIM_TAG_KEY: &str = "karpenter.sh/nodeclaim";

/// An EC2 instance as the launch path reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// `i-…`.
    pub id: String,
    /// Instance type.
    pub instance_type: String,
    /// Availability zone.
    pub zone: String,
    /// Availability zone id.
    pub zone_id: Option<String>,
    /// The AMI it booted.
    pub image_id: Option<String>,
    /// Its subnet.
    pub subnet_id: Option<String>,
    /// Its security groups.
    pub security_group_ids: Vec<String>,
    /// Spot, reserved (launched targeting a reservation), or on-demand
    /// (which includes an instance that landed in an open reservation).
    pub capacity_type: CapacityType,
    /// The reservation of a reserved instance.
    pub capacity_reservation_id: Option<String>,
    /// `pending`, `running`, `shutting-down`, `terminated`, `stopping`, `stopped`.
    pub state: String,
    /// Launch time, seconds since the epoch.
    pub launch_time: Option<i64>,
    /// The partition of a partition placement group it runs in (EC2 says
    /// 0 or nothing otherwise).
    pub partition_number: Option<i32>,
    /// Tags.
    pub tags: BTreeMap<String, String>,
}

impl Instance {
    /// Reads an EC2 instance; `None` without an id.
    pub fn from_ec2(instance: &aws_sdk_ec2::types::Instance) -> Option<Self> {
        let id = instance.instance_id()?.to_string();
        let placement = instance.placement();
        let spot = instance.spot_instance_request_id().is_some()
            || instance.instance_lifecycle() == Some(&InstanceLifecycleType::Spot);
        // Only a launch that targeted its reservation is `reserved` (Karpenter
        // v1.4): one that landed in an open reservation is on-demand, so
        // taking that reservation out of the class is no drift.
        let targeted = instance
            .capacity_reservation_specification()
            .and_then(|s| s.capacity_reservation_preference())
            == Some(&CapacityReservationPreference::CapacityReservationsOnly);
        let reservation = instance
            .capacity_reservation_id()
            .filter(|_| targeted && !spot)
            .map(str::to_string);
        let capacity_type = if spot {
            CapacityType::Spot
        } else if reservation.is_some() {
            CapacityType::Reserved
        } else {
            CapacityType::OnDemand
        };
        Some(Instance {
            id,
            instance_type: instance
                .instance_type()
                .map(|t| t.as_str().to_string())
                .unwrap_or_default(),
            zone: placement
                .and_then(|p| p.availability_zone())
                .unwrap_or_default()
                .to_string(),
            zone_id: placement
                .and_then(|p| p.availability_zone_id())
                .map(str::to_string),
            image_id: instance.image_id().map(str::to_string),
            subnet_id: instance.subnet_id().map(str::to_string),
            security_group_ids: instance
                .security_groups()
                .iter()
                .filter_map(|g| g.group_id().map(str::to_string))
                .collect(),
            capacity_type,
            capacity_reservation_id: reservation,
            state: instance
                .state()
                .and_then(|s| s.name())
                .map(|n| n.as_str().to_string())
                .unwrap_or_default(),
            launch_time: instance.launch_time().map(|t| t.secs()),
            partition_number: placement
                .and_then(|p| p.partition_number())
                .filter(|n| *n != 0),
            tags: instance
                .tags()
                .iter()
                .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
                .collect(),
        })
    }

    /// `shutting-down` or `terminated`.
    pub fn is_terminating(&self) -> bool {
        self.state == "shutting-down" || self.state == "terminated"
    }
}

/// Launches, finds and terminates the cluster's instances.
pub struct InstanceProvider {
    ec2: aws_sdk_ec2::Client,
    cluster_name: String,
    unavailable: Arc<UnavailableOfferings>,
}

/// A failed call the caller retries, showing the service's code and
/// message (the SDK error itself displays as "service error").
fn api<E>(operation: &'static str, error: SdkError<E>) -> CloudProviderError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    CloudProviderError::Api {
        operation,
        source: Box::new(ServiceFailure::from_sdk(operation, &error)),
    }
}

fn live_states() -> Filter {
    Filter::builder()
        .name("instance-state-name")
        .set_values(Some(
            [
                InstanceStateName::Pending,
                InstanceStateName::Running,
                InstanceStateName::Stopping,
                InstanceStateName::Stopped,
            ]
            .iter()
            .map(|s| s.as_str().to_string())
            .collect(),
        ))
        .build()
}

/// Whether an EC2 error code says the instance does not exist.
fn is_instance_not_found(code: Option<&str>) -> bool {
    matches!(
        code,
        Some("InvalidInstanceID.NotFound" | "InvalidInstanceID.Malformed")
    )
}

/// A CreateFleet call that failed as a whole.
#[derive(Debug, thiserror::Error)]
#[error("ec2:CreateFleet: {source}")]
pub struct CreateFleetError {
    /// The EC2 error code, if any.
    pub code: Option<String>,
    /// The SDK error.
    #[source]
    pub source: BoxError,
}

impl CreateFleetError {
    /// Whether a launch template of the request does not exist.
    pub fn is_launch_template_not_found(&self) -> bool {
        crate::aws::launch_template::is_not_found(self.code.as_deref())
    }
}

impl InstanceProvider {
    /// A provider for the instances of `cluster_name`, recording capacity
    /// errors in `unavailable`.
    pub fn new(
        ec2: aws_sdk_ec2::Client,
        cluster_name: &str,
        unavailable: Arc<UnavailableOfferings>,
    ) -> Self {
        InstanceProvider {
            ec2,
            cluster_name: cluster_name.to_string(),
            unavailable,
        }
    }

    /// Sends `request` and reads the answer. Every override refused for lack
    /// of capacity is marked unavailable (type, zone, capacity type; in the
    /// request's placement group only, when it has one) before this
    /// returns, whether or not an instance launched.
    pub async fn create_fleet(
        &self,
        request: &FleetRequest,
    ) -> Result<FleetOutcome, CreateFleetError> {
        let output = request
            .send(&self.ec2)
            .await
            .map_err(|e| CreateFleetError {
                code: e.code().map(str::to_string),
                source: Box::new(ServiceFailure::from_sdk("ec2:CreateFleet", &e)),
            })?;
        let outcome = fleet::outcome(&output);
        for (key, scope) in capacity_marks(request, &outcome.errors) {
            tracing::debug!(offering = %key, placement_group = ?scope, "marking offering unavailable after a capacity error");
            self.unavailable.mark_in(key, scope);
        }
        Ok(outcome)
    }

    /// The live instance launched for NodeClaim `name`, if any (so a retried
    /// create returns it instead of launching a second one).
    pub async fn find_by_node_claim(
        &self,
        name: &str,
    ) -> Result<Option<Instance>, CloudProviderError> {
        let instances = self
            .describe(vec![
                tag_filter(NODE_CLAIM_TAG_KEY, name),
                tag_filter(CLUSTER_NAME_TAG_KEY, &self.cluster_name),
                live_states(),
            ])
            .await?;
        Ok(instances.into_iter().next())
    }

    /// The instance `id`. `NotFound` when EC2 does not know it or it is
    /// terminated; a `shutting-down` instance is returned.
    pub async fn get(&self, id: &str) -> Result<Instance, CloudProviderError> {
        let not_found = |source: Option<BoxError>| CloudProviderError::NotFound {
            provider_id: id.to_string(),
            source,
        };
        let output = self.ec2.describe_instances().instance_ids(id).send().await;
        let output = match output {
            Ok(output) => output,
            Err(e) if is_instance_not_found(e.code()) => return Err(not_found(Some(Box::new(e)))),
            Err(e) => return Err(api("ec2:DescribeInstances", e)),
        };
        output
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter_map(Instance::from_ec2)
            .find(|i| i.id == id && i.state != "terminated")
            .ok_or_else(|| not_found(None))
    }

    /// Every live instance of the cluster that nodewright (or Karpenter)
    /// launched: tagged `eks:eks-cluster-name=<cluster>` and carrying a
    /// `karpenter.sh/nodepool` tag, not shutting down or terminated. Pages
    /// through DescribeInstances.
    pub async fn list(&self) -> Result<Vec<Instance>, CloudProviderError> {
        let tagged = Filter::builder()
            .name("tag-key")
            .values(NODE_POOL_LABEL_KEY)
            .build();
        self.describe(vec![
            tag_filter(CLUSTER_NAME_TAG_KEY, &self.cluster_name),
            tagged,
            live_states(),
        ])
        .await
    }

    /// Terminates `id`. `Ok` when it was running or already shutting down;
    /// `NotFound` when it no longer exists or was already terminated — the
    /// termination controller treats that as done.
    pub async fn terminate(&self, id: &str) -> Result<(), CloudProviderError> {
        let not_found = |source: Option<BoxError>| CloudProviderError::NotFound {
            provider_id: id.to_string(),
            source,
        };
        let output = match self.ec2.terminate_instances().instance_ids(id).send().await {
            Ok(output) => output,
            Err(e) if is_instance_not_found(e.code()) => return Err(not_found(Some(Box::new(e)))),
            Err(e) => return Err(api("ec2:TerminateInstances", e)),
        };
        let previous = output
            .terminating_instances()
            .iter()
            .find(|c| c.instance_id() == Some(id))
            .and_then(|c| c.previous_state())
            .and_then(|s| s.name());
        match previous {
            Some(InstanceStateName::Terminated) => Err(not_found(Some(
                "the instance was already terminated".into(),
            ))),
            _ => Ok(()),
        }
    }

    async fn describe(&self, filters: Vec<Filter>) -> Result<Vec<Instance>, CloudProviderError> {
        let mut pages = self
            .ec2
            .describe_instances()
            .set_filters(Some(filters))
            .max_results(1000)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| api("ec2:DescribeInstances", e))?;
            out.extend(
                page.reservations()
                    .iter()
                    .flat_map(|r| r.instances())
                    .filter_map(Instance::from_ec2)
                    .filter(|i| !i.is_terminating()),
            );
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}

/// What a fleet's capacity errors mark unavailable, and where (Karpenter's
/// `updateUnavailableOfferingsCache`): each refused override's offering, in
/// the request's placement group and partition when it has one; when a
/// spread group is full in a zone (seven instances), every type of the
/// request in that zone for the group, since the limit is the group's, not
/// a type's. A spread group's limit is not a reservation's capacity: a
/// reserved launch marks nothing for it.
pub fn capacity_marks(
    request: &FleetRequest,
    errors: &[FleetError],
) -> Vec<(OfferingKey, Option<PlacementScope>)> {
    let capacity_type = request.capacity_type.label_value().to_string();
    let key = |instance_type: &str, zone: &str| OfferingKey {
        instance_type: instance_type.to_string(),
        zone: zone.to_string(),
        capacity_type: capacity_type.clone(),
    };
    let mut marks = Vec::new();
    for error in errors.iter().filter(|e| e.is_unfulfillable_capacity()) {
        let Some(zone) = error.zone.as_deref() else {
            continue;
        };
        if error.is_spread_placement_group_limit() {
            if request.capacity_type == CapacityType::Reserved {
                continue;
            }
            if let Some(group) = &request.placement {
                let scope = PlacementScope::group(&group.group_id);
                for template in &request.templates {
                    for o in template.overrides.iter().filter(|o| o.zone == zone) {
                        marks.push((key(&o.instance_type, zone), Some(scope.clone())));
                    }
                }
                continue;
            }
        }
        if let Some(instance_type) = error.instance_type.as_deref() {
            marks.push((key(instance_type, zone), request.placement.clone()));
        }
    }
    marks.sort();
    marks.dedup();
    marks
}

/// The offerings a fleet's capacity errors refer to, deduplicated.
pub fn unavailable_offerings(
    errors: &[FleetError],
    capacity_type: CapacityType,
) -> Vec<OfferingKey> {
    let mut keys: Vec<OfferingKey> = errors
        .iter()
        .filter(|e| e.is_unfulfillable_capacity())
        .filter_map(|e| {
            Some(OfferingKey {
                instance_type: e.instance_type.clone()?,
                zone: e.zone.clone()?,
                capacity_type: capacity_type.label_value().to_string(),
            })
        })
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(capacity_type: CapacityType, placement: Option<PlacementScope>) -> FleetRequest {
        let o = |instance_type: &str, zone: &str| FleetOverride {
            instance_type: instance_type.to_string(),
            zone: zone.to_string(),
            subnet_id: format!("subnet-{zone}"),
            image_id: "ami-1".to_string(),
            priority: None,
        };
        FleetRequest {
            capacity_type,
            reservation_kind: None,
            templates: vec![FleetTemplate {
                name: "t".to_string(),
                overrides: vec![
                    o("m5.large", "us-east-1a"),
                    o("m5.xlarge", "us-east-1a"),
                    o("m5.large", "us-east-1b"),
                ],
            }],
            prioritized: false,
            tags: BTreeMap::new(),
            client_token: String::new(),
            context: None,
            placement,
        }
    }

    fn error(code: &str, message: &str) -> FleetError {
        FleetError {
            code: code.to_string(),
            message: message.to_string(),
            instance_type: Some("m5.large".to_string()),
            zone: Some("us-east-1a".to_string()),
        }
    }

    fn key(instance_type: &str, zone: &str) -> OfferingKey {
        OfferingKey {
            instance_type: instance_type.to_string(),
            zone: zone.to_string(),
            capacity_type: "on-demand".to_string(),
        }
    }

    const SPREAD_FULL: &str = "You've reached the limit of instances in this spread placement group. A spread placement group can have up to seven instances per Availability Zone.";

    #[test]
    fn capacity_errors_outside_a_group_mark_the_offering_everywhere() {
        let marks = capacity_marks(
            &request(CapacityType::OnDemand, None),
            &[
                error("InsufficientInstanceCapacity", "no capacity"),
                error("InvalidParameterValue", "bad"),
            ],
        );
        assert_eq!(marks, [(key("m5.large", "us-east-1a"), None)]);
    }

    #[test]
    fn capacity_errors_in_a_group_mark_the_offering_in_its_partition() {
        let partition = PlacementScope {
            group_id: "pg-1".to_string(),
            partition: Some(3),
        };
        let marks = capacity_marks(
            &request(CapacityType::OnDemand, Some(partition.clone())),
            &[error("InsufficientInstanceCapacity", "no capacity")],
        );
        assert_eq!(marks, [(key("m5.large", "us-east-1a"), Some(partition))]);
    }

    #[test]
    fn a_full_spread_group_marks_every_type_of_the_zone_for_the_group() {
        let group = PlacementScope::group("pg-1");
        let marks = capacity_marks(
            &request(CapacityType::OnDemand, Some(group.clone())),
            &[error("InsufficientInstanceCapacity", SPREAD_FULL)],
        );
        assert_eq!(
            marks,
            [
                (key("m5.large", "us-east-1a"), Some(group.clone())),
                (key("m5.xlarge", "us-east-1a"), Some(group.clone())),
            ]
        );
        // Not a reservation's capacity; without a group, the one offering.
        assert!(
            capacity_marks(
                &request(CapacityType::Reserved, Some(group)),
                &[error("InsufficientInstanceCapacity", SPREAD_FULL)],
            )
            .is_empty()
        );
        assert_eq!(
            capacity_marks(
                &request(CapacityType::OnDemand, None),
                &[error("InsufficientInstanceCapacity", SPREAD_FULL)],
            ),
            [(key("m5.large", "us-east-1a"), None)]
        );
    }
}
