//! Disruption (Karpenter's `disruption` package), cut along its seams:
//! the vocabulary ([`types`]), one record per node per pass ([`record`]),
//! which nodes a pass may take ([`candidates`]), the budgets
//! ([`budgets`]), what the methods share ([`context`]), the methods
//! ([`methods`]), `Balanced` scoring ([`balanced`]), one pass
//! ([`pass`]), the offline passes of `simulate --disruption` ([`sim`]),
//! the controller ([`controller`]), the replace commands in flight
//! ([`queue`]) and the events ([`events`]). The marks a pass reads
//! (`Consolidatable`, `Drifted`, expiry) are the NodeClaim controllers'
//! ([`crate::controllers::nodeclaim::marks`]).

pub mod balanced;
pub mod budgets;
pub mod candidates;
pub mod context;
pub mod controller;
pub mod events;
pub mod methods;
pub mod pass;
pub mod queue;
pub mod record;
pub mod sim;
pub mod types;
