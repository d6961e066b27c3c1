//! The in-memory picture of one cluster profile's agents: which agent was started for which
//! job, its task, and where it is in its life. It is rebuilt from AWS after a restart
//! (`adopt`), so losing it loses nothing. Pure data: no I/O, no clock of its own.
//!
//! Records are read by anyone (`get`, `all`) and changed only through the registry's named
//! transitions: `reserve` → `launched` / `queued_on_ec2` / `started_on_instance` →
//! `stopping` → `stopped`, with `launch_unknown` / `launch_failed` / `settle_unknown_launches`
//! for launches whose answer was lost, `assigned` for should-assign-work, `job_done` and the
//! warm-start binding in `reuse.rs` (an agent kept after its job takes the next one), and `observe`
//! (in `observe.rs`) folding a refresh and GoCD's agent list in.

mod observe;
mod reuse;
mod task_events;
mod warm;

pub use reuse::{Assignment, JobDone, Offer};
pub use task_events::TaskEvent;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::launch::Capacity;
use super::tasks::TaskView;
use crate::ids::{AgentId, JobKey, SettingsFingerprint, TaskArn};
use crate::protocol::types::JobIdentifier;
use crate::settings::Reuse;

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
    pub agent_id: AgentId,
    /// The job it was started for.
    pub job: JobIdentifier,
    /// The pipeline's environment.
    pub environment: Option<String>,
    /// Hash of its elastic profile.
    pub elastic_profile: String,
    /// The [`settings_fingerprint`](crate::cluster::identity::settings_fingerprint) of the
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
    /// When GoCD first listed the agent.
    pub registered_at: Option<SystemTime>,
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
}

impl AgentRecord {
    /// A new agent, reserved at `now` for `job`'s create-agent: launching, its first attempt.
    fn launching(agent_id: AgentId, job: &JobIdentifier, new: NewAgent, now: SystemTime) -> Self {
        AgentRecord {
            agent_id,
            job: job.clone(),
            environment: new.environment,
            elastic_profile: new.elastic_profile,
            settings: new.settings,
            image: new.image,
            attempt: 1,
            phase: Phase::Launching,
            task_arn: None,
            capacity: None,
            created_at: now,
            job_requested_at: Some(now),
            registered_at: None,
            idle_since: None,
            last_listed: None,
            unhealthy_since: None,
            assigned_at: None,
            stopped_at: None,
            stop_reason: None,
            task: None,
            reuse: new.reuse,
            served_jobs: vec![job.job_id],
            waiting_since: None,
            warm: false,
        }
    }

    /// Whether Spot interrupted the agent's task (Fargate Spot's stop code).
    pub fn spot_interrupted(&self) -> bool {
        self.task.as_ref().and_then(|t| t.stop_code.as_deref()) == Some("SpotInterruption")
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

/// How long after a launch whose outcome is unknown a refresh must have started before a task
/// it does not list is taken as never started (ECS lists new tasks within seconds).
pub const LAUNCH_SETTLE: Duration = Duration::from_secs(5);

/// All agents of one cluster profile.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    /// Boxed: a record is large, and B-tree nodes filled in id order stay half empty; a box per
    /// record keeps that slack to a pointer (half a kilobyte less per agent, README "Performance").
    agents: BTreeMap<AgentId, Box<AgentRecord>>,
    /// Job ids GoCD reported completed, and when.
    finished_jobs: BTreeMap<i64, SystemTime>,
    /// Agents whose RunTask may have started a task whose answer was lost: (since, why).
    unknown_launches: BTreeMap<AgentId, (SystemTime, String)>,
    /// Jobs (as they survive a reschedule) whose agent Spot interrupted, and when.
    interrupted_jobs: BTreeMap<JobKey, SystemTime>,
    /// Agents counted in `interruptions`.
    interrupted_agents: std::collections::BTreeSet<AgentId>,
    /// Spot interruptions so far.
    interruptions: u64,
    /// Warm starts: jobs given to a kept agent, and jobs of a reuse-enabled elastic profile
    /// that found none and started a task.
    reuse_hits: u64,
    reuse_misses: u64,
    /// Agents whose job-completion is disabling, stopping and deleting them right now: no
    /// server-ping pass or task event does any of it a second time meanwhile.
    completing: std::collections::BTreeSet<AgentId>,
}

impl Registry {
    /// The agent with this id.
    pub fn get(&self, agent_id: &str) -> Option<&AgentRecord> {
        self.agents.get(agent_id).map(|a| &**a)
    }

    fn get_mut(&mut self, agent_id: &str) -> Option<&mut AgentRecord> {
        self.agents.get_mut(agent_id).map(|a| &mut **a)
    }

    /// Every agent, by id.
    pub fn all(&self) -> impl Iterator<Item = &AgentRecord> {
        self.agents.values().map(|a| &**a)
    }

    fn all_mut(&mut self) -> impl Iterator<Item = &mut AgentRecord> {
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

    /// Reserves a slot for `job` unless a live agent serves it or `max_agents` are live, in one
    /// step, so concurrent create-agent calls can neither exceed the limit nor double a job.
    pub fn reserve(
        &mut self,
        job: &JobIdentifier,
        new_agent_id: AgentId,
        max_agents: usize,
        new: NewAgent,
        now: SystemTime,
    ) -> Reservation {
        if let Some(existing) = self.live_for_job(job.job_id) {
            return Reservation::Existing(existing.agent_id.clone());
        }
        if self.finished_jobs.contains_key(&job.job_id) {
            return Reservation::Finished;
        }
        if new.reuse.is_some() {
            let offer = Offer {
                environment: new.environment.clone(),
                elastic_profile: new.elastic_profile.clone(),
                settings: new.settings.clone(),
            };
            if let Some((agent_id, jobs)) = self.bind_waiting(job, &offer, now) {
                let max_jobs = new.reuse.map_or(1, |r| r.max_jobs);
                return Reservation::Reused { agent_id, jobs, max_jobs };
            }
        }
        // MaxAgents is the cluster profile's own: agents of another team's profile on the same
        // cluster, account and role count against theirs.
        let live = self.agents.values().filter(|a| a.phase.occupies_capacity() && a.settings == new.settings).count();
        if live >= max_agents {
            return Reservation::Full { live };
        }
        let attempt =
            self.agents.values().filter(|a| a.job.job_id == job.job_id).map(|a| a.attempt).max().unwrap_or(0) + 1;
        if new.reuse.is_some() {
            self.reuse_misses += 1;
        }
        let mut record = AgentRecord::launching(new_agent_id.clone(), job, new, now);
        record.attempt = attempt;
        self.agents.insert(new_agent_id.clone(), Box::new(record));
        Reservation::Reserved { agent_id: new_agent_id, attempt }
    }

    /// Records RunTask's answer: the agent runs on `capacity`.
    pub fn launched(&mut self, agent_id: &str, task: TaskView, capacity: Capacity) {
        self.unknown_launches.remove(agent_id);
        if let Some(a) = self.agents.get_mut(agent_id) {
            a.task_arn = Some(task.arn.as_str().into());
            a.capacity = Some(capacity);
            if a.phase == Phase::Launching {
                a.phase = Phase::Running;
            }
            a.task = Some(task.without_own_tags());
        }
    }

    /// An EC2 agent waits for room on a container instance.
    pub fn queued_on_ec2(&mut self, agent_id: &str) {
        if let Some(a) = self.get_mut(agent_id) {
            a.capacity = Some(Capacity::Ec2);
        }
    }

    /// StartTask placed a waiting EC2 agent's task: it runs, and its register timeout counts
    /// from now (not from create-agent: it waited for room).
    pub fn started_on_instance(&mut self, agent_id: &str, task: TaskView, now: SystemTime) {
        self.launched(agent_id, task, Capacity::Ec2);
        if let Some(a) = self.get_mut(agent_id) {
            a.created_at = now;
        }
    }

    /// GoCD's job is done: the agent's task is to be stopped. Returns its task, if it has one,
    /// or `None` when the agent is not ours.
    pub fn stopping(&mut self, agent_id: &str) -> Option<Option<TaskArn>> {
        let a = self.get_mut(agent_id)?;
        a.phase = Phase::Stopping;
        let task = a.task_arn.clone();
        self.completing.insert(agent_id.into());
        Some(task)
    }

    /// Whether a job-completion is removing the agent right now ([`Registry::stopping`] until
    /// [`Registry::stopped`] or [`Registry::completion_failed`]).
    pub fn is_completing(&self, agent_id: &str) -> bool {
        self.completing.contains(agent_id)
    }

    /// A job-completion could not finish removing the agent: server-ping takes it from here.
    pub fn completion_failed(&mut self, agent_id: &str) {
        self.completing.remove(agent_id);
    }

    /// should-assign-work: whether the agent is live and was started for `job_id`; when it is,
    /// notes when GoCD first assigned it.
    pub fn assigned(&mut self, agent_id: &str, job_id: i64, now: SystemTime) -> bool {
        let Some(a) = self.get_mut(agent_id) else { return false };
        let yes = a.job.job_id == job_id && a.phase.is_live() && a.waiting_since.is_none();
        if yes {
            a.assigned_at.get_or_insert(now);
        }
        yes
    }

    /// Marks an agent stopped (launch failed, task stopped, job done).
    pub fn stopped(&mut self, agent_id: &str, reason: impl Into<String>, now: SystemTime) {
        self.completing.remove(agent_id);
        if let Some(a) = self.agents.get_mut(agent_id) {
            a.phase = Phase::Stopped;
            a.stopped_at.get_or_insert(now);
            a.stop_reason.get_or_insert_with(|| reason.into());
        }
    }

    /// A launch failed: the agent is stopped, unless its RunTask may have started a task whose
    /// answer was lost ([`Registry::launch_unknown`]); that one stays launching (it still serves
    /// its job and counts against `MaxAgents`) until a refresh settles it.
    pub fn launch_failed(&mut self, agent_id: &str, reason: impl Into<String>, now: SystemTime) {
        match self.unknown_launches.get_mut(agent_id) {
            Some((_, why)) => *why = reason.into(),
            None => self.stopped(agent_id, reason, now),
        }
    }

    /// The RunTask of a launching agent may have started a task that we could not see.
    pub fn launch_unknown(&mut self, agent_id: &str, now: SystemTime) {
        if self.agents.get(agent_id).is_some_and(|a| a.phase == Phase::Launching && a.task_arn.is_none()) {
            self.unknown_launches.insert(agent_id.into(), (now, "launch failed".to_string()));
        }
    }

    /// After a refresh (started at `refreshed_at`, folded in by `reconcile::observe`): a launch of
    /// unknown outcome whose task the refresh found is running; one it did not find, though it
    /// started [`LAUNCH_SETTLE`] after the launch failed, never started and is stopped. Returns
    /// how many were settled either way.
    pub fn settle_unknown_launches(&mut self, refreshed_at: SystemTime) -> usize {
        let mut settled = 0;
        let unknown: Vec<(AgentId, (SystemTime, String))> =
            self.unknown_launches.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (agent_id, (since, why)) in unknown {
            let found = self.agents.get(&agent_id).is_none_or(|a| a.task_arn.is_some() || a.phase != Phase::Launching);
            if found {
                self.unknown_launches.remove(&agent_id);
                settled += 1;
            } else if refreshed_at >= since + LAUNCH_SETTLE {
                self.unknown_launches.remove(&agent_id);
                self.stopped(&agent_id, format!("{why} (no task was started)"), refreshed_at);
                settled += 1;
            }
        }
        settled
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

    /// Inserts an agent found in AWS that we do not know (adoption after a restart).
    pub fn adopt(&mut self, record: AgentRecord) {
        self.agents.entry(record.agent_id.clone()).or_insert_with(|| Box::new(record));
    }

    /// Forgets agents stopped longer than [`KEEP_STOPPED`] ago.
    pub fn prune(&mut self, now: SystemTime) {
        self.prune_interruptions(now);
        self.finished_jobs.retain(|_, t| now.duration_since(*t).unwrap_or_default() < KEEP_STOPPED);
        self.agents.retain(|_, a| {
            a.phase != Phase::Stopped
                || a.stopped_at.is_none_or(|t| now.duration_since(t).unwrap_or_default() < KEEP_STOPPED)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{job, tags, task};
    use super::*;

    #[test]
    fn reserve_dedupes_by_job_and_caps_live_agents() {
        let now = SystemTime::UNIX_EPOCH;
        let mut r = Registry::default();
        assert_eq!(
            r.reserve(&job(1), "a".into(), 2, NewAgent::default(), now),
            Reservation::Reserved { agent_id: "a".into(), attempt: 1 }
        );
        assert_eq!(r.reserve(&job(1), "b".into(), 2, NewAgent::default(), now), Reservation::Existing("a".into()));
        assert!(matches!(r.reserve(&job(2), "c".into(), 2, NewAgent::default(), now), Reservation::Reserved { .. }));
        assert_eq!(r.reserve(&job(3), "d".into(), 2, NewAgent::default(), now), Reservation::Full { live: 2 });
        r.stopped("a", "spot reclaimed", now);
        assert_eq!(
            r.reserve(&job(1), "e".into(), 2, NewAgent::default(), now),
            Reservation::Reserved { agent_id: "e".into(), attempt: 2 }
        );
        assert_eq!(r.live_count(), 2);
    }

    #[test]
    fn agent_of_finds_a_task_through_its_agent_id_tag() {
        let now = SystemTime::UNIX_EPOCH;
        let mut r = Registry::default();
        for (id, job_id) in [("a", 1), ("b", 2)] {
            r.reserve(&job(job_id), id.into(), 5, NewAgent::default(), now);
        }
        r.launched("a", task("t-a", tags("a", 1), "RUNNING"), Capacity::Fargate);
        assert_eq!(r.agent_of(&task("t-a", tags("a", 1), "RUNNING")).map(|a| a.agent_id.as_str()), Some("a"));
        // A second task tagged for `a`, and a task of `b`, which has none yet: neither is theirs.
        assert!(r.agent_of(&task("t-a2", tags("a", 1), "RUNNING")).is_none());
        assert!(r.agent_of(&task("t-b", tags("b", 2), "RUNNING")).is_none());
        // Without tags, only the ARN tells.
        assert_eq!(r.agent_of(&task("t-a", vec![], "RUNNING")).map(|a| a.agent_id.as_str()), Some("a"));
    }

    #[test]
    fn stopped_keeps_the_first_reason_and_prune_forgets_old_ones() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        let mut r = Registry::default();
        r.reserve(&job(1), "a".into(), 5, NewAgent::default(), now);
        r.stopped("a", "first", now);
        r.stopped("a", "second", now + Duration::from_secs(5));
        assert_eq!(r.get("a").unwrap().stop_reason.as_deref(), Some("first"));
        r.prune(now + KEEP_STOPPED - Duration::from_secs(1));
        assert!(r.get("a").is_some());
        r.prune(now + KEEP_STOPPED + Duration::from_secs(1));
        assert!(r.get("a").is_none());
    }

    #[test]
    fn a_completed_job_gets_no_new_agent_from_a_late_create_agent() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        let mut r = Registry::default();
        r.reserve(&job(1), "a".into(), 5, NewAgent::default(), now);
        r.job_finished(1, now);
        r.stopped("a", "job completed", now);
        assert_eq!(r.reserve(&job(1), "b".into(), 5, NewAgent::default(), now), Reservation::Finished);
        assert!(matches!(r.reserve(&job(2), "c".into(), 5, NewAgent::default(), now), Reservation::Reserved { .. }));
        r.prune(now + KEEP_STOPPED + Duration::from_secs(1));
        assert!(matches!(r.reserve(&job(1), "d".into(), 5, NewAgent::default(), now), Reservation::Reserved { .. }));
    }

    #[test]
    fn a_launch_of_unknown_outcome_keeps_its_slot_until_a_refresh_settles_it() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        let mut r = Registry::default();
        r.reserve(&job(1), "a".into(), 5, NewAgent::default(), t0);
        r.reserve(&job(2), "b".into(), 5, NewAgent::default(), t0);
        r.launch_unknown("a", t0);
        r.launch_failed("a", "launch failed: the answer was lost", t0);
        r.launch_failed("b", "launch failed: refused", t0);
        assert_eq!(r.get("a").unwrap().phase, Phase::Launching, "may run: keeps serving its job");
        assert_eq!(r.get("b").unwrap().phase, Phase::Stopped);
        assert_eq!(r.reserve(&job(1), "a2".into(), 5, NewAgent::default(), t0), Reservation::Existing("a".into()));
        // A refresh from before the launch settled cannot tell.
        assert_eq!(r.settle_unknown_launches(t0 + LAUNCH_SETTLE - Duration::from_secs(1)), 0);
        assert_eq!(r.get("a").unwrap().phase, Phase::Launching);
        // One after it that did not list the task: it never started.
        assert_eq!(r.settle_unknown_launches(t0 + LAUNCH_SETTLE), 1);
        assert_eq!(r.get("a").unwrap().phase, Phase::Stopped);
        assert!(r.get("a").unwrap().stop_reason.as_deref().unwrap().contains("answer was lost"));
        // Found by a refresh (observe attached the task): it runs.
        r.reserve(&job(3), "c".into(), 5, NewAgent::default(), t0);
        r.launch_unknown("c", t0);
        r.launch_failed("c", "launch failed", t0);
        r.observe(&[task("t-c", tags("c", 3), "RUNNING")], &[], &[], &std::collections::HashMap::new(), t0);
        assert_eq!(r.settle_unknown_launches(t0 + LAUNCH_SETTLE * 2), 1);
        assert_eq!(r.get("c").unwrap().phase, Phase::Running);
    }
}
