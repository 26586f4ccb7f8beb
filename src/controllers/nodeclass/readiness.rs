//! `Ready`: `True` when every condition it depends on is `True` for the
//! class's current generation — Karpenter's list (`AMIsReady`,
//! `SubnetsReady`, `SecurityGroupsReady`, `InstanceProfileReady`,
//! `ValidationSucceeded`, `PlacementGroupReady`, and
//! `CapacityReservationsReady` with reserved capacity on, as it is by
//! default) plus nodewright's `ExtensionsReady`. Otherwise `False`
//! (`UnhealthyDependents`) when one of them is `False` for the current
//! generation, else `Unknown` (`ReconcilingDependents`); the message lists
//! each such dependency as `Type=Status`, as Karpenter's does.

use crate::apis::conditions::{
    EC2_NODE_CLASS_CAPACITY_RESERVATIONS_READY, EC2_NODE_CLASS_EXTENSIONS_READY,
    EC2_NODE_CLASS_READY_DEPENDENCIES, READY, find_condition,
};
use crate::apis::{Condition, ConditionStatus};

use super::conditions::Stamp;

/// Every condition `Ready` depends on.
pub fn dependencies() -> impl Iterator<Item = &'static str> {
    EC2_NODE_CLASS_READY_DEPENDENCIES.iter().copied().chain([
        EC2_NODE_CLASS_CAPACITY_RESERVATIONS_READY,
        EC2_NODE_CLASS_EXTENSIONS_READY,
    ])
}

/// `Ready` from the class's conditions (after this pass's updates).
pub fn ready(conditions: &[Condition], stamp: &Stamp) -> Condition {
    let mut unhealthy = Vec::new();
    let mut failed = false;
    for type_ in dependencies() {
        let found = find_condition(conditions, type_);
        let status = found.map_or(ConditionStatus::Unknown, |c| c.status);
        let current = found.is_some_and(|c| c.observed_generation == stamp.generation);
        if status == ConditionStatus::True && current {
            continue;
        }
        failed |= status == ConditionStatus::False && current;
        let status = match status {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        };
        unhealthy.push(format!("{type_}={status}"));
    }
    match (unhealthy.is_empty(), failed) {
        (true, _) => stamp.condition(READY, ConditionStatus::True, READY, ""),
        (false, true) => stamp.condition(
            READY,
            ConditionStatus::False,
            "UnhealthyDependents",
            unhealthy.join(", "),
        ),
        (false, false) => stamp.condition(
            READY,
            ConditionStatus::Unknown,
            "ReconcilingDependents",
            unhealthy.join(", "),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_needs_every_dependency_true_for_this_generation() {
        let stamp = Stamp::new(Some(2));
        let all: Vec<Condition> = dependencies().map(|t| stamp.ready(t, "")).collect();
        assert_eq!(ready(&all, &stamp).status, ConditionStatus::True);

        let mut failing = all.clone();
        failing[1] = stamp.not_ready(&failing[1].type_.clone(), "SubnetsNotFound", "none");
        let not_ready = ready(&failing, &stamp);
        assert_eq!(not_ready.status, ConditionStatus::False);
        assert_eq!(not_ready.reason.as_deref(), Some("UnhealthyDependents"));
        assert_eq!(not_ready.message.as_deref(), Some("SubnetsReady=False"));

        let old = Stamp::new(Some(1));
        let mut stale = all.clone();
        stale[0] = old.ready(&stale[0].type_.clone(), "");
        let missing: Vec<Condition> = all
            .iter()
            .filter(|c| c.type_ != "ExtensionsReady")
            .cloned()
            .collect();
        for conditions in [stale, missing] {
            let unknown = ready(&conditions, &stamp);
            assert_eq!(unknown.status, ConditionStatus::Unknown, "{unknown:?}");
            assert_eq!(unknown.reason.as_deref(), Some("ReconcilingDependents"));
        }
    }
}
