//! The cluster as provisioning sees it: the shared in-memory view the
//! controllers read ([`ClusterState`]), the objects a decision is made from
//! ([`ClusterSnapshot`]), one record per node ([`StateNode`]), the rules
//! about pods ([`pods`]) and the conversion into the scheduler's input:
//! NodePool specs made once per pass ([`pool_specs`]) and the cluster's
//! part, which can leave nodes out ([`cluster_input`]); [`scheduler_input`]
//! is the two together. Provisioning, disruption's what-ifs and `simulate`
//! all build their input here, so they agree on which pods are pending,
//! which nodes and NodeClaims exist and what each NodePool may launch.

mod converted;
mod input;
mod nodes;
mod overlays;
pub mod pods;
mod pools;
mod state;

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::apis::{EC2NodeClass, NodeClaim, NodePool};
use crate::scheduling::PodKey;

pub use converted::ConvertedPods;
pub use input::{ClusterInput, InputError, PoolOutcome, Prepared, cluster_input, scheduler_input};
pub use nodes::{BoundPod, NodeRecords, StateNode};
pub use overlays::evaluate_overlays;
pub use pools::{PoolSpecs, pool_not_ready, pool_specs};
pub use state::{ClusterState, StateDriver, Watched};

/// The objects of a cluster a provisioning decision is made from, shared
/// rather than copied (a controller's reflector stores hand out `Arc`s).
#[derive(Debug, Clone, Default)]
pub struct ClusterSnapshot {
    /// NodePools.
    pub node_pools: Vec<Arc<NodePool>>,
    /// EC2NodeClasses.
    pub node_classes: Vec<Arc<EC2NodeClass>>,
    /// NodeClaims; those without a registered Node are in-flight capacity.
    pub node_claims: Vec<Arc<NodeClaim>>,
    /// Nodes.
    pub nodes: Vec<Arc<Node>>,
    /// Pods: bound ones count on their node, unbound ones are to be placed.
    pub pods: Vec<Arc<Pod>>,
    /// DaemonSets: overhead on every node they would run on.
    pub daemon_sets: Vec<Arc<DaemonSet>>,
    /// Namespaces, for affinity terms' `namespaceSelector`s.
    pub namespaces: Vec<Arc<Namespace>>,
    /// PodDisruptionBudgets: a node whose pods one of them keeps is not
    /// disrupted.
    pub pdbs: Vec<Arc<PodDisruptionBudget>>,
    /// ConfigMaps extension modules may be stored in.
    pub config_maps: Vec<Arc<ConfigMap>>,
    /// Pods already planned onto a NodeClaim or Node that has not taken
    /// them yet, with that NodeClaim's or Node's name: they are not
    /// provisioned for again.
    pub nominated: HashMap<PodKey, String>,
    /// Each node's record (see [`StateNode`]), by the name pods are bound
    /// by, when the snapshot comes from a [`ClusterState`]; `None` for
    /// manifests, whose records are made when an input is built.
    pub state_nodes: Option<HashMap<String, StateNode>>,
}

impl ClusterSnapshot {
    /// The NodeClaim or Node `pod` is nominated to, if any (no key is built
    /// while nothing is nominated, as in most rounds).
    pub fn nomination(&self, pod: &Pod) -> Option<&String> {
        if self.nominated.is_empty() {
            return None;
        }
        self.nominated.get(&pod_key(pod))
    }

    /// Each Node with the NodeClaim that stands for it (the one whose
    /// `status.providerID` is the Node's), in the order of `nodes`.
    pub fn nodes_with_claims(&self) -> Vec<(&Arc<Node>, Option<&Arc<NodeClaim>>)> {
        let by_provider: HashMap<&str, &Arc<NodeClaim>> = self
            .node_claims
            .iter()
            .filter_map(|c| Some((c.status.as_ref()?.provider_id.as_deref()?, c)))
            .collect();
        self.nodes
            .iter()
            .map(|node| {
                let claim = node
                    .spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .and_then(|id| by_provider.get(id).copied());
                (node, claim)
            })
            .collect()
    }
}

/// The key of a pod (namespace `default` when unset), by which pods are
/// reported and nominated.
pub fn pod_key(pod: &Pod) -> PodKey {
    PodKey::new(
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default(),
    )
}
