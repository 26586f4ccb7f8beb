//! Deployment → ReplicaSets.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{live, owned, record, storage, template_hash, write_status};
use crate::State;
use crate::meta;
use crate::write::WriteOptions;

const MANAGER: &str = "deployment-controller";
const HASH_LABEL: &str = "pod-template-hash";
const REVISION: &str = "deployment.kubernetes.io/revision";

fn revision(rs: &Value) -> i64 {
    meta::text(
        rs,
        &format!("/metadata/annotations/{}", REVISION.replace('/', "~1")),
    )
    .parse()
    .unwrap_or(0)
}

/// `maxUnavailable` of a rolling update, resolved against `replicas` (rounded down).
fn max_unavailable(deployment: &Value, replicas: i64) -> i64 {
    if meta::text(deployment, "/spec/strategy/type") == "Recreate" {
        return 0;
    }
    match deployment.pointer("/spec/strategy/rollingUpdate/maxUnavailable") {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<i64>().ok())
            .map_or(0, |p| p * replicas / 100),
        _ => replicas / 4,
    }
}

pub fn reconcile(state: &mut State, namespace: &str, name: &str) {
    let deployments = storage("apps", "deployments");
    let sets = storage("apps", "replicasets");
    let Some(deployment) = live(state, &deployments, namespace, name) else {
        return;
    };
    let replicas = meta::int(&deployment, "/spec/replicas", 1).max(0);
    let template = deployment
        .pointer("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let hash = template_hash(&template);
    let owned_sets = owned(state, &deployment, &sets);
    let current = owned_sets
        .iter()
        .find(|rs| meta::text(rs, &format!("/metadata/labels/{HASH_LABEL}")) == hash)
        .cloned();
    let new_rs = match current {
        Some(rs) => rs,
        None => {
            let next_revision = owned_sets.iter().map(|rs| revision(rs)).max().unwrap_or(0) + 1;
            match create_replica_set(
                state,
                &deployment,
                &template,
                &hash,
                replicas,
                next_revision,
            ) {
                Some(rs) => rs,
                None => return,
            }
        }
    };
    // The current ReplicaSet runs every replica; the others none.
    let paused = deployment.pointer("/spec/paused").and_then(Value::as_bool) == Some(true);
    for rs in owned(state, &deployment, &sets) {
        let desired = if meta::uid(&rs) == meta::uid(&new_rs) {
            replicas
        } else {
            0
        };
        let current = meta::int(&rs, "/spec/replicas", 1);
        if !paused && current != desired {
            let mut scaled = (*rs).clone();
            scaled["spec"]["replicas"] = json!(desired);
            state.update_quietly(&sets, scaled, "", MANAGER);
            let direction = if desired > current { "up" } else { "down" };
            let message = format!(
                "Scaled {direction} replica set {} from {current} to {desired}",
                meta::name(&rs)
            );
            record(
                state,
                &deployment,
                "Normal",
                "ScalingReplicaSet",
                &message,
                MANAGER,
            );
        }
    }
    clean_up_history(state, &deployment, &new_rs);
    // The Deployment carries its current revision.
    let revision_text = revision(&new_rs).to_string();
    let mut deployment = match live(state, &deployments, namespace, name) {
        Some(d) => d,
        None => return,
    };
    let annotation = format!("/metadata/annotations/{}", REVISION.replace('/', "~1"));
    if meta::text(&deployment, &annotation) != revision_text {
        let mut annotated = (*deployment).clone();
        let metadata = meta::metadata_mut(&mut annotated);
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        annotations[REVISION] = json!(revision_text);
        state.update_quietly(&deployments, annotated, "", MANAGER);
        deployment = match live(state, &deployments, namespace, name) {
            Some(d) => d,
            None => return,
        };
    }
    write_status(
        state,
        &deployments,
        &deployment,
        status(state, &deployment, replicas),
        MANAGER,
    );
}

fn create_replica_set(
    state: &mut State,
    deployment: &Value,
    template: &Value,
    hash: &str,
    replicas: i64,
    revision: i64,
) -> Option<Arc<Value>> {
    let def = state.registry.lookup("apps", "v1", "replicasets")?;
    let mut template = template.clone();
    if !template
        .pointer("/metadata/labels")
        .is_some_and(Value::is_object)
    {
        template["metadata"]["labels"] = json!({});
    }
    template["metadata"]["labels"][HASH_LABEL] = json!(hash);
    let mut selector = deployment
        .pointer("/spec/selector")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if !selector.get("matchLabels").is_some_and(Value::is_object) {
        selector["matchLabels"] = json!({});
    }
    selector["matchLabels"][HASH_LABEL] = json!(hash);
    let rs = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": format!("{}-{hash}", meta::name(deployment)),
            "labels": template["metadata"]["labels"],
            "annotations": {
                REVISION: revision.to_string(),
                "deployment.kubernetes.io/desired-replicas": replicas.to_string(),
                "deployment.kubernetes.io/max-replicas": replicas.to_string(),
            },
            "ownerReferences": [meta::controller_ref(deployment)],
        },
        "spec": {
            "replicas": replicas,
            "minReadySeconds": deployment.pointer("/spec/minReadySeconds").cloned().unwrap_or(json!(0)),
            "selector": selector,
            "template": template,
        },
    });
    match state.create(
        &def,
        meta::namespace(deployment),
        rs,
        &WriteOptions::controller(MANAGER),
    ) {
        Ok(rs) => {
            let message = format!(
                "Scaled up replica set {} from 0 to {replicas}",
                meta::name(&rs)
            );
            record(
                state,
                deployment,
                "Normal",
                "ScalingReplicaSet",
                &message,
                MANAGER,
            );
            Some(rs)
        }
        Err(e) => {
            tracing::warn!(error = %e.message, "API server double: could not create a ReplicaSet");
            None
        }
    }
}

/// Deletes the oldest scaled-down ReplicaSets beyond `revisionHistoryLimit`.
fn clean_up_history(state: &mut State, deployment: &Value, current: &Value) {
    let sets = storage("apps", "replicasets");
    let limit = meta::int(deployment, "/spec/revisionHistoryLimit", 10).max(0) as usize;
    let mut old: Vec<Arc<Value>> = owned(state, deployment, &sets)
        .into_iter()
        .filter(|rs| meta::uid(rs) != meta::uid(current))
        .filter(|rs| {
            meta::int(rs, "/spec/replicas", 1) == 0 && meta::int(rs, "/status/replicas", 0) == 0
        })
        .collect();
    if old.len() <= limit {
        return;
    }
    old.sort_by_key(|rs| revision(rs));
    let excess = old.len() - limit;
    for rs in old.iter().take(excess) {
        state.delete_quietly(&sets, meta::namespace(rs), meta::name(rs));
    }
}

fn status(state: &State, deployment: &Value, replicas: i64) -> Value {
    let sets = storage("apps", "replicasets");
    let hash = template_hash(deployment.pointer("/spec/template").unwrap_or(&Value::Null));
    let (mut total, mut ready, mut updated, mut new_name) = (0, 0, 0, String::new());
    for rs in owned(state, deployment, &sets) {
        let rs_replicas = meta::int(&rs, "/status/replicas", 0);
        total += rs_replicas;
        ready += meta::int(&rs, "/status/readyReplicas", 0);
        if meta::text(&rs, &format!("/metadata/labels/{HASH_LABEL}")) == hash {
            updated = rs_replicas;
            new_name = meta::name(&rs).to_string();
        }
    }
    let available = ready;
    let now = meta::now();
    let minimum = available >= replicas - max_unavailable(deployment, replicas);
    let (available_status, available_reason, available_message) = if minimum {
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        (
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    let complete = updated == replicas && available == replicas && total == replicas;
    let (progress_reason, progress_message) = if complete {
        (
            "NewReplicaSetAvailable",
            format!("ReplicaSet {new_name:?} has successfully progressed."),
        )
    } else {
        (
            "ReplicaSetUpdated",
            format!("ReplicaSet {new_name:?} is progressing."),
        )
    };
    let mut with_conditions =
        json!({"status": deployment.get("status").cloned().unwrap_or(json!({}))});
    meta::set_condition(
        &mut with_conditions,
        json!({"type": "Available", "status": available_status, "reason": available_reason,
               "message": available_message, "lastUpdateTime": now, "lastTransitionTime": now}),
    );
    meta::set_condition(
        &mut with_conditions,
        json!({"type": "Progressing", "status": "True", "reason": progress_reason,
               "message": progress_message, "lastUpdateTime": now, "lastTransitionTime": now}),
    );
    let mut status = json!({
        "observedGeneration": meta::int(deployment, "/metadata/generation", 1),
        "replicas": total,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available,
        "conditions": with_conditions["status"]["conditions"],
    });
    if replicas - available > 0 {
        status["unavailableReplicas"] = json!(replicas - available);
    }
    status
}
