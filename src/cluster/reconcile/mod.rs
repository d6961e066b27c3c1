//! What the engine does without a request: it reconciles what it holds with what ECS and GoCD
//! say.
//!
//! - Server-ping's pass over a cluster profile (this file), never twice at once for one profile:
//!   observe (refresh our tasks from ECS, fold them and GoCD's agents into the registry), plan
//!   ([`plan::plan`], pure), apply ([`apply`]: stop tasks, remove agents, tell jobs), then the
//!   orphan sweep and the task-definition sweep (both cleanup: `cleanup/`). The registry's side
//!   of observing is `agents/observe.rs`.
//! - The event queue ([`queue`]): the events ECS and EC2 send, folded in as they come, between
//!   passes.

mod apply;
pub mod ec2;
pub mod plan;
pub mod queue;
mod warm;

use std::collections::HashMap;
use std::sync::PoisonError;
use std::time::Duration;

use super::agents::AgentRecord;
use super::base::error::EngineError;
use super::cleanup::{self, task_definitions};
use super::Cluster;
use crate::protocol::types::AgentMetadata;
use crate::settings::ClusterProfile;

pub use plan::Step;

/// What one pass saw that the caller may want to count.
#[derive(Debug, Default)]
pub struct PingReport {
    /// For each agent GoCD listed for the first time: how long it took from create-agent.
    pub registered_after: Vec<Duration>,
}

impl Cluster {
    /// One reconcile pass. `gocd` holds GoCD's agents of this cluster profile only.
    ///
    /// # Errors
    /// The failed refresh (nothing was decided), or a failed call to GoCD while applying.
    pub async fn ping(&self, gocd: HashMap<crate::ids::AgentId, AgentMetadata>) -> Result<PingReport, EngineError> {
        let _one_at_a_time = self.state.ping_lock.lock().await;
        // Server-ping resolved every cluster profile GoCD has before reconciling any engine.
        self.heard_every_profile();
        let refreshed_at = self.now();
        // The ping that adopts (the first after a start) reuses the adoption's reads: 2·⌈N/100⌉ calls, not twice that.
        let refresh = match self.adopt().await? {
            Some(adopted) => adopted,
            None => self.refresh().await?,
        };
        let now = self.now();
        // Each agent is judged by its own cluster profile's `AgentRegisterTimeoutMinutes` (the
        // profile of its settings fingerprint as GoCD last sent it), and by the profile GoCD sent
        // last only when its own is not known: not heard since the process started, or deleted.
        let (served, last_sent) = (self.served_by_settings(), self.profile());
        let minutes = |p: &ClusterProfile| Duration::from_secs(u64::from(p.agent_register_timeout_minutes) * 60);
        let timeout = |a: &AgentRecord| minutes(served.get(&a.settings).unwrap_or(&last_sent));
        // Read before the registry's lock is taken, never under it: the served profiles above,
        // the profile's retirement, and the orphan marks, which only this pass reads and writes
        // (under the ping lock).
        let retired = self.retired();
        let deleted = self.deleted_settings();
        let previous_marks =
            std::mem::take(&mut *self.state.orphan_marks.lock().unwrap_or_else(PoisonError::into_inner));
        let (registered_after, steps, orphans, marks) = {
            let mut registry = self.registry();
            let registered = registry.observe(&refresh.running, &refresh.described, &refresh.missing, &gocd, now);
            registry.settle_unknown_launches(refreshed_at);
            let swept = cleanup::plan::orphans(&registry, &refresh.running, &previous_marks);
            let mut steps = plan::plan(&registry, &gocd, timeout, now);
            // Decided under the same lock as should-assign-work's answers: claimed now, an agent
            // to stop cannot be given a job before its StopTask.
            for step in &steps {
                if let Step::StopTask { agent_id, .. } = step {
                    registry.claim_for_stop(agent_id);
                }
            }
            let reason = "its cluster profile was deleted in GoCD";
            if retired == Some(super::Retirement::Deleted) {
                steps.extend(plan::stop_all(&registry, &gocd, reason, |_| true));
            } else {
                // One team's profile deleted from an engine that other teams' profiles share.
                steps.extend(plan::stop_all(&registry, &gocd, reason, |a| deleted.contains(&a.settings)));
            }
            (registered, steps, swept.plan, swept.marks)
        };
        *self.state.orphan_marks.lock().unwrap_or_else(PoisonError::into_inner) = marks;
        // The pulls the refresh brought, counted before stopped records go.
        self.count_image_pulls();
        // Stopping tasks only: a failed stop is told by `stop_task` and tried again next pass.
        let _stopped = self.clean_up(orphans).await;
        task_definitions::run(self).await;
        self.apply(steps).await?;
        Ok(PingReport { registered_after })
    }
}
