//! The host's data: configuration, profiles, jobs, agents and everything it records.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Property maps as GoCD sends them (all values strings).
pub type Props = BTreeMap<String, String>;

/// A property map from pairs.
pub fn props(pairs: &[(&str, &str)]) -> Props {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A cluster profile of GoCD's config.
#[derive(Debug, Clone)]
pub struct ClusterProfile {
    pub id: String,
    pub properties: Props,
}

/// An elastic agent profile of GoCD's config, pointing at a cluster profile.
#[derive(Debug, Clone)]
pub struct ElasticProfile {
    pub id: String,
    pub cluster_profile_id: String,
    pub properties: Props,
}

/// How the host runs and what it tells the plugin.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// `AWS_ENDPOINT_URL` for the plugin (moto, or the proxy in front of it).
    pub aws_endpoint: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    pub region: String,
    /// Extra environment for the plugin; wins over the defaults (`RUST_LOG=trace`, the AWS ones).
    pub env: Vec<(String, String)>,
    pub cluster_profiles: Vec<ClusterProfile>,
    pub elastic_profiles: Vec<ElasticProfile>,
    /// Server-ping period (fixed delay after each ping, as GoCD's scheduler).
    pub ping_interval: Duration,
    /// A waiting job gets a new create-agent (with a new key) this long after the last one.
    pub starvation_interval: Duration,
    /// Tick of the assignment loop (agents polling for work).
    pub assign_interval: Duration,
    /// An idle agent is asked again about a job it declined after this long.
    pub reask_interval: Duration,
    /// create-agent calls in flight at once (GoCD: 5 listener threads).
    pub create_agent_concurrency: usize,
    /// How long a request to the plugin may take before the host gives up on it.
    pub request_timeout: Duration,
    /// Life of an auto-register key (GoCD: 30 min).
    pub key_validity: Duration,
    /// Run this program instead of the plugin binary (world self-tests); args replace `serve`.
    pub program: Option<(PathBuf, Vec<String>)>,
    /// Echo the plugin's stderr to the test's stderr as it comes (also `WORLD_ECHO_PLUGIN_STDERR`).
    pub echo_stderr: bool,
    /// Keep every stdout line of the plugin in `HostState::stdout` (for the secret scan).
    pub keep_stdout: bool,
    /// How many waiting jobs one idle agent is offered per assignment round (the pairs asked
    /// within `reask_interval` are skipped, so an agent walks the queue over rounds); unlimited
    /// by default. A soak with hundreds of jobs waiting sets it, or a round takes minutes.
    pub asks_per_agent_round: usize,
    /// Re-send a waiting job's create-agent only once the previous one was answered (GoCD's
    /// create-agent queue does not pile up); off by default.
    pub one_create_agent_in_flight: bool,
}

impl HostConfig {
    /// Defaults for tests: test keys, us-east-1, ping every 2 s, re-send every 3 s.
    pub fn new(aws_endpoint: &str) -> Self {
        HostConfig {
            aws_endpoint: aws_endpoint.to_string(),
            access_key_id: super::super::moto::TEST_ACCESS_KEY_ID.into(),
            secret_access_key: super::super::moto::TEST_SECRET_ACCESS_KEY.into(),
            region: super::super::moto::REGION.into(),
            env: Vec::new(),
            cluster_profiles: Vec::new(),
            elastic_profiles: Vec::new(),
            ping_interval: Duration::from_secs(2),
            starvation_interval: Duration::from_secs(3),
            assign_interval: Duration::from_millis(200),
            reask_interval: Duration::from_secs(1),
            create_agent_concurrency: 5,
            request_timeout: Duration::from_secs(60),
            key_validity: Duration::from_secs(30 * 60),
            program: None,
            echo_stderr: std::env::var_os("WORLD_ECHO_PLUGIN_STDERR").is_some(),
            keep_stdout: false,
            asks_per_agent_round: usize::MAX,
            one_create_agent_in_flight: false,
        }
    }

    /// Adds a cluster profile.
    pub fn cluster_profile(mut self, id: &str, properties: Props) -> Self {
        self.cluster_profiles.push(ClusterProfile { id: id.into(), properties });
        self
    }

    /// Adds an elastic profile of a cluster profile.
    pub fn elastic_profile(mut self, id: &str, cluster_profile_id: &str, properties: Props) -> Self {
        self.elastic_profiles.push(ElasticProfile {
            id: id.into(),
            cluster_profile_id: cluster_profile_id.into(),
            properties,
        });
        self
    }
}

/// A job that needs an elastic agent.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// Id of the elastic profile (its cluster profile follows from the config).
    pub elastic_profile: String,
    /// The pipeline's environment, if any.
    pub environment: Option<String>,
    /// How long the job builds once assigned.
    pub duration: Duration,
    /// The materials the job checks out first, as a pipeline names them
    /// (`git@github.com:org/repo.git`, `https://…`, `git://…`): the agent connects to each.
    pub materials: Vec<String>,
}

impl JobSpec {
    /// A job of that elastic profile, no environment.
    pub fn new(elastic_profile: &str, duration: Duration) -> Self {
        JobSpec { elastic_profile: elastic_profile.into(), environment: None, duration, materials: Vec::new() }
    }

    /// The same job, checking out `material` first.
    pub fn with_material(mut self, material: &str) -> Self {
        self.materials.push(material.into());
        self
    }

    /// The same job in an environment.
    pub fn in_environment(mut self, environment: &str) -> Self {
        self.environment = Some(environment.into());
        self
    }
}

/// A job's index in the host (stable across reschedules, unlike its GoCD job id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobHandle(pub usize);

/// GoCD's job identifier (`docs/protocol.md`, "Shared objects").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobIdentifier {
    pub pipeline_name: String,
    pub pipeline_label: String,
    pub pipeline_counter: i64,
    pub stage_name: String,
    pub stage_counter: String,
    pub job_name: String,
    pub job_id: i64,
}

impl JobIdentifier {
    /// The wire shape: `pipeline_counter` a number, `stage_counter` a string.
    pub fn to_json(&self) -> Value {
        json!({
            "pipeline_name": self.pipeline_name,
            "pipeline_label": self.pipeline_label,
            "pipeline_counter": self.pipeline_counter,
            "stage_name": self.stage_name,
            "stage_counter": self.stage_counter,
            "job_name": self.job_name,
            "job_id": self.job_id,
        })
    }
}

/// Where a job is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Waiting,
    Running { agent_id: String },
    Completed { agent_id: String },
    Cancelled,
}

/// A job and what happened to it.
#[derive(Debug, Clone)]
pub struct Job {
    pub handle: JobHandle,
    pub spec: JobSpec,
    pub identifier: JobIdentifier,
    pub state: JobState,
    /// create-agent posted for this job (all job ids), answered, answered non-200 or failed.
    pub create_agent_posted: u32,
    pub create_agent_answered: u32,
    pub create_agent_failed: u32,
    /// When each create-agent the plugin answered with an error (non-200) came back.
    pub create_agent_errors: Vec<Instant>,
    pub last_create_posted: Option<Instant>,
    /// Every key issued for this job, oldest first.
    pub keys: Vec<String>,
    pub added_at: Instant,
    pub started_at: Option<Instant>,
    pub completed_at: Option<Instant>,
    /// Job ids this job had before reschedules.
    pub previous_job_ids: Vec<i64>,
    /// For each reschedule: the agent the plugin deleted while it ran the job, and when.
    pub deleted_while_running: Vec<(String, Instant)>,
    /// The code the plugin answered job-completion with.
    pub completion_code: Option<i64>,
    /// Whether the agent has checked out the job's materials (or found it could not).
    pub materials_checked: bool,
    /// Why the build failed on its agent (a material it could not reach); `None`: it passed, or
    /// is not done.
    pub failure: Option<String>,
}

/// An agent in GoCD's registry.
#[derive(Debug, Clone)]
pub struct Agent {
    pub agent_id: String,
    pub plugin_id: String,
    pub environments: Vec<String>,
    /// `Idle` or `Building`.
    pub agent_state: &'static str,
    pub build_state: &'static str,
    /// `Enabled` or `Disabled`.
    pub config_state: &'static str,
    pub registered_at: Instant,
    pub job: Option<JobHandle>,
}

impl Agent {
    /// The elastic agent object (`docs/protocol.md`, "Shared objects").
    pub fn to_json(&self) -> Value {
        json!({
            "agent_id": self.agent_id,
            "agent_state": self.agent_state,
            "build_state": self.build_state,
            "config_state": self.config_state,
        })
    }
}

/// An auto-register key GoCD issued.
#[derive(Debug, Clone)]
pub struct KeyInfo {
    pub job: Option<JobHandle>,
    pub issued_at: Instant,
    pub used: bool,
}

/// A registration GoCD refused (HTTP 422 in GoCD).
#[derive(Debug, Clone)]
pub struct Rejection {
    pub agent_id: String,
    pub reason: String,
}

/// A server-health message (`type` is `warning` or `error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthMessage {
    pub kind: String,
    pub message: String,
}

/// A console-log line appended by the plugin.
#[derive(Debug, Clone)]
pub struct ConsoleLine {
    /// The job it was for, when the identifier matched one.
    pub job: Option<JobHandle>,
    /// `pipeline/counter/stage/counter/job`.
    pub key: String,
    pub text: String,
}

impl ConsoleLine {
    /// A line the job's agent wrote (its build's output), not the plugin.
    pub fn from_agent(job: JobHandle, text: &str) -> ConsoleLine {
        ConsoleLine { job: Some(job), key: "agent".into(), text: text.to_string() }
    }
}

/// A non-200 answer of the plugin.
#[derive(Debug, Clone)]
pub struct ErrorResponse {
    pub name: String,
    pub code: i64,
    pub body: Value,
}

/// One server-ping.
#[derive(Debug, Clone)]
pub struct PingRecord {
    pub started: Instant,
    pub finished: Option<Instant>,
    pub code: Option<i64>,
}

/// Everything the host knows; read it with [`GoCdHost::with_state`] or [`GoCdHost::wait_until`].
#[derive(Debug, Default)]
pub struct HostState {
    /// Cluster profiles an administrator deleted ([`super::GoCdHost::delete_cluster_profile`]).
    pub deleted_cluster_profiles: std::collections::BTreeSet<String>,
    pub jobs: Vec<Job>,
    pub agents: Vec<Agent>,
    /// Agent ids deleted by the plugin, in order.
    pub deleted_agents: Vec<String>,
    /// Every delete-agents call, as the plugin made it (agents GoCD no longer knew included).
    pub delete_calls: Vec<DeleteCall>,
    /// Agent ids disabled by the plugin, in order.
    pub disabled_agents: Vec<String>,
    pub keys: HashMap<String, KeyInfo>,
    /// Keys in the order issued.
    pub issued_keys: Vec<String>,
    pub registrations: u64,
    pub rejections: Vec<Rejection>,
    /// The plugin's current server-health messages.
    pub health: Vec<HealthMessage>,
    /// Every server-health message ever sent (deduplicated).
    pub health_history: Vec<HealthMessage>,
    pub console: Vec<ConsoleLine>,
    /// Protocol violations seen on stdout or in callbacks.
    pub violations: Vec<String>,
    pub error_responses: Vec<ErrorResponse>,
    /// Requests that got no answer (timeout, plugin gone).
    pub host_errors: Vec<String>,
    /// Callbacks received, by name.
    pub callbacks: BTreeMap<String, u64>,
    /// Requests sent, by short name (`create-agent`, ...).
    pub requests: BTreeMap<String, u64>,
    pub pings: Vec<PingRecord>,
    /// Status report views returned by the plugin.
    pub views: Vec<String>,
    /// The plugin's stderr, all processes.
    pub stderr: String,
    /// The plugin's stdout, all processes, when `HostConfig::keep_stdout`.
    pub stdout: String,
    /// How many plugin processes were started.
    pub generation: u64,
    /// Every should-assign-work answered: when it was sent and how long the answer took.
    pub assign_latencies: Vec<(Instant, Duration)>,
}

impl HostState {
    /// The job behind a handle.
    pub fn job(&self, h: JobHandle) -> &Job {
        &self.jobs[h.0]
    }

    /// Jobs in that state (compared by variant).
    pub fn count_jobs(&self, pred: impl Fn(&JobState) -> bool) -> usize {
        self.jobs.iter().filter(|j| pred(&j.state)).count()
    }

    /// Whether every job is completed.
    pub fn all_completed(&self) -> bool {
        self.jobs.iter().all(|j| matches!(j.state, JobState::Completed { .. }))
    }

    /// Whether a health message ever (current or past) contained `needle`.
    pub fn health_ever_mentions(&self, needle: &str) -> bool {
        self.health_history.iter().any(|m| m.message.contains(needle))
    }

    pub(super) fn job_by_names(
        &self,
        pipeline: &str,
        counter: i64,
        stage: &str,
        stage_counter: &str,
        job: &str,
    ) -> Option<JobHandle> {
        self.jobs
            .iter()
            .find(|j| {
                let i = &j.identifier;
                i.pipeline_name == pipeline
                    && i.pipeline_counter == counter
                    && i.stage_name == stage
                    && i.stage_counter == stage_counter
                    && i.job_name == job
            })
            .map(|j| j.handle)
    }

    /// A short text picture for failure messages.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let waiting = self.count_jobs(|s| *s == JobState::Waiting);
        let running = self.count_jobs(|s| matches!(s, JobState::Running { .. }));
        let done = self.count_jobs(|s| matches!(s, JobState::Completed { .. }));
        s.push_str(&format!(
            "jobs: {} ({waiting} waiting, {running} running, {done} completed); agents: {} registered, {} deleted; registrations {} ok, {} rejected; plugin processes: {}\n",
            self.jobs.len(),
            self.agents.len(),
            self.deleted_agents.len(),
            self.registrations,
            self.rejections.len(),
            self.generation
        ));
        for j in self.jobs.iter().filter(|j| !matches!(j.state, JobState::Completed { .. })).take(10) {
            s.push_str(&format!(
                "  job {} (id {}): {:?}, create-agent posted {} answered {} failed {}\n",
                j.handle.0,
                j.identifier.job_id,
                j.state,
                j.create_agent_posted,
                j.create_agent_answered,
                j.create_agent_failed
            ));
        }
        for r in self.rejections.iter().take(5) {
            s.push_str(&format!("  rejected {}: {}\n", r.agent_id, r.reason));
        }
        for m in &self.health {
            s.push_str(&format!("  health {}: {}\n", m.kind, m.message));
        }
        for e in self.error_responses.iter().rev().take(5) {
            s.push_str(&format!("  plugin answered {} with {}: {}\n", e.name, e.code, e.body));
        }
        for e in self.host_errors.iter().rev().take(5) {
            s.push_str(&format!("  host error: {e}\n"));
        }
        for v in self.violations.iter().take(5) {
            s.push_str(&format!("  VIOLATION: {v}\n"));
        }
        // What the plugin decided, not the SDK's trace around it.
        let decided = |l: &&str| !matches!(l.split_whitespace().nth(1), Some("DEBUG" | "TRACE"));
        let tail: Vec<&str> = self.stderr.lines().rev().filter(decided).take(25).collect();
        s.push_str("  plugin stderr (last lines, info and above):\n");
        for l in tail.iter().rev() {
            s.push_str(&format!("    {l}\n"));
        }
        s
    }
}

/// The plugin's answer to a request.
#[derive(Debug, Clone)]
pub struct Reply {
    pub code: i64,
    pub body: Value,
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostError {
    /// No plugin process is running.
    PluginDown,
    /// The process ended before it answered.
    Gone,
    /// No answer within `request_timeout`.
    Timeout,
}

/// What the load sequence got back.
#[derive(Debug, Clone)]
pub struct LoadReport {
    pub hello: Value,
    pub migrate_config: Value,
    pub elastic_profile_metadata: Value,
    pub elastic_profile_view: Value,
    pub cluster_profile_metadata: Value,
    pub cluster_profile_view: Value,
    pub icon: Value,
    pub capabilities: Value,
}

/// One delete-agents call of the plugin.
#[derive(Debug, Clone)]
pub struct DeleteCall {
    /// Which plugin process made it (`HostState::generation` then).
    pub generation: u64,
    pub at: Instant,
    pub agent_ids: Vec<String>,
}

impl HostState {
    /// Agents one plugin process named in more than one delete-agents call: (process, agent, calls).
    pub fn agents_deleted_twice(&self) -> Vec<(u64, String, usize)> {
        let mut named: BTreeMap<(u64, &str), usize> = BTreeMap::new();
        for call in &self.delete_calls {
            for id in &call.agent_ids {
                *named.entry((call.generation, id.as_str())).or_default() += 1;
            }
        }
        named.into_iter().filter(|(_, n)| *n > 1).map(|((g, id), n)| (g, id.to_string(), n)).collect()
    }

    /// When an agent was first named in a delete-agents call.
    pub fn first_deleted_at(&self, agent_id: &str) -> Option<Instant> {
        self.delete_calls.iter().find(|c| c.agent_ids.iter().any(|a| a == agent_id)).map(|c| c.at)
    }
}
