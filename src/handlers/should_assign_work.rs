//! `should-assign-work`: answered from memory only, since GoCD asks it under a global lock.
//! True exactly when this agent was started for this job.

use std::sync::Arc;

use crate::error::Result;
use crate::plugin::Plugin;
use crate::protocol::requests::ShouldAssignWorkParams;

/// Whether the agent was started for exactly this job.
pub async fn should_assign_work(plugin: Arc<Plugin>, params: ShouldAssignWorkParams) -> Result<bool> {
    let agent_id = params.agent.agent_id.as_str();
    let Some(cluster) = plugin.cluster_of_agent(agent_id) else { return Ok(false) };
    let mut registry = cluster.registry();
    let Some(record) = registry.get_mut(agent_id) else { return Ok(false) };
    let yes = record.job.job_id == params.job_identifier.job_id && record.phase.is_live();
    if yes {
        record.assigned_at.get_or_insert_with(std::time::SystemTime::now);
    }
    Ok(yes)
}
