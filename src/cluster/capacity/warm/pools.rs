//! The warm pools of one cluster profile at run time (`WarmAgents`, `WarmSchedule`): per pool
//! (elastic profile, cluster profile settings, environment) the unused registration keys that
//! create-agent requests brought, the arrivals of the last three days, and the newest request.
//! The pass that applies the pure planner ([`super`]) to them is `reconcile/warm.rs`: start warm
//! agents on the oldest usable keys, retire the surplus idle ones, forget keys too old to use.
//! The rules and why are in the planner's docs.
//!
//! Keys are held here, in memory only, as `Secret`s (inside their requests): never logged, lost at a restart (the
//! first jobs after one start cold, and the pool forms again from their agents). A pool's pass
//! runs after a create-agent of a warm profile, after a job-completion and at each server-ping.
//! Warm agents start on every launch type; on Fargate, `WarmLaunchType` says whether they run on
//! `FARGATE` or `FARGATE_SPOT` (`launch::route`). On EC2 a warm agent's work waits for room like any
//! other (an instance with room, a stopped one started, or a launch), but no job renews its key,
//! so it is dropped if not placed within five minutes (`reconcile/ec2/driver.rs`), while its key still has
//! time left for the agent to register.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::UnusedKey;
use crate::cluster::agents::AgentRecord;
use crate::cluster::capacity::warm;
use crate::cluster::launch::snapshot::{AgentRequest, RequestSnapshot};
use crate::ids::SettingsFingerprint;

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
    /// Its elastic profile's hash.
    pub fn elastic_profile(&self) -> &str {
        &self.elastic_profile
    }

    /// Its cluster profile's settings fingerprint.
    pub fn settings(&self) -> &SettingsFingerprint {
        &self.settings
    }

    /// Its pipelines' environment.
    pub fn environment(&self) -> Option<&str> {
        self.environment.as_deref()
    }

    /// Whether `agent` is of this pool: its elastic profile, cluster profile settings and
    /// environment.
    pub fn has(&self, agent: &AgentRecord) -> bool {
        agent.elastic_profile == self.elastic_profile
            && agent.settings == self.settings
            && agent.environment == self.environment
    }

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
pub struct HeldKey {
    id: String,
    received_at: SystemTime,
    /// The request it came with.
    pub request: AgentRequest,
    /// The GoCD URL its agent registers with.
    pub server_url: String,
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

    /// Every pool's id.
    pub fn ids(&self) -> Vec<PoolId> {
        self.pools.keys().cloned().collect()
    }

    /// The newest request of a pool whose profile no longer has warm agents: the pool learns it
    /// (and retires its agents at its next pass). Whether there is such a pool.
    pub fn turned_off(&mut self, pool: &PoolId, snapshot: &Arc<RequestSnapshot>) -> bool {
        match self.pools.get_mut(pool) {
            Some(p) => {
                p.latest = Some(snapshot.clone());
                true
            }
            None => false,
        }
    }

    /// Takes out of pool `id` the keys `start` names (to start warm agents on), and drops those
    /// `drop` names.
    pub fn take_keys(&mut self, id: &PoolId, start: &[String], drop: &[String]) -> Vec<HeldKey> {
        let Some(pool) = self.pools.get_mut(id) else { return Vec::new() };
        pool.keys.retain(|k| !drop.contains(&k.id));
        let (taken, kept): (Vec<HeldKey>, Vec<HeldKey>) = pool.keys.drain(..).partition(|k| start.contains(&k.id));
        pool.keys = kept;
        taken
    }

    /// Pool `id` at `now`: its newest request's snapshot, the number of warm agents it aims at
    /// ([`mod@warm::target`]) and its unused keys.
    pub fn target(&self, id: &PoolId, now: SystemTime) -> Option<(Arc<RequestSnapshot>, u32, Vec<UnusedKey>)> {
        let pool = self.pools.get(id)?;
        let snapshot = pool.latest.clone()?;
        let arrivals: Vec<SystemTime> = pool.arrivals.iter().copied().collect();
        let open = snapshot.elastic.warm.schedule.is_open(now);
        let max_agents = snapshot.profile.max_agents;
        let target = warm::target(snapshot.elastic.warm.agents, open, &arrivals, COLD_START, max_agents, now);
        let keys = pool.keys.iter().map(|k| UnusedKey { id: k.id.clone(), received_at: k.received_at }).collect();
        Some((snapshot, target, keys))
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
