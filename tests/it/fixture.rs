//! A cluster for controller tests: the API server double, the cluster
//! state, and the simulated cloud, with an EC2NodeClass whose status lets
//! launches work; NodeClaim and Node builders; a poll-until helper.

use std::sync::Arc;
use std::time::Duration;

use apiserver_double::ApiServer;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use nodewright::apis::{EC2NodeClass, NodeClaim};
use nodewright::aws::catalog::Catalog;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::cloudprovider::UnavailableOfferings;
use nodewright::cloudprovider::simulated::{SimulatedCloudProvider, SimulatedSettings};
use nodewright::cluster::ClusterState;
use nodewright::controllers::nodeclaim::{NodeClaimContext, reconcile};
use nodewright::controllers::recorder::Recorder;
use nodewright::extensions::Extensions;
use nodewright_host::HostConfig;
use serde_json::json;

const CLASS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: NodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{id: subnet-1}]
  securityGroupSelectorTerms: [{id: sg-1}]
"#;

pub fn claim(name: &str) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "general", "team": "web"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            "startupTaints": [{"key": "agent.example.com/starting", "effect": "NoSchedule"}],
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["general"]}
            ]
        }
    }))
    .unwrap()
}

pub struct Cluster {
    pub server: ApiServer,
    pub ctx: NodeClaimContext,
    pub cloud: Arc<SimulatedCloudProvider>,
    pub driver: tokio::task::JoinHandle<()>,
}

pub async fn cluster() -> Cluster {
    let server = nodewright::sim::double::server();
    let client = server.client();
    let mut class: EC2NodeClass = nodewright::yaml::from_str(CLASS).unwrap();
    let classes: Api<EC2NodeClass> = Api::all(client.clone());
    class = classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    let status = json!({"status": {
        "subnets": [{"id": "subnet-1", "zone": "us-east-1a"}],
        "amis": [{"id": "ami-amd64", "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]
    }});
    classes
        .patch_status(
            &class.metadata.name.unwrap(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .unwrap();
    let (state, driver) = ClusterState::start(client.clone());
    let driver = tokio::spawn(driver);
    state.synced().await;
    let unavailable = Arc::new(UnavailableOfferings::default());
    let types = Arc::new(InstanceTypeProvider::new(
        Arc::new(Catalog::embedded("us-east-1").unwrap()),
        Arc::new(Extensions::new(HostConfig::default()).unwrap()),
        unavailable.clone(),
    ));
    let cloud = Arc::new(SimulatedCloudProvider::new(
        types,
        unavailable,
        SimulatedSettings::default(),
    ));
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "nodewright".to_string(),
            instance: None,
        },
    );
    let ctx = NodeClaimContext {
        client,
        state,
        cloud: cloud.clone(),
        recorder,
    };
    Cluster {
        server,
        ctx,
        cloud,
        driver,
    }
}

impl Cluster {
    pub fn claims(&self) -> Api<NodeClaim> {
        Api::all(self.ctx.client.clone())
    }

    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.ctx.client.clone())
    }

    /// Reconciles `name` once against what the cluster state holds, after
    /// waiting for the state to catch up with the API server.
    pub async fn pass(&self, name: &str) {
        let stored = self.claims().get_opt(name).await.unwrap();
        let Some(stored) = stored else { return };
        let version = stored.metadata.resource_version.clone();
        for _ in 0..200 {
            let seen = self
                .ctx
                .state
                .node_claims
                .all()
                .into_iter()
                .find(|c| c.metadata.name.as_deref() == Some(name));
            if seen.is_some_and(|c| c.metadata.resource_version == version) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        reconcile(&self.ctx, &stored).await.unwrap();
    }

    pub async fn settle_nodes(&self, count: usize) {
        for _ in 0..200 {
            if self.ctx.state.nodes.all().len() == count {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the cluster state never saw {count} nodes");
    }

    /// Moves NodeClaim `name`'s launch a minute into the past (past
    /// `LAUNCH_SETTLING`, when the cloud's "not found" for its instance is
    /// believed) and waits for the cluster state to see it.
    pub async fn backdate_launch(&self, name: &str) {
        let claim = self.claims().get(name).await.unwrap();
        let mut conditions = claim.status.unwrap().conditions.unwrap();
        let launched = conditions
            .iter_mut()
            .find(|c| c.type_ == "Launched")
            .expect("a Launched condition");
        launched.last_transition_time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(60),
        );
        let patch = json!({"status": {"conditions": conditions}});
        let written = self
            .claims()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        for _ in 0..200 {
            let seen = self
                .ctx
                .state
                .node_claims
                .all()
                .into_iter()
                .find(|c| c.metadata.name.as_deref() == Some(name));
            if seen
                .is_some_and(|c| c.metadata.resource_version == written.metadata.resource_version)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the cluster state never saw {name} backdated");
    }

    pub fn condition(claim: &NodeClaim, type_: &str) -> (String, String) {
        let c = claim
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == type_).cloned())
            .unwrap_or_else(|| panic!("no {type_} condition"));
        (format!("{:?}", c.status), c.reason.unwrap_or_default())
    }
}

pub fn node_for(claim: &NodeClaim, ready: bool, taints: serde_json::Value) -> Node {
    let provider_id = claim.status.as_ref().unwrap().provider_id.clone().unwrap();
    serde_json::from_value(json!({
        "metadata": {"name": "ip-10-0-0-1.ec2.internal", "labels": {"kubernetes.io/hostname": "ip-10-0-0-1"}},
        "spec": {"providerID": provider_id, "taints": taints},
        "status": {
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}
        }
    }))
    .unwrap()
}

/// Polls `check` every 50 ms until it returns `Some`, for at most `limit`.
async fn poll_until<T, F, Fut>(limit: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(found) = check().await {
            return Some(found);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `check` every 50 ms until it returns `Some`; fails naming `what`
/// after `limit`.
pub async fn eventually_within<T, F, Fut>(what: &str, limit: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    match poll_until(limit, check).await {
        Some(found) => found,
        None => panic!("timed out waiting for {what}"),
    }
}

/// Polls `check` as [`eventually_within`]; on timeout, fails with what the
/// API server behind `client` holds (NodeClaims, Nodes, pods, events), so
/// a failure in CI says what the cluster looked like.
pub async fn eventually_showing<T, F, Fut>(
    client: &kube::Client,
    what: &str,
    limit: Duration,
    check: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    match poll_until(limit, check).await {
        Some(found) => found,
        None => panic!(
            "timed out waiting for {what}; the cluster:\n{}",
            cluster_dump(client).await
        ),
    }
}

/// One line per NodeClaim, Node and pod, and the latest events.
pub async fn cluster_dump(client: &kube::Client) -> String {
    use k8s_openapi::api::core::v1::{Event, Pod};
    use kube::api::ListParams;
    let lp = ListParams::default();
    let mut out = String::new();
    let claims = Api::<NodeClaim>::all(client.clone()).list(&lp).await;
    for claim in claims.map(|l| l.items).unwrap_or_default() {
        let status = claim.status.clone().unwrap_or_default();
        let conditions: Vec<String> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| {
                format!(
                    "{}={:?}({})",
                    c.type_,
                    c.status,
                    c.reason.as_deref().unwrap_or("")
                )
            })
            .collect();
        out += &format!(
            "NodeClaim {} deleting={} provider={:?} node={:?} taints={:?} {}\n",
            claim.metadata.name.as_deref().unwrap_or(""),
            claim.metadata.deletion_timestamp.is_some(),
            status.provider_id,
            status.node_name,
            claim.spec.taints,
            conditions.join(" ")
        );
    }
    let nodes = Api::<Node>::all(client.clone()).list(&lp).await;
    for node in nodes.map(|l| l.items).unwrap_or_default() {
        let spec = node.spec.clone().unwrap_or_default();
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone());
        let taints: Vec<String> = spec
            .taints
            .iter()
            .flatten()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect();
        out += &format!(
            "Node {} deleting={} provider={:?} unschedulable={:?} ready={:?} taints={:?}\n",
            node.metadata.name.as_deref().unwrap_or(""),
            node.metadata.deletion_timestamp.is_some(),
            spec.provider_id,
            spec.unschedulable,
            ready,
            taints
        );
    }
    let pods = Api::<Pod>::all(client.clone()).list(&lp).await;
    for pod in pods.map(|l| l.items).unwrap_or_default() {
        out += &format!(
            "Pod {}/{} phase={:?} node={:?} deleting={}\n",
            pod.metadata.namespace.as_deref().unwrap_or(""),
            pod.metadata.name.as_deref().unwrap_or(""),
            pod.status.as_ref().and_then(|s| s.phase.clone()),
            pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            pod.metadata.deletion_timestamp.is_some()
        );
    }
    let events = Api::<Event>::all(client.clone()).list(&lp).await;
    let events = events.map(|l| l.items).unwrap_or_default();
    for event in events.iter().rev().take(40).rev() {
        out += &format!(
            "Event {} {}/{} {} {}\n",
            event.type_.as_deref().unwrap_or(""),
            event.involved_object.kind.as_deref().unwrap_or(""),
            event.involved_object.name.as_deref().unwrap_or(""),
            event.reason.as_deref().unwrap_or(""),
            event.message.as_deref().unwrap_or("")
        );
    }
    out
}
