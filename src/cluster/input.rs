//! A [`ClusterSnapshot`] in the scheduler's terms: each NodePool with what
//! it may launch, existing nodes with their pods, in-flight NodeClaims, the
//! pods to place, DaemonSets and namespace labels.
//!
//! Objects that cannot be used are reported, not fatal: a NodePool whose
//! EC2NodeClass is missing or not usable is kept but blocked (its pods say
//! why), a pod that cannot be read is left out. Each problem is returned as
//! an [`InputError`]; `simulate` stops on the first, a controller reports
//! them and provisions the rest.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::nodes::NodeRecords;
use super::pods::{is_active, is_scheduled, owned_by_daemon_set};
use super::pools::pool_specs;
use super::{ClusterSnapshot, ConvertedPods, pod_key};
use crate::apis::NodeClaim;
use crate::aws::instance_types::{InstanceTypeProvider, ResolveError};
use crate::extensions::Outcome;
use crate::scheduling::node_pool::node_claim_requirements;
use crate::scheduling::{
    ConvertError, ExistingNode, Pod, PodKey, Resources, SchedulerInput, SchedulerOptions, convert,
};

/// An object that could not be used as it is.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A NodePool references an EC2NodeClass that does not exist.
    #[error(
        "NodePool {node_pool:?}: spec.template.spec.nodeClassRef names EC2NodeClass {node_class:?}, which is not in the given manifests; add it or fix the reference"
    )]
    MissingNodeClass {
        /// The NodePool.
        node_pool: String,
        /// The EC2NodeClass it names.
        node_class: String,
    },
    /// A NodePool references a kind of node class nodewright does not provide.
    #[error(
        "NodePool {node_pool:?}: spec.template.spec.nodeClassRef must be group karpenter.k8s.aws, kind EC2NodeClass (got {group}/{kind})"
    )]
    WrongNodeClassKind {
        /// The NodePool.
        node_pool: String,
        /// The group given.
        group: String,
        /// The kind given.
        kind: String,
    },
    /// An EC2NodeClass's settings cannot be resolved into instance types.
    #[error("EC2NodeClass {node_class:?}: {source}")]
    NodeClass {
        /// The EC2NodeClass.
        node_class: String,
        /// What is wrong.
        #[source]
        source: ResolveError,
    },
    /// A pod is bound (`spec.nodeName`) to a node that does not exist.
    #[error(
        "pod {pod:?}: spec.nodeName names node {node:?}, which is not in the given manifests; add the Node or drop nodeName"
    )]
    UnknownNode {
        /// The pod.
        pod: String,
        /// The node it names.
        node: String,
    },
    /// A NodePool, pod, node, NodeClaim or DaemonSet could not be read into
    /// scheduling terms.
    #[error(transparent)]
    Object(#[from] ConvertError),
}

/// What a NodePool's class's extensions did for it.
#[derive(Debug, Clone)]
pub struct PoolOutcome {
    /// The EC2NodeClass.
    pub node_class: String,
    /// The NodePool.
    pub node_pool: String,
    /// The instance types after the extensions, and each module's report.
    pub outcome: Arc<Outcome>,
}

/// The scheduler's input, what the extensions did, and what could not be used.
#[derive(Debug)]
pub struct Prepared {
    /// Ready for [`crate::scheduling::Scheduler::new`].
    pub input: SchedulerInput,
    /// One entry per NodePool whose class's extensions ran.
    pub extensions: Vec<PoolOutcome>,
    /// Objects left out or blocked, in the order found.
    pub problems: Vec<InputError>,
}

/// Builds the scheduler's input from `snapshot`: [`pool_specs`] with the
/// whole cluster's [`cluster_input`] (no node left out), pods to place
/// through `converted` (a controller's cache; `&ConvertedPods::default()`
/// converts each pod here).
pub fn scheduler_input(
    snapshot: &ClusterSnapshot,
    instance_types: &InstanceTypeProvider,
    options: SchedulerOptions,
    converted: &ConvertedPods,
) -> Prepared {
    let pools = pool_specs(snapshot, instance_types);
    let cluster = cluster_input(snapshot, converted, &HashSet::new());
    pools.prepare(cluster, options)
}

/// The cluster's part of the scheduler's input: everything but the
/// NodePools, and what could not be used.
#[derive(Debug, Default)]
pub struct ClusterInput {
    /// Nodes with their pods.
    pub existing_nodes: Vec<ExistingNode>,
    /// NodeClaims without a Node yet, as the nodes they will be.
    pub in_flight: Vec<ExistingNode>,
    /// Pods to place.
    pub pods: Vec<Pod>,
    /// DaemonSets' pods, as overhead.
    pub daemonsets: Vec<Pod>,
    /// Labels per namespace.
    pub namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// Objects left out, in the order found.
    pub problems: Vec<InputError>,
}

/// The cluster of `snapshot` in the scheduler's terms, without the nodes and
/// NodeClaims named in `exclude` (a disruption pass asks what the cluster
/// would do without its candidates; it adds their pods to place itself).
/// Nodes take their bound pods from the snapshot's per-node records, whose
/// conversions are made once (a snapshot without records — manifests —
/// has them made here); pods to place go through `converted`.
///
/// - Pods that finished (`Succeeded`, `Failed`) or are being deleted are
///   ignored; pending pods owned by a DaemonSet are the DaemonSet's to place;
///   pods with `spec.nodeName` count on that node; nominated pods on their
///   nominee; every other pod is to be placed.
/// - A NodeClaim without a Node yet is in flight (see [`in_flight_node`]);
///   one that registered is represented by its Node.
pub fn cluster_input(
    snapshot: &ClusterSnapshot,
    converted: &ConvertedPods,
    exclude: &HashSet<String>,
) -> ClusterInput {
    let made;
    let (records, from_state) = match &snapshot.state_nodes {
        Some(records) => (records, true),
        None => {
            made = NodeRecords::of(&snapshot.nodes, &snapshot.node_claims, &snapshot.pods).all();
            (&made, false)
        }
    };
    let mut problems = Vec::new();
    let mut pending = Vec::new();
    // Pods a node or NodeClaim holds beyond its record: nominated to it, or
    // bound in the snapshot before the record shows it (a binding assumed
    // by the caller, or one the pod watch delivered a moment ago).
    let mut extra: HashMap<&str, Vec<&K8sPod>> = HashMap::new();
    // Pods of a record that the snapshot holds a newer version of.
    let mut stale: HashMap<&str, HashSet<PodKey>> = HashMap::new();
    let registered = Registered::of(snapshot);
    // A pod nominated to a NodeClaim whose Node has registered counts on
    // that Node: the claim is represented by it from then on.
    let claim_nodes: HashMap<&str, &str> = snapshot
        .node_claims
        .iter()
        .filter_map(|c| Some((c.metadata.name.as_deref()?, registered.node_of(c)?)))
        .collect();
    for pod in snapshot.pods.iter().filter(|p| is_active(p)) {
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            if from_state {
                let key = pod_key(pod);
                match records.get(node).and_then(|r| r.holds(&key, pod)) {
                    Some(true) => {}
                    Some(false) => {
                        stale.entry(node).or_default().insert(key);
                        extra.entry(node).or_default().push(pod);
                    }
                    None => extra.entry(node).or_default().push(pod),
                }
            }
            continue;
        }
        match snapshot.nomination(pod) {
            Some(target) => {
                let node = claim_nodes.get(target.as_str()).copied();
                extra
                    .entry(node.unwrap_or(target.as_str()))
                    .or_default()
                    .push(pod)
            }
            None if owned_by_daemon_set(pod) => {}
            None => match converted.get(pod) {
                Ok(pod) => pending.push(pod),
                Err(e) => problems.push(e.into()),
            },
        }
    }
    // The extra pods of a node or NodeClaim, taken once.
    let mut extra_of = |name: &str| -> Result<Vec<Pod>, ConvertError> {
        extra
            .remove(name)
            .unwrap_or_default()
            .into_iter()
            .map(|pod| converted.get(pod))
            .collect()
    };

    let no_keys = HashSet::new();
    let mut placed: HashSet<&str> = HashSet::new();
    let mut existing_nodes = Vec::new();
    for node in &snapshot.nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if exclude.contains(name) {
            continue;
        }
        placed.insert(name);
        let skip = stale.get(name).unwrap_or(&no_keys);
        let with_bound = match records.get(name) {
            Some(record) => record.existing_node(node, skip),
            None => convert::node_from_k8s(node, &[]),
        };
        match with_bound.and_then(|mut node| {
            node.pods.extend(extra_of(name)?);
            Ok(node)
        }) {
            Ok(node) => existing_nodes.push(node),
            Err(e) => problems.push(e.into()),
        }
    }
    let mut in_flight = Vec::new();
    for claim in snapshot
        .node_claims
        .iter()
        .filter(|c| !registered.has_node(c))
    {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        if exclude.contains(name) {
            continue;
        }
        placed.insert(name);
        let pods = records
            .get(name)
            .map(|record| record.converted_pods(stale.get(name).unwrap_or(&no_keys)))
            .transpose()
            .and_then(|bound| {
                let mut pods = bound.unwrap_or_default();
                pods.extend(extra_of(name)?);
                Ok(pods)
            });
        match pods.and_then(|pods| in_flight_node(claim, pods)) {
            Ok(node) => in_flight.push(node),
            Err(e) => problems.push(e.into()),
        }
    }
    // A nodeName naming no node is a problem; a nomination to a NodeClaim
    // or Node that is gone holds its pods back until it expires.
    let mut unknown: BTreeMap<&str, Vec<&K8sPod>> = BTreeMap::new();
    for (name, record) in records {
        if !placed.contains(name.as_str()) && !exclude.contains(name) {
            let pods = unknown.entry(name.as_str()).or_default();
            let skip = stale.get(name.as_str()).unwrap_or(&no_keys);
            let held = record
                .pods()
                .filter(|p| !skip.contains(&pod_key(p.object())));
            pods.extend(held.map(|p| &**p.object()));
        }
    }
    for (name, pods) in &extra {
        if !exclude.contains(*name) {
            let bound = pods.iter().copied().filter(|p| is_scheduled(p));
            unknown.entry(*name).or_default().extend(bound);
        }
    }
    for (node, pods) in unknown {
        for pod in pods {
            problems.push(InputError::UnknownNode {
                pod: pod.metadata.name.clone().unwrap_or_default(),
                node: node.to_string(),
            });
        }
    }

    let mut daemonsets = Vec::new();
    for ds in &snapshot.daemon_sets {
        match convert::daemonset_pod_from_k8s(ds) {
            Ok(pod) => daemonsets.push(pod),
            Err(e) => problems.push(e.into()),
        }
    }
    ClusterInput {
        existing_nodes,
        in_flight,
        pods: pending,
        daemonsets,
        namespace_labels: namespace_labels(snapshot),
        problems,
    }
}

/// The names and provider IDs of the snapshot's Nodes, to tell which
/// NodeClaims have registered without comparing each claim with each node.
struct Registered<'a> {
    names: HashSet<&'a str>,
    /// Provider ID → Node name.
    provider_ids: HashMap<&'a str, &'a str>,
}

impl<'a> Registered<'a> {
    fn of(snapshot: &'a ClusterSnapshot) -> Self {
        let names = snapshot
            .nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        let provider_ids = snapshot
            .nodes
            .iter()
            .filter_map(|n| {
                let id = n.spec.as_ref()?.provider_id.as_deref()?;
                Some((id, n.metadata.name.as_deref()?))
            })
            .collect();
        Registered {
            names,
            provider_ids,
        }
    }

    /// Whether a Node stands for `claim` (by `status.nodeName` or provider ID).
    fn has_node(&self, claim: &NodeClaim) -> bool {
        self.node_of(claim).is_some()
    }

    /// The name of the Node that stands for `claim`, if one does.
    fn node_of(&self, claim: &NodeClaim) -> Option<&'a str> {
        let status = claim.status.as_ref()?;
        let by_name = status
            .node_name
            .as_deref()
            .and_then(|name| self.names.get(name).copied());
        by_name.or_else(|| {
            let id = status.provider_id.as_deref()?;
            self.provider_ids.get(id).copied()
        })
    }
}

/// A NodeClaim without a Node, as the node it will become. Launched, it
/// offers its `status.allocatable`; not launched yet, it offers its
/// `spec.resources.requests` — what it was made to hold, which whatever
/// launches for it can hold — so pods it was made for are not provisioned
/// for again when their nominations are lost (a controller that restarted
/// between creating the claim and launching it). Its requests count against
/// its NodePool's limits either way, and pods nominated to it count where
/// they will run.
fn in_flight_node(claim: &NodeClaim, pods: Vec<Pod>) -> Result<ExistingNode, ConvertError> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let object = format!("NodeClaim {name}");
    let parse = |field: &str, list: Option<&BTreeMap<String, Quantity>>| {
        Resources::parse(
            list.into_iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), v.0.as_str())),
        )
        .map_err(|source| ConvertError::Quantity {
            object: object.clone(),
            field: field.to_string(),
            source,
        })
    };
    let status = claim.status.as_ref();
    let (capacity, allocatable) = match status.and_then(|s| s.allocatable.as_ref()) {
        Some(allocatable) => {
            let allocatable = parse("status.allocatable", Some(allocatable))?;
            let capacity = match status.and_then(|s| s.capacity.as_ref()) {
                Some(capacity) => parse("status.capacity", Some(capacity))?,
                None => allocatable.clone(),
            };
            (capacity, allocatable)
        }
        None => {
            let requests = claim
                .spec
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref());
            let requests = parse("spec.resources.requests", requests)?;
            (requests.clone(), requests)
        }
    };
    let mut labels = node_claim_requirements(claim)?.single_value_labels();
    labels.extend(claim.metadata.labels.clone().unwrap_or_default());
    let taints = claim
        .spec
        .taints
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| convert::taint_from_k8s(&object, &format!("spec.taints[{i}]"), t))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ExistingNode {
        name,
        labels,
        taints,
        capacity,
        allocatable,
        pods,
        initialized: false,
        marked_for_deletion: claim.metadata.deletion_timestamp.is_some(),
    })
}

/// Labels per namespace, for `namespaceSelector`s: those of the given
/// Namespaces, and for a pod's namespace without one just the
/// `kubernetes.io/metadata.name` label the API server puts on every namespace.
fn namespace_labels(snapshot: &ClusterSnapshot) -> BTreeMap<String, BTreeMap<String, String>> {
    use crate::apis::labels::NAMESPACE_NAME_LABEL_KEY as NAME_LABEL;
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for ns in &snapshot.namespaces {
        let Some(name) = ns.metadata.name.clone() else {
            continue;
        };
        let mut labels = ns.metadata.labels.clone().unwrap_or_default();
        labels.insert(NAME_LABEL.to_string(), name.clone());
        out.insert(name, labels);
    }
    for pod in &snapshot.pods {
        let name = pod.metadata.namespace.as_deref().unwrap_or("default");
        out.entry(name.to_string())
            .or_insert_with(|| BTreeMap::from([(NAME_LABEL.to_string(), name.to_string())]));
    }
    out
}

#[cfg(test)]
mod tests;
