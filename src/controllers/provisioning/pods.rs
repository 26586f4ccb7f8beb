//! Which pods provisioning acts for (Karpenter's `IsProvisionable`): pods
//! kube-scheduler tried and could not place, that no node will take without
//! a new one.

use k8s_openapi::api::core::v1::Pod;

/// Whether `pod` needs a node that does not exist yet: unbound, not
/// preempting its way onto a node (`status.nominatedNodeName`), marked
/// unschedulable by kube-scheduler (`PodScheduled=False`, reason
/// `Unschedulable`), not held by scheduling gates, not owned by a DaemonSet
/// or a node (static pods), and neither finished nor being deleted.
pub fn is_provisionable(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let unbound = spec.is_none_or(|s| s.node_name.is_none());
    let preempting = status.is_some_and(|s| s.nominated_node_name.is_some());
    let gated = spec.is_some_and(|s| s.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty()));
    let unschedulable = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        });
    let finished = status
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    let owned_by_node_or_daemon_set = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet" || o.kind == "Node");
    unbound
        && !preempting
        && !gated
        && unschedulable
        && !finished
        && !owned_by_node_or_daemon_set
        && pod.metadata.deletion_timestamp.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(extra: serde_json::Value) -> Pod {
        let mut value = json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        });
        json_patch(&mut value, extra);
        serde_json::from_value(value).unwrap()
    }

    fn json_patch(base: &mut serde_json::Value, extra: serde_json::Value) {
        if let (Some(base), serde_json::Value::Object(extra)) = (base.as_object_mut(), extra) {
            for (k, v) in extra {
                match (base.get_mut(&k), v) {
                    (Some(b @ serde_json::Value::Object(_)), v @ serde_json::Value::Object(_)) => {
                        json_patch(b, v)
                    }
                    (_, v) => {
                        base.insert(k, v);
                    }
                }
            }
        }
    }

    #[test]
    fn only_unschedulable_unbound_pods_are_provisioned_for() {
        assert!(is_provisionable(&pod(json!({}))));
        let not = [
            json!({"spec": {"nodeName": "n"}}),
            json!({"status": {"nominatedNodeName": "n"}}),
            json!({"status": {"conditions": []}}),
            json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}}),
            json!({"spec": {"schedulingGates": [{"name": "wait"}]}}),
            json!({"status": {"phase": "Succeeded"}}),
            json!({"status": {"phase": "Failed"}}),
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u"}]}}),
            json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"}]}}),
        ];
        for extra in not {
            assert!(!is_provisionable(&pod(extra.clone())), "{extra}");
        }
    }
}
