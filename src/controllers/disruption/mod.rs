//! Disruption: how many of a NodePool's nodes may be disrupted at once, and why.

pub mod budgets;
