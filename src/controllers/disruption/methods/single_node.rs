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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::apis::{NodeClaim, NodePool};
    use crate::controllers::disruption::types::Marks;

    fn candidate(name: &str, pool: &str, price: f64, pods: usize) -> Candidate {
        let claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name},
            "spec": {"requirements": [],
                     "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}}
        }))
        .expect("a NodeClaim");
        let node_pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": pool},
            "spec": {"template": {"spec": {"requirements": [],
                     "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}}}}
        }))
        .expect("a NodePool");
        Candidate {
            name: name.to_string(),
            node_claim: Arc::new(claim),
            node_pool: Arc::new(node_pool),
            pool: pool.to_string(),
            instance_type: None,
            capacity_type: None,
            zone: None,
            price,
            pods: Vec::new(),
            disruption_cost: pods as f64,
            reschedule_cost: 1.0 + pods as f64,
            marks: Marks::default(),
            interruption_cordon: None,
            blocked: None,
        }
    }

    /// "should consolidate the node with best savings ratio first": the
    /// node whose price buys the least disruption goes first — not the one
    /// with the fewest pods — and NodePools take turns.
    #[test]
    fn the_best_savings_ratio_goes_first_and_pools_take_turns() {
        let all = [
            candidate("cheap-one-pod", "a", 0.096, 1),
            candidate("dear-two-pods", "a", 0.384, 2),
            candidate("b-first", "b", 0.2, 1),
            candidate("b-second", "b", 0.05, 1),
        ];
        let refs: Vec<&Candidate> = all.iter().collect();
        let order: Vec<&str> = interleaved(&refs).iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            order,
            ["dear-two-pods", "b-first", "cheap-one-pod", "b-second"]
        );
    }
}
