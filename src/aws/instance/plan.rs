//! Turns a NodeClaim's launch options into one CreateFleet plan: the
//! launch filters, the capacity type (reserved, else spot, else
//! on-demand, as Karpenter chooses), one subnet per zone, the AMI per
//! instance type, and the launch templates — one per (AMI, pods per node,
//! reservation), since each holds its own user data — with their overrides
//! in launch order, at most [`MAX_OVERRIDES`].

use std::collections::BTreeMap;

use super::filter::{self, FilterContext, ReservationKind};
use super::fleet::{FleetOverride, MAX_OVERRIDES};
use crate::apis::EC2NodeClass;
use crate::apis::ec2nodeclass::CapacityReservationType;
use crate::cloudprovider::CloudProviderError;
use crate::cloudprovider::launch::{LaunchOption, image_for};
use crate::scheduling::{CapacityType, Offering};

/// One launch template to ensure and the overrides that will use it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedTemplate {
    /// AMI.
    pub image_id: String,
    /// Pods per node of its instance types.
    pub max_pods: Option<i64>,
    /// The reservation it targets (reserved launches).
    pub reservation_id: Option<String>,
    /// Its overrides, in launch order.
    pub overrides: Vec<FleetOverride>,
}

/// A launch, ready for its templates and CreateFleet.
#[derive(Debug, Clone)]
pub struct LaunchPlan {
    /// The capacity type of every override.
    pub capacity_type: CapacityType,
    /// For reserved launches: the kind of reservation.
    pub reservation_kind: Option<ReservationKind>,
    /// Whether the launch order is ours, not EC2's: the pool's types were
    /// ordered by priority scorers, or a NodeOverlay changed a price.
    pub prioritized: bool,
    /// Templates in launch order of their first override.
    pub templates: Vec<PlannedTemplate>,
    /// The options the overrides came from (offerings of the chosen
    /// capacity type only), to read back what launched.
    pub options: Vec<LaunchOption>,
    /// Instance types dropped by the launch filters, per filter.
    pub rejected: Vec<filter::Rejected>,
}

impl LaunchPlan {
    /// The option and offering an (instance type, zone) came from.
    pub fn offering(&self, instance_type: &str, zone: &str) -> Option<(&LaunchOption, &Offering)> {
        let option = self
            .options
            .iter()
            .find(|o| o.instance_type.name == instance_type)?;
        let offering = option.offerings.iter().find(|o| o.zone == zone)?;
        Some((option, offering))
    }
}

/// Reservation id → kind, from `status.capacityReservations`.
pub fn reservation_kinds(class: &EC2NodeClass) -> BTreeMap<String, ReservationKind> {
    class
        .status
        .as_ref()
        .and_then(|s| s.capacity_reservations.as_ref())
        .map(|reservations| {
            reservations
                .iter()
                .map(|r| {
                    let kind = if r.reservation_type == Some(CapacityReservationType::CapacityBlock)
                    {
                        ReservationKind::CapacityBlock
                    } else if r.interruptible == Some(true) {
                        ReservationKind::Interruptible
                    } else {
                        ReservationKind::Default
                    };
                    (r.id.clone(), kind)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The plan for `options` (in launch order) of a claim of `class`.
pub fn plan(
    class: &EC2NodeClass,
    options: Vec<LaunchOption>,
    has_min_values: bool,
) -> Result<LaunchPlan, CloudProviderError> {
    let node_class = class.metadata.name.clone().unwrap_or_default();
    // Priority scores order the overrides; so do NodeOverlay prices, which
    // EC2's own price-based strategies would not see (as Karpenter's AWS
    // provider, which switches to the prioritized strategies when an
    // offering's price is overlaid).
    let prioritized = options.iter().any(|o| {
        o.score.is_some()
            || o.offerings
                .iter()
                .any(|of| of.price.to_bits() != of.list_price.to_bits())
    });
    let context = FilterContext {
        has_min_values,
        reservations: reservation_kinds(class),
    };
    let (options, rejected) = filter::apply(options, &context).map_err(|filter| {
        CloudProviderError::InsufficientCapacity {
            offerings: Vec::new(),
            source: Some(
                format!(
                    "all requested instance types were unavailable during launch (the {filter} left none)"
                )
                .into(),
            ),
        }
    })?;
    let capacity_type = [CapacityType::Reserved, CapacityType::Spot]
        .into_iter()
        .find(|ct| {
            options
                .iter()
                .any(|o| o.offerings.iter().any(|of| of.capacity_type == *ct))
        })
        .unwrap_or(CapacityType::OnDemand);
    let options: Vec<LaunchOption> = options
        .into_iter()
        .filter_map(|mut o| {
            o.offerings.retain(|of| of.capacity_type == capacity_type);
            (!o.offerings.is_empty()).then_some(o)
        })
        .collect();
    let reservation_kind = (capacity_type == CapacityType::Reserved).then(|| {
        options
            .iter()
            .flat_map(|o| &o.offerings)
            .find_map(|o| o.reservation_id.as_ref())
            .and_then(|id| context.reservations.get(id).copied())
            .unwrap_or(ReservationKind::Default)
    });

    let subnets = zonal_subnets(class);
    if subnets.is_empty() {
        return Err(CloudProviderError::NodeClassNotReady {
            node_class,
            reason: "status.subnets is empty: no subnet to launch into".to_string(),
        });
    }
    let mut templates: Vec<PlannedTemplate> = Vec::new();
    let mut without_image: Vec<String> = Vec::new();
    let mut count = 0;
    let mut rank = 0usize;
    'options: for option in &options {
        let Some(image) = image_for(class, &option.instance_type) else {
            without_image.push(option.instance_type.name.clone());
            continue;
        };
        let pods = option.instance_type.capacity.pods;
        let max_pods = (pods > 0).then_some(pods);
        let mut used = false;
        for offering in &option.offerings {
            let Some(subnet_id) = subnets.get(offering.zone.as_str()) else {
                continue;
            };
            let reservation_id = offering.reservation_id.clone();
            let index = match templates.iter().position(|t| {
                t.image_id == image.id
                    && t.max_pods == max_pods
                    && t.reservation_id == reservation_id
            }) {
                Some(index) => index,
                None => {
                    templates.push(PlannedTemplate {
                        image_id: image.id.clone(),
                        max_pods,
                        reservation_id,
                        overrides: Vec::new(),
                    });
                    templates.len() - 1
                }
            };
            let duplicate = templates.iter().any(|t| {
                t.overrides.iter().any(|o| {
                    o.instance_type == option.instance_type.name && o.zone == offering.zone
                })
            });
            if duplicate {
                continue;
            }
            templates[index].overrides.push(FleetOverride {
                instance_type: option.instance_type.name.clone(),
                zone: offering.zone.clone(),
                subnet_id: subnet_id.to_string(),
                image_id: image.id.clone(),
                priority: prioritized.then_some(rank as f64),
            });
            used = true;
            count += 1;
            if count == MAX_OVERRIDES {
                break 'options;
            }
        }
        if used {
            rank += 1;
        }
    }
    templates.retain(|t| !t.overrides.is_empty());
    if templates.is_empty() {
        if !without_image.is_empty() {
            return Err(CloudProviderError::NodeClassNotReady {
                node_class,
                reason: format!(
                    "no AMI in status.amis fits instance types {}",
                    without_image.join(", ")
                ),
            });
        }
        return Err(CloudProviderError::InsufficientCapacity {
            offerings: Vec::new(),
            source: Some(
                "no capacity offerings are currently available given the constraints (no offering is in a zone of status.subnets)"
                    .into(),
            ),
        });
    }
    Ok(LaunchPlan {
        capacity_type,
        reservation_kind,
        prioritized,
        templates,
        options,
        rejected,
    })
}

/// The subnet to use per zone: the first of `status.subnets` in each zone
/// (the status lists them with the most free addresses first).
pub fn zonal_subnets(class: &EC2NodeClass) -> BTreeMap<&str, &str> {
    let mut out = BTreeMap::new();
    if let Some(subnets) = class.status.as_ref().and_then(|s| s.subnets.as_ref()) {
        for subnet in subnets {
            out.entry(subnet.zone.as_str())
                .or_insert(subnet.id.as_str());
        }
    }
    out
}

#[cfg(test)]
mod tests;
