//! `should-assign-work`: answered from memory only, since GoCD asks it under a global lock.
//! True exactly when this agent was started for this job, or waits for its next one and takes
//! this one (warm starts) ([`crate::cluster::Cluster::should_assign`]).
//!
//! After a restart, an agent's cluster profile may not be adopted yet: the answer is then
//! `false` at once, and the adoption starts in the background so that GoCD's next ask (it asks
//! again on the agent's next work poll) finds the agent.

use std::sync::Arc;

use crate::cluster::agents::reuse::Offer;
use crate::cluster::base::identity::{cluster_key_of_agent, settings_fingerprint};
use crate::error::Result;
use crate::ids::AgentId;
use crate::plugin::Plugin;
use crate::protocol::requests::ShouldAssignWorkParams;
use crate::settings::profile_hash;

/// Whether the agent was started for exactly this job.
pub async fn should_assign_work(plugin: Arc<Plugin>, params: ShouldAssignWorkParams) -> Result<bool> {
    let agent_id = params.agent.agent_id.as_str();
    match plugin.cluster_of_agent(agent_id) {
        Some(cluster) => Ok(cluster.should_assign(&AgentId::from(agent_id), &params.job_identifier, || Offer {
            environment: params.environment.clone(),
            elastic_profile: profile_hash(&params.elastic_agent_profile_properties),
            settings: settings_fingerprint(&params.cluster_profile_properties),
        })),
        None => {
            adopt_in_background(plugin.clone(), &params);
            Ok(false)
        }
    }
}

fn adopt_in_background(plugin: Arc<Plugin>, params: &ShouldAssignWorkParams) {
    if params.cluster_profile_properties.is_empty() || cluster_key_of_agent(&params.agent.agent_id).is_none() {
        return;
    }
    let props = params.cluster_profile_properties.clone();
    tokio::spawn(async move {
        let adopted =
            async { Ok::<_, crate::error::PluginError>(plugin.cluster(&props).await?.ensure_adopted().await?) };
        if let Err(e) = adopted.await {
            tracing::warn!(error = %e, "could not adopt the tasks of an agent's cluster profile");
        }
    });
}
