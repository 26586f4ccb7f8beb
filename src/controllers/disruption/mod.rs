//! Disruption: which NodeClaims are marked consolidatable, drifted or
//! expired, and the budgets that cap how many of a NodePool's nodes may be
//! disrupted at once. Pure functions of the objects, shared by the
//! controllers and `simulate`.

pub mod budgets;
pub mod marking;
