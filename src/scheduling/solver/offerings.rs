//! Offerings of an instance type during a solve: which are usable under a
//! claim's requirements, and capacity reservations held by claims.

use std::collections::HashMap;

use crate::scheduling::index::Set;
use crate::scheduling::requirements::ValueSet;

use super::model::types::{Offer, OfferView, TypeIdx};
use super::new_claims::Claim;
use super::overlay::Overlay;
use super::{Commit, State};

/// Cheapest usable offering index per instance type (`u32::MAX`: none), per
/// pool and offering-relevant requirements, shared by claims that hold no
/// reservation.
pub(super) type OfferCache =
    HashMap<(usize, Option<Set>, Option<Set>, Option<Set>), Vec<Option<u32>>>;

impl State<'_> {
    /// The cheapest available offering compatible with the requirements.
    /// Reserved offerings count when held by the claim (`held`), or, when
    /// `held` is `None`, while their reservation has room.
    pub(super) fn cheapest_offer<'t>(
        &self,
        ty: &'t TypeIdx,
        reqs: &Overlay,
        held: Option<&[usize]>,
    ) -> Option<&'t Offer> {
        let view = OfferView::new(self.m, reqs);
        ty.offers
            .iter()
            .filter(|o| self.offer_usable(&view, o, held))
            .min_by(|a, b| a.price.total_cmp(&b.price))
    }

    /// Whether any offering of `ty` is usable under `reqs` (see [`Self::cheapest_offer`]).
    pub(super) fn has_offer(&self, ty: &TypeIdx, reqs: &Overlay, held: Option<&[usize]>) -> bool {
        let view = OfferView::new(self.m, reqs);
        ty.offers.iter().any(|o| self.offer_usable(&view, o, held))
    }

    pub(super) fn offer_usable(&self, view: &OfferView, o: &Offer, held: Option<&[usize]>) -> bool {
        view.usable(o, held, &|r| self.reservation_room(r), &self.number())
    }

    /// Karpenter's reserved-capacity rule: a new NodeClaim that can use a
    /// reservation with room is pinned to reserved capacity and holds it;
    /// otherwise reserved capacity is excluded.
    pub(super) fn pin_reservations(
        &self,
        claim: &Claim,
        commit: &mut Commit,
    ) -> Result<(), String> {
        let pool = &self.m.pools[claim.pool];
        if !pool.has_reserved {
            return Ok(());
        }
        let number = self.number();
        let ov = Overlay {
            base: &claim.reqs,
            changes: commit.changes.clone(),
        };
        let allows_reserved = ov
            .get(self.m.k_ct)
            .is_none_or(|r| r.set.has(&self.m.v_reserved, &number));
        if !allows_reserved {
            return Ok(());
        }
        let reserved_only: Set = ValueSet::of(vec![self.m.v_reserved]);
        let mut pinned = Overlay {
            base: &claim.reqs,
            changes: commit.changes.clone(),
        };
        pinned.narrow(self.m.k_ct, &reserved_only, None, &self.values);
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
        let others: Set = ValueSet::except(vec![self.m.v_reserved]);
        let mut fallback = Overlay {
            base: &claim.reqs,
            changes: commit.changes.clone(),
        };
        if !fallback.narrow(self.m.k_ct, &others, None, &self.values) {
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
        self.reservation_room(ri) && self.cheapest_offer(ty, reqs, Some(&[ri])).is_some()
    }

    pub(super) fn release_unused_reservations(&mut self, ci: usize) {
        let claim = &self.claims[ci];
        let pool = &self.m.pools[claim.pool];
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
            if let Some(held) = self.held.get_mut(r) {
                *held = held.saturating_sub(1);
            }
        }
        self.claims[ci].held = still;
    }
}
