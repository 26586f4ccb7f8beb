//! The rules about pods, in one place (Karpenter's `pkg/utils/pod`): which
//! pods provisioning acts for, which count as running, which a disruption
//! must find room for elsewhere, which a drain evicts or waits for, and
//! when `karpenter.sh/do-not-disrupt` holds one. Every controller asks
//! these functions rather than reading owner references or phases itself,
//! so a pod is never, say, a DaemonSet's to one controller and not to another.

use k8s_openapi::api::core::v1::Pod;

use crate::apis::duration::parse_go_duration;
use crate::apis::labels::{DISRUPTED_TAINT_KEY, DO_NOT_DISRUPT_ANNOTATION_KEY};
use crate::scheduling::{Taint, TaintEffect, convert::pod_from_k8s};

/// How long past its deletion a pod may stay before a drain stops waiting
/// for it (Karpenter: a minute).
const STUCK_TERMINATING_SECS: i64 = 60;

/// Now, in Unix seconds.
fn now() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

/// Whether the pod has finished (`Succeeded` or `Failed`): it holds no
/// resources and never runs again.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Whether the pod is being deleted (`deletionTimestamp` set).
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Whether the pod counts as running or about to run: neither finished nor
/// being deleted.
pub fn is_active(pod: &Pod) -> bool {
    !is_terminal(pod) && !is_terminating(pod)
}

/// Whether a deleted pod has outstayed its deletion by a minute at `now`
/// (Unix seconds): it is left to the kubelet rather than waited for.
pub fn is_stuck_terminating_at(pod: &Pod, now: i64) -> bool {
    pod.metadata
        .deletion_timestamp
        .as_ref()
        .is_some_and(|t| now - t.0.as_second() > STUCK_TERMINATING_SECS)
}

/// Whether the pod is bound to a node (`spec.nodeName`).
pub fn is_scheduled(pod: &Pod) -> bool {
    pod.spec.as_ref().is_some_and(|s| s.node_name.is_some())
}

/// Whether kube-scheduler is preempting other pods to place this one
/// (`status.nominatedNodeName`): it is about to be bound.
pub fn is_preempting(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .is_some_and(|s| s.nominated_node_name.is_some())
}

/// Whether kube-scheduler tried the pod and found no node for it
/// (`PodScheduled=False`, reason `Unschedulable`). Other schedulers mark
/// pods differently; those are not acted on.
pub fn failed_to_schedule(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
}

/// Whether scheduling gates hold the pod back from any scheduler.
pub fn is_gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .is_some_and(|s| s.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty()))
}

/// Whether an owner reference of `api_version`/`kind` is on the pod,
/// controlling or not (as Karpenter's `IsOwnedBy`).
fn owned_by(pod: &Pod, api_version: &str, kind: &str) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.api_version == api_version && o.kind == kind)
}

/// Whether a DaemonSet owns the pod: it is its DaemonSet's to place, and
/// counts on every node through the DaemonSet instead.
pub fn owned_by_daemon_set(pod: &Pod) -> bool {
    owned_by(pod, "apps/v1", "DaemonSet")
}

/// Whether the pod is a static (mirror) pod, owned by its Node: the kubelet
/// runs it from a file, the API server cannot move or delete it.
pub fn owned_by_node(pod: &Pod) -> bool {
    owned_by(pod, "v1", "Node")
}

/// Whether a StatefulSet owns the pod: its replacement is created only once
/// it is gone, so a terminating one still needs its room.
pub fn owned_by_stateful_set(pod: &Pod) -> bool {
    owned_by(pod, "apps/v1", "StatefulSet")
}

/// Whether `pod` needs a node that does not exist yet (Karpenter's
/// `IsProvisionable`): unbound, not preempting its way onto a node, marked
/// unschedulable by kube-scheduler, not held by scheduling gates, not owned
/// by a DaemonSet or a node, and neither finished nor being deleted.
pub fn is_provisionable(pod: &Pod) -> bool {
    failed_to_schedule(pod)
        && !is_scheduled(pod)
        && !is_preempting(pod)
        && !is_gated(pod)
        && !owned_by_daemon_set(pod)
        && !owned_by_node(pod)
        && is_active(pod)
}

/// Whether a disruption must find the pod room elsewhere before its node
/// goes (Karpenter's `IsReschedulable`): active, or a StatefulSet's pod
/// being deleted (its replacement waits for it); not a DaemonSet's or a
/// static pod, which go with their node.
pub fn is_reschedulable(pod: &Pod) -> bool {
    (is_active(pod) || (owned_by_stateful_set(pod) && is_terminating(pod)))
        && !owned_by_daemon_set(pod)
        && !owned_by_node(pod)
}

/// Whether the pod tolerates `karpenter.sh/disrupted:NoSchedule`: draining
/// it would be pointless, it could land on the node again.
pub fn tolerates_disrupted_taint(pod: &Pod) -> bool {
    let taint = Taint::new(DISRUPTED_TAINT_KEY, "", TaintEffect::NoSchedule);
    pod_from_k8s(pod).is_ok_and(|p| p.tolerations.iter().any(|t| t.tolerates(&taint)))
}

/// Whether `karpenter.sh/do-not-disrupt` holds the pod now: `"true"`, or a
/// duration counted from the pod's start that has not run out (a pod not
/// started yet is held). Other values are ignored.
pub fn do_not_disrupt_active(pod: &Pod) -> bool {
    do_not_disrupt_active_at(pod, now())
}

/// [`do_not_disrupt_active`] at `now` (Unix seconds).
pub fn do_not_disrupt_active_at(pod: &Pod, now: i64) -> bool {
    let Some(value) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DO_NOT_DISRUPT_ANNOTATION_KEY))
    else {
        return false;
    };
    if value == "true" {
        return true;
    }
    let Ok(duration) = parse_go_duration(value) else {
        return false;
    };
    let started = pod.status.as_ref().and_then(|s| s.start_time.as_ref());
    match started {
        Some(start) => {
            now < start
                .0
                .as_second()
                .saturating_add(i64::try_from(duration.as_secs()).unwrap_or(i64::MAX))
        }
        None => true,
    }
}

/// Whether the pod lets its node be disrupted (Karpenter's
/// `IsDisruptable`): a pod that is not active never holds a node; an
/// active one does while `do-not-disrupt` holds it.
pub fn is_disruptable(pod: &Pod) -> bool {
    !is_active(pod) || !do_not_disrupt_active(pod)
}

/// Whether nodewright evicts the pod from a draining node (Karpenter's
/// `IsEvictable`): active, not tolerating the disrupted taint, not static,
/// not held by `do-not-disrupt`.
pub fn is_evictable(pod: &Pod) -> bool {
    is_active(pod)
        && !tolerates_disrupted_taint(pod)
        && !owned_by_node(pod)
        && !do_not_disrupt_active(pod)
}

/// Whether a drain waits for the pod (Karpenter's `IsDrainable`): not
/// tolerating the disrupted taint (it would come straight back), not stuck
/// terminating past a minute, not static. Pods `do-not-disrupt` holds are
/// waited for, though not evicted.
pub fn is_drainable_at(pod: &Pod, now: i64) -> bool {
    !tolerates_disrupted_taint(pod) && !is_stuck_terminating_at(pod, now) && !owned_by_node(pod)
}

/// Whether a pod on a draining node must leave it before the node goes
/// (Karpenter's `IsWaitingEviction`): not finished, and drainable.
pub fn is_waiting_eviction(pod: &Pod) -> bool {
    !is_terminal(pod) && is_drainable_at(pod, now())
}

#[cfg(test)]
mod tests;
