//! The user data that joins a new instance to the cluster profile's ECS cluster, naming this
//! GoCD server and cluster profile in the container instance's attributes, followed by the
//! profile's `Ec2UserData`. Linux (ECS-optimised AMIs read `/etc/ecs/ecs.config`) or Windows
//! (`Initialize-ECSAgent` of the ECS-optimised Windows AMIs), by the OS of the work it is for.
//!
//! # Image pre-pull (Linux)
//! The ECS agent is told to use a cached image when the instance has one
//! (`ECS_IMAGE_PULL_BEHAVIOR=prefer-cached`), and the script pulls the images of the elastic
//! profiles this cluster profile has run (known at launch) in the background, detached, once
//! Docker answers: the ECS agent registers as soon as it would without it, and the first task of
//! each image on the instance skips its pull. Only images Docker can pull without credentials
//! are pre-pulled ([`prepullable`]): the ECS-optimised AMIs carry no AWS CLI and no ECR
//! credential helper, so a private ECR image (`*.dkr.ecr.*.amazonaws.com`) could only be pulled
//! with a token fetched by hand, and a profile's `RepositoryCredentialsArn` is read by ECS with
//! the task's execution role, which the instance does not have. Those images are pulled by ECS
//! at the first task, as before. User data runs at the first boot only: an instance started
//! again from the stopped pool keeps the images it had (its root volume is kept).

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
    /// Images to pull in the background at boot (Linux), the most wanted first; those that are
    /// not [`prepullable`], and those past what fits in EC2's user data, are left out.
    pub images: &'a [String],
}

/// Where the pre-pull's output goes on the instance.
pub const PREPULL_LOG: &str = "/var/log/gocd-image-prepull.log";

/// Whether Docker on the instance can pull `image` at boot without credentials, and the name is
/// safe in a shell word: letters, digits and `.` `/` `:` `@` `_` `-` only, not a private ECR
/// repository.
pub fn prepullable(image: &str) -> bool {
    let safe = !image.is_empty()
        && image.len() <= 255
        && !image.starts_with('-')
        && image.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | ':' | '@' | '_' | '-'));
    let host = image.split('/').next().unwrap_or_default();
    let private_ecr = image.contains('/') && host.contains(".dkr.ecr.") && host.contains(".amazonaws.com");
    safe && !private_ecr
}

/// The detached pre-pull of `images` (each [`prepullable`]): waits for Docker (up to 10 minutes),
/// then pulls one at a time; a failure is logged on the instance and changes nothing else.
fn prepull_line(images: &[&str]) -> String {
    let words: Vec<String> = images.iter().map(|i| format!("'{i}'")).collect();
    format!(
        "setsid nohup /bin/bash -c 'for n in $(seq 1 300); do docker info >/dev/null 2>&1 && break; sleep 2; done; \
         for image in \"$@\"; do docker pull \"$image\" || echo \"could not pre-pull $image\"; done' \
         gocd-image-prepull {} >{PREPULL_LOG} 2>&1 </dev/null &\n",
        words.join(" ")
    )
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
                 ECS_IMAGE_PULL_BEHAVIOR=prefer-cached\n\
                 GOCD_ECS_CONFIG\n",
                shell_safe(join.cluster)
            );
            let extra_len = extra.map_or(0, |e| e.len() + 40);
            let mut images: Vec<&str> = Vec::new();
            for image in join.images.iter().map(String::as_str).filter(|i| prepullable(i)) {
                if images.contains(&image) {
                    continue;
                }
                images.push(image);
                let len = s.len() + PREPULL_HEADER.len() + prepull_line(&images).len() + extra_len;
                if len > crate::settings::EC2_USER_DATA_MAX {
                    images.pop();
                    break;
                }
            }
            if !images.is_empty() {
                s.push_str(PREPULL_HEADER);
                s.push_str(&prepull_line(&images));
            }
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

const PREPULL_HEADER: &str =
    "# Pull the cluster profile's agent images in the background; the ECS agent does not wait for it.\n";

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
        let images: Vec<String> = (0..100).map(|n| format!("registry.example.com/team-{n}/gocd-agent:v{n}")).collect();
        let join = Join {
            cluster: &cluster,
            server_id: &server_id,
            cluster_key: &cluster_key,
            extra: Some(&extra),
            images: &images,
        };
        for os in [OsClass::Linux, OsClass::Windows] {
            let len = script(os, &join).len();
            assert!(len <= EC2_USER_DATA_MAX, "{os:?}: {len} bytes");
        }
    }

    fn join(extra: Option<&str>) -> Join<'_> {
        Join { cluster: "gocd-agents", server_id: "sid-1", cluster_key: "0123456789ab", extra, images: &[] }
    }

    #[test]
    fn linux_prefers_cached_images_and_pre_pulls_public_ones_in_the_background() {
        let images: Vec<String> = [
            "gocd/gocd-agent-alpine-3.19:v24.1.0",
            "public.ecr.aws/docker/library/eclipse-temurin:21",
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/ci/agent:1",
            "evil'; rm -rf /; '",
            "gocd/gocd-agent-alpine-3.19:v24.1.0",
        ]
        .map(String::from)
        .to_vec();
        let s = script(OsClass::Linux, &Join { images: &images, ..join(Some("echo extra")) });
        assert!(s.contains("ECS_IMAGE_PULL_BEHAVIOR=prefer-cached\n"), "{s}");
        let line = s.lines().find(|l| l.starts_with("setsid nohup ")).expect("a pre-pull line");
        assert!(line.ends_with(" &"), "detached, in the background: {line}");
        assert!(
            line.contains("gocd-image-prepull 'gocd/gocd-agent-alpine-3.19:v24.1.0' 'public.ecr.aws/docker/library/eclipse-temurin:21' >"),
            "public images once each, quoted, in order: {line}"
        );
        assert!(!s.contains("dkr.ecr") && !s.contains("rm -rf"), "no private ECR image, no unsafe name: {s}");
        assert!(line.contains("docker info") && line.contains(PREPULL_LOG), "{line}");
        // Before the operator's own lines, after the ECS config the agent reads.
        let (config, prepull, extra) =
            (s.find("GOCD_ECS_CONFIG\n#").unwrap(), s.find("setsid").unwrap(), s.find("echo extra").unwrap());
        assert!(config < prepull && prepull < extra, "{s}");
    }

    #[test]
    fn no_images_no_pre_pull_and_windows_never_pre_pulls() {
        assert!(!script(OsClass::Linux, &join(None)).contains("docker pull"));
        let images = vec!["gocd/gocd-agent-windows:v24".to_string()];
        assert!(!script(OsClass::Windows, &Join { images: &images, ..join(None) }).contains("docker pull"));
    }

    #[test]
    fn which_images_are_pulled_without_credentials() {
        assert!(prepullable("gocd/gocd-agent-ubuntu-22.04:v24.1.0"));
        assert!(prepullable("ghcr.io/acme/agent@sha256:0123abcd"));
        assert!(prepullable("public.ecr.aws/acme/agent:1"));
        assert!(!prepullable("123456789012.dkr.ecr.eu-west-1.amazonaws.com/agent:1"), "private ECR");
        assert!(!prepullable("agent:1 && reboot"));
        assert!(!prepullable("-v"));
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
