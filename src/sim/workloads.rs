//! Pods and the workloads that create them, as `simulate` was given them,
//! and the pods that result: those given as they are, plus the pods a
//! workload's controller would create when none of its pods is given.
//!
//! A cluster snapshot (`kubectl get … -o yaml`) holds both a workload and its
//! pods; the pods are the truth and the workload is not expanded again. Pods
//! are matched to workloads through their owner references — Pod →
//! ReplicaSet → Deployment, Pod → StatefulSet or Job — by uid, falling back
//! to kind, namespace and name where a uid is missing. Manifests written by
//! hand have no pods, so their workloads are expanded.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// A pod as given, or a workload whose controller creates pods.
#[derive(Debug, Clone)]
pub enum PodSource {
    /// A pod, pending or bound to a node (shared with the snapshots made
    /// of the manifests, not copied into each).
    Pod(Arc<Pod>),
    /// A Deployment (pods through its ReplicaSets).
    Deployment(Box<Deployment>),
    /// A ReplicaSet; one a Deployment controls is never expanded on its own.
    ReplicaSet(Box<ReplicaSet>),
    /// A StatefulSet.
    StatefulSet(Box<StatefulSet>),
    /// A Job; a finished or suspended one runs no more pods.
    Job(Box<Job>),
}

/// The label a Deployment puts on its ReplicaSets' pods; the ReplicaSet is
/// named `<deployment>-<hash>`.
const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// Who a pod (or ReplicaSet) says controls it.
#[derive(Debug)]
struct Owner<'a> {
    kind: &'a str,
    namespace: &'a str,
    name: &'a str,
    uid: Option<&'a str>,
}

impl Owner<'_> {
    /// Whether this names the object of `kind` with `meta`: the same uid when
    /// both have one, else the same namespace and name.
    fn is(&self, kind: &str, meta: &ObjectMeta) -> bool {
        if self.kind != kind || self.namespace != namespace(meta) {
            return false;
        }
        match (self.uid, meta.uid.as_deref()) {
            (Some(a), Some(b)) if !a.is_empty() && !b.is_empty() => a == b,
            _ => Some(self.name) == meta.name.as_deref(),
        }
    }
}

/// The pods `sources` result in, in the order given: each pod as it is, and
/// for each workload without pods among the sources, the pods its controller
/// would create (see [`expand`]).
pub fn pods(sources: &[PodSource]) -> Vec<Arc<Pod>> {
    let owners = owners_with_pods(sources);
    let has_pods = |kind: &str, meta: &ObjectMeta| owners.iter().any(|o| o.is(kind, meta));
    let mut out = Vec::new();
    for source in sources {
        match source {
            PodSource::Pod(pod) => out.push(pod.clone()),
            PodSource::Deployment(d) if !has_pods("Deployment", &d.metadata) => {
                let spec = &d.spec;
                out.extend(shared(expand(
                    &d.metadata,
                    spec.replicas.unwrap_or(1),
                    &spec.template,
                )));
            }
            PodSource::ReplicaSet(r)
                if controller(&r.metadata).is_none_or(|o| o.kind != "Deployment")
                    && !has_pods("ReplicaSet", &r.metadata) =>
            {
                let spec = &r.spec;
                let template = spec.template.clone().unwrap_or_default();
                out.extend(shared(expand(
                    &r.metadata,
                    spec.replicas.unwrap_or(1),
                    &template,
                )));
            }
            PodSource::StatefulSet(s) if !has_pods("StatefulSet", &s.metadata) => {
                let spec = &s.spec;
                out.extend(shared(expand(
                    &s.metadata,
                    spec.replicas.unwrap_or(1),
                    &spec.template,
                )));
            }
            PodSource::Job(j) if !has_pods("Job", &j.metadata) => {
                let template = j.spec.as_ref().map(|s| &s.template);
                out.extend(shared(expand(
                    &j.metadata,
                    job_pods(j),
                    template.unwrap_or(&PodTemplateSpec::default()),
                )));
            }
            _ => {}
        }
    }
    out
}

/// The owners that have pods among `sources`: each pod's controller, and for
/// a pod of a ReplicaSet, that ReplicaSet's Deployment (from the ReplicaSet
/// when it is given, else from the ReplicaSet's name, `<deployment>-<hash>`).
fn owners_with_pods(sources: &[PodSource]) -> Vec<Owner<'_>> {
    let replica_sets: Vec<&ReplicaSet> = sources
        .iter()
        .filter_map(|s| match s {
            PodSource::ReplicaSet(r) => Some(r.as_ref()),
            _ => None,
        })
        .collect();
    let mut owners = Vec::new();
    for source in sources {
        let PodSource::Pod(pod) = source else {
            continue;
        };
        let Some(owner) = controller(&pod.metadata) else {
            continue;
        };
        if owner.kind == "ReplicaSet" {
            let given = replica_sets
                .iter()
                .find(|r| owner.is("ReplicaSet", &r.metadata));
            let named = |r: &ReplicaSet| {
                namespace(&r.metadata) == owner.namespace
                    && r.metadata.name.as_deref() == Some(owner.name)
            };
            match given {
                Some(r) => owners.extend(controller(&r.metadata)),
                // A ReplicaSet of that name with another uid is another
                // object: the pod's own ReplicaSet is gone.
                None if !replica_sets.iter().any(|r| named(r)) => {
                    owners.extend(deployment_by_name(&pod.metadata, &owner))
                }
                None => {}
            }
        }
        owners.push(owner);
    }
    owners
}

/// The Deployment a pod's ReplicaSet belongs to, from the ReplicaSet's name
/// and the pod's `pod-template-hash` label, for when the ReplicaSet itself
/// is not given.
fn deployment_by_name<'a>(pod: &'a ObjectMeta, replica_set: &Owner<'a>) -> Option<Owner<'a>> {
    let hash = pod.labels.as_ref()?.get(POD_TEMPLATE_HASH)?;
    let name = replica_set
        .name
        .strip_suffix(hash.as_str())?
        .strip_suffix('-')?;
    Some(Owner {
        kind: "Deployment",
        namespace: replica_set.namespace,
        name,
        uid: None,
    })
}

/// The object's controlling owner reference (the first one when none is
/// marked `controller`), in the object's namespace.
fn controller(meta: &ObjectMeta) -> Option<Owner<'_>> {
    let references = meta.owner_references.as_deref().unwrap_or_default();
    let reference: &OwnerReference = references
        .iter()
        .find(|o| o.controller == Some(true))
        .or_else(|| references.first())?;
    Some(Owner {
        kind: &reference.kind,
        namespace: namespace(meta),
        name: &reference.name,
        uid: Some(reference.uid.as_str()),
    })
}

fn namespace(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("default")
}

/// Pods a Job runs at once: `parallelism`, never more than the completions
/// still missing; none once it finished (`Complete` or `Failed`) or while it
/// is suspended.
fn job_pods(job: &Job) -> i32 {
    let spec = job.spec.as_ref();
    let status = job.status.as_ref();
    let finished = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True");
    if finished || spec.and_then(|s| s.suspend) == Some(true) {
        return 0;
    }
    let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
    let succeeded = status.and_then(|s| s.succeeded).unwrap_or(0);
    match spec.and_then(|s| s.completions) {
        // Saturating: both come from the manifest and may be any i32.
        Some(completions) => parallelism.min(completions.saturating_sub(succeeded)),
        None => parallelism,
    }
}

/// `replicas` pods from a workload's template, named `<workload>-<i>`.
pub fn expand(owner: &ObjectMeta, replicas: i32, template: &PodTemplateSpec) -> Vec<Pod> {
    let workload = owner.name.clone().unwrap_or_default();
    let namespace = namespace(owner).to_string();
    (0..replicas.max(0))
        .map(|i| {
            let mut metadata = template.metadata.clone().unwrap_or_default();
            metadata.name = Some(format!("{workload}-{i}"));
            metadata.namespace = Some(namespace.clone());
            Pod {
                metadata,
                spec: template.spec.clone(),
                status: None,
            }
        })
        .collect()
}

/// Pods made here, each behind its own `Arc` like the pods given.
fn shared(pods: Vec<Pod>) -> impl Iterator<Item = Arc<Pod>> {
    pods.into_iter().map(Arc::new)
}

#[cfg(test)]
mod tests {
    use crate::sim::Manifests;

    /// `namespace/name` of every pod the manifests result in.
    fn pod_names(yaml: &str) -> Vec<String> {
        let mut m = Manifests::default();
        m.add_yaml("test.yaml", yaml).unwrap();
        m.pods()
            .iter()
            .map(|p| {
                format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref().unwrap_or_default(),
                    p.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect()
    }

    const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, uid: d-1}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: x}]}
"#;

    const REPLICA_SET: &str = r#"
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-5d8f9
  namespace: shop
  uid: rs-1
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: d-1, controller: true}]
spec:
  replicas: 2
  selector: {matchLabels: {app: web, pod-template-hash: 5d8f9}}
  template:
    metadata: {labels: {app: web, pod-template-hash: 5d8f9}}
    spec: {containers: [{name: c, image: x}]}
"#;

    fn web_pod(name: &str, owner_uid: &str) -> String {
        format!(
            r#"
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: shop
  labels: {{app: web, pod-template-hash: 5d8f9}}
  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d8f9, uid: {owner_uid}, controller: true}}]
spec: {{containers: [{{name: c, image: x}}]}}
"#
        )
    }

    #[test]
    fn a_replica_set_of_a_deployment_is_expanded_only_through_the_deployment() {
        assert_eq!(
            pod_names(&format!("{DEPLOYMENT}{REPLICA_SET}")),
            ["shop/web-0", "shop/web-1"]
        );
    }

    #[test]
    fn a_deployment_whose_pods_are_given_is_not_expanded() {
        // Through the ReplicaSet, matched by uid.
        let pod = web_pod("web-5d8f9-abcde", "rs-1");
        assert_eq!(
            pod_names(&format!("{DEPLOYMENT}{REPLICA_SET}{pod}")),
            ["shop/web-5d8f9-abcde"]
        );
        // Without the ReplicaSet: its name is the Deployment's plus the pods'
        // pod-template-hash.
        assert_eq!(
            pod_names(&format!("{DEPLOYMENT}{pod}")),
            ["shop/web-5d8f9-abcde"]
        );
        // Pods of another ReplicaSet of the same name (an older object) do
        // not count: the uid decides.
        let stale = web_pod("web-5d8f9-zzzzz", "rs-0");
        assert_eq!(
            pod_names(&format!("{DEPLOYMENT}{REPLICA_SET}{stale}")),
            ["shop/web-0", "shop/web-1", "shop/web-5d8f9-zzzzz"]
        );
    }

    #[test]
    fn stateful_set_pods_match_by_uid_or_by_name_without_one() {
        let stateful_set = |uid: &str| {
            format!(
                r#"
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db, {uid}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}}}
    spec: {{containers: [{{name: c, image: x}}]}}
"#
            )
        };
        let pod = r#"
---
apiVersion: v1
kind: Pod
metadata:
  name: db-0
  ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: db, uid: s-1, controller: true}]
spec: {containers: [{name: c, image: x}]}
"#;
        // A hand-written StatefulSet has no uid: the name decides.
        assert_eq!(
            pod_names(&format!("{}{pod}", stateful_set(""))),
            ["default/db-0"]
        );
        assert_eq!(
            pod_names(&format!("{}{pod}", stateful_set("uid: s-1"))),
            ["default/db-0"]
        );
        // Another StatefulSet of the same name has none of its pods.
        let mut names = pod_names(&format!("{}{pod}", stateful_set("uid: s-2")));
        names.sort();
        assert_eq!(names, ["default/db-0", "default/db-0", "default/db-1"]);
        // A pod of the same name in another namespace is another's.
        let elsewhere = pod.replace("name: db-0", "name: db-0\n  namespace: other");
        assert_eq!(
            pod_names(&format!("{}{elsewhere}", stateful_set(""))),
            ["default/db-0", "default/db-1", "other/db-0"]
        );
    }

    #[test]
    fn jobs_run_only_the_pods_still_missing() {
        let job = |spec: &str, status: &str| {
            format!(
                r#"
---
apiVersion: batch/v1
kind: Job
metadata: {{name: batch}}
spec:
  {spec}
  template:
    spec: {{restartPolicy: Never, containers: [{{name: c, image: x}}]}}
status: {{{status}}}
"#
            )
        };
        let count = |yaml: String| pod_names(&yaml).len();
        assert_eq!(count(job("parallelism: 3", "")), 3);
        assert_eq!(count(job("parallelism: 3\n  completions: 5", "")), 3);
        assert_eq!(
            count(job("parallelism: 3\n  completions: 5", "succeeded: 3")),
            2
        );
        assert_eq!(count(job("parallelism: 3\n  suspend: true", "")), 0);
        let complete = "conditions: [{type: Complete, status: \"True\"}], succeeded: 1";
        assert_eq!(count(job("completions: 1", complete)), 0);
        let failed = "conditions: [{type: Failed, status: \"True\"}]";
        assert_eq!(count(job("completions: 1", failed)), 0);
        let not_yet = "conditions: [{type: Complete, status: \"False\"}]";
        assert_eq!(count(job("completions: 1", not_yet)), 1);
    }
}
