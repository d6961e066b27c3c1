//! A job's start as the phase spans of its trace (`telemetry::jobs`): the points of
//! its wait in ECS's and GoCD's own steps, finer than the four phases of the console line and
//! the histograms ([`super::job_wait`]), which fold the agent's start into one:
//!
//! | span               | from                          | to                                     | ECS status   |
//! |--------------------|-------------------------------|----------------------------------------|--------------|
//! | queued             | create-agent received         | RunTask (StartTask) accepted: `createdAt` | —         |
//! | provisioning       | accepted                      | the image pull starts: `pullStartedAt` | PROVISIONING |
//! | image pull         | `pullStartedAt`               | `pullStoppedAt`                        | PENDING      |
//! | container start    | pulled                        | the task is RUNNING: `startedAt`       | PENDING      |
//! | agent registration | RUNNING                       | the agent registered with GoCD         | RUNNING      |
//! | assignment         | registered                    | GoCD gave it the job (should-assign-work said yes) | RUNNING |
//!
//! The agent registered when GoCD first listed it or first asked should-assign-work of it
//! (GoCD asks only of registered agents), whichever came first. As in the console line, a point
//! ECS did not report folds its phase into the next one that has an end ("provisioning through
//! container start"), and points out of order (two machines' clocks) give zero-length spans,
//! never negative ones. Pure: the caller gives the points.

use std::time::SystemTime;

use super::job_wait::StartPoints;
use crate::cluster::agents::tasks::TaskStatus;
use crate::telemetry::jobs::PhaseSpan;

/// The points of one job's start, as far as known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracePoints {
    /// The wait's points (create-agent, accepted, pull, assigned).
    pub wait: StartPoints,
    /// The task became RUNNING (ECS's `startedAt`).
    pub running: Option<SystemTime>,
    /// The agent registered with GoCD.
    pub registered: Option<SystemTime>,
}

/// One step of a start: its span name, the point it ends at, and the task's ECS status during it.
struct Step {
    name: &'static str,
    to: &'static str,
    status: Option<TaskStatus>,
}

static STEPS: [Step; 6] = [
    Step { name: "queued", to: "task accepted", status: None },
    Step { name: "provisioning", to: "image pull started", status: Some(TaskStatus::Provisioning) },
    Step { name: "image pull", to: "image pulled", status: Some(TaskStatus::Pending) },
    Step { name: "container start", to: "task running", status: Some(TaskStatus::Pending) },
    Step { name: "agent registration", to: "agent registered", status: Some(TaskStatus::Running) },
    Step { name: "assignment", to: "job assigned", status: Some(TaskStatus::Running) },
];

/// The phase spans of a start, in order, from create-agent to the assignment; none for a job
/// given to a kept agent (no task was started for it).
pub fn phase_spans(p: &TracePoints) -> Vec<PhaseSpan> {
    let w = &p.wait;
    if w.reused {
        return Vec::new();
    }
    let ends = [w.accepted, w.pull_started, w.pull_stopped, p.running, p.registered, Some(w.assigned)];
    let mut spans = Vec::new();
    let mut open: Vec<&'static Step> = Vec::new();
    let mut from = w.requested;
    for (step, end) in STEPS.iter().zip(ends) {
        open.push(step);
        let Some(end) = end else { continue };
        let end = end.clamp(from, w.assigned.max(from));
        let (first, last) = (open[0], open[open.len() - 1]);
        let name = match open.len() {
            1 => first.name.to_string(),
            _ => format!("{} through {}", first.name, last.name),
        };
        // A status only where the span covers one.
        let status = open.iter().map(|s| s.status.as_ref()).reduce(|a, b| if a == b { a } else { None }).flatten();
        spans.push(PhaseSpan { name, start: from, end, to: last.to, ecs_status: status.map(TaskStatus::as_str) });
        open.clear();
        from = end;
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    fn points(
        accepted: Option<u64>,
        pull: Option<(u64, u64)>,
        running: Option<u64>,
        registered: Option<u64>,
    ) -> TracePoints {
        TracePoints {
            wait: StartPoints {
                requested: at(0),
                accepted: accepted.map(at),
                pull_started: pull.map(|p| at(p.0)),
                pull_stopped: pull.map(|p| at(p.1)),
                assigned: at(60),
                reused: false,
            },
            running: running.map(at),
            registered: registered.map(at),
        }
    }

    fn names(spans: &[PhaseSpan]) -> Vec<(&str, u64, u64)> {
        let secs = |t: SystemTime| t.duration_since(at(0)).expect("after the request").as_secs();
        spans.iter().map(|s| (s.name.as_str(), secs(s.start), secs(s.end))).collect()
    }

    #[test]
    fn every_point_known_gives_six_phases_end_to_end() {
        let spans = phase_spans(&points(Some(2), Some((20, 34)), Some(38), Some(55)));
        assert_eq!(
            names(&spans),
            vec![
                ("queued", 0, 2),
                ("provisioning", 2, 20),
                ("image pull", 20, 34),
                ("container start", 34, 38),
                ("agent registration", 38, 55),
                ("assignment", 55, 60),
            ]
        );
        assert_eq!(spans[2].ecs_status, Some("PENDING"));
        assert_eq!(spans[0].ecs_status, None);
        assert_eq!(spans[5].to, "job assigned");
    }

    #[test]
    fn an_unreported_point_folds_into_the_next_phase() {
        let spans = phase_spans(&points(Some(2), None, None, Some(50)));
        assert_eq!(
            names(&spans),
            vec![("queued", 0, 2), ("provisioning through agent registration", 2, 50), ("assignment", 50, 60)]
        );
        assert_eq!(spans[1].ecs_status, None, "several statuses");
        assert_eq!(spans[1].to, "agent registered");
    }

    #[test]
    fn points_out_of_order_give_zero_length_spans_within_the_wait() {
        // The registration seen after the assignment (a late server-ping), RUNNING before the pull.
        let spans = phase_spans(&points(Some(2), Some((20, 34)), Some(10), Some(90)));
        assert_eq!(
            names(&spans),
            vec![
                ("queued", 0, 2),
                ("provisioning", 2, 20),
                ("image pull", 20, 34),
                ("container start", 34, 34),
                ("agent registration", 34, 60),
                ("assignment", 60, 60),
            ]
        );
    }

    #[test]
    fn a_kept_agent_has_no_phases() {
        let mut p = points(None, None, None, None);
        p.wait.reused = true;
        assert!(phase_spans(&p).is_empty());
    }
}
