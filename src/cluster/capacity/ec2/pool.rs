//! An engine's EC2 capacity in memory: our instances in the ECS cluster (as EC2 and ECS last
//! described them, plus what we placed since), each in the pool of the cluster profile it was
//! launched for (`pools.rs`), the work waiting for room, what was learned per pool, and the
//! background loop's handle. Rebuilt from AWS after a restart: instances from their tags,
//! waiting work from GoCD's re-sent create-agent. [`PoolState::observe`] folds one description
//! of the whole cluster in; [`PoolState::slots`] and [`PoolState::demands`] turn one group's
//! share of the state (a pool, or what is left over) into the planner's input.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::instance::InstanceRecord;
use super::plan::{self, Demand, Policy, Registered, Slot, TypeOffer};
use super::pools::{Counters, Group, PoolMemory};
use super::{capacity, Arch, ContainerInstanceStatus, Ec2State, OsClass, Resources};
pub use crate::aws::ec2_types::{ContainerInstance, Ec2Instance};
use crate::aws::network::{self, Network};
use crate::aws::{AwsClients, AwsError};
use crate::cluster::base::locks::{Mutex, MutexGuard};
use crate::cluster::launch::snapshot::LaunchSpec;
use crate::ids::{AgentId, Ec2PoolKey};
use crate::secret::Secret;
use crate::settings::Ec2Capacity;

/// How long a gone instance is remembered, to deregister a container instance it left behind.
const REMEMBER_GONE: Duration = Duration::from_secs(3600);

/// (subnets, security groups) as configured; the resolved network is cached under it.
pub type NetworkKey = (Vec<String>, Vec<String>);

/// A task waiting for room, with everything needed to start it later.
#[derive(Debug, Clone)]
pub struct WaitingTask {
    /// The launch of the agent to start (reserved in the registry, phase Launching), built
    /// once by its create-agent; its key is the newest GoCD sent for the job.
    pub spec: LaunchSpec,
    /// CPU and memory it reserves.
    pub need: Resources,
    /// The instances it can run on.
    pub os: OsClass,
    /// Its elastic profile's `CpuArchitecture`.
    pub arch: Arch,
    /// Since when it waits.
    pub since: SystemTime,
    /// When GoCD last asked for it (create-agent, first or re-sent).
    pub last_asked: SystemTime,
    /// Spot interrupted its job's previous agent: an on-demand instance only.
    pub on_demand: bool,
    /// The pool of the cluster profile its create-agent sent: the instances it may run on.
    pub pool: Ec2PoolKey,
}

/// What [`PoolState::observe`] found to clean up.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Container instances whose EC2 instance is gone: deregister them.
    pub deregister: Vec<String>,
    /// Container instances of EC2 instances we do not know: (EC2 id, container instance ARN).
    pub unknown: Vec<(String, String)>,
}

/// Everything mutable of an engine's EC2 capacity.
#[derive(Debug, Default)]
pub struct PoolState {
    /// Our instances by id, of every pool.
    instances: BTreeMap<String, InstanceRecord>,
    /// Work waiting for room, oldest first, of every pool.
    waiting: Vec<WaitingTask>,
    /// Instances that went (retired by us or vanished), and when.
    gone: BTreeMap<String, SystemTime>,
    /// EC2 ids of container instances in the cluster that are not ours.
    foreign: BTreeSet<String>,
    /// What was learned for each pool (its catalog, launch backoff, images, totals...).
    pools: BTreeMap<Ec2PoolKey, PoolMemory>,
    /// When the last pass finished, and its error if it failed.
    last_pass: Option<(SystemTime, Option<String>)>,
}

/// A stopped instance as the planner sees it (`plan::parked`).
pub use super::plan::parked::Parked;

/// An engine's EC2 capacity, every pool's: state, loop and wake-up.
#[derive(Debug, Default)]
pub struct Pool {
    state: Mutex<PoolState>,
    /// Wakes the loop (new work). Shared with the loop, which holds no strong cluster reference
    /// while it sleeps.
    wake: Arc<Notify>,
    /// Held for one pass: passes never overlap, so placements never overcommit an instance.
    pass_lock: tokio::sync::Mutex<()>,
    /// The background loop, while it runs.
    task: Mutex<Option<JoinHandle<()>>>,
    /// The instances' networks, each resolved once (pools may launch into different ones).
    networks: tokio::sync::Mutex<BTreeMap<NetworkKey, Network>>,
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Pool {
    /// The state, locked. Never hold it across an `.await`.
    pub fn state(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the background loop (plugin shutdown, or the cluster forgotten).
    pub fn stop(&self) {
        if let Some(task) = self.task.lock().unwrap_or_else(PoisonError::into_inner).take() {
            task.abort();
        }
    }

    /// Marks the background loop as running without starting it: an engine test runs the
    /// passes itself, one at a time, against its script of AWS calls.
    #[cfg(test)]
    pub(crate) fn hold_loop_for_test(&self) {
        *self.task.lock().unwrap_or_else(PoisonError::into_inner) = Some(tokio::spawn(std::future::pending()));
    }

    /// Wakes the loop for a pass now.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Starts the background loop with `start`, handed the loop's wake-up, unless it runs.
    pub fn ensure_loop(&self, start: impl FnOnce(Arc<Notify>) -> JoinHandle<()>) {
        let mut task = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        if task.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        *task = Some(start(self.wake.clone()));
    }

    /// Held for one pass: passes never overlap, so placements never overcommit an instance.
    pub async fn one_pass(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.pass_lock.lock().await
    }

    /// The network of `key` (subnets, security groups), resolved with `aws` the first time it
    /// is asked for (a failure is not kept: the next launch resolves again).
    pub async fn network(&self, aws: &AwsClients, key: NetworkKey) -> Result<Network, AwsError> {
        let mut cached = self.networks.lock().await;
        if let Some(n) = cached.get(&key) {
            return Ok(n.clone());
        }
        let resolved = network::resolve(aws, &key.0, &key.1).await?;
        cached.insert(key, resolved.clone());
        Ok(resolved)
    }

    /// GoCD asked again for a waiting job's agent, with a fresh key: keep the newest. Whether
    /// the agent was waiting (and so took the key); any launch type, as only EC2 work waits.
    pub fn renew(&self, agent_id: &AgentId, key: &Secret<String>, now: SystemTime) -> bool {
        let mut st = self.state();
        let Some(w) = st.waiting.iter_mut().find(|w| w.spec.work.agent_id == *agent_id) else { return false };
        w.spec.work.auto_register_key = key.clone();
        w.last_asked = now;
        true
    }
}

impl PoolState {
    /// Our instance `id`, if we know it.
    pub fn instance(&self, id: &str) -> Option<&InstanceRecord> {
        self.instances.get(id)
    }

    /// Our instance `id`, to move along its lifecycle (`instance.rs`).
    pub fn instance_mut(&mut self, id: &str) -> Option<&mut InstanceRecord> {
        self.instances.get_mut(id)
    }

    /// Every instance of ours, of every pool, by id.
    pub fn instances(&self) -> impl Iterator<Item = &InstanceRecord> {
        self.instances.values()
    }

    /// Whether no instance of ours is known.
    pub fn has_no_instance(&self) -> bool {
        self.instances.is_empty()
    }

    /// Our instance whose container instance is `arn`.
    pub fn instance_of_container(&self, arn: &str) -> Option<&InstanceRecord> {
        self.instances.values().find(|i| i.container().is_some_and(|c| c.arn == arn))
    }

    /// Work waiting for room, oldest first, of every pool.
    pub fn waiting(&self) -> &[WaitingTask] {
        &self.waiting
    }

    /// The waiting work of agent `agent_id`, if it waits.
    pub fn waiting_for(&self, agent_id: &str) -> Option<&WaitingTask> {
        self.waiting.iter().find(|w| w.spec.work.agent_id == agent_id)
    }

    /// Queues work for room, newest last, in place of what its agent waited with before.
    pub fn queue(&mut self, task: WaitingTask) {
        self.waiting.retain(|w| w.spec.work.agent_id != task.spec.work.agent_id);
        self.waiting.push(task);
    }

    /// Takes agent `agent_id`'s work off the queue.
    pub fn take_waiting(&mut self, agent_id: &str) -> Option<WaitingTask> {
        let at = self.waiting.iter().position(|w| w.spec.work.agent_id == agent_id)?;
        Some(self.waiting.remove(at))
    }

    /// Takes off the queue, in order, the work `pick` picks.
    pub fn drop_waiting(&mut self, mut pick: impl FnMut(&WaitingTask) -> bool) -> Vec<WaitingTask> {
        let (dropped, kept) = std::mem::take(&mut self.waiting).into_iter().partition(|w| pick(w));
        self.waiting = kept;
        dropped
    }

    /// Instance `id` went (terminated by us, or found gone): the container instance it may
    /// leave behind is deregistered when seen.
    pub fn went(&mut self, id: String, now: SystemTime) {
        self.gone.insert(id, now);
    }

    /// Whether instance `id` went within the last hour.
    pub fn is_gone(&self, id: &str) -> bool {
        self.gone.contains_key(id)
    }

    /// EC2 instances found to be someone else's: their container instances are left alone.
    pub fn not_ours(&mut self, ids: impl IntoIterator<Item = String>) {
        self.foreign.extend(ids);
    }

    /// Whether EC2 instance `id` was found to be someone else's.
    pub fn is_foreign(&self, id: &str) -> bool {
        self.foreign.contains(id)
    }

    /// A pass finished at `now`, with its error if it failed.
    pub fn pass_finished(&mut self, now: SystemTime, error: Option<String>) {
        self.last_pass = Some((now, error));
    }

    /// When the last pass finished, and its error if it failed.
    pub fn last_pass(&self) -> Option<(SystemTime, Option<&str>)> {
        self.last_pass.as_ref().map(|(t, e)| (*t, e.as_deref()))
    }

    /// Folds a description in: EC2's instances of ours (pending or running), the cluster's
    /// container instances; `described_at` is when the description began.
    pub fn observe(
        &mut self,
        ec2: Vec<Ec2Instance>,
        containers: Vec<ContainerInstance>,
        described_at: SystemTime,
        now: SystemTime,
    ) -> Observed {
        let mut out = Observed::default();
        let live: BTreeSet<String> = ec2.iter().map(|i| i.id.clone()).collect();
        for i in ec2 {
            let record = self.instances.entry(i.id.clone()).or_insert_with(|| {
                tracing::info!(instance = %i.id, state = %i.state, pool = ?i.pool, "adopted an EC2 instance of this cluster");
                InstanceRecord::launched(&i, None, now)
            });
            record.described(i);
        }
        let vanished: Vec<String> = self
            .instances
            .values()
            .filter(|r| r.vanished(live.contains(r.id()), now))
            .map(|r| r.id().to_string())
            .collect();
        for id in vanished {
            if let Some(r) = self.instances.remove(&id) {
                if r.retiring().is_none() {
                    tracing::warn!(instance = %id, "an EC2 instance of ours is no longer pending or running (terminated outside the plugin?)");
                }
                out.deregister.extend(r.container().map(|c| c.arn.clone()));
                self.gone.insert(id, now);
            }
        }
        let mut by_instance: BTreeMap<String, ContainerInstance> = BTreeMap::new();
        for c in containers {
            let Some(ec2_id) = c.ec2_id.clone() else {
                continue;
            };
            if self.instances.contains_key(&ec2_id) {
                by_instance.insert(ec2_id, c);
            } else if self.gone.contains_key(&ec2_id) {
                if c.status != ContainerInstanceStatus::Inactive && !out.deregister.contains(&c.arn) {
                    out.deregister.push(c.arn);
                }
            } else if !self.foreign.contains(&ec2_id) {
                out.unknown.push((ec2_id, c.arn));
            }
        }
        for record in self.instances.values_mut() {
            record.refold(by_instance.remove(record.id()), described_at, now);
            if let (Some(c), Some(key)) = (record.container(), record.pool()) {
                if !record.parked() && !record.restarting() {
                    let memory = self.pools.entry(key.clone()).or_default();
                    memory.registered(record.instance_type(), c.total);
                }
            }
        }
        self.gone.retain(|_, t| now.duration_since(*t).unwrap_or_default() < REMEMBER_GONE);
        out
    }

    /// Records instances RunInstances answered for pool `pool` (before any description shows
    /// them).
    pub fn launched(&mut self, pool: &Ec2PoolKey, instances: &[Ec2Instance], now: SystemTime) {
        for i in instances {
            self.instances.entry(i.id.clone()).or_insert_with(|| InstanceRecord::launched(i, Some(pool.clone()), now));
        }
    }

    /// What was learned for the pool of `key`, if anything.
    pub fn memory(&self, key: Option<&Ec2PoolKey>) -> Option<&PoolMemory> {
        self.pools.get(key?)
    }

    /// What was learned for the pool of `key`, to change.
    pub fn memory_mut(&mut self, key: &Ec2PoolKey) -> &mut PoolMemory {
        self.pools.entry(key.clone()).or_default()
    }

    /// Counts in the totals of an instance's pool (none for one launched without a pool).
    pub fn count(&mut self, instance: &str, add: impl FnOnce(&mut Counters)) {
        if let Some(key) = self.instances.get(instance).and_then(|r| r.pool().cloned()) {
            self.memory_mut(&key).count(add);
        }
    }

    /// Records a task we started on an instance.
    pub fn placed(&mut self, instance: &str, agent_id: &str, need: Resources, now: SystemTime) {
        if let Some(r) = self.instances.get_mut(instance) {
            r.placed(need, now);
        }
        self.take_waiting(agent_id);
        self.count(instance, |c| c.placed += 1);
    }

    /// The limits of a group's profile (`cfg`: the pool's, or a winding-down one), and what one
    /// new instance of each type it lists offers.
    pub fn policy(&self, group: &Group<'_>, cfg: &Ec2Capacity) -> Policy {
        Policy {
            min: cfg.min_instances,
            max: cfg.max_instances,
            idle: Duration::from_secs(u64::from(cfg.idle_minutes) * 60),
            register_timeout: Duration::from_secs(u64::from(cfg.register_timeout_minutes) * 60),
            launch_patience: Duration::from_secs(u64::from(cfg.scale_out_wait_seconds)),
            types: self.offers(group.key(), cfg),
            spot: cfg.spot,
            spot_turn: self.memory(group.key()).map_or(0, PoolMemory::spot_turn),
            rules: plan::Rules::default(),
        }
    }

    /// The types new instances of pool `key` may have, in the operator's order: with the pool's
    /// catalog, those EC2 knows that have an AMI of their architecture; before it, every listed
    /// type with its architecture guessed from the name. Each offers what one of it registered,
    /// else what EC2 describes, else the estimate from the name, else (unknown) a c5.large's
    /// worth.
    pub fn offers(&self, key: Option<&Ec2PoolKey>, cfg: &Ec2Capacity) -> Vec<TypeOffer> {
        let offer = |name: &str, arch: Arch| {
            let (capacity, known) = match self.capacity(key, name) {
                Some(c) => (c, true),
                None => (Resources::new(2048, 3741), false),
            };
            TypeOffer { name: name.to_string(), capacity, arch, known }
        };
        match self.memory(key).and_then(PoolMemory::catalog) {
            Some(catalog) => catalog.launchable().map(|t| offer(&t.name, t.arch)).collect(),
            None => cfg.instance_types.iter().map(|t| offer(t, Arch::guess(t))).collect(),
        }
    }

    /// What an instance of this type registers in pool `key` (its AMI decides too), if known.
    pub fn capacity(&self, key: Option<&Ec2PoolKey>, instance_type: &str) -> Option<Resources> {
        let memory = self.memory(key);
        let described = || memory?.catalog()?.type_info(instance_type)?.capacity;
        memory
            .and_then(|m| m.registered_capacity(instance_type))
            .or_else(described)
            .or_else(|| capacity::estimate(instance_type))
    }

    /// An instance's architecture: as EC2 describes its type in its pool's catalog, else guessed
    /// from the type's name.
    pub fn arch_of(&self, record: &InstanceRecord) -> Arch {
        let catalog = self.memory(record.pool()).and_then(PoolMemory::catalog);
        catalog.map_or_else(|| Arch::guess(record.instance_type()), |c| c.arch_of(record.instance_type()))
    }

    /// The planner's view of a group's instances (not the stopped ones: [`PoolState::parked`]).
    /// One started again counts as starting, launched when it was started, until its agent is
    /// back.
    pub fn slots(&self, group: &Group<'_>) -> Vec<Slot> {
        self.instances
            .values()
            .filter(|r| group.holds(r.pool()) && !r.parked())
            .map(|r| Slot {
                id: r.id().to_string(),
                os: r.os(),
                instance_type: r.instance_type().to_string(),
                arch: self.arch_of(r),
                launched_at: r.restarted_at().unwrap_or(r.launched_at()),
                running: r.ec2_state() == Ec2State::Running,
                registered: r.container().filter(|_| !r.restarting()).map(|c| Registered {
                    usable: c.usable(),
                    total: c.total,
                    remaining: c.remaining,
                    tasks: c.tasks,
                }),
                idle_since: r.idle_since(),
                retiring: r.retiring().is_some(),
                spot: r.spot(),
                spot_warned: r.spot_warned_at().is_some(),
            })
            .collect()
    }

    /// A group's stopped instances as the planner sees them: `current` gives the fingerprint of
    /// the launch settings a new instance of that OS and architecture would have now (`None`:
    /// unknown, and then no stopped instance of it is started).
    pub fn parked(&self, group: &Group<'_>, current: impl Fn(OsClass, Arch) -> Option<String>) -> Vec<Parked> {
        self.instances
            .values()
            .filter(|r| group.holds(r.pool()) && r.parked() && r.retiring().is_none())
            .map(|r| {
                let arch = self.arch_of(r);
                let fresh = match (current(r.os(), arch), &r.launch_spec()) {
                    (Some(now), Some(then)) => Some(now == *then),
                    // Launched before fingerprints, or by hand: not ours to start.
                    (Some(_), None) => Some(false),
                    (None, _) => None,
                };
                Parked {
                    id: r.id().to_string(),
                    os: r.os(),
                    arch,
                    instance_type: r.instance_type().to_string(),
                    stopped: r.ec2_state() == Ec2State::Stopped,
                    fresh,
                    spot: r.spot(),
                    since: r.stopped_at().unwrap_or(r.launched_at()),
                }
            })
            .collect()
    }

    /// The planner's view of a group's waiting work.
    pub fn demands(&self, group: &Group<'_>) -> Vec<Demand> {
        self.waiting
            .iter()
            .filter(|w| group.holds(Some(&w.pool)))
            .map(|w| Demand {
                id: w.spec.work.agent_id.to_string(),
                need: w.need,
                os: w.os,
                arch: w.arch,
                since: w.since,
                on_demand: w.on_demand,
            })
            .collect()
    }

    /// How long until the next idle or register deadline of a group's instance passes, if any:
    /// the loop comes back then rather than on its steady beat, so instances retire on time.
    pub fn next_deadline(&self, group: &Group<'_>, policy: &Policy, now: SystemTime) -> Option<Duration> {
        self.instances
            .values()
            .filter(|r| group.holds(r.pool()) && r.retiring().is_none() && !r.parked())
            .filter_map(|r| match (&r.container(), r.idle_since()) {
                _ if r.restarting() => r.restarted_at().map(|t| t + policy.register_timeout),
                // A surplus idle instance goes sooner than the warm spare: wake for the earlier.
                (Some(_), Some(idle)) => Some(idle + plan::surplus_idle(policy.idle)),
                (None, _) => Some(r.launched_at() + policy.register_timeout),
                (Some(_), None) => None,
            })
            .map(|deadline| deadline.duration_since(now).unwrap_or_default())
            .min()
    }

    /// Whether the loop should come back soon: work waits, or instances are starting or going.
    pub fn busy(&self) -> bool {
        !self.waiting.is_empty()
            || self.instances.values().any(|r| {
                r.ec2_state() == Ec2State::Stopping
                    || (!r.parked() && (r.container().is_none() || r.restarting() || r.retiring().is_some()))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: SystemTime = SystemTime::UNIX_EPOCH;
    /// The pool the instances below were launched into.
    const POOL: &str = "0123456789ab";

    fn pool() -> Ec2PoolKey {
        POOL.into()
    }

    fn at(s: u64) -> SystemTime {
        T0 + Duration::from_secs(s)
    }

    fn ec2(id: &str, state: Ec2State) -> Ec2Instance {
        Ec2Instance {
            id: id.into(),
            instance_type: "c5.xlarge".into(),
            state,
            launched_at: Some(T0),
            spot: false,
            os: OsClass::Linux,
            spot_warned_at: None,
            launch_spec: None,
            pool: Some(pool()),
        }
    }

    fn ci(ec2_id: &str, tasks: u32) -> ContainerInstance {
        ContainerInstance {
            arn: format!("arn:ci/{ec2_id}"),
            ec2_id: Some(ec2_id.into()),
            instance_type: Some("c5.xlarge".into()),
            zone: Some("us-east-1a".into()),
            status: ContainerInstanceStatus::Active,
            connected: true,
            total: Resources::new(4096, 7482),
            remaining: Resources::new(4096 - 1024 * tasks, 7482 - 1800 * tasks),
            tasks,
        }
    }

    #[test]
    fn adopts_registers_and_times_idleness() {
        let mut st = PoolState::default();
        let seen = st.observe(vec![ec2("i-a", Ec2State::Pending)], vec![], at(1), at(1));
        assert_eq!(seen, Observed::default());
        assert!(st.instances["i-a"].container().is_none());
        st.observe(vec![ec2("i-a", Ec2State::Running)], vec![ci("i-a", 0)], at(5), at(5));
        let a = &st.instances["i-a"];
        assert_eq!((a.registered_at(), a.idle_since()), (Some(at(5)), Some(at(5))));
        assert_eq!(st.capacity(Some(&pool()), "c5.xlarge"), Some(Resources::new(4096, 7482)), "the truth, learned");
        assert_eq!(st.capacity(Some(&"another12345".into()), "c5.xlarge"), capacity::estimate("c5.xlarge"));
        st.observe(vec![ec2("i-a", Ec2State::Running)], vec![ci("i-a", 1)], at(9), at(9));
        assert_eq!(st.instances["i-a"].idle_since(), None);
    }

    #[test]
    fn our_placements_count_until_a_description_that_began_after_them() {
        let mut st = PoolState::default();
        st.observe(vec![ec2("i-a", Ec2State::Running)], vec![ci("i-a", 0)], at(1), at(1));
        st.placed("i-a", "agent-1", Resources::new(1024, 1800), at(2));
        assert_eq!(st.instances["i-a"].container().unwrap().remaining, Resources::new(3072, 5682));
        // A description that began before the placement does not show it yet.
        st.observe(vec![ec2("i-a", Ec2State::Running)], vec![ci("i-a", 0)], at(1), at(3));
        let c = st.instances["i-a"].container().unwrap();
        assert_eq!((c.remaining, c.tasks), (Resources::new(3072, 5682), 1));
        assert_eq!(st.instances["i-a"].idle_since(), None);
        // One that began after it does.
        st.observe(vec![ec2("i-a", Ec2State::Running)], vec![ci("i-a", 1)], at(4), at(4));
        assert_eq!(st.instances["i-a"].container().unwrap().remaining, Resources::new(3072, 5682));
    }

    #[test]
    fn vanished_instances_leave_their_container_instance_to_deregister() {
        let mut st = PoolState::default();
        st.observe(vec![ec2("i-a", Ec2State::Running)], vec![ci("i-a", 0)], at(1), at(1));
        let seen = st.observe(vec![], vec![ci("i-a", 0)], at(2), at(2));
        assert_eq!(seen.deregister, vec!["arn:ci/i-a".to_string()]);
        assert!(st.instances.is_empty() && st.gone.contains_key("i-a"));
        let again = st.observe(vec![], vec![ci("i-a", 0)], at(3), at(3));
        assert_eq!(again.deregister, vec!["arn:ci/i-a".to_string()], "until it is gone");
    }

    #[test]
    fn a_spot_warning_before_a_restart_is_known_from_the_tag() {
        let mut st = PoolState::default();
        let warned = Ec2Instance { spot: true, spot_warned_at: Some(at(3)), ..ec2("i-w", Ec2State::Running) };
        st.observe(vec![warned, ec2("i-a", Ec2State::Running)], vec![ci("i-w", 2), ci("i-a", 1)], at(5), at(5));
        let warned: Vec<bool> = st.slots(&Group::Pool(&pool())).iter().map(|s| s.spot_warned).collect();
        assert_eq!(warned, [false, true], "i-a, i-w");
        // A description taken before the tag landed does not forget the warning.
        let untagged = Ec2Instance { spot: true, ..ec2("i-w", Ec2State::Running) };
        st.observe(vec![untagged], vec![ci("i-w", 2)], at(6), at(6));
        assert_eq!(st.instances["i-w"].spot_warned_at(), Some(at(3)));
    }

    #[test]
    fn just_launched_instances_survive_a_stale_description() {
        let mut st = PoolState::default();
        st.launched(&pool(), &[ec2("i-new", Ec2State::Pending)], at(0));
        st.observe(vec![], vec![], at(10), at(10));
        assert!(st.instances.contains_key("i-new"));
        st.observe(vec![], vec![], at(200), at(200));
        assert!(!st.instances.contains_key("i-new"));
    }

    #[test]
    fn the_next_deadline_is_the_nearest_idle_or_register_timeout() {
        let cfg = Ec2Capacity::for_tests();
        let mut st = PoolState::default();
        let key = pool();
        let group = Group::Pool(&key);
        assert_eq!(st.next_deadline(&group, &st.policy(&group, &cfg), at(0)), None);
        st.observe(
            vec![ec2("i-a", Ec2State::Running), ec2("i-b", Ec2State::Pending)],
            vec![ci("i-a", 0)],
            at(10),
            at(10),
        );
        let policy = st.policy(&group, &cfg);
        assert_eq!(
            st.next_deadline(&group, &policy, at(20)),
            Some(Duration::from_secs(50)),
            "i-a idle since 10, for 60 s"
        );
        assert_eq!(st.next_deadline(&group, &policy, at(100)), Some(Duration::ZERO));
        let elsewhere = BTreeSet::from([pool()]);
        assert_eq!(st.next_deadline(&Group::LeftOver(&elsewhere), &policy, at(20)), None, "none left over");
    }

    #[test]
    fn slots_know_their_type_and_architecture_from_ec2_and_the_catalog() {
        use super::super::catalog::{AmiInfo, Catalog, TypeInfo};
        let (key, mut st) = (pool(), PoolState::default());
        let group = Group::Pool(&key);
        let graviton = Ec2Instance { instance_type: "c6g.xlarge".into(), ..ec2("i-g", Ec2State::Running) };
        st.observe(vec![ec2("i-x", Ec2State::Running), graviton], vec![], at(1), at(1));
        let arch = |st: &PoolState, id: &str| {
            st.slots(&group).into_iter().find(|s| s.id == id).map(|s| (s.instance_type, s.arch))
        };
        assert_eq!(arch(&st, "i-g"), Some(("c6g.xlarge".into(), Arch::Arm64)), "guessed before the catalog");
        let cfg = Ec2Capacity {
            instance_types: vec!["c5.xlarge".into(), "c6g.xlarge".into()],
            ami_ids: vec!["ami-1".into(), "ami-2".into()],
            ..Ec2Capacity::for_tests()
        };
        let ami = |id: &str, a| AmiInfo { id: id.into(), arch: Some(a), os: OsClass::Linux, root_gib: 30 };
        st.memory_mut(&pool()).set_catalog(Some(Catalog {
            types: vec![
                TypeInfo { name: "c5.xlarge".into(), arch: Arch::X86_64, capacity: Some(Resources::new(4096, 7482)) },
                // As EC2 says, whatever the name suggests.
                TypeInfo { name: "c6g.xlarge".into(), arch: Arch::Arm64, capacity: Some(Resources::new(4096, 7000)) },
            ],
            amis: vec![ami("ami-1", Arch::X86_64), ami("ami-2", Arch::Arm64)],
            estimated: None,
            problems: vec![],
            read_at: at(0),
            key: Catalog::key_of(&cfg),
        }));
        assert_eq!(arch(&st, "i-x"), Some(("c5.xlarge".into(), Arch::X86_64)));
        let offers = st.offers(Some(&pool()), &cfg);
        assert_eq!(
            offers.iter().map(|o| (o.name.as_str(), o.arch)).collect::<Vec<_>>(),
            [("c5.xlarge", Arch::X86_64), ("c6g.xlarge", Arch::Arm64)]
        );
        assert_eq!(offers[1].capacity, Resources::new(4096, 7000), "described");
    }

    #[test]
    fn container_instances_of_unknown_instances_are_reported_once_classified() {
        let mut st = PoolState::default();
        let seen = st.observe(vec![], vec![ci("i-x", 0)], at(1), at(1));
        assert_eq!(seen.unknown, vec![("i-x".to_string(), "arn:ci/i-x".to_string())]);
        st.foreign.insert("i-x".into());
        assert_eq!(st.observe(vec![], vec![ci("i-x", 0)], at(2), at(2)), Observed::default());
    }
}
