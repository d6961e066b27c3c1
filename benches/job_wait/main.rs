//! `cargo bench --bench job_wait`: how long jobs wait for an agent, and what that costs, on a
//! day of jobs played through the plugin's own planning on a simulated clock.
//!
//! The day is the reference trace (`tests/data/ec2_trace.csv`) or `--trace FILE` (same
//! columns, [`trace`]). Each setup plays it with the start model of [`model`] (every phase from
//! a published figure, cited in README "Job wait"):
//!
//! - Fargate ([`fargate`]): `cold` (every job started cold: no reuse, no warm agents),
//!   `defaults` (the plugin's: the same, as `ReuseIdleMinutes` and `WarmAgents` are off),
//!   `warm auto` (`WarmAgents` `auto` through `cluster::warm`'s planner, the key rule enforced),
//!   `warm auto spot` (the same pool on Fargate Spot, interruptions included), `warm auto spot
//!   night` and `night 2` (that pool with a floor of one or two idle agents per elastic profile
//!   kept through the night: a candidate rule, played here only), and `cold soci` (every job
//!   cold, the image lazily loaded). Cost: Fargate's per-second price from each task's pull to
//!   its stop (Spot at the price table's discount); the ratio is to the `cold` row's cost.
//! - EC2 ([`ec2`]): `ec2::plan` at the defaults (`Ec2ScaleOutWaitSeconds` 0, `Ec2StoppedInstances`
//!   5), without and with `WarmAgents` `auto` (idle agents kept on the instances). Cost: c5.xlarge
//!   instance-hours at the on-demand price; the ratio is to the EC2 cost bench's lower bound (the
//!   jobs' CPU- or memory-seconds over one instance, their durations only).
//!
//! Every path waits for GoCD's 5 s assignment timer before create-agent ([`model::create_agent_at`]).
//! Prints one table (every wait with its cost and every cost with its wait) and the goals
//! against the figures; `--json` prints one JSON object per setup instead. Options:
//! `--trace FILE`, `--image-mb N` (the agent image's size, 413 by default), `--json`; the
//! `--bench` that cargo appends is accepted and ignored. Runs in seconds; no AWS, no moto.

#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "../days.rs"]
#[allow(dead_code)]
mod days;
mod ec2;
mod fargate;
mod model;
mod trace;

use ecs_elastic_agent::cluster::capacity::warm::{WarmAgents, AUTO_MEMORY_DAYS};
use ecs_elastic_agent::settings::{SCALE_OUT_WAIT_SECONDS, STOPPED_INSTANCES_DEFAULT};
use serde_json::json;

use trace::Job;

/// `MaxAgents` of the Fargate rows: room for the day's peak of cold starts (about 50).
const FARGATE_MAX_AGENTS: u32 = 100;
/// `Ec2MaxInstances` and `Ec2IdleMinutes` of the EC2 rows (the EC2 cost bench's).
const EC2_MAX: u32 = 50;
const EC2_IDLE_MINUTES: u64 = 10;
/// The candidate night floors: idle Spot agents kept per elastic profile through quiet hours.
const NIGHT_FLOORS: [u32; 2] = [1, 2];
/// A day, in seconds: the measured day starts this many seconds after each earlier one.
const DAY: u64 = 86_400;
/// The days each Fargate row plays before the measured day, so that `WarmAgents` `auto` looks
/// at the same hours of as many earlier days as the plugin does after running that long
/// (`AUTO_MEMORY_DAYS`): days drawn from the reference day's model ([`days`]) with these seeds.
const DAYS_BEFORE: std::ops::Range<u64> = 101..101 + AUTO_MEMORY_DAYS as u64;
/// The row of `warm auto spot` on the plugin's first day: `auto` with no earlier days.
const FIRST_DAY: &str = "warm auto spot first day";
/// The seeds of the days `--days N` plays (after days of their own): drawn from the same model,
/// none of them the reference day the rules were chosen on.
const HELD_OUT_FIRST_SEED: u64 = 201;

/// The job-wait goals, on the reference day, in one run.
/// Fargate `warm auto spot`: p50, p95, and its cost against the `cold` row.
const SPOT_P50: u64 = 5;
const SPOT_P95: u64 = 45;
const SPOT_RATIO: f64 = 1.00;
/// Fargate `cold soci`.
const SOCI_P95: u64 = 55;
const SOCI_RATIO: f64 = 1.00;
/// EC2 `warm auto`, and EC2 `defaults`, against the EC2 lower bound.
const EC2_WARM_P95: u64 = 45;
const EC2_WARM_RATIO: f64 = 1.50;
const EC2_P95: u64 = 60;
const EC2_RATIO: f64 = 1.50;

/// One printed row.
#[derive(Debug)]
struct Row {
    setup: String,
    launch_type: &'static str,
    p50: u64,
    p95: u64,
    max: u64,
    cost_usd: f64,
    ratio: f64,
    /// What the ratio is to.
    against: &'static str,
    /// Jobs that waited longer than [`SLOW`], by hour of the day of their arrival.
    slow_by_hour: Vec<usize>,
    notes: String,
    /// Fargate rows: each job's cost by the plugin's cost-per-job rules, and the pools' idle cost.
    per_job: Option<(Vec<f64>, f64)>,
}

/// The command line.
#[derive(Debug)]
struct Args {
    trace: Option<String>,
    json: bool,
    image_mb: u64,
    /// Play this many held-out drawn days instead of the reference day.
    days: Option<u64>,
}

fn args() -> Result<Args, String> {
    let mut out = Args { trace: None, json: false, image_mb: model::IMAGE_MB, days: None };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--bench" => {}
            "--json" => out.json = true,
            "--trace" => out.trace = Some(it.next().ok_or("--trace needs a FILE")?),
            "--image-mb" => {
                let n = it.next().ok_or("--image-mb needs a number")?;
                out.image_mb = n.parse().map_err(|_| format!("--image-mb: not a number: {n}"))?;
            }
            "--days" => {
                let n = it.next().ok_or("--days needs a number")?;
                out.days = Some(n.parse().ok().filter(|n| *n > 0).ok_or(format!("--days: not a count of days: {n}"))?);
            }
            other => return Err(format!("unknown argument {other} (--trace FILE, --image-mb N, --days N, --json)")),
        }
    }
    Ok(out)
}

fn main() {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("job_wait: {e}");
            std::process::exit(2);
        }
    };
    let text = match &args.trace {
        Some(path) => std::fs::read_to_string(path).unwrap_or_else(|e| {
            eprintln!("job_wait: cannot read {path}: {e}");
            std::process::exit(2);
        }),
        None => trace::REFERENCE.to_string(),
    };
    let jobs = trace::parse(&text).unwrap_or_else(|e| {
        eprintln!("job_wait: {e}");
        std::process::exit(2);
    });
    if jobs.is_empty() {
        eprintln!("job_wait: the trace has no jobs");
        std::process::exit(2);
    }
    if let Some(n) = args.days {
        held_out(n, &args);
        return;
    }
    let rows = rows(&jobs, args.image_mb);
    if args.json {
        for r in &rows {
            let line = json!({
                "setup": r.setup,
                "launch_type": r.launch_type,
                "wait_p50_s": r.p50,
                "wait_p95_s": r.p95,
                "wait_max_s": r.max,
                "cost_usd": (r.cost_usd * 100.0).round() / 100.0,
                "cost_ratio": (r.ratio * 1000.0).round() / 1000.0,
            });
            println!("{line}");
        }
        return;
    }
    print_table(&jobs, &args, &rows);
    print_pipelines(&jobs, &rows);
    print_goals(&rows);
}

/// Every setup, played.
fn rows(jobs: &[Job], image_mb: u64) -> Vec<Row> {
    let fargate = |warm: WarmAgents| fargate::Setup {
        reuse_idle: 0,
        max_jobs: 10,
        warm,
        max_agents: FARGATE_MAX_AGENTS,
        image_mb,
        soci: false,
        spot: false,
        floor: 0,
    };
    let spot = fargate::Setup { spot: true, ..fargate(WarmAgents::Auto) };
    let fargate_setups = [
        ("cold", fargate(WarmAgents::Off)),
        ("defaults", fargate(WarmAgents::Off)),
        ("warm auto", fargate(WarmAgents::Auto)),
        ("warm auto spot", spot.clone()),
        (FIRST_DAY, spot.clone()),
        ("warm auto spot night", fargate::Setup { floor: NIGHT_FLOORS[0], ..spot.clone() }),
        ("warm auto spot night 2", fargate::Setup { floor: NIGHT_FLOORS[1], ..spot }),
        ("cold soci", fargate::Setup { soci: true, ..fargate(WarmAgents::Off) }),
    ];
    let mut rows = Vec::new();
    let mut cold_cost = 0.0;
    for (name, setup) in &fargate_setups {
        // The plugin's first day has no earlier days to look back on.
        let before = if *name == FIRST_DAY { Vec::new() } else { days_before() };
        let (all, first, from) = after(&before, jobs);
        let mut out = fargate::play(&all, setup, from);
        out.waits.drain(..first);
        out.job_usd.drain(..first);
        if *name == "cold" {
            cold_cost = out.cost_usd;
        }
        let waits = sorted(&out.waits);
        let spot = if setup.spot {
            format!(
                "; Spot interrupted {} idle agents and {} jobs (rerun on FARGATE)",
                out.interrupted_idle, out.interrupted_jobs
            )
        } else {
            String::new()
        };
        rows.push(Row {
            setup: name.to_string(),
            launch_type: "FARGATE",
            p50: percentile(&waits, 0.5),
            p95: percentile(&waits, 0.95),
            max: waits.last().copied().unwrap_or(0),
            cost_usd: out.cost_usd,
            ratio: out.cost_usd / cold_cost,
            against: "cold",
            slow_by_hour: slow_by_hour(jobs, &out.waits),
            notes: format!(
                "{:.0}% taken by an idle agent; {} cold, {} warm starts; {} keys expired; {:.1} h billed beyond jobs{spot}",
                100.0 * out.served_idle as f64 / jobs.len() as f64,
                out.cold_starts,
                out.warm_starts,
                out.keys_dropped,
                out.overhead_hours,
            ),
            per_job: Some((out.job_usd, out.pool_idle_usd)),
        });
    }
    let bound = ec2::lower_bound_hours(jobs);
    let ec2_setup = |warm: WarmAgents| ec2::Setup {
        scale_out_wait: u64::from(SCALE_OUT_WAIT_SECONDS),
        idle_minutes: EC2_IDLE_MINUTES,
        max: EC2_MAX,
        image_mb,
        stopped: STOPPED_INSTANCES_DEFAULT,
        prepull: true,
        warm,
        max_agents: FARGATE_MAX_AGENTS,
        max_jobs: 10,
    };
    for (name, setup) in [("defaults", ec2_setup(WarmAgents::Off)), ("warm auto", ec2_setup(WarmAgents::Auto))] {
        let out = ec2::play(jobs, &setup);
        let waits = sorted(&out.waits);
        let agents = if setup.warm == WarmAgents::Off {
            String::new()
        } else {
            format!("; {} agents started for jobs, {} warm", out.cold_starts, out.warm_starts)
        };
        rows.push(Row {
            setup: name.to_string(),
            launch_type: "EC2",
            p50: percentile(&waits, 0.5),
            p95: percentile(&waits, 0.95),
            max: waits.last().copied().unwrap_or(0),
            cost_usd: out.cost_usd,
            // Against the bound's price: a stopped pool's volumes count as cost too.
            ratio: out.cost_usd / (bound * model::c5_xlarge_hour()),
            against: "EC2 lower bound",
            slow_by_hour: slow_by_hour(jobs, &out.waits),
            notes: format!(
                "{:.1} {} instance-hours (bound {:.1}); {} launches, {} stopped instances started again; \
                 {:.2} USD of stopped volumes{agents}",
                out.instance_hours,
                ec2::INSTANCE_TYPE,
                bound,
                out.launches,
                out.restarts,
                out.ebs_usd,
            ),
            per_job: None,
        });
    }
    rows
}

fn print_table(jobs: &[Job], args: &Args, rows: &[Row]) {
    let task_hours: f64 = jobs.iter().map(|j| j.duration as f64).sum::<f64>() / 3600.0;
    println!(
        "Job wait on {}: {} jobs, {:.1} task-hours. Start model: GoCD's assignment timer sends create-agent 0 to {} s \
         after a job is scheduled; Fargate cold start {} s (RunTask {} s, provisioning {} s, pull of a {} MB image {} s, {} s \
         with SOCI, agent start {} s); EC2 boot {} s, stopped instance start {} s; pickup by GoCD's get-work loop; \
         Fargate Spot at the price table's discount, {:.0} % of Spot tasks interrupted.",
        args.trace.as_deref().unwrap_or("the reference day (tests/data/ec2_trace.csv)"),
        jobs.len(),
        task_hours,
        model::ASSIGNMENT_TIMER - 1,
        model::fargate_cold(args.image_mb),
        model::RUNTASK,
        model::PROVISION,
        args.image_mb,
        model::pull(args.image_mb),
        model::pull_soci(args.image_mb),
        model::AGENT,
        model::EC2_BOOT,
        model::EC2_RESTART,
        model::SPOT_INTERRUPTED * 100.0,
    );
    println!();
    println!("| setup | launch type | wait p50 | wait p95 | wait max | cost USD | cost ratio | notes |");
    println!("|---|---|---:|---:|---:|---:|---:|---|");
    for r in rows {
        println!(
            "| {} | {} | {} s | {} s | {} s | {:.2} | {:.2}× {} | {} |",
            r.setup, r.launch_type, r.p50, r.p95, r.max, r.cost_usd, r.ratio, r.against, r.notes
        );
    }
    println!();
}

/// Cost per pipeline on the day, by the plugin's cost-per-job rules (`cost::job`: a job pays its
/// agent's task when the agent was started for it, else its own time on a warm or kept agent;
/// idle time is its pool's), for every Fargate setup. Pipelines come from [`trace::pipeline`].
fn print_pipelines(jobs: &[Job], rows: &[Row]) {
    let fargate: Vec<&Row> = rows.iter().filter(|r| r.per_job.is_some() && r.setup != "cold").collect();
    let mut names: Vec<String> = jobs.iter().map(trace::pipeline).collect();
    names.sort();
    names.dedup();
    println!(
        "Cost per pipeline, USD, by the plugin's cost-per-job rules (README \"Cost per job\"). The trace has no pipeline \
         column: each of its commits fans out into jobs of one size, so one pipeline per size stands for them."
    );
    println!();
    let heads: Vec<&str> = fargate.iter().map(|r| r.setup.as_str()).collect();
    println!("| pipeline | jobs | {} |", heads.join(" | "));
    println!("|---|---:|{}", "---:|".repeat(heads.len()));
    for name in &names {
        let n = jobs.iter().filter(|j| trace::pipeline(j) == *name).count();
        let cells: Vec<String> = fargate
            .iter()
            .map(|r| {
                let (per_job, _) = r.per_job.as_ref().expect("a Fargate row");
                let usd: f64 =
                    jobs.iter().zip(per_job).filter(|(j, _)| trace::pipeline(j) == *name).map(|(_, c)| c).sum();
                format!("{usd:.2}")
            })
            .collect();
        println!("| {name} | {n} | {} |", cells.join(" | "));
    }
    let line = |label: &str, f: &dyn Fn(&Row) -> f64| {
        let cells: Vec<String> = fargate.iter().map(|r| format!("{:.2}", f(r))).collect();
        println!("| {label} | | {} |", cells.join(" | "));
    };
    line("warm pools, idle", &|r| r.per_job.as_ref().map_or(0.0, |p| p.1));
    line("jobs and pools", &|r| r.per_job.as_ref().map_or(0.0, |p| p.0.iter().sum::<f64>() + p.1));
    line("billed (the setup's cost)", &|r| r.cost_usd);
    println!();
}

fn print_goals(rows: &[Row]) {
    let find = |launch: &str, setup: &str| rows.iter().find(|r| r.launch_type == launch && r.setup == setup);
    println!("Goals, against this run:");
    let goal = |launch: &str, setup: &str, p50: Option<u64>, p95: u64, ratio: f64| {
        let Some(r) = find(launch, setup) else { return };
        let median = p50.map_or(String::new(), |g| {
            format!("wait p50 {} s (goal ≤ {g} s: {}), ", r.p50, verdict(r.p50 as f64, g as f64, "s"))
        });
        println!(
            "- {} {}: {median}wait p95 {} s (goal ≤ {p95} s: {}), cost {:.2}× {} (goal ≤ {ratio:.2}×: {}).",
            if launch == "EC2" { "EC2" } else { "Fargate" },
            r.setup,
            r.p95,
            verdict(r.p95 as f64, p95 as f64, "s"),
            r.ratio,
            r.against,
            verdict(r.ratio, ratio, "×"),
        );
        let hours: Vec<String> =
            r.slow_by_hour.iter().enumerate().filter(|(_, n)| **n > 0).map(|(h, n)| format!("hour {h}: {n}")).collect();
        let slow = r.slow_by_hour.iter().sum::<usize>();
        // Where the slow jobs are (every job of a cold row waits a cold start: no hour stands out).
        if slow > 0 && !r.setup.starts_with("cold") {
            println!("  Jobs that waited over {} s: {slow} ({}).", SLOW, hours.join(", "));
        }
    };
    goal("FARGATE", "warm auto spot", Some(SPOT_P50), SPOT_P95, SPOT_RATIO);
    goal("FARGATE", "cold soci", None, SOCI_P95, SOCI_RATIO);
    goal("EC2", "warm auto", None, EC2_WARM_P95, EC2_WARM_RATIO);
    goal("EC2", "defaults", None, EC2_P95, EC2_RATIO);
}

/// The wait counted as slow by hour (the Fargate `warm auto spot` p95 goal).
const SLOW: u64 = SPOT_P95;

/// How many jobs waited longer than [`SLOW`], by the hour of the day they arrived in.
fn slow_by_hour(jobs: &[Job], waits: &[u64]) -> Vec<usize> {
    let mut hours = Vec::new();
    for (job, wait) in jobs.iter().zip(waits) {
        let hour = usize::try_from(job.arrival / 3600).expect("an hour");
        if hours.len() <= hour {
            hours.resize(hour + 1, 0);
        }
        hours[hour] += usize::from(*wait > SLOW);
    }
    hours
}

/// "met", or how far off.
fn verdict(measured: f64, goal: f64, unit: &str) -> String {
    if measured <= goal {
        "met".into()
    } else if unit == "s" {
        format!("missed by {:.0} s", measured - goal)
    } else {
        format!("missed by {:.2}{unit}", measured - goal)
    }
}

fn sorted(waits: &[u64]) -> Vec<u64> {
    let mut w = waits.to_vec();
    assert!(w.iter().all(|x| *x != u64::MAX), "every job ran");
    w.sort_unstable();
    w
}

/// The EC2 cost bench's percentile: the nearest rank.
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Drawn days, one after another, each starting [`DAY`] after the one before.
fn drawn(seeds: impl Iterator<Item = u64>) -> Vec<Job> {
    let mut jobs = Vec::new();
    for (n, seed) in seeds.enumerate() {
        let start = n as u64 * DAY;
        jobs.extend(days::day(seed).iter().map(|d| Job {
            arrival: start + d.arrival,
            duration: d.duration,
            cpu: d.cpu,
            memory: d.memory,
        }));
    }
    jobs
}

/// The days every Fargate row plays before its measured day.
fn days_before() -> Vec<Job> {
    drawn(DAYS_BEFORE)
}

/// `before`, then `day` on the day after its last: every job, the measured day's first job's
/// index, and the second the measured day starts.
fn after(before: &[Job], day: &[Job]) -> (Vec<Job>, usize, u64) {
    let from = before.last().map_or(0, |j| (j.arrival / DAY + 1) * DAY);
    let mut all = before.to_vec();
    all.extend(day.iter().map(|j| Job { arrival: from + j.arrival, ..*j }));
    (all, before.len(), from)
}

/// `--days N`: the Fargate `cold` and `warm auto spot` rows (and a night floor) over N days
/// drawn from the reference day's model with seeds the rules were not chosen on, after as many
/// days of their own as `auto` remembers: the waits of every job of the N days, and their cost
/// over the N days.
fn held_out(n: u64, args: &Args) {
    let memory = u64::from(AUTO_MEMORY_DAYS);
    let before = drawn(HELD_OUT_FIRST_SEED..HELD_OUT_FIRST_SEED + memory);
    let measured = drawn(HELD_OUT_FIRST_SEED + memory..HELD_OUT_FIRST_SEED + memory + n);
    let (all, first, from) = after(&before, &measured);
    let setup = |warm: WarmAgents, spot: bool, floor: u32| fargate::Setup {
        reuse_idle: 0,
        max_jobs: 10,
        warm,
        max_agents: FARGATE_MAX_AGENTS,
        image_mb: args.image_mb,
        soci: false,
        spot,
        floor,
    };
    let setups = [
        ("cold", setup(WarmAgents::Off, false, 0)),
        ("warm auto spot", setup(WarmAgents::Auto, true, 0)),
        ("warm auto spot night", setup(WarmAgents::Auto, true, NIGHT_FLOORS[0])),
    ];
    if !args.json {
        println!(
            "Held out: {n} days drawn from the reference day's model (seeds {}..={}), {} jobs, each Fargate setup \
             after the {memory} days before them. Waits of every job of the {n} days; per-day p95 lowest to highest; \
             cost of the {n} days.",
            HELD_OUT_FIRST_SEED + memory,
            HELD_OUT_FIRST_SEED + memory + n - 1,
            measured.len(),
        );
        println!();
        println!("| setup | wait p50 | wait p95 | per-day p95 | wait max | cost USD | cost ratio |");
        println!("|---|---:|---:|---|---:|---:|---:|");
    }
    let mut cold_cost = 0.0;
    for (name, s) in &setups {
        let out = fargate::play(&all, s, from);
        if *name == "cold" {
            cold_cost = out.cost_usd;
        }
        let waits = sorted(&out.waits[first..]);
        let mut per_day: Vec<u64> = (0..n)
            .map(|d| {
                let day: Vec<u64> = all[first..]
                    .iter()
                    .zip(&out.waits[first..])
                    .filter(|(j, _)| (j.arrival - from) / DAY == d)
                    .map(|(_, w)| *w)
                    .collect();
                percentile(&sorted(&day), 0.95)
            })
            .collect();
        per_day.sort_unstable();
        let (p50, p95, max) = (percentile(&waits, 0.5), percentile(&waits, 0.95), *waits.last().unwrap_or(&0));
        let ratio = out.cost_usd / cold_cost;
        if args.json {
            let line = json!({
                "setup": name, "launch_type": "FARGATE", "days": n,
                "wait_p50_s": p50, "wait_p95_s": p95, "wait_max_s": max,
                "day_p95_lowest_s": per_day[0], "day_p95_highest_s": per_day[per_day.len() - 1],
                "cost_usd": (out.cost_usd * 100.0).round() / 100.0,
                "cost_ratio": (ratio * 1000.0).round() / 1000.0,
            });
            println!("{line}");
        } else {
            println!(
                "| {name} | {p50} s | {p95} s | {} to {} s | {max} s | {:.2} | {ratio:.2}× cold |",
                per_day[0],
                per_day[per_day.len() - 1],
                out.cost_usd,
            );
        }
    }
}
