//! The day on Fargate, second by second: one pool per elastic profile (task size), agents that
//! start cold ([`model::fargate_cold`]), are kept after their jobs (`ReuseIdleMinutes`, or as
//! warm agents) and are started warm by the plugin's own planner (`cluster::warm`), with the
//! key rule enforced: every create-agent brings one key; a cold start uses its job's key; a job
//! taken by an idle agent leaves its key unused, and a warm agent starts only on a key the
//! planner picks, which must register before GoCD's 30 minutes are up (asserted).
//!
//! A waiting job is taken by the first agent of its pool that is idle (as GoCD offers waiting
//! jobs to any idle agent of the profile); a cold agent whose job was taken by another joins
//! the idle agents when it registers. Warm passes run at every create-agent, registration and
//! job end, and every 60 s (server-ping). The days before the measured one (`from`) are played
//! the same way, so that `auto` has their arrivals to look back on; only the measured day's jobs
//! and the seconds billed from its start count. It ends when every job is done and no agent is
//! left; with a fixed `WarmAgents` count the pool is stopped when the last job ends, as a
//! `WarmSchedule` closing then would.
//!
//! GoCD's assignment timer ([`model::create_agent_at`]): a job is scheduled at its arrival, an
//! idle agent may take it at once, and its create-agent (and so its key, and its count in
//! `auto`'s arrivals) comes at the next 5 s tick; a cold start begins only then.
//!
//! With `spot`, agents started warm run on Fargate Spot (`WarmLaunchType` `FARGATE_SPOT`):
//! every second of theirs, idle or running a job, at the plugin's Spot price
//! ([`model::fargate_cost`]). [`model::SPOT_INTERRUPTED`] of them get Spot's two-minute
//! warning, at a deterministic moment ([`model::draw`]): an idle one stops at once and the
//! planner replaces it only if an unused young key is left; a busy one finishes its job if it
//! can within the two minutes, else the job is lost when the task stops, and GoCD schedules it
//! again: the rerun starts cold on `FARGATE` (on demand), its wait added to the job's wait and
//! its task to the job's cost. With `floor`, the pool keeps at least that many idle agents per
//! elastic profile through quiet hours (the bench's candidate rule, not the engine's): the first
//! day starts with them registered from the evening before, and they are billed to the measured day's end
//! (24 h), so the night is in the cost.

use std::time::{Duration, SystemTime};

use ecs_elastic_agent::cluster::capacity::warm::{self, IdleAgent, PoolView, UnusedKey, WarmAgents, KEY_LIFETIME};
use ecs_elastic_agent::cost::job::{per_second, split, AgentTimes, Span};

use crate::model;
use crate::trace::Job;

/// A day: the floor's agents are billed to the measured day's end.
const DAY: u64 = 86_400;

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
    /// The image has a SOCI index: cold starts pull lazily ([`model::fargate_cold_soci`]).
    pub soci: bool,
    /// Warm agents run on Fargate Spot.
    pub spot: bool,
    /// Idle agents kept per pool whatever `auto` says, through the night (0: none).
    pub floor: u32,
}

/// What the day cost and how long its jobs waited.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Per job, scheduled to the job taken (a rerun's wait added).
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
    /// Spot interruptions: of idle agents, and of agents running a job (each job rerun).
    pub interrupted_idle: usize,
    pub interrupted_jobs: usize,
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
    /// On Fargate Spot.
    spot: bool,
    /// When Spot's two-minute warning comes, if it does.
    warning_at: Option<u64>,
    /// Warned: it stops at this second, or when its job ends if that is sooner.
    stops_at: Option<u64>,
    /// The job it runs and when it took it.
    current: Option<(usize, u64)>,
    /// Up to when its time was charged to jobs or its pool.
    charged_until: Option<u64>,
}

#[derive(Debug)]
struct Waiting {
    job: usize,
    /// When GoCD scheduled it (its arrival, or its rescheduling after a Spot interruption).
    scheduled: u64,
    /// When its create-agent comes, and whether it has.
    create_at: u64,
    requested: bool,
    /// A cold agent was started for it (its key is used).
    launched: bool,
    /// A rerun after a Spot interruption: on demand only, and its wait before.
    rerun: bool,
    prior_wait: u64,
}

#[derive(Debug, Default)]
struct Pool {
    waiting: Vec<Waiting>,
    arrivals: Vec<SystemTime>,
    /// (job whose create-agent brought it, received at).
    keys: Vec<(usize, u64)>,
    /// create-agent requests to come: (at, job).
    creates: Vec<(u64, usize)>,
}

fn at(t: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(t)
}

/// A new agent; on Spot, its warning drawn.
fn agent(pool: usize, n: usize, ready_at: u64, billed_from: u64, warm: bool, spot: bool) -> Agent {
    let key = n as u64;
    let warning_at = (spot && model::draw(key, 1) < model::SPOT_INTERRUPTED)
        .then(|| ready_at + (model::draw(key, 2) * model::SPOT_WARNING_WITHIN as f64) as u64);
    Agent {
        pool,
        state: State::Starting { ready_at },
        billed_from,
        stopped_at: 0,
        jobs: 0,
        warm,
        spot,
        warning_at,
        stops_at: None,
        current: None,
        charged_until: None,
    }
}

/// Plays `jobs` through `setup`.
pub fn play(jobs: &[Job], setup: &Setup, from: u64) -> Outcome {
    let mut sizes: Vec<(u32, u32)> = jobs.iter().map(|j| (j.cpu, j.memory)).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let pool_of = |j: &Job| sizes.iter().position(|s| *s == (j.cpu, j.memory)).expect("a size");
    let mut pools: Vec<Pool> = sizes.iter().map(|_| Pool::default()).collect();
    let mut agents: Vec<Agent> = Vec::new();
    let mut out = Outcome { waits: vec![u64::MAX; jobs.len()], job_usd: vec![0.0; jobs.len()], ..Outcome::default() };
    let hourly = |pool: usize, spot: bool| model::fargate_cost(sizes[pool].0, sizes[pool].1, 3600, spot);
    let cold = if setup.soci { model::fargate_cold_soci(setup.image_mb) } else { model::fargate_cold(setup.image_mb) };
    let billing_delay = model::RUNTASK + model::PROVISION;
    let keeps = setup.reuse_idle > 0 || setup.warm != WarmAgents::Off;
    let floor = setup.floor.min(setup.max_agents);
    // The floor kept from the evening before: registered, idle since the day began.
    for p in 0..pools.len() {
        for _ in 0..floor {
            let n = agents.len();
            agents.push(Agent { state: State::Idle { since: 0 }, ..agent(p, n, 0, 0, true, setup.spot) });
        }
    }
    let (mut next, mut done) = (0, 0);
    let mut t = 0;
    loop {
        if t == from && from > 0 {
            // The measured day begins: what came before was the plugin's memory.
            let (waits, job_usd) = (std::mem::take(&mut out.waits), std::mem::take(&mut out.job_usd));
            out = Outcome { waits, job_usd, ..Outcome::default() };
        }
        let mut due = vec![t % 60 == 0; pools.len()];
        let mut reruns: Vec<(usize, usize, u64)> = Vec::new();
        // Registrations, Spot warnings, job ends and interruptions.
        for a in agents.iter_mut() {
            if let State::Starting { ready_at } = a.state {
                if ready_at <= t {
                    a.state = State::Idle { since: ready_at };
                    due[a.pool] = true;
                }
            }
            if a.warning_at == Some(t) && a.state != State::Stopped {
                match a.state {
                    State::Idle { .. } => {
                        out.interrupted_idle += 1;
                        a.state = State::Stopped;
                        a.stopped_at = t;
                        due[a.pool] = true;
                        continue;
                    }
                    _ => a.stops_at = Some(t + model::SPOT_WARNING),
                }
            }
            match a.state {
                State::Busy { until } if until <= t || a.stops_at == Some(t) => {
                    // The plugin's split at job-completion: the job's time, and its pool's before it.
                    let (job, taken) = a.current.take().expect("a busy agent runs a job");
                    let parts = split(AgentTimes {
                        // Only the measured day's share: what came before it is not in its cost.
                        billing_start: at(a.billed_from.max(from)),
                        charged_until: a.charged_until.map(|c| at(c.max(from))),
                        given_at: (a.warm || a.jobs > 0).then_some(at(taken)),
                        end: at(t),
                    });
                    let rate = hourly(a.pool, a.spot);
                    out.job_usd[job] += per_second(rate, parts.job, if parts.minimum { 60 } else { 0 });
                    out.pool_idle_usd += parts.pool_idle.map_or(0.0, |idle| per_second(rate, idle, 0));
                    a.charged_until = Some(t);
                    due[a.pool] = true;
                    if until > t {
                        // Spot took the task back before the job ended: GoCD schedules it again.
                        out.interrupted_jobs += 1;
                        reruns.push((a.pool, job, out.waits[job]));
                        out.waits[job] = u64::MAX;
                        a.state = State::Stopped;
                        a.stopped_at = t;
                        continue;
                    }
                    a.jobs += 1;
                    done += 1;
                    if keeps && a.jobs < setup.max_jobs && a.stops_at.is_none() {
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
        for (p, job, prior_wait) in reruns {
            let create_at = model::create_agent_at(t);
            pools[p].waiting.push(Waiting {
                job,
                scheduled: t,
                create_at,
                requested: false,
                launched: false,
                rerun: true,
                prior_wait,
            });
            pools[p].creates.push((create_at, job));
        }
        // Arrivals: GoCD schedules the job; its create-agent comes at the next tick.
        while next < jobs.len() && jobs[next].arrival <= t {
            let p = pool_of(&jobs[next]);
            let create_at = model::create_agent_at(jobs[next].arrival);
            pools[p].waiting.push(Waiting {
                job: next,
                scheduled: jobs[next].arrival,
                create_at,
                requested: false,
                launched: false,
                rerun: false,
                prior_wait: 0,
            });
            pools[p].creates.push((create_at, next));
            next += 1;
        }
        // create-agent requests: each brings a key, used by a cold start unless an idle agent
        // has taken the job already.
        for (p, pool) in pools.iter_mut().enumerate() {
            let (now, later): (Vec<_>, Vec<_>) = pool.creates.iter().partition(|(c, _)| *c <= t);
            pool.creates = later;
            for (c, job) in now {
                pool.arrivals.push(at(c));
                due[p] = true;
                match pool.waiting.iter_mut().find(|w| w.job == job) {
                    Some(w) => w.requested = true,
                    None if setup.warm != WarmAgents::Off => pool.keys.push((job, c)),
                    None => {}
                }
            }
        }
        // Idle agents take waiting jobs: each job goes to the agent that asks for work first (a
        // rerun only to an agent on demand).
        for (p, pool) in pools.iter_mut().enumerate() {
            let mut i = 0;
            while i < pool.waiting.len() {
                let w = &pool.waiting[i];
                let best = agents
                    .iter()
                    .enumerate()
                    .filter_map(|(n, a)| match a.state {
                        State::Idle { since } if a.pool == p && !(w.rerun && a.spot) => {
                            Some((model::pickup(since, t), n))
                        }
                        _ => None,
                    })
                    .min();
                let Some((taken, n)) = best else {
                    i += 1;
                    continue;
                };
                let w = pool.waiting.remove(i);
                let job = &jobs[w.job];
                let idle_at_arrival = matches!(agents[n].state, State::Idle { since } if since <= w.scheduled);
                out.served_idle += usize::from(idle_at_arrival && !w.rerun);
                agents[n].state = State::Busy { until: taken + job.duration };
                agents[n].current = Some((w.job, taken));
                out.waits[w.job] = w.prior_wait + (taken - w.scheduled);
                if !w.launched && w.requested && setup.warm != WarmAgents::Off {
                    pool.keys.push((w.job, w.create_at));
                }
            }
        }
        // A job that finds a warm agent still starting and not yet claimed waits for it, as the
        // plugin binds it (its create-agent's key stays unused); the others start cold with their
        // own key once their create-agent has come, within MaxAgents; a rerun always starts cold.
        let mut alive = agents.iter().filter(|a| a.state != State::Stopped).count();
        for (p, pool) in pools.iter_mut().enumerate() {
            let starting = agents.iter().filter(|a| a.pool == p && matches!(a.state, State::Starting { .. })).count();
            let mut unclaimed = starting.saturating_sub(pool.waiting.iter().filter(|w| w.launched).count());
            let mut freed = Vec::new();
            for w in pool.waiting.iter_mut().filter(|w| !w.launched && w.requested) {
                if unclaimed > 0 && setup.warm != WarmAgents::Off && !w.rerun {
                    unclaimed -= 1;
                    w.launched = true;
                    freed.push((w.job, w.create_at));
                    continue;
                }
                if alive >= setup.max_agents as usize {
                    break;
                }
                w.launched = true;
                alive += 1;
                out.cold_starts += 1;
                let n = agents.len();
                agents.push(agent(p, n, t + cold, t + billing_delay, false, false));
            }
            pool.keys.extend(freed);
        }
        // The warm pass, per pool.
        if setup.warm != WarmAgents::Off {
            for (p, pool) in pools.iter_mut().enumerate().filter(|(p, _)| due[*p]) {
                let target =
                    warm::target(setup.warm, true, &pool.arrivals, Duration::from_secs(cold), setup.max_agents, at(t))
                        .max(floor);
                let idle: Vec<IdleAgent> = agents
                    .iter()
                    .enumerate()
                    .filter_map(|(i, a)| match a.state {
                        State::Idle { since } if a.pool == p => {
                            Some(IdleAgent { id: i.to_string().into(), idle_since: at(since), spot: a.spot })
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
                        let n = agents.len();
                        agents.push(agent(p, n, t + cold, t + billing_delay, true, setup.spot));
                    }
                }
            }
        }
        // The end of the day: every job done, and only idle agents left past the measured day.
        if done == jobs.len() {
            let fixed = matches!(setup.warm, WarmAgents::Count(_));
            let idle_only = agents.iter().all(|a| matches!(a.state, State::Idle { .. } | State::Stopped));
            if fixed || agents.iter().all(|a| a.state == State::Stopped) || (idle_only && t >= from + DAY) {
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
    for a in agents.iter().filter(|a| a.stopped_at > from) {
        let (cpu, memory) = sizes[a.pool];
        let seconds = a.stopped_at - a.billed_from.max(from);
        billed += seconds;
        out.cost_usd += model::fargate_cost(cpu, memory, seconds, a.spot);
        // Idle until it stopped (waiting for a job that did not come): its pool's.
        let idle = Span::new(at(a.charged_until.unwrap_or(a.billed_from).max(from)), at(a.stopped_at));
        out.pool_idle_usd += per_second(hourly(a.pool, a.spot), idle, 0);
    }
    let running: u64 = jobs.iter().filter(|j| j.arrival >= from).map(|j| j.duration).sum();
    out.overhead_hours = billed.saturating_sub(running) as f64 / 3600.0;
    out
}
