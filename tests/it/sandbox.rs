//! The sandbox in process with the simulated cloud and no delays: manifests
//! applied at start become NodeClaims, instances, Nodes (registered, Ready,
//! initialized) and Running pods, checked through `kube::Api`; the binder
//! never binds to a cordoned node; a deleted NodeClaim drains its node, an
//! offering without capacity is passed over, and an instance terminated
//! out of band is replaced — each ending with the pods Running; bad input
//! names the file and field.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use nodewright::apis::{EC2NodeClass, NodeClaim, NodePool};
use nodewright::controllers::provisioning::BatchWindows;
use nodewright::sim::sandbox::{Sandbox, SandboxError, SandboxSettings};
use serde_json::json;

use crate::control_plane::ControlPlane;
use crate::sandbox_kubectl::Backend;

pub(crate) const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      startupTaints: [{key: agent.example.com/starting, effect: NoSchedule}]
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
      - {key: karpenter.k8s.aws/instance-size, operator: In, values: [large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
"#;

pub(crate) const CLASS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: NodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"#;

pub(crate) fn deployment(name: &str, replicas: i32, cpu: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: app
        image: public.ecr.aws/nginx/nginx:1.27
        resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}
"#
    )
}

/// A directory with `files`, removed when dropped.
pub(crate) struct Manifests(pub(crate) PathBuf);

impl Manifests {
    pub(crate) fn new(name: &str, files: &[(&str, &str)]) -> Self {
        let dir =
            std::env::temp_dir().join(format!("nodewright-sandbox-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, text) in files {
            std::fs::write(dir.join(file), text).unwrap();
        }
        Manifests(dir)
    }
}

impl Drop for Manifests {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn fast(manifests: &Manifests) -> SandboxSettings {
    // NODEWRIGHT_TEST_LOG=1 prints what the sandboxes do (to stderr, uncaptured).
    if std::env::var_os("NODEWRIGHT_TEST_LOG").is_some() {
        nodewright::sim::sandbox::log::init(nodewright::sim::sandbox::log::LogFormat::Text);
    }
    SandboxSettings {
        manifests: vec![manifests.0.clone()],
        launch_delay: Duration::ZERO,
        kubelet_poll: Duration::from_millis(50),
        batch: BatchWindows {
            idle: Duration::from_millis(100),
            max: Duration::from_secs(1),
        },
        ..SandboxSettings::default()
    }
    .with_register_delay(Duration::ZERO)
}

/// The sandbox with [`fast`] settings on `backend`; on kube-apiserver, with
/// its control plane (stop the sandbox before dropping it).
pub(crate) async fn start_on(
    manifests: &Manifests,
    backend: Backend,
) -> (Sandbox, Option<ControlPlane>) {
    let mut settings = fast(manifests);
    let plane = match backend {
        Backend::Double => None,
        Backend::KubeApiserver => {
            let name = manifests
                .0
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let plane = tokio::task::spawn_blocking(move || ControlPlane::start(&name))
                .await
                .unwrap();
            settings.cluster = Some(plane.nodewright_kubeconfig());
            Some(plane)
        }
    };
    (Sandbox::start(settings).await.unwrap(), plane)
}

/// Polls `check` until it returns `Some`, for at most a minute; on timeout
/// the failure shows what the sandbox behind `client` holds.
pub(crate) async fn eventually<T, F, Fut>(client: &kube::Client, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    crate::fixture::eventually_showing(client, what, Duration::from_secs(60), check).await
}

pub(crate) fn running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn condition_true(conditions: Option<&Vec<nodewright::apis::Condition>>, type_: &str) -> bool {
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.is_true())
}

pub(crate) async fn running_pods(api: &Api<Pod>, app: &str, count: usize) -> Vec<Pod> {
    let client = api.clone().into_client();
    eventually(&client, &format!("{count} {app} pods Running"), || async {
        let pods = api
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .unwrap()
            .items;
        (pods.len() == count && pods.iter().all(running)).then_some(pods)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_gets_nodes_and_its_pods_run() {
    a_deployment_gets_nodes_and_its_pods_run_on(Backend::Double).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_gets_nodes_and_its_pods_run_on_kube_apiserver() {
    a_deployment_gets_nodes_and_its_pods_run_on(Backend::KubeApiserver).await;
}

async fn a_deployment_gets_nodes_and_its_pods_run_on(backend: Backend) {
    let manifests = Manifests::new(
        &format!("e2e-{backend:?}"),
        &[
            ("1-pool.yaml", POOL),
            ("2-class.yaml", CLASS),
            ("3-web.yaml", &deployment("web", 3, "500m")),
        ],
    );
    let (sandbox, _plane) = start_on(&manifests, backend).await;
    let kinds: Vec<&str> = sandbox.applied().iter().map(|a| a.kind.as_str()).collect();
    assert_eq!(kinds, ["NodePool", "EC2NodeClass", "Deployment"]);
    let client = sandbox.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let web = running_pods(&pods, "web", 3).await;

    // The NodeClaim controller marks claims initialized as their nodes come
    // up; pods may bind a moment before it has written that.
    let (nodes, claims) = eventually(&client, "every NodeClaim Ready", || async {
        let nodes = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        let claims = Api::<NodeClaim>::all(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        let ready = claims.iter().all(|c| {
            condition_true(
                c.status.as_ref().and_then(|s| s.conditions.as_ref()),
                "Ready",
            )
        });
        (ready && !claims.is_empty()).then_some((nodes, claims))
    })
    .await;
    assert!(!nodes.is_empty());
    assert_eq!(nodes.len(), claims.len(), "one node per NodeClaim");
    let name = regex::Regex::new(r"^ip-10-0-\d{1,3}-\d{1,3}\.ec2\.internal$").unwrap();
    for pod in &web {
        let spec = pod.spec.as_ref().unwrap();
        let node_name = spec.node_name.as_deref().expect("bound");
        let node = nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(node_name))
            .expect("bound to a node that exists");
        assert!(name.is_match(node_name), "{node_name}");
        let conditions = pod.status.as_ref().unwrap().conditions.clone().unwrap();
        for type_ in ["PodScheduled", "Ready"] {
            assert!(
                conditions
                    .iter()
                    .any(|c| c.type_ == type_ && c.status == "True"),
                "{type_}: {conditions:?}"
            );
        }
        let claim = claims
            .iter()
            .find(|c| {
                c.status.as_ref().and_then(|s| s.provider_id.as_deref())
                    == node.spec.as_ref().unwrap().provider_id.as_deref()
            })
            .expect("the node stands for a NodeClaim");
        let status = claim.status.as_ref().unwrap();
        for type_ in ["Launched", "Registered", "Initialized", "Ready"] {
            assert!(condition_true(status.conditions.as_ref(), type_), "{type_}");
        }
        assert_eq!(status.node_name.as_deref(), Some(node_name));
        assert_eq!(status.image_id.as_deref(), Some("ami-sim-al2023-amd64"));
        let labels = node.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["karpenter.sh/nodepool"], "general");
        assert_eq!(labels["kubernetes.io/hostname"], node_name);
        assert_eq!(labels["node.kubernetes.io/instance-type"], "m5.large");
        assert_eq!(labels["karpenter.sh/initialized"], "true");
        let taints = node
            .spec
            .as_ref()
            .unwrap()
            .taints
            .clone()
            .unwrap_or_default();
        assert!(
            taints.is_empty(),
            "startup and unregistered taints are gone: {taints:?}"
        );
        let allocatable = node.status.as_ref().unwrap().allocatable.as_ref().unwrap();
        assert_eq!(
            Some(&allocatable["cpu"]),
            status.allocatable.as_ref().unwrap().get("cpu")
        );
    }

    let class = Api::<EC2NodeClass>::all(client.clone())
        .get("default")
        .await
        .unwrap();
    let status = class.status.unwrap();
    assert!(condition_true(status.conditions.as_ref(), "Ready"));
    assert_eq!(status.subnets.unwrap().len(), 6, "one per us-east-1 zone");
    let pool = Api::<NodePool>::all(client.clone())
        .get("general")
        .await
        .unwrap();
    assert!(condition_true(
        pool.status.unwrap().conditions.as_ref(),
        "Ready"
    ));
    let address = sandbox.address();
    sandbox.stop().await;
    if let Some(address) = address {
        std::net::TcpListener::bind(address).expect("the listener is closed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binder_never_binds_to_a_cordoned_node() {
    the_binder_never_binds_to_a_cordoned_node_on(Backend::Double).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binder_never_binds_to_a_cordoned_node_on_kube_apiserver() {
    the_binder_never_binds_to_a_cordoned_node_on(Backend::KubeApiserver).await;
}

async fn the_binder_never_binds_to_a_cordoned_node_on(backend: Backend) {
    // One pod per node: m5.large has under 2 CPUs allocatable.
    let manifests = Manifests::new(
        &format!("cordon-{backend:?}"),
        &[
            ("1-pool.yaml", POOL),
            ("2-class.yaml", CLASS),
            ("3-api.yaml", &deployment("api", 1, "1")),
        ],
    );
    let (sandbox, _plane) = start_on(&manifests, backend).await;
    let client = sandbox.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let first = running_pods(&pods, "api", 1).await;
    let cordoned = first[0].spec.as_ref().unwrap().node_name.clone().unwrap();
    // Room for a small pod is left on it, so only the cordon keeps pods off.
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            &cordoned,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"unschedulable": true}})),
        )
        .await
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let small = deployment("small", 2, "100m");
    let small: Deployment = nodewright::yaml::from_str(&small).unwrap();
    deployments
        .create(&Default::default(), &small)
        .await
        .unwrap();
    let placed = running_pods(&pods, "small", 2).await;
    for pod in &placed {
        let node = pod.spec.as_ref().unwrap().node_name.clone().unwrap();
        assert_ne!(node, cordoned, "bound to the cordoned node");
    }
    let on_cordoned = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={cordoned}")))
        .await
        .unwrap()
        .items;
    assert_eq!(on_cordoned.len(), 1, "only the pod that was there before");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_nothing_fits_is_marked_unschedulable_and_stays_pending() {
    a_pod_nothing_fits_is_marked_unschedulable_and_stays_pending_on(Backend::Double).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_nothing_fits_is_marked_unschedulable_and_stays_pending_on_kube_apiserver() {
    a_pod_nothing_fits_is_marked_unschedulable_and_stays_pending_on(Backend::KubeApiserver).await;
}

async fn a_pod_nothing_fits_is_marked_unschedulable_and_stays_pending_on(backend: Backend) {
    let manifests = Manifests::new(
        &format!("unschedulable-{backend:?}"),
        &[
            ("1-pool.yaml", POOL),
            ("2-class.yaml", CLASS),
            ("3-huge.yaml", &deployment("huge", 1, "64")),
        ],
    );
    let (sandbox, _plane) = start_on(&manifests, backend).await;
    let client = sandbox.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let message = eventually(&client, "the pod marked unschedulable", || async {
        let pods = pods
            .list(&ListParams::default().labels("app=huge"))
            .await
            .unwrap();
        let pod = pods.items.first()?;
        pod.status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
            .and_then(|c| c.message.clone())
    })
    .await;
    assert_eq!(message, "no nodes available to schedule pods");
    let pod = &pods.list(&ListParams::default()).await.unwrap().items[0];
    assert_eq!(
        pod.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );
    assert!(pod.spec.as_ref().unwrap().node_name.is_none());
    sandbox.stop().await;
}

#[tokio::test]
async fn bad_input_names_the_flag_or_the_file_and_field() {
    let not_loopback = SandboxSettings {
        listen: "0.0.0.0:0".parse().unwrap(),
        ..SandboxSettings::default()
    };
    let error = Sandbox::start(not_loopback).await.err().unwrap();
    assert!(matches!(error, SandboxError::NotLoopback(_)), "{error}");
    assert!(error.to_string().contains("loopback"), "{error}");

    let invalid = POOL.replace("spec:\n  template:", "spec:\n  weight: 1000\n  template:");
    let manifests = Manifests::new("invalid", &[("pool.yaml", &invalid)]);
    let error = Sandbox::start(fast(&manifests))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("pool.yaml (document 1)"), "{error}");
    assert!(error.contains("spec.weight"), "{error}");

    let unknown = Manifests::new(
        "unknown",
        &[(
            "x.yaml",
            "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
        )],
    );
    let error = Sandbox::start(fast(&unknown))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("x.yaml (document 1): example.com/v1/Widget is not served"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_claim_drains_its_node_and_the_pods_run_again_elsewhere() {
    a_deleted_node_claim_drains_its_node_and_the_pods_run_again_elsewhere_on(Backend::Double).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_claim_drains_its_node_and_the_pods_run_again_elsewhere_on_kube_apiserver() {
    a_deleted_node_claim_drains_its_node_and_the_pods_run_again_elsewhere_on(
        Backend::KubeApiserver,
    )
    .await;
}

async fn a_deleted_node_claim_drains_its_node_and_the_pods_run_again_elsewhere_on(
    backend: Backend,
) {
    let manifests = Manifests::new(
        &format!("drain-{backend:?}"),
        &[
            ("1-pool.yaml", POOL),
            ("2-class.yaml", CLASS),
            ("3-web.yaml", &deployment("web", 2, "500m")),
        ],
    );
    let (sandbox, _plane) = start_on(&manifests, backend).await;
    let client = sandbox.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let before = running_pods(&pods, "web", 2).await;
    let old_node = before[0].spec.as_ref().unwrap().node_name.clone().unwrap();
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let claim = eventually(&client, "the node's NodeClaim", || async {
        claims
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|c| c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&old_node))
    })
    .await;
    let old_instance = claim.status.as_ref().unwrap().provider_id.clone().unwrap();

    claims
        .delete(claim.metadata.name.as_deref().unwrap(), &Default::default())
        .await
        .unwrap();

    // The node is drained and removed, its instance terminated, and the
    // Deployment's pods come back Running on a node launched for them.
    let nodes: Api<Node> = Api::all(client.clone());
    eventually(&client, "the old node removed", || async {
        nodes
            .get_opt(&old_node)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let after = eventually(&client, "the pods Running on another node", || async {
        let pods = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items;
        let moved = pods.len() == 2
            && pods.iter().all(|p| {
                running(p)
                    && p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                        != Some(old_node.as_str())
            });
        moved.then_some(pods)
    })
    .await;
    let old_names: Vec<_> = before.iter().map(|p| p.metadata.name.clone()).collect();
    assert!(
        after.iter().all(|p| !old_names.contains(&p.metadata.name)),
        "the evicted pods were replaced, not rebound"
    );
    let instances = nodewright::cloudprovider::CloudProvider::list(sandbox.cloud().as_ref())
        .await
        .unwrap();
    assert!(
        instances
            .iter()
            .all(|c| c.status.as_ref().and_then(|s| s.provider_id.as_deref())
                != Some(old_instance.as_str())),
        "the old instance is terminated"
    );
    sandbox.stop().await;
}

const FLEXIBLE_POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
      - {key: karpenter.k8s.aws/instance-size, operator: In, values: [large, xlarge]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
"#;

/// The instance types of the nodes the `app` pods run on.
async fn instance_types_of(client: &kube::Client, pods: &[Pod]) -> Vec<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut types = Vec::new();
    for pod in pods {
        let name = pod.spec.as_ref().unwrap().node_name.clone().unwrap();
        let node = nodes.get(&name).await.unwrap();
        types.push(node.metadata.labels.unwrap()["node.kubernetes.io/instance-type"].clone());
    }
    types
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_run_on_the_next_offering_when_the_cheapest_has_no_capacity() {
    let manifests = Manifests::new(
        "ice",
        &[("1-pool.yaml", FLEXIBLE_POOL), ("2-class.yaml", CLASS)],
    );
    let sandbox = Sandbox::start(fast(&manifests)).await.unwrap();
    let cloud = sandbox.simulated_cloud().unwrap();
    for zone in ["a", "b", "c", "d", "e", "f"] {
        cloud.inject_insufficient_capacity(nodewright::cloudprovider::OfferingKey {
            instance_type: "m5.large".to_string(),
            zone: format!("us-east-1{zone}"),
            capacity_type: "on-demand".to_string(),
        });
    }
    let client = sandbox.client();
    let deployment: Deployment = nodewright::yaml::from_str(&deployment("web", 2, "500m")).unwrap();
    Api::<Deployment>::namespaced(client.clone(), "default")
        .create(&Default::default(), &deployment)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let web = running_pods(&pods, "web", 2).await;
    let types = instance_types_of(&client, &web).await;
    assert!(types.iter().all(|t| t == "m5.xlarge"), "{types:?}");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_terminated_behind_nodewrights_back_is_replaced() {
    an_instance_terminated_behind_nodewrights_back_is_replaced_on(Backend::Double).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_terminated_behind_nodewrights_back_is_replaced_on_kube_apiserver() {
    an_instance_terminated_behind_nodewrights_back_is_replaced_on(Backend::KubeApiserver).await;
}

async fn an_instance_terminated_behind_nodewrights_back_is_replaced_on(backend: Backend) {
    let manifests = Manifests::new(
        &format!("oob-{backend:?}"),
        &[
            ("1-pool.yaml", POOL),
            ("2-class.yaml", CLASS),
            ("3-web.yaml", &deployment("web", 2, "500m")),
        ],
    );
    let (sandbox, _plane) = start_on(&manifests, backend).await;
    let client = sandbox.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let before = running_pods(&pods, "web", 2).await;
    let old_node = before[0].spec.as_ref().unwrap().node_name.clone().unwrap();
    let node = Api::<Node>::all(client.clone())
        .get(&old_node)
        .await
        .unwrap();
    let provider_id = node.spec.unwrap().provider_id.unwrap();
    let instance = provider_id.rsplit('/').next().unwrap();
    assert!(
        sandbox
            .simulated_cloud()
            .unwrap()
            .terminate_out_of_band(instance)
    );

    // The node goes with its instance, its claim is collected, and the
    // Deployment's pods run again on a node launched for them.
    let nodes: Api<Node> = Api::all(client.clone());
    eventually(&client, "the old node removed", || async {
        nodes
            .get_opt(&old_node)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let claims: Api<NodeClaim> = Api::all(client.clone());
    eventually(&client, "the orphaned claim collected", || async {
        let left = claims.list(&ListParams::default()).await.unwrap().items;
        left.iter()
            .all(|c| {
                c.status.as_ref().and_then(|s| s.provider_id.as_deref())
                    != Some(provider_id.as_str())
            })
            .then_some(())
    })
    .await;
    eventually(&client, "the pods Running on another node", || async {
        let list = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items;
        (list.len() == 2
            && list.iter().all(|p| {
                running(p)
                    && p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                        != Some(old_node.as_str())
            }))
        .then_some(())
    })
    .await;
    sandbox.stop().await;
}

const FLEX_OR_NOT_POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  disruption: {consolidateAfter: 1s}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c7i-flex, c7i]}
      - {key: karpenter.k8s.aws/instance-size, operator: In, values: [large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_on_a_fallback_type_moves_to_the_preferred_one_once_its_capacity_returns() {
    let manifests = Manifests::new(
        "back",
        &[("1-pool.yaml", FLEX_OR_NOT_POOL), ("2-class.yaml", CLASS)],
    );
    let settings = SandboxSettings {
        unavailable_offerings_ttl: Duration::from_secs(2),
        ..fast(&manifests)
    };
    let sandbox = Sandbox::start(settings).await.unwrap();
    let cloud = sandbox.simulated_cloud().unwrap();
    let flex = |zone: &str| nodewright::cloudprovider::OfferingKey {
        instance_type: "c7i-flex.large".to_string(),
        zone: format!("us-east-1{zone}"),
        capacity_type: "on-demand".to_string(),
    };
    let zones = ["a", "b", "c", "d", "e", "f"];
    for zone in zones {
        cloud.inject_insufficient_capacity(flex(zone));
    }
    let client = sandbox.client();
    let deployment: Deployment = nodewright::yaml::from_str(&deployment("web", 1, "500m")).unwrap();
    Api::<Deployment>::namespaced(client.clone(), "default")
        .create(&Default::default(), &deployment)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let web = running_pods(&pods, "web", 1).await;
    assert_eq!(instance_types_of(&client, &web).await, ["c7i.large"]);

    // The flex type (first in the built-in priority order, and cheaper)
    // has capacity again: consolidation replaces the fallback node with it.
    for zone in zones {
        cloud.restore_capacity(&flex(zone));
    }
    crate::fixture::eventually_within(
        "the pod on c7i-flex.large",
        Duration::from_secs(150),
        || async {
            let web = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .unwrap()
                .items;
            let running: Vec<Pod> = web.into_iter().filter(running).collect();
            let [pod] = running.as_slice() else {
                return None;
            };
            // The node may be going away between the two reads.
            let node = Api::<Node>::all(client.clone())
                .get_opt(pod.spec.as_ref()?.node_name.as_deref()?)
                .await
                .ok()??;
            (node.labels().get("node.kubernetes.io/instance-type")
                == Some(&"c7i-flex.large".to_string()))
            .then_some(())
        },
    )
    .await;
    sandbox.stop().await;
}
