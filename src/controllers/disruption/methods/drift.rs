//! Drift (Karpenter's `drift.go`): the drifted candidates, the earliest
//! drifted first and empty ones before the rest, each within its
//! NodePool's `Drifted` budget; the first whose pods fit elsewhere or on
//! replacements is the command — one node per command, the next pass takes
//! the next while this one's replacements come up. Drift is eventual: a
//! node whose pods block eviction is taken when its NodeClaim has a
//! `terminationGracePeriod`, which bounds the drain. A static NodePool's
//! drifted node is replaced from its template instead
//! ([`static_drift`](super::static_drift)).

use k8s_openapi::jiff::Timestamp;

use super::super::context::{PassContext, moves, note, own_replacements};
use super::super::types::{Candidate, Command, KeptReason, Method};
use super::Verdicts;
use super::static_drift::static_drift;
use crate::apis::conditions::{NODE_CLAIM_DRIFTED, find_condition};
use crate::apis::nodepool::DisruptionReason;

/// The drift command of the pass, if a drifted node may go.
pub fn drift(
    ctx: &PassContext,
    candidates: &[&Candidate],
    verdicts: &mut Verdicts,
) -> Option<Command> {
    let mut drifted: Vec<&Candidate> = candidates
        .iter()
        .copied()
        .filter(|c| c.marks.drifted.is_some())
        .collect();
    drifted.sort_by_key(|c| (!c.pods.is_empty(), drifted_at(c), c.name.clone()));
    for &c in &drifted {
        if let Some(verdict) = c.blocked_for(Method::Drift) {
            let mut verdict = verdict.clone();
            verdict.1.push_str(
                "; set the NodePool's terminationGracePeriod to let drift replace it, the grace period bounding the drain",
            );
            note(verdicts, &c.name, verdict);
            continue;
        }
        if ctx.allowed(&c.pool, DisruptionReason::Drifted) == 0 {
            note(
                verdicts,
                &c.name,
                ctx.budget_verdict(&c.pool, DisruptionReason::Drifted),
            );
            continue;
        }
        if c.node_pool.spec.replicas.is_some() {
            // The pool's drifted nodes that may go, this one first.
            let mut group = vec![c];
            group.extend(drifted.iter().copied().filter(|o| {
                o.pool == c.pool && o.name != c.name && o.blocked_for(Method::Drift).is_none()
            }));
            let allowed = ctx.allowed(&c.pool, DisruptionReason::Drifted);
            match static_drift(ctx.statics.get(&c.pool), &group, allowed) {
                Ok(command) => return Some(command),
                Err(verdict) => note(verdicts, &c.name, verdict),
            }
            continue;
        }
        match ctx.reschedule(Method::Drift, &[c]) {
            Ok(result) => {
                let result = own_replacements(&[c], result);
                return Some(Command {
                    method: Method::Drift,
                    moves: moves(&[c], &result),
                    candidates: vec![c.clone()],
                    replacements: result.new_node_claims,
                });
            }
            Err(message) => note(verdicts, &c.name, (KeptReason::PodsDoNotFit, message)),
        }
    }
    None
}

/// When the NodeClaim's `Drifted` condition last turned true (the epoch
/// when not recorded).
fn drifted_at(c: &Candidate) -> Timestamp {
    c.node_claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| find_condition(c, NODE_CLAIM_DRIFTED))
        .map_or(Timestamp::UNIX_EPOCH, |c| c.last_transition_time.0)
}
