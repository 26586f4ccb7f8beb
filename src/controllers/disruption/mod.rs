//! Disruption: which NodeClaims are marked consolidatable, drifted or
//! expired, and the budgets that cap how many nodes may be disrupted.

pub mod marking;
