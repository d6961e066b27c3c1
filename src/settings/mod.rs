//! Profiles: the string maps GoCD sends, parsed once into typed, validated structs.
//!
//! - [`keys`]: the one table of every key; metadata, views and the unknown-key check derive from it.
//! - [`ClusterProfile`] and [`ElasticProfile`]: typed profiles; `parse` reports every problem at once.
//! - [`check_compatible`]: rules that need both profiles (enforced at create-agent).
//! - [`cluster_profile_view`] / [`elastic_profile_view`]: the GoCD forms.
//! - [`migrate_config`]: legacy plugin settings to a cluster profile.
//!
//! Validation is pure: it never calls AWS. Empty, blank and `null` values all mean "not set".

pub mod capacity_providers;
mod cluster_profile;
mod compat;
mod ec2_capacity;
mod elastic_profile;
mod fields;
pub mod keys;
mod line_rules;
pub mod managed_instances;
mod migrate;
pub mod placement;
mod syntax;
pub mod task_parts;
mod unknown_keys;
mod views;

#[cfg(test)]
mod tests;

use sha2::{Digest, Sha256};

pub use capacity_providers::{ProviderShare, ProviderStrategy};
pub use cluster_profile::{validate_cluster_profile, ClusterProfile, LaunchType, StaticCredentials};
pub use compat::{allowed, check_compatible, patterns};
pub use ec2_capacity::{Ec2Capacity, EC2_USER_DATA_MAX, JOIN_SCRIPT_RESERVE, SCALE_OUT_WAIT_SECONDS};
pub use elastic_profile::{validate_elastic_profile, ElasticProfile, Reuse, AGENT_CONTAINER};
pub use migrate::{migrate_config, MIGRATED_CLUSTER_PROFILE_ID};
pub use views::{cluster_profile_view, elastic_profile_view};

// The wire shapes of profiles are the protocol's; re-exported here because every profile
// function speaks them.
pub use crate::protocol::profiles::{
    ClusterProfileInfo, ElasticProfileInfo, FieldError, Metadata, MetadataEntry, MigrateConfig, Properties,
};

use keys::ProfileKind;

/// Every cluster profile key, in the table's stable order.
pub fn cluster_profile_metadata() -> Vec<MetadataEntry> {
    metadata(ProfileKind::Cluster)
}

/// Every elastic agent profile key, in the table's stable order.
pub fn elastic_profile_metadata() -> Vec<MetadataEntry> {
    metadata(ProfileKind::Elastic)
}

fn metadata(kind: ProfileKind) -> Vec<MetadataEntry> {
    kind.keys()
        .iter()
        .map(|spec| MetadataEntry {
            key: spec.key.to_string(),
            metadata: Metadata { required: spec.required, secure: spec.secure },
        })
        .collect()
}

/// A short, stable hash of a profile: 12 lowercase hex characters of SHA-256 over the lines
/// `key=value\n` of the set (non-blank, trimmed) properties in key order.
pub fn profile_hash(props: &Properties) -> String {
    let mut hasher = Sha256::new();
    for key in props.keys() {
        if let Some(value) = fields::set_value(props, key) {
            hasher.update(format!("{key}={value}\n").as_bytes());
        }
    }
    hasher.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect()
}
