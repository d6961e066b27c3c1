//! The status report's view of one cluster profile's EC2 pool: every instance of it (type,
//! architecture, market, state, registered and remaining CPU and memory, tasks, idle since), the
//! instances by type, what is wrong with the listed types and AMIs, and the counts against
//! `Ec2MinInstances` and `Ec2MaxInstances`. Times are handed to the caller's formatter (`T`).

use std::time::SystemTime;

use serde::Serialize;

use super::instance::InstanceRecord;
use super::pool::Pool;
use super::pools::pool_key;
use super::pools::Counters;
use super::Ec2State;
use crate::settings::{ClusterProfile, Ec2Capacity};

impl Pool {
    /// The status report's view of the pool of `profile` (an EC2 cluster profile, with `cfg`
    /// its EC2 settings).
    pub fn snapshot<T>(
        &self,
        profile: &ClusterProfile,
        cfg: &Ec2Capacity,
        when: impl Fn(SystemTime) -> T,
    ) -> PoolSnapshot<T> {
        let key = pool_key(profile);
        let st = self.state();
        let ours: Vec<&InstanceRecord> =
            st.instances().filter(|r| r.pool().is_some() && r.pool() == key.as_ref()).collect();
        let alive: Vec<&InstanceRecord> =
            ours.iter().copied().filter(|r| r.retiring().is_none() && !r.parked()).collect();
        let stopped = ours.iter().filter(|r| r.retiring().is_none() && r.parked()).count();
        let instances = ours
            .iter()
            .map(|r| {
                let c = r.container();
                InstanceRow {
                    id: r.id().to_string(),
                    instance_type: r.instance_type().to_string(),
                    arch: st.arch_of(r).as_str(),
                    market: if r.spot() { "spot" } else { "on-demand" },
                    state: instance_state(r),
                    ec2_state: r.ec2_state().clone(),
                    launched: when(r.launched_at()),
                    registered: c.is_some(),
                    registered_cpu: c.map(|c| c.total.cpu),
                    registered_memory: c.map(|c| c.total.memory),
                    remaining_cpu: c.map(|c| c.remaining.cpu),
                    remaining_memory: c.map(|c| c.remaining.memory),
                    tasks: c.map_or(0, |c| c.tasks),
                    idle_since: r.idle_since().map(&when),
                }
            })
            .collect();
        let mut by_type: Vec<TypeCount> = Vec::new();
        for r in &alive {
            let arch = st.arch_of(r).as_str();
            match by_type.iter_mut().find(|t| t.instance_type == r.instance_type()) {
                Some(t) => t.count += 1,
                None => by_type.push(TypeCount { instance_type: r.instance_type().to_string(), arch, count: 1 }),
            }
        }
        by_type.sort_by(|a, b| a.instance_type.cmp(&b.instance_type));
        let catalog = st.memory(key.as_ref()).and_then(|m| m.catalog());
        PoolSnapshot {
            instance_type: cfg.instance_types.join(", "),
            by_type,
            types_estimated: catalog.and_then(|c| c.estimated.clone()),
            type_problems: catalog.map(|c| c.problems.clone()).unwrap_or_default(),
            spot: cfg.spot,
            min: cfg.min_instances,
            max: cfg.max_instances,
            idle_minutes: cfg.idle_minutes,
            register_timeout_minutes: cfg.register_timeout_minutes,
            counted: alive.len(),
            starting: alive.iter().filter(|r| r.container().is_none() || r.restarting()).count(),
            registered: alive.iter().filter(|r| r.container().is_some() && !r.restarting()).count(),
            stopped,
            stopped_instances: cfg.stopped_instances,
            stopped_ebs_month: format!("{:.2} USD a month", stopped_ebs_usd_month(stopped, cfg.root_volume_gib)),
            waiting: st.waiting().iter().filter(|w| Some(&w.pool) == key.as_ref()).count(),
            instances,
            counters: st.memory(key.as_ref()).map(|m| m.counters()).unwrap_or_default(),
            last_pass: st.last_pass().map(|(t, _)| when(t)),
            last_error: st.last_pass().and_then(|(_, e)| e.map(str::to_string)),
        }
    }
}

/// gp3 storage, USD per GiB-month (us-east-1, aws.amazon.com/ebs/pricing): what a stopped
/// instance still costs, its root volume.
pub const GP3_USD_PER_GIB_MONTH: f64 = 0.08;

/// What `stopped` instances' root volumes of `gib` each cost a month.
pub fn stopped_ebs_usd_month(stopped: usize, gib: u32) -> f64 {
    stopped as f64 * f64::from(gib) * GP3_USD_PER_GIB_MONTH
}

fn instance_state(r: &InstanceRecord) -> String {
    match (&r.retiring(), &r.container()) {
        (Some(reason), _) => format!("retiring: {}", reason.describe()),
        (None, _) if r.ec2_state() == Ec2State::Stopping => "stopping into the stopped pool".into(),
        (None, _) if r.parked() => "stopped (Ec2StoppedInstances): started again before a new launch".into(),
        (None, _) if r.restarting() => "started again, ECS agent reconnecting".into(),
        (None, None) => "starting (not registered yet)".into(),
        (None, Some(c)) if !c.usable() => {
            format!("registered, {}{}", c.status, if c.connected { "" } else { ", agent disconnected" })
        }
        (None, Some(c)) if c.tasks == 0 => "registered, idle".into(),
        (None, Some(_)) => "registered, running tasks".into(),
    }
}

/// The status report's EC2 section (`T`: how times are shown).
#[derive(Debug, Clone, Serialize)]
pub struct PoolSnapshot<T> {
    /// `Ec2InstanceType`: the listed types, comma-separated.
    pub instance_type: String,
    /// Instances counted against the limits, by type (sorted by name).
    pub by_type: Vec<TypeCount>,
    /// Why the types' sizes and architectures are estimates, when DescribeInstanceTypes failed.
    pub types_estimated: Option<String>,
    /// What is wrong with the listed types and AMIs (a type with no AMI of its architecture...).
    pub type_problems: Vec<String>,
    /// `Ec2Spot`.
    pub spot: bool,
    /// `Ec2MinInstances`.
    pub min: u32,
    /// `Ec2MaxInstances`.
    pub max: u32,
    /// `Ec2IdleMinutes`.
    pub idle_minutes: u32,
    /// `Ec2RegisterTimeoutMinutes`.
    pub register_timeout_minutes: u32,
    /// Instances counted against the limits (starting or registered, not retiring).
    pub counted: usize,
    /// Of which not registered yet.
    pub starting: usize,
    /// Of which registered.
    pub registered: usize,
    /// Tasks waiting for room.
    pub waiting: usize,
    /// Instances stopped (or stopping) in the stopped pool, not counted above.
    pub stopped: usize,
    /// `Ec2StoppedInstances`.
    pub stopped_instances: u32,
    /// What the stopped instances' root volumes cost a month (gp3, at `Ec2RootVolumeGiB`), as
    /// `2.40 USD a month`.
    pub stopped_ebs_month: String,
    /// Every instance.
    pub instances: Vec<InstanceRow<T>>,
    /// The pool's totals.
    pub counters: Counters,
    /// When the last pass ran.
    pub last_pass: Option<T>,
    /// Its error, if it failed.
    pub last_error: Option<String>,
}

/// How many instances of one type.
#[derive(Debug, Clone, Serialize)]
pub struct TypeCount {
    /// The instance type.
    pub instance_type: String,
    /// Its architecture (`x86_64`, `arm64`).
    pub arch: &'static str,
    /// Instances of it (starting or registered, not retiring).
    pub count: usize,
}

/// One instance row.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceRow<T> {
    /// Instance id.
    pub id: String,
    /// Instance type.
    pub instance_type: String,
    /// Its architecture.
    pub arch: &'static str,
    /// `spot` or `on-demand`.
    pub market: &'static str,
    /// Where it is in its life.
    pub state: String,
    /// EC2's state.
    pub ec2_state: Ec2State,
    /// Launch time.
    pub launched: T,
    /// Registered with the cluster.
    pub registered: bool,
    /// Registered CPU units.
    pub registered_cpu: Option<u32>,
    /// Registered MiB.
    pub registered_memory: Option<u32>,
    /// Remaining CPU units.
    pub remaining_cpu: Option<u32>,
    /// Remaining MiB.
    pub remaining_memory: Option<u32>,
    /// Tasks on it.
    pub tasks: u32,
    /// Idle since.
    pub idle_since: Option<T>,
}
