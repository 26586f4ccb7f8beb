//! The typed error of a queue call: what failed, in which class, with the
//! AWS error code, so that a caller can log an outage once and count its
//! errors by code.

use std::fmt;

use aws_sdk_sqs::error::{BoxError, BuildError, ProvideErrorMetadata, SdkError};

/// Error codes saying that the queue does not exist: the query-compatible
/// code SQS sends (in the `x-amzn-query-error` header, which the SDK reads
/// as the code) and the JSON protocol's shape name.
const QUEUE_DOES_NOT_EXIST: &[&str] = &[
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
];

/// Error codes saying that the caller's identity or permissions were refused:
/// IAM (`sqs:*` actions), KMS (the key of an encrypted queue) and rejected
/// credentials.
const ACCESS_DENIED: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "KmsAccessDenied",
    "KMS.AccessDeniedException",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "ExpiredToken",
    "ExpiredTokenException",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "MissingAuthenticationToken",
];

/// Error codes saying that a request rate was exceeded, SQS's and KMS's.
const THROTTLED: &[&str] = &[
    "RequestThrottled",
    "ThrottlingException",
    "Throttling",
    "KmsThrottled",
    "KMS.ThrottlingException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
];

/// The SQS call that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `GetQueueUrl`: resolving the queue name to its URL.
    GetQueueUrl,
    /// `ReceiveMessage`: the long poll.
    ReceiveMessage,
    /// `DeleteMessageBatch`: deleting handled messages.
    DeleteMessageBatch,
}

impl Operation {
    /// The SQS API name of the operation, usable as a metric label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::GetQueueUrl => "GetQueueUrl",
            Self::ReceiveMessage => "ReceiveMessage",
            Self::DeleteMessageBatch => "DeleteMessageBatch",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The class of a [`QueueError`]: a closed set, usable as a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueErrorKind {
    /// No queue of that name (or URL) exists in the account and region. The
    /// cached URL is dropped, so the next call resolves the name again.
    QueueDoesNotExist,
    /// The caller's identity or permissions were refused: IAM, the KMS key
    /// of an encrypted queue, or rejected credentials (HTTP 403 included).
    AccessDenied,
    /// A request rate was exceeded, after the SDK client's own retries
    /// (HTTP 429 included).
    Throttled,
    /// Any other error response from SQS, or a response missing what the
    /// call needs.
    Service,
    /// No response was read from SQS: the request could not be built or
    /// sent (credentials, DNS, connection), it timed out, or the response
    /// could not be read.
    Transport,
}

impl QueueErrorKind {
    /// The stable label of the class.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::QueueDoesNotExist => "queue_does_not_exist",
            Self::AccessDenied => "access_denied",
            Self::Throttled => "throttled",
            Self::Service => "service",
            Self::Transport => "transport",
        }
    }

    /// The class of an error response, from its code and HTTP status.
    fn of_response(code: Option<&str>, status: u16) -> Self {
        match code {
            Some(code) if QUEUE_DOES_NOT_EXIST.contains(&code) => Self::QueueDoesNotExist,
            Some(code) if ACCESS_DENIED.contains(&code) => Self::AccessDenied,
            Some(code) if THROTTLED.contains(&code) => Self::Throttled,
            _ if status == 403 => Self::AccessDenied,
            _ if status == 429 => Self::Throttled,
            _ => Self::Service,
        }
    }
}

impl fmt::Display for QueueErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::QueueDoesNotExist => "the queue does not exist",
            Self::AccessDenied => "access denied",
            Self::Throttled => "throttled",
            Self::Service => "SQS returned an error",
            Self::Transport => "SQS could not be reached",
        })
    }
}

/// A failed queue call.
///
/// Never a panic: every failure of the SDK client, including a missing
/// queue and an unreachable endpoint, ends up here. [`kind`](Self::kind)
/// tells what a caller may want to react to; [`label`](Self::label) is the
/// AWS error code where there is one, for counting.
#[derive(Debug, thiserror::Error)]
#[error(
    "{operation} for queue {queue:?}: {kind}{details}",
    details = Details(.code.as_deref(), .message.as_deref())
)]
pub struct QueueError {
    kind: QueueErrorKind,
    operation: Operation,
    queue: String,
    code: Option<String>,
    message: Option<String>,
    #[source]
    source: Option<BoxError>,
}

impl QueueError {
    /// The class of the error.
    pub fn kind(&self) -> QueueErrorKind {
        self.kind
    }

    /// The SQS call that failed.
    pub fn operation(&self) -> Operation {
        self.operation
    }

    /// The queue name.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The AWS error code, when SQS answered with one (e.g.
    /// `AWS.SimpleQueueService.NonExistentQueue`, `AccessDenied`,
    /// `RequestThrottled`).
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// The error message SQS sent, or a short reason for errors without a
    /// response (e.g. `timeout`).
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// A metric label: the AWS error code, or the class's label when there
    /// is no code.
    pub fn label(&self) -> &str {
        self.code().unwrap_or(self.kind.as_str())
    }

    /// The error of an SDK call.
    pub(crate) fn from_sdk<E>(operation: Operation, queue: &str, error: SdkError<E>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let code = error.code().map(str::to_owned);
        let (kind, message) = match &error {
            SdkError::ServiceError(context) => (
                QueueErrorKind::of_response(code.as_deref(), context.raw().status().as_u16()),
                error.message().map(str::to_owned),
            ),
            SdkError::TimeoutError(_) => (QueueErrorKind::Transport, Some("timeout".to_owned())),
            SdkError::DispatchFailure(failure) => {
                let reason = if failure.is_timeout() {
                    "timeout"
                } else if failure.is_io() {
                    "connection failure"
                } else {
                    "dispatch failure"
                };
                (QueueErrorKind::Transport, Some(reason.to_owned()))
            }
            SdkError::ResponseError(_) => (
                QueueErrorKind::Transport,
                Some("unreadable response".to_owned()),
            ),
            SdkError::ConstructionFailure(_) => (
                QueueErrorKind::Transport,
                Some("request could not be built".to_owned()),
            ),
            _ => (QueueErrorKind::Transport, None),
        };
        Self {
            kind,
            operation,
            queue: queue.to_owned(),
            code,
            message,
            source: Some(Box::new(error)),
        }
    }

    /// A request that could not be built (a required field missing).
    pub(crate) fn build_failure(operation: Operation, queue: &str, error: BuildError) -> Self {
        Self {
            kind: QueueErrorKind::Transport,
            operation,
            queue: queue.to_owned(),
            code: None,
            message: Some("request could not be built".to_owned()),
            source: Some(Box::new(error)),
        }
    }

    /// A response that lacks what the call needs.
    pub(crate) fn invalid_response(operation: Operation, queue: &str, message: &str) -> Self {
        Self {
            kind: QueueErrorKind::Service,
            operation,
            queue: queue.to_owned(),
            code: None,
            message: Some(message.to_owned()),
            source: None,
        }
    }
}

/// ` (code: message)`, or what of it there is.
struct Details<'a>(Option<&'a str>, Option<&'a str>);

impl fmt::Display for Details<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0, self.1) {
            (Some(code), Some(message)) => write!(f, " ({code}: {message})"),
            (Some(only), None) | (None, Some(only)) => write!(f, " ({only})"),
            (None, None) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::QueueErrorKind;

    #[test]
    fn responses_are_classed_by_code_then_status() {
        let of = QueueErrorKind::of_response;
        assert_eq!(
            of(Some("AWS.SimpleQueueService.NonExistentQueue"), 400),
            QueueErrorKind::QueueDoesNotExist
        );
        assert_eq!(
            of(Some("QueueDoesNotExist"), 400),
            QueueErrorKind::QueueDoesNotExist
        );
        assert_eq!(of(Some("AccessDenied"), 400), QueueErrorKind::AccessDenied);
        assert_eq!(
            of(Some("KmsAccessDenied"), 400),
            QueueErrorKind::AccessDenied
        );
        assert_eq!(of(None, 403), QueueErrorKind::AccessDenied);
        assert_eq!(of(Some("RequestThrottled"), 400), QueueErrorKind::Throttled);
        assert_eq!(of(Some("Whatever"), 429), QueueErrorKind::Throttled);
        assert_eq!(of(Some("InvalidAddress"), 400), QueueErrorKind::Service);
        assert_eq!(of(None, 500), QueueErrorKind::Service);
    }
}
