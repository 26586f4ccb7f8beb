//! Each NodePool as the scheduler needs it: its EC2NodeClass's instance
//! types after the extensions, its priority scores, and why it may not
//! launch if it may not. Made once per pass ([`pool_specs`]) and shared by
//! every scheduler input the pass builds — a disruption pass asks many
//! what-ifs of the same pools.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;

use super::ClusterSnapshot;
use super::input::{ClusterInput, InputError, PoolOutcome, Prepared};
use crate::apis::NodePool;
use crate::apis::conditions::find_condition;
use crate::aws::instance_types::InstanceTypeProvider;
use crate::extensions::{ConfigMapSource, is_config_map};
use crate::scheduling::node_pool::node_pool_spec;
use crate::scheduling::{Blocked, BlockedReason, NodePoolSpec, SchedulerInput, SchedulerOptions};

/// Every NodePool's spec, what its class's extensions did, and the pools
/// that could not be used.
#[derive(Debug, Default)]
pub struct PoolSpecs {
    /// Specs, in the snapshot's order; blocked pools are kept, with why.
    pub node_pools: Vec<NodePoolSpec>,
    /// One entry per NodePool whose class's extensions ran.
    pub extensions: Vec<PoolOutcome>,
    /// Pools left out or blocked, in the order found.
    pub problems: Vec<InputError>,
}

/// The spec of every NodePool of `snapshot`, each one's instance types from
/// `instance_types`.
///
/// A NodePool being deleted, or whose `Ready` condition is present and not
/// `True`, may not launch (Karpenter uses only ready pools); one without
/// conditions yet (a manifest) is used.
pub fn pool_specs(snapshot: &ClusterSnapshot, instance_types: &InstanceTypeProvider) -> PoolSpecs {
    let mut specs = PoolSpecs::default();
    for pool in &snapshot.node_pools {
        match pool_spec(snapshot, pool, instance_types, &mut specs.extensions) {
            Ok((spec, problem)) => {
                specs.node_pools.push(spec);
                specs.problems.extend(problem);
            }
            Err(problem) => specs.problems.push(problem),
        }
    }
    specs
}

impl PoolSpecs {
    /// The scheduler's input of these pools and `cluster`, with every
    /// problem: the pools' first, then the cluster's.
    pub fn prepare(self, cluster: ClusterInput, options: SchedulerOptions) -> Prepared {
        let PoolSpecs {
            node_pools,
            extensions,
            mut problems,
        } = self;
        problems.extend(cluster.problems);
        Prepared {
            input: SchedulerInput {
                node_pools,
                existing_nodes: cluster.existing_nodes,
                in_flight: cluster.in_flight,
                pods: cluster.pods,
                daemonsets: cluster.daemonsets,
                namespace_labels: cluster.namespace_labels,
                options,
            },
            extensions,
            problems,
        }
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
        spec.blocked = Some(Blocked::new(
            BlockedReason::NodeClassNotFound,
            format!("EC2NodeClass {:?} not found", reference.name),
        ));
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
            spec.blocked = Some(Blocked::new(
                BlockedReason::NodeClassNotResolvable,
                format!("EC2NodeClass {class_name:?} cannot be resolved: {source}"),
            ));
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
    spec.blocked = blocked.or_else(|| static_pool(pool));
    extensions.push(PoolOutcome {
        node_class: class_name,
        node_pool: pool_name,
        outcome,
    });
    Ok((spec, None))
}

/// The snapshot's ConfigMaps, where extension modules are looked up.
pub(super) struct SharedConfigMaps<'a>(pub(super) &'a [Arc<ConfigMap>]);

impl ConfigMapSource for SharedConfigMaps<'_> {
    fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        self.0
            .iter()
            .map(Arc::as_ref)
            .find(|cm| is_config_map(cm, namespace, name))
    }
}

/// A static NodePool (`spec.replicas`) keeps its replicas and never
/// launches for pods; the static capacity controller opens its NodeClaims.
fn static_pool(pool: &NodePool) -> Option<Blocked> {
    let replicas = pool.spec.replicas?;
    Some(Blocked::new(
        BlockedReason::StaticNodePool,
        format!(
            "the NodePool is static (spec.replicas: {replicas}): it keeps that many nodes and never launches for pods"
        ),
    ))
}

/// Why a NodePool may not launch by its own state: being deleted, or not ready.
fn pool_not_usable(pool: &NodePool) -> Option<Blocked> {
    if pool.metadata.deletion_timestamp.is_some() {
        return Some(Blocked::new(
            BlockedReason::NodePoolDeleting,
            "the NodePool is being deleted",
        ));
    }
    pool_not_ready(pool)
}

/// Why a NodePool whose `Ready` condition is present and not `True` may
/// not launch (one without conditions yet, a manifest, may).
pub fn pool_not_ready(pool: &NodePool) -> Option<Blocked> {
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
