//! What an elastic profile alone is refused for: the combinations of its keys that no cluster
//! profile runs, decided by the same rules as the pair check of create-agent.

use super::*;

const ECR_IMAGE: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gocd/agent:v1";
const EXEC_ROLE: &str = "arn:aws:iam::123456789012:role/exec";

/// `Image` alpine and `pairs`.
fn profile(pairs: &[(&str, &str)]) -> Properties {
    let mut p = props(&[("Image", "alpine")]);
    p.extend(props(pairs));
    p
}

/// The one error of validating `pairs` alone, as `(key, message)`.
#[track_caller]
fn refusal(pairs: &[(&str, &str)]) -> (String, String) {
    let errors = validate_elastic_profile(&profile(pairs));
    assert_eq!(errors.len(), 1, "{errors:?}");
    (errors[0].key.clone(), errors[0].message.clone())
}

#[track_caller]
fn accepted(pairs: &[(&str, &str)]) {
    assert_eq!(validate_elastic_profile(&profile(pairs)), [], "{pairs:?}");
}

#[test]
fn platform_version_with_bind_mounts() {
    assert_eq!(
        refusal(&[("PlatformVersion", "1.4.0"), ("BindMounts", "/var/cache /cache")]),
        (
            "PlatformVersion".into(),
            "BindMounts only applies with LaunchType EC2, and PlatformVersion only applies on Fargate: no cluster \
             profile can run both. Remove BindMounts, or remove PlatformVersion."
                .into()
        )
    );
}

#[test]
fn platform_version_with_shared_memory() {
    assert_eq!(
        refusal(&[("PlatformVersion", "LATEST"), ("SharedMemoryMiB", "64")]),
        (
            "PlatformVersion".into(),
            "SharedMemoryMiB only applies with LaunchType EC2, and PlatformVersion only applies on Fargate: no \
             cluster profile can run both. Remove SharedMemoryMiB, or remove PlatformVersion."
                .into()
        )
    );
}

#[test]
fn platform_version_below_1_4_with_efs_volumes() {
    assert_eq!(
        refusal(&[("PlatformVersion", "1.3.0"), ("EfsVolumes", "fs-0a1b2c3d /cache")]),
        (
            "PlatformVersion".into(),
            "EFS volumes need Fargate platform version 1.4.0 or later (PlatformVersion is 1.3.0), and \
             PlatformVersion only applies on Fargate: no cluster profile can run both. Set PlatformVersion to \
             1.4.0 or later, or remove PlatformVersion."
                .into()
        )
    );
    accepted(&[("PlatformVersion", "1.4.0"), ("EfsVolumes", "fs-0a1b2c3d /cache")]);
}

#[test]
fn arm64_with_a_platform_version_below_1_4() {
    assert_eq!(
        refusal(&[("PlatformVersion", "1.3.0"), ("CpuArchitecture", "ARM64")]),
        (
            "PlatformVersion".into(),
            "ARM64 tasks need Fargate platform version 1.4.0 or later (PlatformVersion is 1.3.0), and \
             PlatformVersion only applies on Fargate: no cluster profile can run both. Set PlatformVersion to \
             1.4.0 or later, or remove PlatformVersion."
                .into()
        )
    );
    accepted(&[("PlatformVersion", "1.4.0"), ("CpuArchitecture", "ARM64")]);
}

#[test]
fn ephemeral_storage_with_an_ec2_only_key() {
    for key in ["MemoryReservation", "Privileged", "MountDockerSocket"] {
        let value = if key == "MemoryReservation" { "512" } else { "true" };
        assert_eq!(
            refusal(&[("EphemeralStorageGiB", "50"), (key, value)]),
            (
                "EphemeralStorageGiB".into(),
                format!(
                    "{key} only applies with LaunchType EC2, and EphemeralStorageGiB only applies on Fargate: no \
                     cluster profile can run both. Remove {key}, or remove EphemeralStorageGiB."
                )
            )
        );
    }
}

#[test]
fn a_size_fargate_does_not_run_with_a_fargate_only_key() {
    assert_eq!(
        refusal(&[("Cpu", "1000"), ("EphemeralStorageGiB", "50")]),
        (
            "EphemeralStorageGiB".into(),
            "Cpu 1000 with Memory 2048 is not a Fargate size, so it runs only with LaunchType EC2, and \
             EphemeralStorageGiB only applies on Fargate: no cluster profile can run both. Choose a Cpu and Memory \
             that Fargate allows, or remove EphemeralStorageGiB."
                .into()
        )
    );
    accepted(&[("Cpu", "1000")]);
}

#[test]
fn a_windows_family_fargate_does_not_run_with_a_platform_version() {
    assert_eq!(
        refusal(&[("OperatingSystemFamily", "WINDOWS_SERVER_2016_FULL"), ("PlatformVersion", "1.0.0")]),
        (
            "PlatformVersion".into(),
            "Fargate runs Windows Server 2019 and 2022 only, so WINDOWS_SERVER_2016_FULL runs only with LaunchType \
             EC2, and PlatformVersion only applies on Fargate: no cluster profile can run both. Choose an \
             OperatingSystemFamily Fargate runs (WINDOWS_SERVER_2019_FULL, WINDOWS_SERVER_2019_CORE, \
             WINDOWS_SERVER_2022_FULL or WINDOWS_SERVER_2022_CORE), or remove PlatformVersion."
                .into()
        )
    );
    accepted(&[("OperatingSystemFamily", "WINDOWS_SERVER_2016_FULL")]);
    accepted(&[("OperatingSystemFamily", "WINDOWS_SERVER_2022_CORE"), ("PlatformVersion", "1.0.0")]);
}

#[test]
fn windows_with_a_cpu_fargate_windows_refuses_and_a_fargate_only_key() {
    assert_eq!(
        refusal(&[
            ("OperatingSystemFamily", "WINDOWS_SERVER_2022_CORE"),
            ("Cpu", "512"),
            ("EphemeralStorageGiB", "30")
        ]),
        (
            "EphemeralStorageGiB".into(),
            "Windows tasks on Fargate need Cpu 1024 to 4096 (it is 512), and EphemeralStorageGiB only applies on \
             Fargate: no cluster profile can run both. Set Cpu 1024 to 4096, or remove EphemeralStorageGiB."
                .into()
        )
    );
}

#[test]
fn placement_with_an_ec2_only_key() {
    assert_eq!(
        refusal(&[
            ("PlacementStrategy", "spread:attribute:ecs.availability-zone"),
            ("BindMounts", "/var/cache /cache")
        ]),
        (
            "BindMounts".into(),
            "PlacementStrategy only applies where ECS places the task on EC2 instances (a CapacityProviderStrategy \
             naming an Auto Scaling group's provider, or default), and BindMounts only applies with LaunchType EC2: \
             no cluster profile can run both. Remove PlacementStrategy, or remove BindMounts."
                .into()
        )
    );
    accepted(&[("PlacementStrategy", "spread:attribute:ecs.availability-zone"), ("PlatformVersion", "1.4.0")]);
}

#[test]
fn a_privileged_sidecar_with_a_fargate_only_key() {
    let sidecars = r#"[{"name": "dind", "image": "docker:26-dind", "memory": 512, "privileged": true}]"#;
    assert_eq!(
        refusal(&[("Sidecars", sidecars), ("PlatformVersion", "1.4.0")]),
        (
            "PlatformVersion".into(),
            "Sidecar dind runs privileged, which Fargate refuses, and PlatformVersion only applies on Fargate: no \
             cluster profile can run both. Run sidecar dind unprivileged, or remove PlatformVersion."
                .into()
        )
    );
}

#[test]
fn a_private_ecr_image_without_execution_role_and_a_fargate_only_key() {
    let (key, message) = refusal(&[("Image", ECR_IMAGE), ("PlatformVersion", "1.4.0")]);
    assert_eq!(key, "PlatformVersion");
    assert_eq!(
        message,
        format!(
            "On Fargate the private ECR image '{ECR_IMAGE}' is pulled with ExecutionRoleArn, which is not set, and \
             PlatformVersion only applies on Fargate: no cluster profile can run both. Set ExecutionRoleArn, or \
             remove PlatformVersion."
        )
    );
    accepted(&[("Image", ECR_IMAGE), ("PlatformVersion", "1.4.0"), ("ExecutionRoleArn", EXEC_ROLE)]);
    accepted(&[("Image", ECR_IMAGE)]);
}

#[test]
fn awslogs_options_without_execution_role_and_a_fargate_only_key() {
    assert_eq!(
        refusal(&[("LogOptions", "mode=non-blocking"), ("PlatformVersion", "1.4.0")]),
        (
            "LogOptions".into(),
            "On Fargate, agent logs reach a cluster profile's LogGroup only through ExecutionRoleArn, which is not \
             set, PlatformVersion only applies on Fargate, and LogOptions sets awslogs options, which need a \
             cluster profile with a LogGroup: no cluster profile can run them together. Set ExecutionRoleArn, \
             remove PlatformVersion, or remove LogOptions (or add a FireLens sidecar)."
                .into()
        )
    );
    accepted(&[("LogOptions", "mode=non-blocking")]);
    accepted(&[("LogOptions", "mode=non-blocking"), ("PlatformVersion", "1.4.0"), ("ExecutionRoleArn", EXEC_ROLE)]);
}

#[test]
fn each_combination_is_refused_once() {
    let errors = validate_elastic_profile(&profile(&[
        ("PlatformVersion", "1.3.0"),
        ("BindMounts", "/var/cache /cache"),
        ("SharedMemoryMiB", "64"),
        ("EfsVolumes", "fs-0a1b2c3d /cache"),
    ]));
    let starts: Vec<&str> = errors.iter().map(|e| e.message.split(',').next().unwrap_or_default()).collect();
    assert_eq!(
        starts,
        [
            "BindMounts only applies with LaunchType EC2",
            "SharedMemoryMiB only applies with LaunchType EC2",
            "EFS volumes need Fargate platform version 1.4.0 or later (PlatformVersion is 1.3.0)",
        ]
    );
    assert!(errors.iter().all(|e| e.key == "PlatformVersion"), "{errors:?}");
}

#[test]
fn problems_of_the_keys_come_first() {
    let errors = validate_elastic_profile(&profile(&[("PlatformVersion", "1.4.0"), ("BindMounts", "nowhere")]));
    assert_eq!(errors.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["BindMounts"], "{errors:?}");
}

/// One kind of cluster profile, checked as create-agent checks it.
struct Variant {
    name: String,
    cluster: ClusterProfile,
    /// The strategy's ECS Managed Instances provider, if any.
    managed_instances: Option<&'static str>,
}

impl Variant {
    /// The pair, then what a Managed Instances provider refuses.
    fn refuses(&self, elastic: &ElasticProfile) -> Vec<FieldError> {
        let mut problems = check_compatible(&self.cluster, elastic);
        if let Some(provider) = self.managed_instances {
            problems.extend(managed_instances::check(elastic, provider));
        }
        problems
    }
}

const EC2: &[(&str, &str)] = &[
    ("LaunchType", "EC2"),
    ("Ec2InstanceType", "c5.xlarge"),
    ("Ec2InstanceProfile", "ecsInstanceRole"),
    ("Ec2AmiId", "ami-0a1b2c3d"),
    ("AllowPrivileged", "true"),
];

/// Every kind of cluster profile, each as permissive as it can be (no allow-lists,
/// `AllowPrivileged`): FARGATE, FARGATE_SPOT, EC2, and capacity provider strategies of Fargate,
/// with Fargate Spot, with an Auto Scaling group's provider, the cluster's default, and ECS
/// Managed Instances; each with and without a `LogGroup`.
fn every_kind_of_cluster_profile() -> Vec<Variant> {
    let kinds: [(&str, &[(&str, &str)]); 9] = [
        ("FARGATE", &[]),
        ("FARGATE_SPOT", &[("LaunchType", "FARGATE_SPOT")]),
        ("EC2", EC2),
        ("strategy FARGATE", &[("CapacityProviderStrategy", "FARGATE")]),
        ("strategy with FARGATE_SPOT", &[("CapacityProviderStrategy", "FARGATE:1:1\nFARGATE_SPOT:3")]),
        ("strategy of an ASG", &[("CapacityProviderStrategy", "my-asg")]),
        ("strategy of an ASG and FARGATE_SPOT", &[("CapacityProviderStrategy", "my-asg\nFARGATE_SPOT")]),
        ("default strategy", &[("CapacityProviderStrategy", "default")]),
        ("Managed Instances", &[("CapacityProviderStrategy", "my-mi")]),
    ];
    let mut variants = Vec::new();
    for (name, pairs) in kinds {
        for log_group in [None, Some("/gocd/agents")] {
            let mut p = props(&[("ClusterName", "ci")]);
            p.extend(props(pairs));
            if let Some(group) = log_group {
                p.extend(props(&[("LogGroup", group)]));
            }
            variants.push(Variant {
                name: format!("{name}, LogGroup {log_group:?}"),
                cluster: ClusterProfile::parse(&p).unwrap_or_else(|e| panic!("{name}: {e:?}")),
                managed_instances: (name == "Managed Instances").then_some("my-mi"),
            });
        }
    }
    variants
}

/// Ingredients of elastic profiles: each combination of up to three is one profile of the table.
const INGREDIENTS: &[&[(&str, &str)]] = &[
    &[("PlatformVersion", "1.4.0")],
    &[("PlatformVersion", "1.3.0")],
    &[("EphemeralStorageGiB", "50")],
    &[("BindMounts", "/var/cache /cache")],
    &[("SharedMemoryMiB", "64")],
    &[("MemoryReservation", "512")],
    &[("Privileged", "true")],
    &[("MountDockerSocket", "true")],
    &[("EfsVolumes", "fs-0a1b2c3d /cache")],
    &[("CpuArchitecture", "ARM64")],
    &[("OperatingSystemFamily", "WINDOWS_SERVER_2016_FULL")],
    &[("OperatingSystemFamily", "WINDOWS_SERVER_2022_CORE")],
    &[("Cpu", "512")],
    &[("Cpu", "1000")],
    &[("PlacementStrategy", "spread:attribute:ecs.availability-zone")],
    &[("PlacementConstraints", "distinctInstance")],
    &[("Image", ECR_IMAGE)],
    &[("ExecutionRoleArn", EXEC_ROLE)],
    &[("LogOptions", "mode=non-blocking")],
    &[("Sidecars", r#"[{"name": "dind", "image": "docker:26-dind", "memory": 512, "privileged": true}]"#)],
    &[(
        "Sidecars",
        r#"[{"name": "tool", "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/tool:1", "memory": 256}]"#,
    )],
    &[("TaskDefinitionArn", "gocd-agent:3")],
];

#[test]
fn alone_refuses_exactly_what_every_kind_of_cluster_profile_refuses() {
    let clusters = every_kind_of_cluster_profile();
    let n = INGREDIENTS.len();
    let mut table: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    for i in 0..n {
        for j in i + 1..n {
            table.push(vec![i, j]);
            table.extend((j + 1..n).map(|k| vec![i, j, k]));
        }
    }
    let (mut checked, mut refused) = (0, 0);
    for row in table {
        let pairs: Vec<(&str, &str)> = row.iter().flat_map(|i| INGREDIENTS[*i].iter().copied()).collect();
        let Ok(elastic) = ElasticProfile::parse(&profile(&pairs)) else { continue };
        let alone = check_fits_some_cluster(&elastic);
        let runs_on: Vec<&str> =
            clusters.iter().filter(|v| v.refuses(&elastic).is_empty()).map(|v| v.name.as_str()).collect();
        assert_eq!(alone.is_empty(), !runs_on.is_empty(), "{pairs:?}: alone {alone:?}, runs on {runs_on:?}");
        assert_eq!(validate_elastic_profile(&profile(&pairs)), alone, "{pairs:?}");
        checked += 1;
        refused += usize::from(!alone.is_empty());
    }
    assert!(checked > 1000 && refused > 300, "{checked} profiles checked, {refused} refused");
}
