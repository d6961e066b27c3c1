//! `GoCdHost`: a GoCD server simulator that drives the real plugin binary over stdio.
//!
//! It plays what GoCD does (`docs/protocol.md`: the framing, "Server processing semantics", "Agent auto-registration"):
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
//!
//! Files: `model` (configuration, jobs, agents, the state), `requests` (host→plugin calls,
//! the load sequence, pings, status reports), `jobs` (jobs, keys and the agent registry),
//! `callbacks` (plugin→host calls), `timers` (ping, re-sends, assignment, completion).

mod callbacks;
mod jobs;
mod model;
mod requests;
mod timers;

pub use model::*;

use std::collections::HashMap;
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
    /// Where each agent's next assignment round starts in the waiting jobs (with a limit of asks).
    cursors: Mutex<HashMap<String, usize>>,
    hello: Mutex<Value>,
    /// The current process finished the load sequence (timers wait for it, as GoCD does).
    loaded: AtomicBool,
    /// Cluster profiles an administrator edited ([`GoCdHost::edit_cluster_profile`]): their
    /// properties from then on.
    edited: Mutex<HashMap<String, Props>>,
    /// Elastic profiles an administrator edited ([`GoCdHost::edit_elastic_profile`]).
    edited_elastic: Mutex<HashMap<String, Props>>,
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
                cursors: Mutex::new(HashMap::new()),
                hello: Mutex::new(Value::Null),
                loaded: AtomicBool::new(false),
                edited: Mutex::new(HashMap::new()),
                edited_elastic: Mutex::new(HashMap::new()),
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
            None => (plugin_binary(), vec!["serve".to_string()]),
        };
        let mut cmd = Command::new(&program);
        cmd.args(&args);
        // Nothing of the test's own AWS, OpenTelemetry or proxy settings: a test sets what it means.
        for (k, _) in std::env::vars_os() {
            let name = k.to_string_lossy();
            if name.starts_with("AWS_") || name.starts_with("OTEL_") || super::forward_proxy::is_proxy_variable(&name) {
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
            // Every end-to-end run logs at trace, so every run's secret scan reads the most the
            // plugin can print; a test may set its own level in `cfg.env`.
            .env("RUST_LOG", "trace");
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
            if self.inner.config.keep_stdout && !is_migrate_config_answer(&buf) {
                self.state().stdout.push_str(&String::from_utf8_lossy(&buf));
            }
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
                        (None, _) => {
                            self.violation(format!("[{g}] response to no request in flight: {}", preview(text)))
                        }
                        (Some(_), None) => {
                            self.violation(format!("[{g}] response without integer code: {}", preview(text)))
                        }
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
                    let (code, answer) = self.handle_callback(g, &name, &version, body);
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

    /// The process id of the running plugin (for its `/proc/<pid>/status`).
    pub async fn plugin_pid(&self) -> Option<u32> {
        self.inner.child.lock().await.as_ref().and_then(Child::id)
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

    /// SIGTERM (sent with `kill`, no extra crate) and up to 15 s for the exit; `None` when no
    /// process was running or it did not exit in time (it is then killed).
    pub async fn terminate(&self) -> Option<ExitStatus> {
        let mut child = self.inner.child.lock().await.take()?;
        let pid = child.id()?;
        let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status().await;
        let status = match tokio::time::timeout(Duration::from_secs(15), child.wait()).await {
            Ok(Ok(s)) => Some(s),
            _ => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                None
            }
        };
        if let Some(conn) = self.inner.conn.lock().unwrap().take() {
            conn.close_stdin();
        }
        status
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

/// Whether a stdout line is the answer to migrate-config: the profiles GoCD sent, handed back
/// with their secure values (GoCD stores them encrypted again), the one place the protocol
/// itself carries them. The secret scan of stdout leaves these lines out.
pub fn is_migrate_config_answer(line: &[u8]) -> bool {
    serde_json::from_slice::<Value>(line).is_ok_and(|v| {
        v.get("type").and_then(Value::as_str) == Some("response")
            && v.get("body").and_then(|b| b.get("cluster_profiles")).is_some()
    })
}

/// The plugin binary: `ECS_EA_PLUGIN_BIN`, else the one cargo built beside the running test,
/// bench or example, else the target directory's debug build.
pub fn plugin_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("ECS_EA_PLUGIN_BIN") {
        return PathBuf::from(path);
    }
    // Cargo builds the plugin's binary beside the test, bench or example that runs: a test or
    // bench in `<profile>/deps/`, an example in `<profile>/examples/`, the binary in `<profile>/`.
    let beside = std::env::current_exe().ok().and_then(|exe| {
        exe.ancestors().skip(1).take(2).map(|dir| dir.join("ecs-elastic-agent")).find(|bin| bin.is_file())
    });
    if let Some(bin) = beside {
        return bin;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("target"));
    target.join("debug").join("ecs-elastic-agent")
}
