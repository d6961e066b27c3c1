//! The engine's port to GoCD: what a cluster profile's engine asks of the GoCD server — a line
//! in a job's console, disabling and deleting agents, the agent list, the server's identity,
//! server-health messages — and how such a call fails. The server layer implements it over
//! stdio (`server::host::HostClient`); engine tests implement it in memory. Nothing under
//! `cluster/` knows the wire or the transport.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;

use crate::ids::AgentId;
use crate::protocol::host_calls::{HealthMessage, ServerInfo};
use crate::protocol::types::{AgentMetadata, JobIdentifier};

/// What a call to GoCD returns.
pub type GocdFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, HostCallError>> + Send + 'a>>;

/// The calls the engine makes to GoCD.
pub trait Gocd: Send + Sync + Debug {
    /// Appends `text` to the job's console.
    fn console_log<'a>(&'a self, job: &'a JobIdentifier, text: String) -> GocdFuture<'a, ()>;
    /// Disables agents (GoCD assigns them no more work).
    fn disable_agents<'a>(&'a self, agent_ids: &'a [AgentId]) -> GocdFuture<'a, ()>;
    /// Deletes disabled agents.
    fn delete_agents<'a>(&'a self, agent_ids: &'a [AgentId]) -> GocdFuture<'a, ()>;
    /// Every agent GoCD has registered for this plugin.
    fn list_agents(&self) -> GocdFuture<'_, Vec<AgentMetadata>>;
    /// GoCD's server id and URLs.
    fn server_info(&self) -> GocdFuture<'_, ServerInfo>;
    /// Replaces this plugin's server-health messages.
    fn set_health_messages<'a>(&'a self, messages: &'a [HealthMessage]) -> GocdFuture<'a, ()>;
}

/// A line for a job's console, marked as the plugin's.
pub fn console_line(text: impl std::fmt::Display) -> String {
    format!("[ecs-elastic-agent] {text}")
}

/// A call to GoCD that did not succeed.
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
