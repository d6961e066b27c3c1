//! `get-icon` and `get-capabilities`: what GoCD asks at load to describe the plugin.

use std::sync::Arc;

use base64::Engine;
use serde::de::IgnoredAny;

use crate::error::Result;
use crate::plugin::Plugin;
use crate::protocol::requests::{Capabilities, Icon};

const ICON_SVG: &[u8] = include_bytes!("../../assets/icon.svg");

/// Our SVG icon, base64 on one line.
pub async fn icon(_: Arc<Plugin>, _: IgnoredAny) -> Result<Icon> {
    Ok(Icon {
        content_type: "image/svg+xml".to_string(),
        data: base64::engine::general_purpose::STANDARD.encode(ICON_SVG),
    })
}

/// All three status reports are supported.
pub async fn capabilities(_: Arc<Plugin>, _: IgnoredAny) -> Result<Capabilities> {
    Ok(Capabilities {
        supports_plugin_status_report: true,
        supports_agent_status_report: true,
        supports_cluster_status_report: true,
    })
}
