//! `status.placementGroup` and `PlacementGroupReady`, as Karpenter's
//! placement group reconciler sets the condition: `True` without
//! `spec.placementGroupSelector` (and `status.placementGroup` cleared, so a
//! removed selector stops placing new instances), `True` with the group
//! recorded when the selector names an available group, `False`
//! (`PlacementGroupNotFound`) when it names none. A lookup EC2 refused is
//! `False` (`PlacementGroupResolutionFailed`) with the group recorded before
//! kept; a fault worth waiting out (throttling, a server error) leaves the
//! status and condition as they were.
//!
//! Karpenter keeps the resolved group in memory only; nodewright records it
//! in the status so that launches, drift, the sandbox and `simulate` read
//! one record, as they do subnets and AMIs.

use crate::apis::EC2NodeClass;
use crate::apis::conditions::EC2_NODE_CLASS_PLACEMENT_GROUP_READY as PLACEMENT_GROUP_READY;
use crate::apis::ec2nodeclass::PlacementGroupStatus;
use crate::aws::placement_groups::{PlacementGroupError, PlacementGroupQuery};

use super::super::Context;
use super::conditions::{Resolved, Stamp};

/// The class's placement group and `PlacementGroupReady`.
pub async fn resolve(
    context: &Context,
    class: &EC2NodeClass,
    stamp: &Stamp,
) -> Resolved<Option<PlacementGroupStatus>> {
    let selector = class.spec.placement_group_selector.as_ref();
    let looked_up = context.placement_groups.get(selector).await;
    from_lookup(selector.and_then(PlacementGroupQuery::of), looked_up, stamp)
}

/// What a lookup of `query` makes of the status and condition.
pub fn from_lookup(
    query: Option<PlacementGroupQuery>,
    looked_up: Result<Option<PlacementGroupStatus>, PlacementGroupError>,
    stamp: &Stamp,
) -> Resolved<Option<PlacementGroupStatus>> {
    match looked_up {
        Ok(Some(group)) => {
            tracing::debug!(id = %group.id, name = %group.name, strategy = group.strategy.as_str(), "resolved placement group");
            Resolved::to(Some(group), stamp.ready(PLACEMENT_GROUP_READY, ""))
        }
        Ok(None) => match query {
            None => Resolved::to(None, stamp.ready(PLACEMENT_GROUP_READY, "")),
            Some(query) => Resolved::to(
                None,
                stamp.not_ready(
                    PLACEMENT_GROUP_READY,
                    "PlacementGroupNotFound",
                    format!(
                        "Placement group {:?} not found: spec.placementGroupSelector names no available placement group; create it or name another",
                        query.value()
                    ),
                ),
            ),
        },
        Err(e) if e.is_transient() => {
            tracing::warn!(error = %e, "placement group lookup failed; keeping the stored group");
            Resolved::keep()
        }
        Err(e @ PlacementGroupError::EmptySelector) => Resolved::to(
            None,
            stamp.not_ready(
                PLACEMENT_GROUP_READY,
                "InvalidPlacementGroupSelector",
                e.to_string(),
            ),
        ),
        Err(e) => Resolved::condition(stamp.not_ready(
            PLACEMENT_GROUP_READY,
            "PlacementGroupResolutionFailed",
            format!("Failed to resolve placement group: {e}"),
        )),
    }
}
