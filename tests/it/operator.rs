//! The operator: leader election on a Lease (one replica acts, fail-over,
//! a replica that loses the lease stops), the metrics and health endpoints,
//! and the controllers it runs, against the API server double and the
//! simulated cloud.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use apiserver_double::ApiServer;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodewright::apis::{EC2NodeClass, NodeClaim, NodePool};
use nodewright::aws::catalog::Catalog;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::cloudprovider::UnavailableOfferings;
use nodewright::cloudprovider::simulated::{SimulatedCloudProvider, SimulatedSettings};
use nodewright::controllers::provisioning::{BatchWindows, ProvisioningSettings};
use nodewright::extensions::Extensions;
use nodewright::operator::{
    Endpoints, LeaderElector, LeaseLost, LeaseSettings, Operator, OperatorSettings,
};
use nodewright_host::HostConfig;
use serde_json::json;

fn lease(identity: &str) -> LeaseSettings {
    LeaseSettings {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        ..LeaseSettings::new("kube-system", "nodewright-leader", identity)
    }
}

/// Fails instead of hanging.
async fn within<T>(what: &str, seconds: u64, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(seconds), f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen"))
}

#[tokio::test]
async fn one_replica_leads_and_another_takes_over_when_it_dies() {
    let server = nodewright::sim::double::server();
    let a = Arc::new(LeaderElector::new(server.client(), lease("replica-a")));
    let b = Arc::new(LeaderElector::new(server.client(), lease("replica-b")));
    within("a acquiring", 5, a.acquire()).await;
    let holding = {
        let a = a.clone();
        tokio::spawn(async move { a.hold().await })
    };
    // While a renews, b does not get the lease.
    let b_waiting = {
        let b = b.clone();
        tokio::spawn(async move { b.acquire().await })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!b_waiting.is_finished(), "b took a lease a was renewing");
    // a dies without releasing: b takes over once the lease runs out.
    holding.abort();
    within("b taking over", 10, b_waiting).await.unwrap();
    let held: Lease = Api::namespaced(server.client(), "kube-system")
        .get("nodewright-leader")
        .await
        .unwrap();
    let spec = held.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("replica-b"));
    assert_eq!(spec.lease_transitions, Some(1));

    // b stops cleanly: a gets it at once.
    b.release().await;
    within("a acquiring after a release", 2, a.acquire()).await;
}

#[tokio::test]
async fn a_leader_that_sees_another_holder_stops_leading() {
    let server = nodewright::sim::double::server();
    let a = LeaderElector::new(server.client(), lease("replica-a"));
    within("a acquiring", 5, a.acquire()).await;
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    let stolen = json!({"spec": {"holderIdentity": "replica-x"}});
    leases
        .patch(
            "nodewright-leader",
            &PatchParams::default(),
            &Patch::Merge(&stolen),
        )
        .await
        .unwrap();
    let lost = within("a noticing", 5, a.hold()).await;
    assert_eq!(
        lost,
        LeaseLost::TakenBy("nodewright-leader".to_string(), "replica-x".to_string())
    );
}

const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
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

/// A cluster with a NodePool, a launchable class and `pods` unschedulable pods.
async fn cluster(pods: usize) -> ApiServer {
    let server = nodewright::sim::double::server();
    let client = server.client();
    let pool: NodePool = nodewright::yaml::from_str(POOL).unwrap();
    Api::<NodePool>::all(client.clone())
        .create(&PostParams::default(), &pool)
        .await
        .unwrap();
    let classes: Api<EC2NodeClass> = Api::all(client.clone());
    classes
        .create(
            &PostParams::default(),
            &nodewright::yaml::from_str(CLASS).unwrap(),
        )
        .await
        .unwrap();
    // As the EC2NodeClass controller (not run here) would write it, Ready.
    let status = json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}],
        "subnets": [{"id": "subnet-1", "zone": "us-east-1a"}],
        "amis": [{"id": "ami-amd64", "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]
    }});
    classes
        .patch_status("default", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let api: Api<Pod> = Api::namespaced(client, "default");
    for i in 0..pods {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("web-{i}")},
            "spec": {"containers": [{"name": "c", "image": "c", "resources": {"requests": {"cpu": "1"}}}]}
        }))
        .unwrap();
        api.create(&PostParams::default(), &pod).await.unwrap();
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let unschedulable = json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "lastTransitionTime": now}]}});
        api.patch_status(
            &format!("web-{i}"),
            &PatchParams::default(),
            &Patch::Merge(&unschedulable),
        )
        .await
        .unwrap();
    }
    server
}

/// One cloud for every replica, as they share one AWS account.
fn shared_cloud() -> (Arc<InstanceTypeProvider>, Arc<SimulatedCloudProvider>) {
    shared_cloud_with(SimulatedSettings::default())
}

fn shared_cloud_with(
    settings: SimulatedSettings,
) -> (Arc<InstanceTypeProvider>, Arc<SimulatedCloudProvider>) {
    let unavailable = Arc::new(UnavailableOfferings::default());
    let instance_types = Arc::new(InstanceTypeProvider::new(
        Arc::new(Catalog::embedded("us-east-1").unwrap()),
        Arc::new(Extensions::new(HostConfig::default()).unwrap()),
        unavailable.clone(),
    ));
    let cloud = Arc::new(SimulatedCloudProvider::new(
        instance_types.clone(),
        unavailable,
        settings,
    ));
    (instance_types, cloud)
}

fn operator(server: &ApiServer, identity: &str) -> Operator {
    operator_on(server, identity, shared_cloud())
}

fn operator_on(
    server: &ApiServer,
    identity: &str,
    (instance_types, cloud): (Arc<InstanceTypeProvider>, Arc<SimulatedCloudProvider>),
) -> Operator {
    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    Operator {
        client: server.client(),
        instance_types,
        cloud: Some(cloud),
        node_classes: None,
        interruption_queue: None,
        instance_status: None,
        settings: OperatorSettings {
            provisioning: ProvisioningSettings {
                batch: BatchWindows {
                    idle: Duration::from_millis(100),
                    max: Duration::from_secs(1),
                },
                ..ProvisioningSettings::default()
            },
            leader_election: Some(lease(identity)),
            metrics_addr: local,
            health_addr: local,
            node_repair: false,
            spot_to_spot_consolidation: false,
            node_overlay: false,
            static_capacity: false,
        },
    }
}

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let code = response
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, response)
}

fn claims(server: &ApiServer) -> Vec<NodeClaim> {
    server
        .objects("karpenter.sh", "nodeclaims")
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect()
}

#[tokio::test]
async fn two_replicas_provision_once_and_serve_metrics_and_health() {
    let server = cluster(3).await;
    let (stop_a, stopped_a) = tokio::sync::oneshot::channel::<()>();
    let (endpoints_tx, endpoints_rx) = tokio::sync::oneshot::channel::<Endpoints>();
    let a = tokio::spawn(operator(&server, "replica-a").run(
        async {
            let _ = stopped_a.await;
        },
        move |e| {
            let _ = endpoints_tx.send(e);
        },
    ));
    let endpoints = endpoints_rx.await.unwrap();
    // Let a lead before b starts, so the test knows who acts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let b = tokio::spawn(operator(&server, "replica-b").run(std::future::pending(), |_| {}));

    within("claims launched", 20, async {
        loop {
            let launched = claims(&server)
                .iter()
                .filter(|c| {
                    c.status
                        .as_ref()
                        .and_then(|s| s.provider_id.as_ref())
                        .is_some()
                })
                .count();
            if launched > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let created = claims(&server);
    // Three 1-CPU pods fit on one m5 node: one claim, not one per replica.
    assert_eq!(
        created.len(),
        1,
        "{:?}",
        created.iter().map(|c| &c.metadata.name).collect::<Vec<_>>()
    );

    let (code, ready) = get(endpoints.health, "/readyz").await;
    assert_eq!(code, 200, "{ready}");
    let (code, text) = get(endpoints.metrics, "/metrics").await;
    assert_eq!(code, 200);
    for name in [
        "karpenter_nodeclaims_created_total",
        "karpenter_scheduler_scheduling_duration_seconds",
        "karpenter_cloudprovider_duration_seconds",
        "karpenter_cluster_state_synced",
    ] {
        assert!(text.contains(name), "{name} missing from /metrics");
    }
    let help_lines = text.lines().filter(|l| l.starts_with("# HELP"));
    assert!(help_lines.clone().count() > 10, "{text}");
    for help in help_lines {
        assert!(!help.ends_with(".."), "{help}");
    }
    // Each pending pod's wait since kube-scheduler gave up on it is observed.
    let decisions = text
        .lines()
        .find(|l| l.starts_with("karpenter_pods_scheduling_decision_duration_seconds_count"))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, count)| count.parse::<u64>().ok());
    assert!(decisions.is_some_and(|n| n >= 3), "{decisions:?}\n{text}");

    // The leader stops cleanly; the standby takes over and keeps going.
    stop_a.send(()).unwrap();
    within("a stopping", 5, a).await.unwrap().unwrap();
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    within("b leading", 10, async {
        loop {
            let holder = leases
                .get("nodewright-leader")
                .await
                .ok()
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity);
            if holder.as_deref() == Some("replica-b") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    // Give b time for provisioning rounds of its own.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        claims(&server).len(),
        1,
        "the new leader does not provision the same pods again"
    );
    b.abort();
}

#[tokio::test]
async fn a_leader_killed_mid_provisioning_loses_no_pod_and_leaks_no_instance() {
    if std::env::var_os("NODEWRIGHT_TEST_LOG").is_some() {
        nodewright::sim::sandbox::log::init(nodewright::sim::sandbox::log::LogFormat::Text);
    }
    let server = cluster(3).await;
    // A launch takes a second, so a is killed in the middle of one.
    let cloud = shared_cloud_with(SimulatedSettings {
        launch_delay: Duration::from_secs(1),
        ..SimulatedSettings::default()
    });
    let a = tokio::spawn(
        operator_on(&server, "replica-a", cloud.clone()).run(std::future::pending(), |_| {}),
    );
    // Killed (no lease release, nothing finished) the moment its first
    // NodeClaim exists: its launch is under way.
    within("a creating a claim", 20, async {
        while claims(&server).is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    a.abort();
    let _ = a.await;

    let b = tokio::spawn(
        operator_on(&server, "replica-b", cloud.clone()).run(std::future::pending(), |_| {}),
    );
    let launched = within("b launching what a left", 30, async {
        loop {
            let all = claims(&server);
            if !all.is_empty()
                && all.iter().all(|c| {
                    c.status
                        .as_ref()
                        .and_then(|s| s.provider_id.as_ref())
                        .is_some()
                })
            {
                break all;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    // Rounds of b's own: the pods are covered by what exists.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        claims(&server).len(),
        1,
        "three 1-CPU pods need one m5 node"
    );
    let instances = nodewright::cloudprovider::CloudProvider::list(cloud.1.as_ref())
        .await
        .unwrap();
    let ids = |claims: &[NodeClaim]| -> Vec<Option<String>> {
        let mut ids: Vec<_> = claims
            .iter()
            .map(|c| c.status.as_ref().and_then(|s| s.provider_id.clone()))
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(
        ids(&instances),
        ids(&launched),
        "one instance per claim, none leaked"
    );
    assert_eq!(
        cloud.1.launches(),
        1,
        "a's cut launch left nothing behind; b launched the claim once"
    );
    let claim = &launched[0];
    let status = claim.status.as_ref().unwrap();
    assert!(
        status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Launched" && c.is_true()),
        "the claim is marked launched"
    );
    // Nothing waits on a: no Lease held by it, no claim deleting.
    let lease: Lease = Api::namespaced(server.client(), "kube-system")
        .get("nodewright-leader")
        .await
        .unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("replica-b")
    );
    assert!(
        claims(&server)
            .iter()
            .all(|c| c.metadata.deletion_timestamp.is_none())
    );
    assert_eq!(cloud.1.terminations(), 0);
    b.abort();
}

#[tokio::test]
async fn with_the_node_repair_gate_a_node_not_ready_past_its_toleration_is_replaced() {
    let server = cluster(1).await;
    let mut repairing = operator(&server, "replica-repair");
    repairing.settings.leader_election = None;
    repairing.settings.node_repair = true;
    let running = tokio::spawn(repairing.run(std::future::pending(), |_| {}));
    let (name, provider_id) = within("a claim launched", 20, async {
        loop {
            let launched = claims(&server).into_iter().find_map(|c| {
                let id = c.status.as_ref()?.provider_id.clone()?;
                Some((c.metadata.name.clone()?, id))
            });
            if let Some(launched) = launched {
                break launched;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    // Its node has not been Ready for an hour: past the 30 minutes `Ready`
    // is tolerated.
    let an_hour_ago = k8s_openapi::jiff::Timestamp::from_second(
        k8s_openapi::jiff::Timestamp::now().as_second() - 3600,
    )
    .unwrap();
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": "ip-10-0-9-9.ec2.internal", "labels": {"karpenter.sh/nodepool": "general"}},
        "spec": {"providerID": provider_id},
        "status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": an_hour_ago.to_string()}]}
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Node>::all(server.client())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    within("the unhealthy node's claim deleted", 20, async {
        loop {
            let live = claims(&server).into_iter().any(|c| {
                c.metadata.name.as_deref() == Some(name.as_str())
                    && c.metadata.deletion_timestamp.is_none()
            });
            if !live {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    running.abort();
}
