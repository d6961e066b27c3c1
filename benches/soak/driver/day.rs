//! The compressed day: jobs arriving on a day's curve (quiet at the ends, busiest at noon) over
//! the six profile pairs, and the faults' timetable, as fractions of the day:
//!
//! | when | fault |
//! |---|---|
//! | all day | 10% throttling, 2% 5xx on every plugin call; every event twice, out of order; 1% poison messages |
//! | 0.12, 0.24, 0.36 (as many as `kills`, spread over 0.1–0.4) | the plugin killed with SIGKILL, a new one started |
//! | from 0.25, for 0.08 of the day (25 s at least) | the event queue deleted, then created again under the same name |
//! | 0.05 of the day (35 s at least) later, for 0.08 (40 s at least) | the event queue unreachable (every new SQS connection dropped) |
//! | from 0.80, for 0.04 of the day (20 s at least) | account C's credentials refused (`UnrecognizedClientException`, `AuthFailure`) |
//! | 0.20, 0.60, and half a second before each SIGKILL | the task of a running job of `a-cold` stopped by hand (StopTask, as an operator would): GoCD schedules the job again |
//!
//! The plugin's resident memory is read from `/proc/<pid>/status` every second.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::setup::SoakWorld;
use super::SoakOptions;
use crate::world::host::{JobHandle, JobSpec, JobState};
use crate::world::moto::aws_error_text;
use crate::world::proxy::faults::splitmix64;

/// A stretch of the day when a fault was on.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub from: Instant,
    pub to: Instant,
}

/// One resident-memory sample of the plugin.
#[derive(Debug, Clone, Copy)]
pub struct MemorySample {
    pub at: Instant,
    pub pid: u32,
    pub rss_kib: u64,
}

/// What the day did, for the checks.
#[derive(Debug)]
pub struct Outcome {
    pub started: Instant,
    /// When the last job was scheduled.
    pub arrivals_done: Instant,
    /// When every job had completed (or the wait gave up).
    pub all_done: Instant,
    /// Every job and the index of its pair.
    pub jobs: Vec<(JobHandle, usize)>,
    /// When each SIGKILL happened, with the jobs (waiting, running, completed) then.
    pub kills: Vec<(Instant, (usize, usize, usize))>,
    /// Tasks stopped by hand mid-job: when, the agent, and the job.
    pub hand_stops: Vec<HandStop>,
    pub queue_deleted: Option<Window>,
    pub queue_unreachable: Option<Window>,
    pub refused: Option<Window>,
    /// Whether the recreated queue has the URL the profile names.
    pub queue_same_url: bool,
    pub memory: Vec<MemorySample>,
    /// Every job completed in time.
    pub completed: bool,
}

/// A task stopped by hand while its agent ran a job.
#[derive(Debug, Clone)]
pub struct HandStop {
    pub at: Instant,
    pub agent_id: String,
    pub job: JobHandle,
}

/// The pair whose running jobs' tasks are stopped by hand: every task there is its job's own.
const HAND_STOP_PAIR: &str = "a-cold";

/// Draws in [0, 1) from a seed.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> f64 {
        self.0 = splitmix64(self.0);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// When each job arrives, in seconds from the start: a day's curve over `day` seconds.
fn arrivals(jobs: usize, day: f64) -> Vec<f64> {
    let slots = (day.ceil() as usize).max(10);
    let weight = |s: usize| 0.3 + (std::f64::consts::PI * (s as f64 + 0.5) / slots as f64).sin().powi(2);
    let total: f64 = (0..slots).map(weight).sum();
    let (mut times, mut owed) = (Vec::with_capacity(jobs), 0.0);
    for s in 0..slots {
        owed += jobs as f64 * weight(s) / total;
        let here = (owed.round() as usize).saturating_sub(times.len()).min(jobs - times.len());
        for k in 0..here {
            times.push((s as f64 + k as f64 / here as f64) * day / slots as f64);
        }
    }
    while times.len() < jobs {
        times.push(day);
    }
    times
}

/// Reads VmRSS of a process, in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The fractions of the day at which the plugin is killed.
fn kill_points(kills: usize) -> Vec<f64> {
    (0..kills).map(|i| 0.1 + 0.3 * (i as f64 + 0.5) / kills as f64).collect()
}

/// Plays the day and waits for every job to complete.
pub async fn play(world: &SoakWorld, options: &SoakOptions) -> Outcome {
    let host = &world.host;
    let day = options.day().as_secs_f64();
    let times = arrivals(options.jobs, day);
    let mut draws = Draws(options.seed ^ 0xda7);
    let shares: Vec<u32> = world.pairs.iter().map(|p| p.share).collect();
    let total_share: u32 = shares.iter().sum();
    let started = Instant::now();
    let at = |fraction: f64| started + Duration::from_secs_f64(day * fraction);
    let mut kills_due: Vec<Instant> = kill_points(options.kills).into_iter().map(at).collect();
    let before_kill = Duration::from_millis(500);
    let mut stops_due: Vec<Instant> =
        [0.2, 0.6].into_iter().map(at).chain(kills_due.iter().map(|k| *k - before_kill)).collect();
    stops_due.sort();
    let mut out = Outcome {
        started,
        arrivals_done: started,
        all_done: started,
        jobs: Vec::with_capacity(options.jobs),
        kills: Vec::new(),
        hand_stops: Vec::new(),
        queue_deleted: None,
        queue_unreachable: None,
        refused: None,
        queue_same_url: true,
        memory: Vec::new(),
        completed: false,
    };
    // Long enough for the plugin to meet each fault: its long poll waits 20 s and it pauses 15 s
    // after a failed read; a short day stretches past its last job for them.
    let lasting = |share: f64, least: u64| Duration::from_secs_f64(day * share).max(Duration::from_secs(least));
    // Between the two queue faults, time for a read to find the queue back (a 15 s pause after
    // the failed read, then a long poll).
    let delete_at = at(0.25);
    let recreate_at = delete_at + lasting(0.08, 25);
    let unreachable_at = recreate_at + lasting(0.05, 35);
    let reachable_at = unreachable_at + lasting(0.08, 40);
    // The refusal is an evening hour: the refused account's jobs pile up at the head of GoCD's
    // queue, and GoCD asks every idle agent about each older waiting job before its own (README
    // "Soak": three hours at 0.70 piled 400 and more, past what the serial asks could keep up with).
    let refuse_at = at(0.80);
    let accept_at = refuse_at + lasting(0.04, 20);
    let mut next_sample = started;
    let mut next_progress = started;
    let mut next = 0;
    let deadline = started + Duration::from_secs_f64(day) + Duration::from_secs(600);
    loop {
        let now = Instant::now();
        let elapsed = (now - started).as_secs_f64();
        while next < times.len() && times[next] <= elapsed {
            let mut pick = (draws.next() * f64::from(total_share)) as u32;
            let pair = shares
                .iter()
                .position(|s| {
                    pick < *s || {
                        pick -= s;
                        false
                    }
                })
                .unwrap_or(0);
            let duration = Duration::from_millis(500 + (draws.next() * 2500.0) as u64);
            let h = host.add_job(JobSpec::new(world.pairs[pair].id, duration)).await;
            out.jobs.push((h, pair));
            next += 1;
            if next == times.len() {
                out.arrivals_done = Instant::now();
            }
        }
        if stops_due.first().is_some_and(|t| now >= *t) {
            if let Some(stop) = stop_a_running_task(world, &out.jobs).await {
                stops_due.remove(0);
                eprintln!("soak: the task of agent {} stopped by hand mid-job at {elapsed:.1} s", stop.agent_id);
                out.hand_stops.push(stop);
            }
        }
        if kills_due.first().is_some_and(|t| now >= *t) {
            kills_due.remove(0);
            let states = host.with_state(job_states);
            host.kill().await;
            out.kills.push((Instant::now(), states));
            tokio::time::sleep(Duration::from_millis(100 + (draws.next() * 700.0) as u64)).await;
            host.restart().await;
            eprintln!(
                "soak: SIGKILL {} at {:.0} s (waiting/running/completed {states:?}), restarted",
                out.kills.len(),
                elapsed
            );
        }
        if out.queue_deleted.is_none() && now >= delete_at {
            delete_queue(world).await;
            out.queue_deleted = Some(Window { from: now, to: now });
            eprintln!("soak: event queue deleted at {elapsed:.0} s");
        }
        if let Some(w) = out.queue_deleted.as_mut().filter(|w| w.to == w.from && now >= recreate_at) {
            let url = crate::world::eventbridge::create_queue(&world.queue_cfg, "soak-events").await;
            out.queue_same_url = url == world.queue_url;
            w.to = Instant::now();
            eprintln!("soak: event queue created again at {elapsed:.0} s (same URL: {})", out.queue_same_url);
        }
        if out.queue_unreachable.is_none() && now >= unreachable_at {
            world.queue_down.store(true, Ordering::SeqCst);
            out.queue_unreachable = Some(Window { from: now, to: now });
            eprintln!("soak: event queue unreachable from {elapsed:.0} s");
        }
        if let Some(w) = out.queue_unreachable.as_mut().filter(|w| w.to == w.from && now >= reachable_at) {
            world.queue_down.store(false, Ordering::SeqCst);
            w.to = now;
            eprintln!("soak: event queue reachable again at {elapsed:.0} s");
        }
        if out.refused.is_none() && now >= refuse_at {
            world.refusing.store(true, Ordering::SeqCst);
            out.refused = Some(Window { from: now, to: now });
            eprintln!("soak: account {}'s credentials refused from {elapsed:.0} s", super::setup::REFUSED_ACCOUNT);
        }
        if let Some(w) = out.refused.as_mut().filter(|w| w.to == w.from && now >= accept_at) {
            world.refusing.store(false, Ordering::SeqCst);
            w.to = now;
            eprintln!("soak: account {}'s credentials accepted again at {elapsed:.0} s", super::setup::REFUSED_ACCOUNT);
        }
        if now >= next_sample {
            next_sample = now + Duration::from_secs(1);
            if let Some(pid) = host.plugin_pid().await {
                if let Some(rss_kib) = rss_kib(pid) {
                    out.memory.push(MemorySample { at: now, pid, rss_kib });
                }
            }
        }
        if now >= next_progress {
            next_progress = now + Duration::from_secs(15);
            let (w, r, c) = host.with_state(job_states);
            eprintln!(
                "soak: {elapsed:.0} s: {next}/{} scheduled, {w} waiting, {r} running, {c} completed, {} AWS calls",
                times.len(),
                world.w.proxy.total()
            );
        }
        let done = next == times.len() && host.with_state(|s| s.all_completed());
        let closed = |w: Option<Window>| w.is_some_and(|w| w.to != w.from);
        if done && kills_due.is_empty() && stops_due.is_empty() && closed(out.refused) && closed(out.queue_unreachable)
        {
            out.completed = true;
            break;
        }
        if now > deadline {
            eprintln!("soak: gave up waiting for every job at {elapsed:.0} s\n{}", host.with_state(|s| s.summary()));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    out.all_done = Instant::now();
    out
}

/// Stops the task of one running job of [`HAND_STOP_PAIR`] whose agent is registered and whose
/// task the simulator has seen, as an operator would; `None` when no such job runs now (tried
/// again at the next turn).
async fn stop_a_running_task(world: &SoakWorld, jobs: &[(JobHandle, usize)]) -> Option<HandStop> {
    let pair = world.pairs.iter().position(|p| p.id == HAND_STOP_PAIR)?;
    let running: Vec<(JobHandle, i64, String)> = world.host.with_state(|s| {
        jobs.iter()
            .filter(|(_, p)| *p == pair)
            .filter_map(|(h, _)| match &s.job(*h).state {
                JobState::Running { agent_id } => Some((*h, s.job(*h).identifier.job_id, agent_id.clone())),
                _ => None,
            })
            .collect()
    });
    for (job, job_id, agent_id) in running {
        let live = world
            .sim
            .with_state(|s| s.tasks.values().any(|t| !t.stopped && t.job_id.as_deref() == Some(&job_id.to_string())));
        if live {
            // The stop counts from when it is asked: the job may end, and its agent go, while
            // StopTask is on its way.
            let at = Instant::now();
            world.sim.stop_task_by_hand(job_id, "stopped by hand mid-job (soak)").await;
            return Some(HandStop { at, agent_id, job });
        }
    }
    None
}

async fn delete_queue(world: &SoakWorld) {
    let sqs = aws_sdk_sqs::Client::new(&world.queue_cfg);
    if let Err(e) = sqs.delete_queue().queue_url(&world.queue_url).send().await {
        eprintln!("soak: DeleteQueue failed: {}", aws_error_text(&e));
    }
}

/// Jobs by state: (waiting, running, completed).
pub fn job_states(s: &crate::world::host::HostState) -> (usize, usize, usize) {
    (
        s.count_jobs(|j| *j == JobState::Waiting),
        s.count_jobs(|j| matches!(j, JobState::Running { .. })),
        s.count_jobs(|j| matches!(j, JobState::Completed { .. })),
    )
}
