//! The orphan sweep, two-phase: a task of ours that nothing explains (no agent record we can
//! adopt it into, or a record we already consider stopped while ECS still runs it) is marked on
//! one pass and stopped on the next if it is still unexplained — so a task that is merely
//! between RunTask and its record (or between our StopTask and ECS acting on it) is never
//! stopped by mistake. Pure: the marks are passed in and out.
//!
//! `running` comes from reconcile's refresh, which keeps only tasks carrying this server's id and
//! this profile's key (`tasks::describe`); the plan checks nothing else, so it is never asked
//! about another server's or profile's task.

use std::collections::HashSet;

use super::removals::{CleanupPlan, Kind};
use crate::cluster::agents::tasks::TaskView;
use crate::cluster::agents::{Phase, Registry};
use crate::cluster::base::identity::job_from_tags;
use crate::ids::TaskArn;

/// What one orphan pass decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphans {
    /// Tasks to stop now (unexplained on two passes in a row), with the reason.
    pub plan: CleanupPlan,
    /// The marks to keep for the next pass.
    pub marks: HashSet<TaskArn>,
}

/// Finds unexplained tasks among `running` (our running tasks, as refreshed).
pub fn orphans(registry: &Registry, running: &[TaskView], previous_marks: &HashSet<TaskArn>) -> Orphans {
    let mut out = Orphans { plan: CleanupPlan::new(Kind::Orphans), marks: HashSet::new() };
    for task in running.iter().filter(|t| !t.is_stopping()) {
        let Some(reason) = unexplained(registry, task) else { continue };
        if previous_marks.contains(task.arn.as_str()) {
            out.plan.stop_tasks.push((task.arn.as_str().into(), reason));
        } else {
            out.marks.insert(task.arn.as_str().into());
        }
    }
    out
}

fn unexplained(registry: &Registry, task: &TaskView) -> Option<String> {
    match registry.agent_of(task) {
        Some(record) if record.phase == Phase::Stopped => {
            Some(format!("orphan: agent {} is finished but its task still runs", record.agent_id))
        }
        Some(_) => None,
        None => match task.agent_id().and_then(|id| registry.get(id)) {
            Some(record) if record.task_arn.is_some() => {
                Some(format!("orphan: a second task of agent {}, which runs in another task", record.agent_id))
            }
            _ if task.agent_id().is_none() || job_from_tags(&task.tags).is_none() => {
                Some("orphan: a task of ours whose tags name no agent or job".to_string())
            }
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::agents::tasks::TaskStatus;
    use crate::cluster::agents::NewAgent;
    use crate::cluster::tests::fixtures::{job, tags, task};
    use std::time::SystemTime;

    fn running(arn: &str, tags: Vec<(String, String)>) -> TaskView {
        task(arn, tags, TaskStatus::Running)
    }

    #[test]
    fn unexplained_tasks_are_marked_then_stopped() {
        let registry = Registry::default();
        let stray = running("t-stray", vec![("gocd:server-id".into(), "s".into())]);
        let first = orphans(&registry, std::slice::from_ref(&stray), &HashSet::new());
        assert!(first.plan.is_empty());
        assert!(first.marks.contains("t-stray"));
        let second = orphans(&registry, &[stray], &first.marks);
        assert_eq!(second.plan.stop_tasks.len(), 1);
        assert_eq!(second.plan.kind, Kind::Orphans);
        assert!(second.marks.is_empty(), "a stopped task is not marked again");
    }

    #[test]
    fn tasks_with_a_live_record_or_adoptable_tags_are_explained() {
        let mut registry = Registry::default();
        registry.reserve(&job(7), "a".into(), 5, NewAgent::default(), SystemTime::UNIX_EPOCH);
        let t = running("t1", tags("a", 7));
        registry.launched("a", t.clone(), crate::cluster::agents::tasks::Capacity::Fargate);
        let marks: HashSet<TaskArn> = ["t1".into(), "t2".into()].into();
        let nothing = Orphans { plan: CleanupPlan::new(Kind::Orphans), marks: HashSet::new() };
        assert_eq!(orphans(&registry, std::slice::from_ref(&t), &marks), nothing);
        let adoptable = running("t2", tags("b", 8));
        assert_eq!(orphans(&Registry::default(), &[adoptable], &marks), nothing);
        let second_task_of_a = running("t2", tags("a", 7));
        let s = orphans(&registry, &[second_task_of_a], &marks);
        assert!(s.plan.stop_tasks[0].1.contains("second task"), "{s:?}");
        registry.stopped("a", "job completed", SystemTime::UNIX_EPOCH);
        let s = orphans(&registry, &[t], &marks);
        assert_eq!(s.plan.stop_tasks.len(), 1, "a finished agent's task still running is stopped on the second pass");
        assert!(s.plan.stop_tasks[0].1.contains("finished"));
    }
}
