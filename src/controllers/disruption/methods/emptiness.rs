//! Emptiness (Karpenter's `emptiness.go`): every consolidatable candidate
//! without reschedulable pods, the most savings per unit of disruption
//! first, as many per NodePool as its `Empty` budget allows, in one delete.

use super::super::context::{PassContext, note};
use super::super::types::{Candidate, Command, KeptReason, Method};
use super::Verdicts;
use super::consolidation::by_savings_ratio;
use crate::apis::nodepool::DisruptionReason;
use std::collections::BTreeMap;

/// The emptiness command of the pass, if any node is empty and allowed.
pub fn emptiness(
    ctx: &PassContext,
    candidates: &[&Candidate],
    verdicts: &mut Verdicts,
) -> Option<Command> {
    let mut taken: BTreeMap<&str, usize> = BTreeMap::new();
    let mut chosen = Vec::new();
    for c in by_savings_ratio(candidates) {
        if !c.pods.is_empty() || !should_disrupt(c, verdicts) {
            continue;
        }
        let used = taken.entry(c.pool.as_str()).or_insert(0);
        if *used >= ctx.allowed(&c.pool, DisruptionReason::Empty) {
            note(
                verdicts,
                &c.name,
                ctx.budget_verdict(&c.pool, DisruptionReason::Empty),
            );
            continue;
        }
        *used += 1;
        chosen.push(c.clone());
    }
    (!chosen.is_empty()).then(|| Command {
        method: Method::Emptiness,
        candidates: chosen,
        replacements: Vec::new(),
        moves: Vec::new(),
    })
}

/// Karpenter's emptiness `ShouldDisrupt`: not a static NodePool's,
/// consolidation not off, `Consolidatable`, and no pod blocking eviction.
fn should_disrupt(c: &Candidate, verdicts: &mut Verdicts) -> bool {
    let verdict = if c.node_pool.spec.replicas.is_some() {
        Some((
            KeptReason::Policy,
            format!(
                "NodePool {:?} is static (spec.replicas); its nodes are never consolidated",
                c.pool
            ),
        ))
    } else if c
        .node_pool
        .spec
        .effective_disruption()
        .consolidate_after
        .duration()
        .is_ok_and(|d| d.is_none())
    {
        Some((
            KeptReason::Policy,
            format!(
                "NodePool {:?} has consolidateAfter: Never; consolidation is off",
                c.pool
            ),
        ))
    } else if !c.marks.consolidatable {
        Some((
            KeptReason::NotConsolidatable,
            "not Consolidatable: consolidateAfter has not passed since the last pod came or went"
                .to_string(),
        ))
    } else {
        c.blocked_for(Method::Emptiness).cloned()
    };
    match verdict {
        Some(verdict) => {
            note(verdicts, &c.name, verdict);
            false
        }
        None => true,
    }
}
