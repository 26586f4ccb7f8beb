//! `nodewright sandbox --cloud-provider aws` against moto behind the
//! fault-injecting proxy ([`crate::aws_proxy::FaultPlan`]): a share of the
//! controller's AWS calls is throttled in each service's own error shape
//! and another share fails with a 500. The same scale-up runs fault-free,
//! at 20 % throttling + 5 % errors and at 50 % + 10 % (fixed seeds); each
//! ends with every pod Running, every instance moto runs for the cluster
//! owned by a NodeClaim and every NodeClaim's instance running, and no
//! instance left once the sandbox stops. The times to Running are printed
//! (`--nocapture`) and reported in docs/reliability.md. A deleted
//! NodeClaim and an interruption, a scale-down that consolidation answers
//! and a drift that replaces every node are then replayed at both fault
//! levels; and a scale-up while EC2 does not know the instances it has just
//! launched (eventual consistency), with a NodeClaim deleted in that span;
//! and a stop after the run spent the controllers' retry quota still
//! terminates every instance.
//! Throughout, [`watch::Watch`] checks from outside that no NodeClaim
//! points at a missing instance longer than the garbage collection's
//! period and no instance runs without a NodeClaim long enough to be
//! garbage collected.
//!
//! The tests of this module run one at a time, so that their times are
//! not those of two sandboxes sharing the machine.

mod watch;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{Filter, InstanceStateName};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use nodewright::apis::{EC2NodeClass, NodeClaim, NodePool};
use nodewright::aws::clients::{AwsClients, AwsSettings};
use nodewright::controllers::provisioning::BatchWindows;
use nodewright::sim::sandbox::{CloudChoice, Sandbox, SandboxSettings};

use crate::aws_proxy::{AwsProxy, Fault, FaultPlan, Rewrite, Tally, start_with_faults};
use crate::moto::{moto, moto_clients};
use crate::sandbox_aws::network;
use watch::Watch;

/// How long any one wait may take: far above what a run needs (the
/// figures are in docs/reliability.md), as builds may share the 2 cores.
const LIMIT: Duration = Duration::from_secs(300);
/// Pods of the Deployment; one per m5.large (each asks for a whole CPU).
const REPLICAS: usize = 3;
/// How often garbage collection runs in its first 200 s, in which each
/// scenario runs (`src/controllers/nodeclaim/garbage_collection.rs`): no
/// NodeClaim may point at a missing instance longer.
const GC_PERIOD: Duration = Duration::from_secs(10);
/// How long a NodeClaim being deleted may point at an instance that is no
/// longer running: garbage collection's period once past its first passes
/// (2 minutes). Its pods are gone and it counts for no capacity; its
/// finalizer (and the node's, before it) terminates the instance, then
/// looks every 5 s (`TERMINATING_POLL`) until EC2 no longer lists it. At
/// 50 % throttling + 10 % errors a scenario spends its retry quota, after
/// which 60 % of those looks fail outright: 56 s was seen. (In EC2 an
/// instance stays `shutting-down` for a minute or so, and its NodeClaim
/// waits as long.)
const FINALIZE_LIMIT: Duration = Duration::from_secs(120);
/// How long EC2 does not know an instance after its launch, in the
/// eventual-consistency scenario: under `LAUNCH_SETTLING` (15 s), within
/// which the controller does not believe a "not found" for it.
const HIDDEN: Duration = Duration::from_secs(8);

/// One test of this module at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn manifests(label: &str, replicas: usize) -> String {
    format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: general}}
spec:
  disruption: {{consolidateAfter: Never}}
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
      - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: {label}-role
  amiFamily: AL2023
  amiSelectorTerms: [{{tags: {{team: {label}}}}}]
  subnetSelectorTerms: [{{tags: {{discovery: {label}}}}}]
  securityGroupSelectorTerms: [{{tags: {{discovery: {label}}}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: app
        image: public.ecr.aws/nginx/nginx:1.27
        resources: {{requests: {{cpu: "1", memory: 1Gi}}}}
"#
    )
}

/// moto launches a CreateFleet instance without its launch template's
/// security groups (its `groupSet` is empty), where EC2 gives it those
/// groups: DescribeInstances answers get the cluster's group `group`, or
/// every node would look drifted (`SecurityGroupDrift`).
fn with_group(group: String) -> Rewrite {
    Arc::new(move |operation: &str, body: bytes::Bytes| {
        let text = String::from_utf8_lossy(&body);
        if operation != "DescribeInstances" || !text.contains("<groupSet/>") {
            return body;
        }
        let set = format!("<groupSet><item><groupId>{group}</groupId></item></groupSet>");
        bytes::Bytes::from(text.replace("<groupSet/>", &set))
    })
}

/// A sandbox on moto behind a proxy failing calls as its plan says.
struct Scenario {
    label: String,
    sandbox: Sandbox,
    proxy: AwsProxy,
    plan: Arc<FaultPlan>,
    /// Straight to moto, never faulted: what the test checks with.
    clients: AwsClients,
    queue_url: String,
    dir: PathBuf,
    started: Instant,
    watch: Watch,
    /// Pods the Deployment starts with.
    replicas: usize,
}

impl Scenario {
    async fn start(label: &str, plan: Arc<FaultPlan>) -> Scenario {
        Scenario::start_with(label, plan, REPLICAS).await
    }

    /// [`Scenario::start`] with a Deployment of `replicas` pods.
    async fn start_with(label: &str, plan: Arc<FaultPlan>, replicas: usize) -> Scenario {
        if std::env::var_os("NODEWRIGHT_TEST_LOG").is_some() {
            nodewright::sim::sandbox::log::init(nodewright::sim::sandbox::log::LogFormat::Text);
        }
        let clients = moto_clients().await;
        let group = network(&clients, label, &format!("{label}-role")).await;
        let queue_url = clients
            .sqs
            .create_queue()
            .queue_name(label)
            .send()
            .await
            .unwrap()
            .queue_url
            .unwrap();
        let proxy =
            start_with_faults(&moto().endpoint, with_group(group), Some(plan.clone())).await;
        let dir = std::env::temp_dir().join(format!("nodewright-{label}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("all.yaml"), manifests(label, replicas)).unwrap();
        let started = Instant::now();
        let sandbox = Sandbox::start(
            SandboxSettings {
                manifests: vec![dir.clone()],
                cloud: CloudChoice::Aws,
                cluster_name: label.to_string(),
                aws: AwsSettings {
                    region: None,
                    endpoint_url: Some(proxy.endpoint.clone()),
                    credentials: Some(aws_sdk_ec2::config::Credentials::new(
                        "testing", "testing", None, None, "moto",
                    )),
                },
                kubelet_poll: Duration::from_millis(200),
                interruption_queue: Some(label.to_string()),
                batch: BatchWindows {
                    idle: Duration::from_millis(100),
                    max: Duration::from_secs(1),
                },
                ..SandboxSettings::default()
            }
            .with_register_delay(Duration::ZERO),
        )
        .await
        .unwrap();
        let watch = Watch::start(sandbox.client(), clients.clone(), label);
        Scenario {
            label: label.to_string(),
            sandbox,
            proxy,
            plan,
            clients,
            queue_url,
            dir,
            started,
            watch,
            replicas,
        }
    }

    fn client(&self) -> kube::Client {
        self.sandbox.client()
    }

    /// Waits for the Deployment's first pods Running, none on a node in `not_on`;
    /// the time since start when the first and when the last ran, and
    /// their nodes.
    async fn running(&self, not_on: &BTreeSet<String>) -> (Duration, Duration, BTreeSet<String>) {
        self.running_of(self.replicas, not_on).await
    }

    /// [`Scenario::running`] for `replicas` pods.
    async fn running_of(
        &self,
        replicas: usize,
        not_on: &BTreeSet<String>,
    ) -> (Duration, Duration, BTreeSet<String>) {
        let pods: Api<Pod> = Api::namespaced(self.client(), "default");
        let deadline = Instant::now() + LIMIT;
        let mut first = None;
        loop {
            if let Ok(list) = pods.list(&ListParams::default().labels("app=web")).await {
                let running: BTreeSet<String> = list
                    .items
                    .iter()
                    .filter(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    })
                    .filter_map(|p| p.spec.as_ref()?.node_name.clone())
                    .filter(|node| !not_on.contains(node))
                    .collect();
                let count = list
                    .items
                    .iter()
                    .filter(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                            && p.spec
                                .as_ref()
                                .and_then(|s| s.node_name.as_ref())
                                .is_some_and(|n| !not_on.contains(n))
                    })
                    .count();
                if count > 0 && first.is_none() {
                    first = Some(self.started.elapsed());
                }
                if list.items.len() == replicas && count == replicas {
                    let all = self.started.elapsed();
                    return (first.unwrap_or(all), all, running);
                }
            }
            if Instant::now() >= deadline {
                panic!(
                    "{}: timed out waiting for {replicas} web pods Running; the cluster:\n{}",
                    self.label,
                    crate::fixture::cluster_dump(&self.client()).await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    /// The instances moto runs for the cluster (pending or running).
    async fn instances(&self) -> BTreeSet<String> {
        instances(&self.clients, &self.label).await
    }

    /// Waits until the instances moto runs for the cluster are exactly
    /// those of the NodeClaims not being deleted, each launched: no
    /// instance without its NodeClaim, no NodeClaim without its instance.
    async fn settled(&self) {
        let claims: Api<NodeClaim> = Api::all(self.client());
        let deadline = Instant::now() + LIMIT;
        loop {
            let list = claims.list(&ListParams::default()).await.unwrap().items;
            let owned: BTreeSet<String> = list
                .iter()
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .filter_map(|c| c.status.as_ref()?.provider_id.clone())
                .filter_map(|id| id.rsplit('/').next().map(str::to_string))
                .collect();
            let instances = self.instances().await;
            if owned.len() == list.len() && owned == instances {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{}: NodeClaims and instances never matched: {} NodeClaims, instances of NodeClaims {owned:?}, instances in moto {instances:?}",
                self.label,
                list.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Scales the web Deployment to `replicas`.
    async fn scale(&self, replicas: usize) {
        let patch = serde_json::json!({"spec": {"replicas": replicas}});
        Api::<Deployment>::namespaced(self.client(), "default")
            .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    /// Waits until moto runs `count` instances for the cluster and they
    /// are exactly those of the NodeClaims; the time it took.
    async fn settled_at(&self, count: usize) -> Duration {
        let since = Instant::now();
        let deadline = since + LIMIT;
        while self.instances().await.len() != count {
            assert!(
                Instant::now() < deadline,
                "{}: never {count} instances: {:?}; the cluster:\n{}",
                self.label,
                self.instances().await,
                crate::fixture::cluster_dump(&self.client()).await
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.settled().await;
        assert_eq!(self.instances().await.len(), count, "{}", self.label);
        since.elapsed()
    }

    /// Stops the sandbox, checks that no instance of the cluster is left
    /// in moto, that no NodeClaim pointed at a missing instance and no
    /// instance ran without a NodeClaim longer than [`GC_PERIOD`] (an
    /// instance only does between its launch and its NodeClaim's status
    /// write; garbage collection would take it after 30 s), that no
    /// NodeClaim being deleted waited for its terminated instance longer
    /// than [`FINALIZE_LIMIT`], and returns what the faults came to.
    async fn stop(self) -> Tally {
        let seen = self.watch.seen();
        drop(self.watch);
        assert!(
            seen.longest_missing.0 < GC_PERIOD,
            "{}: a NodeClaim pointed at a missing instance for {:?}",
            self.label,
            seen.longest_missing
        );
        assert!(
            seen.longest_orphan.0 < GC_PERIOD,
            "{}: an instance ran without a NodeClaim for {:?}",
            self.label,
            seen.longest_orphan
        );
        assert!(
            seen.longest_finalizing.0 < FINALIZE_LIMIT,
            "{}: a NodeClaim being deleted waited for its terminated instance for {:?}",
            self.label,
            seen.longest_finalizing
        );
        eprintln!(
            "{}: longest a NodeClaim pointed at a missing instance {:.1} s (being deleted: {:.1} s), longest an instance ran without one {:.1} s",
            self.label,
            seen.longest_missing.0.as_secs_f64(),
            seen.longest_finalizing.0.as_secs_f64(),
            seen.longest_orphan.0.as_secs_f64()
        );
        self.sandbox.stop().await;
        let left = instances(&self.clients, &self.label).await;
        assert!(left.is_empty(), "{}: left running: {left:?}", self.label);
        let _ = std::fs::remove_dir_all(&self.dir);
        drop(self.proxy);
        self.plan.total()
    }
}

/// The instances moto runs for cluster `label` (pending or running).
async fn instances(clients: &AwsClients, label: &str) -> BTreeSet<String> {
    let described = clients
        .ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag:eks:eks-cluster-name")
                .values(label)
                .build(),
        )
        .send()
        .await
        .unwrap();
    described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| {
            matches!(
                i.state().and_then(|s| s.name()),
                Some(InstanceStateName::Pending | InstanceStateName::Running)
            )
        })
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect()
}

/// One scale-up; its times to the first and to every pod Running.
async fn scale_up(label: &str, plan: Arc<FaultPlan>) -> (Duration, Duration, Tally) {
    let scenario = Scenario::start(label, plan).await;
    let (first, all, _) = scenario.running(&BTreeSet::new()).await;
    scenario.settled().await;
    let tally = scenario.stop().await;
    eprintln!(
        "{label}: first pod Running after {:.1} s, all {REPLICAS} after {:.1} s; calls: {} forwarded, {} throttled, {} failed",
        first.as_secs_f64(),
        all.as_secs_f64(),
        tally.forwarded,
        tally.throttled,
        tally.failed,
    );
    (first, all, tally)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_up_completes_under_throttling_and_server_errors() {
    let _serial = SERIAL.lock().await;
    let (_, free, tally) = scale_up("faults-none", FaultPlan::new(1, 0.0, 0.0)).await;
    assert_eq!((tally.throttled, tally.failed), (0, 0));
    for (label, seed, throttle, error) in [
        ("faults-20-5", 2025, 0.20, 0.05),
        ("faults-50-10", 5010, 0.50, 0.10),
    ] {
        let (_, all, tally) = scale_up(label, FaultPlan::new(seed, throttle, error)).await;
        assert!(
            tally.throttled > 0 && tally.failed > 0,
            "{label}: the plan never failed a call: {tally:?}"
        );
        eprintln!(
            "{label}: {:.1}× the fault-free time to every pod Running",
            all.as_secs_f64() / free.as_secs_f64()
        );
    }
}

/// A run against a throttling EC2 spends the SDK's retry quota of the
/// controllers' clients, and it comes back only a token per call that
/// succeeds at once. The sandbox still terminates its instances when it
/// stops, with EC2 throttling the first calls of the clean-up: more of them
/// than a clean-up without the SDK's retries makes (five attempts,
/// `STOP_ATTEMPTS` in src/sim/sandbox/aws.rs), fewer than one with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instances_are_terminated_at_stop_after_the_retry_quota_is_spent() {
    let _serial = SERIAL.lock().await;
    let label = "faults-quota";
    let plan = FaultPlan::new(6, 0.0, 0.0);
    let scenario = Scenario::start_with(label, plan.clone(), 1).await;
    scenario.running(&BTreeSet::new()).await;
    scenario.settled().await;
    plan.set_shares(1.0, 0.0);
    // Each listing is tried 5 times, 4 retries of 5 tokens: 60 listings
    // want 1,200 of the 500 tokens.
    let cloud = scenario.sandbox.cloud();
    let listings = futures::future::join_all((0..60).map(|_| cloud.list())).await;
    assert!(
        listings.iter().all(Result::is_err),
        "{label}: a listing got through"
    );
    plan.script(&[Fault::Throttle; 12]);
    plan.set_shares(0.0, 0.0);
    scenario.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_nodeclaim_and_an_interruption_recover_under_faults() {
    let _serial = SERIAL.lock().await;
    for (label, seed, throttle, error) in [
        ("faults-disrupt-20-5", 77, 0.20, 0.05),
        ("faults-disrupt-50-10", 7710, 0.50, 0.10),
    ] {
        let started = Instant::now();
        delete_and_interrupt(label, FaultPlan::new(seed, throttle, error)).await;
        eprintln!(
            "{label}: a NodeClaim deleted and an instance interrupted, each replaced, in {:.1} s from the start",
            started.elapsed().as_secs_f64()
        );
    }
}

/// After the scale-up, one NodeClaim is deleted by hand and another's
/// instance is said to be stopping through the interruption queue: each
/// time the pods run again elsewhere and the instance goes.
async fn delete_and_interrupt(label: &str, plan: Arc<FaultPlan>) {
    let scenario = Scenario::start(label, plan).await;
    scenario.running(&BTreeSet::new()).await;
    scenario.settled().await;
    let claims: Api<NodeClaim> = Api::all(scenario.client());

    // A NodeClaim deleted by hand: its instance goes, its pod runs again.
    let list = claims.list(&ListParams::default()).await.unwrap().items;
    let deleted = list[0].clone();
    let deleted_node = deleted.status.as_ref().and_then(|s| s.node_name.clone());
    claims
        .delete(
            deleted.metadata.name.as_deref().unwrap(),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
    let gone: BTreeSet<String> = deleted_node.into_iter().collect();
    scenario.running(&gone).await;
    scenario.settled().await;

    // An instance stopping, as EventBridge says through the queue.
    let list = claims.list(&ListParams::default()).await.unwrap().items;
    let stopping = list
        .iter()
        .find(|c| c.metadata.deletion_timestamp.is_none())
        .expect("a NodeClaim");
    let provider_id = stopping
        .status
        .as_ref()
        .unwrap()
        .provider_id
        .clone()
        .unwrap();
    let instance = provider_id.rsplit('/').next().unwrap().to_string();
    let stopped_node = stopping.status.as_ref().and_then(|s| s.node_name.clone());
    let message = serde_json::json!({
        "version": "0", "id": "1", "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2", "account": "123456789012", "time": "2026-11-26T12:00:00Z",
        "region": "us-east-1", "resources": [],
        "detail": {"instance-id": instance, "state": "stopping"}
    });
    scenario
        .clients
        .sqs
        .send_message()
        .queue_url(&scenario.queue_url)
        .message_body(message.to_string())
        .send()
        .await
        .unwrap();
    let gone: BTreeSet<String> = gone.into_iter().chain(stopped_node).collect();
    let (_, _, after) = scenario.running(&gone).await;
    assert!(after.is_disjoint(&gone), "{after:?} {gone:?}");
    scenario.settled().await;
    assert!(
        !scenario.instances().await.contains(&instance),
        "{label}: the interrupted instance still runs"
    );
    let tally = scenario.stop().await;
    assert!(
        tally.throttled > 0 && tally.failed > 0,
        "{label}: {tally:?}"
    );
}

impl Scenario {
    /// Merge-patches the NodePool `general`.
    async fn patch_pool(&self, patch: serde_json::Value) {
        Api::<NodePool>::all(self.client())
            .patch("general", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
}

/// After the scale-up, the Deployment is scaled down to one pod and
/// consolidation allowed: the emptied nodes go and their instances are
/// terminated. Prints the time from the scale-down to one instance left.
async fn scale_down(label: &str, plan: Arc<FaultPlan>) -> Tally {
    let scenario = Scenario::start(label, plan).await;
    scenario.running(&BTreeSet::new()).await;
    scenario.settled().await;
    scenario
        .patch_pool(serde_json::json!({"spec": {"disruption": {
            "consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]
        }}}))
        .await;
    scenario.scale(1).await;
    let gone = scenario.settled_at(1).await;
    scenario.running_of(1, &BTreeSet::new()).await;
    let tally = scenario.stop().await;
    eprintln!(
        "{label}: {} of {REPLICAS} instances terminated {:.1} s after the scale-down; calls: {} forwarded, {} throttled, {} failed",
        REPLICAS - 1,
        gone.as_secs_f64(),
        tally.forwarded,
        tally.throttled,
        tally.failed,
    );
    tally
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_down_is_consolidated_under_faults() {
    let _serial = SERIAL.lock().await;
    for (label, seed, throttle, error) in [
        ("faults-down-20-5", 2026, 0.20, 0.05),
        ("faults-down-50-10", 5011, 0.50, 0.10),
    ] {
        let tally = scale_down(label, FaultPlan::new(seed, throttle, error)).await;
        assert!(
            tally.throttled > 0 && tally.failed > 0,
            "{label}: the plan never failed a call: {tally:?}"
        );
    }
}

/// A change to the EC2NodeClass (a tag) drifts every node: each is
/// replaced by a node launched from the changed class, the pods run on
/// the new nodes and the old instances are terminated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drift_replaces_every_node_under_faults() {
    let _serial = SERIAL.lock().await;
    for (label, seed, throttle, error) in [
        ("faults-drift-20-5", 88, 0.20, 0.05),
        ("faults-drift-50-10", 8810, 0.50, 0.10),
    ] {
        drift(label, FaultPlan::new(seed, throttle, error)).await;
    }
}

/// After the scale-up, the EC2NodeClass gets a tag: every node is replaced
/// by one launched from the changed class. Prints the times.
async fn drift(label: &str, plan: Arc<FaultPlan>) {
    // Two nodes: drift replaces one node a pass, each pass 25 s
    // (`POLL` + `VALIDATION_WAIT` of the disruption controller).
    let nodes = 2;
    let scenario = Scenario::start_with(label, plan, nodes).await;
    let (_, _, before) = scenario.running(&BTreeSet::new()).await;
    scenario.settled().await;
    let old = scenario.instances().await;
    scenario
        .patch_pool(serde_json::json!({"spec": {"disruption": {"budgets": [{"nodes": "100%"}]}}}))
        .await;
    let changed = Instant::now();
    let tags = serde_json::json!({"spec": {"tags": {"revision": "2"}}});
    Api::<EC2NodeClass>::all(scenario.client())
        .patch("default", &PatchParams::default(), &Patch::Merge(&tags))
        .await
        .unwrap();
    let (_, _, after) = scenario.running(&before).await;
    let running = changed.elapsed();
    let deadline = Instant::now() + LIMIT;
    loop {
        let now = scenario.instances().await;
        if now.len() == nodes && now.is_disjoint(&old) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{label}: old instances never all replaced: {now:?}, old {old:?}; the cluster:\n{}",
            crate::fixture::cluster_dump(&scenario.client()).await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let replaced = changed.elapsed();
    scenario.settled().await;
    assert!(after.is_disjoint(&before), "{after:?} {before:?}");
    let tally = scenario.stop().await;
    assert!(tally.throttled > 0 && tally.failed > 0, "{tally:?}");
    eprintln!(
        "{label}: after the class changed, every pod Running on a new node after {:.1} s, every old instance gone after {:.1} s; calls: {} forwarded, {} throttled, {} failed",
        running.as_secs_f64(),
        replaced.as_secs_f64(),
        tally.forwarded,
        tally.throttled,
        tally.failed,
    );
}

/// EC2 does not know an instance for [`HIDDEN`] after the CreateFleet
/// that launched it (DescribeInstances leaves it out, and names it "not
/// found" as TerminateInstances does), with 20 % throttling + 5 % errors:
/// no NodeClaim is deleted or launched again for it, none of the
/// instances is terminated, and a NodeClaim deleted within that span
/// still has its instance terminated by its finalizer rather than left
/// running for garbage collection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_ec2_does_not_know_yet_keep_their_nodeclaims() {
    let _serial = SERIAL.lock().await;
    let label = "faults-lag";
    let plan = FaultPlan::new(4242, 0.20, 0.05);
    plan.hide_launched_for(HIDDEN);
    let scenario = Scenario::start(label, plan.clone()).await;
    // No voluntary disruption: a claim replaced here must be the lag's doing.
    scenario
        .patch_pool(serde_json::json!({"spec": {"disruption": {"budgets": [{"nodes": "0"}]}}}))
        .await;
    let (first, all, _) = scenario.running(&BTreeSet::new()).await;
    scenario.settled().await;
    let launched = scenario.watch.seen().claims;
    assert_eq!(
        launched.len(),
        REPLICAS,
        "a NodeClaim was replaced: {launched:?}"
    );
    let states = watch::states(&scenario.clients, label).await.unwrap();
    assert_eq!(
        states.len(),
        REPLICAS,
        "an instance was launched again or terminated: {states:?}"
    );

    // One more pod; its NodeClaim is deleted as soon as it launched.
    scenario.scale(REPLICAS + 1).await;
    let claims: Api<NodeClaim> = Api::all(scenario.client());
    let deadline = Instant::now() + LIMIT;
    let (fresh, instance) = loop {
        let list = claims.list(&ListParams::default()).await.unwrap().items;
        let found = list.iter().find_map(|c| {
            let name = c.metadata.name.clone()?;
            let id = c.status.as_ref()?.provider_id.clone()?;
            (!launched.contains(&name)).then(|| (name, id.rsplit('/').next().map(str::to_string)))
        });
        if let Some((name, Some(id))) = found {
            break (name, id);
        }
        assert!(
            Instant::now() < deadline,
            "{label}: no fourth NodeClaim launched"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let deleted = Instant::now();
    claims
        .delete(&fresh, &DeleteParams::default())
        .await
        .unwrap();
    scenario.running_of(REPLICAS + 1, &BTreeSet::new()).await;
    scenario.settled().await;
    let finalized = deleted.elapsed();
    let states = watch::states(&scenario.clients, label).await.unwrap();
    assert_eq!(
        states.get(&instance),
        Some(&InstanceStateName::Terminated),
        "{label}: the deleted NodeClaim's instance: {states:?}"
    );
    let seen = scenario.watch.seen();
    // The three, the deleted one and the one launched for its pod: one
    // instance each, none launched twice.
    assert_eq!(seen.claims.len(), REPLICAS + 2, "{:?}", seen.claims);
    assert_eq!(states.len(), REPLICAS + 2, "{states:?}");
    let lag = plan.lag();
    assert!(
        lag.refused > 0 && lag.left_out > 0,
        "{label}: EC2's lag never showed: {lag:?}"
    );
    let tally = scenario.stop().await;
    assert!(tally.throttled > 0 && tally.failed > 0, "{tally:?}");
    eprintln!(
        "{label}: first pod Running after {:.1} s, all {REPLICAS} after {:.1} s; the NodeClaim deleted at its launch finalized (its instance terminated, its pod Running elsewhere) after {:.1} s; lag: {lag:?}; calls: {} forwarded, {} throttled, {} failed",
        first.as_secs_f64(),
        all.as_secs_f64(),
        finalized.as_secs_f64(),
        tally.forwarded,
        tally.throttled,
        tally.failed,
    );
}
