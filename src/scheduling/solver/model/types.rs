//! Instance types and their offerings as a NodePool of the model holds
//! them: interned requirements, resource vectors and the DaemonSet group.

use crate::scheduling::index::{Reqs, Res, Set};
use crate::scheduling::instance_type::CapacityType;

pub(in crate::scheduling::solver) struct Offer {
    pub(in crate::scheduling::solver) zone: u32,
    pub(in crate::scheduling::solver) capacity_type: CapacityType,
    pub(in crate::scheduling::solver) capacity_type_value: u32,
    pub(in crate::scheduling::solver) price: f64,
    pub(in crate::scheduling::solver) available: bool,
    /// Index of its capacity reservation in the model.
    pub(in crate::scheduling::solver) reservation: Option<usize>,
    pub(in crate::scheduling::solver) reservation_value: Option<u32>,
}

pub(in crate::scheduling::solver) struct TypeIdx {
    pub(in crate::scheduling::solver) name: String,
    pub(in crate::scheduling::solver) reqs: Reqs,
    /// The pool's [`DaemonGroup`](super::daemonsets::DaemonGroup) for this type.
    pub(in crate::scheduling::solver) daemon_group: u32,
    pub(in crate::scheduling::solver) capacity: Res,
    pub(in crate::scheduling::solver) offers: Vec<Offer>,
}

/// Whether the type's requirements intersect each of `reqs`.
pub(in crate::scheduling::solver) fn type_compatible<'r>(
    ty: &TypeIdx,
    reqs: impl Iterator<Item = &'r crate::scheduling::index::Req>,
    number: &impl Fn(&u32) -> Option<i64>,
) -> bool {
    for r in reqs {
        if let Some(theirs) = ty.reqs.get(r.key)
            && !theirs.set.intersects(&r.set, number)
        {
            return false;
        }
    }
    true
}

/// The offering-relevant requirements of a node or claim.
pub(in crate::scheduling::solver) struct OfferView<'r> {
    pub(in crate::scheduling::solver) zone: Option<&'r Set>,
    pub(in crate::scheduling::solver) capacity_type: Option<&'r Set>,
    pub(in crate::scheduling::solver) reservation: Option<&'r Set>,
}

impl<'r> OfferView<'r> {
    pub(in crate::scheduling::solver) fn new(
        model: &super::Model,
        reqs: &'r crate::scheduling::solver::overlay::Overlay,
    ) -> Self {
        OfferView {
            zone: reqs.get(model.k_zone).map(|r| &r.set),
            capacity_type: reqs.get(model.k_ct).map(|r| &r.set),
            reservation: reqs.get(model.k_reservation).map(|r| &r.set),
        }
    }

    /// Whether the offering is available and compatible with the view.
    /// Reserved offerings count when held by the claim (`held`), or, when
    /// `held` is `None`, while `room` says their reservation has room.
    pub(in crate::scheduling::solver) fn usable(
        &self,
        o: &Offer,
        held: Option<&[usize]>,
        room: &impl Fn(usize) -> bool,
        number: &impl Fn(&u32) -> Option<i64>,
    ) -> bool {
        if !o.available {
            return false;
        }
        if self.zone.is_some_and(|z| !z.has(&o.zone, number)) {
            return false;
        }
        if self
            .capacity_type
            .is_some_and(|c| !c.has(&o.capacity_type_value, number))
        {
            return false;
        }
        match (o.reservation, o.reservation_value) {
            (Some(ri), Some(rv)) => {
                let usable = match held {
                    Some(h) => h.contains(&ri),
                    None => room(ri),
                };
                usable && self.reservation.is_none_or(|r| r.has(&rv, number))
            }
            _ => self
                .reservation
                .is_none_or(|r| !crate::scheduling::solver::positive(r.operator())),
        }
    }
}
