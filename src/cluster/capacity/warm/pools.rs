//! The warm pools of one cluster profile at run time (`WarmAgents`, `WarmSchedule`): per pool
//! (elastic profile, cluster profile settings, environment) the unused registration keys that
//! create-agent requests brought, the arrivals of the last three days, and the pass that applies the
//! pure planner ([`super`]): start warm agents on the oldest usable keys, retire the
//! surplus idle ones, forget keys too old to use. The rules and why are in the planner's docs.
//!
//! Keys are held here, in memory only, as `Secret`s (inside their requests): never logged, lost at a restart (the
//! first jobs after one start cold, and the pool forms again from their agents). A pool's pass
//! runs after a create-agent of a warm profile, after a job-completion and at each server-ping.
//! Warm agents start on every launch type; on Fargate, `WarmLaunchType` says whether they run on
//! `FARGATE` or `FARGATE_SPOT` (`launch::route`). On EC2 a warm agent's work waits for room like any
//! other (an instance with room, a stopped one started, or a launch), but no job renews its key,
//! so it is dropped if not placed within five minutes (`ec2::driver`), while its key still has
//! time left for the agent to register.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime};

use super::{IdleAgent, PoolView, UnusedKey};
use crate::cluster::agents::steps::Step;
use crate::cluster::agents::NewAgent;
use crate::cluster::base::identity::new_agent_id;
use crate::cluster::base::locks::MutexGuard;
use crate::cluster::capacity::warm;
use crate::cluster::job::create::AgentRequest;
use crate::cluster::job::snapshot::RequestSnapshot;
use crate::cluster::Cluster;
use crate::ids::SettingsFingerprint;
use crate::protocol::host_calls::HealthKind;

/// The cold start `auto` sizes a pool for.
const COLD_START: Duration = Duration::from_secs(60);
/// The most unused keys a pool holds (GoCD re-sends create-agent for every waiting job each
/// minute or so): the oldest go first, they have the least time left.
const MAX_KEYS_PER_POOL: usize = 100;

/// A pool: one elastic profile (its hash), cluster profile settings and environment.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PoolId {
    elastic_profile: String,
    settings: SettingsFingerprint,
    environment: Option<String>,
}

impl PoolId {
    /// The pool of a request's agents.
    pub fn of(snapshot: &RequestSnapshot, environment: Option<&str>) -> PoolId {
        PoolId {
            elastic_profile: snapshot.elastic.hash.clone(),
            settings: snapshot.settings.clone(),
            environment: environment.map(str::to_string),
        }
    }
}

/// An unused key and the request it came with (what a warm agent started on it runs).
#[derive(Debug, Clone)]
struct HeldKey {
    id: String,
    received_at: SystemTime,
    request: AgentRequest,
    server_url: String,
}

/// One pool's memory.
#[derive(Debug, Default)]
struct Pool {
    keys: Vec<HeldKey>,
    arrivals: VecDeque<SystemTime>,
    /// The newest request's snapshot: the pool's current `WarmAgents`, `WarmSchedule`, profile.
    latest: Option<Arc<RequestSnapshot>>,
}

/// Every warm pool of a cluster profile.
#[derive(Debug, Default)]
pub struct WarmPools {
    pools: BTreeMap<PoolId, Pool>,
    next_key: u64,
}

impl WarmPools {
    /// A job's first create-agent for `pool` arrived (for `auto`'s sizing).
    pub fn arrived(&mut self, pool: PoolId, snapshot: &Arc<RequestSnapshot>, now: SystemTime) {
        let p = self.pools.entry(pool).or_default();
        p.latest = Some(snapshot.clone());
        p.arrivals.push_back(now);
        while p.arrivals.front().is_some_and(|t| now.duration_since(*t).unwrap_or_default() > warm::AUTO_MEMORY) {
            p.arrivals.pop_front();
        }
    }

    /// Holds the unused key of a create-agent whose job needed no new agent.
    pub fn hold(
        &mut self,
        pool: PoolId,
        snapshot: &Arc<RequestSnapshot>,
        request: &AgentRequest,
        server_url: &str,
        now: SystemTime,
    ) {
        self.next_key += 1;
        let id = format!("k{}", self.next_key);
        let p = self.pools.entry(pool).or_default();
        p.latest = Some(snapshot.clone());
        p.keys.push(HeldKey { id, received_at: now, request: request.clone(), server_url: server_url.to_string() });
        if p.keys.len() > MAX_KEYS_PER_POOL {
            p.keys.remove(0);
        }
    }

    /// Unused keys held, over all pools (for the report).
    pub fn keys_held(&self) -> usize {
        self.pools.values().map(|p| p.keys.len()).sum()
    }
}

/// One pool as the cluster status report shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PoolStatus {
    /// The elastic profile's hash.
    pub elastic_profile: String,
    /// The GoCD environment, if any.
    pub environment: Option<String>,
    /// `WarmAgents` as set (`2`, `auto`).
    pub setting: String,
    /// `WarmSchedule` as written; empty is always.
    pub schedule: String,
    /// Whether the schedule is open now.
    pub open: bool,
    /// How many idle agents the pool aims at now.
    pub target: u32,
    /// Idle agents ready for a job.
    pub idle: usize,
    /// Warm agents starting.
    pub starting: u32,
    /// Unused keys held (never the keys themselves).
    pub keys: usize,
    /// `WarmLaunchType` as set (`FARGATE_SPOT`); empty, the cluster profile's launch type.
    pub launch_type: String,
}

impl Cluster {
    /// Every warm pool now, for the cluster status report.
    pub fn warm_pool_status(&self, now: SystemTime) -> Vec<PoolStatus> {
        let ids: Vec<PoolId> = self.warm_pools().pools.keys().cloned().collect();
        ids.iter()
            .filter_map(|id| {
                let (plan_view, target, snapshot) = self.pool_view(id, now)?;
                let warm = &snapshot.elastic.warm;
                Some(PoolStatus {
                    elastic_profile: id.elastic_profile.clone(),
                    environment: id.environment.clone(),
                    setting: match warm.agents {
                        crate::settings::warm_agents::WarmAgents::Off => "0".into(),
                        crate::settings::warm_agents::WarmAgents::Count(n) => n.to_string(),
                        crate::settings::warm_agents::WarmAgents::Auto => "auto".into(),
                    },
                    schedule: if warm.schedule.is_always() { String::new() } else { warm.schedule.to_string() },
                    open: warm.schedule.is_open(now),
                    target,
                    idle: plan_view.idle.len(),
                    starting: plan_view.starting,
                    keys: plan_view.keys.len(),
                    launch_type: warm.launch_type.map(|t| t.as_str().to_string()).unwrap_or_default(),
                })
            })
            .collect()
    }

    /// The warm pools, locked. Never hold across an `.await`.
    fn warm_pools(&self) -> MutexGuard<'_, WarmPools> {
        self.state.warm.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// create-agent of a warm profile: counts the arrival of a new job, holds the key when its
    /// job needed no new agent, then runs the pool's pass in the background.
    pub(in crate::cluster) fn warm_after_request(
        self: &Arc<Self>,
        snapshot: &Arc<RequestSnapshot>,
        request: &AgentRequest,
        server_url: &str,
        new_job: bool,
        key_unused: bool,
    ) {
        let pool = PoolId::of(snapshot, request.environment.as_deref());
        let now = self.now();
        {
            let mut pools = self.warm_pools();
            if !snapshot.elastic.warm.is_on() {
                // WarmAgents taken out of the profile: its pool, if it has one, learns it and
                // retires its agents at the pass below.
                match pools.pools.get_mut(&pool) {
                    Some(p) => p.latest = Some(snapshot.clone()),
                    None => return,
                }
            }
            if new_job && snapshot.elastic.warm.is_on() {
                pools.arrived(pool.clone(), snapshot, now);
            }
            if key_unused && snapshot.elastic.warm.is_on() {
                pools.hold(pool, snapshot, request, server_url, now);
            }
        }
        let cluster = self.clone();
        self.spawn_background(async move { cluster.tend_warm_pools().await });
    }

    /// One pass over every warm pool: start, retire, forget keys ([`warm::plan`]).
    pub async fn tend_warm_pools(self: &Arc<Self>) {
        let _one_at_a_time = self.state.warm_pass.lock().await;
        let ids: Vec<PoolId> = self.warm_pools().pools.keys().cloned().collect();
        for id in ids {
            self.tend(&id).await;
        }
    }

    async fn tend(self: &Arc<Self>, id: &PoolId) {
        let now = self.now();
        let Some((plan, snapshot)) = self.plan_pool(id, now) else { return };
        if plan.is_empty() {
            return;
        }
        let held: Vec<HeldKey> = {
            let mut pools = self.warm_pools();
            let Some(pool) = pools.pools.get_mut(id) else { return };
            pool.keys.retain(|k| !plan.drop_keys.contains(&k.id));
            let (taken, kept): (Vec<HeldKey>, Vec<HeldKey>) =
                pool.keys.drain(..).partition(|k| plan.start.contains(&k.id));
            pool.keys = kept;
            taken
        };
        for key in held {
            self.start_warm(&snapshot, key).await;
        }
        let mut steps = Vec::new();
        for agent_id in &plan.retire {
            let Some(task_arn) = self.registry().retire_waiting(agent_id) else { continue };
            let reason = "a warm agent beyond WarmAgents (or outside WarmSchedule)".to_string();
            steps.push(Step::StopTask { agent_id: agent_id.clone(), task_arn, reason, job: None });
            steps.push(Step::RemoveAgent { agent_id: agent_id.clone(), reason: "retired from its warm pool".into() });
        }
        if let Err(e) = self.apply(steps).await {
            self.event(HealthKind::Warning, format!("could not retire warm agents: {e}"));
        }
    }

    /// What the planner says for one pool now, with the pool's newest snapshot.
    fn plan_pool(&self, id: &PoolId, now: SystemTime) -> Option<(warm::WarmPlan, Arc<RequestSnapshot>)> {
        let (view, target, snapshot) = self.pool_view(id, now)?;
        Some((warm::plan(&view, target, now), snapshot))
    }

    /// What one pool holds now, the target it aims at, and its newest snapshot.
    fn pool_view(&self, id: &PoolId, now: SystemTime) -> Option<(PoolView, u32, Arc<RequestSnapshot>)> {
        // Copied out of the pools' lock, released before the registry's is taken.
        let (snapshot, target, keys) = {
            let pools = self.warm_pools();
            let pool = pools.pools.get(id)?;
            let snapshot = pool.latest.clone()?;
            let arrivals: Vec<SystemTime> = pool.arrivals.iter().copied().collect();
            let open = snapshot.elastic.warm.schedule.is_open(now);
            let max_agents = snapshot.profile.max_agents;
            let target = warm::target(snapshot.elastic.warm.agents, open, &arrivals, COLD_START, max_agents, now);
            let keys: Vec<UnusedKey> =
                pool.keys.iter().map(|k| UnusedKey { id: k.id.clone(), received_at: k.received_at }).collect();
            (snapshot, target, keys)
        };
        let max_agents = snapshot.profile.max_agents;
        let registry = self.registry();
        let mine = |a: &&crate::cluster::agents::AgentRecord| {
            a.elastic_profile == id.elastic_profile && a.settings == id.settings && a.environment == id.environment
        };
        let waiting: Vec<&crate::cluster::agents::AgentRecord> =
            registry.all().filter(mine).filter(|a| a.phase.is_live() && a.waiting_since.is_some()).collect();
        let idle = waiting
            .iter()
            .filter(|a| a.phase == crate::cluster::agents::Phase::Running && (a.registered_at.is_some() || !a.warm))
            .map(|a| IdleAgent {
                id: a.agent_id.clone(),
                idle_since: a.waiting_since.unwrap_or(now),
                spot: a.capacity == Some(crate::cluster::agents::tasks::Capacity::FargateSpot),
            })
            .collect::<Vec<_>>();
        let starting = u32::try_from(waiting.len() - idle.len()).unwrap_or(u32::MAX);
        let live = registry.all().filter(|a| a.phase.occupies_capacity() && a.settings == id.settings).count();
        let headroom = max_agents.saturating_sub(u32::try_from(live).unwrap_or(u32::MAX));
        Some((PoolView { idle, starting, keys, headroom }, target, snapshot))
    }

    /// Starts one warm agent on a held key: reserved with no job of its own, launched like any
    /// agent (its task carries the lending job's tags; its job comes from GoCD).
    async fn start_warm(self: &Arc<Self>, snapshot: &Arc<RequestSnapshot>, key: HeldKey) {
        let request = key.request;
        let agent_id = new_agent_id(self.key(), &request.job);
        let new = NewAgent {
            environment: request.environment.clone(),
            elastic_profile: snapshot.elastic.hash.clone(),
            settings: snapshot.settings.clone(),
            image: snapshot.elastic.image.clone(),
            reuse: snapshot.reuse(),
        };
        let max_agents = snapshot.profile.max_agents as usize;
        if !self.registry().reserve_warm(&request.job, agent_id.clone(), max_agents, new, self.now()) {
            return;
        }
        match self.start(snapshot, &request, agent_id.clone(), 1, key.server_url).await {
            Ok((line, _)) => tracing::info!(agent_id = agent_id.as_str(), "warm agent started: {line}"),
            Err(e) => {
                self.registry().launch_failed(&agent_id, format!("launch failed: {e}"), self.now());
                self.event(HealthKind::Warning, format!("could not start a warm agent: {e}"));
            }
        }
    }
}
