//! Interruption throughput, in the shape of Karpenter's
//! `interruption_benchmark_test.go`: N messages in moto's SQS — a third AWS
//! Health scheduled changes, a third spot interruption warnings, the rest
//! state changes (stopping, stopped, shutting-down, terminated) — for N
//! launched NodeClaims and their Nodes in the API server double; the
//! interruption controller polls the queue and acts on every one (each
//! NodeClaim deleted, with its events). Timed from the first send to the
//! last message deleted from the queue, every NodeClaim then checked
//! deleted. moto's own cost is shown beside it: the same messages received
//! and deleted by a loop that does nothing else.
//!
//! Unlike Karpenter's benchmark, the messages are not all queued before the
//! controller starts: moto's SQS spends time in proportion to the queue's
//! length on every call, so 15,000 queued messages would measure moto.
//! Messages are sent while the controller runs, at most [`WINDOW`] ahead of
//! the deletions, which keeps moto's queue as short as a real queue under
//! that load.
//!
//! moto's SQS still costs more per message the more messages it has seen,
//! so beyond 1,000 messages the controller is measured against an
//! in-process queue instead (`aws-smithy-mocks` answering ReceiveMessage
//! and DeleteMessageBatch from memory): the same poller, parser, handler
//! and API server double, with no SQS cost at all — the controller's own
//! throughput. `NODEWRIGHT_BENCH_MOTO_MAX` (default 1000) is the largest
//! size run against moto.
//!
//! Run (moto from `scripts/test`'s venv, or `NODEWRIGHT_MOTO_SERVER`):
//!
//! ```sh
//! AWS_EC2_METADATA_DISABLED=true cargo bench --bench interruption
//! NODEWRIGHT_BENCH_MESSAGES=15000 AWS_EC2_METADATA_DISABLED=true cargo bench --bench interruption
//! ```

#[path = "../tests/it/moto.rs"]
#[allow(dead_code)]
mod moto;

#[path = "support/rss.rs"]
mod rss;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use nodewright::apis::{NodeClaim, NodePool};
use nodewright::aws::catalog::Catalog;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::cluster::ClusterState;
use nodewright::controllers::interruption::InterruptionController;
use nodewright::controllers::recorder::Recorder;
use nodewright::extensions::Extensions;
use nodewright_host::HostConfig;
use serde_json::{Value, json};

/// Writes in flight at once while filling the double or the queue.
const CONCURRENCY: usize = 16;
/// Changes the double keeps, so no watcher is sent back to a full list.
const HISTORY: usize = 400_000;
/// Messages sent and not yet deleted, at most.
const WINDOW: usize = 200;

fn main() {
    let sizes: Vec<usize> = std::env::var("NODEWRIGHT_BENCH_MESSAGES")
        .unwrap_or_else(|_| "100,1000,5000,15000".to_string())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let moto_max: usize = std::env::var("NODEWRIGHT_BENCH_MOTO_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    println!(
        "| messages | queue | handled in | messages/s | the queue alone (send, receive, delete) | peak RSS |"
    );
    println!("|---:|---|---:|---:|---:|---:|");
    for (i, n) in sizes.into_iter().enumerate() {
        let (queue, handled, alone) = if n <= moto_max {
            let handled = runtime.block_on(async {
                let clients = moto::moto_clients().await;
                handled(n, i, clients.sqs).await
            });
            let alone = runtime.block_on(moto_alone(n, i));
            ("moto", handled, format!("{:.1} s", alone.as_secs_f64()))
        } else {
            let sqs = in_memory_queue((0..n).map(|i| body(i, n)).collect());
            let handled = runtime.block_on(handled(n, i, sqs));
            ("in process", handled, "none".to_string())
        };
        println!(
            "| {n} | {queue} | {:.1} s | {:.0} | {alone} | {} MiB |",
            handled.as_secs_f64(),
            n as f64 / handled.as_secs_f64(),
            rss::peak_rss_mib()
        );
    }
}

/// The instance ID of message `i`.
fn instance(i: usize) -> String {
    format!("i-{i:017x}")
}

/// Karpenter's diverse mix: a third scheduled changes, a third spot
/// interruptions, the rest state changes across four states.
fn body(i: usize, n: usize) -> String {
    let id = instance(i);
    let (source, detail_type, detail) = if i < n / 3 {
        (
            "aws.health",
            "AWS Health Event",
            json!({"service": "EC2", "eventTypeCategory": "scheduledChange",
                   "eventTypeCode": "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
                   "affectedEntities": [{"entityValue": id}]}),
        )
    } else if i < 2 * (n / 3) {
        (
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": id, "instance-action": "terminate"}),
        )
    } else {
        let states = ["stopping", "stopped", "shutting-down", "terminated"];
        (
            "aws.ec2",
            "EC2 Instance State-change Notification",
            json!({"instance-id": id, "state": states[i % states.len()]}),
        )
    };
    json!({
        "version": "0", "id": format!("e-{i}"), "detail-type": detail_type, "source": source,
        "account": "123456789012", "time": "2026-11-27T12:00:00Z", "region": "us-east-1",
        "resources": [], "detail": detail
    })
    .to_string()
}

async fn queue(sqs: &aws_sdk_sqs::Client, name: &str) -> String {
    sqs.create_queue()
        .queue_name(name)
        .send()
        .await
        .expect("moto creates the queue")
        .queue_url
        .expect("a queue URL")
}

/// Sends the `n` messages, ten per batch, never more than [`WINDOW`]
/// ahead of `deleted()`.
async fn send_all(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    n: usize,
    deleted: impl Fn() -> usize + Sync,
) {
    let deleted = &deleted;
    let batches: Vec<Vec<usize>> = (0..n)
        .collect::<Vec<_>>()
        .chunks(10)
        .map(<[usize]>::to_vec)
        .collect();
    futures::stream::iter(batches)
        .for_each_concurrent(CONCURRENCY, |batch| async move {
            while batch[0] >= deleted() + WINDOW {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let mut request = sqs.send_message_batch().queue_url(url);
            for i in batch {
                request = request.entries(
                    aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id(format!("m{i}"))
                        .message_body(body(i, n))
                        .build()
                        .expect("an entry"),
                );
            }
            request.send().await.expect("moto takes the batch");
        })
        .await;
}

/// Time to handle `n` messages on `sqs`: from the first send to the last
/// deleted. An in-process queue holds its messages already.
async fn handled(n: usize, run: usize, sqs: aws_sdk_sqs::Client) -> Duration {
    let name = format!("bench-{run}-{n}");
    let url = queue(&sqs, &name).await;
    let server = nodewright::sim::double::builder().history(HISTORY).build();
    let client = server.client();
    fill(&client, n).await;
    let (state, driver) = ClusterState::start(client.clone());
    let driver = tokio::spawn(driver);
    state.synced().await;
    let instance_types = Arc::new(InstanceTypeProvider::new(
        Arc::new(Catalog::embedded("us-east-1").expect("the embedded catalog")),
        Arc::new(Extensions::new(HostConfig::default()).expect("the extension host")),
        Arc::default(),
    ));
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "nodewright".to_string(),
            instance: None,
        },
    );
    let polled =
        interruption_queue::Queue::new(sqs.clone(), name).with_wait_time(Duration::from_secs(1));
    let controller = Arc::new(InterruptionController::new(
        client,
        state,
        Arc::new(polled),
        instance_types,
        recorder,
    ));
    let before = deleted_messages();
    let done = move || (deleted_messages() - before) as usize;
    let start = Instant::now();
    let running = tokio::spawn(controller.run());
    if url != IN_MEMORY_URL {
        send_all(&sqs, &url, n, done).await;
    }
    while done() < n {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = start.elapsed();
    running.abort();
    driver.abort();
    let deleting = server
        .objects("karpenter.sh", "nodeclaims")
        .iter()
        .filter(|c| !c["metadata"]["deletionTimestamp"].is_null())
        .count();
    assert_eq!(deleting, n, "every NodeClaim deleted");
    elapsed
}

/// Time for moto alone: the same messages sent (with the same window),
/// received and deleted, nothing else done.
async fn moto_alone(n: usize, run: usize) -> Duration {
    let clients = moto::moto_clients().await;
    let sqs = &clients.sqs;
    let url = queue(sqs, &format!("alone-{run}-{n}")).await;
    let deleted = std::sync::atomic::AtomicUsize::new(0);
    let start = Instant::now();
    let sending = send_all(sqs, &url, n, || {
        deleted.load(std::sync::atomic::Ordering::SeqCst)
    });
    let receiving = async {
        while deleted.load(std::sync::atomic::Ordering::SeqCst) < n {
            let received = sqs
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .expect("moto answers")
                .messages
                .unwrap_or_default();
            if received.is_empty() {
                continue;
            }
            let mut request = sqs.delete_message_batch().queue_url(&url);
            for (i, message) in received.iter().enumerate() {
                request = request.entries(
                    aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(message.receipt_handle().unwrap_or_default())
                        .build()
                        .expect("an entry"),
                );
            }
            request.send().await.expect("moto deletes");
            deleted.fetch_add(received.len(), std::sync::atomic::Ordering::SeqCst);
        }
    };
    futures::join!(sending, receiving);
    start.elapsed()
}

const IN_MEMORY_URL: &str = "http://in-memory/123456789012/bench";

/// An SQS client whose queue is `bodies`, in memory: ReceiveMessage hands
/// out up to ten at a time, DeleteMessageBatch accepts every entry.
fn in_memory_queue(bodies: Vec<String>) -> aws_sdk_sqs::Client {
    use aws_sdk_sqs::operation::create_queue::CreateQueueOutput;
    use aws_sdk_sqs::operation::delete_message_batch::DeleteMessageBatchOutput;
    use aws_sdk_sqs::operation::get_queue_url::GetQueueUrlOutput;
    use aws_sdk_sqs::operation::receive_message::ReceiveMessageOutput;
    use aws_sdk_sqs::types::{DeleteMessageBatchResultEntry, Message, MessageSystemAttributeName};
    use aws_smithy_mocks::{RuleMode, mock, mock_client};
    let queue = Arc::new(std::sync::Mutex::new(
        bodies
            .into_iter()
            .enumerate()
            .collect::<std::collections::VecDeque<_>>(),
    ));
    let sent = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis().to_string())
        .unwrap_or_default();
    let create = mock!(aws_sdk_sqs::Client::create_queue).then_output(|| {
        CreateQueueOutput::builder()
            .queue_url(IN_MEMORY_URL)
            .build()
    });
    let url = mock!(aws_sdk_sqs::Client::get_queue_url).then_output(|| {
        GetQueueUrlOutput::builder()
            .queue_url(IN_MEMORY_URL)
            .build()
    });
    let receive = mock!(aws_sdk_sqs::Client::receive_message).then_compute_output(move |_| {
        let mut queue = queue.lock().unwrap_or_else(|e| e.into_inner());
        let taken: Vec<Message> = (0..10)
            .filter_map(|_| queue.pop_front())
            .map(|(i, body)| {
                Message::builder()
                    .message_id(format!("m{i}"))
                    .receipt_handle(format!("r{i}"))
                    .body(body)
                    .attributes(MessageSystemAttributeName::SentTimestamp, sent.clone())
                    .build()
            })
            .collect();
        ReceiveMessageOutput::builder()
            .set_messages(Some(taken))
            .build()
    });
    let delete = mock!(aws_sdk_sqs::Client::delete_message_batch).then_compute_output(|input| {
        let entries: Vec<DeleteMessageBatchResultEntry> = input
            .entries()
            .iter()
            .filter_map(|e| {
                DeleteMessageBatchResultEntry::builder()
                    .id(e.id())
                    .build()
                    .ok()
            })
            .collect();
        DeleteMessageBatchOutput::builder()
            .set_successful(Some(entries))
            .set_failed(Some(Vec::new()))
            .build()
            .expect("a delete answer")
    });
    mock_client!(
        aws_sdk_sqs,
        RuleMode::MatchAny,
        [&create, &url, &receive, &delete]
    )
}

/// A NodePool, and `n` launched NodeClaims (with the termination finalizer,
/// so a deletion shows as a timestamp) and their Nodes.
async fn fill(client: &kube::Client, n: usize) {
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []
        }}}
    }))
    .expect("a NodePool");
    Api::<NodePool>::all(client.clone())
        .create(&PostParams::default(), &pool)
        .await
        .expect("the double takes the NodePool");
    futures::stream::iter(0..n)
        .for_each_concurrent(CONCURRENCY, |i| async move {
            let id = instance(i);
            let provider_id = format!("aws:///us-east-1a/{id}");
            let labels = json!({
                "karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "spot"
            });
            let claim: NodeClaim = from(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": format!("claim-{id}"), "labels": labels,
                             "finalizers": ["karpenter.sh/termination"]},
                "spec": {"requirements": [],
                         "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}
            }));
            let claims: Api<NodeClaim> = Api::all(client.clone());
            claims
                .create(&PostParams::default(), &claim)
                .await
                .expect("the double takes the NodeClaim");
            claims
                .patch_status(
                    &format!("claim-{id}"),
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"status": {"providerID": provider_id}})),
                )
                .await
                .expect("the double takes the status");
            let node: Node = from(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": format!("node-{id}"), "labels": labels},
                "spec": {"providerID": provider_id}
            }));
            Api::<Node>::all(client.clone())
                .create(&PostParams::default(), &node)
                .await
                .expect("the double takes the Node");
        })
        .await;
}

fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a well-formed object")
}

/// `karpenter_interruption_deleted_messages_total`, as exported.
fn deleted_messages() -> f64 {
    nodewright::metrics::metrics()
        .render()
        .lines()
        .filter(|l| l.starts_with("karpenter_interruption_deleted_messages_total"))
        .filter_map(|l| l.rsplit(' ').next())
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .sum()
}
