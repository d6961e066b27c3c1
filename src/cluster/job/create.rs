//! create-agent in the engine: from GoCD's request to a task ECS accepted (Fargate) or work
//! queued for room on an instance (EC2), without ever waiting for capacity.
//!
//! 1. the elastic profile, checked against this cluster profile (launch type, allow-lists);
//!    a refusal goes to the job's console and to server health,
//!    then, with a `CapacityProviderStrategy`, the kinds of its providers (learned once): an
//!    ECS Managed Instances provider refuses some keys (`settings::managed_instances`),
//! 2. adoption from AWS (once per process), so a re-sent create-agent finds the job's agent,
//! 3. one atomic reservation: a live agent for the job means nothing to do, a completed job
//!    means nothing to do, `MaxAgents` live agents means the job waits for GoCD's next ask,
//! 4. the task definition (registered once) and, on Fargate, the networking (resolved once),
//!    looked up together; a `TaskDefinitionArn` meets the allow-lists and must suit the kind of
//!    every provider of the strategy (`guardrails`); the [`LaunchSpec`] is built once from
//!    them and the request's [`RequestSnapshot`] (profiles parsed, fingerprint and family
//!    computed once),
//! 5. Fargate: RunTask ([`crate::cluster::launch::run_task`]); EC2: the work waits in the pool
//!    (`Cluster::enqueue_on_ec2`, `reconcile/ec2/driver.rs`). The reservation becomes the agent's record, or is
//!    released on failure.

use std::sync::Arc;

use tracing::Instrument;

use crate::cluster::agents::reuse::reused_line;
use crate::cluster::agents::tasks::Capacity;
use crate::cluster::agents::Reservation;
use crate::cluster::base::error::{EngineError, Misfit, Refusal};
use crate::cluster::base::gocd::console_line;
use crate::cluster::base::identity::new_agent_id;
use crate::cluster::launch::run_task::{route, run_task_routed, Route};
pub use crate::cluster::launch::snapshot::AgentRequest;
use crate::cluster::launch::snapshot::{LaunchSpec, RequestSnapshot, Work};
use crate::cluster::Cluster;
use crate::ids::AgentId;
use crate::protocol::host_calls::HealthKind;
use crate::protocol::types::JobIdentifier;
use crate::settings::{check_compatible, managed_instances, ClusterProfile, ElasticProfile, LaunchType, Properties};

/// What create-agent did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// A task was started on this capacity.
    Started(Capacity),
    /// EC2: the agent waits for room on an instance.
    Queued,
    /// A live agent already serves the job.
    Existing,
    /// An agent kept after its last job (warm starts) serves the job: no new task.
    Reused,
    /// The job already completed.
    Finished,
    /// `MaxAgents` agents are live: the job waits.
    Full,
}

impl Cluster {
    /// Starts an agent for the job unless one already serves it.
    ///
    /// # Errors
    /// [`EngineError::Refused`] when the elastic profile does not fit this cluster profile; else
    /// the profiles cannot launch as they stand, or AWS failed. The job's console and server
    /// health say so, and GoCD's next create-agent tries again.
    pub async fn create_agent(self: &Arc<Self>, request: AgentRequest) -> Result<Created, EngineError> {
        let profile = request.profile.clone(); // one snapshot of the profile for the whole request
        if let Some(why) = self.retired() {
            let refusal = Refusal::Retired { job: request.job.locator(), why };
            self.refuse(&request.job, &refusal.to_string()).await;
            return Err(refusal.into());
        }
        let elastic = match checked_elastic_profile(&profile, &request.elastic_profile) {
            Ok(elastic) => Arc::new(elastic),
            Err(misfit) => return Err(self.refuse_misfit(&request.job, misfit).await),
        };
        // The strategy's providers by kind (learned once): what the task definition must suit,
        // and whether ECS Managed Instances refuses a key of the elastic profile.
        let kinds = match self.state.providers.get(&self.aws(), &profile, self.clock()).await {
            Ok(kinds) => kinds,
            Err(e) => return Err(self.could_not_start(&request.job, e.into()).await),
        };
        if let Some(provider) = kinds.as_deref().and_then(|k| k.managed_instances()) {
            let problems = managed_instances::check(&elastic, provider);
            if !problems.is_empty() {
                return Err(self.refuse_misfit(&request.job, Misfit(problems)).await);
            }
        }
        // The request's snapshot: the family is computed here, once, from its own profiles.
        let snapshot = Arc::new(RequestSnapshot::new(
            self.key(),
            &self.aws().region,
            profile.clone(),
            request.settings.clone(),
            elastic,
            kinds,
        ));
        self.saw_elastic_profile(&snapshot);
        self.state.cost.remember_size(&snapshot.elastic);
        if let Err(e) = self.ensure_adopted().await {
            return Err(self.could_not_start(&request.job, e.into()).await);
        }
        let Some(server_url) = profile.go_server_url.clone().or(request.site_url.clone()) else {
            let message =
                "GoCD's server-info has no site URL and the cluster profile sets no GoServerUrl: set GoServerUrl";
            return Err(self.could_not_start(&request.job, EngineError::Config(message.into())).await);
        };
        let new = snapshot.new_agent(request.environment.clone());
        let agent_id = new_agent_id(self.key(), &request.job);
        let reserved = self.registry().reserve(&request.job, agent_id, profile.max_agents as usize, new, self.now());
        // A warm profile's pool: a new job counts as an arrival; a job that needed no new agent
        // leaves its registration key unused, for a warm agent.
        let (new_job, key_unused) = match &reserved {
            Reservation::Reserved { .. } => (true, false),
            Reservation::Reused { .. } => (true, true),
            // An EC2 agent still waiting for room takes the newest key GoCD sent (it registers
            // with that one): then the key is not free for a warm agent.
            Reservation::Existing(agent_id) => {
                (false, !self.ec2().renew(agent_id, &request.auto_register_key, self.now()))
            }
            Reservation::Finished => (false, true),
            Reservation::Full { .. } => (false, false),
        };
        self.warm_after_request(&snapshot, &request, &server_url, new_job, key_unused);
        let (agent_id, attempt) = match reserved {
            Reservation::Reserved { agent_id, attempt } => (agent_id, attempt),
            other => return Ok(self.not_started(&request, other).await),
        };
        let span = tracing::info_span!("launch", cluster = %profile.cluster_name, agent_id = %agent_id, job = %request.job.locator());
        let started = self.start(&snapshot, &request, agent_id.clone(), attempt, server_url).instrument(span).await;
        match started {
            Ok((line, created)) => {
                let _ = self.gocd.console_log(&request.job, console_line(line)).await;
                Ok(created)
            }
            Err(error) => {
                self.registry().launch_failed(&agent_id, format!("launch failed: {error}"), self.now());
                Err(self.could_not_start(&request.job, error).await)
            }
        }
    }

    /// Builds the agent's [`LaunchSpec`] once, then launches it (Fargate) or queues it (EC2).
    /// Returns the line for the job's console.
    pub(in crate::cluster) async fn start(
        self: &Arc<Self>,
        snapshot: &RequestSnapshot,
        request: &AgentRequest,
        agent_id: AgentId,
        attempt: u32,
        server_url: String,
    ) -> Result<(String, Created), EngineError> {
        let (profile, elastic) = (&snapshot.profile, &snapshot.elastic);
        let on_ec2 = profile.launch_type == LaunchType::Ec2;
        // Both are cached after the first launch; the first one waits for the slower, not the sum.
        let network = async {
            match on_ec2 {
                true => Ok(None), // bridge networking on our own instances
                false => self.network(profile, elastic).await.map(Some),
            }
        };
        let (task_definition, network) = tokio::try_join!(self.task_definition(snapshot), network)?;
        // A TaskDefinitionArn runs what someone else registered: its images, roles and secrets
        // meet the same allow-lists as a profile's own.
        crate::cluster::launch::guardrails::check(profile, &task_definition)?;
        crate::cluster::launch::guardrails::check_exec(elastic, &task_definition)?;
        // It must also suit every provider the strategy may send it to (MANAGED_INSTANCES, EC2,
        // FARGATE by kind), or RunTask refuses it on that provider's turn.
        if let Some(kinds) = &snapshot.kinds {
            crate::cluster::launch::guardrails::check_providers(kinds, &task_definition)?;
        }
        // The job's trace goes to an agent started for the job, not to a warm one borrowing its key.
        let warm = self.registry().get(&agent_id).is_some_and(|a| a.warm);
        let traceparent = if warm { None } else { crate::telemetry::jobs::traceparent(&request.job) };
        let work = Work {
            agent_id,
            attempt,
            job: request.job.clone(),
            environment: request.environment.clone(),
            elastic: elastic.clone(),
            task_definition,
            server_url,
            auto_register_key: request.auto_register_key.clone(),
            settings: snapshot.settings.clone(),
            traceparent,
        };
        // The launch, built once: RunTask sends it now, or StartTask once an instance has room.
        let spec = LaunchSpec::for_identity(self.identity(), profile.clone(), work, network);
        spec.fits_aws()?;
        if on_ec2 {
            // EC2: the work waits for room on an instance of ours; this call never waits for it.
            let line = self.enqueue_on_ec2(spec)?;
            return Ok((line, Created::Queued));
        }
        let work = &spec.work;
        // A warm agent runs where WarmLaunchType says; Spot interrupted this job's previous
        // agent: its rerun runs on on-demand capacity.
        let interrupted = self.registry().was_interrupted(&work.job);
        let route = route(profile, elastic.warm.launch_type, warm, interrupted);
        let on_demand = route == Route::Rerun;
        let launched = run_task_routed(&self.aws(), &self.state.provider_launches, &spec, route).await;
        let launched = launched.map_err(|failure| {
            if failure.outcome_unknown {
                self.registry().launch_unknown(&work.agent_id, self.now());
            }
            failure.error
        })?;
        let (arn, capacity) = (launched.task.arn.clone(), launched.capacity);
        if launched.fell_back_from_spot {
            let message = format!("FARGATE_SPOT capacity was refused; agent {} runs on FARGATE", work.agent_id);
            self.event(HealthKind::Warning, message);
        }
        self.registry().launched(&work.agent_id, launched.task, capacity);
        tracing::info!(task = %arn, %capacity, "started agent task");
        let mut line = format!("started agent {} as ECS task {arn} on {capacity}", work.agent_id);
        if on_demand {
            line.push_str(" (on-demand: Spot interrupted this job's previous agent)");
        }
        Ok((line, Created::Started(capacity)))
    }

    /// A reservation that starts nothing: say why where it helps.
    async fn not_started(&self, request: &AgentRequest, reserved: Reservation) -> Created {
        let job = &request.job;
        match reserved {
            Reservation::Existing(agent_id) => {
                tracing::info!(job = %job.locator(), agent_id = agent_id.as_str(), "an agent already serves this job; nothing to start");
                Created::Existing
            }
            Reservation::Reused { agent_id, jobs, max_jobs } => {
                let line = reused_line(&agent_id, jobs, max_jobs);
                tracing::info!(job = %job.locator(), agent_id = agent_id.as_str(), jobs, "reused a kept agent");
                let _ = self.gocd.console_log(job, console_line(line)).await;
                Created::Reused
            }
            Reservation::Finished => {
                tracing::info!(job = %job.locator(), "this job already completed; a late create-agent starts nothing");
                Created::Finished
            }
            Reservation::Full { live } => {
                let message = format!(
                    "{live} agents are running or starting, the MaxAgents of this cluster profile: the job waits"
                );
                tracing::info!(job = %job.locator(), "{message}");
                let _ = self.gocd.console_log(job, console_line(message)).await;
                Created::Full
            }
            Reservation::Reserved { .. } => Created::Existing, // not reached: the caller launches these
        }
    }

    /// Says in the job's console and in server health that starting an agent failed, and why
    /// (GoCD only logs a create-agent's 500: without this the job would wait with an empty
    /// console). Hands the error back.
    async fn could_not_start(&self, job: &JobIdentifier, error: EngineError) -> EngineError {
        self.event(HealthKind::Error, format!("could not start an agent for job {}: {error}", job.locator()));
        let _ = self.gocd.console_log(job, console_line(format!("could not start an agent: {error}"))).await;
        error
    }

    /// Says in the job's console and in server health why no agent was started.
    async fn refuse(&self, job: &JobIdentifier, message: &str) {
        self.event(HealthKind::Warning, message.to_string());
        let _ = self.gocd.console_log(job, console_line(message)).await;
    }

    /// Refuses the job because its elastic profile does not fit this cluster profile.
    async fn refuse_misfit(&self, job: &JobIdentifier, misfit: Misfit) -> EngineError {
        let refusal = Refusal::Misfit { job: job.locator(), misfit };
        self.refuse(job, &refusal.to_string()).await;
        refusal.into()
    }
}

/// The elastic profile, parsed and checked against the cluster profile.
///
/// # Errors
/// Its problems.
fn checked_elastic_profile(profile: &ClusterProfile, props: &Properties) -> Result<ElasticProfile, Misfit> {
    let problems = match ElasticProfile::parse(props) {
        Ok(elastic) => {
            let problems = check_compatible(profile, &elastic);
            if problems.is_empty() {
                return Ok(elastic);
            }
            problems
        }
        Err(problems) => problems,
    };
    Err(Misfit(problems))
}
