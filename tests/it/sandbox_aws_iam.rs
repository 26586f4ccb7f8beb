//! `nodewright sandbox --cloud-provider aws` under IAM: a moto server of the
//! test's own enforces IAM, and the controller signs every call as the IAM
//! user `nodewright-controller`, which holds deploy/iam/controller-policy.json
//! and nothing else. The class becomes Ready (its instance profile made), a
//! Deployment's pods run on instances launched with CreateFleet, an
//! interruption message terminates one, and deleting the NodeClaims and the
//! EC2NodeClass terminates the instances and deletes the launch templates
//! and the instance profile. Every answer moto gives the controller is
//! read on its way back: one refusal fails the test.
//!
//! What moto checks, read from moto 5.2.5's `moto/iam/access_control.py`
//! and `moto/iam/policy_conditions.py`:
//! - the action, named after the operation (`ec2:CreateFleet`);
//! - the resource only where moto knows one: the queue's ARN for SQS calls
//!   that name a queue URL (ReceiveMessage, DeleteMessageBatch); every EC2,
//!   SSM and instance-profile call, and GetQueueUrl, is checked against
//!   resource `*`, which no ARN in a `Resource` matches;
//! - no condition: it passes no request context, so `StringEquals` is
//!   vacuously true and other operators are skipped — `aws:RequestTag`,
//!   `aws:ResourceTag`, `ec2:CreateAction`, `iam:PassedToService`,
//!   `aws:RequestedRegion` are all ignored;
//! - no action a call implies (`iam:PassRole`, `ec2:RunInstances` and
//!   `ec2:CreateTags` for CreateFleet, `iam:TagInstanceProfile`).
//!
//! - not `eks:DescribeCluster` at all: with IAM enforced, moto 5.2.5 answers
//!   the Rust SDK's EKS calls (REST, `GET /clusters/NAME`) with
//!   `SignatureDoesNotMatch`, for a user allowed everything too (boto3's
//!   same call passes). The sandbox is given its endpoint, so the scenario
//!   makes no EKS call; the call is checked against the real policy on the
//!   cluster's ARN (`policy::check_conditions`) and, as one the code makes,
//!   by deploy/tests/check_iam.py.
//!
//! So the user holds the policy as moto can evaluate it
//! (`policy::as_moto_evaluates`): the same statements, actions and conditions, with
//! `Resource` widened to `*` for the actions moto checks against `*`, and
//! `sqs:DeleteMessageBatch` next to `sqs:DeleteMessage` (moto names the action
//! after the operation; AWS authorizes the batch as DeleteMessage). The
//! conditions and resource ARNs moto skips are then checked by this test
//! against the real policy (`policy::allowed`) on the resources the controller made
//! in moto — their ARNs and tags — and, for every call in the code, by
//! deploy/tests/check_iam.py (scripts/check-deploy).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{Filter, InstanceStateName};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use nodewright::apis::{EC2NodeClass, NodeClaim, NodePool};
use nodewright::aws::clients::{AwsClients, AwsSettings};
use nodewright::controllers::provisioning::BatchWindows;
use nodewright::sim::sandbox::{CloudChoice, Sandbox, SandboxSettings};
use serde_json::{Value, json};

use crate::moto::{clients_as, start_enforcing};
use policy::{Made, as_moto_evaluates, check_conditions, controller_policy};

mod policy;

const CLUSTER: &str = "sandbox-iam";
const NODE_ROLE: &str = "SandboxIamNodeRole";
/// moto's default account, which its IAM users live in.
const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";
/// Unchecked calls for the setup; [`crate::moto::Moto::enforce_now`] ends
/// the window as soon as the setup is done.
const FREE_CALLS: u32 = 500;

/// The error codes of a refused or unauthenticated call (moto answers
/// `AccessDenied` where EC2 says `UnauthorizedOperation`).
const REFUSALS: &[&str] = &[
    "AccessDenied",
    "UnauthorizedOperation",
    "AuthFailure",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
];

/// The operations the scenario must have had moto authorize: if the
/// scenario stops reaching one, the test says so instead of proving less.
const EXERCISED: &[&str] = &[
    "DescribeSubnets",
    "DescribeSecurityGroups",
    "DescribeImages",
    "DescribeLaunchTemplates",
    "CreateLaunchTemplate",
    "CreateFleet",
    "DescribeInstances",
    "TerminateInstances",
    "DeleteLaunchTemplate",
    "GetInstanceProfile",
    "CreateInstanceProfile",
    "AddRoleToInstanceProfile",
    "ListInstanceProfiles",
    "RemoveRoleFromInstanceProfile",
    "DeleteInstanceProfile",
    "GetQueueUrl",
    "ReceiveMessage",
    "DeleteMessageBatch",
];

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
  role: SandboxIamNodeRole
  amiFamily: AL2023
  amiSelectorTerms: [{tags: {team: sandbox-iam}}]
  subnetSelectorTerms: [{tags: {discovery: sandbox-iam}}]
  securityGroupSelectorTerms: [{tags: {discovery: sandbox-iam}}]
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

fn ec2_tags(tags: &[aws_sdk_ec2::types::Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
        .collect()
}

/// What moto answered the controller: calls per operation, and every answer
/// that refused one.
#[derive(Default)]
struct Answers {
    calls: BTreeMap<String, usize>,
    refused: Vec<String>,
}

/// Polls `check` every 200 ms for up to 150 s; fails at once when moto has
/// refused the controller a call, and on timeout with the cluster's state.
async fn step<T, Fut: std::future::Future<Output = Option<T>>>(
    client: &kube::Client,
    answers: &Mutex<Answers>,
    what: &str,
    mut check: impl FnMut() -> Fut,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(150);
    loop {
        let refused = answers.lock().unwrap().refused.clone();
        assert!(
            refused.is_empty(),
            "moto refused the controller while waiting for {what}:\n{}",
            refused.join("\n")
        );
        if let Some(found) = check().await {
            return found;
        }
        if Instant::now() > deadline {
            let calls = format!("{:?}", answers.lock().unwrap().calls);
            let cluster = crate::fixture::cluster_dump(client).await;
            panic!(
                "timed out waiting for {what}; calls moto answered: {calls}; the cluster:\n{cluster}"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The IAM user `name` holding `policy` as a managed policy; its access key.
async fn user_with(admin: &AwsClients, name: &str, policy: &Value) -> (String, String) {
    let arn = admin
        .iam
        .create_policy()
        .policy_name(format!("{name}-policy"))
        .policy_document(policy.to_string())
        .send()
        .await
        .expect("moto takes the policy")
        .policy
        .and_then(|p| p.arn)
        .unwrap();
    admin
        .iam
        .create_user()
        .user_name(name)
        .send()
        .await
        .unwrap();
    admin
        .iam
        .attach_user_policy()
        .user_name(name)
        .policy_arn(arn)
        .send()
        .await
        .unwrap();
    let key = admin
        .iam
        .create_access_key()
        .user_name(name)
        .send()
        .await
        .unwrap()
        .access_key
        .unwrap();
    (key.access_key_id, key.secret_access_key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_needs_no_permission_beyond_its_policy() {
    // NODEWRIGHT_TEST_LOG=1 prints what the sandbox does (to stderr, uncaptured).
    if std::env::var_os("NODEWRIGHT_TEST_LOG").is_some() {
        nodewright::sim::sandbox::log::init(nodewright::sim::sandbox::log::LogFormat::Text);
    }
    let moto = start_enforcing(FREE_CALLS);
    let policy = controller_policy();

    // As an administrator, within the free calls: the controller's user,
    // an administrator user for the test's own calls, the network, the node
    // role, an image and the interruption queue (named after the cluster, as
    // the stack names it).
    let setup = clients_as(&moto.endpoint, "testing", "testing").await;
    let (key, secret) =
        user_with(&setup, "nodewright-controller", &as_moto_evaluates(&policy)).await;
    let everything = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]});
    let (admin_key, admin_secret) = user_with(&setup, "administrator", &everything).await;
    crate::sandbox_aws::network(&setup, CLUSTER, NODE_ROLE).await;
    let queue_url = setup
        .sqs
        .create_queue()
        .queue_name(CLUSTER)
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    moto.enforce_now();

    let admin = clients_as(&moto.endpoint, &admin_key, &admin_secret).await;
    let controller = clients_as(&moto.endpoint, &key, &secret).await;
    // Enforcement is on: the controller's user may read subnets, not make a VPC.
    controller
        .ec2
        .describe_subnets()
        .send()
        .await
        .expect("DescribeSubnets allowed");
    let refused = controller
        .ec2
        .create_vpc()
        .cidr_block("10.9.0.0/16")
        .send()
        .await;
    let code = refused
        .as_ref()
        .err()
        .and_then(|e| e.as_service_error())
        .and_then(|e| e.meta().code());
    assert_eq!(
        code,
        Some("AccessDenied"),
        "moto must refuse CreateVpc: {refused:?}"
    );

    // Every answer to the controller passes here on its way back.
    let answers = Arc::new(Mutex::new(Answers::default()));
    let seen = answers.clone();
    let proxy = crate::aws_proxy::start(
        &moto.endpoint,
        Arc::new(move |operation: &str, body: bytes::Bytes| {
            let text = String::from_utf8_lossy(&body);
            let mut seen = seen.lock().unwrap();
            *seen.calls.entry(operation.to_string()).or_default() += 1;
            if REFUSALS.iter().any(|code| text.contains(code)) {
                seen.refused.push(format!(
                    "{operation}: {}",
                    text.chars().take(400).collect::<String>()
                ));
            }
            body
        }),
    )
    .await;

    let dir = std::env::temp_dir().join(format!("nodewright-sandbox-iam-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("all.yaml"), MANIFESTS).unwrap();
    let sandbox = Sandbox::start(
        SandboxSettings {
            manifests: vec![dir.clone()],
            cloud: CloudChoice::Aws,
            cluster_name: CLUSTER.to_string(),
            aws: AwsSettings {
                region: None,
                endpoint_url: Some(proxy.endpoint.clone()),
                credentials: Some(aws_sdk_ec2::config::Credentials::new(
                    key.clone(),
                    secret.clone(),
                    None,
                    None,
                    "nodewright-controller",
                )),
            },
            kubelet_poll: Duration::from_millis(100),
            interruption_queue: Some(CLUSTER.to_string()),
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

    // The class Ready: subnets, groups, image and its own instance profile.
    let classes: Api<EC2NodeClass> = Api::all(client.clone());
    let profile = step(
        &client,
        &answers,
        "the class Ready with its instance profile",
        || async {
            let status = classes.get("default").await.ok()?.status?;
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.is_true());
            ready.then_some(status.instance_profile?)
        },
    )
    .await;

    // Scale-up: the pods run on instances CreateFleet launched.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    step(&client, &answers, "2 web pods Running", || async {
        let list = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .ok()?
            .items;
        let running = list
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        (running == 2).then_some(())
    })
    .await;

    // What the controller made, read as the administrator: the conditions
    // and resource ARNs moto skipped, checked on it against the real policy.
    let instances = admin
        .ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag:eks:eks-cluster-name")
                .values(CLUSTER)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let instance = instances.reservations()[0].instances()[0].clone();
    let templates = admin.ec2.describe_launch_templates().send().await.unwrap();
    let template = templates.launch_templates()[0].clone();
    let made = admin
        .iam
        .get_instance_profile()
        .instance_profile_name(&profile)
        .send()
        .await
        .unwrap();
    let made = made.instance_profile.unwrap();
    let tags_of_profile: BTreeMap<String, String> = made
        .tags()
        .iter()
        .map(|t| (t.key().to_string(), t.value().to_string()))
        .collect();
    check_conditions(
        &policy,
        Made {
            instance: format!(
                "arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{}",
                instance.instance_id().unwrap()
            ),
            instance_tags: ec2_tags(instance.tags()),
            subnet: format!(
                "arn:aws:ec2:{REGION}:{ACCOUNT}:subnet/{}",
                instance.subnet_id().unwrap()
            ),
            image: format!(
                "arn:aws:ec2:{REGION}::image/{}",
                instance.image_id().unwrap()
            ),
            template: format!(
                "arn:aws:ec2:{REGION}:{ACCOUNT}:launch-template/{}",
                template.launch_template_id().unwrap()
            ),
            template_tags: ec2_tags(template.tags()),
            profile: made.arn.clone(),
            profile_tags: tags_of_profile,
        },
    );

    // Interruption: the queue says the instance is stopping; its NodeClaim
    // goes and the instance is terminated.
    let id = instance.instance_id().unwrap().to_string();
    let stopping = json!({
        "version": "0", "id": "1", "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2", "account": ACCOUNT, "time": "2026-11-26T12:00:00Z",
        "region": REGION, "resources": [],
        "detail": {"instance-id": id, "state": "stopping"}
    });
    admin
        .sqs
        .send_message()
        .queue_url(&queue_url)
        .message_body(stopping.to_string())
        .send()
        .await
        .unwrap();
    step(
        &client,
        &answers,
        "the interrupted instance terminated",
        || async {
            let described = admin
                .ec2
                .describe_instances()
                .instance_ids(&id)
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
        },
    )
    .await;

    // Teardown through the controllers: no NodePool (nothing relaunches),
    // every NodeClaim deleted (instances terminated), then the class (its
    // launch templates and instance profile deleted).
    let pools: Api<NodePool> = Api::all(client.clone());
    pools
        .delete("general", &DeleteParams::default())
        .await
        .unwrap();
    let claims: Api<NodeClaim> = Api::all(client.clone());
    step(&client, &answers, "no NodeClaim left", || async {
        let list = claims.list(&ListParams::default()).await.ok()?.items;
        for claim in &list {
            if claim.metadata.deletion_timestamp.is_none() {
                let _ = claims
                    .delete(claim.metadata.name.as_deref()?, &DeleteParams::default())
                    .await;
            }
        }
        list.is_empty().then_some(())
    })
    .await;
    classes
        .delete("default", &DeleteParams::default())
        .await
        .unwrap();
    step(
        &client,
        &answers,
        "the class gone with its launch templates and profile",
        || async {
            if classes.get_opt("default").await.ok()?.is_some() {
                return None;
            }
            let templates = admin.ec2.describe_launch_templates().send().await.ok()?;
            let profile = admin
                .iam
                .get_instance_profile()
                .instance_profile_name(&profile)
                .send()
                .await;
            (templates.launch_templates().is_empty() && profile.is_err()).then_some(())
        },
    )
    .await;

    sandbox.stop().await;
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    assert!(
        answers.refused.is_empty(),
        "moto refused the controller:\n{}",
        answers.refused.join("\n")
    );
    let missing: BTreeSet<&str> = EXERCISED
        .iter()
        .copied()
        .filter(|op| !answers.calls.contains_key(*op))
        .collect();
    assert!(
        missing.is_empty(),
        "the scenario no longer calls {missing:?}; it called {:?}",
        answers.calls
    );
    let left = admin
        .ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("instance-state-name")
                .values("pending")
                .values("running")
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert!(
        left.reservations().is_empty(),
        "instances left running: {left:?}"
    );
    eprintln!(
        "moto authorized every call the controller made: {:?}",
        answers.calls
    );
}
