//! The EC2 decisions as pure functions of a snapshot and a clock (kube-runtime's reconcile
//! contract: idempotent, no I/O), so the plugin and the cost benchmark run the very same rules.
//!
//! One [`plan`] call decides, in this order:
//! 1. **Retire the broken**: an instance that has not registered with the cluster within the
//!    register timeout, or that is registered but unusable (not ACTIVE, agent disconnected, EC2
//!    not running) with no task for that long.
//! 2. **Place**: waiting tasks, largest first (dominant share of an instance), each on the usable
//!    instance of its OS and CPU architecture where it fits most tightly (best fit: the fullest
//!    that fits, so empty instances stay empty and the emptiest busy ones drain, and can retire).
//!    With patient scale-out, a task that did not fit waits up to `Ec2ScaleOutWaitSeconds` for
//!    room to free on a busy instance of its OS and architecture before step 3 launches for it
//!    (unless it needs [`WHOLE`] of an instance, or no such instance has a task).
//! 3. **Launch**: what did not fit is packed first-fit into the instances still starting (of its
//!    OS and architecture, by their type's capacity), then into new instances; the new ones are
//!    launched up to `Ec2MaxInstances` (starting instances count), then more to keep
//!    `Ec2MinInstances` warm (of the first listed type).
//!    The tasks of an instance EC2 Spot is about to interrupt are packed too, as work that will
//!    come back and run on demand (their jobs' reruns do): into on-demand room of their
//!    architecture left after step 2, then on-demand bins, so the replacement boots during the
//!    two-minute warning, not after it; an instance whose room is kept for them is not idle in
//!    step 4. (A warning outlives a plugin restart: the instance carries a `gocd:spot-warned` tag.)
//!
//! # Which instance type a new instance gets
//! `Ec2InstanceType` may list several types. A new instance is opened for the waiting task that
//! did not fit anywhere, and gets the **cheapest listed type of the task's architecture that
//! holds it**. Without the Pricing API, "cheapest" is: fewest vCPUs, then least memory, ties
//! broken by the order of the list (within one family price follows size; across families the
//! operator's order decides). Later tasks fill that instance first-fit before another opens.
//! Each launch carries, in the order to try, every listed type of its architecture that holds
//! what was packed into it: EC2 refusing one type for capacity moves on to the next. With
//! `Ec2Spot` the list is rotated by one more for each spot launch ([`Policy::spot_turn`] counts
//! the launches so far), so spot requests are spread over the fitting types.
//! 4. **Retire the idle**, paced: of the instances with no task, the one idle the shortest time
//!    is the warm spare and goes after `Ec2IdleMinutes`; the others are surplus and go after
//!    [`SURPLUS_IDLE`] (2 minutes, or `Ec2IdleMinutes` when shorter), longest idle first, down to
//!    `Ec2MinInstances`. When load falls, instances leave one by one as they empty, and one stays
//!    warm for the next burst. While the busy instances have [`SLACK`] of an instance free
//!    between them, that room is the warm capacity: there is no spare, every idle instance goes
//!    at once. An instance with a task, or given one in step 2, is never retired.

use std::cmp::Ordering;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::{Arch, OsClass, Resources};

/// One type of `Ec2InstanceType`, as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeOffer {
    /// The type's name (`c5.xlarge`).
    pub name: String,
    /// What one instance of it offers ECS.
    pub capacity: Resources,
    /// Its CPU architecture.
    pub arch: Arch,
    /// Whether `capacity` is known (registered, described by EC2 or estimated from the name),
    /// so a task larger than it can never run on it.
    pub known: bool,
}

/// The cluster profile's `Ec2*` limits and what one instance of each listed type offers.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// `Ec2MinInstances`.
    pub min: u32,
    /// `Ec2MaxInstances`.
    pub max: u32,
    /// `Ec2IdleMinutes`.
    pub idle: Duration,
    /// `Ec2RegisterTimeoutMinutes`.
    pub register_timeout: Duration,
    /// `Ec2ScaleOutWaitSeconds`: how long a task waits for room on a busy instance before one
    /// is launched for it (0: at once).
    pub launch_patience: Duration,
    /// `Ec2InstanceType`, in the operator's order (at least one).
    pub types: Vec<TypeOffer>,
    /// `Ec2Spot`: launches in [`Plan::launch`] are spot requests, spread over the fitting types.
    pub spot: bool,
    /// Spot launches so far: where the round-robin over fitting types stands.
    pub spot_turn: usize,
    /// Which of the cost rules apply (all of them in the plugin; the cost benchmark switches
    /// them off one by one to show what each saves).
    pub rules: Rules,
}

/// The rules that make EC2 capacity cheaper, each of which can be switched off to measure it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Of several idle instances only the one that ran a task last is the warm spare and waits
    /// `Ec2IdleMinutes`; the others are surplus and go after [`surplus_idle`].
    pub one_warm_spare: bool,
    /// While the busy instances have [`SLACK`] of an instance free between them, that room is
    /// the warm capacity: no idle instance is kept as the spare, and every idle one goes at once.
    pub slack_is_the_spare: bool,
    /// A waiting task launches a new instance only after `Ec2ScaleOutWaitSeconds` while a busy
    /// instance of its OS may free room for it (most of the time one does, sooner); a task that
    /// needs [`WHOLE`] of an instance, which only an empty one has, launches at once.
    pub patient_scale_out: bool,
}

impl Default for Rules {
    fn default() -> Self {
        Rules { one_warm_spare: true, slack_is_the_spare: true, patient_scale_out: true }
    }
}

impl Rules {
    /// None of the cost rules: every idle instance kept `Ec2IdleMinutes`, an instance launched
    /// for every task that does not fit (the rules before issue 18).
    pub const NONE: Rules = Rules { one_warm_spare: false, slack_is_the_spare: false, patient_scale_out: false };
}

/// Free room on the busy instances, summed as shares of one instance, from which no idle
/// instance is kept as the warm spare ([`Rules::slack_is_the_spare`]).
pub const SLACK: f64 = 0.25;

/// How long a waiting task waits for room to free on a busy instance before an instance is
/// launched for it ([`Rules::patient_scale_out`]): `Ec2ScaleOutWaitSeconds`' default.
pub const LAUNCH_PATIENCE: Duration = Duration::from_secs(300);

/// The dominant share of an instance from which a waiting task launches at once
/// ([`Rules::patient_scale_out`]): it needs an empty instance, which a busy one seldom becomes.
pub const WHOLE: f64 = 0.9;

/// A task waiting for room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Demand {
    /// Its agent id.
    pub id: String,
    /// CPU and memory it reserves.
    pub need: Resources,
    /// The instances it can run on.
    pub os: OsClass,
    /// Its elastic profile's `CpuArchitecture`: it runs on instances of that architecture only.
    pub arch: Arch,
    /// Since when it waits (older first among equals).
    pub since: SystemTime,
    /// Spot interrupted its job's previous agent: it runs on an on-demand instance only.
    pub on_demand: bool,
}

/// An instance as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Slot {
    /// EC2 instance id.
    pub id: String,
    /// Its OS.
    pub os: OsClass,
    /// Its instance type (EC2's `InstanceType`).
    pub instance_type: String,
    /// Its type's CPU architecture.
    pub arch: Arch,
    /// When EC2 launched it.
    pub launched_at: SystemTime,
    /// EC2 says `running` (not `pending`, not shutting down).
    pub running: bool,
    /// Its container instance, once registered with the cluster.
    pub registered: Option<Registered>,
    /// Since when it has had no task (registered instances only).
    pub idle_since: Option<SystemTime>,
    /// Already being retired: neither placed on nor counted.
    pub retiring: bool,
    /// A spot instance (no place for a demand that must run on demand).
    pub spot: bool,
    /// EC2 Spot warned that it will interrupt this instance: its tasks will come back as reruns
    /// that run on demand, and capacity for them is launched now.
    pub spot_warned: bool,
}

/// A registered container instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// ACTIVE with its agent connected.
    pub usable: bool,
    /// Registered CPU and memory.
    pub total: Resources,
    /// What is left for new tasks (ECS's figure less what we placed since).
    pub remaining: Resources,
    /// Tasks on it (running and pending, ours or not).
    pub tasks: u32,
}

/// Why an instance goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RetireReason {
    /// Not registered with the cluster within `Ec2RegisterTimeoutMinutes`.
    NeverRegistered,
    /// Registered, but not ACTIVE or not connected (or not running in EC2), with no task, for
    /// `Ec2RegisterTimeoutMinutes`.
    Unhealthy,
    /// No task for `Ec2IdleMinutes`, and more instances than `Ec2MinInstances`.
    Idle,
}

impl RetireReason {
    /// For operators: why the plugin terminated the instance.
    pub fn describe(self) -> &'static str {
        match self {
            RetireReason::NeverRegistered => {
                "it did not register with the ECS cluster within Ec2RegisterTimeoutMinutes"
            }
            RetireReason::Unhealthy => {
                "its ECS agent was disconnected or not ACTIVE, with no task, for Ec2RegisterTimeoutMinutes"
            }
            RetireReason::Idle => "it ran no task for Ec2IdleMinutes",
        }
    }
}

/// A waiting task to start on an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The demand (agent id).
    pub demand: String,
    /// The instance.
    pub instance: String,
}

/// An instance to drain, deregister and terminate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retirement {
    /// The instance.
    pub instance: String,
    /// Why.
    pub reason: RetireReason,
}

/// One new instance to launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// Its OS.
    pub os: OsClass,
    /// Its CPU architecture (which AMI it gets).
    pub arch: Arch,
    /// The listed types that hold what was packed into it, in the order to try (the cheapest
    /// first; rotated for spot, see the module doc). Never empty.
    pub types: Vec<String>,
}

/// What one pass should do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Tasks to start now.
    pub start: Vec<Placement>,
    /// New instances, one entry each (spot when the profile says so).
    pub launch: Vec<Launch>,
    /// New on-demand instances whatever the profile says, for demands that must run on demand.
    pub launch_on_demand: Vec<Launch>,
    /// Instances to retire.
    pub retire: Vec<Retirement>,
    /// Demands larger than every listed type of their architecture: they can never run.
    pub too_big: Vec<String>,
    /// Demands whose architecture no listed type has: they can never run.
    pub no_type: Vec<String>,
    /// Demands still waiting after this pass (for room on starting or future instances).
    pub waiting: usize,
}

/// Decides one pass. `slots` are our instances, `demands` the waiting tasks.
pub fn plan(slots: &[Slot], demands: &[Demand], policy: &Policy, now: SystemTime) -> Plan {
    let age = |t: SystemTime| now.duration_since(t).unwrap_or_default();
    let mut out = Plan::default();
    let mut gone = vec![false; slots.len()];

    // 1. The broken.
    for (i, s) in slots.iter().enumerate().filter(|(_, s)| !s.retiring) {
        let reason = match &s.registered {
            None if age(s.launched_at) > policy.register_timeout => Some(RetireReason::NeverRegistered),
            Some(r)
                if !(r.usable && s.running)
                    && r.tasks == 0
                    && s.idle_since.is_some_and(|t| age(t) > policy.register_timeout) =>
            {
                Some(RetireReason::Unhealthy)
            }
            _ => None,
        };
        if let Some(reason) = reason {
            gone[i] = true;
            out.retire.push(Retirement { instance: s.id.clone(), reason });
        }
    }

    // 2. Place, largest first, best fit.
    let mut rooms: Vec<Option<(Resources, u32)>> = slots
        .iter()
        .zip(&gone)
        .map(|(s, gone)| match &s.registered {
            Some(r) if r.usable && s.running && !s.retiring && !gone => Some((r.remaining, r.tasks)),
            _ => None,
        })
        .collect();
    let mut order: Vec<&Demand> = demands.iter().collect();
    order.sort_by(|a, b| larger_first(a, b, policy.reference()));
    let mut unplaced = Vec::new();
    for d in order {
        let best = rooms
            .iter()
            .enumerate()
            .filter_map(|(i, room)| room.map(|(left, tasks)| (i, left, tasks)))
            .filter(|(i, left, _)| {
                let s = &slots[*i];
                s.os == d.os && s.arch == d.arch && !(d.on_demand && s.spot) && left.fits(d.need)
            })
            .min_by(|a, b| tighter(a, b, d.need, slots));
        let of_arch = || policy.types.iter().filter(|t| t.arch == d.arch);
        match best {
            Some((i, left, tasks)) => {
                rooms[i] = Some((left.minus(d.need), tasks + 1));
                out.start.push(Placement { demand: d.id.clone(), instance: slots[i].id.clone() });
            }
            None if of_arch().next().is_none() => out.no_type.push(d.id.clone()),
            None if of_arch().all(|t| t.known && !t.capacity.fits(d.need)) => out.too_big.push(d.id.clone()),
            None => unplaced.push(d),
        }
    }
    out.waiting = unplaced.len();
    if policy.rules.patient_scale_out {
        // Patience: a task that room freeing on a busy instance will likely take launches nothing yet.
        // A busy instance of its OS and architecture that could hold it once room frees: one
        // whose whole it fits, and of which it needs less than [`WHOLE`] (else only an empty one
        // could take it, which a busy one seldom becomes).
        let busy = |d: &Demand| {
            rooms.iter().zip(slots).any(|(room, s)| {
                let total = s.registered.as_ref().map_or(Resources::default(), |r| r.total);
                s.os == d.os
                    && s.arch == d.arch
                    && !(d.on_demand && s.spot)
                    && room.is_some_and(|(_, tasks)| tasks > 0)
                    && total.fits(d.need)
                    && d.need.share_of(total) < WHOLE
            })
        };
        unplaced.retain(|d| age(d.since) >= policy.launch_patience || !busy(d));
    }

    // 3. Launch for the rest: first into instances still starting, then into new ones.
    let alive = slots.iter().zip(&gone).filter(|(s, gone)| !s.retiring && !**gone).count() as u32;
    // A demand that must run on demand fits on-demand bins only.
    let mut bins: Vec<Bin> = slots
        .iter()
        .zip(&gone)
        .filter(|(s, gone)| s.registered.is_none() && !s.retiring && !**gone)
        .map(|(s, _)| {
            let capacity =
                policy.types.iter().find(|t| t.name == s.instance_type).map_or(policy.reference(), |t| t.capacity);
            Bin { os: s.os, arch: s.arch, on_demand: !s.spot, capacity, left: capacity, new: false }
        })
        .collect();
    for d in unplaced {
        let fits =
            |b: &&mut Bin| b.os == d.os && b.arch == d.arch && (b.on_demand || !d.on_demand) && b.left.fits(d.need);
        match bins.iter_mut().find(fits) {
            Some(bin) => bin.left = bin.left.minus(d.need),
            None => bins.extend(Bin::new_for(policy, d.os, d.arch, d.on_demand, d.need)),
        }
    }
    // Instances whose room is kept for reruns: not idle while it is.
    let mut kept_for_reruns = vec![false; slots.len()];
    for (os, arch, need) in coming_back(slots) {
        let room = rooms
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| slots[*i].os == os && slots[*i].arch == arch && !slots[*i].spot)
            .find_map(|(i, room)| room.as_mut().filter(|(left, _)| left.fits(need)).map(|room| (i, room)));
        if let Some((i, (left, _))) = room {
            *left = left.minus(need);
            kept_for_reruns[i] = true;
            continue;
        }
        match bins.iter_mut().find(|b| b.os == os && b.arch == arch && b.on_demand && b.left.fits(need)) {
            Some(bin) => bin.left = bin.left.minus(need),
            None => bins.extend(Bin::new_for(policy, os, arch, true, need)),
        }
    }
    let allowed = policy.max.saturating_sub(alive) as usize;
    for bin in bins.iter().filter(|b| b.new).take(allowed) {
        let used = bin.capacity.minus(bin.left);
        let types = policy.cheapest_first().filter(|t| t.arch == bin.arch && (t.capacity.fits(used) || !t.known));
        let mut types: Vec<String> = types.map(|t| t.name.clone()).collect();
        let launch = if bin.on_demand { &mut out.launch_on_demand } else { &mut out.launch };
        if policy.spot && !bin.on_demand && !types.is_empty() {
            let turn = (policy.spot_turn + launch.len()) % types.len();
            types.rotate_left(turn);
        }
        launch.push(Launch { os: bin.os, arch: bin.arch, types });
    }
    if let Some(first) = policy.types.first() {
        while alive + ((out.launch.len() + out.launch_on_demand.len()) as u32) < policy.min.min(policy.max) {
            let mut types = vec![first.name.clone()];
            types.extend(
                policy
                    .cheapest_first()
                    .filter(|t| t.arch == first.arch && t.name != first.name)
                    .map(|t| t.name.clone()),
            );
            out.launch.push(Launch { os: OsClass::Linux, arch: first.arch, types });
        }
    }

    // 4. The idle, longest idle first, down to the minimum: the instance idle the shortest time
    //    is the warm spare and waits `Ec2IdleMinutes`; the others are surplus and go sooner.
    let mut idle: Vec<(usize, SystemTime)> = slots
        .iter()
        .enumerate()
        .filter(|(i, s)| !s.retiring && !gone[*i] && s.registered.is_some() && !kept_for_reruns[*i])
        .filter(|(i, _)| rooms[*i].is_none_or(|(_, tasks)| tasks == 0))
        .filter(|(_, s)| s.registered.as_ref().is_some_and(|r| r.tasks == 0))
        .filter_map(|(i, s)| s.idle_since.map(|t| (i, t)))
        .collect();
    idle.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| slots[a.0].id.cmp(&slots[b.0].id)));
    let slack: f64 = rooms
        .iter()
        .zip(slots)
        .filter_map(|(room, s)| room.zip(s.registered.as_ref()))
        .filter(|((_, tasks), _)| *tasks > 0)
        .map(|((left, _), r)| 1.0 - r.total.minus(left).share_of(r.total))
        .sum();
    let slack_is_the_spare = policy.rules.slack_is_the_spare && slack >= SLACK;
    let surplus = if slack_is_the_spare { Duration::ZERO } else { surplus_idle(policy.idle) };
    let last = idle.len().saturating_sub(1);
    let mut keep = alive + out.launch.len() as u32;
    for (rank, (i, since)) in idle.into_iter().enumerate() {
        let spare = (rank == last || !policy.rules.one_warm_spare) && !slack_is_the_spare;
        let wait = if spare { policy.idle } else { surplus };
        if age(since) < wait {
            continue;
        }
        if keep <= policy.min {
            break;
        }
        keep -= 1;
        out.retire.push(Retirement { instance: slots[i].id.clone(), reason: RetireReason::Idle });
    }
    out
}

/// The work that will come back from instances EC2 Spot warned about: while such an instance
/// still runs in EC2 with tasks, one share per task of what its tasks use (ECS tells the sum, not
/// each task's part: equal shares, rounded up), by its OS and architecture.
fn coming_back(slots: &[Slot]) -> Vec<(OsClass, Arch, Resources)> {
    let mut out = Vec::new();
    for s in slots.iter().filter(|s| s.spot_warned && s.running) {
        let Some(r) = s.registered.as_ref().filter(|r| r.tasks > 0) else { continue };
        let used = r.total.minus(r.remaining);
        let share = Resources::new(used.cpu.div_ceil(r.tasks), used.memory.div_ceil(r.tasks));
        out.extend((0..r.tasks).map(|_| (s.os, s.arch, share)));
    }
    out
}

/// An instance to be, or one still starting, as step 3 packs waiting tasks into it.
#[derive(Debug)]
struct Bin {
    os: OsClass,
    arch: Arch,
    on_demand: bool,
    /// What its type offers.
    capacity: Resources,
    /// What is left of it.
    left: Resources,
    /// A new instance (not one still starting).
    new: bool,
}

impl Bin {
    /// A new instance for `need`: the cheapest listed type of its architecture that holds it
    /// (else the largest of it: its size is unknown, one instance is tried). `None` when no
    /// listed type has the architecture.
    fn new_for(policy: &Policy, os: OsClass, arch: Arch, on_demand: bool, need: Resources) -> Option<Bin> {
        let of_arch = policy.cheapest_first().filter(|t| t.arch == arch);
        let t = of_arch.clone().find(|t| t.capacity.fits(need)).or_else(|| of_arch.clone().next_back())?;
        Some(Bin { os, arch, on_demand, capacity: t.capacity, left: t.capacity.minus(need), new: true })
    }
}

impl Policy {
    /// The listed types, cheapest first: fewest vCPUs, then least memory, then list order.
    pub fn cheapest_first(&self) -> impl DoubleEndedIterator<Item = &TypeOffer> + Clone {
        let mut order: Vec<&TypeOffer> = self.types.iter().collect();
        // A stable sort: equal sizes keep the operator's order.
        order.sort_by_key(|t| (t.capacity.cpu, t.capacity.memory));
        order.into_iter()
    }

    /// The capacity tasks' sizes are compared against when sorting them (the first listed
    /// type's; a c5.large's worth when none is listed).
    pub fn reference(&self) -> Resources {
        self.types.first().map_or(Resources::new(2048, 3741), |t| t.capacity)
    }
}

/// How long an idle instance that is not the warm spare waits before it goes: `Ec2IdleMinutes`
/// when that is shorter, else [`SURPLUS_IDLE`].
pub fn surplus_idle(idle: Duration) -> Duration {
    idle.min(SURPLUS_IDLE)
}

/// How long a surplus idle instance (one of several idle at once, not the last to have run a
/// task) waits before it goes.
pub const SURPLUS_IDLE: Duration = Duration::from_secs(120);

/// Larger dominant share first, then older, then by id (a total order: plans are repeatable).
fn larger_first(a: &Demand, b: &Demand, capacity: Resources) -> Ordering {
    b.need
        .share_of(capacity)
        .partial_cmp(&a.need.share_of(capacity))
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.since.cmp(&b.since))
        .then_with(|| a.id.cmp(&b.id))
}

/// The tighter fit first: less left over (as a share of the instance), then the busier, then id.
fn tighter(a: &(usize, Resources, u32), b: &(usize, Resources, u32), need: Resources, slots: &[Slot]) -> Ordering {
    let leftover = |(i, left, _): &(usize, Resources, u32)| {
        let total = slots[*i].registered.as_ref().map_or(*left, |r| r.total);
        left.minus(need).share_of(total)
    };
    leftover(a)
        .partial_cmp(&leftover(b))
        .unwrap_or(Ordering::Equal)
        .then_with(|| b.2.cmp(&a.2))
        .then_with(|| slots[a.0].id.cmp(&slots[b.0].id))
}

/// Whether an instance's idle clock runs: registered, no task by ECS's count, and nothing we
/// placed on it within `grace` (ECS may not count a task it just accepted yet).
pub fn idle_since(
    previous: Option<SystemTime>,
    tasks: u32,
    last_placed: Option<SystemTime>,
    grace: Duration,
    now: SystemTime,
) -> Option<SystemTime> {
    let placed_recently = last_placed.is_some_and(|t| now.duration_since(t).unwrap_or_default() < grace);
    if tasks > 0 || placed_recently {
        None
    } else {
        Some(previous.unwrap_or(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: SystemTime = SystemTime::UNIX_EPOCH;
    const BOX: Resources = Resources::new(4096, 7482);
    const JOB: Resources = Resources::new(1024, 1800);

    fn policy() -> Policy {
        Policy {
            min: 0,
            max: 8,
            idle: Duration::from_secs(600),
            register_timeout: Duration::from_secs(300),
            launch_patience: LAUNCH_PATIENCE,
            types: vec![offer("c5.xlarge", BOX, Arch::X86_64)],
            spot: false,
            spot_turn: 0,
            rules: Rules::default(),
        }
    }

    fn offer(name: &str, capacity: Resources, arch: Arch) -> TypeOffer {
        TypeOffer { name: name.into(), capacity, arch, known: true }
    }

    fn oses(launches: &[Launch]) -> Vec<OsClass> {
        launches.iter().map(|l| l.os).collect()
    }

    fn at(secs: u64) -> SystemTime {
        T0 + Duration::from_secs(secs)
    }

    fn demand(id: &str, need: Resources) -> Demand {
        Demand { id: id.into(), need, os: OsClass::Linux, arch: Arch::X86_64, since: T0, on_demand: false }
    }

    fn demands(n: usize) -> Vec<Demand> {
        (0..n).map(|i| demand(&format!("d{i:02}"), JOB)).collect()
    }

    fn starting(id: &str, launched: u64) -> Slot {
        Slot {
            id: id.into(),
            os: OsClass::Linux,
            instance_type: "c5.xlarge".into(),
            arch: Arch::X86_64,
            launched_at: at(launched),
            running: false,
            registered: None,
            idle_since: None,
            retiring: false,
            spot: false,
            spot_warned: false,
        }
    }

    fn registered(id: &str, remaining: Resources, tasks: u32, idle_since: Option<u64>) -> Slot {
        Slot {
            id: id.into(),
            os: OsClass::Linux,
            instance_type: "c5.xlarge".into(),
            arch: Arch::X86_64,
            launched_at: T0,
            running: true,
            registered: Some(Registered { usable: true, total: BOX, remaining, tasks }),
            idle_since: idle_since.map(at),
            retiring: false,
            spot: false,
            spot_warned: false,
        }
    }

    #[test]
    fn work_whose_job_spot_interrupted_goes_to_on_demand_instances_only() {
        let spot = Slot { spot: true, ..registered("spot", BOX, 0, None) };
        let rerun = Demand { on_demand: true, ..demand("rerun", JOB) };
        let p = plan(&[spot], &[rerun.clone(), demand("other", JOB)], &policy(), T0);
        assert_eq!(p.start, vec![Placement { demand: "other".into(), instance: "spot".into() }]);
        assert_eq!((p.launch.len(), oses(&p.launch_on_demand)), (0, vec![OsClass::Linux]));
        // A starting on-demand instance takes it; a starting spot one does not.
        let starting_spot = Slot { spot: true, ..starting("s", 0) };
        let p = plan(&[starting_spot], std::slice::from_ref(&rerun), &policy(), T0);
        assert_eq!(oses(&p.launch_on_demand), vec![OsClass::Linux]);
        let p = plan(&[starting("od", 0)], std::slice::from_ref(&rerun), &policy(), T0);
        assert!(p.launch.is_empty() && p.launch_on_demand.is_empty(), "{p:?}");
        // And an on-demand instance with room places it.
        let p = plan(&[registered("od", BOX, 0, None)], &[rerun], &policy(), T0);
        assert_eq!(p.start, vec![Placement { demand: "rerun".into(), instance: "od".into() }]);
    }

    #[test]
    fn a_spot_warning_launches_on_demand_room_for_the_reruns_before_the_instance_goes() {
        let two_used = BOX.minus(JOB).minus(JOB);
        let warned = Slot { spot: true, spot_warned: true, ..registered("doomed", two_used, 2, None) };
        // Drained (not usable): nothing is placed on it, and its two tasks' room is launched now.
        let draining =
            Slot { registered: warned.registered.clone().map(|r| Registered { usable: false, ..r }), ..warned.clone() };
        let p = plan(std::slice::from_ref(&draining), &[], &policy(), T0);
        assert_eq!((p.launch.len(), oses(&p.launch_on_demand)), (0, vec![OsClass::Linux]), "{p:?}");
        assert_eq!(p.waiting, 0, "nothing waits yet: the reruns are not asked for");
        // On-demand room already running takes them: nothing launched. Spot room does not.
        let od = registered("od", BOX.minus(JOB), 1, None);
        let p = plan(&[draining.clone(), od], &[], &policy(), T0);
        assert!(p.launch_on_demand.is_empty(), "{p:?}");
        let spot_room = Slot { spot: true, ..registered("spot", BOX, 0, None) };
        let p = plan(&[draining.clone(), spot_room], &[], &policy(), T0);
        assert_eq!(oses(&p.launch_on_demand), vec![OsClass::Linux]);
        // An on-demand instance already starting counts, and so does Ec2MaxInstances.
        let p = plan(&[draining.clone(), starting("od", 0)], &[], &policy(), T0);
        assert!(p.launch_on_demand.is_empty(), "{p:?}");
        let p = plan(std::slice::from_ref(&draining), &[], &Policy { max: 1, ..policy() }, T0);
        assert!(p.launch_on_demand.is_empty(), "{p:?}");
        // Once EC2 takes it (or its tasks are gone) the reruns are real demands, not counted twice.
        let p = plan(&[Slot { running: false, ..draining.clone() }], &[], &policy(), T0);
        assert!(p.launch_on_demand.is_empty(), "{p:?}");
        let emptied = Slot { spot: true, spot_warned: true, ..registered("doomed", BOX, 0, None) };
        let p = plan(&[emptied], &[], &policy(), T0);
        assert!(p.launch_on_demand.is_empty(), "{p:?}");
        // Two reruns already waiting and three tasks coming back: five quarters, two instances.
        let three_used = BOX.minus(JOB).minus(JOB).minus(JOB);
        let busy = Slot { spot: true, spot_warned: true, ..registered("doomed", three_used, 3, None) };
        let reruns: Vec<Demand> = (0..2).map(|i| Demand { on_demand: true, ..demand(&format!("r{i}"), JOB) }).collect();
        let p = plan(&[busy], &reruns, &policy(), T0);
        assert_eq!(p.launch_on_demand.len(), 2, "{p:?}");
    }

    #[test]
    fn on_demand_room_kept_for_reruns_is_not_retired_as_idle() {
        let two_used = BOX.minus(JOB).minus(JOB);
        let draining = Slot {
            spot: true,
            spot_warned: true,
            registered: Some(Registered { usable: false, total: BOX, remaining: two_used, tasks: 2 }),
            ..registered("doomed", two_used, 2, None)
        };
        // The replacement launched during the warning, idle since it registered, long enough to
        // go (slack on a busy spot instance would even make it go at once).
        let replacement = registered("od", BOX, 0, Some(0));
        let slack = Slot { spot: true, ..registered("spot", BOX.minus(JOB), 1, None) };
        let late = T0 + Duration::from_secs(3600);
        let p = plan(&[draining.clone(), replacement.clone(), slack.clone()], &[], &policy(), late);
        assert!(p.retire.is_empty() && p.launch_on_demand.is_empty(), "{p:?}");
        // Once EC2 has taken the warned instance it is an idle instance like any other.
        let taken = Slot { running: false, ..draining };
        let p = plan(&[taken, replacement, slack], &[], &policy(), late);
        assert_eq!(p.retire.iter().map(|r| r.instance.as_str()).collect::<Vec<_>>(), ["od"], "{p:?}");
    }

    #[test]
    fn thirty_tasks_four_to_an_instance_launch_eight() {
        let p = plan(&[], &demands(30), &policy(), T0);
        assert_eq!(p.launch.len(), 8);
        assert_eq!((p.start.len(), p.waiting), (0, 30));
    }

    #[test]
    fn instances_still_starting_absorb_waiting_work_before_new_launches() {
        let slots: Vec<Slot> = (0..3).map(|i| starting(&format!("i-{i}"), 0)).collect();
        let p = plan(&slots, &demands(14), &policy(), at(10));
        assert_eq!(p.launch.len(), 1, "12 fit the 3 starting instances, 2 need one more");
        let p = plan(&slots, &demands(12), &policy(), at(10));
        assert!(p.launch.is_empty());
    }

    #[test]
    fn never_more_than_max_counting_starting_instances() {
        let slots: Vec<Slot> = (0..7).map(|i| starting(&format!("i-{i}"), 0)).collect();
        let p = plan(&slots, &demands(60), &policy(), at(10));
        assert_eq!(p.launch.len(), 1);
        let mut full = policy();
        full.max = 7;
        assert!(plan(&slots, &demands(60), &full, at(10)).launch.is_empty());
    }

    #[test]
    fn places_largest_first_on_the_tightest_fit() {
        let slots =
            vec![registered("i-empty", BOX, 0, Some(0)), registered("i-half", Resources::new(2048, 3700), 2, None)];
        let big = demand("big", Resources::new(3072, 3000));
        let small = demand("small", Resources::new(1024, 1800));
        let p = plan(&slots, &[small, big], &policy(), at(1));
        assert_eq!(
            p.start,
            vec![
                Placement { demand: "big".into(), instance: "i-empty".into() },
                Placement { demand: "small".into(), instance: "i-half".into() },
            ]
        );
        assert!(p.launch.is_empty() && p.retire.is_empty());
    }

    #[test]
    fn placements_use_up_room_within_one_pass() {
        let slots = vec![registered("i-a", BOX, 0, None)];
        let impatient = Policy { rules: Rules { patient_scale_out: false, ..Rules::default() }, ..policy() };
        let p = plan(&slots, &demands(5), &impatient, at(1));
        assert_eq!(p.start.len(), 4);
        assert_eq!((p.waiting, p.launch.len()), (1, 1));
        let p = plan(&slots, &demands(5), &policy(), at(1));
        assert_eq!((p.start.len(), p.waiting, p.launch.len()), (4, 1, 0), "i-a is busy now: the fifth waits for it");
    }

    #[test]
    fn patient_scale_out_waits_for_room_on_a_busy_instance_before_launching() {
        let full = vec![registered("i-full", Resources::new(0, 282), 4, None)];
        let p = plan(&full, &demands(1), &policy(), at(299));
        assert_eq!((p.waiting, p.launch.len()), (1, 0), "a task of i-full may end first: {p:?}");
        let p = plan(&full, &demands(1), &policy(), at(300));
        assert_eq!(p.launch.len(), 1, "waited Ec2ScaleOutWaitSeconds: launched for");
        let impatient = Policy { rules: Rules { patient_scale_out: false, ..Rules::default() }, ..policy() };
        assert_eq!(plan(&full, &demands(1), &impatient, at(1)).launch.len(), 1);
        // Ec2ScaleOutWaitSeconds 0 (the operator's choice): at once; 60: after a minute.
        let at_once = Policy { launch_patience: Duration::ZERO, ..policy() };
        assert_eq!(plan(&full, &demands(1), &at_once, at(0)).launch.len(), 1);
        let minute = Policy { launch_patience: Duration::from_secs(60), ..policy() };
        assert_eq!(plan(&full, &demands(1), &minute, at(59)).launch.len(), 0);
        assert_eq!(plan(&full, &demands(1), &minute, at(60)).launch.len(), 1);
        // A task needing a whole instance: no busy instance is likely to empty for it soon.
        let whole = demand("whole", Resources::new(4096, 7000));
        assert_eq!(plan(&full, &[whole], &policy(), at(1)).launch.len(), 1);
        // No busy instance that could take it: of another OS, spot for work that must run on
        // demand, or none busy at all.
        let win = Demand { os: OsClass::Windows, ..demand("w", JOB) };
        assert_eq!(oses(&plan(&full, &[win], &policy(), at(1)).launch), vec![OsClass::Windows]);
        let spot = vec![Slot { spot: true, ..full[0].clone() }];
        let rerun = Demand { on_demand: true, ..demand("rerun", JOB) };
        assert_eq!(oses(&plan(&spot, &[rerun], &policy(), at(1)).launch_on_demand), vec![OsClass::Linux]);
        // Nor a busy instance of another architecture.
        let arm_work = Demand { arch: Arch::Arm64, ..demand("a", JOB) };
        let p = plan(&full, &[arm_work], &mixed(), at(1));
        assert_eq!(p.launch.iter().map(|l| l.arch).collect::<Vec<_>>(), vec![Arch::Arm64]);
        assert_eq!(plan(&[], &demands(1), &policy(), at(1)).launch.len(), 1);
        // A starting instance still takes it into account (nothing more launched).
        let p = plan(&[full[0].clone(), starting("i-new", 200)], &demands(1), &policy(), at(400));
        assert!(p.launch.is_empty(), "{p:?}");
    }

    #[test]
    fn room_on_busy_instances_is_the_warm_spare() {
        let idle = registered("i-idle", BOX, 0, Some(0));
        let half = registered("i-half", Resources::new(2048, 3682), 2, None);
        let full = registered("i-full", Resources::new(0, 282), 4, None);
        let retired = |p: Plan| p.retire.into_iter().map(|r| r.instance).collect::<Vec<_>>();
        let slack = [idle.clone(), half.clone()];
        assert_eq!(retired(plan(&slack, &[], &policy(), at(1))), ["i-idle"], "half an instance free: no spare kept");
        let tight = [idle.clone(), full.clone()];
        assert!(plan(&tight, &[], &policy(), at(599)).retire.is_empty(), "no room elsewhere: i-idle is the spare");
        assert_eq!(retired(plan(&tight, &[], &policy(), at(600))), ["i-idle"]);
        let off = Policy { rules: Rules { slack_is_the_spare: false, ..Rules::default() }, ..policy() };
        assert!(plan(&slack, &[], &off, at(599)).retire.is_empty());
        // Ec2MinInstances still counts.
        assert!(plan(&slack, &[], &Policy { min: 2, ..policy() }, at(1)).retire.is_empty());
        // Room taken in this pass is not slack.
        let p = plan(&slack, &demands(2), &policy(), at(1));
        assert_eq!(p.start.len(), 2);
        assert!(p.retire.is_empty(), "i-half is full now, so i-idle stays the spare: {p:?}");
    }

    #[test]
    fn os_must_match() {
        let slots = vec![registered("i-linux", BOX, 0, None)];
        let win = Demand { os: OsClass::Windows, ..demand("w", JOB) };
        let p = plan(&slots, &[win], &policy(), at(1));
        assert!(p.start.is_empty());
        assert_eq!(oses(&p.launch), vec![OsClass::Windows]);
    }

    #[test]
    fn a_task_larger_than_an_instance_is_refused_not_launched_for() {
        let p = plan(&[], &[demand("huge", Resources::new(8192, 1000))], &policy(), T0);
        assert_eq!(p.too_big, vec!["huge".to_string()]);
        assert!(p.launch.is_empty());
        let mut unknown = policy();
        unknown.types[0].known = false;
        let p = plan(&[], &[demand("huge", Resources::new(8192, 1000))], &unknown, T0);
        assert_eq!((p.too_big.len(), p.launch.len()), (0, 1), "unknown capacity: try one instance");
    }

    #[test]
    fn an_instance_that_never_registers_is_retired_after_the_timeout_and_replaced() {
        let slots = vec![starting("i-stuck", 0)];
        let p = plan(&slots, &demands(2), &policy(), at(300));
        assert!(p.retire.is_empty() && p.launch.is_empty(), "not before the timeout");
        let p = plan(&slots, &demands(2), &policy(), at(301));
        assert_eq!(p.retire, vec![Retirement { instance: "i-stuck".into(), reason: RetireReason::NeverRegistered }]);
        assert_eq!(p.launch.len(), 1, "its waiting work gets a new instance");
    }

    #[test]
    fn idle_instances_retire_after_the_idle_time_down_to_the_minimum() {
        let slots = vec![
            registered("i-a", BOX, 0, Some(0)),
            registered("i-b", BOX, 0, Some(100)),
            registered("i-busy", Resources::new(3072, 5682), 1, None),
        ];
        let every_idle_kept = Policy { rules: Rules::NONE, ..policy() };
        assert!(plan(&slots, &[], &every_idle_kept, at(599)).retire.is_empty());
        let p = plan(&slots, &[], &policy(), at(700));
        assert_eq!(p.retire.iter().map(|r| r.instance.as_str()).collect::<Vec<_>>(), ["i-a", "i-b"]);
        let mut warm = policy();
        warm.min = 2;
        let p = plan(&slots, &[], &warm, at(700));
        assert_eq!(
            p.retire.iter().map(|r| r.instance.as_str()).collect::<Vec<_>>(),
            ["i-a"],
            "longest idle goes first"
        );
    }

    #[test]
    fn one_warm_spare_waits_the_idle_time_the_surplus_goes_after_two_minutes() {
        let slots = vec![
            registered("i-old", BOX, 0, Some(0)),
            registered("i-mid", BOX, 0, Some(30)),
            registered("i-last", BOX, 0, Some(60)),
            registered("i-busy", Resources::new(512, 900), 3, None),
        ];
        let retired = |p: Plan| p.retire.into_iter().map(|r| r.instance).collect::<Vec<_>>();
        assert!(plan(&slots, &[], &policy(), at(119)).retire.is_empty(), "not before two minutes");
        assert_eq!(retired(plan(&slots, &[], &policy(), at(120))), ["i-old"], "paced: one by one as each turns 2 min");
        assert_eq!(retired(plan(&slots, &[], &policy(), at(500))), ["i-old", "i-mid"], "i-last is the warm spare");
        assert_eq!(retired(plan(&slots, &[], &policy(), at(660))), ["i-old", "i-mid", "i-last"]);
        // Work for one of them this pass: it stays, and the spare is the next freshest.
        let p = plan(&slots, &[demand("d", Resources::new(4096, 7000))], &policy(), at(500));
        assert_eq!(p.start, vec![Placement { demand: "d".into(), instance: "i-last".into() }], "{p:?}");
        assert_eq!(retired(p), ["i-old"], "i-mid is now the spare");
        // The minimum counts the spare too.
        let warm = Policy { min: 3, ..policy() };
        assert_eq!(retired(plan(&slots, &[], &warm, at(500))), ["i-old"]);
        // Ec2IdleMinutes shorter than two minutes: everyone goes after it.
        let short = Policy { idle: Duration::from_secs(60), ..policy() };
        assert_eq!(retired(plan(&slots, &[], &short, at(120))), ["i-old", "i-mid", "i-last"]);
    }

    #[test]
    fn an_idle_instance_given_work_in_this_pass_stays() {
        let slots = vec![registered("i-a", BOX, 0, Some(0))];
        let p = plan(&slots, &demands(1), &policy(), at(10_000));
        assert_eq!(p.start.len(), 1);
        assert!(p.retire.is_empty());
    }

    #[test]
    fn the_minimum_is_kept_warm() {
        let mut warm = policy();
        warm.min = 2;
        assert_eq!(oses(&plan(&[], &[], &warm, T0).launch), vec![OsClass::Linux, OsClass::Linux]);
        assert_eq!(plan(&[starting("i-a", 0)], &[], &warm, T0).launch.len(), 1);
    }

    #[test]
    fn unusable_instances_get_no_work_and_retire_when_empty_long_enough() {
        let mut drained = registered("i-d", BOX, 0, Some(0));
        drained.registered.as_mut().unwrap().usable = false;
        let p = plan(std::slice::from_ref(&drained), &demands(1), &policy(), at(10));
        assert!(p.start.is_empty());
        assert_eq!(p.launch.len(), 1);
        let p = plan(&[drained], &[], &policy(), at(301));
        assert_eq!(p.retire[0].reason, RetireReason::Unhealthy);
    }

    #[test]
    fn instances_being_retired_are_not_counted_or_used() {
        let mut going = registered("i-going", BOX, 0, Some(0));
        going.retiring = true;
        let mut tight = policy();
        tight.max = 1;
        let p = plan(&[going], &demands(1), &tight, at(10));
        assert!(p.start.is_empty() && p.retire.is_empty());
        assert_eq!(p.launch.len(), 1);
    }

    #[test]
    fn plans_are_idempotent() {
        let slots = vec![registered("i-a", BOX, 0, Some(0)), starting("i-b", 5)];
        let d = demands(6);
        assert_eq!(plan(&slots, &d, &policy(), at(20)), plan(&slots, &d, &policy(), at(20)));
    }

    /// c5.large, c5.xlarge, c6g.xlarge and m5.xlarge, listed in that order.
    fn mixed() -> Policy {
        Policy {
            types: vec![
                offer("m5.xlarge", Resources::new(4096, 14964), Arch::X86_64),
                offer("c5.xlarge", BOX, Arch::X86_64),
                offer("c6g.xlarge", BOX, Arch::Arm64),
                offer("c5.large", Resources::new(2048, 3741), Arch::X86_64),
            ],
            ..policy()
        }
    }

    fn arm(id: &str, need: Resources) -> Demand {
        Demand { arch: Arch::Arm64, ..demand(id, need) }
    }

    fn types(l: &Launch) -> Vec<&str> {
        l.types.iter().map(String::as_str).collect()
    }

    #[test]
    fn tasks_run_only_on_instances_of_their_architecture() {
        let x86 = registered("i-x86", BOX, 0, None);
        let graviton =
            Slot { instance_type: "c6g.xlarge".into(), arch: Arch::Arm64, ..registered("i-arm", BOX, 0, None) };
        let p = plan(&[x86.clone(), graviton], &[arm("a", JOB), demand("x", JOB)], &mixed(), at(1));
        assert_eq!(
            p.start,
            vec![
                Placement { demand: "a".into(), instance: "i-arm".into() },
                Placement { demand: "x".into(), instance: "i-x86".into() },
            ]
        );
        // Only an x86 instance with room: the ARM64 task gets a new c6g, not the x86 room.
        let p = plan(&[x86], &[arm("a", JOB)], &mixed(), at(1));
        assert!(p.start.is_empty());
        assert_eq!(p.launch.len(), 1);
        assert_eq!((p.launch[0].arch, types(&p.launch[0])), (Arch::Arm64, vec!["c6g.xlarge"]));
        // A starting x86 instance does not absorb it either.
        let p = plan(&[starting("i-s", 0)], &[arm("a", JOB)], &mixed(), at(1));
        assert_eq!(p.launch.iter().map(|l| l.arch).collect::<Vec<_>>(), vec![Arch::Arm64]);
    }

    #[test]
    fn reruns_coming_back_from_a_warned_graviton_instance_get_graviton_room() {
        let two_used = BOX.minus(JOB).minus(JOB);
        let warned = Slot {
            spot: true,
            spot_warned: true,
            instance_type: "c6g.xlarge".into(),
            arch: Arch::Arm64,
            ..registered("doomed", two_used, 2, None)
        };
        // Room on an on-demand x86 instance does not take them.
        let x86_room = registered("od", BOX, 0, None);
        let p = plan(&[warned, x86_room], &[], &mixed(), T0);
        assert_eq!(p.launch_on_demand.len(), 1, "{p:?}");
        assert_eq!((p.launch_on_demand[0].arch, types(&p.launch_on_demand[0])), (Arch::Arm64, vec!["c6g.xlarge"]));
    }

    #[test]
    fn an_architecture_no_listed_type_has_is_refused_not_launched_for() {
        let p = plan(&[], &[arm("a", JOB)], &policy(), T0);
        assert_eq!(p.no_type, vec!["a".to_string()]);
        assert!(p.launch.is_empty() && p.too_big.is_empty());
        let p = plan(&[], &[arm("huge", Resources::new(8192, 1000))], &mixed(), T0);
        assert_eq!(p.too_big, vec!["huge".to_string()], "larger than every arm64 type");
    }

    #[test]
    fn a_new_instance_gets_the_cheapest_listed_type_that_holds_its_task() {
        // Small: c5.large (2 vCPUs) though listed last; the larger x86 types follow as fallbacks,
        // c5.xlarge before m5.xlarge (same vCPUs, less memory).
        let p = plan(&[], &[demand("small", JOB)], &mixed(), T0);
        assert_eq!(types(&p.launch[0]), vec!["c5.large", "c5.xlarge", "m5.xlarge"]);
        // 3 vCPUs: c5.xlarge; m5.xlarge only as a fallback.
        let p = plan(&[], &[demand("mid", Resources::new(3072, 4000))], &mixed(), T0);
        assert_eq!(types(&p.launch[0]), vec!["c5.xlarge", "m5.xlarge"]);
        // 10 GiB: only m5.xlarge holds it.
        let p = plan(&[], &[demand("big", Resources::new(2048, 10_000))], &mixed(), T0);
        assert_eq!(types(&p.launch[0]), vec!["m5.xlarge"]);
        // Equal sizes keep the list's order.
        let twins = Policy {
            types: vec![offer("c5a.xlarge", BOX, Arch::X86_64), offer("c5.xlarge", BOX, Arch::X86_64)],
            ..policy()
        };
        assert_eq!(types(&plan(&[], &[demand("d", JOB)], &twins, T0).launch[0]), vec!["c5a.xlarge", "c5.xlarge"]);
        // Tasks share the new instance first-fit: two 1024/1800 tasks fit one c5.large.
        let p = plan(&[], &demands(2), &mixed(), T0);
        assert_eq!(p.launch.len(), 1);
        assert_eq!(types(&p.launch[0]), vec!["c5.large", "c5.xlarge", "m5.xlarge"]);
        // A starting instance absorbs work by its own type's capacity (a c5.large: two tasks).
        let small = Slot { instance_type: "c5.large".into(), ..starting("i-s", 0) };
        let p = plan(&[small], &demands(3), &mixed(), at(1));
        assert_eq!(p.launch.len(), 1, "two fit the starting c5.large, one needs a new instance");
    }

    #[test]
    fn patience_waits_only_for_busy_instances_large_enough_to_hold_the_task() {
        let small_total = Resources::new(2048, 3741);
        let busy_small = Slot {
            instance_type: "c5.large".into(),
            registered: Some(Registered {
                usable: true,
                total: small_total,
                remaining: Resources::new(0, 0),
                tasks: 2,
            }),
            ..registered("i-small", BOX, 2, None)
        };
        // 3 vCPUs never fit the busy c5.large: a c5.xlarge is launched at once.
        let p = plan(std::slice::from_ref(&busy_small), &[demand("mid", Resources::new(3072, 4000))], &mixed(), at(1));
        assert_eq!(p.launch.len(), 1, "{p:?}");
        assert_eq!(types(&p.launch[0]), vec!["c5.xlarge", "m5.xlarge"]);
        // A task the busy c5.large could hold once a task ends waits for it.
        let p = plan(&[busy_small], &[demand("quarter", JOB)], &mixed(), at(1));
        assert!(p.launch.is_empty(), "{p:?}");
    }

    #[test]
    fn the_minimum_is_kept_warm_with_the_first_listed_type() {
        let warm = Policy { min: 1, ..mixed() };
        let p = plan(&[], &[], &warm, T0);
        assert_eq!(types(&p.launch[0]), vec!["m5.xlarge", "c5.large", "c5.xlarge"]);
    }

    #[test]
    fn spot_launches_are_spread_over_the_fitting_types() {
        let spot = Policy {
            types: vec![
                offer("c5.xlarge", BOX, Arch::X86_64),
                offer("c5a.xlarge", BOX, Arch::X86_64),
                offer("m5.xlarge", Resources::new(4096, 14964), Arch::X86_64),
            ],
            spot: true,
            ..policy()
        };
        let full = Resources::new(4096, 7000);
        let work: Vec<Demand> = (0..4).map(|i| demand(&format!("d{i}"), full)).collect();
        let p = plan(&[], &work, &spot, T0);
        let first: Vec<&str> = p.launch.iter().map(|l| l.types[0].as_str()).collect();
        assert_eq!(first, ["c5.xlarge", "c5a.xlarge", "m5.xlarge", "c5.xlarge"]);
        assert!(p.launch.iter().all(|l| l.types.len() == 3), "every fitting type stays a fallback");
        // The turn carries over between passes.
        let p = plan(&[], &work[..1], &Policy { spot_turn: 2, ..spot.clone() }, T0);
        assert_eq!(types(&p.launch[0]), vec!["m5.xlarge", "c5.xlarge", "c5a.xlarge"]);
        // On-demand launches are never rotated: cheapest first.
        let p = plan(&[], &work[..2], &Policy { spot: false, ..spot }, T0);
        assert!(p.launch.iter().all(|l| l.types[0] == "c5.xlarge"), "{p:?}");
    }

    #[test]
    fn the_idle_clock() {
        let grace = Duration::from_secs(60);
        assert_eq!(idle_since(None, 0, None, grace, at(5)), Some(at(5)));
        assert_eq!(idle_since(Some(at(1)), 0, None, grace, at(5)), Some(at(1)));
        assert_eq!(idle_since(Some(at(1)), 1, None, grace, at(5)), None);
        assert_eq!(idle_since(None, 0, Some(at(0)), grace, at(30)), None, "just placed: ECS may not count it yet");
        assert_eq!(idle_since(None, 0, Some(at(0)), grace, at(61)), Some(at(61)));
    }
}
