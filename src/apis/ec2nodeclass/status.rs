//! What the EC2NodeClass controller resolves a class to (`status`):
//! subnets, security groups, capacity reservations, AMIs, the instance
//! profile and the conditions — what a launch reads.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::InstanceMatchCriteria;
use crate::apis::conditions::Condition;

/// Observed state of an EC2NodeClass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    /// Resolved subnets, most available IPv4 addresses first (ties by id):
    /// a launch uses the first subnet of each zone in this order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnets: Option<Vec<SubnetStatus>>,
    /// Resolved security groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_groups: Option<Vec<SecurityGroupStatus>>,
    /// Resolved capacity reservations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_reservations: Option<Vec<CapacityReservationStatus>>,
    /// Resolved AMIs with the requirements each satisfies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amis: Option<Vec<AMIStatus>>,
    /// Instance profile in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// The placement group `spec.placementGroupSelector` resolved to; every
    /// instance of the class launches into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group: Option<PlacementGroupStatus>,
    /// Conditions of the NodeClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::conditions_strict")]
    pub conditions: Option<Vec<Condition>>,
}

/// A resolved subnet.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubnetStatus {
    /// Subnet id.
    pub id: String,
    /// Availability zone.
    pub zone: String,
    /// Availability zone id.
    #[serde(rename = "zoneID", default, skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
}

/// A resolved placement group, as `DescribePlacementGroups` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementGroupStatus {
    /// Placement group id (`pg-…`).
    pub id: String,
    /// Placement group name.
    pub name: String,
    /// How instances are placed.
    pub strategy: PlacementGroupStrategy,
    /// Number of partitions (partition groups only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_count: Option<i32>,
    /// `rack` or `host` (spread groups only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_level: Option<String>,
}

/// A placement group's strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PlacementGroupStrategy {
    /// Packed close together in one zone (low latency, EFA).
    Cluster,
    /// Spread over partitions that share no racks.
    Partition,
    /// Each instance on distinct hardware.
    Spread,
}

impl PlacementGroupStrategy {
    /// The strategy as EC2 writes it (`SupportedStrategies`, `Strategy`).
    pub fn as_str(self) -> &'static str {
        match self {
            PlacementGroupStrategy::Cluster => "cluster",
            PlacementGroupStrategy::Partition => "partition",
            PlacementGroupStrategy::Spread => "spread",
        }
    }

    /// The strategy EC2 named, if it is one of the three.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "cluster" => Some(PlacementGroupStrategy::Cluster),
            "partition" => Some(PlacementGroupStrategy::Partition),
            "spread" => Some(PlacementGroupStrategy::Spread),
            _ => None,
        }
    }
}

/// A resolved security group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupStatus {
    /// Security group id.
    pub id: String,
    /// Security group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Capacity reservation kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityReservationType {
    /// On-demand capacity reservation.
    Default,
    /// Capacity block for ML.
    CapacityBlock,
}

/// Capacity reservation state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CapacityReservationState {
    /// Usable.
    Active,
    /// A capacity block within 40 minutes of its end.
    Expiring,
}

/// A resolved capacity reservation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationStatus {
    /// Zone of the reservation.
    pub availability_zone: String,
    /// End time, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    /// Reservation id.
    #[schemars(regex(pattern = "^cr-[0-9a-z]+$"))]
    pub id: String,
    /// `open` or `targeted`.
    pub instance_match_criteria: InstanceMatchCriteria,
    /// Instance type reserved.
    pub instance_type: String,
    /// Whether the reservation may be interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptible: Option<bool>,
    /// Owning account.
    #[serde(rename = "ownerID")]
    #[schemars(regex(pattern = "^[0-9]{12}$"))]
    pub owner_id: String,
    /// `default` or `capacity-block`. Default `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "default"))]
    pub reservation_type: Option<CapacityReservationType>,
    /// `active` or `expiring`. Default `active`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "active"))]
    pub state: Option<CapacityReservationState>,
}

/// A resolved AMI.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AMIStatus {
    /// AMI id.
    pub id: String,
    /// AMI name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether the AMI is deprecated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
    /// Instance-type requirements this AMI is compatible with (arch, GPU variants).
    pub requirements: Vec<AMIRequirement>,
}

/// A node selector requirement on an AMI status entry (plain `core/v1` shape).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AMIRequirement {
    /// Label key.
    pub key: String,
    /// Operator (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`).
    pub operator: String,
    /// Values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub values: Option<Vec<String>>,
}
