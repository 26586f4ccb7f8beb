//! Offerings a launch recently could not get (insufficient capacity), shared
//! by the cloud provider that records them and the instance-type provider
//! that marks them unavailable, so the next solve does not ask for them again.
//! Entries expire after a TTL (Karpenter: 3 minutes), when capacity may
//! have come back.
//!
//! A launch into a placement group marks what it could not get for that
//! group (and the partition it targeted) only, as Karpenter's
//! `UnavailableOfferings` scopes its keys: capacity missing inside one
//! group says nothing about the same type and zone outside it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::error::OfferingKey;
use crate::scheduling::InstanceType;

/// How long an offering stays unavailable after a capacity error.
pub const UNAVAILABLE_OFFERINGS_TTL: Duration = Duration::from_secs(180);

/// The placement group (and partition) a capacity error was met in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlacementScope {
    /// The group's id (`pg-…`).
    pub group_id: String,
    /// The partition the launch targeted, for a partition group spread by
    /// `karpenter.k8s.aws/placement-group-partition`.
    pub partition: Option<i32>,
}

impl PlacementScope {
    /// The whole group: what offerings of a class launching into it are
    /// checked against (Karpenter's offering resolver passes the group id
    /// only).
    pub fn group(group_id: &str) -> PlacementScope {
        PlacementScope {
            group_id: group_id.to_string(),
            partition: None,
        }
    }
}

/// An offering marked unavailable everywhere (`None`) or in one placement
/// group.
type Scoped = (OfferingKey, Option<PlacementScope>);

/// The shared cache of unavailable offerings.
#[derive(Debug)]
pub struct UnavailableOfferings {
    ttl: Duration,
    until: Mutex<HashMap<Scoped, Instant>>,
    /// Bumped on every change, so caches built from the set know when to rebuild.
    version: AtomicU64,
}

impl Default for UnavailableOfferings {
    fn default() -> Self {
        Self::new(UNAVAILABLE_OFFERINGS_TTL)
    }
}

impl UnavailableOfferings {
    /// An empty cache whose entries live `ttl`.
    pub fn new(ttl: Duration) -> Self {
        UnavailableOfferings {
            ttl,
            until: Mutex::new(HashMap::new()),
            version: AtomicU64::new(0),
        }
    }

    /// Records that `offering` had no capacity just now.
    pub fn mark(&self, offering: OfferingKey) {
        self.mark_at(offering, None, Instant::now());
    }

    /// Records that `offering` had no capacity just now in `scope`'s
    /// placement group (Karpenter's `MarkUnavailable` with
    /// `WithPlacementGroup`/`WithPlacementGroupPartition`).
    pub fn mark_in(&self, offering: OfferingKey, scope: Option<PlacementScope>) {
        self.mark_at(offering, scope, Instant::now());
    }

    fn mark_at(&self, offering: OfferingKey, scope: Option<PlacementScope>, now: Instant) {
        if let Ok(mut until) = self.until.lock() {
            until.insert((offering, scope), now + self.ttl);
            self.version.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether `offering` is still marked unavailable everywhere.
    pub fn contains(&self, offering: &OfferingKey) -> bool {
        self.contains_at(offering, None, Instant::now())
    }

    /// Whether `offering` is still marked unavailable in exactly `scope`.
    pub fn contains_in(&self, offering: &OfferingKey, scope: &PlacementScope) -> bool {
        self.contains_at(offering, Some(scope), Instant::now())
    }

    fn contains_at(
        &self,
        offering: &OfferingKey,
        scope: Option<&PlacementScope>,
        now: Instant,
    ) -> bool {
        let key = (offering.clone(), scope.cloned());
        self.until
            .lock()
            .ok()
            .and_then(|until| until.get(&key).copied())
            .is_some_and(|deadline| deadline > now)
    }

    /// Changes whenever an offering is marked.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    /// Every offering still marked, in any scope, sorted and once each
    /// (for reports and metrics).
    pub fn entries(&self) -> Vec<OfferingKey> {
        let mut out: Vec<OfferingKey> = self
            .scoped_entries()
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        out.dedup();
        out
    }

    /// Every mark still in force with its scope, sorted.
    pub fn scoped_entries(&self) -> Vec<(OfferingKey, Option<PlacementScope>)> {
        let now = Instant::now();
        let mut out: Vec<Scoped> = self
            .until
            .lock()
            .map(|until| {
                until
                    .iter()
                    .filter(|(_, deadline)| **deadline > now)
                    .map(|(key, _)| key.clone())
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Marks the offerings of `instance_types` that are in the cache as not
    /// available: marked everywhere, or in `group` (the class's placement
    /// group id) as a whole — Karpenter's offering resolver checks the
    /// general key and then the group's.
    pub fn apply(&self, instance_types: &mut [InstanceType], group: Option<&str>) {
        let now = Instant::now();
        let Ok(mut until) = self.until.lock() else {
            return;
        };
        until.retain(|_, deadline| *deadline > now);
        if until.is_empty() {
            return;
        }
        for it in instance_types.iter_mut() {
            for offering in &mut it.offerings {
                let key = OfferingKey {
                    instance_type: it.name.clone(),
                    zone: offering.zone.clone(),
                    capacity_type: offering.capacity_type.label_value().to_string(),
                };
                let everywhere = (key, None);
                let in_group =
                    group.map(|g| (everywhere.0.clone(), Some(PlacementScope::group(g))));
                if until.contains_key(&everywhere)
                    || in_group.is_some_and(|k| until.contains_key(&k))
                {
                    offering.available = false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::{CapacityType, Offering, Overhead, Requirements, Resources};

    fn key(zone: &str) -> OfferingKey {
        OfferingKey {
            instance_type: "m5.large".to_string(),
            zone: zone.to_string(),
            capacity_type: "spot".to_string(),
        }
    }

    #[test]
    fn marked_offerings_expire_after_the_ttl() {
        let cache = UnavailableOfferings::new(Duration::from_secs(180));
        let start = Instant::now();
        cache.mark_at(key("us-east-1a"), None, start);
        assert!(cache.contains_at(&key("us-east-1a"), None, start + Duration::from_secs(179)));
        assert!(!cache.contains_at(&key("us-east-1a"), None, start + Duration::from_secs(181)));
        assert!(!cache.contains_at(&key("us-east-1b"), None, start));
    }

    #[test]
    fn apply_marks_only_the_cached_offering() {
        let cache = UnavailableOfferings::default();
        let before = cache.version();
        cache.mark(key("us-east-1a"));
        assert_ne!(cache.version(), before);
        let mut types = vec![InstanceType::new(
            "m5.large",
            Requirements::new(),
            vec![
                Offering::new("us-east-1a", CapacityType::Spot, 0.04),
                Offering::new("us-east-1a", CapacityType::OnDemand, 0.096),
                Offering::new("us-east-1b", CapacityType::Spot, 0.04),
            ],
            Resources::cpu_memory(2000, 8 << 30),
            Overhead::default(),
        )];
        cache.apply(&mut types, None);
        let available: Vec<bool> = types[0].offerings.iter().map(|o| o.available).collect();
        assert_eq!(available, [false, true, true]);
        assert_eq!(cache.entries(), [key("us-east-1a")]);
    }

    fn m5_large() -> Vec<InstanceType> {
        vec![InstanceType::new(
            "m5.large",
            Requirements::new(),
            vec![
                Offering::new("us-east-1a", CapacityType::Spot, 0.04),
                Offering::new("us-east-1b", CapacityType::Spot, 0.04),
            ],
            Resources::cpu_memory(2000, 8 << 30),
            Overhead::default(),
        )]
    }

    fn available(cache: &UnavailableOfferings, group: Option<&str>) -> Vec<bool> {
        let mut types = m5_large();
        cache.apply(&mut types, group);
        types[0].offerings.iter().map(|o| o.available).collect()
    }

    /// Capacity missing in a placement group is missing for launches into
    /// that group only; everywhere-marks still apply inside the group.
    #[test]
    fn a_mark_in_a_placement_group_applies_to_that_group_only() {
        let cache = UnavailableOfferings::default();
        cache.mark_in(key("us-east-1a"), Some(PlacementScope::group("pg-1")));
        assert_eq!(available(&cache, None), [true, true]);
        assert_eq!(available(&cache, Some("pg-2")), [true, true]);
        assert_eq!(available(&cache, Some("pg-1")), [false, true]);
        cache.mark(key("us-east-1b"));
        assert_eq!(available(&cache, Some("pg-1")), [false, false]);
        assert_eq!(available(&cache, None), [true, false]);
        assert!(cache.contains_in(&key("us-east-1a"), &PlacementScope::group("pg-1")));
        assert!(!cache.contains(&key("us-east-1a")));
        assert_eq!(cache.entries(), [key("us-east-1a"), key("us-east-1b")]);
    }

    /// A mark scoped to a partition is kept under its own key, which the
    /// offerings of the group as a whole are not checked against (as
    /// Karpenter's resolver, which looks up the group's key only): the next
    /// NodeClaim may try another partition.
    #[test]
    fn a_mark_in_a_partition_leaves_the_groups_offerings_available() {
        let cache = UnavailableOfferings::default();
        let partition = PlacementScope {
            group_id: "pg-1".to_string(),
            partition: Some(2),
        };
        cache.mark_in(key("us-east-1a"), Some(partition.clone()));
        assert_eq!(available(&cache, Some("pg-1")), [true, true]);
        assert!(cache.contains_in(&key("us-east-1a"), &partition));
        assert!(!cache.contains_in(&key("us-east-1a"), &PlacementScope::group("pg-1")));
        assert_eq!(
            cache.scoped_entries(),
            [(key("us-east-1a"), Some(partition))]
        );
    }
}
