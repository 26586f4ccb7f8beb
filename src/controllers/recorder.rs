//! Publishes Kubernetes events (`events.k8s.io/v1`) for every controller.
//!
//! Like client-go's recorder, a repeat of the same event (same type,
//! reason, action, object and related object) within [`SERIES_TTL`]
//! patches the first one's `series` instead of creating another object.
//! The memory of published events is bounded: at most [`CAPACITY`]
//! entries, the oldest forgotten first, so publishing costs the same
//! whether the controller has published ten events or a million (an
//! interruption storm publishes several per message).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};
use kube::{Api, Client, ResourceExt};

/// How long a published event can be continued as a series.
pub const SERIES_TTL: Duration = Duration::from_secs(6 * 60);

/// How many published events are remembered for series at most.
pub const CAPACITY: usize = 4096;

/// What makes two events the same occurrence repeated.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EventKey {
    warning: bool,
    reason: String,
    action: String,
    regarding: ObjectKey,
    related: Option<ObjectKey>,
}

/// An object reference's identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ObjectKey {
    api_version: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
}

impl From<&ObjectReference> for ObjectKey {
    fn from(reference: &ObjectReference) -> Self {
        Self {
            api_version: reference.api_version.clone(),
            kind: reference.kind.clone(),
            namespace: reference.namespace.clone(),
            name: reference.name.clone(),
            uid: reference.uid.clone(),
        }
    }
}

/// A remembered event and when it was last published.
struct Published {
    event: K8sEvent,
    at: Instant,
}

/// The published events, and the order they were published in.
#[derive(Default)]
struct Memory {
    events: HashMap<EventKey, Published>,
    order: VecDeque<(Instant, EventKey)>,
}

impl Memory {
    /// Forgets events older than the TTL and the oldest beyond capacity.
    /// Each publication is queued once and popped once.
    fn expire(&mut self, now: Instant) {
        while let Some((at, _)) = self.order.front() {
            let stale = now.saturating_duration_since(*at) >= SERIES_TTL;
            if !stale && self.order.len() <= CAPACITY {
                break;
            }
            let Some((at, key)) = self.order.pop_front() else {
                break;
            };
            // A later publication of the same key has its own queue entry.
            if self.events.get(&key).is_some_and(|p| p.at == at) {
                self.events.remove(&key);
            }
        }
    }

    fn remember(&mut self, key: EventKey, event: K8sEvent, at: Instant) {
        self.order.push_back((at, key.clone()));
        self.events.insert(key, Published { event, at });
        self.expire(at);
    }
}

/// Publishes events on behalf of one controller process; cheap to clone
/// (clones share the memory of published events).
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    memory: Arc<Mutex<Memory>>,
}

impl Recorder {
    /// A recorder that reports as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            memory: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes `event` about `reference`, in the reference's namespace
    /// (`default` for cluster-scoped objects). A repeat continues the
    /// first event's series; if that event is gone from the API server,
    /// a new one is created.
    pub async fn publish(
        &self,
        event: &Event,
        reference: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let key = EventKey {
            warning: matches!(event.type_, EventType::Warning),
            reason: event.reason.clone(),
            action: event.action.clone(),
            regarding: ObjectKey::from(reference),
            related: event.secondary.as_ref().map(ObjectKey::from),
        };
        let started = Instant::now();
        let previous = {
            let mut memory = self.lock();
            memory.expire(started);
            memory.events.get(&key).map(|p| p.event.clone())
        };
        let namespace = reference.namespace.as_deref().unwrap_or("default");
        let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
        let now = Timestamp::now();
        let published = match previous {
            Some(mut repeated) => {
                let count = repeated.series.as_ref().map_or(2, |s| s.count + 1);
                repeated.series = Some(EventSeries {
                    count,
                    last_observed_time: MicroTime(now),
                });
                let name = repeated.name_any();
                match events
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&repeated))
                    .await
                {
                    Ok(_) => repeated,
                    Err(kube::Error::Api(status)) if status.code == 404 => {
                        let fresh = self.new_event(event, reference, now);
                        events.create(&PostParams::default(), &fresh).await?;
                        fresh
                    }
                    Err(error) => return Err(error),
                }
            }
            None => {
                let fresh = self.new_event(event, reference, now);
                events.create(&PostParams::default(), &fresh).await?;
                fresh
            }
        };
        self.lock().remember(key, published, Instant::now());
        Ok(())
    }

    /// The first occurrence of `event` as an API object.
    fn new_event(&self, event: &Event, reference: &ObjectReference, now: Timestamp) -> K8sEvent {
        let owner = reference
            .name
            .as_deref()
            .unwrap_or(&self.reporter.controller);
        K8sEvent {
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            note: event.note.clone(),
            event_time: Some(MicroTime(now)),
            regarding: Some(reference.clone()),
            related: event.secondary.clone(),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(match event.type_ {
                EventType::Normal => "Normal".to_string(),
                EventType::Warning => "Warning".to_string(),
            }),
            metadata: ObjectMeta {
                namespace: reference.namespace.clone(),
                name: Some(format!("{owner}.{:x}", now.as_nanosecond())),
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> EventKey {
        EventKey {
            warning: false,
            reason: "Reason".into(),
            action: "Action".into(),
            regarding: ObjectKey {
                api_version: None,
                kind: Some("Node".into()),
                namespace: None,
                name: Some(name.into()),
                uid: None,
            },
            related: None,
        }
    }

    #[test]
    fn memory_is_bounded_oldest_first() {
        let mut memory = Memory::default();
        let start = Instant::now();
        for i in 0..CAPACITY + 10 {
            memory.remember(key(&format!("n{i}")), K8sEvent::default(), start);
        }
        assert_eq!(memory.events.len(), CAPACITY);
        assert_eq!(memory.order.len(), CAPACITY);
        assert!(!memory.events.contains_key(&key("n0")));
        assert!(!memory.events.contains_key(&key("n9")));
        assert!(memory.events.contains_key(&key("n10")));
    }

    #[test]
    fn events_older_than_the_ttl_are_forgotten() {
        let mut memory = Memory::default();
        let start = Instant::now();
        memory.remember(key("old"), K8sEvent::default(), start);
        memory.remember(key("new"), K8sEvent::default(), start + SERIES_TTL / 2);
        memory.expire(start + SERIES_TTL);
        assert!(!memory.events.contains_key(&key("old")));
        assert!(memory.events.contains_key(&key("new")));
    }

    #[test]
    fn a_repeat_keeps_its_event_past_its_first_publication() {
        let mut memory = Memory::default();
        let start = Instant::now();
        memory.remember(key("n"), K8sEvent::default(), start);
        memory.remember(key("n"), K8sEvent::default(), start + SERIES_TTL / 2);
        memory.expire(start + SERIES_TTL);
        assert!(
            memory.events.contains_key(&key("n")),
            "the repeat is younger than the TTL"
        );
        assert_eq!(memory.order.len(), 1);
    }
}
