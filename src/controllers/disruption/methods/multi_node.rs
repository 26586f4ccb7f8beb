//! Multi-node consolidation (Karpenter's `multinodeconsolidation.go`): the
//! most candidates — best savings per unit of disruption first, at most
//! [`MULTI_NODE_MAX_CANDIDATES`], within each pool's `Underutilized`
//! budget — whose pods fit on the rest of the cluster plus at most one
//! cheaper NodeClaim, found by binary search.

use std::collections::BTreeMap;

use super::super::balanced::PoolScore;
use super::super::context::PassContext;
use super::super::types::{Candidate, Command, Method};
use super::consolidation::{by_savings_ratio, consolidatable, consolidate, record_move, scored};
use crate::apis::nodepool::DisruptionReason;

/// Karpenter's multi-node consolidation looks at no more than this many
/// candidates at once.
pub const MULTI_NODE_MAX_CANDIDATES: usize = 100;

/// The multi-node consolidation command of the pass, if two or more nodes
/// can go together.
pub fn multi_node(ctx: &PassContext, candidates: &[&Candidate]) -> Option<Command> {
    let mut taken: BTreeMap<&str, usize> = BTreeMap::new();
    let eligible: Vec<&Candidate> = by_savings_ratio(candidates)
        .into_iter()
        .filter(|c| matches!(consolidatable(ctx, c), Some(Ok(()))))
        .filter(|c| {
            let used = taken.entry(c.pool.as_str()).or_insert(0);
            let ok = *used < ctx.allowed(&c.pool, DisruptionReason::Underutilized);
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
            record_move(ctx, &command, parts, true);
            Some(command)
        }
        (None, Some((command, parts))) => {
            record_move(ctx, &command, parts, false);
            None
        }
        (None, None) => None,
    }
}
