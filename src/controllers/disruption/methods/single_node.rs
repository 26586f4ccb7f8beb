//! Single-node consolidation (Karpenter's `singlenodeconsolidation.go`):
//! the candidates, best savings per unit of disruption first and
//! interleaved across NodePools (the first of each pool, then the second,
//! …), so one pool's many nodes do not starve the others; the first that
//! can be deleted, or replaced by a cheaper NodeClaim, is the command.

use std::collections::BTreeMap;

use super::super::context::{PassContext, note};
use super::super::types::{Candidate, Command, Method};
use super::Verdicts;
use super::consolidation::{
    by_savings_ratio, consolidatable, consolidate, could_pass_balanced, record_move, scored,
};

/// The single-node consolidation command of the pass, if a node can go.
pub fn single_node(
    ctx: &PassContext,
    candidates: &[&Candidate],
    verdicts: &mut Verdicts,
) -> Option<Command> {
    for c in interleaved(candidates) {
        match consolidatable(ctx, c) {
            None => continue,
            Some(Err(verdict)) => {
                note(verdicts, &c.name, verdict);
                continue;
            }
            Some(Ok(())) => {}
        }
        if let Err(verdict) = could_pass_balanced(ctx, c) {
            note(verdicts, &c.name, verdict);
            continue;
        }
        let found = consolidate(ctx, Method::SingleNodeConsolidation, &[c]).and_then(|command| {
            let (parts, approved) = scored(ctx, &command);
            record_move(ctx, &command, parts, approved.is_ok());
            approved.map(|()| command)
        });
        match found {
            Ok(command) => return Some(command),
            Err(verdict) => note(verdicts, &c.name, verdict),
        }
    }
    None
}

/// Karpenter's `SortCandidates`: by savings ratio, then interwoven by
/// NodePool (pools in name order; Karpenter's map order is random).
fn interleaved<'a>(candidates: &[&'a Candidate]) -> Vec<&'a Candidate> {
    let mut by_pool: BTreeMap<&str, Vec<&'a Candidate>> = BTreeMap::new();
    for c in by_savings_ratio(candidates) {
        by_pool.entry(c.pool.as_str()).or_default().push(c);
    }
    let longest = by_pool.values().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| {
            by_pool
                .values()
                .filter_map(move |list| list.get(i).copied())
        })
        .collect()
}
