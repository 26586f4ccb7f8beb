//! `PlacementGroupReady`, one of the conditions Karpenter's `Ready` waits
//! for: `True` without `spec.placementGroupSelector`. Launching into a
//! placement group is not supported yet, so a class that asks for one is
//! `False` (`PlacementGroupsUnsupported`) rather than launched outside it.

use crate::apis::EC2NodeClass;
use crate::apis::conditions::EC2_NODE_CLASS_PLACEMENT_GROUP_READY as PLACEMENT_GROUP_READY;

use super::conditions::{Resolved, Stamp};

/// `PlacementGroupReady` for `class`.
pub fn resolve(class: &EC2NodeClass, stamp: &Stamp) -> Resolved<()> {
    match &class.spec.placement_group_selector {
        None => Resolved::condition(stamp.ready(PLACEMENT_GROUP_READY, "")),
        Some(_) => Resolved::condition(stamp.not_ready(
            PLACEMENT_GROUP_READY,
            "PlacementGroupsUnsupported",
            "spec.placementGroupSelector: nodewright does not launch into placement groups yet; remove the selector to use this class",
        )),
    }
}
