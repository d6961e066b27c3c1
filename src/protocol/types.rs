//! Sub-objects shared by several v5 messages (`docs/protocol.md`, "Shared objects"): the job
//! identifier and the elastic agent object, with GoCD's exact key spellings and JSON types.

use serde::{Deserialize, Deserializer, Serialize};

/// Identifies one job run. `pipeline_counter` and `job_id` are numbers, `stage_counter` a string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct JobIdentifier {
    /// Pipeline name.
    pub pipeline_name: String,
    /// Pipeline label (GoCD always sends it; tolerated when missing).
    #[serde(default)]
    pub pipeline_label: String,
    /// Pipeline counter (a JSON number).
    pub pipeline_counter: i64,
    /// Stage name.
    pub stage_name: String,
    /// Stage counter (a JSON string; a number is tolerated).
    #[serde(deserialize_with = "string_or_number")]
    pub stage_counter: String,
    /// Job name.
    pub job_name: String,
    /// GoCD's build id (`-1` when unset).
    pub job_id: i64,
}

impl JobIdentifier {
    /// `pipeline/counter/stage/counter/job`, as GoCD shows a job.
    pub fn locator(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}",
            self.pipeline_name, self.pipeline_counter, self.stage_name, self.stage_counter, self.job_name
        )
    }
}

/// An elastic agent as GoCD reports it (list-agents, should-assign-work).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentMetadata {
    /// The elastic agent id the agent registered with.
    pub agent_id: String,
    /// Runtime state.
    #[serde(default)]
    pub agent_state: AgentState,
    /// Build state.
    #[serde(default)]
    pub build_state: BuildState,
    /// Config state.
    #[serde(default)]
    pub config_state: ConfigState,
}

/// `agent_state` values; unknown ones are kept as `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub enum AgentState {
    /// Waiting for work.
    Idle,
    /// Running a job.
    Building,
    /// Stopped pinging.
    LostContact,
    /// Gone missing.
    Missing,
    /// Anything else.
    #[default]
    #[serde(other)]
    Unknown,
}

/// `build_state` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub enum BuildState {
    /// No build.
    Idle,
    /// Building.
    Building,
    /// Build being cancelled.
    Cancelled,
    /// Anything else.
    #[default]
    #[serde(other)]
    Unknown,
}

/// `config_state` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ConfigState {
    /// Registered, not yet enabled.
    Pending,
    /// Enabled.
    Enabled,
    /// Disabled (gets no work).
    Disabled,
    /// Anything else.
    #[default]
    #[serde(other)]
    Unknown,
}

fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        S(String),
        N(i64),
    }
    Ok(match Either::deserialize(d).map_err(|_| serde::de::Error::custom("expected a string or an integer"))? {
        Either::S(s) => s,
        Either::N(n) => n.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: &str = r#"{"pipeline_name":"test-pipeline","pipeline_counter":1,"pipeline_label":"Test Pipeline","stage_name":"test-stage","stage_counter":"1","job_name":"test-job","job_id":100}"#;

    #[test]
    fn job_identifier_round_trips_with_gocd_types() {
        let job: JobIdentifier = serde_json::from_str(JOB).unwrap();
        assert_eq!(job.job_id, 100);
        assert_eq!(job.stage_counter, "1");
        assert_eq!(job.locator(), "test-pipeline/1/test-stage/1/test-job");
        assert_eq!(
            serde_json::to_string(&job).unwrap(),
            r#"{"pipeline_name":"test-pipeline","pipeline_label":"Test Pipeline","pipeline_counter":1,"stage_name":"test-stage","stage_counter":"1","job_name":"test-job","job_id":100}"#
        );
    }

    #[test]
    fn job_identifier_tolerates_numeric_stage_counter_and_missing_label() {
        let job: JobIdentifier = serde_json::from_str(
            r#"{"pipeline_name":"p","pipeline_counter":2,"stage_name":"s","stage_counter":3,"job_name":"j","job_id":-1}"#,
        )
        .unwrap();
        assert_eq!((job.stage_counter.as_str(), job.pipeline_label.as_str(), job.job_id), ("3", "", -1));
    }

    #[test]
    fn job_identifier_rejects_wrong_types() {
        let err = serde_json::from_str::<JobIdentifier>(
            r#"{"pipeline_name":"p","pipeline_counter":"two","stage_name":"s","stage_counter":"1","job_name":"j","job_id":1}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }

    #[test]
    fn agent_metadata_keeps_unknown_states() {
        let a: AgentMetadata = serde_json::from_str(
            r#"{"agent_id":"a","agent_state":"Sleeping","build_state":"Building","config_state":"Disabled","x":1}"#,
        )
        .unwrap();
        assert_eq!(a.agent_state, AgentState::Unknown);
        assert_eq!(a.build_state, BuildState::Building);
        assert_eq!(a.config_state, ConfigState::Disabled);
        let a: AgentMetadata = serde_json::from_str(r#"{"agent_id":"b"}"#).unwrap();
        assert_eq!(a.agent_state, AgentState::Unknown);
        assert_eq!(
            serde_json::to_string(&AgentMetadata {
                agent_id: "i-1".into(),
                agent_state: AgentState::Idle,
                build_state: BuildState::Idle,
                config_state: ConfigState::Enabled
            })
            .unwrap(),
            r#"{"agent_id":"i-1","agent_state":"Idle","build_state":"Idle","config_state":"Enabled"}"#
        );
    }
}
