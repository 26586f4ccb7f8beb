//! Clusters for the disruption tests: NodePools, an EC2NodeClass, Nodes
//! with their NodeClaims and pods as `kubectl get -o yaml` shows them, and
//! the disruption plan `simulate --disruption` makes of them.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use nodewright::aws::catalog::Catalog;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::controllers::disruption::sim::{DisruptionPlan, MarkSource, PlanOptions, plan};
use nodewright::extensions::Extensions;
use nodewright::scheduling::SchedulerOptions;
use nodewright::sim::Manifests;
use nodewright::sim::disruption::{DisruptionOptions, DisruptionOutput, disruption_of};
use nodewright_host::HostConfig;
use serde_json::{Value, json};

pub(crate) const AT: &str = "2026-11-26T12:00:00Z";

/// A node of NodePool `pool` and its NodeClaim, launched and initialized a
/// week before [`AT`], running `pods` (name, cpu).
pub(crate) struct NodeSpec<'a> {
    pub(crate) name: &'a str,
    pub(crate) instance_type: &'a str,
    pub(crate) capacity_type: &'a str,
    pub(crate) pods: &'a [(&'a str, &'a str)],
}

pub(crate) fn node(spec: &NodeSpec, pool: &str, docs: &mut Vec<Value>) {
    let (cpu, memory) = match spec.instance_type {
        "m5.large" => ("2", "8Gi"),
        "m5.xlarge" => ("4", "16Gi"),
        "m5.2xlarge" => ("8", "32Gi"),
        "c7i-flex.large" => ("2", "4Gi"),
        "c6a.large" => ("2", "4Gi"),
        other => panic!("no shape for {other}"),
    };
    let provider_id = format!("aws:///us-east-1a/i-{}", spec.name);
    let category = &spec.instance_type[..1];
    let labels = json!({
        "karpenter.sh/nodepool": pool, "node.kubernetes.io/instance-type": spec.instance_type,
        "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": spec.capacity_type,
        "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": spec.name,
        "karpenter.k8s.aws/instance-category": category
    });
    let conditions: Vec<Value> = ["Launched", "Registered", "Initialized"]
        .iter()
        .map(|t| json!({"type": t, "status": "True", "reason": t, "lastTransitionTime": "2026-11-19T12:00:00Z"}))
        .collect();
    let resources = json!({"cpu": cpu, "memory": memory, "pods": "29"});
    docs.push(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": format!("claim-{}", spec.name), "labels": labels, "creationTimestamp": "2026-11-19T11:59:00Z"},
        "spec": {"expireAfter": "720h", "requirements": [],
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        "status": {"providerID": provider_id, "capacity": resources, "allocatable": resources,
                   "conditions": conditions, "lastPodEventTime": "2026-11-19T12:00:00Z"}
    }));
    docs.push(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels},
        "spec": {"providerID": provider_id},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }));
    for (pod, cpu) in spec.pods {
        docs.push(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": "default", "labels": {"app": pod}},
            "spec": {"nodeName": spec.name, "containers": [{"name": "app", "image": "app",
                     "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]},
            "status": {"phase": "Running"}
        }));
    }
}

pub(crate) fn pool(name: &str, disruption: Value, capacity_types: &[&str]) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"disruption": disruption, "template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "expireAfter": "720h",
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity_types},
                {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["m", "c"]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
            ]}}}
    })
}

pub(crate) fn class() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}]}
    })
}

/// The documents as manifests, and instance types from the embedded catalog.
pub(crate) fn input(docs: &[Value]) -> (Manifests, InstanceTypeProvider) {
    let yaml: String = docs.iter().map(|d| format!("---\n{d}\n")).collect();
    let mut manifests = Manifests::default();
    manifests.add_yaml("test.yaml", &yaml).unwrap();
    let catalog = Arc::new(Catalog::embedded("us-east-1").unwrap());
    let extensions = Arc::new(Extensions::new(HostConfig::default()).unwrap());
    let provider = InstanceTypeProvider::new(catalog, extensions, Arc::default());
    (manifests, provider)
}

pub(crate) fn run(docs: &[Value], spot_to_spot: bool) -> DisruptionOutput {
    let (manifests, provider) = input(docs);
    let options = DisruptionOptions {
        at: AT.parse::<Timestamp>().unwrap(),
        spot_to_spot,
    };
    disruption_of(manifests, &provider, &options, false).unwrap()
}

/// The plan itself, with what `simulate` does not print (scored moves).
pub(crate) fn plan_of(docs: &[Value]) -> DisruptionPlan {
    let (manifests, provider) = input(docs);
    let options = PlanOptions {
        at: AT.parse::<Timestamp>().unwrap(),
        spot_to_spot: false,
        scheduler: SchedulerOptions::default(),
        marks: MarkSource::Recompute,
        max_passes: Some(1),
        exhaustive: false,
    };
    plan(&manifests.snapshot(), &provider, &options)
}

pub(crate) fn cluster(disruption: Value, nodes: &[NodeSpec]) -> Vec<Value> {
    let mut docs = vec![pool("default", disruption, &["on-demand"]), class()];
    for spec in nodes {
        node(spec, "default", &mut docs);
    }
    docs
}

/// `(method, decision, nodes out)` per decision.
pub(crate) fn decisions(out: &DisruptionOutput) -> Vec<(String, String, Vec<String>)> {
    out.disruption
        .decisions
        .iter()
        .map(|d| {
            (
                d.method.clone(),
                d.decision.clone(),
                d.candidates.iter().map(|c| c.node.clone()).collect(),
            )
        })
        .collect()
}

pub(crate) fn kept_reason(out: &DisruptionOutput, node: &str) -> String {
    out.disruption
        .kept
        .iter()
        .find(|k| k.node == node)
        .unwrap_or_else(|| panic!("{node} not kept: {:?}", out.disruption.kept))
        .reason
        .clone()
}

pub(crate) fn default_disruption() -> Value {
    json!({"consolidateAfter": "30s", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "100%"}]})
}

/// The document of `kind` named `name` among `docs`, to edit.
pub(crate) fn doc<'a>(docs: &'a mut [Value], kind: &str, name: &str) -> &'a mut Value {
    docs.iter_mut()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// A running pod bound to `node`, with `extra` merged into it.
pub(crate) fn pod(name: &str, node: &str, cpu: &str, extra: Value) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "app",
                 "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]},
        "status": {"phase": "Running"}
    });
    merge(&mut pod, extra);
    pod
}

/// `patch` merged into `target` (JSON merge patch, without deletes).
pub(crate) fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(target.entry(key).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch,
    }
}

/// The decisions of `out` as `(method, decision, nodes)`, and the kept
/// nodes as `(node, reason)`.
pub(crate) fn kept(out: &DisruptionOutput) -> Vec<(String, String)> {
    out.disruption
        .kept
        .iter()
        .map(|k| (k.node.clone(), k.reason.clone()))
        .collect()
}
