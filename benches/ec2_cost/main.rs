//! `cargo bench --bench ec2_cost`: what the EC2 placement and retirement rules cost on a
//! reference CI day, in instance-hours, against the lower bound for the same jobs.
//!
//! The trace (`tests/data/ec2_trace.csv`: arrival, duration, CPU units and MiB per job) is played
//! against a simulated clock through the plugin's own rules — `ec2::plan::plan` (placement,
//! launches, retirement) and `ec2::plan::idle_since` (the idle clock) — with instances that
//! register `BOOT` after their launch and a pass every `TICK`, as the plugin's loop does while
//! work waits. Instance-hours run from each launch to its termination, idle tails included.
//!
//! The lower bound is the trace's task CPU-seconds or memory-seconds, whichever is larger, over
//! one instance's capacity: no packing, launch or idle time could do better. The ratio of the two
//! is the number to watch; the table also shows where the instance-hours went (booting, idle,
//! running tasks and how full those instances were on average), how long jobs waited for room,
//! the day with each cost rule of `ec2::plan::Rules` switched off, and two reference rows: one
//! whose instances boot instantly and retire as soon as they are idle, with no task kept
//! waiting (what placement alone costs), and one that also knows every job's duration and places
//! each task where it ends closest before the instance's last task ends (or extends it least):
//! roughly what a rule that never moves a running task can hope for without making jobs wait (a
//! greedy heuristic, not a proven optimum).
//!
//! One row lists several instance types (`Ec2InstanceType` `c5.large, c5.xlarge, c5.2xlarge`):
//! each new instance gets the smallest listed type that holds the task it opens for. Its
//! instances differ in size, so that row counts **instance-hours normalised to c5.xlarge
//! instance-hours by price** (an instance counts its type's price over c5.xlarge's per hour, from
//! the plugin's price table, `ecs_elastic_agent::cost`, in us-east-1: c5 types cost the same per
//! vCPU, so an instance of N vCPUs counts N/4), against the c5.xlarge lower bound (c5 types have the same memory per vCPU, so the
//! bound is the same in those units). Every other row counts instances of its single type.
//!
//! A second table plays the same setups over [`DAYS`] more days drawn from the reference day's
//! model with other seeds ([`days`]): each setup's mean, lowest and highest ratio over them and
//! its mean waits. One trace is one draw of luck; a rule that helps should help on most days.
//!
//! The rows play the cost rules with a patience ([`PATIENCE`], 600 s: the default before issue
//! 33, which made `Ec2ScaleOutWaitSeconds` 0 the default so that jobs do not wait for room); the
//! `Ec2ScaleOutWaitSeconds 0` row is today's default placement. The stopped-instance pool, the
//! other half of today's defaults, saves no instance-hour and is measured with the waits it buys
//! by the job-wait benchmark.
//!
//! Runs in seconds; no AWS, no moto. Prints two tables on stdout.

#![allow(clippy::print_stdout)]

#[path = "../days.rs"]
mod days;

use std::time::{Duration, SystemTime};

use ecs_elastic_agent::cluster::capacity::ec2::instance::PLACEMENT_GRACE;
use ecs_elastic_agent::cluster::capacity::ec2::plan::{
    idle_since, plan, Demand, Policy, Registered, Rules, Slot, TypeOffer,
};
use ecs_elastic_agent::cluster::capacity::ec2::{capacity, Arch, OsClass, Resources};

/// Time from RunInstances to the container instance registering (boot, ECS agent start).
const BOOT: u64 = 90;
/// Seconds between passes.
const TICK: u64 = 2;

/// How many generated days the second table plays.
const DAYS: u64 = 20;
/// The goal for the ratio, against which the second table counts days.
const GOAL: f64 = 1.3;
/// The clairvoyant reference's row name ([`play_clairvoyant`]).
const CLAIRVOYANT: &str = "reference: durations known, instant, no wait";

/// One job of the trace.
/// The patience the cost rules are studied with: `Ec2ScaleOutWaitSeconds` 600 (the default is 0,
/// the row `Ec2ScaleOutWaitSeconds 0`).
const PATIENCE: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy)]
struct Job {
    arrival: u64,
    duration: u64,
    need: Resources,
}

/// One simulated instance.
#[derive(Debug)]
struct Instance {
    id: String,
    instance_type: String,
    /// What its type offers.
    cap: Resources,
    /// How many instances of the row's unit type it counts as (its price over the unit's).
    weight: f64,
    launched_at: u64,
    retired_at: Option<u64>,
    remaining: Resources,
    /// (end, need) of the tasks on it.
    tasks: Vec<(u64, Resources)>,
    idle_since: Option<SystemTime>,
    last_placed: Option<SystemTime>,
}

/// One configuration to play.
#[derive(Debug)]
struct Setup {
    name: &'static str,
    /// `Ec2InstanceType`: one type, or several.
    types: &'static [&'static str],
    /// The type whose instance-hours the row counts (its only type, or c5.xlarge).
    unit: &'static str,
    min: u32,
    max: u32,
    idle_minutes: u64,
    /// Which cost rules of `ec2::plan` apply (all of them in the plugin).
    rules: Rules,
    /// Seconds from launch to registration ([`BOOT`], or 0 for the reference row).
    boot: u64,
    /// `Ec2ScaleOutWaitSeconds` ([`PATIENCE`] unless the row says).
    scale_out_wait: Duration,
}

/// What one play cost.
#[derive(Debug, Default)]
struct Outcome {
    instance_hours: f64,
    /// Instance-hours before registering, registered with no task, and with tasks.
    booting: f64,
    idle: f64,
    busy: f64,
    /// Task-hours of CPU or memory, whichever is the larger share, while busy: busy use.
    used: f64,
    launches: usize,
    peak: usize,
    waits: Vec<u64>,
}

fn at(t: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(t)
}

fn load_trace() -> Vec<Job> {
    let text = include_str!("../../tests/data/ec2_trace.csv");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("arrival"))
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<u64> = l.split(',').map(|x| x.trim().parse().expect("a number")).collect();
            Job { arrival: f[0], duration: f[1], need: Resources::new(f[2] as u32, f[3] as u32) }
        })
        .collect()
}

fn cap_of(instance_type: &str) -> Resources {
    capacity::estimate(instance_type).expect("a known instance type")
}

fn play(jobs: &[Job], setup: &Setup) -> Outcome {
    let types = setup
        .types
        .iter()
        .map(|t| TypeOffer { name: t.to_string(), capacity: cap_of(t), arch: Arch::X86_64, known: true })
        .collect();
    let policy = Policy {
        min: setup.min,
        max: setup.max,
        idle: Duration::from_secs(setup.idle_minutes * 60),
        register_timeout: Duration::from_secs(300),
        launch_patience: setup.scale_out_wait,
        types,
        spot: false,
        spot_turn: 0,
        rules: setup.rules,
    };
    let mut instances: Vec<Instance> = Vec::new();
    let mut waiting: Vec<(usize, Job)> = Vec::new();
    let mut next_job = 0;
    let mut waits = Vec::new();
    let mut peak = 0;
    // Seconds booting, idle, busy; and busy seconds weighted by the instance's use (each in
    // instances of the unit type).
    let mut seconds = (0.0, 0.0, 0.0, 0.0);
    let mut t = 0;
    loop {
        let now = at(t);
        for i in instances.iter_mut().filter(|i| i.retired_at.is_none()) {
            let (done, left): (Vec<_>, Vec<_>) = i.tasks.iter().partition(|(end, _)| *end <= t);
            i.tasks = left;
            for (_, need) in done {
                i.remaining = i.remaining.plus(need);
            }
            if i.launched_at + setup.boot <= t {
                i.idle_since = idle_since(i.idle_since, i.tasks.len() as u32, i.last_placed, PLACEMENT_GRACE, now);
            }
        }
        while next_job < jobs.len() && jobs[next_job].arrival <= t {
            waiting.push((next_job, jobs[next_job]));
            next_job += 1;
        }
        let alive: Vec<usize> = (0..instances.len()).filter(|i| instances[*i].retired_at.is_none()).collect();
        peak = peak.max(alive.len());
        for i in &alive {
            let inst = &instances[*i];
            let tick = TICK as f64 * inst.weight;
            let share = if inst.launched_at + setup.boot > t {
                &mut seconds.0
            } else if inst.tasks.is_empty() {
                &mut seconds.1
            } else {
                seconds.3 += inst.cap.minus(inst.remaining).share_of(inst.cap) * tick;
                &mut seconds.2
            };
            *share += tick;
        }
        if next_job == jobs.len()
            && waiting.is_empty()
            && alive.iter().all(|i| instances[*i].tasks.is_empty())
            && alive.len() <= setup.min as usize
        {
            break;
        }
        let slots: Vec<Slot> = alive
            .iter()
            .map(|i| {
                let inst = &instances[*i];
                let registered = inst.launched_at + setup.boot <= t;
                Slot {
                    id: inst.id.clone(),
                    os: OsClass::Linux,
                    instance_type: inst.instance_type.clone(),
                    arch: Arch::X86_64,
                    launched_at: at(inst.launched_at),
                    running: true,
                    registered: registered.then_some(Registered {
                        usable: true,
                        total: inst.cap,
                        remaining: inst.remaining,
                        tasks: inst.tasks.len() as u32,
                    }),
                    idle_since: inst.idle_since,
                    retiring: false,
                    spot: false,
                    spot_warned: false,
                }
            })
            .collect();
        let demands: Vec<Demand> = waiting
            .iter()
            .map(|(n, j)| Demand {
                id: n.to_string(),
                need: j.need,
                os: OsClass::Linux,
                arch: Arch::X86_64,
                since: at(j.arrival),
                on_demand: false,
            })
            .collect();
        let decided = plan(&slots, &demands, &policy, now);
        assert!(decided.too_big.is_empty(), "every job of the trace fits an instance");
        for r in &decided.retire {
            let inst = instances.iter_mut().find(|i| i.id == r.instance).expect("a known instance");
            assert!(inst.tasks.is_empty(), "an instance with a task is never retired");
            inst.retired_at = Some(t);
        }
        for p in &decided.start {
            let n: usize = p.demand.parse().expect("a job index");
            let job = jobs[n];
            let inst = instances.iter_mut().find(|i| i.id == p.instance).expect("a known instance");
            assert!(inst.remaining.fits(job.need), "placement overcommitted {}", inst.id);
            inst.remaining = inst.remaining.minus(job.need);
            inst.tasks.push((t + job.duration, job.need));
            inst.last_placed = Some(now);
            inst.idle_since = None;
            waiting.retain(|(m, _)| *m != n);
            waits.push(t - job.arrival);
        }
        for launch in &decided.launch {
            let id = format!("i-{:05}", instances.len());
            let cap = cap_of(&launch.types[0]);
            instances.push(Instance {
                id,
                instance_type: launch.types[0].clone(),
                cap,
                weight: price_weight(&launch.types[0], setup.unit),
                launched_at: t,
                retired_at: None,
                remaining: cap,
                tasks: Vec::new(),
                idle_since: None,
                last_placed: None,
            });
        }
        t += TICK;
    }
    let end = t;
    let lived: f64 = instances.iter().map(|i| (i.retired_at.unwrap_or(end) - i.launched_at) as f64 * i.weight).sum();
    let hours = |s: f64| s / 3600.0;
    Outcome {
        instance_hours: hours(lived),
        booting: hours(seconds.0),
        idle: hours(seconds.1),
        busy: hours(seconds.2),
        used: hours(seconds.3),
        launches: instances.len(),
        peak,
        waits,
    }
}

/// The clairvoyant reference: durations known, instances that boot instantly and go the moment
/// they are empty, every job started when it arrives, never moved. Each job (in arrival order,
/// larger first) goes to the instance it fits whose last task ends soonest after its own end, or
/// failing that the one whose last task ends latest (the least extension), tighter fit first
/// among equals; a new instance only when it fits none.
fn play_clairvoyant(jobs: &[Job], instance_type: &str) -> Outcome {
    let cap = capacity::estimate(instance_type).expect("a known instance type");
    // Per instance: its tasks as (start, end, need).
    let mut bins: Vec<Vec<(u64, u64, Resources)>> = Vec::new();
    let mut order: Vec<&Job> = jobs.iter().collect();
    order.sort_by(|a, b| {
        a.arrival.cmp(&b.arrival).then(b.need.share_of(cap).partial_cmp(&a.need.share_of(cap)).expect("a share"))
    });
    let last_end = |bin: &[(u64, u64, Resources)]| bin.iter().map(|(_, end, _)| *end).max().unwrap_or(0);
    for job in order {
        let (t, end) = (job.arrival, job.arrival + job.duration);
        let room = |bin: &[(u64, u64, Resources)]| {
            bin.iter().filter(|(s, e, _)| *s <= t && t < *e).fold(cap, |left, (.., need)| left.minus(*need))
        };
        let best = bins
            .iter()
            .enumerate()
            .filter(|(_, bin)| last_end(bin) > t && room(bin).fits(job.need))
            .min_by_key(|(_, bin)| {
                let last = last_end(bin);
                let tight = (room(bin).minus(job.need).share_of(cap) * 1e6) as u64;
                if last >= end {
                    (0, last - end, tight)
                } else {
                    (1, end - last, tight)
                }
            })
            .map(|(i, _)| i);
        match best {
            Some(i) => bins[i].push((t, end, job.need)),
            None => bins.push(vec![(t, end, job.need)]),
        }
    }
    let mut outcome = Outcome { launches: bins.len(), waits: vec![0; jobs.len()], ..Outcome::default() };
    let mut lives = Vec::new();
    for bin in &bins {
        let first = bin.iter().map(|(start, ..)| *start).min().unwrap_or(0);
        lives.push((first, last_end(bin)));
        // Busy use: the dominant share of what runs, between consecutive starts and ends.
        let mut edges: Vec<u64> = bin.iter().flat_map(|(s, e, _)| [*s, *e]).collect();
        edges.sort_unstable();
        edges.dedup();
        for w in edges.windows(2) {
            let used = bin
                .iter()
                .filter(|(s, e, _)| *s <= w[0] && w[0] < *e)
                .fold(Resources::default(), |sum, (.., need)| sum.plus(*need));
            outcome.used += used.share_of(cap) * (w[1] - w[0]) as f64 / 3600.0;
        }
    }
    outcome.instance_hours = lives.iter().map(|(s, e)| (e - s) as f64).sum::<f64>() / 3600.0;
    outcome.busy = outcome.instance_hours;
    outcome.peak =
        lives.iter().map(|(s, _)| lives.iter().filter(|(s2, e2)| s2 <= s && s < e2).count()).max().unwrap_or(0);
    outcome
}

/// The region whose prices weigh instance types against each other.
const PRICE_REGION: &str = "us-east-1";

/// What an hour of `instance_type` costs in hours of `unit`, by the plugin's price table.
fn price_weight(instance_type: &str, unit: &str) -> f64 {
    static PRICES: std::sync::OnceLock<ecs_elastic_agent::cost::PriceTable> = std::sync::OnceLock::new();
    let prices = PRICES.get_or_init(ecs_elastic_agent::cost::PriceTable::embedded);
    let hour = |t: &str| prices.ec2_hour(PRICE_REGION, t).unwrap_or_else(|e| panic!("{e}"));
    hour(instance_type) / hour(unit)
}

/// Task CPU-seconds or memory-seconds, whichever is larger, over one instance's capacity.
fn lower_bound_hours(jobs: &[Job], instance_type: &str) -> f64 {
    let cap = capacity::estimate(instance_type).expect("a known instance type");
    let cpu: f64 = jobs.iter().map(|j| f64::from(j.need.cpu) * j.duration as f64).sum::<f64>() / f64::from(cap.cpu);
    let mem: f64 =
        jobs.iter().map(|j| f64::from(j.need.memory) * j.duration as f64).sum::<f64>() / f64::from(cap.memory);
    cpu.max(mem) / 3600.0
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let jobs = load_trace();
    let task_hours: f64 = jobs.iter().map(|j| j.duration as f64).sum::<f64>() / 3600.0;
    println!(
        "EC2 cost on the reference CI day (tests/data/ec2_trace.csv): {} jobs, {:.1} task-hours; instances register {} s after launch, a pass every {} s",
        jobs.len(),
        task_hours,
        BOOT,
        TICK
    );
    println!();
    println!(
        "{:<46} {:>10} {:>11} {:>6} {:>8} {:>5} {:>11} {:>8} {:>6} {:>9} {:>9} {:>9}",
        "setup",
        "inst-hours",
        "lower bound",
        "ratio",
        "booting",
        "idle",
        "busy (use)",
        "launches",
        "peak",
        "wait p50",
        "wait p95",
        "wait max"
    );
    let all = Rules::default();
    let xlarge = |name, min, idle_minutes, rules| Setup {
        name,
        types: &["c5.xlarge"],
        unit: "c5.xlarge",
        min,
        max: 50,
        idle_minutes,
        rules,
        boot: BOOT,
        scale_out_wait: PATIENCE,
    };
    let waiting =
        |name, seconds| Setup { name, scale_out_wait: Duration::from_secs(seconds), ..xlarge(name, 0, 10, all) };
    let patience_alone = Rules { waiting_bounded: false, whole_tasks_wait: false, ..all };
    let setups = [
        xlarge("c5.xlarge, wait 600 s, idle 10 min, max 50", 0, 10, all),
        xlarge("  Ec2ScaleOutWaitSeconds 0 (the default)", 0, 10, Rules { patient_scale_out: false, ..all }),
        xlarge("  without slack is the spare", 0, 10, Rules { slack_is_the_spare: false, ..all }),
        xlarge("  one warm spare only (none of the four rules)", 0, 10, Rules { one_warm_spare: true, ..Rules::NONE }),
        xlarge("  none of the rules (every idle kept)", 0, 10, Rules::NONE),
        xlarge("  without the bound on waiting work", 0, 10, Rules { waiting_bounded: false, ..all }),
        xlarge("  whole-instance tasks launch at once", 0, 10, Rules { whole_tasks_wait: false, ..all }),
        xlarge("  neither (patience alone)", 0, 10, patience_alone),
        Setup {
            scale_out_wait: Duration::from_secs(300),
            ..xlarge("  neither, wait 300 s (the first defaults)", 0, 10, patience_alone)
        },
        waiting("  Ec2ScaleOutWaitSeconds 120", 120),
        waiting("  Ec2ScaleOutWaitSeconds 300", 300),
        waiting("  Ec2ScaleOutWaitSeconds 900", 900),
        waiting("  Ec2ScaleOutWaitSeconds 1800", 1800),
        xlarge("c5.xlarge, idle 3 min, max 50", 0, 3, all),
        xlarge("c5.xlarge, idle 30 min, max 50", 0, 30, all),
        xlarge("c5.xlarge, idle 10 min, 2 kept warm, max 50", 2, 10, all),
        Setup {
            name: "c5.2xlarge, wait 600 s, idle 10 min, max 25",
            types: &["c5.2xlarge"],
            unit: "c5.2xlarge",
            min: 0,
            max: 25,
            idle_minutes: 10,
            rules: all,
            boot: BOOT,
            scale_out_wait: PATIENCE,
        },
        Setup {
            name: "c5.large/xlarge/2xlarge, in c5.xlarge-hours",
            types: &["c5.large", "c5.xlarge", "c5.2xlarge"],
            unit: "c5.xlarge",
            min: 0,
            max: 50,
            idle_minutes: 10,
            rules: all,
            boot: BOOT,
            scale_out_wait: PATIENCE,
        },
        Setup {
            name: "reference: instant boot, no idle, no wait",
            types: &["c5.xlarge"],
            unit: "c5.xlarge",
            min: 0,
            max: 50,
            idle_minutes: 0,
            rules: Rules { patient_scale_out: false, ..all },
            boot: 0,
            scale_out_wait: PATIENCE,
        },
    ];
    let clairvoyant = |jobs: &[Job]| play_clairvoyant(jobs, "c5.xlarge");
    for setup in &setups {
        print_row(setup.name, &jobs, setup.unit, &play(&jobs, setup));
    }
    print_row(CLAIRVOYANT, &jobs, "c5.xlarge", &clairvoyant(&jobs));

    let days: Vec<Vec<Job>> = (1..=DAYS)
        .map(|seed| {
            let drawn = days::day(seed);
            drawn
                .iter()
                .map(|d| Job { arrival: d.arrival, duration: d.duration, need: Resources::new(d.cpu, d.memory) })
                .collect()
        })
        .collect();
    let task_hours: Vec<f64> = days.iter().map(|d| d.iter().map(|j| j.duration as f64).sum::<f64>() / 3600.0).collect();
    println!();
    println!(
        "The same setups over {} days drawn from the reference day's model (seeds 1-{}: {}-{} jobs, {:.0}-{:.0} task-hours):",
        DAYS,
        DAYS,
        days.iter().map(Vec::len).min().unwrap_or(0),
        days.iter().map(Vec::len).max().unwrap_or(0),
        task_hours.iter().copied().fold(f64::INFINITY, f64::min),
        task_hours.iter().copied().fold(0.0, f64::max),
    );
    println!();
    println!(
        "{:<46} {:>10} {:>7} {:>8} {:>10} {:>14} {:>14}",
        "setup",
        "mean ratio",
        "lowest",
        "highest",
        format!("days ≤{GOAL:.2}"),
        "mean wait p95",
        "mean wait max"
    );
    for setup in &setups {
        print_days_row(setup.name, &days, setup.unit, |jobs| play(jobs, setup));
    }
    print_days_row(CLAIRVOYANT, &days, "c5.xlarge", clairvoyant);
}

/// One row of the reference day's table.
fn print_row(name: &str, jobs: &[Job], unit: &str, outcome: &Outcome) {
    let bound = lower_bound_hours(jobs, unit);
    let waits = sorted_waits(jobs, outcome);
    println!(
        "{:<46} {:>10.1} {:>11.1} {:>6.2} {:>8.1} {:>5.1} {:>11} {:>8} {:>6} {:>8}s {:>8}s {:>8}s",
        name,
        outcome.instance_hours,
        bound,
        outcome.instance_hours / bound,
        outcome.booting,
        outcome.idle,
        format!("{:.1} ({:.0}%)", outcome.busy, 100.0 * outcome.used / outcome.busy.max(f64::MIN_POSITIVE)),
        outcome.launches,
        outcome.peak,
        percentile(&waits, 0.5),
        percentile(&waits, 0.95),
        waits.last().copied().unwrap_or(0),
    );
}

/// One row of the generated days' table: `play` on each day, its ratio against that day's bound.
fn print_days_row(name: &str, days: &[Vec<Job>], unit: &str, play: impl Fn(&[Job]) -> Outcome) {
    let (mut ratios, mut p95, mut max) = (Vec::new(), 0.0, 0.0);
    for jobs in days {
        let outcome = play(jobs);
        let waits = sorted_waits(jobs, &outcome);
        ratios.push(outcome.instance_hours / lower_bound_hours(jobs, unit));
        p95 += percentile(&waits, 0.95) as f64;
        max += waits.last().copied().unwrap_or(0) as f64;
    }
    let n = days.len() as f64;
    println!(
        "{:<46} {:>10.2} {:>7.2} {:>8.2} {:>10} {:>13.0}s {:>13.0}s",
        name,
        ratios.iter().sum::<f64>() / n,
        ratios.iter().copied().fold(f64::INFINITY, f64::min),
        ratios.iter().copied().fold(0.0, f64::max),
        ratios.iter().filter(|r| **r <= GOAL).count(),
        p95 / n,
        max / n,
    );
}

/// Every job's wait, shortest first (every job ran).
fn sorted_waits(jobs: &[Job], outcome: &Outcome) -> Vec<u64> {
    let mut waits = outcome.waits.clone();
    waits.sort_unstable();
    assert_eq!(waits.len(), jobs.len(), "every job ran");
    waits
}
