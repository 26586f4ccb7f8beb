//! ReplicaSet → pods.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{create_pod, delete_pod, is_active, live, owned, pods, record, storage, write_status};
use crate::State;
use crate::meta;

const MANAGER: &str = "replicaset-controller";

/// Deletion order when scaling down: unbound, pending, unready, newest first.
fn deletion_rank(pod: &Value) -> (bool, bool, bool, std::cmp::Reverse<String>) {
    (
        !meta::text(pod, "/spec/nodeName").is_empty(),
        meta::text(pod, "/status/phase") != "Pending",
        meta::is_pod_ready(pod),
        std::cmp::Reverse(meta::text(pod, "/metadata/creationTimestamp").to_string()),
    )
}

pub fn reconcile(state: &mut State, namespace: &str, name: &str) {
    let sets = storage("apps", "replicasets");
    let Some(rs) = live(state, &sets, namespace, name) else {
        return;
    };
    let replicas = meta::int(&rs, "/spec/replicas", 1).max(0);
    let uid = meta::uid(&rs).to_string();
    // The store counts the pods each controller controls at every write:
    // only a scale (or a pod gone) needs the pods themselves.
    if state.store.controlled_pods(&uid).active != replicas {
        scale(state, &rs, replicas);
    }
    let counts = state.store.controlled_pods(&uid);
    let (count, ready) = (counts.active, counts.ready);
    let status = json!({
        "replicas": count,
        "fullyLabeledReplicas": count,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "observedGeneration": meta::int(&rs, "/metadata/generation", 1),
    });
    let Some(rs) = live(state, &sets, namespace, name) else {
        return;
    };
    write_status(state, &sets, &rs, status, MANAGER);
}

/// Creates or deletes pods of `rs` until `replicas` are active.
fn scale(state: &mut State, rs: &Value, replicas: i64) {
    let mut active: Vec<Arc<Value>> = owned(state, rs, &pods())
        .into_iter()
        .filter(|p| is_active(p))
        .collect();
    let diff = replicas - active.len() as i64;
    if diff > 0 {
        let template = rs
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        for _ in 0..diff {
            if let Some(pod) = create_pod(state, rs, &template, None, &[], MANAGER) {
                record(
                    state,
                    rs,
                    "Normal",
                    "SuccessfulCreate",
                    &format!("Created pod: {pod}"),
                    MANAGER,
                );
            }
        }
    }
    if diff < 0 {
        active.sort_by_key(|p| deletion_rank(p));
        for pod in active.iter().take((-diff) as usize) {
            delete_pod(state, rs, meta::name(pod), MANAGER);
        }
    }
}
