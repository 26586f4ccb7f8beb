//! The workload controllers inside the double, scale, and garbage collection.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nodewright::apis::NodePool;
use serde_json::{Value, json};

use super::{from_json, names, node, status};

fn template(app: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": app, "image": format!("{app}:1")}]}})
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    from_json(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template(name)},
    }))
}

async fn pods_of(pods: &Api<Pod>, app: &str) -> Vec<Pod> {
    pods.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
}

#[tokio::test]
async fn deployments_scale_up_and_down_through_their_replica_set() {
    let server = nodewright::sim::double::server();
    let deployments: Api<Deployment> = Api::namespaced(server.client(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(server.client(), "default");
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    deployments
        .create(&PostParams::default(), &deployment("web", 3))
        .await
        .unwrap();

    let set = sets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .remove(0);
    let owner = &set.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Deployment", "web", Some(true))
    );
    let web = pods_of(&pods, "web").await;
    assert_eq!(web.len(), 3);
    for pod in &web {
        assert_eq!(
            pod.status.as_ref().unwrap().phase.as_deref(),
            Some("Pending")
        );
        assert!(pod.spec.as_ref().unwrap().node_name.is_none());
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(owner.name, set.metadata.name.clone().unwrap());
    }

    let scale = json!({"spec": {"replicas": 5}});
    let scaled = deployments
        .patch_scale("web", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(5));
    assert_eq!(pods_of(&pods, "web").await.len(), 5);
    let scale = json!({"spec": {"replicas": 1}});
    deployments
        .patch_scale("web", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .unwrap();
    assert_eq!(pods_of(&pods, "web").await.len(), 1);
    let status = deployments.get_status("web").await.unwrap().status.unwrap();
    assert_eq!(
        (status.replicas, status.updated_replicas),
        (Some(1), Some(1))
    );

    // A new template: a new ReplicaSet takes over, the old one is scaled to 0.
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:2"}]}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(&image))
        .await
        .unwrap();
    let sets = sets.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(sets.len(), 2);
    let replicas: Vec<i32> = sets.iter().map(|s| s.spec.replicas.unwrap()).collect();
    assert_eq!(replicas.iter().sum::<i32>(), 1);
    let web = pods_of(&pods, "web").await;
    assert_eq!(web.len(), 1);
    assert_eq!(
        web[0].spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some("web:2")
    );
}

#[tokio::test]
async fn deleting_a_deployment_collects_its_replica_sets_and_pods() {
    let server = nodewright::sim::double::server();
    let deployments: Api<Deployment> = Api::namespaced(server.client(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(server.client(), "default");
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    for name in ["background", "foreground", "orphan"] {
        deployments
            .create(&PostParams::default(), &deployment(name, 2))
            .await
            .unwrap();
    }
    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        6
    );

    deployments
        .delete("background", &DeleteParams::background())
        .await
        .unwrap();
    assert!(pods_of(&pods, "background").await.is_empty());
    deployments
        .delete("foreground", &DeleteParams::foreground())
        .await
        .unwrap();
    assert!(pods_of(&pods, "foreground").await.is_empty());
    assert_eq!(
        status(deployments.get("foreground").await.unwrap_err()).code,
        404
    );

    deployments
        .delete("orphan", &DeleteParams::orphan())
        .await
        .unwrap();
    let left = sets.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(left.len(), 1);
    assert!(
        left[0]
            .metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty)
    );
    assert_eq!(pods_of(&pods, "orphan").await.len(), 2);
}

#[tokio::test]
async fn stateful_sets_name_their_pods_and_claims_and_scale_from_the_top() {
    let server = nodewright::sim::double::server();
    let sets: Api<StatefulSet> = Api::namespaced(server.client(), "default");
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(server.client(), "default");
    let set: StatefulSet = from_json(json!({
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": template("db"),
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
        },
    }));
    sets.create(&PostParams::default(), &set).await.unwrap();
    assert_eq!(names(&pods_of(&pods, "db").await), ["db-0", "db-1", "db-2"]);
    assert_eq!(
        names(&claims.list(&ListParams::default()).await.unwrap().items),
        ["data-db-0", "data-db-1", "data-db-2"]
    );
    let scale = json!({"spec": {"replicas": 1}});
    sets.patch_scale("db", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .unwrap();
    assert_eq!(names(&pods_of(&pods, "db").await), ["db-0"]);
    assert_eq!(
        sets.get_status("db")
            .await
            .unwrap()
            .status
            .unwrap()
            .replicas,
        1
    );
}

#[tokio::test]
async fn jobs_run_pods_until_they_succeed() {
    let server = nodewright::sim::double::server();
    let jobs: Api<Job> = Api::namespaced(server.client(), "default");
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let job: Job = from_json(json!({
        "metadata": {"name": "batch"},
        "spec": {"completions": 2, "parallelism": 2, "template": {
            "metadata": {"labels": {"app": "batch"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "b", "image": "b:1"}]},
        }},
    }));
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let running = pods_of(&pods, "batch").await;
    assert_eq!(running.len(), 2);
    for pod in &running {
        let done = json!({"status": {"phase": "Succeeded"}});
        pods.patch_status(
            pod.metadata.name.as_deref().unwrap(),
            &PatchParams::default(),
            &Patch::Merge(&done),
        )
        .await
        .unwrap();
    }
    let status = jobs.get_status("batch").await.unwrap().status.unwrap();
    assert_eq!(status.succeeded, Some(2));
    let complete = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Complete")
        .unwrap();
    assert_eq!(complete.status, "True");
    assert_eq!(pods_of(&pods, "batch").await.len(), 2, "finished pods stay");
}

#[tokio::test]
async fn daemon_sets_follow_eligible_nodes() {
    let server = nodewright::sim::double::server();
    let sets: Api<DaemonSet> = Api::namespaced(server.client(), "kube-system");
    let pods: Api<Pod> = Api::namespaced(server.client(), "kube-system");
    let nodes: Api<Node> = Api::all(server.client());
    nodes
        .create(&PostParams::default(), &node("a", json!({"pool": "x"})))
        .await
        .unwrap();
    let mut tainted = node("b", json!({"pool": "x"}));
    tainted.spec = Some(from_json(
        json!({"taints": [{"key": "gpu", "effect": "NoSchedule"}]}),
    ));
    nodes
        .create(&PostParams::default(), &tainted)
        .await
        .unwrap();
    nodes
        .create(&PostParams::default(), &node("c", json!({"pool": "y"})))
        .await
        .unwrap();
    let mut spec = template("agent");
    spec["spec"]["nodeSelector"] = json!({"pool": "x"});
    let set: DaemonSet = from_json(json!({
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": spec},
    }));
    sets.create(&PostParams::default(), &set).await.unwrap();
    let target = |pod: &Pod| -> String {
        let affinity =
            serde_json::to_value(pod.spec.as_ref().unwrap().affinity.as_ref().unwrap()).unwrap();
        affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchFields"][0]
            ["values"][0]
            .as_str()
            .unwrap()
            .to_string()
    };
    let agents = pods_of(&pods, "agent").await;
    assert_eq!(agents.iter().map(target).collect::<Vec<_>>(), ["a"]);

    nodes
        .create(&PostParams::default(), &node("d", json!({"pool": "x"})))
        .await
        .unwrap();
    let mut targets: Vec<String> = pods_of(&pods, "agent").await.iter().map(target).collect();
    targets.sort();
    assert_eq!(targets, ["a", "d"]);
    nodes.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        pods_of(&pods, "agent")
            .await
            .iter()
            .map(target)
            .collect::<Vec<_>>(),
        ["d"]
    );
    assert_eq!(
        sets.get_status("agent")
            .await
            .unwrap()
            .status
            .unwrap()
            .desired_number_scheduled,
        1
    );
}

#[tokio::test]
async fn node_pools_scale_and_namespaces_take_their_contents_with_them() {
    let server = nodewright::sim::double::server();
    let pools: Api<NodePool> = Api::all(server.client());
    let pool: NodePool = from_json(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "static"},
        "spec": {"replicas": 2, "template": {"spec": {
            "requirements": [],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        }}},
    }));
    pools.create(&PostParams::default(), &pool).await.unwrap();
    let scale = json!({"spec": {"replicas": 4}});
    let scaled = pools
        .patch_scale("static", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(4));
    assert_eq!(pools.get("static").await.unwrap().spec.replicas, Some(4));

    let namespaces: Api<Namespace> = Api::all(server.client());
    namespaces
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": "shop"}})),
        )
        .await
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(server.client(), "shop");
    deployments
        .create(&PostParams::default(), &deployment("web", 2))
        .await
        .unwrap();
    namespaces
        .delete("shop", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(status(namespaces.get("shop").await.unwrap_err()).code, 404);
    let all_pods: Api<Pod> = Api::all(server.client());
    assert!(
        all_pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
