//! The control loops that run inside the double after every request, in
//! the request's own lock (so a caller sees their effects as soon as its
//! request returns): garbage collection, namespace deletion, pod garbage
//! collection for removed nodes, PodDisruptionBudget status, the
//! workload controllers, and the expiry of Events ([`super::expiry`]).
//! Each change is routed to the objects it affects; each affected object
//! is reconciled once per round, until nothing changes.

use std::collections::BTreeSet;

use serde_json::Value;

use super::State;
use super::meta;
use super::store::{Change, EventType};
use super::{disruption, gc, workloads};

/// Work a change causes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Work {
    /// Reconcile a workload or a PodDisruptionBudget: `(plural, namespace, name)`.
    Reconcile(String, String, String),
    /// Delete a terminating namespace's contents, then the namespace.
    Namespace(String),
    /// Finish a foreground deletion of `(group, plural, namespace, name)`.
    Foreground(String, String, String, String),
    /// Delete the pods bound to a removed node.
    NodePods(String),
    /// Give a new namespace its `default` ServiceAccount.
    ServiceAccount(String),
}

/// Rounds after which a cycle is assumed and settling stops.
const MAX_ROUNDS: usize = 200;

const WORKLOADS: &[&str] = &[
    "deployments",
    "replicasets",
    "statefulsets",
    "daemonsets",
    "jobs",
];

impl State {
    /// Runs the control loops until no change is left to react to.
    pub fn settle(&mut self) {
        let now = std::time::Instant::now();
        self.expire_events(now);
        let mut work = BTreeSet::new();
        for _ in 0..MAX_ROUNDS {
            let changes = self.store.take_pending();
            if changes.is_empty() && work.is_empty() {
                return;
            }
            for change in &changes {
                self.expiry.note(change, now);
                self.route(change, &mut work);
            }
            for item in std::mem::take(&mut work) {
                self.run(item);
            }
        }
        tracing::warn!("API server double: the in-server controllers did not settle");
    }

    fn route(&mut self, change: &Change, work: &mut BTreeSet<Work>) {
        let (group, plural) = (&change.storage.0, change.storage.1.as_str());
        let object = &change.object;
        let deleted = change.event == EventType::Deleted;
        let namespace = change.namespace.clone();
        let workloads_on = self.options.workload_controllers;
        if deleted {
            gc::collect(self, change);
        }
        // Owners: workload status, foreground deletions waiting for dependents.
        let mut owners = meta::owner_refs(object);
        if let Some(previous) = &change.previous {
            owners.extend(meta::owner_refs(previous));
        }
        for owner in owners {
            let Some(def) = self.registry.by_kind(&owner.api_version, &owner.kind) else {
                continue;
            };
            let owner_namespace = if def.namespaced {
                namespace.clone()
            } else {
                String::new()
            };
            if workloads_on
                && (def.group == "apps" || def.group == "batch")
                && concerns_owner(change)
            {
                work.insert(Work::Reconcile(
                    def.plural.clone(),
                    owner_namespace.clone(),
                    owner.name.clone(),
                ));
            }
            if deleted {
                let (g, p) = def.storage.clone();
                work.insert(Work::Foreground(g, p, owner_namespace, owner.name.clone()));
            }
        }
        if !deleted
            && meta::is_being_deleted(object)
            && meta::finalizers(object)
                .iter()
                .any(|f| f == "foregroundDeletion")
        {
            work.insert(Work::Foreground(
                group.clone(),
                plural.to_string(),
                namespace.clone(),
                change.name.clone(),
            ));
        }
        match plural {
            "pods" if group.is_empty() => {
                let pdbs = (String::from("policy"), String::from("poddisruptionbudgets"));
                for pdb in self.store.list(&pdbs, Some(&namespace)) {
                    work.insert(Work::Reconcile(
                        "poddisruptionbudgets".into(),
                        namespace.clone(),
                        meta::name(pdb).to_string(),
                    ));
                }
            }
            "poddisruptionbudgets" if !deleted => {
                work.insert(Work::Reconcile(
                    plural.into(),
                    namespace.clone(),
                    change.name.clone(),
                ));
            }
            "nodes" if group.is_empty() => {
                if workloads_on {
                    let daemonsets = (String::from("apps"), String::from("daemonsets"));
                    for ds in self.store.list(&daemonsets, None) {
                        work.insert(Work::Reconcile(
                            "daemonsets".into(),
                            meta::namespace(ds).to_string(),
                            meta::name(ds).to_string(),
                        ));
                    }
                }
                if deleted {
                    work.insert(Work::NodePods(change.name.clone()));
                }
            }
            "namespaces" if group.is_empty() && !deleted && meta::is_being_deleted(object) => {
                work.insert(Work::Namespace(change.name.clone()));
            }
            "namespaces" if group.is_empty() && change.event == EventType::Added => {
                work.insert(Work::ServiceAccount(change.name.clone()));
            }
            p if workloads_on
                && !deleted
                && WORKLOADS.contains(&p)
                && (group == "apps" || group == "batch") =>
            {
                work.insert(Work::Reconcile(
                    p.into(),
                    namespace.clone(),
                    change.name.clone(),
                ));
            }
            _ => {}
        }
        if deleted && !namespace.is_empty() {
            let namespaces = (String::new(), String::from("namespaces"));
            if self
                .store
                .get(&namespaces, "", &namespace)
                .is_some_and(|ns| meta::is_being_deleted(ns))
            {
                work.insert(Work::Namespace(namespace));
            }
        }
    }

    fn run(&mut self, item: Work) {
        match item {
            Work::Reconcile(plural, namespace, name) => match plural.as_str() {
                "poddisruptionbudgets" => disruption::sync(self, &namespace, &name),
                other => workloads::reconcile(self, other, &namespace, &name),
            },
            Work::Namespace(name) => gc::finalize_namespace(self, &name),
            Work::Foreground(group, plural, namespace, name) => {
                gc::finish_foreground(self, &(group, plural), &namespace, &name)
            }
            Work::NodePods(node) => gc::delete_pods_of_node(self, &node),
            Work::ServiceAccount(namespace) => self.create_default_service_account(&namespace),
        }
    }

    fn create_default_service_account(&mut self, namespace: &str) {
        let accounts = (String::new(), String::from("serviceaccounts"));
        if self.store.get(&accounts, namespace, "default").is_some() {
            return;
        }
        let Some(def) = self.registry.by_storage(&accounts) else {
            return;
        };
        let account = serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
        let options = super::write::WriteOptions::controller("service-account-controller");
        if let Err(e) = self.create(&def, namespace, account, &options) {
            tracing::debug!(error = %e.message, "API server double: no default ServiceAccount in {namespace}");
        }
    }
}

/// Whether a change can matter to the workload that owns the object: not
/// when a pod is updated without any of what a workload controller reads
/// of its pods changing (a condition other than `Ready`, an annotation —
/// the binder's `Unschedulable` marks, for one). A 5,000-pod burst writes
/// each pod several times, and each owner reconcile reads every pod the
/// owner has, under the lock every request waits on.
fn concerns_owner(change: &Change) -> bool {
    let (Some(previous), EventType::Modified) = (&change.previous, change.event) else {
        return true;
    };
    if !change.storage.0.is_empty() || change.storage.1 != "pods" {
        return true;
    }
    owner_view(previous) != owner_view(&change.object)
}

/// What the workload controllers read of a pod.
type OwnerView<'a> = (
    &'a str,
    bool,
    bool,
    &'a str,
    Option<&'a Value>,
    Option<&'a Value>,
);

fn owner_view(pod: &Value) -> OwnerView<'_> {
    (
        meta::text(pod, "/status/phase"),
        meta::is_pod_ready(pod),
        meta::is_being_deleted(pod),
        meta::text(pod, "/spec/nodeName"),
        meta::at(pod, "/metadata/ownerReferences"),
        meta::at(pod, "/metadata/labels"),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn pod_change(previous: Value, object: Value) -> Change {
        Change {
            resource_version: 2,
            event: EventType::Modified,
            storage: Arc::new((String::new(), "pods".into())),
            namespace: "default".into(),
            name: "p".into(),
            object: Arc::new(object),
            previous: Some(Arc::new(previous)),
        }
    }

    #[test]
    fn only_what_workloads_read_of_a_pod_concerns_its_owner() {
        let pending = json!({"metadata": {"name": "p", "labels": {"app": "a"}}, "status": {"phase": "Pending"}});
        let mut marked = pending.clone();
        marked["status"]["conditions"] =
            json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]);
        assert!(!concerns_owner(&pod_change(pending.clone(), marked)));
        let mut bound = pending.clone();
        bound["spec"] = json!({"nodeName": "n"});
        assert!(concerns_owner(&pod_change(pending.clone(), bound)));
        let mut running = pending.clone();
        running["status"] =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
        assert!(concerns_owner(&pod_change(pending.clone(), running)));
        let mut relabelled = pending.clone();
        relabelled["metadata"]["labels"]["app"] = json!("b");
        assert!(concerns_owner(&pod_change(pending, relabelled)));
    }
}
