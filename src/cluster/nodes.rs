//! One record per node (Karpenter's `StateNode`): the Node, its NodeClaim,
//! its NodePool and the active pods bound to it, kept up to date from the
//! watches' changes one object at a time, so a pass reads each node's pods
//! from its record instead of walking every pod of the cluster, and
//! converts a bound pod (and a node) into the scheduler's terms once per
//! resourceVersion — on the first pass that needs it — not on every pass.
//!
//! Records are keyed by the name pods are bound by (`spec.nodeName`): a
//! record may hold pods of a node whose Node the watch has not shown yet.
//! A record's pod map is shared with the snapshots that hold it and copied
//! only when it changes while one does.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1::{Node, Pod as K8sPod};
use kube::ResourceExt;

use super::pod_key;
use super::pods::{is_active, is_scheduled};
use crate::apis::labels::NODE_POOL_LABEL_KEY;
use crate::apis::{NodeClaim, NodeClaimStatus};
use crate::scheduling::PodKey;
use crate::scheduling::{ConvertError, ExistingNode, Pod, convert};

/// A pod bound to a node, with its conversion made on first use.
#[derive(Debug)]
pub struct BoundPod {
    pod: Arc<K8sPod>,
    /// `None` inside: the pod cannot be converted (the error is made again
    /// when asked for, which is rare).
    converted: OnceLock<Option<Arc<Pod>>>,
}

impl BoundPod {
    fn new(pod: Arc<K8sPod>) -> Self {
        BoundPod {
            pod,
            converted: OnceLock::new(),
        }
    }

    /// The pod as the API server holds it.
    pub fn object(&self) -> &Arc<K8sPod> {
        &self.pod
    }

    /// The pod in the scheduler's terms, converted once.
    pub fn converted(&self) -> Result<Arc<Pod>, ConvertError> {
        let converted = self
            .converted
            .get_or_init(|| convert::pod_from_k8s(&self.pod).ok().map(Arc::new));
        match converted {
            Some(pod) => Ok(pod.clone()),
            None => convert::pod_from_k8s(&self.pod).map(Arc::new),
        }
    }
}

/// The Node's own part of its scheduler form (no pods), converted once per
/// resourceVersion.
type ConvertedNode = Arc<OnceLock<Result<ExistingNode, String>>>;

/// What the cluster state knows of one node.
#[derive(Debug, Clone, Default)]
pub struct StateNode {
    node: Option<Arc<Node>>,
    converted_node: ConvertedNode,
    node_claim: Option<Arc<NodeClaim>>,
    pods: Arc<BTreeMap<PodKey, Arc<BoundPod>>>,
    /// Marked for deletion here or being deleted (set in snapshots).
    pub marked_for_deletion: bool,
    /// Whether pods are nominated to it (set in snapshots).
    pub nominated: bool,
}

impl StateNode {
    /// The Node, once the watch has shown it.
    pub fn node(&self) -> Option<&Arc<Node>> {
        self.node.as_ref()
    }

    /// The NodeClaim the Node registered for (by provider ID or
    /// `status.nodeName`), if any.
    pub fn node_claim(&self) -> Option<&Arc<NodeClaim>> {
        self.node_claim.as_ref()
    }

    /// The NodePool the node belongs to (`karpenter.sh/nodepool` on the
    /// Node or its NodeClaim); `None` for nodes nodewright did not make.
    pub fn node_pool(&self) -> Option<&str> {
        fn label(labels: Option<&BTreeMap<String, String>>) -> Option<&str> {
            labels?.get(NODE_POOL_LABEL_KEY).map(String::as_str)
        }
        let node = self.node.as_ref().and_then(|n| n.metadata.labels.as_ref());
        let claim = self
            .node_claim
            .as_ref()
            .and_then(|c| c.metadata.labels.as_ref());
        label(node).or_else(|| label(claim))
    }

    /// Active pods bound to it, by `namespace/name`.
    pub fn pods(&self) -> impl Iterator<Item = &Arc<BoundPod>> {
        self.pods.values()
    }

    /// Keys of the pods bound to it, in order.
    pub fn pod_keys(&self) -> impl Iterator<Item = &PodKey> {
        self.pods.keys()
    }

    /// Its bound pods in the scheduler's terms but those keyed in `skip`
    /// (the caller holds a newer version); the first pod that cannot be
    /// converted is the error.
    pub fn converted_pods(&self, skip: &HashSet<PodKey>) -> Result<Vec<Pod>, ConvertError> {
        self.pods
            .iter()
            .filter(|(key, _)| !skip.contains(*key))
            .map(|(_, p)| p.converted().map(|p| Pod::clone(&p)))
            .collect()
    }

    /// `node` (the Node as a snapshot holds it: maybe newer than the
    /// record's, maybe flagged as being deleted) with the record's bound
    /// pods, in the scheduler's terms. The Node's part is reused while
    /// `node` is the record's version.
    pub fn existing_node(
        &self,
        node: &Node,
        skip: &HashSet<PodKey>,
    ) -> Result<ExistingNode, ConvertError> {
        let same_version = self
            .node
            .as_ref()
            .is_some_and(|n| n.resource_version() == node.resource_version());
        let mut converted = if same_version {
            let cached = self
                .converted_node
                .get_or_init(|| convert::node_from_k8s(node, &[]).map_err(|e| e.to_string()));
            match cached {
                Ok(converted) => converted.clone(),
                // Made again for its typed error; a node that cannot be read is rare.
                Err(_) => convert::node_from_k8s(node, &[])?,
            }
        } else {
            convert::node_from_k8s(node, &[])?
        };
        converted.marked_for_deletion = node.metadata.deletion_timestamp.is_some();
        converted.pods = self.converted_pods(skip)?;
        Ok(converted)
    }

    /// Whether the record holds `pod` (keyed `key`): `Some(true)` this
    /// version, `Some(false)` another, `None` not at all.
    pub fn holds(&self, key: &PodKey, pod: &K8sPod) -> Option<bool> {
        self.pods.get(key).map(|held| same_version(&held.pod, pod))
    }

    fn is_empty(&self) -> bool {
        self.node.is_none() && self.pods.is_empty()
    }
}

/// Every node's record, and what keeps them current.
#[derive(Debug, Default)]
pub struct NodeRecords {
    by_name: HashMap<String, StateNode>,
    /// Pod key → the record it is in.
    pod_nodes: HashMap<PodKey, String>,
    /// NodeClaims by name, and by the provider ID and node name they registered as.
    claims: HashMap<String, Arc<NodeClaim>>,
    claims_by_provider_id: HashMap<String, String>,
    /// NodeClaim names by the last segment of their providerID (an EC2
    /// instance ID), for events that name instances.
    claims_by_instance: HashMap<String, BTreeSet<String>>,
    claims_by_node_name: HashMap<String, String>,
    /// Node name by provider ID.
    nodes_by_provider_id: HashMap<String, String>,
}

/// The instance behind a providerID (the whole ID when it names no EC2
/// instance).
fn instance_of(provider_id: &str) -> String {
    crate::cloudprovider::ProviderId::parse(provider_id)
        .map_or_else(|| provider_id.to_string(), |p| p.instance_id().to_string())
}

fn claim_status(claim: &NodeClaim) -> (Option<&str>, Option<&str>) {
    let status: Option<&NodeClaimStatus> = claim.status.as_ref();
    (
        status.and_then(|s| s.provider_id.as_deref()),
        status.and_then(|s| s.node_name.as_deref()),
    )
}

/// Whether two pods are the same version of one pod (an object without a
/// resourceVersion, a manifest, is never taken for another).
fn same_version(a: &K8sPod, b: &K8sPod) -> bool {
    a.metadata.uid == b.metadata.uid
        && a.metadata.resource_version.is_some()
        && a.metadata.resource_version == b.metadata.resource_version
}

fn provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref()?.provider_id.as_deref()
}

impl NodeRecords {
    /// Records of every object in a set of manifests (`simulate`), made at once.
    pub fn of(nodes: &[Arc<Node>], claims: &[Arc<NodeClaim>], pods: &[Arc<K8sPod>]) -> Self {
        let mut records = NodeRecords::default();
        records.relist_claims(claims.iter().cloned());
        records.relist_nodes(nodes.iter().cloned());
        records.relist_pods(pods.iter().cloned());
        records
    }

    /// The record of `name`, if it has a Node or bound pods.
    pub fn get(&self, name: &str) -> Option<&StateNode> {
        self.by_name.get(name)
    }

    /// Every record, by name (cheap: records share their pods).
    pub fn all(&self) -> HashMap<String, StateNode> {
        self.by_name.clone()
    }

    /// NodeClaims whose providerID `wanted` accepts, each with the Node
    /// recorded under that providerID: read in place, nothing else copied.
    pub fn claims_with_provider_id(
        &self,
        mut wanted: impl FnMut(&str) -> bool,
    ) -> Vec<(Arc<NodeClaim>, Option<Arc<Node>>)> {
        let mut out = Vec::new();
        for claim in self.claims.values() {
            let Some(id) = claim_status(claim).0.filter(|id| wanted(id)) else {
                continue;
            };
            let node = self
                .nodes_by_provider_id
                .get(id)
                .and_then(|name| self.by_name.get(name))
                .and_then(|record| record.node.clone());
            out.push((claim.clone(), node));
        }
        out
    }

    /// The NodeClaims whose providerID ends in `instance` (`aws:///zone/i-…`
    /// for instance `i-…`), each with the Node recorded under that
    /// providerID.
    pub fn claims_of_instance(&self, instance: &str) -> Vec<(Arc<NodeClaim>, Option<Arc<Node>>)> {
        let names = self.claims_by_instance.get(instance);
        let claims = names
            .into_iter()
            .flatten()
            .filter_map(|n| self.claims.get(n));
        claims
            .map(|claim| {
                let node = claim_status(claim)
                    .0
                    .and_then(|id| self.nodes_by_provider_id.get(id))
                    .and_then(|name| self.by_name.get(name))
                    .and_then(|record| record.node.clone());
                (claim.clone(), node)
            })
            .collect()
    }

    /// A pod was created or changed: it is recorded on its node while it
    /// is bound and active, and nowhere otherwise.
    pub fn apply_pod(&mut self, pod: Arc<K8sPod>) {
        let key = pod_key(&pod);
        let target = (is_scheduled(&pod) && is_active(&pod))
            .then(|| pod.spec.as_ref().and_then(|s| s.node_name.clone()))
            .flatten();
        if self.pod_nodes.get(&key) != target.as_ref() {
            self.remove_pod(&key);
        }
        let Some(target) = target else {
            return;
        };
        let record = self.by_name.entry(target.clone()).or_default();
        let unchanged = record
            .pods
            .get(&key)
            .is_some_and(|held| same_version(&held.pod, &pod));
        if !unchanged {
            Arc::make_mut(&mut record.pods).insert(key.clone(), Arc::new(BoundPod::new(pod)));
        }
        self.pod_nodes.insert(key, target);
    }

    /// A pod was deleted.
    pub fn delete_pod(&mut self, pod: &K8sPod) {
        self.remove_pod(&pod_key(pod));
    }

    /// The pod watch listed every pod again: the records hold those.
    pub fn relist_pods(&mut self, pods: impl IntoIterator<Item = Arc<K8sPod>>) {
        let pods: HashMap<PodKey, Arc<K8sPod>> =
            pods.into_iter().map(|p| (pod_key(&p), p)).collect();
        let gone: Vec<PodKey> = self
            .pod_nodes
            .keys()
            .filter(|k| !pods.contains_key(*k))
            .cloned()
            .collect();
        for key in gone {
            self.remove_pod(&key);
        }
        for pod in pods.into_values() {
            self.apply_pod(pod);
        }
    }

    fn remove_pod(&mut self, key: &PodKey) {
        let Some(name) = self.pod_nodes.remove(key) else {
            return;
        };
        if let Some(record) = self.by_name.get_mut(&name) {
            Arc::make_mut(&mut record.pods).remove(key);
            if record.is_empty() {
                self.by_name.remove(&name);
            }
        }
    }

    /// A Node was created or changed.
    pub fn apply_node(&mut self, node: Arc<Node>) {
        let name = node.name_any();
        let record = self.by_name.entry(name.clone()).or_default();
        let previous_id = record
            .node
            .as_deref()
            .and_then(provider_id)
            .map(str::to_string);
        let changed = record.node.as_ref().is_none_or(|n| {
            n.resource_version().is_none() || n.resource_version() != node.resource_version()
        });
        if changed {
            record.converted_node = ConvertedNode::default();
        }
        let id = provider_id(&node).map(str::to_string);
        record.node = Some(node);
        if let Some(previous) = previous_id
            && id.as_ref() != Some(&previous)
        {
            self.nodes_by_provider_id.remove(&previous);
        }
        if let Some(id) = id {
            self.nodes_by_provider_id.insert(id, name.clone());
        }
        self.link(&name);
    }

    /// A Node was deleted: its record goes once no pod is bound to it.
    pub fn delete_node(&mut self, node: &Node) {
        let name = node.name_any();
        if let Some(id) = provider_id(node)
            && self.nodes_by_provider_id.get(id) == Some(&name)
        {
            self.nodes_by_provider_id.remove(id);
        }
        if let Some(record) = self.by_name.get_mut(&name) {
            record.node = None;
            record.node_claim = None;
            record.converted_node = ConvertedNode::default();
            if record.is_empty() {
                self.by_name.remove(&name);
            }
        }
    }

    /// The Node watch listed every Node again.
    pub fn relist_nodes(&mut self, nodes: impl IntoIterator<Item = Arc<Node>>) {
        let nodes: HashMap<String, Arc<Node>> =
            nodes.into_iter().map(|n| (n.name_any(), n)).collect();
        let gone: Vec<Arc<Node>> = self
            .by_name
            .iter()
            .filter(|(name, _)| !nodes.contains_key(*name))
            .filter_map(|(_, r)| r.node.clone())
            .collect();
        for node in gone {
            self.delete_node(&node);
        }
        for node in nodes.into_values() {
            self.apply_node(node);
        }
    }

    /// A NodeClaim was created or changed.
    pub fn apply_claim(&mut self, claim: Arc<NodeClaim>) {
        let name = claim.name_any();
        if let Some(previous) = self.claims.get(&name).cloned() {
            self.unindex_claim(&previous);
        }
        let (id, node_name) = claim_status(&claim);
        if let Some(id) = id {
            self.claims_by_provider_id
                .insert(id.to_string(), name.clone());
            self.claims_by_instance
                .entry(instance_of(id))
                .or_default()
                .insert(name.clone());
        }
        if let Some(node_name) = node_name {
            self.claims_by_node_name
                .insert(node_name.to_string(), name.clone());
        }
        let node = self.node_of(&claim);
        self.claims.insert(name, claim);
        if let Some(node) = node {
            self.link(&node);
        }
    }

    /// A NodeClaim was deleted.
    pub fn delete_claim(&mut self, claim: &NodeClaim) {
        let name = claim.name_any();
        let Some(previous) = self.claims.remove(&name) else {
            return;
        };
        self.unindex_claim(&previous);
        if let Some(node) = self.node_of(&previous) {
            self.link(&node);
        }
    }

    /// The NodeClaim watch listed every NodeClaim again.
    pub fn relist_claims(&mut self, claims: impl IntoIterator<Item = Arc<NodeClaim>>) {
        let claims: HashMap<String, Arc<NodeClaim>> =
            claims.into_iter().map(|c| (c.name_any(), c)).collect();
        let gone: Vec<Arc<NodeClaim>> = self
            .claims
            .iter()
            .filter(|(name, _)| !claims.contains_key(*name))
            .map(|(_, c)| c.clone())
            .collect();
        for claim in gone {
            self.delete_claim(&claim);
        }
        for claim in claims.into_values() {
            self.apply_claim(claim);
        }
    }

    fn unindex_claim(&mut self, claim: &NodeClaim) {
        let name = claim.name_any();
        let (id, node_name) = claim_status(claim);
        if let Some(id) = id
            && self.claims_by_provider_id.get(id) == Some(&name)
        {
            self.claims_by_provider_id.remove(id);
        }
        if let Some(id) = id
            && let Some(names) = self.claims_by_instance.get_mut(&instance_of(id))
        {
            names.remove(&name);
            if names.is_empty() {
                self.claims_by_instance.remove(&instance_of(id));
            }
        }
        if let Some(node_name) = node_name
            && self.claims_by_node_name.get(node_name) == Some(&name)
        {
            self.claims_by_node_name.remove(node_name);
        }
    }

    /// The name of the Node `claim` registered as, if that Node is recorded.
    fn node_of(&self, claim: &NodeClaim) -> Option<String> {
        let (id, node_name) = claim_status(claim);
        node_name
            .filter(|n| self.by_name.get(*n).is_some_and(|r| r.node.is_some()))
            .map(str::to_string)
            .or_else(|| id.and_then(|id| self.nodes_by_provider_id.get(id).cloned()))
    }

    /// Sets record `name`'s NodeClaim from the claims recorded now.
    fn link(&mut self, name: &str) {
        let Some(record) = self.by_name.get(name) else {
            return;
        };
        let claim = record.node.as_deref().and_then(|node| {
            provider_id(node)
                .and_then(|id| self.claims_by_provider_id.get(id))
                .or_else(|| self.claims_by_node_name.get(name))
                .and_then(|claim| self.claims.get(claim))
                .cloned()
        });
        if let Some(record) = self.by_name.get_mut(name) {
            record.node_claim = claim;
        }
    }
}

#[cfg(test)]
mod tests;
