//! `job-completion`: the agent's work is done — the engine disables it in GoCD, stops its
//! task and deletes it ([`crate::cluster::Cluster::complete`]).

use std::sync::Arc;

use crate::error::Result;
use crate::plugin::Plugin;
use crate::protocol::requests::JobCompletionParams;

/// Disables the agent, stops its task and deletes the agent.
pub async fn job_completion(plugin: Arc<Plugin>, params: JobCompletionParams) -> Result<()> {
    let agent_id = params.elastic_agent_id.as_str();
    let Some(cluster) = plugin.cluster_for_agent(agent_id, &params.cluster_profile_properties).await? else {
        tracing::warn!(agent_id, "job completed on an agent of no cluster profile this plugin knows");
        return Ok(());
    };
    cluster.complete(agent_id, &params.job_identifier).await?;
    Ok(())
}
