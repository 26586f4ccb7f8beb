//! `status.capacityReservations` and `CapacityReservationsReady`, with
//! Karpenter's rules: only active, unexpired reservations; a capacity block
//! within 40 minutes of its end is `expiring` (no new launches); a
//! reservation of a kind this version does not know (instance match
//! criteria, reservation type) is left out and named in the condition's
//! message. Matching nothing is no fault (reservations come and go): the
//! condition stays `True` and names the terms that matched nothing.
//!
//! Free counts refresh whenever EC2 is asked, so a class with terms is looked
//! at again within a minute, or when its first reservation ends if sooner.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::apis::EC2NodeClass;
use crate::apis::conditions::EC2_NODE_CLASS_CAPACITY_RESERVATIONS_READY as RESERVATIONS_READY;
use crate::apis::ec2nodeclass::{
    CapacityReservationState, CapacityReservationStatus, CapacityReservationType,
    InstanceMatchCriteria,
};
use crate::aws::capacity_reservations::{CapacityReservation, describe_term};

use super::super::Context;
use super::conditions::{Resolved, Stamp, name_terms};

/// How long before its end a capacity block stops taking launches.
pub const EXPIRING_WINDOW: Duration = Duration::from_secs(40 * 60);
/// How often a class with reservation terms is looked at.
pub const POLL_PERIOD: Duration = Duration::from_secs(60);

/// The class's reservations and `CapacityReservationsReady`.
pub async fn resolve(
    context: &Context,
    class: &EC2NodeClass,
    stamp: &Stamp,
) -> Resolved<Vec<CapacityReservationStatus>> {
    let terms = class
        .spec
        .capacity_reservation_selector_terms
        .as_deref()
        .unwrap_or_default();
    if terms.is_empty() {
        return Resolved::to(Vec::new(), stamp.ready(RESERVATIONS_READY, ""));
    }
    let selection = match context.capacity_reservations.list(terms).await {
        Ok(selection) => selection,
        Err(e) if e.is_transient() => {
            tracing::warn!(error = %e, "capacity reservation lookup failed; keeping the stored reservations");
            return Resolved::keep();
        }
        Err(e) => {
            return Resolved::condition(stamp.not_ready(
                RESERVATIONS_READY,
                "CapacityReservationLookupFailed",
                e.to_string(),
            ));
        }
    };
    let now = unix_now();
    let mut status = Vec::with_capacity(selection.reservations.len());
    let mut notes = Vec::new();
    if !selection.unmatched_terms.is_empty() {
        let unmatched = name_terms(
            "capacityReservationSelectorTerms",
            &selection.unmatched_terms,
            |i| describe_term(&terms[i]),
        );
        notes.push(format!(
            "{unmatched} matched no active capacity reservation"
        ));
    }
    for reservation in &selection.reservations {
        match to_status(reservation, now) {
            Ok(entry) => status.push(entry),
            Err(why) => {
                tracing::warn!(reservation = %reservation.id, why, "capacity reservation left out");
                notes.push(format!(
                    "capacity reservation {} left out: {why}",
                    reservation.id
                ));
            }
        }
    }
    let next_end = selection
        .reservations
        .iter()
        .filter_map(|r| r.end_time)
        .min()
        .map(|end| Duration::from_secs(end.saturating_sub(now).max(1) as u64));
    Resolved {
        value: Some(status),
        condition: Some(stamp.ready(RESERVATIONS_READY, notes.join("; "))),
        requeue_after: Some(next_end.map_or(POLL_PERIOD, |end| end.min(POLL_PERIOD))),
    }
}

/// The status entry for a reservation at `now` (seconds since the epoch),
/// or why it cannot have one.
pub fn to_status(r: &CapacityReservation, now: i64) -> Result<CapacityReservationStatus, String> {
    let instance_match_criteria = match r.instance_match_criteria.as_str() {
        "open" => InstanceMatchCriteria::Open,
        "targeted" => InstanceMatchCriteria::Targeted,
        other => return Err(format!("unsupported instance match criteria {other:?}")),
    };
    let reservation_type = match r.reservation_type.as_deref() {
        None | Some("") | Some("default") => CapacityReservationType::Default,
        Some("capacity-block") => CapacityReservationType::CapacityBlock,
        Some(other) => return Err(format!("unsupported reservation type {other:?}")),
    };
    // The CRD's patterns: a value EC2 never sends would fail the whole write.
    let id_ok = r.id.strip_prefix("cr-").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    });
    if !id_ok {
        return Err(format!("id {:?} is not of the form cr-…", r.id));
    }
    if r.owner_id.len() != 12 || !r.owner_id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "owner {:?} is not a 12-digit account id",
            r.owner_id
        ));
    }
    let expiring = reservation_type == CapacityReservationType::CapacityBlock
        && r.end_time
            .is_some_and(|end| now >= end - EXPIRING_WINDOW.as_secs() as i64);
    let end_time = r
        .end_time
        .and_then(|end| k8s_openapi::jiff::Timestamp::from_second(end).ok())
        .map(Time);
    Ok(CapacityReservationStatus {
        availability_zone: r.availability_zone.clone(),
        end_time,
        id: r.id.clone(),
        instance_match_criteria,
        instance_type: r.instance_type.clone(),
        interruptible: Some(r.interruptible.unwrap_or(false)),
        owner_id: r.owner_id.clone(),
        reservation_type: Some(reservation_type),
        state: Some(if expiring {
            CapacityReservationState::Expiring
        } else {
            CapacityReservationState::Active
        }),
    })
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reservation(kind: Option<&str>, end: Option<i64>) -> CapacityReservation {
        CapacityReservation {
            id: "cr-0123abc".into(),
            instance_type: "p5.48xlarge".into(),
            availability_zone: "us-east-1a".into(),
            owner_id: "012345678901".into(),
            instance_match_criteria: "targeted".into(),
            reservation_type: kind.map(str::to_string),
            end_time: end,
            interruptible: None,
            available_instance_count: 1,
        }
    }

    #[test]
    fn capacity_blocks_expire_40_minutes_before_their_end() {
        let now = 1_000_000;
        let block = |end| to_status(&reservation(Some("capacity-block"), Some(end)), now).unwrap();
        assert_eq!(
            block(now + 41 * 60).state,
            Some(CapacityReservationState::Active)
        );
        assert_eq!(
            block(now + 40 * 60).state,
            Some(CapacityReservationState::Expiring)
        );
        assert_eq!(
            block(now + 40 * 60).reservation_type,
            Some(CapacityReservationType::CapacityBlock)
        );
        // Default reservations never expire early.
        let default = to_status(&reservation(None, Some(now + 60)), now).unwrap();
        assert_eq!(default.state, Some(CapacityReservationState::Active));
        assert_eq!(
            default.reservation_type,
            Some(CapacityReservationType::Default)
        );
        assert_eq!(default.interruptible, Some(false));
        assert!(default.end_time.is_some());
    }

    #[test]
    fn unsupported_kinds_are_rejected() {
        let err = to_status(&reservation(Some("future-kind"), None), 0).unwrap_err();
        assert!(err.contains("reservation type \"future-kind\""), "{err}");
        let mut odd = reservation(None, None);
        odd.instance_match_criteria = "anything".into();
        assert!(
            to_status(&odd, 0)
                .unwrap_err()
                .contains("instance match criteria")
        );
        let mut owner = reservation(None, None);
        owner.owner_id = "me".into();
        assert!(to_status(&owner, 0).unwrap_err().contains("owner"));
    }
}
