//! The provisioning controller against the API server double: pods
//! kube-scheduler gave up on become NodeClaims, are nominated so they are not
//! provisioned for twice, and pods nothing can hold get one event per round.

use std::sync::Arc;
use std::time::Duration;

use apiserver_double::ApiServer;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use nodewright::apis::{EC2NodeClass, NodeClaim, NodePool};
use nodewright::aws::catalog::Catalog;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::cloudprovider::OfferingKey;
use nodewright::cluster::ClusterState;
use nodewright::controllers::provisioning::{Provisioner, ProvisioningSettings};
use nodewright::controllers::recorder::Recorder;
use nodewright::extensions::Extensions;
use nodewright::scheduling::PodKey;
use nodewright_host::HostConfig;
use serde_json::json;

use crate::fixture::eventually_within;

const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  limits: {cpu: "64"}
  template:
    metadata: {labels: {team: web}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
"#;

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

fn pod(name: &str, cpu: &str, unschedulable: bool) -> Pod {
    let conditions = if unschedulable {
        json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}])
    } else {
        json!([])
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "app",
                 "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
        "status": {"phase": "Pending", "conditions": conditions}
    }))
    .unwrap()
}

struct Cluster {
    server: ApiServer,
    state: Arc<ClusterState>,
    instance_types: Arc<InstanceTypeProvider>,
    provisioner: Arc<Provisioner>,
    driver: tokio::task::JoinHandle<()>,
}

async fn cluster(objects: &[Pod]) -> Cluster {
    cluster_with(objects, ProvisioningSettings::default()).await
}

async fn cluster_with(objects: &[Pod], settings: ProvisioningSettings) -> Cluster {
    let server = nodewright::sim::double::server();
    let client = server.client();
    let pool: NodePool = nodewright::yaml::from_str(POOL).unwrap();
    let class: EC2NodeClass = nodewright::yaml::from_str(CLASS).unwrap();
    Api::<NodePool>::all(client.clone())
        .create(&PostParams::default(), &pool)
        .await
        .unwrap();
    Api::<EC2NodeClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    for pod in objects {
        create_pod(&client, pod).await;
    }
    let (state, driver) = ClusterState::start(client.clone());
    let driver = tokio::spawn(driver);
    state.synced().await;
    let instance_types = Arc::new(InstanceTypeProvider::new(
        Arc::new(Catalog::embedded("us-east-1").unwrap()),
        Arc::new(Extensions::new(HostConfig::default()).unwrap()),
        Arc::default(),
    ));
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "nodewright".to_string(),
            instance: None,
        },
    );
    let provisioner = Arc::new(Provisioner::new(
        client,
        state.clone(),
        instance_types.clone(),
        settings,
        recorder,
    ));
    Cluster {
        server,
        state,
        instance_types,
        provisioner,
        driver,
    }
}

/// Creates `pod`, then writes its status, as kube-scheduler would after
/// the API server dropped the status of the new pod.
async fn create_pod(client: &kube::Client, pod: &Pod) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let created = pods.create(&PostParams::default(), pod).await.unwrap();
    let status = json!({"status": pod.status});
    pods.patch_status(
        created.metadata.name.as_deref().unwrap(),
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await
    .unwrap();
}

/// Waits until the cluster state sees pod `name` unschedulable.
async fn seen_pending(state: &ClusterState, name: &str) {
    let what = format!("the cluster state to see {name} pending");
    eventually_within(&what, Duration::from_secs(5), || async {
        state
            .pods
            .all()
            .iter()
            .any(|p| {
                p.metadata.name.as_deref() == Some(name)
                    && nodewright::cluster::pods::is_provisionable(p)
            })
            .then_some(())
    })
    .await;
}

fn claims(server: &ApiServer) -> Vec<NodeClaim> {
    server
        .objects("karpenter.sh", "nodeclaims")
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect()
}

#[tokio::test]
async fn unschedulable_pods_become_node_claims_once() {
    let pods = [
        pod("web-0", "1", true),
        pod("web-1", "1", true),
        pod("not-yet-tried", "1", false),
    ];
    let cluster = cluster(&pods).await;
    let round = cluster.provisioner.provision().await.unwrap();
    assert_eq!(
        round.pending, 2,
        "the pod kube-scheduler has not tried is not provisioned for"
    );
    assert_eq!(round.created.len(), 1);
    let created = claims(&cluster.server);
    assert_eq!(created.len(), 1);
    let claim = &created[0];
    let labels = claim.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["karpenter.sh/nodepool"], "general");
    assert_eq!(labels["team"], "web");
    let types = claim
        .spec
        .requirements
        .iter()
        .find(|r| r.key == "node.kubernetes.io/instance-type")
        .unwrap();
    assert!(
        types
            .values
            .as_ref()
            .unwrap()
            .iter()
            .all(|t| t.starts_with("m5."))
    );
    assert_eq!(
        claim.metadata.owner_references.as_ref().unwrap()[0].kind,
        "NodePool"
    );

    // The pods are nominated to it: the next round creates nothing.
    assert_eq!(
        cluster
            .state
            .nomination(&PodKey::new("default", "web-0"))
            .as_deref(),
        Some(claim.metadata.name.as_deref().unwrap())
    );
    let again = cluster.provisioner.provision().await.unwrap();
    assert_eq!(again.pending, 0);
    assert_eq!(claims(&cluster.server).len(), 1);
    cluster.driver.abort();
}

#[tokio::test]
async fn a_round_uses_the_plan_made_ahead_only_while_nothing_it_read_changed() {
    let cluster = cluster(&[pod("web-0", "1", true)]).await;
    let client = cluster.server.client();
    // Nothing changed since the plan began: it is the round's.
    cluster.provisioner.plan_ahead();
    let round = cluster.provisioner.provision().await.unwrap();
    assert!(round.planned_ahead);
    assert_eq!((round.pending, round.created.len()), (1, 1));

    // A pod became pending after the plan began: the round plans again
    // and places it (web-0 is nominated and not pending any more).
    cluster.provisioner.plan_ahead();
    create_pod(&client, &pod("web-1", "1", true)).await;
    seen_pending(&cluster.state, "web-1").await;
    let round = cluster.provisioner.provision().await.unwrap();
    assert!(!round.planned_ahead);
    assert_eq!(round.pending, 1);
    assert_eq!(round.unschedulable, []);

    // The same when an offering ran out of capacity after the plan began.
    create_pod(&client, &pod("web-2", "1", true)).await;
    seen_pending(&cluster.state, "web-2").await;
    cluster.provisioner.plan_ahead();
    cluster.instance_types.unavailable().mark(OfferingKey {
        instance_type: "m5.large".to_string(),
        zone: "us-east-1a".to_string(),
        capacity_type: "on-demand".to_string(),
    });
    let round = cluster.provisioner.provision().await.unwrap();
    assert!(!round.planned_ahead);
    assert_eq!(round.pending, 1);

    // A plan is used once: the next round plans for itself.
    let round = cluster.provisioner.provision().await.unwrap();
    assert!(!round.planned_ahead);
    assert_eq!(round.pending, 0);
    cluster.driver.abort();
}

#[tokio::test]
async fn a_pod_nothing_can_hold_gets_one_failed_scheduling_event_per_round() {
    let pods = [pod("huge", "500", true)];
    let cluster = cluster(&pods).await;
    let round = cluster.provisioner.provision().await.unwrap();
    assert!(round.created.is_empty());
    assert_eq!(round.unschedulable.len(), 1);
    let events: Vec<String> = cluster
        .server
        .objects("events.k8s.io", "events")
        .iter()
        .filter(|e| e["regarding"]["name"] == "huge" && e["reason"] == "FailedScheduling")
        .map(|e| e["note"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].contains("general"), "{}", events[0]);
    cluster.driver.abort();
}

#[tokio::test]
async fn the_nodepool_cpu_limit_counts_what_is_in_flight() {
    // 64 CPUs of limit cannot hold 40 pods of 2 CPUs: what is created stays
    // within it and the rest is reported.
    let pods: Vec<Pod> = (0..40)
        .map(|i| pod(&format!("web-{i}"), "2", true))
        .collect();
    let cluster = cluster(&pods).await;
    let round = cluster.provisioner.provision().await.unwrap();
    assert!(!round.created.is_empty());
    assert!(
        !round.unschedulable.is_empty(),
        "the limit leaves pods unplaced"
    );
    let reason = &round.unschedulable[0].1;
    assert!(reason.contains("limit"), "{reason}");
    let requested: i64 = claims(&cluster.server)
        .iter()
        .map(|c| {
            let cpu = &c
                .spec
                .resources
                .as_ref()
                .unwrap()
                .requests
                .as_ref()
                .unwrap()["cpu"]
                .0;
            nodewright::scheduling::parse_quantity("cpu", cpu, 3).unwrap()
        })
        .sum();
    assert!(requested <= 64_000, "{requested}");
    // A second round with the same pending pods creates nothing more: the
    // claims in flight count against the limit.
    let before = claims(&cluster.server).len();
    cluster.provisioner.provision().await.unwrap();
    assert_eq!(claims(&cluster.server).len(), before);
    cluster.driver.abort();
}

/// A pod pending while its NodePool is not ready gets one NodeClaim once
/// the pool becomes ready, with the periodic requeue every `requeue`.
async fn provisioned_once_the_pool_is_ready(requeue: Duration) {
    let settings = ProvisioningSettings {
        batch: nodewright::controllers::provisioning::BatchWindows {
            idle: Duration::from_millis(10),
            max: Duration::from_millis(100),
        },
        requeue,
        ..ProvisioningSettings::default()
    };
    let cluster = cluster_with(&[pod("web-0", "1", true)], settings).await;
    let pools: Api<NodePool> = Api::all(cluster.server.client());
    let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False",
        "reason": "NotReady", "message": "waiting", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    pools
        .patch_status(
            "general",
            &PatchParams::default(),
            &Patch::Merge(&not_ready),
        )
        .await
        .unwrap();
    eventually_within(
        "the cluster state to see the pool's status",
        Duration::from_secs(5),
        || async {
            let pools = cluster.state.node_pools.all();
            pools.iter().any(|p| p.status.is_some()).then_some(())
        },
    )
    .await;
    let running = tokio::spawn(cluster.provisioner.clone().run());
    // A round while the pool is not ready leaves the pod unplaced.
    eventually_within(
        "a FailedScheduling event for web-0",
        Duration::from_secs(5),
        || async {
            let events = cluster.server.objects("events.k8s.io", "events");
            events
                .iter()
                .any(|e| e["regarding"]["name"] == "web-0" && e["reason"] == "FailedScheduling")
                .then_some(())
        },
    )
    .await;
    assert!(claims(&cluster.server).is_empty());
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True",
        "reason": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    pools
        .patch_status("general", &PatchParams::default(), &Patch::Merge(&ready))
        .await
        .unwrap();
    eventually_within("a NodeClaim for web-0", Duration::from_secs(5), || async {
        (!claims(&cluster.server).is_empty()).then_some(())
    })
    .await;
    assert_eq!(
        claims(&cluster.server).len(),
        1,
        "the pending pod got one claim"
    );
    running.abort();
    cluster.driver.abort();
}

#[tokio::test]
async fn pods_still_pending_are_tried_again_without_changing() {
    // The pool is not ready when the first round runs; it becomes ready
    // later, which changes no pod: the periodic requeue (or the pool's
    // change) provisions for them.
    provisioned_once_the_pool_is_ready(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn a_node_pool_becoming_ready_provisions_its_pending_pods_at_once() {
    // With a requeue too far away to matter: the pool's change itself
    // starts a round for the pods it left pending.
    provisioned_once_the_pool_is_ready(Duration::from_secs(3600)).await;
}
