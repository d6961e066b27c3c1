//! One EC2 instance of ours on one page: every state its record can be in, and every
//! transition between them. The record's fields are private: it changes only through the
//! transitions below, called by the pool when a description comes (`pool.rs`), by the EC2
//! loop when it places work, retires, stops or starts an instance (`reconcile/ec2/apply.rs`),
//! and by the event queue on a Spot warning; everything else reads.
//!
//! # States
//! EC2's state ([`Ec2State`]), refined by what the record carries:
//!
//! | state | EC2 | what tells it |
//! |---|---|---|
//! | launched | pending | RunInstances answered; no description has listed it yet (`seen` unset) |
//! | booting | pending, running | described, no container instance registered yet |
//! | registered | running | its container instance is known (`registered_at`): it takes work |
//! | idle | running | registered, no task since `idle_since` |
//! | retiring | running | `retiring` set: being drained and deregistered, then terminated or stopped |
//! | shutting down | shutting-down | TerminateInstances accepted: gone at the next description |
//! | parked | stopping, stopped | in the stopped pool (`Ec2StoppedInstances`): neither placed on nor counted |
//! | restarting | pending, running | started again from the stopped pool (`restarted_at`), its ECS agent not back |
//!
//! Any state may also be Spot-warned (`spot_warned_at`): EC2 interrupts it within two minutes.
//! An instance no description lists any more (after [`JUST_LAUNCHED`] for one never seen) is
//! forgotten by the pool, which deregisters the container instance it left.
//!
//! # Transitions
//! | transition | from | to |
//! |---|---|---|
//! | [`InstanceRecord::launched`] | — | launched (or as EC2 says, when adopted) |
//! | [`InstanceRecord::described`] | any | EC2's state, type and tags as described |
//! | [`InstanceRecord::refold`] | booting, registered, idle, restarting | registered (its container instance seen), idle (no task), restarting ended |
//! | [`InstanceRecord::placed`] | registered, idle | registered (not idle) |
//! | [`InstanceRecord::retire`] | registered, idle, booting, parked | retiring |
//! | [`InstanceRecord::kept`] | retiring | as it was (deregistering, stopping or terminating failed) |
//! | [`InstanceRecord::deregistered`] | retiring | retiring, with no container instance (terminating failed) |
//! | [`InstanceRecord::terminating`] | retiring | shutting down |
//! | [`InstanceRecord::stopping`] | retiring | parked |
//! | [`InstanceRecord::restarted`] | parked | restarting |
//! | [`InstanceRecord::container_status`] | registered, restarting, Spot-warned | its container instance DRAINING or ACTIVE, as set |
//! | [`InstanceRecord::spot_warned`] | any | Spot-warned |

use std::time::{Duration, SystemTime};

use super::plan::{self, RetireReason};
use super::{ContainerInstanceStatus, Ec2State, OsClass, Resources};
use crate::aws::ec2_types::{ContainerInstance, Ec2Instance};
use crate::ids::Ec2PoolKey;

/// How long a task we placed keeps its instance from counting as idle, whatever ECS says (ECS
/// may not count a task in the first description after StartTask).
pub const PLACEMENT_GRACE: Duration = Duration::from_secs(15);
/// How long an instance we launched may be missing from DescribeInstances (eventual
/// consistency) before it counts as gone.
pub const JUST_LAUNCHED: Duration = Duration::from_secs(120);

/// One instance of ours.
#[derive(Debug, Clone)]
pub struct InstanceRecord {
    id: String,
    instance_type: String,
    spot: bool,
    os: OsClass,
    ec2_state: Ec2State,
    launched_at: SystemTime,
    /// Seen in a DescribeInstances since we launched it.
    seen: bool,
    container: Option<ContainerInstance>,
    registered_at: Option<SystemTime>,
    idle_since: Option<SystemTime>,
    last_placed_at: Option<SystemTime>,
    /// What we placed on it after the last description began.
    placed: Vec<(Resources, SystemTime)>,
    retiring: Option<RetireReason>,
    spot_warned_at: Option<SystemTime>,
    launch_spec: Option<String>,
    restarted_at: Option<SystemTime>,
    stopped_at: Option<SystemTime>,
    pool: Option<Ec2PoolKey>,
}

impl InstanceRecord {
    /// An instance RunInstances answered for (or a description showed first: adopted), at
    /// `now` unless EC2 said when it launched, in `pool` when one is known.
    pub fn launched(i: &Ec2Instance, pool: Option<Ec2PoolKey>, now: SystemTime) -> Self {
        InstanceRecord {
            id: i.id.clone(),
            instance_type: i.instance_type.clone(),
            spot: i.spot,
            os: i.os,
            ec2_state: i.state.clone(),
            launched_at: i.launched_at.unwrap_or(now),
            seen: false,
            container: None,
            registered_at: None,
            idle_since: None,
            last_placed_at: None,
            placed: Vec::new(),
            retiring: None,
            spot_warned_at: None,
            launch_spec: None,
            restarted_at: None,
            stopped_at: None,
            pool,
        }
    }

    /// A DescribeInstances listed it as `i`: EC2's state, type and tags. A description never
    /// takes away the pool a launch recorded, nor a Spot warning (its tag remembers one across
    /// a restart).
    pub fn described(&mut self, i: Ec2Instance) {
        self.pool = i.pool.or(self.pool.take());
        self.instance_type = i.instance_type;
        self.spot = i.spot;
        self.os = i.os;
        self.ec2_state = i.state;
        self.spot_warned_at = self.spot_warned_at.or(i.spot_warned_at);
        self.launch_spec = i.launch_spec;
        if let Some(t) = i.launched_at {
            self.launched_at = t;
        }
        self.seen = true;
    }

    /// A description that began at `described_at` showed its container instance (`None`: none
    /// registered): what we placed since counts against its room, and at `now` it is
    /// registered, idle or back from the stopped pool as that shows.
    pub fn refold(&mut self, container: Option<ContainerInstance>, described_at: SystemTime, now: SystemTime) {
        self.placed.retain(|(_, t)| *t >= described_at);
        self.container = container.map(|mut c| {
            let placed = self.placed.iter().fold(Resources::default(), |sum, (r, _)| sum.plus(*r));
            c.remaining = c.remaining.minus(placed);
            c.tasks += u32::try_from(self.placed.len()).unwrap_or(u32::MAX);
            c
        });
        if self.parked() {
            // A stopped instance's container instance stays registered (DRAINING, its agent
            // disconnected) so that the agent comes back as the same one on start.
            self.idle_since = None;
            return;
        }
        if self.restarted_at.is_some()
            && self.ec2_state == Ec2State::Running
            && self.container.as_ref().is_some_and(ContainerInstance::usable)
        {
            // Its ECS agent is back: from now on it is registered like any other.
            self.restarted_at = None;
            self.registered_at = Some(now);
            self.idle_since = None;
        }
        if self.restarting() {
            self.idle_since = None;
            return;
        }
        match &self.container {
            Some(c) => {
                self.registered_at.get_or_insert(now);
                self.idle_since = plan::idle_since(self.idle_since, c.tasks, self.last_placed_at, PLACEMENT_GRACE, now);
            }
            None => self.idle_since = None,
        }
    }

    /// We started a task needing `need` on it at `now`: not idle, and its room is less.
    pub fn placed(&mut self, need: Resources, now: SystemTime) {
        self.placed.push((need, now));
        self.last_placed_at = Some(now);
        self.idle_since = None;
        if let Some(c) = &mut self.container {
            c.remaining = c.remaining.minus(need);
            c.tasks += 1;
        }
    }

    /// It is being retired (drained, deregistered, then terminated or stopped) for `reason`.
    pub fn retire(&mut self, reason: RetireReason) {
        self.retiring = Some(reason);
    }

    /// Retiring it failed before anything was undone (deregistering, stopping): it is kept as
    /// it was, and the next pass decides anew.
    pub fn kept(&mut self) {
        self.retiring = None;
    }

    /// Its container instance was deregistered but terminating it failed: the next passes see
    /// it unregistered and retry.
    pub fn deregistered(&mut self) {
        self.retiring = None;
        self.container = None;
    }

    /// TerminateInstances accepted it: shutting down, with no container instance.
    pub fn terminating(&mut self) {
        self.container = None;
        self.ec2_state = Ec2State::ShuttingDown;
    }

    /// StopInstances accepted it at `now`: parked in the stopped pool, its container instance
    /// DRAINING (it stays registered, to come back as the same one).
    pub fn stopping(&mut self, now: SystemTime) {
        self.retiring = None;
        self.ec2_state = Ec2State::Stopping;
        self.stopped_at = Some(now);
        self.restarted_at = None;
        self.idle_since = None;
        if let Some(c) = &mut self.container {
            c.status = ContainerInstanceStatus::Draining;
        }
    }

    /// StartInstances accepted it at `now`: restarting until its ECS agent is back.
    pub fn restarted(&mut self, now: SystemTime) {
        self.ec2_state = Ec2State::Pending;
        self.restarted_at = Some(now);
        self.stopped_at = None;
        self.idle_since = None;
    }

    /// ECS took the status we set on its container instance (DRAINING to place nothing more on
    /// it, ACTIVE again after a restart).
    pub fn container_status(&mut self, status: ContainerInstanceStatus) {
        if let Some(c) = &mut self.container {
            c.status = status;
        }
    }

    /// EC2 warned at `now` that Spot will interrupt it: whether this is the first warning.
    pub fn spot_warned(&mut self, now: SystemTime) -> bool {
        let first = self.spot_warned_at.is_none();
        self.spot_warned_at.get_or_insert(now);
        first
    }

    /// Stopped or stopping in EC2: in the stopped pool, neither placed on nor counted against
    /// `Ec2MaxInstances`.
    pub fn parked(&self) -> bool {
        matches!(self.ec2_state, Ec2State::Stopping | Ec2State::Stopped)
    }

    /// Started again from the stopped pool, its ECS agent not back yet.
    pub fn restarting(&self) -> bool {
        self.restarted_at.is_some() && !self.parked()
    }

    /// Whether it is gone from a description of `live` instance ids at `now`: not listed,
    /// after a description listed it once or [`JUST_LAUNCHED`] after its launch.
    pub fn vanished(&self, listed: bool, now: SystemTime) -> bool {
        !listed && (self.seen || now.duration_since(self.launched_at).unwrap_or_default() >= JUST_LAUNCHED)
    }

    /// Instance id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Instance type.
    pub fn instance_type(&self) -> &str {
        &self.instance_type
    }

    /// Spot (else on-demand).
    pub fn spot(&self) -> bool {
        self.spot
    }

    /// Its OS.
    pub fn os(&self) -> OsClass {
        self.os
    }

    /// EC2's state.
    pub fn ec2_state(&self) -> Ec2State {
        self.ec2_state.clone()
    }

    /// When EC2 launched it.
    pub fn launched_at(&self) -> SystemTime {
        self.launched_at
    }

    /// Its container instance, once registered.
    pub fn container(&self) -> Option<&ContainerInstance> {
        self.container.as_ref()
    }

    /// When we first saw it registered.
    pub fn registered_at(&self) -> Option<SystemTime> {
        self.registered_at
    }

    /// Since when it has had no task.
    pub fn idle_since(&self) -> Option<SystemTime> {
        self.idle_since
    }

    /// When we last started a task on it.
    pub fn last_placed_at(&self) -> Option<SystemTime> {
        self.last_placed_at
    }

    /// Being retired, and why.
    pub fn retiring(&self) -> Option<RetireReason> {
        self.retiring
    }

    /// When EC2 warned that Spot will interrupt it (two minutes' notice).
    pub fn spot_warned_at(&self) -> Option<SystemTime> {
        self.spot_warned_at
    }

    /// The fingerprint of the launch settings it was launched with (`gocd:launch-spec`).
    pub fn launch_spec(&self) -> Option<&str> {
        self.launch_spec.as_deref()
    }

    /// When we started it again from the stopped pool; until its ECS agent is back (its
    /// container instance ACTIVE and connected) it counts as starting, held to
    /// `Ec2RegisterTimeoutMinutes` from then.
    pub fn restarted_at(&self) -> Option<SystemTime> {
        self.restarted_at
    }

    /// When we stopped it (the most recently stopped is started first: its cache is newest).
    pub fn stopped_at(&self) -> Option<SystemTime> {
        self.stopped_at
    }

    /// The pool it was launched into (`gocd:ec2-pool`); `None` when launched without one.
    pub fn pool(&self) -> Option<&Ec2PoolKey> {
        self.pool.as_ref()
    }
}
