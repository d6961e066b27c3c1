//! The engine: one cluster profile at run time — its AWS clients, its agents, the task
//! definitions and networking it resolved, its EC2 capacity, and what happened to it lately.
//! Everything here can be rebuilt from AWS (`ensure_adopted`), which a new process does before
//! its first decision.
//!
//! The folders follow a job's life, from the ground up; each imports only folders below it, and
//! only `job/`, `cleanup/` and `reconcile/`, above this file, name [`Cluster`]:
//!
//! ```text
//! cluster/
//!   reconcile/   what happens without a request: server-ping's pass (observe, plan, apply),
//!                the event queue (queue/), the EC2 loop (ec2/), the warm pools' pass (warm.rs)
//!   cleanup/     what the engine removes beyond a job's own agent, and a retired profile
//!   job/         the verbs of a job's life: create-agent (create), should-assign-work
//!                (assigned), job-completion (complete)
//!   mod.rs       Cluster: the engine composed of the owners below, its verbs' entry points
//!   accounting/  what a job's life measured and cost: its wait, its start's phases, image
//!                pulls, its cost and the prices read while the plugin runs
//!   capacity/    where tasks run besides Fargate: the EC2 instances and their work (ec2/), the
//!                warm agents' pools (warm/)
//!   launch/      what a job's task is and how it starts: the request's snapshot, guardrails,
//!                task definitions, the capacity providers' kinds, RunTask
//!   agents/      the registry: every agent's record and lifecycle (lifecycle.rs, one page),
//!                which waiting agent a job takes, what ECS and GoCD say of them, their tasks
//!   base/        identity, the profiles served, clock, locks, background work, errors, what
//!                happened lately (recent events, the event queue's status), the port to GoCD
//!   tests/       the engine's tests against in-memory AWS and GoCD
//! ```
//!
//! One job's way through it: [`Cluster::create_agent`] (`job/create.rs`) takes the request's
//! snapshot (`launch/snapshot.rs`), checks the profiles (`launch/guardrails.rs`), reserves the
//! agent in the registry (`agents/`), registers the task definition
//! (`launch/task_definition.rs`) and either launches the task (`launch/run_task.rs`, Fargate) or
//! queues it for an instance (`capacity/ec2/pool.rs`), which the EC2 loop places
//! (`reconcile/ec2/`). When GoCD gives the agent its job, [`Cluster::should_assign`] answers
//! from memory and `job/assigned.rs` says the job's wait (`accounting/job_wait.rs`); at
//! job-completion, [`Cluster::complete`] (`job/complete.rs`) says its cost
//! (`accounting/job_cost/`) and stops and deletes the agent. Between requests, [`Cluster::ping`]
//! and the event queue (`reconcile/`) fold what ECS and GoCD say into the registry, and
//! `cleanup/` removes what nothing explains.
//!
//! A [`Cluster`] is three parts: its [`Identity`] (key, server id, `startedBy`: fixed for its
//! life), its configuration (the account's clients and the cluster profile, replaced together
//! when GoCD sends an edit, and the port to GoCD), and its changing state ([`State`]: one owner
//! per part, each of its own folder: the registry, the cost ledger, the image pulls, the warm
//! pools, the EC2 pool, the task definitions, networks and providers resolved, the profiles
//! served, recent events, the pass locks). The engine reads the time from the [`base::clock::Clock`] it was built with
//! ([`Cluster::now`]), never from the wall. Its locks are [`base::locks`]' (`std::sync`'s in
//! release builds, their order checked in debug and test builds); which there are, what each
//! guards, and the few taken while another is held, in which order: docs/architecture.md,
//! "Locks".
//!
//! Status reports read [`Cluster::registry`], [`Cluster::events`] and [`Cluster::ec2`].
//! GoCD is reached only through the [`base::gocd::Gocd`] port, AWS through [`crate::aws`].

#![deny(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_possible_wrap)]

pub mod accounting;
pub mod agents;
pub mod base;
pub mod capacity;
pub mod cleanup;
pub mod job;
pub mod launch;
pub mod reconcile;
#[cfg(test)]
mod tests;

pub use base::error::Retirement;
pub use base::error::{EngineError, Refusal};
pub use base::gocd::{Gocd, HostCallError};
pub use base::identity::Identity;
pub use launch::snapshot::AgentRequest;
pub use launch::snapshot::{LaunchSpec, Work};

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, PoisonError};
use std::time::SystemTime;

use tokio::sync::OnceCell;

use crate::aws::network::Network;
use crate::aws::{AwsClients, AwsError};
use crate::ids::{AgentId, ClusterKey, TaskArn};
use crate::protocol::host_calls::HealthKind;
use crate::protocol::types::JobIdentifier;
use crate::settings::{ClusterProfile, ElasticProfile};

use agents::reuse::{Assignment, Offer};
use agents::tasks::TaskView;
use agents::Registry;
use base::clock::{Clock, SystemClock};
use base::locks::{Mutex, MutexGuard, RwLock};
use base::recent::Events;
use launch::snapshot::RequestSnapshot;
use launch::task_definition::TaskDefinitionRef;

/// What one refresh saw.
#[derive(Debug, Default)]
pub struct Refresh {
    /// Our running tasks.
    pub running: Vec<TaskView>,
    /// Tasks of records that no longer run, described one more time for their stop reason.
    pub described: Vec<TaskView>,
    /// Task ARNs of records that ECS no longer knows at all.
    pub missing: Vec<TaskArn>,
}

/// Knobs of the engine (`serve`'s options).
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// How long after the engine starts before unused task-definition revisions may be
    /// deregistered: until it has seen the elastic profiles in use, it cannot tell.
    pub task_definition_sweep_after: std::time::Duration,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions { task_definition_sweep_after: launch::task_definition::SEEN_FOR }
    }
}

/// One cluster profile's engine, in three parts: who it is (fixed for its life), how it is
/// configured (the account's clients and the cluster profile, replaced together when GoCD sends
/// an edit; the port to GoCD), and what changes as it works ([`State`]).
#[derive(Debug)]
pub struct Cluster {
    /// Who it is: its key, GoCD's server id, its `startedBy`. Never changes.
    identity: Identity,
    /// The account's clients and the profile as last sent, replaced whole (an edit may change
    /// the credentials, never the key).
    config: RwLock<Arc<Config>>,
    /// The port to GoCD (console lines, agent deletes).
    gocd: Arc<dyn Gocd>,
    /// Where it reads the time ([`base::clock`]): the wall clock in production.
    clock: Arc<dyn Clock>,
    /// The work it runs behind its requests' backs ([`base::background`]).
    background: base::background::Background,
    /// What changes: agents, what it resolved and launched in AWS, what happened lately.
    state: State,
}

/// How one cluster profile's engine is configured, as one value: a request reads the clients
/// and the profile of one configuration, never half of an edit.
#[derive(Debug)]
struct Config {
    /// The account's clients.
    aws: Arc<AwsClients>,
    /// The profile as last sent by GoCD.
    profile: Arc<ClusterProfile>,
}

impl Cluster {
    /// A cluster profile's engine on the wall clock, empty until [`Cluster::ensure_adopted`].
    pub fn new(
        key: ClusterKey,
        server_id: String,
        aws: Arc<AwsClients>,
        profile: ClusterProfile,
        gocd: Arc<dyn Gocd>,
        options: &EngineOptions,
    ) -> Self {
        Self::with_clock(key, server_id, aws, profile, gocd, options, Arc::new(SystemClock))
    }

    /// [`Cluster::new`] reading the time from `clock` (tests and benches pass a
    /// [`base::clock::ManualClock`]).
    pub fn with_clock(
        key: ClusterKey,
        server_id: String,
        aws: Arc<AwsClients>,
        profile: ClusterProfile,
        gocd: Arc<dyn Gocd>,
        options: &EngineOptions,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let state = State::new(options, clock.now());
        Cluster {
            identity: Identity::new(key, server_id),
            config: RwLock::new(Arc::new(Config { aws, profile: Arc::new(profile) })),
            gocd,
            clock,
            background: base::background::Background::default(),
            state,
        }
    }

    /// Runs `work` behind the request that asked for it: the request answers GoCD without
    /// waiting, and [`Cluster::background_settled`] waits for it.
    pub(super) fn spawn_background<F>(&self, work: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.background.spawn(work);
    }

    /// Returns once the work the engine runs behind its requests (announcements, console lines,
    /// warm-pool passes) is done.
    pub async fn background_settled(&self) {
        self.background.settled().await;
    }

    /// The engine's current time, from its clock.
    pub fn now(&self) -> SystemTime {
        self.clock.now()
    }

    /// The engine's clock, for what reads the time after awaiting on the engine's behalf.
    pub fn clock(&self) -> &dyn Clock {
        &*self.clock
    }

    /// Who this engine is: fixed for its life.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Hash of (region, cluster, role): tags and agent ids carry it.
    pub fn key(&self) -> &ClusterKey {
        &self.identity.key
    }

    /// GoCD's server id.
    pub fn server_id(&self) -> &str {
        &self.identity.server_id
    }

    /// Our `startedBy` in this cluster.
    pub fn started_by(&self) -> &str {
        &self.identity.started_by
    }

    fn config(&self) -> Arc<Config> {
        self.config.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The account's clients.
    pub fn aws(&self) -> Arc<AwsClients> {
        self.config().aws.clone()
    }

    /// Takes GoCD's newest profile and the clients it resolves to (the same account, perhaps
    /// through new credentials, another external id or session name), together: the next
    /// calls use them.
    pub fn reconfigure(&self, aws: Arc<AwsClients>, profile: ClusterProfile) {
        *self.config.write().unwrap_or_else(PoisonError::into_inner) =
            Arc::new(Config { aws, profile: Arc::new(profile) });
    }

    /// EC2 capacity (instances, waiting work, its loop); empty unless `LaunchType` is EC2.
    pub fn ec2(&self) -> &capacity::ec2::pool::Pool {
        &self.state.ec2
    }

    /// Orphan tasks stopped by the sweep so far.
    pub fn swept_orphans(&self) -> u64 {
        self.state.swept_orphans.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The port to GoCD.
    pub fn gocd(&self) -> &Arc<dyn Gocd> {
        &self.gocd
    }

    /// should-assign-work: true iff the agent is live and was started for (or bound to) exactly
    /// this job, or it waits for its next job (warm starts) and `offer` — asked only then —
    /// matches what it runs: it is then bound to this job, and the job's console says so.
    /// Memory only: GoCD asks under a global lock (the console line is sent in the background).
    pub fn should_assign(
        self: &Arc<Self>,
        agent_id: &AgentId,
        job: &JobIdentifier,
        offer: impl FnOnce() -> Offer,
    ) -> bool {
        let now = self.now();
        // One lock: the answer, and whether it is the agent taking its job (its wait announced
        // once; not for an agent adopted after a restart) and whether it was kept before.
        let (assignment, took) = {
            let mut registry = self.registry();
            let first = registry.get(agent_id).is_some_and(|a| a.assigned_at.is_none() && a.job.job_id == job.job_id);
            let assignment = registry.assign(agent_id, job, offer, now);
            let record = registry.get(agent_id).filter(|a| a.job_requested_at.is_some());
            let took = match assignment {
                Assignment::Yes if first => record.map(|a| a.served_jobs.len() > 1 || a.warm),
                Assignment::Reused { .. } => record.map(|_| true),
                _ => None,
            };
            (assignment, took)
        };
        match assignment {
            Assignment::No => false,
            Assignment::Yes => {
                if let Some(reused) = took {
                    self.took_job(agent_id, job, now, reused, true);
                }
                true
            }
            Assignment::Reused { jobs, max_jobs } => {
                tracing::info!(agent_id = agent_id.as_str(), job = %job.locator(), jobs, "reused a kept agent");
                let line = agents::reuse::reused_line(agent_id, jobs, max_jobs);
                let (gocd, owned) = (self.gocd.clone(), job.clone());
                self.spawn_background(async move {
                    let _ = gocd.console_log(&owned, base::gocd::console_line(line)).await;
                });
                // Counted and logged; the reuse line above is the job's console line.
                if took.is_some() {
                    self.took_job(agent_id, job, now, true, false);
                }
                true
            }
        }
    }

    /// How long jobs waited for their agents, by elastic profile and phase, locked.
    pub fn job_waits(&self) -> MutexGuard<'_, accounting::job_wait::WaitHistograms> {
        self.state.job_waits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The profile as last sent by GoCD.
    pub fn profile(&self) -> Arc<ClusterProfile> {
        self.config().profile.clone()
    }

    /// Takes the newest properties (e.g. an edited `MaxAgents`) with the same clients.
    pub fn set_profile(&self, profile: ClusterProfile) {
        let mut config = self.config.write().unwrap_or_else(PoisonError::into_inner);
        *config = Arc::new(Config { aws: config.aws.clone(), profile: Arc::new(profile) });
    }

    /// The agents, locked, to read (changes go through the registry's transitions). Never hold
    /// it across an `.await`.
    pub fn registry(&self) -> MutexGuard<'_, Registry> {
        self.state.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Recent events, locked.
    pub fn events(&self) -> MutexGuard<'_, Events> {
        self.state.events.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records an event for reports and server health.
    pub fn event(&self, kind: HealthKind, message: impl Into<String>) {
        let profile = self.profile();
        let message = format!("ECS cluster {} ({}): {}", profile.cluster_name, self.aws().region, message.into());
        self.events().push(kind, message, self.now());
    }

    /// Rebuilds the picture from AWS once per process, before the first decision.
    ///
    /// # Errors
    /// The failed refresh; the next call tries again.
    pub async fn ensure_adopted(&self) -> Result<(), AwsError> {
        self.adopt().await.map(|_| ())
    }

    /// [`Cluster::ensure_adopted`], handing back the refresh it made when this call was the one
    /// that adopted, so a caller about to refresh anyway (server-ping) need not read AWS twice.
    ///
    /// # Errors
    /// The failed refresh; the next call tries again.
    pub async fn adopt(&self) -> Result<Option<Refresh>, AwsError> {
        let mut fresh = None;
        self.state.adopted
            .get_or_try_init(|| async {
                let refresh = self.refresh().await?;
                {
                    let mut registry = self.registry();
                    registry.observe(&refresh.running, &refresh.described, &refresh.missing, &HashMap::new(), self.now());
                }
                // Turn-taking survives a restart: the strategy's split goes on from the running tasks.
                if self.profile().capacity_providers.is_some() {
                    self.state.provider_launches.adopt(refresh.running.iter().map(|t| t.capacity.as_str()));
                }
                tracing::info!(cluster = %self.profile().cluster_name, tasks = refresh.running.len(), "adopted running tasks");
                fresh = Some(refresh);
                Ok(())
            })
            .await?;
        Ok(fresh)
    }

    /// Lists and describes our tasks (2·⌈N/100⌉ calls), and describes the tasks of records that
    /// fell out of the running list so their stop reasons are known.
    ///
    /// # Errors
    /// The first failed call: a failed read is never taken as "task gone".
    pub async fn refresh(&self) -> Result<Refresh, AwsError> {
        let profile = self.profile();
        let cluster = profile.cluster_name.as_str();
        let suffix = base::identity::cluster_arn_suffix(cluster);
        let arns = agents::tasks::list_running(&self.aws(), cluster, self.started_by()).await?;
        // Tasks already tracked need none of our own tags back (their records hold them): dropped
        // chunk by chunk, a ping's passing memory stays a fraction of the fleet's (README
        // "Performance"). Still one DescribeTasks per 100 ARNs.
        let known: std::collections::HashSet<TaskArn> =
            self.registry().all().filter_map(|a| a.task_arn.clone()).collect();
        let mut running = Vec::with_capacity(arns.len());
        for chunk in arns.chunks(agents::tasks::DESCRIBE_CHUNK) {
            let views =
                agents::tasks::describe(&self.aws(), cluster, &suffix, chunk, self.server_id(), self.key()).await?;
            // Listed tasks whose desired status is STOPPED are stopping: AWS does not list them
            // (ListTasks lists desiredStatus RUNNING by default), so neither do we; a tracked one
            // is described below as fallen out of the list.
            let views = views.into_iter().filter(|t| t.desired_status != agents::tasks::TaskStatus::Stopped);
            running.extend(views.map(|t| if known.contains(t.arn.as_str()) { t.without_own_tags() } else { t }));
        }
        drop(known);
        let running_arns: std::collections::HashSet<&str> = running.iter().map(|t| t.arn.as_str()).collect();
        let fallen: Vec<String> = self
            .registry()
            .all()
            .filter(|a| a.phase == agents::Phase::Running || a.phase == agents::Phase::Stopping)
            .filter_map(|a| a.task_arn.as_deref().map(str::to_string))
            .filter(|arn| !running_arns.contains(arn.as_str()))
            .collect();
        let mut described = Vec::new();
        let mut missing = Vec::new();
        if !fallen.is_empty() {
            described =
                agents::tasks::describe(&self.aws(), cluster, &suffix, &fallen, self.server_id(), self.key()).await?;
            let seen: std::collections::HashSet<&str> = described.iter().map(|t| t.arn.as_str()).collect();
            missing = fallen.iter().filter(|a| !seen.contains(a.as_str())).map(TaskArn::from).collect();
            // Still listed as running elsewhere? Then it is only a task ECS described as running.
            described.retain(|t| t.is_stopping() || !running_arns.contains(t.arn.as_str()));
        }
        Ok(Refresh { running, described, missing })
    }

    /// The task definition of a request's snapshot (its family, computed once with it):
    /// registered once, then reused; its family counts as in use for the cleanup.
    ///
    /// # Errors
    /// The failed lookup or registration; the next launch tries again.
    pub async fn task_definition(&self, snapshot: &RequestSnapshot) -> Result<TaskDefinitionRef, AwsError> {
        self.state.task_definition_sweep.saw(&snapshot.family, self.now());
        let wanted = launch::task_definition::Wanted {
            family: &snapshot.family,
            profile: &snapshot.profile,
            kinds: snapshot.kinds.as_deref(),
            elastic: &snapshot.elastic,
        };
        self.state.task_definitions.get(&self.aws(), wanted, self.identity()).await
    }

    /// What pricing a job reads of the engine, lent to the cost ledger for one pricing.
    fn pricing_sources(&self) -> accounting::job_cost::Sources<'_> {
        accounting::job_cost::Sources {
            aws: self.aws(),
            registry: &self.state.registry,
            ec2: &self.state.ec2,
            providers: &self.state.providers,
            served: &self.state.served,
            profile: self.profile(),
        }
    }

    /// The image pulls, locked, after counting those the agents' records show since the last
    /// look. Never hold it across an `.await`.
    pub fn image_pulls(&self) -> MutexGuard<'_, accounting::image_pulls::ImagePulls> {
        self.state.image_pulls.look(&self.state.registry)
    }

    /// Counts the pulls the agents' records now show, without looking.
    pub fn count_image_pulls(&self) {
        drop(self.image_pulls());
    }

    /// Reads from ECR the size of each pulled image whose size is due.
    pub async fn refresh_image_sizes(&self) {
        self.state.image_pulls.refresh_sizes(&self.state.registry, &self.aws(), self.now()).await;
    }

    /// Cost today and over the last seven days, for the report.
    pub fn cost_summary(&self, now: SystemTime) -> crate::cost::ledger::Summary {
        self.state.cost.summary(now)
    }

    /// Jobs' and pools' cost by elastic profile since the process started, for the metrics.
    pub fn cost_totals(&self) -> (accounting::job_cost::CostByProfile, accounting::job_cost::CostByProfile) {
        self.state.cost.totals()
    }

    /// A warm or kept agent was stopped at `now` while it waited for a job: its idle time is
    /// its pool's cost.
    pub(crate) fn idle_agent_stopped(&self, agent_id: &AgentId, now: SystemTime) {
        self.state.cost.idle_agent_stopped(&self.pricing_sources(), agent_id, now);
    }

    /// The kinds of `profile`'s capacity providers when known (learned at create-agent).
    pub fn kinds(&self, profile: &ClusterProfile) -> Option<Arc<launch::providers::ProviderKinds>> {
        self.state.providers.current(profile)
    }

    /// Subnets and groups for a launch: the elastic profile's, else the cluster profile's,
    /// else the default VPC's, resolved once.
    ///
    /// # Errors
    /// The failed EC2 lookups; the next launch tries again.
    pub async fn network(&self, profile: &ClusterProfile, elastic: &ElasticProfile) -> Result<Network, AwsError> {
        self.state.networks.resolve(&self.aws(), profile, elastic).await
    }
}

/// The changing part of one cluster profile's engine: its agents, the AWS resources it resolved
/// or launched, what happened to it lately, and the locks that keep its passes from overlapping.
/// Each part is owned by the type of the folder it belongs to; everything here is rebuilt from
/// AWS after a restart ([`Cluster::ensure_adopted`]) or learned again on the next request.
///
/// Each part has its own lock, never held across an `.await` (the pass locks excepted, which
/// exist to be held across one), so no request waits for another's AWS call. Almost every lock
/// is taken alone; the few held together and their order, checked in debug and test builds
/// ([`base::locks`]), are in docs/architecture.md, "Locks".
#[derive(Debug)]
struct State {
    // The agents.
    /// Every agent, changed only through the registry's transitions (`agents/lifecycle.rs`).
    registry: Mutex<Registry>,
    /// Agents that took their jobs, to be announced (`job/assigned.rs`; `accounting/job_wait.rs`).
    took: Mutex<Vec<accounting::job_wait::Took>>,
    /// How long jobs waited for their agents, by elastic profile and phase.
    job_waits: Mutex<accounting::job_wait::WaitHistograms>,
    /// Image pulls by elastic profile and image, and the images' sizes (`accounting/image_pulls.rs`).
    image_pulls: accounting::image_pulls::Pulls,
    /// Warm pools: unused keys and arrivals (`capacity/warm/pools.rs`).
    warm: Mutex<capacity::warm::pools::WarmPools>,
    /// What jobs and warm pools cost lately (`accounting/job_cost/`).
    cost: accounting::job_cost::Costs,

    // What it resolved in AWS, or launched there.
    /// Task definitions by family, each registered (or looked up) once.
    task_definitions: launch::task_definition::TaskDefinitions,
    /// Which families are in use, for the task-definition cleanup.
    task_definition_sweep: launch::task_definition::SweepState,
    /// Subnets and groups, each resolved once.
    networks: launch::run_task::Networks,
    /// The kinds of the strategy's capacity providers (Fargate, Auto Scaling group, ECS Managed
    /// Instances), learned once.
    providers: launch::providers::ProviderCache,
    /// Tasks launched through each capacity provider of `CapacityProviderStrategy`.
    provider_launches: launch::run_task::ProviderLaunches,
    /// EC2 capacity (instances, waiting work, its loop); empty unless `LaunchType` is EC2.
    ec2: capacity::ec2::pool::Pool,

    // What happened lately.
    /// Recent events, for reports and server health.
    events: Mutex<Events>,
    /// Orphan tasks stopped by the sweep so far.
    swept_orphans: AtomicU64,
    /// Task ARNs the last orphan sweep marked (see `cleanup/plan/orphans.rs`).
    orphan_marks: Mutex<HashSet<TaskArn>>,
    /// What this profile knows of its event queue (`EventQueueUrl`).
    queue: Mutex<base::recent::QueueStatus>,

    // The engine's own life.
    /// Set once the running tasks were adopted from AWS.
    adopted: OnceCell<()>,
    /// The profiles the engine serves, those deleted, and whether it retired (`base/served.rs`).
    served: base::served::Served,
    /// Held while server-ping reconciles this profile: never twice at once.
    ping_lock: tokio::sync::Mutex<()>,
    /// Held for one warm-pool pass: passes never overlap.
    warm_pass: tokio::sync::Mutex<()>,
}

impl State {
    /// An engine's state before it adopted anything, made at `now`.
    fn new(options: &EngineOptions, now: SystemTime) -> Self {
        State {
            registry: Mutex::new(Registry::default()),
            took: Mutex::new(Vec::new()),
            job_waits: Mutex::new(accounting::job_wait::WaitHistograms::default()),
            image_pulls: accounting::image_pulls::Pulls::default(),
            warm: Mutex::new(capacity::warm::pools::WarmPools::default()),
            cost: accounting::job_cost::Costs::default(),
            task_definitions: launch::task_definition::TaskDefinitions::default(),
            task_definition_sweep: launch::task_definition::SweepState::new(now, options.task_definition_sweep_after),
            networks: launch::run_task::Networks::default(),
            providers: launch::providers::ProviderCache::default(),
            provider_launches: launch::run_task::ProviderLaunches::default(),
            ec2: capacity::ec2::pool::Pool::default(),
            events: Mutex::new(Events::default()),
            swept_orphans: AtomicU64::new(0),
            orphan_marks: Mutex::new(HashSet::new()),
            queue: Mutex::new(base::recent::QueueStatus::default()),
            adopted: OnceCell::new(),
            served: base::served::Served::default(),
            ping_lock: tokio::sync::Mutex::new(()),
            warm_pass: tokio::sync::Mutex::new(()),
        }
    }
}
