//! The sandbox (simulated cloud) with the API server double misbehaving for
//! nodewright's controllers only: a tenth of every verb's requests fail
//! (500, 409 on writes, 429 with `Retry-After`, 504 after the write went
//! through), watches drop and expire, every answer is 20 ms late. A
//! Deployment's scale-up still runs every pod, a deleted NodeClaim still
//! drains with its pods running elsewhere, a scale-down still consolidates,
//! an interrupted node is still replaced and a NodePool template change
//! still drifts every node, and once settled every NodeClaim has its
//! instance and every instance its NodeClaim. Then the controllers are killed and restarted with
//! NodeClaims in flight and mid-drain: each is launched once and
//! terminated once.
//!
//! `NODEWRIGHT_TEST_FAULTS=off` runs the same scenarios without faults, for
//! the fault-free figures in docs/reliability.md; each scenario prints its
//! time to all-Running and the faults injected (`--nocapture`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use apiserver_double::Faults;
use apiserver_double::faults::{ErrorKind, Verb};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nodewright::apis::{NodeClaim, NodePool};
use nodewright::sim::sandbox::{Sandbox, SandboxSettings};
use serde_json::json;

use super::sandbox::{CLASS, Manifests, POOL, deployment, eventually, fast, running, running_pods};

/// The plan every faulted scenario runs under (seeded: the same faults in
/// the same order of requests).
fn faults() -> Option<Faults> {
    if std::env::var("NODEWRIGHT_TEST_FAULTS").is_ok_and(|v| v == "off") {
        return None;
    }
    Some(
        Faults::seeded(25)
            .error_rate_all(0.10)
            .drop_watches(0.05)
            .expire_watches(0.01)
            .delay(Duration::from_millis(20), Duration::ZERO),
    )
}

fn faulty(manifests: &Manifests) -> SandboxSettings {
    SandboxSettings {
        faults: faults(),
        ..fast(manifests)
    }
}

/// The pool with consolidation after 1 s.
fn consolidating_pool() -> String {
    POOL.replace(
        "spec:\n  template:",
        "spec:\n  disruption: {consolidateAfter: 1s}\n  template:",
    )
}

/// The pool with no voluntary disruption, so that only what a test does
/// terminates a node.
fn held_pool() -> String {
    POOL.replace(
        "spec:\n  template:",
        "spec:\n  disruption: {consolidateAfter: Never, budgets: [{nodes: \"0\"}]}\n  template:",
    )
}

/// Waits until every NodeClaim is launched and not deleting, and the cloud's
/// instances are exactly theirs; the claims.
async fn settled(sandbox: &Sandbox) -> Vec<NodeClaim> {
    let client = sandbox.client();
    let claims: Api<NodeClaim> = Api::all(client.clone());
    eventually(&client, "NodeClaims and instances one to one", || async {
        let all = claims.list(&ListParams::default()).await.unwrap().items;
        let claimed: BTreeSet<String> = all
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .filter_map(|c| c.status.as_ref()?.provider_id.clone())
            .collect();
        let instances: BTreeSet<String> = sandbox
            .cloud()
            .list()
            .await
            .unwrap()
            .into_iter()
            .filter_map(|i| i.status?.provider_id)
            .collect();
        (claimed.len() == all.len() && claimed == instances).then_some(all)
    })
    .await
}

fn report(scenario: &str, sandbox: &Sandbox, started: Instant) {
    eprintln!(
        "{scenario}: all Running after {:.1} s; faults injected: {}",
        started.elapsed().as_secs_f64(),
        sandbox
            .server()
            .expect("the sandbox runs on the double")
            .fault_counts()
    );
}

/// Asserts the plan did inject every kind of fault it holds.
fn assert_faults_injected(sandbox: &Sandbox) {
    if faults().is_none() {
        return;
    }
    let counts = sandbox
        .server()
        .expect("the sandbox runs on the double")
        .fault_counts();
    assert!(counts.total_errors() > 0, "{counts}");
    assert!(
        counts.watches_dropped + counts.watches_expired > 0,
        "{counts}"
    );
    assert!(counts.delayed > 0, "{counts}");
}

/// A faulted sandbox of `pool` whose Deployment `web` runs six 500m pods
/// (three per m5.large), all Running and every NodeClaim settled.
struct SixPods {
    sandbox: Sandbox,
    /// Kept while the sandbox runs.
    _manifests: Manifests,
    /// The pods, Running.
    pods: Vec<Pod>,
    /// The NodeClaims, settled.
    claims: Vec<NodeClaim>,
}

async fn six_pods(name: &str, pool: &str) -> SixPods {
    let manifests = Manifests::new(
        name,
        &[
            ("1-pool.yaml", pool),
            ("2-class.yaml", CLASS),
            ("3-web.yaml", &deployment("web", 6, "500m")),
        ],
    );
    let started = Instant::now();
    let sandbox = Sandbox::start(faulty(&manifests)).await.unwrap();
    let client = sandbox.client();
    let pods = running_pods(&Api::namespaced(client, "default"), "web", 6).await;
    report("scale-up of 6 pods", &sandbox, started);
    let claims = settled(&sandbox).await;
    SixPods {
        sandbox,
        _manifests: manifests,
        pods,
        claims,
    }
}

/// Once settled: `terminated` instances terminated in all (`which`), one
/// launch per NodeClaim, every kind of fault injected; the NodeClaims.
async fn settled_after(sandbox: &Sandbox, terminated: u64, which: &str) -> Vec<NodeClaim> {
    let after = settled(sandbox).await;
    let cloud = sandbox.simulated_cloud().unwrap();
    assert_eq!(cloud.terminations(), terminated, "{which}");
    assert_eq!(
        cloud.launches(),
        after.len() as u64 + terminated,
        "one launch per NodeClaim"
    );
    assert_faults_injected(sandbox);
    after
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_api_faults_pods_run_and_a_deleted_claim_drains_elsewhere() {
    let SixPods {
        sandbox,
        _manifests,
        pods: before,
        claims,
    } = six_pods("faults-up", &held_pool()).await;
    let client = sandbox.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    assert_eq!(claims.len(), 2, "three 500m pods per m5.large");

    let old_node = before[0].spec.as_ref().unwrap().node_name.clone().unwrap();
    // A node's pods may run before its NodeClaim's status names the node.
    let claim = eventually(&client, "the node's NodeClaim", || async {
        settled(&sandbox).await.into_iter().find(|c| {
            c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(old_node.as_str())
        })
    })
    .await;
    let claim = &claim;
    let deleted = Instant::now();
    Api::<NodeClaim>::all(client.clone())
        .delete(claim.metadata.name.as_deref().unwrap(), &Default::default())
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    eventually(&client, "the pods Running off the old node", || async {
        let gone = nodes.get_opt(&old_node).await.unwrap().is_none();
        let web = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items;
        let moved = web.len() == 6
            && web.iter().all(|p| {
                running(p)
                    && p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                        != Some(old_node.as_str())
            });
        (gone && moved).then_some(())
    })
    .await;
    report("drain of a deleted NodeClaim", &sandbox, deleted);
    let after = settled_after(&sandbox, 1, "only the deleted claim's instance").await;
    assert!(after.iter().all(|c| c.metadata.uid != claim.metadata.uid));
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_api_faults_a_scale_down_consolidates() {
    let manifests = Manifests::new(
        "faults-down",
        &[
            ("1-pool.yaml", &consolidating_pool()),
            ("2-class.yaml", CLASS),
            ("3-web.yaml", &deployment("web", 6, "500m")),
        ],
    );
    let started = Instant::now();
    let sandbox = Sandbox::start(faulty(&manifests)).await.unwrap();
    let client = sandbox.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    running_pods(&pods, "web", 6).await;
    report("scale-up of 6 pods (consolidating pool)", &sandbox, started);

    let scaled = Instant::now();
    Api::<Deployment>::namespaced(client.clone(), "default")
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    // A disruption command found stale after its 15 s validation wait (a
    // faulted write can leave it so) costs a whole pass: up to two are
    // allowed for.
    let limit = Duration::from_secs(150);
    crate::fixture::eventually_showing(
        &client,
        "one node left, its pod Running",
        limit,
        || async {
            let left = nodes.list(&ListParams::default()).await.unwrap().items;
            let web = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .unwrap()
                .items;
            (left.len() == 1 && web.len() == 1 && web.iter().all(running)).then_some(())
        },
    )
    .await;
    report("consolidation after a scale-down to 1", &sandbox, scaled);
    assert_eq!(settled(&sandbox).await.len(), 1);
    assert_faults_injected(&sandbox);
    sandbox.stop().await;
}

/// Waits, for at most `limit`, until no node of `old` is left and the
/// Deployment's `count` pods all run on other nodes.
async fn moved_off(sandbox: &Sandbox, old: &BTreeSet<String>, count: usize, limit: Duration) {
    let client = sandbox.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    crate::fixture::eventually_showing(
        &client,
        "the pods Running off the old nodes",
        limit,
        || async {
            let left: BTreeSet<String> = nodes
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|n| n.metadata.name)
                .collect();
            let web = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .unwrap()
                .items;
            let moved = web.len() == count
                && web.iter().all(|p| {
                    running(p)
                        && p.spec
                            .as_ref()
                            .and_then(|s| s.node_name.as_ref())
                            .is_some_and(|n| !old.contains(n))
                });
            (left.is_disjoint(old) && moved).then_some(())
        },
    )
    .await;
}

/// The nodes `pods` run on.
fn nodes_of(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_api_faults_an_interrupted_node_is_replaced() {
    let SixPods {
        sandbox,
        _manifests,
        pods: before,
        ..
    } = six_pods("faults-interruption", &held_pool()).await;
    let client = sandbox.client();

    // A spot interruption, injected as a user of the sandbox would.
    let node = before[0].spec.as_ref().unwrap().node_name.clone().unwrap();
    let interrupted = Instant::now();
    let annotation = json!({"metadata": {"annotations": {
        "sandbox.nodewright.io/interruption": "spot_interrupted"}}});
    Api::<Node>::all(client.clone())
        .patch(&node, &PatchParams::default(), &Patch::Merge(&annotation))
        .await
        .unwrap();
    moved_off(
        &sandbox,
        &BTreeSet::from([node]),
        6,
        Duration::from_secs(120),
    )
    .await;
    report("replacement of an interrupted node", &sandbox, interrupted);
    settled_after(&sandbox, 1, "only the interrupted instance").await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_api_faults_a_template_change_drifts_every_node() {
    let pool = POOL.replace(
        "spec:\n  template:",
        "spec:\n  disruption: {consolidateAfter: Never, budgets: [{nodes: \"1\"}]}\n  template:",
    );
    let SixPods {
        sandbox,
        _manifests,
        pods,
        ..
    } = six_pods("faults-drift", &pool).await;
    let client = sandbox.client();
    let old = nodes_of(&pods);

    let changed = Instant::now();
    let label = json!({"spec": {"template": {"metadata": {"labels": {"team": "web"}}}}});
    Api::<NodePool>::all(client.clone())
        .patch("general", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    // One node a disruption pass (25 s with its validation wait), and a
    // pass lost to a faulted write costs another: as for consolidation.
    moved_off(&sandbox, &old, 6, Duration::from_secs(240)).await;
    report("drift of every node", &sandbox, changed);
    settled_after(
        &sandbox,
        old.len() as u64,
        "each old instance terminated once",
    )
    .await;
    sandbox.stop().await;
}

/// Polls fast (the windows the restarts aim at are a second or two wide)
/// for at most a minute.
async fn soon<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let mut check = check;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_with_claims_in_flight_the_controllers_launch_each_once() {
    let manifests = Manifests::new(
        "restart-launch",
        &[
            ("1-pool.yaml", &held_pool()),
            ("2-class.yaml", CLASS),
            ("3-web.yaml", &deployment("web", 6, "500m")),
        ],
    );
    // Slow launches and registrations leave room to restart in each.
    let settings = SandboxSettings {
        launch_delay: Duration::from_secs(2),
        ..fast(&manifests).with_register_delay(Duration::from_secs(2))
    };
    let mut sandbox = Sandbox::start(settings).await.unwrap();
    let client = sandbox.client();
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let launched = |c: &NodeClaim| {
        c.status
            .as_ref()
            .and_then(|s| s.provider_id.as_ref())
            .is_some()
    };

    // Created, not launched: the launch is under way in the cloud.
    soon("NodeClaims created, none launched", || async {
        let all = claims.list(&ListParams::default()).await.unwrap().items;
        (!all.is_empty() && !all.iter().any(launched)).then_some(())
    })
    .await;
    sandbox.restart_controllers().await;

    // Launched, not registered: no Node yet.
    let nodes: Api<Node> = Api::all(client.clone());
    soon(
        "a NodeClaim launched whose Node is not registered",
        || async {
            let all = claims.list(&ListParams::default()).await.unwrap().items;
            let registered = nodes
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len();
            (all.iter().any(launched) && registered == 0).then_some(())
        },
    )
    .await;
    sandbox.restart_controllers().await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    running_pods(&pods, "web", 6).await;
    let all = settled(&sandbox).await;
    assert_eq!(
        all.len(),
        2,
        "three 500m pods per m5.large; nothing provisioned twice"
    );
    let cloud = sandbox.simulated_cloud().unwrap();
    assert_eq!(cloud.launches(), 2, "each NodeClaim launched once");
    assert_eq!(cloud.terminations(), 0);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_mid_drain_the_controllers_terminate_the_claim_once() {
    let manifests = Manifests::new(
        "restart-drain",
        &[
            ("1-pool.yaml", &held_pool()),
            ("2-class.yaml", CLASS),
            ("3-web.yaml", &deployment("web", 2, "500m")),
        ],
    );
    // No faults yet, but the controllers run with a token, so that faults
    // set later reach them alone.
    let settings = SandboxSettings {
        faults: Some(Faults::default()),
        ..fast(&manifests)
    };
    let mut sandbox = Sandbox::start(settings).await.unwrap();
    let client = sandbox.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let before = running_pods(&pods, "web", 2).await;
    let old_node = before[0].spec.as_ref().unwrap().node_name.clone().unwrap();
    // No pod may go: the drain stalls on the budget.
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .unwrap();
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    budgets
        .create(&PostParams::default(), &budget)
        .await
        .unwrap();
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let [claim] = settled(&sandbox).await.try_into().unwrap();
    let name = claim.metadata.name.clone().unwrap();
    claims
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();

    // Mid-drain: the node is tainted for disruption, its pods still on it.
    let nodes: Api<Node> = Api::all(client.clone());
    eventually(&client, "the node tainted for its drain", || async {
        let node = nodes.get_opt(&old_node).await.unwrap()?;
        let taints = node.spec?.taints.unwrap_or_default();
        taints
            .iter()
            .any(|t| t.key == "karpenter.sh/disrupted")
            .then_some(())
    })
    .await;
    // Restarted twice, each time with one of its caches starved (its list
    // fails until the faults are lifted): the controllers must not act on
    // a view without the node's pods, nor on one without the node.
    let cloud = sandbox.simulated_cloud().unwrap().clone();
    for starved in ["pods", "nodes"] {
        sandbox
            .server()
            .expect("the sandbox runs on the double")
            .set_faults(
                Faults::seeded(2)
                    .error_rate(Verb::List, 1.0)
                    .errors([ErrorKind::Internal])
                    .only_resources([starved]),
            );
        sandbox.restart_controllers().await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let stalled = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items;
        assert!(
            stalled.len() == 2
                && stalled.iter().all(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&old_node)
                }),
            "with {starved} not yet listed, the budget still holds the pods on the node"
        );
        assert!(nodes.get_opt(&old_node).await.unwrap().is_some());
        assert_eq!(cloud.terminations(), 0, "with {starved} not yet listed");
        sandbox
            .server()
            .expect("the sandbox runs on the double")
            .set_faults(Faults::default());
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(cloud.terminations(), 0, "the budget holds the drain");
    }
    budgets
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();

    eventually(
        &client,
        "the claim gone and the pods Running elsewhere",
        || async {
            let gone = claims.get_opt(&name).await.unwrap().is_none()
                && nodes.get_opt(&old_node).await.unwrap().is_none();
            let web = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .unwrap()
                .items;
            let moved = web.len() == 2
                && web.iter().all(|p| {
                    running(p)
                        && p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                            != Some(old_node.as_str())
                });
            (gone && moved).then_some(())
        },
    )
    .await;
    let after = settled(&sandbox).await;
    assert_eq!(cloud.terminations(), 1, "the drained claim terminated once");
    assert_eq!(
        cloud.launches(),
        after.len() as u64 + 1,
        "one launch per NodeClaim"
    );
    sandbox.stop().await;
}
