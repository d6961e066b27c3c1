//! What one job cost, and what is its warm pool's: how an agent's billed time is split between
//! the jobs it ran and the time it waited idle, and a job's share of an EC2 instance. Pure.
//!
//! # The rules
//! - **An agent started for its job** (not warm, not kept): the job pays the whole task as AWS
//!   bills it, from the start of billing (`pullStartedAt`, else `startedAt`) to `stoppedAt`,
//!   with AWS's minimum (one minute on Linux, 15 on Windows). When ECS has not said `stoppedAt`
//!   yet at the job's completion, the completion is the end (the task stops within seconds of
//!   it; StopTask is sent at that moment).
//! - **A warm or kept agent** (`WarmAgents`, `ReuseIdleMinutes`): the job pays from when GoCD
//!   gave it the job to its end, per second, without a minimum (the task's minimum was in its
//!   first stretch). The time before, since the task's billing started or its previous job
//!   ended, is **its pool's cost**: an idle agent waiting for work, reported per elastic
//!   profile, never folded into a job. So is the idle time of an agent stopped while it waited.
//! - **On the plugin's own EC2 instances** a job pays its reservation share of the instance, `r
//!   = max(CPU reserved / CPU registered, memory reserved / memory registered)`, of the
//!   instance's per-second price (on a Spot instance, EC2's Spot price) for the time its task
//!   ran; plus a share of the instance's boot and idle time that no job has paid for yet, split
//!   among the jobs on the instance at that moment in proportion to their reserved cost
//!   ([`ec2_job_share`]). Idle time after an
//!   instance's last job, until it is retired, has no job to pay it.
//! - **On a capacity provider's Auto Scaling group instance** a job pays its reservation share
//!   of the instance's price (on-demand, or EC2's Spot price on a Spot instance) for the time it
//!   ran, nothing more: the instance is the group's, launched and kept by its scaling, so its
//!   boot and idle time are no job's.

use std::time::{Duration, SystemTime};

/// An interval of billed time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Its start.
    pub from: SystemTime,
    /// Its end (not before `from`).
    pub to: SystemTime,
}

impl Span {
    /// `from..to`, empty when `to` is before `from`.
    pub fn new(from: SystemTime, to: SystemTime) -> Span {
        Span { from, to: to.max(from) }
    }

    /// Its length.
    pub fn length(&self) -> Duration {
        self.to.duration_since(self.from).unwrap_or_default()
    }

    /// Whole seconds, a started second counted whole (as AWS bills).
    pub fn billed_seconds(&self) -> u64 {
        let d = self.length();
        d.as_secs() + u64::from(d.subsec_nanos() > 0)
    }
}

/// What is known of an agent's time when one of its jobs completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentTimes {
    /// When AWS began billing its task.
    pub billing_start: SystemTime,
    /// Up to when earlier jobs or its pool were charged for it (`None`: nothing charged yet).
    pub charged_until: Option<SystemTime>,
    /// When GoCD gave it this job, for a warm or kept agent; `None` when it was started for it.
    pub given_at: Option<SystemTime>,
    /// The job's end: the task's `stoppedAt` when known, else the job's completion.
    pub end: SystemTime,
}

/// How an agent's time up to a job's end is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// The job's own time.
    pub job: Span,
    /// Whether AWS's minimum applies to the job's time (the agent was started for the job).
    pub minimum: bool,
    /// Idle time before the job, its pool's cost (warm or kept agents).
    pub pool_idle: Option<Span>,
}

/// Splits an agent's time at a job's completion (the rules in the module doc).
pub fn split(t: AgentTimes) -> Split {
    if t.given_at.is_none() && t.charged_until.is_none() {
        return Split { job: Span::new(t.billing_start, t.end), minimum: true, pool_idle: None };
    }
    let from = t.charged_until.unwrap_or(t.billing_start);
    let job_start = t.given_at.unwrap_or(from).max(from).min(t.end.max(from));
    let idle = Span::new(from, job_start);
    Split {
        job: Span::new(job_start, t.end),
        minimum: false,
        pool_idle: (idle.length() > Duration::ZERO).then_some(idle),
    }
}

/// USD for `span` at `hourly` USD an hour, per second, with a least of `minimum` seconds.
pub fn per_second(hourly: f64, span: Span, minimum: u64) -> f64 {
    hourly * span.billed_seconds().max(minimum) as f64 / 3600.0
}

/// One job's share of an EC2 instance, in USD.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ec2Share {
    /// Its reservation share of the instance for the time its task ran.
    pub reserved: f64,
    /// Its share of the instance's boot and idle time no job had paid for.
    pub boot_and_idle: f64,
}

impl Ec2Share {
    /// Both parts.
    pub fn total(&self) -> f64 {
        self.reserved + self.boot_and_idle
    }
}

/// A job's share of its EC2 instance at its completion:
/// - `reserved` = `fraction` × `hourly` × the job's seconds;
/// - `boot_and_idle` = what the instance has cost so far (`instance_so_far`) less what jobs
///   paid for it (`paid`), less what the tasks still on it have run up by reservation so far
///   (`others_running`), less `reserved`: the time no task reserved, shared between this job
///   and the tasks still on it in proportion to their reserved cost (this job's part is taken now,
///   theirs when they complete).
pub fn ec2_job_share(
    hourly: f64,
    fraction: f64,
    job: Span,
    instance_so_far: f64,
    paid: f64,
    others_running: f64,
) -> Ec2Share {
    let reserved = fraction.clamp(0.0, 1.0) * per_second(hourly, job, 0);
    let unpaid = (instance_so_far - paid - others_running - reserved).max(0.0);
    let weight = if reserved + others_running > 0.0 { reserved / (reserved + others_running) } else { 1.0 };
    Ec2Share { reserved, boot_and_idle: unpaid * weight }
}

/// The reservation share of a task on an instance: the larger of its CPU and memory fractions.
pub fn reservation_fraction(cpu: u32, memory_mib: u32, instance_cpu: u32, instance_memory_mib: u32) -> f64 {
    let part = |x: u32, of: u32| if of == 0 { 1.0 } else { f64::from(x) / f64::from(of) };
    part(cpu, instance_cpu).max(part(memory_mib, instance_memory_mib)).min(1.0)
}

/// A length in words for a console line: `7 min 12 s`, `1 h 3 min`, `42 s`.
pub fn duration_words(d: Duration) -> String {
    let s = d.as_secs() + u64::from(d.subsec_nanos() >= 500_000_000);
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 if s % 60 == 0 => format!("{} min", s / 60),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ if (s % 3600) / 60 == 0 => format!("{} h", s / 3600),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// USD as a console line and the report show it: four decimals below a dollar, two above.
pub fn usd(amount: f64) -> String {
    if amount.abs() < 1.0 {
        format!("${amount:.4}")
    } else {
        format!("${amount:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    #[test]
    fn an_agent_started_for_its_job_is_the_jobs_whole_with_the_minimum() {
        let s = split(AgentTimes { billing_start: at(10), charged_until: None, given_at: None, end: at(442) });
        assert_eq!(s, Split { job: Span::new(at(10), at(442)), minimum: true, pool_idle: None });
        assert_eq!(s.job.billed_seconds(), 432);
        // 1 vCPU 2 GB in us-east-1: 0.04937 an hour.
        assert!((per_second(0.04937, s.job, 60) - 0.04937 * 432.0 / 3600.0).abs() < 1e-12);
        assert!((per_second(0.04937, Span::new(at(0), at(5)), 60) - 0.04937 / 60.0).abs() < 1e-12);
    }

    #[test]
    fn a_warm_agents_wait_before_its_first_job_is_the_pools() {
        let s = split(AgentTimes { billing_start: at(0), charged_until: None, given_at: Some(at(300)), end: at(400) });
        assert_eq!(s.job, Span::new(at(300), at(400)));
        assert!(!s.minimum);
        assert_eq!(s.pool_idle, Some(Span::new(at(0), at(300))));
    }

    #[test]
    fn a_kept_agents_wait_between_jobs_is_the_pools() {
        let s = split(AgentTimes {
            billing_start: at(0),
            charged_until: Some(at(200)),
            given_at: Some(at(260)),
            end: at(500),
        });
        assert_eq!((s.job, s.pool_idle), (Span::new(at(260), at(500)), Some(Span::new(at(200), at(260)))));
        let at_once = split(AgentTimes {
            billing_start: at(0),
            charged_until: Some(at(200)),
            given_at: Some(at(150)),
            end: at(500),
        });
        assert_eq!((at_once.job, at_once.pool_idle), (Span::new(at(200), at(500)), None), "never charged twice");
    }

    #[test]
    fn an_ec2_job_pays_its_reservation_and_a_share_of_unpaid_boot_and_idle() {
        // A $0.36/h instance, 10 minutes old (cost 0.06), a quarter reserved by a 5-minute job,
        // nothing paid, nobody else on it: the job pays its quarter and all the unreserved time.
        let share = ec2_job_share(0.36, 0.25, Span::new(at(300), at(600)), 0.06, 0.0, 0.0);
        assert!((share.reserved - 0.0075).abs() < 1e-12);
        assert!((share.total() - 0.06).abs() < 1e-12);
        // Another task ran up 0.0225 by reservation: it pays its part of the idle time later.
        let shared = ec2_job_share(0.36, 0.25, Span::new(at(300), at(600)), 0.06, 0.0, 0.0225);
        assert!((shared.boot_and_idle - 0.03 * 0.25).abs() < 1e-12);
        // What was paid is not paid again.
        let later = ec2_job_share(0.36, 0.25, Span::new(at(300), at(600)), 0.06, 0.06, 0.0);
        assert!(later.boot_and_idle.abs() < 1e-12);
    }

    #[test]
    fn reservation_is_the_larger_fraction() {
        assert!((reservation_fraction(1024, 1920, 4096, 7680) - 0.25).abs() < 1e-12);
        assert!((reservation_fraction(512, 3840, 4096, 7680) - 0.5).abs() < 1e-12);
        assert!((reservation_fraction(512, 512, 0, 0) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn words_for_lengths_and_money() {
        assert_eq!(duration_words(Duration::from_secs(432)), "7 min 12 s");
        assert_eq!(duration_words(Duration::from_secs(42)), "42 s");
        assert_eq!(duration_words(Duration::from_secs(120)), "2 min");
        assert_eq!(duration_words(Duration::from_secs(3780)), "1 h 3 min");
        assert_eq!(usd(0.0059245), "$0.0059");
        assert_eq!(usd(12.345), "$12.35");
    }
}
