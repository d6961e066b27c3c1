//! The v5 requests GoCD sends us (`docs/protocol.md`, "The v5 messages"): one uninhabited marker
//! type per request name, each naming its body type and its answer type (rust-analyzer's `lsp::ext`
//! style).
//!
//! Bodies are parsed leniently: unknown fields are ignored, optional keys GoCD omits when null
//! (`environment`, `elastic_agent_id`, `job_identifier`) are `Option`s.

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::profiles::{debug_keys_only, FieldError, MetadataEntry, MigrateConfig, Properties};
use super::types::{AgentMetadata, JobIdentifier};
use crate::secret::Secret;

/// A request GoCD sends the plugin.
pub trait HostRequest {
    /// The full request name.
    const NAME: &'static str;
    /// The body, as parsed from the line's `body`.
    type Params: DeserializeOwned + Send + 'static;
    /// The 200 answer's body.
    type Result: Serialize + Send + 'static;
}

macro_rules! requests {
    ($($(#[$doc:meta])* $marker:ident = $name:literal, $params:ty => $result:ty;)*) => {
        $(
            $(#[$doc])*
            #[derive(Debug)]
            pub enum $marker {}
            impl HostRequest for $marker {
                const NAME: &'static str = $name;
                type Params = $params;
                type Result = $result;
            }
        )*
        /// Every request name this plugin answers.
        pub const ALL_NAMES: &[&str] = &[$($name),*];
    };
}

requests! {
    /// The plugin's icon.
    GetIcon = "cd.go.elastic-agent.get-icon", IgnoredAny => Icon;
    /// Which status reports we support.
    GetCapabilities = "cd.go.elastic-agent.get-capabilities", IgnoredAny => Capabilities;
    /// Elastic profile keys.
    GetElasticAgentProfileMetadata = "cd.go.elastic-agent.get-elastic-agent-profile-metadata", IgnoredAny => Vec<MetadataEntry>;
    /// Elastic profile form.
    GetElasticAgentProfileView = "cd.go.elastic-agent.get-elastic-agent-profile-view", IgnoredAny => View;
    /// Validate an elastic profile.
    ValidateElasticAgentProfile = "cd.go.elastic-agent.validate-elastic-agent-profile", Properties => Vec<FieldError>;
    /// Cluster profile keys.
    GetClusterProfileMetadata = "cd.go.elastic-agent.get-cluster-profile-metadata", IgnoredAny => Vec<MetadataEntry>;
    /// Cluster profile form.
    GetClusterProfileView = "cd.go.elastic-agent.get-cluster-profile-view", IgnoredAny => View;
    /// Validate a cluster profile.
    ValidateClusterProfile = "cd.go.elastic-agent.validate-cluster-profile", Properties => Vec<FieldError>;
    /// Start an agent for a job.
    CreateAgent = "cd.go.elastic-agent.create-agent", CreateAgentParams => ();
    /// Periodic housekeeping.
    ServerPing = "cd.go.elastic-agent.server-ping", ServerPingParams => ();
    /// May this agent run this job?
    ShouldAssignWork = "cd.go.elastic-agent.should-assign-work", ShouldAssignWorkParams => bool;
    /// A job finished.
    JobCompletion = "cd.go.elastic-agent.job-completion", JobCompletionParams => ();
    /// Plugin-wide status page.
    PluginStatusReport = "cd.go.elastic-agent.plugin-status-report", PluginStatusReportParams => StatusReport;
    /// One agent's (or one job's) status page.
    AgentStatusReport = "cd.go.elastic-agent.agent-status-report", AgentStatusReportParams => StatusReport;
    /// One cluster's status page.
    ClusterStatusReport = "cd.go.elastic-agent.cluster-status-report", ClusterStatusReportParams => StatusReport;
    /// Config migration at load.
    MigrateConfiguration = "cd.go.elastic-agent.migrate-config", MigrateConfig => MigrateConfig;
    /// A cluster profile was created, updated or deleted.
    ClusterProfileChanged = "cd.go.elastic-agent.cluster-profile-changed", ClusterProfileChangedParams => ();
    /// Generic plugin-settings call; we have no settings.
    PluginSettingsConfiguration = "go.plugin-settings.get-configuration", IgnoredAny => Map<String, Value>;
    /// Generic plugin-settings view; we have none.
    PluginSettingsView = "go.plugin-settings.get-view", IgnoredAny => Map<String, Value>;
}

/// `get-icon` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Icon {
    /// MIME type.
    pub content_type: String,
    /// Base64 on one line.
    pub data: String,
}

/// `get-capabilities` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Plugin status report.
    pub supports_plugin_status_report: bool,
    /// Agent status report.
    pub supports_agent_status_report: bool,
    /// Cluster status report.
    pub supports_cluster_status_report: bool,
}

/// A profile form template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    /// GoCD Angular-style HTML.
    pub template: String,
}

/// A status report page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReport {
    /// HTML embedded by GoCD.
    pub view: String,
}

/// `create-agent` body.
#[derive(Clone, Deserialize)]
pub struct CreateAgentParams {
    /// Ephemeral, single-use key for the agent's registration.
    pub auto_register_key: Secret<String>,
    /// The job's elastic profile.
    #[serde(default)]
    pub elastic_agent_profile_properties: Properties,
    /// The job's cluster profile.
    #[serde(default)]
    pub cluster_profile_properties: Properties,
    /// The pipeline's environment; absent when none.
    #[serde(default)]
    pub environment: Option<String>,
    /// The job.
    pub job_identifier: JobIdentifier,
}

/// `server-ping` body (note the singular "profile").
#[derive(Clone, Deserialize)]
pub struct ServerPingParams {
    /// One map per cluster profile of this plugin.
    #[serde(default)]
    pub all_cluster_profile_properties: Vec<Properties>,
}

/// `should-assign-work` body.
#[derive(Clone, Deserialize)]
pub struct ShouldAssignWorkParams {
    /// The agent asking for work.
    pub agent: AgentMetadata,
    /// The pipeline's environment; absent when none.
    #[serde(default)]
    pub environment: Option<String>,
    /// The candidate job.
    pub job_identifier: JobIdentifier,
    /// Its elastic profile.
    #[serde(default)]
    pub elastic_agent_profile_properties: Properties,
    /// Its cluster profile.
    #[serde(default)]
    pub cluster_profile_properties: Properties,
}

/// `job-completion` body.
#[derive(Clone, Deserialize)]
pub struct JobCompletionParams {
    /// The agent that ran the job.
    pub elastic_agent_id: String,
    /// The job.
    pub job_identifier: JobIdentifier,
    /// Its elastic profile.
    #[serde(default)]
    pub elastic_agent_profile_properties: Properties,
    /// Its cluster profile; `{}` when the plan had none.
    #[serde(default)]
    pub cluster_profile_properties: Properties,
}

/// `plugin-status-report` body (note the plural "profiles").
#[derive(Clone, Deserialize)]
pub struct PluginStatusReportParams {
    /// One map per cluster profile.
    #[serde(default)]
    pub all_cluster_profiles_properties: Vec<Properties>,
}

/// `agent-status-report` body: an agent id, a job, or both.
#[derive(Clone, Deserialize)]
pub struct AgentStatusReportParams {
    /// Omitted when GoCD has no agent for the job.
    #[serde(default)]
    pub elastic_agent_id: Option<String>,
    /// Omitted when unknown.
    #[serde(default)]
    pub job_identifier: Option<JobIdentifier>,
    /// `{}` when the plan had no cluster profile.
    #[serde(default)]
    pub cluster_profile_properties: Properties,
}

/// `cluster-status-report` body.
#[derive(Clone, Deserialize)]
pub struct ClusterStatusReportParams {
    /// The cluster profile.
    #[serde(default)]
    pub cluster_profile_properties: Properties,
}

/// `cluster-profile-changed` body (plural "profiles" keys).
#[derive(Clone, Deserialize)]
pub struct ClusterProfileChangedParams {
    /// What happened.
    pub status: ChangeStatus,
    /// The new (or deleted) profile.
    #[serde(default)]
    pub cluster_profiles_properties: Properties,
    /// The profile before an update.
    #[serde(default)]
    pub old_cluster_profiles_properties: Option<Properties>,
}

// Property maps print by their keys only (a cluster profile holds SecretAccessKey).
debug_keys_only!(CreateAgentParams { auto_register_key, environment, job_identifier; elastic_agent_profile_properties, cluster_profile_properties });
debug_keys_only!(ServerPingParams { ; all_cluster_profile_properties });
debug_keys_only!(ShouldAssignWorkParams { agent, environment, job_identifier; elastic_agent_profile_properties, cluster_profile_properties });
debug_keys_only!(JobCompletionParams { elastic_agent_id, job_identifier; elastic_agent_profile_properties, cluster_profile_properties });
debug_keys_only!(PluginStatusReportParams { ; all_cluster_profiles_properties });
debug_keys_only!(AgentStatusReportParams { elastic_agent_id, job_identifier; cluster_profile_properties });
debug_keys_only!(ClusterStatusReportParams { ; cluster_profile_properties });
debug_keys_only!(ClusterProfileChangedParams { status; cluster_profiles_properties, old_cluster_profiles_properties });

/// `status` of cluster-profile-changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ChangeStatus {
    /// A new profile.
    Created,
    /// An edited profile.
    Updated,
    /// A removed profile.
    Deleted,
    /// A status this plugin does not know.
    #[serde(other)]
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<R: HostRequest>(json: &str) -> R::Params {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn names_are_gocds() {
        assert_eq!(ALL_NAMES.len(), 19);
        assert_eq!(CreateAgent::NAME, "cd.go.elastic-agent.create-agent");
        assert_eq!(ClusterProfileChanged::NAME, "cd.go.elastic-agent.cluster-profile-changed");
    }

    #[test]
    fn create_agent_from_gocd_test_payload() {
        let p = parse::<CreateAgent>(
            r#"{"auto_register_key":"secret-key","elastic_agent_profile_properties":{"key1":"value1","key2":"value2"},"cluster_profile_properties":{"key1":"value1","key2":"value2"},"environment":"prod","job_identifier":{"pipeline_name":"test-pipeline","pipeline_counter":1,"pipeline_label":"Test Pipeline","stage_name":"test-stage","stage_counter":"1","job_name":"test-job","job_id":100}}"#,
        );
        assert_eq!(p.auto_register_key.expose(), "secret-key");
        assert_eq!(format!("{p:?}").matches("secret-key").count(), 0, "the key must not show in Debug");
        assert!(format!("{p:?}").contains("key1") && !format!("{p:?}").contains("value1"), "maps by their keys only");
        assert_eq!(p.environment.as_deref(), Some("prod"));
        assert_eq!(p.elastic_agent_profile_properties["key1"].as_deref(), Some("value1"));
    }

    #[test]
    fn create_agent_without_environment() {
        let p = parse::<CreateAgent>(
            r#"{"auto_register_key":"k","elastic_agent_profile_properties":{},"cluster_profile_properties":{},"job_identifier":{"pipeline_name":"p","pipeline_counter":1,"pipeline_label":"1","stage_name":"s","stage_counter":"1","job_name":"j","job_id":-1}}"#,
        );
        assert_eq!(p.environment, None);
        assert_eq!(p.job_identifier.job_id, -1);
    }

    #[test]
    fn server_ping_and_plugin_report_spellings_differ() {
        let p = parse::<ServerPing>(r#"{"all_cluster_profile_properties":[{"ClusterName":"a"},{}]}"#);
        assert_eq!(p.all_cluster_profile_properties.len(), 2);
        let p = parse::<ServerPing>(r#"{"all_cluster_profile_properties":[]}"#);
        assert!(p.all_cluster_profile_properties.is_empty());
        let p = parse::<PluginStatusReport>(r#"{"all_cluster_profiles_properties":[{"ClusterName":"a"}]}"#);
        assert_eq!(p.all_cluster_profiles_properties.len(), 1);
    }

    #[test]
    fn should_assign_work_from_docs() {
        let p = parse::<ShouldAssignWork>(
            r#"{"agent":{"agent_id":"i-283432d4","agent_state":"Idle","build_state":"Idle","config_state":"Enabled"},"environment":"staging","job_identifier":{"job_id":100,"job_name":"run-upgrade","pipeline_counter":1,"pipeline_label":"build","pipeline_name":"build","stage_counter":"1","stage_name":"test-stage"},"elastic_agent_profile_properties":{"Image":"gocd/gocd-agent-alpine-3.5:v18.1.0"},"cluster_profile_properties":{"Image":"DockerURI"}}"#,
        );
        assert_eq!(p.agent.agent_id, "i-283432d4");
        assert_eq!(p.job_identifier.job_name, "run-upgrade");
    }

    #[test]
    fn job_completion_with_empty_cluster_profile() {
        let p = parse::<JobCompletion>(
            r#"{"elastic_agent_id":"GoCD18ef","elastic_agent_profile_properties":{"Image":"x"},"cluster_profile_properties":{},"job_identifier":{"job_id":100,"job_name":"test-job","pipeline_counter":1,"pipeline_label":"build","pipeline_name":"build","stage_counter":"1","stage_name":"test-stage"}}"#,
        );
        assert!(p.cluster_profile_properties.is_empty());
    }

    #[test]
    fn agent_status_report_variants() {
        let p = parse::<AgentStatusReport>(
            r#"{"cluster_profile_properties":{"ClusterName":"c"},"elastic_agent_id":"a-1"}"#,
        );
        assert_eq!((p.elastic_agent_id.as_deref(), p.job_identifier.is_none()), (Some("a-1"), true));
        let p = parse::<AgentStatusReport>(
            r#"{"cluster_profile_properties":{},"job_identifier":{"pipeline_name":"p","pipeline_label":"l","pipeline_counter":1,"stage_name":"s","stage_counter":"1","job_name":"j","job_id":5}}"#,
        );
        assert_eq!((p.elastic_agent_id, p.job_identifier.map(|j| j.job_id)), (None, Some(5)));
    }

    #[test]
    fn cluster_profile_changed_statuses() {
        let p = parse::<ClusterProfileChanged>(r#"{"status":"created","cluster_profiles_properties":{"key1":"key2"}}"#);
        assert_eq!(p.status, ChangeStatus::Created);
        let p = parse::<ClusterProfileChanged>(
            r#"{"status":"updated","old_cluster_profiles_properties":{"old_key1":"old_key2"},"cluster_profiles_properties":{"key1":"key2"}}"#,
        );
        assert_eq!(p.status, ChangeStatus::Updated);
        assert!(p.old_cluster_profiles_properties.unwrap().contains_key("old_key1"));
        let p = parse::<ClusterProfileChanged>(r#"{"status":"deleted","cluster_profiles_properties":{"key1":"key2"}}"#);
        assert_eq!(p.status, ChangeStatus::Deleted);
        let p = parse::<ClusterProfileChanged>(r#"{"status":"renamed","cluster_profiles_properties":{}}"#);
        assert_eq!(p.status, ChangeStatus::Unknown);
    }

    #[test]
    fn validate_bodies_keep_nulls() {
        let p = parse::<ValidateElasticAgentProfile>(r#"{"key3":null,"key2":"value2","key1":"value1"}"#);
        assert_eq!(p.get("key3"), Some(&None));
        assert!(serde_json::from_str::<Properties>(r#"{"key":3}"#).is_err());
    }

    #[test]
    fn answers_encode_exactly() {
        let caps = Capabilities {
            supports_plugin_status_report: true,
            supports_agent_status_report: true,
            supports_cluster_status_report: true,
        };
        assert_eq!(
            serde_json::to_string(&caps).unwrap(),
            r#"{"supports_plugin_status_report":true,"supports_agent_status_report":true,"supports_cluster_status_report":true}"#
        );
        assert_eq!(serde_json::to_string(&()).unwrap(), "null");
        assert_eq!(serde_json::to_string(&View { template: "<div/>".into() }).unwrap(), r#"{"template":"<div/>"}"#);
        assert_eq!(serde_json::to_string(&StatusReport { view: "v".into() }).unwrap(), r#"{"view":"v"}"#);
    }
}
