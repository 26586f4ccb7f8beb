//! What marks a NodeClaim for disruption, as pure functions of the objects
//! (Karpenter's NodeClaim disruption and expiration controllers): whether it
//! is `Consolidatable` at a given time, which static drift it shows (the
//! NodePool's template hash, its requirements, its instance type), and when
//! it expires. The NodeClaim disruption controller writes the conditions
//! from these; `simulate --disruption` computes the same marks offline.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

use crate::apis::conditions::{NODE_CLAIM_INITIALIZED, find_condition};
use crate::apis::duration::DurationError;
use crate::apis::labels::{
    CAPACITY_TYPE_LABEL_KEY, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED,
    INSTANCE_TYPE_LABEL_KEY, NODE_POOL_HASH_ANNOTATION_KEY, NODE_POOL_HASH_VERSION_ANNOTATION_KEY,
    ZONE_LABEL_KEY,
};
use crate::apis::{NodeClaim, NodePool};
use crate::cloudprovider::DriftReason;
use crate::scheduling::node_pool::requirements_from_api;
use crate::scheduling::{ConvertError, InstanceType, Requirements};

/// Claims younger than this are not checked for instance-type drift (a
/// catalog refresh can lag a launch; Karpenter: one hour).
pub const INSTANCE_TYPE_CHECK_AGE: SignedDuration = SignedDuration::from_hours(1);

/// Whether a NodeClaim is `Consolidatable`, and if not, why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Consolidatable {
    /// `consolidateAfter: Never`: the condition is removed.
    Disabled,
    /// Not initialized yet: the condition is removed.
    NotInitialized,
    /// `consolidateAfter` has not passed since the last pod event (or
    /// initialization): the condition is removed until `until`.
    Waiting {
        /// When it becomes consolidatable if no pod comes or goes.
        until: Timestamp,
    },
    /// The condition is `True`.
    Yes,
}

/// Whether `claim` of `pool` is consolidatable at `now`: initialized, and
/// `consolidateAfter` passed since `status.lastPodEventTime`, or since
/// initialization when no pod event is recorded (Karpenter's
/// `IsUnderConsolidateAfter`).
pub fn consolidatable(
    pool: &NodePool,
    claim: &NodeClaim,
    now: Timestamp,
) -> Result<Consolidatable, DurationError> {
    let disruption = pool.spec.effective_disruption();
    let Some(after) = disruption.consolidate_after.duration()? else {
        return Ok(Consolidatable::Disabled);
    };
    let status = claim.status.as_ref();
    let conditions = status
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let Some(initialized) =
        find_condition(conditions, NODE_CLAIM_INITIALIZED).filter(|c| c.is_true())
    else {
        return Ok(Consolidatable::NotInitialized);
    };
    let since = status
        .and_then(|s| s.last_pod_event_time.as_ref())
        .map_or(initialized.last_transition_time.0, |t| t.0);
    let after = SignedDuration::try_from(after).unwrap_or(SignedDuration::MAX);
    let until = since.checked_add(after).unwrap_or(Timestamp::MAX);
    if now < until {
        Ok(Consolidatable::Waiting { until })
    } else {
        Ok(Consolidatable::Yes)
    }
}

/// Static drift: the NodeClaim was made from another version of the
/// NodePool's template (`karpenter.sh/nodepool-hash`). Compared only when
/// both carry a hash of the same version: a claim stamped by another hash
/// version (Karpenter's) is re-stamped, not drifted.
pub fn node_pool_drift(pool: &NodePool, claim: &NodeClaim) -> Option<DriftReason> {
    let pool_hash = pool.annotations().get(NODE_POOL_HASH_ANNOTATION_KEY)?;
    let pool_version = pool
        .annotations()
        .get(NODE_POOL_HASH_VERSION_ANNOTATION_KEY)?;
    let claim_hash = claim.annotations().get(NODE_POOL_HASH_ANNOTATION_KEY)?;
    let claim_version = claim
        .annotations()
        .get(NODE_POOL_HASH_VERSION_ANNOTATION_KEY)?;
    (pool_version == claim_version && pool_hash != claim_hash)
        .then_some(DriftReason::NodePoolDrifted)
}

/// Requirements drift: the NodeClaim's labels no longer satisfy the
/// NodePool's requirements (Karpenter's `Compatible`, with no undefined
/// label allowed: a required key the claim has no label for drifts it).
pub fn requirements_drift(
    pool: &NodePool,
    claim: &NodeClaim,
) -> Result<Option<DriftReason>, ConvertError> {
    let wanted = requirements_from_api(
        &format!("NodePool {}", pool.name_any()),
        "spec.template.spec.requirements",
        &pool.spec.template.spec.requirements,
    )?;
    let labels = Requirements::from_labels(claim.labels().iter());
    Ok(labels
        .compatible(&wanted, |_| false)
        .is_err()
        .then_some(DriftReason::RequirementsDrifted))
}

/// Instance-type drift: the NodeClaim's instance type is no longer among the
/// NodePool's, or none of its offerings matches the claim's zone and
/// capacity type (a reserved claim also matches on-demand: a reservation
/// that ends leaves the instance on-demand; which reservation is not
/// compared, as Karpenter drops the reservation labels here). Karpenter checks this only
/// for claims older than an hour; the caller decides when to ask.
pub fn instance_type_drift(types: &[InstanceType], claim: &NodeClaim) -> Option<DriftReason> {
    let labels = claim.labels();
    let Some(name) = labels.get(INSTANCE_TYPE_LABEL_KEY) else {
        return Some(DriftReason::InstanceTypeNotFound);
    };
    let Some(ty) = types.iter().find(|t| &t.name == name) else {
        return Some(DriftReason::InstanceTypeNotFound);
    };
    let zone = labels.get(ZONE_LABEL_KEY);
    let capacity = labels.get(CAPACITY_TYPE_LABEL_KEY).map(String::as_str);
    let compatible = ty.offerings.iter().any(|o| {
        let in_zone = zone.is_none_or(|z| &o.zone == z);
        let offered = o.capacity_type.label_value();
        let of_type = match capacity {
            None => true,
            Some(CAPACITY_TYPE_RESERVED) => {
                offered == CAPACITY_TYPE_RESERVED || offered == CAPACITY_TYPE_ON_DEMAND
            }
            Some(c) => offered == c,
        };
        in_zone && of_type
    });
    (!compatible).then_some(DriftReason::InstanceTypeNotFound)
}

/// When `claim` expires: its creation plus `spec.expireAfter`; `None` for
/// `Never`, an unset value or a claim without a creation time.
pub fn expires_at(claim: &NodeClaim) -> Result<Option<Timestamp>, DurationError> {
    let Some(after) = claim.spec.expire_after.as_ref() else {
        return Ok(None);
    };
    let Some(after) = after.duration()? else {
        return Ok(None);
    };
    let Some(created) = claim.metadata.creation_timestamp.as_ref() else {
        return Ok(None);
    };
    let after = SignedDuration::try_from(after).unwrap_or(SignedDuration::MAX);
    Ok(Some(created.0.checked_add(after).unwrap_or(Timestamp::MAX)))
}

#[cfg(test)]
mod tests;
