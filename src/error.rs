//! The crate's error type and how each error crosses the wire: every variant documents the
//! response code the host sees. Messages are sentences for an operator, never with a secret.

use crate::protocol::{MessageId, Response};

/// `Result` with this crate's [`PluginError`].
pub type Result<T, E = PluginError> = std::result::Result<T, E>;

/// Anything a request handler can fail with.
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
    /// AWS refused or failed a call; the message names the operation and profile. Host sees 500.
    #[error("{0}")]
    Aws(String),
    /// A profile is not usable as it stands (what to fix is in the message). Host sees 500.
    #[error("{0}")]
    Config(String),
    /// A bug or an impossible state. Host sees 500.
    #[error("internal error: {0}")]
    Internal(String),
}

impl PluginError {
    /// The GoCD response code for this error.
    pub fn code(&self) -> u16 {
        match self {
            PluginError::BadRequest(_) => 400,
            PluginError::UnknownRequest(_) => 404,
            PluginError::Host(_) | PluginError::Aws(_) | PluginError::Config(_) | PluginError::Internal(_) => 500,
        }
    }

    /// A short label for counting failures by kind.
    pub fn metric_label(&self) -> &'static str {
        match self {
            PluginError::BadRequest(_) => "bad_request",
            PluginError::UnknownRequest(_) => "unknown_request",
            PluginError::Host(_) => "host_call",
            PluginError::Aws(_) => "aws",
            PluginError::Config(_) => "config",
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

/// A plugin→host call that did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostCallError {
    /// stdin closed (or the plugin is shutting down) before the host answered.
    #[error("the GoCD server closed the connection before answering {call}")]
    Disconnected {
        /// The callback name.
        call: &'static str,
    },
    /// No answer within the call timeout.
    #[error("the GoCD server did not answer {call} within {seconds} s")]
    Timeout {
        /// The callback name.
        call: &'static str,
        /// The timeout.
        seconds: u64,
    },
    /// The host answered with a code other than 200.
    #[error("the GoCD server answered {call} with code {code}: {message}")]
    Status {
        /// The callback name.
        call: &'static str,
        /// The code.
        code: u16,
        /// Its message, if any.
        message: String,
    },
    /// The answer's body is not of the shape the callback returns.
    #[error("the GoCD server's answer to {call} could not be read: {reason}")]
    BadAnswer {
        /// The callback name.
        call: &'static str,
        /// What was wrong.
        reason: String,
    },
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
}
