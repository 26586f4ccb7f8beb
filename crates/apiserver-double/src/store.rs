//! Object storage of the double: one ordered collection per resource,
//! a global resourceVersion counter, a bounded history of changes (what
//! watches replay and what paginated lists are served from), and an index
//! of owner references for garbage collection.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};

use super::meta;

/// Where a collection is kept: `(group, plural)`.
pub type Storage = (String, String);
/// An object within a collection: `(namespace or "", name)`.
pub type ObjKey = (String, String);

/// The kind of a change, as watch events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One stored change; `previous` is the object before it.
#[derive(Debug, Clone)]
pub struct Change {
    pub resource_version: u64,
    pub event: EventType,
    pub storage: Arc<Storage>,
    pub namespace: String,
    pub name: String,
    pub object: Arc<Value>,
    pub previous: Option<Arc<Value>>,
}

/// A resourceVersion older than the kept history.
#[derive(Debug, Clone, Copy)]
pub struct Expired {
    /// The oldest resourceVersion that can still be served.
    pub oldest: u64,
}

/// The objects and their history.
#[derive(Debug)]
pub struct Store {
    collections: HashMap<Storage, BTreeMap<ObjKey, Arc<Value>>>,
    history: VecDeque<Change>,
    history_limit: usize,
    next_version: u64,
    next_uid: u64,
    /// Owner uid → objects whose ownerReferences name it.
    dependents: HashMap<String, BTreeSet<(Storage, ObjKey)>>,
    /// Changes not yet seen by the in-server controllers.
    pending: Vec<Change>,
    /// Controller uid → the pods it controls, counted at every write, so
    /// a ReplicaSet's reconcile after a pod write needs no pass over its
    /// pods (with 5,000 pods, those passes were most of the double's time).
    controlled: HashMap<String, PodCounts>,
}

/// Pods of one controller that count as replicas: not being deleted and
/// not finished; and of those, how many are `Ready`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PodCounts {
    pub active: i64,
    pub ready: i64,
}

fn owner_uids(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn key_of(object: &Value) -> ObjKey {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (text("/metadata/namespace"), text("/metadata/name"))
}

impl Store {
    /// An empty store keeping at most `history_limit` changes.
    pub fn new(history_limit: usize) -> Self {
        Store {
            collections: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            next_version: 1,
            next_uid: 1,
            dependents: HashMap::new(),
            pending: Vec::new(),
            controlled: HashMap::new(),
        }
    }

    /// The resourceVersion of the latest change.
    pub fn current_version(&self) -> u64 {
        self.next_version - 1
    }

    /// A fresh uid.
    pub fn new_uid(&mut self) -> String {
        let n = self.next_uid;
        self.next_uid += 1;
        format!("00000000-0000-4000-8000-{n:012x}")
    }

    /// A counter for generated names.
    pub fn next_serial(&mut self) -> u64 {
        let n = self.next_uid;
        self.next_uid += 1;
        n
    }

    pub fn get(&self, storage: &Storage, namespace: &str, name: &str) -> Option<&Arc<Value>> {
        self.collections
            .get(storage)?
            .get(&(namespace.to_string(), name.to_string()))
    }

    /// The objects of a collection in key order, in one namespace or all.
    pub fn list<'a>(
        &'a self,
        storage: &Storage,
        namespace: Option<&'a str>,
    ) -> Box<dyn Iterator<Item = &'a Arc<Value>> + 'a> {
        let Some(collection) = self.collections.get(storage) else {
            return Box::new(std::iter::empty());
        };
        match namespace {
            Some(ns) => Box::new(
                collection
                    .range((ns.to_string(), String::new())..)
                    .take_while(move |((n, _), _)| n == ns)
                    .map(|(_, v)| v),
            ),
            None => Box::new(collection.values()),
        }
    }

    /// Every collection name.
    pub fn storages(&self) -> Vec<Storage> {
        self.collections.keys().cloned().collect()
    }

    /// Objects whose ownerReferences name `uid`.
    pub fn dependents_of(&self, uid: &str) -> Vec<(Storage, ObjKey)> {
        self.dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The pods controlled by the object of `uid`.
    pub fn controlled_pods(&self, uid: &str) -> PodCounts {
        self.controlled.get(uid).copied().unwrap_or_default()
    }

    /// Stores `object` (keyed by its metadata) with a new resourceVersion.
    pub fn put(&mut self, storage: &Storage, mut object: Value) -> Arc<Value> {
        let version = self.next_version;
        self.next_version += 1;
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("resourceVersion".into(), json!(version.to_string()));
        }
        let key = key_of(&object);
        let object = Arc::new(object);
        let previous = self
            .collections
            .entry(storage.clone())
            .or_default()
            .insert(key.clone(), object.clone());
        self.index(storage, &key, previous.as_deref(), Some(&object));
        let event = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(storage, key, event, object.clone(), previous);
        object
    }

    /// Removes an object, recording its deletion with a new resourceVersion.
    pub fn remove(&mut self, storage: &Storage, namespace: &str, name: &str) -> Option<Arc<Value>> {
        let key = (namespace.to_string(), name.to_string());
        let previous = self.collections.get_mut(storage)?.remove(&key)?;
        self.index(storage, &key, Some(&previous), None);
        let version = self.next_version;
        self.next_version += 1;
        let mut object = (*previous).clone();
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("resourceVersion".into(), json!(version.to_string()));
        }
        let object = Arc::new(object);
        self.record(
            storage,
            key,
            EventType::Deleted,
            object.clone(),
            Some(previous),
        );
        Some(object)
    }

    fn index(&mut self, storage: &Storage, key: &ObjKey, old: Option<&Value>, new: Option<&Value>) {
        let entry = (storage.clone(), key.clone());
        for uid in old.map(owner_uids).unwrap_or_default() {
            if let Some(set) = self.dependents.get_mut(&uid) {
                set.remove(&entry);
                if set.is_empty() {
                    self.dependents.remove(&uid);
                }
            }
        }
        for uid in new.map(owner_uids).unwrap_or_default() {
            self.dependents
                .entry(uid)
                .or_default()
                .insert(entry.clone());
        }
        if storage.0.is_empty() && storage.1 == "pods" {
            if let Some(old) = old {
                self.count_pod(old, -1);
            }
            if let Some(new) = new {
                self.count_pod(new, 1);
            }
        }
    }

    /// Adds (`sign` 1) or takes away (-1) `pod` from its controller's counts.
    fn count_pod(&mut self, pod: &Value, sign: i64) {
        let Some(uid) = meta::controller_uid(pod) else {
            return;
        };
        if !meta::is_active_pod(pod) {
            return;
        }
        let counts = self.controlled.entry(uid.to_string()).or_default();
        counts.active += sign;
        if meta::is_pod_ready(pod) {
            counts.ready += sign;
        }
        if *counts == PodCounts::default() {
            self.controlled.remove(uid);
        }
    }

    fn record(
        &mut self,
        storage: &Storage,
        key: ObjKey,
        event: EventType,
        object: Arc<Value>,
        previous: Option<Arc<Value>>,
    ) {
        let change = Change {
            resource_version: self.next_version - 1,
            event,
            storage: Arc::new(storage.clone()),
            namespace: key.0,
            name: key.1,
            object,
            previous,
        };
        self.pending.push(change.clone());
        self.history.push_back(change);
        while self.history.len() > self.history_limit {
            self.history.pop_front();
        }
    }

    /// Changes the in-server controllers have not seen yet.
    pub fn take_pending(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.pending)
    }

    /// The oldest resourceVersion a watch or list can start from.
    fn oldest_servable(&self) -> u64 {
        self.history
            .front()
            .map_or(self.current_version(), |c| c.resource_version - 1)
    }

    /// Changes after `version`, oldest first, or `Expired` when the history
    /// no longer reaches back that far.
    pub fn changes_after(&self, version: u64) -> Result<impl Iterator<Item = &Change>, Expired> {
        let oldest = self.oldest_servable();
        if version < oldest {
            return Err(Expired { oldest });
        }
        let skip = match self.history.front() {
            Some(first) => (version + 1).saturating_sub(first.resource_version) as usize,
            None => 0,
        };
        Ok(self.history.range(skip.min(self.history.len())..))
    }

    /// A collection as it was at `version` (a consistent snapshot for
    /// paginated and exact-version lists).
    pub fn snapshot(
        &self,
        storage: &Storage,
        namespace: Option<&str>,
        version: u64,
    ) -> Result<BTreeMap<ObjKey, Arc<Value>>, Expired> {
        let mut objects: BTreeMap<ObjKey, Arc<Value>> = self
            .list(storage, namespace)
            .map(|o| (key_of(o), o.clone()))
            .collect();
        let later: Vec<&Change> = self
            .changes_after(version)?
            .filter(|c| *c.storage == *storage && namespace.is_none_or(|ns| c.namespace == ns))
            .collect();
        for change in later.into_iter().rev() {
            let key = (change.namespace.clone(), change.name.clone());
            match &change.previous {
                Some(previous) => objects.insert(key, previous.clone()),
                None => objects.remove(&key),
            };
        }
        Ok(objects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, v: u32) -> Value {
        json!({"metadata": {"namespace": "default", "name": name}, "v": v})
    }

    #[test]
    fn controlled_pods_follow_every_write() {
        let mut store = Store::new(100);
        let storage = (String::new(), "pods".to_string());
        let owned = |name: &str, status: Value| {
            json!({
                "metadata": {"namespace": "default", "name": name,
                    "ownerReferences": [{"uid": "rs-1", "controller": true}]},
                "status": status,
            })
        };
        let ready =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
        store.put(&storage, owned("a", json!({"phase": "Pending"})));
        store.put(&storage, owned("b", ready.clone()));
        store.put(&storage, pod("c", 1));
        assert_eq!(
            store.controlled_pods("rs-1"),
            PodCounts {
                active: 2,
                ready: 1
            }
        );
        store.put(&storage, owned("a", ready));
        assert_eq!(
            store.controlled_pods("rs-1"),
            PodCounts {
                active: 2,
                ready: 2
            }
        );
        store.put(&storage, owned("b", json!({"phase": "Succeeded"})));
        assert_eq!(
            store.controlled_pods("rs-1"),
            PodCounts {
                active: 1,
                ready: 1
            }
        );
        store.remove(&storage, "default", "a");
        store.remove(&storage, "default", "b");
        assert_eq!(store.controlled_pods("rs-1"), PodCounts::default());
        assert!(store.controlled.is_empty());
    }

    #[test]
    fn snapshots_undo_later_changes_and_expire_with_the_history() {
        let storage: Storage = (String::new(), "pods".into());
        let mut store = Store::new(4);
        store.put(&storage, pod("a", 1));
        store.put(&storage, pod("b", 1));
        let at = store.current_version();
        store.put(&storage, pod("a", 2));
        store.remove(&storage, "default", "b");
        store.put(&storage, pod("c", 1));
        let snapshot = store.snapshot(&storage, Some("default"), at).unwrap();
        let names: Vec<(&str, u64)> = snapshot
            .values()
            .map(|o| {
                (
                    o["metadata"]["name"].as_str().unwrap(),
                    o["v"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(names, [("a", 1), ("b", 1)]);
        assert_eq!(store.changes_after(at).unwrap().count(), 3);
        store.put(&storage, pod("d", 1));
        store.put(&storage, pod("e", 1));
        assert!(store.snapshot(&storage, None, at).is_err());
        assert!(store.changes_after(at).is_err());
        assert_eq!(
            store
                .changes_after(store.current_version())
                .unwrap()
                .count(),
            0
        );
    }
}
