//! Carrying out a plan's steps: StopTask with the reason, the registry's `stopped` transition,
//! a line in the job's console and server health, a cancelled job's trace ended, and GoCD's
//! agents disabled and deleted in one call each.

use std::time::SystemTime;

use super::plan::Step;
use crate::cluster::agents::AgentRecord;
use crate::cluster::base::error::EngineError;
use crate::cluster::base::gocd::console_line;
use crate::cluster::Cluster;
use crate::protocol::host_calls::HealthKind;

impl Cluster {
    /// Applies `steps` in order; a StopTask that fails is tried again by the next pass.
    ///
    /// # Errors
    /// A failed call to GoCD (disable or delete agents).
    pub(crate) async fn apply(&self, steps: Vec<Step>) -> Result<(), EngineError> {
        let mut remove = Vec::new();
        for step in steps {
            match step {
                Step::StopTask { agent_id, task_arn, reason, job } => {
                    tracing::info!(agent_id = agent_id.as_str(), task = %task_arn, %reason, "stopping task");
                    if self.stop_task(&task_arn, &reason).await.is_ok() {
                        self.idle_agent_stopped(&agent_id, self.now());
                        self.registry().stopped(&agent_id, reason.clone(), self.now());
                        if let Some(job) = job {
                            self.event(
                                HealthKind::Warning,
                                format!("stopped agent {agent_id} of job {}: {reason}", job.locator()),
                            );
                            let line = console_line(format!("stopped agent {agent_id}: {reason}"));
                            let _ = self.gocd.console_log(&job, line).await;
                        }
                    }
                }
                Step::ReportUnexpectedStop { agent_id, job, reason } => {
                    let now = self.now();
                    if self.registry().get(&agent_id).is_some_and(|a| a.waiting_since.is_some()) {
                        self.waiting_agent_stopped(&agent_id, &reason, now);
                        continue;
                    }
                    let spot = self.registry().get(&agent_id).is_some_and(AgentRecord::spot_interrupted);
                    self.registry().stopped(&agent_id, reason.clone(), now);
                    let mut message = format!(
                        "the task of agent {agent_id} (job {}) stopped before the job completed: {reason}",
                        job.locator()
                    );
                    if spot {
                        self.registry().interrupted(&agent_id, now);
                        message.push_str(
                            "; Spot interrupted it: when GoCD reschedules the job, its next agent runs on on-demand capacity",
                        );
                    }
                    self.queue_missed(&agent_id);
                    self.event(HealthKind::Error, message.clone());
                    let _ = self.gocd.console_log(&job, console_line(message)).await;
                }
                Step::JobGone { job } => {
                    crate::telemetry::jobs::gone(
                        &job,
                        "GoCD stopped asking for the job before any agent took it (cancelled)",
                    );
                }
                Step::RemoveAgent { agent_id, reason } => {
                    tracing::info!(agent_id = agent_id.as_str(), %reason, "removing agent from GoCD");
                    remove.push(agent_id);
                }
            }
        }
        remove.sort();
        remove.dedup();
        // Another path (job-completion, or the other of server-ping and the event queue) may have
        // removed some since this plan was made: each agent is removed by one of them.
        let remove = self.registry().claim_removal(&remove, self.now());
        let removed = async {
            self.gocd.disable_agents(&remove).await?;
            self.gocd.delete_agents(&remove).await
        }
        .await;
        if removed.is_err() {
            self.registry().removal_failed(&remove);
        }
        removed?;
        Ok(())
    }

    /// The task of an agent waiting for a job (warm, or kept after one) stopped: no job ran on
    /// it, so no console hears of it. Its idle time is its pool's cost, a Spot interruption is
    /// counted, and the warm pool's next pass replaces it on an unused key.
    fn waiting_agent_stopped(&self, agent_id: &crate::ids::AgentId, reason: &str, now: SystemTime) {
        let spot = self.registry().get(agent_id).is_some_and(AgentRecord::spot_interrupted);
        self.idle_agent_stopped(agent_id, now);
        if spot {
            self.registry().interrupted(agent_id, now);
        }
        self.registry().stopped(agent_id, reason.to_string(), now);
        self.queue_missed(agent_id);
        let mut message = format!("the task of idle agent {agent_id} stopped while it waited for a job: {reason}");
        if spot {
            message.push_str("; Spot interrupted it: no job ran on it, and its warm pool starts a replacement on an unused registration key");
        }
        self.event(HealthKind::Warning, message);
    }
}
