//! The instance status controller against the API server double, with EC2
//! mocked where moto cannot go (moto reports every instance healthy and
//! never schedules events) and against moto over the wire for the call
//! itself: Karpenter's instance-status cases from its interruption
//! `suite_test.go` — a failed system or instance check deletes forcefully,
//! a scheduled event drains (or follows a `Cordon` NodePool) without the
//! termination timestamp, each (instance, category) is acted on once while
//! it lasts and again once it came back, only the cluster's instances are
//! asked about, and a refused call changes nothing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_ec2::operation::describe_instance_status::{
    DescribeInstanceStatusError, DescribeInstanceStatusOutput,
};
use aws_sdk_ec2::primitives::DateTime;
use aws_sdk_ec2::types::{
    EventCode, InstanceStatus, InstanceStatusDetails, InstanceStatusEvent, InstanceStatusSummary,
    StatusName, StatusType, SummaryStatus,
};
use aws_smithy_mocks::{RuleMode, mock, mock_client};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use nodewright::apis::{NodeClaim, NodePool};
use nodewright::aws::catalog::Catalog;
use nodewright::aws::instance_status::{Category, InstanceStatusProvider};
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::cloudprovider::UnavailableOfferings;
use nodewright::cluster::ClusterState;
use nodewright::controllers::interruption::InterruptionHandler;
use nodewright::controllers::interruption::instance_status::{
    InstanceStatusController, InstanceStatusPolling,
};
use nodewright::controllers::recorder::Recorder;
use nodewright::extensions::Extensions;
use nodewright_host::HostConfig;
use serde_json::json;

use crate::interruption::pool;
use crate::moto::moto_clients;

const TERMINATION_TIMESTAMP: &str = "karpenter.sh/nodeclaim-termination-timestamp";

/// What EC2 answers, changed by the test between polls, and the instance
/// IDs each call named.
#[derive(Default)]
struct Ec2 {
    statuses: Mutex<Vec<InstanceStatus>>,
    asked: Mutex<Vec<Vec<String>>>,
}

struct Harness {
    claims: Api<NodeClaim>,
    nodes: Api<Node>,
    controller: InstanceStatusController,
    _driver: tokio::task::JoinHandle<()>,
    server: apiserver_double::ApiServer,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self._driver.abort();
    }
}

/// A cluster with a launched NodeClaim and Node per `(instance, pool)`,
/// NodePools `default` and `stateful` (scheduled changes: `Cordon`), and a
/// controller reading statuses through `ec2`.
async fn harness(instances: &[(&str, &str)], ec2: aws_sdk_ec2::Client) -> Harness {
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
    let cordon = json!({"nodewright.io/interruption-scheduled-change": "Cordon"});
    pools.create(&pp, &pool("stateful", cordon)).await.unwrap();
    for (id, pool) in instances {
        let provider_id = format!("aws:///us-east-1a/{id}");
        let labels = json!({"karpenter.sh/nodepool": pool});
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": format!("claim-{id}"), "labels": labels,
                         "finalizers": ["karpenter.sh/termination"]},
            "spec": {"requirements": [],
                     "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}
        }))
        .unwrap();
        claims.create(&pp, &claim).await.unwrap();
        claims
            .patch_status(
                &format!("claim-{id}"),
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": {"providerID": provider_id}})),
            )
            .await
            .unwrap();
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": format!("node-{id}"), "labels": labels},
            "spec": {"providerID": provider_id}
        }))
        .unwrap();
        nodes.create(&pp, &node).await.unwrap();
    }
    let (state, driver) = ClusterState::start(client.clone());
    let driver = tokio::spawn(driver);
    state.synced().await;
    let instance_types = Arc::new(InstanceTypeProvider::new(
        Arc::new(Catalog::embedded("us-east-1").unwrap()),
        Arc::new(Extensions::new(HostConfig::default()).unwrap()),
        Arc::new(UnavailableOfferings::default()),
    ));
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "nodewright".to_string(),
            instance: None,
        },
    );
    let handler = InterruptionHandler::new(client, state, instance_types, recorder);
    let polling = InstanceStatusPolling {
        provider: InstanceStatusProvider::new(ec2),
        interval: Duration::from_secs(60),
    };
    Harness {
        claims,
        nodes,
        controller: InstanceStatusController::new(polling, handler),
        _driver: driver,
        server,
    }
}

/// EC2 answering from `ec2`'s statuses (those of the instances asked about).
fn mocked(ec2: &Arc<Ec2>) -> aws_sdk_ec2::Client {
    let shared = ec2.clone();
    let rule =
        mock!(aws_sdk_ec2::Client::describe_instance_status).then_compute_output(move |input| {
            let ids = input.instance_ids().to_vec();
            shared.asked.lock().unwrap().push(ids.clone());
            let statuses = shared.statuses.lock().unwrap().clone();
            DescribeInstanceStatusOutput::builder()
                .set_instance_statuses(Some(
                    statuses
                        .into_iter()
                        .filter(|s| ids.iter().any(|id| Some(id.as_str()) == s.instance_id()))
                        .collect(),
                ))
                .build()
        });
    mock_client!(aws_sdk_ec2, RuleMode::MatchAny, [&rule])
}

fn ten_minutes_ago() -> DateTime {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    DateTime::from_secs(now.as_secs() as i64 - 600)
}

fn failed() -> InstanceStatusSummary {
    InstanceStatusSummary::builder()
        .status(SummaryStatus::Impaired)
        .details(
            InstanceStatusDetails::builder()
                .name(StatusName::Reachability)
                .status(StatusType::Failed)
                .impaired_since(ten_minutes_ago())
                .build(),
        )
        .build()
}

fn passed() -> InstanceStatusSummary {
    InstanceStatusSummary::builder()
        .status(SummaryStatus::Ok)
        .details(
            InstanceStatusDetails::builder()
                .name(StatusName::Reachability)
                .status(StatusType::Passed)
                .build(),
        )
        .build()
}

fn retirement() -> InstanceStatusEvent {
    InstanceStatusEvent::builder()
        .code(EventCode::InstanceRetirement)
        .description("The instance is running on degraded hardware")
        .build()
}

fn status(id: &str) -> aws_sdk_ec2::types::builders::InstanceStatusBuilder {
    InstanceStatus::builder()
        .instance_id(id)
        .instance_status(passed())
        .system_status(passed())
}

impl Harness {
    async fn claim(&self, id: &str) -> NodeClaim {
        self.claims.get(&format!("claim-{id}")).await.unwrap()
    }

    async fn node(&self, id: &str) -> Node {
        self.nodes.get(&format!("node-{id}")).await.unwrap()
    }
}

fn deleting(claim: &NodeClaim) -> bool {
    claim.metadata.deletion_timestamp.is_some()
}

fn annotated(claim: &NodeClaim) -> bool {
    claim
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(TERMINATION_TIMESTAMP))
}

fn unhealthy_count(category: &str) -> f64 {
    let series = format!(
        "karpenter_interruption_instance_status_unhealthy_total{{category=\"{category}\"}} "
    );
    nodewright::metrics::metrics()
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn failed_checks_delete_forcefully_and_events_drain_or_cordon_by_pool() {
    let ec2 = Arc::new(Ec2::default());
    let h = harness(
        &[
            ("i-system", "default"),
            ("i-instance", "default"),
            ("i-event", "default"),
            ("i-both", "default"),
            ("i-stateful", "stateful"),
            ("i-healthy", "default"),
        ],
        mocked(&ec2),
    )
    .await;
    *ec2.statuses.lock().unwrap() = vec![
        status("i-system").system_status(failed()).build(),
        status("i-instance").instance_status(failed()).build(),
        status("i-event").events(retirement()).build(),
        status("i-both")
            .system_status(failed())
            .events(retirement())
            .build(),
        status("i-stateful").events(retirement()).build(),
        status("i-healthy").build(),
        // Not the cluster's: never asked about, never answered.
        status("i-foreign").system_status(failed()).build(),
    ];
    let system_before = unhealthy_count("SystemStatus");
    let poll = h.controller.poll().await.expect("the poll succeeds");
    assert_eq!(poll.instances, 6);
    let asked: Vec<String> = ec2.asked.lock().unwrap().concat();
    assert!(!asked.contains(&"i-foreign".to_string()), "{asked:?}");
    assert_eq!(asked.len(), 6, "{asked:?}");

    // "should forcefully terminate the NodeClaim when an instance is
    // unhealthy due to EC2 system status checks" / "... InstanceStatus
    // check failure" / "should annotate the NodeClaim with a termination
    // timestamp for forceful termination".
    for id in ["i-system", "i-instance", "i-both"] {
        let claim = h.claim(id).await;
        assert!(deleting(&claim) && annotated(&claim), "{id}: {claim:?}");
    }
    // "should delete the NodeClaim when an instance has a scheduled
    // maintenance event" and "should NOT annotate the NodeClaim with a
    // termination timestamp for scheduled maintenance events".
    let event = h.claim("i-event").await;
    assert!(deleting(&event) && !annotated(&event), "{event:?}");
    // A NodePool that cordons on scheduled changes cordons on the event too.
    let stateful = h.claim("i-stateful").await;
    assert!(!deleting(&stateful), "{stateful:?}");
    let node = h.node("i-stateful").await;
    assert_eq!(node.spec.and_then(|s| s.unschedulable), Some(true));
    // Karpenter's event for every kind found by polling, on Node and NodeClaim.
    for name in ["node-i-system", "claim-i-system", "node-i-stateful"] {
        let events = h.server.objects("events.k8s.io", "events");
        assert!(
            events
                .iter()
                .any(|e| e["regarding"]["name"] == name && e["reason"] == "InstanceUnhealthy"),
            "{name}"
        );
    }
    let healthy = h.claim("i-healthy").await;
    assert!(!deleting(&healthy) && !annotated(&healthy));

    let mut acted = poll.acted.clone();
    acted.sort();
    assert_eq!(
        acted,
        [
            ("i-both".to_string(), Category::SystemStatus),
            ("i-both".to_string(), Category::EventStatus),
            ("i-event".to_string(), Category::EventStatus),
            ("i-instance".to_string(), Category::InstanceStatus),
            ("i-stateful".to_string(), Category::EventStatus),
            ("i-system".to_string(), Category::SystemStatus),
        ]
    );
    assert!(unhealthy_count("SystemStatus") >= system_before + 2.0);
}

#[tokio::test]
async fn each_unhealthy_status_is_acted_on_once_while_it_lasts_and_again_when_it_returns() {
    let ec2 = Arc::new(Ec2::default());
    let h = harness(&[("i-flaky", "stateful")], mocked(&ec2)).await;
    let unhealthy = || vec![status("i-flaky").events(retirement()).build()];
    *ec2.statuses.lock().unwrap() = unhealthy();
    let first = h.controller.poll().await.unwrap();
    assert_eq!(first.acted.len(), 1);
    // "should not re-annotate the NodeClaim on subsequent reconciles" /
    // "should only emit the metric once across multiple reconciles".
    let again = h.controller.poll().await.unwrap();
    assert!(again.acted.is_empty(), "{again:?}");
    // "should re-emit the metric when an instance recovers and becomes
    // unhealthy again".
    *ec2.statuses.lock().unwrap() = vec![status("i-flaky").build()];
    assert!(h.controller.poll().await.unwrap().acted.is_empty());
    *ec2.statuses.lock().unwrap() = unhealthy();
    let back = h.controller.poll().await.unwrap();
    assert_eq!(back.acted, [("i-flaky".to_string(), Category::EventStatus)]);
}

#[tokio::test]
async fn a_refused_call_changes_nothing_and_names_the_permission() {
    let refused = mock!(aws_sdk_ec2::Client::describe_instance_status).then_error(|| {
        DescribeInstanceStatusError::generic(
            aws_sdk_ec2::error::ErrorMetadata::builder()
                .code("UnauthorizedOperation")
                .message("not authorized to perform: ec2:DescribeInstanceStatus")
                .build(),
        )
    });
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, [&refused]);
    let h = harness(&[("i-1", "default")], ec2).await;
    let error = h.controller.poll().await.expect_err("the call is refused");
    assert_eq!(error.code.as_deref(), Some("UnauthorizedOperation"));
    assert_eq!(error.operation, "ec2:DescribeInstanceStatus");
    assert!(!deleting(&h.claim("i-1").await));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moto_answers_for_live_instances_and_a_gone_one_is_skipped() {
    let clients = moto_clients().await;
    let image = crate::amis::register(
        &clients,
        "instance-status",
        aws_sdk_ec2::types::ArchitectureValues::X8664,
        &[],
    )
    .await;
    let live = clients
        .ec2
        .run_instances()
        .image_id(image)
        .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .unwrap()
        .instances
        .unwrap()
        .remove(0)
        .instance_id
        .unwrap();
    // EC2 refuses a call naming an instance it does not know: the live
    // instance is still asked about, one by one.
    let h = harness(
        &[(&live, "default"), ("i-0000000000000dead", "default")],
        clients.ec2.clone(),
    )
    .await;
    let poll = h.controller.poll().await.expect("moto answers");
    assert_eq!(poll.instances, 2);
    assert!(poll.acted.is_empty(), "moto's instances are healthy");
    assert!(!deleting(&h.claim(&live).await));
}
