//! Static drift (Karpenter's `StaticDrift`): drifted nodes of a static
//! NodePool (`spec.replicas`) are replaced by NodeClaims from the pool's
//! template — as many in one command as the pool's `Drifted` budget and
//! `limits.nodes` allow — once any scale-down has finished, and the next
//! wave waits until they are gone. Their pods are not planned: they can
//! only run on the pool's capacity, and kube-scheduler places them on the
//! replacements, which are initialized before the nodes are drained.

use super::super::types::{Candidate, Command, Destination, KeptReason, Method, Verdict};
pub use crate::controllers::static_capacity::{StaticPool, static_pools};

/// The command that replaces drifted candidates `group` of static pool
/// `pool` (in the order drift takes them, none blocked), as many as its
/// budget (`allowed`) and `limits.nodes` let go at once (Karpenter's
/// `ComputeCommands` reserves them together), or why none. The caller has
/// checked the first candidate's blocks and that `allowed` is not 0.
pub fn static_drift(
    pool: Option<&StaticPool>,
    group: &[&Candidate],
    allowed: usize,
) -> Result<Command, Verdict> {
    let Some(c) = group.first() else {
        return Err((KeptReason::Policy, "no drifted candidate".to_string()));
    };
    let Some(pool) = pool else {
        return Err((
            KeptReason::Policy,
            format!("NodePool {:?} is static but cannot be read", c.pool),
        ));
    };
    let plan = &pool.plan;
    let counts = plan.counts;
    if counts.active + counts.pending_disruption > plan.replicas {
        return Err((
            KeptReason::Policy,
            format!(
                "NodePool {:?} is static and scaling down to {} replicas; drifted nodes are replaced once it has",
                c.pool, plan.replicas
            ),
        ));
    }
    if plan.room() < 1 {
        return Err((
            KeptReason::Policy,
            format!(
                "NodePool {:?} is static and its limits.nodes leaves no room for a replacement ({} active, {} being deleted, {} pending disruption)",
                c.pool, counts.active, counts.deleting, counts.pending_disruption
            ),
        ));
    }
    let replacement = pool.template.clone().map_err(|why| {
        (
            KeptReason::PodsDoNotFit,
            format!("no replacement for static NodePool {:?}: {why}", c.pool),
        )
    })?;
    let room = usize::try_from(plan.room()).unwrap_or(usize::MAX);
    let taken: Vec<&Candidate> = group.iter().copied().take(allowed.min(room)).collect();
    let mut moves: Vec<_> = taken
        .iter()
        .flat_map(|c| c.pods.iter().map(|pod| (pod.clone(), Destination::Pending)))
        .collect();
    moves.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Command {
        method: Method::Drift,
        replacements: vec![replacement; taken.len()],
        candidates: taken.into_iter().cloned().collect(),
        moves,
    })
}
