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
//!    With patient scale-out (`impatient`), a task that did not fit waits up to
//!    `Ec2ScaleOutWaitSeconds` for room to free on a busy instance of its OS and architecture
//!    that could hold it (one needing a whole instance waits for a busy one to empty) before
//!    step 3 launches for it; but only while the work waiting, oldest first, is at most
//!    [`WAITING_WORK`] of the work those instances run: past that the load is rising, and the
//!    rest launch at once.
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
use std::collections::HashMap;
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
    /// instance of its OS may free room for it (most of the time one does, sooner).
    pub patient_scale_out: bool,
    /// With patient scale-out, the work waiting for room is at most [`WAITING_WORK`] of the work
    /// running on the busy instances (of its OS and architecture); the oldest tasks wait, the rest
    /// launch at once. Room frees in proportion to the work running: a queue longer than that
    /// means rising load, which only new instances serve.
    pub waiting_bounded: bool,
    /// With patient scale-out, a task that needs [`WHOLE`] of an instance waits too, for a busy
    /// one to empty (best fit drains the emptiest), rather than launching at once.
    pub whole_tasks_wait: bool,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            one_warm_spare: true,
            slack_is_the_spare: true,
            patient_scale_out: true,
            waiting_bounded: true,
            whole_tasks_wait: true,
        }
    }
}

impl Rules {
    /// None of the cost rules: every idle instance kept `Ec2IdleMinutes`, an instance launched
    /// for every task that does not fit (the plan's first rule alone).
    pub const NONE: Rules = Rules {
        one_warm_spare: false,
        slack_is_the_spare: false,
        patient_scale_out: false,
        waiting_bounded: false,
        whole_tasks_wait: false,
    };
}

/// Free room on the busy instances, summed as shares of one instance, from which no idle
/// instance is kept as the warm spare ([`Rules::slack_is_the_spare`]).
pub const SLACK: f64 = 0.25;

/// How long a waiting task waits for room to free on a busy instance before an instance is
/// launched for it ([`Rules::patient_scale_out`]): `Ec2ScaleOutWaitSeconds`' default.
pub const LAUNCH_PATIENCE: Duration = Duration::from_secs(crate::settings::SCALE_OUT_WAIT_SECONDS as u64);

/// The dominant share of an instance from which a task needs an empty instance: without
/// [`Rules::whole_tasks_wait`], it launches at once.
pub const WHOLE: f64 = 0.9;

/// The most work that waits for room, as a share of the work running on the busy instances
/// ([`Rules::waiting_bounded`]); past it, waiting tasks are launched for at once. Measured on the
/// cost benchmark's 20 generated days (README "EC2 cost"): 0.625 waits less and costs more,
/// 0.875 the reverse.
pub const WAITING_WORK: f64 = 0.75;

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
    /// Stopped with launch settings the cluster profile no longer has (`plan::parked`).
    Stale,
    /// Stopped, beyond `Ec2StoppedInstances`.
    SurplusStopped,
    /// Of EC2 settings no served cluster profile has any more (`pools.rs`), with no task.
    LeftOver,
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
            RetireReason::Stale => {
                "it was stopped with launch settings (AMI, user data, instance type...) the cluster profile no longer has"
            }
            RetireReason::SurplusStopped => "more instances were stopped than Ec2StoppedInstances keeps",
            RetireReason::LeftOver => {
                "no cluster profile launches with the EC2 settings it was launched with any more (the profile was edited or deleted, or left EC2), and it ran no task"
            }
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
    let mut pass = Pass { slots, policy, now, gone: vec![false; slots.len()], rooms: Vec::new(), out: Plan::default() };
    pass.retire_broken();
    let mut unplaced = pass.place(demands);
    pass.out.waiting = unplaced.len();
    if policy.rules.patient_scale_out {
        unplaced = pass.impatient(unplaced);
    }
    let kept_for_reruns = pass.launch(unplaced);
    pass.retire_idle(&kept_for_reruns);
    pass.out
}

/// One pass's state, handed from step to step.
struct Pass<'a> {
    slots: &'a [Slot],
    policy: &'a Policy,
    now: SystemTime,
    /// Instances retired in step 1, by index in `slots`.
    gone: Vec<bool>,
    /// Each usable instance's room left and task count, as placements (and room kept for reruns)
    /// use it up; `None` for the others. Set in step 2.
    rooms: Vec<Option<(Resources, u32)>>,
    out: Plan,
}

impl Pass<'_> {
    fn age(&self, t: SystemTime) -> Duration {
        self.now.duration_since(t).unwrap_or_default()
    }

    /// Instances neither being retired nor retired in this pass.
    fn alive(&self) -> u32 {
        u32::try_from(self.slots.iter().zip(&self.gone).filter(|(s, gone)| !s.retiring && !**gone).count())
            .unwrap_or(u32::MAX)
    }

    /// The usable instances with a task (counting this pass's placements), each with what it
    /// offers in all and what its tasks use.
    fn busy(&self) -> impl Iterator<Item = (&Slot, Resources, Resources)> {
        self.rooms
            .iter()
            .zip(self.slots)
            .filter_map(|(room, s)| room.zip(s.registered.as_ref()).map(|(room, r)| (s, room, r.total)))
            .filter(|(_, (_, tasks), _)| *tasks > 0)
            .map(|(s, (left, _), total)| (s, total, total.minus(left)))
    }

    /// 1. The broken: never registered, or unusable with no task, for the register timeout.
    fn retire_broken(&mut self) {
        let timeout = self.policy.register_timeout;
        for (i, s) in self.slots.iter().enumerate().filter(|(_, s)| !s.retiring) {
            let reason = match &s.registered {
                None if self.age(s.launched_at) > timeout => Some(RetireReason::NeverRegistered),
                Some(r)
                    if !(r.usable && s.running)
                        && r.tasks == 0
                        && s.idle_since.is_some_and(|t| self.age(t) > timeout) =>
                {
                    Some(RetireReason::Unhealthy)
                }
                _ => None,
            };
            if let Some(reason) = reason {
                self.gone[i] = true;
                self.out.retire.push(Retirement { instance: s.id.clone(), reason });
            }
        }
    }

    /// 2. Place, largest first, best fit. Returns the demands that fit no usable instance (the
    ///    ones no listed type could ever hold are refused in the plan instead).
    fn place<'d>(&mut self, demands: &'d [Demand]) -> Vec<&'d Demand> {
        let (slots, policy) = (self.slots, self.policy);
        self.rooms = slots
            .iter()
            .zip(&self.gone)
            .map(|(s, gone)| match &s.registered {
                Some(r) if r.usable && s.running && !s.retiring && !gone => Some((r.remaining, r.tasks)),
                _ => None,
            })
            .collect();
        let mut order: Vec<&Demand> = demands.iter().collect();
        order.sort_by(|a, b| larger_first(a, b, policy.reference()));
        let mut unplaced = Vec::new();
        for d in order {
            let best = self
                .rooms
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
                    self.rooms[i] = Some((left.minus(d.need), tasks + 1));
                    self.out.start.push(Placement { demand: d.id.clone(), instance: slots[i].id.clone() });
                }
                None if of_arch().next().is_none() => self.out.no_type.push(d.id.clone()),
                None if of_arch().all(|t| t.known && !t.capacity.fits(d.need)) => self.out.too_big.push(d.id.clone()),
                None => unplaced.push(d),
            }
        }
        unplaced
    }

    /// 2b. Patient scale-out: of the tasks that did not fit, those to launch for now. The others wait
    /// for room to free on a busy instance of their OS and architecture, oldest first, while:
    /// - they have waited less than `Ec2ScaleOutWaitSeconds`;
    /// - such an instance could hold them once room frees (its whole fits them; unless
    ///   [`Rules::whole_tasks_wait`], they need less than [`WHOLE`] of it);
    /// - and, with [`Rules::waiting_bounded`], the work waiting so far, theirs included, is at most
    ///   [`WAITING_WORK`] of the work running on those instances. More than that will not find room
    ///   soon (the load is rising), so it is launched for at once.
    ///
    /// Work is counted in shares of the first listed type (the dominant one of CPU and memory).
    fn impatient<'d>(&self, unplaced: Vec<&'d Demand>) -> Vec<&'d Demand> {
        let policy = self.policy;
        let rules = policy.rules;
        let unit = policy.reference();
        let busy: Vec<(&Slot, Resources, Resources)> = self.busy().collect();
        let could_hold = |d: &Demand| {
            busy.iter().any(|(s, total, _)| {
                s.os == d.os
                    && s.arch == d.arch
                    && !(d.on_demand && s.spot)
                    && total.fits(d.need)
                    && (rules.whole_tasks_wait || d.need.share_of(*total) < WHOLE)
            })
        };
        let running = |os: OsClass, arch: Arch| -> f64 {
            busy.iter().filter(|(s, _, _)| s.os == os && s.arch == arch).map(|(_, _, used)| used.share_of(unit)).sum()
        };
        let mut oldest_first = unplaced;
        oldest_first.sort_by(|a, b| a.since.cmp(&b.since).then_with(|| a.id.cmp(&b.id)));
        // The work waiting so far, by OS and architecture.
        let mut waiting: HashMap<(OsClass, Arch), f64> = HashMap::new();
        let mut launch = Vec::new();
        for d in oldest_first {
            let patient = self.age(d.since) < policy.launch_patience && could_hold(d);
            let share = d.need.share_of(unit);
            let queued = waiting.get(&(d.os, d.arch)).copied().unwrap_or(0.0);
            let bounded = !rules.waiting_bounded || queued + share <= WAITING_WORK * running(d.os, d.arch);
            if patient && bounded {
                waiting.insert((d.os, d.arch), queued + share);
            } else {
                launch.push(d);
            }
        }
        launch
    }

    /// 3. Launch for the rest: first into instances still starting, then into new ones; then
    ///    room for the reruns of Spot-warned instances, and instances to keep the minimum warm.
    ///    Returns, by index in `slots`, the instances whose room is kept for reruns.
    fn launch(&mut self, unplaced: Vec<&Demand>) -> Vec<bool> {
        let (slots, policy) = (self.slots, self.policy);
        let alive = self.alive();
        // A demand that must run on demand fits on-demand bins only.
        let mut bins: Vec<Bin> = slots
            .iter()
            .zip(&self.gone)
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
            let room = self
                .rooms
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
        let out = &mut self.out;
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
            while alive + u32::try_from(out.launch.len() + out.launch_on_demand.len()).unwrap_or(u32::MAX)
                < policy.min.min(policy.max)
            {
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
        kept_for_reruns
    }

    /// 4. The idle, longest idle first, down to the minimum: the instance idle the shortest time
    ///    is the warm spare and waits `Ec2IdleMinutes`; the others are surplus and go sooner.
    fn retire_idle(&mut self, kept_for_reruns: &[bool]) {
        let (slots, policy) = (self.slots, self.policy);
        let mut idle: Vec<(usize, SystemTime)> = slots
            .iter()
            .enumerate()
            .filter(|(i, s)| !s.retiring && !self.gone[*i] && s.registered.is_some() && !kept_for_reruns[*i])
            .filter(|(i, _)| self.rooms[*i].is_none_or(|(_, tasks)| tasks == 0))
            .filter(|(_, s)| s.registered.as_ref().is_some_and(|r| r.tasks == 0))
            .filter_map(|(i, s)| s.idle_since.map(|t| (i, t)))
            .collect();
        idle.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| slots[a.0].id.cmp(&slots[b.0].id)));
        let slack: f64 = self.busy().map(|(_, total, used)| 1.0 - used.share_of(total)).sum();
        let slack_is_the_spare = policy.rules.slack_is_the_spare && slack >= SLACK;
        let surplus = if slack_is_the_spare { Duration::ZERO } else { surplus_idle(policy.idle) };
        let last = idle.len().saturating_sub(1);
        let mut keep = self.alive() + u32::try_from(self.out.launch.len()).unwrap_or(u32::MAX);
        for (rank, (i, since)) in idle.into_iter().enumerate() {
            let spare = (rank == last || !policy.rules.one_warm_spare) && !slack_is_the_spare;
            let wait = if spare { policy.idle } else { surplus };
            if self.age(since) < wait {
                continue;
            }
            if keep <= policy.min {
                break;
            }
            keep -= 1;
            self.out.retire.push(Retirement { instance: slots[i].id.clone(), reason: RetireReason::Idle });
        }
    }
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

pub mod parked;
#[cfg(test)]
mod tests;
