//! Profiles: the string maps GoCD sends, parsed once into typed, validated structs.
//!
//! - [`keys`]: the one table of every key; metadata, views and the unknown-key check derive from it.
//! - [`ClusterProfile`] and [`ElasticProfile`]: typed profiles; `parse` reports every problem at once.
//! - [`check_compatible`]: rules that need both profiles (enforced at create-agent), and from the
//!   same rules [`validate_elastic_profile`]: what no cluster profile runs.
//! - [`cluster_profile_view`] / [`elastic_profile_view`]: the GoCD forms.
//! - [`migrate_config`]: legacy plugin settings to a cluster profile.
//!
//! Validation is pure: it never calls AWS. Empty, blank and `null` values all mean "not set".
//!
//! Inside, every import between these modules points one way: `basics`, `keys` and `syntax`
//! import no sibling, the readers (`fields`, `line_rules`, `task_parts`, ...) build on them, the
//! two profiles on the readers, and `compat` on the profiles. No child imports from this file,
//! which only declares and re-exports.

mod basics;
pub mod capacity_providers;
mod cluster_profile;
mod compat;
mod ec2_capacity;
mod elastic_profile;
mod fields;
pub mod key_reference;
pub mod keys;
mod line_rules;
pub mod managed_instances;
mod migrate;
pub mod placement;
mod syntax;
pub(crate) use syntax::check_go_server_url;
pub mod task_parts;
mod unknown_keys;
mod views;
pub mod warm_agents;
pub mod warm_schedule;

#[cfg(test)]
mod tests;

pub use basics::LaunchType;
pub use capacity_providers::{ProviderShare, ProviderStrategy};
pub use cluster_profile::{validate_cluster_profile, ClusterProfile, StaticCredentials};
pub use compat::{
    allowed, check_compatible, check_fits_some_cluster, fargate_size_at_least, patterns, validate_elastic_profile,
};
pub use ec2_capacity::{
    Ec2Capacity, EC2_USER_DATA_MAX, JOIN_SCRIPT_RESERVE, SCALE_OUT_WAIT_SECONDS, STOPPED_INSTANCES_DEFAULT,
    STOPPED_INSTANCES_MAX,
};
pub use elastic_profile::{ElasticProfile, Reuse, Warm, AGENT_CONTAINER};
pub use fields::profile_hash;
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
