//! `job-completion`: the agent's work is done — disable it in GoCD, stop its task, delete it.

use std::sync::Arc;
use std::time::SystemTime;

use crate::cluster::registry::Phase;
use crate::cluster::Cluster;
use crate::error::Result;
use crate::plugin::Plugin;
use crate::protocol::host_calls::HealthKind;
use crate::protocol::requests::JobCompletionParams;

/// Disables the agent, stops its task and deletes the agent.
pub async fn job_completion(plugin: Arc<Plugin>, params: JobCompletionParams) -> Result<()> {
    let agent_id = params.elastic_agent_id.clone();
    let cluster = match plugin.cluster_of_agent(&agent_id) {
        Some(cluster) => cluster,
        None if !params.cluster_profile_properties.is_empty() => {
            plugin.cluster(&params.cluster_profile_properties).await?
        }
        None => {
            tracing::warn!(agent_id, "job completed on an agent of no cluster profile this plugin knows");
            return Ok(());
        }
    };
    // First, so that a create-agent for this job arriving late never starts another agent.
    cluster.registry().job_finished(params.job_identifier.job_id, SystemTime::now());
    cluster.ensure_adopted().await?;
    let task_arn = {
        let mut registry = cluster.registry();
        let Some(record) = registry.get_mut(&agent_id) else {
            tracing::warn!(agent_id, "job completed on an agent this plugin did not start; leaving it alone");
            return Ok(());
        };
        record.phase = Phase::Stopping;
        record.task_arn.clone()
    };
    let ids = [agent_id.clone()];
    plugin.host().disable_agents(&ids).await?;
    if let Some(arn) = &task_arn {
        stop_task(&cluster, arn, &format!("GoCD job {} completed", params.job_identifier.locator())).await?;
    }
    plugin.host().delete_agents(&ids).await?;
    cluster.registry().stopped(&agent_id, "job completed", SystemTime::now());
    tracing::info!(agent_id, job = %params.job_identifier.locator(), "job completed: agent stopped and deleted");
    Ok(())
}

/// Stops one task of ours, with a reason ECS shows.
///
/// # Errors
/// The failed StopTask call (server-ping tries again).
pub async fn stop_task(cluster: &Cluster, task_arn: &str, reason: &str) -> Result<()> {
    let cluster_name = cluster.profile().cluster_name.clone();
    let reason: String = reason.chars().take(255).collect();
    let request = cluster.aws.ecs.stop_task().cluster(cluster_name).task(task_arn).reason(reason);
    match cluster.aws.calls.call("StopTask", || request.clone().send()).await {
        Ok(_) => Ok(()),
        Err(e) => {
            cluster.event(HealthKind::Warning, format!("could not stop task {task_arn}: {e}"));
            Err(e.into())
        }
    }
}
