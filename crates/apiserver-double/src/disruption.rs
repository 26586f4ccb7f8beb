//! PodDisruptionBudgets: the disruption controller's status computation and
//! the `pods/eviction` subresource, as the real control plane implements
//! them (policy/v1).
//!
//! Status: the pods the selector matches in the PDB's namespace; with an
//! integer `minAvailable`, `expectedPods` is their count and
//! `desiredHealthy` the integer; with `maxUnavailable` or a percentage, the
//! expected count is the sum of the scales of the pods' controllers
//! (Deployment through its ReplicaSet, ReplicaSet, StatefulSet, or any
//! resource with a `scale` subresource) and the percentage rounds up.
//! `currentHealthy` counts Ready pods not being deleted and not recently
//! evicted; `disruptionsAllowed` is `currentHealthy - desiredHealthy`, at
//! least 0 (0 when no pod is expected). A pod whose controller cannot be
//! found fails the sync safe: no disruption allowed.
//!
//! Eviction: terminal, Pending or terminating pods are deleted without
//! checking budgets; several matching budgets are a 500; an unready pod may
//! go when the budget is healthy (or its policy is `AlwaysAllow`); otherwise
//! the budget must allow a disruption (429 `TooManyRequests` when not),
//! which is decremented and recorded in `disruptedPods` before the pod is
//! deleted.

use std::collections::BTreeMap;

use http::StatusCode;
use serde_json::{Value, json};

use super::State;
use super::error::{ApiError, success_status};
use super::meta;
use super::selector::LabelSelector;
use super::store::Storage;
use super::write::DeleteOptions;

/// How long an eviction keeps a pod out of `currentHealthy` if it is not deleted.
const DELETION_TIMEOUT_SECONDS: i64 = 120;
const MAX_DISRUPTED_PODS: usize = 2000;

fn pdbs() -> Storage {
    ("policy".into(), "poddisruptionbudgets".into())
}

fn pods() -> Storage {
    (String::new(), "pods".into())
}

/// An int-or-percent scaled against `total`, rounding up.
fn scaled(value: &Value, total: i64) -> Result<i64, String> {
    match value {
        Value::Number(n) => n.as_i64().ok_or_else(|| format!("invalid value {n}")),
        Value::String(s) => {
            let percent: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            Ok((percent * total + 99) / 100)
        }
        other => Err(format!("invalid value {other}")),
    }
}

impl State {
    /// The desired scale of the controller of `pod`, with the controller's uid.
    fn controller_scale(&self, pod: &Value) -> Option<(String, i64)> {
        let owner = meta::controller_of(pod)?;
        let namespace = meta::namespace(pod);
        let def = self.registry.by_kind(&owner.api_version, &owner.kind)?;
        let scale = def.scale.as_ref()?;
        let ns = if def.namespaced { namespace } else { "" };
        let controller = self.store.get(&def.storage, ns, &owner.name)?;
        if meta::uid(controller) != owner.uid {
            return None;
        }
        // A ReplicaSet owned by a Deployment counts as the Deployment.
        if owner.kind == "ReplicaSet"
            && let Some(scale) = self.controller_scale(controller)
        {
            return Some(scale);
        }
        let pointer = scale.spec_replicas.replace('.', "/");
        Some((owner.uid, meta::int(controller, &pointer, 1)))
    }
}

/// Recomputes the status of PDB `namespace/name`.
pub fn sync(state: &mut State, namespace: &str, name: &str) {
    let Some(pdb) = state.store.get(&pdbs(), namespace, name).cloned() else {
        return;
    };
    let selector = LabelSelector::from_object(pdb.pointer("/spec/selector"));
    let matched: Vec<Value> = match &selector {
        Ok(selector) => state
            .store
            .list(&pods(), Some(namespace))
            .filter(|p| selector.matches(p))
            .map(|p| (**p).clone())
            .collect(),
        Err(_) => Vec::new(),
    };
    let generation = meta::int(&pdb, "/metadata/generation", 1);
    let expected = match &selector {
        Ok(_) => expected_count(state, &pdb, &matched),
        Err(e) => Err(e.clone()),
    };
    let mut status = pdb.get("status").cloned().unwrap_or_else(|| json!({}));
    let (expected_pods, desired_healthy) = match expected {
        Ok(counts) => counts,
        Err(message) => {
            status["disruptionsAllowed"] = json!(0);
            let mut updated = (*pdb).clone();
            updated["status"] = status;
            meta::set_condition(
                &mut updated,
                json!({
                    "type": "DisruptionAllowed", "status": "False", "reason": "SyncFailed",
                    "message": message, "observedGeneration": generation, "lastTransitionTime": meta::now(),
                }),
            );
            state.update_quietly(&pdbs(), updated, "status", "disruption-controller");
            return;
        }
    };
    let mut disrupted = BTreeMap::new();
    if let Some(previous) = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
    {
        for pod in &matched {
            if meta::is_being_deleted(pod) {
                continue;
            }
            let pod_name = meta::name(pod);
            if let Some(time) = previous.get(pod_name).and_then(Value::as_str) {
                let age = meta::age_seconds(time).unwrap_or(0);
                if age < DELETION_TIMEOUT_SECONDS {
                    disrupted.insert(pod_name.to_string(), json!(time));
                }
            }
        }
    }
    let current_healthy = matched
        .iter()
        .filter(|p| {
            !meta::is_being_deleted(p)
                && !disrupted.contains_key(meta::name(p))
                && meta::is_pod_ready(p)
        })
        .count() as i64;
    let mut allowed = current_healthy - desired_healthy;
    if expected_pods <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let mut updated = (*pdb).clone();
    let conditions = status.get("conditions").cloned().unwrap_or(json!([]));
    updated["status"] = json!({
        "currentHealthy": current_healthy,
        "desiredHealthy": desired_healthy,
        "expectedPods": expected_pods,
        "disruptionsAllowed": allowed,
        "observedGeneration": generation,
        "conditions": conditions,
    });
    if !disrupted.is_empty() {
        updated["status"]["disruptedPods"] = Value::Object(disrupted.into_iter().collect());
    }
    set_allowed_condition(&mut updated);
    state.update_quietly(&pdbs(), updated, "status", "disruption-controller");
}

/// `(expectedPods, desiredHealthy)` of a PDB over its matched pods.
fn expected_count(state: &State, pdb: &Value, matched: &[Value]) -> Result<(i64, i64), String> {
    let scale = || -> Result<i64, String> {
        let mut controllers = BTreeMap::new();
        for pod in matched {
            if meta::controller_of(pod).is_none() {
                continue; // Unmanaged pods are reported, not counted.
            }
            let (uid, replicas) = state
                .controller_scale(pod)
                .ok_or_else(|| format!("found no controllers for pod {:?}", meta::name(pod)))?;
            controllers.insert(uid, replicas);
        }
        Ok(controllers.values().sum())
    };
    if let Some(max_unavailable) = pdb.pointer("/spec/maxUnavailable") {
        let expected = scale()?;
        let unavailable = scaled(max_unavailable, expected)?;
        return Ok((expected, (expected - unavailable).max(0)));
    }
    match pdb.pointer("/spec/minAvailable") {
        Some(Value::Number(n)) => Ok((matched.len() as i64, n.as_i64().unwrap_or(0))),
        Some(percent @ Value::String(_)) => {
            let expected = scale()?;
            Ok((expected, scaled(percent, expected)?))
        }
        _ => Ok((0, 0)),
    }
}

/// `DisruptionAllowed`: True (SufficientPods) when a disruption is allowed.
fn set_allowed_condition(pdb: &mut Value) {
    let allowed = meta::int(pdb, "/status/disruptionsAllowed", 0) > 0;
    let generation = meta::int(pdb, "/status/observedGeneration", 0);
    let (status, reason) = if allowed {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    meta::set_condition(
        pdb,
        json!({
            "type": "DisruptionAllowed", "status": status, "reason": reason, "message": "",
            "observedGeneration": generation, "lastTransitionTime": meta::now(),
        }),
    );
}

/// Whether an eviction of `pod` may skip the budgets.
fn can_ignore_pdb(pod: &Value) -> bool {
    matches!(
        meta::text(pod, "/status/phase"),
        "Succeeded" | "Failed" | "Pending"
    ) || meta::is_being_deleted(pod)
}

/// `POST pods/{name}/eviction` with a policy/v1 Eviction body.
pub fn evict(
    state: &mut State,
    namespace: &str,
    name: &str,
    eviction: &Value,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let pods_def = state
        .registry
        .by_storage(&pods())
        .ok_or_else(ApiError::no_route)?;
    let given = meta::name(eviction);
    if given != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let pod = state
        .store
        .get(&pods(), namespace, name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&pods_def, name))?;
    let mut delete = DeleteOptions {
        dry_run: dry_run
            || eviction
                .pointer("/deleteOptions/dryRun")
                .and_then(Value::as_array)
                .is_some_and(|d| !d.is_empty()),
        uid: eviction
            .pointer("/deleteOptions/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string),
        resource_version: eviction
            .pointer("/deleteOptions/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string),
        ..DeleteOptions::default()
    };
    if !can_ignore_pdb(&pod) {
        let matching: Vec<Value> = state
            .store
            .list(&pdbs(), Some(namespace))
            .filter(|pdb| {
                LabelSelector::from_object(pdb.pointer("/spec/selector"))
                    .is_ok_and(|s| !s.is_empty() && s.matches(&pod))
            })
            .map(|pdb| (**pdb).clone())
            .collect();
        if matching.len() > 1 {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        if let Some(pdb) = matching.into_iter().next() {
            let current = meta::int(&pdb, "/status/currentHealthy", 0);
            let desired = meta::int(&pdb, "/status/desiredHealthy", 0);
            let always_allow =
                meta::text(&pdb, "/spec/unhealthyPodEvictionPolicy") == "AlwaysAllow";
            let unhealthy_may_go =
                !meta::is_pod_ready(&pod) && (always_allow || (current >= desired && desired > 0));
            if unhealthy_may_go {
                if delete.resource_version.is_none() {
                    delete.resource_version =
                        Some(meta::text(&pod, "/metadata/resourceVersion").to_string());
                }
            } else {
                check_and_decrement(state, &pdb, name, delete.dry_run)?;
            }
        }
    } else if delete.resource_version.is_none()
        && meta::text(&pod, "/status/phase") == "Pending"
        && !meta::is_being_deleted(&pod)
    {
        // As kube-apiserver: a Pending pod goes only as it was read.
        delete.resource_version = Some(meta::text(&pod, "/metadata/resourceVersion").to_string());
    }
    add_condition_and_delete(state, &pods_def, namespace, name, delete)?;
    let mut status = success_status();
    status["code"] = json!(201);
    Ok(status)
}

/// Marks the pod `DisruptionTarget` (reason `EvictionByEvictionAPI`) and
/// deletes it, as kube-apiserver does: the condition tells the pod's
/// controller (a Job's `podFailurePolicy`, say) why it went. A failed
/// precondition leaves the pod untouched and answers 409.
fn add_condition_and_delete(
    state: &mut State,
    pods_def: &super::resources::ResourceDef,
    namespace: &str,
    name: &str,
    mut delete: DeleteOptions,
) -> Result<(), ApiError> {
    if !delete.dry_run
        && let Some(current) = state.store.get(&pods(), namespace, name).cloned()
        && delete
            .uid
            .as_deref()
            .is_none_or(|uid| uid == meta::uid(&current))
        && delete
            .resource_version
            .as_deref()
            .is_none_or(|version| version == meta::text(&current, "/metadata/resourceVersion"))
    {
        let mut marked = (*current).clone();
        meta::set_condition(
            &mut marked,
            json!({
                "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting", "lastProbeTime": null,
                "lastTransitionTime": meta::now(),
            }),
        );
        let options = super::write::WriteOptions::controller("eviction");
        let updated = state.update(pods_def, namespace, name, marked, "status", &options)?;
        if delete.resource_version.is_some() {
            delete.resource_version =
                Some(meta::text(&updated, "/metadata/resourceVersion").to_string());
        }
    }
    state.delete(pods_def, namespace, name, &delete)?;
    Ok(())
}

fn check_and_decrement(
    state: &mut State,
    pdb: &Value,
    pod: &str,
    dry_run: bool,
) -> Result<(), ApiError> {
    let pdb_def = state
        .registry
        .by_storage(&pdbs())
        .ok_or_else(ApiError::no_route)?;
    let pdb_name = meta::name(pdb).to_string();
    let cause = |message: String| json!({"reason": "DisruptionBudget", "message": message});
    if meta::int(pdb, "/status/observedGeneration", 0) < meta::int(pdb, "/metadata/generation", 1) {
        return Err(ApiError::too_many_requests(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            10,
            vec![cause(format!(
                "The disruption budget {pdb_name} is still being processed by the server."
            ))],
        ));
    }
    let allowed = meta::int(pdb, "/status/disruptionsAllowed", 0);
    if allowed < 0 {
        return Err(ApiError::forbidden(
            &pdb_def,
            &pdb_name,
            "pdb disruptions allowed is negative",
        ));
    }
    let disrupted = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .map_or(0, |d| d.len());
    if disrupted > MAX_DISRUPTED_PODS {
        return Err(ApiError::forbidden(
            &pdb_def,
            &pdb_name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(ApiError::too_many_requests(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            0,
            vec![cause(refusal(pdb, &pdb_name))],
        ));
    }
    if dry_run {
        return Ok(());
    }
    let mut updated = pdb.clone();
    updated["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed - 1 == 0 {
        set_allowed_condition(&mut updated);
    }
    if !updated["status"]
        .get("disruptedPods")
        .is_some_and(Value::is_object)
    {
        updated["status"]["disruptedPods"] = json!({});
    }
    updated["status"]["disruptedPods"][pod] = json!(meta::now());
    let options = super::write::WriteOptions::controller("eviction");
    state.update(
        &pdb_def,
        meta::namespace(pdb),
        &pdb_name,
        updated,
        "status",
        &options,
    )?;
    Ok(())
}

/// Why a budget allowing no disruption refuses, in kube-apiserver's words:
/// a failed sync first (its counts are not to be trusted), then the counts.
fn refusal(pdb: &Value, pdb_name: &str) -> String {
    let desired = meta::int(pdb, "/status/desiredHealthy", 0);
    let current = meta::int(pdb, "/status/currentHealthy", 0);
    let condition = pdb
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| {
            c.iter()
                .find(|c| meta::text(c, "/type") == "DisruptionAllowed")
        });
    let failed =
        |c: &&Value| meta::text(c, "/status") == "False" && !meta::text(c, "/message").is_empty();
    match condition.filter(failed) {
        Some(c) if meta::text(c, "/reason") == "SyncFailed" => format!(
            "The disruption budget {pdb_name} does not allow evicting pods currently because it failed sync: {}",
            meta::text(c, "/message")
        ),
        _ if current <= desired => format!(
            "The disruption budget {pdb_name} needs {desired} healthy pods and has {current} currently"
        ),
        Some(c) => format!(
            "The disruption budget {pdb_name} does not allow evicting pods currently ({}): {}",
            meta::text(c, "/reason"),
            meta::text(c, "/message")
        ),
        None => format!("The disruption budget {pdb_name} does not allow evicting pods currently"),
    }
}

#[cfg(test)]
mod tests {
    use super::scaled;
    use serde_json::json;

    #[test]
    fn percentages_round_up() {
        assert_eq!(scaled(&json!("50%"), 3), Ok(2));
        assert_eq!(scaled(&json!("10%"), 1), Ok(1));
        assert_eq!(scaled(&json!(2), 10), Ok(2));
        assert!(scaled(&json!("x"), 1).is_err());
    }
}
