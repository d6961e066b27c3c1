//! Job wait: the seconds between GoCD asking for an agent for a job (the job's create-agent) and
//! an agent taking the job (GoCD's should-assign-work answered yes), phase by phase:
//!
//! | phase          | from                              | to                                         |
//! |----------------|-----------------------------------|--------------------------------------------|
//! | queued         | create-agent received             | RunTask or StartTask accepted (ECS's `createdAt`); on EC2 the wait for room or an instance |
//! | provisioning   | accepted                          | the image pull starts (`pullStartedAt`)    |
//! | image pull     | `pullStartedAt`                   | `pullStoppedAt`                            |
//! | agent start    | image pulled                      | the agent takes the job: container start, the agent's boot and download of its jars, registration, GoCD's assignment |
//!
//! ECS does not always report every point (a task stopped early, an emulator): a phase whose
//! end is unknown is folded into the next phase whose end is known, and named together with it
//! ("38 s provisioning through agent start"), so the phases always add up to the whole wait. A job
//! given to an agent kept after an earlier job (warm starts) waits only for its assignment.
//!
//! Pure: [`measure`] takes the points, [`WaitHistograms`] keeps the Prometheus histograms per
//! elastic profile and phase that the metrics endpoint renders.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::cluster::agents::tasks::TaskView;
use crate::ids::AgentId;
use crate::protocol::types::JobIdentifier;

/// One phase of a job's wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WaitPhase {
    /// create-agent → RunTask or StartTask accepted.
    Queued,
    /// Accepted → the image pull starts.
    Provisioning,
    /// The image pull.
    ImagePull,
    /// Pulled → the agent takes the job.
    AgentStart,
    /// The whole wait.
    Total,
}

impl WaitPhase {
    /// The phases a wait is made of, in order.
    pub const STEPS: [WaitPhase; 4] =
        [WaitPhase::Queued, WaitPhase::Provisioning, WaitPhase::ImagePull, WaitPhase::AgentStart];

    /// In words, for a console line.
    pub fn words(self) -> &'static str {
        match self {
            WaitPhase::Queued => "queued",
            WaitPhase::Provisioning => "provisioning",
            WaitPhase::ImagePull => "image pull",
            WaitPhase::AgentStart => "agent start",
            WaitPhase::Total => "total",
        }
    }

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            WaitPhase::Queued => "queued",
            WaitPhase::Provisioning => "provisioning",
            WaitPhase::ImagePull => "image_pull",
            WaitPhase::AgentStart => "agent_start",
            WaitPhase::Total => "total",
        }
    }
}

/// When each point of one job's start happened, as far as known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartPoints {
    /// The job's create-agent was received.
    pub requested: SystemTime,
    /// ECS accepted RunTask or StartTask (its `createdAt`).
    pub accepted: Option<SystemTime>,
    /// The image pull started.
    pub pull_started: Option<SystemTime>,
    /// The image pull ended.
    pub pull_stopped: Option<SystemTime>,
    /// The agent took the job.
    pub assigned: SystemTime,
    /// The job went to an agent kept after an earlier job: no task was started for it.
    pub reused: bool,
}

impl StartPoints {
    /// The points of a job whose agent's task is `task` (as last described).
    pub fn of_task(requested: SystemTime, task: Option<&TaskView>, assigned: SystemTime, reused: bool) -> Self {
        StartPoints {
            requested,
            accepted: task.and_then(|t| t.created_at),
            pull_started: task.and_then(|t| t.pull_started_at),
            pull_stopped: task.and_then(|t| t.pull_stopped_at),
            assigned,
            reused,
        }
    }
}

/// One job's wait, measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobWait {
    /// From create-agent to the agent taking the job.
    pub total: Duration,
    /// The phases in order, each with the steps it covers (more than one where ECS did not
    /// report a boundary) and its length. Their lengths add up to `total`.
    pub phases: Vec<(Vec<WaitPhase>, Duration)>,
    /// A kept agent took the job.
    pub reused: bool,
}

/// Measures one job's wait from its points. Points out of order (clocks of two machines) count
/// as zero-length phases, never negative ones.
pub fn measure(p: &StartPoints) -> JobWait {
    let total = p.assigned.duration_since(p.requested).unwrap_or_default();
    if p.reused {
        return JobWait { total, phases: Vec::new(), reused: true };
    }
    let ends = [p.accepted, p.pull_started, p.pull_stopped, Some(p.assigned)];
    let mut phases = Vec::new();
    let mut open: Vec<WaitPhase> = Vec::new();
    let mut from = p.requested;
    for (step, end) in WaitPhase::STEPS.into_iter().zip(ends) {
        open.push(step);
        let Some(end) = end else { continue };
        // Never past the end: a point after the assignment is clamped to it.
        let end = end.clamp(from, p.assigned.max(from));
        phases.push((std::mem::take(&mut open), end.duration_since(from).unwrap_or_default()));
        from = end;
    }
    JobWait { total, phases, reused: false }
}

impl JobWait {
    /// The job console's line: `agent X ready in 41 s: 2 s queued, 18 s provisioning, 14 s
    /// image pull, 7 s agent start`.
    pub fn console_text(&self, agent_id: &AgentId) -> String {
        if self.reused {
            return format!(
                "agent {agent_id} took this job {} after it was asked for: kept after its previous job, no new task",
                seconds(self.total)
            );
        }
        let parts: Vec<String> = self
            .phases
            .iter()
            .map(|(steps, d)| {
                let named = match steps.as_slice() {
                    [one] => one.words().to_string(),
                    [first, .., last] => format!("{} through {}", first.words(), last.words()),
                    [] => String::new(),
                };
                format!("{} {named}", seconds(*d))
            })
            .collect();
        format!("agent {agent_id} ready in {}: {}", seconds(self.total), parts.join(", "))
    }

    /// The length of `phase` when it was measured on its own.
    pub fn phase(&self, phase: WaitPhase) -> Option<Duration> {
        if phase == WaitPhase::Total {
            return Some(self.total);
        }
        self.phases.iter().find(|(steps, _)| steps.as_slice() == [phase]).map(|(_, d)| *d)
    }
}

/// `41 s`, `0.4 s`, `2 min 5 s`.
fn seconds(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{:.1} s", d.as_secs_f64()),
        1..=119 => format!("{s} s"),
        _ => format!("{} min {} s", s / 60, s % 60),
    }
}

/// Upper bounds (seconds) of the wait histograms: from a kept agent's sub-second hand-over to
/// an EC2 boot and beyond.
pub const WAIT_BUCKETS: [f64; 14] =
    [1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 900.0];

/// One histogram: observations per bucket (not cumulative; the last slot is +Inf) and their sum.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// Per bucket of [`WAIT_BUCKETS`], then +Inf.
    pub counts: [u64; WAIT_BUCKETS.len() + 1],
    /// Sum of the observations, in seconds.
    pub sum: f64,
}

impl Histogram {
    /// Adds one observation.
    pub fn observe(&mut self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = WAIT_BUCKETS.iter().position(|b| secs <= *b).unwrap_or(WAIT_BUCKETS.len());
        self.counts[i] += 1;
        self.sum += secs;
    }
}

/// The wait histograms of one cluster profile, by (elastic profile hash, phase). Phases ECS
/// did not report on their own are left out; the total is always observed.
#[derive(Debug, Clone, Default)]
pub struct WaitHistograms {
    by: BTreeMap<(String, WaitPhase), Histogram>,
}

impl WaitHistograms {
    /// Adds one job's wait.
    pub fn observe(&mut self, elastic_profile: &str, wait: &JobWait) {
        for phase in WaitPhase::STEPS.into_iter().chain([WaitPhase::Total]) {
            if let Some(d) = wait.phase(phase) {
                self.by.entry((elastic_profile.to_string(), phase)).or_default().observe(d);
            }
        }
    }

    /// Every histogram, in a stable order.
    pub fn all(&self) -> impl Iterator<Item = (&str, WaitPhase, &Histogram)> {
        self.by.iter().map(|((e, p), h)| (e.as_str(), *p, h))
    }
}

/// One agent that took its job, to be announced.
#[derive(Debug, Clone)]
pub struct Took {
    pub(in crate::cluster) agent_id: AgentId,
    pub(in crate::cluster) job: JobIdentifier,
    pub(in crate::cluster) at: SystemTime,
    pub(in crate::cluster) reused: bool,
    /// Whether the job's console gets the line (not when another line said it already).
    pub(in crate::cluster) console: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    fn points(accepted: Option<u64>, pull: Option<(u64, u64)>, assigned: u64) -> StartPoints {
        StartPoints {
            requested: at(0),
            accepted: accepted.map(at),
            pull_started: pull.map(|p| at(p.0)),
            pull_stopped: pull.map(|p| at(p.1)),
            assigned: at(assigned),
            reused: false,
        }
    }

    #[test]
    fn every_phase_reported_gives_four_phases_that_add_up() {
        let wait = measure(&points(Some(2), Some((20, 34)), 41));
        assert_eq!(wait.total, Duration::from_secs(41));
        let sum: Duration = wait.phases.iter().map(|(_, d)| *d).sum();
        assert_eq!(sum, wait.total);
        assert_eq!(
            wait.console_text(&"ea-1".into()),
            "agent ea-1 ready in 41 s: 2 s queued, 18 s provisioning, 14 s image pull, 7 s agent start"
        );
        assert_eq!(wait.phase(WaitPhase::ImagePull), Some(Duration::from_secs(14)));
    }

    #[test]
    fn a_boundary_ecs_did_not_report_folds_into_the_next_phase() {
        let wait = measure(&points(Some(2), None, 40));
        assert_eq!(
            wait.console_text(&"ea-1".into()),
            "agent ea-1 ready in 40 s: 2 s queued, 38 s provisioning through agent start"
        );
        assert_eq!(wait.phase(WaitPhase::ImagePull), None, "not measured on its own");
        let nothing = measure(&points(None, None, 9));
        assert_eq!(nothing.phases.len(), 1);
        assert_eq!(nothing.phase(WaitPhase::Total), Some(Duration::from_secs(9)));
    }

    #[test]
    fn points_out_of_order_never_make_a_negative_phase() {
        // ECS's createdAt a little before the plugin's clock said create-agent came.
        let mut p = points(Some(0), Some((5, 70)), 60);
        p.requested = at(1);
        let wait = measure(&p);
        let sum: Duration = wait.phases.iter().map(|(_, d)| *d).sum();
        assert_eq!(sum, wait.total, "{wait:?}");
        assert_eq!(wait.phase(WaitPhase::AgentStart), Some(Duration::ZERO), "a pull reported past the assignment");
    }

    #[test]
    fn a_kept_agent_waits_only_for_its_assignment() {
        let mut p = points(None, None, 0);
        p.assigned = p.requested + Duration::from_millis(400);
        p.reused = true;
        let wait = measure(&p);
        assert!(wait.phases.is_empty());
        assert_eq!(
            wait.console_text(&"ea-2".into()),
            "agent ea-2 took this job 0.4 s after it was asked for: kept after its previous job, no new task"
        );
    }

    #[test]
    fn histograms_count_each_phase_measured_and_the_total() {
        let mut h = WaitHistograms::default();
        h.observe("p1", &measure(&points(Some(2), Some((20, 34)), 41)));
        h.observe("p1", &measure(&points(Some(2), None, 130)));
        let count =
            |phase| h.all().filter(|(_, p, _)| *p == phase).map(|(_, _, h)| h.counts.iter().sum::<u64>()).sum::<u64>();
        assert_eq!(count(WaitPhase::Total), 2);
        assert_eq!(count(WaitPhase::Queued), 2);
        assert_eq!(count(WaitPhase::ImagePull), 1);
        let total = h.all().find(|(_, p, _)| *p == WaitPhase::Total).map(|(_, _, h)| h.clone()).unwrap_or_default();
        assert_eq!(total.sum, 171.0);
        assert_eq!(
            total.counts[WAIT_BUCKETS.iter().position(|b| *b == 45.0).unwrap_or(0)],
            1,
            "41 s in the 45 s bucket"
        );
    }
}
