//! The ownership tags every AWS read of the plugin filters by, and the engine tags with
//! (`cluster::identity` has the rest of the tag vocabulary).

/// Tag: GoCD's server id.
pub const TAG_SERVER_ID: &str = "gocd:server-id";
/// Tag: the cluster profile key.
pub const TAG_CLUSTER_PROFILE: &str = "gocd:cluster-profile";
