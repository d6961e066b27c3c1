//! What one event does to one cluster profile's engine. Only tasks this engine holds (by task
//! ARN, started by its `startedBy` in its cluster) and instances of its own pool are acted on;
//! anything else is [`Handled::NotOurs`] and changes nothing.

use super::parse::QueueEvent;
use crate::aws::ecs::InstanceStatus;
use crate::cluster::agents::steps::Step;
use crate::cluster::agents::tasks::TaskView;
use crate::cluster::agents::{AgentRecord, Phase};
use crate::cluster::base::error::EngineError;
use crate::cluster::base::gocd::console_line;
use crate::cluster::base::identity::cluster_arn_suffix;
use crate::cluster::capacity::ec2::{api, ContainerInstanceStatus};
use crate::cluster::Cluster;
use crate::protocol::host_calls::HealthKind;

/// What an event did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// Not this engine's task or instance (another server, profile or cluster), or not an
    /// event it acts on.
    NotOurs,
    /// A task's record took the event's state (status, timeline).
    Updated,
    /// A task stopped: its agent was removed (and its job told when it had not completed).
    Stopped,
    /// An instance of ours is to be interrupted: it was drained.
    Drained,
}

impl Cluster {
    /// Acts on one event from the queue.
    ///
    /// # Errors
    /// A failed call to GoCD (listing, disabling or deleting agents); server-ping tries again.
    pub async fn on_event(&self, event: &QueueEvent) -> Result<Handled, EngineError> {
        match event {
            QueueEvent::Task { task, started_by } => {
                if started_by.as_deref() != Some(self.started_by()) || !self.in_this_cluster(task) {
                    return Ok(Handled::NotOurs);
                }
                self.on_task_event(task).await
            }
            QueueEvent::SpotWarning { instance_id, .. } => Ok(self.on_spot_warning(instance_id).await),
            QueueEvent::InstanceState { instance_id, state } => {
                if self.ec2().state().instance(instance_id).is_none() {
                    return Ok(Handled::NotOurs);
                }
                tracing::info!(instance = %instance_id, %state, "an instance of ours changed state");
                self.ec2().wake(); // its loop observes the change now rather than at its next beat
                Ok(Handled::Updated)
            }
            QueueEvent::Other { .. } => Ok(Handled::NotOurs),
        }
    }

    /// An EC2 Spot interruption warning for an instance of ours: two minutes before it goes,
    /// it is drained (ECS places no new task there), tagged as warned (a restarted plugin still
    /// knows), the capacity loop launches on-demand room for its tasks' reruns at once (`plan`'s
    /// step 3), and each job on it is told.
    async fn on_spot_warning(&self, instance_id: &str) -> Handled {
        let (container, newly_warned) = {
            let mut st = self.ec2().state();
            let Some(record) = st.instance_mut(instance_id) else { return Handled::NotOurs };
            let now = self.now();
            let newly_warned = record.spot_warned(now).then_some(now);
            (record.container().map(|c| c.arn.clone()), newly_warned)
        };
        self.event(
            HealthKind::Warning,
            format!(
                "EC2 Spot will interrupt instance {instance_id} in two minutes: it is drained, its tasks stop with it"
            ),
        );
        if let Some(arn) = &container {
            let cluster = self.profile().cluster_name.clone();
            match self.aws().set_instance_status(&cluster, arn, InstanceStatus::Draining).await {
                Ok(()) => {
                    if let Some(record) = self.ec2().state().instance_mut(instance_id) {
                        record.container_status(ContainerInstanceStatus::Draining);
                    }
                }
                Err(e) => {
                    tracing::warn!(instance = %instance_id, error = %e, "could not drain an instance Spot interrupts")
                }
            }
        }
        if let Some(at) = newly_warned {
            if let Err(e) = api::mark_spot_warned(&self.aws(), instance_id, at).await {
                tracing::warn!(instance = %instance_id, error = %e, "could not tag an instance Spot interrupts as warned (a restart now would forget the warning)");
            }
        }
        if let Some(arn) = &container {
            self.tell_jobs_on(instance_id, arn).await;
        }
        self.ec2().wake();
        Handled::Drained
    }

    /// Each job whose agent runs on the interrupted instance is told, and the interruption is
    /// counted (ListTasks of the container instance: one ECS read).
    async fn tell_jobs_on(&self, instance_id: &str, container_arn: &str) {
        let cluster = self.profile().cluster_name.clone();
        let aws = self.aws();
        let arns = match aws.list_tasks_on(&cluster, container_arn).await {
            Ok(arns) => arns,
            Err(e) => {
                tracing::warn!(instance = %instance_id, error = %e, "could not list the tasks of an instance Spot interrupts");
                return;
            }
        };
        let now = self.now();
        let jobs: Vec<(crate::ids::AgentId, crate::protocol::types::JobIdentifier)> = {
            let mut registry = self.registry();
            let found: Vec<_> = arns
                .iter()
                .filter_map(|arn| registry.by_task(arn))
                .filter(|a| a.phase.is_live())
                .map(|a| (a.agent_id.clone(), a.job.clone()))
                .collect();
            found.iter().for_each(|(agent, _)| registry.interrupted(agent, now));
            found
        };
        for (agent_id, job) in jobs {
            let line = console_line(format!(
                "EC2 Spot interrupts instance {instance_id} in two minutes: agent {agent_id} stops with it, and the \
                 instance takes no new task (drained); new work starts on other instances, and the job's rerun \
                 runs on demand, on capacity prepared now (up to Ec2MaxInstances)"
            ));
            let _ = self.gocd().console_log(&job, line).await;
        }
    }

    fn in_this_cluster(&self, task: &TaskView) -> bool {
        task.cluster_arn.ends_with(&cluster_arn_suffix(&self.profile().cluster_name))
    }

    async fn on_task_event(&self, task: &TaskView) -> Result<Handled, EngineError> {
        // Never beside a server-ping pass: one of the two would tell the job twice.
        let _one_at_a_time = self.state.ping_lock.lock().await;
        let Some(change) = self.registry().task_event(task) else {
            return Ok(Handled::NotOurs);
        };
        self.queue_status().events += 1;
        if task.is_stopping() {
            self.queue_late(&change.agent_id);
        }
        if !change.newly_stopped {
            return Ok(Handled::Updated);
        }
        let agent_id = change.agent_id;
        if self.registry().is_completing(&agent_id) {
            // Its job-completion stopped the task and removes the agent: nothing to add.
            return Ok(Handled::Updated);
        }
        let Some(record) = self.registry().get(&agent_id).cloned() else { return Ok(Handled::Updated) };
        let finished = self.registry().is_finished(record.job.job_id);
        let listed = self.gocd.list_agents().await?.iter().any(|a| a.agent_id == agent_id);
        let steps = on_stopped(&record, finished, listed);
        tracing::info!(agent_id = agent_id.as_str(), task = %task.arn, steps = steps.len(), "a task of ours stopped (event)");
        if steps.is_empty() {
            // Stopped as asked (the job completed): the record follows.
            self.registry().stopped(&agent_id, "job completed", self.now());
        } else {
            self.queue_told(&agent_id);
            self.apply(steps).await?;
        }
        self.queue_status().stops += 1;
        Ok(Handled::Stopped)
    }
}

/// What a stop an event told of asks for (pure, like server-ping's plan): a running agent whose
/// job had not completed is reported (job console, server health) and removed from GoCD when
/// listed there; so is a live agent waiting for a job (warm or kept: reported in server health
/// only, no job ran on it); one stopped as asked (its job completed) needs nothing (`complete`
/// removed it), unless GoCD still lists it.
pub fn on_stopped(record: &AgentRecord, job_finished: bool, listed: bool) -> Vec<Step> {
    let mut steps = Vec::new();
    let unexpected = record.phase.is_live() && (!job_finished || record.waiting_since.is_some());
    if unexpected {
        let reason = record.task.as_ref().map(TaskView::stop_summary).unwrap_or_default();
        steps.push(Step::ReportUnexpectedStop { agent_id: record.agent_id.clone(), job: record.job.clone(), reason });
    }
    if listed && (unexpected || record.phase != Phase::Launching) {
        let reason = if unexpected { "its task stopped before the job completed" } else { "its task is stopped" };
        steps.push(Step::RemoveAgent { agent_id: record.agent_id.clone(), reason: reason.into() });
    }
    steps
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::cluster::agents::tasks::Capacity;
    use crate::cluster::agents::tasks::{StopCode, TaskStatus};
    use crate::cluster::agents::{NewAgent, Registry};
    use crate::cluster::tests::fixtures::{job, tags, task};

    fn stopped_record(phase_after: impl FnOnce(&mut Registry)) -> AgentRecord {
        let mut r = Registry::default();
        r.reserve(&job(1), "a".into(), 5, NewAgent::default(), SystemTime::UNIX_EPOCH);
        r.launched("a", task("t1", tags("a", 1), TaskStatus::Running), Capacity::Fargate);
        phase_after(&mut r);
        let mut gone = task("t1", vec![], TaskStatus::Stopped);
        gone.stopped_reason = Some("Essential container in task exited".into());
        gone.stop_code = Some(StopCode::EssentialContainerExited);
        assert!(r.task_event(&gone).is_some_and(|e| e.newly_stopped));
        r.get("a").cloned().expect("the record")
    }

    #[test]
    fn an_unexpected_stop_is_reported_and_its_agent_removed() {
        let record = stopped_record(|_| {});
        let steps = on_stopped(&record, false, true);
        assert!(
            matches!(&steps[..], [
            Step::ReportUnexpectedStop { reason, .. },
            Step::RemoveAgent { agent_id, .. },
        ] if reason.contains("EssentialContainerExited") && agent_id == "a"),
            "{steps:?}"
        );
        // Not registered yet: told, nothing to remove.
        assert!(matches!(&on_stopped(&record, false, false)[..], [Step::ReportUnexpectedStop { .. }]));
    }

    #[test]
    fn a_stop_that_was_asked_for_needs_nothing() {
        let record = stopped_record(|r| {
            r.stopping("a");
        });
        assert_eq!(on_stopped(&record, true, false), vec![]);
        // GoCD still lists it (job-completion could not delete it): removed.
        assert!(matches!(&on_stopped(&record, true, true)[..], [Step::RemoveAgent { .. }]));
        // A running agent whose job GoCD reported completed is no surprise either.
        let record = stopped_record(|_| {});
        assert_eq!(on_stopped(&record, true, false), vec![]);
    }
}
