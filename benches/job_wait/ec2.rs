//! The day on EC2, through the plugin's own placement and retirement (`ec2::plan::plan`, as the
//! EC2 cost bench plays it): c5.xlarge instances that register [`model::EC2_BOOT`] after launch,
//! a pass every [`TICK`]. A job's wait is its wait for room (create-agent to placement), then
//! its task's start on the instance: RunTask, the image pull (the instance's first task of the
//! image; later ones find it cached), the agent's start, and GoCD's pickup. The task holds its
//! CPU and memory from placement to the job's end, its start included.
//!
//! With `Ec2StoppedInstances` the plugin's stopped pool runs too (`ec2::plan::parked::reuse`,
//! after the plan, as the driver calls it): an idle instance is stopped instead of terminated
//! while the pool has room, and a launch starts a stopped one instead, registered
//! [`model::EC2_RESTART`] later with the images it had. A stopped instance costs its root
//! volume ([`model::gp3_gib_month`] × [`model::ROOT_GIB`]) until it is started, terminated, or
//! the day ends. With the image pre-pull (the plugin's user data), a new instance pulls the
//! image from [`model::PREPULL_START`] after its launch, during its boot.
//!
//! A job is scheduled at its arrival and becomes demand when its create-agent comes, at GoCD's
//! next 5 s tick ([`model::create_agent_at`]). With `warm` (`WarmAgents` on an EC2 profile),
//! agents are kept on their instances after their jobs, holding their room (the instance billed
//! as any other), and `cluster::warm`'s planner keeps the pool as on Fargate, with the same key
//! rule: an idle agent takes a scheduled job at once ([`model::pickup`]), a warm agent is a task
//! placed by `ec2::plan` on the unused key of a job an idle agent took, and an agent started
//! for a job that another took joins the idle ones when it registers.

use std::time::{Duration, SystemTime};

use ecs_elastic_agent::cluster::capacity::ec2::instance::PLACEMENT_GRACE;
use ecs_elastic_agent::cluster::capacity::ec2::plan::parked::{reuse, Parked};
use ecs_elastic_agent::cluster::capacity::ec2::plan::{
    idle_since, plan, Demand, Policy, Registered, Rules, Slot, TypeOffer,
};
use ecs_elastic_agent::cluster::capacity::ec2::{capacity, Arch, OsClass, Resources};
use ecs_elastic_agent::cluster::capacity::warm::{self, IdleAgent, PoolView, UnusedKey, WarmAgents};

use crate::model;
use crate::trace::Job;

/// Seconds between passes (the EC2 cost bench's).
pub const TICK: u64 = 2;
/// The instance type.
pub const INSTANCE_TYPE: &str = "c5.xlarge";

/// One EC2 configuration.
#[derive(Debug, Clone)]
pub struct Setup {
    /// `Ec2ScaleOutWaitSeconds`.
    pub scale_out_wait: u64,
    /// `Ec2IdleMinutes`.
    pub idle_minutes: u64,
    /// `Ec2MaxInstances`.
    pub max: u32,
    pub image_mb: u64,
    /// `Ec2StoppedInstances`.
    pub stopped: u32,
    /// New instances pull the image at boot (the plugin's user data does).
    pub prepull: bool,
    /// `WarmAgents`, `MaxAgents` and `ReuseMaxJobs` of the elastic profiles.
    pub warm: WarmAgents,
    pub max_agents: u32,
    pub max_jobs: u32,
}

/// What the day cost and how long its jobs waited.
#[derive(Debug, Default)]
pub struct Outcome {
    pub waits: Vec<u64>,
    pub instance_hours: f64,
    pub cost_usd: f64,
    pub launches: usize,
    /// With `warm`: agents started for a job, and warm.
    pub cold_starts: usize,
    pub warm_starts: usize,
    /// Stopped instances started again instead of launches.
    pub restarts: usize,
    /// What the stopped instances' root volumes cost (in `cost_usd`).
    pub ebs_usd: f64,
}

#[derive(Debug)]
struct Instance {
    id: String,
    /// When it was launched, or last started again.
    launched_at: u64,
    /// Launch (or start) to registration.
    boot: u64,
    /// Running seconds before its last start.
    billed: u64,
    /// Since when it is stopped, if it is.
    stopped_at: Option<u64>,
    /// Seconds stopped before.
    stopped_for: u64,
    retired_at: Option<u64>,
    remaining: Resources,
    /// (end, need, agent) of the tasks on it: a kept agent's task ends when the agent stops.
    tasks: Vec<(u64, Resources, Option<usize>)>,
    /// When its first pull of the image ends.
    pulled_at: Option<u64>,
    idle_since: Option<SystemTime>,
    last_placed: Option<SystemTime>,
}

/// A kept agent (with `warm`).
#[derive(Debug)]
struct Agent {
    pool: usize,
    state: State,
    jobs: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Waiting for room, or placed and starting.
    Starting,
    Idle {
        since: u64,
    },
    Busy {
        until: u64,
    },
    Stopped,
}

fn at(t: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(t)
}

/// The lower bound of the EC2 cost bench: the jobs' CPU-seconds or memory-seconds, whichever is
/// larger, over one instance's capacity, in instance-hours (their durations only: no start).
pub fn lower_bound_hours(jobs: &[Job]) -> f64 {
    let cap = capacity::estimate(INSTANCE_TYPE).expect("a known instance type");
    let sum = |f: &dyn Fn(&Job) -> u32| jobs.iter().map(|j| f64::from(f(j)) * j.duration as f64).sum::<f64>();
    (sum(&|j| j.cpu) / f64::from(cap.cpu)).max(sum(&|j| j.memory) / f64::from(cap.memory)) / 3600.0
}

/// Ends the task of agent `k` at `t`.
fn end_task(instances: &mut [Instance], k: usize, t: u64) {
    for task in instances.iter_mut().flat_map(|i| i.tasks.iter_mut()).filter(|task| task.2 == Some(k)) {
        task.0 = t;
    }
}

/// Plays `jobs` through `setup`.
pub fn play(jobs: &[Job], setup: &Setup) -> Outcome {
    let cap = capacity::estimate(INSTANCE_TYPE).expect("a known instance type");
    let policy = Policy {
        min: 0,
        max: setup.max,
        idle: Duration::from_secs(setup.idle_minutes * 60),
        register_timeout: Duration::from_secs(300),
        launch_patience: Duration::from_secs(setup.scale_out_wait),
        types: vec![TypeOffer { name: INSTANCE_TYPE.into(), capacity: cap, arch: Arch::X86_64, known: true }],
        spot: false,
        spot_turn: 0,
        rules: Rules::default(),
    };
    let warm_on = setup.warm != WarmAgents::Off;
    let mut sizes: Vec<(u32, u32)> = jobs.iter().map(|j| (j.cpu, j.memory)).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let pool_of = |j: &Job| sizes.iter().position(|s| *s == (j.cpu, j.memory)).expect("a size");
    // The planner's cold start: a new instance's boot, then the agent's start.
    let cold = model::EC2_BOOT + model::RUNTASK + model::PULL_CACHED + model::AGENT;
    let mut arrivals: Vec<Vec<SystemTime>> = vec![Vec::new(); sizes.len()];
    let mut keys: Vec<Vec<(usize, u64)>> = vec![Vec::new(); sizes.len()];
    let mut agents: Vec<Agent> = Vec::new();
    // Warm agents waiting for room: (agent, since).
    let mut warm_demand: Vec<(usize, u64)> = Vec::new();
    // Jobs scheduled and not taken (with `warm`), and whether their create-agent came and started
    // an agent.
    let mut pending: Vec<usize> = Vec::new();
    let mut launched = vec![false; jobs.len()];
    let mut taken_at = vec![None::<u64>; jobs.len()];
    let (mut next_create, mut done) = (0, 0);
    let mut instances: Vec<Instance> = Vec::new();
    let mut waiting: Vec<usize> = Vec::new();
    let mut out = Outcome { waits: vec![0; jobs.len()], ..Outcome::default() };
    let (mut next, mut placed) = (0, 0);
    let mut t = 0;
    loop {
        let now = at(t);
        for i in instances.iter_mut().filter(|i| i.retired_at.is_none()) {
            let (ended, left): (Vec<_>, Vec<_>) = i.tasks.iter().partition(|(end, _, _)| *end <= t);
            i.tasks = left;
            for (_, need, _) in ended {
                i.remaining = i.remaining.plus(need);
            }
            if i.stopped_at.is_none() && i.launched_at + i.boot <= t {
                let tasks = u32::try_from(i.tasks.len()).expect("a count");
                i.idle_since = idle_since(i.idle_since, tasks, i.last_placed, PLACEMENT_GRACE, now);
            }
        }
        // Kept agents: registrations are set at placement; job ends.
        for (n, a) in agents.iter_mut().enumerate() {
            if let State::Busy { until } = a.state {
                if until <= t {
                    a.jobs += 1;
                    done += 1;
                    if a.jobs < setup.max_jobs {
                        a.state = State::Idle { since: until };
                    } else {
                        a.state = State::Stopped;
                        end_task(&mut instances, n, t);
                    }
                }
            }
        }
        if warm_on {
            while next < jobs.len() && jobs[next].arrival <= t {
                pending.push(next);
                next += 1;
            }
            // Idle agents take scheduled jobs at once: each to the agent that asks first.
            let mut i = 0;
            while i < pending.len() {
                let n = pending[i];
                let p = pool_of(&jobs[n]);
                let best = agents
                    .iter()
                    .enumerate()
                    .filter_map(|(k, a)| match a.state {
                        State::Idle { since } if a.pool == p && since <= t => Some((model::pickup(since, t), k)),
                        _ => None,
                    })
                    .min();
                let Some((taken, k)) = best else {
                    i += 1;
                    continue;
                };
                pending.remove(i);
                agents[k].state = State::Busy { until: taken + jobs[n].duration };
                out.waits[n] = taken - jobs[n].arrival;
                taken_at[n] = Some(taken);
                placed += 1;
                // A job whose create-agent came and started no agent leaves its key unused.
                let create_at = model::create_agent_at(jobs[n].arrival);
                if create_at <= t && !launched[n] {
                    waiting.retain(|m| *m != n);
                    keys[p].push((n, create_at));
                }
            }
            // create-agent requests: a key each; a job not yet taken becomes demand.
            while next_create < next && model::create_agent_at(jobs[next_create].arrival) <= t {
                let n = next_create;
                let create_at = model::create_agent_at(jobs[n].arrival);
                let p = pool_of(&jobs[n]);
                arrivals[p].push(at(create_at));
                if taken_at[n].is_some() {
                    keys[p].push((n, create_at));
                } else {
                    waiting.push(n);
                }
                next_create += 1;
            }
        } else {
            while next < jobs.len() && model::create_agent_at(jobs[next].arrival) <= t {
                waiting.push(next);
                next += 1;
            }
        }
        let alive: Vec<usize> = (0..instances.len())
            .filter(|i| instances[*i].retired_at.is_none() && instances[*i].stopped_at.is_none())
            .collect();
        let all_done = if warm_on {
            done == jobs.len() && agents.iter().all(|a| a.state == State::Stopped)
        } else {
            placed == jobs.len()
        };
        if all_done && alive.iter().all(|i| instances[*i].tasks.is_empty()) {
            for i in &alive {
                let inst = &mut instances[*i];
                inst.billed += t - inst.launched_at;
                inst.retired_at = Some(t);
            }
            break;
        }
        let parked: Vec<Parked> = instances
            .iter()
            .filter(|i| i.retired_at.is_none())
            .filter_map(|i| {
                Some(Parked {
                    id: i.id.clone(),
                    os: OsClass::Linux,
                    arch: Arch::X86_64,
                    instance_type: INSTANCE_TYPE.into(),
                    stopped: true,
                    fresh: Some(true),
                    spot: false,
                    since: at(i.stopped_at?),
                })
            })
            .collect();
        let slots: Vec<Slot> = alive
            .iter()
            .map(|i| {
                let inst = &instances[*i];
                Slot {
                    id: inst.id.clone(),
                    os: OsClass::Linux,
                    instance_type: INSTANCE_TYPE.into(),
                    arch: Arch::X86_64,
                    launched_at: at(inst.launched_at),
                    running: true,
                    registered: (inst.launched_at + inst.boot <= t).then_some(Registered {
                        usable: true,
                        total: cap,
                        remaining: inst.remaining,
                        tasks: u32::try_from(inst.tasks.len()).expect("a count"),
                    }),
                    idle_since: inst.idle_since,
                    retiring: false,
                    spot: false,
                    spot_warned: false,
                }
            })
            .collect();
        let demand = |id: String, (cpu, memory): (u32, u32), since: u64| Demand {
            id,
            need: Resources::new(cpu, memory),
            os: OsClass::Linux,
            arch: Arch::X86_64,
            since: at(since),
            on_demand: false,
        };
        let mut demands: Vec<Demand> = waiting
            .iter()
            .map(|n| demand(format!("j{n}"), (jobs[*n].cpu, jobs[*n].memory), model::create_agent_at(jobs[*n].arrival)))
            .collect();
        demands.extend(warm_demand.iter().map(|(k, since)| demand(format!("w{k}"), sizes[agents[*k].pool], *since)));
        let mut decided = plan(&slots, &demands, &policy, now);
        let pool = reuse(&mut decided, &parked, &slots, &policy, setup.stopped);
        for r in &decided.retire {
            let inst = instances.iter_mut().find(|i| i.id == r.instance).expect("a known instance");
            match inst.stopped_at.take() {
                Some(since) => inst.stopped_for += t - since,
                None => inst.billed += t - inst.launched_at,
            }
            inst.retired_at = Some(t);
        }
        for id in &pool.stop {
            let inst = instances.iter_mut().find(|i| i.id == *id).expect("a known instance");
            inst.billed += t - inst.launched_at;
            inst.stopped_at = Some(t);
            inst.idle_since = None;
        }
        for r in &pool.start {
            let inst = instances.iter_mut().find(|i| i.id == r.instance).expect("a known instance");
            let since = inst.stopped_at.take().expect("a stopped instance");
            inst.stopped_for += t - since;
            inst.launched_at = t;
            inst.boot = model::EC2_RESTART;
            out.restarts += 1;
        }
        for p in &decided.start {
            let (kind, index) = p.demand.split_at(1);
            let index: usize = index.parse().expect("an index");
            let size = if kind == "j" { (jobs[index].cpu, jobs[index].memory) } else { sizes[agents[index].pool] };
            let inst = instances.iter_mut().find(|i| i.id == p.instance).expect("a known instance");
            let need = Resources::new(size.0, size.1);
            // The instance's first task pulls the image; the others wait for that pull to end.
            let pulled = *inst.pulled_at.get_or_insert(t + model::RUNTASK + model::pull(setup.image_mb));
            let registered = pulled.max(t + model::RUNTASK + model::PULL_CACHED) + model::AGENT;
            inst.remaining = inst.remaining.minus(need);
            inst.last_placed = Some(now);
            inst.idle_since = None;
            if !warm_on {
                let taken = model::pickup(registered, registered);
                inst.tasks.push((taken + jobs[index].duration, need, None));
                waiting.retain(|m| *m != index);
                out.waits[index] = taken - jobs[index].arrival;
                placed += 1;
                continue;
            }
            // An agent, kept: for a job (which the first agent to ask takes), or warm.
            let k = if kind == "j" {
                waiting.retain(|m| *m != index);
                launched[index] = true;
                out.cold_starts += 1;
                agents.push(Agent { pool: pool_of(&jobs[index]), state: State::Starting, jobs: 0 });
                agents.len() - 1
            } else {
                warm_demand.retain(|(k, _)| *k != index);
                index
            };
            agents[k].state = State::Idle { since: registered };
            inst.tasks.push((u64::MAX, need, Some(k)));
        }
        // The warm pass, per pool (the passes the plugin runs at every event and ping come down
        // to every tick here).
        if warm_on {
            let mut alive_agents = agents.iter().filter(|a| a.state != State::Stopped).count();
            for p in 0..sizes.len() {
                let target =
                    warm::target(setup.warm, true, &arrivals[p], Duration::from_secs(cold), setup.max_agents, now);
                let idle: Vec<IdleAgent> = agents
                    .iter()
                    .enumerate()
                    .filter_map(|(k, a)| match a.state {
                        State::Idle { since } if a.pool == p && since <= t => {
                            Some(IdleAgent { id: k.to_string().into(), idle_since: at(since), spot: false })
                        }
                        _ => None,
                    })
                    .collect();
                let starting = agents
                    .iter()
                    .filter(|a| {
                        a.pool == p
                            && (a.state == State::Starting || matches!(a.state, State::Idle { since } if since > t))
                    })
                    .count();
                let view = PoolView {
                    idle,
                    starting: u32::try_from(starting).expect("a count"),
                    keys: keys[p]
                        .iter()
                        .map(|(job, received)| UnusedKey { id: job.to_string(), received_at: at(*received) })
                        .collect(),
                    headroom: u32::try_from((setup.max_agents as usize).saturating_sub(alive_agents)).expect("a count"),
                };
                let plan = warm::plan(&view, target, now);
                for id in &plan.retire {
                    let k: usize = id.parse().expect("an index");
                    agents[k].state = State::Stopped;
                    end_task(&mut instances, k, t);
                }
                for id in plan.start.iter().chain(&plan.drop_keys) {
                    let job: usize = id.parse().expect("a job");
                    keys[p].retain(|(n, _)| *n != job);
                    if plan.start.contains(id) {
                        out.warm_starts += 1;
                        alive_agents += 1;
                        agents.push(Agent { pool: p, state: State::Starting, jobs: 0 });
                        warm_demand.push((agents.len() - 1, t));
                    }
                }
            }
        }
        for _ in &decided.launch {
            instances.push(Instance {
                id: format!("i-{:05}", instances.len()),
                launched_at: t,
                boot: model::EC2_BOOT,
                billed: 0,
                stopped_at: None,
                stopped_for: 0,
                retired_at: None,
                remaining: cap,
                tasks: Vec::new(),
                pulled_at: setup.prepull.then(|| t + model::PREPULL_START + model::pull(setup.image_mb)),
                idle_since: None,
                last_placed: None,
            });
        }
        t += TICK;
    }
    // Stopped instances left at the end of the simulation cost their volume to the day's end.
    let day_end = t.max(86_400);
    for i in instances.iter_mut() {
        if let Some(since) = i.stopped_at.take() {
            i.stopped_for += day_end.saturating_sub(since);
        }
    }
    out.launches = instances.len();
    out.instance_hours = instances.iter().map(|i| i.billed as f64).sum::<f64>() / 3600.0;
    let stopped_hours = instances.iter().map(|i| i.stopped_for as f64).sum::<f64>() / 3600.0;
    out.ebs_usd = stopped_hours * model::ROOT_GIB * model::gp3_gib_month() / model::HOURS_PER_MONTH;
    out.cost_usd = out.instance_hours * model::c5_xlarge_hour() + out.ebs_usd;
    out
}
