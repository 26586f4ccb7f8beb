//! A small workload controller inside the double, so that `kubectl apply`
//! of a Deployment yields pods to provision for:
//!
//! - Deployment → one ReplicaSet per pod template (named by the template's
//!   hash); the current one gets `spec.replicas`, older ones are scaled to
//!   0 at once (no surge or unavailability budget), and the oldest beyond
//!   `revisionHistoryLimit` are deleted;
//! - ReplicaSet → pods from its template (`<rs>-<suffix>`); scaling down
//!   deletes unbound, then pending, then unready, then the newest pods first;
//! - StatefulSet → pods `<name>-0 … <name>-N-1` (created together, not one
//!   by one) and a PersistentVolumeClaim per volume claim template; scaling
//!   down deletes the highest ordinals;
//! - Job → up to `parallelism` pods until `completions` pods succeed (or,
//!   without completions, one does); more than `backoffLimit` failed pods
//!   fail the Job;
//! - DaemonSet → one pod per Node that matches its node selector and
//!   required node affinity and whose taints it tolerates, pinned with node
//!   affinity on `metadata.name` as the real controller does.
//!
//! Pods are created `Pending` without `spec.nodeName`: binding them is the
//! scheduler's (or the sandbox binder's) job, and their phase and readiness
//! the kubelet's; the controllers count what those report. Status fields
//! (`replicas`, `readyReplicas`, conditions, …) follow the pods. Every
//! object created carries a controller owner reference, so deleting the
//! owner garbage-collects it. Not implemented: rolling-update pacing,
//! `minReadySeconds`, pod adoption and orphan release, CronJobs, indexed
//! Jobs, Pod failure policies, revision history (`kubectl rollout undo`).

mod daemonset;
mod deployment;
mod job;
mod replicaset;
mod statefulset;

use std::sync::Arc;

use serde_json::{Value, json};

use super::State;
use super::meta;
use super::store::Storage;
use super::write::WriteOptions;

/// Reconciles workload `plural` `namespace/name`.
pub fn reconcile(state: &mut State, plural: &str, namespace: &str, name: &str) {
    match plural {
        "deployments" => deployment::reconcile(state, namespace, name),
        "replicasets" => replicaset::reconcile(state, namespace, name),
        "statefulsets" => statefulset::reconcile(state, namespace, name),
        "jobs" => job::reconcile(state, namespace, name),
        "daemonsets" => daemonset::reconcile(state, namespace, name),
        _ => {}
    }
}

pub(super) fn storage(group: &str, plural: &str) -> Storage {
    (group.to_string(), plural.to_string())
}

pub(super) fn pods() -> Storage {
    storage("", "pods")
}

/// The live object `namespace/name` of `storage`, unless it is being deleted.
pub(super) fn live(
    state: &State,
    storage: &Storage,
    namespace: &str,
    name: &str,
) -> Option<Arc<Value>> {
    state
        .store
        .get(storage, namespace, name)
        .filter(|o| !meta::is_being_deleted(o))
        .cloned()
}

/// Objects of `storage` whose controller reference is `owner`.
pub(super) fn owned(state: &State, owner: &Value, storage: &Storage) -> Vec<Arc<Value>> {
    let uid = meta::uid(owner);
    state
        .store
        .dependents_of(uid)
        .into_iter()
        .filter(|(s, _)| s == storage)
        .filter_map(|(s, (ns, name))| state.store.get(&s, &ns, &name).cloned())
        .filter(|o| meta::controller_uid(o) == Some(uid))
        .collect()
}

/// Pods counted as running replicas: not terminal and not being deleted.
pub(super) fn is_active(pod: &Value) -> bool {
    meta::is_active_pod(pod)
}

/// Creates a pod from `template` owned by `owner`; `name` is exact when
/// given, else generated from `owner`'s name. Returns the pod's name.
pub(super) fn create_pod(
    state: &mut State,
    owner: &Value,
    template: &Value,
    name: Option<&str>,
    extra_labels: &[(&str, String)],
    manager: &str,
) -> Option<String> {
    let def = state.registry.by_storage(&pods())?;
    let mut metadata = template
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if !metadata.is_object() {
        metadata = json!({});
    }
    if !metadata.get("labels").is_some_and(Value::is_object) {
        metadata["labels"] = json!({});
    }
    for (key, value) in extra_labels {
        metadata["labels"][*key] = json!(value);
    }
    match name {
        Some(name) => metadata["name"] = json!(name),
        None => metadata["generateName"] = json!(format!("{}-", meta::name(owner))),
    }
    metadata["ownerReferences"] = json!([meta::controller_ref(owner)]);
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    });
    let namespace = meta::namespace(owner).to_string();
    match state.create(&def, &namespace, pod, &WriteOptions::controller(manager)) {
        Ok(pod) => Some(meta::name(&pod).to_string()),
        Err(e) => {
            tracing::warn!(error = %e.message, "API server double: {manager} could not create a pod");
            record(
                state,
                owner,
                "Warning",
                "FailedCreate",
                &format!("Error creating: {}", e.message),
                manager,
            );
            None
        }
    }
}

/// Records a core Event about `object` from controller `component`, as
/// the real controllers do (`kubectl describe` shows them).
pub(super) fn record(
    state: &mut State,
    object: &Value,
    type_: &str,
    reason: &str,
    message: &str,
    component: &str,
) {
    let events = storage("", "events");
    let Some(def) = state.registry.by_storage(&events) else {
        return;
    };
    let namespace = match meta::namespace(object) {
        "" => "default".to_string(),
        ns => ns.to_string(),
    };
    let now = meta::now();
    let serial = state.store.next_serial();
    let event = json!({
        "metadata": {"name": format!("{}.{serial:016x}", meta::name(object))},
        "involvedObject": {
            "apiVersion": meta::text(object, "/apiVersion"), "kind": meta::text(object, "/kind"),
            "name": meta::name(object), "namespace": meta::namespace(object), "uid": meta::uid(object),
            "resourceVersion": meta::text(object, "/metadata/resourceVersion"),
        },
        "type": type_, "reason": reason, "message": message,
        "source": {"component": component},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        "reportingComponent": component, "reportingInstance": "",
    });
    if let Err(e) = state.create(
        &def,
        &namespace,
        event,
        &WriteOptions::controller(component),
    ) {
        tracing::debug!(error = %e.message, "API server double: event not recorded");
    }
}

/// Deletes a pod owned by `owner` and records it.
pub(super) fn delete_pod(state: &mut State, owner: &Value, pod: &str, manager: &str) {
    state.delete_quietly(&pods(), meta::namespace(owner), pod);
    record(
        state,
        owner,
        "Normal",
        "SuccessfulDelete",
        &format!("Deleted pod: {pod}"),
        manager,
    );
}

/// Writes `status` to a workload through its status subresource when it changed.
pub(super) fn write_status(
    state: &mut State,
    storage: &Storage,
    object: &Value,
    status: Value,
    manager: &str,
) {
    if object.get("status") == Some(&status) {
        return;
    }
    let mut updated = object.clone();
    updated["status"] = status;
    state.update_quietly(storage, updated, "status", manager);
}

/// Counts of active and ready pods.
pub(super) fn counts(pods: &[Arc<Value>]) -> (i64, i64) {
    let active: Vec<&Arc<Value>> = pods.iter().filter(|p| is_active(p)).collect();
    let ready = active.iter().filter(|p| meta::is_pod_ready(p)).count();
    (active.len() as i64, ready as i64)
}

/// A short stable hash of a pod template, in the alphabet of generated names.
pub(super) fn template_hash(template: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let text = template.to_string();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (0..10)
        .map(|_| {
            let c = ALPHABET[(hash % ALPHABET.len() as u64) as usize] as char;
            hash /= ALPHABET.len() as u64;
            c
        })
        .collect()
}
