//! Offerings a launch recently could not get (insufficient capacity), shared
//! by the cloud provider that records them and the instance-type provider
//! that marks them unavailable, so the next solve does not ask for them again.
//! Entries expire after a TTL (Karpenter: 3 minutes), when capacity may
//! have come back.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::error::OfferingKey;
use crate::scheduling::InstanceType;

/// How long an offering stays unavailable after a capacity error.
pub const UNAVAILABLE_OFFERINGS_TTL: Duration = Duration::from_secs(180);

/// The shared cache of unavailable offerings.
#[derive(Debug)]
pub struct UnavailableOfferings {
    ttl: Duration,
    until: Mutex<HashMap<OfferingKey, Instant>>,
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
        self.mark_at(offering, Instant::now());
    }

    fn mark_at(&self, offering: OfferingKey, now: Instant) {
        if let Ok(mut until) = self.until.lock() {
            until.insert(offering, now + self.ttl);
            self.version.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether `offering` is still marked unavailable.
    pub fn contains(&self, offering: &OfferingKey) -> bool {
        self.contains_at(offering, Instant::now())
    }

    fn contains_at(&self, offering: &OfferingKey, now: Instant) -> bool {
        self.until
            .lock()
            .ok()
            .and_then(|until| until.get(offering).copied())
            .is_some_and(|deadline| deadline > now)
    }

    /// Changes whenever an offering is marked.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    /// Every offering still marked, sorted (for reports and metrics).
    pub fn entries(&self) -> Vec<OfferingKey> {
        let now = Instant::now();
        let mut out: Vec<OfferingKey> = self
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

    /// Marks the offerings of `instance_types` that are in the cache as not available.
    pub fn apply(&self, instance_types: &mut [InstanceType]) {
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
                if until.contains_key(&key) {
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
        cache.mark_at(key("us-east-1a"), start);
        assert!(cache.contains_at(&key("us-east-1a"), start + Duration::from_secs(179)));
        assert!(!cache.contains_at(&key("us-east-1a"), start + Duration::from_secs(181)));
        assert!(!cache.contains_at(&key("us-east-1b"), start));
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
        cache.apply(&mut types);
        let available: Vec<bool> = types[0].offerings.iter().map(|o| o.available).collect();
        assert_eq!(available, [false, true, true]);
        assert_eq!(cache.entries(), [key("us-east-1a")]);
    }
}
