//! The port's task definition calls: DescribeTaskDefinition (a family of ours, or one an
//! elastic profile names, as plain [`Contents`]), RegisterTaskDefinition (from a
//! [`RegisterRequest`] the engine decided; the profile's task keys become SDK container parts in
//! `task_definition_parts`), and the sweep's ListTaskDefinitionFamilies, ListTaskDefinitions,
//! DescribeTaskDefinition for tags and DeregisterTaskDefinition — each through the account's
//! budget. Which revision to reuse, register or remove is the engine's
//! (`cluster::task_definition`, `cluster::cleanup::task_definitions`).

use std::collections::HashMap;

use aws_sdk_ecs::types::{
    ContainerDefinition, CpuArchitecture, EphemeralStorage, HostVolumeProperties, KeyValuePair, MountPoint,
    NetworkMode as EcsNetworkMode, OsFamily, RuntimePlatform, Secret, Tag, TaskDefinition, TaskDefinitionFamilyStatus,
    TaskDefinitionField, TaskDefinitionStatus, Volume,
};

use super::capacity_providers::Compatibility;
use super::status::ResourceStatus;
use super::{AwsClients, AwsError, Failure};
use crate::settings::task_parts::is_sensitive_host_path;
use crate::settings::{ClusterProfile, ElasticProfile, AGENT_CONTAINER};

/// A task definition's network mode (`None` where one is asked for: ECS's `<default>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkMode {
    /// `awsvpc`.
    Awsvpc,
    /// `bridge`.
    Bridge,
}

/// A family's revision as DescribeTaskDefinition found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// Its ARN.
    pub arn: Option<String>,
    /// Whether it is ACTIVE.
    pub active: bool,
    /// Its tags.
    pub tags: HashMap<String, String>,
}

/// A task definition an elastic profile names, described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// Its ARN.
    pub arn: Option<String>,
    /// Its containers' names, in order.
    pub containers: Vec<String>,
    /// What it runs.
    pub contents: Contents,
}

/// What RegisterTaskDefinition sends, as the engine decided it; the agent container and the
/// sidecars come from the elastic profile's task keys.
#[derive(Debug, Clone)]
pub struct RegisterRequest<'a> {
    /// The family.
    pub family: &'a str,
    /// Its network mode (`None`: ECS's default).
    pub network_mode: Option<NetworkMode>,
    /// `requiresCompatibilities`.
    pub compatibilities: Vec<Compatibility>,
    /// Task-level CPU units and MiB (Fargate), else none.
    pub task_size: Option<(u32, u32)>,
    /// The agent container's CPU units and MiB (what the sidecars leave).
    pub agent_size: (u32, u32),
    /// The agent container's environment.
    pub environment: Vec<(String, String)>,
    /// Ephemeral storage in GiB (Fargate).
    pub ephemeral_storage_gib: Option<u32>,
    /// Mount the instance's Docker socket into the agent container (our EC2 instances).
    pub host_docker_socket: bool,
    /// The task definition's tags.
    pub tags: Vec<(String, String)>,
    /// The cluster profile (log group).
    pub cluster: &'a ClusterProfile,
    /// The elastic profile (image, command, secrets, roles, task keys).
    pub elastic: &'a ElasticProfile,
    /// The region (awslogs).
    pub region: &'a str,
}

/// What a task definition runs, as far as the cluster profile's allow-lists are concerned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    /// Every container's image, with its container's name.
    pub images: Vec<(String, String)>,
    /// `taskRoleArn`.
    pub task_role_arn: Option<String>,
    /// `executionRoleArn`.
    pub execution_role_arn: Option<String>,
    /// Every container's secrets' `valueFrom` (an ARN, or an SSM parameter name).
    pub secrets: Vec<String>,
    /// Names of the containers that run privileged.
    pub privileged: Vec<String>,
    /// Whether a volume mounts the host's Docker socket.
    pub docker_socket: bool,
    /// Every EFS file system a volume mounts.
    pub file_systems: Vec<String>,
    /// Host directories mounted that give control of the instance (system paths).
    pub sensitive_host_paths: Vec<String>,
    /// Its `requiresCompatibilities`, as registered (empty: none named, which ECS takes as EC2).
    pub requires_compatibilities: Vec<Compatibility>,
    /// What ECS validated it for (`compatibilities`; EC2 besides the ones required, on AWS).
    pub compatibilities: Vec<Compatibility>,
}

impl Contents {
    fn of(td: &TaskDefinition) -> Contents {
        let containers = td.container_definitions();
        let name = |c: &ContainerDefinition| c.name().unwrap_or("(unnamed)").to_string();
        Contents {
            images: containers.iter().map(|c| (name(c), c.image().unwrap_or_default().to_string())).collect(),
            task_role_arn: td.task_role_arn().map(str::to_string),
            execution_role_arn: td.execution_role_arn().map(str::to_string),
            secrets: containers
                .iter()
                .flat_map(|c| c.secrets().iter().map(|s| s.value_from().to_string()))
                .chain(
                    containers
                        .iter()
                        .filter_map(|c| c.repository_credentials().map(|r| r.credentials_parameter().to_string())),
                )
                .collect(),
            privileged: containers.iter().filter(|c| c.privileged() == Some(true)).map(name).collect(),
            docker_socket: td.volumes().iter().any(|v| {
                v.host().and_then(|h| h.source_path()).is_some_and(|p| p.trim_end_matches('/').ends_with("docker.sock"))
            }),
            file_systems: td
                .volumes()
                .iter()
                .filter_map(|v| v.efs_volume_configuration().map(|e| e.file_system_id().to_string()))
                .collect(),
            sensitive_host_paths: td
                .volumes()
                .iter()
                .filter_map(|v| v.host().and_then(|h| h.source_path()))
                .filter(|p| !p.trim_end_matches('/').ends_with("docker.sock") && is_sensitive_host_path(p))
                .map(str::to_string)
                .collect(),
            requires_compatibilities: td
                .requires_compatibilities()
                .iter()
                .map(|c| Compatibility::from_ecs(c.as_str()))
                .collect(),
            compatibilities: td.compatibilities().iter().map(|c| Compatibility::from_ecs(c.as_str())).collect(),
        }
    }
}

impl AwsClients {
    /// The family's latest revision with its tags; `None` when ECS has none (or cannot parse
    /// the name): an ordinary answer for a new elastic profile, not a failure.
    ///
    /// # Errors
    /// The failed DescribeTaskDefinition call.
    pub async fn describe_family(&self, family: &str) -> Result<Option<Revision>, AwsError> {
        let describe = self.ecs.describe_task_definition().task_definition(family).include(TaskDefinitionField::Tags);
        let absent = |e: &AwsError| e.failure == Failure::NotFound;
        match self.calls.call_unless("DescribeTaskDefinition", absent, || describe.clone().send()).await {
            Ok(out) => {
                let td = out.task_definition();
                Ok(Some(Revision {
                    arn: td.and_then(|td| td.task_definition_arn()).map(str::to_string),
                    active: td
                        .and_then(|td| td.status())
                        .is_some_and(|s| ResourceStatus::from(s) == ResourceStatus::Active),
                    tags: out
                        .tags()
                        .iter()
                        .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string())))
                        .collect(),
                }))
            }
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A task definition an elastic profile names; `None` when ECS answered without one.
    ///
    /// # Errors
    /// The failed DescribeTaskDefinition call.
    pub async fn describe_task_definition(&self, arn: &str) -> Result<Option<Described>, AwsError> {
        let out = self
            .calls
            .call("DescribeTaskDefinition", || self.ecs.describe_task_definition().task_definition(arn).send())
            .await?;
        Ok(out.task_definition().map(|td| Described {
            arn: td.task_definition_arn().map(str::to_string),
            containers: td.container_definitions().iter().filter_map(|c| c.name()).map(str::to_string).collect(),
            contents: Contents::of(td),
        }))
    }

    /// Registers a revision. Returns its ARN.
    ///
    /// # Errors
    /// The failed RegisterTaskDefinition call, a part the SDK refuses to build, or an answer
    /// without an ARN.
    pub async fn register_task_definition(&self, request: &RegisterRequest<'_>) -> Result<String, AwsError> {
        let elastic = request.elastic;
        let mut containers = vec![container(request)?];
        containers.extend(super::task_definition_parts::sidecars(request.cluster, elastic, request.region)?);
        let mut builder = self
            .ecs
            .register_task_definition()
            .family(request.family)
            .set_network_mode(request.network_mode.map(|m| match m {
                NetworkMode::Awsvpc => EcsNetworkMode::Awsvpc,
                NetworkMode::Bridge => EcsNetworkMode::Bridge,
            }))
            .set_requires_compatibilities(Some(
                request.compatibilities.iter().map(|c| aws_sdk_ecs::types::Compatibility::from(c.as_str())).collect(),
            ))
            .set_cpu(request.task_size.map(|(cpu, _)| cpu.to_string()))
            .set_memory(request.task_size.map(|(_, memory)| memory.to_string()))
            .runtime_platform(
                RuntimePlatform::builder()
                    .operating_system_family(OsFamily::from(elastic.operating_system_family.as_str()))
                    .cpu_architecture(CpuArchitecture::from(elastic.cpu_architecture.as_str()))
                    .build(),
            )
            .set_container_definitions(Some(containers))
            .set_task_role_arn(elastic.task_role_arn.clone())
            .set_execution_role_arn(elastic.execution_role_arn.clone());
        for (key, value) in &request.tags {
            builder = builder.tags(Tag::builder().key(key).value(value).build());
        }
        if let Some(gib) = request.ephemeral_storage_gib {
            builder = builder.ephemeral_storage(EphemeralStorage::builder().size_in_gib(gib as i32).build());
        }
        if request.host_docker_socket {
            builder = builder.volumes(
                Volume::builder()
                    .name("docker-socket")
                    .host(HostVolumeProperties::builder().source_path("/var/run/docker.sock").build())
                    .build(),
            );
        }
        for volume in super::task_definition_parts::volumes(elastic)? {
            builder = builder.volumes(volume);
        }
        let out = self.calls.call("RegisterTaskDefinition", || builder.clone().send()).await?;
        out.task_definition()
            .and_then(|td| td.task_definition_arn())
            .map(str::to_string)
            .ok_or_else(|| AwsError::in_answer("RegisterTaskDefinition", "AWS returned no task definition ARN"))
    }

    /// The ACTIVE task definition families whose names start with `prefix` (every page).
    ///
    /// # Errors
    /// The failed ListTaskDefinitionFamilies call.
    pub async fn list_families(&self, prefix: &str) -> Result<Vec<String>, AwsError> {
        let mut families = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let request = self
                .ecs
                .list_task_definition_families()
                .family_prefix(prefix)
                .status(TaskDefinitionFamilyStatus::Active)
                .set_next_token(next.take());
            let page = self.calls.call("ListTaskDefinitionFamilies", || request.clone().send()).await?;
            families.extend(page.families().iter().cloned());
            match page.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_string()),
                _ => return Ok(families),
            }
        }
    }

    /// The ARNs of up to 100 ACTIVE revisions of `family` (one page).
    ///
    /// # Errors
    /// The failed ListTaskDefinitions call.
    pub async fn list_revisions(&self, family: &str) -> Result<Vec<String>, AwsError> {
        let request = self
            .ecs
            .list_task_definitions()
            .family_prefix(family)
            .status(TaskDefinitionStatus::Active)
            .max_results(100);
        let out = self.calls.call("ListTaskDefinitions", || request.clone().send()).await?;
        Ok(out.task_definition_arns().to_vec())
    }

    /// The tags of one revision (DescribeTaskDefinition with tags).
    ///
    /// # Errors
    /// The failed call.
    pub async fn task_definition_tags(&self, arn: &str) -> Result<HashMap<String, String>, AwsError> {
        let describe = self.ecs.describe_task_definition().task_definition(arn).include(TaskDefinitionField::Tags);
        let out = self.calls.call("DescribeTaskDefinition", || describe.clone().send()).await?;
        Ok(out
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string())))
            .collect())
    }

    /// Deregisters one revision.
    ///
    /// # Errors
    /// The failed DeregisterTaskDefinition call.
    pub async fn deregister_task_definition(&self, arn: &str) -> Result<(), AwsError> {
        let deregister = self.ecs.deregister_task_definition().task_definition(arn);
        self.calls.call("DeregisterTaskDefinition", || deregister.clone().send()).await.map(|_| ())
    }

    /// Deletes one revision for good (it must be INACTIVE: deregistered first). Only `try`
    /// deletes: the engine's revisions stay, deregistered, as ECS keeps them.
    ///
    /// # Errors
    /// The failed DeleteTaskDefinitions call, or a `failures` entry for the revision.
    pub async fn delete_task_definition(&self, arn: &str) -> Result<(), AwsError> {
        let delete = self.ecs.delete_task_definitions().task_definitions(arn);
        let out = self.calls.call("DeleteTaskDefinitions", || delete.clone().send()).await?;
        match out.failures().first() {
            None => Ok(()),
            Some(f) => Err(AwsError::new(
                "DeleteTaskDefinitions",
                Failure::Refused,
                format!("{}: {}", f.reason().unwrap_or("refused"), f.detail().unwrap_or("")),
            )),
        }
    }
}

/// The agent container.
fn container(request: &RegisterRequest<'_>) -> Result<ContainerDefinition, AwsError> {
    let (cluster, elastic, region) = (request.cluster, request.elastic, request.region);
    let (cpu, memory) = request.agent_size;
    let mut def = ContainerDefinition::builder()
        .name(AGENT_CONTAINER)
        .image(&elastic.image)
        // The GoCD agent: the task ends when it does, whatever the sidecars do.
        .essential(true)
        // Container-level cpu and memory always (moto needs them; AWS accepts them).
        .cpu(cpu as i32)
        .memory(memory as i32)
        .set_memory_reservation(elastic.memory_reservation.map(|m| m as i32))
        .set_command((!elastic.command.is_empty()).then(|| elastic.command.clone()))
        .set_environment(Some(
            request.environment.iter().map(|(k, v)| KeyValuePair::builder().name(k).value(v).build()).collect(),
        ))
        .privileged(elastic.privileged);
    for (name, arn) in &elastic.secrets {
        let secret = Secret::builder()
            .name(name)
            .value_from(arn)
            .build()
            .map_err(|e| AwsError::in_answer("RegisterTaskDefinition", format!("secret {name}: {e}")))?;
        def = def.secrets(secret);
    }
    def = def.set_log_configuration(super::task_definition_parts::agent_logs(cluster, elastic, region)?);
    if request.host_docker_socket {
        def = def.mount_points(
            MountPoint::builder().source_volume("docker-socket").container_path("/var/run/docker.sock").build(),
        );
    }
    for mount in super::task_definition_parts::mount_points(elastic) {
        def = def.mount_points(mount);
    }
    Ok(super::task_definition_parts::agent(def, elastic)?.build())
}
