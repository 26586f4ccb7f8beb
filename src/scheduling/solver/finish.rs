//! Turns the solve's claims into [`NewNodeClaim`]s: ranked instance-type
//! options, the chosen offering, requirements and labels.

use crate::scheduling::index::{Ids, add_into, export_reqs};
use crate::scheduling::input::{InstanceTypeOption, NewNodeClaim, PodError, SchedulingResult};
use crate::scheduling::labels;
use crate::scheduling::launch_order::launch_order;
use crate::scheduling::requirements::Requirement;

use super::State;
use super::model::types::{Offer, OfferView};
use super::new_claims::Claim;
use super::offerings::OfferCache;
use super::overlay::Overlay;

impl State<'_> {
    pub(super) fn finish(mut self) -> SchedulingResult {
        let claims = std::mem::take(&mut self.claims);
        let mut cache = OfferCache::new();
        let mut out = Vec::new();
        for claim in claims {
            match self.finalize(&claim, &mut cache) {
                Ok(nc) => out.push(nc),
                Err(reason) => {
                    for pi in &claim.pods {
                        self.errors.push(PodError {
                            pod: self.pods[*pi as usize].reference.clone(),
                            reason: reason.clone(),
                        });
                    }
                }
            }
        }
        SchedulingResult {
            new_node_claims: out,
            existing_node_placements: self.placements,
            errors: self.errors,
        }
    }

    pub(super) fn finalize(
        &self,
        claim: &Claim,
        cache: &mut OfferCache,
    ) -> Result<NewNodeClaim, String> {
        let pool = &self.m.pools[claim.pool];
        let ov = Overlay::new(&claim.reqs);
        let view = OfferView::new(self.m, &ov);
        let cache_key = claim.held.is_empty().then(|| {
            (
                claim.pool,
                view.zone.cloned(),
                view.capacity_type.cloned(),
                view.reservation.cloned(),
            )
        });
        let mut cached = cache_key
            .as_ref()
            .and_then(|k| cache.remove(k))
            .unwrap_or_default();
        if cached.is_empty() {
            cached = vec![None; pool.types.len()];
        }
        let mut ranked: Vec<(i32, f64, u32, &Offer)> = claim
            .options
            .iter()
            .filter_map(|t| {
                let ty = &pool.types[*t as usize];
                let slot = cached.get_mut(*t as usize)?;
                let index = match *slot {
                    Some(index) => index,
                    None => {
                        let found = ty
                            .offers
                            .iter()
                            .enumerate()
                            .filter(|(_, o)| self.offer_usable(&view, o, Some(&claim.held)))
                            .min_by(|a, b| a.1.price.total_cmp(&b.1.price))
                            .map(|(i, _)| i as u32)
                            .unwrap_or(u32::MAX);
                        *slot = Some(found);
                        found
                    }
                };
                let offer = ty.offers.get(index as usize)?;
                let score = pool
                    .scores
                    .as_ref()
                    .and_then(|s| s.get(*t as usize).copied())
                    .unwrap_or(0);
                Some((score, offer.price, *t, offer))
            })
            .collect();
        if let Some(key) = cache_key {
            cache.insert(key, cached);
        }
        let rank = |r: &(i32, f64, u32, &Offer)| {
            let name = pool.types[r.2 as usize].name.as_str();
            (i64::from(r.0), r.1, name)
        };
        // Score and price decide almost every comparison; the names (a
        // load of each type) are read only on a tie.
        let order = |a: &(i32, f64, u32, &Offer), b: &(i32, f64, u32, &Offer)| {
            b.0.cmp(&a.0)
                .then_with(|| a.1.total_cmp(&b.1))
                .then_with(|| launch_order(rank(a), rank(b)).then(a.2.cmp(&b.2)))
        };
        // Only the first `max_instance_types` are kept: put them in front,
        // then sort just those (a claim may have a thousand options).
        let keep = self.m.options.max_instance_types.max(1);
        if ranked.len() > keep {
            ranked.select_nth_unstable_by(keep - 1, order);
            ranked.truncate(keep);
        }
        ranked.sort_unstable_by(order);
        let truncated: Vec<u32> = ranked.iter().map(|r| r.2).collect();
        self.check_min_values(pool, &ov, &truncated).map_err(|e| {
            format!(
                "nodepool {:?}: after keeping the {} cheapest instance types, {e}",
                pool.name(),
                truncated.len()
            )
        })?;
        let Some(&(_, price, chosen, offer)) = ranked.first() else {
            return Err(format!(
                "nodepool {:?}: no instance type option is left for the NodeClaim",
                pool.name()
            ));
        };
        let mut requirements = export_reqs(&claim.reqs, &self.keys, &self.values);
        let mut labels = requirements.single_value_labels();
        for r in requirements.iter() {
            if !labels.contains_key(&r.key)
                && !labels::is_well_known(&r.key)
                && r.key != labels::HOSTNAME
                && let Some(value) = any_value(r)
            {
                labels.insert(r.key.clone(), value);
            }
        }
        labels.extend(pool.labels().clone());
        labels.insert(labels::NODE_POOL.to_string(), pool.name().to_string());
        requirements = requirements
            .iter()
            .filter(|r| r.key != labels::HOSTNAME)
            .cloned()
            .collect();
        // The DaemonSets every option runs at least (Karpenter's
        // `addDaemonRequests`: the per-resource minimum over the options).
        let mut requests = claim.requests.clone();
        let mut overhead: Option<Vec<i64>> = None;
        for t in &truncated {
            let Some(group) = pool
                .daemon_groups
                .get(pool.types[*t as usize].daemon_group as usize)
            else {
                continue;
            };
            overhead = Some(match overhead {
                None => group.overhead.clone(),
                Some(min) => min
                    .iter()
                    .zip(&group.overhead)
                    .map(|(a, b)| (*a).min(*b))
                    .collect(),
            });
        }
        if let Some(overhead) = overhead {
            add_into(&mut requests, &overhead);
        }
        let reservation_id = offer
            .reservation_value
            .map(|v| self.values.name(v).to_string());
        Ok(NewNodeClaim {
            node_pool: pool.name().to_string(),
            instance_type_options: ranked
                .iter()
                .map(|(score, price, t, _)| InstanceTypeOption {
                    name: pool.types[*t as usize].name.clone(),
                    price: *price,
                    score: pool.scores.as_ref().map(|_| *score),
                })
                .collect(),
            instance_type: pool.types[chosen as usize].name.clone(),
            zone: self.values.name(offer.zone).to_string(),
            capacity_type: offer.capacity_type,
            price,
            reservation_id,
            pods: claim
                .pods
                .iter()
                .map(|pi| self.pods[*pi as usize].reference.clone())
                .collect(),
            requests: self.m.res.resources(&requests),
            requirements,
            labels,
            taints: pool.taints().to_vec(),
        })
    }
}

/// A value for a label whose requirement leaves it open (Karpenter's
/// `Requirement.Any()`, which picks at random), chosen deterministically so
/// a solve stays reproducible: for `In`, the first value in sorted order; for
/// `NotIn`, `Exists`, `Gt` and `Lt`, the smallest integer the requirement
/// admits, counting up from 0 or from just above the `Gt` bound. `None` for
/// `DoesNotExist`, or when no such integer exists.
fn any_value(r: &Requirement) -> Option<String> {
    if !r.values.is_complement() {
        return r.values.values().iter().min().cloned();
    }
    let start = match r.values.greater_than() {
        Some(g) => g.checked_add(1)?,
        None => 0,
    };
    let excluded = r.values.values().len() as i64;
    (0..=excluded)
        .filter_map(|i| start.checked_add(i))
        .take_while(|v| r.values.less_than().is_none_or(|lt| *v < lt))
        .map(|v| v.to_string())
        .find(|v| r.has(v))
}
