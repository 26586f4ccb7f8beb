//! A [`ClusterSnapshot`] in the scheduler's terms: each NodePool with what
//! it may launch, existing nodes with their pods, in-flight NodeClaims, the
//! pods to place, DaemonSets and namespace labels.
//!
//! Objects that cannot be used are reported, not fatal: a NodePool whose
//! EC2NodeClass is missing or not usable is kept but blocked (its pods say
//! why), a pod that cannot be read is left out. Each problem is returned as
//! an [`InputError`]; `simulate` stops on the first, a controller reports
//! them and provisions the rest.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Pod as K8sPod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{ClusterSnapshot, ConvertedPods};
use crate::apis::conditions::find_condition;
use crate::apis::{NodeClaim, NodePool};
use crate::aws::instance_types::{InstanceTypeProvider, ResolveError};
use crate::extensions::{ConfigMapSource, Outcome, is_config_map};
use crate::scheduling::node_pool::{node_claim_requirements, node_pool_spec};
use crate::scheduling::{
    Blocked, BlockedReason, ConvertError, ExistingNode, NodePoolSpec, Resources, SchedulerInput,
    SchedulerOptions, convert,
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

/// Builds the scheduler's input from `snapshot`, each NodePool's instance
/// types from `instance_types`, pods to place through `converted` (a
/// controller's cache; `&ConvertedPods::default()` converts each pod here).
///
/// - A NodePool being deleted, or whose `Ready` condition is present and not
///   `True`, may not launch (Karpenter uses only ready pools); one without
///   conditions yet (a manifest) is used.
/// - Pods that finished (`Succeeded`, `Failed`) or are being deleted are
///   ignored; pending pods owned by a DaemonSet are the DaemonSet's to place;
///   pods with `spec.nodeName` count on that node; nominated pods on their
///   nominee; every other pod is to be placed.
/// - A NodeClaim without a Node yet is in flight (see [`in_flight_node`]);
///   one that registered is represented by its Node.
pub fn scheduler_input(
    snapshot: &ClusterSnapshot,
    instance_types: &InstanceTypeProvider,
    options: SchedulerOptions,
    converted: &ConvertedPods,
) -> Prepared {
    let mut problems = Vec::new();
    let mut extensions = Vec::new();
    let mut node_pools = Vec::new();
    for pool in &snapshot.node_pools {
        match pool_spec(snapshot, pool, instance_types, &mut extensions) {
            Ok((spec, problem)) => {
                node_pools.push(spec);
                problems.extend(problem);
            }
            Err(problem) => problems.push(problem),
        }
    }

    let mut pending = Vec::new();
    let mut bound: BTreeMap<String, Vec<&K8sPod>> = BTreeMap::new();
    for pod in snapshot.pods.iter().filter(|p| is_active(p)) {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .or_else(|| snapshot.nomination(pod).cloned());
        match node {
            Some(node) => bound.entry(node).or_default().push(pod.as_ref()),
            None if owned_by_daemon_set(pod) => {}
            None => match converted.get(pod) {
                Ok(pod) => pending.push(pod),
                Err(e) => problems.push(e.into()),
            },
        }
    }

    let mut existing_nodes = Vec::new();
    for node in &snapshot.nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let pods = bound.remove(&name).unwrap_or_default();
        match convert::node_from_k8s(node, &pods) {
            Ok(node) => existing_nodes.push(node),
            Err(e) => problems.push(e.into()),
        }
    }
    let mut in_flight = Vec::new();
    let registered = Registered::of(snapshot);
    for claim in snapshot
        .node_claims
        .iter()
        .filter(|c| !registered.has_node(c))
    {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let pods = bound.remove(&name).unwrap_or_default();
        match in_flight_node(claim, &pods) {
            Ok(node) => in_flight.push(node),
            Err(e) => problems.push(e.into()),
        }
    }
    for (node, pods) in bound {
        // A nomination to a NodeClaim or Node that is gone holds its pods back
        // until it expires; a nodeName naming no node is a problem.
        for pod in pods {
            if snapshot.nomination(pod).is_none() {
                problems.push(InputError::UnknownNode {
                    pod: pod.metadata.name.clone().unwrap_or_default(),
                    node: node.clone(),
                });
            }
        }
    }

    let mut daemonsets = Vec::new();
    for ds in &snapshot.daemon_sets {
        match convert::daemonset_pod_from_k8s(ds) {
            Ok(pod) => daemonsets.push(pod),
            Err(e) => problems.push(e.into()),
        }
    }
    Prepared {
        input: SchedulerInput {
            node_pools,
            existing_nodes,
            in_flight,
            pods: pending,
            daemonsets,
            namespace_labels: namespace_labels(snapshot),
            options,
        },
        extensions,
        problems,
    }
}

/// One NodePool's spec, plus a problem that blocks it without dropping it.
fn pool_spec(
    snapshot: &ClusterSnapshot,
    pool: &NodePool,
    instance_types: &InstanceTypeProvider,
    extensions: &mut Vec<PoolOutcome>,
) -> Result<(NodePoolSpec, Option<InputError>), InputError> {
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let reference = &pool.spec.template.spec.node_class_ref;
    if reference.group != "karpenter.k8s.aws" || reference.kind != "EC2NodeClass" {
        return Err(InputError::WrongNodeClassKind {
            node_pool: pool_name,
            group: reference.group.clone(),
            kind: reference.kind.clone(),
        });
    }
    let class = snapshot
        .node_classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(reference.name.as_str()));
    let Some(class) = class else {
        let mut spec = node_pool_spec(pool, Arc::default())?;
        spec.blocked = Some(
            Blocked::new(
                BlockedReason::NodeClassNotFound,
                format!("EC2NodeClass {:?} not found", reference.name),
            )
            .to_string(),
        );
        let problem = InputError::MissingNodeClass {
            node_pool: pool_name,
            node_class: reference.name.clone(),
        };
        return Ok((spec, Some(problem)));
    };
    let class_name = reference.name.clone();
    let outcome = match instance_types.for_pool(
        class,
        &pool_name,
        &SharedConfigMaps(&snapshot.config_maps),
    ) {
        Ok(outcome) => outcome,
        Err(source) => {
            let mut spec = node_pool_spec(pool, Arc::default())?;
            spec.blocked = Some(
                Blocked::new(
                    BlockedReason::NodeClassNotResolvable,
                    format!("EC2NodeClass {class_name:?} cannot be resolved: {source}"),
                )
                .to_string(),
            );
            let problem = InputError::NodeClass {
                node_class: class_name,
                source,
            };
            return Ok((spec, Some(problem)));
        }
    };
    let mut spec = node_pool_spec(pool, outcome.instance_types.clone())?;
    spec.priority_scores = outcome.priority_scores.clone();
    let blocked = pool_not_usable(pool).or_else(|| {
        outcome.blocked.as_ref().map(|why| {
            // The message leaves the class's name out; this one names it.
            Blocked::new(
                why.reason,
                format!(
                    "EC2NodeClass {class_name:?} cannot launch because of its extensions: {}",
                    why.message
                ),
            )
        })
    });
    spec.blocked = blocked.as_ref().map(ToString::to_string);
    extensions.push(PoolOutcome {
        node_class: class_name,
        node_pool: pool_name,
        outcome,
    });
    Ok((spec, None))
}

/// The snapshot's ConfigMaps, where extension modules are looked up.
struct SharedConfigMaps<'a>(&'a [Arc<ConfigMap>]);

impl ConfigMapSource for SharedConfigMaps<'_> {
    fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        self.0
            .iter()
            .map(Arc::as_ref)
            .find(|cm| is_config_map(cm, namespace, name))
    }
}

/// Why a NodePool may not launch by its own state: being deleted, or not ready.
fn pool_not_usable(pool: &NodePool) -> Option<Blocked> {
    if pool.metadata.deletion_timestamp.is_some() {
        return Some(Blocked::new(
            BlockedReason::NodePoolDeleting,
            "the NodePool is being deleted",
        ));
    }
    let conditions = pool.status.as_ref()?.conditions.as_deref()?;
    let ready = find_condition(conditions, "Ready")?;
    (!ready.is_true()).then(|| {
        Blocked::new(
            BlockedReason::NodePoolNotReady,
            format!(
                "the NodePool is not ready (Ready={:?}, {}: {})",
                ready.status,
                ready.reason.as_deref().unwrap_or("no reason"),
                ready.message.as_deref().unwrap_or("no message")
            ),
        )
    })
}

/// Whether a pod still runs or waits to run.
fn is_active(pod: &K8sPod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// Whether a DaemonSet controls `pod`: such a pod is its DaemonSet's to
/// place, and counts on every node through the DaemonSet instead.
pub fn owned_by_daemon_set(pod: &K8sPod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet" && o.controller == Some(true))
}

/// The names and provider IDs of the snapshot's Nodes, to tell which
/// NodeClaims have registered without comparing each claim with each node.
struct Registered<'a> {
    names: HashSet<&'a str>,
    provider_ids: HashSet<&'a str>,
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
            .filter_map(|n| n.spec.as_ref()?.provider_id.as_deref())
            .collect();
        Registered {
            names,
            provider_ids,
        }
    }

    /// Whether a Node stands for `claim` (by `status.nodeName` or provider ID).
    fn has_node(&self, claim: &NodeClaim) -> bool {
        let status = claim.status.as_ref();
        status
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|name| self.names.contains(name))
            || status
                .and_then(|s| s.provider_id.as_deref())
                .is_some_and(|id| self.provider_ids.contains(id))
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
fn in_flight_node(claim: &NodeClaim, pods: &[&K8sPod]) -> Result<ExistingNode, ConvertError> {
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
        pods: pods
            .iter()
            .map(|p| convert::pod_from_k8s(p))
            .collect::<Result<_, _>>()?,
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
