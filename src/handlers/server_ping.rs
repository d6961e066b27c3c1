//! `server-ping`: every cluster profile GoCD sent, reconciled ([`crate::plugin::Plugin::ping_all`]).

use std::sync::Arc;

use crate::error::Result;
use crate::plugin::Plugin;
use crate::protocol::requests::ServerPingParams;

/// Reconciles every cluster profile GoCD sent.
pub async fn server_ping(plugin: Arc<Plugin>, params: ServerPingParams) -> Result<()> {
    plugin.ping_all(&params.all_cluster_profile_properties).await
}
