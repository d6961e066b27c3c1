//! The crate's error type and how each error crosses the wire: every variant documents the
//! response code the host sees. Messages are sentences for an operator, never with a secret.

use crate::aws::{AwsError, NoRegion};
use crate::cluster::base::error::EngineError;
pub use crate::cluster::base::gocd::HostCallError;
use crate::protocol::{MessageId, Response};

/// `Result` with this crate's [`PluginError`].
pub type Result<T, E = PluginError> = std::result::Result<T, E>;

/// Anything a request handler can fail with: each layer's own error, joined here, so what
/// the metrics label and the status report see is what happened (a throttle stays a throttle).
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The body is not of the shape its request needs. Host sees 400.
    #[error("{0}")]
    BadRequest(String),
    /// The request name is not one we answer. Host sees 404.
    #[error("unknown request {0:?}: this plugin answers the elastic-agent 5.0 requests only")]
    UnknownRequest(String),
    /// A call back to the GoCD server failed. Host sees 500.
    #[error(transparent)]
    Host(#[from] HostCallError),
    /// AWS refused or failed a call; the message names the operation. Host sees 500.
    #[error(transparent)]
    Aws(#[from] AwsError),
    /// No region for a cluster profile. Host sees 500.
    #[error(transparent)]
    NoRegion(#[from] NoRegion),
    /// A profile is not usable as it stands (what to fix is in the message). Host sees 500.
    #[error("{0}")]
    Config(String),
    /// A bug or an impossible state. Host sees 500.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<EngineError> for PluginError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Aws(e) => PluginError::Aws(e),
            EngineError::Gocd(e) => PluginError::Host(e),
            EngineError::Refused(refusal) => PluginError::Config(refusal.to_string()),
            EngineError::Config(message) => PluginError::Config(message),
        }
    }
}

impl PluginError {
    /// The GoCD response code for this error.
    pub fn code(&self) -> u16 {
        match self {
            PluginError::BadRequest(_) => 400,
            PluginError::UnknownRequest(_) => 404,
            PluginError::Host(_)
            | PluginError::Aws(_)
            | PluginError::NoRegion(_)
            | PluginError::Config(_)
            | PluginError::Internal(_) => 500,
        }
    }

    /// A short label for counting failures by kind.
    pub fn metric_label(&self) -> &'static str {
        match self {
            PluginError::BadRequest(_) => "bad_request",
            PluginError::UnknownRequest(_) => "unknown_request",
            PluginError::Host(_) => "host_call",
            PluginError::Aws(e) if e.throttled() => "aws_throttled",
            PluginError::Aws(e) if e.transient() || e.failure == crate::aws::Failure::NoCapacity => "aws_transient",
            PluginError::Aws(_) => "aws",
            PluginError::NoRegion(_) | PluginError::Config(_) => "config",
            PluginError::Internal(_) => "internal",
        }
    }

    /// The wire response for this error: `{"message": ...}` with the cause chain.
    pub fn to_response(&self, id: Option<MessageId>) -> Response {
        let mut message = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            message.push_str(&format!(" (caused by: {cause})"));
            source = cause.source();
        }
        Response::error(id, self.code(), &message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_messages() {
        let e = PluginError::UnknownRequest("cd.go.elastic-agent.fly".into());
        let r = e.to_response(Some(MessageId::Int(1)));
        assert_eq!(r.code, 404);
        assert_eq!(
            r.message(),
            Some(
                "unknown request \"cd.go.elastic-agent.fly\": this plugin answers the elastic-agent 5.0 requests only"
            )
        );
        let e = PluginError::from(HostCallError::Timeout { call: "go.processor.server-info.get", seconds: 30 });
        assert_eq!(e.code(), 500);
        assert_eq!(e.metric_label(), "host_call");
        assert_eq!(e.to_string(), "the GoCD server did not answer go.processor.server-info.get within 30 s");
    }

    #[test]
    fn a_throttle_stays_a_throttle_up_to_the_label() {
        let throttled = AwsError {
            operation: "RunTask",
            code: Some("ThrottlingException".into()),
            detail: "ThrottlingException: Rate exceeded".into(),
            failure: crate::aws::Failure::Throttled,
        };
        let e = PluginError::from(EngineError::from(throttled.clone()));
        assert_eq!(e.metric_label(), "aws_throttled");
        assert!(matches!(&e, PluginError::Aws(inner) if *inner == throttled));
        assert_eq!(e.to_response(None).message(), Some("AWS RunTask failed: ThrottlingException: Rate exceeded"));
    }
}
