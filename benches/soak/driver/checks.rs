//! The soak's invariants, checked once the day is over, and its summary: jobs, faults injected by
//! kind, restarts, each invariant with its figure, the memory slope, should-assign-work p99 at
//! the start and the end, and AWS calls per job against the budget (README "Soak").

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::day::{Outcome, Window};
use super::setup::{Kept, SoakWorld, POISON_SHARE, REFUSED_ACCOUNT, SERVER_ERRORS, THROTTLE};
use super::SoakOptions;
use crate::world::eventbridge;
use crate::world::host::JobState;
use crate::world::moto;
use crate::world::SecretScanner;

/// The AWS calls one job may cost, every call the plugin made counted at the proxy (retries,
/// reads of server-ping, the event queue's polls, EC2 included), divided by the jobs (README
/// "Soak", where the budget is accounted for).
pub const CALLS_PER_JOB_BUDGET: f64 = 10.0;
/// Resident memory may grow by at most this share of itself per simulated hour after warm-up.
pub const MEMORY_SLOPE_LIMIT_PCT_PER_HOUR: f64 = 3.0;
/// should-assign-work's p99 at the end may be at most this many times the start's ...
pub const P99_RATIO_LIMIT: f64 = 1.5;
/// ... or this much above it, whichever is more (a few milliseconds are noise on 2 cores).
pub const P99_SLACK: Duration = Duration::from_millis(20);
/// How soon after its task is stopped mid-job an agent is to be deleted from GoCD.
const DELETED_WITHIN: Duration = Duration::from_secs(10);
/// How long the kept agents and instances get to settle to their bounds after the last job.
const SETTLE: Duration = Duration::from_secs(150);

/// One invariant: its name, the figure measured, and whether it held.
#[derive(Debug, Clone)]
pub struct Invariant {
    pub name: &'static str,
    pub figure: String,
    pub held: bool,
}

/// What the soak prints.
#[derive(Debug, Default)]
pub struct Summary {
    pub lines: Vec<String>,
    pub invariants: Vec<Invariant>,
}

impl Summary {
    fn line(&mut self, line: String) {
        self.lines.push(line);
    }

    fn check(&mut self, name: &'static str, held: bool, figure: String) {
        self.invariants.push(Invariant { name, figure, held });
    }

    /// Every invariant held.
    pub fn all_held(&self) -> bool {
        self.invariants.iter().all(|i| i.held)
    }

    /// The summary as text (Markdown-friendly: a list, then a table of invariants).
    pub fn render(&self) -> String {
        let mut s = String::new();
        for l in &self.lines {
            s.push_str(&format!("- {l}\n"));
        }
        s.push_str("\n| invariant | measured | held |\n|---|---|---|\n");
        for i in &self.invariants {
            s.push_str(&format!("| {} | {} | {} |\n", i.name, i.figure, if i.held { "yes" } else { "**no**" }));
        }
        s
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn p99(mut v: Vec<Duration>) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    v[((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1]
}

fn median(mut v: Vec<Duration>) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    v[v.len() / 2]
}

/// Least-squares slope of (seconds, KiB): KiB per second, and the mean.
fn slope(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    if n < 3.0 {
        return (0.0, points.first().map_or(0.0, |p| p.1));
    }
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    (if sxx > 0.0 { sxy / sxx } else { 0.0 }, my)
}

/// Checks the invariants and ends the run (simulators stopped, the plugin shut down).
pub async fn check(world: SoakWorld, out: Outcome, options: &SoakOptions) -> Summary {
    let mut sum = Summary::default();
    let host = &world.host;
    let day = options.day();
    let n = out.jobs.len();
    sum.line(format!(
        "{n} jobs over a compressed day of {} (24 simulated hours; one simulated hour = {}), every job done and every fault over after {}; 3 accounts, 6 profile pairs ({})",
        secs(day),
        secs(day / 24),
        secs(out.all_done - out.started),
        world.pairs.iter().map(|p| p.id).collect::<Vec<_>>().join(", ")
    ));
    let mut per_pair = vec![0usize; world.pairs.len()];
    out.jobs.iter().for_each(|(_, p)| per_pair[*p] += 1);
    sum.line(format!(
        "jobs per pair: {}",
        world.pairs.iter().zip(&per_pair).map(|(p, k)| format!("{} {k}", p.id)).collect::<Vec<_>>().join(", ")
    ));

    // 1. Every job got exactly one agent and ran once.
    let (completed, rescheduled, rejections, failed_creates) = host.with_state(|s| {
        (
            s.count_jobs(|j| matches!(j, JobState::Completed { .. })),
            s.jobs.iter().map(|j| j.previous_job_ids.len()).sum::<usize>(),
            s.rejections.len(),
            s.jobs.iter().map(|j| j.create_agent_failed as usize).sum::<usize>(),
        )
    });
    // A warm agent carries the tag of the job whose key started it, and any job may take it:
    // two tasks of one job tag there are a warm agent and the job's own, not two agents for a job.
    let warm_fleets: Vec<usize> = world
        .pairs
        .iter()
        .zip(&world.fleet_of)
        .filter(|(p, _)| matches!(p.kept, Kept::Warm(_)))
        .map(|(_, f)| *f)
        .collect();
    let (doubles, warm_surplus): (Vec<(String, usize)>, usize) = world.sim.with_state(|s| {
        let doubles = s
            .tasks_per_job
            .iter()
            .filter(|(_, arns)| arns.iter().filter(|a| !warm_fleets.contains(&s.tasks[*a].fleet)).count() > 1)
            .map(|(j, arns)| (j.clone(), arns.len()))
            .collect();
        let surplus = s
            .tasks
            .values()
            .filter(|t| t.stopped_reason.as_deref().is_some_and(|r| r.contains("beyond WarmAgents")))
            .count();
        (doubles, surplus)
    });
    let tasks_per_fleet: Vec<usize> = world
        .sim
        .with_state(|s| (0..world.w.fleets.len()).map(|f| s.tasks.values().filter(|t| t.fleet == f).count()).collect());
    sum.line(format!(
        "tasks started per pair: {}",
        world
            .pairs
            .iter()
            .zip(&world.fleet_of)
            .zip(&per_pair)
            .map(|((p, f), jobs)| format!("{} {} for {jobs} jobs", p.id, tasks_per_fleet[*f]))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let double_detail: Vec<String> = world.sim.with_state(|s| {
        doubles
            .iter()
            .flat_map(|(job, _)| s.tasks_per_job[job].iter().map(|arn| &s.tasks[arn]))
            .map(|t| {
                format!(
                    "job {} fleet {} agent {:?} registered {:?} stopped {:?}",
                    t.job_id.as_deref().unwrap_or("?"),
                    world.w.fleets[t.fleet].label,
                    t.agent_id,
                    t.registration,
                    t.stopped_reason
                )
            })
            .collect()
    });
    // A job is rescheduled when the plugin deleted its agent while it ran the job: name the
    // agent, its task and the reason the task was stopped, so a failed run says why.
    let deleted: Vec<(i64, String, f64)> = host.with_state(|s| {
        s.jobs
            .iter()
            .flat_map(|j| {
                j.deleted_while_running
                    .iter()
                    .map(|(a, at)| (j.identifier.job_id, a.clone(), at.duration_since(out.started).as_secs_f64()))
            })
            .collect()
    });
    let reschedule_detail: Vec<String> = world.sim.with_state(|s| {
        deleted
            .iter()
            .map(|(job, agent, at)| {
                let tasks: Vec<String> = s
                    .tasks
                    .values()
                    .filter(|t| t.agent_id.as_deref() == Some(agent.as_str()))
                    .map(|t| {
                        format!(
                            "task of job tag {} in fleet {}, status {}, stopped {:?}",
                            t.job_id.as_deref().unwrap_or("?"),
                            world.w.fleets[t.fleet].label,
                            t.last_status,
                            t.stopped_reason
                        )
                    })
                    .collect();
                format!("job now {job}: agent {agent} deleted while it ran the job at {at:.1} s; {}", tasks.join("; "))
            })
            .collect()
    });
    if !reschedule_detail.is_empty() {
        eprintln!("soak: jobs rescheduled:\n  {}", reschedule_detail.join("\n  "));
    }
    if !double_detail.is_empty() {
        eprintln!("soak: jobs with two tasks:\n  {}", double_detail.join("\n  "));
    }
    // The jobs whose tasks were stopped by hand are GoCD's to schedule again, once each: they
    // ran twice, in two tasks, by design.
    let stopped_by_hand = out.hand_stops.len();
    let hand_job_ids: Vec<String> = host.with_state(|s| {
        out.hand_stops.iter().flat_map(|h| s.job(h.job).previous_job_ids.iter().map(|id| id.to_string())).collect()
    });
    let doubles: Vec<(String, usize)> = doubles.into_iter().filter(|(j, _)| !hand_job_ids.contains(j)).collect();
    // Rescheduled otherwise: a job whose task nobody stopped by hand.
    let rescheduled_otherwise = host.with_state(|s| {
        s.jobs
            .iter()
            .filter(|j| !j.previous_job_ids.is_empty() && !out.hand_stops.iter().any(|h| h.job == j.handle))
            .count()
    });
    sum.check(
        "every job got exactly one agent and ran once",
        out.completed && completed == n && rescheduled_otherwise == 0 && doubles.is_empty() && rejections == 0,
        format!(
            "{completed}/{n} completed, {rescheduled} rescheduled ({rescheduled_otherwise} but for the {stopped_by_hand} tasks stopped by hand mid-job; a job that ended first is not), {} jobs with two tasks, {rejections} registrations refused ({warm_surplus} idle agents retired from the warm pool beyond WarmAgents)",
            doubles.len()
        ),
    );

    // 2. No job lost across the restarts.
    let kills: Vec<String> = out
        .kills
        .iter()
        .map(|(at, (w, r, c))| format!("{:.0} s: {w}/{r}/{c}", (*at - out.started).as_secs_f64()))
        .collect();
    sum.check(
        "no job lost across the restarts",
        out.completed && completed == n && host.with_state(|s| s.generation) == 1 + out.kills.len() as u64,
        format!(
            "{} SIGKILLs (waiting/running/completed then: {}), {} plugin processes, every job of every one completed; {failed_creates} create-agent calls unanswered or failed, re-sent by GoCD",
            out.kills.len(),
            kills.join("; "),
            host.with_state(|s| s.generation)
        ),
    );

    // 2b. Each agent acted on once: one plugin process names an agent in one delete-agents call
    // at most, whichever of job-completion, server-ping or a task event saw it first.
    let (twice, delete_calls, named) = host.with_state(|s| {
        (
            s.agents_deleted_twice(),
            s.delete_calls.len(),
            s.delete_calls.iter().map(|c| c.agent_ids.len()).sum::<usize>(),
        )
    });
    if !twice.is_empty() {
        eprintln!("soak: agents named in two delete-agents calls by one process: {twice:?}");
    }
    sum.check(
        "no agent named in two delete-agents calls by one process",
        twice.is_empty(),
        format!("{delete_calls} delete-agents calls naming {named} agents; {} named twice by one process", twice.len()),
    );

    // 2c. The agent of a task stopped mid-job deleted within [`DELETED_WITHIN`] of the stop, by
    // whichever process runs then (one stop is made just before a SIGKILL).
    let late: Vec<String> = host.with_state(|s| {
        out.hand_stops
            .iter()
            .filter_map(|h| {
                let deleted = s.delete_calls.iter().find(|c| c.at >= h.at && c.agent_ids.contains(&h.agent_id));
                match deleted.map(|c| c.at - h.at) {
                    Some(after) if after <= DELETED_WITHIN => None,
                    Some(after) => Some(format!("{} after {}", h.agent_id, secs(after))),
                    None => Some(format!("{} never", h.agent_id)),
                }
            })
            .collect()
    });
    let slowest = host.with_state(|s| {
        out.hand_stops
            .iter()
            .filter_map(|h| {
                s.delete_calls.iter().find(|c| c.at >= h.at && c.agent_ids.contains(&h.agent_id)).map(|c| c.at - h.at)
            })
            .max()
            .unwrap_or_default()
    });
    sum.check(
        "the agent of a task stopped mid-job deleted within 10 s",
        stopped_by_hand > 0 && late.is_empty(),
        format!(
            "{stopped_by_hand} tasks stopped by hand mid-job ({} just before a SIGKILL); slowest deletion {} after the stop; late: {late:?}",
            out.kills.len(),
            secs(slowest)
        ),
    );

    // 3. Nothing left beyond the kept ones (tasks, instances, task definitions).
    let leftover = settle(&world).await;
    sum.check("no task, instance or task definition left beyond the kept ones", leftover.0, leftover.1);

    // 4. Poison messages deleted, the queue drained.
    let base = world.queue_cfg.clone();
    let mut depth = eventbridge::queued(&base, &world.queue_url).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while depth > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        depth = eventbridge::queued(&base, &world.queue_url).await;
    }
    let (events, copies, out_of_order, poison, bridge_errors) =
        world.bridge.with_state(|s| (s.total() as u64, s.copies, s.out_of_order, s.poison.clone(), s.errors.len()));
    let poisoned: u64 = poison.values().sum();
    let counts = world.w.proxy.counts();
    let count = |k: &str| counts.get(k).copied().unwrap_or(0);
    sum.check(
        "poison messages deleted, not redelivered forever",
        depth == 0 && poisoned > 0,
        format!(
            "{poisoned} poison messages sent ({poison:?}) among {events} event messages; queue depth at the end {depth}; {} ReceiveMessage, {} DeleteMessageBatch calls",
            count("sqs:ReceiveMessage"),
            count("sqs:DeleteMessageBatch")
        ),
    );

    // 5. The queue's fallback to polling and back, told in server health.
    // Each time, by each profile reading the queue: counted in the plugin's log, where every
    // health event is also written (server health lists a repeated text once).
    let readers = world.pairs.iter().filter(|p| p.account == moto::BASE_ACCOUNT).count();
    let (unread, read_again, in_health) = host.with_state(|s| {
        let told = |what: &str| s.stderr.lines().filter(|l| l.contains("cluster event") && l.contains(what)).count();
        (
            told("could not be read"),
            told("is read again"),
            s.health_history.iter().any(|m| m.message.contains("could not be read"))
                && s.health_history.iter().any(|m| m.message.contains("is read again")),
        )
    });
    sum.check(
        "the event queue's loss and return told in server health",
        unread >= 2 * readers && read_again >= 2 * readers && in_health && out.queue_same_url,
        format!(
            "for the queue deleted, then unreachable: {unread} warnings that it could not be read and {read_again} that it is read again, over {readers} profiles reading it"
        ),
    );

    // 6. One account's credentials refused: the refusal told, the others do not slow down.
    sum.invariants.push(refused_account(&world, &out));

    // 7. Resident memory flat after warm-up.
    sum.invariants.push(memory(&out, day));

    // 8. should-assign-work p99 the same at the end as at the start.
    let latencies: Vec<(Instant, Duration)> = host.with_state(|s| {
        s.assign_latencies.iter().filter(|(at, _)| *at >= out.started && *at <= out.arrivals_done).copied().collect()
    });
    let fifth = (latencies.len() / 5).max(1);
    let start = p99(latencies.iter().take(fifth).map(|l| l.1).collect());
    let end = p99(latencies.iter().rev().take(fifth).map(|l| l.1).collect());
    let limit = (start.mul_f64(P99_RATIO_LIMIT)).max(start + P99_SLACK);
    sum.check(
        "should-assign-work p99 the same at the end as at the start",
        latencies.len() >= 10 && end <= limit,
        format!(
            "p99 {:.1} ms over the first {fifth} calls, {:.1} ms over the last {fifth} (limit {:.1} ms; {} calls in all)",
            start.as_secs_f64() * 1e3,
            end.as_secs_f64() * 1e3,
            limit.as_secs_f64() * 1e3,
            latencies.len()
        ),
    );

    // 9. AWS calls per job within the budget.
    let total = world.w.proxy.total();
    let per_job = total as f64 / n.max(1) as f64;
    let mut by_service: BTreeMap<String, u64> = BTreeMap::new();
    for (k, v) in &counts {
        *by_service.entry(k.split(':').next().unwrap_or("?").to_string()).or_default() += v;
    }
    sum.check(
        "AWS calls per job within the budget",
        per_job <= CALLS_PER_JOB_BUDGET,
        format!(
            "{per_job:.2} calls per job (budget {CALLS_PER_JOB_BUDGET}): {total} calls ({by_service:?}), RunTask {}, StartTask {}, StopTask {}, ListTasks {}, DescribeTasks {}, RunInstances {}",
            count("ecs:RunTask"),
            count("ecs:StartTask"),
            count("ecs:StopTask"),
            count("ecs:ListTasks"),
            count("ecs:DescribeTasks"),
            count("ec2:RunInstances")
        ),
    );

    // The faults, by kind.
    let injected = world.faults.counts();
    let log = world.w.proxy.log();
    let by_rule = |rule: &str| log.iter().filter(|r| r.rule.as_deref() == Some(rule)).count();
    sum.line(format!(
        "faults injected: {} throttled and {} 5xx of {} calls ({:.0}% and {:.0}% asked); {} calls refused for account {REFUSED_ACCOUNT}'s credentials; {} SQS connections dropped while the queue was unreachable; the queue deleted for {} and unreachable for {}; {} SIGKILLs; {events} event messages of which {copies} second copies and {out_of_order} sent after a later event of their task; {poisoned} poison messages ({:.1}% of the queue's messages, {:.0}% asked); {bridge_errors} deliveries lost while the queue was gone",
        injected.throttled,
        injected.server_errors,
        injected.calls,
        THROTTLE * 100.0,
        SERVER_ERRORS * 100.0,
        by_rule("credentials-refused"),
        by_rule("queue-unreachable"),
        out.queue_deleted.map_or("-".into(), |w| secs(w.to - w.from)),
        out.queue_unreachable.map_or("-".into(), |w| secs(w.to - w.from)),
        out.kills.len(),
        100.0 * poisoned as f64 / (events + poisoned).max(1) as f64,
        POISON_SHARE * 100.0,
    ));

    // The end: everything operators read scanned for secrets, a clean shutdown.
    host.pause_pings(true);
    if let Some(path) = std::env::var_os("SOAK_PLUGIN_LOG") {
        let _ = std::fs::write(path, host.stderr_text());
    }
    let scanner = SecretScanner::from_world(host, Some(&world.w.proxy));
    scanner.assert_host_clean(host);
    let SoakWorld { w, host, sim, ec2, bridge, .. } = world;
    drop(bridge);
    drop(ec2);
    drop(sim);
    let shutdown = host.try_shutdown().await;
    sum.check(
        "protocol clean and a clean shutdown",
        shutdown.is_ok(),
        match &shutdown {
            Ok(s) => format!("exit {s}, no protocol violation, {} secrets scanned for", scanner.len()),
            Err(problems) => problems.join("; "),
        },
    );
    let broken = w.proxy.aws_refusals().len();
    sum.check("no call broke a rule of real AWS", broken == 0, format!("{broken} refused by the strict rules"));
    sum
}

/// Waits (bounded) until each pair's live tasks are within what it keeps, no EC2 instance is
/// left without tasks, and each account's active task definitions are one per elastic profile.
async fn settle(world: &SoakWorld) -> (bool, String) {
    let started = Instant::now();
    loop {
        let mut over = Vec::new();
        let mut figures = Vec::new();
        let mut ec2_live = 0;
        for (pair, fleet) in world.pairs.iter().zip(&world.fleet_of) {
            let f = &world.w.fleets[*fleet];
            let live = moto::live_tasks(&f.config, &f.cluster).await.len();
            let kept = match pair.kept {
                Kept::Nothing => 0,
                Kept::Warm(n) | Kept::Reuse(n) => n,
            };
            if pair.ec2 {
                ec2_live += live;
            }
            figures.push(format!("{} {live}/{kept}", pair.id));
            if live > kept {
                over.push(format!("{}: {live} live tasks, keeps {kept}", pair.id));
            }
        }
        let instances = world.ec2.with_state(|s| s.alive().len());
        if instances > ec2_live.div_ceil(4) {
            over.push(format!("{instances} EC2 instances alive for {ec2_live} EC2 tasks"));
        }
        let mut definitions = Vec::new();
        for account in [moto::BASE_ACCOUNT, "222222222222", REFUSED_ACCOUNT] {
            let Some(i) = world.pairs.iter().position(|p| p.account == account) else { continue };
            let cfg = &world.w.fleets[world.fleet_of[i]].config;
            let profiles = world.pairs.iter().filter(|p| p.account == account).count();
            let active = aws_sdk_ecs::Client::new(cfg)
                .list_task_definitions()
                .status(aws_sdk_ecs::types::TaskDefinitionStatus::Active)
                .send()
                .await
                .map(|o| o.task_definition_arns().len())
                .unwrap_or(usize::MAX);
            definitions.push(format!("{account} {active}/{profiles}"));
            if active > profiles {
                over.push(format!(
                    "account {account}: {active} active task definitions for {profiles} elastic profiles"
                ));
            }
        }
        let figure = format!(
            "after {}: live tasks/kept {}; EC2 instances alive {instances} for {ec2_live} EC2 tasks; active task definitions/elastic profiles {}",
            secs(started.elapsed()),
            figures.join(", "),
            definitions.join(", ")
        );
        if over.is_empty() {
            return (true, figure);
        }
        if started.elapsed() > SETTLE {
            return (false, format!("{figure}; over: {}", over.join("; ")));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The refusal told: in server health, naming a cluster of that account, and in the console of
/// each of its jobs whose create-agent the plugin answered with an error while it lasted (a job a
/// kept agent took, whose task was already on its way, or that waited for `MaxAgents`, met no
/// refusal: on a machine too busy to keep pace with the day, that can be every one). The other
/// accounts' jobs wait no longer during the refusal than in as long a stretch before it.
fn refused_account(world: &SoakWorld, out: &Outcome) -> super::checks::Invariant {
    let name = "a refused account's refusal told, the others do not slow down";
    let Some(Window { from, to }) = out.refused else {
        return Invariant { name, figure: "never refused".into(), held: false };
    };
    let before = from - (to - from);
    let about_credentials =
        |text: &str| ["security token", "credentials", "UnrecognizedClient"].iter().any(|n| text.contains(n));
    let clusters: Vec<String> = (0..world.pairs.len())
        .filter(|p| world.pairs[*p].account == REFUSED_ACCOUNT)
        .map(|p| format!("ECS cluster {} ", world.w.fleets[world.fleet_of[p]].cluster))
        .collect();
    let (mut waiting, mut met, mut told, mut health) = (0, 0, 0, false);
    let (mut waits_during, mut waits_before) = (Vec::new(), Vec::new());
    world.host.with_state(|s| {
        health = s
            .health_history
            .iter()
            .any(|m| about_credentials(&m.message) && clusters.iter().any(|c| m.message.contains(c.as_str())));
        for (h, pair) in &out.jobs {
            let job = s.job(*h);
            let (added, started) = (job.added_at, job.started_at);
            if world.pairs[*pair].account == REFUSED_ACCOUNT {
                waiting += usize::from(added < to && started.is_none_or(|t| t > from));
                if job.create_agent_errors.iter().any(|t| (from..=to).contains(t)) {
                    met += 1;
                    told += usize::from(s.console.iter().any(|c| c.job == Some(*h) && about_credentials(&c.text)));
                }
            } else {
                let wait = started.map(|t| t - added).unwrap_or_default();
                if added >= from && added < to {
                    waits_during.push(wait);
                } else if added >= before && added < from {
                    waits_before.push(wait);
                }
            }
        }
    });
    let (during, prior) = (median(waits_during.clone()), median(waits_before.clone()));
    let held = health && told == met && during <= prior * 2 + Duration::from_secs(2);
    Invariant {
        name,
        figure: format!(
            "during the {} refusal of account {REFUSED_ACCOUNT}: server health {} it; {told} of the {met} jobs whose create-agent failed then say why in their console ({waiting} of the account's jobs waited through it); the other accounts' median wait {:.1} s during it ({} jobs), {:.1} s before it ({} jobs)",
            secs(to - from),
            if health { "told" } else { "never told" },
            during.as_secs_f64(),
            waits_during.len(),
            prior.as_secs_f64(),
            waits_before.len()
        ),
        held,
    }
}

/// The last plugin process's resident memory after warm-up: its least-squares slope, as a share
/// of its mean per simulated hour.
fn memory(out: &Outcome, day: Duration) -> Invariant {
    let name = "resident memory flat after warm-up";
    let Some(last) = out.memory.last() else {
        return Invariant { name, figure: "no sample".into(), held: false };
    };
    let last_kill = out.kills.last().map_or(out.started, |k| k.0);
    let warm = (last_kill + day / 10).max(out.started + day.mul_f64(0.4));
    let points: Vec<(f64, f64)> = out
        .memory
        .iter()
        .filter(|m| m.pid == last.pid && m.at >= warm && m.at <= out.all_done)
        .map(|m| ((m.at - out.started).as_secs_f64(), m.rss_kib as f64))
        .collect();
    let (kib_per_sec, mean) = slope(&points);
    let sim_hour = day.as_secs_f64() / 24.0;
    let pct_per_hour = if mean > 0.0 { 100.0 * kib_per_sec * sim_hour / mean } else { f64::INFINITY };
    let (lo, hi) = points.iter().fold((f64::MAX, 0.0f64), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    Invariant {
        name,
        figure: format!(
            "{:+.2}% per simulated hour (limit {MEMORY_SLOPE_LIMIT_PCT_PER_HOUR}%), {} samples of the last process over {:.0} s, mean {:.1} MiB, {:.1}–{:.1} MiB",
            pct_per_hour,
            points.len(),
            points.last().map_or(0.0, |p| p.0) - points.first().map_or(0.0, |p| p.0),
            mean / 1024.0,
            lo / 1024.0,
            hi / 1024.0
        ),
        held: points.len() >= 10 && pct_per_hour <= MEMORY_SLOPE_LIMIT_PCT_PER_HOUR,
    }
}
