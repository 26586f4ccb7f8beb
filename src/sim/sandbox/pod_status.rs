//! The pod statuses the stand-ins write: `PodScheduled=False` (reason
//! `Unschedulable`) as kube-scheduler writes it for a pod no node can take,
//! and `Running` with every container ready as a kubelet reports a started
//! pod.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use serde_json::{Value, json};

/// The reason kube-scheduler gives a pod no node can take; the one the
/// provisioner acts on.
pub const UNSCHEDULABLE: &str = "Unschedulable";

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

fn conditions(pod: &Pod) -> &[PodCondition] {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
}

/// Whether the pod already says it is unschedulable with `message`.
pub fn is_marked_unschedulable(pod: &Pod, message: &str) -> bool {
    conditions(pod).iter().any(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some(UNSCHEDULABLE)
            && c.message.as_deref() == Some(message)
    })
}

/// The status patch marking `pod` unschedulable with `message` (its other
/// conditions kept; the transition time kept when it was already
/// unschedulable).
pub fn unschedulable_patch(pod: &Pod, message: &str) -> Value {
    let mut kept: Vec<Value> = Vec::new();
    let mut since = None;
    for condition in conditions(pod) {
        if condition.type_ == "PodScheduled" {
            if condition.status == "False" {
                since = condition
                    .last_transition_time
                    .as_ref()
                    .map(|t| t.0.to_string());
            }
        } else {
            kept.push(json!(condition));
        }
    }
    kept.push(json!({
        "type": "PodScheduled", "status": "False", "reason": UNSCHEDULABLE,
        "message": message, "lastProbeTime": null,
        "lastTransitionTime": since.unwrap_or_else(now),
    }));
    json!({"status": {"phase": "Pending", "conditions": kept}})
}

/// Whether a bound pod still waits for its kubelet to start it.
pub fn waits_to_start(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && matches!(phase, None | Some("Pending"))
}

/// The status patch of a started pod on a node at `host_ip`: `Running`,
/// every container started and ready, init containers completed.
pub fn running_patch(pod: &Pod, host_ip: Option<&str>) -> Value {
    let now = now();
    let spec = pod.spec.clone().unwrap_or_default();
    let condition = |type_: &str| json!({"type": type_, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    let scheduled_since = conditions(pod)
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map_or_else(|| now.clone(), |t| t.0.to_string());
    let containers: Vec<Value> = spec
        .containers
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
                "ready": true, "started": true, "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            })
        })
        .collect();
    let init_containers: Vec<Value> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| {
            json!({
                "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
                "ready": true, "started": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                         "startedAt": now, "finishedAt": now}},
            })
        })
        .collect();
    let mut status = json!({
        "phase": "Running",
        "startTime": now,
        "conditions": [
            condition("PodReadyToStartContainers"),
            condition("Initialized"),
            condition("Ready"),
            condition("ContainersReady"),
            {"type": "PodScheduled", "status": "True", "lastProbeTime": null,
             "lastTransitionTime": scheduled_since},
        ],
        "containerStatuses": containers,
    });
    if !init_containers.is_empty() {
        status["initContainerStatuses"] = json!(init_containers);
    }
    if let Some(ip) = host_ip {
        status["hostIP"] = json!(ip);
        status["hostIPs"] = json!([{"ip": ip}]);
    }
    json!({"status": status})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(conditions: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "default"},
            "spec": {"containers": [{"name": "web", "image": "nginx"}],
                     "initContainers": [{"name": "setup", "image": "busybox"}]},
            "status": {"phase": "Pending", "conditions": conditions}
        }))
        .unwrap()
    }

    #[test]
    fn an_unschedulable_pod_keeps_its_transition_time_while_it_stays_so() {
        let fresh = pod(json!([]));
        assert!(!is_marked_unschedulable(
            &fresh,
            "no nodes available to schedule pods"
        ));
        let patch = unschedulable_patch(&fresh, "no nodes available to schedule pods");
        let condition = &patch["status"]["conditions"][0];
        assert_eq!(condition["reason"], "Unschedulable");
        assert_eq!(condition["status"], "False");

        let marked = pod(
            json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                  "message": "old", "lastTransitionTime": "2026-01-01T00:00:00Z"}]),
        );
        assert!(is_marked_unschedulable(&marked, "old"));
        assert!(!is_marked_unschedulable(&marked, "new"));
        let patch = unschedulable_patch(&marked, "new");
        let conditions = patch["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0]["message"], "new");
        assert_eq!(conditions[0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
    }

    #[test]
    fn a_started_pod_runs_with_every_container_ready() {
        let bound = pod(json!([{"type": "PodScheduled", "status": "True"}]));
        assert!(waits_to_start(&bound));
        let patch = running_patch(&bound, Some("10.0.17.48"));
        let status = &patch["status"];
        assert_eq!(status["phase"], "Running");
        assert_eq!(status["hostIP"], "10.0.17.48");
        assert_eq!(status["containerStatuses"][0]["ready"], true);
        assert_eq!(
            status["initContainerStatuses"][0]["state"]["terminated"]["reason"],
            "Completed"
        );
        let ready: Vec<&str> = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["status"] == "True")
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert!(ready.contains(&"Ready") && ready.contains(&"PodScheduled"));
    }
}
