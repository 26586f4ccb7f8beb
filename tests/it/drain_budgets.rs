//! A node drain against PodDisruptionBudgets, decided by the server: the
//! same scenarios on the API server double (served on 127.0.0.1) and on
//! kube-apiserver with kube-controller-manager's disruption controller (the
//! shared control plane, a namespace and a Node of the test's own). The
//! drain is nodewright's own code (`controllers::node::drain`) through the
//! controllers' client (`operator::client`), so a 429 from the eviction
//! subresource reaches the drain on its first answer.
//!
//! No kubelet runs: the test binds pods to its Node by `spec.nodeName`,
//! reports them Running and Ready, and finishes the deletion of evicted
//! pods (each carries a finalizer of the test's, so an evicted pod can be
//! read before it goes, on both backends).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use nodewright::cluster::pods::is_waiting_eviction;
use nodewright::controllers::node::{Removal, next_tier, remove};
use serde_json::{Value, json};

use crate::control_plane::{self, ControlPlane};
use crate::fixture::{eventually_showing, eventually_within};

/// How long the disruption controller and the test's own steps may take.
const SETTLE: Duration = Duration::from_secs(60);
const FINALIZER: &str = "test.nodewright.dev/kubelet";
const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// Where a scenario runs: a client as nodewright builds it, a namespace
/// and a Node of its own, and (on kube-apiserver) the audit log.
struct Backend {
    client: kube::Client,
    namespace: String,
    node: String,
    audit_log: Option<std::path::PathBuf>,
    serving: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _double: Option<apiserver_double::ApiServer>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(serving) = self.serving.take() {
            serving.abort();
        }
    }
}

async fn on_double(name: &str) -> Backend {
    let server = nodewright::sim::double::server();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let serving = tokio::spawn(server.clone().serve(listener));
    let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    let client = nodewright::operator::client::client(config).unwrap();
    backend(client, name, None, Some(server), Some(serving)).await
}

async fn on_kube_apiserver(name: &str) -> Backend {
    let plane: &ControlPlane = tokio::task::spawn_blocking(control_plane::shared)
        .await
        .unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(plane.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = nodewright::operator::client::client(config).unwrap();
    backend(client, name, Some(plane.audit_log()), None, None).await
}

async fn backend(
    client: kube::Client,
    name: &str,
    audit_log: Option<std::path::PathBuf>,
    double: Option<apiserver_double::ApiServer>,
    serving: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
) -> Backend {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let node: Node =
        serde_json::from_value(json!({"metadata": {"name": format!("{name}-node")}})).unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    Backend {
        client,
        namespace: name.to_string(),
        node: format!("{name}-node"),
        audit_log,
        serving,
        _double: double,
    }
}

impl Backend {
    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn budgets(&self) -> Api<PodDisruptionBudget> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// A pod bound to the Node, Running, Ready or not, as a kubelet reports it.
    async fn add_pod(&self, name: &str, app: &str, ready: bool) {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": app}, "finalizers": [FINALIZER]},
            "spec": {"nodeName": self.node, "containers": [{"name": "c", "image": "registry.example/c:1"}]},
        }))
        .unwrap();
        // kube-apiserver refuses pods until kube-controller-manager has made
        // the namespace's default ServiceAccount.
        let pods = self.pods();
        eventually_within("the pod created", SETTLE, || {
            let pods = pods.clone();
            let pod = pod.clone();
            async move {
                match pods.create(&PostParams::default(), &pod).await {
                    Ok(_) => Some(()),
                    Err(kube::Error::Api(s))
                        if s.code == 403 && s.message.contains("serviceaccount") =>
                    {
                        None
                    }
                    Err(e) => panic!("creating pod {name}: {e}"),
                }
            }
        })
        .await;
        let status = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }},
        ]}});
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }

    async fn add_budget(&self, name: &str, app: &str, rule: Value) {
        let mut spec = json!({"selector": {"matchLabels": {"app": app}}});
        if let (Some(spec), Some(rule)) = (spec.as_object_mut(), rule.as_object()) {
            spec.extend(rule.clone());
        }
        let budget: PodDisruptionBudget =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
        self.budgets()
            .create(&PostParams::default(), &budget)
            .await
            .unwrap();
    }

    /// Waits until the disruption controller has seen the budget's latest
    /// spec and reports `(expectedPods, desiredHealthy, currentHealthy,
    /// disruptionsAllowed)`.
    async fn budget_settles(&self, name: &str, want: (i32, i32, i32, i32)) {
        let budgets = self.budgets();
        eventually_showing(
            &self.client,
            &format!("budget {name} at {want:?}"),
            SETTLE,
            || {
                let budgets = budgets.clone();
                async move {
                    let pdb = budgets.get(name).await.ok()?;
                    let status = pdb.status?;
                    let observed = status.observed_generation? >= pdb.metadata.generation?;
                    let counts = (
                        status.expected_pods.unwrap_or_default(),
                        status.desired_healthy.unwrap_or_default(),
                        status.current_healthy.unwrap_or_default(),
                        status.disruptions_allowed.unwrap_or_default(),
                    );
                    (observed && counts == want).then_some(())
                }
            },
        )
        .await;
    }

    /// One pass of the drain over the Node's pods, as node termination runs
    /// it (no termination deadline: nothing may be deleted outright).
    /// Returns what held pods back; `None` once no pod is left to evict.
    async fn drain_pass(&self) -> Option<Vec<String>> {
        let on_node = self.pods_on_node().await;
        let waiting: Vec<&Pod> = on_node
            .iter()
            .filter(|p| is_waiting_eviction(p) && p.metadata.deletion_timestamp.is_none())
            .collect();
        if waiting.is_empty() {
            return None;
        }
        let mut blocked = Vec::new();
        for pod in next_tier(&waiting) {
            match remove(&self.client, &pod, None).await {
                Ok(Removal::Done) => {}
                Ok(Removal::Blocked(why)) => blocked.push(why),
                Err(e) => panic!("draining {}: {e}", pod.name_any()),
            }
        }
        Some(blocked)
    }

    async fn pods_on_node(&self) -> Vec<Pod> {
        self.pods()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&self.node))
            .collect()
    }

    /// The kubelet's part: a pod being deleted is finished and removed.
    async fn finish_terminating(&self) {
        for pod in self.pods_on_node().await {
            if pod.metadata.deletion_timestamp.is_none() {
                continue;
            }
            let name = pod.name_any();
            let release = json!({"metadata": {"finalizers": null}});
            match self
                .pods()
                .patch(&name, &PatchParams::default(), &Patch::Merge(&release))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => panic!("releasing pod {name}: {e}"),
            }
            match self
                .pods()
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => panic!("deleting pod {name}: {e}"),
            }
        }
    }

    /// Eviction requests for `pod` the API server answered, by its audit log.
    fn evictions_audited(&self, pod: &str) -> Option<usize> {
        let log = std::fs::read_to_string(self.audit_log.as_ref()?).unwrap_or_default();
        Some(
            log.lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .filter(|event| {
                    event["stage"] == "ResponseComplete"
                        && event["objectRef"]["subresource"] == "eviction"
                        && event["objectRef"]["namespace"] == self.namespace.as_str()
                        && event["objectRef"]["name"] == pod
                })
                .count(),
        )
    }

    /// The `DisruptionTarget` condition of an evicted pod still being deleted.
    async fn disruption_target(&self, pod: &str) -> (String, String, String) {
        let pod = self.pods().get(pod).await.unwrap();
        assert!(
            pod.metadata.deletion_timestamp.is_some(),
            "{pod:?} is being deleted"
        );
        let conditions = pod.status.and_then(|s| s.conditions).unwrap_or_default();
        let target = conditions
            .iter()
            .find(|c| c.type_ == "DisruptionTarget")
            .unwrap_or_else(|| panic!("a DisruptionTarget condition in {conditions:?}"));
        (
            target.status.clone(),
            target.reason.clone().unwrap_or_default(),
            target.message.clone().unwrap_or_default(),
        )
    }

    async fn delete_node(&self) {
        Api::<Node>::all(self.client.clone())
            .delete(&self.node, &DeleteParams::default())
            .await
            .unwrap();
    }
}

/// A `maxUnavailable: 0` budget holds the drain: every pass is refused (429)
/// and retried, nothing is deleted; once the budget allows disruptions the
/// drain evicts (each evicted pod marked `DisruptionTarget`) and finishes.
async fn a_drain_waits_for_the_budget(backend: Backend) {
    backend.add_pod("web-0", "web", true).await;
    backend.add_pod("web-1", "web", true).await;
    backend
        .add_budget("web", "web", json!({"maxUnavailable": 0}))
        .await;
    // Unmanaged pods: no controller's scale to count, so no pod is expected.
    backend.budget_settles("web", (0, 0, 2, 0)).await;

    let passes = 3;
    for _ in 0..passes {
        let blocked = backend.drain_pass().await.expect("pods to drain");
        assert_eq!(blocked.len(), 2, "{blocked:?}");
        for why in &blocked {
            assert!(why.ends_with(REFUSED), "{why}");
        }
    }
    for name in ["web-0", "web-1"] {
        let pod = backend.pods().get(name).await.unwrap();
        assert!(
            pod.metadata.deletion_timestamp.is_none(),
            "{name} not deleted"
        );
    }
    assert!(
        Api::<Node>::all(backend.client.clone())
            .get_opt(&backend.node)
            .await
            .unwrap()
            .is_some(),
        "the node stays"
    );
    let refused = match backend.pods().evict("web-0", &EvictParams::default()).await {
        Err(kube::Error::Api(s)) => s,
        other => panic!("a refusal, not {other:?}"),
    };
    assert_eq!(
        (refused.code, refused.reason.as_str()),
        (429, "TooManyRequests")
    );
    let causes = refused.details.map(|d| d.causes).unwrap_or_default();
    assert_eq!(
        causes
            .iter()
            .map(|c| (c.reason.as_str(), c.message.as_str()))
            .collect::<Vec<_>>(),
        [(
            "DisruptionBudget",
            "The disruption budget web does not allow evicting pods currently"
        )]
    );
    if backend.audit_log.is_some() {
        // One request per attempt: the client gave each 429 straight back.
        let attempts = passes + 1;
        let counted = eventually_within("the evictions in the audit log", SETTLE, || {
            let counted = backend.evictions_audited("web-0");
            async move { counted.filter(|n| *n >= attempts) }
        })
        .await;
        assert_eq!(counted, attempts, "eviction requests for web-0");
    }

    // The budget now allows what the drain needs.
    let allow = json!({"spec": {"maxUnavailable": null, "minAvailable": 0}});
    backend
        .budgets()
        .patch("web", &PatchParams::default(), &Patch::Merge(&allow))
        .await
        .unwrap();
    backend.budget_settles("web", (2, 0, 2, 2)).await;
    let blocked = backend.drain_pass().await.expect("pods to drain");
    assert!(blocked.is_empty(), "{blocked:?}");
    for name in ["web-0", "web-1"] {
        assert_eq!(
            backend.disruption_target(name).await,
            (
                "True".to_string(),
                "EvictionByEvictionAPI".to_string(),
                "Eviction API: evicting".to_string()
            )
        );
    }
    backend.finish_terminating().await;
    assert_eq!(backend.drain_pass().await, None, "drained");
    assert!(backend.pods_on_node().await.is_empty());
    backend.delete_node().await;
}

/// A budget with fewer healthy pods than it needs refuses the unready pod
/// under `IfHealthyBudget` (the default) and lets it go under
/// `AlwaysAllow`, without spending a disruption; the Ready pod stays held.
async fn the_server_applies_the_unhealthy_pod_eviction_policy(backend: Backend) {
    backend.add_pod("sick-ready", "sick", true).await;
    backend.add_pod("sick-unready", "sick", false).await;
    backend
        .add_budget(
            "sick",
            "sick",
            json!({"minAvailable": 2, "unhealthyPodEvictionPolicy": "IfHealthyBudget"}),
        )
        .await;
    backend.budget_settles("sick", (2, 2, 1, 0)).await;
    let unready = backend.pods().get("sick-unready").await.unwrap();
    let ready = backend.pods().get("sick-ready").await.unwrap();
    match remove(&backend.client, &unready, None).await {
        Ok(Removal::Blocked(why)) => assert!(why.ends_with(REFUSED), "{why}"),
        other => panic!("IfHealthyBudget holds the unready pod: {other:?}"),
    }

    let policy = json!({"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}});
    backend
        .budgets()
        .patch("sick", &PatchParams::default(), &Patch::Merge(&policy))
        .await
        .unwrap();
    backend.budget_settles("sick", (2, 2, 1, 0)).await;
    assert_eq!(
        remove(&backend.client, &unready, None).await.unwrap(),
        Removal::Done,
        "AlwaysAllow lets the unready pod go"
    );
    assert_eq!(
        backend.disruption_target("sick-unready").await.1,
        "EvictionByEvictionAPI"
    );
    match remove(&backend.client, &ready, None).await {
        Ok(Removal::Blocked(why)) => assert!(why.ends_with(REFUSED), "{why}"),
        other => panic!("the Ready pod stays held: {other:?}"),
    }
    let status = backend.budgets().get("sick").await.unwrap().status.unwrap();
    assert_eq!(status.disruptions_allowed, Some(0));
    assert!(
        !status
            .disrupted_pods
            .unwrap_or_default()
            .contains_key("sick-unready"),
        "an unhealthy pod's eviction spends no disruption"
    );
    backend.finish_terminating().await;
    let ready_left = backend
        .pods_on_node()
        .await
        .iter()
        .map(|p| p.name_any())
        .collect::<Vec<_>>();
    assert_eq!(ready_left, ["sick-ready"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_for_a_budget_allowing_no_disruption_then_finishes() {
    a_drain_waits_for_the_budget(on_double("drain-wait").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_for_a_budget_allowing_no_disruption_then_finishes_on_kube_apiserver() {
    a_drain_waits_for_the_budget(on_kube_apiserver("drain-wait").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unhealthy_pod_eviction_policy_is_the_servers_decision() {
    the_server_applies_the_unhealthy_pod_eviction_policy(on_double("drain-unhealthy").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unhealthy_pod_eviction_policy_is_the_servers_decision_on_kube_apiserver() {
    the_server_applies_the_unhealthy_pod_eviction_policy(
        on_kube_apiserver("drain-unhealthy").await,
    )
    .await;
}
