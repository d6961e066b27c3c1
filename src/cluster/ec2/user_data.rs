//! The user data that joins a new instance to the cluster profile's ECS cluster, naming this
//! GoCD server and cluster profile in the container instance's attributes, followed by the
//! profile's `Ec2UserData`. Linux (ECS-optimised AMIs read `/etc/ecs/ecs.config`) or Windows
//! (`Initialize-ECSAgent` of the ECS-optimised Windows AMIs), by the OS of the work it is for.

use base64::Engine;

use super::OsClass;

/// ECS attribute naming the GoCD server (attribute names allow no `:`).
pub const ATTR_SERVER_ID: &str = "gocd.server-id";
/// ECS attribute naming the cluster profile key.
pub const ATTR_CLUSTER_PROFILE: &str = "gocd.cluster-profile";

/// What goes into the script.
#[derive(Debug, Clone, Copy)]
pub struct Join<'a> {
    /// The cluster's short name (not its ARN).
    pub cluster: &'a str,
    /// GoCD's server id.
    pub server_id: &'a str,
    /// The cluster profile key.
    pub cluster_key: &'a str,
    /// `Ec2UserData`, appended as it is.
    pub extra: Option<&'a str>,
}

/// The script, in clear text.
pub fn script(os: OsClass, join: &Join<'_>) -> String {
    let attributes =
        serde_json::json!({ ATTR_SERVER_ID: join.server_id, ATTR_CLUSTER_PROFILE: join.cluster_key }).to_string();
    let extra = join.extra.map(str::trim_end).filter(|e| !e.is_empty());
    match os {
        OsClass::Linux => {
            let mut s = format!(
                "#!/bin/bash\n\
                 # Written by the GoCD ECS elastic agent plugin: join the ECS cluster.\n\
                 cat >> /etc/ecs/ecs.config <<'GOCD_ECS_CONFIG'\n\
                 ECS_CLUSTER={}\n\
                 ECS_INSTANCE_ATTRIBUTES={attributes}\n\
                 ECS_ENABLE_TASK_IAM_ROLE=true\n\
                 ECS_CONTAINER_STOP_TIMEOUT=2m\n\
                 GOCD_ECS_CONFIG\n",
                shell_safe(join.cluster)
            );
            if let Some(extra) = extra {
                s.push_str("# Ec2UserData of the cluster profile:\n");
                s.push_str(extra);
                s.push('\n');
            }
            s
        }
        OsClass::Windows => {
            let mut s = format!(
                "<powershell>\n\
                 # Written by the GoCD ECS elastic agent plugin: join the ECS cluster.\n\
                 Import-Module ECSTools\n\
                 [Environment]::SetEnvironmentVariable(\"ECS_INSTANCE_ATTRIBUTES\", '{attributes}', \"Machine\")\n\
                 Initialize-ECSAgent -Cluster '{}' -EnableTaskIAMRole\n",
                shell_safe(join.cluster)
            );
            if let Some(extra) = extra {
                s.push_str("# Ec2UserData of the cluster profile:\n");
                s.push_str(extra);
                s.push('\n');
            }
            s.push_str("</powershell>\n");
            s
        }
    }
}

/// The script as RunInstances takes it (base64).
pub fn encoded(os: OsClass, join: &Join<'_>) -> String {
    base64::engine::general_purpose::STANDARD.encode(script(os, join))
}

/// Cluster names are letters, digits, `-` and `_` (validated); anything else is dropped so the
/// name can never break out of the script.
fn shell_safe(name: &str) -> String {
    name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_user_data_validation_allows_still_fits_what_ec2_takes() {
        use crate::settings::{EC2_USER_DATA_MAX, JOIN_SCRIPT_RESERVE};
        let extra = "x".repeat(EC2_USER_DATA_MAX - JOIN_SCRIPT_RESERVE);
        // The longest names: a 255-character cluster, a long server id and cluster key, and the
        // attribute JSON escaping nothing.
        let cluster = "c".repeat(255);
        let (server_id, cluster_key) = ("s".repeat(64), "k".repeat(64));
        let join = Join { cluster: &cluster, server_id: &server_id, cluster_key: &cluster_key, extra: Some(&extra) };
        for os in [OsClass::Linux, OsClass::Windows] {
            let len = script(os, &join).len();
            assert!(len <= EC2_USER_DATA_MAX, "{os:?}: {len} bytes");
        }
    }

    fn join(extra: Option<&str>) -> Join<'_> {
        Join { cluster: "gocd-agents", server_id: "sid-1", cluster_key: "0123456789ab", extra }
    }

    #[test]
    fn linux_joins_the_cluster_then_runs_the_extra_script() {
        let s = script(OsClass::Linux, &join(Some("yum install -y htop\n")));
        assert!(s.starts_with("#!/bin/bash\n"), "{s}");
        assert!(s.contains("ECS_CLUSTER=gocd-agents\n"), "{s}");
        assert!(
            s.contains(r#"ECS_INSTANCE_ATTRIBUTES={"gocd.cluster-profile":"0123456789ab","gocd.server-id":"sid-1"}"#),
            "{s}"
        );
        let config_end = s.find("GOCD_ECS_CONFIG\n# Ec2UserData").expect("extra after the config");
        assert!(s[config_end..].ends_with("yum install -y htop\n"));
    }

    #[test]
    fn windows_initializes_the_ecs_agent() {
        let s = script(OsClass::Windows, &join(None));
        assert!(s.starts_with("<powershell>\n") && s.ends_with("</powershell>\n"), "{s}");
        assert!(s.contains("Initialize-ECSAgent -Cluster 'gocd-agents' -EnableTaskIAMRole"), "{s}");
        assert!(s.contains("ECS_INSTANCE_ATTRIBUTES"), "{s}");
    }

    #[test]
    fn encoded_is_base64_of_the_script() {
        let b64 = encoded(OsClass::Linux, &join(None));
        let back = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
        assert_eq!(String::from_utf8(back).unwrap(), script(OsClass::Linux, &join(None)));
    }

    #[test]
    fn a_strange_cluster_name_cannot_break_the_script() {
        let j = Join { cluster: "x'; rm -rf /; '", ..join(None) };
        assert!(script(OsClass::Windows, &j).contains("-Cluster 'xrm-rf'"));
    }
}
