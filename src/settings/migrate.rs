//! `migrate-config` (`docs/protocol.md`, "migrate-config"): legacy plugin settings of the old Java
//! ECS plugin become one cluster profile; configured profiles come back unchanged.

use std::collections::BTreeMap;

use super::fields::set_value;
use super::keys::ProfileKind;
use crate::protocol::profiles::{ClusterProfileInfo, MigrateConfig};
use crate::protocol::PLUGIN_ID;

/// Id of the cluster profile made from legacy plugin settings.
pub const MIGRATED_CLUSTER_PROFILE_ID: &str = "migrated_from_plugin_settings";

/// Old Java plugin setting → our cluster profile key. Keys already named like ours are kept as
/// they are; every other legacy key has no equivalent and is dropped.
const LEGACY_KEYS: &[(&str, &str)] = &[
    ("AWSRegion", "Region"),
    ("AWSAccessKeyId", "AccessKeyId"),
    ("AWSSecretAccessKey", "SecretAccessKey"),
    ("ContainerAutoregisterTimeout", "AgentRegisterTimeoutMinutes"),
    ("IamInstanceProfile", "Ec2InstanceProfile"),
    ("KeyPairName", "Ec2KeyPair"),
    ("LinuxAmi", "Ec2AmiId"),
    ("LinuxInstanceType", "Ec2InstanceType"),
    ("LinuxRegisterTimeout", "Ec2RegisterTimeoutMinutes"),
    ("MinLinuxInstanceCount", "Ec2MinInstances"),
    ("MaxLinuxInstancesAllowed", "Ec2MaxInstances"),
    ("LinuxOSVolumeSize", "Ec2RootVolumeGiB"),
    ("LinuxUserdataScript", "Ec2UserData"),
];

/// Answers migrate-config: with legacy settings and no cluster profile, the settings become the
/// cluster profile [`MIGRATED_CLUSTER_PROFILE_ID`] and every elastic profile without a cluster
/// profile is pointed at it; otherwise the request comes back unchanged.
pub fn migrate_config(mut request: MigrateConfig) -> MigrateConfig {
    let legacy_set = request.plugin_settings.keys().any(|k| set_value(&request.plugin_settings, k).is_some());
    if !legacy_set || !request.cluster_profiles.is_empty() {
        return request;
    }
    let properties = cluster_properties(&request.plugin_settings);
    tracing::info!(
        keys = ?properties.keys().collect::<Vec<_>>(),
        "migrated legacy plugin settings to cluster profile {MIGRATED_CLUSTER_PROFILE_ID}"
    );
    request.cluster_profiles.push(ClusterProfileInfo {
        id: MIGRATED_CLUSTER_PROFILE_ID.to_string(),
        plugin_id: PLUGIN_ID.to_string(),
        properties,
    });
    for profile in request.elastic_agent_profiles.iter_mut().filter(|p| p.cluster_profile_id.trim().is_empty()) {
        profile.cluster_profile_id = MIGRATED_CLUSTER_PROFILE_ID.to_string();
    }
    request
}

/// Legacy settings mapped to cluster profile properties (set values only).
fn cluster_properties(settings: &BTreeMap<String, Option<String>>) -> BTreeMap<String, Option<String>> {
    let mut properties = BTreeMap::new();
    for key in settings.keys() {
        let Some(value) = set_value(settings, key) else {
            continue;
        };
        let ours = LEGACY_KEYS.iter().find(|(legacy, _)| legacy == key).map(|(_, ours)| *ours);
        match ours.or_else(|| ProfileKind::Cluster.spec(key).map(|s| s.key)) {
            // A key already named like ours wins over the legacy name mapped onto it.
            Some(ours) if ours != key && set_value(settings, ours).is_some() => {}
            Some(ours) => {
                properties.insert(ours.to_string(), Some(value.to_string()));
            }
            None => tracing::debug!(key, "legacy plugin setting has no equivalent; dropped"),
        }
    }
    if let Some(group) = awslogs_group(settings).filter(|_| !properties.contains_key("LogGroup")) {
        properties.insert("LogGroup".to_string(), Some(group));
    }
    // The old plugin ran only on EC2 instances it launched.
    if properties.keys().any(|k| k.starts_with("Ec2")) && !properties.contains_key("LaunchType") {
        properties.insert("LaunchType".to_string(), Some("EC2".to_string()));
    }
    properties
}

/// `awslogs-group` from the legacy `LogOptions` lines when `LogDriver` is `awslogs`.
fn awslogs_group(settings: &BTreeMap<String, Option<String>>) -> Option<String> {
    if set_value(settings, "LogDriver") != Some("awslogs") {
        return None;
    }
    set_value(settings, "LogOptions")?
        .lines()
        .filter_map(|line| line.split_once('='))
        .find(|(k, _)| k.trim() == "awslogs-group")
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(json: &str) -> MigrateConfig {
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
    }

    fn migrate_json(json: &str) -> String {
        serde_json::to_string(&migrate_config(request(json))).unwrap_or_default()
    }

    #[test]
    fn fresh_install_comes_back_as_the_same_empty_shape() {
        let empty = r#"{"plugin_settings":{},"cluster_profiles":[],"elastic_agent_profiles":[]}"#;
        assert_eq!(migrate_json(empty), empty);
        assert_eq!(migrate_json("{}"), empty);
        assert_eq!(
            migrate_json(r#"{"plugin_settings":null,"cluster_profiles":null,"elastic_agent_profiles":null}"#),
            empty
        );
    }

    #[test]
    fn configured_profiles_come_back_unchanged() {
        let json = r#"{"plugin_settings":{"AWSRegion":"eu-west-1"},"cluster_profiles":[{"id":"c1","plugin_id":"cd.go.contrib.elastic-agent.ecs","properties":{"ClusterName":"ci","Region":null}}],"elastic_agent_profiles":[{"id":"e1","plugin_id":"cd.go.contrib.elastic-agent.ecs","cluster_profile_id":"c1","properties":{"Image":"alpine"}},{"id":"e2","plugin_id":"cd.go.contrib.elastic-agent.ecs","cluster_profile_id":"","properties":{}}]}"#;
        assert_eq!(migrate_json(json), json);
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let json = r#"{"plugin_settings":{},"cluster_profiles":[{"id":"c","plugin_id":"p","properties":{},"extra":1}],"elastic_agent_profiles":[],"new_field":true}"#;
        assert_eq!(request(json).cluster_profiles.len(), 1);
    }

    #[test]
    fn legacy_settings_become_one_cluster_profile() {
        let json = r#"{
            "plugin_settings": {
                "GoServerUrl": "https://gocd.example.com/go",
                "ClusterName": "legacy",
                "AWSRegion": "eu-west-1",
                "AWSAccessKeyId": "AKIAEXAMPLE",
                "AWSSecretAccessKey": "s3cr3t",
                "EnvironmentVariables": "A=1",
                "ContainerAutoregisterTimeout": "7",
                "MaxContainerDataVolumeSize": "10",
                "IamInstanceProfile": "ecsInstanceRole",
                "LinuxAmi": "ami-0abcdef1234567890",
                "LinuxInstanceType": "c5.xlarge",
                "MaxLinuxInstancesAllowed": "8",
                "LogDriver": "awslogs",
                "LogOptions": "awslogs-region=eu-west-1\nawslogs-group=/gocd/legacy",
                "WindowsAmi": "ami-01234567",
                "PrivateDockerRegistryPassword": "pw",
                "SubnetIds": null,
                "Region": ""
            },
            "cluster_profiles": [],
            "elastic_agent_profiles": [
                {"id": "old", "plugin_id": "cd.go.contrib.elastic-agent.ecs", "cluster_profile_id": "", "properties": {"Image": "alpine"}},
                {"id": "older", "plugin_id": "cd.go.contrib.elastic-agent.ecs", "cluster_profile_id": null, "properties": {}}
            ]
        }"#;
        let response = migrate_config(request(json));
        assert_eq!(response.cluster_profiles.len(), 1);
        let cluster = &response.cluster_profiles[0];
        assert_eq!(cluster.id, "migrated_from_plugin_settings");
        assert_eq!(cluster.plugin_id, "cd.go.contrib.elastic-agent.ecs");
        let props: Vec<(&str, &str)> =
            cluster.properties.iter().map(|(k, v)| (k.as_str(), v.as_deref().unwrap_or("null"))).collect();
        assert_eq!(
            props,
            [
                ("AccessKeyId", "AKIAEXAMPLE"),
                ("AgentRegisterTimeoutMinutes", "7"),
                ("ClusterName", "legacy"),
                ("Ec2AmiId", "ami-0abcdef1234567890"),
                ("Ec2InstanceProfile", "ecsInstanceRole"),
                ("Ec2InstanceType", "c5.xlarge"),
                ("Ec2MaxInstances", "8"),
                ("EnvironmentVariables", "A=1"),
                ("GoServerUrl", "https://gocd.example.com/go"),
                ("LaunchType", "EC2"),
                ("LogGroup", "/gocd/legacy"),
                ("Region", "eu-west-1"),
                ("SecretAccessKey", "s3cr3t"),
            ]
        );
        assert_eq!(super::super::validate_cluster_profile(&cluster.properties), []);
        assert!(response
            .elastic_agent_profiles
            .iter()
            .all(|p| p.cluster_profile_id == "migrated_from_plugin_settings"));
        assert_eq!(response.plugin_settings.len(), 18, "plugin settings are echoed");
    }

    #[test]
    fn our_own_key_wins_over_the_legacy_one() {
        let json = r#"{"plugin_settings":{"AWSRegion":"eu-west-1","Region":"us-east-1","ClusterName":"ci"}}"#;
        let response = migrate_config(request(json));
        let props = &response.cluster_profiles[0].properties;
        assert_eq!(props.get("Region"), Some(&Some("us-east-1".to_string())));
        assert!(!props.contains_key("LaunchType"), "no EC2 key, no launch type");
    }

    #[test]
    fn blank_legacy_settings_migrate_nothing() {
        let json = r#"{"plugin_settings":{"GoServerUrl":null,"ClusterName":" "},"cluster_profiles":[],"elastic_agent_profiles":[]}"#;
        let response = migrate_config(request(json));
        assert!(response.cluster_profiles.is_empty());
        assert_eq!(response, request(json));
    }
}
