//! Which pods a draining node must lose, in which order, and the eviction
//! of one pod — Karpenter's terminator and eviction queue. Pods leave in
//! tiers (non-critical non-DaemonSet, non-critical DaemonSet, critical
//! non-DaemonSet, critical DaemonSet; critical = `system-cluster-critical` /
//! `system-node-critical`), each tier only once the one before is gone.
//! Static pods, pods that tolerate the `karpenter.sh/disrupted` taint (they
//! would come straight back) and finished pods are left. Evictions go
//! through `pods/eviction`, so PodDisruptionBudgets hold them (429, retried);
//! a pod with an active `karpenter.sh/do-not-disrupt` is not evicted. Once the
//! NodeClaim's `terminationGracePeriod` is about to run out (or its
//! `karpenter.sh/nodeclaim-termination-timestamp`, which node repair sets to
//! now), pods are deleted outright so the node can go. Which pods are waited
//! for and which are evicted are the rules of [`crate::cluster::pods`].

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, EvictParams, Preconditions};

use crate::apis::labels::DO_NOT_DISRUPT_ANNOTATION_KEY;
use crate::cluster::pods::{do_not_disrupt_active, owned_by_daemon_set};

fn now() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

fn is_critical(pod: &Pod) -> bool {
    matches!(
        pod.spec
            .as_ref()
            .and_then(|s| s.priority_class_name.as_deref()),
        Some("system-cluster-critical" | "system-node-critical")
    )
}

/// The pods to remove next: the first non-empty tier, in Karpenter's order.
pub fn next_tier(pods: &[&Pod]) -> Vec<Pod> {
    let tiers = [(false, false), (false, true), (true, false), (true, true)];
    for (critical, daemon) in tiers {
        let tier: Vec<Pod> = pods
            .iter()
            .filter(|p| is_critical(p) == critical && owned_by_daemon_set(p) == daemon)
            .map(|p| Pod::clone(p))
            .collect();
        if !tier.is_empty() {
            return tier;
        }
    }
    Vec::new()
}

/// Whether the node's termination deadline is close enough that `pod` must
/// be deleted now to leave in its own grace period.
pub fn needs_force_delete(pod: &Pod, deadline: Option<i64>) -> bool {
    let Some(deadline) = deadline else {
        return false;
    };
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    now() >= deadline - grace
}

/// What happened to one pod.
#[derive(Debug, PartialEq, Eq)]
pub enum Removal {
    /// Evicted, deleted, or already gone.
    Done,
    /// Held back: a PodDisruptionBudget refused (the API server's message),
    /// or `do-not-disrupt` holds it.
    Blocked(String),
}

/// Removes one pod from a draining node: deletes it when the deadline is
/// near, otherwise evicts it through the API (respecting PDBs) unless
/// `do-not-disrupt` holds it.
pub async fn remove(
    client: &kube::Client,
    pod: &Pod,
    deadline: Option<i64>,
) -> Result<Removal, kube::Error> {
    let namespace = pod.namespace().unwrap_or_else(|| "default".to_string());
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let name = pod.name_any();
    let preconditions = Some(Preconditions {
        uid: pod.metadata.uid.clone(),
        resource_version: None,
    });
    if needs_force_delete(pod, deadline) {
        let remaining = deadline.map_or(1, |d| (d - now()).max(1));
        let params = DeleteParams {
            grace_period_seconds: Some(u32::try_from(remaining).unwrap_or(1)),
            preconditions,
            ..DeleteParams::default()
        };
        return match api.delete(&name, &params).await {
            Ok(_) => {
                drained("deleted");
                Ok(Removal::Done)
            }
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(Removal::Done),
            Err(e) => Err(e),
        };
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return Ok(Removal::Blocked("terminating".to_string()));
    }
    if do_not_disrupt_active(pod) {
        return Ok(Removal::Blocked(format!(
            "pod {namespace}/{name} has the {DO_NOT_DISRUPT_ANNOTATION_KEY} annotation"
        )));
    }
    let params = EvictParams {
        delete_options: Some(DeleteParams {
            preconditions,
            ..DeleteParams::default()
        }),
        ..EvictParams::default()
    };
    let result = api.evict(&name, &params).await;
    let code = match &result {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(_) => 0,
    };
    crate::metrics::metrics()
        .pods_eviction_requests
        .get_or_create(&crate::metrics::labels(&[("code", &code.to_string())]))
        .inc();
    match result {
        Ok(_) => {
            drained("evicted");
            Ok(Removal::Done)
        }
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(Removal::Done),
        Err(kube::Error::Api(s))
            if s.code == 429 || (s.code == 500 && s.message.contains("multiple")) =>
        {
            Ok(Removal::Blocked(format!(
                "evicting pod {namespace}/{name}: {}",
                s.message
            )))
        }
        Err(e) => Err(e),
    }
}

/// How long a blocked drain waits before trying again.
pub const DRAIN_RETRY: Duration = Duration::from_secs(1);

fn drained(reason: &str) {
    crate::metrics::metrics()
        .pods_drained
        .get_or_create(&crate::metrics::labels(&[("reason", reason)]))
        .inc();
}
