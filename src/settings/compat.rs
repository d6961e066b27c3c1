//! Rules that need both profiles, enforced at create-agent: Fargate sizes, EC2-only and
//! Fargate-only fields, the allow-lists, and the total number of user tags.
//!
//! GoCD validates an elastic profile without its cluster profile. The same rules decide what that
//! validation refuses: what an elastic profile asks of where its tasks run is one list
//! (`needs`); create-agent refuses a need its cluster profile does not meet
//! ([`check_compatible`]), and validation refuses needs that no cluster profile meets together
//! ([`check_fits_some_cluster`]). ECS Managed Instances providers refuse more
//! (`super::managed_instances`), which narrows one kind of cluster profile and never decides
//! what every one refuses.

use super::basics::{quote, LaunchType, MAX_USER_TAGS};
use super::capacity_providers::ProviderStrategy;
use super::cluster_profile::ClusterProfile;
use super::elastic_profile::ElasticProfile;
use super::fields::one_of;
use super::task_parts::is_sensitive_host_path;
use crate::protocol::profiles::{FieldError, Properties};

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

/// Validates an elastic agent profile without its cluster profile, as GoCD's validate call does:
/// every problem of its keys ([`ElasticProfile::parse`]), else every combination of them that no
/// cluster profile runs ([`check_fits_some_cluster`]); nothing when it is valid.
pub fn validate_elastic_profile(props: &Properties) -> Vec<FieldError> {
    match ElasticProfile::parse(props) {
        Ok(elastic) => check_fits_some_cluster(&elastic),
        Err(problems) => problems,
    }
}

/// Problems of running `elastic` in `cluster`, keyed by the elastic profile's keys; empty when
/// the pair is fine. Create-agent refuses the pair on any of them.
pub fn check_compatible(cluster: &ClusterProfile, elastic: &ElasticProfile) -> Vec<FieldError> {
    let place = Place::of(cluster);
    let mut errors: Vec<FieldError> = needs(elastic)
        .into_iter()
        .filter(|need| !(need.fits)(&place))
        .map(|need| FieldError { key: need.key.to_string(), message: (need.refusal)(cluster) })
        .collect();
    // A strategy of FARGATE alone is a Fargate place like LaunchType FARGATE, but the strategy,
    // not WarmLaunchType, says where its tasks go.
    let warm_launch = elastic.warm.launch_type.is_some() && cluster.capacity_providers.is_some();
    if warm_launch && !errors.iter().any(|e| e.key == "WarmLaunchType") {
        errors.push(FieldError { key: "WarmLaunchType".to_string(), message: warm_launch_refusal(cluster) });
    }
    errors.extend(permissions(cluster, elastic));
    errors
}

/// `WarmLaunchType` on a cluster profile it does not apply to.
fn warm_launch_refusal(cluster: &ClusterProfile) -> String {
    let place = if cluster.capacity_providers.is_some() {
        "this cluster profile's CapacityProviderStrategy decides where every agent runs".to_string()
    } else {
        format!("this cluster profile's launch type is {}", cluster.launch_type.as_str())
    };
    format!(
        "WarmLaunchType only applies to a cluster profile with LaunchType FARGATE or FARGATE_SPOT; {place}. Remove WarmLaunchType."
    )
}

/// Problems of `elastic` whatever its cluster profile: each combination of its keys that no
/// cluster profile runs (so every create-agent would refuse it), keyed by one of those keys and
/// naming them all with what to change; empty when some cluster profile runs it. This is the
/// pair check of [`check_compatible`] over every `Place`: a profile is refused here exactly
/// when no place meets all its `needs`; the rest of the pair check (allow-lists,
/// `AllowPrivileged`, the tags) asks only what some cluster profile always grants.
pub fn check_fits_some_cluster(elastic: &ElasticProfile) -> Vec<FieldError> {
    let needs = needs(elastic);
    let masks: Vec<u32> = needs.iter().map(|need| places_meeting(need.fits)).collect();
    if masks.iter().fold(ALL_PLACES, |left, mask| left & mask) != 0 {
        return Vec::new();
    }
    // The smallest sets of needs that no place meets together: every pair, then every triple
    // none of whose pairs is one already. With the needs there are, a clash takes at most three;
    // all of them together is only a fallback.
    let n = needs.len();
    let mut conflicts: Vec<Vec<usize>> = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            if masks[i] & masks[j] == 0 {
                conflicts.push(vec![i, j]);
            }
        }
    }
    let is_pair = |i: usize, j: usize| masks[i] & masks[j] == 0;
    for i in 0..n {
        for j in i + 1..n {
            for k in j + 1..n {
                let minimal = !is_pair(i, j) && !is_pair(i, k) && !is_pair(j, k);
                if minimal && masks[i] & masks[j] & masks[k] == 0 {
                    conflicts.push(vec![i, j, k]);
                }
            }
        }
    }
    if conflicts.is_empty() {
        conflicts.push((0..n).collect());
    }
    conflicts.iter().map(|conflict| conflict_error(&needs, conflict)).collect()
}

/// The refusal of needs no place meets together, keyed by the last one's key.
fn conflict_error(needs: &[Need<'_>], conflict: &[usize]) -> FieldError {
    let clauses: Vec<&str> = conflict.iter().map(|i| needs[*i].clause.as_str()).collect();
    let mut fixes: Vec<&str> = Vec::new();
    for fix in conflict.iter().map(|i| needs[*i].fix.as_str()) {
        if !fixes.contains(&fix) {
            fixes.push(fix);
        }
    }
    let together = if clauses.len() == 2 { "both" } else { "them together" };
    let message = format!(
        "{}: no cluster profile can run {together}. {}.",
        capitalized(&and_or(&clauses, "and")),
        capitalized(&and_or(&fixes, "or"))
    );
    let last = conflict.last().map_or(needs[0].key, |i| needs[*i].key);
    FieldError { key: last.to_string(), message }
}

/// `a, and b` / `a, b, and c` (`or` likewise); the clauses are long, so a comma before the last.
fn and_or(items: &[&str], word: &str) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{}, {word} {last}", init.join(", ")),
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}

/// Where a cluster profile sends the agent tasks, in the terms the elastic profile's [`needs`]
/// read: all a cluster profile can differ in that an elastic profile alone cannot grant itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    /// Fargate's rules apply: `LaunchType` FARGATE or FARGATE_SPOT, or a
    /// `CapacityProviderStrategy` (whose task definitions are Fargate's).
    fargate: bool,
    /// `LaunchType` FARGATE_SPOT.
    spot_launch: bool,
    /// A `CapacityProviderStrategy` that names FARGATE_SPOT.
    spot_in_strategy: bool,
    /// ECS places the tasks on EC2 instances: a strategy naming an Auto Scaling group's provider,
    /// or `default`.
    ecs_places_on_ec2: bool,
    /// `LogGroup` is set: agent logs go to CloudWatch.
    log_group: bool,
}

impl Place {
    fn of(cluster: &ClusterProfile) -> Place {
        Place {
            fargate: cluster.launch_type.is_fargate(),
            spot_launch: cluster.launch_type == LaunchType::FargateSpot,
            spot_in_strategy: matches!(
                &cluster.capacity_providers,
                Some(ProviderStrategy::Providers(shares)) if shares.iter().any(|s| s.name == "FARGATE_SPOT")
            ),
            ecs_places_on_ec2: cluster.capacity_providers.as_ref().is_some_and(ProviderStrategy::may_use_ec2),
            log_group: cluster.log_group.is_some(),
        }
    }
}

/// Every place a cluster profile can be, with and without a `LogGroup`: `LaunchType` FARGATE
/// (or a strategy of FARGATE alone), FARGATE_SPOT and EC2, and a `CapacityProviderStrategy`
/// naming FARGATE_SPOT, an Auto Scaling group's provider, or both.
const PLACES: [Place; 12] = {
    const fn place(fargate: bool, spot_launch: bool, spot_in_strategy: bool, ecs: bool, log_group: bool) -> Place {
        Place { fargate, spot_launch, spot_in_strategy, ecs_places_on_ec2: ecs, log_group }
    }
    [
        place(true, false, false, false, false),
        place(true, true, false, false, false),
        place(false, false, false, false, false),
        place(true, false, true, false, false),
        place(true, false, false, true, false),
        place(true, false, true, true, false),
        place(true, false, false, false, true),
        place(true, true, false, false, true),
        place(false, false, false, false, true),
        place(true, false, true, false, true),
        place(true, false, false, true, true),
        place(true, false, true, true, true),
    ]
};

/// One bit per place of [`PLACES`].
const ALL_PLACES: u32 = (1 << PLACES.len()) - 1;

/// The places that meet `fits`, one bit each.
fn places_meeting(fits: fn(&Place) -> bool) -> u32 {
    PLACES.iter().enumerate().filter(|(_, place)| fits(place)).fold(0, |mask, (i, _)| mask | 1 << i)
}

/// One thing an elastic profile asks of where its tasks run.
struct Need<'a> {
    /// The key refused where the need is not met.
    key: &'static str,
    /// Whether a place meets it.
    fits: fn(&Place) -> bool,
    /// The need as a clause, for the message of a profile no cluster profile runs.
    clause: String,
    /// What to change in the elastic profile so that it no longer asks this.
    fix: String,
    /// The refusal on a cluster profile that does not meet it.
    refusal: Box<dyn Fn(&ClusterProfile) -> String + 'a>,
}

/// Everything `elastic` asks of where its tasks run: the one list both [`check_compatible`] (for
/// one cluster profile) and [`check_fits_some_cluster`] (for all of them) read.
fn needs(elastic: &ElasticProfile) -> Vec<Need<'_>> {
    let mut needs = Vec::new();
    let fargate: fn(&Place) -> bool = |p| p.fargate;
    let not_fargate: fn(&Place) -> bool = |p| !p.fargate;
    let launch = |cluster: &ClusterProfile| cluster.launch_type.as_str();
    let placement = [
        ("PlacementStrategy", !elastic.placement_strategy.is_empty()),
        ("PlacementConstraints", !elastic.placement_constraints.is_empty()),
    ];
    for (key, _) in placement.into_iter().filter(|(_, set)| *set) {
        needs.push(Need {
            key,
            fits: |p| p.ecs_places_on_ec2,
            clause: format!(
                "{key} only applies where ECS places the task on EC2 instances (a CapacityProviderStrategy naming an \
                 Auto Scaling group's provider, or default)"
            ),
            fix: format!("remove {key}"),
            refusal: Box::new(move |_| {
                format!(
                    "{key} only applies where ECS places the task on EC2 instances: a cluster profile whose \
                     CapacityProviderStrategy names an Auto Scaling group's provider (or is default). Fargate takes \
                     no placement, and with LaunchType EC2 the plugin chooses the instance itself."
                )
            }),
        });
    }
    if let Some((key, message)) = fargate_size_problem(elastic.cpu, elastic.memory) {
        needs.push(Need {
            key,
            fits: not_fargate,
            clause: format!(
                "Cpu {} with Memory {} is not a Fargate size, so it runs only with LaunchType EC2",
                elastic.cpu, elastic.memory
            ),
            fix: "choose a Cpu and Memory that Fargate allows".to_string(),
            refusal: Box::new(move |_| message.clone()),
        });
    }
    let ec2_only = [
        ("MemoryReservation", elastic.memory_reservation.is_some()),
        ("Privileged", elastic.privileged),
        ("MountDockerSocket", elastic.mount_docker_socket),
        ("BindMounts", !elastic.bind_mounts.is_empty()),
        ("SharedMemoryMiB", elastic.shared_memory_mib.is_some()),
    ];
    for (key, _) in ec2_only.into_iter().filter(|(_, set)| *set) {
        needs.push(Need {
            key,
            fits: not_fargate,
            clause: format!("{key} only applies with LaunchType EC2"),
            fix: format!("remove {key}"),
            refusal: Box::new(move |c| {
                format!("{key} only applies on EC2; this cluster profile's launch type is {}.", launch(c))
            }),
        });
    }
    let os = elastic.operating_system_family.as_str();
    if os != "LINUX" {
        needs.push(Need {
            key: "OperatingSystemFamily",
            fits: |p| !(p.fargate && p.spot_launch),
            clause: format!("Windows tasks ({os}) cannot run on FARGATE_SPOT"),
            fix: "use OperatingSystemFamily LINUX".to_string(),
            refusal: Box::new(move |_| {
                format!("Windows tasks ({os}) cannot run on FARGATE_SPOT; use a cluster profile with FARGATE or EC2.")
            }),
        });
        needs.push(Need {
            key: "OperatingSystemFamily",
            fits: |p| !(p.fargate && p.spot_in_strategy),
            clause: format!("Windows tasks ({os}) cannot run on FARGATE_SPOT"),
            fix: "use OperatingSystemFamily LINUX".to_string(),
            refusal: Box::new(move |_| {
                format!(
                    "Windows tasks ({os}) cannot run on FARGATE_SPOT, which this cluster profile's CapacityProviderStrategy names (ECS refuses them there, on Spot's turns); use a strategy without FARGATE_SPOT, or a cluster profile with FARGATE or EC2."
                )
            }),
        });
    }
    if os.starts_with("WINDOWS") {
        if !FARGATE_WINDOWS.contains(&os) {
            needs.push(Need {
                key: "OperatingSystemFamily",
                fits: not_fargate,
                clause: format!(
                    "Fargate runs Windows Server 2019 and 2022 only, so {os} runs only with LaunchType EC2"
                ),
                fix: format!("choose an OperatingSystemFamily Fargate runs ({})", one_of(FARGATE_WINDOWS)),
                refusal: Box::new(move |_| {
                    format!(
                        "Fargate runs Windows Server 2019 and 2022 only ({}); {os} needs an EC2 cluster profile.",
                        one_of(FARGATE_WINDOWS)
                    )
                }),
            });
        }
        if !(1024..=4096).contains(&elastic.cpu) {
            let cpu = elastic.cpu;
            needs.push(Need {
                key: "Cpu",
                fits: not_fargate,
                clause: format!("Windows tasks on Fargate need Cpu 1024 to 4096 (it is {cpu})"),
                fix: "set Cpu 1024 to 4096".to_string(),
                refusal: Box::new(move |_| format!("Windows tasks on Fargate need Cpu 1024 to 4096; {cpu} is not.")),
            });
        }
    }
    if elastic.task_definition_arn.is_none() && elastic.execution_role_arn.is_none() {
        needs.push(Need {
            key: "ExecutionRoleArn",
            fits: |p| !(p.fargate && p.log_group),
            clause: "on Fargate, agent logs reach a cluster profile's LogGroup only through ExecutionRoleArn, which \
                     is not set"
                .to_string(),
            fix: "set ExecutionRoleArn".to_string(),
            refusal: Box::new(|c| {
                format!(
                    "This cluster profile sends agent logs to CloudWatch (LogGroup {}), which on Fargate needs an \
                     ExecutionRoleArn allowed to write them; set ExecutionRoleArn.",
                    quote(c.log_group.as_deref().unwrap_or_default())
                )
            }),
        });
        if let Some(sidecar) = elastic.sidecars.iter().find(|s| is_private_ecr(&s.image)) {
            let (image, name) = (quote(&sidecar.image), sidecar.name.as_str());
            needs.push(Need {
                key: "ExecutionRoleArn",
                fits: not_fargate,
                clause: format!(
                    "on Fargate the private ECR image {image} of sidecar {name} is pulled with ExecutionRoleArn, which is not set"
                ),
                fix: "set ExecutionRoleArn".to_string(),
                refusal: Box::new(move |_| {
                    format!(
                        "On Fargate the private ECR image {image} of sidecar {name} is pulled with the execution role; \
                         set ExecutionRoleArn to a role allowed to pull it."
                    )
                }),
            });
        }
        if is_private_ecr(&elastic.image) {
            let image = quote(&elastic.image);
            needs.push(Need {
                key: "ExecutionRoleArn",
                fits: not_fargate,
                clause: format!(
                    "on Fargate the private ECR image {image} is pulled with ExecutionRoleArn, which is not set"
                ),
                fix: "set ExecutionRoleArn".to_string(),
                refusal: Box::new(move |_| {
                    format!(
                        "On Fargate the private ECR image {image} is pulled with the execution role; set \
                         ExecutionRoleArn to a role allowed to pull it."
                    )
                }),
            });
        }
    }
    for sidecar in elastic.sidecars.iter().filter(|s| s.privileged) {
        let name = sidecar.name.as_str();
        needs.push(Need {
            key: "Sidecars",
            fits: not_fargate,
            clause: format!("sidecar {name} runs privileged, which Fargate refuses"),
            fix: format!("run sidecar {name} unprivileged"),
            refusal: Box::new(move |c| {
                format!(
                    "Sidecar {name} asks to run privileged, which Fargate refuses; this cluster profile's launch type is {}.",
                    launch(c)
                )
            }),
        });
    }
    if let Some(version) = elastic.platform_version.as_deref().filter(|v| below_1_4(v)) {
        // Fargate and Fargate Spot run ARM64 (Graviton) tasks from platform version 1.4.0
        // (ECS API reference, CapacityProviderStrategyItem).
        if elastic.cpu_architecture == "ARM64" {
            needs.push(Need {
                key: "CpuArchitecture",
                fits: not_fargate,
                clause: format!(
                    "ARM64 tasks need Fargate platform version 1.4.0 or later (PlatformVersion is {version})"
                ),
                fix: "set PlatformVersion to 1.4.0 or later".to_string(),
                refusal: Box::new(move |_| {
                    format!(
                        "ARM64 tasks on Fargate need platform version 1.4.0 or later; PlatformVersion is {version}."
                    )
                }),
            });
        }
        if !elastic.efs_volumes.is_empty() {
            needs.push(Need {
                key: "PlatformVersion",
                fits: not_fargate,
                clause: format!(
                    "EFS volumes need Fargate platform version 1.4.0 or later (PlatformVersion is {version})"
                ),
                fix: "set PlatformVersion to 1.4.0 or later".to_string(),
                refusal: Box::new(move |_| {
                    format!("EFS volumes need Fargate platform version 1.4.0 or later; PlatformVersion is {version}.")
                }),
            });
        }
    }
    let fargate_only = [
        ("EphemeralStorageGiB", elastic.ephemeral_storage_gib.is_some()),
        ("PlatformVersion", elastic.platform_version.is_some()),
    ];
    for (key, _) in fargate_only.into_iter().filter(|(_, set)| *set) {
        needs.push(Need {
            key,
            fits: fargate,
            clause: format!("{key} only applies on Fargate"),
            fix: format!("remove {key}"),
            refusal: Box::new(move |c| {
                format!("{key} only applies on Fargate; this cluster profile's launch type is {}.", launch(c))
            }),
        });
    }
    if elastic.warm.launch_type.is_some() {
        needs.push(Need {
            key: "WarmLaunchType",
            fits: |p| p.fargate && !p.spot_in_strategy && !p.ecs_places_on_ec2,
            clause: "WarmLaunchType only applies with LaunchType FARGATE or FARGATE_SPOT".to_string(),
            fix: "remove WarmLaunchType".to_string(),
            refusal: Box::new(warm_launch_refusal),
        });
    }
    let awslogs_options = elastic.firelens().is_none() && !elastic.log_options.is_empty();
    if awslogs_options && elastic.task_definition_arn.is_none() {
        needs.push(Need {
            key: "LogOptions",
            fits: |p| p.log_group,
            clause: "LogOptions sets awslogs options, which need a cluster profile with a LogGroup".to_string(),
            fix: "remove LogOptions (or add a FireLens sidecar)".to_string(),
            refusal: Box::new(|_| {
                "LogOptions set awslogs options, but this cluster profile sends no logs to CloudWatch (no LogGroup); set LogGroup there, or add a FireLens sidecar.".to_string()
            }),
        });
    }
    needs
}

/// What a cluster profile must grant `elastic` that some cluster profile always does: its
/// allow-lists, `AllowPrivileged`, and room for the tags.
fn permissions(cluster: &ClusterProfile, elastic: &ElasticProfile) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut error = |key: &str, message: String| errors.push(FieldError { key: key.to_string(), message });
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

/// The smallest Fargate size with at least `cpu` units and `memory` MiB: the fewest CPU units
/// first, then the least memory that CPU allows; `None` when it exceeds Fargate's largest
/// (`import` rounds sizes Fargate would refuse up with this).
pub fn fargate_size_at_least(cpu: u32, memory: u32) -> Option<(u32, u32)> {
    FARGATE_SIZES.iter().filter(|(c, _)| *c >= cpu).find_map(|(c, sizes)| {
        let fits = match *sizes {
            Sizes::List(values) => values.iter().copied().find(|m| *m >= memory),
            Sizes::Steps { min, max, step } => {
                let m = if memory <= min { min } else { min + (memory - min).div_ceil(step) * step };
                (m <= max).then_some(m)
            }
        };
        fits.map(|m| (*c, m))
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
