//! The callbacks we send GoCD (`docs/protocol.md`, "Calls the plugin makes"): one marker type per
//! `go.processor.*` call, each with the API version the server registers and its body and answer
//! types.

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

use super::types::{AgentMetadata, JobIdentifier};

/// A call from the plugin to the host.
pub trait HostCall {
    /// The `go.processor.*` name.
    const NAME: &'static str;
    /// The API version the server has a processor for.
    const VERSION: &'static str;
    /// The body we send.
    type Params: Serialize + Send;
    /// The 200 answer's body.
    type Result: DeserializeOwned + Send;
}

macro_rules! host_calls {
    ($($(#[$doc:meta])* $marker:ident = $name:literal @ $version:literal, $params:ty => $result:ty;)*) => {$(
        $(#[$doc])*
        #[derive(Debug)]
        pub enum $marker {}
        impl HostCall for $marker {
            const NAME: &'static str = $name;
            const VERSION: &'static str = $version;
            type Params = $params;
            type Result = $result;
        }
    )*};
}

host_calls! {
    /// Every elastic agent registered with our plugin id.
    ListAgents = "go.processor.elastic-agents.list-agents" @ "1.0", () => Vec<AgentMetadata>;
    /// Disable agents (no new work).
    DisableAgents = "go.processor.elastic-agents.disable-agents" @ "1.0", Vec<AgentRef> => IgnoredAny;
    /// Delete agents (their task is already stopped).
    DeleteAgents = "go.processor.elastic-agents.delete-agents" @ "1.0", Vec<AgentRef> => IgnoredAny;
    /// The server's id and URLs.
    GetServerInfo = "go.processor.server-info.get" @ "1.0", () => ServerInfo;
    /// Replace this plugin's server-health messages.
    AddServerHealthMessages = "go.processor.server-health.add-messages" @ "1.0", Vec<HealthMessage> => IgnoredAny;
    /// Append a line to a job's console log.
    AppendConsoleLog = "go.processor.console-log.append" @ "2.0", ConsoleLogLine => IgnoredAny;
}

/// An agent named in disable/delete calls: only `agent_id` is read by GoCD.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRef {
    /// The elastic agent id.
    pub agent_id: String,
}

/// `server-info.get` answer; absent URL keys are unset in GoCD.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ServerInfo {
    /// GoCD's server id (tags every task we start).
    pub server_id: String,
    /// Plain URL, e.g. `http://gocd:8153/go`.
    #[serde(default)]
    pub site_url: Option<String>,
    /// HTTPS URL, preferred for agents.
    #[serde(default)]
    pub secure_site_url: Option<String>,
}

impl ServerInfo {
    /// The URL agents should use: `secure_site_url`, else `site_url`.
    pub fn agent_url(&self) -> Option<&str> {
        self.secure_site_url.as_deref().or(self.site_url.as_deref()).filter(|u| !u.is_empty())
    }
}

/// One server-health message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthMessage {
    /// `warning` or `error`.
    #[serde(rename = "type")]
    pub kind: HealthKind,
    /// What an operator reads on the server-health page.
    pub message: String,
}

/// Server-health severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthKind {
    /// Something to look at.
    Warning,
    /// Something broken.
    Error,
}

/// A console-log line, API version 2.0 (snake_case).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsoleLogLine {
    /// Pipeline name.
    pub pipeline_name: String,
    /// Pipeline counter, as a numeric string.
    pub pipeline_counter: String,
    /// Stage name.
    pub stage_name: String,
    /// Stage counter.
    pub stage_counter: String,
    /// Job name.
    pub job_name: String,
    /// The text.
    pub text: String,
}

impl ConsoleLogLine {
    /// A line for a job's console.
    pub fn new(job: &JobIdentifier, text: impl Into<String>) -> Self {
        ConsoleLogLine {
            pipeline_name: job.pipeline_name.clone(),
            pipeline_counter: job.pipeline_counter.to_string(),
            stage_name: job.stage_name.clone(),
            stage_counter: job.stage_counter.clone(),
            job_name: job.job_name.clone(),
            text: text.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_the_ones_gocd_registers() {
        assert_eq!((ListAgents::NAME, ListAgents::VERSION), ("go.processor.elastic-agents.list-agents", "1.0"));
        assert_eq!(GetServerInfo::VERSION, "1.0");
        assert_eq!(AddServerHealthMessages::VERSION, "1.0");
        assert_eq!(AppendConsoleLog::VERSION, "2.0");
    }

    #[test]
    fn bodies_encode_exactly() {
        let refs = vec![AgentRef { agent_id: "foo".into() }];
        assert_eq!(serde_json::to_string(&refs).unwrap(), r#"[{"agent_id":"foo"}]"#);
        let msgs = vec![HealthMessage { kind: HealthKind::Warning, message: "w".into() }];
        assert_eq!(serde_json::to_string(&msgs).unwrap(), r#"[{"type":"warning","message":"w"}]"#);
        let job: JobIdentifier = serde_json::from_str(
            r#"{"pipeline_name":"my_pipeline_1","pipeline_counter":123,"stage_name":"stage1","stage_counter":"1","job_name":"job1","job_id":1}"#,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&ConsoleLogLine::new(&job, "Message")).unwrap(),
            r#"{"pipeline_name":"my_pipeline_1","pipeline_counter":"123","stage_name":"stage1","stage_counter":"1","job_name":"job1","text":"Message"}"#
        );
    }

    #[test]
    fn server_info_prefers_the_secure_url_and_tolerates_absent_keys() {
        let info: ServerInfo = serde_json::from_str(
            r#"{"server_id":"df0c","site_url":"http://example.com:8153/go","secure_site_url":"https://example.com/go"}"#,
        )
        .unwrap();
        assert_eq!(info.agent_url(), Some("https://example.com/go"));
        let info: ServerInfo = serde_json::from_str(r#"{"server_id":"df0c"}"#).unwrap();
        assert_eq!(info.agent_url(), None);
    }

    #[test]
    fn list_agents_answer_parses() {
        let agents: Vec<AgentMetadata> = serde_json::from_str(
            r#"[{"agent_id":"foo-id","agent_state":"Idle","build_state":"Idle","config_state":"Enabled"},{"agent_id":"bar-id","agent_state":"Idle","build_state":"Building","config_state":"Enabled"}]"#,
        )
        .unwrap();
        assert_eq!(agents.len(), 2);
    }
}
