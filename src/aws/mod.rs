//! AWS access: one set of SDK clients per account (credentials, role, external id, region),
//! built once and shared by every cluster profile of that account, and the one place that turns
//! SDK errors into sentences for operators.

pub mod accounts;
pub mod budget;
pub mod calls;
pub mod network;

use std::fmt::Debug;

use aws_sdk_ecs::error::ProvideErrorMetadata;
use aws_smithy_runtime_api::client::result::SdkError;

pub use accounts::{Accounts, AwsClients, RoleStats};
pub use calls::CallStats;

/// An AWS call that failed, described for an operator (never with a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("AWS {operation} failed: {detail}")]
pub struct AwsError {
    /// The API operation, e.g. `RunTask`.
    pub operation: &'static str,
    /// AWS's error code, when it sent one.
    pub code: Option<String>,
    /// Code, message and request id, or the transport failure.
    pub detail: String,
    /// Whether trying again later may succeed (throttling, 5xx, network).
    pub transient: bool,
    /// Whether AWS said we are calling too fast.
    pub throttled: bool,
}

const THROTTLE_CODES: &[&str] = &[
    "ThrottlingException",
    "Throttling",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "RequestThrottled",
    "RequestThrottledException",
];

impl AwsError {
    /// Describes an SDK error of `operation`.
    pub fn from_sdk<E, R>(operation: &'static str, err: &SdkError<E, R>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: Debug,
    {
        let code = err.code().map(str::to_string);
        let throttled = code.as_deref().is_some_and(|c| THROTTLE_CODES.contains(&c));
        let (detail, transient) = match err {
            SdkError::ServiceError(service) => {
                let meta = service.err().meta();
                let mut detail =
                    format!("{}: {}", meta.code().unwrap_or("error"), meta.message().unwrap_or("no message"));
                if let Some(id) = aws_sdk_ecs::operation::RequestId::request_id(meta) {
                    detail.push_str(&format!(" (request id {id})"));
                }
                let status = service.raw();
                let status = format!("{status:?}");
                (detail, throttled || status.contains("StatusCode(5"))
            }
            SdkError::TimeoutError(_) => ("the call timed out".to_string(), true),
            // Only I/O failures, timeouts and what the connector calls transient (a connection
            // closed before the answer came) are worth retrying here: a credentials failure (a
            // role that cannot be assumed) stays a failure until the profile changes.
            SdkError::DispatchFailure(f) => (
                format!("could not reach AWS: {}", innermost_cause(std::error::Error::source(err))),
                f.is_io() || f.is_timeout() || f.as_other() == Some(aws_smithy_types::retry::ErrorKind::TransientError),
            ),
            SdkError::ResponseError(_) => (
                format!(
                    "AWS sent an answer that could not be read: {}",
                    innermost_cause(std::error::Error::source(err))
                ),
                true,
            ),
            other => {
                (format!("the call could not be made: {}", innermost_cause(std::error::Error::source(other))), false)
            }
        };
        AwsError { operation, code, detail, transient, throttled }
    }

    /// An error found in an answer that AWS sent as a success (e.g. RunTask `failures`).
    pub fn in_answer(operation: &'static str, detail: impl Into<String>) -> Self {
        AwsError { operation, code: None, detail: detail.into(), transient: false, throttled: false }
    }
}

/// The deepest cause of an error, as its own sentence: what people read (health, console,
/// reports, error answers) gets "connection refused", not the SDK's nested debug dump.
fn innermost_cause(err: Option<&(dyn std::error::Error + 'static)>) -> String {
    let Some(mut cause) = err else { return "no further detail".to_string() };
    while let Some(next) = cause.source() {
        cause = next;
    }
    let text = cause.to_string();
    // Some connector errors display as a Rust debug dump; keep their first plain words.
    let plain = text.split(['{', '(']).next().unwrap_or_default().trim().trim_end_matches(':').to_string();
    if plain.is_empty() {
        "no further detail".to_string()
    } else {
        plain
    }
}

/// A cluster profile that names no region, where the SDK's default region chain names none
/// either.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the cluster profile for cluster {cluster} sets no Region and the AWS default region chain names none: set Region"
)]
pub struct NoRegion {
    /// The profile's `ClusterName`.
    pub cluster: String,
}

#[cfg(test)]
mod tests {
    use super::innermost_cause;

    #[derive(Debug, thiserror::Error)]
    #[error("dispatch failure")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("io error: Connection refused (os error 111) {{ kind: ConnectionRefused }}")]
    struct Inner;

    #[test]
    fn people_read_the_deepest_cause_in_plain_words() {
        let outer = Outer(Inner);
        assert_eq!(innermost_cause(Some(&outer)), "io error: Connection refused");
        assert_eq!(innermost_cause(None), "no further detail");
    }
}
