//! Profiles as GoCD carries them on the wire: the flat property map of every profile request,
//! the validation and metadata answers, and the migrate-config body (PROTOCOL.md §B2).
//!
//! Only the shapes live here; what the keys mean and how they are checked is `settings`.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// GoCD's flat property map; validate calls may carry JSON `null` values.
pub type Properties = BTreeMap<String, Option<String>>;

/// One validation problem, keyed by the property it is about. Serializes as `{"key":..,"message":..}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    /// The property key.
    pub key: String,
    /// A plain sentence saying what is wrong and what would be right.
    pub message: String,
}

/// One entry of a profile metadata answer: `{"key":..,"metadata":{"required":..,"secure":..}}`.
#[derive(Debug, Clone, Serialize)]
pub struct MetadataEntry {
    /// The property key.
    pub key: String,
    /// Its flags.
    pub metadata: Metadata,
}

/// The flags of one key.
#[derive(Debug, Clone, Serialize)]
pub struct Metadata {
    /// GoCD marks the field required.
    pub required: bool,
    /// GoCD stores the value encrypted.
    pub secure: bool,
}

/// The migrate-config request and response body. All three keys are always serialized.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrateConfig {
    /// Legacy plugin settings (`{}` when none).
    #[serde(default, deserialize_with = "null_as_default")]
    pub plugin_settings: BTreeMap<String, Option<String>>,
    /// This plugin's cluster profiles.
    #[serde(default, deserialize_with = "null_as_default")]
    pub cluster_profiles: Vec<ClusterProfileInfo>,
    /// Elastic agent profiles whose cluster profile belongs to this plugin.
    #[serde(default, deserialize_with = "null_as_default")]
    pub elastic_agent_profiles: Vec<ElasticProfileInfo>,
}

/// A cluster profile as migrate-config carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterProfileInfo {
    /// The profile's id.
    pub id: String,
    /// The plugin id.
    pub plugin_id: String,
    /// The profile's properties (values may be `null`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub properties: BTreeMap<String, Option<String>>,
}

/// An elastic agent profile as migrate-config carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElasticProfileInfo {
    /// The profile's id.
    pub id: String,
    /// The plugin id (GoCD derives it from the cluster profile and ignores it on the way back).
    pub plugin_id: String,
    /// The cluster profile it uses; empty for profiles from before cluster profiles existed.
    #[serde(default, deserialize_with = "null_as_default")]
    pub cluster_profile_id: String,
    /// The profile's properties (values may be `null`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub properties: BTreeMap<String, Option<String>>,
}

fn null_as_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
