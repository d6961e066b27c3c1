//! `cluster-profile-changed`: an edit that keeps where the profile acts keeps its engine and
//! all in flight; a deletion drains it at once; a move drains the old one as jobs complete
//! ([`Plugin::cluster_profile_changed`]). Always 200.

use std::sync::Arc;

use crate::error::Result;
use crate::plugin::Plugin;
use crate::protocol::requests::{ChangeStatus, ClusterProfileChangedParams};

/// Keeps, drains or retires the profile's engine; always 200.
pub async fn changed(plugin: Arc<Plugin>, params: ClusterProfileChangedParams) -> Result<()> {
    let ClusterProfileChangedParams { status, cluster_profiles_properties, old_cluster_profiles_properties } = params;
    let old = old_cluster_profiles_properties.as_ref();
    match status {
        ChangeStatus::Created => tracing::info!("cluster profile created"),
        ChangeStatus::Updated => plugin.cluster_profile_changed(old, &cluster_profiles_properties, false).await,
        ChangeStatus::Deleted => plugin.cluster_profile_changed(None, &cluster_profiles_properties, true).await,
        _ => tracing::warn!(?status, "cluster-profile-changed with a status this plugin does not know"),
    }
    Ok(())
}
