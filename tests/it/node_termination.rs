//! Node termination against the API server double and the simulated cloud:
//! cordon and taint, drain through evictions in Karpenter's order (PDBs and
//! `do-not-disrupt` hold it; `terminationGracePeriod` bounds it), static and
//! disrupted-tolerating pods left, then the instance terminated and the
//! finalizer removed — at once when the instance is already gone.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use nodewright::cloudprovider::CloudProvider;
use nodewright::controllers::node;
use serde_json::{Value, json};

use crate::fixture::{Cluster, claim, cluster, node_for};

const NODE: &str = "ip-10-0-0-1.ec2.internal";

/// A launched, registered claim with its node: returns the cluster.
async fn registered(grace: Option<&str>) -> Cluster {
    let cluster = cluster().await;
    let mut object = claim("general-a");
    object.spec.termination_grace_period = grace.map(str::to_string);
    cluster
        .claims()
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    cluster.pass("general-a").await;
    cluster.pass("general-a").await;
    let launched = cluster.claims().get("general-a").await.unwrap();
    cluster
        .nodes()
        .create(
            &PostParams::default(),
            &node_for(&launched, true, json!([])),
        )
        .await
        .unwrap();
    cluster.settle_nodes(1).await;
    cluster.pass("general-a").await;
    cluster
}

fn pod(name: &str, extra: Value) -> Pod {
    let mut value = json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "c"}]},
    });
    merge(&mut value, extra);
    serde_json::from_value(value).unwrap()
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (k, v) in extra {
                merge(base.entry(k).or_insert(Value::Null), v);
            }
        }
        (base, extra) => *base = extra,
    }
}

impl Cluster {
    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.ctx.client.clone(), "default")
    }

    async fn add_pods(&self, pods: &[Pod]) {
        // Running and Ready, as pods on a live node are: budgets count them
        // healthy (the API server evicts a Pending pod without asking them).
        let running = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        for pod in pods {
            self.pods()
                .create(&PostParams::default(), pod)
                .await
                .unwrap();
            self.pods()
                .patch_status(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&running),
                )
                .await
                .unwrap();
        }
        let want = self
            .pods()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len();
        for _ in 0..300 {
            if self.ctx.state.pods.all().len() == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("pods never reached the cluster state");
    }

    /// A PodDisruptionBudget named `app` allowing no disruption of the pods
    /// labelled `app=<app>`; returns the budgets' API.
    async fn add_blocking_pdb(&self, app: &str) -> Api<PodDisruptionBudget> {
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(self.ctx.client.clone(), "default");
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": app},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}}
        }))
        .unwrap();
        pdbs.create(&PostParams::default(), &pdb).await.unwrap();
        pdbs
    }

    /// Node termination passes until `done` holds or `passes` run out.
    async fn terminate_until(&self, passes: usize, mut done: impl FnMut(&Self) -> bool) {
        for _ in 0..passes {
            tokio::time::sleep(Duration::from_millis(30)).await;
            let Some(stored) = self.nodes().get_opt(NODE).await.unwrap() else {
                return;
            };
            node::reconcile(&self.ctx, &stored).await.unwrap();
            if done(self) {
                return;
            }
        }
    }

    fn pod_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .ctx
            .state
            .pods
            .all()
            .iter()
            .map(|p| p.name_any())
            .collect();
        names.sort();
        names
    }

    fn drain_events(&self) -> Vec<String> {
        self.server
            .objects("events.k8s.io", "events")
            .iter()
            .filter(|e| e["reason"] == "FailedDraining")
            .map(|e| e["note"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

#[tokio::test]
async fn a_deleted_node_is_drained_in_order_then_its_instance_terminated() {
    let cluster = registered(None).await;
    let tolerate_all = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
    let daemon = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u1", "controller": true}]}});
    let static_pod = json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "u2"}]}});
    let critical = json!({"spec": {"priorityClassName": "system-node-critical"}});
    cluster
        .add_pods(&[
            pod("web", json!({})),
            pod("critical", critical),
            pod("agent", daemon),
            pod("logs", tolerate_all),
            pod("mirror", static_pod),
        ])
        .await;
    cluster
        .nodes()
        .delete(NODE, &DeleteParams::default())
        .await
        .unwrap();
    // One pass: cordoned, tainted, and only the first tier evicted.
    let deleting = cluster.nodes().get(NODE).await.unwrap();
    node::reconcile(&cluster.ctx, &deleting).await.unwrap();
    let tainted: Node = cluster.nodes().get(NODE).await.unwrap();
    let spec = tainted.spec.clone().unwrap();
    assert_eq!(spec.unschedulable, Some(true));
    assert!(
        spec.taints
            .unwrap()
            .iter()
            .any(|t| t.key == "karpenter.sh/disrupted" && t.effect == "NoSchedule")
    );
    assert_eq!(
        tainted.labels()["node.kubernetes.io/exclude-from-external-load-balancers"],
        "karpenter"
    );
    assert!(
        cluster.pods().get_opt("web").await.unwrap().is_none(),
        "non-critical first"
    );
    assert!(
        cluster.pods().get_opt("agent").await.unwrap().is_some(),
        "daemons wait for the first tier"
    );
    assert!(
        cluster.pods().get_opt("critical").await.unwrap().is_some(),
        "critical pods go last"
    );

    cluster
        .terminate_until(40, |c| c.pod_names() == ["logs", "mirror"])
        .await;
    assert_eq!(
        cluster.pod_names(),
        ["logs", "mirror"],
        "static and disrupted-tolerating pods stay"
    );
    // The claim was deleted with its node; the instance is terminated, then the node released.
    cluster.terminate_until(40, |_| false).await;
    assert!(cluster.nodes().get_opt(NODE).await.unwrap().is_none());
    assert!(cluster.cloud.list().await.unwrap().is_empty());
    let claim = cluster.claims().get_opt("general-a").await.unwrap();
    if let Some(claim) = claim {
        assert!(claim.metadata.deletion_timestamp.is_some());
        let drained = claim
            .status
            .unwrap()
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Drained")
            .unwrap();
        assert_eq!(format!("{:?}", drained.status), "True");
    }
    cluster.driver.abort();
}

#[tokio::test]
async fn a_pdb_holds_the_drain_until_it_allows_the_eviction() {
    let cluster = registered(None).await;
    cluster.add_pods(&[pod("web", json!({}))]).await;
    let pdbs = cluster.add_blocking_pdb("web").await;
    cluster
        .nodes()
        .delete(NODE, &DeleteParams::default())
        .await
        .unwrap();
    cluster.terminate_until(5, |_| false).await;
    assert!(
        cluster.pods().get_opt("web").await.unwrap().is_some(),
        "the PDB holds the pod"
    );
    let events = cluster.drain_events();
    assert!(
        !events.is_empty() && events[0].contains("web"),
        "{events:?}"
    );
    assert_eq!(
        cluster.cloud.list().await.unwrap().len(),
        1,
        "the instance waits for the drain"
    );

    // (Without a controller to scale from, only an integer minAvailable lets it go.)
    let relaxed = json!({"spec": {"maxUnavailable": null, "minAvailable": 0}});
    pdbs.patch("web", &PatchParams::default(), &Patch::Merge(&relaxed))
        .await
        .unwrap();
    cluster
        .terminate_until(60, |c| c.pod_names().is_empty())
        .await;
    assert!(
        cluster.pod_names().is_empty(),
        "evicted once the budget allows it"
    );
    cluster.driver.abort();
}

#[tokio::test]
async fn do_not_disrupt_holds_the_drain_until_the_termination_grace_period() {
    // A grace period already spent: the pod must be deleted to let the node go.
    let cluster = registered(Some("1s")).await;
    let held = json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}, "spec": {"terminationGracePeriodSeconds": 0}});
    cluster.add_pods(&[pod("db", held.clone())]).await;
    cluster
        .nodes()
        .delete(NODE, &DeleteParams::default())
        .await
        .unwrap();
    // Before the claim is deleted, its grace period has not started: held.
    let node_now = cluster.nodes().get(NODE).await.unwrap();
    node::reconcile(&cluster.ctx, &node_now).await.unwrap();
    cluster.terminate_until(3, |_| false).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    cluster
        .terminate_until(60, |c| c.pod_names().is_empty())
        .await;
    assert!(
        cluster.pod_names().is_empty(),
        "deleted at the end of the grace period"
    );
    cluster.driver.abort();
}

#[tokio::test]
async fn a_do_not_disrupt_pod_without_a_grace_period_holds_the_node() {
    let cluster = registered(None).await;
    let held = json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}});
    cluster.add_pods(&[pod("db", held)]).await;
    cluster
        .nodes()
        .delete(NODE, &DeleteParams::default())
        .await
        .unwrap();
    cluster.terminate_until(10, |_| false).await;
    assert_eq!(cluster.pod_names(), ["db"]);
    assert!(cluster.nodes().get_opt(NODE).await.unwrap().is_some());
    let events = cluster.drain_events();
    assert!(
        events.iter().any(|e| e.contains("do-not-disrupt")),
        "{events:?}"
    );
    cluster.driver.abort();
}

#[tokio::test]
async fn a_termination_timestamp_already_past_deletes_the_pods_budgets_and_do_not_disrupt_hold() {
    // No terminationGracePeriod: only the annotation (as node repair sets
    // it) lets the drain go past the budget and the annotation.
    let cluster = registered(None).await;
    let held = json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}, "spec": {"terminationGracePeriodSeconds": 0}});
    let budgeted = json!({"metadata": {"labels": {"app": "db"}}, "spec": {"terminationGracePeriodSeconds": 0}});
    cluster
        .add_pods(&[pod("web", held), pod("db", budgeted)])
        .await;
    cluster.add_blocking_pdb("db").await;
    let stamp = k8s_openapi::jiff::Timestamp::from_second(
        k8s_openapi::jiff::Timestamp::now().as_second() - 60,
    )
    .unwrap()
    .to_string();
    let annotated = json!({"metadata": {"annotations": {"karpenter.sh/nodeclaim-termination-timestamp": stamp}}});
    cluster
        .claims()
        .patch(
            "general-a",
            &PatchParams::default(),
            &Patch::Merge(&annotated),
        )
        .await
        .unwrap();
    // Waits for the cluster state to hold the annotated claim.
    cluster.pass("general-a").await;
    cluster
        .nodes()
        .delete(NODE, &DeleteParams::default())
        .await
        .unwrap();
    cluster
        .terminate_until(60, |c| c.pod_names().is_empty())
        .await;
    assert!(
        cluster.pod_names().is_empty(),
        "deleted past the termination timestamp: {:?}",
        cluster.pod_names()
    );
    cluster.driver.abort();
}

#[tokio::test]
async fn a_node_whose_instance_is_gone_is_released_at_once() {
    let cluster = registered(None).await;
    cluster.add_pods(&[pod("web", json!({}))]).await;
    cluster.backdate_launch("general-a").await;
    let claim = cluster.claims().get("general-a").await.unwrap();
    let id = claim.status.unwrap().provider_id.unwrap();
    assert!(
        cluster
            .cloud
            .terminate_out_of_band(id.rsplit('/').next().unwrap())
    );
    let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
    cluster
        .nodes()
        .patch_status(NODE, &PatchParams::default(), &Patch::Merge(&not_ready))
        .await
        .unwrap();
    cluster
        .nodes()
        .delete(NODE, &DeleteParams::default())
        .await
        .unwrap();
    cluster.terminate_until(5, |_| false).await;
    assert!(
        cluster.nodes().get_opt(NODE).await.unwrap().is_none(),
        "released without a drain"
    );
    cluster.driver.abort();
}

/// EC2 may answer "not found" for an instance it launched moments ago: a
/// node of such a claim is not released on that word (its instance would
/// run on without a node or claim), but terminated as usual once the
/// launch has settled.
#[tokio::test]
async fn a_node_whose_fresh_instance_is_not_found_waits_for_the_launch_to_settle() {
    let cluster = registered(None).await;
    let claim = cluster.claims().get("general-a").await.unwrap();
    let id = claim.status.unwrap().provider_id.unwrap();
    assert!(
        cluster
            .cloud
            .terminate_out_of_band(id.rsplit('/').next().unwrap())
    );
    let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
    cluster
        .nodes()
        .patch_status(NODE, &PatchParams::default(), &Patch::Merge(&not_ready))
        .await
        .unwrap();
    cluster
        .nodes()
        .delete(NODE, &DeleteParams::default())
        .await
        .unwrap();
    cluster.terminate_until(5, |_| false).await;
    assert!(
        cluster.nodes().get_opt(NODE).await.unwrap().is_some(),
        "released on a \"not found\" for an instance launched moments ago"
    );
    cluster.backdate_launch("general-a").await;
    cluster.terminate_until(5, |_| false).await;
    assert!(
        cluster.nodes().get_opt(NODE).await.unwrap().is_none(),
        "released once the launch settled"
    );
    cluster.driver.abort();
}
