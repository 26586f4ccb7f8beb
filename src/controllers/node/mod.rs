//! Node controllers: termination — the Node's `karpenter.sh/termination`
//! finalizer, held while the node is cordoned, tainted and drained and its
//! instance terminated (Karpenter's `node.termination`).

mod drain;
mod termination;

pub use drain::{do_not_disrupt_active, is_waiting_eviction, next_tier};
pub use termination::{reconcile, run};
