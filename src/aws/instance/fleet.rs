//! The CreateFleet request of one launch, and what its answer means.
//!
//! One `instant` fleet of one instance. Strategies: on-demand
//! `lowest-price`, spot `price-capacity-optimized`; when the pool's
//! instance types are ordered by priority scorers or a NodeOverlay changed
//! an offering's price (EC2 would order by its own prices), on-demand `prioritized`
//! and spot `capacity-optimized-prioritized`, each override carrying its
//! type's rank in the launch order as its priority (0 first). EC2 tries
//! on-demand overrides strictly in priority order; for spot, priorities are
//! honoured on a best-effort basis after capacity (the pools with the most
//! spare capacity first, then priority among them).

use std::collections::BTreeMap;

use aws_sdk_ec2::operation::create_fleet::CreateFleetOutput;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    FleetOnDemandAllocationStrategy, FleetReservationType, FleetType, InstanceType as Ec2Type,
    OnDemandOptionsRequest, ReservedCapacityOptionsRequest, ResourceType, SpotAllocationStrategy,
    SpotOptionsRequest, TagSpecification, TargetCapacitySpecificationRequest,
};

use super::filter::ReservationKind;
use crate::aws::launch_template::ec2_tags;
use crate::cloudprovider::PlacementScope;
use crate::scheduling::CapacityType;

/// Most overrides one CreateFleet call carries; the first in launch order win.
pub const MAX_OVERRIDES: usize = 60;

/// Fleet error codes that mean "no capacity for this offering right now"
/// (Karpenter's list): the offering is marked unavailable.
pub const UNFULFILLABLE_CAPACITY_CODES: &[&str] = &[
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "MaxFleetCountExceeded",
    "ReservationCapacityExceeded",
];

/// One (instance type, zone) the fleet may launch.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetOverride {
    /// Instance type.
    pub instance_type: String,
    /// Zone (also tells which offering an error was about).
    pub zone: String,
    /// The zone's subnet.
    pub subnet_id: String,
    /// The AMI for this type.
    pub image_id: String,
    /// Lower is tried first; only with the prioritized strategies.
    pub priority: Option<f64>,
}

/// A launch template and the overrides that use it.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetTemplate {
    /// Launch template name.
    pub name: String,
    /// Its overrides, in launch order.
    pub overrides: Vec<FleetOverride>,
}

/// Everything one CreateFleet call needs.
#[derive(Debug, Clone)]
pub struct FleetRequest {
    /// On-demand, spot or reserved.
    pub capacity_type: CapacityType,
    /// For reserved launches: the kind of the reservations targeted.
    pub reservation_kind: Option<ReservationKind>,
    /// Templates with their overrides.
    pub templates: Vec<FleetTemplate>,
    /// Use the prioritized strategies (the pool has priority scores).
    pub prioritized: bool,
    /// Tags of the instance, its volumes and the fleet.
    pub tags: BTreeMap<String, String>,
    /// Idempotency token: a retry with the same token launches nothing new.
    pub client_token: String,
    /// `spec.context`.
    pub context: Option<String>,
    /// The placement group (and partition) the instance launches into:
    /// the capacity errors met are marked for it only.
    pub placement: Option<PlacementScope>,
}

impl FleetRequest {
    /// Number of overrides across templates.
    pub fn override_count(&self) -> usize {
        self.templates.iter().map(|t| t.overrides.len()).sum()
    }

    /// The override an instance type and zone came from.
    pub fn find(
        &self,
        instance_type: &str,
        zone: &str,
    ) -> Option<(&FleetTemplate, &FleetOverride)> {
        self.templates.iter().find_map(|t| {
            t.overrides
                .iter()
                .find(|o| o.instance_type == instance_type && o.zone == zone)
                .map(|o| (t, o))
        })
    }

    /// The launch template configurations.
    pub fn launch_template_configs(&self) -> Vec<FleetLaunchTemplateConfigRequest> {
        self.templates
            .iter()
            .filter(|t| !t.overrides.is_empty())
            .map(|template| {
                let overrides = template
                    .overrides
                    .iter()
                    .map(|o| {
                        FleetLaunchTemplateOverridesRequest::builder()
                            .instance_type(Ec2Type::from(o.instance_type.as_str()))
                            .subnet_id(&o.subnet_id)
                            .image_id(&o.image_id)
                            .availability_zone(&o.zone)
                            .set_priority(o.priority.filter(|_| self.prioritized))
                            .build()
                    })
                    .collect();
                FleetLaunchTemplateConfigRequest::builder()
                    .launch_template_specification(
                        FleetLaunchTemplateSpecificationRequest::builder()
                            .launch_template_name(&template.name)
                            .version("$Latest")
                            .build(),
                    )
                    .set_overrides(Some(overrides))
                    .build()
            })
            .collect()
    }

    fn target_capacity_type(&self) -> DefaultTargetCapacityType {
        match (self.capacity_type, self.reservation_kind) {
            (CapacityType::Spot, _) => DefaultTargetCapacityType::Spot,
            (CapacityType::Reserved, Some(ReservationKind::CapacityBlock)) => {
                DefaultTargetCapacityType::CapacityBlock
            }
            (CapacityType::Reserved, Some(ReservationKind::Interruptible)) => {
                DefaultTargetCapacityType::ReservedCapacity
            }
            _ => DefaultTargetCapacityType::OnDemand,
        }
    }

    /// Sends the request.
    pub async fn send(
        &self,
        ec2: &aws_sdk_ec2::Client,
    ) -> Result<
        CreateFleetOutput,
        aws_sdk_ec2::error::SdkError<aws_sdk_ec2::operation::create_fleet::CreateFleetError>,
    > {
        let tags = ec2_tags(&self.tags);
        let tag_specs = [
            ResourceType::Instance,
            ResourceType::Volume,
            ResourceType::Fleet,
        ]
        .into_iter()
        .map(|resource| {
            TagSpecification::builder()
                .resource_type(resource)
                .set_tags(Some(tags.clone()))
                .build()
        })
        .collect();
        let mut call = ec2
            .create_fleet()
            .r#type(FleetType::Instant)
            .client_token(&self.client_token)
            .set_context(self.context.clone())
            .set_launch_template_configs(Some(self.launch_template_configs()))
            .target_capacity_specification(
                TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(1)
                    .default_target_capacity_type(self.target_capacity_type())
                    .build(),
            )
            .set_tag_specifications(Some(tag_specs));
        match (self.capacity_type, self.reservation_kind) {
            (CapacityType::Spot, _) => {
                call = call.spot_options(
                    SpotOptionsRequest::builder()
                        .allocation_strategy(if self.prioritized {
                            SpotAllocationStrategy::CapacityOptimizedPrioritized
                        } else {
                            SpotAllocationStrategy::PriceCapacityOptimized
                        })
                        .build(),
                );
            }
            (_, Some(ReservationKind::Interruptible)) => {
                call = call.reserved_capacity_options(
                    ReservedCapacityOptionsRequest::builder()
                        .reservation_types(FleetReservationType::InterruptibleCapacityReservation)
                        .build(),
                );
            }
            (_, Some(ReservationKind::CapacityBlock)) => {}
            _ => {
                call = call.on_demand_options(
                    OnDemandOptionsRequest::builder()
                        .allocation_strategy(if self.prioritized {
                            FleetOnDemandAllocationStrategy::Prioritized
                        } else {
                            FleetOnDemandAllocationStrategy::LowestPrice
                        })
                        .build(),
                );
            }
        }
        call.send().await
    }
}

/// One error in a fleet answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetError {
    /// EC2 error code.
    pub code: String,
    /// EC2 message.
    pub message: String,
    /// The override's instance type, when EC2 said.
    pub instance_type: Option<String>,
    /// The override's zone, when EC2 said.
    pub zone: Option<String>,
}

impl FleetError {
    /// Whether the code means the offering had no capacity.
    pub fn is_unfulfillable_capacity(&self) -> bool {
        UNFULFILLABLE_CAPACITY_CODES.contains(&self.code.as_str())
    }

    /// Whether EC2 refused because a spread placement group already holds
    /// seven instances in the zone (Karpenter's
    /// `IsSpreadPlacementGroupLimitError`): no type fits there any more.
    pub fn is_spread_placement_group_limit(&self) -> bool {
        self.message
            .contains("limit of instances in this spread placement group")
    }
}

/// The instance a fleet launched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetInstance {
    /// `i-…`.
    pub instance_id: String,
    /// Its instance type.
    pub instance_type: String,
    /// Its zone, from the override it came from.
    pub zone: Option<String>,
}

/// What CreateFleet answered.
#[derive(Debug, Clone, Default)]
pub struct FleetOutcome {
    /// The instance, if one launched.
    pub instance: Option<FleetInstance>,
    /// The errors EC2 reported for the overrides it tried.
    pub errors: Vec<FleetError>,
}

/// Reads a CreateFleet answer.
pub fn outcome(output: &CreateFleetOutput) -> FleetOutcome {
    let errors = output
        .errors()
        .iter()
        .map(|e| {
            let overrides = e
                .launch_template_and_overrides()
                .and_then(|l| l.overrides());
            FleetError {
                code: e.error_code().unwrap_or_default().to_string(),
                message: e.error_message().unwrap_or_default().to_string(),
                instance_type: overrides
                    .and_then(|o| o.instance_type())
                    .map(|t| t.as_str().to_string()),
                zone: overrides
                    .and_then(|o| o.availability_zone())
                    .map(str::to_string),
            }
        })
        .collect();
    let instance = output.instances().iter().find_map(|i| {
        let id = i.instance_ids().first()?.clone();
        let overrides = i
            .launch_template_and_overrides()
            .and_then(|l| l.overrides());
        Some(FleetInstance {
            instance_id: id,
            instance_type: i
                .instance_type()
                .map(|t| t.as_str().to_string())
                .or_else(|| {
                    overrides
                        .and_then(|o| o.instance_type())
                        .map(|t| t.as_str().to_string())
                })
                .unwrap_or_default(),
            zone: overrides
                .and_then(|o| o.availability_zone())
                .map(str::to_string),
        })
    });
    FleetOutcome { instance, errors }
}
