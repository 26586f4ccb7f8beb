//! The disruption methods, in Karpenter's order: expiration (offline
//! only: the expiration controller deletes expired NodeClaims), emptiness,
//! drift, multi-node consolidation, single-node consolidation. Each looks
//! at the pass's candidates and returns at most one command; every command
//! that moves pods is checked by rescheduling them on the pass's model
//! ([`PassContext::reschedule`](super::context::PassContext::reschedule)).

pub mod consolidation;
mod drift;
mod emptiness;
mod expiration;
mod multi_node;
mod single_node;
pub mod static_drift;

use std::collections::BTreeMap;

pub use consolidation::SPOT_TO_SPOT_MIN_TYPES;
pub use drift::drift;
pub use emptiness::emptiness;
pub use expiration::expiration;
pub use multi_node::{MULTI_NODE_MAX_CANDIDATES, multi_node};
pub use single_node::single_node;

use super::types::{Candidate, Command, Verdict};

/// A method's verdicts on the candidates it left, by node.
pub type Verdicts = BTreeMap<String, Verdict>;

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
