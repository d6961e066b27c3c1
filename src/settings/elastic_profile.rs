//! The elastic agent profile: what one agent container looks like (`docs/design.md`, "Profiles").
//!
//! This module owns the keys and what each says by itself, and the rules between keys that hold
//! wherever the task runs. What depends on where the task runs (launch type, LogGroup,
//! allow-lists) is `compat`'s, which also refuses the combinations no cluster profile runs.

use super::basics::quote;
use super::fields::profile_hash;
use super::fields::Fields;
use super::keys::{ProfileKind, CPU_ARCHITECTURES, OPERATING_SYSTEM_FAMILIES};
use super::line_rules::{ENV_VARIABLES, SECRETS, TAGS};
use super::syntax;
use super::task_parts::{self, BindMount, EfsVolume, HealthCheck, Sidecar, Ulimit};
use crate::protocol::profiles::{FieldError, Properties};

/// The name of the GoCD agent container in the task definitions the plugin registers.
pub const AGENT_CONTAINER: &str = "gocd-agent";

/// A parsed, valid elastic agent profile.
#[derive(Debug, Clone)]
pub struct ElasticProfile {
    /// `Image`.
    pub image: String,
    /// `Cpu` units, default 1024.
    pub cpu: u32,
    /// `Memory` in MiB, default 2048.
    pub memory: u32,
    /// `MemoryReservation` in MiB (EC2 only), at most `memory`.
    pub memory_reservation: Option<u32>,
    /// `Command`, one argument per line; empty means the image's command.
    pub command: Vec<String>,
    /// `Environment`, in the order given.
    pub environment: Vec<(String, String)>,
    /// `Secrets`: environment variable name and secret or parameter ARN.
    pub secrets: Vec<(String, String)>,
    /// `TaskRoleArn`.
    pub task_role_arn: Option<String>,
    /// `ExecutionRoleArn`.
    pub execution_role_arn: Option<String>,
    /// `OperatingSystemFamily`, default `LINUX`.
    pub operating_system_family: String,
    /// `CpuArchitecture`, default `X86_64`.
    pub cpu_architecture: String,
    /// `EphemeralStorageGiB` (Fargate only).
    pub ephemeral_storage_gib: Option<u32>,
    /// `Privileged` (EC2 only).
    pub privileged: bool,
    /// `MountDockerSocket` (EC2 only).
    pub mount_docker_socket: bool,
    /// `SubnetIds`; empty means the cluster profile's.
    pub subnet_ids: Vec<String>,
    /// `SecurityGroupIds`; empty means the cluster profile's.
    pub security_group_ids: Vec<String>,
    /// `Tags`, in the order given.
    pub tags: Vec<(String, String)>,
    /// `EnableExecuteCommand` (ECS Exec).
    pub enable_execute_command: bool,
    /// `TaskDefinitionArn`: an ARN, `family:revision` or `family`, used as it is.
    pub task_definition_arn: Option<String>,
    /// `AgentContainerName`: the agent's container in `task_definition_arn`.
    pub agent_container_name: Option<String>,
    /// `EfsVolumes`, mounted into the agent container.
    pub efs_volumes: Vec<EfsVolume>,
    /// `BindMounts` (EC2 only), mounted into the agent container.
    pub bind_mounts: Vec<BindMount>,
    /// `RepositoryCredentialsArn`: the Secrets Manager secret of a private registry.
    pub repository_credentials_arn: Option<String>,
    /// `StopTimeoutSeconds`, 2 to 120.
    pub stop_timeout_seconds: Option<u32>,
    /// `Ulimits` of the agent container.
    pub ulimits: Vec<Ulimit>,
    /// `InitProcessEnabled`.
    pub init_process_enabled: bool,
    /// `SharedMemoryMiB` (EC2 only).
    pub shared_memory_mib: Option<u32>,
    /// `HealthCheck` of the agent container.
    pub health_check: Option<HealthCheck>,
    /// `PlatformVersion` (Fargate only), a RunTask parameter.
    pub platform_version: Option<String>,
    /// `LogOptions`, in the order given.
    pub log_options: Vec<(String, String)>,
    /// `Sidecars`: extra containers beside the agent.
    pub sidecars: Vec<Sidecar>,
    /// `ReuseIdleMinutes` and `ReuseMaxJobs`: warm starts, when on.
    pub reuse: Option<Reuse>,
    /// `WarmAgents` and `WarmSchedule`: idle agents kept ready (not part of [`Self::hash`]).
    pub warm: Warm,
    /// `PlacementStrategy`: sent on RunTask onto EC2 capacity (capacity providers).
    pub placement_strategy: Vec<super::placement::Strategy>,
    /// `PlacementConstraints`: likewise.
    pub placement_constraints: Vec<super::placement::Constraint>,
    /// [`profile_hash`] of the properties this profile was parsed from.
    pub hash: String,
}

/// Warm starts (`ReuseIdleMinutes` above 0): an agent stays after its job completes and takes
/// the next job of the same elastic profile, cluster profile and environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reuse {
    /// How long an agent may wait idle for its next job.
    pub idle: std::time::Duration,
    /// How many jobs one agent runs at most.
    pub max_jobs: u32,
}

/// Warm agents (`WarmAgents` above 0): idle agents kept ready for the next jobs of the same
/// elastic profile, cluster profile and environment, `WarmSchedule` saying when.
#[derive(Debug, Clone, Default)]
pub struct Warm {
    /// How many.
    pub agents: super::warm_agents::WarmAgents,
    /// When.
    pub schedule: super::warm_schedule::WarmSchedule,
    /// `WarmLaunchType`: where warm agents run (`Fargate` or `FargateSpot`); `None`, the
    /// cluster profile's `LaunchType`.
    pub launch_type: Option<super::basics::LaunchType>,
}

impl Warm {
    /// Whether the profile keeps warm agents at all.
    pub fn is_on(&self) -> bool {
        self.agents != super::warm_agents::WarmAgents::Off
    }
}

impl ElasticProfile {
    /// Parses and validates an elastic agent profile.
    ///
    /// # Errors
    /// Every problem found, one [`FieldError`] each, keyed by the property.
    pub fn parse(props: &Properties) -> Result<ElasticProfile, Vec<FieldError>> {
        let mut f = Fields::new(props, ProfileKind::Elastic);
        let image = f.required("Image", |v| {
            syntax::check_image(v).map_err(|why| format!("Image {} is not a Docker image reference: {why}.", quote(v)))
        });
        let cpu = f.number("Cpu", 2..=16384, 1024);
        let memory = f.number("Memory", 6..=122_880, 2048);
        let memory_reservation = f.optional_number("MemoryReservation", 6..=122_880);
        if let Some(reservation) = memory_reservation.filter(|r| *r > memory && !f.has_error("Memory")) {
            let message = format!("MemoryReservation ({reservation} MiB) must not be more than Memory ({memory} MiB).");
            f.error("MemoryReservation", message);
        }
        let command = f.lines("Command");
        let environment = f.key_values("Environment", &ENV_VARIABLES);
        let secrets = f.key_values("Secrets", &SECRETS);
        for (name, _) in secrets.iter().filter(|(name, _)| environment.iter().any(|(env, _)| env == name)) {
            f.error("Secrets", format!("{name} is set both in Environment and in Secrets; keep one."));
        }
        let task_role_arn = f.string("TaskRoleArn", |v| check_role("TaskRoleArn", v));
        let execution_role_arn = f.string("ExecutionRoleArn", |v| check_role("ExecutionRoleArn", v));
        let operating_system_family = f.choice("OperatingSystemFamily", OPERATING_SYSTEM_FAMILIES);
        let cpu_architecture = f.choice("CpuArchitecture", CPU_ARCHITECTURES);
        if cpu_architecture == Some("ARM64") && operating_system_family.is_some_and(|os| os != "LINUX") {
            f.error("CpuArchitecture", "ARM64 is only available with OperatingSystemFamily LINUX.");
        }
        let (placement_strategy, placement_constraints) = super::placement::read(&mut f);
        let profile = ElasticProfile {
            image: image.unwrap_or_default(),
            cpu,
            memory,
            memory_reservation,
            command,
            environment,
            secrets,
            task_role_arn,
            execution_role_arn,
            operating_system_family: operating_system_family.unwrap_or("LINUX").to_string(),
            cpu_architecture: cpu_architecture.unwrap_or("X86_64").to_string(),
            ephemeral_storage_gib: f.optional_number("EphemeralStorageGiB", 21..=200),
            privileged: f.boolean("Privileged", false),
            mount_docker_socket: f.boolean("MountDockerSocket", false),
            subnet_ids: f.id_list("SubnetIds", "subnet", "subnet id", 16),
            security_group_ids: f.id_list("SecurityGroupIds", "sg", "security group id", 5),
            tags: f.key_values("Tags", &TAGS),
            enable_execute_command: f.boolean("EnableExecuteCommand", false),
            task_definition_arn: f.string("TaskDefinitionArn", check_task_definition),
            agent_container_name: f.string("AgentContainerName", check_container_name),
            efs_volumes: task_parts::efs_volumes(&mut f),
            bind_mounts: task_parts::bind_mounts(&mut f),
            repository_credentials_arn: f.string("RepositoryCredentialsArn", check_registry_secret),
            stop_timeout_seconds: f.optional_number("StopTimeoutSeconds", 2..=120),
            ulimits: task_parts::ulimits(&mut f),
            init_process_enabled: f.boolean("InitProcessEnabled", false),
            shared_memory_mib: f.optional_number("SharedMemoryMiB", 1..=122_880),
            health_check: task_parts::health_check(&mut f),
            platform_version: f.string("PlatformVersion", check_platform_version),
            log_options: task_parts::log_options(&mut f),
            sidecars: task_parts::sidecars(&mut f, AGENT_CONTAINER),
            reuse: reuse(&mut f),
            warm: warm(&mut f),
            placement_strategy,
            placement_constraints,
            hash: profile_hash(props),
        };
        task_parts::check_log_options(&mut f, &profile.log_options, profile.firelens().is_some());
        check_task_definition_use(&mut f, &profile);
        check_task_parts(&mut f, &profile);
        f.finish(profile)
    }

    /// [`profile_hash`] of the properties this profile was parsed from.
    pub fn hash(&self) -> String {
        self.hash.clone()
    }

    /// The FireLens router's type (`fluentbit`, `fluentd`), when a sidecar is one.
    pub fn firelens(&self) -> Option<&str> {
        self.sidecars.iter().find_map(|s| s.firelens.as_deref())
    }

    /// CPU units and memory (MiB) left for the agent container once the sidecars took theirs;
    /// `None` when they take all of it (validation refuses such a profile).
    pub fn agent_share(&self) -> Option<(u32, u32)> {
        let cpu: u32 = self.sidecars.iter().map(|s| s.cpu).sum();
        let memory: u32 = self.sidecars.iter().map(|s| s.memory).sum();
        Some((self.cpu.checked_sub(cpu)?, self.memory.checked_sub(memory).filter(|m| *m >= MIN_AGENT_MEMORY)?))
    }
}

/// The least memory (MiB) the sidecars must leave the GoCD agent (a JVM).
pub const MIN_AGENT_MEMORY: u32 = 256;

/// What depends on `TaskDefinitionArn`: the agent container name needs it; secrets, privileged
/// mode and the Docker socket cannot be added to an existing task definition; secrets need an
/// execution role otherwise.
fn check_task_definition_use(f: &mut Fields<'_>, profile: &ElasticProfile) {
    let given = f.is_set("TaskDefinitionArn");
    if !given && f.is_set("AgentContainerName") {
        f.error("AgentContainerName", "AgentContainerName only applies when TaskDefinitionArn is set.");
    }
    if !given && f.is_set("Secrets") && !f.is_set("ExecutionRoleArn") {
        f.error("Secrets", "Secrets need ExecutionRoleArn: ECS reads them with the execution role.");
    }
    if !given && profile.enable_execute_command && !f.is_set("TaskRoleArn") {
        f.error(
            "EnableExecuteCommand",
            "ECS Exec needs TaskRoleArn: the task role must allow the ssmmessages calls Exec makes.",
        );
    }
    if given {
        let conflicts = [
            ("Secrets", f.is_set("Secrets")),
            ("Privileged", profile.privileged),
            ("MountDockerSocket", profile.mount_docker_socket),
            ("EfsVolumes", f.is_set("EfsVolumes")),
            ("BindMounts", f.is_set("BindMounts")),
            ("RepositoryCredentialsArn", f.is_set("RepositoryCredentialsArn")),
            ("StopTimeoutSeconds", f.is_set("StopTimeoutSeconds")),
            ("Ulimits", f.is_set("Ulimits")),
            ("InitProcessEnabled", profile.init_process_enabled),
            ("SharedMemoryMiB", f.is_set("SharedMemoryMiB")),
            ("HealthCheck", f.is_set("HealthCheck")),
            ("LogOptions", f.is_set("LogOptions")),
            ("Sidecars", f.is_set("Sidecars")),
        ];
        for (key, _) in conflicts.into_iter().filter(|(_, set)| *set) {
            let message = format!(
                "{key} cannot be added to an existing task definition; set it in the task definition named by TaskDefinitionArn instead."
            );
            f.error(key, message);
        }
    }
}

/// `WarmAgents` (a number or `auto`; 0 or empty = off) and `WarmSchedule` (empty = always).
fn warm(f: &mut Fields<'_>) -> Warm {
    let agents = f.raw("WarmAgents").map(super::warm_agents::WarmAgents::parse);
    let schedule = f.raw("WarmSchedule").map(super::warm_schedule::WarmSchedule::parse);
    let mut warm = Warm::default();
    match agents {
        Some(Ok(agents)) => warm.agents = agents,
        Some(Err(e)) => f.error("WarmAgents", e.to_string()),
        None => {}
    }
    match schedule {
        Some(Ok(schedule)) => warm.schedule = schedule,
        Some(Err(e)) => f.error("WarmSchedule", e.to_string()),
        None => {}
    }
    if !warm.is_on() && f.is_set("WarmSchedule") {
        f.error("WarmSchedule", "WarmSchedule needs WarmAgents above 0 (or auto): no agents are kept warm without it.");
    }
    match f.raw("WarmLaunchType").map(super::warm_agents::parse_launch_type) {
        Some(Ok(launch_type)) => warm.launch_type = launch_type,
        Some(Err(e)) => f.error("WarmLaunchType", e.to_string()),
        None => {}
    }
    if !warm.is_on() && f.is_set("WarmLaunchType") {
        f.error(
            "WarmLaunchType",
            "WarmLaunchType needs WarmAgents above 0 (or auto): no agents are kept warm without it.",
        );
    }
    let windows = f.raw("OperatingSystemFamily").is_some_and(|os| os != "LINUX");
    if windows && warm.launch_type == Some(super::basics::LaunchType::FargateSpot) {
        f.error(
            "WarmLaunchType",
            "WarmLaunchType FARGATE_SPOT: Windows tasks cannot run on Fargate Spot; use FARGATE.",
        );
    }
    warm
}

/// `ReuseIdleMinutes` (0 to 120, 0 = off) and `ReuseMaxJobs` (1 to 1000, default 10).
fn reuse(f: &mut Fields<'_>) -> Option<Reuse> {
    let minutes = f.number("ReuseIdleMinutes", 0..=120, 0);
    let max_jobs = f.number("ReuseMaxJobs", 1..=1000, 10);
    if minutes == 0 && f.is_set("ReuseMaxJobs") {
        f.error("ReuseMaxJobs", "ReuseMaxJobs needs ReuseIdleMinutes above 0: agents are not reused without it.");
    }
    (minutes > 0).then(|| Reuse { idle: std::time::Duration::from_secs(u64::from(minutes) * 60), max_jobs })
}

/// What the new task parts need of the rest of the profile: Linux for Linux-only
/// container settings, a task role for EFS IAM authorization, an execution role for registry
/// credentials, room for the agent beside the sidecars.
fn check_task_parts(f: &mut Fields<'_>, profile: &ElasticProfile) {
    if profile.task_definition_arn.is_some() {
        return;
    }
    if profile.operating_system_family != "LINUX" {
        let linux_only = [
            ("EfsVolumes", !profile.efs_volumes.is_empty()),
            ("Ulimits", !profile.ulimits.is_empty()),
            ("InitProcessEnabled", profile.init_process_enabled),
            ("SharedMemoryMiB", profile.shared_memory_mib.is_some()),
        ];
        for (key, _) in linux_only.into_iter().filter(|(_, set)| *set) {
            let message = format!(
                "{key} only applies to Linux containers; OperatingSystemFamily is {}.",
                profile.operating_system_family
            );
            f.error(key, message);
        }
    }
    if profile.efs_volumes.iter().any(|v| v.iam) && profile.task_role_arn.is_none() {
        f.error(
            "EfsVolumes",
            "EFS volumes with iam mount as the task role: set TaskRoleArn to a role allowed to mount them.",
        );
    }
    if profile.repository_credentials_arn.is_some() && profile.execution_role_arn.is_none() {
        f.error(
            "RepositoryCredentialsArn",
            "RepositoryCredentialsArn needs ExecutionRoleArn: ECS reads the registry credentials with the execution role.",
        );
    }
    if let Some(shm) = profile.shared_memory_mib.filter(|shm| *shm > profile.memory) {
        f.error(
            "SharedMemoryMiB",
            format!("SharedMemoryMiB ({shm}) must not be more than Memory ({} MiB).", profile.memory),
        );
    }
    if !profile.sidecars.is_empty() && !f.has_error("Sidecars") {
        let cpu: u32 = profile.sidecars.iter().map(|s| s.cpu).sum();
        let memory: u32 = profile.sidecars.iter().map(|s| s.memory).sum();
        if cpu > profile.cpu {
            f.error(
                "Sidecars",
                format!("The sidecars ask for {cpu} CPU units, more than the task's Cpu ({}).", profile.cpu),
            );
        }
        if memory + MIN_AGENT_MEMORY > profile.memory {
            f.error(
                "Sidecars",
                format!(
                    "The sidecars ask for {memory} MiB of the task's Memory ({} MiB); leave the GoCD agent at least {MIN_AGENT_MEMORY} MiB.",
                    profile.memory
                ),
            );
        }
        if let Some((_, agent_memory)) = profile.agent_share() {
            if let Some(reservation) = profile.memory_reservation.filter(|r| *r > agent_memory) {
                f.error(
                    "MemoryReservation",
                    format!("MemoryReservation ({reservation} MiB) must not be more than what the sidecars leave the agent ({agent_memory} MiB)."),
                );
            }
        }
    }
}

fn check_registry_secret(v: &str) -> Result<(), String> {
    if syntax::parse_arn(v, "secretsmanager", false)
        .is_some_and(|arn| arn.resource.strip_prefix("secret:").is_some_and(|r| !r.is_empty()))
    {
        Ok(())
    } else {
        Err(format!(
            "RepositoryCredentialsArn {} is not a Secrets Manager secret ARN: it must look like arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/registry-AbCdEf.",
            quote(v)
        ))
    }
}

fn check_platform_version(v: &str) -> Result<(), String> {
    let numbered = v.split('.').count() == 3
        && v.split('.').all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()));
    if v == "LATEST" || numbered {
        Ok(())
    } else {
        Err(format!("PlatformVersion must be LATEST or a version like 1.4.0; {} is not.", quote(v)))
    }
}

fn check_role(key: &str, v: &str) -> Result<(), String> {
    if syntax::is_role_arn(v) {
        Ok(())
    } else {
        Err(format!(
            "{key} {} is not an IAM role ARN: it must look like arn:aws:iam::123456789012:role/gocd-build.",
            quote(v)
        ))
    }
}

fn check_task_definition(v: &str) -> Result<(), String> {
    if syntax::is_task_definition(v) {
        Ok(())
    } else {
        Err(format!(
            "TaskDefinitionArn {} is not a task definition: give its ARN (arn:aws:ecs:us-east-1:123456789012:task-definition/gocd-agent:3), family:revision or family.",
            quote(v)
        ))
    }
}

fn check_container_name(v: &str) -> Result<(), String> {
    if syntax::is_ecs_name(v) {
        Ok(())
    } else {
        Err(format!(
            "AgentContainerName {} is not a container name: use 1 to 255 letters, digits, '-' and '_'.",
            quote(v)
        ))
    }
}
