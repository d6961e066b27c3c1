//! `GoCdHost`: a GoCD server simulator that drives the real plugin binary over stdio.
//!
//! It plays what GoCD does (PROTOCOL.md Part A, §B4, §B5):
//! - starts `ecs-elastic-agent serve` with the AWS environment pointed at the test's endpoint,
//!   reads and checks the hello line, and runs the load sequence ([`GoCdHost::load`]);
//! - sends requests with ids and awaits the matching responses, many in flight at once;
//! - answers the plugin's `go.processor.*` callbacks from its own state (agent registry, server
//!   info, server-health messages, console logs), 404 for unknown ones;
//! - checks that every stdout line is exactly one JSON object of type hello, request or response
//!   (violations are recorded, and [`GoCdHost::shutdown`] panics on any);
//! - keeps jobs: [`GoCdHost::add_job`] posts create-agent with a fresh single-use auto-register
//!   key, re-posted with a new key every `starvation_interval` while the job waits;
//! - keeps an agent registry that accepts a registration only with a valid, unused key
//!   ([`GoCdHost::register_agent`], called by the agent simulator);
//! - runs timers ([`GoCdHost::start_loops`]): server-ping every `ping_interval`; an assignment
//!   loop that offers waiting jobs to idle agents through should-assign-work, runs a job for its
//!   duration, then sends job-completion;
//! - survives the plugin being killed ([`GoCdHost::kill`]) and starts a new one with the same
//!   state ([`GoCdHost::restart`]).
//!
//! Simplification: when a building agent is deleted, its job is rescheduled at once (new job id,
//! waiting again, create-agent posted), where GoCD would wait for lost contact first.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinHandle;

/// The plugin's id.
pub const PLUGIN_ID: &str = "cd.go.contrib.elastic-agent.ecs";
/// The request name prefix of the v5 extension.
pub const PREFIX: &str = "cd.go.elastic-agent.";

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
    /// Extra environment for the plugin; wins over the defaults (`RUST_LOG=info`, the AWS ones).
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
}

impl HostConfig {
    /// Defaults for tests: test keys, us-east-1, ping every 2 s, re-send every 3 s.
    pub fn new(aws_endpoint: &str) -> Self {
        HostConfig {
            aws_endpoint: aws_endpoint.to_string(),
            access_key_id: super::moto::TEST_ACCESS_KEY_ID.into(),
            secret_access_key: super::moto::TEST_SECRET_ACCESS_KEY.into(),
            region: super::moto::REGION.into(),
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
}

impl JobSpec {
    /// A job of that elastic profile, no environment.
    pub fn new(elastic_profile: &str, duration: Duration) -> Self {
        JobSpec { elastic_profile: elastic_profile.into(), environment: None, duration }
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

/// GoCD's job identifier (PROTOCOL.md §B1.5).
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
    pub last_create_posted: Option<Instant>,
    /// Every key issued for this job, oldest first.
    pub keys: Vec<String>,
    pub added_at: Instant,
    pub started_at: Option<Instant>,
    pub completed_at: Option<Instant>,
    /// Job ids this job had before reschedules.
    pub previous_job_ids: Vec<i64>,
    /// The code the plugin answered job-completion with.
    pub completion_code: Option<i64>,
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
    /// The elastic agent object (PROTOCOL.md §B1.5).
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
    pub jobs: Vec<Job>,
    pub agents: Vec<Agent>,
    /// Agent ids deleted by the plugin, in order.
    pub deleted_agents: Vec<String>,
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
    /// How many plugin processes were started.
    pub generation: u64,
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

    fn job_by_names(&self, pipeline: &str, counter: i64, stage: &str, stage_counter: &str, job: &str) -> Option<JobHandle> {
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
                j.handle.0, j.identifier.job_id, j.state, j.create_agent_posted, j.create_agent_answered, j.create_agent_failed
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
        let tail: Vec<&str> = self.stderr.lines().rev().take(25).collect();
        s.push_str("  plugin stderr (last lines):\n");
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

/// The wire to one plugin process.
struct Conn {
    generation: u64,
    tx: Mutex<Option<mpsc::UnboundedSender<String>>>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    alive: AtomicBool,
    reader: Mutex<Option<JoinHandle<()>>>,
    stderr_reader: Mutex<Option<JoinHandle<()>>>,
}

impl Conn {
    fn send_line(&self, line: String) -> bool {
        match self.tx.lock().unwrap().as_ref() {
            Some(tx) => tx.send(line).is_ok(),
            None => false,
        }
    }

    fn close_stdin(&self) {
        self.tx.lock().unwrap().take();
    }
}

struct Inner {
    config: HostConfig,
    server_id: String,
    state: Mutex<HostState>,
    conn: Mutex<Option<Arc<Conn>>>,
    child: tokio::sync::Mutex<Option<Child>>,
    next_request_id: AtomicU64,
    next_job_id: AtomicI64,
    create_agent_slots: Arc<Semaphore>,
    loops: Mutex<Vec<JoinHandle<()>>>,
    pings_paused: AtomicBool,
    asked: Mutex<HashMap<(String, i64), Instant>>,
    hello: Mutex<Value>,
    /// The current process finished the load sequence (timers wait for it, as GoCD does).
    loaded: AtomicBool,
}

/// The GoCD server simulator (cheap to clone: all clones share one host).
#[derive(Clone)]
pub struct GoCdHost {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for GoCdHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoCdHost").field("server_id", &self.inner.server_id).finish()
    }
}

fn env_matches(job_env: Option<&str>, agent_envs: &[String]) -> bool {
    match job_env {
        Some(e) => agent_envs.iter().any(|a| a == e),
        None => agent_envs.is_empty(),
    }
}

impl GoCdHost {
    /// A host with no plugin process yet.
    pub fn new(config: HostConfig) -> GoCdHost {
        let slots = config.create_agent_concurrency.max(1);
        GoCdHost {
            inner: Arc::new(Inner {
                server_id: format!("gocd-{}", uuid::Uuid::new_v4()),
                config,
                state: Mutex::new(HostState::default()),
                conn: Mutex::new(None),
                child: tokio::sync::Mutex::new(None),
                next_request_id: AtomicU64::new(1),
                next_job_id: AtomicI64::new(1000),
                create_agent_slots: Arc::new(Semaphore::new(slots)),
                loops: Mutex::new(Vec::new()),
                pings_paused: AtomicBool::new(false),
                asked: Mutex::new(HashMap::new()),
                hello: Mutex::new(Value::Null),
                loaded: AtomicBool::new(false),
            }),
        }
    }

    /// A host with the plugin started and its hello line checked.
    ///
    /// # Panics
    /// When the plugin does not start or its first line is not a valid hello.
    pub async fn start(config: HostConfig) -> GoCdHost {
        let host = GoCdHost::new(config);
        if let Err(e) = host.spawn_plugin().await {
            panic!("plugin did not start: {e}\n{}", host.with_state(|s| s.summary()));
        }
        host
    }

    /// [`GoCdHost::start`], [`GoCdHost::load`] and [`GoCdHost::start_loops`]: a GoCD with the plugin loaded.
    pub async fn launch(config: HostConfig) -> GoCdHost {
        let host = GoCdHost::start(config).await;
        host.load().await;
        host.start_loops();
        host
    }

    /// The configuration.
    pub fn config(&self) -> &HostConfig {
        &self.inner.config
    }

    /// This GoCD server's id (as server-info answers it).
    pub fn server_id(&self) -> &str {
        &self.inner.server_id
    }

    /// Reads the state.
    pub fn with_state<R>(&self, f: impl FnOnce(&HostState) -> R) -> R {
        f(&self.inner.state.lock().unwrap())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HostState> {
        self.inner.state.lock().unwrap()
    }

    fn violation(&self, v: String) {
        eprintln!("world: PROTOCOL VIOLATION: {v}");
        self.state().violations.push(v);
    }

    // ----- the process -----

    /// Starts a plugin process (the previous one must be gone) and waits for its hello line.
    pub async fn spawn_plugin(&self) -> Result<Value, String> {
        let cfg = &self.inner.config;
        let (program, args) = match &cfg.program {
            Some((p, a)) => (p.clone(), a.clone()),
            None => (PathBuf::from(env!("CARGO_BIN_EXE_ecs-elastic-agent")), vec!["serve".to_string()]),
        };
        let mut cmd = Command::new(&program);
        cmd.args(&args);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("AWS_") {
                cmd.env_remove(k);
            }
        }
        cmd.env("AWS_ENDPOINT_URL", &cfg.aws_endpoint)
            .env("AWS_ACCESS_KEY_ID", &cfg.access_key_id)
            .env("AWS_SECRET_ACCESS_KEY", &cfg.secret_access_key)
            .env("AWS_REGION", &cfg.region)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_CONFIG_FILE", "/nonexistent/ecs-ea-world/config")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/ecs-ea-world/credentials")
            .env("RUST_LOG", "info");
        for (k, v) in &cfg.env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        self.inner.loaded.store(false, Ordering::SeqCst);
        let mut child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let generation = {
            let mut st = self.state();
            st.generation += 1;
            let g = st.generation;
            st.stderr.push_str(&format!("--- plugin process {g} ---\n"));
            g
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let conn = Arc::new(Conn {
            generation,
            tx: Mutex::new(Some(tx)),
            pending: Mutex::new(HashMap::new()),
            alive: AtomicBool::new(true),
            reader: Mutex::new(None),
            stderr_reader: Mutex::new(None),
        });
        // Writer: lines to stdin; stdin closes when the sender is taken.
        tokio::spawn(async move {
            let mut stdin = stdin;
            while let Some(line) = rx.recv().await {
                if stdin.write_all(line.as_bytes()).await.is_err() || stdin.write_all(b"\n").await.is_err() {
                    break;
                }
                let _ = stdin.flush().await;
            }
        });
        let (hello_tx, hello_rx) = oneshot::channel();
        let reader = tokio::spawn(self.clone().read_stdout(conn.clone(), stdout, hello_tx));
        *conn.reader.lock().unwrap() = Some(reader);
        let host = self.clone();
        let stderr_reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if host.inner.config.echo_stderr {
                    eprintln!("plugin[{generation}]: {line}");
                }
                let mut st = host.state();
                st.stderr.push_str(&line);
                st.stderr.push('\n');
            }
        });
        *conn.stderr_reader.lock().unwrap() = Some(stderr_reader);
        *self.inner.child.lock().await = Some(child);
        *self.inner.conn.lock().unwrap() = Some(conn);
        match tokio::time::timeout(Duration::from_secs(20), hello_rx).await {
            Ok(Ok(Ok(hello))) => {
                *self.inner.hello.lock().unwrap() = hello.clone();
                Ok(hello)
            }
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err("the plugin closed stdout without a hello line".into()),
            Err(_) => Err("no hello line within 20 s".into()),
        }
    }

    async fn read_stdout(
        self,
        conn: Arc<Conn>,
        stdout: tokio::process::ChildStdout,
        hello_tx: oneshot::Sender<Result<Value, String>>,
    ) {
        let mut hello_tx = Some(hello_tx);
        let mut reader = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let g = conn.generation;
            let Some(text) = buf.strip_suffix(b"\n") else {
                self.violation(format!("[{g}] stdout ended with a line without newline: {}", preview(&buf)));
                break;
            };
            let parsed: Result<Value, _> = serde_json::from_slice(text);
            let msg = match parsed {
                Ok(Value::Object(m)) => m,
                Ok(_) => {
                    self.violation(format!("[{g}] stdout line is JSON but not an object: {}", preview(text)));
                    continue;
                }
                Err(_) => {
                    self.violation(format!("[{g}] stdout line is not one JSON object: {}", preview(text)));
                    continue;
                }
            };
            let kind = msg.get("type").and_then(Value::as_str).unwrap_or("").to_string();
            if let Some(tx) = hello_tx.take() {
                let result = check_hello(&msg);
                if let Err(e) = &result {
                    self.violation(format!("[{g}] {e}"));
                }
                let _ = tx.send(result);
                if kind == "hello" {
                    continue;
                }
            }
            match kind.as_str() {
                "response" => {
                    let id = msg.get("id").and_then(Value::as_u64);
                    let code = msg.get("code").and_then(Value::as_i64);
                    let waiter = id.and_then(|id| conn.pending.lock().unwrap().remove(&id));
                    match (waiter, code) {
                        (Some(w), Some(code)) => {
                            let body = msg.get("body").cloned().unwrap_or(Value::Null);
                            if !msg.contains_key("body") {
                                self.violation(format!("[{g}] response without body: {}", preview(text)));
                            }
                            let _ = w.send(Reply { code, body });
                        }
                        (None, _) => self.violation(format!("[{g}] response to no request in flight: {}", preview(text))),
                        (Some(_), None) => self.violation(format!("[{g}] response without integer code: {}", preview(text))),
                    }
                }
                "request" => {
                    let id = msg.get("id").cloned().unwrap_or(Value::Null);
                    let name = msg.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                    let version = msg.get("version").and_then(Value::as_str).unwrap_or("").to_string();
                    let body = msg.get("body").cloned().unwrap_or(Value::Null);
                    if !(id.is_u64() || id.is_string()) || name.is_empty() {
                        self.violation(format!("[{g}] callback without id or name: {}", preview(text)));
                    }
                    let (code, answer) = self.handle_callback(&name, &version, body);
                    let line = json!({"type": "response", "id": id, "code": code, "body": answer}).to_string();
                    conn.send_line(line);
                }
                "hello" => self.violation(format!("[{g}] a second hello line")),
                other => self.violation(format!("[{g}] stdout line of unknown type {other:?}: {}", preview(text))),
            }
        }
        conn.alive.store(false, Ordering::SeqCst);
        conn.pending.lock().unwrap().clear();
    }

    fn current_conn(&self) -> Option<Arc<Conn>> {
        self.inner.conn.lock().unwrap().clone().filter(|c| c.alive.load(Ordering::SeqCst))
    }

    /// Whether a plugin process is up.
    pub fn plugin_running(&self) -> bool {
        self.current_conn().is_some()
    }

    /// Whether a plugin process is up and has been through the load sequence.
    pub fn plugin_ready(&self) -> bool {
        self.plugin_running() && self.inner.loaded.load(Ordering::SeqCst)
    }

    /// SIGKILLs the plugin (kill -9) and waits until it is gone.
    pub async fn kill(&self) {
        if let Some(mut child) = self.inner.child.lock().await.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
        if let Some(conn) = self.inner.conn.lock().unwrap().take() {
            conn.close_stdin();
            conn.alive.store(false, Ordering::SeqCst);
            conn.pending.lock().unwrap().clear();
        }
    }

    /// A new plugin process with the same GoCD state, loaded again (GoCD restarting its plugin).
    pub async fn restart(&self) {
        self.kill().await;
        if let Err(e) = self.spawn_plugin().await {
            panic!("restarted plugin did not start: {e}\n{}", self.with_state(|s| s.summary()));
        }
        self.load().await;
    }

    /// Closes stdin, waits for the exit (15 s at most), and returns the exit status and any
    /// violations. Stops the timers first.
    pub async fn try_shutdown(&self) -> Result<ExitStatus, Vec<String>> {
        self.stop_loops();
        let conn = self.inner.conn.lock().unwrap().take();
        if let Some(c) = &conn {
            c.close_stdin();
        }
        let mut problems = Vec::new();
        let mut status = None;
        if let Some(mut child) = self.inner.child.lock().await.take() {
            match tokio::time::timeout(Duration::from_secs(15), child.wait()).await {
                Ok(Ok(s)) => status = Some(s),
                Ok(Err(e)) => problems.push(format!("waiting for the plugin failed: {e}")),
                Err(_) => {
                    problems.push("the plugin did not exit within 15 s of EOF on stdin".into());
                    let _ = child.start_kill();
                    status = child.wait().await.ok();
                }
            }
        }
        if let Some(c) = conn {
            let reader = c.reader.lock().unwrap().take();
            if let Some(r) = reader {
                let _ = tokio::time::timeout(Duration::from_secs(5), r).await;
            }
            let stderr_reader = c.stderr_reader.lock().unwrap().take();
            if let Some(r) = stderr_reader {
                let _ = tokio::time::timeout(Duration::from_secs(5), r).await;
            }
        }
        if let Some(s) = status {
            if !s.success() {
                problems.push(format!("the plugin exited with {s} after EOF on stdin (expected 0)"));
            }
        }
        let mut all = self.with_state(|s| s.violations.clone());
        all.extend(problems);
        match (all.is_empty(), status) {
            (true, Some(s)) => Ok(s),
            (true, None) => Err(vec!["no plugin process to shut down".into()]),
            (false, _) => Err(all),
        }
    }

    /// [`GoCdHost::try_shutdown`], panicking on any violation or a non-zero exit.
    pub async fn shutdown(&self) {
        if let Err(problems) = self.try_shutdown().await {
            panic!(
                "plugin shutdown found {} problem(s):\n  {}\n{}",
                problems.len(),
                problems.join("\n  "),
                self.with_state(|s| s.summary())
            );
        }
    }

    /// Panics if any stdout or callback violation was recorded so far.
    pub fn assert_no_violations(&self) {
        let v = self.with_state(|s| s.violations.clone());
        assert!(v.is_empty(), "protocol violations:\n  {}", v.join("\n  "));
    }

    // ----- requests -----

    /// Sends a v5 request (`name` without or with the `cd.go.elastic-agent.` prefix) and awaits its answer.
    pub async fn request(&self, name: &str, body: Value) -> Result<Reply, HostError> {
        let full = if name.starts_with(PREFIX) || name.starts_with("go.") { name.to_string() } else { format!("{PREFIX}{name}") };
        let short = full.trim_start_matches(PREFIX).to_string();
        *self.state().requests.entry(short.clone()).or_insert(0) += 1;
        let Some(conn) = self.current_conn() else {
            self.state().host_errors.push(format!("{short}: no plugin running"));
            return Err(HostError::PluginDown);
        };
        let id = self.inner.next_request_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        conn.pending.lock().unwrap().insert(id, tx);
        let line = json!({"type": "request", "id": id, "name": full, "version": "5.0", "body": body}).to_string();
        if !conn.send_line(line) {
            conn.pending.lock().unwrap().remove(&id);
            self.state().host_errors.push(format!("{short}: stdin closed"));
            return Err(HostError::PluginDown);
        }
        let result = match tokio::time::timeout(self.inner.config.request_timeout, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(HostError::Gone),
            Err(_) => {
                conn.pending.lock().unwrap().remove(&id);
                Err(HostError::Timeout)
            }
        };
        match &result {
            Ok(r) if r.code != 200 => self.state().error_responses.push(ErrorResponse {
                name: short,
                code: r.code,
                body: r.body.clone(),
            }),
            Ok(_) => {}
            Err(e) => self.state().host_errors.push(format!("{short} (request {id}): {e:?}")),
        }
        result
    }

    async fn expect_200(&self, name: &str, body: Value) -> Result<Value, String> {
        match self.request(name, body).await {
            Ok(r) if r.code == 200 => Ok(r.body),
            Ok(r) => Err(format!("{name} answered {}: {}", r.code, r.body)),
            Err(e) => Err(format!("{name} got no answer: {e:?}")),
        }
    }

    /// The load sequence of PROTOCOL.md §B4.1: migrate-config, then the six plugin-info calls in
    /// GoCD's order, then the tolerated plugin-settings calls. Checks shapes GoCD relies on.
    pub async fn try_load(&self) -> Result<LoadReport, String> {
        let cfg = &self.inner.config;
        let migrate = json!({
            "plugin_settings": {},
            "cluster_profiles": cfg.cluster_profiles.iter().map(|c| json!({
                "id": c.id, "plugin_id": PLUGIN_ID, "properties": c.properties,
            })).collect::<Vec<_>>(),
            "elastic_agent_profiles": cfg.elastic_profiles.iter().map(|e| json!({
                "id": e.id, "plugin_id": PLUGIN_ID, "cluster_profile_id": e.cluster_profile_id, "properties": e.properties,
            })).collect::<Vec<_>>(),
        });
        let migrated = self.expect_200("migrate-config", migrate).await?;
        for key in ["cluster_profiles", "elastic_agent_profiles"] {
            if !migrated[key].is_array() {
                return Err(format!("migrate-config answer has no {key} array: {migrated}"));
            }
        }
        let elastic_profile_metadata = self.expect_200("get-elastic-agent-profile-metadata", Value::Null).await?;
        let elastic_profile_view = self.expect_200("get-elastic-agent-profile-view", Value::Null).await?;
        let cluster_profile_metadata = self.expect_200("get-cluster-profile-metadata", Value::Null).await?;
        let cluster_profile_view = self.expect_200("get-cluster-profile-view", Value::Null).await?;
        let icon = self.expect_200("get-icon", Value::Null).await?;
        let capabilities = self.expect_200("get-capabilities", Value::Null).await?;
        for (what, v) in [("elastic", &elastic_profile_metadata), ("cluster", &cluster_profile_metadata)] {
            if !v.is_array() {
                return Err(format!("{what} profile metadata is not an array: {v}"));
            }
        }
        for (what, v) in [("elastic", &elastic_profile_view), ("cluster", &cluster_profile_view)] {
            if v["template"].as_str().is_none_or(|t| t.trim().is_empty()) {
                return Err(format!("{what} profile view has a blank template (GoCD: \"Template was blank!\")"));
            }
        }
        if !(icon["content_type"].is_string() && icon["data"].is_string()) {
            return Err(format!("get-icon answer is not {{content_type, data}} strings: {icon}"));
        }
        if !capabilities.is_object() {
            return Err(format!("get-capabilities answer is not an object: {capabilities}"));
        }
        // GoCD sends these to every plugin and tolerates any failure.
        let _ = self.request("go.plugin-settings.get-configuration", Value::Null).await;
        let _ = self.request("go.plugin-settings.get-view", Value::Null).await;
        self.state().error_responses.retain(|e| !e.name.starts_with("go.plugin-settings."));
        self.inner.loaded.store(true, Ordering::SeqCst);
        Ok(LoadReport {
            hello: self.inner.hello.lock().unwrap().clone(),
            migrate_config: migrated,
            elastic_profile_metadata,
            elastic_profile_view,
            cluster_profile_metadata,
            cluster_profile_view,
            icon,
            capabilities,
        })
    }

    /// [`GoCdHost::try_load`], panicking on failure.
    pub async fn load(&self) -> LoadReport {
        match self.try_load().await {
            Ok(r) => r,
            Err(e) => panic!("plugin load sequence failed: {e}\n{}", self.with_state(|s| s.summary())),
        }
    }

    fn cluster_profile(&self, id: &str) -> &ClusterProfile {
        self.inner
            .config
            .cluster_profiles
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no cluster profile {id:?}"))
    }

    fn elastic_profile(&self, id: &str) -> &ElasticProfile {
        self.inner
            .config
            .elastic_profiles
            .iter()
            .find(|e| e.id == id)
            .unwrap_or_else(|| panic!("no elastic profile {id:?}"))
    }

    fn all_cluster_properties(&self) -> Vec<Props> {
        self.inner.config.cluster_profiles.iter().map(|c| c.properties.clone()).collect()
    }

    /// One server-ping with every cluster profile, awaited.
    pub async fn server_ping(&self) -> Result<Reply, HostError> {
        let idx = {
            let mut st = self.state();
            st.pings.push(PingRecord { started: Instant::now(), finished: None, code: None });
            st.pings.len() - 1
        };
        let body = json!({"all_cluster_profile_properties": self.all_cluster_properties()});
        let r = self.request("server-ping", body).await;
        let mut st = self.state();
        st.pings[idx].finished = Some(Instant::now());
        st.pings[idx].code = r.as_ref().ok().map(|r| r.code);
        r
    }

    /// Stops (or resumes) the server-ping timer; explicit [`GoCdHost::server_ping`] still works.
    pub fn pause_pings(&self, paused: bool) {
        self.inner.pings_paused.store(paused, Ordering::SeqCst);
    }

    /// A status report request (`kind` = `plugin`, `cluster` or `agent`) with a raw body.
    pub async fn status_report(&self, kind: &str, body: Value) -> Result<Reply, HostError> {
        let r = self.request(&format!("{kind}-status-report"), body).await;
        if let Ok(reply) = &r {
            if let Some(view) = reply.body["view"].as_str() {
                self.state().views.push(view.to_string());
            }
        }
        r
    }

    /// The plugin status report (all cluster profiles).
    pub async fn plugin_status_report(&self) -> Result<Reply, HostError> {
        self.status_report("plugin", json!({"all_cluster_profiles_properties": self.all_cluster_properties()}))
            .await
    }

    /// The cluster status report of a cluster profile.
    pub async fn cluster_status_report(&self, cluster_profile_id: &str) -> Result<Reply, HostError> {
        let props = self.cluster_profile(cluster_profile_id).properties.clone();
        self.status_report("cluster", json!({"cluster_profile_properties": props})).await
    }

    /// The agent status report, by agent id and/or job (keys omitted when absent, as GoCD does).
    pub async fn agent_status_report(
        &self,
        cluster_profile_id: &str,
        agent_id: Option<&str>,
        job: Option<JobHandle>,
    ) -> Result<Reply, HostError> {
        let mut body = json!({"cluster_profile_properties": self.cluster_profile(cluster_profile_id).properties});
        if let Some(a) = agent_id {
            body["elastic_agent_id"] = json!(a);
        }
        if let Some(j) = job {
            body["job_identifier"] = self.with_state(|s| s.job(j).identifier.to_json());
        }
        self.status_report("agent", body).await
    }

    // ----- jobs -----

    /// Schedules a job and posts its first create-agent at once.
    pub async fn add_job(&self, spec: JobSpec) -> JobHandle {
        let _ = self.elastic_profile(&spec.elastic_profile);
        let handle = {
            let mut st = self.state();
            let n = st.jobs.len();
            let job_id = self.inner.next_job_id.fetch_add(1, Ordering::SeqCst);
            let identifier = JobIdentifier {
                pipeline_name: format!("pipeline-{n}"),
                pipeline_label: "1".into(),
                pipeline_counter: 1,
                stage_name: "build".into(),
                stage_counter: "1".into(),
                job_name: format!("job-{n}"),
                job_id,
            };
            st.jobs.push(Job {
                handle: JobHandle(n),
                spec,
                identifier,
                state: JobState::Waiting,
                create_agent_posted: 0,
                create_agent_answered: 0,
                create_agent_failed: 0,
                last_create_posted: None,
                keys: Vec::new(),
                added_at: Instant::now(),
                started_at: None,
                completed_at: None,
                previous_job_ids: Vec::new(),
                completion_code: None,
            });
            JobHandle(n)
        };
        self.post_create_agent(handle);
        handle
    }

    /// Schedules several jobs.
    pub async fn add_jobs(&self, spec: JobSpec, n: usize) -> Vec<JobHandle> {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.add_job(spec.clone()).await);
        }
        v
    }

    /// Cancels a waiting job (no more create-agent; GoCD sends the plugin nothing).
    pub fn cancel_job(&self, h: JobHandle) {
        let mut st = self.state();
        if st.jobs[h.0].state == JobState::Waiting {
            st.jobs[h.0].state = JobState::Cancelled;
        }
    }

    /// A job's current state.
    pub fn job_state(&self, h: JobHandle) -> JobState {
        self.with_state(|s| s.job(h).state.clone())
    }

    /// A job's current identifier.
    pub fn job_identifier(&self, h: JobHandle) -> JobIdentifier {
        self.with_state(|s| s.job(h).identifier.clone())
    }

    /// How many create-agent calls the plugin answered for this job.
    pub fn create_agent_answered(&self, h: JobHandle) -> u32 {
        self.with_state(|s| s.job(h).create_agent_answered)
    }

    /// Issues a fresh single-use auto-register key (valid `key_validity`).
    pub fn issue_key(&self, job: Option<JobHandle>) -> String {
        let key = uuid::Uuid::new_v4().to_string();
        let mut st = self.state();
        st.keys.insert(key.clone(), KeyInfo { job, issued_at: Instant::now(), used: false });
        st.issued_keys.push(key.clone());
        key
    }

    /// Every auto-register key issued so far.
    pub fn issued_keys(&self) -> Vec<String> {
        self.with_state(|s| s.issued_keys.clone())
    }

    /// Posts a create-agent for a waiting job with a new key (no-op for other states).
    fn post_create_agent(&self, h: JobHandle) {
        let key = self.issue_key(Some(h));
        let body = {
            let mut st = self.state();
            let job = &mut st.jobs[h.0];
            if job.state != JobState::Waiting {
                return;
            }
            job.create_agent_posted += 1;
            job.last_create_posted = Some(Instant::now());
            job.keys.push(key.clone());
            let ep = self.elastic_profile(&job.spec.elastic_profile);
            let cp = self.cluster_profile(&ep.cluster_profile_id);
            let mut body = json!({
                "auto_register_key": key,
                "elastic_agent_profile_properties": ep.properties,
                "cluster_profile_properties": cp.properties,
                "job_identifier": job.identifier.to_json(),
            });
            if let Some(env) = &job.spec.environment {
                body["environment"] = json!(env);
            }
            body
        };
        let host = self.clone();
        let slots = self.inner.create_agent_slots.clone();
        tokio::spawn(async move {
            let _permit = slots.acquire_owned().await;
            let r = host.request("create-agent", body).await;
            let mut st = host.state();
            let job = &mut st.jobs[h.0];
            match r {
                Ok(reply) if reply.code == 200 => job.create_agent_answered += 1,
                Ok(_) => {
                    job.create_agent_answered += 1;
                    job.create_agent_failed += 1;
                }
                Err(_) => job.create_agent_failed += 1,
            }
        });
    }

    // ----- the agent registry -----

    /// An agent auto-registers (GoCD's `AgentRegistrationController` checks, §B5). `environments`
    /// is the comma-separated `GO_EA_AUTO_REGISTER_ENVIRONMENT`. Refusals are recorded too.
    pub fn register_agent(&self, agent_id: &str, plugin_id: &str, key: &str, environments: Option<&str>) -> Result<(), String> {
        let mut st = self.state();
        let verdict = (|| {
            if agent_id.is_empty() || plugin_id.is_empty() {
                return Err("Elastic agents must submit both elasticAgentId and elasticPluginId".to_string());
            }
            let validity = self.inner.config.key_validity;
            match st.keys.get_mut(key) {
                Some(k) if !k.used && k.issued_at.elapsed() <= validity => k.used = true,
                Some(k) if k.used => return Err("Elastic agent registration requires an auto-register agent key: key already used".into()),
                Some(_) => return Err("Elastic agent registration requires an auto-register agent key: key expired".into()),
                None => return Err("Elastic agent registration requires an auto-register agent key: unknown key".into()),
            }
            if plugin_id != PLUGIN_ID {
                return Err(format!("agent registered for plugin {plugin_id:?}, not {PLUGIN_ID}"));
            }
            if st.agents.iter().any(|a| a.agent_id == agent_id) {
                return Err(format!("Duplicate Elastic agent Id used to register elastic agent: {agent_id}"));
            }
            Ok(())
        })();
        match verdict {
            Ok(()) => {
                let environments = environments
                    .unwrap_or("")
                    .split(',')
                    .map(str::trim)
                    .filter(|e| !e.is_empty())
                    .map(str::to_string)
                    .collect();
                st.registrations += 1;
                st.agents.push(Agent {
                    agent_id: agent_id.to_string(),
                    plugin_id: plugin_id.to_string(),
                    environments,
                    agent_state: "Idle",
                    build_state: "Idle",
                    config_state: "Enabled",
                    registered_at: Instant::now(),
                    job: None,
                });
                Ok(())
            }
            Err(reason) => {
                st.rejections.push(Rejection { agent_id: agent_id.to_string(), reason: reason.clone() });
                Err(reason)
            }
        }
    }

    /// The registry as list-agents would answer it.
    pub fn registry(&self) -> Vec<Agent> {
        self.with_state(|s| s.agents.clone())
    }

    /// The plugin's current server-health messages.
    pub fn health_messages(&self) -> Vec<HealthMessage> {
        self.with_state(|s| s.health.clone())
    }

    /// Console-log lines appended for a job.
    pub fn console_log(&self, h: JobHandle) -> Vec<String> {
        self.with_state(|s| s.console.iter().filter(|c| c.job == Some(h)).map(|c| c.text.clone()).collect())
    }

    /// Registrations refused so far.
    pub fn rejections(&self) -> Vec<Rejection> {
        self.with_state(|s| s.rejections.clone())
    }

    /// Everything the plugin wrote to stderr (all its processes).
    pub fn stderr_text(&self) -> String {
        self.with_state(|s| s.stderr.clone())
    }

    /// Polls the state until `pred` holds.
    ///
    /// # Panics
    /// After `timeout`, with `what` and a summary of the state.
    pub async fn wait_until(&self, what: &str, timeout: Duration, pred: impl Fn(&HostState) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.with_state(&pred) {
                return;
            }
            if Instant::now() > deadline {
                panic!("timed out after {timeout:?} waiting for {what}\n{}", self.with_state(|s| s.summary()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // ----- callbacks -----

    fn handle_callback(&self, name: &str, version: &str, body: Value) -> (i64, Value) {
        *self.state().callbacks.entry(name.to_string()).or_insert(0) += 1;
        let bad_version = |host: &GoCdHost| {
            host.violation(format!("callback {name} with unsupported api version {version:?}"));
            (400, json!({"message": format!("Unsupported version {version} for {name}")}))
        };
        match name {
            "go.processor.elastic-agents.list-agents" => {
                if version != "1.0" {
                    return bad_version(self);
                }
                let st = self.state();
                let agents: Vec<Value> = st.agents.iter().filter(|a| a.plugin_id == PLUGIN_ID).map(Agent::to_json).collect();
                (200, Value::Array(agents))
            }
            "go.processor.elastic-agents.disable-agents" | "go.processor.elastic-agents.delete-agents" => {
                if version != "1.0" {
                    return bad_version(self);
                }
                let Some(list) = agent_ids(&body) else {
                    self.violation(format!("{name} body is not an array of agent objects: {body}"));
                    return (400, json!({"message": "expected an array of agent objects"}));
                };
                if name.ends_with("disable-agents") {
                    self.disable_agents(&list);
                } else {
                    self.delete_agents(&list);
                }
                (200, Value::Null)
            }
            "go.processor.server-info.get" => {
                let mut info = json!({
                    "server_id": self.inner.server_id,
                    "site_url": "http://gocd.test:8153/go",
                    "secure_site_url": "https://gocd.test:8154/go",
                });
                match version {
                    "1.0" => {}
                    "2.0" => {
                        info["go_version"] = json!("25.1.0");
                        info["dist_version"] = json!("25.1.0 (20250101)");
                        info["git_revision"] = json!("0000000000000000000000000000000000000000");
                    }
                    _ => return bad_version(self),
                }
                (200, info)
            }
            "go.processor.server-health.add-messages" => {
                if version != "1.0" {
                    return bad_version(self);
                }
                let Some(items) = body.as_array() else {
                    self.violation(format!("server-health body is not an array: {body}"));
                    return (500, json!({"message": "expected an array"}));
                };
                let messages: Vec<HealthMessage> = items
                    .iter()
                    .map(|m| HealthMessage {
                        kind: if m["type"].as_str().is_some_and(|t| t.eq_ignore_ascii_case("warning")) {
                            "warning".into()
                        } else {
                            "error".into()
                        },
                        message: m["message"].as_str().unwrap_or("").to_string(),
                    })
                    .collect();
                let mut st = self.state();
                for m in &messages {
                    if !st.health_history.contains(m) {
                        st.health_history.push(m.clone());
                    }
                }
                st.health = messages;
                (200, Value::Null)
            }
            "go.processor.console-log.append" => {
                let (p, pc, s, sc, j) = match version {
                    "1.0" => ("pipelineName", "pipelineCounter", "stageName", "stageCounter", "jobName"),
                    "2.0" => ("pipeline_name", "pipeline_counter", "stage_name", "stage_counter", "job_name"),
                    _ => return bad_version(self),
                };
                let text_of = |v: &Value| match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => String::new(),
                };
                let pipeline = text_of(&body[p]);
                let counter: i64 = text_of(&body[pc]).parse().unwrap_or(-1);
                let stage = text_of(&body[s]);
                let stage_counter = text_of(&body[sc]);
                let job_name = text_of(&body[j]);
                let Some(text) = body["text"].as_str() else {
                    self.violation(format!("console-log {version} body without text: {body}"));
                    return (500, json!({"message": "Error: no text"}));
                };
                let mut st = self.state();
                let job = st.job_by_names(&pipeline, counter, &stage, &stage_counter, &job_name);
                st.console.push(ConsoleLine {
                    job,
                    key: format!("{pipeline}/{counter}/{stage}/{stage_counter}/{job_name}"),
                    text: text.to_string(),
                });
                (200, Value::Null)
            }
            "go.processor.plugin-settings.get" => {
                if version != "1.0" {
                    return (400, json!({"message": format!("Error while processing get PluginSettings request - unsupported version {version}")}));
                }
                (200, Value::Null)
            }
            _ => (404, json!({"message": format!("unknown api {name}")})),
        }
    }

    fn disable_agents(&self, ids: &[String]) {
        let mut st = self.state();
        for id in ids {
            if let Some(a) = st.agents.iter_mut().find(|a| &a.agent_id == id) {
                a.config_state = "Disabled";
                st.disabled_agents.push(id.clone());
            }
        }
    }

    fn delete_agents(&self, ids: &[String]) {
        let mut reschedule = Vec::new();
        {
            let mut st = self.state();
            for id in ids {
                let Some(pos) = st.agents.iter().position(|a| &a.agent_id == id) else { continue };
                let agent = st.agents.remove(pos);
                st.deleted_agents.push(agent.agent_id.clone());
                if let Some(h) = agent.job {
                    if matches!(&st.jobs[h.0].state, JobState::Running { agent_id } if agent_id == id) {
                        let new_id = self.inner.next_job_id.fetch_add(1, Ordering::SeqCst);
                        let job = &mut st.jobs[h.0];
                        job.previous_job_ids.push(job.identifier.job_id);
                        job.identifier.job_id = new_id;
                        job.state = JobState::Waiting;
                        job.started_at = None;
                        reschedule.push(h);
                    }
                }
            }
        }
        for h in reschedule {
            self.post_create_agent(h);
        }
    }

    // ----- timers -----

    /// Starts server-ping, create-agent re-sends and the assignment loop.
    pub fn start_loops(&self) {
        let mut loops = self.inner.loops.lock().unwrap();
        if !loops.is_empty() {
            return;
        }
        let host = self.clone();
        loops.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(host.inner.config.ping_interval).await;
                if !host.inner.pings_paused.load(Ordering::SeqCst) && host.plugin_ready() {
                    let _ = host.server_ping().await;
                }
            }
        }));
        let host = self.clone();
        loops.push(tokio::spawn(async move {
            let tick = (host.inner.config.starvation_interval / 4).clamp(Duration::from_millis(50), Duration::from_millis(500));
            loop {
                tokio::time::sleep(tick).await;
                if !host.plugin_ready() {
                    continue;
                }
                let due: Vec<JobHandle> = host.with_state(|s| {
                    s.jobs
                        .iter()
                        .filter(|j| j.state == JobState::Waiting)
                        .filter(|j| j.last_create_posted.is_none_or(|t| t.elapsed() >= host.inner.config.starvation_interval))
                        .map(|j| j.handle)
                        .collect()
                });
                for h in due {
                    host.post_create_agent(h);
                }
            }
        }));
        let host = self.clone();
        loops.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(host.inner.config.assign_interval).await;
                // Jobs finish and agents poll only while the plugin is there to hear about it.
                if host.plugin_ready() {
                    host.complete_due_jobs();
                    host.assign_work().await;
                }
            }
        }));
    }

    /// Stops the timers (also done by shutdown).
    pub fn stop_loops(&self) {
        for l in self.inner.loops.lock().unwrap().drain(..) {
            l.abort();
        }
    }

    fn complete_due_jobs(&self) {
        let mut completions = Vec::new();
        {
            let mut st = self.state();
            let now = Instant::now();
            let due: Vec<(JobHandle, String)> = st
                .jobs
                .iter()
                .filter_map(|j| match &j.state {
                    JobState::Running { agent_id } if j.started_at.is_some_and(|t| now >= t + j.spec.duration) => {
                        Some((j.handle, agent_id.clone()))
                    }
                    _ => None,
                })
                .collect();
            for (h, agent_id) in due {
                st.jobs[h.0].state = JobState::Completed { agent_id: agent_id.clone() };
                st.jobs[h.0].completed_at = Some(now);
                if let Some(a) = st.agents.iter_mut().find(|a| a.agent_id == agent_id) {
                    a.agent_state = "Idle";
                    a.build_state = "Idle";
                    a.job = None;
                }
                let job = &st.jobs[h.0];
                let ep = self.elastic_profile(&job.spec.elastic_profile);
                let cp = self.cluster_profile(&ep.cluster_profile_id);
                completions.push((
                    h,
                    json!({
                        "elastic_agent_id": agent_id,
                        "job_identifier": job.identifier.to_json(),
                        "elastic_agent_profile_properties": ep.properties,
                        "cluster_profile_properties": cp.properties,
                    }),
                ));
            }
        }
        for (h, body) in completions {
            let host = self.clone();
            tokio::spawn(async move {
                let code = host.request("job-completion", body).await.ok().map(|r| r.code);
                host.state().jobs[h.0].completion_code = code;
            });
        }
    }

    /// One round of agents polling for work: for each idle, enabled agent, the waiting jobs of its
    /// environment in schedule order, until the plugin says `true` (GoCD does this under one lock).
    async fn assign_work(&self) {
        let (agents, jobs) = self.with_state(|s| {
            let agents: Vec<(String, Value, Vec<String>)> = s
                .agents
                .iter()
                .filter(|a| a.agent_state == "Idle" && a.config_state == "Enabled")
                .map(|a| (a.agent_id.clone(), a.to_json(), a.environments.clone()))
                .collect();
            let jobs: Vec<(JobHandle, i64, Option<String>)> = s
                .jobs
                .iter()
                .filter(|j| j.state == JobState::Waiting)
                .map(|j| (j.handle, j.identifier.job_id, j.spec.environment.clone()))
                .collect();
            (agents, jobs)
        });
        let reask = self.inner.config.reask_interval;
        for (agent_id, agent_json, envs) in agents {
            for (h, job_id, env) in &jobs {
                if !env_matches(env.as_deref(), &envs) {
                    continue;
                }
                let pair = (agent_id.clone(), *job_id);
                if self.inner.asked.lock().unwrap().get(&pair).is_some_and(|t| t.elapsed() < reask) {
                    continue;
                }
                let body = self.with_state(|s| {
                    let job = s.job(*h);
                    if job.state != JobState::Waiting || job.identifier.job_id != *job_id {
                        return None;
                    }
                    let ep = self.elastic_profile(&job.spec.elastic_profile);
                    let cp = self.cluster_profile(&ep.cluster_profile_id);
                    let mut body = json!({
                        "agent": agent_json,
                        "job_identifier": job.identifier.to_json(),
                        "elastic_agent_profile_properties": ep.properties,
                        "cluster_profile_properties": cp.properties,
                    });
                    if let Some(e) = &job.spec.environment {
                        body["environment"] = json!(e);
                    }
                    Some(body)
                });
                let Some(body) = body else { continue };
                let answer = match self.request("should-assign-work", body).await {
                    Ok(r) if r.code == 200 => r.body == json!(true) || r.body == json!("true"),
                    _ => break,
                };
                if !answer {
                    self.inner.asked.lock().unwrap().insert(pair, Instant::now());
                    continue;
                }
                let mut st = self.state();
                let agent_ok = st
                    .agents
                    .iter()
                    .any(|a| a.agent_id == agent_id && a.agent_state == "Idle" && a.config_state == "Enabled");
                let job = &st.jobs[h.0];
                if agent_ok && job.state == JobState::Waiting && job.identifier.job_id == *job_id {
                    let job = &mut st.jobs[h.0];
                    job.state = JobState::Running { agent_id: agent_id.clone() };
                    job.started_at = Some(Instant::now());
                    if let Some(a) = st.agents.iter_mut().find(|a| a.agent_id == agent_id) {
                        a.agent_state = "Building";
                        a.build_state = "Building";
                        a.job = Some(*h);
                    }
                }
                break;
            }
        }
    }
}

fn agent_ids(body: &Value) -> Option<Vec<String>> {
    match body {
        Value::Null => Some(Vec::new()),
        Value::Array(items) => items.iter().map(|a| a["agent_id"].as_str().map(str::to_string)).collect(),
        _ => None,
    }
}

fn check_hello(msg: &serde_json::Map<String, Value>) -> Result<Value, String> {
    let v = Value::Object(msg.clone());
    if v["type"] != "hello" {
        return Err(format!("first stdout line is not a hello: {}", preview(v.to_string().as_bytes())));
    }
    if v["protocol"] != 1 {
        return Err(format!("hello speaks protocol {} (host speaks 1)", v["protocol"]));
    }
    if v["plugin_id"] != PLUGIN_ID {
        return Err(format!("hello names plugin {} (expected {PLUGIN_ID})", v["plugin_id"]));
    }
    if v["extension"] != "elastic-agent" {
        return Err(format!("hello names extension {} (expected elastic-agent)", v["extension"]));
    }
    if !v["extension_versions"].as_array().is_some_and(|a| a.iter().any(|x| x == "5.0")) {
        return Err(format!("hello offers extension versions {} (host needs 5.0)", v["extension_versions"]));
    }
    Ok(v)
}

fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if text.chars().count() > 300 {
        format!("{}... ({} bytes)", text.chars().take(300).collect::<String>(), bytes.len())
    } else {
        text.into_owned()
    }
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}
