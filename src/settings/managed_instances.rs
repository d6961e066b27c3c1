//! What ECS Managed Instances refuses in a task definition, as elastic profile keys.
//!
//! ECS refuses these task definition parameters for the `MANAGED_INSTANCES` compatibility:
//! `disableNetworking`, `dnsSearchDomains`, `dnsServers`, `dockerLabels`,
//! `dockerSecurityOptions`, `dockerVolumeConfiguration`, `ephemeralStorage`, `extraHosts`,
//! `hostname`, `ipcMode`, `links`, `maxSwap`, `proxyConfiguration`, `sharedMemorySize`,
//! host volumes (`sourcePath`), `swappiness` and `tmpfs`. Of those, the plugin's task
//! definitions use only what the keys below ask for; an elastic profile setting one of them
//! cannot run where the cluster profile's `CapacityProviderStrategy` may place a task on an ECS
//! Managed Instances provider, and is refused at create-agent (the job's console says why).
//! Which providers are Managed Instances is learned from AWS, so this check runs in the engine.

use super::elastic_profile::ElasticProfile;
use crate::protocol::profiles::FieldError;

/// The keys ECS Managed Instances cannot take, each with the task definition parameter it
/// becomes, and whether `elastic` sets it.
fn refused(elastic: &ElasticProfile) -> [(&'static str, &'static str, bool); 4] {
    [
        ("EphemeralStorageGiB", "ephemeralStorage", elastic.ephemeral_storage_gib.is_some()),
        ("SharedMemoryMiB", "linuxParameters.sharedMemorySize", elastic.shared_memory_mib.is_some()),
        ("BindMounts", "host volumes (sourcePath)", !elastic.bind_mounts.is_empty()),
        ("MountDockerSocket", "a host volume (sourcePath) for the Docker socket", elastic.mount_docker_socket),
    ]
}

/// Problems of running `elastic` through the ECS Managed Instances capacity provider
/// `provider`, keyed by the elastic profile's keys; empty when it fits.
pub fn check(elastic: &ElasticProfile, provider: &str) -> Vec<FieldError> {
    refused(elastic)
        .into_iter()
        .filter(|(_, _, set)| *set)
        .map(|(key, parameter, _)| FieldError {
            key: key.to_string(),
            message: format!(
                "{key} cannot be used where ECS Managed Instances may run the task: the cluster profile's \
                 CapacityProviderStrategy names the Managed Instances capacity provider {provider}, and ECS refuses \
                 {parameter} in task definitions for Managed Instances. Remove {key}, or use a cluster profile \
                 without a Managed Instances provider."
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Properties;

    fn elastic(extra: &[(&str, &str)]) -> ElasticProfile {
        let mut p: Properties =
            [("Image", "gocd/agent")].iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect();
        p.extend(extra.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))));
        ElasticProfile::parse(&p).expect("valid")
    }

    #[test]
    fn refuses_the_keys_managed_instances_cannot_take_naming_key_and_provider() {
        assert!(check(&elastic(&[]), "ci-mi").is_empty());
        let problems = check(&elastic(&[("EphemeralStorageGiB", "50"), ("SharedMemoryMiB", "64")]), "ci-mi");
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["EphemeralStorageGiB", "SharedMemoryMiB"]);
        assert!(problems[0].message.contains("ci-mi") && problems[0].message.contains("ephemeralStorage"));
        let docker = check(&elastic(&[("MountDockerSocket", "true")]), "ci-mi");
        assert_eq!(docker.len(), 1);
        assert_eq!(docker[0].key, "MountDockerSocket");
        let binds = check(&elastic(&[("BindMounts", "/cache /cache")]), "ci-mi");
        assert_eq!(binds[0].key, "BindMounts");
    }
}
