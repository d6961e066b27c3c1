//! `migrate-config`: the first call after load; legacy plugin settings become a cluster profile.

use std::sync::Arc;

use crate::error::Result;
use crate::plugin::Plugin;
use crate::protocol::profiles::MigrateConfig;
use crate::settings;

/// Configured profiles come back unchanged; legacy settings are migrated (see `settings::migrate`).
pub async fn migrate(_: Arc<Plugin>, request: MigrateConfig) -> Result<MigrateConfig> {
    Ok(settings::migrate_config(request))
}
