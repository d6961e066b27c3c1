//! The agent lifecycle on one page: every state an agent's record can be in, and every
//! transition between them. The registry's records change phase only here (`observe.rs` and
//! `task_events.rs` fold what ECS and GoCD said through [`AgentRecord::task_found`] and
//! [`AgentRecord::stop_seen`]); everything else reads.
//!
//! # States
//! A record's [`Phase`], refined by what it carries:
//!
//! | state | phase | what tells it |
//! |---|---|---|
//! | launching | `Launching` | reserved, RunTask not answered yet |
//! | queued on EC2 | `Launching` | `capacity` EC2, no task: waits for room on an instance |
//! | launch of unknown outcome | `Launching` | in `unknown_launches`: RunTask's answer was lost |
//! | serving | `Running` | its task runs its job (`waiting_since` unset) |
//! | waiting | `Running` | `waiting_since` set: kept after its job, or warm, for the next job |
//! | completing | `Stopping` | in `completing`: job-completion disables, stops and deletes it |
//! | stopping | `Stopping` | we asked ECS to stop its task |
//! | stopped | `Stopped` | its task stopped or never started; forgotten after [`KEEP_STOPPED`] |
//!
//! Live (`Launching`, `Running`) agents serve their job; those and `Stopping` ones count against
//! `MaxAgents` ([`Phase::occupies_capacity`]).
//!
//! # Transitions
//! | transition | from | to |
//! |---|---|---|
//! | [`Registry::reserve`] | — | launching (or a waiting agent becomes serving, through `bind`) |
//! | [`Registry::reserve_warm`] | — | launching, waiting from the start |
//! | [`Registry::adopt`] (and `observe` adopting a task) | — | serving or stopped, as ECS shows it |
//! | [`Registry::queued_on_ec2`] | launching | queued on EC2 |
//! | [`Registry::launched`] | launching | serving (its task attached) |
//! | [`Registry::started_on_instance`] | queued on EC2 | serving (register timeout from now) |
//! | [`Registry::launch_unknown`] | launching | launch of unknown outcome |
//! | [`Registry::launch_failed`] | launching | stopped; a launch of unknown outcome stays |
//! | [`Registry::settle_unknown_launches`] | launch of unknown outcome | serving (task found) or stopped |
//! | [`AgentRecord::task_found`] (`observe`, `task_event`) | launching | serving |
//! | [`Registry::assigned`] | serving | serving (GoCD assigned it: `assigned_at`) |
//! | [`Registry::bind`] (`assign`, `reserve`) | waiting | serving (a new job) |
//! | [`Registry::job_done`] | serving | waiting ([`JobDone::Keep`]), else the caller stops it |
//! | [`Registry::retire_waiting`] | waiting | stopping |
//! | [`Registry::claim_for_stop`] (server-ping's plan) | serving, waiting | stopping |
//! | [`Registry::stopping`] | any | completing |
//! | [`Registry::completion_failed`] | completing | stopping (server-ping takes over) |
//! | [`AgentRecord::stop_seen`] (`observe`) | stopping, completing | stopped (ECS shows the task gone) |
//! | [`Registry::stopped`] | any | stopped (the first reason kept) |
//! | [`Registry::prune`] | stopped | forgotten |

use std::time::{Duration, SystemTime};

use super::record::{AgentRecord, JobDone, NewAgent, Phase, Registry, Reservation};
use crate::cluster::agents::tasks::Capacity;
use crate::cluster::agents::tasks::TaskView;
use crate::ids::{AgentId, TaskArn};
use crate::protocol::types::JobIdentifier;

/// How long stopped agents stay visible in status reports.
pub const KEEP_STOPPED: Duration = Duration::from_secs(3600);

/// How long after a launch whose outcome is unknown a refresh must have started before a task
/// it does not list is taken as never started (ECS lists new tasks within seconds).
pub const LAUNCH_SETTLE: Duration = Duration::from_secs(5);

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
            job_asked_at: Some(now),
            registered_at: None,
            asked_for_work_at: None,
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
            removed_at: None,
        }
    }

    /// ECS shows the agent's task (RunTask's answer, a refresh or an event): a launching agent
    /// runs. Never moves a stopping or stopped one back.
    pub(super) fn task_found(&mut self) {
        if self.phase == Phase::Launching {
            self.phase = Phase::Running;
        }
    }

    /// ECS shows the task of an agent we asked to stop as gone: the agent is done (and no
    /// longer counts).
    pub(super) fn stop_seen(&mut self, now: SystemTime) {
        if self.phase == Phase::Stopping {
            self.phase = Phase::Stopped;
            self.stopped_at.get_or_insert(now);
            self.stop_reason.get_or_insert_with(|| "job completed".into());
        }
    }
}

impl Registry {
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
            let agent_id = existing.agent_id.clone();
            if let Some(a) = self.get_mut(&agent_id) {
                a.job_asked_at = Some(now); // GoCD re-sent it: the job still waits for this agent
            }
            return Reservation::Existing(agent_id);
        }
        if self.finished_jobs.contains_key(&job.job_id) {
            return Reservation::Finished;
        }
        if new.reuse.is_some() {
            let offer = new.offer();
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

    /// Reserves a warm agent that starts with the unused key of `lender`'s create-agent, unless
    /// `max_agents` live agents of these settings exist. It waits for a job from the start.
    pub fn reserve_warm(
        &mut self,
        lender: &JobIdentifier,
        agent_id: AgentId,
        max_agents: usize,
        new: NewAgent,
        now: SystemTime,
    ) -> bool {
        let live = self.agents.values().filter(|a| a.phase.occupies_capacity() && a.settings == new.settings).count();
        if live >= max_agents {
            return false;
        }
        // Waiting for a job from the start; `job` only lent it its key.
        let mut record = AgentRecord::launching(agent_id.clone(), lender, new, now);
        record.job_requested_at = None;
        record.job_asked_at = None;
        record.served_jobs.clear();
        record.waiting_since = Some(now);
        record.warm = true;
        self.agents.insert(agent_id, Box::new(record));
        true
    }

    /// An EC2 agent waits for room on a container instance.
    pub fn queued_on_ec2(&mut self, agent_id: &str) {
        if let Some(a) = self.get_mut(agent_id) {
            a.capacity = Some(Capacity::Ec2);
        }
    }

    /// Records RunTask's answer: the agent runs on `capacity`.
    pub fn launched(&mut self, agent_id: &str, task: TaskView, capacity: Capacity) {
        self.unknown_launches.remove(agent_id);
        if let Some(a) = self.agents.get_mut(agent_id) {
            a.task_arn = Some(task.arn.as_str().into());
            a.capacity = Some(capacity);
            a.task_found();
            a.task = Some(task.without_own_tags());
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

    /// The RunTask of a launching agent may have started a task that we could not see.
    pub fn launch_unknown(&mut self, agent_id: &str, now: SystemTime) {
        if self.agents.get(agent_id).is_some_and(|a| a.phase == Phase::Launching && a.task_arn.is_none()) {
            self.unknown_launches.insert(agent_id.into(), (now, "launch failed".to_string()));
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

    /// should-assign-work: whether the agent is live and was started for `job_id`; when it is,
    /// notes when GoCD first assigned it. Notes when GoCD first asked at all (it registered).
    pub fn assigned(&mut self, agent_id: &str, job_id: i64, now: SystemTime) -> bool {
        let Some(a) = self.get_mut(agent_id) else { return false };
        a.asked_for_work_at.get_or_insert(now);
        let yes = a.job.job_id == job_id && a.phase.is_live() && a.waiting_since.is_none();
        if yes {
            a.assigned_at.get_or_insert(now);
        }
        yes
    }

    /// Binds an agent waiting for its next job to `job` (should-assign-work's or create-agent's
    /// choice, `reuse.rs`): it serves that job from now on. Returns how many jobs it has been given.
    pub(super) fn bind(&mut self, agent_id: &str, job: &JobIdentifier, now: SystemTime) -> usize {
        self.reuse_hits += 1;
        let Some(a) = self.get_mut(agent_id) else { return 0 };
        a.job = job.clone();
        a.job_requested_at = Some(now);
        a.job_asked_at = Some(now);
        a.waiting_since = None;
        a.idle_since = None;
        a.assigned_at = None;
        a.served_jobs.push(job.job_id);
        a.served_jobs.len()
    }

    /// job-completion for `job_id` on `agent_id`: keep the agent for its next job when its
    /// elastic profile reuses agents and it has jobs left, else stop it.
    pub fn job_done(&mut self, agent_id: &str, job_id: i64, now: SystemTime) -> JobDone {
        let Some(a) = self.get_mut(agent_id) else { return JobDone::NotOurs };
        if a.job.job_id != job_id && a.served_jobs.contains(&job_id) {
            return JobDone::Earlier;
        }
        let Some(reuse) = a.reuse else { return JobDone::Stop };
        let task_going = a.task.as_ref().is_some_and(super::tasks::TaskView::is_stopping);
        let jobs = a.served_jobs.len();
        // GoCD asks should-assign-work of registered agents only: an assigned agent registered,
        // even if no server-ping saw it listed yet (short jobs).
        let registered = a.registered_at.is_some() || a.assigned_at.is_some();
        if a.phase != Phase::Running || task_going || !registered || jobs >= reuse.max_jobs as usize {
            return JobDone::Stop;
        }
        a.waiting_since = Some(now);
        JobDone::Keep { jobs, max_jobs: reuse.max_jobs }
    }

    /// Takes a waiting agent out of its pool to stop it: returns its task, or `None` when it no
    /// longer waits (GoCD gave it a job meanwhile) or has no task yet.
    pub fn retire_waiting(&mut self, agent_id: &str) -> Option<TaskArn> {
        let a = self.get_mut(agent_id)?;
        if a.phase != Phase::Running || a.waiting_since.is_none() {
            return None;
        }
        let arn = a.task_arn.clone()?;
        a.phase = Phase::Stopping;
        Some(arn)
    }

    /// server-ping decided to stop a serving or waiting agent's task: from now on
    /// should-assign-work and create-agent pass it by, so GoCD cannot give it a job between the
    /// decision and the StopTask. A no-op for an agent in any other phase.
    pub fn claim_for_stop(&mut self, agent_id: &str) {
        if let Some(a) = self.get_mut(agent_id).filter(|a| a.phase == Phase::Running) {
            a.phase = Phase::Stopping;
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

    /// A job-completion could not finish removing the agent: server-ping takes it from here.
    pub fn completion_failed(&mut self, agent_id: &str) {
        self.completing.remove(agent_id);
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

    /// Claims the removal of these agents from GoCD (disable-agents, then delete-agents) for one
    /// caller: returns those no other path of this process removed, or is removing, within
    /// [`super::REMOVAL_SETTLES`] before `now`, and marks them, so that whichever of job-completion,
    /// server-ping or a task event comes first removes an agent, and the others see it done.
    /// Agents without a record (GoCD lists them, this process never knew them) are returned as they are.
    pub fn claim_removal(&mut self, agent_ids: &[AgentId], now: SystemTime) -> Vec<AgentId> {
        let mut claimed = Vec::new();
        for id in agent_ids {
            match self.agents.get_mut(id.as_str()) {
                Some(a) if a.recently_removed(now) => {}
                Some(a) => {
                    a.removed_at = Some(now);
                    claimed.push(id.clone());
                }
                None => claimed.push(id.clone()),
            }
        }
        claimed
    }

    /// A claimed removal failed (GoCD did not answer): the agents may be removed again.
    pub fn removal_failed(&mut self, agent_ids: &[AgentId]) {
        for id in agent_ids {
            if let Some(a) = self.agents.get_mut(id.as_str()) {
                a.removed_at = None;
            }
        }
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
    use super::*;
    use crate::cluster::agents::reuse::Offer;
    use crate::cluster::agents::tasks::TaskStatus;
    use crate::cluster::tests::fixtures::{job, tags, task};
    use crate::settings::Reuse;

    fn new() -> NewAgent {
        let reuse = Some(Reuse { idle: Duration::from_secs(3600), max_jobs: 10 });
        NewAgent { elastic_profile: "e".into(), settings: "s".into(), reuse, ..NewAgent::default() }
    }

    fn offer() -> Offer {
        Offer { environment: None, elastic_profile: "e".into(), settings: "s".into() }
    }

    #[test]
    fn one_path_claims_an_agents_removal_and_the_others_see_it_done() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut r = Registry::default();
        assert!(r.reserve_warm(&job(1), "ea-a".into(), 5, new(), now));
        let both: Vec<AgentId> = vec!["ea-a".into(), "ea-unknown".into()];
        // Job-completion claims it; server-ping and an event a moment later do not.
        assert_eq!(r.claim_removal(&both[..1], now), both[..1].to_vec());
        let later = now + Duration::from_secs(5);
        assert_eq!(r.claim_removal(&both, later), both[1..].to_vec(), "an agent never known is GoCD's to remove");
        assert!(r.get("ea-a").is_some_and(|a| a.recently_removed(later)));
        // A removal GoCD did not answer may be made again at once.
        r.removal_failed(&both[..1]);
        assert_eq!(r.claim_removal(&both[..1], later), both[..1].to_vec());
        // Long after, an agent GoCD still lists is removed again.
        let much_later = later + super::super::REMOVAL_SETTLES;
        assert!(!r.get("ea-a").is_some_and(|a| a.recently_removed(much_later)));
        assert_eq!(r.claim_removal(&both[..1], much_later), both[..1].to_vec());
    }

    #[test]
    fn a_warm_agent_serves_no_job_until_it_is_given_one() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut r = Registry::default();
        assert!(r.reserve_warm(&job(1), "ea-w".into(), 5, new(), now));
        r.launched("ea-w", task("arn:w", vec![], TaskStatus::Running), Capacity::Fargate);
        assert!(r.live_for_job(1).is_none(), "the lender's job is not served by it");
        assert!(!r.assigned("ea-w", 1, now), "nor assigned to it");
        // A new job takes it, through should-assign-work.
        let taken = r.assign("ea-w", &job(2), offer, now);
        assert_eq!(taken, crate::cluster::agents::reuse::Assignment::Reused { jobs: 1, max_jobs: 10 });
        assert_eq!(r.live_for_job(2).map(|a| a.agent_id.as_str()), Some("ea-w"));
        assert_eq!(r.get("ea-w").and_then(|a| a.job_requested_at), Some(now));
        assert_eq!(r.retire_waiting("ea-w"), None, "busy: not retired");
    }

    #[test]
    fn a_new_job_takes_a_registered_agent_before_a_warm_one_still_starting() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut r = Registry::default();
        // A kept agent, waiting since `now` after its job.
        let kept = r.reserve(&job(1), "ea-kept".into(), 5, new(), now);
        assert!(matches!(kept, crate::cluster::agents::Reservation::Reserved { .. }));
        r.launched("ea-kept", task("arn:k", vec![], TaskStatus::Running), Capacity::Fargate);
        assert!(r.assigned("ea-kept", 1, now));
        assert!(matches!(r.job_done("ea-kept", 1, now), crate::cluster::agents::JobDone::Keep { .. }));
        // A warm agent started later, its task running, not seen registered yet.
        let later = now + Duration::from_secs(5);
        assert!(r.reserve_warm(&job(1), "ea-warm".into(), 5, new(), later));
        r.launched("ea-warm", task("arn:w", vec![], TaskStatus::Running), Capacity::Fargate);
        let reserved = r.reserve(&job(2), "ea-new".into(), 5, new(), later);
        assert!(
            matches!(&reserved, crate::cluster::agents::Reservation::Reused { agent_id, .. } if agent_id == "ea-kept"),
            "{reserved:?}"
        );
    }

    #[test]
    fn warm_agents_count_within_max_agents_and_only_waiting_ones_retire() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut r = Registry::default();
        assert!(r.reserve_warm(&job(1), "ea-a".into(), 2, new(), now));
        assert!(r.reserve_warm(&job(1), "ea-b".into(), 2, new(), now));
        assert!(!r.reserve_warm(&job(1), "ea-c".into(), 2, new(), now), "MaxAgents 2");
        assert_eq!(r.retire_waiting("ea-a"), None, "no task yet");
        r.launched("ea-a", task("arn:a", vec![], TaskStatus::Running), Capacity::Fargate);
        assert_eq!(r.retire_waiting("ea-a").as_deref(), Some("arn:a"));
        assert_eq!(r.get("ea-a").map(|a| a.phase), Some(Phase::Stopping));
        assert_eq!(r.retire_waiting("ea-a"), None, "once");
    }
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
        r.observe(&[task("t-c", tags("c", 3), TaskStatus::Running)], &[], &[], &std::collections::HashMap::new(), t0);
        assert_eq!(r.settle_unknown_launches(t0 + LAUNCH_SETTLE * 2), 1);
        assert_eq!(r.get("c").unwrap().phase, Phase::Running);
    }

    #[test]
    fn an_agent_queued_on_ec2_runs_from_when_startask_placed_it() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        let mut r = Registry::default();
        r.reserve(&job(1), "a".into(), 5, NewAgent::default(), t0);
        r.queued_on_ec2("a");
        let a = r.get("a").unwrap();
        assert_eq!((a.phase, a.capacity, a.task_arn.is_none()), (Phase::Launching, Some(Capacity::Ec2), true));
        assert_eq!(r.live_for_job(1).map(|a| a.agent_id.as_str()), Some("a"), "it serves its job while it waits");
        let placed = t0 + Duration::from_secs(300);
        r.started_on_instance("a", task("t-a", tags("a", 1), TaskStatus::Pending), placed);
        let a = r.get("a").unwrap();
        assert_eq!(a.phase, Phase::Running);
        assert_eq!(a.task_arn.as_deref(), Some("t-a"));
        assert_eq!(a.created_at, placed, "its register timeout counts from the placement");
    }

    #[test]
    fn launched_attaches_the_task_and_never_revives_a_stopped_agent() {
        let now = SystemTime::UNIX_EPOCH;
        let mut r = Registry::default();
        r.reserve(&job(1), "a".into(), 5, NewAgent::default(), now);
        r.launched("a", task("t-a", tags("a", 1), TaskStatus::Pending), Capacity::FargateSpot);
        let a = r.get("a").unwrap();
        assert_eq!((a.phase, a.capacity), (Phase::Running, Some(Capacity::FargateSpot)));
        assert!(a.task.as_ref().is_some_and(|t| !t.tags.contains_key("gocd:elastic-agent-id")), "own tags dropped");
        r.reserve(&job(2), "b".into(), 5, NewAgent::default(), now);
        r.stopped("b", "launch failed", now);
        r.launched("b", task("t-b", tags("b", 2), TaskStatus::Pending), Capacity::Fargate);
        assert_eq!(r.get("b").unwrap().phase, Phase::Stopped);
    }

    #[test]
    fn assigned_answers_for_its_own_live_job_and_notes_the_first_time() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        let mut r = Registry::default();
        r.reserve(&job(1), "a".into(), 5, NewAgent::default(), t0);
        assert!(!r.assigned("a", 2, t0), "another job");
        assert!(!r.assigned("nobody", 1, t0), "not ours");
        assert!(r.assigned("a", 1, t0));
        assert!(r.assigned("a", 1, t0 + Duration::from_secs(5)));
        assert_eq!(r.get("a").unwrap().assigned_at, Some(t0), "the first assignment counts");
        r.stopped("a", "task stopped", t0);
        assert!(!r.assigned("a", 1, t0), "a stopped agent serves nothing");
    }

    #[test]
    fn job_done_keeps_only_a_registered_running_reusing_agent_with_jobs_left() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        let reusing = |max_jobs| NewAgent {
            reuse: Some(Reuse { idle: Duration::from_secs(600), max_jobs }),
            ..NewAgent::default()
        };
        let mut r = Registry::default();
        assert_eq!(r.job_done("nobody", 1, now), JobDone::NotOurs);
        // One job per agent without warm starts.
        r.reserve(&job(1), "plain".into(), 9, NewAgent::default(), now);
        r.launched("plain", task("t-p", vec![], TaskStatus::Running), Capacity::Fargate);
        assert!(r.assigned("plain", 1, now));
        assert_eq!(r.job_done("plain", 1, now), JobDone::Stop);
        // Reusing, but never registered (nor assigned): it may not be able to take a job.
        r.reserve(&job(2), "unseen".into(), 9, reusing(3), now);
        r.launched("unseen", task("t-u", vec![], TaskStatus::Running), Capacity::Fargate);
        assert_eq!(r.job_done("unseen", 2, now), JobDone::Stop);
        // Reusing and assigned: kept, waiting from now.
        r.reserve(&job(3), "kept".into(), 9, reusing(2), now);
        r.launched("kept", task("t-k", vec![], TaskStatus::Running), Capacity::Fargate);
        assert!(r.assigned("kept", 3, now));
        assert_eq!(r.job_done("kept", 3, now), JobDone::Keep { jobs: 1, max_jobs: 2 });
        assert_eq!(r.get("kept").unwrap().waiting_since, Some(now));
        // Bound to its second job, its last: a repeated completion of the first changes nothing.
        assert!(matches!(r.reserve(&job(4), "x".into(), 9, reusing(2), now), Reservation::Reused { .. }));
        assert_eq!(r.job_done("kept", 3, now), JobDone::Earlier);
        assert_eq!(r.job_done("kept", 4, now), JobDone::Stop, "ReuseMaxJobs used up");
    }

    #[test]
    fn a_completion_holds_the_agent_until_it_stops_or_fails() {
        let now = SystemTime::UNIX_EPOCH;
        let mut r = Registry::default();
        assert_eq!(r.stopping("nobody"), None, "not ours");
        r.reserve(&job(1), "a".into(), 5, NewAgent::default(), now);
        assert_eq!(r.stopping("a"), Some(None), "no task yet");
        r.launched("a", task("t-a", tags("a", 1), TaskStatus::Running), Capacity::Fargate);
        assert_eq!(r.stopping("a"), Some(Some("t-a".into())));
        assert_eq!(r.get("a").unwrap().phase, Phase::Stopping);
        assert!(r.is_completing("a"));
        assert!(r.get("a").unwrap().phase.occupies_capacity(), "stopping still counts against MaxAgents");
        r.completion_failed("a");
        assert!(!r.is_completing("a"), "server-ping takes it from here");
        assert_eq!(r.get("a").unwrap().phase, Phase::Stopping);
        r.stopping("a");
        r.stopped("a", "job completed", now);
        assert!(!r.is_completing("a"));
        assert_eq!(r.get("a").unwrap().phase, Phase::Stopped);
    }

    #[test]
    fn a_stopping_agent_stops_when_ecs_shows_its_task_gone() {
        let now = SystemTime::UNIX_EPOCH;
        let mut r = Registry::default();
        r.reserve(&job(1), "a".into(), 5, NewAgent::default(), now);
        r.launched("a", task("t-a", tags("a", 1), TaskStatus::Running), Capacity::Fargate);
        r.stopping("a");
        let none = std::collections::HashMap::new();
        r.observe(&[task("t-a", tags("a", 1), TaskStatus::Running)], &[], &[], &none, now);
        assert_eq!(r.get("a").unwrap().phase, Phase::Stopping, "still running");
        let mut gone = task("t-a", tags("a", 1), TaskStatus::Stopped);
        gone.desired_status = TaskStatus::Stopped;
        r.observe(&[], &[gone], &[], &none, now);
        let a = r.get("a").unwrap();
        assert_eq!((a.phase, a.stop_reason.as_deref()), (Phase::Stopped, Some("job completed")));
    }

    #[test]
    fn adopt_takes_an_unknown_agent_and_keeps_a_known_one() {
        let now = SystemTime::UNIX_EPOCH;
        let mut r = Registry::default();
        r.reserve(&job(1), "a".into(), 5, NewAgent::default(), now);
        let mut found = r.get("a").unwrap().clone();
        found.phase = Phase::Running;
        r.adopt(found.clone());
        assert_eq!(r.get("a").unwrap().phase, Phase::Launching, "the known record stays");
        found.agent_id = "b".into();
        r.adopt(found);
        assert_eq!(r.get("b").unwrap().phase, Phase::Running);
    }
}
