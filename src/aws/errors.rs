//! One error type for the AWS calls of the EC2NodeClass providers, sorted by
//! what the caller should do about it: wait (throttling, server faults,
//! timeouts — the SDK has already retried these with backoff) or report
//! (anything else: missing permissions, bad parameters).

use aws_sdk_ec2::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

/// Error codes AWS services use for throttling (the SDK's own list).
const THROTTLING_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
];

/// Error codes of server-side faults that pass.
const SERVER_FAULT_CODES: &[&str] = &[
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "RequestTimeout",
    "RequestTimeoutException",
];

/// Whether `code` is one of the codes AWS services throttle with, the
/// codes the SDK's standard retry strategy backs off from as throttling.
pub fn is_throttling_code(code: &str) -> bool {
    THROTTLING_CODES.contains(&code)
}

/// Whether an AWS failure is worth waiting out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The service throttled the caller (after the SDK's retries).
    Throttled,
    /// A server fault, timeout or connection failure (after the SDK's retries).
    Transient,
    /// Anything else: the request or the caller's permissions are at fault.
    Permanent,
}

/// A failed AWS call, with the service's error code when it sent one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{operation}: {message}")]
pub struct AwsError {
    /// The API call, e.g. `ec2:DescribeSubnets`.
    pub operation: &'static str,
    /// The service's error code (`UnauthorizedOperation`, `NoSuchEntity`, …).
    pub code: Option<String>,
    /// The service's message, or the SDK's description of the failure.
    pub message: String,
    /// Whether waiting may help.
    pub kind: ErrorKind,
}

impl AwsError {
    /// Classifies an SDK error of `operation`.
    pub fn from_sdk<E>(operation: &'static str, error: &SdkError<E>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let code = error.code().map(str::to_string);
        let status = error.raw_response().map(|r| r.status().as_u16());
        let connection_trouble = matches!(
            error,
            SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_)
        );
        let kind = kind_of(code.as_deref(), status, connection_trouble);
        let message = match error.message() {
            Some(message) => match &code {
                Some(code) => format!("{code}: {message}"),
                None => message.to_string(),
            },
            None => DisplayErrorContext(error).to_string(),
        };
        AwsError {
            operation,
            code,
            message,
            kind,
        }
    }

    /// Whether waiting may help: throttling or a transient fault.
    pub fn is_transient(&self) -> bool {
        self.kind != ErrorKind::Permanent
    }

    /// What the service said, without the operation: the source of an
    /// error that names the operation itself.
    pub fn into_failure(self) -> ServiceFailure {
        ServiceFailure {
            code: self.code,
            message: self.message,
            kind: self.kind,
        }
    }

    /// Whether the service answered with `code`.
    pub fn has_code(&self, code: &str) -> bool {
        self.code.as_deref() == Some(code)
    }
}

/// A failed call's error code and message as the service sent them
/// (`RequestLimitExceeded: Request limit exceeded.`), read with the SDK's
/// `ProvideErrorMetadata`, so a log line or condition that shows the error
/// names the code; the raw SDK error shows only "service error".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ServiceFailure {
    /// The service's error code, when it sent one.
    pub code: Option<String>,
    /// `code: message`, or the SDK's description of the failure.
    pub message: String,
    /// Whether waiting may help.
    pub kind: ErrorKind,
}

impl ServiceFailure {
    /// Reads an SDK error of `operation`.
    pub fn from_sdk<E>(operation: &'static str, error: &SdkError<E>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        AwsError::from_sdk(operation, error).into_failure()
    }
}

/// The kind of a failure from its error code, HTTP status, and whether no
/// well-formed answer arrived at all.
fn kind_of(code: Option<&str>, status: Option<u16>, connection_trouble: bool) -> ErrorKind {
    if code.is_some_and(|c| THROTTLING_CODES.contains(&c)) || status == Some(429) {
        ErrorKind::Throttled
    } else if code.is_some_and(|c| SERVER_FAULT_CODES.contains(&c))
        || status.is_some_and(|s| s >= 500)
        || connection_trouble
    {
        ErrorKind::Transient
    } else {
        ErrorKind::Permanent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_and_faults_are_transient_and_the_rest_is_not() {
        assert_eq!(
            kind_of(Some("RequestLimitExceeded"), Some(503), false),
            ErrorKind::Throttled
        );
        assert_eq!(
            kind_of(Some("Throttling"), Some(400), false),
            ErrorKind::Throttled
        );
        assert_eq!(kind_of(None, Some(429), false), ErrorKind::Throttled);
        assert_eq!(
            kind_of(Some("InternalError"), Some(500), false),
            ErrorKind::Transient
        );
        assert_eq!(kind_of(None, Some(502), false), ErrorKind::Transient);
        assert_eq!(kind_of(None, None, true), ErrorKind::Transient);
        assert_eq!(
            kind_of(Some("UnauthorizedOperation"), Some(403), false),
            ErrorKind::Permanent
        );
        assert_eq!(
            kind_of(Some("NoSuchEntity"), Some(404), false),
            ErrorKind::Permanent
        );
    }
}
