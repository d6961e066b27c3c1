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

use std::time::{Duration, SystemTime};

use ecs_elastic_agent::cluster::ec2::plan::parked::{reuse, Parked};
use ecs_elastic_agent::cluster::ec2::plan::{idle_since, plan, Demand, Policy, Registered, Rules, Slot, TypeOffer};
use ecs_elastic_agent::cluster::ec2::pool::PLACEMENT_GRACE;
use ecs_elastic_agent::cluster::ec2::{capacity, Arch, OsClass, Resources};

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
}

/// What the day cost and how long its jobs waited.
#[derive(Debug, Default)]
pub struct Outcome {
    pub waits: Vec<u64>,
    pub instance_hours: f64,
    pub cost_usd: f64,
    pub launches: usize,
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
    /// (end, need) of the tasks on it.
    tasks: Vec<(u64, Resources)>,
    /// When its first pull of the image ends.
    pulled_at: Option<u64>,
    idle_since: Option<SystemTime>,
    last_placed: Option<SystemTime>,
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
    let mut instances: Vec<Instance> = Vec::new();
    let mut waiting: Vec<usize> = Vec::new();
    let mut out = Outcome { waits: vec![0; jobs.len()], ..Outcome::default() };
    let (mut next, mut placed) = (0, 0);
    let mut t = 0;
    loop {
        let now = at(t);
        for i in instances.iter_mut().filter(|i| i.retired_at.is_none()) {
            let (ended, left): (Vec<_>, Vec<_>) = i.tasks.iter().partition(|(end, _)| *end <= t);
            i.tasks = left;
            for (_, need) in ended {
                i.remaining = i.remaining.plus(need);
            }
            if i.stopped_at.is_none() && i.launched_at + i.boot <= t {
                let tasks = u32::try_from(i.tasks.len()).expect("a count");
                i.idle_since = idle_since(i.idle_since, tasks, i.last_placed, PLACEMENT_GRACE, now);
            }
        }
        while next < jobs.len() && jobs[next].arrival <= t {
            waiting.push(next);
            next += 1;
        }
        let alive: Vec<usize> = (0..instances.len())
            .filter(|i| instances[*i].retired_at.is_none() && instances[*i].stopped_at.is_none())
            .collect();
        if placed == jobs.len() && alive.iter().all(|i| instances[*i].tasks.is_empty()) {
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
        let demands: Vec<Demand> = waiting
            .iter()
            .map(|n| Demand {
                id: n.to_string(),
                need: Resources::new(jobs[*n].cpu, jobs[*n].memory),
                os: OsClass::Linux,
                arch: Arch::X86_64,
                since: at(jobs[*n].arrival),
                on_demand: false,
            })
            .collect();
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
            let n: usize = p.demand.parse().expect("a job index");
            let job = jobs[n];
            let inst = instances.iter_mut().find(|i| i.id == p.instance).expect("a known instance");
            let need = Resources::new(job.cpu, job.memory);
            // The instance's first task pulls the image; the others wait for that pull to end.
            let pulled = *inst.pulled_at.get_or_insert(t + model::RUNTASK + model::pull(setup.image_mb));
            let registered = pulled.max(t + model::RUNTASK + model::PULL_CACHED) + model::AGENT;
            let taken = model::pickup(registered, registered);
            inst.remaining = inst.remaining.minus(need);
            inst.tasks.push((taken + job.duration, need));
            inst.last_placed = Some(now);
            inst.idle_since = None;
            waiting.retain(|m| *m != n);
            out.waits[n] = taken - job.arrival;
            placed += 1;
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
