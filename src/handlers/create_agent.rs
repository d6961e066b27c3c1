//! `create-agent`: the job's cluster profile → its engine ([`crate::cluster::Cluster`]), which
//! reserves, launches (RunTask) or queues (EC2) and answers without waiting for the task
//! (`cluster/job/create.rs`); the outcome is counted here. With traces on, it is a span of the job's
//! trace (`telemetry::jobs`).

use std::sync::Arc;

use crate::cluster::job::create::Created;
use crate::cluster::{AgentRequest, EngineError};
use crate::error::Result;
use crate::metrics::LaunchResult;
use crate::plugin::Plugin;
use crate::protocol::requests::CreateAgentParams;

/// Starts an agent for the job unless one already serves it.
pub async fn create_agent(plugin: Arc<Plugin>, params: CreateAgentParams) -> Result<()> {
    let job = params.job_identifier.clone();
    crate::telemetry::jobs::create_agent(&job, Box::pin(start_agent(plugin, params))).await
}

async fn start_agent(plugin: Arc<Plugin>, params: CreateAgentParams) -> Result<()> {
    let found = plugin.cluster_for_job(&params.cluster_profile_properties, &params.job_identifier).await;
    let (cluster, snapshot) = found.inspect_err(|_| plugin.metrics().launch(LaunchResult::Failed))?;
    let site_url = plugin.server_info().await?.agent_url().map(str::to_string);
    let request = AgentRequest {
        profile: Arc::new(snapshot.profile),
        settings: snapshot.settings,
        job: params.job_identifier,
        environment: params.environment,
        auto_register_key: params.auto_register_key,
        elastic_profile: params.elastic_agent_profile_properties,
        site_url,
    };
    let launch_type = request.profile.launch_type;
    let result = match cluster.create_agent(request).await {
        Ok(Created::Started(capacity)) => LaunchResult::started_on(launch_type, Some(capacity.as_str())),
        Ok(Created::Queued) => LaunchResult::started_on(launch_type, Some("EC2")),
        Ok(Created::Existing | Created::Reused | Created::Finished) => LaunchResult::Deduplicated,
        Ok(Created::Full) => LaunchResult::MaxAgentsReached,
        Err(e) => {
            let refused = matches!(e, EngineError::Refused(_));
            plugin.metrics().launch(if refused { LaunchResult::Refused } else { LaunchResult::Failed });
            return Err(e.into());
        }
    };
    plugin.metrics().launch(result);
    Ok(())
}
