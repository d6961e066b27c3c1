//! The ids that cross module boundaries, each its own type so that one cannot be passed where
//! another is meant: the elastic agent id ([`AgentId`]), the cluster profile key
//! ([`ClusterKey`]), the cluster profile's settings fingerprint ([`SettingsFingerprint`]), the key
//! of an engine's EC2 pool ([`Ec2PoolKey`]), an ECS task's ARN ([`TaskArn`]) and a job as it
//! survives a reschedule ([`JobKey`]).
//!
//! This module owns the types only: how each id is made lives with its concept
//! (`cluster::identity` makes agent ids, keys and fingerprints; ECS names task ARNs). Each is a
//! `String` underneath and reads as one (`as_str`, `Deref<Target = str>`, `Display`); as JSON it
//! is the bare string (`serde(transparent)`), so no wire format, tag value or log text changes.
//! Each is `Borrow<str>`, so a map keyed by one is looked up with a `&str`.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id's text, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name(s)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(s.to_string())
            }
        }

        impl From<&String> for $name {
            fn from(s: &String) -> Self {
                $name(s.clone())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }
    };
}

string_id! {
    /// An elastic agent's id (`ea-<cluster key>-<job id>-<random>` for ours), as GoCD knows the
    /// agent and as the `gocd:elastic-agent-id` tag carries it.
    AgentId
}

string_id! {
    /// A cluster profile's key: the short hash of where it acts (account, region, cluster, role),
    /// carried by every task's `gocd:cluster-profile` tag, its `startedBy` and its agent ids.
    ClusterKey
}

string_id! {
    /// The short hash of every property of a cluster profile, carried by the
    /// `gocd:cluster-settings` tag: which team's profile an agent was started under, where
    /// several share one key. `MaxAgents` counts per fingerprint.
    SettingsFingerprint
}

string_id! {
    /// The short hash of a cluster profile's EC2 settings (its `Ec2*` keys, subnets, security
    /// groups, `AssignPublicIp` and `Tags`), carried by the `gocd:ec2-pool` tag of every instance
    /// launched under them: which of an engine's EC2 pools the instance belongs to.
    Ec2PoolKey
}

string_id! {
    /// An ECS task's ARN.
    TaskArn
}

string_id! {
    /// A job as it survives a reschedule (GoCD gives the rescheduled job a new id) or a stage
    /// rerun: `pipeline/counter/stage/job`.
    JobKey
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn an_id_is_its_bare_string_as_json_and_in_text() {
        let id = AgentId::from("ea-0123456789ab-7-deadbeef");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"ea-0123456789ab-7-deadbeef\"");
        let back: AgentId = serde_json::from_str("\"ea-0123456789ab-7-deadbeef\"").unwrap();
        assert_eq!(back, id);
        assert_eq!(format!("{id}"), "ea-0123456789ab-7-deadbeef");
        assert_eq!(id, "ea-0123456789ab-7-deadbeef");
    }

    #[test]
    fn a_map_keyed_by_an_id_is_looked_up_by_str() {
        let mut map = BTreeMap::new();
        map.insert(TaskArn::from("arn:aws:ecs:task/1"), 1);
        assert_eq!(map.get("arn:aws:ecs:task/1"), Some(&1));
    }
}
