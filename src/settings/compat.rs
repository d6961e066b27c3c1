//! Rules that need both profiles, enforced at create-agent (GoCD validates an elastic profile
//! without its cluster profile): Fargate sizes, EC2-only and Fargate-only fields, the allow-lists,
//! and the total number of user tags.

use super::basics::{quote, LaunchType, MAX_USER_TAGS};
use super::capacity_providers::ProviderStrategy;
use super::cluster_profile::ClusterProfile;
use super::elastic_profile::ElasticProfile;
use super::fields::one_of;
use super::task_parts::is_sensitive_host_path;
use crate::protocol::profiles::FieldError;

/// Memory sizes Fargate allows for one CPU size.
#[derive(Debug, Clone, Copy)]
enum Sizes {
    /// Exactly these values.
    List(&'static [u32]),
    /// From `min` to `max` in steps of `step`.
    Steps { min: u32, max: u32, step: u32 },
}

impl Sizes {
    fn allows(self, memory: u32) -> bool {
        match self {
            Sizes::List(values) => values.contains(&memory),
            Sizes::Steps { min, max, step } => (min..=max).contains(&memory) && (memory - min) % step == 0,
        }
    }

    fn describe(self) -> String {
        match self {
            Sizes::List(values) => {
                let values: Vec<String> = values.iter().map(u32::to_string).collect();
                one_of(&values.iter().map(String::as_str).collect::<Vec<_>>())
            }
            Sizes::Steps { min, max, step } => format!("{min} to {max} in steps of {step}"),
        }
    }
}

/// Fargate's task sizes: CPU units and the memory (MiB) each allows.
const FARGATE_SIZES: &[(u32, Sizes)] = &[
    (256, Sizes::List(&[512, 1024, 2048])),
    (512, Sizes::Steps { min: 1024, max: 4096, step: 1024 }),
    (1024, Sizes::Steps { min: 2048, max: 8192, step: 1024 }),
    (2048, Sizes::Steps { min: 4096, max: 16384, step: 1024 }),
    (4096, Sizes::Steps { min: 8192, max: 30720, step: 1024 }),
    (8192, Sizes::Steps { min: 16384, max: 61440, step: 4096 }),
    (16384, Sizes::Steps { min: 32768, max: 122880, step: 8192 }),
];

/// Windows families Fargate runs.
const FARGATE_WINDOWS: &[&str] =
    &["WINDOWS_SERVER_2019_FULL", "WINDOWS_SERVER_2019_CORE", "WINDOWS_SERVER_2022_FULL", "WINDOWS_SERVER_2022_CORE"];

/// Problems of running `elastic` in `cluster`, keyed by the elastic profile's keys; empty when
/// the pair is fine.
pub fn check_compatible(cluster: &ClusterProfile, elastic: &ElasticProfile) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut error = |key: &str, message: String| errors.push(FieldError { key: key.to_string(), message });
    let launch = cluster.launch_type.as_str();
    let placed_by_ecs_on_ec2 = cluster.capacity_providers.as_ref().is_some_and(|s| s.may_use_ec2());
    let placement = [
        ("PlacementStrategy", !elastic.placement_strategy.is_empty()),
        ("PlacementConstraints", !elastic.placement_constraints.is_empty()),
    ];
    for (key, _) in placement.into_iter().filter(|(_, set)| *set && !placed_by_ecs_on_ec2) {
        error(
            key,
            format!(
                "{key} only applies where ECS places the task on EC2 instances: a cluster profile whose \
                 CapacityProviderStrategy names an Auto Scaling group's provider (or is default). Fargate takes \
                 no placement, and with LaunchType EC2 the plugin chooses the instance itself."
            ),
        );
    }
    if cluster.launch_type.is_fargate() {
        if let Some((key, message)) = fargate_size_problem(elastic.cpu, elastic.memory) {
            error(key, message);
        }
        let ec2_only = [
            ("MemoryReservation", elastic.memory_reservation.is_some()),
            ("Privileged", elastic.privileged),
            ("MountDockerSocket", elastic.mount_docker_socket),
            ("BindMounts", !elastic.bind_mounts.is_empty()),
            ("SharedMemoryMiB", elastic.shared_memory_mib.is_some()),
        ];
        for (key, _) in ec2_only.into_iter().filter(|(_, set)| *set) {
            error(key, format!("{key} only applies on EC2; this cluster profile's launch type is {launch}."));
        }
        if cluster.launch_type == LaunchType::FargateSpot && elastic.operating_system_family != "LINUX" {
            error(
                "OperatingSystemFamily",
                format!(
                    "Windows tasks ({}) cannot run on FARGATE_SPOT; use a cluster profile with FARGATE or EC2.",
                    elastic.operating_system_family
                ),
            );
        }
        let spot_in_strategy = matches!(
            &cluster.capacity_providers,
            Some(ProviderStrategy::Providers(shares)) if shares.iter().any(|s| s.name == "FARGATE_SPOT")
        );
        if spot_in_strategy && elastic.operating_system_family != "LINUX" {
            error(
                "OperatingSystemFamily",
                format!(
                    "Windows tasks ({}) cannot run on FARGATE_SPOT, which this cluster profile's CapacityProviderStrategy names (ECS refuses them there, on Spot's turns); use a strategy without FARGATE_SPOT, or a cluster profile with FARGATE or EC2.",
                    elastic.operating_system_family
                ),
            );
        }
        if elastic.operating_system_family.starts_with("WINDOWS") {
            if !FARGATE_WINDOWS.contains(&elastic.operating_system_family.as_str()) {
                error(
                    "OperatingSystemFamily",
                    format!(
                        "Fargate runs Windows Server 2019 and 2022 only ({}); {} needs an EC2 cluster profile.",
                        one_of(FARGATE_WINDOWS),
                        elastic.operating_system_family
                    ),
                );
            }
            if !(1024..=4096).contains(&elastic.cpu) {
                error("Cpu", format!("Windows tasks on Fargate need Cpu 1024 to 4096; {} is not.", elastic.cpu));
            }
        }
        if elastic.task_definition_arn.is_none() && elastic.execution_role_arn.is_none() {
            if let Some(group) = &cluster.log_group {
                error(
                    "ExecutionRoleArn",
                    format!(
                        "This cluster profile sends agent logs to CloudWatch (LogGroup {}), which on Fargate needs \
                         an ExecutionRoleArn allowed to write them; set ExecutionRoleArn.",
                        quote(group)
                    ),
                );
            }
            if let Some(sidecar) = elastic.sidecars.iter().find(|s| is_private_ecr(&s.image)) {
                error(
                    "ExecutionRoleArn",
                    format!(
                        "On Fargate the private ECR image {} of sidecar {} is pulled with the execution role; set \
                         ExecutionRoleArn to a role allowed to pull it.",
                        quote(&sidecar.image),
                        sidecar.name
                    ),
                );
            }
            if is_private_ecr(&elastic.image) {
                error(
                    "ExecutionRoleArn",
                    format!(
                        "On Fargate the private ECR image {} is pulled with the execution role; set ExecutionRoleArn \
                         to a role allowed to pull it.",
                        quote(&elastic.image)
                    ),
                );
            }
        }
        for sidecar in elastic.sidecars.iter().filter(|s| s.privileged) {
            error(
                "Sidecars",
                format!("Sidecar {} asks to run privileged, which Fargate refuses; this cluster profile's launch type is {launch}.", sidecar.name),
            );
        }
        if let Some(version) = elastic.platform_version.as_deref().filter(|v| below_1_4(v)) {
            // Fargate and Fargate Spot run ARM64 (Graviton) tasks from platform version 1.4.0
            // (ECS API reference, CapacityProviderStrategyItem).
            if elastic.cpu_architecture == "ARM64" {
                error(
                    "CpuArchitecture",
                    format!(
                        "ARM64 tasks on Fargate need platform version 1.4.0 or later; PlatformVersion is {version}."
                    ),
                );
            }
            if !elastic.efs_volumes.is_empty() {
                error(
                    "PlatformVersion",
                    format!("EFS volumes need Fargate platform version 1.4.0 or later; PlatformVersion is {version}."),
                );
            }
        }
    } else {
        let fargate_only = [
            ("EphemeralStorageGiB", elastic.ephemeral_storage_gib.is_some()),
            ("PlatformVersion", elastic.platform_version.is_some()),
        ];
        for (key, _) in fargate_only.into_iter().filter(|(_, set)| *set) {
            error(key, format!("{key} only applies on Fargate; this cluster profile's launch type is {launch}."));
        }
    }
    for sidecar in elastic.sidecars.iter().filter(|s| !allowed(&cluster.allowed_images, &s.image)) {
        error(
            "Sidecars",
            format!(
                "Sidecar {} runs image {}, which this cluster profile does not allow; AllowedImages are: {}.",
                sidecar.name,
                quote(&sidecar.image),
                patterns(&cluster.allowed_images)
            ),
        );
    }
    for volume in elastic.efs_volumes.iter().filter(|v| !allowed(&cluster.allowed_file_system_ids, &v.file_system_id)) {
        error(
            "EfsVolumes",
            format!(
                "EFS file system {} is not allowed by this cluster profile; AllowedFileSystemIds are: {}.",
                volume.file_system_id,
                patterns(&cluster.allowed_file_system_ids)
            ),
        );
    }
    if let Some(arn) =
        elastic.repository_credentials_arn.as_deref().filter(|arn| !allowed(&cluster.allowed_secret_arns, arn))
    {
        error(
            "RepositoryCredentialsArn",
            format!(
                "RepositoryCredentialsArn {} is not allowed by this cluster profile; AllowedSecretArns are: {}.",
                quote(arn),
                patterns(&cluster.allowed_secret_arns)
            ),
        );
    }
    let awslogs_options = elastic.firelens().is_none() && !elastic.log_options.is_empty();
    if awslogs_options && cluster.log_group.is_none() && elastic.task_definition_arn.is_none() {
        error(
            "LogOptions",
            "LogOptions set awslogs options, but this cluster profile sends no logs to CloudWatch (no LogGroup); set LogGroup there, or add a FireLens sidecar.".to_string(),
        );
    }
    if !allowed(&cluster.allowed_images, &elastic.image) {
        error(
            "Image",
            format!(
                "Image {} is not allowed by this cluster profile; AllowedImages are: {}.",
                quote(&elastic.image),
                patterns(&cluster.allowed_images)
            ),
        );
    }
    if let Some(role) = elastic.task_role_arn.as_deref().filter(|r| !allowed(&cluster.allowed_task_role_arns, r)) {
        error(
            "TaskRoleArn",
            format!(
                "TaskRoleArn {} is not allowed by this cluster profile; AllowedTaskRoleArns are: {}.",
                quote(role),
                patterns(&cluster.allowed_task_role_arns)
            ),
        );
    }
    if let Some(role) =
        elastic.execution_role_arn.as_deref().filter(|r| !allowed(&cluster.allowed_execution_role_arns, r))
    {
        error(
            "ExecutionRoleArn",
            format!(
                "ExecutionRoleArn {} is not allowed by this cluster profile; AllowedExecutionRoleArns are: {}.",
                quote(role),
                patterns(&cluster.allowed_execution_role_arns)
            ),
        );
    }
    for (name, arn) in elastic.secrets.iter().filter(|(_, arn)| !allowed(&cluster.allowed_secret_arns, arn)) {
        error(
            "Secrets",
            format!(
                "Secret {name} reads {}, which this cluster profile does not allow; AllowedSecretArns are: {}.",
                quote(arn),
                patterns(&cluster.allowed_secret_arns)
            ),
        );
    }
    if !cluster.allow_privileged && !cluster.launch_type.is_fargate() {
        let asked = [("Privileged", elastic.privileged), ("MountDockerSocket", elastic.mount_docker_socket)];
        for (key, _) in asked.into_iter().filter(|(_, set)| *set) {
            error(key, format!("{key} needs AllowPrivileged in the cluster profile: such a task controls the EC2 instance and every other task on it."));
        }
        for sidecar in elastic.sidecars.iter().filter(|s| s.privileged) {
            error(
                "Sidecars",
                format!("Sidecar {} runs privileged, which needs AllowPrivileged in the cluster profile: such a task controls the EC2 instance and every other task on it.", sidecar.name),
            );
        }
        for mount in elastic.bind_mounts.iter().filter(|m| is_sensitive_host_path(&m.host_path)) {
            error(
                "BindMounts",
                format!("Mounting the instance's {} needs AllowPrivileged in the cluster profile: it gives the build control of the EC2 instance and every other task on it.", mount.host_path),
            );
        }
    }
    let total_tags =
        cluster.tags.iter().filter(|(k, _)| !elastic.tags.iter().any(|(e, _)| e == k)).count() + elastic.tags.len();
    if total_tags > MAX_USER_TAGS {
        error(
            "Tags",
            format!(
                "With the cluster profile's tags a task would get {total_tags} user tags; at most {MAX_USER_TAGS} fit \
                 beside the plugin's own (AWS allows 50 in all)."
            ),
        );
    }
    errors
}

/// `Some((key, message))` when `cpu`/`memory` is not a Fargate size.
fn fargate_size_problem(cpu: u32, memory: u32) -> Option<(&'static str, String)> {
    let Some((_, sizes)) = FARGATE_SIZES.iter().find(|(c, _)| *c == cpu) else {
        let cpus: Vec<String> = FARGATE_SIZES.iter().map(|(c, _)| c.to_string()).collect();
        let cpus = one_of(&cpus.iter().map(String::as_str).collect::<Vec<_>>());
        return Some(("Cpu", format!("On Fargate, Cpu must be {cpus}; {cpu} is not.")));
    };
    (!sizes.allows(memory)).then(|| {
        let allowed = sizes.describe();
        ("Memory", format!("On Fargate, Cpu {cpu} allows Memory {allowed} (MiB); {memory} is not one of them."))
    })
}

/// A Fargate platform version below 1.4.0 (`LATEST` is not).
fn below_1_4(version: &str) -> bool {
    let parts: Vec<u32> = version.split('.').filter_map(|p| p.parse().ok()).collect();
    parts.len() == 3 && (parts[0], parts[1]) < (1, 4)
}

/// An image in a private ECR repository (`<account>.dkr.ecr.<region>.amazonaws.com/...`).
fn is_private_ecr(image: &str) -> bool {
    let host = image.split('/').next().unwrap_or_default();
    host.contains(".dkr.ecr.") && (host.ends_with(".amazonaws.com") || host.ends_with(".amazonaws.com.cn"))
}

/// An empty allow-list allows everything.
pub fn allowed(patterns: &[glob::Pattern], value: &str) -> bool {
    patterns.is_empty() || patterns.iter().any(|p| p.matches(value))
}

/// The first few patterns, for a message.
pub fn patterns(patterns: &[glob::Pattern]) -> String {
    let shown: Vec<String> = patterns.iter().take(5).map(|p| quote(p.as_str())).collect();
    let more = if patterns.len() > 5 { format!(" and {} more", patterns.len() - 5) } else { String::new() };
    format!("{}{more}", shown.join(", "))
}

#[cfg(test)]
mod placement_tests {
    use super::*;
    use crate::settings::Properties;

    fn props(pairs: &[(&str, &str)]) -> Properties {
        pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect()
    }

    #[test]
    fn placement_only_where_ecs_places_on_ec2() {
        let elastic = ElasticProfile::parse(&props(&[
            ("Image", "gocd/agent:v1"),
            ("PlacementStrategy", "spread:attribute:ecs.availability-zone"),
            ("PlacementConstraints", "distinctInstance"),
        ]))
        .expect("valid");
        let cluster = |extra: &[(&str, &str)]| {
            let mut p = props(&[("ClusterName", "ci")]);
            p.extend(props(extra));
            ClusterProfile::parse(&p).expect("valid")
        };
        let keys = |c: &ClusterProfile| check_compatible(c, &elastic).into_iter().map(|e| e.key).collect::<Vec<_>>();
        assert_eq!(keys(&cluster(&[])), ["PlacementStrategy", "PlacementConstraints"], "Fargate");
        assert_eq!(keys(&cluster(&[("CapacityProviderStrategy", "FARGATE\nFARGATE_SPOT")])).len(), 2);
        assert!(keys(&cluster(&[("CapacityProviderStrategy", "my-asg")])).is_empty());
        assert!(keys(&cluster(&[("CapacityProviderStrategy", "default")])).is_empty());
    }

    #[test]
    fn windows_is_refused_where_the_strategy_names_fargate_spot() {
        let windows = ElasticProfile::parse(&props(&[
            ("Image", "mcr.microsoft.com/windows/servercore:ltsc2022"),
            ("OperatingSystemFamily", "WINDOWS_SERVER_2022_CORE"),
            ("Cpu", "1024"),
            ("Memory", "2048"),
        ]))
        .expect("valid");
        let cluster = |strategy: &str| {
            let mut p = props(&[("ClusterName", "ci")]);
            p.extend(props(&[("CapacityProviderStrategy", strategy)]));
            ClusterProfile::parse(&p).expect("valid")
        };
        let errors = check_compatible(&cluster("FARGATE:1:1\nFARGATE_SPOT:3"), &windows);
        assert_eq!(errors.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["OperatingSystemFamily"]);
        assert!(errors[0].message.contains("CapacityProviderStrategy names"), "{errors:?}");
        assert!(check_compatible(&cluster("FARGATE"), &windows).is_empty());
    }
}
