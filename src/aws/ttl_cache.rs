//! A small map whose entries expire a fixed time after they were written,
//! for the AWS providers' caches (each provider documents its TTL). Expired
//! entries are dropped when read, and all of them when the map is full.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries of `V` by `K`, each valid for `ttl` after it was written.
#[derive(Debug)]
pub struct TtlCache<K, V> {
    ttl: Duration,
    max_entries: usize,
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    /// An empty cache of at most `max_entries` entries living `ttl` each.
    pub fn new(ttl: Duration, max_entries: usize) -> Self {
        TtlCache {
            ttl,
            max_entries: max_entries.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// How long an entry lives.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The live entry for `key`.
    pub fn get(&self, key: &K) -> Option<V> {
        self.get_at(key, Instant::now())
    }

    /// Stores `value` for `key`, valid for the TTL from now.
    pub fn insert(&self, key: K, value: V) {
        self.insert_at(key, value, Instant::now());
    }

    /// Changes the live entry for `key` in place, keeping its age.
    /// Returns whether there was one.
    pub fn update(&self, key: &K, change: impl FnOnce(&mut V)) -> bool {
        let now = Instant::now();
        let mut entries = self.lock();
        match entries.get_mut(key) {
            Some((written, value)) if now.duration_since(*written) < self.ttl => {
                change(value);
                true
            }
            _ => false,
        }
    }

    /// Forgets `key`.
    pub fn remove(&self, key: &K) {
        self.lock().remove(key);
    }

    /// Forgets every entry whose key fails `keep`.
    pub fn retain(&self, mut keep: impl FnMut(&K) -> bool) {
        self.lock().retain(|key, _| keep(key));
    }

    fn get_at(&self, key: &K, now: Instant) -> Option<V> {
        let mut entries = self.lock();
        match entries.get(key) {
            Some((written, value)) if now.duration_since(*written) < self.ttl => {
                Some(value.clone())
            }
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    fn insert_at(&self, key: K, value: V, now: Instant) {
        let mut entries = self.lock();
        if entries.len() >= self.max_entries && !entries.contains_key(&key) {
            entries.retain(|_, (written, _)| now.duration_since(*written) < self.ttl);
            if entries.len() >= self.max_entries {
                entries.clear();
            }
        }
        entries.insert(key, (now, value));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, (Instant, V)>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_the_ttl() {
        let cache = TtlCache::new(Duration::from_secs(60), 10);
        let start = Instant::now();
        cache.insert_at("a", 1, start);
        assert_eq!(cache.get_at(&"a", start + Duration::from_secs(59)), Some(1));
        assert_eq!(cache.get_at(&"a", start + Duration::from_secs(60)), None);
        assert_eq!(
            cache.get_at(&"a", start),
            None,
            "an expired entry is dropped"
        );
    }

    #[test]
    fn a_full_cache_drops_expired_entries_first() {
        let cache = TtlCache::new(Duration::from_secs(60), 2);
        let start = Instant::now();
        cache.insert_at("old", 1, start);
        cache.insert_at("new", 2, start + Duration::from_secs(30));
        cache.insert_at("newer", 3, start + Duration::from_secs(61));
        let later = start + Duration::from_secs(62);
        assert_eq!(cache.get_at(&"old", later), None);
        assert_eq!(cache.get_at(&"new", later), Some(2));
        assert_eq!(cache.get_at(&"newer", later), Some(3));
    }

    #[test]
    fn update_changes_a_live_entry_only() {
        let cache = TtlCache::new(Duration::from_secs(60), 10);
        cache.insert("a", 1);
        assert!(cache.update(&"a", |v| *v += 1));
        assert_eq!(cache.get(&"a"), Some(2));
        assert!(!cache.update(&"b", |v| *v += 1));
        cache.retain(|k| *k != "a");
        assert_eq!(cache.get(&"a"), None);
    }
}
