//! Reserved offerings: one per capacity reservation in the EC2NodeClass's
//! `status.capacityReservations`, for the reservation's instance type and
//! zone, as Karpenter's `ReservedCapacityResolver` makes them.
//!
//! - Price: the on-demand price divided by 10,000,000, so a reservation the
//!   account already pays for is nearly free yet keeps the relative order of
//!   types for consolidation; 0 when no price is known.
//! - Available while it has room (the count the capacity reservation
//!   provider keeps; unknown counts as none), its zone is one the class's
//!   subnets cover and the type is offered in, and it is not `expiring`.
//!   Reservations in a zone the class cannot launch into are left out.
//! - Labels: a type with reservations requires
//!   `karpenter.k8s.aws/capacity-reservation-{id,type,interruptible}` `In`
//!   the values of its reservations, a type without `DoesNotExist` — the
//!   instance-type requirements Karpenter writes.

use crate::apis::labels::{
    CAPACITY_RESERVATION_ID_LABEL_KEY, CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL_KEY,
    CAPACITY_RESERVATION_TYPE_LABEL_KEY,
};
use crate::scheduling::{Offering, Requirement, ValueSet};

/// What reserved offerings are priced at, relative to on-demand.
pub const RESERVED_PRICE_DIVISOR: f64 = 10_000_000.0;

/// A capacity reservation the class may launch into (from its status).
#[derive(Debug, Clone, PartialEq)]
pub struct ReservedCapacity {
    /// `cr-…`.
    pub id: String,
    /// The instance type reserved.
    pub instance_type: String,
    /// The zone it is in.
    pub zone: String,
    /// `default` or `capacity-block`.
    pub reservation_type: String,
    /// Whether EC2 may take the capacity back.
    pub interruptible: bool,
    /// A capacity block within 40 minutes of its end: no new launches.
    pub expiring: bool,
    /// Instances it has room for; `None` while unknown (counts as none).
    pub available: Option<u32>,
}

/// One reserved offering per reservation of `instance_type` in a zone of
/// `zones` (the zones the type is offered in and the class may launch into).
pub fn reserved_offerings<'z>(
    reservations: &[ReservedCapacity],
    instance_type: &str,
    on_demand_price: Option<f64>,
    zones: impl Fn(&str) -> bool + 'z,
) -> Vec<Offering> {
    let price = on_demand_price.map_or(0.0, |p| p / RESERVED_PRICE_DIVISOR);
    reservations
        .iter()
        .filter(|r| r.instance_type == instance_type && zones(&r.zone))
        .map(|r| {
            let capacity = r.available.unwrap_or(0);
            let mut offering = Offering::reserved(&r.zone, price, &r.id, capacity);
            offering.available = capacity > 0 && !r.expiring;
            offering
        })
        .collect()
}

/// The reservation labels of `instance_type` as requirements: `In` the
/// values of its reservations, `DoesNotExist` when it has none.
pub fn reservation_requirements(
    reservations: &[ReservedCapacity],
    instance_type: &str,
) -> [Requirement; 3] {
    let mine: Vec<&ReservedCapacity> = reservations
        .iter()
        .filter(|r| r.instance_type == instance_type)
        .collect();
    let requirement = |key: &str, value: &dyn Fn(&ReservedCapacity) -> String| {
        if mine.is_empty() {
            return Requirement::does_not_exist(key);
        }
        let mut values: Vec<String> = mine.iter().map(|r| value(r)).collect();
        values.sort();
        values.dedup();
        Requirement {
            key: key.to_string(),
            values: ValueSet::of(values),
            min_values: None,
        }
    };
    [
        requirement(CAPACITY_RESERVATION_ID_LABEL_KEY, &|r| r.id.clone()),
        requirement(CAPACITY_RESERVATION_TYPE_LABEL_KEY, &|r| {
            r.reservation_type.clone()
        }),
        requirement(CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL_KEY, &|r| {
            r.interruptible.to_string()
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::CapacityType;

    fn reservation(id: &str, zone: &str, available: Option<u32>) -> ReservedCapacity {
        ReservedCapacity {
            id: id.to_string(),
            instance_type: "m5.large".to_string(),
            zone: zone.to_string(),
            reservation_type: "default".to_string(),
            interruptible: false,
            expiring: false,
            available,
        }
    }

    #[test]
    fn one_offering_per_reservation_priced_near_zero() {
        let mut expiring = reservation("cr-3", "us-east-1a", Some(5));
        expiring.expiring = true;
        let reservations = [
            reservation("cr-1", "us-east-1a", Some(2)),
            reservation("cr-2", "us-east-1b", None),
            expiring,
            reservation("cr-4", "us-east-1f", Some(1)),
        ];
        let offerings = reserved_offerings(&reservations, "m5.large", Some(0.096), |z| {
            z != "us-east-1f"
        });
        let seen: Vec<(&str, bool, Option<u32>)> = offerings
            .iter()
            .map(|o| {
                (
                    o.reservation_id.as_deref().unwrap(),
                    o.available,
                    o.reservation_capacity,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("cr-1", true, Some(2)),
                ("cr-2", false, Some(0)),
                ("cr-3", false, Some(5)),
            ]
        );
        assert!(
            offerings
                .iter()
                .all(|o| o.capacity_type == CapacityType::Reserved)
        );
        assert_eq!(offerings[0].price, 0.096 / RESERVED_PRICE_DIVISOR);
        assert!(reserved_offerings(&reservations, "m5.xlarge", None, |_| true).is_empty());
        assert_eq!(
            reserved_offerings(&reservations[..1], "m5.large", None, |_| true)[0].price,
            0.0
        );
    }

    #[test]
    fn types_without_reservations_lack_the_labels() {
        let reservations = [reservation("cr-1", "us-east-1a", Some(2))];
        let [id, kind, interruptible] = reservation_requirements(&reservations, "m5.large");
        assert!(id.has("cr-1") && !id.has("cr-2"));
        assert!(kind.has("default"));
        assert!(interruptible.has("false"));
        let [id, ..] = reservation_requirements(&reservations, "c5.large");
        assert_eq!(id.operator(), crate::scheduling::Operator::DoesNotExist);
    }
}
