//! The interruption controller against moto's SQS over the wire and the API
//! server double: each message kind sent into the queue, the action seen on
//! the NodeClaims and Nodes (a spot interruption deletes forcefully and
//! marks the offering unavailable, a stop deletes, a scheduled change
//! cordons in a NodePool that asks for it, a rebalance recommendation is an
//! event), messages that are malformed, of an unknown kind or for an
//! instance not ours are consumed harmlessly, and deleting the queue
//! mid-run drops the health gauge to 0 until a new queue is polled again
//! without a restart.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use nodewright::apis::{NodeClaim, NodePool};
use nodewright::aws::catalog::Catalog;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::cloudprovider::{OfferingKey, UnavailableOfferings};
use nodewright::cluster::ClusterState;
use nodewright::controllers::interruption::InterruptionController;
use nodewright::controllers::recorder::Recorder;
use nodewright::extensions::Extensions;
use nodewright_host::HostConfig;
use serde_json::json;

use crate::fixture::eventually_within;
use crate::moto::{moto, moto_clients};

/// A NodePool named `name` with `annotations` (interruption policies).
pub(crate) fn pool(name: &str, annotations: serde_json::Value) -> NodePool {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []
        }}}
    }))
    .unwrap()
}

/// A launched NodeClaim of `pool` on instance `id`, with the termination
/// finalizer (so a deletion shows as a deletion timestamp), and its Node.
fn claim_and_node(id: &str, pool: &str) -> (NodeClaim, Node) {
    let labels = json!({
        "karpenter.sh/nodepool": pool, "node.kubernetes.io/instance-type": "m5.large",
        "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "spot"
    });
    let provider_id = format!("aws:///us-east-1a/{id}");
    let claim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": format!("claim-{id}"), "labels": labels,
                     "finalizers": ["karpenter.sh/termination"]},
        "spec": {"requirements": [],
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        "status": {"providerID": provider_id}
    }))
    .unwrap();
    let node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": format!("node-{id}"), "labels": labels},
        "spec": {"providerID": provider_id}
    }))
    .unwrap();
    (claim, node)
}

fn envelope(detail_type: &str, source: &str, detail: serde_json::Value) -> String {
    json!({
        "version": "0", "id": "e1", "detail-type": detail_type, "source": source,
        "account": "123456789012", "time": "2026-11-26T12:00:00Z", "region": "us-east-1",
        "resources": [], "detail": detail
    })
    .to_string()
}

fn spot(id: &str) -> String {
    envelope(
        "EC2 Spot Instance Interruption Warning",
        "aws.ec2",
        json!({"instance-id": id, "instance-action": "terminate"}),
    )
}

fn stopping(id: &str) -> String {
    envelope(
        "EC2 Instance State-change Notification",
        "aws.ec2",
        json!({"instance-id": id, "state": "stopping"}),
    )
}

fn scheduled_change(id: &str) -> String {
    envelope(
        "AWS Health Event",
        "aws.health",
        json!({"service": "EC2", "eventTypeCategory": "scheduledChange",
               "eventTypeCode": "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
               "affectedEntities": [{"entityValue": id}]}),
    )
}

fn rebalance(id: &str) -> String {
    envelope(
        "EC2 Instance Rebalance Recommendation",
        "aws.ec2",
        json!({"instance-id": id}),
    )
}

struct Harness {
    claims: Api<NodeClaim>,
    nodes: Api<Node>,
    sqs: aws_sdk_sqs::Client,
    queue: String,
    url: String,
    unavailable: Arc<UnavailableOfferings>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    server: apiserver_double::ApiServer,
}

impl Harness {
    async fn start(queue: &str, instances: &[(&str, &str)]) -> Harness {
        let _ = moto();
        let clients = moto_clients().await;
        let url = clients
            .sqs
            .create_queue()
            .queue_name(queue)
            .send()
            .await
            .unwrap()
            .queue_url
            .unwrap();
        let server = nodewright::sim::double::builder().build();
        let client = server.client();
        let pools: Api<NodePool> = Api::all(client.clone());
        let claims: Api<NodeClaim> = Api::all(client.clone());
        let nodes: Api<Node> = Api::all(client.clone());
        let pp = PostParams::default();
        pools
            .create(&pp, &pool("default", json!({})))
            .await
            .unwrap();
        let stateful = json!({
            "nodewright.io/interruption-scheduled-change": "Cordon",
            "nodewright.io/interruption-rebalance": "Ignore"
        });
        pools
            .create(&pp, &pool("stateful", stateful))
            .await
            .unwrap();
        for (id, pool) in instances {
            let (claim, node) = claim_and_node(id, pool);
            claims.create(&pp, &claim).await.unwrap();
            // The status is the status subresource's, not the create's.
            let status = json!({"status": claim.status});
            claims
                .patch_status(
                    &claim.metadata.name.clone().unwrap(),
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await
                .unwrap();
            nodes.create(&pp, &node).await.unwrap();
        }
        let (state, driver) = ClusterState::start(client.clone());
        let mut tasks = vec![tokio::spawn(driver)];
        state.synced().await;
        let unavailable = Arc::new(UnavailableOfferings::default());
        let instance_types = Arc::new(InstanceTypeProvider::new(
            Arc::new(Catalog::embedded("us-east-1").unwrap()),
            Arc::new(Extensions::new(HostConfig::default()).unwrap()),
            unavailable.clone(),
        ));
        let polled = interruption_queue::Queue::new(clients.sqs.clone(), queue)
            .with_wait_time(Duration::from_secs(1));
        let controller = Arc::new(InterruptionController::new(
            client.clone(),
            state,
            Arc::new(polled),
            instance_types,
            Recorder::new(
                client.clone(),
                Reporter {
                    controller: "nodewright".to_string(),
                    instance: None,
                },
            ),
        ));
        tasks.push(tokio::spawn(controller.run()));
        Harness {
            claims,
            nodes,
            sqs: clients.sqs,
            queue: queue.to_string(),
            url,
            unavailable,
            tasks,
            server,
        }
    }

    async fn send(&self, body: &str) {
        self.sqs
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }

    async fn claim(&self, id: &str) -> Option<NodeClaim> {
        self.claims.get_opt(&format!("claim-{id}")).await.unwrap()
    }

    async fn node(&self, id: &str) -> Node {
        self.nodes.get(&format!("node-{id}")).await.unwrap()
    }

    /// Messages still in the queue, visible or in flight.
    async fn left(&self) -> usize {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let attributes = self
            .sqs
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .unwrap()
            .attributes
            .unwrap_or_default();
        [
            A::ApproximateNumberOfMessages,
            A::ApproximateNumberOfMessagesNotVisible,
        ]
        .iter()
        .map(|a| {
            attributes
                .get(a)
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0)
        })
        .sum()
    }

    /// The reasons of the events recorded about `kind` object `name`.
    fn reasons(&self, kind: &str, name: &str) -> Vec<String> {
        let mut reasons: Vec<String> = self
            .server
            .objects("events.k8s.io", "events")
            .iter()
            .filter(|e| e["regarding"]["kind"] == kind && e["regarding"]["name"] == name)
            .filter_map(|e| e["reason"].as_str().map(str::to_string))
            .collect();
        reasons.sort();
        reasons.dedup();
        reasons
    }

    fn healthy(&self) -> f64 {
        let text = nodewright::metrics::metrics().render();
        let series = format!(
            "nodewright_interruption_queue_healthy{{queue=\"{}\"}} ",
            self.queue
        );
        text.lines()
            .find_map(|l| l.strip_prefix(&series))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(-1.0)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_gets_its_action_and_the_rest_is_consumed_harmlessly() {
    let h = Harness::start(
        "interruption-kinds",
        &[
            ("i-00000000000000001", "default"),
            ("i-00000000000000002", "stateful"),
            ("i-00000000000000003", "stateful"),
            ("i-00000000000000004", "default"),
            ("i-00000000000000005", "default"),
            ("i-00000000000000006", "default"),
        ],
    )
    .await;
    // A claim already being deleted, its drain bounded far off.
    let far = json!({"metadata": {"annotations": {
        "karpenter.sh/nodeclaim-termination-timestamp": "2099-01-01T00:00:00Z"}}});
    h.claims
        .patch(
            "claim-i-00000000000000006",
            &PatchParams::default(),
            &Patch::Merge(&far),
        )
        .await
        .unwrap();
    h.claims
        .delete("claim-i-00000000000000006", &Default::default())
        .await
        .unwrap();
    h.send(&spot("i-00000000000000001")).await;
    h.send(&spot("i-00000000000000006")).await;
    h.send(&scheduled_change("i-00000000000000002")).await;
    h.send(&rebalance("i-00000000000000003")).await;
    h.send(&stopping("i-00000000000000004")).await;
    h.send(&scheduled_change("i-00000000000000005")).await;
    h.send("not json at all").await;
    h.send(&envelope("EC2 Fleet Error", "aws.ec2", json!({})))
        .await;
    h.send(&spot("i-0000000000000dead")).await;

    // Spot: forceful (termination timestamp, deleted), offering unavailable.
    let spot_claim = eventually_within("the spot claim deleted", WAIT, || async {
        h.claim("i-00000000000000001")
            .await
            .filter(|c| c.metadata.deletion_timestamp.is_some())
    })
    .await;
    assert!(
        spot_claim
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("karpenter.sh/nodeclaim-termination-timestamp")
    );
    assert!(h.unavailable.contains(&OfferingKey {
        instance_type: "m5.large".to_string(),
        zone: "us-east-1a".to_string(),
        capacity_type: "spot".to_string(),
    }));
    // A spot interruption brings a deleting claim's deadline forward: the
    // instance goes in two minutes whatever the drain waits for.
    eventually_within(
        "the deleting claim's deadline brought forward",
        WAIT,
        || async {
            let claim = h.claim("i-00000000000000006").await?;
            let at = claim
                .metadata
                .annotations?
                .get("karpenter.sh/nodeclaim-termination-timestamp")?
                .parse::<k8s_openapi::jiff::Timestamp>()
                .ok()?;
            (at < "2099-01-01T00:00:00Z".parse().ok()?).then_some(())
        },
    )
    .await;
    // A stop deletes; a scheduled change drains by default.
    for id in ["i-00000000000000004", "i-00000000000000005"] {
        eventually_within("the claim deleted", WAIT, || async {
            h.claim(id)
                .await
                .filter(|c| c.metadata.deletion_timestamp.is_some())
        })
        .await;
    }
    // The stateful pool cordons on a scheduled change and keeps the claim.
    eventually_within("the stateful node cordoned", WAIT, || async {
        let node = h.node("i-00000000000000002").await;
        (node.spec?.unschedulable == Some(true)).then_some(())
    })
    .await;
    // Marked as the policy's cordon, which consolidation leaves alone.
    let cordoned = h.node("i-00000000000000002").await;
    assert_eq!(
        cordoned
            .metadata
            .annotations
            .unwrap_or_default()
            .get("nodewright.io/cordoned-by-interruption")
            .map(String::as_str),
        Some("scheduled_change")
    );
    // Everything consumed, harmless ones included.
    eventually_within("the queue drained", WAIT, || async {
        (h.left().await == 0).then_some(())
    })
    .await;
    for id in ["i-00000000000000002", "i-00000000000000003"] {
        let claim = h.claim(id).await.unwrap();
        assert!(claim.metadata.deletion_timestamp.is_none(), "{id} kept");
    }
    let rebalanced = h.node("i-00000000000000003").await;
    assert_ne!(
        rebalanced.spec.and_then(|s| s.unschedulable),
        Some(true),
        "a rebalance recommendation is an event only"
    );
    assert_eq!(h.healthy(), 1.0);
    // Karpenter's events, on the Node and the NodeClaim alike.
    let expected: [(&str, &[&str]); 5] = [
        ("1", &["SpotInterrupted", "TerminatingOnInterruption"]),
        ("2", &["InstanceUnhealthy"]),
        ("3", &["SpotRebalanceRecommendation"]),
        ("4", &["InstanceStopping", "TerminatingOnInterruption"]),
        ("5", &["InstanceUnhealthy", "TerminatingOnInterruption"]),
    ];
    for (n, reasons) in expected {
        let id = format!("i-0000000000000000{n}");
        for (kind, name) in [
            ("Node", format!("node-{id}")),
            ("NodeClaim", format!("claim-{id}")),
        ] {
            let seen = eventually_within("the events recorded", WAIT, || async {
                let seen = h.reasons(kind, &name);
                (seen.len() >= reasons.len()).then_some(seen)
            })
            .await;
            assert_eq!(seen, reasons, "{kind} {name}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_deleted_mid_run_is_polled_again_once_it_is_back() {
    let mut h = Harness::start("interruption-outage", &[("i-00000000000000011", "default")]).await;
    eventually_within("healthy", WAIT, || async {
        (h.healthy() == 1.0).then_some(())
    })
    .await;
    h.sqs.delete_queue().queue_url(&h.url).send().await.unwrap();
    eventually_within("the gauge at 0", WAIT, || async {
        (h.healthy() == 0.0).then_some(())
    })
    .await;
    h.url = h
        .sqs
        .create_queue()
        .queue_name(&h.queue)
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    h.send(&stopping("i-00000000000000011")).await;
    eventually_within(
        "handled after the outage",
        Duration::from_secs(90),
        || async {
            h.claim("i-00000000000000011")
                .await
                .filter(|c| c.metadata.deletion_timestamp.is_some())
        },
    )
    .await;
    assert_eq!(h.healthy(), 1.0);
}

#[test]
fn the_stateful_example_cordons_on_scheduled_changes_and_ignores_rebalances() {
    use nodewright::controllers::interruption::policy::{Policy, policies};
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/nodepools/stateful-cordon.yaml"),
    )
    .unwrap();
    let pool: NodePool = nodewright::yaml::from_str(&text).unwrap();
    let annotations = pool.metadata.annotations.unwrap_or_default();
    let (found, errors) = policies(&annotations);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(found.scheduled_change, Policy::Cordon);
    assert_eq!(found.rebalance, Policy::Ignore);
}
