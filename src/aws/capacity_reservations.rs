//! The capacity reservations an EC2NodeClass's
//! `capacityReservationSelectorTerms` select, and how many instances each
//! still has room for.
//!
//! A term by id is one `DescribeCapacityReservations` call by id; a term by
//! tags, owner and/or instance match criteria is one filtered call (a tag
//! value `*` matches any value). Only `active` reservations are asked for,
//! every call is paginated to the end, and reservations whose end date has
//! passed are dropped. What to make of a reservation (its status entry,
//! whether it is expiring, unsupported kinds) is the controller's call.
//!
//! Caches: each query's answer lives [`RESERVATIONS_TTL`] (1 minute,
//! Karpenter's `DefaultTTL`); the free instance count per reservation,
//! refreshed by every fresh answer and adjusted by the launch path between
//! answers, lives [`AVAILABILITY_TTL`] (24 hours, Karpenter's
//! `CapacityReservationAvailabilityTTL`, so an EC2 outage does not empty it).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_sdk_ec2::types::{CapacityReservationState, Filter};

use super::errors::AwsError;
use super::filters::{describe_tags, filter, tag_filters};
use super::ttl_cache;
use crate::apis::ec2nodeclass::{CapacityReservationSelectorTerm, InstanceMatchCriteria};

/// How long one query's answer is reused.
pub const RESERVATIONS_TTL: Duration = Duration::from_secs(60);
/// How long a free instance count is kept without a fresh answer.
pub const AVAILABILITY_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// `MaxResults` of each filtered page (the API's maximum).
const PAGE_SIZE: i32 = 1000;
/// Entries each cache keeps at most.
const MAX_CACHED: u64 = 4096;
/// EC2's error code for a reservation id it does not know.
const NOT_FOUND: &str = "InvalidCapacityReservationId.NotFound";

/// A reservation as EC2 reports it. Enumerations are kept as EC2's
/// strings, so values this version does not know reach the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityReservation {
    /// `cr-…`.
    pub id: String,
    /// The instance type reserved.
    pub instance_type: String,
    /// The zone it is in.
    pub availability_zone: String,
    /// The owning account.
    pub owner_id: String,
    /// `open` or `targeted`.
    pub instance_match_criteria: String,
    /// `default` or `capacity-block`; absent means `default`.
    pub reservation_type: Option<String>,
    /// When it ends (seconds since the epoch), if it does.
    pub end_time: Option<i64>,
    /// Whether EC2 may take the capacity back.
    pub interruptible: Option<bool>,
    /// Instances it still had room for when EC2 was asked.
    pub available_instance_count: u32,
}

/// What a class's reservation terms selected.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReservationSelection {
    /// Every selected, unexpired reservation once, by id.
    pub reservations: Vec<CapacityReservation>,
    /// Indexes of the terms that matched no reservation.
    pub unmatched_terms: Vec<usize>,
}

/// Why the reservations could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum ReservationError {
    /// A term selects nothing in particular.
    #[error(
        "capacityReservationSelectorTerms[{index}] has no id, tags or instanceMatchCriteria: select reservations by one of them"
    )]
    EmptyTerm {
        /// The term's index.
        index: usize,
    },
    /// EC2 refused or failed the lookup.
    #[error("looking up capacityReservationSelectorTerms[{index}]: {source}")]
    Describe {
        /// The term the call served.
        index: usize,
        /// The call's error.
        #[source]
        source: AwsError,
    },
}

impl ReservationError {
    /// Whether waiting may help (throttling, a server fault).
    pub fn is_transient(&self) -> bool {
        matches!(self, ReservationError::Describe { source, .. } if source.is_transient())
    }
}

/// Free instances per reservation, shared by the controller (which
/// refreshes it) and the instance-type provider (which offers them).
#[derive(Debug)]
pub struct ReservationAvailability {
    counts: moka::sync::Cache<String, Count>,
    /// Bumped on every count written.
    version: AtomicU64,
}

impl Default for ReservationAvailability {
    fn default() -> Self {
        ReservationAvailability::with_ttl(AVAILABILITY_TTL)
    }
}

impl ReservationAvailability {
    /// Counts living `ttl` from EC2's answer (launches and terminations
    /// change a count without renewing it); at most [`MAX_CACHED`]
    /// reservations, the least recently used going first.
    fn with_ttl(ttl: Duration) -> Self {
        ReservationAvailability {
            counts: moka::sync::Cache::builder()
                .max_capacity(MAX_CACHED)
                .expire_after(FromEc2Answer(ttl))
                .eviction_policy(moka::policy::EvictionPolicy::lru())
                .build(),
            version: AtomicU64::new(0),
        }
    }

    /// Changes whenever a count is written, so a decision made from the
    /// counts knows when they moved.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    fn written(&self) {
        self.version.fetch_add(1, Ordering::SeqCst);
    }

    /// Instances reservation `id` has room for, if it was seen lately.
    pub fn available(&self, id: &str) -> Option<u32> {
        self.counts.get(id).map(|c| c.free)
    }

    /// Records EC2's count for `id`.
    pub fn set(&self, id: &str, count: u32) {
        let written = Instant::now();
        self.counts.insert(
            id.to_string(),
            Count {
                free: count,
                written,
            },
        );
        self.written();
    }

    /// One instance was launched into `id`.
    pub fn mark_launched(&self, id: &str) {
        self.update(id, |count| count.saturating_sub(1));
        self.written();
    }

    /// One instance of `id` was terminated.
    pub fn mark_terminated(&self, id: &str) {
        self.update(id, |count| count.saturating_add(1));
        self.written();
    }

    /// A launch into `id` found no room: treat it as full until EC2 says otherwise.
    pub fn mark_unavailable(&self, id: &str) {
        self.update(id, |_| 0);
        self.written();
    }

    /// Changes the live count of `id`, keeping the time EC2 gave it.
    fn update(&self, id: &str, change: impl FnOnce(u32) -> u32) {
        self.counts
            .entry_by_ref(id)
            .and_compute_with(|found| match found {
                Some(entry) => {
                    let count = entry.into_value();
                    moka::ops::compute::Op::Put(Count {
                        free: change(count.free),
                        ..count
                    })
                }
                None => moka::ops::compute::Op::Nop,
            });
    }
}

/// A reservation's free instances and when EC2 reported them.
#[derive(Debug, Clone, Copy)]
struct Count {
    free: u32,
    written: Instant,
}

/// Expires a count its TTL after EC2's answer, however often it was
/// changed since.
struct FromEc2Answer(Duration);

impl moka::Expiry<String, Count> for FromEc2Answer {
    fn expire_after_create(&self, _: &String, _: &Count, _: Instant) -> Option<Duration> {
        Some(self.0)
    }

    fn expire_after_update(
        &self,
        _: &String,
        count: &Count,
        updated_at: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(
            self.0
                .saturating_sub(updated_at.saturating_duration_since(count.written)),
        )
    }
}

/// One `DescribeCapacityReservations` request.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
enum Query {
    Id(String),
    Filtered {
        owner_id: Option<String>,
        tags: BTreeMap<String, String>,
        instance_match_criteria: Option<InstanceMatchCriteria>,
    },
}

/// Finds capacity reservations by selector terms.
pub struct CapacityReservationProvider {
    ec2: aws_sdk_ec2::Client,
    cache: moka::sync::Cache<String, Arc<Vec<CapacityReservation>>>,
    availability: Arc<ReservationAvailability>,
}

impl CapacityReservationProvider {
    /// A provider over `ec2` that keeps free counts in `availability`.
    pub fn new(ec2: aws_sdk_ec2::Client, availability: Arc<ReservationAvailability>) -> Self {
        CapacityReservationProvider {
            ec2,
            // Each query's answer lives RESERVATIONS_TTL; at most MAX_CACHED.
            cache: ttl_cache(RESERVATIONS_TTL, MAX_CACHED),
            availability,
        }
    }

    /// The free instance counts this provider refreshes.
    pub fn availability(&self) -> &Arc<ReservationAvailability> {
        &self.availability
    }

    /// The active, unexpired reservations `terms` select, by id.
    pub async fn list(
        &self,
        terms: &[CapacityReservationSelectorTerm],
    ) -> Result<ReservationSelection, ReservationError> {
        let mut queries: Vec<(usize, Query)> = Vec::new();
        for (index, term) in terms.iter().enumerate() {
            let tags = term.tags.clone().unwrap_or_default();
            if let Some(id) = &term.id {
                queries.push((index, Query::Id(id.clone())));
            }
            if !tags.is_empty() || term.instance_match_criteria.is_some() {
                queries.push((
                    index,
                    Query::Filtered {
                        owner_id: term.owner_id.clone(),
                        tags,
                        instance_match_criteria: term.instance_match_criteria,
                    },
                ));
            } else if term.id.is_none() {
                return Err(ReservationError::EmptyTerm { index });
            }
        }

        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default();
        let mut found: BTreeMap<String, CapacityReservation> = BTreeMap::new();
        let mut matched = vec![false; terms.len()];
        for (index, query) in &queries {
            for reservation in self.query(*index, query).await?.iter() {
                if reservation.end_time.is_some_and(|end| end <= now) {
                    continue;
                }
                matched[*index] = true;
                found.insert(reservation.id.clone(), reservation.clone());
            }
        }
        Ok(ReservationSelection {
            reservations: found.into_values().collect(),
            unmatched_terms: (0..terms.len()).filter(|i| !matched[*i]).collect(),
        })
    }

    /// One query's reservations, from the cache or from EC2.
    async fn query(
        &self,
        index: usize,
        query: &Query,
    ) -> Result<Arc<Vec<CapacityReservation>>, ReservationError> {
        let key = serde_json::to_string(query).unwrap_or_default();
        if let Some(hit) = self.cache.get(&key) {
            return Ok(hit);
        }
        let active = filter("state", [CapacityReservationState::Active.as_str()]);
        let request = match query {
            // MaxResults cannot be combined with ids.
            Query::Id(id) => self
                .ec2
                .describe_capacity_reservations()
                .capacity_reservation_ids(id)
                .filters(active),
            Query::Filtered {
                owner_id,
                tags,
                instance_match_criteria,
            } => {
                let mut filters: Vec<Filter> = vec![active];
                if let Some(owner) = owner_id {
                    filters.push(filter("owner-id", [owner.as_str()]));
                }
                filters.extend(tag_filters(tags));
                if let Some(criteria) = instance_match_criteria {
                    let value = match criteria {
                        InstanceMatchCriteria::Open => "open",
                        InstanceMatchCriteria::Targeted => "targeted",
                    };
                    filters.push(filter("instance-match-criteria", [value]));
                }
                self.ec2
                    .describe_capacity_reservations()
                    .set_filters(Some(filters))
                    .max_results(PAGE_SIZE)
            }
        };
        let mut pages = request.into_paginator().send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = match page {
                Ok(page) => page,
                Err(e) => {
                    let source = AwsError::from_sdk("ec2:DescribeCapacityReservations", &e);
                    // An unknown id is a reservation that is gone.
                    if source.has_code(NOT_FOUND) {
                        break;
                    }
                    return Err(ReservationError::Describe { index, source });
                }
            };
            for reservation in page.capacity_reservations.unwrap_or_default() {
                if let Some(reservation) = from_ec2(&reservation) {
                    self.availability
                        .set(&reservation.id, reservation.available_instance_count);
                    out.push(reservation);
                }
            }
        }
        let out = Arc::new(out);
        self.cache.insert(key, out.clone());
        Ok(out)
    }
}

/// The reservation's data, or `None` (logged) when EC2 left out a field
/// every reservation has.
fn from_ec2(r: &aws_sdk_ec2::types::CapacityReservation) -> Option<CapacityReservation> {
    let (Some(id), Some(instance_type), Some(zone), Some(owner)) = (
        r.capacity_reservation_id(),
        r.instance_type(),
        r.availability_zone(),
        r.owner_id(),
    ) else {
        tracing::warn!(
            id = r.capacity_reservation_id(),
            "EC2 listed a capacity reservation without its id, instance type, zone or owner; skipped"
        );
        return None;
    };
    Some(CapacityReservation {
        id: id.to_string(),
        instance_type: instance_type.to_string(),
        availability_zone: zone.to_string(),
        owner_id: owner.to_string(),
        instance_match_criteria: r
            .instance_match_criteria()
            .map(|c| c.as_str().to_string())
            .unwrap_or_default(),
        reservation_type: r.reservation_type().map(|t| t.as_str().to_string()),
        end_time: r.end_date().map(|d| d.secs()),
        interruptible: r.interruptible(),
        available_instance_count: r
            .available_instance_count()
            .and_then(|c| u32::try_from(c).ok())
            .unwrap_or(0),
    })
}

/// `tags k=v` / `id cr-…` for messages that name a term.
pub fn describe_term(term: &CapacityReservationSelectorTerm) -> String {
    let mut parts = Vec::new();
    if let Some(id) = &term.id {
        parts.push(format!("id {id}"));
    }
    if let Some(tags) = term.tags.as_ref().filter(|t| !t.is_empty()) {
        parts.push(format!("tags {}", describe_tags(tags)));
    }
    if let Some(owner) = &term.owner_id {
        parts.push(format!("ownerID {owner}"));
    }
    if let Some(criteria) = term.instance_match_criteria {
        let value = match criteria {
            InstanceMatchCriteria::Open => "open",
            InstanceMatchCriteria::Targeted => "targeted",
        };
        parts.push(format!("instanceMatchCriteria {value}"));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_and_terminations_adjust_the_free_count() {
        let availability = ReservationAvailability::default();
        assert_eq!(availability.available("cr-1"), None);
        availability.set("cr-1", 2);
        availability.mark_launched("cr-1");
        assert_eq!(availability.available("cr-1"), Some(1));
        availability.mark_terminated("cr-1");
        availability.mark_terminated("cr-1");
        assert_eq!(availability.available("cr-1"), Some(3));
        availability.mark_unavailable("cr-1");
        availability.mark_launched("cr-1");
        assert_eq!(availability.available("cr-1"), Some(0));
        availability.mark_launched("cr-unknown");
        assert_eq!(availability.available("cr-unknown"), None);
    }

    #[test]
    fn a_changed_count_expires_with_ec2s_answer() {
        let availability = ReservationAvailability::with_ttl(Duration::from_millis(50));
        availability.set("cr-1", 2);
        std::thread::sleep(Duration::from_millis(30));
        availability.mark_launched("cr-1");
        // Only lower bounds on time: at least 70 ms have passed since EC2's
        // answer, so the count is gone unless the launch renewed it.
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(availability.available("cr-1"), None);
    }
}
