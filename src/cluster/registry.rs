//! The in-memory picture of one cluster profile's agents: which agent was started for which
//! job, its task, and where it is in its life. It is rebuilt from AWS after a restart
//! (`adopt`), so losing it loses nothing. Pure data: no I/O, no clock of its own.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::tasks::TaskView;
use crate::protocol::types::JobIdentifier;

/// How long stopped agents stay visible in status reports.
pub const KEEP_STOPPED: Duration = Duration::from_secs(3600);

/// Where an agent is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Phase {
    /// Reserved; RunTask not answered yet.
    Launching,
    /// Its task exists and is not stopping.
    Running,
    /// We asked ECS to stop it.
    Stopping,
    /// Its task is stopped (or never started).
    Stopped,
}

impl Phase {
    /// Serves its job: dedupes create-agent.
    pub fn is_live(self) -> bool {
        matches!(self, Phase::Launching | Phase::Running)
    }

    /// Has (or may have) a task that is not stopped yet: counts against `MaxAgents`.
    pub fn occupies_capacity(self) -> bool {
        matches!(self, Phase::Launching | Phase::Running | Phase::Stopping)
    }
}

/// One agent we started (or adopted).
#[derive(Debug, Clone, Serialize)]
pub struct AgentRecord {
    /// The elastic agent id.
    pub agent_id: String,
    /// The job it was started for.
    pub job: JobIdentifier,
    /// The pipeline's environment.
    pub environment: Option<String>,
    /// Hash of its elastic profile.
    pub elastic_profile: String,
    /// Image it runs.
    pub image: String,
    /// Which launch for this job (1 for the first).
    pub attempt: u32,
    /// Its phase.
    pub phase: Phase,
    /// Its task, once RunTask answered.
    pub task_arn: Option<String>,
    /// How it was launched (FARGATE, FARGATE_SPOT, ...).
    pub capacity: Option<String>,
    /// When create-agent reserved it (or when we adopted it).
    pub created_at: SystemTime,
    /// When GoCD first listed the agent.
    pub registered_at: Option<SystemTime>,
    /// Since when GoCD has listed it idle without work.
    pub idle_since: Option<SystemTime>,
    /// When GoCD assigned it its job.
    pub assigned_at: Option<SystemTime>,
    /// When it stopped.
    pub stopped_at: Option<SystemTime>,
    /// Why it stopped.
    pub stop_reason: Option<String>,
    /// ECS's last description of its task.
    pub task: Option<TaskView>,
}

/// What [`Registry::reserve`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// A live agent already serves this job.
    Existing(String),
    /// `MaxAgents` live agents exist.
    Full {
        /// Live agents now.
        live: usize,
    },
    /// A slot is reserved for this agent id and launch attempt.
    Reserved {
        /// The new agent id.
        agent_id: String,
        /// Launch attempt for the job.
        attempt: u32,
    },
}

/// All agents of one cluster profile.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    agents: BTreeMap<String, AgentRecord>,
}

impl Registry {
    /// The agent with this id.
    pub fn get(&self, agent_id: &str) -> Option<&AgentRecord> {
        self.agents.get(agent_id)
    }

    /// The agent with this id, to change.
    pub fn get_mut(&mut self, agent_id: &str) -> Option<&mut AgentRecord> {
        self.agents.get_mut(agent_id)
    }

    /// Every agent, by id.
    pub fn all(&self) -> impl Iterator<Item = &AgentRecord> {
        self.agents.values()
    }

    /// Every agent, to change.
    pub fn all_mut(&mut self) -> impl Iterator<Item = &mut AgentRecord> {
        self.agents.values_mut()
    }

    /// The live agent serving `job_id`, if any.
    pub fn live_for_job(&self, job_id: i64) -> Option<&AgentRecord> {
        self.agents.values().find(|a| a.job.job_id == job_id && a.phase.is_live())
    }

    /// Live agents (running plus launching).
    pub fn live_count(&self) -> usize {
        self.agents.values().filter(|a| a.phase.is_live()).count()
    }

    /// The agent whose task is `arn`.
    pub fn by_task(&self, arn: &str) -> Option<&AgentRecord> {
        self.agents.values().find(|a| a.task_arn.as_deref() == Some(arn))
    }

    /// Reserves a slot for `job` unless a live agent serves it or `max_agents` are live, in one
    /// step, so concurrent create-agent calls can neither exceed the limit nor double a job.
    pub fn reserve(
        &mut self,
        job: &JobIdentifier,
        new_agent_id: String,
        max_agents: usize,
        fill: impl FnOnce(&mut AgentRecord),
        now: SystemTime,
    ) -> Reservation {
        if let Some(existing) = self.live_for_job(job.job_id) {
            return Reservation::Existing(existing.agent_id.clone());
        }
        let live = self.agents.values().filter(|a| a.phase.occupies_capacity()).count();
        if live >= max_agents {
            return Reservation::Full { live };
        }
        let attempt = self.agents.values().filter(|a| a.job.job_id == job.job_id).map(|a| a.attempt).max().unwrap_or(0) + 1;
        let mut record = AgentRecord {
            agent_id: new_agent_id.clone(),
            job: job.clone(),
            environment: None,
            elastic_profile: String::new(),
            image: String::new(),
            attempt,
            phase: Phase::Launching,
            task_arn: None,
            capacity: None,
            created_at: now,
            registered_at: None,
            idle_since: None,
            assigned_at: None,
            stopped_at: None,
            stop_reason: None,
            task: None,
        };
        fill(&mut record);
        self.agents.insert(new_agent_id.clone(), record);
        Reservation::Reserved { agent_id: new_agent_id, attempt }
    }

    /// Records RunTask's answer.
    pub fn launched(&mut self, agent_id: &str, task: TaskView) {
        if let Some(a) = self.agents.get_mut(agent_id) {
            a.task_arn = Some(task.arn.clone());
            a.capacity = Some(task.capacity.clone()).filter(|c| !c.is_empty()).or(a.capacity.take());
            if a.phase == Phase::Launching {
                a.phase = Phase::Running;
            }
            a.task = Some(task);
        }
    }

    /// Marks an agent stopped (launch failed, task stopped, job done).
    pub fn stopped(&mut self, agent_id: &str, reason: impl Into<String>, now: SystemTime) {
        if let Some(a) = self.agents.get_mut(agent_id) {
            a.phase = Phase::Stopped;
            a.stopped_at.get_or_insert(now);
            a.stop_reason.get_or_insert_with(|| reason.into());
        }
    }

    /// Inserts an agent found in AWS that we do not know (adoption after a restart).
    pub fn adopt(&mut self, record: AgentRecord) {
        self.agents.entry(record.agent_id.clone()).or_insert(record);
    }

    /// Forgets agents stopped longer than [`KEEP_STOPPED`] ago.
    pub fn prune(&mut self, now: SystemTime) {
        self.agents.retain(|_, a| {
            a.phase != Phase::Stopped
                || a.stopped_at.is_none_or(|t| now.duration_since(t).unwrap_or_default() < KEEP_STOPPED)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: i64) -> JobIdentifier {
        JobIdentifier {
            pipeline_name: "p".into(),
            pipeline_label: "1".into(),
            pipeline_counter: 1,
            stage_name: "s".into(),
            stage_counter: "1".into(),
            job_name: "j".into(),
            job_id: id,
        }
    }

    #[test]
    fn reserve_dedupes_by_job_and_caps_live_agents() {
        let now = SystemTime::UNIX_EPOCH;
        let mut r = Registry::default();
        assert_eq!(r.reserve(&job(1), "a".into(), 2, |_| {}, now), Reservation::Reserved { agent_id: "a".into(), attempt: 1 });
        assert_eq!(r.reserve(&job(1), "b".into(), 2, |_| {}, now), Reservation::Existing("a".into()));
        assert!(matches!(r.reserve(&job(2), "c".into(), 2, |_| {}, now), Reservation::Reserved { .. }));
        assert_eq!(r.reserve(&job(3), "d".into(), 2, |_| {}, now), Reservation::Full { live: 2 });
        r.stopped("a", "spot reclaimed", now);
        assert_eq!(r.reserve(&job(1), "e".into(), 2, |_| {}, now), Reservation::Reserved { agent_id: "e".into(), attempt: 2 });
        assert_eq!(r.live_count(), 2);
    }

    #[test]
    fn stopped_keeps_the_first_reason_and_prune_forgets_old_ones() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        let mut r = Registry::default();
        r.reserve(&job(1), "a".into(), 5, |_| {}, now);
        r.stopped("a", "first", now);
        r.stopped("a", "second", now + Duration::from_secs(5));
        assert_eq!(r.get("a").unwrap().stop_reason.as_deref(), Some("first"));
        r.prune(now + KEEP_STOPPED - Duration::from_secs(1));
        assert!(r.get("a").is_some());
        r.prune(now + KEEP_STOPPED + Duration::from_secs(1));
        assert!(r.get("a").is_none());
    }
}
