//! The disruption methods, in Karpenter's order: emptiness, drift,
//! multi-node consolidation, single-node consolidation. Each looks at the
//! candidates and returns at most one command. Every command that moves
//! pods is checked by rescheduling them — with the cluster's pending pods —
//! on the compiled scheduling model without the candidates: the same
//! scheduler, instance types and cluster that provisioning uses.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use kube::ResourceExt;

use super::balanced::{self, PoolScore, PoolTotals, ScoredMove};
use super::candidates::{Candidate, KeptReason};
use crate::apis::nodepool::{ConsolidationPolicy, DisruptionReason};
use crate::scheduling::{InstanceType, Model, NewNodeClaim, Pod, PodKey, SchedulingResult};

/// Karpenter's `MinInstanceTypesForSpotToSpotConsolidation`: a spot node is
/// replaced by spot only when at least this many cheaper types remain, so
/// the replacement is not the next to be interrupted.
pub const SPOT_TO_SPOT_MIN_TYPES: usize = 15;
/// Karpenter's multi-node consolidation looks at no more than this many
/// candidates at once.
pub const MULTI_NODE_MAX_CANDIDATES: usize = 100;

/// How a node is disrupted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `expireAfter` passed (forceful, not budgeted).
    Expiration,
    /// Nodes without reschedulable pods.
    Emptiness,
    /// Nodes whose NodeClaim is `Drifted`.
    Drift,
    /// Several nodes replaced by at most one.
    MultiNodeConsolidation,
    /// One node deleted or replaced by a cheaper one.
    SingleNodeConsolidation,
}

impl Method {
    /// The method as `simulate --disruption` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Expiration => "expiration",
            Method::Emptiness => "emptiness",
            Method::Drift => "drift",
            Method::MultiNodeConsolidation => "multi-node-consolidation",
            Method::SingleNodeConsolidation => "single-node-consolidation",
        }
    }

    /// The reason it disrupts for (`Expired` is not a budget reason).
    pub fn reason(self) -> &'static str {
        match self {
            Method::Expiration => "Expired",
            Method::Emptiness => "Empty",
            Method::Drift => "Drifted",
            Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => "Underutilized",
        }
    }

    /// Karpenter's `consolidation_type` metric label (empty for drift and
    /// expiration).
    pub fn consolidation_type(self) -> &'static str {
        match self {
            Method::Emptiness => "empty",
            Method::MultiNodeConsolidation => "multi",
            Method::SingleNodeConsolidation => "single",
            Method::Expiration | Method::Drift => "",
        }
    }

    /// The budget reason it counts against, if budgeted.
    pub fn budget_reason(self) -> Option<DisruptionReason> {
        match self {
            Method::Expiration => None,
            Method::Emptiness => Some(DisruptionReason::Empty),
            Method::Drift => Some(DisruptionReason::Drifted),
            Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => {
                Some(DisruptionReason::Underutilized)
            }
        }
    }
}

/// Where a displaced pod goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// An existing node (or in-flight NodeClaim), by name.
    Node(String),
    /// The command's replacement at this index.
    Replacement(usize),
    /// Nowhere: an expired node's pod that nothing can take (expiration
    /// does not wait for room).
    Pending,
}

/// One decision: the candidates go, replaced by `replacements`.
#[derive(Clone, Debug)]
pub struct Command {
    /// The method that decided it.
    pub method: Method,
    /// The nodes that go.
    pub candidates: Vec<Candidate>,
    /// NodeClaims launched first (empty: a delete).
    pub replacements: Vec<NewNodeClaim>,
    /// Each displaced pod's destination.
    pub moves: Vec<(PodKey, Destination)>,
}

impl Command {
    /// `delete` or `replace`.
    pub fn decision(&self) -> &'static str {
        if self.replacements.is_empty() {
            "delete"
        } else {
            "replace"
        }
    }

    /// What the candidates cost per hour.
    pub fn price_before(&self) -> f64 {
        // Folded from +0.0: the sum of no f64s is -0.0.
        self.candidates.iter().fold(0.0, |total, c| total + c.price)
    }

    /// What the replacements cost per hour.
    pub fn price_after(&self) -> f64 {
        self.replacements
            .iter()
            .fold(0.0, |total, r| total + r.price)
    }
}

/// A candidate a method looked at and left, and why.
pub type Verdict = (KeptReason, String);

/// What a pass may use: the model of the cluster as it stands (nodes that
/// earlier commands took are in it as being deleted, and take no pods), and
/// how many more nodes each NodePool's budget lets go per reason.
pub struct PassContext<'a> {
    /// The cluster compiled once for this pass.
    pub model: &'a Model,
    /// Pods of nodes already being deleted: placed in every what-if, so no
    /// command takes the room they will need.
    pub deleting: &'a [Pod],
    /// Nodes each pool may still disrupt, per budget reason.
    pub allowed: &'a Allowed,
    /// Why a NodePool's budgets cannot be evaluated (it then allows none).
    pub budget_errors: &'a BTreeMap<String, String>,
    /// `SpotToSpotConsolidation` is enabled.
    pub spot_to_spot: bool,
    /// Each NodePool's instance types, to check a replacement's `minValues`.
    pub types: &'a BTreeMap<String, Arc<Vec<InstanceType>>>,
    /// `minValues` must hold (`--min-values-policy Strict`).
    pub min_values_strict: bool,
    /// Each NodePool's instance-type priority scores (pools with scorers).
    pub scores: &'a BTreeMap<String, Arc<HashMap<String, i32>>>,
    /// Each NodePool's cost and disruption totals, for `Balanced`.
    pub totals: &'a BTreeMap<String, PoolTotals>,
    /// The consolidation moves scored in the pass, as they are scored.
    pub moves: &'a RefCell<Vec<ScoredMove>>,
}

/// A budget reason as a map key.
pub type DisruptionReasonKey = &'static str;

/// Nodes each NodePool may still disrupt, per budget reason.
pub type Allowed = BTreeMap<(String, DisruptionReasonKey), usize>;

/// The key of `reason` in [`PassContext::allowed`].
pub fn reason_key(reason: DisruptionReason) -> DisruptionReasonKey {
    match reason {
        DisruptionReason::Empty => "Empty",
        DisruptionReason::Drifted => "Drifted",
        DisruptionReason::Underutilized => "Underutilized",
    }
}

impl PassContext<'_> {
    /// Why `pool` may disrupt no more nodes for `reason`.
    fn budget_verdict(&self, pool: &str, reason: &str) -> Verdict {
        let message = match self.budget_errors.get(pool) {
            Some(error) => format!("NodePool {pool:?} disrupts nothing: {error}"),
            None => format!("NodePool {pool:?}'s disruption budget for {reason} is used up"),
        };
        (KeptReason::Budget, message)
    }

    /// `candidate`'s instance type's priority score in its NodePool (0
    /// without scorers, as the scheduler counts it).
    fn score(&self, candidate: &Candidate) -> i32 {
        candidate
            .node_pool
            .metadata
            .name
            .as_ref()
            .and_then(|pool| self.scores.get(pool))
            .and_then(|scores| scores.get(&candidate.instance_type))
            .copied()
            .unwrap_or(0)
    }

    fn allowed(&self, pool: &str, reason: DisruptionReason) -> usize {
        self.allowed
            .get(&(pool.to_string(), reason_key(reason)))
            .copied()
            .unwrap_or(0)
    }

    /// Reschedules the candidates' pods and the pending pods without the
    /// candidates; an error when a candidate's pod would not fit.
    pub fn reschedule(&self, candidates: &[&Candidate]) -> Result<SchedulingResult, String> {
        let result = self.solve_without(candidates, true);
        let wanted: BTreeSet<&PodKey> = candidates.iter().flat_map(|c| &c.pods).collect();
        if let Some(error) = result.errors.iter().find(|e| wanted.contains(&e.pod)) {
            return Err(format!("pod {} would not fit: {}", error.pod, error.reason));
        }
        Ok(result)
    }

    /// Places the candidates' pods (the ones that need room elsewhere, as
    /// the model holds them), with the pending pods if `with_pending`, on
    /// the cluster without the candidates.
    fn solve_without(&self, candidates: &[&Candidate], with_pending: bool) -> SchedulingResult {
        let mut out: Vec<usize> = candidates
            .iter()
            .filter_map(|c| self.model.node_index(&c.name))
            .collect();
        out.sort_unstable();
        out.dedup();
        let wanted: BTreeSet<&PodKey> = candidates.iter().flat_map(|c| &c.pods).collect();
        let displaced = out
            .iter()
            .filter_map(|&i| self.model.node(i))
            .flat_map(|n| n.pods.iter().filter(|p| wanted.contains(&p.key())));
        let pending: &[Pod] = if with_pending {
            self.model.pending_pods()
        } else {
            &[]
        };
        self.model
            .solve_without(&out, displaced.chain(self.deleting).chain(pending.iter()))
    }
}

/// The moves of `candidates`' pods in `result`.
fn moves(candidates: &[&Candidate], result: &SchedulingResult) -> Vec<(PodKey, Destination)> {
    let wanted: BTreeSet<&PodKey> = candidates.iter().flat_map(|c| &c.pods).collect();
    let mut out = Vec::new();
    for placement in &result.existing_node_placements {
        if wanted.contains(&placement.pod) {
            out.push((
                placement.pod.clone(),
                Destination::Node(placement.node.clone()),
            ));
        }
    }
    for (i, claim) in result.new_node_claims.iter().enumerate() {
        for pod in claim.pods.iter().filter(|p| wanted.contains(p)) {
            out.push((pod.clone(), Destination::Replacement(i)));
        }
    }
    for error in result.errors.iter().filter(|e| wanted.contains(&e.pod)) {
        out.push((error.pod.clone(), Destination::Pending));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Replacements in `result` that hold none of `candidates`' pods are the
/// pending pods' own; they are not part of the command.
fn own_replacements(candidates: &[&Candidate], result: SchedulingResult) -> SchedulingResult {
    let wanted: BTreeSet<&PodKey> = candidates.iter().flat_map(|c| &c.pods).collect();
    let mut result = result;
    result
        .new_node_claims
        .retain(|c| c.pods.iter().any(|p| wanted.contains(p)));
    for claim in &mut result.new_node_claims {
        claim.pods.retain(|p| wanted.contains(p));
    }
    result
}

/// Expiration: the expired candidates' pods placed as provisioning would,
/// one command per candidate; a pod nothing can take stays pending.
pub fn expiration(ctx: &PassContext, candidate: &Candidate) -> Command {
    // Expiration does not wait for room: when a pod would not fit beside
    // the pending pods, what fits without them is placed.
    let result = ctx
        .reschedule(&[candidate])
        .unwrap_or_else(|_| ctx.solve_without(&[candidate], false));
    let result = own_replacements(&[candidate], result);
    Command {
        method: Method::Expiration,
        moves: moves(&[candidate], &result),
        candidates: vec![candidate.clone()],
        replacements: result.new_node_claims,
    }
}

fn policy(candidate: &Candidate) -> ConsolidationPolicy {
    candidate
        .node_pool
        .spec
        .effective_disruption()
        .consolidation_policy
        .unwrap_or(ConsolidationPolicy::WhenEmptyOrUnderutilized)
}

/// Emptiness: every consolidatable candidate without reschedulable pods, as
/// many per NodePool as its `Empty` budget allows, in one delete.
pub fn emptiness(
    ctx: &PassContext,
    candidates: &[&Candidate],
    verdicts: &mut BTreeMap<String, Verdict>,
) -> Option<Command> {
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let mut chosen = Vec::new();
    for c in candidates.iter().filter(|c| c.pods.is_empty()) {
        if !c.marks.consolidatable {
            continue;
        }
        let pool = c.node_pool.metadata.name.clone().unwrap_or_default();
        let used = taken.entry(pool.clone()).or_insert(0);
        if *used >= ctx.allowed(&pool, DisruptionReason::Empty) {
            note(verdicts, c.name.clone(), ctx.budget_verdict(&pool, "Empty"));
            continue;
        }
        *used += 1;
        chosen.push((*c).clone());
    }
    (!chosen.is_empty()).then(|| Command {
        method: Method::Emptiness,
        candidates: chosen,
        replacements: Vec::new(),
        moves: Vec::new(),
    })
}

/// Drift: the first drifted candidate (cheapest to disrupt first) whose pods
/// fit elsewhere or on replacements, within its pool's `Drifted` budget;
/// empty drifted candidates all at once.
pub fn drift(
    ctx: &PassContext,
    candidates: &[&Candidate],
    verdicts: &mut BTreeMap<String, Verdict>,
) -> Option<Command> {
    let drifted: Vec<&Candidate> = candidates
        .iter()
        .copied()
        .filter(|c| c.marks.drifted.is_some())
        .collect();
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let mut empty = Vec::new();
    for c in drifted.iter().filter(|c| c.pods.is_empty()) {
        let pool = c.node_pool.metadata.name.clone().unwrap_or_default();
        let used = taken.entry(pool.clone()).or_insert(0);
        if *used < ctx.allowed(&pool, DisruptionReason::Drifted) {
            *used += 1;
            empty.push((*c).clone());
        } else {
            note(
                verdicts,
                c.name.clone(),
                ctx.budget_verdict(&pool, "Drifted"),
            );
        }
    }
    if !empty.is_empty() {
        return Some(Command {
            method: Method::Drift,
            candidates: empty,
            replacements: Vec::new(),
            moves: Vec::new(),
        });
    }
    for c in drifted {
        let pool = c.node_pool.metadata.name.clone().unwrap_or_default();
        if ctx.allowed(&pool, DisruptionReason::Drifted) == 0 {
            note(
                verdicts,
                c.name.clone(),
                ctx.budget_verdict(&pool, "Drifted"),
            );
            continue;
        }
        match ctx.reschedule(&[c]) {
            Ok(result) => {
                let result = own_replacements(&[c], result);
                return Some(Command {
                    method: Method::Drift,
                    moves: moves(&[c], &result),
                    candidates: vec![c.clone()],
                    replacements: result.new_node_claims,
                });
            }
            Err(message) => {
                note(
                    verdicts,
                    c.name.clone(),
                    (KeptReason::PodsDoNotFit, message),
                );
            }
        }
    }
    None
}

/// Records why `node` was left, keeping the reason listed first when a
/// method had already noted another.
fn note(verdicts: &mut BTreeMap<String, Verdict>, node: String, verdict: Verdict) {
    match verdicts.get(&node) {
        Some((reason, _)) if *reason <= verdict.0 => {}
        _ => {
            verdicts.insert(node, verdict);
        }
    }
}

/// Whether a candidate may be consolidated for being underutilized, or why not.
fn consolidatable(ctx: &PassContext, c: &Candidate) -> Result<(), Verdict> {
    let pool = c.node_pool.metadata.name.clone().unwrap_or_default();
    if c.node_pool.spec.replicas.is_some() {
        return Err((
            KeptReason::Policy,
            format!(
                "NodePool {pool:?} is static (spec.replicas); its nodes are never consolidated"
            ),
        ));
    }
    if c.node_pool
        .spec
        .effective_disruption()
        .consolidate_after
        .duration()
        .is_ok_and(|d| d.is_none())
    {
        return Err((
            KeptReason::Policy,
            format!("NodePool {pool:?} has consolidateAfter: Never; consolidation is off"),
        ));
    }
    match policy(c) {
        ConsolidationPolicy::WhenEmptyOrUnderutilized | ConsolidationPolicy::Balanced => {}
        ConsolidationPolicy::WhenEmpty => {
            return Err((
                KeptReason::Policy,
                format!(
                    "NodePool {pool:?} has consolidationPolicy WhenEmpty and the node runs pods; set WhenEmptyOrUnderutilized to consolidate it"
                ),
            ));
        }
    }
    if !c.marks.consolidatable {
        return Err((
            KeptReason::NotConsolidatable,
            "not Consolidatable: consolidateAfter has not passed since the last pod came or went (or it is Never)".to_string(),
        ));
    }
    if ctx.allowed(&pool, DisruptionReason::Underutilized) == 0 {
        return Err(ctx.budget_verdict(&pool, "Underutilized"));
    }
    Ok(())
}

/// A consolidation of `candidates` (all their pods rescheduled): a delete
/// when they fit on the rest of the cluster, a replace by one NodeClaim
/// whose instance types are cheaper than the candidates together.
fn consolidate(
    ctx: &PassContext,
    method: Method,
    candidates: &[&Candidate],
) -> Result<Command, Verdict> {
    let result = ctx
        .reschedule(candidates)
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
        let before: f64 = candidates.iter().map(|c| c.price).sum();
        // Never down the NodePool's priority order: a type the scorers rank
        // below the node's is not what provisioning would launch either.
        let floor = candidates.iter().map(|c| ctx.score(c)).min().unwrap_or(0);
        let fitting = std::mem::take(&mut replacement.instance_type_options);
        replacement.instance_type_options = fitting
            .iter()
            .filter(|o| o.price < before && o.score.unwrap_or(0) >= floor)
            .cloned()
            .collect();
        if replacement.instance_type_options.is_empty()
            && let [candidate] = candidates
            && migrates(candidate)
        {
            // Priority back-migration: up the order at no higher price.
            replacement.instance_type_options = fitting
                .iter()
                .filter(|o| o.price <= before && o.score.unwrap_or(0) > floor)
                .cloned()
                .collect();
        }
        if candidates.len() > 1 {
            // Several nodes into one of a type among theirs: keep the
            // cheapest such node and delete the others instead (fewer pods
            // move), unless the replacement is cheaper than it (Karpenter's
            // `filterOutSameInstanceType`).
            let same_type_price = candidates
                .iter()
                .filter(|c| {
                    replacement
                        .instance_type_options
                        .iter()
                        .any(|o| o.name == c.instance_type)
                })
                .map(|c| c.price)
                .fold(f64::INFINITY, f64::min);
            replacement
                .instance_type_options
                .retain(|o| o.price < same_type_price);
            if replacement.instance_type_options.is_empty() {
                return Err((
                    KeptReason::NoCheaperOption,
                    "one node of a type these nodes already run would replace them; deleting the others moves fewer pods".to_string(),
                ));
            }
        }
        if replacement.instance_type_options.is_empty() {
            let cheaper = fitting.iter().any(|o| o.price < before);
            let message = if cheaper {
                format!(
                    "the instance types that fit its pods for less than ${before:.4}/h rank below its own in the NodePool's priority order"
                )
            } else {
                format!("no instance type that fits its pods costs less than ${before:.4}/h")
            };
            return Err((KeptReason::NoCheaperOption, message));
        }
        let all_spot = candidates.iter().all(|c| c.capacity_type == "spot");
        if all_spot && replacement.capacity_type.label_value() == "spot" {
            if !ctx.spot_to_spot {
                return Err((
                    KeptReason::SpotToSpot,
                    "a spot node would be replaced by spot; enable the SpotToSpotConsolidation feature gate".to_string(),
                ));
            }
            if candidates.len() > 1 {
                return Err((
                    KeptReason::SpotToSpot,
                    "several spot nodes are not consolidated into one spot node".to_string(),
                ));
            }
            if replacement.instance_type_options.len() < SPOT_TO_SPOT_MIN_TYPES {
                return Err((
                    KeptReason::SpotToSpot,
                    format!(
                        "only {} cheaper spot instance types; spot-to-spot needs {SPOT_TO_SPOT_MIN_TYPES}",
                        replacement.instance_type_options.len()
                    ),
                ));
            }
            replacement
                .instance_type_options
                .truncate(SPOT_TO_SPOT_MIN_TYPES);
        }
        if ctx.min_values_strict
            && let Some(message) = min_values_broken(ctx, replacement)
        {
            return Err((KeptReason::MinValues, message));
        }
        let first = &replacement.instance_type_options[0];
        replacement.instance_type = first.name.clone();
        replacement.price = first.price;
    }
    Ok(Command {
        method,
        moves: moves(candidates, &result),
        candidates: candidates.iter().map(|c| (*c).clone()).collect(),
        replacements: result.new_node_claims,
    })
}

/// Whether `candidate`'s NodePool opts into priority back-migration (an
/// invalid value is off; the NodePool's `ValidationSucceeded` reports it).
fn migrates(candidate: &Candidate) -> bool {
    crate::apis::validation::priority_migration(kube::ResourceExt::annotations(
        &*candidate.node_pool,
    ))
    .unwrap_or(false)
}

/// Why `replacement`'s remaining options no longer meet a `minValues` of
/// its requirements (Karpenter: "minValues requirement is not met"), if so.
fn min_values_broken(ctx: &PassContext, replacement: &NewNodeClaim) -> Option<String> {
    let types = ctx.types.get(&replacement.node_pool)?;
    for requirement in replacement.requirements.iter() {
        let Some(min) = requirement.min_values else {
            continue;
        };
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for option in &replacement.instance_type_options {
            let Some(label) = types
                .iter()
                .find(|t| t.name == option.name)
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

/// Multi-node consolidation: the most candidates (cheapest to disrupt
/// first, at most [`MULTI_NODE_MAX_CANDIDATES`], within each pool's
/// budget) whose pods fit on the rest of the cluster plus at most one
/// cheaper NodeClaim, found by binary search as Karpenter does.
pub fn multi_node(ctx: &PassContext, candidates: &[&Candidate]) -> Option<Command> {
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let eligible: Vec<&Candidate> = candidates
        .iter()
        .copied()
        .filter(|c| consolidatable(ctx, c).is_ok())
        .filter(|c| {
            let pool = c.node_pool.metadata.name.clone().unwrap_or_default();
            let used = taken.entry(pool.clone()).or_insert(0);
            let ok = *used < ctx.allowed(&pool, DisruptionReason::Underutilized);
            *used += usize::from(ok);
            ok
        })
        .take(MULTI_NODE_MAX_CANDIDATES)
        .collect();
    if eligible.len() < 2 {
        return None;
    }
    let (mut lo, mut hi) = (2, eligible.len());
    let mut best: Option<(Command, Vec<PoolScore>)> = None;
    let mut rejected: Option<(Command, Vec<PoolScore>)> = None;
    while lo <= hi {
        let mid = lo + (hi - lo) / 2;
        match consolidate(ctx, Method::MultiNodeConsolidation, &eligible[..mid]) {
            Ok(command) => {
                let (parts, approved) = scored(ctx, &command);
                if approved.is_ok() {
                    best = Some((command, parts));
                    lo = mid + 1;
                } else {
                    rejected = Some((command, parts));
                    hi = mid - 1;
                }
            }
            Err(_) => hi = mid - 1,
        }
    }
    // As Karpenter: the chosen move is reported, or else the last one the
    // scores refused, once per search rather than per step.
    match (best, rejected) {
        (Some((command, parts)), _) => {
            ctx.record_move(&command, parts, true);
            Some(command)
        }
        (None, Some((command, parts))) => {
            ctx.record_move(&command, parts, false);
            None
        }
        (None, None) => None,
    }
}

/// `command`'s parts per NodePool, and whether every `Balanced` pool it
/// touches approves it.
fn scored(ctx: &PassContext, command: &Command) -> (Vec<PoolScore>, Result<(), Verdict>) {
    let parts = balanced::evaluate(command, ctx.totals);
    let approved = balanced::approve(&parts).map_err(|message| (KeptReason::Policy, message));
    (parts, approved)
}

impl PassContext<'_> {
    /// Notes a scored move for the pass's metrics and events.
    fn record_move(&self, command: &Command, pools: Vec<PoolScore>, approved: bool) {
        let candidates = command
            .candidates
            .iter()
            .map(|c| (c.name.clone(), c.node_claim.name_any()))
            .collect();
        self.moves.borrow_mut().push(ScoredMove {
            multi_node: command.candidates.len() > 1,
            candidates,
            pools,
            approved,
        });
    }
}

/// Whether deleting `c` outright — the best any move on it can do — would
/// pass its pool's `Balanced` score; other policies always may.
fn could_pass_balanced(ctx: &PassContext, c: &Candidate) -> Result<(), Verdict> {
    if policy(c) != ConsolidationPolicy::Balanced {
        return Ok(());
    }
    let pool = c.node_pool.metadata.name.clone().unwrap_or_default();
    let totals = ctx.totals.get(&pool).copied().unwrap_or_default();
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
            "NodePool {pool:?} is Balanced: even deleting the node saves {:.1}% of the pool's cost for {:.1}% of its disruption cost (score {:.2}, under {:.2})",
            best.savings_fraction * 100.0,
            best.disruption_fraction * 100.0,
            best.value(),
            1.0 / balanced::BALANCED_K
        ),
    ))
}

/// Single-node consolidation: the first candidate (cheapest to disrupt
/// first) that can be deleted, or replaced by a cheaper NodeClaim.
pub fn single_node(
    ctx: &PassContext,
    candidates: &[&Candidate],
    verdicts: &mut BTreeMap<String, Verdict>,
) -> Option<Command> {
    for c in candidates {
        if let Err(verdict) = consolidatable(ctx, c) {
            note(verdicts, c.name.clone(), verdict);
            continue;
        }
        if let Err(verdict) = could_pass_balanced(ctx, c) {
            note(verdicts, c.name.clone(), verdict);
            continue;
        }
        let found = consolidate(ctx, Method::SingleNodeConsolidation, &[c]).and_then(|command| {
            let (parts, approved) = scored(ctx, &command);
            ctx.record_move(&command, parts, approved.is_ok());
            approved.map(|()| command)
        });
        match found {
            Ok(command) => return Some(command),
            Err(verdict) => {
                note(verdicts, c.name.clone(), verdict);
            }
        }
    }
    None
}

/// `method` run on each candidate alone rather than stopping at the first
/// command (the first is returned, as the method would): what drift or
/// single-node consolidation costs when no candidate can go, measured by
/// the disruption benchmark.
pub fn every_candidate(
    candidates: &[&Candidate],
    mut method: impl FnMut(&[&Candidate]) -> Option<Command>,
) -> Option<Command> {
    let mut first = None;
    for c in candidates {
        let found = method(std::slice::from_ref(c));
        if first.is_none() {
            first = found;
        }
    }
    first
}
