//! Profiles as GoCD carries them on the wire: the flat property map of every profile request,
//! the validation and metadata answers, and the migrate-config body (`docs/protocol.md`, "The v5
//! messages").
//!
//! Only the shapes live here; what the keys mean and how they are checked is `settings`.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// GoCD's flat property map; validate calls may carry JSON `null` values.
pub type Properties = BTreeMap<String, Option<String>>;

/// `Debug` of property maps by their keys only: a cluster profile carries `SecretAccessKey`, an
/// elastic profile's `Environment` may carry a team's tokens. Every body type that holds a map
/// prints it through this.
pub struct KeysOnly<'a, T: ?Sized>(pub &'a T);

impl std::fmt::Debug for KeysOnly<'_, Properties> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl std::fmt::Debug for KeysOnly<'_, Vec<Properties>> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(KeysOnly)).finish()
    }
}

impl std::fmt::Debug for KeysOnly<'_, Option<Properties>> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(p) => f.debug_tuple("Some").field(&KeysOnly(p)).finish(),
            None => f.write_str("None"),
        }
    }
}

/// Implements `Debug` for a body type: `plain` fields as they are, property maps by their keys.
macro_rules! debug_keys_only {
    ($ty:ident { $($plain:ident),* ; $($map:ident),* }) => {
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($plain), &self.$plain))*
                    $(.field(stringify!($map), &$crate::protocol::profiles::KeysOnly(&self.$map)))*
                    .finish()
            }
        }
    };
}
pub(crate) use debug_keys_only;

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
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
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

debug_keys_only!(MigrateConfig { cluster_profiles, elastic_agent_profiles; plugin_settings });
debug_keys_only!(ClusterProfileInfo { id, plugin_id; properties });
debug_keys_only!(ElasticProfileInfo { id, plugin_id, cluster_profile_id; properties });

fn null_as_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
