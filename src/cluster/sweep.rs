//! The orphan sweep, two-phase: a task of ours that nothing explains (no agent record we can
//! adopt it into, or a record we already consider stopped while ECS still runs it) is marked on
//! one pass and stopped on the next if it is still unexplained — so a task that is merely
//! between RunTask and its record (or between our StopTask and ECS acting on it) is never
//! stopped by mistake. Pure: the marks are passed in and out.

use std::collections::HashSet;

use super::identity::job_from_tags;
use super::registry::{Phase, Registry};
use super::tasks::TaskView;

/// What one sweep pass decided.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Sweep {
    /// Task ARNs to stop now (unexplained on two passes in a row), with the reason.
    pub stop: Vec<(String, String)>,
    /// The marks to keep for the next pass.
    pub marks: HashSet<String>,
}

/// Finds unexplained tasks among `running` (our running tasks, as refreshed).
pub fn sweep(registry: &Registry, running: &[TaskView], previous_marks: &HashSet<String>) -> Sweep {
    let mut out = Sweep::default();
    for task in running.iter().filter(|t| !t.is_stopping()) {
        let Some(reason) = unexplained(registry, task) else { continue };
        if previous_marks.contains(&task.arn) {
            out.stop.push((task.arn.clone(), reason));
        } else {
            out.marks.insert(task.arn.clone());
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
    use super::super::fixtures::{job, tags, task};
    use super::*;
    use crate::cluster::registry::NewAgent;
    use std::time::SystemTime;

    fn running(arn: &str, tags: Vec<(String, String)>) -> TaskView {
        task(arn, tags, "RUNNING")
    }

    #[test]
    fn unexplained_tasks_are_marked_then_stopped() {
        let registry = Registry::default();
        let stray = running("t-stray", vec![("gocd:server-id".into(), "s".into())]);
        let first = sweep(&registry, std::slice::from_ref(&stray), &HashSet::new());
        assert!(first.stop.is_empty());
        assert!(first.marks.contains("t-stray"));
        let second = sweep(&registry, &[stray], &first.marks);
        assert_eq!(second.stop.len(), 1);
    }

    #[test]
    fn tasks_with_a_live_record_or_adoptable_tags_are_explained() {
        let mut registry = Registry::default();
        registry.reserve(&job(7), "a".into(), 5, NewAgent::default(), SystemTime::UNIX_EPOCH);
        let t = running("t1", tags("a", 7));
        registry.launched("a", t.clone(), crate::cluster::launch::Capacity::Fargate);
        let marks: HashSet<String> = ["t1".to_string(), "t2".to_string()].into();
        assert_eq!(sweep(&registry, std::slice::from_ref(&t), &marks), Sweep::default());
        let adoptable = running("t2", tags("b", 8));
        assert_eq!(sweep(&Registry::default(), &[adoptable], &marks), Sweep::default());
        let second_task_of_a = running("t2", tags("a", 7));
        let s = sweep(&registry, &[second_task_of_a], &marks);
        assert!(s.stop[0].1.contains("second task"), "{s:?}");
        registry.stopped("a", "job completed", SystemTime::UNIX_EPOCH);
        let s = sweep(&registry, &[t], &marks);
        assert_eq!(s.stop.len(), 1, "a finished agent's task still running is stopped on the second pass");
        assert!(s.stop[0].1.contains("finished"));
    }
}
