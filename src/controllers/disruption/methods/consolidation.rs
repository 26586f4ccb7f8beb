//! What multi- and single-node consolidation share (Karpenter's
//! `consolidation.go`): which candidates they may take (`ShouldDisrupt`),
//! their order (savings over disruption, best first), and
//! `computeConsolidation` — the candidates' pods rescheduled, then a
//! delete, or a replace by one NodeClaim whose instance types all launch
//! for less than the candidates cost, with Karpenter's spot-to-spot rules.

use std::collections::BTreeSet;

use kube::ResourceExt;

use super::super::balanced::{self, PoolScore, ScoredMove};
use super::super::context::{PassContext, moves, own_replacements};
use super::super::types::{Candidate, Command, KeptReason, Method, Verdict};
use crate::apis::labels::{CAPACITY_TYPE_LABEL_KEY, ZONE_LABEL_KEY};
use crate::apis::nodepool::{ConsolidationPolicy, DisruptionReason};
use crate::scheduling::{
    CapacityType, InstanceType, NewNodeClaim, Offering, Requirement, Requirements,
};

/// Karpenter's `MinInstanceTypesForSpotToSpotConsolidation`: a spot node is
/// replaced by spot only when at least this many cheaper types remain, so
/// the replacement is not the next to be interrupted.
pub const SPOT_TO_SPOT_MIN_TYPES: usize = 15;

/// The NodePool's `consolidationPolicy`.
pub fn policy(candidate: &Candidate) -> ConsolidationPolicy {
    candidate
        .node_pool
        .spec
        .effective_disruption()
        .consolidation_policy
        .unwrap_or(ConsolidationPolicy::WhenEmptyOrUnderutilized)
}

/// Whether consolidation may take `c` for being underutilized, or why not
/// (Karpenter's consolidation `ShouldDisrupt`, then the budget). Empty
/// nodes are emptiness's, under the `Empty` budget: `None` for them.
pub fn consolidatable(ctx: &PassContext, c: &Candidate) -> Option<Result<(), Verdict>> {
    let pool = &c.pool;
    if c.node_pool.spec.replicas.is_some() {
        return Some(Err((
            KeptReason::Policy,
            format!(
                "NodePool {pool:?} is static (spec.replicas); its nodes are never consolidated"
            ),
        )));
    }
    if let Some(verdict) = unknown_offering(ctx, c) {
        return Some(Err(verdict));
    }
    if c.node_pool
        .spec
        .effective_disruption()
        .consolidate_after
        .duration()
        .is_ok_and(|d| d.is_none())
    {
        return Some(Err((
            KeptReason::Policy,
            format!("NodePool {pool:?} has consolidateAfter: Never; consolidation is off"),
        )));
    }
    if c.pods.is_empty() {
        return None;
    }
    if policy(c) == ConsolidationPolicy::WhenEmpty {
        return Some(Err((
            KeptReason::Policy,
            format!(
                "NodePool {pool:?} has consolidationPolicy WhenEmpty and the node runs pods; set WhenEmptyOrUnderutilized to consolidate it"
            ),
        )));
    }
    if !c.marks.consolidatable {
        return Some(Err((
            KeptReason::NotConsolidatable,
            "not Consolidatable: consolidateAfter has not passed since the last pod came or went"
                .to_string(),
        )));
    }
    if let Some(verdict) = c.blocked_for(Method::SingleNodeConsolidation) {
        return Some(Err(verdict.clone()));
    }
    if let Some(kind) = &c.interruption_cordon {
        return Some(Err((
            KeptReason::Policy,
            format!(
                "the node was cordoned for a {kind} message under NodePool {pool:?}'s Cordon policy; its pods wait for an operator, so it is not consolidated (uncordon it to let consolidation take it)"
            ),
        )));
    }
    if ctx.allowed(pool, DisruptionReason::Underutilized) == 0 {
        return Some(Err(
            ctx.budget_verdict(pool, DisruptionReason::Underutilized)
        ));
    }
    Some(Ok(()))
}

/// Why the candidate's price cannot be known: its instance type is not
/// among its NodePool's, or it lacks the capacity-type or zone label.
fn unknown_offering(ctx: &PassContext, c: &Candidate) -> Option<Verdict> {
    let known = c.instance_type.as_ref().is_some_and(|name| {
        ctx.types
            .get(&c.pool)
            .is_some_and(|types| types.iter().any(|t| &t.name == name))
    });
    let missing = if !known {
        format!(
            "instance type {:?} is not among NodePool {:?}'s",
            c.instance_type.as_deref().unwrap_or_default(),
            c.pool
        )
    } else if c.capacity_type.is_none() {
        format!("the node has no {CAPACITY_TYPE_LABEL_KEY} label")
    } else if c.zone.is_none() {
        format!("the node has no {ZONE_LABEL_KEY} label")
    } else {
        return None;
    };
    Some((
        KeptReason::UnknownOffering,
        format!("{missing}; its price is unknown, so it is not consolidated"),
    ))
}

/// Karpenter's consolidation order: the most savings per unit of
/// disruption first (`SavingsRatio`, descending), then by name.
pub fn by_savings_ratio<'a>(candidates: &[&'a Candidate]) -> Vec<&'a Candidate> {
    let mut out = candidates.to_vec();
    out.sort_by(|a, b| {
        b.savings_ratio()
            .total_cmp(&a.savings_ratio())
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}

/// A consolidation of `candidates` (all their pods rescheduled): a delete
/// when they fit on the rest of the cluster, a replace by one NodeClaim
/// whose instance types launch for less than the candidates together
/// (Karpenter's `computeConsolidation`).
pub fn consolidate(
    ctx: &PassContext,
    method: Method,
    candidates: &[&Candidate],
) -> Result<Command, Verdict> {
    let result = ctx
        .reschedule(method, candidates)
        .map_err(|m| (KeptReason::PodsDoNotFit, m))?;
    let mut result = own_replacements(candidates, result);
    if result.new_node_claims.len() > 1 {
        return Err((
            KeptReason::PodsDoNotFit,
            format!(
                "its pods would need {} new nodes; consolidation replaces with at most one",
                result.new_node_claims.len()
            ),
        ));
    }
    if let Some(replacement) = result.new_node_claims.first_mut() {
        cheaper_replacement(ctx, candidates, replacement)?;
    }
    Ok(Command {
        method,
        moves: moves(candidates, &result),
        candidates: candidates.iter().map(|c| (*c).clone()).collect(),
        replacements: result.new_node_claims,
    })
}

/// Narrows `replacement` to the instance types that launch for less than
/// `candidates` cost, in the NodePool's priority order, with Karpenter's
/// capacity-type rules: a spot node is replaced by spot only behind the
/// gate and with enough cheaper types; an on-demand node that may become
/// spot becomes spot only (a launch falling back to on-demand would cost
/// more than it saves).
fn cheaper_replacement(
    ctx: &PassContext,
    candidates: &[&Candidate],
    replacement: &mut NewNodeClaim,
) -> Result<(), Verdict> {
    let before: f64 = candidates.iter().map(|c| c.price).sum();
    let Some(types) = ctx.types.get(&replacement.node_pool) else {
        return Err((
            KeptReason::NoCheaperOption,
            format!("NodePool {:?} has no instance types", replacement.node_pool),
        ));
    };
    let all_spot = candidates
        .iter()
        .all(|c| c.capacity_type == Some(CapacityType::Spot));
    let allows = |ct: CapacityType| {
        allows(
            &replacement.requirements,
            CAPACITY_TYPE_LABEL_KEY,
            ct.label_value(),
        )
    };
    let spot_to_spot = all_spot && allows(CapacityType::Spot);
    if spot_to_spot && !ctx.spot_to_spot {
        return Err((
            KeptReason::SpotToSpot,
            "SpotToSpotConsolidation is disabled, so a spot node is not replaced by a spot node; enable the feature gate".to_string(),
        ));
    }
    if spot_to_spot || (allows(CapacityType::Spot) && allows(CapacityType::OnDemand)) {
        replacement.requirements.add(Requirement::single(
            CAPACITY_TYPE_LABEL_KEY,
            CapacityType::Spot.label_value(),
        ));
    }
    let find = |name: &str| types.iter().find(|t| t.name == name);
    // Options the requirements still allow, cheapest launch first (Karpenter
    // orders by price before truncating or checking minValues).
    let mut fitting: Vec<_> = std::mem::take(&mut replacement.instance_type_options)
        .into_iter()
        .filter_map(|mut o| {
            let ty = find(&o.name)?;
            o.price = cheapest(ty, &replacement.requirements)?;
            Some((worst_launch_price(ty, &replacement.requirements), o))
        })
        .collect();
    fitting.sort_by(|a, b| a.1.price.total_cmp(&b.1.price));
    // Never down the NodePool's priority order: a type the scorers rank
    // below the node's is not what provisioning would launch either.
    let floor = candidates.iter().map(|c| ctx.score(c)).min().unwrap_or(0);
    let mut options: Vec<_> = fitting
        .iter()
        .filter(|(worst, o)| *worst < before && o.score.unwrap_or(0) >= floor)
        .map(|(_, o)| o.clone())
        .collect();
    if options.is_empty()
        && let [candidate] = candidates
        && migrates(candidate)
    {
        // Priority back-migration: up the order at no higher price.
        options = fitting
            .iter()
            .filter(|(worst, o)| *worst <= before && o.score.unwrap_or(0) > floor)
            .map(|(_, o)| o.clone())
            .collect();
    }
    if candidates.len() > 1 {
        // Several nodes into one of a type among theirs: keep the cheapest
        // such node and delete the others instead (fewer pods move), unless
        // the replacement is cheaper than it (Karpenter's
        // `filterOutSameInstanceType`).
        let same_type_price = candidates
            .iter()
            .filter(|c| {
                options
                    .iter()
                    .any(|o| c.instance_type.as_deref() == Some(o.name.as_str()))
            })
            .map(|c| c.price)
            .fold(f64::INFINITY, f64::min);
        options.retain(|o| o.price < same_type_price);
        if options.is_empty() {
            return Err((
                KeptReason::NoCheaperOption,
                "one node of a type these nodes already run would replace them; deleting the others moves fewer pods".to_string(),
            ));
        }
    }
    if options.is_empty() {
        let cheaper = fitting.iter().any(|(worst, _)| *worst < before);
        let message = if cheaper {
            format!(
                "the instance types that fit its pods for less than ${before:.4}/h rank below its own in the NodePool's priority order"
            )
        } else {
            format!(
                "can't replace with a cheaper node: no instance type that fits its pods launches for less than ${before:.4}/h"
            )
        };
        return Err((KeptReason::NoCheaperOption, message));
    }
    if let Some(message) = min_values_broken(ctx, replacement, &options) {
        return Err((KeptReason::MinValues, message));
    }
    if spot_to_spot && candidates.len() == 1 {
        if options.len() < SPOT_TO_SPOT_MIN_TYPES {
            return Err((
                KeptReason::SpotToSpot,
                format!(
                    "SpotToSpotConsolidation requires {SPOT_TO_SPOT_MIN_TYPES} cheaper instance type options than the current candidate to consolidate, got {}",
                    options.len()
                ),
            ));
        }
        // Launch among the cheapest only, so the instance spot gives is
        // one consolidation would not replace again at once; with
        // minValues, as many as they need if more.
        let keep = SPOT_TO_SPOT_MIN_TYPES.max(min_values_count(ctx, replacement, &options));
        options.truncate(keep);
    }
    replacement.instance_type_options = options;
    let first = &replacement.instance_type_options[0];
    if let Some(offering) =
        find(&first.name).and_then(|t| cheapest_offering(t, &replacement.requirements))
    {
        replacement.instance_type = first.name.clone();
        replacement.zone = offering.zone.clone();
        replacement.capacity_type = offering.capacity_type;
        replacement.reservation_id = offering.reservation_id.clone();
        replacement.price = offering.price;
    }
    Ok(())
}

/// Whether `requirements` let `key` take `value` (an unconstrained key
/// lets it take any).
fn allows(requirements: &Requirements, key: &str, value: &str) -> bool {
    requirements.get(key).is_none_or(|r| r.has(value))
}

/// Whether a launch under `requirements` may use `offering`.
fn offering_allowed(requirements: &Requirements, offering: &Offering) -> bool {
    offering.available && offering.allowed_by(requirements)
}

fn cheapest_offering<'a>(
    ty: &'a InstanceType,
    requirements: &Requirements,
) -> Option<&'a Offering> {
    ty.offerings
        .iter()
        .filter(|o| offering_allowed(requirements, o))
        .min_by(|a, b| a.price.total_cmp(&b.price))
}

/// The cheapest offering a launch under `requirements` may use.
fn cheapest(ty: &InstanceType, requirements: &Requirements) -> Option<f64> {
    cheapest_offering(ty, requirements).map(|o| o.price)
}

/// Karpenter's `WorstLaunchPrice`: what a launch under `requirements` may
/// pay at most — the dearest allowed offering of the first capacity type,
/// of reserved, spot and on-demand, that has one (a fleet picks among
/// zones and pools, not the cheapest). Infinite when none is allowed.
pub fn worst_launch_price(ty: &InstanceType, requirements: &Requirements) -> f64 {
    [
        CapacityType::Reserved,
        CapacityType::Spot,
        CapacityType::OnDemand,
    ]
    .into_iter()
    .find_map(|ct| {
        ty.offerings
            .iter()
            .filter(|o| o.capacity_type == ct && offering_allowed(requirements, o))
            .map(|o| o.price)
            .max_by(f64::total_cmp)
    })
    .unwrap_or(f64::INFINITY)
}

/// Whether `candidate`'s NodePool opts into priority back-migration (an
/// invalid value is off; the NodePool's `ValidationSucceeded` reports it).
fn migrates(candidate: &Candidate) -> bool {
    crate::apis::validation::priority_migration(candidate.node_pool.annotations()).unwrap_or(false)
}

/// The values of `requirement`'s key that `options` offer (among the
/// values the requirement allows).
fn offered_values<'a>(
    types: &'a [InstanceType],
    requirement: &Requirement,
    options: impl IntoIterator<Item = &'a str>,
) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    for name in options {
        let Some(label) = types
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.requirements.get(&requirement.key))
            .filter(|r| !r.values.is_complement())
        else {
            continue;
        };
        seen.extend(
            label
                .values
                .values()
                .iter()
                .filter(|v| requirement.has(v))
                .map(String::as_str),
        );
    }
    seen
}

/// Why `options` no longer meet a `minValues` of `replacement`'s
/// requirements (Karpenter's `RemoveInstanceTypeOptionsByPriceAndMinValues`
/// error), when `--min-values-policy Strict` asks it.
fn min_values_broken(
    ctx: &PassContext,
    replacement: &NewNodeClaim,
    options: &[crate::scheduling::InstanceTypeOption],
) -> Option<String> {
    if !ctx.min_values_strict {
        return None;
    }
    let types = ctx.types.get(&replacement.node_pool)?;
    for requirement in replacement.requirements.iter() {
        let Some(min) = requirement.min_values else {
            continue;
        };
        let seen = offered_values(types, requirement, options.iter().map(|o| o.name.as_str()));
        if seen.len() < min as usize {
            return Some(format!(
                "a cheaper replacement would offer {} value(s) of {} where the NodePool's minValues asks for {min}; lower minValues or widen the requirement",
                seen.len(),
                requirement.key
            ));
        }
    }
    None
}

/// How many of `options`, cheapest first, it takes to meet every
/// `minValues` of `replacement`'s requirements (Karpenter's
/// `SatisfiesMinValues` count; 0 without minValues).
fn min_values_count(
    ctx: &PassContext,
    replacement: &NewNodeClaim,
    options: &[crate::scheduling::InstanceTypeOption],
) -> usize {
    let Some(types) = ctx.types.get(&replacement.node_pool) else {
        return 0;
    };
    let with_min: Vec<&Requirement> = replacement
        .requirements
        .iter()
        .filter(|r| r.min_values.is_some())
        .collect();
    if with_min.is_empty() {
        return 0;
    }
    for n in 1..=options.len() {
        let names = || options[..n].iter().map(|o| o.name.as_str());
        let met = with_min
            .iter()
            .all(|r| offered_values(types, r, names()).len() >= r.min_values.unwrap_or(0) as usize);
        if met {
            return n;
        }
    }
    options.len()
}

/// `command`'s parts per NodePool, and whether every `Balanced` pool it
/// touches approves it.
pub fn scored(ctx: &PassContext, command: &Command) -> (Vec<PoolScore>, Result<(), Verdict>) {
    let parts = balanced::evaluate(command, ctx.totals);
    let approved = balanced::approve(&parts).map_err(|message| (KeptReason::Policy, message));
    (parts, approved)
}

/// Notes a scored move for the pass's metrics and events.
pub fn record_move(ctx: &PassContext, command: &Command, pools: Vec<PoolScore>, approved: bool) {
    let candidates = command
        .candidates
        .iter()
        .map(|c| (c.name.clone(), c.node_claim.name_any()))
        .collect();
    ctx.moves.borrow_mut().push(ScoredMove {
        multi_node: command.candidates.len() > 1,
        candidates,
        pools,
        approved,
    });
}

/// Whether deleting `c` outright — the best any move on it can do — would
/// pass its pool's `Balanced` score (Karpenter's `CanPassThreshold`); other
/// policies always may.
pub fn could_pass_balanced(ctx: &PassContext, c: &Candidate) -> Result<(), Verdict> {
    if policy(c) != ConsolidationPolicy::Balanced {
        return Ok(());
    }
    let totals = ctx.totals.get(&c.pool).copied().unwrap_or_default();
    if totals.cost <= 0.0 {
        return Ok(());
    }
    let best = balanced::score_move(c.price, c.reschedule_cost, totals);
    if best.approved() {
        return Ok(());
    }
    Err((
        KeptReason::Policy,
        format!(
            "NodePool {:?} is Balanced: even deleting the node saves {:.1}% of the pool's cost for {:.1}% of its disruption cost (score {:.2}, under {:.2})",
            c.pool,
            best.savings_fraction * 100.0,
            best.disruption_fraction * 100.0,
            best.value(),
            1.0 / balanced::BALANCED_K
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::Operator;

    fn offering(zone: &str, ct: CapacityType, price: f64) -> Offering {
        Offering::new(zone, ct, price)
    }

    #[test]
    fn the_worst_launch_price_is_the_dearest_allowed_offering_of_the_preferred_capacity_type() {
        let ty = InstanceType::new(
            "m5.large",
            Requirements::new(),
            vec![
                offering("a", CapacityType::Spot, 0.03),
                offering("b", CapacityType::Spot, 0.05),
                offering("a", CapacityType::OnDemand, 0.096),
            ],
            crate::scheduling::Resources::cpu_memory(2000, 8 << 30),
            crate::scheduling::Overhead::default(),
        );
        let any = Requirements::new();
        assert_eq!(worst_launch_price(&ty, &any), 0.05, "spot before on-demand");
        let mut on_demand = Requirements::new();
        on_demand.add(Requirement::single(CAPACITY_TYPE_LABEL_KEY, "on-demand"));
        assert_eq!(worst_launch_price(&ty, &on_demand), 0.096);
        let mut zone_a = Requirements::new();
        zone_a.add(
            Requirement::new(ZONE_LABEL_KEY, Operator::In, &["a"]).expect("a valid requirement"),
        );
        assert_eq!(worst_launch_price(&ty, &zone_a), 0.03);
        let mut nowhere = Requirements::new();
        nowhere.add(Requirement::single(ZONE_LABEL_KEY, "z"));
        assert_eq!(worst_launch_price(&ty, &nowhere), f64::INFINITY);
    }
}
