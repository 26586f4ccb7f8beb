//! `nodewright simulate`: one provisioning round on manifests read from disk,
//! with the embedded EC2 catalog standing in for the EC2 API.
//!
//! The pipeline is the controller's: NodePools are matched with their
//! EC2NodeClasses, each class's instance types are resolved and passed through
//! its extensions, pending pods are scheduled, and the resulting NodeClaims are
//! reported instead of launched.

pub mod apiserver;
pub mod manifests;
pub mod plan;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use crate::apis::{EC2NodeClass, NodePool};
use crate::aws::catalog::{Catalog, CatalogError};
use crate::aws::instance_types::{ResolveError, ResolverSettings, resolve_all};
use crate::extensions::Extensions;
use crate::scheduling::{
    InstanceType, Operator, Requirement, Requirements, Resources, Scheduler, SchedulerInput,
    SchedulerOptions, convert,
};
use nodewright_host::{HostConfig, HostError};

pub use manifests::{ManifestError, Manifests};
pub use plan::Plan;

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// The manifests could not be read.
    #[error(transparent)]
    Manifests(#[from] ManifestError),
    /// The region has no embedded catalog.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// No NodePool was given, so nothing can be provisioned.
    #[error("no NodePool in the given manifests; add a karpenter.sh/v1 NodePool")]
    NoNodePool,
    /// A NodePool references an EC2NodeClass that was not given.
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
    /// A NodePool field is invalid.
    #[error("NodePool {node_pool:?}: {field}: {message}")]
    NodePool {
        /// The NodePool.
        node_pool: String,
        /// The field path.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// An EC2NodeClass's settings are invalid.
    #[error("EC2NodeClass {node_class:?}: {source}")]
    NodeClass {
        /// The EC2NodeClass.
        node_class: String,
        /// What is wrong.
        #[source]
        source: ResolveError,
    },
    /// The extension sandbox could not start.
    #[error(transparent)]
    Host(#[from] HostError),
    /// A pod is bound (`spec.nodeName`) to a node that was not given.
    #[error(
        "pod {pod:?}: spec.nodeName names node {node:?}, which is not in the given manifests; add the Node or drop nodeName"
    )]
    UnknownNode {
        /// The pod.
        pod: String,
        /// The node it names.
        node: String,
    },
    /// A pod, node or DaemonSet could not be read into scheduling terms.
    #[error(transparent)]
    Object(#[from] convert::ConvertError),
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimulateOptions {
    /// Files or directories of YAML manifests.
    pub paths: Vec<PathBuf>,
    /// Region of the embedded catalog.
    pub region: String,
    /// Schedule without preferred affinities and spreads.
    pub ignore_preferences: bool,
}

/// Runs one provisioning round and returns the plan.
pub fn simulate(options: &SimulateOptions) -> Result<Plan, SimulateError> {
    let manifests = Manifests::load(&options.paths)?;
    let catalog = Catalog::embedded(&options.region)?;
    let extensions = Extensions::new(HostConfig::default())?;
    plan(
        &manifests,
        &catalog,
        &extensions,
        options.ignore_preferences,
    )
}

/// Plans one provisioning round for manifests already read.
pub fn plan(
    manifests: &Manifests,
    catalog: &Catalog,
    extensions: &Extensions,
    ignore_preferences: bool,
) -> Result<Plan, SimulateError> {
    let prepared = scheduler_input(manifests, catalog, extensions, ignore_preferences)?;
    let pools: BTreeMap<String, Vec<InstanceType>> = prepared
        .input
        .node_pools
        .iter()
        .map(|p| (p.name.clone(), p.instance_types.clone()))
        .collect();
    let started = Instant::now();
    let result = Scheduler::new(prepared.input).solve();
    let solve_millis = started.elapsed().as_secs_f64() * 1000.0;
    let mut plan = Plan::new(catalog.region(), &result, &pools, solve_millis);
    plan.extensions = prepared.extensions;
    Ok(plan)
}

/// The scheduler's input plus what the extensions did while building it.
#[derive(Debug)]
pub struct Prepared {
    /// Ready for [`Scheduler::new`].
    pub input: SchedulerInput,
    /// One entry per (NodePool, extension module) evaluation.
    pub extensions: Vec<plan::ExtensionRun>,
}

/// Builds the scheduler's input from manifests: NodePools with their
/// resolved instance types, existing nodes with their pods, pending pods and
/// DaemonSets.
pub fn scheduler_input(
    manifests: &Manifests,
    catalog: &Catalog,
    extensions: &Extensions,
    ignore_preferences: bool,
) -> Result<Prepared, SimulateError> {
    if manifests.node_pools.is_empty() {
        return Err(SimulateError::NoNodePool);
    }
    let mut resolved: BTreeMap<String, Vec<InstanceType>> = BTreeMap::new();
    let mut node_pools = Vec::new();
    let mut runs = Vec::new();
    for pool in &manifests.node_pools {
        let class = node_class_of(pool, &manifests.node_classes)?;
        let class_name = class.metadata.name.clone().unwrap_or_default();
        if !resolved.contains_key(&class_name) {
            let settings = ResolverSettings::from_node_class(class).map_err(|source| {
                SimulateError::NodeClass {
                    node_class: class_name.clone(),
                    source,
                }
            })?;
            let types =
                resolve_all(catalog, &settings).map_err(|source| SimulateError::NodeClass {
                    node_class: class_name.clone(),
                    source,
                })?;
            resolved.insert(class_name.clone(), types);
        }
        let instance_types = resolved.get(&class_name).cloned().unwrap_or_default();
        let pool_name = pool.metadata.name.clone().unwrap_or_default();
        let outcome = extensions.apply(
            class,
            &pool_name,
            catalog,
            instance_types,
            &manifests.config_maps,
        );
        runs.extend(plan::ExtensionRun::from_outcome(
            &class_name,
            &pool_name,
            &outcome,
        ));
        let mut spec = node_pool_spec(pool, outcome.instance_types.clone())?;
        spec.priority_scores = outcome.priority_scores.clone();
        spec.blocked = outcome.blocked.as_deref().map(|why| {
            // Some messages already name the class; do not name it twice.
            let prefix = format!("EC2NodeClass {class_name:?}: ");
            let why = why.strip_prefix(&prefix).unwrap_or(why);
            format!("EC2NodeClass {class_name:?} cannot launch because of its extensions: {why}")
        });
        node_pools.push(spec);
    }

    let mut pending = Vec::new();
    let mut bound: BTreeMap<&str, Vec<k8s_openapi::api::core::v1::Pod>> = BTreeMap::new();
    for pod in &manifests.pods {
        match pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            Some(node) => bound.entry(node).or_default().push(pod.clone()),
            None => pending.push(convert::pod_from_k8s(pod)?),
        }
    }
    let mut existing_nodes = Vec::new();
    for node in &manifests.nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let pods = bound.remove(name).unwrap_or_default();
        existing_nodes.push(convert::node_from_k8s(node, &pods)?);
    }
    if let Some((node, pods)) = bound.into_iter().next() {
        let pod = pods
            .first()
            .and_then(|p| p.metadata.name.clone())
            .unwrap_or_default();
        return Err(SimulateError::UnknownNode {
            pod,
            node: node.to_string(),
        });
    }
    let namespace_labels = namespace_labels(manifests);
    let daemonsets = manifests
        .daemon_sets
        .iter()
        .map(convert::daemonset_pod_from_k8s)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Prepared {
        input: SchedulerInput {
            node_pools,
            existing_nodes,
            pods: pending,
            daemonsets,
            namespace_labels,
            options: SchedulerOptions {
                ignore_preferences,
                ..SchedulerOptions::default()
            },
            ..SchedulerInput::default()
        },
        extensions: runs,
    })
}

/// Labels per namespace, for `namespaceSelector`s: those of the given
/// Namespace manifests, and for a pod's namespace without one just the
/// `kubernetes.io/metadata.name` label the API server puts on every namespace.
pub fn namespace_labels(manifests: &Manifests) -> BTreeMap<String, BTreeMap<String, String>> {
    const NAME_LABEL: &str = "kubernetes.io/metadata.name";
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for ns in &manifests.namespaces {
        let Some(name) = ns.metadata.name.clone() else {
            continue;
        };
        let mut labels = ns.metadata.labels.clone().unwrap_or_default();
        labels.insert(NAME_LABEL.to_string(), name.clone());
        out.insert(name, labels);
    }
    for pod in &manifests.pods {
        let name = pod.metadata.namespace.as_deref().unwrap_or("default");
        out.entry(name.to_string())
            .or_insert_with(|| BTreeMap::from([(NAME_LABEL.to_string(), name.to_string())]));
    }
    out
}

fn node_class_of<'a>(
    pool: &NodePool,
    classes: &'a [EC2NodeClass],
) -> Result<&'a EC2NodeClass, SimulateError> {
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let reference = &pool.spec.template.spec.node_class_ref;
    if reference.group != "karpenter.k8s.aws" || reference.kind != "EC2NodeClass" {
        return Err(SimulateError::WrongNodeClassKind {
            node_pool: pool_name,
            group: reference.group.clone(),
            kind: reference.kind.clone(),
        });
    }
    classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(reference.name.as_str()))
        .ok_or_else(|| SimulateError::MissingNodeClass {
            node_pool: pool_name,
            node_class: reference.name.clone(),
        })
}

/// A NodePool in the scheduler's terms.
pub fn node_pool_spec(
    pool: &NodePool,
    instance_types: Vec<InstanceType>,
) -> Result<crate::scheduling::NodePoolSpec, SimulateError> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    let invalid = |field: String, message: String| SimulateError::NodePool {
        node_pool: name.clone(),
        field,
        message,
    };
    let template = &pool.spec.template;
    let mut requirements = Requirements::new();
    for (i, r) in template.spec.requirements.iter().enumerate() {
        let field = format!("spec.template.spec.requirements[{i}]");
        let operator = Operator::from(r.operator);
        let values: Vec<&str> = r.values().iter().map(String::as_str).collect();
        let mut requirement = Requirement::new(&r.key, operator, &values)
            .map_err(|e| invalid(field.clone(), e.to_string()))?;
        if let Some(min) = r.min_values {
            let min = u32::try_from(min)
                .ok()
                .filter(|m| (1..=50).contains(m))
                .ok_or_else(|| {
                    invalid(
                        format!("{field}.minValues"),
                        format!("{min} is out of range; use 1 to 50"),
                    )
                })?;
            requirement = requirement.with_min_values(min);
        }
        requirements.add(requirement);
    }
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    for (key, value) in &labels {
        requirements.add(Requirement::single(key, value));
    }
    requirements.add(Requirement::single(
        crate::scheduling::labels::NODE_POOL,
        &name,
    ));
    let object = format!("NodePool {name}");
    let taints_at = |field: &str, list: Option<&Vec<k8s_openapi::api::core::v1::Taint>>| {
        list.into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| convert::taint_from_k8s(&object, &format!("{field}[{i}]"), t))
            .collect::<Result<Vec<_>, _>>()
    };
    let taints = taints_at("spec.template.spec.taints", template.spec.taints.as_ref())?;
    let startup_taints = taints_at(
        "spec.template.spec.startupTaints",
        template.spec.startup_taints.as_ref(),
    )?;
    let mut limits = BTreeMap::new();
    if let Some(given) = &pool.spec.limits {
        let parsed = Resources::parse(given.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))
            .map_err(|e| invalid("spec.limits".to_string(), e.to_string()))?;
        for key in given.keys() {
            limits.insert(key.clone(), parsed.get(key));
        }
    }
    Ok(crate::scheduling::NodePoolSpec {
        name: name.clone(),
        weight: pool.spec.weight.unwrap_or(0),
        requirements,
        labels,
        taints,
        startup_taints,
        limits,
        instance_types,
        priority_scores: None,
        blocked: None,
    })
}
