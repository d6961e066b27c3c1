//! The GoCD port of the engine tests (`cluster/tests/mod.rs`, the event queue's and guardrails'
//! tests): records what the engine told GoCD, lists what it is given.

use std::sync::PoisonError;

use serde_json::json;

use crate::cluster::base::gocd::{Gocd, GocdFuture, HostCallError};
use crate::cluster::base::locks::Mutex;
use crate::protocol::host_calls::{HealthMessage, ServerInfo};
use crate::protocol::types::{AgentMetadata, JobIdentifier};

/// The GoCD port of engine tests: records what the engine told GoCD, lists what it is given.
#[derive(Debug, Default)]
pub struct FakeGocd {
    /// Console lines, by job id.
    pub console: Mutex<Vec<(i64, String)>>,
    /// Agents disabled, in order.
    pub disabled: Mutex<Vec<String>>,
    /// Agents deleted, in order.
    pub deleted: Mutex<Vec<String>>,
    /// What list-agents answers.
    pub agents: Mutex<Vec<AgentMetadata>>,
}

impl FakeGocd {
    /// The console lines of one job.
    pub fn console_of(&self, job_id: i64) -> Vec<String> {
        let lines = self.console.lock().unwrap_or_else(PoisonError::into_inner);
        lines.iter().filter(|(id, _)| *id == job_id).map(|(_, l)| l.clone()).collect()
    }

    /// Agents deleted so far.
    pub fn deleted(&self) -> Vec<String> {
        self.deleted.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

fn ready<'a, T: Send + 'a>(value: T) -> GocdFuture<'a, T> {
    Box::pin(std::future::ready(Ok::<T, HostCallError>(value)))
}

impl Gocd for FakeGocd {
    fn console_log<'a>(&'a self, job: &'a JobIdentifier, text: String) -> GocdFuture<'a, ()> {
        self.console.lock().unwrap_or_else(PoisonError::into_inner).push((job.job_id, text));
        ready(())
    }

    fn disable_agents<'a>(&'a self, agent_ids: &'a [crate::ids::AgentId]) -> GocdFuture<'a, ()> {
        self.disabled.lock().unwrap_or_else(PoisonError::into_inner).extend(agent_ids.iter().map(ToString::to_string));
        ready(())
    }

    fn delete_agents<'a>(&'a self, agent_ids: &'a [crate::ids::AgentId]) -> GocdFuture<'a, ()> {
        self.deleted.lock().unwrap_or_else(PoisonError::into_inner).extend(agent_ids.iter().map(ToString::to_string));
        ready(())
    }

    fn list_agents(&self) -> GocdFuture<'_, Vec<AgentMetadata>> {
        ready(self.agents.lock().unwrap_or_else(PoisonError::into_inner).clone())
    }

    fn server_info(&self) -> GocdFuture<'_, ServerInfo> {
        let info = serde_json::from_value(json!({
            "server_id": "server-1",
            "site_url": "http://gocd.example:8153/go",
            "secure_site_url": "http://gocd.example:8153/go",
        }));
        Box::pin(std::future::ready(
            info.map_err(|e| HostCallError::BadAnswer { call: "go.processor.server-info.get", reason: e.to_string() }),
        ))
    }

    fn set_health_messages<'a>(&'a self, _messages: &'a [HealthMessage]) -> GocdFuture<'a, ()> {
        ready(())
    }
}
