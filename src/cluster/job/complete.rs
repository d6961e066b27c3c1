//! Job completion: the agent's work is done — its cost said in the job's console
//! (`accounting/job_cost/`), then disable it in GoCD, stop its task, delete it — and
//! [`Cluster::stop_task`], the one StopTask of the engine.

use std::sync::Arc;

use tracing::Instrument;

use crate::aws::ecs::Stopped;
use crate::aws::AwsError;
use crate::cluster::accounting::job_cost::READS_AT_MOST;
use crate::cluster::agents::JobDone;
use crate::cluster::base::error::EngineError;
use crate::cluster::base::gocd::console_line;
use crate::cluster::Cluster;
use crate::ids::{AgentId, TaskArn};
use crate::protocol::host_calls::HealthKind;
use crate::protocol::types::JobIdentifier;

/// What job-completion did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completed {
    /// The agent was disabled, its task stopped and the agent deleted.
    Stopped,
    /// The agent is not one this plugin started: nothing was touched.
    NotOurs,
    /// Warm starts: the agent stays, registered and idle, for the next job of its profile.
    Kept,
    /// Recorded; what failed (AWS or GoCD unreachable) is retried by server-ping.
    Later,
}

impl Cluster {
    /// GoCD says the job on `agent_id` completed: no agent is started for the job from now on,
    /// and the agent is disabled, its task stopped and the agent deleted. Once the job's end is
    /// recorded nothing here fails the request: what could not be done is told in server health
    /// and retried by server-ping (a Stopping agent's task is stopped again; a running agent of
    /// a finished job is stopped once adoption finds it).
    pub async fn complete(self: &Arc<Self>, agent_id: &AgentId, job: &JobIdentifier) -> Completed {
        // First, so that a create-agent for this job arriving late never starts another agent.
        self.registry().job_finished(job.job_id, self.now());
        match self.finish(agent_id, job).await {
            Ok(done) => done,
            Err(e) => {
                self.registry().completion_failed(agent_id);
                self.event(
                    HealthKind::Warning,
                    format!("job {} completed; its agent {agent_id} is not cleaned up yet: {e}", job.locator()),
                );
                Completed::Later
            }
        }
    }

    async fn finish(self: &Arc<Self>, agent_id: &AgentId, job: &JobIdentifier) -> Result<Completed, EngineError> {
        self.ensure_adopted().await?;
        let done = self.registry().job_done(agent_id, job.job_id, self.now());
        match done {
            JobDone::NotOurs => {
                tracing::warn!(
                    agent_id = agent_id.as_str(),
                    "job completed on an agent this plugin did not start; leaving it alone"
                );
                return Ok(Completed::NotOurs);
            }
            JobDone::Earlier => {
                tracing::info!(agent_id = agent_id.as_str(), job = %job.locator(), "a repeated job-completion for an earlier job of a reused agent");
                return Ok(Completed::Kept);
            }
            JobDone::Keep { jobs, max_jobs } => {
                self.say_cost(agent_id, job, false).await;
                let line = format!(
                    "agent {agent_id} stays for the next job of this elastic profile ({jobs} of at most {max_jobs} jobs run)"
                );
                let _ = self.gocd.console_log(job, console_line(line)).await;
                tracing::info!(agent_id = agent_id.as_str(), job = %job.locator(), jobs, "job completed: agent kept for the next job");
                return Ok(Completed::Kept);
            }
            JobDone::Stop => {}
        }
        self.say_cost(agent_id, job, true).await;
        let Some(task_arn) = self.registry().stopping(agent_id) else {
            return Ok(Completed::NotOurs);
        };
        let ids = self.registry().claim_removal(std::slice::from_ref(agent_id), self.now());
        let removed = self.remove_stopping(&ids, task_arn.as_ref(), job).await;
        if removed.is_err() {
            self.registry().removal_failed(&ids);
        }
        removed?;
        self.registry().stopped(agent_id, "job completed", self.now());
        tracing::info!(agent_id = agent_id.as_str(), job = %job.locator(), "job completed: agent stopped and deleted");
        Ok(Completed::Stopped)
    }

    /// Disables the agents this caller claimed (none when another path removes the agent), stops
    /// the task, and deletes them.
    async fn remove_stopping(
        &self,
        ids: &[AgentId],
        task_arn: Option<&TaskArn>,
        job: &JobIdentifier,
    ) -> Result<(), EngineError> {
        self.gocd.disable_agents(ids).await?;
        if let Some(arn) = task_arn {
            self.stop_task(arn, &format!("GoCD job {} completed", job.locator())).await?;
        }
        self.gocd.delete_agents(ids).await?;
        Ok(())
    }

    /// The job's cost ([`crate::cluster::accounting::job_cost`]), in its console.
    async fn say_cost(self: &Arc<Self>, agent_id: &AgentId, job: &JobIdentifier, stops: bool) {
        self.read_what_pricing_needs(agent_id).await;
        let line = self.state.cost.job_cost(&self.pricing_sources(), agent_id, job, self.now(), stops);
        if let Some(line) = line {
            let _ = self.gocd.console_log(job, console_line(line)).await;
        }
    }

    /// Reads from AWS what pricing `agent_id`'s job needs and no table holds (a capacity
    /// provider's instance, a Spot price, a price the table lacks: `accounting/job_cost/reads.rs`)
    /// before its cost is said: waits at most [`READS_AT_MOST`], as the agent's task is stopped
    /// after it (a slow read leaves the job's cost not known, never its task running). The
    /// reads run as the engine's background work, so one that outlasts the wait is not
    /// cancelled: it ends, and keeps what it read, behind the completion.
    async fn read_what_pricing_needs(self: &Arc<Self>, agent_id: &AgentId) {
        let (done, read) = tokio::sync::oneshot::channel();
        let (cluster, agent) = (self.clone(), agent_id.clone());
        let reads = async move {
            let (costs, src) = (&cluster.state.cost, cluster.pricing_sources());
            costs.learn_provider_instance(&src, &agent).await;
            costs.learn_spot_price(&src, &agent, cluster.now()).await;
            costs.fill_price_gaps(&src, &agent, cluster.now()).await;
            let _ = done.send(());
        };
        self.spawn_background(reads.in_current_span());
        // An error: the reads ended without finishing (the runtime is shutting down).
        if !matches!(tokio::time::timeout(READS_AT_MOST, read).await, Ok(Ok(()))) {
            tracing::info!(
                agent_id = agent_id.as_str(),
                "reading what the job's price needs took too long; its cost may be not known"
            );
        }
    }

    /// Stops one task of ours, with a reason ECS shows (at most 255 characters). A task ECS no
    /// longer knows (it stopped over an hour ago and was forgotten) is not running: stopped.
    ///
    /// # Errors
    /// The failed StopTask call (server-ping tries again).
    pub async fn stop_task(&self, task_arn: &str, reason: &str) -> Result<(), AwsError> {
        let cluster_name = self.profile().cluster_name.clone();
        match self.aws().stop_task(&cluster_name, task_arn, reason).await {
            Ok(Stopped::Stopping) => Ok(()),
            Ok(Stopped::AlreadyGone) => {
                tracing::info!(task_arn, "StopTask: ECS no longer knows the task, so it is not running");
                Ok(())
            }
            Err(e) => {
                self.event(HealthKind::Warning, format!("could not stop task {task_arn}: {e}"));
                Err(e)
            }
        }
    }
}
