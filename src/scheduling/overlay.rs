//! NodeOverlays applied to the offerings NodePools may launch: which
//! overlay changes which offering's price and which instance type's
//! extended resources, with Karpenter's precedence and conflict rules
//! (`pkg/controllers/nodeoverlay/store.go`), as plain data.
//!
//! Overlays are taken in order of weight (higher first; equal weights by
//! name, later in the alphabet first). Per offering, the first overlay
//! that sets a price wins and later ones of lower weight leave it alone;
//! per instance type, extended resources are merged resource by resource,
//! the first overlay to set a resource winning. An overlay that would set
//! a price or resource another overlay *of the same weight* already set
//! conflicts — even with the same value, as in Karpenter — and is not
//! applied at all, on any NodePool (no partial application). An overlay
//! that fails validation is left out; neither stops the others.
//!
//! The offering keeps its catalog price in [`Offering::list_price`]; the
//! scheduler minimises [`Offering::price`], the overlaid one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::instance_type::{CapacityType, InstanceType, Offering};
use super::labels;
use super::requirements::{Requirement, Requirements};
use super::resources::parse_quantity;
use crate::apis::nodeoverlay::{
    NodeOverlay, ParsedOverlay, PriceChange, REASON_CONFLICT, REASON_RUNTIME_VALIDATION,
};

/// Reason reported for overlays that were read but not applied because
/// the `NodeOverlay` feature gate is off.
pub const REASON_GATE_OFF: &str = "FeatureGateDisabled";

/// What became of one NodeOverlay: whether it applies and, if not, why
/// (the `ValidationSucceeded` condition's reason and message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverlayStatus {
    /// The overlay's name.
    pub name: String,
    /// Whether its changes are in the offerings the scheduler sees.
    pub applied: bool,
    /// Why not ([`REASON_RUNTIME_VALIDATION`], [`REASON_CONFLICT`],
    /// [`REASON_GATE_OFF`]); `None` when applied.
    pub reason: Option<&'static str>,
    /// For people: the problem and its fix, or what the overlay matched.
    pub message: String,
}

/// One NodePool as overlays see it: its name, template labels and the
/// instance types it may launch (before overlays).
#[derive(Clone, Copy, Debug)]
pub struct PoolTypes<'a> {
    /// The NodePool's name (`karpenter.sh/nodepool`).
    pub pool: &'a str,
    /// `spec.template.metadata.labels`.
    pub labels: &'a BTreeMap<String, String>,
    /// Its instance types.
    pub types: &'a [InstanceType],
}

/// Which offering of an instance type: zone, capacity type and reservation.
type OfferingKey = (String, CapacityType, Option<String>);

fn offering_key(offering: &Offering) -> OfferingKey {
    (
        offering.zone.clone(),
        offering.capacity_type,
        offering.reservation_id.clone(),
    )
}

#[derive(Clone, Debug)]
struct PriceUpdate {
    change: PriceChange,
    lowest_weight: i32,
}

#[derive(Clone, Debug, Default)]
struct CapacityUpdate {
    resources: BTreeMap<String, i64>,
    lowest_weight_resources: BTreeSet<String>,
    lowest_weight: i32,
}

#[derive(Clone, Debug, Default)]
struct TypeUpdate {
    prices: HashMap<OfferingKey, PriceUpdate>,
    capacity: Option<CapacityUpdate>,
}

/// One overlay, valid and in the scheduler's terms.
struct Candidate<'a> {
    name: &'a str,
    requirements: Requirements,
    price: Option<PriceChange>,
    capacity: BTreeMap<String, i64>,
    weight: i32,
}

/// The overlays of a cluster evaluated against its NodePools: what each
/// did, and the changes to apply to each pool's instance types.
#[derive(Clone, Debug, Default)]
pub struct Overlays {
    statuses: Vec<OverlayStatus>,
    /// pool → instance type → changes.
    updates: HashMap<String, HashMap<String, TypeUpdate>>,
}

impl Overlays {
    /// Evaluates `overlays` against `pools` (Karpenter's NodeOverlay
    /// controller reconcile, without the API writes).
    pub fn evaluate(overlays: &[&NodeOverlay], pools: &[PoolTypes<'_>]) -> Self {
        let mut ordered: Vec<&NodeOverlay> = overlays.to_vec();
        ordered.sort_by(|a, b| {
            let weight = |o: &NodeOverlay| o.spec.weight.unwrap_or(0);
            let name = |o: &NodeOverlay| o.metadata.name.clone().unwrap_or_default();
            weight(b)
                .cmp(&weight(a))
                .then_with(|| name(b).cmp(&name(a)))
        });
        let mut out = Overlays::default();
        let mut by_name: BTreeMap<String, OverlayStatus> = BTreeMap::new();
        for overlay in &ordered {
            let name = overlay.metadata.name.clone().unwrap_or_default();
            let status = match candidate(overlay) {
                Err(message) => OverlayStatus {
                    name: name.clone(),
                    applied: false,
                    reason: Some(REASON_RUNTIME_VALIDATION),
                    message,
                },
                Ok(candidate) => out.try_apply(&candidate, pools),
            };
            by_name.insert(name, status);
        }
        out.statuses = by_name.into_values().collect();
        out
    }

    /// Every overlay's status, by name.
    pub fn statuses(&self) -> &[OverlayStatus] {
        &self.statuses
    }

    /// Whether any overlay changes a price of `pool`'s offerings (then the
    /// launch order follows the overlaid prices, see `cloudprovider::launch`).
    pub fn changes_prices(&self, pool: &str) -> bool {
        self.updates
            .get(pool)
            .is_some_and(|types| types.values().any(|t| !t.prices.is_empty()))
    }

    /// `types` of `pool` with the overlays applied; the same `Arc` when no
    /// overlay touches the pool.
    pub fn apply(&self, pool: &str, types: &Arc<Vec<InstanceType>>) -> Arc<Vec<InstanceType>> {
        let Some(updates) = self.updates.get(pool) else {
            return types.clone();
        };
        let overlaid = types
            .iter()
            .map(|it| match updates.get(&it.name) {
                None => it.clone(),
                Some(update) => apply_update(it, update),
            })
            .collect();
        Arc::new(overlaid)
    }

    /// Karpenter's two steps for one overlay: check every pool for a
    /// conflict first, then store its changes everywhere, so an overlay is
    /// applied whole or not at all.
    fn try_apply(&mut self, candidate: &Candidate<'_>, pools: &[PoolTypes<'_>]) -> OverlayStatus {
        let mut matched: Vec<(&str, &str, Vec<OfferingKey>)> = Vec::new();
        for pool in pools {
            let mut pool_requirements = Requirements::from_labels(pool.labels.iter());
            pool_requirements.add(Requirement::single(labels::NODE_POOL, pool.pool));
            for it in pool.types {
                let offerings = matching_offerings(&pool_requirements, it, &candidate.requirements);
                if offerings.is_empty() {
                    continue;
                }
                if let Some(other) = self.conflict(pool.pool, &it.name, &offerings, candidate) {
                    return OverlayStatus {
                        name: candidate.name.to_string(),
                        applied: false,
                        reason: Some(REASON_CONFLICT),
                        message: format!(
                            "conflict with another overlay of weight {} on {} of NodePool {:?} ({other}); give one of them a different weight or make their requirements exclusive",
                            candidate.weight, it.name, pool.pool
                        ),
                    };
                }
                matched.push((pool.pool, &it.name, offerings));
            }
        }
        let types = matched.len();
        let offerings: usize = matched.iter().map(|(_, _, o)| o.len()).sum();
        for (pool, type_name, keys) in matched {
            let update = self
                .updates
                .entry(pool.to_string())
                .or_default()
                .entry(type_name.to_string())
                .or_default();
            store(update, keys, candidate);
        }
        OverlayStatus {
            name: candidate.name.to_string(),
            applied: true,
            reason: None,
            message: if types == 0 {
                "valid; matches no offering of any NodePool".to_string()
            } else {
                format!("matches {offerings} offerings of {types} instance types across NodePools")
            },
        }
    }

    /// What an already stored overlay of the same weight set that
    /// `candidate` would set too, if anything.
    fn conflict(
        &self,
        pool: &str,
        type_name: &str,
        offerings: &[OfferingKey],
        candidate: &Candidate<'_>,
    ) -> Option<String> {
        let update = self.updates.get(pool)?.get(type_name)?;
        if candidate.price.is_some() {
            for key in offerings {
                if let Some(price) = update.prices.get(key)
                    && price.lowest_weight == candidate.weight
                {
                    return Some(format!(
                        "both set the price of the {} offering in {}",
                        key.1, key.0
                    ));
                }
            }
        }
        if let Some(capacity) = &update.capacity
            && capacity.lowest_weight == candidate.weight
            && let Some(resource) = candidate
                .capacity
                .keys()
                .find(|r| capacity.lowest_weight_resources.contains(*r))
        {
            return Some(format!("both set the capacity of {resource}"));
        }
        None
    }
}

/// Stores `candidate`'s changes for one instance type (no conflict check:
/// done before).
fn store(update: &mut TypeUpdate, keys: Vec<OfferingKey>, candidate: &Candidate<'_>) {
    if let Some(change) = candidate.price {
        for key in keys {
            update
                .prices
                .entry(key)
                .and_modify(|p| p.lowest_weight = candidate.weight)
                .or_insert(PriceUpdate {
                    change,
                    lowest_weight: candidate.weight,
                });
        }
    }
    if !candidate.capacity.is_empty() {
        let capacity = update.capacity.get_or_insert_with(CapacityUpdate::default);
        for (resource, amount) in &candidate.capacity {
            capacity
                .resources
                .entry(resource.clone())
                .or_insert(*amount);
        }
        capacity.lowest_weight_resources = candidate.capacity.keys().cloned().collect();
        capacity.lowest_weight = candidate.weight;
    }
}

fn apply_update(it: &InstanceType, update: &TypeUpdate) -> InstanceType {
    let mut it = it.clone();
    for offering in &mut it.offerings {
        if let Some(price) = update.prices.get(&offering_key(offering)) {
            offering.price = price.change.apply(offering.list_price);
        }
    }
    if let Some(capacity) = &update.capacity {
        for (resource, amount) in &capacity.resources {
            it.capacity.set(resource, *amount);
        }
    }
    it
}

/// The offerings of `it` the overlay selects, or none when the instance
/// type itself (with the pool's name and labels) does not match
/// (Karpenter's `getOverlaidOfferings`).
fn matching_offerings(
    pool_requirements: &Requirements,
    it: &InstanceType,
    overlay: &Requirements,
) -> Vec<OfferingKey> {
    let mut type_requirements = pool_requirements.clone();
    type_requirements.add_all(&it.requirements);
    if type_requirements.compatible(overlay, |_| false).is_err() {
        return Vec::new();
    }
    it.offerings
        .iter()
        .filter(|offering| overlay.intersects(&offering_requirements(offering)).is_ok())
        .map(offering_key)
        .collect()
}

fn offering_requirements(offering: &Offering) -> Requirements {
    let mut requirements = Requirements::new();
    requirements.add(Requirement::single(labels::ZONE, &offering.zone));
    requirements.add(Requirement::single(
        labels::CAPACITY_TYPE,
        offering.capacity_type.label_value(),
    ));
    if let Some(id) = &offering.reservation_id {
        requirements.add(Requirement::single(labels::CAPACITY_RESERVATION_ID, id));
    }
    requirements
}

/// The overlay in the scheduler's terms, or the validation problems as
/// one message naming the fields.
fn candidate(overlay: &NodeOverlay) -> Result<Candidate<'_>, String> {
    let join = |errors: Vec<String>| errors.join("; ");
    let ParsedOverlay {
        price,
        capacity,
        weight,
    } = overlay
        .spec
        .parsed()
        .map_err(|errors| join(errors.iter().map(ToString::to_string).collect()))?;
    let mut errors = Vec::new();
    let mut requirements = Requirements::new();
    for (index, requirement) in overlay.spec.requirements.iter().enumerate() {
        match Requirement::from_parts(
            &requirement.key,
            requirement.operator.into(),
            requirement.values().to_vec(),
        ) {
            Ok(parsed) => requirements.add(parsed),
            Err(e) => errors.push(format!("spec.requirements[{index}]: {e}")),
        }
    }
    let mut amounts = BTreeMap::new();
    for (resource, text) in &capacity {
        match parse_quantity(resource, text, 0) {
            Ok(amount) => {
                amounts.insert(resource.clone(), amount);
            }
            Err(e) => errors.push(format!(
                "spec.capacity[{resource}]: {e}; write a quantity such as \"1\""
            )),
        }
    }
    if !errors.is_empty() {
        return Err(join(errors));
    }
    Ok(Candidate {
        name: overlay.metadata.name.as_deref().unwrap_or_default(),
        requirements,
        price,
        capacity: amounts,
        weight,
    })
}

/// Statuses for overlays read while the `NodeOverlay` gate is off: none
/// applies, each says how to turn it on.
pub fn gate_off(overlays: &[&NodeOverlay]) -> Vec<OverlayStatus> {
    let mut statuses: Vec<OverlayStatus> = overlays
        .iter()
        .map(|o| OverlayStatus {
            name: o.metadata.name.clone().unwrap_or_default(),
            applied: false,
            reason: Some(REASON_GATE_OFF),
            message: "the NodeOverlay feature gate is off; pass --feature-gates NodeOverlay=true to apply it".into(),
        })
        .collect();
    statuses.sort_by(|a, b| a.name.cmp(&b.name));
    statuses
}

#[cfg(test)]
#[path = "overlay_tests.rs"]
mod tests;
