//! The registry's transitions for warm agents (`WarmAgents`): one reserved with no job of its
//! own ([`Registry::reserve_warm`]), waiting from the start like an agent kept after its job;
//! and one retired from a pool ([`Registry::retire_waiting`]) only while it still waits, so an
//! agent GoCD has just given a job is never taken from under it.

use std::time::SystemTime;

use super::{AgentRecord, NewAgent, Phase, Registry};
use crate::ids::{AgentId, TaskArn};
use crate::protocol::types::JobIdentifier;

impl Registry {
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
        record.served_jobs.clear();
        record.waiting_since = Some(now);
        record.warm = true;
        self.agents.insert(agent_id, Box::new(record));
        true
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
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cluster::fixtures::{job, task};
    use crate::cluster::launch::Capacity;
    use crate::cluster::registry::Offer;
    use crate::settings::Reuse;

    fn new() -> NewAgent {
        let reuse = Some(Reuse { idle: Duration::from_secs(3600), max_jobs: 10 });
        NewAgent { elastic_profile: "e".into(), settings: "s".into(), reuse, ..NewAgent::default() }
    }

    fn offer() -> Offer {
        Offer { environment: None, elastic_profile: "e".into(), settings: "s".into() }
    }

    #[test]
    fn a_warm_agent_serves_no_job_until_it_is_given_one() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut r = Registry::default();
        assert!(r.reserve_warm(&job(1), "ea-w".into(), 5, new(), now));
        r.launched("ea-w", task("arn:w", vec![], "RUNNING"), Capacity::Fargate);
        assert!(r.live_for_job(1).is_none(), "the lender's job is not served by it");
        assert!(!r.assigned("ea-w", 1, now), "nor assigned to it");
        // A new job takes it, through should-assign-work.
        let taken = r.assign("ea-w", &job(2), offer, now);
        assert_eq!(taken, crate::cluster::registry::Assignment::Reused { jobs: 1, max_jobs: 10 });
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
        assert!(matches!(kept, crate::cluster::registry::Reservation::Reserved { .. }));
        r.launched("ea-kept", task("arn:k", vec![], "RUNNING"), Capacity::Fargate);
        assert!(r.assigned("ea-kept", 1, now));
        assert!(matches!(r.job_done("ea-kept", 1, now), crate::cluster::registry::JobDone::Keep { .. }));
        // A warm agent started later, its task running, not seen registered yet.
        let later = now + Duration::from_secs(5);
        assert!(r.reserve_warm(&job(1), "ea-warm".into(), 5, new(), later));
        r.launched("ea-warm", task("arn:w", vec![], "RUNNING"), Capacity::Fargate);
        let reserved = r.reserve(&job(2), "ea-new".into(), 5, new(), later);
        assert!(
            matches!(&reserved, crate::cluster::registry::Reservation::Reused { agent_id, .. } if agent_id == "ea-kept"),
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
        r.launched("ea-a", task("arn:a", vec![], "RUNNING"), Capacity::Fargate);
        assert_eq!(r.retire_waiting("ea-a").as_deref(), Some("arn:a"));
        assert_eq!(r.get("ea-a").map(|a| a.phase), Some(Phase::Stopping));
        assert_eq!(r.retire_waiting("ea-a"), None, "once");
    }
}
