//! Garbage collection: dependents of a removed owner are deleted (or lose
//! the dangling reference when another owner remains), foreground
//! deletions finish once their dependents are gone, a terminating
//! Namespace is emptied and then removed, and pods bound to a removed Node
//! are deleted (the pod garbage collector's orphan rule).

use serde_json::{Value, json};

use super::State;
use super::meta;
use super::store::{Change, Storage};
use super::write::{DeleteOptions, WriteOptions};

const MANAGER: &str = "generic-garbage-collector";

impl State {
    /// Deletes an object by storage key, logging (not failing) on error:
    /// the control loops have no caller to answer.
    pub fn delete_quietly(&mut self, storage: &Storage, namespace: &str, name: &str) {
        let Some(def) = self.registry.by_storage(storage) else {
            return;
        };
        if let Err(e) = self.delete(&def, namespace, name, &DeleteOptions::default()) {
            tracing::debug!(error = %e.message, "API server double: deleting {name} failed");
        }
    }

    /// Replaces an object by storage key, logging on error.
    pub fn update_quietly(
        &mut self,
        storage: &Storage,
        object: Value,
        subresource: &str,
        manager: &str,
    ) {
        let Some(def) = self.registry.by_storage(storage) else {
            return;
        };
        let (namespace, name) = (
            meta::namespace(&object).to_string(),
            meta::name(&object).to_string(),
        );
        let options = WriteOptions::controller(manager);
        if let Err(e) = self.update(&def, &namespace, &name, object, subresource, &options) {
            tracing::debug!(error = %e.message, "API server double: {manager} could not update {name}");
        }
    }

    /// Whether the owner an owner reference names exists (same uid).
    fn owner_exists(&self, reference: &meta::OwnerRef, dependent_namespace: &str) -> bool {
        let Some(def) = self
            .registry
            .by_kind(&reference.api_version, &reference.kind)
        else {
            return false;
        };
        let namespace = if def.namespaced {
            dependent_namespace
        } else {
            ""
        };
        self.store
            .get(&def.storage, namespace, &reference.name)
            .is_some_and(|o| meta::uid(o) == reference.uid)
    }
}

/// Reacts to the removal of an object: its dependents go, or lose the reference.
pub fn collect(state: &mut State, change: &Change) {
    let uid = meta::uid(&change.object).to_string();
    if uid.is_empty() {
        return;
    }
    for (storage, (namespace, name)) in state.store.dependents_of(&uid) {
        let Some(dependent) = state.store.get(&storage, &namespace, &name).cloned() else {
            continue;
        };
        let others: Vec<meta::OwnerRef> = meta::owner_refs(&dependent)
            .into_iter()
            .filter(|r| r.uid != uid)
            .collect();
        if others.iter().any(|r| state.owner_exists(r, &namespace)) {
            let mut updated = (*dependent).clone();
            if let Some(refs) = updated
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| meta::text(r, "/uid") != uid);
            }
            state.update_quietly(&storage, updated, "", MANAGER);
        } else if !meta::is_being_deleted(&dependent) {
            state.delete_quietly(&storage, &namespace, &name);
        }
    }
}

/// Deletes the dependents of an owner in foreground deletion, and lets the
/// owner go once none is left.
pub fn finish_foreground(state: &mut State, storage: &Storage, namespace: &str, name: &str) {
    let Some(owner) = state.store.get(storage, namespace, name).cloned() else {
        return;
    };
    if !meta::is_being_deleted(&owner)
        || !meta::finalizers(&owner)
            .iter()
            .any(|f| f == "foregroundDeletion")
    {
        return;
    }
    let dependents = state.store.dependents_of(meta::uid(&owner));
    for (dep_storage, (dep_namespace, dep_name)) in &dependents {
        let waiting = state
            .store
            .get(dep_storage, dep_namespace, dep_name)
            .is_some_and(|d| meta::is_being_deleted(d));
        if !waiting {
            state.delete_quietly(dep_storage, dep_namespace, dep_name);
        }
    }
    if state.store.dependents_of(meta::uid(&owner)).is_empty() {
        let mut released = (*owner).clone();
        let finalizers: Vec<String> = meta::finalizers(&owner)
            .into_iter()
            .filter(|f| f != "foregroundDeletion")
            .collect();
        meta::metadata_mut(&mut released).insert("finalizers".into(), json!(finalizers));
        state.update_quietly(storage, released, "", MANAGER);
    }
}

/// Deletes everything in a terminating namespace; removes the namespace
/// when it is empty.
pub fn finalize_namespace(state: &mut State, namespace: &str) {
    let namespaces: Storage = (String::new(), "namespaces".into());
    let Some(ns) = state.store.get(&namespaces, "", namespace).cloned() else {
        return;
    };
    if !meta::is_being_deleted(&ns) {
        return;
    }
    let mut remaining = 0;
    for storage in state.store.storages() {
        let names: Vec<(String, bool)> = state
            .store
            .list(&storage, Some(namespace))
            .map(|o| (meta::name(o).to_string(), meta::is_being_deleted(o)))
            .collect();
        for (name, deleting) in names {
            if !deleting {
                state.delete_quietly(&storage, namespace, &name);
            }
            if state.store.get(&storage, namespace, &name).is_some() {
                remaining += 1;
            }
        }
    }
    if remaining == 0 {
        let mut finalized = (*ns).clone();
        finalized["spec"]["finalizers"] = json!([]);
        state.update_quietly(&namespaces, finalized, "", "namespace-controller");
    }
}

/// Deletes the pods bound to a node that no longer exists.
pub fn delete_pods_of_node(state: &mut State, node: &str) {
    let pods: Storage = (String::new(), "pods".into());
    let bound: Vec<(String, String)> = state
        .store
        .list(&pods, None)
        .filter(|p| meta::text(p, "/spec/nodeName") == node)
        .map(|p| (meta::namespace(p).to_string(), meta::name(p).to_string()))
        .collect();
    for (namespace, name) in bound {
        state.delete_quietly(&pods, &namespace, &name);
    }
}
