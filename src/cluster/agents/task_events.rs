//! The registry's transitions for what the event queue says: a task's new state folded into its
//! record ([`Registry::task_event`]), and Spot interruptions remembered per job
//! ([`Registry::interrupted`]), so the job's next agent runs on on-demand capacity.

use std::time::{Duration, SystemTime};

use super::record::Registry;
use crate::cluster::agents::tasks::TaskView;
use crate::ids::{AgentId, JobKey};
use crate::protocol::types::JobIdentifier;

/// How long a job's interruption is remembered: GoCD reschedules at once, or after a rerun.
pub const REMEMBER_INTERRUPTIONS: Duration = Duration::from_secs(24 * 3600);

/// What an event changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEvent {
    /// The agent whose task it is.
    pub agent_id: AgentId,
    /// The task stopped (or is stopping) and the record had not known it.
    pub newly_stopped: bool,
}

/// A job as it survives a reschedule (GoCD gives the rescheduled job a new id) or a stage rerun.
fn job_key(job: &JobIdentifier) -> JobKey {
    format!("{}/{}/{}/{}", job.pipeline_name, job.pipeline_counter, job.stage_name, job.job_name).into()
}

impl Registry {
    /// Folds an event's description of a task into the record that holds the task: the
    /// timeline (pull, start, stop times), status, stop code and reason, exit codes. Never
    /// moves a stopping task back to running (events may come out of order). `None` when no
    /// record holds the task (not ours, or not known yet).
    pub fn task_event(&mut self, task: &TaskView) -> Option<TaskEvent> {
        let agent_id = self.by_task(&task.arn)?.agent_id.clone();
        let record = self.get_mut(&agent_id)?;
        let was_stopping = record.task.as_ref().is_some_and(TaskView::is_stopping);
        let kept = record.task.get_or_insert_with(|| task.kept_copy());
        if was_stopping && !task.is_stopping() {
            return Some(TaskEvent { agent_id, newly_stopped: false });
        }
        kept.last_status.clone_from(&task.last_status);
        kept.desired_status.clone_from(&task.desired_status);
        if !task.capacity.is_empty() {
            kept.capacity.clone_from(&task.capacity);
        }
        let or = |new: &Option<SystemTime>, old: Option<SystemTime>| new.or(old);
        kept.created_at = or(&task.created_at, kept.created_at);
        kept.pull_started_at = or(&task.pull_started_at, kept.pull_started_at);
        kept.pull_stopped_at = or(&task.pull_stopped_at, kept.pull_stopped_at);
        kept.started_at = or(&task.started_at, kept.started_at);
        kept.stopped_at = or(&task.stopped_at, kept.stopped_at);
        if task.stop_code.is_some() {
            kept.stop_code.clone_from(&task.stop_code);
        }
        if task.stopped_reason.is_some() {
            kept.stopped_reason.clone_from(&task.stopped_reason);
        }
        if !task.containers.is_empty() {
            kept.containers.clone_from(&task.containers);
        }
        record.task_found();
        Some(TaskEvent { agent_id, newly_stopped: !was_stopping && task.is_stopping() })
    }

    /// The agent's task was interrupted by Spot (Fargate Spot, or an EC2 Spot instance): its
    /// job's next agent runs on on-demand capacity. Counted once per agent, and per elastic
    /// profile. An agent waiting for a job (warm, or kept after one) had none running: nothing
    /// of any job is remembered.
    pub fn interrupted(&mut self, agent_id: &str, now: SystemTime) {
        let Some(record) = self.get(agent_id) else { return };
        let key = (record.waiting_since.is_none()).then(|| job_key(&record.job));
        let profile = record.elastic_profile.clone();
        if self.interrupted_agents.insert(agent_id.into()) {
            self.interruptions += 1;
            *self.interruptions_by_profile.entry(profile).or_insert(0) += 1;
        }
        if let Some(key) = key {
            self.interrupted_jobs.insert(key, now);
        }
    }

    /// Spot interruptions so far by elastic profile (its hash), for the report.
    pub fn interruptions_by_profile(&self) -> &std::collections::BTreeMap<String, u64> {
        &self.interruptions_by_profile
    }

    /// Whether `agent_id` must not be given `job`: Spot interrupted the job's previous agent,
    /// and this one runs on Fargate Spot too (a warm agent of `WarmLaunchType` FARGATE_SPOT, or
    /// kept after a job there); the job's rerun gets an on-demand agent.
    pub(super) fn spot_for_interrupted(&self, agent: &super::AgentRecord, job: &JobIdentifier) -> bool {
        agent.capacity == Some(crate::cluster::agents::tasks::Capacity::FargateSpot) && self.was_interrupted(job)
    }

    /// Whether the job's earlier agent was interrupted by Spot.
    pub fn was_interrupted(&self, job: &JobIdentifier) -> bool {
        self.interrupted_jobs.contains_key(&job_key(job))
    }

    /// Spot interruptions of this profile's agents so far.
    pub fn interruptions(&self) -> u64 {
        self.interruptions
    }

    /// Forgets interruptions older than [`REMEMBER_INTERRUPTIONS`].
    pub(super) fn prune_interruptions(&mut self, now: SystemTime) {
        self.interrupted_jobs.retain(|_, t| now.duration_since(*t).unwrap_or_default() < REMEMBER_INTERRUPTIONS);
        let agents = &self.agents;
        self.interrupted_agents.retain(|a| agents.contains_key(a));
    }
}

#[cfg(test)]
mod tests {
    use super::super::NewAgent;
    use super::*;
    use crate::cluster::agents::tasks::Capacity;
    use crate::cluster::agents::tasks::{StopCode, TaskStatus};
    use crate::cluster::tests::fixtures::{job, tags, task};

    fn running(r: &mut Registry, agent: &str, job_id: i64, arn: &str) {
        r.reserve(&job(job_id), agent.into(), 10, NewAgent::default(), SystemTime::UNIX_EPOCH);
        r.launched(agent, task(arn, tags(agent, job_id), TaskStatus::Running), Capacity::FargateSpot);
    }

    #[test]
    fn an_event_fills_the_timeline_and_never_goes_back() {
        let mut r = Registry::default();
        running(&mut r, "a", 1, "t1");
        let t = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let mut pulled = task("t1", Default::default(), TaskStatus::Running);
        pulled.pull_started_at = Some(t(10));
        pulled.pull_stopped_at = Some(t(13));
        pulled.started_at = Some(t(14));
        assert_eq!(r.task_event(&pulled), Some(TaskEvent { agent_id: "a".into(), newly_stopped: false }));
        let kept = r.get("a").unwrap().task.clone().unwrap();
        assert_eq!(
            (kept.pull_started_at, kept.pull_stopped_at, kept.started_at),
            (Some(t(10)), Some(t(13)), Some(t(14)))
        );

        let mut stopped = task("t1", Default::default(), TaskStatus::Stopped);
        stopped.desired_status = TaskStatus::Stopped;
        stopped.stop_code = Some(StopCode::SpotInterruption);
        assert_eq!(r.task_event(&stopped), Some(TaskEvent { agent_id: "a".into(), newly_stopped: true }));
        assert_eq!(r.task_event(&stopped).map(|e| e.newly_stopped), Some(false), "told once");
        // A late RUNNING event changes nothing.
        assert_eq!(r.task_event(&pulled).map(|e| e.newly_stopped), Some(false));
        let kept = r.get("a").unwrap().task.clone().unwrap();
        assert!(kept.is_stopping() && kept.started_at == Some(t(14)) && kept.stop_code.is_some());
        // Not ours: nothing.
        assert_eq!(r.task_event(&task("t-foreign", Default::default(), TaskStatus::Stopped)), None);
    }

    #[test]
    fn interruptions_are_remembered_per_job_across_reschedules() {
        let mut r = Registry::default();
        running(&mut r, "a", 1, "t1");
        let now = SystemTime::UNIX_EPOCH;
        r.interrupted("a", now);
        r.interrupted("a", now);
        assert_eq!(r.interruptions(), 1, "one agent, one interruption");
        let rescheduled = job(2);
        assert!(r.was_interrupted(&rescheduled), "the same job under a new GoCD job id");
        let mut other = job(3);
        other.job_name = "another-job".into();
        assert!(!r.was_interrupted(&other));
        r.prune_interruptions(now + REMEMBER_INTERRUPTIONS);
        assert!(!r.was_interrupted(&rescheduled));
    }

    #[test]
    fn an_idle_warm_agent_interrupted_marks_no_job_and_counts_for_its_profile() {
        let mut r = Registry::default();
        let now = SystemTime::UNIX_EPOCH;
        let new = NewAgent { elastic_profile: "warm".into(), ..NewAgent::default() };
        assert!(r.reserve_warm(&job(1), "w".into(), 10, new, now));
        r.launched("w", task("t1", tags("w", 1), TaskStatus::Running), Capacity::FargateSpot);
        r.interrupted("w", now);
        assert!(!r.was_interrupted(&job(1)), "the job that lent it its key is not affected");
        assert!(r.get("w").is_some_and(|w| !r.spot_for_interrupted(w, &job(1))));
        assert_eq!(r.interruptions(), 1);
        assert_eq!(r.interruptions_by_profile().get("warm"), Some(&1));
        // A job's agent interrupted: the job is remembered, and no Spot agent gets its rerun.
        running(&mut r, "a", 2, "t2");
        r.interrupted("a", now);
        assert!(r.was_interrupted(&job(3)), "the job rescheduled");
        let spot = r.get("w").cloned().expect("record");
        assert!(r.spot_for_interrupted(&spot, &job(3)));
        let mut other = job(4);
        other.job_name = "another-job".into();
        assert!(!r.spot_for_interrupted(&spot, &other), "another job may take it");
    }
}
