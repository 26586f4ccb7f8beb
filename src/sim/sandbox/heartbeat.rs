//! What a kubelet keeps doing for its Node on a real control plane, where
//! kube-controller-manager's node lifecycle controller watches it: the
//! node's Lease in `kube-node-lease` renewed every 10 seconds (a kubelet's
//! `nodeLeaseDurationSeconds` is 40, renewed at a quarter of it), and the
//! node's conditions' `lastHeartbeatTime` posted every five minutes
//! (`nodeStatusReportFrequency`). Without them the controller marks the
//! node `Unknown` after `--node-monitor-grace-period` (50 s) and taints it
//! `node.kubernetes.io/unreachable`.
//!
//! Only the Nodes the simulated kubelet registered (the
//! [`super::node::SIMULATED_ANNOTATION`]) are kept; the double has no node
//! lifecycle controller, so this runs on a cluster only.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::time::Instant;

use super::node::is_simulated;
use crate::cluster::ClusterState;

/// The namespace of node Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// How long a node Lease is held (a kubelet's default).
pub const LEASE_SECONDS: i32 = 40;
/// How often Leases are renewed.
pub const RENEW_EVERY: Duration = Duration::from_secs(10);
/// How often node conditions are posted when nothing changed.
pub const STATUS_EVERY: Duration = Duration::from_secs(5 * 60);
/// Renewals in flight at once.
const PARALLEL: usize = 32;
/// The field manager of these writes, as a kubelet's.
const MANAGER: &str = "kubelet";

/// Renews the Leases and posts the heartbeats of simulated nodes.
pub struct Heartbeat {
    client: Client,
    state: Arc<ClusterState>,
    /// When each node's conditions were last posted.
    posted: HashMap<String, Instant>,
}

impl Heartbeat {
    /// Heartbeats through `client` for the simulated nodes in `state`.
    pub fn new(client: Client, state: Arc<ClusterState>) -> Self {
        Heartbeat {
            client,
            state,
            posted: HashMap::new(),
        }
    }

    /// Runs until dropped: a pass every [`RENEW_EVERY`], and a node's first
    /// Lease as soon as it appears. Only the new node's: renewing every
    /// node whenever one registers made a fleet of N nodes coming up cost
    /// N² writes (42,485 Lease writes for 1,000 nodes), which starved the
    /// API server of the writes that bring the fleet up.
    pub async fn run(mut self) {
        self.state.synced().await;
        let mut changes = std::pin::pin!(self.state.nodes.changes());
        let mut next = Instant::now();
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {
                    self.pass().await;
                    next = Instant::now() + RENEW_EVERY;
                }
                Some(node) = changes.next() => {
                    let name = node.name_any();
                    let new = is_simulated(&node)
                        && node.metadata.deletion_timestamp.is_none()
                        && !self.posted.contains_key(&name);
                    if new {
                        // Registration posted its conditions; the next post
                        // is due a report period later.
                        self.posted.insert(name, Instant::now());
                        beat(self.client.clone(), node, false).await;
                    }
                }
            }
        }
    }

    /// Renews every simulated node's Lease; posts the conditions of those
    /// whose last post is older than [`STATUS_EVERY`].
    pub async fn pass(&mut self) {
        let nodes: Vec<Arc<Node>> = self
            .state
            .nodes
            .all()
            .into_iter()
            .filter(|n| is_simulated(n) && n.metadata.deletion_timestamp.is_none())
            .collect();
        let now = Instant::now();
        let names: HashSet<String> = nodes.iter().map(|n| n.name_any()).collect();
        self.posted.retain(|name, _| names.contains(name));
        let mut writes = Vec::new();
        for node in &nodes {
            let name = node.name_any();
            let due = match self.posted.get(&name) {
                Some(at) => now.duration_since(*at) >= STATUS_EVERY,
                None => {
                    // Registration posted them; the next post is due a
                    // report period later.
                    self.posted.insert(name.clone(), now);
                    false
                }
            };
            if due {
                self.posted.insert(name.clone(), now);
            }
            writes.push(beat(self.client.clone(), node.clone(), due));
        }
        futures::stream::iter(writes)
            .buffer_unordered(PARALLEL)
            .collect::<Vec<()>>()
            .await;
    }
}

/// Renews `node`'s Lease, and posts its conditions' heartbeat when `post`.
async fn beat(client: Client, node: Arc<Node>, post: bool) {
    let name = node.name_any();
    let now = k8s_openapi::jiff::Timestamp::now();
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": NODE_LEASE_NAMESPACE,
            // As a kubelet's: collected with its Node.
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Node", "name": name,
                "uid": node.uid().unwrap_or_default(),
            }],
        },
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now),
        },
    });
    let leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    if let Err(error) = leases
        .patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&lease),
        )
        .await
    {
        tracing::warn!(node = %name, %error, "simulated kubelet: cannot renew the node's lease; retrying");
    }
    if !post {
        return;
    }
    // A strategic merge keyed by condition type: only the heartbeats move.
    let conditions: Vec<_> = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| json!({"type": c.type_, "lastHeartbeatTime": now.to_string()}))
        .collect();
    if conditions.is_empty() {
        return;
    }
    let nodes: Api<Node> = Api::all(client);
    if let Err(error) = nodes
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Strategic(&json!({"status": {"conditions": conditions}})),
        )
        .await
    {
        tracing::warn!(node = %name, %error, "simulated kubelet: cannot post the node's status; retrying");
    }
}
