//! Expiration offline (Karpenter's NodeClaim expiration controller, which
//! `simulate --disruption` plays): an expired NodeClaim is deleted, one
//! command per NodeClaim, whatever holds it; its pods become pending and
//! provisioning places them — on a node that has room, or on capacity it
//! launches after the node is gone (`Pending` here). Forceful and not
//! budgeted: `terminationGracePeriod` bounds the drain.

use super::super::context::{PassContext, wanted};
use super::super::types::{Candidate, Command, Destination, Method};

/// The expiration of `candidate`: a delete, its pods' destinations as
/// provisioning would choose them.
pub fn expiration(ctx: &PassContext, candidate: &Candidate) -> Command {
    let result = ctx.solve_without(Method::Expiration, &[candidate], false);
    let wanted = wanted(&[candidate]);
    let mut moves: Vec<_> = result
        .existing_node_placements
        .iter()
        .filter(|p| wanted.contains(&p.pod))
        .filter(|p| {
            ctx.unsafe_destinations
                .get(&p.node)
                .is_none_or(|why| !why.applies_to(Method::Expiration))
        })
        .map(|p| (p.pod.clone(), Destination::Node(p.node.clone())))
        .collect();
    let placed: Vec<_> = moves.iter().map(|(pod, _)| pod.clone()).collect();
    moves.extend(
        candidate
            .pods
            .iter()
            .filter(|p| !placed.contains(p))
            .map(|p| (p.clone(), Destination::Pending)),
    );
    moves.sort_by(|a, b| a.0.cmp(&b.0));
    Command {
        method: Method::Expiration,
        candidates: vec![candidate.clone()],
        replacements: Vec::new(),
        moves,
    }
}
