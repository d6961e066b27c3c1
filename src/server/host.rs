//! `HostClient`: typed calls back to the GoCD server (`docs/protocol.md`, "Calls the plugin
//! makes"). Each call has a timeout, and an answer of the wrong shape is an error naming the call.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::connection::{CallFailure, Connection};
use crate::cluster::base::gocd::{Gocd, GocdFuture, HostCallError};
use crate::ids::AgentId;
use crate::protocol::host_calls::{
    AddServerHealthMessages, AgentRef, AppendConsoleLog, ConsoleLogLine, DeleteAgents, DisableAgents, GetServerInfo,
    HealthMessage, HostCall, ListAgents, ServerInfo,
};
use crate::protocol::types::{AgentMetadata, JobIdentifier};

/// How long a callback may take before it fails.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The plugin's handle on the GoCD server's callbacks.
#[derive(Debug, Clone)]
pub struct HostClient {
    connection: Arc<Connection>,
    timeout: Duration,
}

impl HostClient {
    /// A client over `connection`, each call bounded by `timeout`.
    pub fn new(connection: Arc<Connection>, timeout: Duration) -> Self {
        HostClient { connection, timeout }
    }

    /// Makes one typed call.
    ///
    /// # Errors
    /// [`HostCallError`] when the host closes, times out, answers non-200 or answers garbage.
    pub async fn call<C: HostCall>(&self, params: &C::Params) -> Result<C::Result, HostCallError> {
        let body = serde_json::to_value(params).map_err(|e| HostCallError::BadAnswer {
            call: C::NAME,
            reason: format!("could not encode the request: {e}"),
        })?;
        let response = self.connection.call(C::NAME, C::VERSION, body, self.timeout).await.map_err(|f| match f {
            CallFailure::Closed => HostCallError::Disconnected { call: C::NAME },
            CallFailure::TimedOut => HostCallError::Timeout { call: C::NAME, seconds: self.timeout.as_secs() },
        })?;
        if response.code != 200 {
            let message = match &response.body {
                Value::Object(o) => o.get("message").and_then(Value::as_str).unwrap_or_default().to_string(),
                Value::String(s) => s.clone(),
                _ => String::new(),
            };
            return Err(HostCallError::Status { call: C::NAME, code: response.code, message });
        }
        serde_json::from_value(response.body)
            .map_err(|e| HostCallError::BadAnswer { call: C::NAME, reason: e.to_string() })
    }

    /// All agents GoCD has registered for this plugin.
    ///
    /// # Errors
    /// As [`HostClient::call`].
    pub async fn list_agents(&self) -> Result<Vec<AgentMetadata>, HostCallError> {
        self.call::<ListAgents>(&()).await
    }

    /// Disables agents so they get no new work. No call is made for an empty list.
    ///
    /// # Errors
    /// As [`HostClient::call`].
    pub async fn disable_agents(&self, agent_ids: &[AgentId]) -> Result<(), HostCallError> {
        if agent_ids.is_empty() {
            return Ok(());
        }
        self.call::<DisableAgents>(&refs(agent_ids)).await.map(drop)
    }

    /// Deletes agents from GoCD. No call is made for an empty list.
    ///
    /// # Errors
    /// As [`HostClient::call`].
    pub async fn delete_agents(&self, agent_ids: &[AgentId]) -> Result<(), HostCallError> {
        if agent_ids.is_empty() {
            return Ok(());
        }
        self.call::<DeleteAgents>(&refs(agent_ids)).await.map(drop)
    }

    /// The server's id and URLs.
    ///
    /// # Errors
    /// As [`HostClient::call`].
    pub async fn server_info(&self) -> Result<ServerInfo, HostCallError> {
        self.call::<GetServerInfo>(&()).await
    }

    /// Replaces this plugin's server-health messages (an empty list clears them).
    ///
    /// # Errors
    /// As [`HostClient::call`].
    pub async fn set_health_messages(&self, messages: &[HealthMessage]) -> Result<(), HostCallError> {
        self.call::<AddServerHealthMessages>(&messages.to_vec()).await.map(drop)
    }

    /// Appends a line to a job's console log.
    ///
    /// # Errors
    /// As [`HostClient::call`].
    pub async fn console_log(&self, job: &JobIdentifier, text: impl Into<String>) -> Result<(), HostCallError> {
        self.call::<AppendConsoleLog>(&ConsoleLogLine::new(job, text)).await.map(drop)
    }
}

/// The engine's port to GoCD, over this connection.
impl Gocd for HostClient {
    fn console_log<'a>(&'a self, job: &'a JobIdentifier, text: String) -> GocdFuture<'a, ()> {
        Box::pin(HostClient::console_log(self, job, text))
    }

    fn disable_agents<'a>(&'a self, agent_ids: &'a [AgentId]) -> GocdFuture<'a, ()> {
        Box::pin(HostClient::disable_agents(self, agent_ids))
    }

    fn delete_agents<'a>(&'a self, agent_ids: &'a [AgentId]) -> GocdFuture<'a, ()> {
        Box::pin(HostClient::delete_agents(self, agent_ids))
    }

    fn list_agents(&self) -> GocdFuture<'_, Vec<AgentMetadata>> {
        Box::pin(HostClient::list_agents(self))
    }

    fn server_info(&self) -> GocdFuture<'_, ServerInfo> {
        Box::pin(HostClient::server_info(self))
    }

    fn set_health_messages<'a>(&'a self, messages: &'a [HealthMessage]) -> GocdFuture<'a, ()> {
        Box::pin(HostClient::set_health_messages(self, messages))
    }
}

fn refs(agent_ids: &[AgentId]) -> Vec<AgentRef> {
    agent_ids.iter().map(|id| AgentRef { agent_id: id.to_string() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::host_calls::HealthKind;
    use crate::protocol::{MessageId, Response};
    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, BufReader};

    /// The calls a test host saw: (name, version, body).
    type Seen = Vec<(String, String, Value)>;

    /// A host that answers each call with `answer(name, version, body)`, recording the calls.
    fn client_with_host(
        answer: impl Fn(&str, &str, &Value) -> (u16, Value) + Send + 'static,
    ) -> (HostClient, tokio::task::JoinHandle<Seen>) {
        let (out, host_in) = tokio::io::duplex(1 << 16);
        let (connection, _writer) = Connection::start(out);
        let client = HostClient::new(connection.clone(), Duration::from_secs(5));
        let host = tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut lines = BufReader::new(host_in).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let v: Value = serde_json::from_str(&line).unwrap();
                let (name, version) =
                    (v["name"].as_str().unwrap().to_string(), v["version"].as_str().unwrap().to_string());
                let (code, body) = answer(&name, &version, &v["body"]);
                connection.complete(Response { id: Some(MessageId::Int(v["id"].as_i64().unwrap())), code, body });
                seen.push((name, version, v["body"].clone()));
                if seen.len() == 6 {
                    break;
                }
            }
            seen
        });
        (client, host)
    }

    #[tokio::test]
    async fn typed_calls_send_gocd_names_versions_and_bodies() {
        let (client, host) = client_with_host(|name, _, _| match name {
            "go.processor.elastic-agents.list-agents" => {
                (200, json!([{"agent_id":"a","agent_state":"Idle","build_state":"Idle","config_state":"Enabled"}]))
            }
            "go.processor.server-info.get" => (200, json!({"server_id":"sid","site_url":"http://h:8153/go"})),
            _ => (200, Value::Null),
        });
        assert_eq!(client.list_agents().await.unwrap()[0].agent_id, "a");
        client.disable_agents(&["a".into()]).await.unwrap();
        client.delete_agents(&["a".into()]).await.unwrap();
        client.disable_agents(&[]).await.unwrap(); // no call at all
        assert_eq!(client.server_info().await.unwrap().agent_url(), Some("http://h:8153/go"));
        client.set_health_messages(&[HealthMessage { kind: HealthKind::Error, message: "m".into() }]).await.unwrap();
        let job = serde_json::from_value(json!({"pipeline_name":"p","pipeline_counter":1,"stage_name":"s","stage_counter":"1","job_name":"j","job_id":1})).unwrap();
        client.console_log(&job, "hi").await.unwrap();
        let seen = host.await.unwrap();
        let names: Vec<(&str, &str)> = seen.iter().map(|(n, v, _)| (n.as_str(), v.as_str())).collect();
        assert_eq!(
            names,
            [
                ("go.processor.elastic-agents.list-agents", "1.0"),
                ("go.processor.elastic-agents.disable-agents", "1.0"),
                ("go.processor.elastic-agents.delete-agents", "1.0"),
                ("go.processor.server-info.get", "1.0"),
                ("go.processor.server-health.add-messages", "1.0"),
                ("go.processor.console-log.append", "2.0"),
            ]
        );
        assert_eq!(seen[0].2, Value::Null);
        assert_eq!(seen[1].2, json!([{"agent_id":"a"}]));
        assert_eq!(seen[4].2, json!([{"type":"error","message":"m"}]));
        assert_eq!(seen[5].2["text"], "hi");
    }

    #[tokio::test]
    async fn non_200_and_bad_shapes_are_errors_naming_the_call() {
        let (client, _host) = client_with_host(|name, _, _| match name {
            "go.processor.server-info.get" => (200, json!({"no_server_id": true})),
            _ => (404, Value::Null),
        });
        let err = client.list_agents().await.unwrap_err();
        assert_eq!(
            err,
            HostCallError::Status {
                call: "go.processor.elastic-agents.list-agents",
                code: 404,
                message: String::new()
            }
        );
        let err = client.server_info().await.unwrap_err();
        assert!(matches!(err, HostCallError::BadAnswer { call: "go.processor.server-info.get", .. }), "{err:?}");
    }

    #[tokio::test]
    async fn calls_fail_when_the_connection_closes() {
        let (out, _host_in) = tokio::io::duplex(1 << 16);
        let (connection, _writer) = Connection::start(out);
        let client = HostClient::new(connection.clone(), Duration::from_secs(30));
        let call = tokio::spawn(async move { client.list_agents().await });
        while connection.calls_in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        connection.close();
        assert_eq!(
            call.await.unwrap().unwrap_err(),
            HostCallError::Disconnected { call: "go.processor.elastic-agents.list-agents" }
        );
    }
}
