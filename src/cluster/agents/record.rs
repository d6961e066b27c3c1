//! An agent's record and the registry that holds them: what each record carries, the phase it
//! is in ([`Phase`]; which phases there are and how a record moves between them is
//! `lifecycle.rs`, on one page), and the reads every part of the engine makes. Pure data: no I/O,
//! no clock of its own.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::Serialize;

use super::tasks::{Capacity, StopCode, TaskView};
use crate::ids::{AgentId, JobKey, SettingsFingerprint, TaskArn};
use crate::protocol::types::JobIdentifier;
use crate::settings::Reuse;

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

/// What job-completion does with the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobDone {
    /// Kept for the next job (warm starts): it has run `jobs` of at most `max_jobs`.
    Keep {
        /// Jobs run so far.
        jobs: usize,
        /// `ReuseMaxJobs`.
        max_jobs: u32,
    },
    /// A job the agent ran before its current one (a late or repeated job-completion): nothing
    /// to do.
    Earlier,
    /// Stop it (one job per agent, its jobs used up, or its task is going anyway).
    Stop,
    /// Not an agent of ours.
    NotOurs,
}

/// One agent we started (or adopted).
#[derive(Debug, Clone, Serialize)]
pub struct AgentRecord {
    /// The elastic agent id.
    pub agent_id: AgentId,
    /// The job it was started for.
    pub job: JobIdentifier,
    /// The pipeline's environment.
    pub environment: Option<String>,
    /// Hash of its elastic profile.
    pub elastic_profile: String,
    /// The [`settings_fingerprint`](crate::cluster::base::identity::settings_fingerprint) of the
    /// cluster profile it was started under: `MaxAgents` counts per fingerprint.
    pub settings: SettingsFingerprint,
    /// Image it runs.
    pub image: String,
    /// Which launch for this job (1 for the first).
    pub attempt: u32,
    /// Its phase.
    pub phase: Phase,
    /// Its task, once RunTask answered.
    pub task_arn: Option<TaskArn>,
    /// Where it runs, once known.
    pub capacity: Option<Capacity>,
    /// When create-agent reserved it (or when we adopted it); for an EC2 agent, when StartTask
    /// placed it (its register timeout counts from there).
    pub created_at: SystemTime,
    /// When its current job's create-agent came: where the job's wait began. `None` for an
    /// agent adopted after a restart (its job's create-agent went to the previous process).
    pub job_requested_at: Option<SystemTime>,
    /// When GoCD last sent create-agent for its current job, first or re-sent: GoCD re-sends
    /// while the job waits, so a registered agent whose job GoCD still asks for is not idle for
    /// want of a job. `None` for an adopted agent until GoCD asks again.
    #[serde(skip)]
    pub job_asked_at: Option<SystemTime>,
    /// When GoCD first listed the agent.
    pub registered_at: Option<SystemTime>,
    /// When GoCD first asked should-assign-work of it (it asks registered agents only): with
    /// `registered_at`, when it registered, for its job's trace (`start_phases`).
    #[serde(skip)]
    pub asked_for_work_at: Option<SystemTime>,
    /// Since when GoCD has listed it idle without work.
    pub idle_since: Option<SystemTime>,
    /// When GoCD last listed it.
    pub last_listed: Option<SystemTime>,
    /// Since when GoCD has listed it LostContact or Missing.
    pub unhealthy_since: Option<SystemTime>,
    /// When GoCD assigned it its job.
    pub assigned_at: Option<SystemTime>,
    /// When it stopped.
    pub stopped_at: Option<SystemTime>,
    /// Why it stopped.
    pub stop_reason: Option<String>,
    /// ECS's last description of its task.
    pub task: Option<TaskView>,
    /// Warm starts (`ReuseIdleMinutes`), when its elastic profile has them on.
    #[serde(skip)]
    pub reuse: Option<Reuse>,
    /// The ids of the jobs it was given, in order (the first is the one it was started for).
    pub served_jobs: Vec<i64>,
    /// Since when it waits, idle and kept, for its next job (warm starts).
    pub waiting_since: Option<SystemTime>,
    /// Started as a warm agent (`WarmAgents`), with no job of its own: `job` is the job whose
    /// unused registration key it started with, until it is given a job.
    pub warm: bool,
    /// When a path of this process took on removing the agent from GoCD (disable-agents, then
    /// delete-agents; cleared if GoCD did not answer): for a short while after, GoCD's listing of
    /// it is older than the removal, not a reason to remove it again ([`REMOVAL_SETTLES`]).
    pub removed_at: Option<SystemTime>,
}

/// How long after this process had GoCD delete an agent a listing of it is taken as older than
/// the deletion (server-ping's list and an event's look may have been read before it): no second
/// delete-agents for it within this time. Past it, an agent GoCD still lists is deleted again.
pub const REMOVAL_SETTLES: std::time::Duration = std::time::Duration::from_secs(120);

impl AgentRecord {
    /// Whether this process had GoCD delete the agent within [`REMOVAL_SETTLES`] before `now`.
    pub fn recently_removed(&self, now: SystemTime) -> bool {
        self.removed_at.is_some_and(|t| now.duration_since(t).unwrap_or_default() < REMOVAL_SETTLES)
    }

    /// Whether Spot interrupted the agent's task (Fargate Spot's stop code).
    pub fn spot_interrupted(&self) -> bool {
        self.task.as_ref().is_some_and(|t| t.stop_code == Some(StopCode::SpotInterruption))
    }
}

/// What a new agent's record starts with.
#[derive(Debug, Clone, Default)]
pub struct NewAgent {
    /// The pipeline's environment.
    pub environment: Option<String>,
    /// Hash of its elastic profile.
    pub elastic_profile: String,
    /// The cluster profile's settings fingerprint.
    pub settings: SettingsFingerprint,
    /// Image it runs.
    pub image: String,
    /// Warm starts, when its elastic profile has them on.
    pub reuse: Option<Reuse>,
}

/// What [`Registry::reserve`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// A live agent already serves this job.
    Existing(AgentId),
    /// An agent kept after its last job (warm starts) now serves this one: no new task.
    Reused {
        /// The agent.
        agent_id: AgentId,
        /// How many jobs it has been given, this one included.
        jobs: usize,
        /// `ReuseMaxJobs`.
        max_jobs: u32,
    },
    /// This job already ran to completion (GoCD sent job-completion for it): a create-agent
    /// that arrives late, queued behind others, must not start an agent nobody will use.
    Finished,
    /// `MaxAgents` live agents exist.
    Full {
        /// Live agents now.
        live: usize,
    },
    /// A slot is reserved for this agent id and launch attempt.
    Reserved {
        /// The new agent id.
        agent_id: AgentId,
        /// Launch attempt for the job.
        attempt: u32,
    },
}

/// All agents of one cluster profile.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    /// Boxed: a record is large, and B-tree nodes filled in id order stay half empty; a box per
    /// record keeps that slack to a pointer (half a kilobyte less per agent, README "Performance").
    pub(super) agents: BTreeMap<AgentId, Box<AgentRecord>>,
    /// Job ids GoCD reported completed, and when.
    pub(super) finished_jobs: BTreeMap<i64, SystemTime>,
    /// Agents whose RunTask may have started a task whose answer was lost: (since, why).
    pub(super) unknown_launches: BTreeMap<AgentId, (SystemTime, String)>,
    /// Jobs (as they survive a reschedule) whose agent Spot interrupted, and when.
    pub(super) interrupted_jobs: BTreeMap<JobKey, SystemTime>,
    /// Agents counted in `interruptions`.
    pub(super) interrupted_agents: std::collections::BTreeSet<AgentId>,
    /// Spot interruptions so far.
    pub(super) interruptions: u64,
    /// Spot interruptions so far, by elastic profile (its hash).
    pub(super) interruptions_by_profile: BTreeMap<String, u64>,
    /// Warm starts: jobs given to a kept agent, and jobs of a reuse-enabled elastic profile
    /// that found none and started a task.
    pub(super) reuse_hits: u64,
    pub(super) reuse_misses: u64,
    /// Agents whose job-completion is disabling, stopping and deleting them right now: no
    /// server-ping pass or task event does any of it a second time meanwhile.
    pub(super) completing: std::collections::BTreeSet<AgentId>,
}

impl Registry {
    /// The agent with this id.
    pub fn get(&self, agent_id: &str) -> Option<&AgentRecord> {
        self.agents.get(agent_id).map(|a| &**a)
    }

    pub(super) fn get_mut(&mut self, agent_id: &str) -> Option<&mut AgentRecord> {
        self.agents.get_mut(agent_id).map(|a| &mut **a)
    }

    /// Every agent, by id.
    pub fn all(&self) -> impl Iterator<Item = &AgentRecord> {
        self.agents.values().map(|a| &**a)
    }

    pub(super) fn all_mut(&mut self) -> impl Iterator<Item = &mut AgentRecord> {
        self.agents.values_mut().map(|a| &mut **a)
    }

    /// The live agent serving `job_id`, if any.
    pub fn live_for_job(&self, job_id: i64) -> Option<&AgentRecord> {
        // A warm agent not yet given a job serves none (its `job` only lent it a key).
        self.all().find(|a| a.job.job_id == job_id && a.phase.is_live() && !(a.warm && a.waiting_since.is_some()))
    }

    /// Live agents (running plus launching).
    pub fn live_count(&self) -> usize {
        self.agents.values().filter(|a| a.phase.is_live()).count()
    }

    /// The agent whose task is `arn`: a scan of every agent, for ARNs known without their tags
    /// (tasks ECS no longer knows). Prefer [`Registry::agent_of`].
    pub fn by_task(&self, arn: &str) -> Option<&AgentRecord> {
        self.all().find(|a| a.task_arn.as_deref() == Some(arn))
    }

    /// The agent whose task `task` is, in one lookup through the task's agent id tag: a
    /// record's `task_arn` only ever comes from a task tagged with its own agent id (RunTask's
    /// answer, or a refresh that found the task by that tag), so no other record can hold it.
    /// A ping asks this for every task; a scan each would be quadratic in the agents.
    pub fn agent_of(&self, task: &TaskView) -> Option<&AgentRecord> {
        match task.agent_id() {
            Some(id) => self.get(id).filter(|a| a.task_arn.as_deref() == Some(task.arn.as_str())),
            None => self.by_task(&task.arn),
        }
    }

    /// Whether a job-completion is removing the agent right now ([`Registry::stopping`] until
    /// [`Registry::stopped`] or [`Registry::completion_failed`]).
    pub fn is_completing(&self, agent_id: &str) -> bool {
        self.completing.contains(agent_id)
    }

    /// The cluster profile was edited in place (cluster-profile-changed): its agents count
    /// against the edited profile's `MaxAgents` from now on.
    pub fn settings_changed(&mut self, old: &SettingsFingerprint, new: &SettingsFingerprint) {
        for a in self.all_mut().filter(|a| a.settings == *old) {
            a.settings = new.clone();
        }
    }

    /// Whether GoCD reported `job_id` completed.
    pub fn is_finished(&self, job_id: i64) -> bool {
        self.finished_jobs.contains_key(&job_id)
    }

    /// GoCD reported `job_id` completed: no new agent is started for it from now on.
    pub fn job_finished(&mut self, job_id: i64, now: SystemTime) {
        self.finished_jobs.entry(job_id).or_insert(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::agents::tasks::TaskStatus;
    use crate::cluster::tests::fixtures::{job, tags, task};

    #[test]
    fn agent_of_finds_a_task_through_its_agent_id_tag() {
        let now = SystemTime::UNIX_EPOCH;
        let mut r = Registry::default();
        for (id, job_id) in [("a", 1), ("b", 2)] {
            r.reserve(&job(job_id), id.into(), 5, NewAgent::default(), now);
        }
        r.launched("a", task("t-a", tags("a", 1), TaskStatus::Running), Capacity::Fargate);
        assert_eq!(r.agent_of(&task("t-a", tags("a", 1), TaskStatus::Running)).map(|a| a.agent_id.as_str()), Some("a"));
        // A second task tagged for `a`, and a task of `b`, which has none yet: neither is theirs.
        assert!(r.agent_of(&task("t-a2", tags("a", 1), TaskStatus::Running)).is_none());
        assert!(r.agent_of(&task("t-b", tags("b", 2), TaskStatus::Running)).is_none());
        // Without tags, only the ARN tells.
        assert_eq!(r.agent_of(&task("t-a", vec![], TaskStatus::Running)).map(|a| a.agent_id.as_str()), Some("a"));
    }
}
