//! The three status reports: plugin (every profile), cluster (one profile), agent (one agent,
//! by id or by job). Built from what the plugin knows in memory (refreshed every server-ping;
//! adopted from AWS on first use), rendered by `status`.

use std::sync::Arc;

use crate::error::Result;
use crate::plugin::Plugin;
use crate::protocol::requests::{
    AgentStatusReportParams, ClusterStatusReportParams, PluginStatusReportParams, StatusReport,
};
use crate::status;

/// Every cluster profile at a glance.
pub async fn plugin_status_report(plugin: Arc<Plugin>, params: PluginStatusReportParams) -> Result<StatusReport> {
    let server = plugin.server_info().await?;
    let mut snapshots = Vec::new();
    let mut broken = Vec::new();
    for props in &params.all_cluster_profiles_properties {
        match plugin.cluster(props).await {
            Ok(cluster) => {
                if let Err(e) = cluster.ensure_adopted().await {
                    broken.push(format!("ECS cluster {}: {e}", cluster.profile().cluster_name));
                }
                snapshots.push(status::snapshot(&cluster));
            }
            Err(e) => broken.push(e.to_string()),
        }
    }
    Ok(StatusReport { view: status::render_plugin(&server.server_id, &snapshots, &broken) })
}

/// One cluster profile: capacity, agents, events, AWS calls, role.
pub async fn cluster_status_report(plugin: Arc<Plugin>, params: ClusterStatusReportParams) -> Result<StatusReport> {
    let cluster = match plugin.cluster(&params.cluster_profile_properties).await {
        Ok(cluster) => cluster,
        Err(e) => return Ok(broken_profile(&plugin, &e).await),
    };
    if let Err(e) = cluster.ensure_adopted().await {
        cluster.event(crate::protocol::host_calls::HealthKind::Error, format!("could not read tasks: {e}"));
    }
    // The "Images" table's sizes: one ECR read per image an hour at most.
    cluster.refresh_image_sizes().await;
    Ok(StatusReport { view: status::render_cluster(&status::snapshot(&cluster)) })
}

/// One agent, by id or by the job it serves; says plainly when it is unknown.
pub async fn agent_status_report(plugin: Arc<Plugin>, params: AgentStatusReportParams) -> Result<StatusReport> {
    let agent_id = params.elastic_agent_id.as_deref();
    let job_id = params.job_identifier.as_ref().map(|j| j.job_id);
    let asked_job = params.job_identifier.as_ref().map(|j| j.locator());
    let cluster = match agent_id.and_then(|id| plugin.cluster_of_agent(id)) {
        Some(cluster) => Some(cluster),
        None if !params.cluster_profile_properties.is_empty() => {
            match plugin.cluster(&params.cluster_profile_properties).await {
                Ok(cluster) => Some(cluster),
                Err(e) => return Ok(broken_profile(&plugin, &e).await),
            }
        }
        None => None,
    };
    let Some(cluster) = cluster else {
        return Ok(StatusReport { view: status::render_agent(None, "", "", agent_id, asked_job.as_deref()) });
    };
    let _ = cluster.ensure_adopted().await;
    let row = status::find_agent(&cluster, agent_id, job_id);
    let profile = cluster.profile();
    Ok(StatusReport {
        view: status::render_agent(
            row.as_ref(),
            &profile.cluster_name,
            &cluster.aws().region,
            agent_id,
            asked_job.as_deref(),
        ),
    })
}

/// A report for a cluster profile that cannot be served: the page says why (GoCD shows a
/// plugin's 500 as "Something went wrong", which tells an operator nothing).
async fn broken_profile(plugin: &Plugin, error: &crate::error::PluginError) -> StatusReport {
    let server_id = plugin.server_info().await.map(|s| s.server_id).unwrap_or_default();
    StatusReport { view: status::render_plugin(&server_id, &[], &[error.to_string()]) }
}
