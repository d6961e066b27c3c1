//! `should-assign-work`: answered from memory only, since GoCD asks it under a global lock.
//! True exactly when this agent was started for this job.
//!
//! After a restart, an agent's cluster profile may not be adopted yet: the answer is then
//! `false` at once, and the adoption starts in the background so that GoCD's next ask (it asks
//! again on the agent's next work poll) finds the agent.

use std::sync::Arc;

use crate::error::Result;
use crate::plugin::Plugin;
use crate::protocol::requests::ShouldAssignWorkParams;

/// Whether the agent was started for exactly this job.
pub async fn should_assign_work(plugin: Arc<Plugin>, params: ShouldAssignWorkParams) -> Result<bool> {
    let agent_id = params.agent.agent_id.as_str();
    let Some(cluster) = plugin.cluster_of_agent(agent_id) else {
        adopt_in_background(plugin.clone(), &params);
        return Ok(false);
    };
    let mut registry = cluster.registry();
    let Some(record) = registry.get_mut(agent_id) else { return Ok(false) };
    let yes = record.job.job_id == params.job_identifier.job_id && record.phase.is_live();
    if yes {
        record.assigned_at.get_or_insert_with(std::time::SystemTime::now);
    }
    Ok(yes)
}

fn adopt_in_background(plugin: Arc<Plugin>, params: &ShouldAssignWorkParams) {
    if params.cluster_profile_properties.is_empty()
        || crate::cluster::identity::cluster_key_of_agent(&params.agent.agent_id).is_none()
    {
        return;
    }
    let props = params.cluster_profile_properties.clone();
    tokio::spawn(async move {
        let adopted =
            async { plugin.cluster(&props).await?.ensure_adopted().await.map_err(crate::error::PluginError::from) };
        if let Err(e) = adopted.await {
            tracing::warn!(error = %e, "could not adopt the tasks of an agent's cluster profile");
        }
    });
}
