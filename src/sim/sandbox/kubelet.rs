//! The simulated kubelet (and the cloud node lifecycle controller): for every
//! instance the cloud provider reports (`CloudProvider::list`), a Node
//! registers after the register delay (see [`super::node`] for what it
//! carries), reports `Ready` after the ready delay, and loses its startup
//! taints after the startup-taint delay once Karpenter's registration has
//! synced it (as the daemon owning those taints would remove them). A Node
//! whose instance is gone is deleted, as the cloud node lifecycle
//! controller deletes it. As the node lifecycle controller does, a Node
//! carries `node.kubernetes.io/not-ready:NoSchedule` while it is not ready
//! and `node.kubernetes.io/unschedulable:NoSchedule` while it is cordoned.
//!
//! Readiness, startup taints and deletion concern only the Nodes this
//! kubelet registered: a Node applied from a manifest keeps its status.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use tokio::time::Instant;

use super::node::{self, Registration};
use crate::apis::NodeClaim;
use crate::apis::labels::{INSTANCE_TYPE_LABEL_KEY, NODE_REGISTERED_LABEL_KEY, ZONE_LABEL_KEY};
use crate::cloudprovider::CloudProvider;
use crate::cloudprovider::ProviderId;
use crate::cluster::ClusterState;

/// How the simulated kubelet behaves.
#[derive(Debug, Clone)]
pub struct KubeletSettings {
    /// From the instance's launch to its Node's registration.
    pub register_delay: Duration,
    /// From registration to `Ready=True`.
    pub ready_delay: Duration,
    /// From `Ready` (and registration by the NodeClaim controller) to the
    /// startup taints' removal.
    pub startup_taint_delay: Duration,
    /// How often the cloud's instances are listed.
    pub poll: Duration,
    /// The region, for node names and the region label.
    pub region: String,
    /// The region's zones in order: zone `i` gets addresses `10.0.(16·i).0/20`.
    pub zones: Vec<String>,
    /// `major.minor` of the cluster, for the kubelet version.
    pub kubernetes_version: String,
    /// Whether this kubelet also keeps the node lifecycle controller's
    /// taints (`not-ready`, `unschedulable`): on the double, which has no
    /// such controller; not on a real cluster, whose
    /// kube-controller-manager does it.
    pub lifecycle_taints: bool,
}

/// What the kubelet knows of one instance.
#[derive(Debug)]
struct Instance {
    first_seen: Instant,
    node: Option<String>,
    ip: Option<Ipv4Addr>,
    registered_at: Option<Instant>,
    ready_at: Option<Instant>,
    startup_taints_removed: bool,
}

/// The simulated kubelet of every launched instance.
pub struct Kubelet {
    client: Client,
    state: Arc<ClusterState>,
    cloud: Arc<dyn CloudProvider>,
    settings: KubeletSettings,
    /// By provider ID.
    instances: BTreeMap<String, Instance>,
}

impl Kubelet {
    /// A kubelet for the instances of `cloud`, writing through `client`.
    pub fn new(
        client: Client,
        state: Arc<ClusterState>,
        cloud: Arc<dyn CloudProvider>,
        settings: KubeletSettings,
    ) -> Self {
        Kubelet {
            client,
            state,
            cloud,
            settings,
            instances: BTreeMap::new(),
        }
    }

    /// Runs until dropped: a pass when something is due, when a Node
    /// changes, and at least every poll interval.
    pub async fn run(mut self) {
        let mut changes = std::pin::pin!(self.state.nodes.changes());
        self.state.synced().await;
        loop {
            let due = self.pass().await;
            tokio::select! {
                _ = tokio::time::sleep(due.min(self.settings.poll)) => {}
                _ = changes.next() => {}
            }
        }
    }

    /// The NodeClaims in the API that launched and know their capacity, by
    /// provider ID.
    fn launched_claims(&self) -> BTreeMap<String, Arc<NodeClaim>> {
        self.state
            .node_claims
            .all()
            .into_iter()
            .filter_map(|claim| {
                let status = claim.status.as_ref()?;
                status.capacity.as_ref()?;
                Some((status.provider_id.clone()?, claim.clone()))
            })
            .collect()
    }

    /// Does what is due now; returns how long until the next step is due.
    pub async fn pass(&mut self) -> Duration {
        let launched = match self.cloud.list().await {
            Ok(launched) => launched,
            Err(error) => {
                tracing::warn!(%error, "simulated kubelet: cannot list instances; retrying");
                return self.settings.poll;
            }
        };
        let now = Instant::now();
        let mut next = Duration::MAX;
        let mut live = BTreeSet::new();
        let known_claims = self.launched_claims();
        for claim in &launched {
            let Some(provider_id) = claim.status.as_ref().and_then(|s| s.provider_id.clone())
            else {
                continue;
            };
            live.insert(provider_id.clone());
            // The machine's facts as the API's NodeClaim holds them, when the
            // cloud does not report capacity (EC2 instances): a real kubelet
            // knows its machine; this one reads it from the launched claim,
            // and waits for it.
            let known = known_claims.get(&provider_id);
            let reported = claim.status.as_ref().is_some_and(|s| s.capacity.is_some());
            if known.is_none() && !reported {
                next = next.min(self.settings.poll);
                continue;
            }
            let claim = known.map(|c| c.as_ref()).unwrap_or(claim);
            self.instances
                .entry(provider_id.clone())
                .or_insert_with(|| Instance {
                    first_seen: now,
                    node: None,
                    ip: None,
                    registered_at: None,
                    ready_at: None,
                    startup_taints_removed: false,
                });
            if let Some(wait) = self.step(&provider_id, claim, now).await {
                next = next.min(wait);
            }
        }
        let gone: Vec<String> = self
            .instances
            .keys()
            .filter(|id| !live.contains(*id))
            .cloned()
            .collect();
        if self.settings.lifecycle_taints {
            self.sync_lifecycle_taints().await;
        }
        for provider_id in gone {
            let node = self
                .instances
                .get(&provider_id)
                .and_then(|i| i.node.clone());
            let deleted = match node {
                Some(name) => self.delete_node(&provider_id, &name).await,
                None => true,
            };
            if deleted {
                self.instances.remove(&provider_id);
            } else {
                next = next.min(self.settings.poll);
            }
        }
        next
    }

    /// The next step of one instance, if it is due; how long until the one
    /// after it is due (`None`: nothing timed is pending).
    async fn step(
        &mut self,
        provider_id: &str,
        claim: &NodeClaim,
        now: Instant,
    ) -> Option<Duration> {
        let instance = self.instances.get(provider_id)?;
        let due = |since: Instant, delay: Duration| {
            let at = since + delay;
            (at > now).then(|| at - now)
        };
        match (instance.registered_at, instance.ready_at) {
            (None, _) => match due(instance.first_seen, self.settings.register_delay) {
                Some(wait) => Some(wait),
                None => {
                    self.register(provider_id, claim).await;
                    Some(self.settings.ready_delay)
                }
            },
            (Some(registered), None) => match due(registered, self.settings.ready_delay) {
                Some(wait) => Some(wait),
                None => {
                    self.report_ready(provider_id).await;
                    Some(self.settings.startup_taint_delay)
                }
            },
            (Some(_), Some(ready)) if !instance.startup_taints_removed => {
                match due(ready, self.settings.startup_taint_delay) {
                    Some(wait) => Some(wait),
                    // Waits for registration, which a Node change announces.
                    None => {
                        self.remove_startup_taints(provider_id, claim).await;
                        None
                    }
                }
            }
            _ => None,
        }
    }

    /// Registers the Node of a launched instance.
    async fn register(&mut self, provider_id: &str, claim: &NodeClaim) {
        let zone = claim
            .labels()
            .get(ZONE_LABEL_KEY)
            .cloned()
            .unwrap_or_default();
        let zone_index = self
            .settings
            .zones
            .iter()
            .position(|z| *z == zone)
            .unwrap_or(0);
        let parsed = ProviderId::parse(provider_id);
        let instance = parsed.as_ref().map_or(provider_id, ProviderId::instance_id);
        let ip = self.free_ip(zone_index, node::preferred_host(instance));
        let name = node::node_name(&self.settings.region, ip);
        let object = node::registering_node(
            claim,
            &Registration {
                name: &name,
                ip,
                region: &self.settings.region,
                kubernetes_version: &self.settings.kubernetes_version,
            },
        );
        let api: Api<Node> = Api::all(self.client.clone());
        let result = api.create(&PostParams::default(), &object).await;
        let Some(tracked) = self.instances.get_mut(provider_id) else {
            return;
        };
        match result {
            Ok(_) => {
                tracked.node = Some(name.clone());
                tracked.ip = Some(ip);
                tracked.registered_at = Some(Instant::now());
                tracing::info!(
                    node = %name,
                    nodeclaim = %claim.name_any(),
                    instance_type = claim.labels().get(INSTANCE_TYPE_LABEL_KEY).map(String::as_str).unwrap_or_default(),
                    %zone,
                    "node registered"
                );
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                // A Node of that name exists (applied by hand): its address is
                // taken; the next pass picks another.
                tracked.ip = Some(ip);
                tracing::debug!(node = %name, "node name taken; trying another address");
            }
            Err(error) => {
                tracing::warn!(node = %name, %error, "simulated kubelet: cannot register node; retrying")
            }
        }
    }

    /// The first address from `host` on that no Node and no instance uses.
    fn free_ip(&self, zone: usize, host: u32) -> Ipv4Addr {
        let mut used: BTreeSet<Ipv4Addr> = self.instances.values().filter_map(|i| i.ip).collect();
        used.extend(
            self.state
                .nodes
                .all()
                .iter()
                .filter_map(|n| node::internal_ip(n))
                .filter_map(|ip| ip.parse::<Ipv4Addr>().ok()),
        );
        (0..)
            .map(|k| node::private_ip(zone, host.wrapping_add(k)))
            .find(|ip| !used.contains(ip))
            .unwrap_or_else(|| node::private_ip(zone, host))
    }

    async fn report_ready(&mut self, provider_id: &str) {
        let Some(name) = self.instances.get(provider_id).and_then(|i| i.node.clone()) else {
            return;
        };
        let patch = serde_json::json!({"status": {"conditions": node::conditions(true)}});
        let api: Api<Node> = Api::all(self.client.clone());
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                if let Some(tracked) = self.instances.get_mut(provider_id) {
                    tracked.ready_at = Some(Instant::now());
                }
                tracing::info!(node = %name, "node Ready");
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {
                // Deleted by hand: this kubelet stops reporting for it.
                if let Some(tracked) = self.instances.get_mut(provider_id) {
                    tracked.ready_at = Some(Instant::now());
                    tracked.startup_taints_removed = true;
                }
            }
            Err(error) => {
                tracing::warn!(node = %name, %error, "simulated kubelet: cannot report ready; retrying")
            }
        }
    }

    /// Removes the claim's startup taints from its Node once the NodeClaim
    /// controller registered it (earlier, registration would add them back).
    async fn remove_startup_taints(&mut self, provider_id: &str, claim: &NodeClaim) {
        let Some(name) = self.instances.get(provider_id).and_then(|i| i.node.clone()) else {
            return;
        };
        let Some(current) = self.state.nodes.store().get(&ObjectRef::new(&name)) else {
            return;
        };
        if !current.labels().contains_key(NODE_REGISTERED_LABEL_KEY) {
            return;
        }
        let startup = claim.spec.startup_taints.clone().unwrap_or_default();
        let taints = current
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let kept: Vec<_> = taints
            .iter()
            .filter(|t| {
                !startup
                    .iter()
                    .any(|s| s.key == t.key && s.effect == t.effect)
            })
            .cloned()
            .collect();
        if kept.len() != taints.len() {
            let patch = serde_json::json!({
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "spec": {"taints": if kept.is_empty() { serde_json::Value::Null } else { serde_json::json!(kept) }},
            });
            let api: Api<Node> = Api::all(self.client.clone());
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => tracing::info!(node = %name, "startup taints removed"),
                Err(kube::Error::Api(status)) if status.code == 409 => return,
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => {
                    tracing::warn!(node = %name, %error, "simulated kubelet: cannot remove startup taints; retrying");
                    return;
                }
            }
        }
        if let Some(tracked) = self.instances.get_mut(provider_id) {
            tracked.startup_taints_removed = true;
        }
    }

    /// Keeps the taints the node lifecycle controller owns in step with
    /// each Node (see [`node::lifecycle_taints`]); a conflict is retried on
    /// the next pass.
    async fn sync_lifecycle_taints(&self) {
        let api: Api<Node> = Api::all(self.client.clone());
        for current in self.state.nodes.all() {
            if current.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let name = current.name_any();
            let reported = self
                .instances
                .values()
                .any(|i| i.node.as_deref() == Some(name.as_str()));
            let Some(taints) = node::lifecycle_taints(&current, reported) else {
                continue;
            };
            let patch = serde_json::json!({
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "spec": {"taints": if taints.is_empty() { serde_json::Value::Null } else { serde_json::json!(taints) }},
            });
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => tracing::debug!(node = %name, "lifecycle taints updated"),
                Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {}
                Err(error) => {
                    tracing::warn!(node = %name, %error, "cannot update the node's taints")
                }
            }
        }
    }

    /// Deletes the Node of an instance that is gone; false when it must be
    /// tried again.
    async fn delete_node(&self, provider_id: &str, name: &str) -> bool {
        let api: Api<Node> = Api::all(self.client.clone());
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(node = %name, %provider_id, "instance is gone; deleting its node");
                true
            }
            Err(kube::Error::Api(status)) if status.code == 404 => true,
            Err(error) => {
                tracing::warn!(node = %name, %error, "cannot delete the node of a terminated instance; retrying");
                false
            }
        }
    }
}
