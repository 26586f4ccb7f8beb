//! The queue against moto's SQS over the wire: receive, parse, delete,
//! errors, URL caching and batching.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use interruption::{Kind, ParseError, Parsed, UnknownReason};
use interruption_queue::{
    DELETE_BATCH_SIZE, MAX_MESSAGES, Operation, Queue, QueueErrorKind, Received,
};

/// Long enough for a message already in the queue, short enough for a test.
const WAIT: Duration = Duration::from_secs(1);

fn spot_interruption(instance_id: &str) -> String {
    format!(
        r#"{{
            "version": "0",
            "id": "1e5527d7-bb36-4607-3370-4164db56a40e",
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "account": "123456789012",
            "time": "2024-05-14T12:00:00Z",
            "region": "us-east-1",
            "resources": ["arn:aws:ec2:us-east-1b:instance/{instance_id}"],
            "detail": {{"instance-id": "{instance_id}", "instance-action": "terminate"}}
        }}"#
    )
}

fn state_change(instance_id: &str, state: &str) -> String {
    format!(
        r#"{{
            "version": "0",
            "id": "7bf73129-1428-4cd3-a780-95db273d1602",
            "detail-type": "EC2 Instance State-change Notification",
            "source": "aws.ec2",
            "account": "123456789012",
            "time": "2024-05-14T12:00:00Z",
            "region": "us-east-1",
            "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/{instance_id}"],
            "detail": {{"instance-id": "{instance_id}", "state": "{state}"}}
        }}"#
    )
}

/// Sends `body`; returns its message ID.
async fn send(client: &aws_sdk_sqs::Client, queue: &Queue, body: &str) -> String {
    client
        .send_message()
        .queue_url(&*queue.url().await.unwrap())
        .message_body(body)
        .send()
        .await
        .unwrap()
        .message_id
        .unwrap()
}

/// Receives until `count` messages came, each receive within SQS's limit.
async fn receive_all(queue: &Queue, count: usize) -> (Vec<Received>, usize) {
    let mut received = Vec::new();
    let mut receives = 0;
    while received.len() < count {
        receives += 1;
        assert!(
            receives <= 2 * count,
            "only {} of {count} messages came",
            received.len()
        );
        let batch = queue.receive().await.unwrap();
        assert!(
            batch.len() <= MAX_MESSAGES as usize,
            "{} messages in one receive",
            batch.len()
        );
        received.extend(batch);
    }
    (received, receives)
}

#[tokio::test]
async fn messages_are_received_parsed_and_deleted() {
    let moto = common::moto();
    let (client, _) = common::client(moto).await;
    let name = common::create_queue(&client, "parsed").await;
    let queue = Queue::new(client.clone(), name.clone()).with_wait_time(WAIT);

    let spot = spot_interruption("i-0b662ef9931388ba0");
    let stopping = state_change("i-0123456789abcdef0", "stopping");
    let running = state_change("i-0fedcba9876543210", "running");
    let garbage = "this is not JSON";
    let mut sent = Vec::new();
    for body in [spot.as_str(), stopping.as_str(), running.as_str(), garbage] {
        sent.push((send(&client, &queue, body).await, body.len()));
    }

    let (mut received, _) = receive_all(&queue, sent.len()).await;
    received.sort_by_key(|r| sent.iter().position(|(id, _)| *id == r.message_id));
    let ids: Vec<_> = received.iter().map(|r| r.message_id.as_str()).collect();
    let sent_ids: Vec<_> = sent.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, sent_ids);
    for (message, (_, body_len)) in received.iter().zip(&sent) {
        assert_eq!(message.body_len, *body_len);
        assert!(!message.receipt_handle.is_empty());
        assert!(message.sent_at.is_some(), "no SentTimestamp on {message:?}");
    }

    match &received[0].parsed {
        Parsed::Known(event) => {
            assert_eq!(event.kind(), Kind::SpotInterrupted);
            assert_eq!(event.instance_ids(), ["i-0b662ef9931388ba0"]);
        }
        other => panic!("spot interruption read as {other:?}"),
    }
    assert_eq!(
        received[1].parsed.metric_kind(),
        Some(Kind::InstanceStopped.as_str())
    );
    match &received[2].parsed {
        Parsed::Unknown(unknown) => assert_eq!(
            unknown.reason,
            UnknownReason::IgnoredState {
                state: "running".to_owned()
            }
        ),
        other => panic!("state change to running read as {other:?}"),
    }
    assert!(
        matches!(received[3].parsed, Parsed::Malformed(ParseError::Json(_))),
        "garbage read as {:?}",
        received[3].parsed
    );

    let outcome = queue.delete(&received).await.unwrap();
    assert_eq!(outcome.deleted, 4);
    assert!(outcome.failed.is_empty(), "{:?}", outcome.failed);
    assert_eq!(common::messages_in(&client, &name).await, 0);
    let empty = Queue::new(client, name).with_wait_time(Duration::ZERO);
    assert!(empty.receive().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_missing_queue_is_a_typed_error() {
    let moto = common::moto();
    let (client, calls) = common::client(moto).await;
    let queue = Queue::new(client, "nodewright-no-such-queue").with_wait_time(Duration::ZERO);

    for _ in 0..2 {
        let error = queue.receive().await.unwrap_err();
        assert_eq!(error.kind(), QueueErrorKind::QueueDoesNotExist);
        assert_eq!(error.operation(), Operation::GetQueueUrl);
        assert_eq!(
            error.code(),
            Some("AWS.SimpleQueueService.NonExistentQueue")
        );
        assert_eq!(error.label(), "AWS.SimpleQueueService.NonExistentQueue");
        assert_eq!(error.queue(), "nodewright-no-such-queue");
        let shown = error.to_string();
        assert!(
            shown.contains("nodewright-no-such-queue") && shown.contains("does not exist"),
            "{shown}"
        );
        assert!(std::error::Error::source(&error).is_some());
    }
    // Nothing is cached for a queue that was never found: each call asks.
    assert_eq!(calls.count("GetQueueUrl"), 2);
    assert_eq!(calls.count("ReceiveMessage"), 0);

    // Deleting nothing makes no call; deleting something asks for the URL.
    assert_eq!(queue.delete(&[]).await.unwrap().deleted, 0);
    let stray = Received {
        message_id: "m".to_owned(),
        receipt_handle: "r".to_owned(),
        body_len: 0,
        sent_at: None,
        parsed: interruption::parse(""),
    };
    let error = queue.delete(&[stray]).await.unwrap_err();
    assert_eq!(error.kind(), QueueErrorKind::QueueDoesNotExist);
    assert_eq!(calls.count("GetQueueUrl"), 3);
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_transport_error() {
    // A port nothing listens on: bound, then released. No moto needed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (client, calls) = common::client_at(&format!("http://127.0.0.1:{port}")).await;
    let config = client
        .config()
        .to_builder()
        .retry_config(aws_sdk_sqs::config::retry::RetryConfig::disabled())
        .build();
    let queue = Queue::new(
        aws_sdk_sqs::Client::from_conf(config),
        "nodewright-unreachable",
    );
    for _ in 0..2 {
        let error = queue.receive().await.unwrap_err();
        assert_eq!(error.kind(), QueueErrorKind::Transport);
        assert_eq!(error.operation(), Operation::GetQueueUrl);
        assert_eq!(error.code(), None);
        assert_eq!(error.label(), "transport");
    }
    assert_eq!(calls.count("GetQueueUrl"), 2);
}

#[tokio::test]
async fn the_url_is_resolved_once_and_again_after_the_queue_is_gone() {
    let moto = common::moto();
    let (client, calls) = common::client(moto).await;
    let name = common::create_queue(&client, "cached").await;
    let queue = Queue::new(client.clone(), name.clone()).with_wait_time(Duration::ZERO);

    let url = queue.url().await.unwrap();
    send(&client, &queue, &spot_interruption("i-0b662ef9931388ba0")).await;
    let received = queue.receive().await.unwrap();
    assert_eq!(received.len(), 1);
    assert!(queue.receive().await.unwrap().is_empty());
    assert_eq!(queue.delete(&received).await.unwrap().deleted, 1);
    assert_eq!(calls.count("GetQueueUrl"), 1);
    assert_eq!(calls.count("ReceiveMessage"), 2);
    assert_eq!(calls.count("DeleteMessageBatch"), 1);

    // The queue goes away: the cached URL fails, and is dropped.
    client.delete_queue().queue_url(&*url).send().await.unwrap();
    let error = queue.receive().await.unwrap_err();
    assert_eq!(error.kind(), QueueErrorKind::QueueDoesNotExist);
    assert_eq!(error.operation(), Operation::ReceiveMessage);
    assert_eq!(calls.count("GetQueueUrl"), 1);

    // It comes back: the name is resolved again, once.
    client
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .unwrap();
    calls.clear();
    assert!(queue.receive().await.unwrap().is_empty());
    assert!(queue.receive().await.unwrap().is_empty());
    assert_eq!(calls.count("GetQueueUrl"), 1);
    assert_eq!(calls.count("ReceiveMessage"), 2);
}

#[tokio::test]
async fn many_messages_drain_over_several_receives_and_batched_deletes() {
    let moto = common::moto();
    let (client, calls) = common::client(moto).await;
    let name = common::create_queue(&client, "many").await;
    let queue = Queue::new(client.clone(), name.clone()).with_wait_time(WAIT);
    let url = queue.url().await.unwrap();

    const COUNT: usize = 25;
    let bodies: Vec<String> = (0..COUNT)
        .map(|i| spot_interruption(&format!("i-{i:017x}")))
        .collect();
    for (chunk_index, chunk) in bodies.chunks(10).enumerate() {
        let entries = chunk.iter().enumerate().map(|(i, body)| {
            aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                .id(format!("{chunk_index}-{i}"))
                .message_body(body)
                .build()
                .unwrap()
        });
        let output = client
            .send_message_batch()
            .queue_url(&*url)
            .set_entries(Some(entries.collect()))
            .send()
            .await
            .unwrap();
        assert!(output.failed.is_empty(), "{:?}", output.failed);
    }

    let (received, receives) = receive_all(&queue, COUNT).await;
    assert!(
        receives >= COUNT.div_ceil(MAX_MESSAGES as usize),
        "{receives} receives"
    );
    let instances: HashSet<String> = received
        .iter()
        .map(|r| {
            r.parsed
                .known()
                .expect("a spot interruption")
                .instance_ids()[0]
                .to_string()
        })
        .collect();
    assert_eq!(instances.len(), COUNT);

    calls.clear();
    let outcome = queue.delete(&received).await.unwrap();
    assert_eq!(outcome.deleted, COUNT);
    assert!(outcome.failed.is_empty(), "{:?}", outcome.failed);
    assert_eq!(
        calls.count("DeleteMessageBatch"),
        COUNT.div_ceil(DELETE_BATCH_SIZE)
    );
    assert_eq!(common::messages_in(&client, &name).await, 0);

    // Deleting them again: moto accepts a deleted message's handle; a
    // handle it never gave out fails alone, and is reported by message ID.
    let bogus = Received {
        message_id: "not-a-message".to_owned(),
        receipt_handle: "not-a-receipt-handle".to_owned(),
        body_len: 0,
        sent_at: None,
        parsed: interruption::parse(""),
    };
    let outcome = queue.delete(&[bogus]).await.unwrap();
    assert_eq!(outcome.deleted, 0);
    assert_eq!(outcome.failed.len(), 1);
    assert_eq!(outcome.failed[0].message_id, "not-a-message");
    assert_eq!(outcome.failed[0].code, "ReceiptHandleIsInvalid");
    assert!(outcome.failed[0].sender_fault);
}
