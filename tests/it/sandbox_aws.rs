//! `nodewright sandbox --cloud-provider aws` against moto: the real
//! EC2NodeClass controller makes the class Ready from moto's subnets,
//! security groups, role and image; a Deployment's pods get NodeClaims,
//! the NodeClaims become EC2 instances in moto, the kubelet registers their
//! Nodes and the pods run; an instance the interruption queue says is
//! stopping has its NodeClaim deleted and is terminated.

use std::time::Duration;

use aws_sdk_ec2::types::{
    ArchitectureValues, InstanceStateName, ResourceType, Tag, TagSpecification,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use nodewright::apis::{EC2NodeClass, NodeClaim};
use nodewright::aws::clients::{AwsClients, AwsSettings};
use nodewright::controllers::provisioning::BatchWindows;
use nodewright::sim::sandbox::{CloudChoice, Sandbox, SandboxSettings};

use crate::moto::{moto, moto_clients};

const LABEL: &str = "sandbox-aws";

fn tagged(kind: ResourceType, label: &str) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .tags(Tag::builder().key("discovery").value(label).build())
        .build()
}

/// A subnet and a security group tagged `discovery=LABEL`, the node role
/// `role`, and an image tagged `team=LABEL`; the security group's ID.
pub(crate) async fn network(clients: &AwsClients, label: &str, role: &str) -> String {
    let ec2 = &clients.ec2;
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.77.0.0/16")
        .send()
        .await
        .unwrap()
        .vpc
        .unwrap()
        .vpc_id
        .unwrap();
    ec2.create_subnet()
        .vpc_id(&vpc)
        .cidr_block("10.77.0.0/20")
        .availability_zone("us-east-1a")
        .tag_specifications(tagged(ResourceType::Subnet, label))
        .send()
        .await
        .unwrap();
    let group = ec2
        .create_security_group()
        .vpc_id(&vpc)
        .group_name(format!("{label}-nodes"))
        .description("nodes")
        .tag_specifications(tagged(ResourceType::SecurityGroup, label))
        .send()
        .await
        .unwrap()
        .group_id
        .unwrap();
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    clients
        .iam
        .create_role()
        .role_name(role)
        .assume_role_policy_document(trust)
        .send()
        .await
        .unwrap();
    crate::amis::register(
        clients,
        &format!("{label}-al2023"),
        ArchitectureValues::X8664,
        &[("team", label)],
    )
    .await;
    group
}

const MANIFESTS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: SandboxAwsNodeRole
  amiFamily: AL2023
  amiSelectorTerms: [{tags: {team: sandbox-aws}}]
  subnetSelectorTerms: [{tags: {discovery: sandbox-aws}}]
  securityGroupSelectorTerms: [{tags: {discovery: sandbox-aws}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: public.ecr.aws/nginx/nginx:1.27
        resources: {requests: {cpu: 500m, memory: 1Gi}}
"#;

/// Polls `check` until it returns `Some`; moto is one process shared by
/// every test running at once, so the bound is generous.
async fn eventually<T, Fut: std::future::Future<Output = Option<T>>>(
    client: &kube::Client,
    what: &str,
    check: impl FnMut() -> Fut,
) -> T {
    crate::fixture::eventually_showing(client, what, Duration::from_secs(150), check).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_runs_on_instances_launched_in_moto() {
    // NODEWRIGHT_TEST_LOG=1 prints what the sandbox does (to stderr, uncaptured).
    if std::env::var_os("NODEWRIGHT_TEST_LOG").is_some() {
        nodewright::sim::sandbox::log::init(nodewright::sim::sandbox::log::LogFormat::Text);
    }
    let clients = moto_clients().await;
    network(&clients, LABEL, "SandboxAwsNodeRole").await;
    // The interruption queue the sandbox's controller polls.
    let queue_url = clients
        .sqs
        .create_queue()
        .queue_name("sandbox-aws")
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let dir = std::env::temp_dir().join(format!("nodewright-sandbox-aws-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("all.yaml"), MANIFESTS).unwrap();
    let sandbox = Sandbox::start(
        SandboxSettings {
            manifests: vec![dir.clone()],
            cloud: CloudChoice::Aws,
            cluster_name: "sandbox-aws".to_string(),
            aws: AwsSettings {
                region: None,
                endpoint_url: Some(moto().endpoint.clone()),
                credentials: Some(aws_sdk_ec2::config::Credentials::new(
                    "testing", "testing", None, None, "moto",
                )),
            },
            kubelet_poll: Duration::from_millis(100),
            interruption_queue: Some("sandbox-aws".to_string()),
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
    let client = sandbox.client();

    let classes: Api<EC2NodeClass> = Api::all(client.clone());
    eventually(&client, "the class Ready from moto's resources", || async {
        let class = classes.get("default").await.ok()?;
        let status = class.status?;
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.is_true());
        ready.then_some(())
    })
    .await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let running = eventually(&client, "2 web pods Running", || async {
        let list = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .ok()?
            .items;
        let all = list.len() == 2
            && list
                .iter()
                .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        all.then_some(list)
    })
    .await;
    assert!(
        running
            .iter()
            .all(|p| p.spec.as_ref().unwrap().node_name.is_some())
    );

    let claims: Api<NodeClaim> = Api::all(client.clone());
    let claim = claims
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .remove(0);
    let provider_id = claim.status.as_ref().unwrap().provider_id.clone().unwrap();
    let instance = provider_id.rsplit('/').next().unwrap().to_string();
    assert!(instance.starts_with("i-"), "{provider_id}");
    let described = clients
        .ec2
        .describe_instances()
        .instance_ids(&instance)
        .send()
        .await
        .unwrap();
    let ec2 = &described.reservations()[0].instances()[0];
    assert_eq!(ec2.instance_type().unwrap().as_str(), "m5.large");
    assert!(
        ec2.tags()
            .iter()
            .any(|t| t.key() == Some("kubernetes.io/cluster/sandbox-aws")),
        "{:?}",
        ec2.tags()
    );

    // An instance stopping, as EventBridge tells it through the queue: the
    // interruption controller deletes its NodeClaim, and the instance goes.
    let stopping = serde_json::json!({
        "version": "0", "id": "1", "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2", "account": "123456789012", "time": "2026-11-26T12:00:00Z",
        "region": "us-east-1", "resources": [],
        "detail": {"instance-id": instance, "state": "stopping"}
    });
    clients
        .sqs
        .send_message()
        .queue_url(&queue_url)
        .message_body(stopping.to_string())
        .send()
        .await
        .unwrap();
    eventually(&client, "the instance terminated in moto", || async {
        let described = clients
            .ec2
            .describe_instances()
            .instance_ids(&instance)
            .send()
            .await
            .ok()?;
        let state = described.reservations()[0].instances()[0]
            .state()?
            .name()?
            .clone();
        matches!(
            state,
            InstanceStateName::ShuttingDown | InstanceStateName::Terminated
        )
        .then_some(())
    })
    .await;

    sandbox.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    // Instances launched again for the still-pending pods are terminated
    // when the sandbox stops.
    let running = left_running(&clients, "sandbox-aws").await;
    assert!(running.is_empty(), "left running: {running:?}");
}

/// The instances tagged for `cluster` that are neither shutting down nor
/// terminated: what a stopped sandbox must not leave behind.
pub(crate) async fn left_running(clients: &AwsClients, cluster: &str) -> Vec<String> {
    let left = clients
        .ec2
        .describe_instances()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("tag:eks:eks-cluster-name")
                .values(cluster)
                .build(),
        )
        .send()
        .await
        .unwrap();
    left.reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| {
            !matches!(
                i.state().and_then(|s| s.name()),
                Some(InstanceStateName::ShuttingDown | InstanceStateName::Terminated)
            )
        })
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect()
}

const ODCR: &str = "sandbox-odcr";

/// Two NodePools whose nodes drift but are never replaced (a budget of
/// zero), one Deployment on each.
const ODCR_MANIFESTS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: open}
spec:
  disruption: {consolidateAfter: Never, budgets: [{nodes: "0"}]}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: targeted}
spec:
  disruption: {consolidateAfter: Never, budgets: [{nodes: "0"}]}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: SandboxOdcrNodeRole
  amiFamily: AL2023
  amiSelectorTerms: [{tags: {team: sandbox-odcr}}]
  subnetSelectorTerms: [{tags: {discovery: sandbox-odcr}}]
  securityGroupSelectorTerms: [{tags: {discovery: sandbox-odcr}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: on-open}
spec:
  replicas: 1
  selector: {matchLabels: {app: on-open}}
  template:
    metadata: {labels: {app: on-open}}
    spec:
      nodeSelector: {karpenter.sh/nodepool: open}
      containers:
      - name: app
        image: public.ecr.aws/nginx/nginx:1.27
        resources: {requests: {cpu: 500m, memory: 1Gi}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: on-targeted}
spec:
  replicas: 1
  selector: {matchLabels: {app: on-targeted}}
  template:
    metadata: {labels: {app: on-targeted}}
    spec:
      nodeSelector: {karpenter.sh/nodepool: targeted}
      containers:
      - name: app
        image: public.ecr.aws/nginx/nginx:1.27
        resources: {requests: {cpu: 500m, memory: 1Gi}}
"#;

/// The value of tag `key` in a piece of a DescribeInstances answer.
fn tag_value<'a>(xml: &'a str, key: &str) -> Option<&'a str> {
    let after = &xml[xml.find(&format!("<key>{key}</key>"))?..];
    let value = &after[after.find("<value>")? + "<value>".len()..];
    Some(&value[..value.find("</value>")?])
}

/// moto's DescribeInstances as EC2 would answer it with capacity
/// reservations, which moto does not have: an instance of NodePool `open`
/// landed in an open reservation (launched on-demand, not targeting it),
/// one of `targeted` was launched into a reservation (preference
/// `capacity-reservations-only`) that its EC2NodeClass does not select.
/// moto also leaves out the security groups a launch template gives an
/// instance launched by CreateFleet; they are put back as `group`, so
/// that only the reservation can drift.
fn in_reservations(group: String) -> impl Fn(&str, bytes::Bytes) -> bytes::Bytes {
    move |operation, body| {
        if operation != "DescribeInstances" {
            return body;
        }
        let Ok(text) = std::str::from_utf8(&body) else {
            return body;
        };
        let text = text.replace(
            "</rootDeviceType><groupSet/>",
            &format!(
                "</rootDeviceType><groupSet><item><groupId>{group}</groupId></item></groupSet>"
            ),
        );
        // moto writes an instance's tags before its ID: each piece up to an
        // `</instanceId>` ends with that instance's tags and ID.
        let mut out = String::new();
        for piece in text.split_inclusive("</instanceId>") {
            out.push_str(piece);
            if !piece.ends_with("</instanceId>") {
                continue;
            }
            let (reservation, preference) = match tag_value(piece, "karpenter.sh/nodepool") {
                Some("open") => ("cr-0open", "open"),
                Some("targeted") => ("cr-0gone", "capacity-reservations-only"),
                _ => continue,
            };
            out.push_str(&format!(
                "<capacityReservationId>{reservation}</capacityReservationId><capacityReservationSpecification><capacityReservationPreference>{preference}</capacityReservationPreference></capacityReservationSpecification>"
            ));
        }
        bytes::Bytes::from(out)
    }
}

/// The `Drifted` condition of NodePool `pool`'s NodeClaim, as (true, reason).
async fn drifted(claims: &Api<NodeClaim>, pool: &str) -> Option<Option<(bool, String)>> {
    let list = claims
        .list(&ListParams::default().labels(&format!("karpenter.sh/nodepool={pool}")))
        .await
        .ok()?
        .items;
    let claim = list.first()?;
    let conditions = claim
        .status
        .as_ref()?
        .conditions
        .clone()
        .unwrap_or_default();
    Some(
        conditions
            .iter()
            .find(|c| c.type_ == "Drifted")
            .map(|c| (c.is_true(), c.reason.clone().unwrap_or_default())),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_in_an_open_capacity_reservation_is_not_drifted() {
    if std::env::var_os("NODEWRIGHT_TEST_LOG").is_some() {
        nodewright::sim::sandbox::log::init(nodewright::sim::sandbox::log::LogFormat::Text);
    }
    let clients = moto_clients().await;
    let group = network(&clients, ODCR, "SandboxOdcrNodeRole").await;
    let proxy = crate::aws_proxy::start(
        &moto().endpoint,
        std::sync::Arc::new(in_reservations(group)),
    )
    .await;
    let dir = std::env::temp_dir().join(format!("nodewright-sandbox-odcr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("all.yaml"), ODCR_MANIFESTS).unwrap();
    let sandbox = Sandbox::start(
        SandboxSettings {
            manifests: vec![dir.clone()],
            cloud: CloudChoice::Aws,
            cluster_name: ODCR.to_string(),
            aws: AwsSettings {
                region: None,
                endpoint_url: Some(proxy.endpoint.clone()),
                credentials: Some(aws_sdk_ec2::config::Credentials::new(
                    "testing", "testing", None, None, "moto",
                )),
            },
            kubelet_poll: Duration::from_millis(100),
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
    let client = sandbox.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    eventually(&client, "a pod Running in each NodePool", || async {
        let list = pods.list(&ListParams::default()).await.ok()?.items;
        let running = list
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        (running == 2).then_some(())
    })
    .await;

    // The targeted instance's reservation is not the class's: drift.
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let reason = eventually(&client, "the targeted NodeClaim Drifted", || async {
        match drifted(&claims, "targeted").await? {
            Some((true, reason)) => Some(reason),
            _ => None,
        }
    })
    .await;
    assert_eq!(reason, "CapacityReservationDrift");
    // The open one was checked the same way, on the same events, and is
    // on-demand capacity: never drifted for its reservation.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let open = drifted(&claims, "open")
        .await
        .expect("the open NodeClaim exists");
    assert!(
        open.as_ref().is_none_or(|(drifted, _)| !drifted),
        "the open reservation's instance drifted: {open:?}"
    );

    sandbox.stop().await;
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}
