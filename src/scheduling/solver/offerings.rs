//! Offerings of an instance type: which are usable under a claim's
//! requirements, and capacity reservations held by claims.

use std::collections::HashMap;

use crate::scheduling::index::{Reqs, Res, Set};
use crate::scheduling::instance_type::CapacityType;
use crate::scheduling::requirements::ValueSet;

use super::new_claims::Claim;
use super::overlay::Overlay;
use super::{Commit, Solver, positive};

pub(super) struct Offer {
    pub(super) zone: u32,
    pub(super) capacity_type: CapacityType,
    pub(super) capacity_type_value: u32,
    pub(super) price: f64,
    pub(super) available: bool,
    pub(super) reservation: Option<usize>,
    pub(super) reservation_value: Option<u32>,
}

pub(super) struct TypeIdx {
    pub(super) name: String,
    pub(super) reqs: Reqs,
    /// Allocatable left for pods once the DaemonSets that run on this type
    /// in its pool are placed.
    pub(super) alloc: Res,
    /// The pool's [`DaemonGroup`](super::daemonsets::DaemonGroup) for this type.
    pub(super) daemon_group: u32,
    pub(super) capacity: Res,
    pub(super) offers: Vec<Offer>,
}

pub(super) struct Reservation {
    pub(super) capacity: u32,
    pub(super) held: u32,
}

/// The offering-relevant requirements of a node or claim.
pub(super) struct OfferView<'r> {
    pub(super) zone: Option<&'r Set>,
    pub(super) capacity_type: Option<&'r Set>,
    pub(super) reservation: Option<&'r Set>,
}

impl<'r> OfferView<'r> {
    pub(super) fn new(solver: &Solver, reqs: &'r Overlay) -> Self {
        OfferView {
            zone: reqs.get(solver.k_zone).map(|r| &r.set),
            capacity_type: reqs.get(solver.k_ct).map(|r| &r.set),
            reservation: reqs.get(solver.k_reservation).map(|r| &r.set),
        }
    }
}

/// Cheapest usable offering index per instance type (`u32::MAX`: none), per
/// pool and offering-relevant requirements, shared by claims that hold no
/// reservation.
pub(super) type OfferCache =
    HashMap<(usize, Option<Set>, Option<Set>, Option<Set>), Vec<Option<u32>>>;

impl Solver<'_> {
    /// The cheapest available offering compatible with the requirements.
    /// Reserved offerings count when held by the claim (`held`), or, when
    /// `held` is `None`, while their reservation has room.
    pub(super) fn cheapest_offer<'t>(
        &self,
        ty: &'t TypeIdx,
        reqs: &Overlay,
        held: Option<&[usize]>,
    ) -> Option<&'t Offer> {
        let view = OfferView::new(self, reqs);
        ty.offers
            .iter()
            .filter(|o| self.offer_usable(&view, o, held))
            .min_by(|a, b| a.price.total_cmp(&b.price))
    }

    /// Whether any offering of `ty` is usable under `reqs` (see [`Self::cheapest_offer`]).
    pub(super) fn has_offer(&self, ty: &TypeIdx, reqs: &Overlay, held: Option<&[usize]>) -> bool {
        let view = OfferView::new(self, reqs);
        ty.offers.iter().any(|o| self.offer_usable(&view, o, held))
    }

    pub(super) fn offer_usable(&self, view: &OfferView, o: &Offer, held: Option<&[usize]>) -> bool {
        let number = |v: &u32| self.values.number(*v);
        if !o.available {
            return false;
        }
        if view.zone.is_some_and(|z| !z.has(&o.zone, &number)) {
            return false;
        }
        if view
            .capacity_type
            .is_some_and(|c| !c.has(&o.capacity_type_value, &number))
        {
            return false;
        }
        match (o.reservation, o.reservation_value) {
            (Some(ri), Some(rv)) => {
                let usable = match held {
                    Some(h) => h.contains(&ri),
                    None => self
                        .reservations
                        .get(ri)
                        .is_some_and(|r| r.held < r.capacity),
                };
                usable && view.reservation.is_none_or(|r| r.has(&rv, &number))
            }
            _ => view.reservation.is_none_or(|r| !positive(r.operator())),
        }
    }

    /// Karpenter's reserved-capacity rule: a new NodeClaim that can use a
    /// reservation with room is pinned to reserved capacity and holds it;
    /// otherwise reserved capacity is excluded.
    pub(super) fn pin_reservations(
        &self,
        claim: &Claim,
        commit: &mut Commit,
    ) -> Result<(), String> {
        let pool = &self.pools[claim.pool];
        if !pool.has_reserved {
            return Ok(());
        }
        let number = |v: &u32| self.values.number(*v);
        let ov = Overlay {
            base: &claim.reqs,
            changes: commit.changes.clone(),
        };
        let allows_reserved = ov
            .get(self.k_ct)
            .is_none_or(|r| r.set.has(&self.v_reserved, &number));
        if !allows_reserved {
            return Ok(());
        }
        let reserved_only: Set = ValueSet::of(vec![self.v_reserved]);
        let mut pinned = Overlay {
            base: &claim.reqs,
            changes: commit.changes.clone(),
        };
        pinned.narrow(self.k_ct, &reserved_only, None, &self.values);
        let mut held = Vec::new();
        let mut kept = Vec::new();
        let mut any_reserved = false;
        for &t in &commit.options {
            let ty = &pool.types[t as usize];
            any_reserved |= ty.offers.iter().any(|o| o.reservation.is_some());
            let mut usable = false;
            for o in &ty.offers {
                let Some(ri) = o.reservation else { continue };
                if self.cheapest_offer_single(ty, &pinned, o) {
                    usable = true;
                    if !held.contains(&ri) {
                        held.push(ri);
                    }
                }
            }
            if usable {
                kept.push(t);
            }
        }
        if !kept.is_empty() {
            commit.changes = pinned.changes;
            commit.options = kept;
            commit.held = held;
            return Ok(());
        }
        if !any_reserved {
            return Ok(());
        }
        let others: Set = ValueSet::except(vec![self.v_reserved]);
        let mut fallback = Overlay {
            base: &claim.reqs,
            changes: commit.changes.clone(),
        };
        if !fallback.narrow(self.k_ct, &others, None, &self.values) {
            return Err("every compatible capacity reservation is already in use".to_string());
        }
        let kept: Vec<u32> = commit
            .options
            .iter()
            .copied()
            .filter(|t| {
                self.cheapest_offer(&pool.types[*t as usize], &fallback, Some(&[]))
                    .is_some()
            })
            .collect();
        if kept.is_empty() {
            return Err("every compatible capacity reservation is already in use".to_string());
        }
        commit.changes = fallback.changes;
        commit.options = kept;
        Ok(())
    }

    /// Whether `offer`'s reservation has room and one of its offerings for
    /// this type is compatible with the (reserved-pinned) requirements.
    pub(super) fn cheapest_offer_single(
        &self,
        ty: &TypeIdx,
        reqs: &Overlay,
        offer: &Offer,
    ) -> bool {
        let Some(ri) = offer.reservation else {
            return false;
        };
        let room = self
            .reservations
            .get(ri)
            .is_some_and(|r| r.held < r.capacity);
        room && self.cheapest_offer(ty, reqs, Some(&[ri])).is_some()
    }

    pub(super) fn release_unused_reservations(&mut self, ci: usize) {
        let claim = &self.claims[ci];
        let pool = &self.pools[claim.pool];
        let ov = Overlay::new(&claim.reqs);
        let still: Vec<usize> = claim
            .held
            .iter()
            .copied()
            .filter(|ri| {
                claim.options.iter().any(|t| {
                    let ty = &pool.types[*t as usize];
                    ty.offers.iter().any(|o| o.reservation == Some(*ri))
                        && self
                            .cheapest_offer(ty, &ov, Some(&[*ri]))
                            .is_some_and(|o| o.reservation == Some(*ri))
                })
            })
            .collect();
        let released: Vec<usize> = claim
            .held
            .iter()
            .copied()
            .filter(|r| !still.contains(r))
            .collect();
        for r in released {
            if let Some(res) = self.reservations.get_mut(r) {
                res.held = res.held.saturating_sub(1);
            }
        }
        self.claims[ci].held = still;
    }
}
