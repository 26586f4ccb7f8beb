//! ReplicaSet → pods.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    counts, create_pod, delete_pod, is_active, live, owned, pods, record, storage, write_status,
};
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
    let mut active: Vec<Arc<Value>> = owned(state, &rs, &pods())
        .into_iter()
        .filter(|p| is_active(p))
        .collect();
    let diff = replicas - active.len() as i64;
    let template = rs
        .pointer("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    for _ in 0..diff.max(0) {
        if let Some(pod) = create_pod(state, &rs, &template, None, &[], MANAGER) {
            record(
                state,
                &rs,
                "Normal",
                "SuccessfulCreate",
                &format!("Created pod: {pod}"),
                MANAGER,
            );
        }
    }
    if diff < 0 {
        active.sort_by_key(|p| deletion_rank(p));
        for pod in active.iter().take((-diff) as usize) {
            delete_pod(state, &rs, meta::name(pod), MANAGER);
        }
    }
    let (count, ready) = counts(&owned(state, &rs, &pods()));
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
