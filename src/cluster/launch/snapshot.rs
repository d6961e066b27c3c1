//! One create-agent's snapshot: the profiles as that request sent them, parsed and checked
//! once, with what follows from them computed once — the settings fingerprint, the kinds of
//! the strategy's providers and the task-definition family ([`RequestSnapshot`]) — and the
//! launch built once from it ([`LaunchSpec`]: the agent's [`Work`], tags, `startedBy`, client
//! token), which RunTask sends at once (Fargate) or StartTask later (EC2, when an instance has
//! room). Everything the request does reads this snapshot, never the profile stored on the
//! engine meanwhile (another team's profile on the same cluster, or an edit, may have replaced
//! it).

use std::sync::Arc;
use std::time::Duration;

use super::task_definition::{self, TaskDefinitionRef};
use crate::aws::network::Network;
use crate::cluster::agents::NewAgent;
use crate::cluster::base::identity::{client_token, task_tags, TaskLabels};
use crate::cluster::launch::providers::ProviderKinds;
use crate::ids::{AgentId, ClusterKey, SettingsFingerprint};
use crate::protocol::types::JobIdentifier;
use crate::protocol::PLUGIN_ID;
use crate::secret::Secret;
use crate::settings::{ClusterProfile, ElasticProfile, Properties, Reuse};

pub use crate::cluster::base::error::{OverLimit, MAX_OVERRIDES_CHARS, MAX_TAGS};

/// How long an agent of a warm profile may wait for a job when the profile sets no
/// `ReuseIdleMinutes`: the pool's pass retires the surplus long before.
pub const WARM_IDLE: Duration = Duration::from_secs(12 * 3600);
/// Jobs one agent of a warm profile runs when the profile sets no `ReuseMaxJobs`.
pub const WARM_MAX_JOBS: u32 = 10;

/// One create-agent, as the engine needs it.
#[derive(Debug, Clone)]
pub struct AgentRequest {
    /// The cluster profile GoCD sent with this request: the whole request works on this one
    /// snapshot (its MaxAgents, tags, allow-lists), whatever another team's profile on the same
    /// cluster says meanwhile.
    pub profile: Arc<ClusterProfile>,
    /// Its settings fingerprint (`identity::settings_fingerprint`).
    pub settings: SettingsFingerprint,
    /// The job that needs an agent.
    pub job: JobIdentifier,
    /// The pipeline's environment.
    pub environment: Option<String>,
    /// The agent's ephemeral registration key.
    pub auto_register_key: Secret<String>,
    /// The elastic profile as GoCD sent it.
    pub elastic_profile: Properties,
    /// GoCD's own URL for agents (from server-info), used when the profile sets no `GoServerUrl`.
    pub site_url: Option<String>,
}

/// What one create-agent works on, computed once.
#[derive(Debug, Clone)]
pub struct RequestSnapshot {
    /// The cluster profile GoCD sent with the request.
    pub profile: Arc<ClusterProfile>,
    /// Its settings fingerprint (`identity::settings_fingerprint`).
    pub settings: SettingsFingerprint,
    /// The elastic profile, parsed and checked against `profile`.
    pub elastic: Arc<ElasticProfile>,
    /// The kinds of `profile`'s capacity providers, when it has a strategy.
    pub kinds: Option<Arc<ProviderKinds>>,
    /// The task definition this request runs, by name: our family for the pair of profiles
    /// ([`task_definition::family`]), or `given:<arn>:<container>` for a `TaskDefinitionArn`.
    pub family: String,
}

impl RequestSnapshot {
    /// The snapshot of a request to the engine of `cluster_key` in `region`; the family is
    /// computed here, once.
    pub fn new(
        cluster_key: &str,
        region: &str,
        profile: Arc<ClusterProfile>,
        settings: SettingsFingerprint,
        elastic: Arc<ElasticProfile>,
        kinds: Option<Arc<ProviderKinds>>,
    ) -> Self {
        let family = match &elastic.task_definition_arn {
            Some(arn) => format!("given:{arn}:{}", elastic.agent_container_name.as_deref().unwrap_or("")),
            None => task_definition::family(cluster_key, &profile, &elastic, region, kinds.as_deref()),
        };
        RequestSnapshot { profile, settings, elastic, kinds, family }
    }

    /// Whether the plugin registers the task definition (no `TaskDefinitionArn`): then
    /// [`RequestSnapshot::family`] is a family of ours.
    pub fn registers_its_own(&self) -> bool {
        self.elastic.task_definition_arn.is_none()
    }

    /// The `Reuse` of an agent of this elastic profile: its own, else the warm pool's.
    pub fn reuse(&self) -> Option<Reuse> {
        match (self.elastic.reuse, self.elastic.warm.is_on()) {
            (Some(reuse), _) => Some(reuse),
            (None, true) => Some(Reuse { idle: WARM_IDLE, max_jobs: WARM_MAX_JOBS }),
            (None, false) => None,
        }
    }

    /// What the record of a new agent for this request starts with, in the pipelines'
    /// `environment`.
    pub fn new_agent(&self, environment: Option<String>) -> NewAgent {
        NewAgent {
            environment,
            elastic_profile: self.elastic.hash.clone(),
            settings: self.settings.clone(),
            image: self.elastic.image.clone(),
            reuse: self.reuse(),
        }
    }
}

/// One agent to start, as create-agent decided it: everything Fargate's RunTask and EC2's
/// StartTask need, built once (EC2 work waits with it for room on an instance).
#[derive(Debug, Clone)]
pub struct Work {
    /// The reserved agent id (`GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID`).
    pub agent_id: AgentId,
    /// Which launch for the job (1 for the first).
    pub attempt: u32,
    /// The job it is for.
    pub job: JobIdentifier,
    /// The pipeline's environment (`GO_EA_AUTO_REGISTER_ENVIRONMENT`, only when given).
    pub environment: Option<String>,
    /// The checked elastic profile.
    pub elastic: Arc<ElasticProfile>,
    /// Task definition and agent container.
    pub task_definition: TaskDefinitionRef,
    /// `GO_EA_SERVER_URL`.
    pub server_url: String,
    /// `GO_EA_AUTO_REGISTER_KEY` (ephemeral, single use; GoCD sends a new one with each create-agent).
    pub auto_register_key: Secret<String>,
    /// The cluster profile's settings fingerprint (tagged, for `MaxAgents` after a restart).
    pub settings: SettingsFingerprint,
    /// The job's trace context (`TRACEPARENT`), when traces are on and a request of the job
    /// started the agent (`telemetry::jobs::traceparent`); kept for an EC2 StartTask made later.
    pub traceparent: Option<String>,
}

/// Everything one RunTask or StartTask sends, built once per create-agent by
/// [`LaunchSpec::for_identity`] only, so both launch paths send the same tags, `startedBy`, overrides and
/// client token. The overrides are written from [`LaunchSpec::work`] when the call is made: a
/// re-sent create-agent may renew the registration key of work that still waits.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// The cluster profile of the request (its snapshot, whatever is stored meanwhile).
    pub profile: Arc<ClusterProfile>,
    /// The agent to start.
    pub work: Work,
    /// Subnets and groups (awsvpc: Fargate); `None` on EC2 (bridge networking).
    pub network: Option<Network>,
    /// Our `startedBy`.
    pub started_by: String,
    /// GoCD's server id.
    pub server_id: String,
    /// The cluster profile's key.
    pub cluster_key: ClusterKey,
    /// Every tag: ours, then the profiles' (`docs/protocol.md`, "What a task carries").
    pub tags: Vec<(String, String)>,
    /// Idempotency token for this job and attempt.
    pub client_token: String,
    /// A command in place of the agent container's own, and variables beside the agent's: only
    /// `try` sets them, for its probe; the engine's agents run the image's command.
    pub command_override: Option<Vec<String>>,
    /// See [`LaunchSpec::command_override`].
    pub extra_environment: Vec<(String, String)>,
}

impl LaunchSpec {
    /// The launch of `work` under `identity` (an engine's, or `try`'s own, which no engine runs),
    /// for the request whose cluster profile is `profile`.
    pub fn for_identity(
        identity: &crate::cluster::base::identity::Identity,
        profile: Arc<ClusterProfile>,
        work: Work,
        network: Option<Network>,
    ) -> Self {
        let mut user_tags = profile.tags.clone();
        user_tags.extend(work.elastic.tags.iter().cloned());
        let labels = TaskLabels {
            server_id: &identity.server_id,
            cluster_key: &identity.key,
            agent_id: &work.agent_id,
            job: &work.job,
            environment: work.environment.as_deref(),
            elastic_profile: &work.elastic.hash,
            attempt: work.attempt,
            settings: &work.settings,
        };
        let tags = task_tags(&labels, &user_tags);
        let client_token = client_token(&identity.server_id, &work.agent_id, "");
        LaunchSpec {
            profile,
            work,
            network,
            started_by: identity.started_by.clone(),
            server_id: identity.server_id.clone(),
            cluster_key: identity.key.clone(),
            tags,
            client_token,
            command_override: None,
            extra_environment: Vec::new(),
        }
    }

    /// Whether AWS would take this launch as it stands: the overrides within 8,192 characters
    /// and at most 50 tags. Else what to change (never sent).
    ///
    /// # Errors
    /// What is over which limit.
    pub fn fits_aws(&self) -> Result<(), OverLimit> {
        let length = overrides_length(self);
        if length > MAX_OVERRIDES_CHARS {
            return Err(OverLimit::Overrides { length });
        }
        if self.tags.len() > MAX_TAGS {
            return Err(OverLimit::Tags { tags: self.tags.len() });
        }
        Ok(())
    }
}

/// The agent container's overrides: the registration variables, which differ per agent and
/// which nothing overrides. The environment every agent of the profile pair shares is in our
/// task definition; a given `TaskDefinitionArn` has none of it, so there it travels here too.
pub(in crate::cluster) fn override_environment(spec: &LaunchSpec) -> Vec<(String, String)> {
    let work = &spec.work;
    let mut env = match work.elastic.task_definition_arn {
        Some(_) => task_definition::shared_environment(&spec.profile, &work.elastic),
        None => Vec::new(),
    };
    let mut set = |k: &str, v: &str| {
        env.retain(|(name, _)| name != k);
        env.push((k.to_string(), v.to_string()));
    };
    set("GO_EA_SERVER_URL", &work.server_url);
    set("GO_EA_AUTO_REGISTER_KEY", work.auto_register_key.expose());
    if let Some(environment) = &work.environment {
        set("GO_EA_AUTO_REGISTER_ENVIRONMENT", environment);
    }
    set("GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID", &work.agent_id);
    set("GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID", PLUGIN_ID);
    // The job's trace, so that a build can continue it (only while traces are on).
    if let Some(traceparent) = &work.traceparent {
        set("TRACEPARENT", traceparent);
    }
    for (k, v) in &spec.extra_environment {
        set(k, v);
    }
    env
}

/// How many characters the JSON of this launch's `containerOverrides` has, as AWS counts them.
pub fn overrides_length(spec: &LaunchSpec) -> usize {
    let environment: Vec<serde_json::Value> = override_environment(spec)
        .into_iter()
        .map(|(name, value)| serde_json::json!({ "name": name, "value": value }))
        .collect();
    let mut container =
        serde_json::json!({ "name": spec.work.task_definition.agent_container, "environment": environment });
    if let Some(command) = &spec.command_override {
        container["command"] = serde_json::json!(command);
    }
    let overrides = serde_json::json!([container]);
    overrides.to_string().chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Properties;

    fn props(pairs: &[(&str, &str)]) -> Properties {
        pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect()
    }

    fn snapshot(elastic: &[(&str, &str)]) -> RequestSnapshot {
        let profile = ClusterProfile::parse(&props(&[("ClusterName", "ci")])).expect("valid");
        let elastic = ElasticProfile::parse(&props(elastic)).expect("valid");
        RequestSnapshot::new("k", "us-east-1", Arc::new(profile), "s".into(), Arc::new(elastic), None)
    }

    /// The launch of this snapshot's agent, with these tags.
    fn spec(snapshot: &RequestSnapshot, tags: usize) -> LaunchSpec {
        let work = Work {
            agent_id: "ea-agent".into(),
            attempt: 1,
            job: crate::cluster::tests::fixtures::job(7),
            environment: None,
            elastic: snapshot.elastic.clone(),
            task_definition: TaskDefinitionRef { arn: "td:1".into(), agent_container: "agent".into(), given: None },
            server_url: "http://gocd.example:8153/go".into(),
            auto_register_key: Secret::new("key".into()),
            settings: snapshot.settings.clone(),
            traceparent: None,
        };
        LaunchSpec {
            profile: snapshot.profile.clone(),
            work,
            network: None,
            started_by: "gocd-s".into(),
            server_id: "s".into(),
            cluster_key: "k".into(),
            tags: (0..tags).map(|i| (format!("t{i}"), String::new())).collect(),
            client_token: "token".into(),
            command_override: None,
            extra_environment: Vec::new(),
        }
    }

    #[test]
    fn a_launch_over_an_aws_limit_says_which_and_what_to_change() {
        let snapshot = snapshot(&[("Image", "gocd/agent:v1")]);
        assert_eq!(spec(&snapshot, MAX_TAGS).fits_aws(), Ok(()));
        let over = spec(&snapshot, MAX_TAGS + 1).fits_aws();
        assert_eq!(over, Err(OverLimit::Tags { tags: 51 }));
        assert_eq!(
            over.unwrap_err().to_string(),
            "the task would carry 51 tags, more than the 50 AWS allows: remove some of the profiles' Tags"
        );
        let mut long = spec(&snapshot, 0);
        long.work.environment = Some("e".repeat(MAX_OVERRIDES_CHARS));
        let Err(OverLimit::Overrides { length }) = long.fits_aws() else { panic!("over the overrides' limit") };
        assert!(length > MAX_OVERRIDES_CHARS, "{length}");
        let why = OverLimit::Overrides { length }.to_string();
        assert!(why.starts_with(&format!("the agent's environment overrides would be {length} characters, more than the 8192 ECS takes in one RunTask: ")), "{why}");
    }

    #[test]
    fn the_family_is_ours_or_names_the_given_task_definition() {
        let ours = snapshot(&[("Image", "gocd/agent:v1")]);
        assert!(ours.registers_its_own());
        let expected = task_definition::family("k", &ours.profile, &ours.elastic, "us-east-1", None);
        assert_eq!(ours.family, expected);
        assert!(ours.family.starts_with("gocd-k-"), "{}", ours.family);
        let given = snapshot(&[
            ("Image", "gocd/agent:v1"),
            ("TaskDefinitionArn", "team-td:3"),
            ("AgentContainerName", "agent"),
        ]);
        assert!(!given.registers_its_own());
        assert_eq!(given.family, "given:team-td:3:agent");
    }
}
