//! Warm starts (`ReuseIdleMinutes`): an agent whose elastic profile has them on is kept after its
//! job completes and waits, registered and idle, for the next job of the same elastic profile,
//! cluster profile (settings) and environment. Whichever comes first binds it to that job:
//! GoCD's should-assign-work offering the job to the agent ([`Registry::assign`]) or the job's
//! create-agent ([`Registry::reserve`]). Both run under the registry's one lock, so an agent is
//! bound to exactly one job at a time and every other offer is answered false.
//!
//! A kept agent leaves after `ReuseIdleMinutes` without a job, or after `ReuseMaxJobs` jobs
//! (`reconcile::plan` and [`Registry::job_done`]); until then it counts against `MaxAgents`.

use std::time::SystemTime;

use super::record::{NewAgent, Phase, Registry};
use crate::ids::SettingsFingerprint;
use crate::protocol::types::JobIdentifier;

/// What a job asks of an agent, to be given a kept one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// The pipeline's environment.
    pub environment: Option<String>,
    /// Hash of the job's elastic profile (`settings::profile_hash`).
    pub elastic_profile: String,
    /// The cluster profile's settings fingerprint.
    pub settings: SettingsFingerprint,
}

/// should-assign-work's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assignment {
    /// Not this agent's job.
    No,
    /// The agent was started for (or bound to) this job.
    Yes,
    /// The agent was waiting for a job and is now bound to this one: it has been given `jobs`
    /// jobs, this one included.
    Reused {
        /// Jobs given to the agent so far.
        jobs: usize,
        /// `ReuseMaxJobs`.
        max_jobs: u32,
    },
}

impl NewAgent {
    /// What a job of this new agent's request asks of a kept agent.
    pub(super) fn offer(&self) -> Offer {
        Offer {
            environment: self.environment.clone(),
            elastic_profile: self.elastic_profile.clone(),
            settings: self.settings.clone(),
        }
    }
}

impl Registry {
    /// should-assign-work with warm starts: [`Registry::assigned`], or, for an agent waiting
    /// for its next job, binds it to `job` when `offer` (asked only then) matches what it was
    /// started for and no other live agent serves the job.
    pub fn assign(
        &mut self,
        agent_id: &str,
        job: &JobIdentifier,
        offer: impl FnOnce() -> Offer,
        now: SystemTime,
    ) -> Assignment {
        if self.assigned(agent_id, job.job_id, now) {
            return Assignment::Yes;
        }
        let waiting = self.get(agent_id).is_some_and(|a| a.waiting_since.is_some());
        if !waiting || self.live_for_job(job.job_id).is_some() || self.is_finished(job.job_id) {
            return Assignment::No;
        }
        if self.get(agent_id).is_some_and(|a| self.spot_for_interrupted(a, job)) {
            return Assignment::No;
        }
        let offer = offer();
        let Some(max_jobs) =
            self.get(agent_id).filter(|a| takes(a, &offer, now)).and_then(|a| a.reuse).map(|r| r.max_jobs)
        else {
            return Assignment::No;
        };
        Assignment::Reused { jobs: self.bind(agent_id, job, now), max_jobs }
    }

    /// Binds a waiting agent that `offer` matches to `job` (the create-agent side): one known to
    /// be registered before a warm agent that may still be starting (the job would wait for it),
    /// and among those the one that started waiting last, so the others run out their idle time
    /// and go. Returns it and how many jobs it has been given.
    pub(super) fn bind_waiting(
        &mut self,
        job: &JobIdentifier,
        offer: &Offer,
        now: SystemTime,
    ) -> Option<(crate::ids::AgentId, usize)> {
        let ready = |a: &super::AgentRecord| !a.served_jobs.is_empty() || a.registered_at.is_some();
        let agent_id = self
            .all()
            .filter(|a| takes(a, offer, now) && !self.spot_for_interrupted(a, job))
            .max_by_key(|a| (ready(a), a.waiting_since))
            .map(|a| a.agent_id.clone())?;
        let jobs = self.bind(&agent_id, job, now);
        Some((agent_id, jobs))
    }

    /// Warm starts so far: (jobs given to a kept agent, jobs of a reuse-enabled profile that
    /// started a task instead).
    pub fn reuse_counts(&self) -> (u64, u64) {
        (self.reuse_hits, self.reuse_misses)
    }
}

/// Whether a waiting agent may take a job with this offer now.
fn takes(a: &super::AgentRecord, offer: &Offer, now: SystemTime) -> bool {
    let Some(since) = a.waiting_since else { return false };
    let fresh = a.reuse.is_some_and(|r| now.duration_since(since).unwrap_or_default() <= r.idle);
    fresh
        && a.phase == Phase::Running
        && !a.task.as_ref().is_some_and(super::tasks::TaskView::is_stopping)
        && a.elastic_profile == offer.elastic_profile
        && a.settings == offer.settings
        && a.environment == offer.environment
}

/// The job console's line when a job is given a kept agent (create-agent or should-assign-work).
pub fn reused_line(agent_id: &str, jobs: usize, max_jobs: u32) -> String {
    format!(
        "reuses agent {agent_id}, kept after its previous job (job {jobs} of at most {max_jobs} on it): no new task"
    )
}
