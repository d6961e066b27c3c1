//! `AgentSimulator`: plays the containers the plugin starts.
//!
//! No container runs in moto, so this simulator watches the ECS clusters of the test (each
//! through the test's own SDK client for that account) every ~300 ms: ListTasks (desired
//! RUNNING) and DescribeTasks with tags. For each new task whose container overrides carry the
//! official GoCD agent image's variables (`GO_EA_SERVER_URL`, `GO_EA_AUTO_REGISTER_KEY`,
//! `GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID`, `GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID`, optional
//! `GO_EA_AUTO_REGISTER_ENVIRONMENT`, docs/protocol.md, "Agent auto-registration") it registers that agent with the
//! [`GoCdHost`] registry, after an optional delay, as the agent inside the container would.
//!
//! With a [`NetworkWorld`] in its policy, its agents also do what a build's agent does on a
//! real network: an agent registers only once its first request
//! (`GET <server>/admin/latest-agent.status`) gets a GoCD server's answer from where its task
//! runs, and a job's build first connects to each of the job's materials; one it cannot reach
//! fails the build, with git's words in the job's console. Both are decided by the task's
//! security groups, subnet routes and the hosts' firewalls as AWS keeps them
//! (`network.rs`).
//!
//! It also keeps the figures the tests check: tasks seen per job (`gocd:job-id` tag), and the
//! highest number of live tasks seen at once.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use aws_sdk_ecs::types::{DesiredStatus, Task, TaskField};
use tokio::task::JoinHandle;

use super::host::{GoCdHost, JobHandle, JobState};
use super::moto::{aws_error_text, in_cluster, task_override_env, task_tag};
use super::network::{material_host, NetworkWorld, TaskNetwork};

/// One ECS cluster in one account, seen through the test's own client.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub label: String,
    pub config: SdkConfig,
    pub cluster: String,
}

impl Fleet {
    /// A fleet.
    pub fn new(label: &str, config: &SdkConfig, cluster: &str) -> Fleet {
        Fleet { label: label.into(), config: config.clone(), cluster: cluster.into() }
    }
}

/// How the simulated agents behave.
#[derive(Debug, Clone, Default)]
pub struct SimPolicy {
    /// Time from first seeing a task to registering its agent (image pull, JVM start...).
    pub register_delay: Duration,
    /// Job ids (`gocd:job-id` tag) or agent ids whose agents never register.
    pub never_register: HashSet<String>,
    /// Job ids or agent ids whose agents wait until released ([`AgentSimulator::release`]).
    pub hold: HashSet<String>,
    /// Only tasks tagged with this `gocd:server-id` are this simulator's (several GoCD servers on
    /// one cluster: each host gets its own simulator). `None`: every task of the fleets.
    pub only_server_id: Option<String>,
    /// The network the agents' connections meet; `None`: every connection succeeds.
    pub network: Option<NetworkWorld>,
}

/// A task the simulator has seen.
#[derive(Debug, Clone)]
pub struct SeenTask {
    pub fleet: usize,
    pub task_arn: String,
    pub job_id: Option<String>,
    pub agent_id: Option<String>,
    pub auto_register_key: Option<String>,
    pub environment: Option<String>,
    pub server_url: Option<String>,
    pub plugin_id: Option<String>,
    pub tags: BTreeMap<String, String>,
    pub started_by: Option<String>,
    pub launch_type: Option<String>,
    pub capacity_provider: Option<String>,
    pub first_seen: Instant,
    /// `Some(Ok)` once registered, `Some(Err(reason))` when GoCD refused it.
    pub registration: Option<Result<(), String>>,
    /// With a network: whether the agent's first request reached the GoCD server (the last try).
    pub server_reached: Option<Result<(), String>>,
    pub last_status: String,
    pub stopped: bool,
    pub stopped_reason: Option<String>,
}

impl SeenTask {
    fn matches(&self, ids: &HashSet<String>) -> bool {
        self.job_id.as_ref().is_some_and(|j| ids.contains(j)) || self.agent_id.as_ref().is_some_and(|a| ids.contains(a))
    }
}

/// What the simulator knows; read it with [`AgentSimulator::with_state`].
#[derive(Debug, Default)]
pub struct SimState {
    pub policy: SimPolicy,
    /// By task ARN.
    pub tasks: BTreeMap<String, SeenTask>,
    /// Task ARNs per `gocd:job-id`.
    pub tasks_per_job: BTreeMap<String, BTreeSet<String>>,
    pub live_now: usize,
    pub max_live: usize,
    pub max_live_per_fleet: Vec<usize>,
    pub polls: u64,
    pub errors: Vec<String>,
}

impl SimState {
    /// How many distinct tasks carried this job id.
    pub fn tasks_for_job(&self, job_id: i64) -> usize {
        self.tasks_per_job.get(&job_id.to_string()).map_or(0, BTreeSet::len)
    }

    /// Jobs with more than one task.
    pub fn duplicate_jobs(&self) -> Vec<(String, usize)> {
        self.tasks_per_job.iter().filter(|(_, t)| t.len() > 1).map(|(j, t)| (j.clone(), t.len())).collect()
    }
}

struct SimInner {
    host: GoCdHost,
    fleets: Vec<Fleet>,
    ecs: Vec<aws_sdk_ecs::Client>,
    state: Mutex<SimState>,
}

/// The simulated fleet of GoCD agent containers; stops polling when dropped.
pub struct AgentSimulator {
    inner: Arc<SimInner>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for AgentSimulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSimulator").field("fleets", &self.inner.fleets.len()).finish()
    }
}

impl Drop for AgentSimulator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const POLL: Duration = Duration::from_millis(300);

impl AgentSimulator {
    /// Starts watching the fleets.
    pub fn start(host: &GoCdHost, fleets: Vec<Fleet>, policy: SimPolicy) -> AgentSimulator {
        let ecs = fleets.iter().map(|f| aws_sdk_ecs::Client::new(&f.config)).collect();
        let state = SimState { policy, max_live_per_fleet: vec![0; fleets.len()], ..SimState::default() };
        let inner = Arc::new(SimInner { host: host.clone(), fleets, ecs, state: Mutex::new(state) });
        let i = inner.clone();
        let task = tokio::spawn(async move {
            loop {
                i.poll().await;
                tokio::time::sleep(POLL).await;
            }
        });
        AgentSimulator { inner, task }
    }

    /// Reads the state.
    pub fn with_state<R>(&self, f: impl FnOnce(&SimState) -> R) -> R {
        f(&self.inner.state.lock().unwrap())
    }

    /// Never register the agent of this job id or agent id.
    pub fn never_register(&self, id: impl ToString) {
        self.inner.state.lock().unwrap().policy.never_register.insert(id.to_string());
    }

    /// Hold the registration of this job id or agent id until released.
    pub fn hold(&self, id: impl ToString) {
        self.inner.state.lock().unwrap().policy.hold.insert(id.to_string());
    }

    /// Lets a held agent register (on the next poll).
    pub fn release(&self, id: impl ToString) {
        self.inner.state.lock().unwrap().policy.hold.remove(&id.to_string());
    }

    /// Distinct tasks seen for a job id.
    pub fn tasks_for_job(&self, job_id: i64) -> usize {
        self.with_state(|s| s.tasks_for_job(job_id))
    }

    /// The most live tasks seen at once (all fleets).
    pub fn max_live(&self) -> usize {
        self.with_state(|s| s.max_live)
    }

    /// Live tasks at the last poll.
    pub fn live_now(&self) -> usize {
        self.with_state(|s| s.live_now)
    }

    /// Polls until `pred` holds.
    ///
    /// # Panics
    /// After `timeout`, with `what`.
    pub async fn wait_until(&self, what: &str, timeout: Duration, pred: impl Fn(&SimState) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.with_state(&pred) {
                return;
            }
            if Instant::now() > deadline {
                let (polls, errors) =
                    self.with_state(|s| (s.polls, s.errors.iter().rev().take(5).cloned().collect::<Vec<_>>()));
                panic!(
                    "timed out after {timeout:?} waiting for {what} (agent simulator: {polls} polls, last errors {errors:?})\n{}",
                    self.inner.host.with_state(|s| s.summary())
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops the live task of a job with the test's own client, as an operator (or AWS) would.
    /// Returns the task ARN.
    ///
    /// # Panics
    /// When no live task of that job is known.
    pub async fn stop_task_by_hand(&self, job_id: i64, reason: &str) -> String {
        let (fleet, arn) = self
            .with_state(|s| {
                s.tasks
                    .values()
                    .find(|t| !t.stopped && t.job_id.as_deref() == Some(&job_id.to_string()))
                    .map(|t| (t.fleet, t.task_arn.clone()))
            })
            .unwrap_or_else(|| panic!("no live task seen for job {job_id}"));
        let f = &self.inner.fleets[fleet];
        self.inner.ecs[fleet]
            .stop_task()
            .cluster(&f.cluster)
            .task(&arn)
            .reason(reason)
            .send()
            .await
            .unwrap_or_else(|e| panic!("StopTask {arn}: {}", aws_error_text(&e)));
        arn
    }
}

impl SimInner {
    async fn poll(&self) {
        let mut live_total = 0;
        for (i, fleet) in self.fleets.iter().enumerate() {
            match self.observe(i, fleet).await {
                Ok(live) => {
                    live_total += live;
                    let mut st = self.state.lock().unwrap();
                    st.max_live_per_fleet[i] = st.max_live_per_fleet[i].max(live);
                }
                Err(e) => self.state.lock().unwrap().errors.push(format!("{}: {e}", fleet.label)),
            }
        }
        {
            let mut st = self.state.lock().unwrap();
            st.polls += 1;
            st.live_now = live_total;
            st.max_live = st.max_live.max(live_total);
        }
        if let Some(network) = self.with(|s| s.policy.network.clone()) {
            self.reach_server(&network).await;
            self.check_out_materials(&network).await;
        }
        self.register_due();
    }

    /// Each agent not yet registered makes its first request to the server from its task.
    async fn reach_server(&self, network: &NetworkWorld) {
        let waiting: Vec<(usize, String, String)> = self.with(|s| {
            s.tasks
                .values()
                .filter(|t| t.registration.is_none() && !t.stopped && t.agent_id.is_some())
                .filter_map(|t| Some((t.fleet, t.task_arn.clone(), t.server_url.clone()?)))
                .collect()
        });
        for (fleet, arn, url) in waiting {
            let f = &self.fleets[fleet];
            let reached = match network.task(&f.config, &f.cluster, &arn).await {
                Ok(task) => task.fetch_agent_status(&network.internet, &url).map_err(|e| format!("{url}: {e}")),
                Err(e) => Err(format!("the task's network could not be read: {e}")),
            };
            if let Some(t) = self.state.lock().unwrap().tasks.get_mut(&arn) {
                t.server_reached = Some(reached);
            }
        }
    }

    /// Each job building on one of these agents checks out its materials: one the task cannot
    /// reach fails the build.
    async fn check_out_materials(&self, network: &NetworkWorld) {
        let building: Vec<(JobHandle, String, Vec<String>)> = self.host.with_state(|s| {
            s.jobs
                .iter()
                .filter(|j| !j.materials_checked)
                .filter_map(|j| match &j.state {
                    JobState::Running { agent_id } => Some((j.handle, agent_id.clone(), j.spec.materials.clone())),
                    _ => None,
                })
                .collect()
        });
        for (job, agent_id, materials) in building {
            let Some((fleet, arn)) = self.with(|s| {
                s.tasks
                    .values()
                    .find(|t| t.agent_id.as_deref() == Some(&agent_id))
                    .map(|t| (t.fleet, t.task_arn.clone()))
            }) else {
                continue;
            };
            let f = &self.fleets[fleet];
            let task = match network.task(&f.config, &f.cluster, &arn).await {
                Ok(task) => task,
                Err(e) => {
                    self.state.lock().unwrap().errors.push(format!("materials of {agent_id}: {e}"));
                    continue;
                }
            };
            let blocked = materials.iter().find_map(|m| {
                let (host, port) = material_host(m);
                task.connect(&network.internet, &host, port).err().map(|b| (m.clone(), b))
            });
            match blocked {
                None => self.host.materials_checked(job),
                Some((material, why)) => {
                    let mut lines = vec![format!("[go] git clone {material}")];
                    lines.extend(TaskNetwork::git_error(&why, &material));
                    self.host.fail_job(job, &format!("{material}: {why}"), &lines);
                }
            }
        }
    }

    /// Lists and describes the fleet's tasks; returns how many are live.
    async fn observe(&self, i: usize, fleet: &Fleet) -> Result<usize, String> {
        let ecs = &self.ecs[i];
        let list = ecs
            .list_tasks()
            .cluster(&fleet.cluster)
            .desired_status(DesiredStatus::Running)
            .send()
            .await
            .map_err(|e| format!("ListTasks: {}", aws_error_text(&e)))?;
        let mut arns: Vec<String> = list.task_arns().to_vec();
        // Tasks that were live last time: describe them too, to learn why they stopped.
        let known_live: Vec<String> = self
            .with(|s| s.tasks.values().filter(|t| t.fleet == i && !t.stopped).map(|t| t.task_arn.clone()).collect());
        for a in known_live {
            if !arns.contains(&a) {
                arns.push(a);
            }
        }
        let mut tasks: Vec<Task> = Vec::new();
        for chunk in arns.chunks(100) {
            let out = ecs
                .describe_tasks()
                .cluster(&fleet.cluster)
                .set_tasks(Some(chunk.to_vec()))
                .include(TaskField::Tags)
                .send()
                .await
                .map_err(|e| format!("DescribeTasks: {}", aws_error_text(&e)))?;
            tasks.extend(out.tasks().iter().filter(|t| in_cluster(t, &fleet.cluster)).cloned());
        }
        let mut live = 0;
        let mut st = self.state.lock().unwrap();
        let only = st.policy.only_server_id.clone();
        for t in &tasks {
            let Some(arn) = t.task_arn() else { continue };
            if only.as_deref().is_some_and(|id| task_tag(t, "gocd:server-id") != Some(id)) {
                continue;
            }
            let last = t.last_status().unwrap_or("").to_string();
            let stopped = last == "STOPPED" || t.desired_status() == Some("STOPPED");
            if !stopped {
                live += 1;
            }
            if let Some(seen) = st.tasks.get_mut(arn) {
                seen.last_status = last;
                if stopped && !seen.stopped {
                    seen.stopped = true;
                    seen.stopped_reason = t.stopped_reason().map(str::to_string);
                }
                continue;
            }
            let seen = SeenTask {
                fleet: i,
                task_arn: arn.to_string(),
                job_id: task_tag(t, "gocd:job-id").map(str::to_string),
                agent_id: task_override_env(t, "GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID").map(str::to_string),
                auto_register_key: task_override_env(t, "GO_EA_AUTO_REGISTER_KEY").map(str::to_string),
                environment: task_override_env(t, "GO_EA_AUTO_REGISTER_ENVIRONMENT").map(str::to_string),
                server_url: task_override_env(t, "GO_EA_SERVER_URL").map(str::to_string),
                plugin_id: task_override_env(t, "GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID").map(str::to_string),
                tags: t
                    .tags()
                    .iter()
                    .filter_map(|g| Some((g.key()?.to_string(), g.value().unwrap_or("").to_string())))
                    .collect(),
                started_by: t.started_by().map(str::to_string),
                launch_type: t.launch_type().map(|l| l.as_str().to_string()),
                capacity_provider: t.capacity_provider_name().map(str::to_string),
                first_seen: Instant::now(),
                registration: None,
                server_reached: None,
                last_status: last,
                stopped,
                stopped_reason: if stopped { t.stopped_reason().map(str::to_string) } else { None },
            };
            if let Some(j) = &seen.job_id {
                st.tasks_per_job.entry(j.clone()).or_default().insert(arn.to_string());
            }
            st.tasks.insert(arn.to_string(), seen);
        }
        Ok(live)
    }

    fn with<R>(&self, f: impl FnOnce(&SimState) -> R) -> R {
        f(&self.state.lock().unwrap())
    }

    /// Registers every agent whose task is live, due, allowed and not yet registered.
    fn register_due(&self) {
        let due: Vec<(String, String, String, String, Option<String>)> = self.with(|s| {
            s.tasks
                .values()
                .filter(|t| t.registration.is_none() && !t.stopped)
                .filter(|t| t.first_seen.elapsed() >= s.policy.register_delay)
                .filter(|t| !t.matches(&s.policy.never_register) && !t.matches(&s.policy.hold))
                .filter(|t| s.policy.network.is_none() || matches!(t.server_reached, Some(Ok(()))))
                .filter(|t| t.server_url.is_some())
                .filter_map(|t| {
                    Some((
                        t.task_arn.clone(),
                        t.agent_id.clone()?,
                        t.plugin_id.clone().unwrap_or_default(),
                        t.auto_register_key.clone().unwrap_or_default(),
                        t.environment.clone(),
                    ))
                })
                .collect()
        });
        for (arn, agent_id, plugin_id, key, env) in due {
            let r = self.host.register_agent(&agent_id, &plugin_id, &key, env.as_deref());
            if let Some(t) = self.state.lock().unwrap().tasks.get_mut(&arn) {
                t.registration = Some(r);
            }
        }
    }
}
