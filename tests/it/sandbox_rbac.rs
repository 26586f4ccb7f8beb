//! The chart's RBAC is what the controller needs, no less and no more:
//! the chart's ServiceAccount, ClusterRoles, Roles and bindings (rendered
//! by the real Helm library) are loaded into an AWS sandbox against moto,
//! nodewright's controllers run as that ServiceAccount with RBAC enforced
//! by the API server double, and the end-to-end scenarios run: provisioning,
//! a drain blocked by a PodDisruptionBudget until the terminationGracePeriod,
//! garbage collection of an instance terminated behind the controller's
//! back, an interruption from the queue, consolidation of empty nodes, and
//! leader election. Any 403 fails the test, and so does any rule of the
//! chart that no request used, but the exceptions listed (and justified in
//! the templates).
//!
//! The scenario runs twice: on the double, whose authorizer reports the
//! decisions, and on the real control plane (`_on_kube_apiserver`), where
//! kube-apiserver's RBAC authorizer decides and its audit log is read back
//! ([`crate::rbac_audit`]).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use nodewright::apis::{EC2NodeClass, NodeClaim};
use nodewright::aws::clients::AwsSettings;
use nodewright::controllers::provisioning::BatchWindows;
use nodewright::sim::sandbox::{
    CloudChoice, ControllerAccount, Sandbox, SandboxError, SandboxSettings,
};

use crate::control_plane::ControlPlane;
use crate::moto::{moto, moto_clients};

const LABEL: &str = "sandbox-rbac";
/// The moto resources' label on kube-apiserver: the two runs share moto.
const LABEL_ON_KUBE_APISERVER: &str = "sandbox-rbac-kas";
const NAMESPACE: &str = "kube-system";
const ACCOUNT: &str = "nodewright";

/// Rules of the chart that the sandbox cannot exercise, with why; the
/// templates carry the same justification.
const NOT_EXERCISED: &[(&str, &str)] = &[(
    "nodewright-dns",
    "`nodewright controller` reads kube-system/kube-dns once at start for the nodes' DNS IP \
     (src/cli/controller/launch.rs); the sandbox gives its launch settings directly",
)];

const MANIFESTS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  # moto drops a launch template's security groups, so every node looks
  # drifted: replacing them would only churn the scenario.
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
    budgets: [{nodes: "0", reasons: [Drifted]}, {nodes: "100%"}]
  template:
    spec:
      terminationGracePeriod: 5s
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: SandboxRbacNodeRole
  amiFamily: AL2023
  amiSelectorTerms: [{tags: {team: sandbox-rbac}}]
  subnetSelectorTerms: [{tags: {discovery: sandbox-rbac}}]
  securityGroupSelectorTerms: [{tags: {discovery: sandbox-rbac}}]
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
        resources: {requests: {cpu: 1200m, memory: 1Gi}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
"#;

/// The chart's ServiceAccount and RBAC objects, rendered into kube-system
/// as Karpenter's getting-started installs it.
fn chart_rbac() -> String {
    let rendered = crate::deploy::render_chart(
        NAMESPACE,
        &[
            "settings.clusterName=sandbox-rbac",
            "settings.clusterEndpoint=https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com",
            "settings.interruptionQueue=sandbox-rbac",
            "controller.image.repository=111122223333.dkr.ecr.us-east-1.amazonaws.com/nodewright",
        ],
    );
    let kinds = [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ];
    let documents: Vec<&str> = rendered
        .split("\n---")
        .filter(|doc| {
            doc.lines()
                .any(|line| kinds.iter().any(|k| line == format!("kind: {k}")))
        })
        .collect();
    assert!(
        documents.len() >= 6,
        "the chart renders its ServiceAccount and RBAC: {rendered}"
    );
    documents.join("\n---\n")
}

/// The scenario's NodePool, EC2NodeClass, Deployment and PDB, its moto
/// resources labelled `label`.
fn manifests(label: &str) -> String {
    MANIFESTS
        .replace("sandbox-rbac", label)
        .replace("SandboxRbacNodeRole", &node_role(label))
}

fn node_role(label: &str) -> String {
    if label == LABEL {
        "SandboxRbacNodeRole".to_string()
    } else {
        format!("SandboxRbacNodeRole-{label}")
    }
}

fn settings(dir: &std::path::Path) -> SandboxSettings {
    settings_labelled(dir, LABEL)
}

fn settings_labelled(dir: &std::path::Path, label: &str) -> SandboxSettings {
    SandboxSettings {
        manifests: vec![dir.to_path_buf()],
        cloud: CloudChoice::Aws,
        cluster_name: label.to_string(),
        aws: AwsSettings {
            region: None,
            endpoint_url: Some(moto().endpoint.clone()),
            credentials: Some(aws_sdk_ec2::config::Credentials::new(
                "testing", "testing", None, None, "moto",
            )),
        },
        kubelet_poll: Duration::from_millis(100),
        interruption_queue: Some(label.to_string()),
        batch: BatchWindows {
            idle: Duration::from_millis(100),
            max: Duration::from_secs(1),
        },
        controller_account: Some(ControllerAccount {
            namespace: NAMESPACE.to_string(),
            name: ACCOUNT.to_string(),
            lease: "nodewright-leader-election".to_string(),
        }),
        ..SandboxSettings::default()
    }
    .with_register_delay(Duration::ZERO)
}

/// Who authorizes the controller's requests, and how its decisions are read.
enum Authorizer {
    /// The double's authorizer, which reports them.
    Double,
    /// kube-apiserver's RBAC authorizer; its audit log is read back (at
    /// most every two seconds while waiting).
    KubeApiserver {
        plane: ControlPlane,
        read: Mutex<Option<Instant>>,
    },
}

/// What the authorizer decided: refused requests, and the names of roles
/// with a rule no request used (with the rule).
struct Decisions {
    denied: Vec<String>,
    unused: Vec<(String, String)>,
}

impl Authorizer {
    /// The refused requests so far (on kube-apiserver, empty between reads).
    fn denied_now(&self, sandbox: &Sandbox) -> Vec<String> {
        match self {
            Authorizer::Double => sandbox
                .server()
                .expect("the sandbox runs on the double")
                .authorization_report(NAMESPACE, ACCOUNT)
                .denied
                .iter()
                .map(|d| format!("{d:?}"))
                .collect(),
            Authorizer::KubeApiserver { plane, read } => {
                let mut last = read.lock().unwrap();
                if last.is_some_and(|at| at.elapsed() < Duration::from_secs(2)) {
                    return Vec::new();
                }
                *last = Some(Instant::now());
                let user = format!("system:serviceaccount:{NAMESPACE}:{ACCOUNT}");
                crate::rbac_audit::requests_of(&plane.audit_log(), &user)
                    .into_iter()
                    .filter(|r| r.code == 403)
                    .map(|r| format!("{r:?}"))
                    .collect()
            }
        }
    }

    /// Every decision, at the end of the scenario.
    async fn decisions(&self, sandbox: &Sandbox) -> Decisions {
        match self {
            Authorizer::Double => {
                let report = sandbox
                    .server()
                    .expect("the sandbox runs on the double")
                    .authorization_report(NAMESPACE, ACCOUNT);
                Decisions {
                    denied: report.denied.iter().map(|d| format!("{d:?}")).collect(),
                    unused: report
                        .unused
                        .iter()
                        .map(|u| (u.rule.role_name.clone(), format!("{u:?}")))
                        .collect(),
                }
            }
            Authorizer::KubeApiserver { plane, .. } => {
                let report = crate::rbac_audit::report(
                    &plane.client().await,
                    &plane.audit_log(),
                    NAMESPACE,
                    ACCOUNT,
                )
                .await;
                assert!(
                    report.requests > 0,
                    "the audit log holds the controller's requests"
                );
                Decisions {
                    denied: report.denied.iter().map(|d| format!("{d:?}")).collect(),
                    unused: report
                        .unused
                        .iter()
                        .map(|u| (u.role_name.clone(), format!("{u:?}")))
                        .collect(),
                }
            }
        }
    }
}

/// Polls `check` until it returns `Some`; a request the chart's RBAC
/// refused fails at once, naming it, rather than at the timeout.
async fn eventually<T, Fut: std::future::Future<Output = Option<T>>>(
    (sandbox, authorizer): (&Sandbox, &Authorizer),
    what: &str,
    mut check: impl FnMut() -> Fut,
) -> T {
    let client = sandbox.client();
    crate::fixture::eventually_showing(&client, what, Duration::from_secs(150), || {
        let denied = authorizer.denied_now(sandbox);
        assert!(
            denied.is_empty(),
            "the chart's RBAC refused the controller while waiting for {what}: {denied:#?}"
        );
        check()
    })
    .await
}

/// The names of the NodeClaims once the web pods all run, each on a node.
async fn web_running(on: (&Sandbox, &Authorizer), what: &str) -> Vec<String> {
    let sandbox = on.0;
    let pods: Api<Pod> = Api::namespaced(sandbox.client(), "default");
    let claims: Api<NodeClaim> = Api::all(sandbox.client());
    eventually(on, what, || async {
        let list = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .ok()?
            .items;
        let running = list.len() == 2
            && list
                .iter()
                .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        if !running {
            return None;
        }
        let names: Vec<String> = claims
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        Some(names)
    })
    .await
}

/// The instance ID behind a NodeClaim.
async fn instance_of(claims: &Api<NodeClaim>, name: &str) -> String {
    let claim = claims.get(name).await.unwrap();
    let provider_id = claim.status.and_then(|s| s.provider_id).unwrap_or_default();
    provider_id
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Waits until the NodeClaim `name` is gone.
async fn gone(on: (&Sandbox, &Authorizer), claims: &Api<NodeClaim>, name: &str, what: &str) {
    eventually(on, what, || async {
        claims.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn the_sandbox_refuses_a_controller_account_the_manifests_do_not_create() {
    let dir = std::env::temp_dir().join(format!("nodewright-rbac-none-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("all.yaml"), MANIFESTS).unwrap();
    let settings = SandboxSettings {
        cloud: CloudChoice::Simulated,
        ..settings(&dir)
    };
    let error = Sandbox::start(settings).await.err();
    let _ = std::fs::remove_dir_all(&dir);
    let Some(error @ SandboxError::NoControllerAccount { .. }) = error else {
        panic!("expected NoControllerAccount, got {error:?}");
    };
    assert!(
        error
            .to_string()
            .contains("--controller-service-account kube-system/nodewright"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_runs_under_the_charts_rbac_which_it_uses_whole() {
    charts_rbac_used_whole(Authorizer::Double, LABEL).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_runs_under_the_charts_rbac_which_it_uses_whole_on_kube_apiserver() {
    let plane = tokio::task::spawn_blocking(|| ControlPlane::start("rbac"))
        .await
        .unwrap();
    let authorizer = Authorizer::KubeApiserver {
        plane,
        read: Mutex::new(None),
    };
    charts_rbac_used_whole(authorizer, LABEL_ON_KUBE_APISERVER).await;
}

async fn charts_rbac_used_whole(authorizer: Authorizer, label: &str) {
    if std::env::var_os("NODEWRIGHT_TEST_LOG").is_some() {
        nodewright::sim::sandbox::log::init(nodewright::sim::sandbox::log::LogFormat::Text);
    }
    let clients = moto_clients().await;
    crate::sandbox_aws::network(&clients, label, &node_role(label)).await;
    let queue_url = clients
        .sqs
        .create_queue()
        .queue_name(label)
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let dir = std::env::temp_dir().join(format!("nodewright-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("0-chart.yaml"), chart_rbac()).unwrap();
    std::fs::write(dir.join("1-cluster.yaml"), manifests(label)).unwrap();
    let mut settings = settings_labelled(&dir, label);
    if let Authorizer::KubeApiserver { plane, .. } = &authorizer {
        settings.cluster = Some(plane.nodewright_kubeconfig());
    }
    let sandbox = Sandbox::start(settings).await.unwrap();
    let on = (&sandbox, &authorizer);
    let client = sandbox.client();
    let claims: Api<NodeClaim> = Api::all(client.clone());

    // The EC2NodeClass controller reads and writes the class.
    let classes: Api<EC2NodeClass> = Api::all(client.clone());
    eventually(on, "the class Ready", || async {
        let status = classes.get("default").await.ok()?.status?;
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.is_true());
        ready.then_some(())
    })
    .await;

    // Provisioning: one m5.large per pod.
    let first = web_running(on, "2 web pods Running").await;
    assert_eq!(first.len(), 2, "{first:?}");

    // A drain the PodDisruptionBudget blocks: evictions are refused until
    // the NodeClaim's terminationGracePeriod ends, then the pod is deleted.
    claims
        .delete(&first[0], &DeleteParams::default())
        .await
        .unwrap();
    gone(
        on,
        &claims,
        &first[0],
        "the deleted NodeClaim drained and gone",
    )
    .await;
    let second = web_running(on, "2 web pods Running after the drain").await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    pdbs.delete("web", &DeleteParams::default()).await.unwrap();

    // Garbage collection: an instance terminated behind the controller's back.
    let victim = second[0].clone();
    let instance = instance_of(&claims, &victim).await;
    clients
        .ec2
        .terminate_instances()
        .instance_ids(&instance)
        .send()
        .await
        .unwrap();
    gone(
        on,
        &claims,
        &victim,
        "the NodeClaim of a terminated instance collected",
    )
    .await;
    let third = web_running(on, "2 web pods Running after the collection").await;

    // An interruption from the queue.
    let victim = third[0].clone();
    let instance = instance_of(&claims, &victim).await;
    let stopping = serde_json::json!({
        "version": "0", "id": "1", "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2", "account": "123456789012", "time": "2026-11-27T12:00:00Z",
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
    gone(on, &claims, &victim, "the interrupted NodeClaim gone").await;
    web_running(on, "2 web pods Running after the interruption").await;

    // Consolidation: with no pods left, every node is empty and goes.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    eventually(on, "every NodeClaim consolidated away", || async {
        claims
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;

    let report = authorizer.decisions(&sandbox).await;
    sandbox.stop().await;
    let _ = std::fs::remove_dir_all(&dir);

    assert!(
        report.denied.is_empty(),
        "the chart's RBAC refused the controller: {:#?}",
        report.denied
    );
    let unused: Vec<_> = report
        .unused
        .iter()
        .filter(|(role_name, _)| !NOT_EXERCISED.iter().any(|(role, _)| role == role_name))
        .collect();
    assert!(
        unused.is_empty(),
        "rules of the chart no request used (remove them, or justify them in the template and in NOT_EXERCISED): {unused:#?}"
    );
    // The exceptions are still needed: each names a role the chart binds.
    for (role, why) in NOT_EXERCISED {
        assert!(
            report.unused.iter().any(|(name, _)| name == role),
            "{role} is listed as not exercised ({why}) but the scenario used it or the chart no longer binds it"
        );
    }
    // And nothing was left running in moto.
    let running = crate::sandbox_aws::left_running(&clients, label).await;
    assert!(running.is_empty(), "left running: {running:?}");
}
