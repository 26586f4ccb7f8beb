//! The SQS side of the interruption queue, independent of Kubernetes.
//!
//! As with Karpenter, the controller can be given an SQS queue by name
//! (`--interruption-queue`) into which EventBridge rules deliver the EC2 and
//! AWS Health events that announce the loss of an instance. This crate does
//! the queue's I/O: it resolves the name to the queue URL with
//! `GetQueueUrl`, long-polls it with `ReceiveMessage`, parses each body with
//! [`interruption::parse`], and deletes handled messages with
//! `DeleteMessageBatch`.
//!
//! It exists so that an outage of the queue costs nothing. Karpenter once
//! panicked when SQS was unavailable (fixed in v1.4); here every failure is
//! a typed [`QueueError`] that says whether the queue does not exist, access
//! is denied, the calls are throttled, or SQS answered otherwise or not at
//! all, with the AWS error code where there is one. [`Backoff`] spaces the
//! retries (1 s doubling up to 1 min, reset on success) and tells when an
//! outage starts and ends, so that it is logged once rather than per call.
//!
//! The crate returns data and makes no decision: what to do with a message,
//! when to delete it, and what to log or count are the caller's.
//!
//! ```no_run
//! use interruption_queue::{Backoff, Queue};
//!
//! async fn poll(client: aws_sdk_sqs::Client) {
//!     let queue = Queue::new(client, "my-cluster-interruptions");
//!     let mut backoff = Backoff::default();
//!     loop {
//!         match queue.receive().await {
//!             Ok(received) => {
//!                 if let Some(failures) = backoff.success() {
//!                     tracing::info!(failures, "interruption queue is available again");
//!                 }
//!                 // Handle `received`, then delete what was handled.
//!                 if let Err(error) = queue.delete(&received).await {
//!                     tracing::warn!(%error, "deleting interruption messages");
//!                 }
//!             }
//!             Err(error) => {
//!                 let failure = backoff.failure();
//!                 if failure.first {
//!                     tracing::error!(%error, code = error.label(), "interruption queue is unavailable");
//!                 }
//!                 tokio::time::sleep(failure.delay).await;
//!             }
//!         }
//!     }
//! }
//! ```

#![warn(missing_docs)]

mod backoff;
mod error;
mod queue;

pub use backoff::{Backoff, Failure};
pub use error::{Operation, QueueError, QueueErrorKind};
pub use queue::{
    DEFAULT_WAIT_TIME, DELETE_BATCH_SIZE, DeleteOutcome, FailedDelete, MAX_MESSAGES, Queue,
    Received, VISIBILITY_TIMEOUT,
};
