//! Events expire, as kube-apiserver's `--event-ttl` (default one hour)
//! expires them: every write of an Event renews its lease, and an Event
//! not written for the TTL is deleted. Events are the one kind a real
//! cluster deletes by itself; without this, every pod a long run creates
//! leaves its events in the double's memory for good.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::State;
use super::store::{Change, EventType, ObjKey, Storage};

/// Where Events are stored (both API groups share it).
fn events() -> Storage {
    (String::new(), "events".to_string())
}

/// When each Event was last written, oldest first.
#[derive(Debug)]
pub struct EventExpiry {
    ttl: Duration,
    written: HashMap<ObjKey, Instant>,
    order: VecDeque<(Instant, ObjKey)>,
}

impl EventExpiry {
    /// Events not written for `ttl` expire.
    pub fn new(ttl: Duration) -> Self {
        EventExpiry {
            ttl,
            written: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Renews (or forgets, when deleted) the Event `change` is about.
    pub fn note(&mut self, change: &Change, now: Instant) {
        if *change.storage != events() {
            return;
        }
        let key = (change.namespace.clone(), change.name.clone());
        if change.event == EventType::Deleted {
            self.written.remove(&key);
        } else {
            self.written.insert(key.clone(), now);
            self.order.push_back((now, key));
        }
    }

    /// The Events whose last write is `ttl` or more before `now`; each
    /// write is queued once and popped once.
    pub fn due(&mut self, now: Instant) -> Vec<ObjKey> {
        let mut due = Vec::new();
        while let Some((at, _)) = self.order.front() {
            if now.saturating_duration_since(*at) < self.ttl {
                break;
            }
            let Some((at, key)) = self.order.pop_front() else {
                break;
            };
            // A later write of the same Event has its own queue entry.
            if self.written.get(&key) == Some(&at) {
                self.written.remove(&key);
                due.push(key);
            }
        }
        due
    }
}

impl State {
    /// Deletes the Events that expired.
    pub fn expire_events(&mut self, now: Instant) {
        let storage = events();
        for (namespace, name) in self.expiry.due(now) {
            self.delete_quietly(&storage, &namespace, &name);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn change(plural: &str, name: &str, event: EventType) -> Change {
        Change {
            resource_version: 1,
            event,
            storage: Arc::new((String::new(), plural.to_string())),
            namespace: "default".into(),
            name: name.into(),
            object: Arc::new(json!({})),
            previous: None,
        }
    }

    #[test]
    fn an_event_expires_a_ttl_after_its_last_write() {
        let ttl = Duration::from_secs(60);
        let mut expiry = EventExpiry::new(ttl);
        let start = Instant::now();
        expiry.note(&change("events", "a", EventType::Added), start);
        expiry.note(&change("events", "b", EventType::Added), start);
        expiry.note(&change("pods", "p", EventType::Added), start);
        let later = start + Duration::from_secs(30);
        expiry.note(&change("events", "b", EventType::Modified), later);
        assert!(expiry.due(start + Duration::from_secs(59)).is_empty());
        let due = expiry.due(start + ttl);
        assert_eq!(due, vec![("default".to_string(), "a".to_string())]);
        assert_eq!(
            expiry.due(later + ttl),
            vec![("default".to_string(), "b".to_string())]
        );
        assert!(expiry.written.is_empty() && expiry.order.is_empty());
    }

    #[test]
    fn a_deleted_event_is_forgotten() {
        let mut expiry = EventExpiry::new(Duration::from_secs(1));
        let start = Instant::now();
        expiry.note(&change("events", "a", EventType::Added), start);
        expiry.note(&change("events", "a", EventType::Deleted), start);
        assert!(expiry.due(start + Duration::from_secs(5)).is_empty());
    }
}
