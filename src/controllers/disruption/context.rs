//! What one pass's methods share (Karpenter's `SimulateScheduling` and
//! budget mapping): the cluster compiled once into a scheduling model, the
//! pods of nodes already being deleted, what each NodePool's budgets still
//! allow, and the nodes displaced pods may not be planned onto. Every
//! method checks its commands here, on the same scheduler provisioning uses.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::balanced::{PoolTotals, ScoredMove};
use super::methods::static_drift::StaticPool;
use super::record::PoolTypes;
use super::types::{Allowed, Candidate, Destination, KeptReason, Method, Verdict};
use crate::apis::nodepool::DisruptionReason;
use crate::scheduling::{Model, Pod, PodKey, SchedulingResult};

/// Why a displaced pod may not be planned onto a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnsafeDestination {
    /// A NodeClaim without a Node (another command's replacement among
    /// them): if it never comes up, the pod is stranded.
    Launching,
    /// A Node not ready, or whose NodeClaim is not initialized or is being
    /// disrupted.
    NotInitialized,
    /// A node within its NodePool's `consolidateAfter` of its last pod
    /// event: consolidation does not move pods onto it (Karpenter v1.14);
    /// drift and expiration may.
    UnderConsolidateAfter,
}

impl UnsafeDestination {
    /// Whether it keeps `method` from planning a pod onto the node.
    pub fn applies_to(self, method: Method) -> bool {
        match self {
            UnsafeDestination::Launching | UnsafeDestination::NotInitialized => true,
            UnsafeDestination::UnderConsolidateAfter => matches!(
                method,
                Method::MultiNodeConsolidation | Method::SingleNodeConsolidation
            ),
        }
    }

    /// What it says of the node.
    pub fn as_str(self) -> &'static str {
        match self {
            UnsafeDestination::Launching => "is a NodeClaim still launching",
            UnsafeDestination::NotInitialized => "is not initialized",
            UnsafeDestination::UnderConsolidateAfter => {
                "is within its NodePool's consolidateAfter of its last pod event"
            }
        }
    }
}

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
    /// Nodes and NodeClaims a displaced pod may not be planned onto, and
    /// why.
    pub unsafe_destinations: &'a HashMap<String, UnsafeDestination>,
    /// `SpotToSpotConsolidation` is enabled.
    pub spot_to_spot: bool,
    /// Each NodePool's instance types (prices, `minValues`).
    pub types: &'a PoolTypes,
    /// `minValues` must hold (`--min-values-policy Strict`).
    pub min_values_strict: bool,
    /// Each NodePool's instance-type priority scores (pools with scorers).
    pub scores: &'a BTreeMap<String, Arc<HashMap<String, i32>>>,
    /// Each NodePool's cost and disruption totals, for `Balanced`.
    pub totals: &'a BTreeMap<String, PoolTotals>,
    /// The consolidation moves scored in the pass, as they are scored.
    pub moves: &'a RefCell<Vec<ScoredMove>>,
    /// Each static NodePool's counts and replacement NodeClaim, for static
    /// drift.
    pub statics: &'a BTreeMap<String, StaticPool>,
}

impl PassContext<'_> {
    /// How many more of `pool`'s nodes may go for `reason`.
    pub fn allowed(&self, pool: &str, reason: DisruptionReason) -> usize {
        self.allowed
            .get(&(pool.to_string(), reason))
            .copied()
            .unwrap_or(0)
    }

    /// Why `pool` may disrupt no more nodes for `reason`.
    pub fn budget_verdict(&self, pool: &str, reason: DisruptionReason) -> Verdict {
        let message = match self.budget_errors.get(pool) {
            Some(error) => format!("NodePool {pool:?} disrupts nothing: {error}"),
            None => format!(
                "NodePool {pool:?}'s disruption budget for {} is used up",
                reason.as_str()
            ),
        };
        (KeptReason::Budget, message)
    }

    /// `candidate`'s instance type's priority score in its NodePool (0
    /// without scorers, as the scheduler counts it).
    pub fn score(&self, candidate: &Candidate) -> i32 {
        let Some(instance_type) = &candidate.instance_type else {
            return 0;
        };
        self.scores
            .get(&candidate.pool)
            .and_then(|scores| scores.get(instance_type))
            .copied()
            .unwrap_or(0)
    }

    /// Reschedules the candidates' pods and the pending pods without the
    /// candidates (Karpenter's `SimulateScheduling`) for `method`; an error
    /// when one of the candidates' pods would not fit, or would only fit on
    /// a node it may not be planned onto.
    pub fn reschedule(
        &self,
        method: Method,
        candidates: &[&Candidate],
    ) -> Result<SchedulingResult, String> {
        let result = self.solve_without(method, candidates, true);
        let wanted = wanted(candidates);
        if let Some(error) = result.errors.iter().find(|e| wanted.contains(&e.pod)) {
            return Err(format!("pod {} would not fit: {}", error.pod, error.reason));
        }
        if let Some((pod, node, why)) = result
            .existing_node_placements
            .iter()
            .filter(|p| wanted.contains(&p.pod))
            .find_map(|p| {
                let why = self.unsafe_destinations.get(&p.node)?;
                why.applies_to(method)
                    .then_some((&p.pod, &p.node, why.as_str()))
            })
        {
            return Err(format!(
                "pod {pod} would only fit on {node}, which {why}; the node stays until its pods have a safe place"
            ));
        }
        Ok(result)
    }

    /// Places the candidates' pods (the ones that need room elsewhere, as
    /// the model holds them), with the pods of deleting nodes and, if
    /// `with_pending`, the pending pods, on the cluster without the
    /// candidates; for consolidation, the candidates' pods stay off nodes
    /// within their `consolidateAfter`.
    pub fn solve_without(
        &self,
        method: Method,
        candidates: &[&Candidate],
        with_pending: bool,
    ) -> SchedulingResult {
        let mut out: Vec<usize> = candidates
            .iter()
            .filter_map(|c| self.model.node_index(&c.name))
            .collect();
        out.sort_unstable();
        out.dedup();
        let wanted = wanted(candidates);
        let displaced = out
            .iter()
            .filter_map(|&i| self.model.node(i))
            .flat_map(|n| n.pods.iter().filter(|p| wanted.contains(&p.key())));
        let pending: &[Pod] = if with_pending {
            self.model.pending_pods()
        } else {
            &[]
        };
        let closed: Vec<usize> = self
            .unsafe_destinations
            .iter()
            .filter(|(_, why)| **why == UnsafeDestination::UnderConsolidateAfter)
            .filter(|(_, why)| why.applies_to(method))
            .filter_map(|(name, _)| self.model.node_index(name))
            .collect();
        self.model.solve_moving(
            &out,
            &closed,
            displaced,
            self.deleting.iter().chain(pending.iter()),
        )
    }
}

/// The pods `candidates` must find room for.
pub fn wanted<'a>(candidates: &[&'a Candidate]) -> BTreeSet<&'a PodKey> {
    candidates.iter().flat_map(|c| &c.pods).collect()
}

/// The moves of `candidates`' pods in `result`.
pub fn moves(candidates: &[&Candidate], result: &SchedulingResult) -> Vec<(PodKey, Destination)> {
    let wanted = wanted(candidates);
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
pub fn own_replacements(candidates: &[&Candidate], result: SchedulingResult) -> SchedulingResult {
    let wanted = wanted(candidates);
    let mut result = result;
    result
        .new_node_claims
        .retain(|c| c.pods.iter().any(|p| wanted.contains(p)));
    for claim in &mut result.new_node_claims {
        claim.pods.retain(|p| wanted.contains(p));
    }
    result
}

/// Records why `node` was left, keeping the reason listed first when a
/// method had already noted another.
pub fn note(verdicts: &mut BTreeMap<String, Verdict>, node: &str, verdict: Verdict) {
    match verdicts.get(node) {
        Some((reason, _)) if *reason <= verdict.0 => {}
        _ => {
            verdicts.insert(node.to_string(), verdict);
        }
    }
}
