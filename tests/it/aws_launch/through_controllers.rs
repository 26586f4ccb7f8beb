//! The AWS cloud provider behind the running controllers: a pending pod
//! becomes a NodeClaim, the claim an EC2 instance in moto, and deleting the
//! claim terminates the instance.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use nodewright::apis::NodePool;
use nodewright::controllers::provisioning::{BatchWindows, ProvisioningSettings};
use nodewright::operator::{Operator, OperatorSettings};
use serde_json::json;

use super::*;
use crate::fixture::eventually_within;

/// How long each step may take.
const WAIT: Duration = Duration::from_secs(30);

const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: ctl-class}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
"#;

#[tokio::test]
async fn a_pending_pod_launches_an_instance_in_moto_and_its_deletion_terminates_it() {
    let clients = moto_clients().await;
    let net = network(&clients).await;
    let (cloud, unavailable) = provider(clients.clone(), "ctl-cluster");
    let server = nodewright::sim::double::server();
    let client = server.client();

    let class = class("ctl-class", &net, "");
    let mut stored = (*class.class).clone();
    // The status the EC2NodeClass controller would write for the network
    // (its own tests cover that), Ready.
    let mut status = serde_json::to_value(&stored.status).unwrap();
    status["conditions"] = json!([{"type": "Ready", "status": "True", "reason": "Ready",
        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}]);
    stored.status = None;
    let classes: Api<nodewright::apis::EC2NodeClass> = Api::all(client.clone());
    classes
        .create(&PostParams::default(), &stored)
        .await
        .unwrap();
    classes
        .patch_status(
            "ctl-class",
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": status })),
        )
        .await
        .unwrap();
    Api::<NodePool>::all(client.clone())
        .create(
            &PostParams::default(),
            &nodewright::yaml::from_str(POOL).unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "c", "image": "c", "resources": {"requests": {"cpu": "1"}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let unschedulable = json!({"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
    pods.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&unschedulable),
    )
    .await
    .unwrap();

    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let instance_types = std::sync::Arc::new(InstanceTypeProvider::new(
        std::sync::Arc::new(Catalog::embedded("us-east-1").unwrap()),
        std::sync::Arc::new(Extensions::new(HostConfig::default()).unwrap()),
        unavailable,
    ));
    let operator = Operator {
        client: client.clone(),
        instance_types,
        cloud: Some(std::sync::Arc::new(cloud)),
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
            leader_election: None,
            metrics_addr: local,
            health_addr: local,
            node_repair: false,
            spot_to_spot_consolidation: false,
            node_overlay: false,
            static_capacity: false,
        },
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(operator.run(
        async {
            let _ = stopped.await;
        },
        |_| {},
    ));

    let claims: Api<NodeClaim> = Api::all(client.clone());
    let launched = eventually_within("a launched NodeClaim", WAIT, || async {
        let list = claims.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|c| c.status.as_ref().is_some_and(|s| s.provider_id.is_some()))
    })
    .await;
    let name = launched.metadata.name.clone().unwrap();
    assert!(
        provider_id(&launched).starts_with("aws:///us-east-1"),
        "{}",
        provider_id(&launched)
    );
    assert_eq!(
        label(&launched, "node.kubernetes.io/instance-type"),
        "m5.large"
    );
    let id = instance_id(&launched);
    let instance = describe(&clients, &id).await;
    assert_eq!(
        instance.instance_type.as_ref().map(|t| t.as_str()),
        Some("m5.large")
    );
    let instance_tags = tags(instance.tags());
    assert_eq!(
        instance_tags
            .get("karpenter.sh/nodeclaim")
            .map(String::as_str),
        Some(name.as_str())
    );
    assert_eq!(
        instance_tags
            .get("kubernetes.io/cluster/ctl-cluster")
            .map(String::as_str),
        Some("owned")
    );

    claims
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    eventually_within("the instance terminated", WAIT, || async {
        let state = describe(&clients, &id).await.state?.name?;
        matches!(
            state,
            InstanceStateName::ShuttingDown | InstanceStateName::Terminated
        )
        .then_some(())
    })
    .await;
    eventually_within("the NodeClaim finalized", WAIT, || async {
        claims.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the operator stops")
        .unwrap()
        .unwrap();
    // The pod is still pending, so a new claim (and instance) may follow;
    // stop what the operator left in this cluster's moto account.
    let (cleanup, _) = provider(clients.clone(), "ctl-cluster");
    for claim in cleanup.list().await.unwrap() {
        let _ = cleanup.delete(&claim).await;
    }
}
