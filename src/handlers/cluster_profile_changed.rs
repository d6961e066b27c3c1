//! `cluster-profile-changed`: forget what was cached for the old profile (clients, assumed-role
//! sessions, resolved networking), so the next request builds it afresh from the new one.

use std::sync::Arc;

use crate::error::Result;
use crate::plugin::Plugin;
use crate::protocol::requests::{ChangeStatus, ClusterProfileChangedParams};

/// Drops cached state of the profiles named; always 200.
pub async fn changed(plugin: Arc<Plugin>, params: ClusterProfileChangedParams) -> Result<()> {
    let ClusterProfileChangedParams { status, cluster_profiles_properties, old_cluster_profiles_properties } = params;
    match status {
        ChangeStatus::Created => tracing::info!("cluster profile created"),
        ChangeStatus::Updated => {
            tracing::info!("cluster profile updated: dropping what was cached for the old one");
            if let Some(old) = &old_cluster_profiles_properties {
                plugin.forget_cluster_profile(old);
            }
        }
        ChangeStatus::Deleted => tracing::info!("cluster profile deleted: dropping what was cached for it"),
        _ => tracing::warn!(?status, "cluster-profile-changed with a status this plugin does not know"),
    }
    plugin.forget_cluster_profile(&cluster_profiles_properties);
    Ok(())
}
