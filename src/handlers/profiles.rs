//! Profile metadata, views and validation: answered from `settings` alone, never from AWS.

use std::sync::Arc;

use serde::de::IgnoredAny;

use crate::error::Result;
use crate::plugin::Plugin;
use crate::protocol::profiles::{FieldError, MetadataEntry, Properties};
use crate::protocol::requests::View;
use crate::settings;

/// Elastic profile keys with `required` and `secure`.
pub async fn elastic_metadata(_: Arc<Plugin>, _: IgnoredAny) -> Result<Vec<MetadataEntry>> {
    Ok(settings::elastic_profile_metadata())
}

/// Elastic profile form.
pub async fn elastic_view(_: Arc<Plugin>, _: IgnoredAny) -> Result<View> {
    Ok(View { template: settings::elastic_profile_view() })
}

/// Every problem of an elastic profile, all at once.
pub async fn validate_elastic(_: Arc<Plugin>, props: Properties) -> Result<Vec<FieldError>> {
    Ok(settings::validate_elastic_profile(&props))
}

/// Cluster profile keys with `required` and `secure`.
pub async fn cluster_metadata(_: Arc<Plugin>, _: IgnoredAny) -> Result<Vec<MetadataEntry>> {
    Ok(settings::cluster_profile_metadata())
}

/// Cluster profile form.
pub async fn cluster_view(_: Arc<Plugin>, _: IgnoredAny) -> Result<View> {
    Ok(View { template: settings::cluster_profile_view() })
}

/// Every problem of a cluster profile, all at once.
pub async fn validate_cluster(_: Arc<Plugin>, props: Properties) -> Result<Vec<FieldError>> {
    Ok(settings::validate_cluster_profile(&props))
}
