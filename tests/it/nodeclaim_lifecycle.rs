//! The NodeClaim lifecycle against the API server double and the simulated
//! cloud: launch, registration, initialization, the liveness timeout,
//! capacity errors, and finalization (also when the instance is already gone,
//! which is believed only once the launch has settled).

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use nodewright::cloudprovider::{CloudProvider, OfferingKey};
use serde_json::json;

use crate::fixture::{Cluster, claim, cluster, node_for};

#[tokio::test]
async fn a_claim_launches_registers_and_initializes() {
    let cluster = cluster().await;
    cluster
        .claims()
        .create(&PostParams::default(), &claim("general-a"))
        .await
        .unwrap();
    // One pass stores the finalizer, then launches.
    cluster.pass("general-a").await;
    let launched = cluster.claims().get("general-a").await.unwrap();
    assert!(
        launched
            .finalizers()
            .contains(&"karpenter.sh/termination".to_string())
    );
    assert_eq!(Cluster::condition(&launched, "Launched").0, "True");
    assert_eq!(
        Cluster::condition(&launched, "Registered").1,
        "NodeNotFound"
    );
    let labels = launched.metadata.labels.clone().unwrap();
    assert_eq!(labels["node.kubernetes.io/instance-type"], "m5.large");
    assert_eq!(labels["topology.kubernetes.io/zone"], "us-east-1a");
    assert_eq!(labels["team"], "web");
    assert_eq!(
        launched.status.as_ref().unwrap().image_id.as_deref(),
        Some("ami-amd64")
    );

    // The node appears, still starting: it registers but is not initialized.
    let taints = json!([
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
        {"key": "agent.example.com/starting", "effect": "NoSchedule"}
    ]);
    cluster
        .nodes()
        .create(&PostParams::default(), &node_for(&launched, false, taints))
        .await
        .unwrap();
    cluster.settle_nodes(1).await;
    cluster.pass("general-a").await;
    let registered = cluster.claims().get("general-a").await.unwrap();
    assert_eq!(Cluster::condition(&registered, "Registered").0, "True");
    assert_eq!(
        Cluster::condition(&registered, "Initialized").1,
        "NodeNotReady"
    );
    assert_eq!(Cluster::condition(&registered, "Ready").0, "Unknown");
    assert_eq!(
        registered.status.as_ref().unwrap().node_name.as_deref(),
        Some("ip-10-0-0-1.ec2.internal")
    );
    let node = cluster
        .nodes()
        .get("ip-10-0-0-1.ec2.internal")
        .await
        .unwrap();
    let node_labels = node.metadata.labels.clone().unwrap();
    assert_eq!(node_labels["karpenter.sh/registered"], "true");
    assert_eq!(node_labels["karpenter.sh/nodepool"], "general");
    assert!(
        node.finalizers()
            .contains(&"karpenter.sh/termination".to_string())
    );
    assert_eq!(
        node.metadata.owner_references.as_ref().unwrap()[0].kind,
        "NodeClaim"
    );
    let keys: Vec<String> = node
        .spec
        .as_ref()
        .unwrap()
        .taints
        .clone()
        .unwrap()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(
        keys,
        ["agent.example.com/starting"],
        "the unregistered taint is removed"
    );

    // Ready with the startup taint still on: not initialized yet.
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    cluster
        .nodes()
        .patch_status(
            "ip-10-0-0-1.ec2.internal",
            &PatchParams::default(),
            &Patch::Merge(&ready),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    cluster.pass("general-a").await;
    let waiting = cluster.claims().get("general-a").await.unwrap();
    assert_eq!(
        Cluster::condition(&waiting, "Initialized").1,
        "StartupTaintsExist"
    );

    let untainted = json!({"spec": {"taints": null}});
    cluster
        .nodes()
        .patch(
            "ip-10-0-0-1.ec2.internal",
            &PatchParams::default(),
            &Patch::Merge(&untainted),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    cluster.pass("general-a").await;
    let ready = cluster.claims().get("general-a").await.unwrap();
    assert_eq!(Cluster::condition(&ready, "Initialized").0, "True");
    assert_eq!(Cluster::condition(&ready, "Ready").0, "True");
    let node = cluster
        .nodes()
        .get("ip-10-0-0-1.ec2.internal")
        .await
        .unwrap();
    assert_eq!(
        node.metadata.labels.unwrap()["karpenter.sh/initialized"],
        "true"
    );
    cluster.driver.abort();
}

#[tokio::test]
async fn insufficient_capacity_deletes_the_claim_with_an_event() {
    let cluster = cluster().await;
    cluster.cloud.inject_insufficient_capacity(OfferingKey {
        instance_type: "m5.large".to_string(),
        zone: "us-east-1a".to_string(),
        capacity_type: "on-demand".to_string(),
    });
    cluster
        .claims()
        .create(&PostParams::default(), &claim("general-b"))
        .await
        .unwrap();
    cluster.pass("general-b").await;
    cluster.pass("general-b").await;
    // The finalizer is still there: finalization (nothing launched) removes it.
    cluster.pass("general-b").await;
    assert!(
        cluster
            .claims()
            .get_opt("general-b")
            .await
            .unwrap()
            .is_none()
    );
    let events: Vec<String> = cluster
        .server
        .objects("events.k8s.io", "events")
        .iter()
        .filter(|e| e["regarding"]["name"] == "general-b")
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(events, ["InsufficientCapacityError"]);
    cluster.driver.abort();
}

#[tokio::test]
async fn a_claim_that_never_registers_is_deleted_after_the_registration_timeout() {
    let cluster = cluster().await;
    cluster
        .claims()
        .create(&PostParams::default(), &claim("general-c"))
        .await
        .unwrap();
    cluster.pass("general-c").await;
    cluster.pass("general-c").await;
    let launched = cluster.claims().get("general-c").await.unwrap();
    let mut conditions = launched.status.clone().unwrap().conditions.unwrap();
    for c in conditions.iter_mut().filter(|c| c.type_ == "Registered") {
        c.last_transition_time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now()
                - k8s_openapi::jiff::SignedDuration::from_secs(16 * 60),
        );
    }
    let patch = json!({"status": {"conditions": conditions}});
    cluster
        .claims()
        .patch_status("general-c", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    cluster.pass("general-c").await; // times out: deleted
    cluster.pass("general-c").await; // finalizing: the instance is terminated
    cluster.pass("general-c").await; // the provider no longer finds it: done
    assert!(
        cluster
            .claims()
            .get_opt("general-c")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        cluster.cloud.list().await.unwrap().is_empty(),
        "its instance is terminated"
    );
    cluster.driver.abort();
}

#[tokio::test]
async fn a_deleted_claim_removes_its_node_then_its_instance_even_if_already_gone() {
    let cluster = cluster().await;
    for name in ["general-d", "general-e"] {
        cluster
            .claims()
            .create(&PostParams::default(), &claim(name))
            .await
            .unwrap();
        cluster.pass(name).await;
        cluster.pass(name).await;
    }
    // general-d has a node; general-e's instance vanishes behind our back.
    let d = cluster.claims().get("general-d").await.unwrap();
    cluster
        .nodes()
        .create(&PostParams::default(), &node_for(&d, true, json!([])))
        .await
        .unwrap();
    cluster.settle_nodes(1).await;
    cluster.pass("general-d").await;
    let e = cluster.claims().get("general-e").await.unwrap();
    let e_id = e.status.unwrap().provider_id.unwrap();
    assert!(
        cluster
            .cloud
            .terminate_out_of_band(e_id.rsplit('/').next().unwrap())
    );

    for name in ["general-d", "general-e"] {
        cluster
            .claims()
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    // Launched moments ago, its instance may just be one EC2 does not list
    // yet: the claim keeps its finalizer, or that instance would run on
    // without a claim.
    cluster.pass("general-e").await;
    assert!(
        cluster
            .claims()
            .get_opt("general-e")
            .await
            .unwrap()
            .is_some(),
        "finalized although its instance was launched moments ago"
    );
    cluster.backdate_launch("general-e").await;
    cluster.pass("general-e").await;
    assert!(
        cluster
            .claims()
            .get_opt("general-e")
            .await
            .unwrap()
            .is_none(),
        "finalized although its instance was gone"
    );

    cluster.pass("general-d").await; // deletes the node first
    let node = cluster
        .nodes()
        .get("ip-10-0-0-1.ec2.internal")
        .await
        .unwrap();
    assert!(node.metadata.deletion_timestamp.is_some());
    assert_eq!(
        cluster.cloud.list().await.unwrap().len(),
        1,
        "the instance waits for its node"
    );
    // The node termination controller drains and releases the node.
    let release = json!({"metadata": {"finalizers": null}});
    cluster
        .nodes()
        .patch(
            "ip-10-0-0-1.ec2.internal",
            &PatchParams::default(),
            &Patch::Merge(&release),
        )
        .await
        .unwrap();
    cluster.settle_nodes(0).await;
    cluster.pass("general-d").await; // terminates the instance
    cluster.pass("general-d").await; // the provider no longer finds it: done
    assert!(
        cluster
            .claims()
            .get_opt("general-d")
            .await
            .unwrap()
            .is_none()
    );
    assert!(cluster.cloud.list().await.unwrap().is_empty());
    cluster.driver.abort();
}

#[tokio::test]
async fn garbage_collection_removes_orphan_instances_and_claims_whose_instance_vanished() {
    use nodewright::controllers::nodeclaim::garbage_collection::collect;
    let cluster = cluster().await;
    for name in ["general-f", "general-g"] {
        cluster
            .claims()
            .create(&PostParams::default(), &claim(name))
            .await
            .unwrap();
        cluster.pass(name).await;
        cluster.pass(name).await;
    }
    // general-f registers with a node that then goes NotReady; its instance vanishes.
    let f = cluster.claims().get("general-f").await.unwrap();
    cluster
        .nodes()
        .create(&PostParams::default(), &node_for(&f, false, json!([])))
        .await
        .unwrap();
    cluster.settle_nodes(1).await;
    cluster.pass("general-f").await;
    let f_id = f.status.unwrap().provider_id.unwrap();
    assert!(
        cluster
            .cloud
            .terminate_out_of_band(f_id.rsplit('/').next().unwrap())
    );
    // general-g's claim is removed without its finalizer running: its
    // instance is left behind, an orphan (launched long enough ago).
    let g = cluster.claims().get("general-g").await.unwrap();
    let g_id = g.status.clone().unwrap().provider_id.unwrap();
    let release = json!({"metadata": {"finalizers": null}});
    cluster
        .claims()
        .patch(
            "general-g",
            &PatchParams::default(),
            &Patch::Merge(&release),
        )
        .await
        .unwrap();
    cluster
        .claims()
        .delete("general-g", &DeleteParams::default())
        .await
        .unwrap();
    for _ in 0..200 {
        if cluster.ctx.state.node_claims.all().len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let young = collect(&cluster.ctx).await.unwrap();
    assert_eq!(
        young,
        Default::default(),
        "a young orphan and a claim launched moments ago (EC2 may not list its instance yet) are left alone"
    );
    cluster.backdate_launch("general-f").await;
    let settled = collect(&cluster.ctx).await.unwrap();
    assert!(
        settled.instances.is_empty(),
        "a young orphan is left alone: {settled:?}"
    );
    assert_eq!(settled.node_claims, ["general-f"]);
    assert!(
        cluster
            .claims()
            .get("general-f")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );

    // Aged past the grace period, the orphan is terminated.
    let old = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(60),
    );
    cluster
        .cloud
        .backdate(g_id.rsplit('/').next().unwrap(), old);
    let done = collect(&cluster.ctx).await.unwrap();
    assert_eq!(done.instances, [g_id]);
    assert_eq!(cluster.cloud.list().await.unwrap().len(), 0);
    cluster.driver.abort();
}

/// Karpenter's garbage-collection cases that keep things: a registered
/// claim whose instance is not listed but whose Node is Ready (the kubelet
/// runs, so the cloud may just lag), a claim that never registered whose
/// instance is not listed (the registration timeout is what removes it),
/// and an old instance a claim stands for.
#[tokio::test]
async fn garbage_collection_keeps_ready_nodes_unregistered_claims_and_claimed_instances() {
    use nodewright::controllers::nodeclaim::garbage_collection::collect;
    let cluster = cluster().await;
    for name in ["general-h", "general-i", "general-j"] {
        cluster
            .claims()
            .create(&PostParams::default(), &claim(name))
            .await
            .unwrap();
        cluster.pass(name).await;
        cluster.pass(name).await;
    }
    let instance = |claim: &nodewright::apis::NodeClaim| {
        let id = claim.status.clone().unwrap().provider_id.unwrap();
        id.rsplit('/').next().unwrap().to_string()
    };
    let h = cluster.claims().get("general-h").await.unwrap();
    cluster
        .nodes()
        .create(&PostParams::default(), &node_for(&h, true, json!([])))
        .await
        .unwrap();
    cluster.settle_nodes(1).await;
    cluster.pass("general-h").await;
    assert!(cluster.cloud.terminate_out_of_band(&instance(&h)));
    let i = cluster.claims().get("general-i").await.unwrap();
    assert!(cluster.cloud.terminate_out_of_band(&instance(&i)));
    let j = cluster.claims().get("general-j").await.unwrap();
    let old = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(60),
    );
    assert!(cluster.cloud.backdate(&instance(&j), old));
    for name in ["general-h", "general-i", "general-j"] {
        cluster.backdate_launch(name).await;
    }

    let done = collect(&cluster.ctx).await.unwrap();
    assert_eq!(done, Default::default(), "nothing collected");
    for name in ["general-h", "general-i", "general-j"] {
        let kept = cluster.claims().get(name).await.unwrap();
        assert!(kept.metadata.deletion_timestamp.is_none(), "{name} deleted");
    }
    assert_eq!(
        cluster.cloud.list().await.unwrap().len(),
        1,
        "j's instance kept"
    );
    cluster.driver.abort();
}

/// A 409 on the delete is "replaced" only when another claim stands under
/// the name: a conflict on the claim itself is an error its caller retries
/// (else an interruption or a disruption believed the claim gone while it
/// kept running).
#[tokio::test]
async fn a_conflict_on_a_claims_delete_is_an_error_unless_the_claim_was_replaced() {
    use apiserver_double::faults::{ErrorKind, Faults, Target, Verb};
    use nodewright::apis::NodeClaim;
    use nodewright::controllers::nodeclaim::delete_claim;

    let server = nodewright::sim::double::server();
    let claims: kube::Api<NodeClaim> = kube::Api::all(server.client());
    let mut held = claim("general-a");
    held.metadata.finalizers = Some(vec!["karpenter.sh/termination".to_string()]);
    let held = claims.create(&PostParams::default(), &held).await.unwrap();
    let conflicts = || {
        Faults::seeded(1)
            .target(Target::Everyone)
            .error_rate(Verb::Delete, 1.0)
            .errors([ErrorKind::Conflict])
    };

    server.set_faults(conflicts());
    match delete_claim(&server.client(), &held).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 409),
        other => panic!("a conflict on the claim itself must be an error, got {other:?}"),
    }
    server.set_faults(Faults::default());
    let standing = claims.get("general-a").await.unwrap();
    assert!(standing.metadata.deletion_timestamp.is_none());
    assert!(delete_claim(&server.client(), &held).await.unwrap());

    // Made again under the same name: the old claim's delete leaves it be.
    let mut old = claims.get("general-a").await.unwrap();
    old.metadata.finalizers = None;
    claims
        .replace("general-a", &PostParams::default(), &old)
        .await
        .unwrap();
    let again = claims
        .create(&PostParams::default(), &claim("general-a"))
        .await
        .unwrap();
    assert_ne!(again.metadata.uid, held.metadata.uid);
    assert!(!delete_claim(&server.client(), &held).await.unwrap());
    server.set_faults(conflicts());
    assert!(!delete_claim(&server.client(), &held).await.unwrap());
    server.set_faults(Faults::default());
    let kept = claims.get("general-a").await.unwrap();
    assert_eq!(kept.metadata.uid, again.metadata.uid);
    assert!(kept.metadata.deletion_timestamp.is_none());
}
