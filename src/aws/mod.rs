//! AWS access, the port: one set of SDK clients per account (credentials, role, external id,
//! region), built once and shared by every cluster profile of that account, and the one place
//! that turns SDK errors into typed failures ([`Failure`]) and sentences for operators, and the
//! statuses ECS and EC2 report into types ([`status`]).

pub mod accounts;
pub mod budget;
pub mod calls;
pub mod capacity_providers;
pub mod cloudformation;
pub mod doctor;
pub mod doctor_identity;
pub mod doctor_reads;
pub mod doctor_routes;
pub mod ec2;
pub mod ec2_types;
pub mod ecr;
pub mod ecs;
#[cfg(test)]
pub mod fake_aws;
#[cfg(test)]
pub mod in_process;
pub mod leftovers;
pub mod network;
pub mod outcome;
pub mod pricing;
pub mod sqs;
pub mod status;
pub mod stop_cause;
pub mod tags;
pub mod task_definition_parts;
pub mod task_definitions;
pub mod task_view;
#[cfg(test)]
pub mod verifier;

use aws_sdk_ecs::error::ProvideErrorMetadata;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_runtime_api::http::Response;

pub use accounts::{Accounts, AwsClients, RoleStats};
pub use calls::CallStats;
pub use outcome::Failure;

/// An AWS call that failed, described for an operator (never with a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("AWS {operation} failed: {detail}")]
pub struct AwsError {
    /// The API operation, e.g. `RunTask`.
    pub operation: &'static str,
    /// AWS's error code, when it sent one.
    pub code: Option<String>,
    /// Code, message and request id, or the transport failure: for people, never parsed.
    pub detail: String,
    /// What became of the call, classified once by [`outcome::classify`].
    pub failure: Failure,
}

impl AwsError {
    /// Describes an SDK error of `operation`.
    pub fn from_sdk<E>(operation: &'static str, err: &SdkError<E, Response>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let code = err.code().map(str::to_string);
        let (detail, failure) = match err {
            SdkError::ServiceError(service) => {
                let meta = service.err().meta();
                let message = meta.message().unwrap_or("no message");
                let mut detail = format!("{}: {message}", meta.code().unwrap_or("error"));
                if let Some(id) = aws_sdk_ecs::operation::RequestId::request_id(meta) {
                    detail.push_str(&format!(" (request id {id})"));
                }
                let status = service.raw().status().as_u16();
                (detail, outcome::classify(operation, meta.code(), message, Some(status)))
            }
            SdkError::TimeoutError(_) => ("the call timed out".to_string(), Failure::Transient),
            // Only I/O failures, timeouts and what the connector calls transient (a connection
            // closed before the answer came) are worth retrying here: a credentials failure (a
            // role that cannot be assumed) stays a failure until the profile changes.
            SdkError::DispatchFailure(f) => (
                format!("could not reach AWS: {}", innermost_cause(std::error::Error::source(err))),
                if f.is_io()
                    || f.is_timeout()
                    || f.as_other() == Some(aws_smithy_types::retry::ErrorKind::TransientError)
                {
                    Failure::Transient
                } else {
                    Failure::NotSent
                },
            ),
            SdkError::ResponseError(_) => (
                format!(
                    "AWS sent an answer that could not be read: {}",
                    innermost_cause(std::error::Error::source(err))
                ),
                Failure::Transient,
            ),
            other => (
                format!("the call could not be made: {}", innermost_cause(std::error::Error::source(other))),
                Failure::NotSent,
            ),
        };
        AwsError { operation, code, detail, failure }
    }

    /// [`AwsError::from_sdk`] for a call whose service error may arrive wrapped in a dispatch
    /// failure (credential and AssumeRole failures): its AWS error code and message are dug out
    /// of the cause chain, and classified.
    pub fn from_sdk_chain<E>(operation: &'static str, err: &SdkError<E, Response>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let mut e = AwsError::from_sdk(operation, err);
        if e.code.is_some() {
            return e;
        }
        let mut parts: Vec<String> = Vec::new();
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(s) = source {
            if let Some(meta) = s.downcast_ref::<aws_smithy_types::error::ErrorMetadata>() {
                e.code = meta.code().map(str::to_string);
                let message = meta.message().unwrap_or("no message");
                e.detail = format!("{}: {message}", meta.code().unwrap_or("error"));
                e.failure = outcome::classify(operation, meta.code(), message, None);
                return e;
            }
            let text = s.to_string();
            if !parts.iter().any(|p| p.contains(&text)) {
                parts.push(text);
            }
            source = s.source();
        }
        e.detail = parts.join(": ");
        e
    }

    /// An error found in an answer that AWS sent as a success (a lookup that found no subnet,
    /// a task definition without the container named): AWS's answer refuses it as it stands.
    pub fn in_answer(operation: &'static str, detail: impl Into<String>) -> Self {
        AwsError::new(operation, Failure::Refused, detail)
    }

    /// An error of `operation` the port classified itself (e.g. RunTask's `failures`).
    pub fn new(operation: &'static str, failure: Failure, detail: impl Into<String>) -> Self {
        AwsError { operation, code: None, detail: detail.into(), failure }
    }

    /// Whether sending it again after a backoff may succeed (throttling, 5xx, network).
    pub fn transient(&self) -> bool {
        self.failure.transient()
    }

    /// Whether AWS said we are calling too fast.
    pub fn throttled(&self) -> bool {
        self.failure == Failure::Throttled
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
