//! The day on Fargate, second by second: one pool per elastic profile (task size), agents that
//! start cold ([`model::fargate_cold`]), are kept after their jobs (`ReuseIdleMinutes`, or as
//! warm agents) and are started warm by the plugin's own planner (`cluster::warm`), with the
//! key rule enforced: every create-agent brings one key; a cold start uses its job's key; a job
//! taken by an idle agent leaves its key unused, and a warm agent starts only on a key the
//! planner picks, which must register before GoCD's 30 minutes are up (asserted).
//!
//! A waiting job is taken by the first agent of its pool that is idle (as GoCD offers waiting
//! jobs to any idle agent of the profile); a cold agent whose job was taken by another joins
//! the idle agents when it registers. Warm passes run at every arrival, registration and job
//! end, and every 60 s (server-ping). The day ends when every job is done and no agent is left;
//! with a fixed `WarmAgents` count the pool is stopped when the last job ends, as a
//! `WarmSchedule` closing then would.

use std::time::{Duration, SystemTime};

use ecs_elastic_agent::cluster::warm::{self, IdleAgent, PoolView, UnusedKey, WarmAgents, KEY_LIFETIME};
use ecs_elastic_agent::cost::job::{per_second, split, AgentTimes, Span};

use crate::model;
use crate::trace::Job;

/// One Fargate configuration.
#[derive(Debug, Clone)]
pub struct Setup {
    /// `ReuseIdleMinutes` in seconds (0: off).
    pub reuse_idle: u64,
    /// `ReuseMaxJobs` (with reuse or warm agents).
    pub max_jobs: u32,
    /// `WarmAgents`.
    pub warm: WarmAgents,
    /// `MaxAgents`.
    pub max_agents: u32,
    /// The image's size in MB.
    pub image_mb: u64,
}

/// What the day cost and how long its jobs waited.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Per job, create-agent to the job taken.
    pub waits: Vec<u64>,
    pub cost_usd: f64,
    /// Jobs taken by an agent that was idle when they arrived.
    pub served_idle: usize,
    /// Tasks started cold (for a job) and warm (on an unused key).
    pub cold_starts: usize,
    pub warm_starts: usize,
    /// Unused keys dropped as too old.
    pub keys_dropped: usize,
    /// Agent-hours billed but running no job: image pulls, agent starts, idle agents.
    pub overhead_hours: f64,
    /// Each job's cost by the plugin's cost-per-job rules (`cost::job`), by trace order.
    pub job_usd: Vec<f64>,
    /// Warm and kept agents' idle time, their pools' cost by the same rules.
    pub pool_idle_usd: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Starting { ready_at: u64 },
    Idle { since: u64 },
    Busy { until: u64 },
    Stopped,
}

#[derive(Debug)]
struct Agent {
    pool: usize,
    state: State,
    billed_from: u64,
    stopped_at: u64,
    jobs: u32,
    /// Started warm, on an unused key (not for a job).
    warm: bool,
    /// The job it runs and when it took it.
    current: Option<(usize, u64)>,
    /// Up to when its time was charged to jobs or its pool.
    charged_until: Option<u64>,
}

#[derive(Debug)]
struct Waiting {
    job: usize,
    /// A cold agent was started for it (its key is used).
    launched: bool,
}

#[derive(Debug, Default)]
struct Pool {
    waiting: Vec<Waiting>,
    arrivals: Vec<SystemTime>,
    /// (job whose create-agent brought it, received at).
    keys: Vec<(usize, u64)>,
}

fn at(t: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(t)
}

/// Plays `jobs` through `setup`.
pub fn play(jobs: &[Job], setup: &Setup) -> Outcome {
    let mut sizes: Vec<(u32, u32)> = jobs.iter().map(|j| (j.cpu, j.memory)).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let pool_of = |j: &Job| sizes.iter().position(|s| *s == (j.cpu, j.memory)).expect("a size");
    let mut pools: Vec<Pool> = sizes.iter().map(|_| Pool::default()).collect();
    let mut agents: Vec<Agent> = Vec::new();
    let mut out = Outcome { waits: vec![u64::MAX; jobs.len()], job_usd: vec![0.0; jobs.len()], ..Outcome::default() };
    let hourly: Vec<f64> = sizes.iter().map(|(cpu, memory)| model::fargate_cost(*cpu, *memory, 3600)).collect();
    let cold = model::fargate_cold(setup.image_mb);
    let billing_delay = model::RUNTASK + model::PROVISION;
    let keeps = setup.reuse_idle > 0 || setup.warm != WarmAgents::Off;
    let (mut next, mut done) = (0, 0);
    let mut t = 0;
    loop {
        let mut due = vec![t % 60 == 0; pools.len()];
        // Registrations and job ends.
        for a in agents.iter_mut() {
            match a.state {
                State::Starting { ready_at } if ready_at <= t => {
                    a.state = State::Idle { since: ready_at };
                    due[a.pool] = true;
                }
                State::Busy { until } if until <= t => {
                    // The plugin's split at job-completion: the job's time, and its pool's before it.
                    let (job, taken) = a.current.take().expect("a busy agent runs a job");
                    let parts = split(AgentTimes {
                        billing_start: at(a.billed_from),
                        charged_until: a.charged_until.map(at),
                        given_at: (a.warm || a.jobs > 0).then_some(at(taken)),
                        end: at(t),
                    });
                    let rate = hourly[a.pool];
                    out.job_usd[job] = per_second(rate, parts.job, if parts.minimum { 60 } else { 0 });
                    out.pool_idle_usd += parts.pool_idle.map_or(0.0, |idle| per_second(rate, idle, 0));
                    a.charged_until = Some(t);
                    a.jobs += 1;
                    done += 1;
                    due[a.pool] = true;
                    if keeps && a.jobs < setup.max_jobs {
                        a.state = State::Idle { since: t };
                    } else {
                        a.state = State::Stopped;
                        a.stopped_at = t;
                    }
                }
                State::Idle { since } if setup.reuse_idle > 0 && since + setup.reuse_idle <= t => {
                    a.state = State::Stopped;
                    a.stopped_at = t;
                }
                _ => {}
            }
        }
        // Arrivals: each create-agent brings a key.
        while next < jobs.len() && jobs[next].arrival <= t {
            let p = pool_of(&jobs[next]);
            pools[p].waiting.push(Waiting { job: next, launched: false });
            pools[p].arrivals.push(at(t));
            due[p] = true;
            next += 1;
        }
        // Idle agents take waiting jobs: each job goes to the agent that asks for work first.
        for (p, pool) in pools.iter_mut().enumerate() {
            while !pool.waiting.is_empty() {
                let job = &jobs[pool.waiting[0].job];
                let best = agents
                    .iter()
                    .enumerate()
                    .filter_map(|(i, a)| match a.state {
                        State::Idle { since } if a.pool == p => Some((model::pickup(since, t), i)),
                        _ => None,
                    })
                    .min();
                let Some((taken, i)) = best else { break };
                let w = pool.waiting.remove(0);
                let idle_at_arrival = matches!(agents[i].state, State::Idle { since } if since <= job.arrival);
                out.served_idle += usize::from(idle_at_arrival);
                agents[i].state = State::Busy { until: taken + job.duration };
                agents[i].current = Some((w.job, taken));
                out.waits[w.job] = taken - job.arrival;
                if !w.launched && setup.warm != WarmAgents::Off {
                    pool.keys.push((w.job, job.arrival));
                }
            }
        }
        // Jobs no agent took start cold with their own key, within MaxAgents.
        // A job that finds a warm agent still starting and not yet claimed waits for it, as the
        // plugin binds it (its create-agent's key stays unused); the others start cold with their
        // own key, within MaxAgents.
        let mut alive = agents.iter().filter(|a| a.state != State::Stopped).count();
        for (p, pool) in pools.iter_mut().enumerate() {
            let starting = agents.iter().filter(|a| a.pool == p && matches!(a.state, State::Starting { .. })).count();
            let mut unclaimed = starting.saturating_sub(pool.waiting.iter().filter(|w| w.launched).count());
            let mut freed = Vec::new();
            for w in pool.waiting.iter_mut().filter(|w| !w.launched) {
                if unclaimed > 0 && setup.warm != WarmAgents::Off {
                    unclaimed -= 1;
                    w.launched = true;
                    freed.push((w.job, jobs[w.job].arrival));
                    continue;
                }
                if alive >= setup.max_agents as usize {
                    break;
                }
                w.launched = true;
                alive += 1;
                out.cold_starts += 1;
                agents.push(Agent {
                    pool: p,
                    state: State::Starting { ready_at: t + cold },
                    billed_from: t + billing_delay,
                    stopped_at: 0,
                    jobs: 0,
                    warm: false,
                    current: None,
                    charged_until: None,
                });
            }
            pool.keys.extend(freed);
        }
        // The warm pass, per pool.
        if setup.warm != WarmAgents::Off {
            for (p, pool) in pools.iter_mut().enumerate().filter(|(p, _)| due[*p]) {
                let target =
                    warm::target(setup.warm, true, &pool.arrivals, Duration::from_secs(cold), setup.max_agents, at(t));
                let idle: Vec<IdleAgent> = agents
                    .iter()
                    .enumerate()
                    .filter_map(|(i, a)| match a.state {
                        State::Idle { since } if a.pool == p => {
                            Some(IdleAgent { id: i.to_string().into(), idle_since: at(since) })
                        }
                        _ => None,
                    })
                    .collect();
                let starting =
                    agents.iter().filter(|a| a.pool == p && matches!(a.state, State::Starting { .. })).count();
                let claimed = pool.waiting.iter().filter(|w| w.launched).count();
                let view = PoolView {
                    idle,
                    starting: u32::try_from(starting.saturating_sub(claimed)).expect("a count"),
                    keys: pool
                        .keys
                        .iter()
                        .map(|(job, received)| UnusedKey { id: job.to_string(), received_at: at(*received) })
                        .collect(),
                    headroom: u32::try_from((setup.max_agents as usize).saturating_sub(alive)).expect("a count"),
                };
                let plan = warm::plan(&view, target, at(t));
                for id in &plan.retire {
                    let a = &mut agents[id.parse::<usize>().expect("an index")];
                    a.state = State::Stopped;
                    a.stopped_at = t;
                }
                out.keys_dropped += plan.drop_keys.len();
                for id in plan.start.iter().chain(&plan.drop_keys) {
                    let job: usize = id.parse().expect("a job");
                    let (_, received) = pool.keys.remove(pool.keys.iter().position(|k| k.0 == job).expect("a key"));
                    if plan.start.contains(id) {
                        // The test world's GoCD refuses a key older than its lifetime.
                        assert!(
                            Duration::from_secs(t + cold - received) < KEY_LIFETIME,
                            "a warm agent would register with an expired key"
                        );
                        out.warm_starts += 1;
                        alive += 1;
                        agents.push(Agent {
                            pool: p,
                            state: State::Starting { ready_at: t + cold },
                            billed_from: t + billing_delay,
                            stopped_at: 0,
                            jobs: 0,
                            warm: true,
                            current: None,
                            charged_until: None,
                        });
                    }
                }
            }
        }
        // The end of the day.
        if done == jobs.len() {
            // The last job ended at `t`.
            let fixed = matches!(setup.warm, WarmAgents::Count(_));
            if fixed || agents.iter().all(|a| a.state == State::Stopped) {
                for a in agents.iter_mut().filter(|a| a.state != State::Stopped) {
                    a.state = State::Stopped;
                    a.stopped_at = t.max(a.billed_from);
                }
                break;
            }
        }
        t += 1;
    }
    let mut billed = 0;
    for a in &agents {
        let (cpu, memory) = sizes[a.pool];
        let seconds = a.stopped_at.saturating_sub(a.billed_from);
        billed += seconds;
        out.cost_usd += model::fargate_cost(cpu, memory, seconds);
        // Idle until it stopped (waiting for a job that did not come): its pool's.
        let idle = Span::new(at(a.charged_until.unwrap_or(a.billed_from)), at(a.stopped_at));
        out.pool_idle_usd += per_second(hourly[a.pool], idle, 0);
    }
    let running: u64 = jobs.iter().map(|j| j.duration).sum();
    out.overhead_hours = billed.saturating_sub(running) as f64 / 3600.0;
    out
}
