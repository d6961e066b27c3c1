//! The warm pools' pass and create-agent's part in it: after a create-agent of a warm profile,
//! after a job-completion and at each server-ping, every pool (`capacity/warm/pools.rs`) is
//! planned ([`mod@crate::cluster::capacity::warm::plan`], pure) and applied: warm agents started on
//! the oldest usable held keys, surplus idle ones retired, keys too old to use dropped.

use std::sync::{Arc, PoisonError};
use std::time::SystemTime;

use crate::cluster::agents::steps::Step;
use crate::cluster::base::identity::new_agent_id;
use crate::cluster::base::locks::MutexGuard;
use crate::cluster::capacity::warm::pools::{HeldKey, PoolId, PoolStatus, WarmPools};
use crate::cluster::capacity::warm::{self, IdleAgent, PoolView};
use crate::cluster::launch::snapshot::{AgentRequest, RequestSnapshot};
use crate::cluster::Cluster;
use crate::protocol::host_calls::HealthKind;

impl Cluster {
    /// Every warm pool now, for the cluster status report.
    pub fn warm_pool_status(&self, now: SystemTime) -> Vec<PoolStatus> {
        let ids = self.warm_pools().ids();
        ids.iter()
            .filter_map(|id| {
                let (plan_view, target, snapshot) = self.pool_view(id, now)?;
                let warm = &snapshot.elastic.warm;
                Some(PoolStatus {
                    elastic_profile: id.elastic_profile().to_string(),
                    environment: id.environment().map(str::to_string),
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
            // WarmAgents taken out of the profile: its pool, if it has one, learns it and
            // retires its agents at the pass below.
            if !snapshot.elastic.warm.is_on() && !pools.turned_off(&pool, snapshot) {
                return;
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

    /// One pass over every warm pool: start, retire, forget keys ([`mod@warm::plan`]).
    pub async fn tend_warm_pools(self: &Arc<Self>) {
        let _one_at_a_time = self.state.warm_pass.lock().await;
        let ids = self.warm_pools().ids();
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
        let held = self.warm_pools().take_keys(id, &plan.start, &plan.drop_keys);
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
        let (snapshot, target, keys) = self.warm_pools().target(id, now)?;
        let max_agents = snapshot.profile.max_agents;
        let registry = self.registry();
        let mine = |a: &&crate::cluster::agents::AgentRecord| id.has(a);
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
        let live = registry.all().filter(|a| a.phase.occupies_capacity() && a.settings == *id.settings()).count();
        let headroom = max_agents.saturating_sub(u32::try_from(live).unwrap_or(u32::MAX));
        Some((PoolView { idle, starting, keys, headroom }, target, snapshot))
    }

    /// Starts one warm agent on a held key: reserved with no job of its own, launched like any
    /// agent (its task carries the lending job's tags; its job comes from GoCD).
    async fn start_warm(self: &Arc<Self>, snapshot: &Arc<RequestSnapshot>, key: HeldKey) {
        let request = key.request;
        let agent_id = new_agent_id(self.key(), &request.job);
        let new = snapshot.new_agent(request.environment.clone());
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
