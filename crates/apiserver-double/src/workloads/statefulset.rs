//! StatefulSet → pods `<name>-<ordinal>` and their volume claims.

use serde_json::{Value, json};

use super::{counts, create_pod, live, owned, pods, record, storage, template_hash, write_status};
use crate::State;
use crate::meta;
use crate::write::WriteOptions;

const MANAGER: &str = "statefulset-controller";

/// The ordinal of a pod named `<set>-<n>`.
fn ordinal(set: &str, pod: &str) -> Option<i64> {
    pod.strip_prefix(set)?.strip_prefix('-')?.parse().ok()
}

pub fn reconcile(state: &mut State, namespace: &str, name: &str) {
    let sets = storage("apps", "statefulsets");
    let Some(set) = live(state, &sets, namespace, name) else {
        return;
    };
    let replicas = meta::int(&set, "/spec/replicas", 1).max(0);
    let template = set
        .pointer("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let revision = format!("{name}-{}", template_hash(&template));
    let existing = owned(state, &set, &pods());
    for i in 0..replicas {
        let pod_name = format!("{name}-{i}");
        if existing.iter().any(|p| meta::name(p) == pod_name) {
            continue;
        }
        if state.store.get(&pods(), namespace, &pod_name).is_some() {
            continue; // Taken by another pod; the real controller waits too.
        }
        let mut pod_template = template.clone();
        let claims = ensure_claims(state, &set, &pod_name);
        if let Some(spec) = pod_template.get_mut("spec").filter(|s| s.is_object()) {
            spec["hostname"] = json!(pod_name);
            if let Some(service) = set.pointer("/spec/serviceName") {
                spec["subdomain"] = service.clone();
            }
            if !claims.is_empty() {
                let mut volumes = spec
                    .get("volumes")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                volumes.extend(claims);
                spec["volumes"] = Value::Array(volumes);
            }
        }
        let labels = [
            ("statefulset.kubernetes.io/pod-name", pod_name.clone()),
            ("apps.kubernetes.io/pod-index", i.to_string()),
            ("controller-revision-hash", revision.clone()),
        ];
        if create_pod(
            state,
            &set,
            &pod_template,
            Some(&pod_name),
            &labels,
            MANAGER,
        )
        .is_some()
        {
            let message = format!("create Pod {pod_name} in StatefulSet {name} successful");
            record(state, &set, "Normal", "SuccessfulCreate", &message, MANAGER);
        }
    }
    let mut extra: Vec<(i64, String)> = existing
        .iter()
        .filter(|p| !meta::is_being_deleted(p))
        .filter_map(|p| ordinal(name, meta::name(p)).map(|o| (o, meta::name(p).to_string())))
        .filter(|(o, _)| *o >= replicas)
        .collect();
    extra.sort_by_key(|(o, _)| std::cmp::Reverse(*o));
    for (_, pod) in extra {
        state.delete_quietly(&pods(), namespace, &pod);
        let message = format!("delete Pod {pod} in StatefulSet {name} successful");
        record(state, &set, "Normal", "SuccessfulDelete", &message, MANAGER);
    }
    let (count, ready) = counts(&owned(state, &set, &pods()));
    let status = json!({
        "observedGeneration": meta::int(&set, "/metadata/generation", 1),
        "replicas": count,
        "readyReplicas": ready,
        "currentReplicas": count,
        "updatedReplicas": count,
        "availableReplicas": ready,
        "currentRevision": revision,
        "updateRevision": revision,
        "collisionCount": 0,
    });
    let Some(set) = live(state, &sets, namespace, name) else {
        return;
    };
    write_status(state, &sets, &set, status, MANAGER);
}

/// Creates the claims of `pod` from the volume claim templates (kept when
/// the pod goes, as the default retention policy says); returns the pod
/// volumes that mount them.
fn ensure_claims(state: &mut State, set: &Value, pod: &str) -> Vec<Value> {
    let claims = storage("", "persistentvolumeclaims");
    let Some(def) = state.registry.by_storage(&claims) else {
        return Vec::new();
    };
    let namespace = meta::namespace(set).to_string();
    let templates = set
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut volumes = Vec::new();
    for template in templates {
        let template_name = meta::name(&template).to_string();
        let claim_name = format!("{template_name}-{pod}");
        if state.store.get(&claims, &namespace, &claim_name).is_none() {
            let mut labels = set
                .pointer("/spec/selector/matchLabels")
                .cloned()
                .unwrap_or_else(|| json!({}));
            if labels.is_object() {
                labels["statefulset.kubernetes.io/pod-name"] = json!(pod);
            }
            let claim = json!({
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim_name, "labels": labels},
                "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
            });
            if let Err(e) =
                state.create(&def, &namespace, claim, &WriteOptions::controller(MANAGER))
            {
                tracing::warn!(error = %e.message, "API server double: could not create claim {claim_name}");
            }
        }
        volumes.push(
            json!({"name": template_name, "persistentVolumeClaim": {"claimName": claim_name}}),
        );
    }
    volumes
}
