//! The filters Karpenter applies to a NodeClaim's instance types right
//! before it launches (`instance/filter`), on top of the
//! requirement/offering check [`crate::cloudprovider::launch::launch_options`]
//! already made, in Karpenter's order:
//!
//! 1. capacity-reservation-type: of the reservation kinds on offer (default
//!    ODCR, capacity block, interruptible ODCR) keep the one with the
//!    cheapest offering (ties in that order), since CreateFleet takes one
//!    market type; a reserved launch then uses only reserved offerings;
//! 2. capacity-block: a capacity-block launch keeps only the type with the
//!    cheapest block, and only that block (CreateFleet takes one);
//! 3. reserved-offering: one reservation per type and zone, the one with the
//!    most free instances;
//! 4. exotic-instance: no metal, GPU, Neuron or Gaudi types unless nothing
//!    else is left or the NodeClaim has `minValues`;
//! 5. spot-offering: with both spot and on-demand on offer, no spot
//!    offering dearer than the cheapest on-demand one.
//!
//! A filter that would leave nothing fails the launch with insufficient
//! capacity, as Karpenter's do.

use std::collections::BTreeMap;

use crate::apis::labels::INSTANCE_SIZE_LABEL_KEY;
use crate::cloudprovider::launch::LaunchOption;
use crate::scheduling::{CapacityType, Offering};

/// Extended resources that make an instance type exotic.
pub const EXOTIC_RESOURCES: &[&str] = &[
    "nvidia.com/gpu",
    "amd.com/gpu",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "habana.ai/gaudi",
];

/// The kind of a capacity reservation, which decides its market type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReservationKind {
    /// An on-demand capacity reservation.
    Default,
    /// A capacity block for ML.
    CapacityBlock,
    /// An interruptible on-demand capacity reservation.
    Interruptible,
}

/// What the filters need besides the options.
#[derive(Debug, Clone, Default)]
pub struct FilterContext {
    /// Whether any of the NodeClaim's requirements has `minValues`.
    pub has_min_values: bool,
    /// Reservation id → kind (from `status.capacityReservations`); unknown
    /// ids count as default reservations.
    pub reservations: BTreeMap<String, ReservationKind>,
}

impl FilterContext {
    fn kind(&self, offering: &Offering) -> ReservationKind {
        offering
            .reservation_id
            .as_ref()
            .and_then(|id| self.reservations.get(id).copied())
            .unwrap_or(ReservationKind::Default)
    }
}

/// Instance types one filter took out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The filter's name (Karpenter's).
    pub filter: &'static str,
    /// The instance types it dropped.
    pub instance_types: Vec<String>,
}

type FilterFn = fn(Vec<LaunchOption>, &FilterContext) -> (Vec<LaunchOption>, Vec<String>);

/// Runs the filters in order. `Err` names the filter that left nothing.
pub fn apply(
    options: Vec<LaunchOption>,
    context: &FilterContext,
) -> Result<(Vec<LaunchOption>, Vec<Rejected>), &'static str> {
    let filters: [(&'static str, FilterFn); 5] = [
        (
            "capacity-reservation-type-filter",
            capacity_reservation_type,
        ),
        ("capacity-block-filter", capacity_block),
        ("reserved-offering-filter", reserved_offering),
        ("exotic-instance-filter", exotic_instance),
        ("spot-offering-filter", spot_offering),
    ];
    let mut options = options;
    let mut rejected = Vec::new();
    for (name, filter) in filters {
        let (kept, dropped) = filter(options, context);
        if kept.is_empty() {
            return Err(name);
        }
        if !dropped.is_empty() {
            rejected.push(Rejected {
                filter: name,
                instance_types: dropped,
            });
        }
        options = kept;
    }
    Ok((options, rejected))
}

fn names(options: &[LaunchOption]) -> Vec<String> {
    options
        .iter()
        .map(|o| o.instance_type.name.clone())
        .collect()
}

fn is_reserved(offering: &Offering) -> bool {
    offering.capacity_type == CapacityType::Reserved
}

fn has_reserved(options: &[LaunchOption]) -> bool {
    options.iter().any(|o| o.offerings.iter().any(is_reserved))
}

fn capacity_reservation_type(
    options: Vec<LaunchOption>,
    context: &FilterContext,
) -> (Vec<LaunchOption>, Vec<String>) {
    if !has_reserved(&options) {
        return (options, Vec::new());
    }
    let mut cheapest: BTreeMap<ReservationKind, f64> = BTreeMap::new();
    for offering in options
        .iter()
        .flat_map(|o| &o.offerings)
        .filter(|o| is_reserved(o))
    {
        let entry = cheapest
            .entry(context.kind(offering))
            .or_insert(f64::INFINITY);
        *entry = entry.min(offering.price);
    }
    // Cheapest first; ties go to default, then capacity block, then interruptible.
    let Some(selected) = cheapest
        .iter()
        .min_by(|a, b| a.1.total_cmp(b.1).then(a.0.cmp(b.0)))
        .map(|(kind, _)| *kind)
    else {
        return (options, Vec::new());
    };
    partition(options, |offering| {
        is_reserved(offering) && context.kind(offering) == selected
    })
}

fn capacity_block(
    options: Vec<LaunchOption>,
    context: &FilterContext,
) -> (Vec<LaunchOption>, Vec<String>) {
    let first_reserved = options
        .iter()
        .flat_map(|o| &o.offerings)
        .find(|o| is_reserved(o));
    if first_reserved.is_none_or(|o| context.kind(o) != ReservationKind::CapacityBlock) {
        return (options, Vec::new());
    }
    let mut best: Option<(usize, Offering)> = None;
    for (index, option) in options.iter().enumerate() {
        for offering in option
            .offerings
            .iter()
            .filter(|o| is_reserved(o) && context.kind(o) == ReservationKind::CapacityBlock)
        {
            if best.as_ref().is_none_or(|(_, b)| offering.price < b.price) {
                best = Some((index, offering.clone()));
            }
        }
    }
    let Some((chosen, offering)) = best else {
        return (options, Vec::new());
    };
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for (index, mut option) in options.into_iter().enumerate() {
        if index == chosen {
            option.offerings = vec![offering.clone()];
            kept.push(option);
        } else {
            dropped.push(option.instance_type.name);
        }
    }
    (kept, dropped)
}

fn reserved_offering(
    options: Vec<LaunchOption>,
    _: &FilterContext,
) -> (Vec<LaunchOption>, Vec<String>) {
    if !has_reserved(&options) {
        return (options, Vec::new());
    }
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for option in &options {
        let mut by_zone: BTreeMap<&str, &Offering> = BTreeMap::new();
        for offering in option.offerings.iter().filter(|o| is_reserved(o)) {
            let better = by_zone.get(offering.zone.as_str()).is_none_or(|current| {
                offering.reservation_capacity.unwrap_or(0)
                    > current.reservation_capacity.unwrap_or(0)
            });
            if better {
                by_zone.insert(&offering.zone, offering);
            }
        }
        if by_zone.is_empty() {
            dropped.push(option.instance_type.name.clone());
            continue;
        }
        let mut offerings: Vec<Offering> = by_zone.into_values().cloned().collect();
        offerings.sort_by(|a, b| a.price.total_cmp(&b.price));
        kept.push(LaunchOption {
            offerings,
            ..option.clone()
        });
    }
    if kept.is_empty() {
        return (options, Vec::new());
    }
    (kept, dropped)
}

/// Whether a type is metal or carries GPUs or accelerators.
pub fn is_exotic(option: &LaunchOption) -> bool {
    let it = &option.instance_type;
    let metal = it
        .requirements
        .get(INSTANCE_SIZE_LABEL_KEY)
        .is_some_and(|r| r.values.values().iter().any(|size| size.contains("metal")));
    metal
        || EXOTIC_RESOURCES
            .iter()
            .any(|resource| it.capacity.get(resource) > 0)
}

fn exotic_instance(
    options: Vec<LaunchOption>,
    context: &FilterContext,
) -> (Vec<LaunchOption>, Vec<String>) {
    if context.has_min_values {
        return (options, Vec::new());
    }
    let (exotic, generic): (Vec<LaunchOption>, Vec<LaunchOption>) =
        options.into_iter().partition(is_exotic);
    if generic.is_empty() {
        return (exotic, Vec::new());
    }
    (generic, names(&exotic))
}

fn spot_offering(
    options: Vec<LaunchOption>,
    context: &FilterContext,
) -> (Vec<LaunchOption>, Vec<String>) {
    if context.has_min_values {
        return (options, Vec::new());
    }
    let all = || options.iter().flat_map(|o| &o.offerings);
    let cheapest_on_demand = all()
        .filter(|o| o.capacity_type == CapacityType::OnDemand)
        .map(|o| o.price)
        .min_by(f64::total_cmp);
    let has_spot = all().any(|o| o.capacity_type == CapacityType::Spot);
    let Some(ceiling) = cheapest_on_demand.filter(|_| has_spot) else {
        return (options, Vec::new());
    };
    partition(options, |offering| {
        offering.capacity_type != CapacityType::Spot || offering.price <= ceiling
    })
}

/// Keeps the offerings `keep` accepts; types left without one are dropped.
fn partition(
    options: Vec<LaunchOption>,
    keep: impl Fn(&Offering) -> bool,
) -> (Vec<LaunchOption>, Vec<String>) {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for mut option in options {
        option.offerings.retain(&keep);
        if option.offerings.is_empty() {
            dropped.push(option.instance_type.name);
        } else {
            kept.push(option);
        }
    }
    (kept, dropped)
}

#[cfg(test)]
mod tests;
