//! The queue: its URL, the long poll, and batched deletes.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName};
use interruption::Parsed;
use tokio::sync::Mutex;

use crate::error::{Operation, QueueError, QueueErrorKind};

/// Messages asked for by one receive: SQS's maximum, as Karpenter.
pub const MAX_MESSAGES: i32 = 10;
/// Entries in one `DeleteMessageBatch` call: SQS's maximum.
pub const DELETE_BATCH_SIZE: usize = 10;
/// How long a receive waits for messages: SQS's maximum long poll, as
/// Karpenter.
pub const DEFAULT_WAIT_TIME: Duration = Duration::from_secs(20);
/// How long received messages stay hidden from other receives: as
/// Karpenter. A message that is not deleted within it is delivered again.
pub const VISIBILITY_TIMEOUT: Duration = Duration::from_secs(20);

/// The interruption queue, named as in `--interruption-queue`.
///
/// The name is resolved to the queue URL with `GetQueueUrl` on first use,
/// not at construction, so that a queue that is missing or unreachable at
/// start-up costs a failed call rather than a failed start. The URL is
/// cached; a "does not exist" answer to any call drops it, so the name is
/// resolved again on the next call (the queue may have been re-created).
///
/// The client should allow more time per attempt than the wait time of a
/// receive (20 s by default), or every empty long poll times out.
#[derive(Debug)]
pub struct Queue {
    client: Client,
    name: String,
    wait_time_seconds: i32,
    url: Mutex<Option<Arc<str>>>,
}

/// One received message.
#[derive(Debug)]
pub struct Received {
    /// The SQS message ID.
    pub message_id: String,
    /// The receipt handle, which deletes this delivery of the message.
    pub receipt_handle: String,
    /// Length of the body in bytes, for logs (the body itself is not kept).
    pub body_len: usize,
    /// When SQS received the message (its `SentTimestamp`), if it said.
    pub sent_at: Option<SystemTime>,
    /// The body, read by [`interruption::parse`].
    pub parsed: Parsed,
}

/// What a delete did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOutcome {
    /// Messages deleted.
    pub deleted: usize,
    /// Messages SQS did not delete, with why.
    pub failed: Vec<FailedDelete>,
}

/// A message that SQS did not delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedDelete {
    /// The SQS message ID.
    pub message_id: String,
    /// The AWS error code (e.g. `ReceiptHandleIsInvalid`).
    pub code: String,
    /// The error message, if any.
    pub message: Option<String>,
    /// Whether SQS blames the request rather than itself.
    pub sender_fault: bool,
}

impl Queue {
    /// The queue named `name` (a name, not a URL), through `client`.
    pub fn new(client: Client, name: impl Into<String>) -> Self {
        Self {
            client,
            name: name.into(),
            wait_time_seconds: seconds(DEFAULT_WAIT_TIME),
            url: Mutex::new(None),
        }
    }

    /// Sets how long a receive waits for messages, in whole seconds from 0
    /// (a short poll) to 20 (the default and SQS's maximum); tests shorten
    /// it.
    pub fn with_wait_time(mut self, wait: Duration) -> Self {
        self.wait_time_seconds = seconds(wait.min(DEFAULT_WAIT_TIME));
        self
    }

    /// The queue name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The queue URL: the cached one, or resolved now with `GetQueueUrl`.
    pub async fn url(&self) -> Result<Arc<str>, QueueError> {
        let mut cached = self.url.lock().await;
        if let Some(url) = cached.as_ref() {
            return Ok(Arc::clone(url));
        }
        let output = self
            .client
            .get_queue_url()
            .queue_name(&self.name)
            .send()
            .await
            .map_err(|error| QueueError::from_sdk(Operation::GetQueueUrl, &self.name, error))?;
        let Some(url) = output.queue_url else {
            return Err(QueueError::invalid_response(
                Operation::GetQueueUrl,
                &self.name,
                "no queue URL in the response",
            ));
        };
        tracing::debug!(queue = %self.name, %url, "resolved the interruption queue URL");
        let url: Arc<str> = url.into();
        *cached = Some(Arc::clone(&url));
        Ok(url)
    }

    /// One long poll: up to [`MAX_MESSAGES`] messages, waiting up to the
    /// wait time for the first, each hidden from other receives for
    /// [`VISIBILITY_TIMEOUT`] and its body parsed. An empty list when none
    /// came.
    ///
    /// A message without a receipt handle, which SQS never sends, is left
    /// out (it could not be deleted), with a warning.
    pub async fn receive(&self) -> Result<Vec<Received>, QueueError> {
        let url = self.url().await?;
        let result = self
            .client
            .receive_message()
            .queue_url(&*url)
            .max_number_of_messages(MAX_MESSAGES)
            .visibility_timeout(seconds(VISIBILITY_TIMEOUT))
            .wait_time_seconds(self.wait_time_seconds)
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .send()
            .await;
        let output = match result {
            Ok(output) => output,
            Err(error) => {
                return Err(self.failed(Operation::ReceiveMessage, &url, error).await);
            }
        };
        Ok(output
            .messages
            .unwrap_or_default()
            .into_iter()
            .filter_map(|message| self.received(message))
            .collect())
    }

    /// Deletes the messages, [`DELETE_BATCH_SIZE`] per `DeleteMessageBatch`
    /// call, and reports those SQS did not delete.
    ///
    /// A call that fails as a whole ends the delete with its error; the
    /// messages of earlier batches are deleted, the others are delivered
    /// again once their visibility timeout expires. An empty slice makes
    /// no call.
    pub async fn delete(&self, received: &[Received]) -> Result<DeleteOutcome, QueueError> {
        let mut outcome = DeleteOutcome::default();
        if received.is_empty() {
            return Ok(outcome);
        }
        let url = self.url().await?;
        for batch in received.chunks(DELETE_BATCH_SIZE) {
            // Entry IDs need only be unique within a call: the index.
            let mut entries = Vec::with_capacity(batch.len());
            for (index, message) in batch.iter().enumerate() {
                let entry = DeleteMessageBatchRequestEntry::builder()
                    .id(index.to_string())
                    .receipt_handle(&message.receipt_handle)
                    .build()
                    .map_err(|error| {
                        QueueError::build_failure(Operation::DeleteMessageBatch, &self.name, error)
                    })?;
                entries.push(entry);
            }
            let result = self
                .client
                .delete_message_batch()
                .queue_url(&*url)
                .set_entries(Some(entries))
                .send()
                .await;
            let output = match result {
                Ok(output) => output,
                Err(error) => {
                    return Err(self
                        .failed(Operation::DeleteMessageBatch, &url, error)
                        .await);
                }
            };
            outcome.deleted += output.successful.len();
            outcome
                .failed
                .extend(output.failed.into_iter().map(|entry| {
                    FailedDelete {
                        // The entry ID is the message's index in the batch.
                        message_id: entry
                            .id
                            .parse::<usize>()
                            .ok()
                            .and_then(|index| batch.get(index))
                            .map_or_else(|| entry.id.clone(), |m| m.message_id.clone()),
                        code: entry.code,
                        message: entry.message,
                        sender_fault: entry.sender_fault,
                    }
                }));
        }
        Ok(outcome)
    }

    /// The error of a call made with `url`; a "does not exist" answer drops
    /// the cached URL, unless it was already replaced.
    async fn failed<E>(
        &self,
        operation: Operation,
        url: &Arc<str>,
        error: aws_sdk_sqs::error::SdkError<E>,
    ) -> QueueError
    where
        E: aws_sdk_sqs::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let error = QueueError::from_sdk(operation, &self.name, error);
        if error.kind() == QueueErrorKind::QueueDoesNotExist {
            let mut cached = self.url.lock().await;
            if cached
                .as_ref()
                .is_some_and(|cached| Arc::ptr_eq(cached, url))
            {
                *cached = None;
            }
        }
        error
    }

    /// A received message, or `None` without a receipt handle.
    fn received(&self, message: Message) -> Option<Received> {
        let message_id = message.message_id.unwrap_or_default();
        let Some(receipt_handle) = message.receipt_handle else {
            tracing::warn!(
                queue = %self.name,
                %message_id,
                "skipping a message without a receipt handle"
            );
            return None;
        };
        let sent_at = message
            .attributes
            .as_ref()
            .and_then(|attributes| attributes.get(&MessageSystemAttributeName::SentTimestamp))
            .and_then(|millis| millis.parse::<u64>().ok())
            .map(|millis| UNIX_EPOCH + Duration::from_millis(millis));
        let body = message.body.unwrap_or_default();
        Some(Received {
            message_id,
            receipt_handle,
            body_len: body.len(),
            sent_at,
            parsed: interruption::parse(&body),
        })
    }
}

/// Whole seconds, as SQS takes them.
fn seconds(duration: Duration) -> i32 {
    i32::try_from(duration.as_secs()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::{Queue, Received};
    use crate::QueueError;

    fn is_send<T: Send>(_: &T) {}
    fn is_send_sync<T: Send + Sync>() {}

    /// Compiles only if a queue can be shared between tasks and polled from
    /// a spawned one; never called.
    #[allow(dead_code)]
    fn futures_are_send(queue: &Queue, received: &[Received]) {
        is_send(&queue.url());
        is_send(&queue.receive());
        is_send(&queue.delete(received));
    }

    #[test]
    fn the_types_cross_threads() {
        is_send_sync::<Queue>();
        is_send_sync::<Received>();
        is_send_sync::<QueueError>();
    }
}
