//! Disruption: which NodeClaims are marked consolidatable, drifted or
//! expired ([`marking`]), the budgets that cap how many of a NodePool's
//! nodes may be disrupted at once ([`budgets`]), which nodes a pass may
//! take ([`candidates`]), the methods that decide ([`methods`]) and the
//! passes over a cluster ([`plan`]): pure functions of the objects, shared
//! by the controllers and `simulate --disruption`. [`controller`] acts on
//! them in the cluster, [`orchestration`] carries out replace commands and
//! [`events`] tells users why a node stays. [`balanced`] scores
//! consolidation moves for `consolidationPolicy: Balanced`.

pub mod balanced;
pub mod budgets;
pub mod candidates;
pub mod controller;
pub mod events;
pub mod marking;
pub mod methods;
pub mod orchestration;
pub mod plan;
