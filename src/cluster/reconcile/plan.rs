//! The reconciler's thinking, a pure function (kube-runtime's reconcile contract): once
//! `Registry::observe` has folded what ECS and GoCD said into the records, `plan` decides what
//! to do about it. It is idempotent — a plan re-run after a crash or a missed ping asks for
//! nothing new — and does no I/O, so it is tested with tables.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

pub use crate::cluster::agents::steps::Step;
use crate::cluster::agents::tasks::TaskView;
use crate::cluster::agents::{AgentRecord, Phase, Registry};
use crate::ids::AgentId;
use crate::protocol::types::{AgentMetadata, BuildState};

/// An agent's `AgentRegisterTimeoutMinutes`: how long it may take to register with GoCD, and
/// stay unlisted, unhealthy, or idle with its job gone. Each agent's is its own cluster
/// profile's (the profiles sharing an engine may each set another); one [`Duration`] is the same
/// for every agent.
pub trait RegisterTimeout {
    /// The timeout of `record`'s agent.
    fn of(&self, record: &AgentRecord) -> Duration;
}

impl RegisterTimeout for Duration {
    fn of(&self, _: &AgentRecord) -> Duration {
        *self
    }
}

impl<F: Fn(&AgentRecord) -> Duration> RegisterTimeout for F {
    fn of(&self, record: &AgentRecord) -> Duration {
        self(record)
    }
}

/// Decides what server-ping does for one cluster profile.
///
/// `gocd` holds GoCD's agents of this cluster profile only.
pub fn plan(
    registry: &Registry,
    gocd: &HashMap<AgentId, AgentMetadata>,
    register_timeouts: impl RegisterTimeout,
    now: SystemTime,
) -> Vec<Step> {
    let mut steps = Vec::new();
    let age = |t: SystemTime| now.duration_since(t).unwrap_or_default();
    for record in registry.all() {
        if registry.is_completing(&record.agent_id) {
            continue; // its job-completion disables, stops and deletes it right now
        }
        let register_timeout = register_timeouts.of(record);
        // An agent this process had GoCD delete moments ago may still be in a listing read
        // before that: it is not registered any more, and is not deleted twice.
        let registered = gocd.contains_key(&record.agent_id) && !record.recently_removed(now);
        // GoCD says it runs a job now: a kept or warm agent adopted after a restart carries the
        // tag of its first job (or of the job whose key started it), which may have completed
        // while it runs another.
        let building = gocd.get(&record.agent_id).is_some_and(|m| m.build_state == BuildState::Building);
        let task_stopped = record.task.as_ref().is_some_and(TaskView::is_stopping);
        match record.phase {
            Phase::Running
                if !task_stopped
                    && !building
                    && record.waiting_since.is_none()
                    && registry.is_finished(record.job.job_id) =>
            {
                // GoCD said the job completed, but the stop could not be made then (adopted since).
                if let Some(arn) = &record.task_arn {
                    steps.push(Step::StopTask {
                        agent_id: record.agent_id.clone(),
                        task_arn: arn.clone(),
                        reason: "its GoCD job completed".into(),
                        job: None,
                    });
                }
                if registered {
                    steps.push(Step::RemoveAgent {
                        agent_id: record.agent_id.clone(),
                        reason: "its job completed".into(),
                    });
                }
            }
            Phase::Running if task_stopped => {
                let reason = record.task.as_ref().map(TaskView::stop_summary).unwrap_or_default();
                steps.push(Step::ReportUnexpectedStop {
                    agent_id: record.agent_id.clone(),
                    job: record.job.clone(),
                    reason,
                });
                if registered {
                    steps.push(Step::RemoveAgent {
                        agent_id: record.agent_id.clone(),
                        reason: "its task stopped before the job completed".into(),
                    });
                }
            }
            // GoCD asks should-assign-work of registered agents only: one it asked registered,
            // though this ping's list of agents was taken before it did.
            Phase::Running
                if !registered
                    && record.registered_at.is_none()
                    && record.asked_for_work_at.is_none()
                    && age(record.created_at) > register_timeout =>
            {
                if let Some(arn) = &record.task_arn {
                    steps.push(Step::StopTask {
                        agent_id: record.agent_id.clone(),
                        task_arn: arn.clone(),
                        reason: format!("the agent did not register with GoCD within {}", minutes(register_timeout)),
                        job: Some(record.job.clone()),
                    });
                }
            }
            Phase::Running
                if record.registered_at.is_some()
                    && (!registered && record.last_listed.is_some_and(|t| age(t) > register_timeout)
                        || record.unhealthy_since.is_some_and(|t| age(t) > register_timeout)) =>
            {
                if let Some(arn) = &record.task_arn {
                    let why = if registered { "lost contact with GoCD" } else { "is no longer listed by GoCD" };
                    steps.push(Step::StopTask {
                        agent_id: record.agent_id.clone(),
                        task_arn: arn.clone(),
                        reason: format!("the agent {why} for over {}", minutes(register_timeout)),
                        job: None,
                    });
                    if registered {
                        steps.push(Step::RemoveAgent { agent_id: record.agent_id.clone(), reason: why.into() });
                    }
                }
            }
            Phase::Running if record.waiting_since.is_some() => {
                // Kept after its job (warm starts): it goes once no next job came in time.
                let idle = record.reuse.map_or(Duration::ZERO, |r| r.idle);
                let waited_out = record.waiting_since.is_some_and(|t| age(t) > idle);
                if let (true, Some(arn)) = (waited_out, &record.task_arn) {
                    steps.push(Step::StopTask {
                        agent_id: record.agent_id.clone(),
                        task_arn: arn.clone(),
                        reason: format!("the agent waited over {} for a next job (ReuseIdleMinutes)", minutes(idle)),
                        job: None,
                    });
                    if registered {
                        steps.push(Step::RemoveAgent {
                            agent_id: record.agent_id.clone(),
                            reason: "no next job came".into(),
                        });
                    }
                }
            }
            // Idle with its job gone: listed idle, not assigned, and its job not asked for
            // again (GoCD re-sends create-agent while a job waits, and may be slow to offer the
            // job when many wait), each for the register timeout. An assignment made after this
            // ping's list of agents was taken shows in `assigned_at`.
            Phase::Running
                if registered
                    && record.idle_since.is_some_and(|t| age(t) > register_timeout)
                    && record.job_asked_at.is_none_or(|t| age(t) > register_timeout)
                    && record.assigned_at.is_none_or(|t| age(t) > register_timeout) =>
            {
                if let Some(arn) = &record.task_arn {
                    steps.push(Step::StopTask {
                        agent_id: record.agent_id.clone(),
                        task_arn: arn.clone(),
                        reason: format!(
                            "the agent has been idle for over {}: its job is gone",
                            minutes(register_timeout)
                        ),
                        job: None,
                    });
                    steps.push(Step::RemoveAgent {
                        agent_id: record.agent_id.clone(),
                        reason: "its job is gone".into(),
                    });
                    steps.push(Step::JobGone { job: record.job.clone() });
                }
            }
            Phase::Stopping if !task_stopped && record.task_arn.is_some() => {
                steps.push(Step::StopTask {
                    agent_id: record.agent_id.clone(),
                    task_arn: record.task_arn.clone().unwrap_or_default(),
                    reason: "retrying an earlier stop that failed".into(),
                    job: None,
                });
            }
            Phase::Stopping | Phase::Stopped if registered => {
                steps.push(Step::RemoveAgent {
                    agent_id: record.agent_id.clone(),
                    reason: "its task is stopped".into(),
                });
            }
            Phase::Running | Phase::Launching | Phase::Stopping | Phase::Stopped => {}
        }
    }
    for agent_id in gocd.keys() {
        if registry.get(agent_id).is_none() {
            steps.push(Step::RemoveAgent { agent_id: agent_id.clone(), reason: "it has no ECS task".into() });
        }
    }
    steps
}

/// Every task that may still run stopped and every listed agent removed: what a deleted
/// profile's engine does (its steps come after [`plan`]'s; the applier stops a task once).
pub fn stop_all(
    registry: &Registry,
    gocd: &HashMap<AgentId, AgentMetadata>,
    reason: &str,
    which: impl Fn(&AgentRecord) -> bool,
) -> Vec<Step> {
    let mut steps = Vec::new();
    for record in registry.all().filter(|a| matches!(a.phase, Phase::Running | Phase::Launching) && which(a)) {
        if let Some(arn) = &record.task_arn {
            let job = Some(record.job.clone());
            let (agent_id, task_arn, reason) = (record.agent_id.clone(), arn.clone(), reason.to_string());
            steps.push(Step::StopTask { agent_id, task_arn, reason, job });
        }
        if gocd.contains_key(&record.agent_id) {
            steps.push(Step::RemoveAgent { agent_id: record.agent_id.clone(), reason: reason.to_string() });
        }
    }
    steps
}

fn minutes(d: Duration) -> String {
    match d.as_secs() / 60 {
        1 => "1 minute".to_string(),
        n => format!("{n} minutes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::agents::tasks::Capacity;
    use crate::cluster::agents::tasks::TaskStatus;
    use crate::cluster::agents::{NewAgent, Reservation};
    use crate::cluster::tests::fixtures::{self, job};
    use crate::protocol::types::{AgentState, BuildState, ConfigState};

    const T0: SystemTime = SystemTime::UNIX_EPOCH;
    const TIMEOUT: Duration = Duration::from_secs(600);

    fn task(arn: &str, agent: &str, job_id: i64, status: TaskStatus) -> TaskView {
        fixtures::task(arn, fixtures::tags(agent, job_id), status)
    }

    fn agent(id: &str, state: AgentState, build: BuildState) -> (AgentId, AgentMetadata) {
        (
            id.into(),
            AgentMetadata {
                agent_id: id.into(),
                agent_state: state,
                build_state: build,
                config_state: ConfigState::Enabled,
            },
        )
    }

    fn launched(registry: &mut Registry, agent_id: &str, job_id: i64, arn: &str) {
        let r = registry.reserve(&job(job_id), agent_id.into(), 10, NewAgent::default(), T0);
        assert!(matches!(r, Reservation::Reserved { .. }));
        registry.launched(agent_id, task(arn, agent_id, job_id, TaskStatus::Running), Capacity::Fargate);
    }

    #[test]
    fn a_kept_agent_waits_its_reuse_time_and_not_the_register_timeout() {
        let mut reg = Registry::default();
        let reuse = Some(crate::settings::Reuse { idle: TIMEOUT * 3, max_jobs: 5 });
        let r = reg.reserve(&job(1), "a".into(), 10, NewAgent { reuse, ..NewAgent::default() }, T0);
        assert!(matches!(r, Reservation::Reserved { .. }));
        reg.launched("a", task("t1", "a", 1, TaskStatus::Running), Capacity::Fargate);
        let idle: HashMap<_, _> = [agent("a", AgentState::Idle, BuildState::Idle)].into();
        reg.observe(&[task("t1", "a", 1, TaskStatus::Running)], &[], &[], &idle, T0);
        reg.job_finished(1, T0);
        assert!(matches!(reg.job_done("a", 1, T0), crate::cluster::agents::JobDone::Keep { jobs: 1, max_jobs: 5 }));
        assert_eq!(plan(&reg, &idle, TIMEOUT, T0 + TIMEOUT * 2), vec![], "its job finished, yet it is kept");
        let steps = plan(&reg, &idle, TIMEOUT, T0 + TIMEOUT * 3 + Duration::from_secs(1));
        assert!(
            matches!(&steps[..], [Step::StopTask { reason, .. }, Step::RemoveAgent { .. }] if reason.contains("ReuseIdleMinutes")),
            "{steps:?}"
        );
    }

    #[test]
    fn a_healthy_fleet_needs_nothing() {
        let mut reg = Registry::default();
        launched(&mut reg, "a", 1, "t1");
        let gocd: HashMap<_, _> = [agent("a", AgentState::Building, BuildState::Building)].into();
        let registered = reg.observe(&[task("t1", "a", 1, TaskStatus::Running)], &[], &[], &gocd, T0 + TIMEOUT * 3);
        assert_eq!(registered, vec![TIMEOUT * 3], "launch to register, once");
        assert_eq!(plan(&reg, &gocd, TIMEOUT, T0 + TIMEOUT * 3), vec![]);
    }

    #[test]
    fn an_agent_that_never_registers_gets_its_task_stopped_after_the_timeout() {
        let mut reg = Registry::default();
        launched(&mut reg, "a", 1, "t1");
        let none = HashMap::new();
        reg.observe(&[task("t1", "a", 1, TaskStatus::Running)], &[], &[], &none, T0 + TIMEOUT);
        assert_eq!(plan(&reg, &none, TIMEOUT, T0 + TIMEOUT), vec![], "not before the timeout");
        let steps = plan(&reg, &none, TIMEOUT, T0 + TIMEOUT + Duration::from_secs(1));
        assert!(matches!(&steps[..], [Step::StopTask { task_arn, job: Some(_), .. }] if task_arn == "t1"), "{steps:?}");
    }

    #[test]
    fn a_task_stopped_mid_job_is_reported_and_its_agent_removed() {
        let mut reg = Registry::default();
        launched(&mut reg, "a", 1, "t1");
        let gocd: HashMap<_, _> = [agent("a", AgentState::Building, BuildState::Building)].into();
        reg.observe(&[], &[task("t1", "a", 1, TaskStatus::Stopped)], &[], &gocd, T0);
        let steps = plan(&reg, &gocd, TIMEOUT, T0);
        assert!(
            matches!(&steps[0], Step::ReportUnexpectedStop { reason, .. } if reason.contains("Task stopped by user"))
        );
        assert!(matches!(&steps[1], Step::RemoveAgent { agent_id, .. } if agent_id == "a"));
    }

    #[test]
    fn an_agent_removed_moments_ago_is_not_removed_again_from_a_listing_read_before() {
        let mut reg = Registry::default();
        launched(&mut reg, "a", 1, "t1");
        let gocd: HashMap<_, _> = [agent("a", AgentState::Building, BuildState::Building)].into();
        reg.observe(&[], &[task("t1", "a", 1, TaskStatus::Stopped)], &[], &gocd, T0);
        // Job-completion (or the other reader) removed it a second ago; GoCD's listing is older.
        assert_eq!(reg.claim_removal(&["a".into()], T0), vec![AgentId::from("a")]);
        let steps = plan(&reg, &gocd, TIMEOUT, T0 + Duration::from_secs(1));
        assert!(!steps.iter().any(|s| matches!(s, Step::RemoveAgent { .. })), "{steps:?}");
        // Still listed long after: removed again.
        let later = T0 + crate::cluster::agents::REMOVAL_SETTLES;
        let steps = plan(&reg, &gocd, TIMEOUT, later);
        assert!(steps.iter().any(|s| matches!(s, Step::RemoveAgent { agent_id, .. } if agent_id == "a")), "{steps:?}");
    }

    #[test]
    fn unknown_gocd_agents_are_removed_and_restarted_plugins_adopt() {
        let mut reg = Registry::default();
        let gocd: HashMap<_, _> = [
            agent("b", AgentState::Building, BuildState::Building),
            agent("ghost", AgentState::Idle, BuildState::Idle),
        ]
        .into();
        reg.observe(&[task("t2", "b", 2, TaskStatus::Running)], &[], &[], &gocd, T0);
        assert_eq!(reg.get("b").unwrap().job.job_id, 2);
        assert_eq!(reg.get("b").unwrap().phase, Phase::Running);
        let steps = plan(&reg, &gocd, TIMEOUT, T0);
        assert_eq!(steps, vec![Step::RemoveAgent { agent_id: "ghost".into(), reason: "it has no ECS task".into() }]);
    }

    #[test]
    fn idle_agents_whose_job_is_gone_are_stopped() {
        let mut reg = Registry::default();
        launched(&mut reg, "a", 1, "t1");
        let gocd: HashMap<_, _> = [agent("a", AgentState::Idle, BuildState::Idle)].into();
        reg.observe(&[task("t1", "a", 1, TaskStatus::Running)], &[], &[], &gocd, T0);
        assert_eq!(plan(&reg, &gocd, TIMEOUT, T0 + TIMEOUT), vec![]);
        let steps = plan(&reg, &gocd, TIMEOUT, T0 + TIMEOUT + Duration::from_secs(1));
        assert!(
            matches!(&steps[..], [Step::StopTask { job: None, .. }, Step::RemoveAgent { .. }, Step::JobGone { job }] if job.job_id == 1),
            "{steps:?}"
        );
    }

    #[test]
    fn an_idle_agent_whose_job_gocd_still_asks_for_is_kept() {
        // Many jobs wait and GoCD offers this one late: it re-sends create-agent meanwhile.
        let mut reg = Registry::default();
        launched(&mut reg, "a", 1, "t1");
        let gocd: HashMap<_, _> = [agent("a", AgentState::Idle, BuildState::Idle)].into();
        reg.observe(&[task("t1", "a", 1, TaskStatus::Running)], &[], &[], &gocd, T0);
        let resent = reg.reserve(&job(1), "a2".into(), 10, NewAgent::default(), T0 + TIMEOUT);
        assert_eq!(resent, Reservation::Existing("a".into()));
        assert_eq!(plan(&reg, &gocd, TIMEOUT, T0 + TIMEOUT * 2), vec![], "asked for {TIMEOUT:?} ago");
        let steps = plan(&reg, &gocd, TIMEOUT, T0 + TIMEOUT * 2 + Duration::from_secs(1));
        assert!(
            matches!(&steps[..], [Step::StopTask { job: None, .. }, Step::RemoveAgent { .. }, Step::JobGone { .. }]),
            "{steps:?}"
        );
    }

    #[test]
    fn an_agent_given_its_job_after_gocds_list_was_taken_is_kept() {
        // The ping's list says idle (or not registered), but should-assign-work said yes since.
        let mut reg = Registry::default();
        launched(&mut reg, "a", 1, "t1");
        launched(&mut reg, "b", 2, "t2");
        let idle: HashMap<_, _> = [agent("a", AgentState::Idle, BuildState::Idle)].into();
        let running = [task("t1", "a", 1, TaskStatus::Running), task("t2", "b", 2, TaskStatus::Running)];
        reg.observe(&running, &[], &[], &idle, T0);
        let late = T0 + TIMEOUT * 2;
        assert!(reg.assigned("a", 1, late));
        assert!(reg.assigned("b", 2, late));
        assert_eq!(plan(&reg, &idle, TIMEOUT, late), vec![]);
    }

    #[test]
    fn an_agent_planned_to_stop_is_given_no_job() {
        let mut reg = Registry::default();
        launched(&mut reg, "a", 1, "t1");
        let gocd: HashMap<_, _> = [agent("a", AgentState::Idle, BuildState::Idle)].into();
        reg.observe(&[task("t1", "a", 1, TaskStatus::Running)], &[], &[], &gocd, T0);
        let later = T0 + TIMEOUT * 2;
        assert!(matches!(&plan(&reg, &gocd, TIMEOUT, later)[..], [Step::StopTask { .. }, ..]));
        reg.claim_for_stop("a");
        assert!(!reg.assigned("a", 1, later), "should-assign-work between the plan and the StopTask");
        assert_eq!(reg.get("a").unwrap().phase, Phase::Stopping);
    }

    #[test]
    fn an_adopted_agent_building_another_job_than_its_tags_is_not_stopped_for_that_ones_end() {
        // A kept agent adopted after a restart carries its first job's tags; that job's
        // completion reaches the new process while the agent builds its next one.
        let mut reg = Registry::default();
        let building: HashMap<_, _> = [agent("a", AgentState::Building, BuildState::Building)].into();
        reg.observe(&[task("t1", "a", 1, TaskStatus::Running)], &[], &[], &building, T0);
        reg.job_finished(1, T0);
        assert_eq!(plan(&reg, &building, TIMEOUT, T0), vec![], "it builds a job GoCD gave it");
        let idle: HashMap<_, _> = [agent("a", AgentState::Idle, BuildState::Idle)].into();
        let steps = plan(&reg, &idle, TIMEOUT, T0);
        assert!(
            matches!(&steps[..], [Step::StopTask { reason, .. }, Step::RemoveAgent { .. }] if reason == "its GoCD job completed"),
            "{steps:?}"
        );
    }

    #[test]
    fn stuck_agents_have_an_exit() {
        // Registered, then gone from GoCD (an operator deleted it): stopped after the timeout.
        let mut reg = Registry::default();
        launched(&mut reg, "a", 1, "t1");
        launched(&mut reg, "b", 2, "t2");
        let both: HashMap<_, _> = [
            agent("a", AgentState::Building, BuildState::Building),
            agent("b", AgentState::LostContact, BuildState::Unknown),
        ]
        .into();
        let running = [task("t1", "a", 1, TaskStatus::Running), task("t2", "b", 2, TaskStatus::Running)];
        reg.observe(&running, &[], &[], &both, T0);
        let only_b: HashMap<_, _> = [agent("b", AgentState::LostContact, BuildState::Unknown)].into();
        reg.observe(&running, &[], &[], &only_b, T0 + Duration::from_secs(1));
        assert_eq!(plan(&reg, &only_b, TIMEOUT, T0 + TIMEOUT), vec![], "not before the timeout");
        let steps = plan(&reg, &only_b, TIMEOUT, T0 + TIMEOUT * 2);
        let stopped: Vec<&str> = steps
            .iter()
            .filter_map(|s| match s {
                Step::StopTask { task_arn, .. } => Some(task_arn.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(stopped, ["t1", "t2"], "{steps:?}");
        assert!(steps.iter().any(|s| matches!(s, Step::RemoveAgent { agent_id, .. } if agent_id == "b")));

        // Stopping, and ECS says the task stopped: Stopped, and it no longer counts.
        let mut reg = Registry::default();
        launched(&mut reg, "c", 3, "t3");
        assert_eq!(reg.stopping("c"), Some(Some("t3".into())));
        reg.observe(&[], &[task("t3", "c", 3, TaskStatus::Stopped)], &[], &HashMap::new(), T0);
        assert_eq!(reg.get("c").map(|a| a.phase), Some(Phase::Stopped));
    }

    #[test]
    fn tasks_ecs_forgot_count_as_stopped() {
        let mut reg = Registry::default();
        launched(&mut reg, "a", 1, "t1");
        reg.observe(&[], &[], &["t1".into()], &HashMap::new(), T0);
        let steps = plan(&reg, &HashMap::new(), TIMEOUT, T0);
        assert!(
            matches!(&steps[..], [Step::ReportUnexpectedStop { reason, .. }] if reason.contains("no longer knows"))
        );
    }
}
