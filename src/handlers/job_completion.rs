//! `job-completion`: the agent's work is done — the engine records it, then disables the agent
//! in GoCD, stops its task and deletes it ([`crate::cluster::Cluster::complete`]). Answers 200
//! once the job's end is recorded: GoCD does not retry a failed job-completion (and skips its
//! own cleanup after a 500), so whatever failed is retried by the next server-pings. With traces
//! on, it is the last span of the job's trace, which it ends (`telemetry::jobs`).

use std::sync::Arc;

use crate::error::Result;
use crate::ids::AgentId;
use crate::plugin::Plugin;
use crate::protocol::requests::JobCompletionParams;

/// Disables the agent, stops its task and deletes the agent.
pub async fn job_completion(plugin: Arc<Plugin>, params: JobCompletionParams) -> Result<()> {
    let job = params.job_identifier.clone();
    crate::telemetry::jobs::job_completion(&job, Box::pin(complete(plugin, params))).await
}

async fn complete(plugin: Arc<Plugin>, params: JobCompletionParams) -> Result<()> {
    let agent_id = params.elastic_agent_id.as_str();
    match plugin.cluster_for_agent(agent_id, &params.cluster_profile_properties).await {
        Ok(Some(cluster)) => {
            if cluster.complete(&AgentId::from(agent_id), &params.job_identifier).await
                == crate::cluster::job::complete::Completed::Kept
            {
                // A kept agent may fill its warm pool, or be one too many.
                tokio::spawn(async move { cluster.tend_warm_pools().await });
            }
        }
        Ok(None) => tracing::warn!(agent_id, "job completed on an agent of no cluster profile this plugin knows"),
        Err(e) => {
            tracing::warn!(agent_id, error = %e, "job completed, but its cluster profile cannot be served now; server-ping cleans up")
        }
    }
    Ok(())
}
