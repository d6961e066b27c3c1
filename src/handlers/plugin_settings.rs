//! `go.plugin-settings.*`: v5 plugins have no plugin settings. An empty object is what GoCD's
//! parser rejects as "no settings", so no settings page appears (as the Kubernetes plugin does).

use std::sync::Arc;

use serde::de::IgnoredAny;
use serde_json::{Map, Value};

use crate::error::Result;
use crate::plugin::Plugin;

/// No settings.
pub async fn configuration(_: Arc<Plugin>, _: IgnoredAny) -> Result<Map<String, Value>> {
    Ok(Map::new())
}

/// No settings view.
pub async fn view(_: Arc<Plugin>, _: IgnoredAny) -> Result<Map<String, Value>> {
    Ok(Map::new())
}
