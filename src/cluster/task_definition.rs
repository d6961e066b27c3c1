//! Task definitions: one family per (cluster profile, elastic profile), registered once and
//! reused — also after a restart, when DescribeTaskDefinition finds the family again. Nothing
//! per agent goes here: per-agent data travels as RunTask overrides (DESIGN.md §1).

use aws_sdk_ecs::types::{
    ContainerDefinition, CpuArchitecture, EphemeralStorage, HostVolumeProperties, KeyValuePair, MountPoint,
    NetworkMode, OsFamily, RuntimePlatform, Secret, Tag, TaskDefinitionField, Volume,
};

mod parts;

use super::identity::{short_hash, TAG_CLUSTER_PROFILE, TAG_SERVER_ID};
use super::providers::{Compatibility, ProviderKinds};
use crate::aws::{AwsClients, AwsError};
use crate::settings::task_parts::is_sensitive_host_path;
use crate::settings::{ClusterProfile, ElasticProfile, LaunchType};

/// The name of the agent container in task definitions we register.
pub use crate::settings::AGENT_CONTAINER;

/// The task definition a launch uses and which of its containers is the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDefinitionRef {
    /// ARN (or family:revision).
    pub arn: String,
    /// The GoCD agent container.
    pub agent_container: String,
    /// What it runs, for a task definition an elastic profile names (`TaskDefinitionArn`): the
    /// allow-lists check it (`guardrails`). `None` for ours, built from the checked profile.
    pub given: Option<std::sync::Arc<Contents>>,
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
    fn of(td: &aws_sdk_ecs::types::TaskDefinition) -> Contents {
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

    /// What it may run on: what it requires and what ECS validated it for; EC2 when it names
    /// neither (ECS's default).
    pub fn runs_on(&self) -> Vec<Compatibility> {
        let mut out: Vec<Compatibility> = self.requires_compatibilities.clone();
        out.extend(self.compatibilities.iter().filter(|c| !self.requires_compatibilities.contains(c)).cloned());
        if out.is_empty() {
            out.push(Compatibility::Ec2);
        }
        out
    }
}

/// What the task definitions must be valid for: EC2 with `LaunchType` EC2; Fargate; with a
/// `CapacityProviderStrategy`, what its providers' kinds need (EC2 for an Auto Scaling group's,
/// MANAGED_INSTANCES for ECS Managed Instances), or Fargate and EC2 while the kinds are unknown
/// and a provider may be an Auto Scaling group's.
fn compatibilities(cluster: &ClusterProfile, kinds: Option<&ProviderKinds>) -> Vec<Compatibility> {
    match (&cluster.capacity_providers, cluster.launch_type) {
        (Some(_), _) if kinds.is_some() => kinds.map(ProviderKinds::compatibilities).unwrap_or_default(),
        (Some(strategy), _) if strategy.may_use_ec2() => vec![Compatibility::Fargate, Compatibility::Ec2],
        (_, LaunchType::Ec2) => vec![Compatibility::Ec2],
        _ => vec![Compatibility::Fargate],
    }
}

/// The family for this pair of profiles: ours, and different whenever anything that goes into
/// the task definition differs (the compatibilities too: `fargate`, `ec2`, `fargate+ec2`,
/// `fargate+managed_instances`, ...).
pub fn family(
    cluster_key: &str,
    cluster: &ClusterProfile,
    elastic: &ElasticProfile,
    region: &str,
    kinds: Option<&ProviderKinds>,
) -> String {
    let compat: Vec<String> = compatibilities(cluster, kinds).iter().map(|c| c.as_str().to_ascii_lowercase()).collect();
    let compat = compat.join("+");
    // The environment every agent of the pair shares lives in the task definition (RunTask's
    // overrides are limited to 8,192 characters), so a change of it is a new family.
    let environment: Vec<String> =
        shared_environment(cluster, elastic).iter().map(|(k, v)| format!("{k}={v}")).collect();
    let environment = environment.join("\n");
    let hash = short_hash(&[&elastic.hash, &compat, cluster.log_group.as_deref().unwrap_or(""), region, &environment]);
    format!("gocd-{cluster_key}-{hash}")
}

/// The environment every agent of a (cluster profile, elastic profile) pair gets: the cluster
/// profile's variables, then the elastic profile's, which win on a clash; in the order first set.
pub fn shared_environment(cluster: &ClusterProfile, elastic: &ElasticProfile) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, v) in cluster.environment_variables.iter().chain(elastic.environment.iter()) {
        match env.iter_mut().find(|(name, _)| name == k) {
            Some(slot) => slot.1 = v.clone(),
            None => env.push((k.clone(), v.clone())),
        }
    }
    env
}

/// Finds the family's active revision, or registers it.
///
/// # Errors
/// The failed DescribeTaskDefinition or RegisterTaskDefinition call.
pub async fn find_or_register(
    aws: &AwsClients,
    family: &str,
    cluster: &ClusterProfile,
    kinds: Option<&ProviderKinds>,
    elastic: &ElasticProfile,
    server_id: &str,
    cluster_key: &str,
) -> Result<TaskDefinitionRef, AwsError> {
    let describe = aws.ecs.describe_task_definition().task_definition(family).include(TaskDefinitionField::Tags);
    // A family not registered yet is the usual answer for a new elastic profile, not a failure.
    let existing = aws.calls.call_unless("DescribeTaskDefinition", is_absent, || describe.clone().send()).await;
    match existing {
        Ok(out) => {
            // Only a revision this server registered: another GoCD server on the same cluster has
            // the same family names, and may deregister its revisions when it stops using them.
            let ours = out.tags().iter().any(|t| t.key() == Some(TAG_SERVER_ID) && t.value() == Some(server_id));
            if let Some(td) =
                out.task_definition().filter(|td| ours && td.status().is_some_and(|s| s.as_str() == "ACTIVE"))
            {
                tracing::info!(family, "reusing task definition registered before");
                return Ok(TaskDefinitionRef {
                    arn: td.task_definition_arn().unwrap_or(family).to_string(),
                    agent_container: AGENT_CONTAINER.to_string(),
                    given: None,
                });
            }
        }
        Err(e) if is_absent(&e) => {}
        Err(e) if e.transient() => return Err(e),
        Err(e) => tracing::debug!(family, error = %e, "no task definition yet"),
    }
    register(aws, family, cluster, kinds, elastic, server_id, cluster_key).await
}

/// ECS has no revision of the family (or cannot parse its name): the port's `NotFound`.
fn is_absent(e: &AwsError) -> bool {
    e.failure == crate::aws::Failure::NotFound
}

/// Looks up a task definition the elastic profile names, its agent container, and what it runs
/// (every image, its roles, secrets, privileged containers) for the allow-lists.
///
/// # Errors
/// The failed DescribeTaskDefinition call, or a task definition without that container.
pub async fn describe_given(
    aws: &AwsClients,
    arn: &str,
    container: Option<&str>,
) -> Result<TaskDefinitionRef, AwsError> {
    let out = aws
        .calls
        .call("DescribeTaskDefinition", || aws.ecs.describe_task_definition().task_definition(arn).send())
        .await?;
    let td = out
        .task_definition()
        .ok_or_else(|| AwsError::in_answer("DescribeTaskDefinition", format!("task definition {arn} was not found")))?;
    let names: Vec<&str> = td.container_definitions().iter().filter_map(|c| c.name()).collect();
    let agent_container = match container {
        Some(wanted) if names.contains(&wanted) => wanted.to_string(),
        Some(wanted) => {
            return Err(AwsError::in_answer(
                "DescribeTaskDefinition",
                format!(
                "task definition {arn} has no container named {wanted:?} (it has {names:?}): fix AgentContainerName"
            ),
            ))
        }
        None => names.first().map(|n| n.to_string()).ok_or_else(|| {
            AwsError::in_answer("DescribeTaskDefinition", format!("task definition {arn} has no containers"))
        })?,
    };
    Ok(TaskDefinitionRef {
        arn: td.task_definition_arn().unwrap_or(arn).to_string(),
        agent_container,
        given: Some(std::sync::Arc::new(Contents::of(td))),
    })
}

async fn register(
    aws: &AwsClients,
    family: &str,
    cluster: &ClusterProfile,
    kinds: Option<&ProviderKinds>,
    elastic: &ElasticProfile,
    server_id: &str,
    cluster_key: &str,
) -> Result<TaskDefinitionRef, AwsError> {
    let fargate = cluster.launch_type != LaunchType::Ec2;
    let mut request = aws
        .ecs
        .register_task_definition()
        .family(family)
        .set_network_mode(network_mode(cluster, elastic))
        // An Auto Scaling group's capacity provider (or a cluster default that may name one)
        // places the task on EC2, ECS Managed Instances on its own instances: awsvpc task
        // definitions valid for each.
        .set_requires_compatibilities(Some(
            compatibilities(cluster, kinds)
                .iter()
                .map(|c| aws_sdk_ecs::types::Compatibility::from(c.as_str()))
                .collect(),
        ))
        // Fargate needs task-level sizes; on EC2 the container's cpu, memory and memoryReservation
        // are what ECS reserves on the instance (a task-level memory would reserve the hard limit).
        .set_cpu(fargate.then(|| elastic.cpu.to_string()))
        .set_memory(fargate.then(|| elastic.memory.to_string()))
        .runtime_platform(
            RuntimePlatform::builder()
                .operating_system_family(OsFamily::from(elastic.operating_system_family.as_str()))
                .cpu_architecture(CpuArchitecture::from(elastic.cpu_architecture.as_str()))
                .build(),
        )
        .set_container_definitions(Some(containers(cluster, elastic, &aws.region)?))
        .set_task_role_arn(elastic.task_role_arn.clone())
        .set_execution_role_arn(elastic.execution_role_arn.clone())
        .tags(Tag::builder().key(TAG_SERVER_ID).value(server_id).build())
        .tags(Tag::builder().key(TAG_CLUSTER_PROFILE).value(cluster_key).build());
    if let Some(gib) = elastic.ephemeral_storage_gib.filter(|_| fargate) {
        request = request.ephemeral_storage(EphemeralStorage::builder().size_in_gib(gib as i32).build());
    }
    if elastic.mount_docker_socket && !fargate {
        request = request.volumes(
            Volume::builder()
                .name("docker-socket")
                .host(HostVolumeProperties::builder().source_path("/var/run/docker.sock").build())
                .build(),
        );
    }
    for volume in parts::volumes(elastic)? {
        request = request.volumes(volume);
    }
    let out = aws.calls.call("RegisterTaskDefinition", || request.clone().send()).await?;
    let arn = out
        .task_definition()
        .and_then(|td| td.task_definition_arn())
        .ok_or_else(|| AwsError::in_answer("RegisterTaskDefinition", "AWS returned no task definition ARN"))?;
    tracing::info!(family, arn, "registered task definition");
    Ok(TaskDefinitionRef { arn: arn.to_string(), agent_container: AGENT_CONTAINER.to_string(), given: None })
}

/// Fargate and capacity providers: `awsvpc`. Our EC2 instances: Linux tasks share the
/// instance's network (`bridge`: no ENI per task, no awsvpc limits); Windows tasks get ECS's
/// `<default>` (NAT), which the API names by leaving the mode out: ECS refuses `bridge` for
/// Windows containers.
fn network_mode(cluster: &ClusterProfile, elastic: &ElasticProfile) -> Option<NetworkMode> {
    if cluster.launch_type != LaunchType::Ec2 {
        Some(NetworkMode::Awsvpc)
    } else if elastic.operating_system_family.starts_with("WINDOWS") {
        None
    } else {
        Some(NetworkMode::Bridge)
    }
}

/// The agent container first, then the sidecars.
fn containers(
    cluster: &ClusterProfile,
    elastic: &ElasticProfile,
    region: &str,
) -> Result<Vec<ContainerDefinition>, AwsError> {
    let mut all = vec![container(cluster, elastic, region)?];
    all.extend(parts::sidecars(cluster, elastic, region)?);
    Ok(all)
}

fn container(
    cluster: &ClusterProfile,
    elastic: &ElasticProfile,
    region: &str,
) -> Result<ContainerDefinition, AwsError> {
    // What the sidecars leave (validation keeps it positive).
    let (cpu, memory) = elastic.agent_share().unwrap_or((elastic.cpu, elastic.memory));
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
            shared_environment(cluster, elastic)
                .into_iter()
                .map(|(k, v)| KeyValuePair::builder().name(k).value(v).build())
                .collect(),
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
    def = def.set_log_configuration(parts::agent_logs(cluster, elastic, region)?);
    if elastic.mount_docker_socket && cluster.launch_type == LaunchType::Ec2 {
        def = def.mount_points(
            MountPoint::builder().source_volume("docker-socket").container_path("/var/run/docker.sock").build(),
        );
    }
    for mount in parts::mount_points(elastic) {
        def = def.mount_points(mount);
    }
    Ok(parts::agent(def, elastic)?.build())
}

#[cfg(test)]
mod compat_tests {
    use super::*;
    use crate::settings::Properties;

    fn cluster(extra: &[(&str, &str)]) -> ClusterProfile {
        let mut p: Properties =
            [("ClusterName", "ci")].iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect();
        p.extend(extra.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))));
        ClusterProfile::parse(&p).expect("valid")
    }

    #[test]
    fn task_definitions_suit_ec2_too_when_a_provider_may_be_an_auto_scaling_group() {
        assert_eq!(compatibilities(&cluster(&[]), None), [Compatibility::Fargate]);
        let fargates = cluster(&[("CapacityProviderStrategy", "FARGATE\nFARGATE_SPOT:2")]);
        assert_eq!(compatibilities(&fargates, None), [Compatibility::Fargate]);
        let asg = cluster(&[("CapacityProviderStrategy", "FARGATE\nmy-asg")]);
        assert_eq!(compatibilities(&asg, None), [Compatibility::Fargate, Compatibility::Ec2]);
        let default = cluster(&[("CapacityProviderStrategy", "default")]);
        assert_eq!(compatibilities(&default, None), [Compatibility::Fargate, Compatibility::Ec2]);
    }

    #[test]
    fn windows_tasks_on_our_instances_get_the_default_network_mode_not_bridge() {
        let elastic = |os: &str| {
            let props: crate::settings::Properties = [("Image", "gocd/agent"), ("OperatingSystemFamily", os)]
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect();
            ElasticProfile::parse(&props).expect("valid")
        };
        let ec2 = cluster(&[
            ("LaunchType", "EC2"),
            ("Ec2InstanceType", "c5.xlarge"),
            ("Ec2AmiId", "ami-0abcdef1234567890"),
            ("Ec2InstanceProfile", "ecsInstanceRole"),
        ]);
        let (linux, windows) = (elastic("LINUX"), elastic("WINDOWS_SERVER_2022_CORE"));
        assert_eq!(network_mode(&ec2, &linux), Some(NetworkMode::Bridge));
        assert_eq!(network_mode(&ec2, &windows), None, "ECS's <default> (NAT): the mode left out");
        assert_eq!(network_mode(&cluster(&[]), &windows), Some(NetworkMode::Awsvpc), "Fargate");
        let asg = cluster(&[("CapacityProviderStrategy", "my-asg")]);
        assert_eq!(network_mode(&asg, &linux), Some(NetworkMode::Awsvpc));
    }

    #[test]
    fn managed_instances_get_their_compatibility_and_their_own_family() {
        use crate::cluster::providers::{KnownProvider, ProviderKind};
        let profile = cluster(&[("CapacityProviderStrategy", "ci-mi")]);
        let kind = |kind| ProviderKinds {
            providers: vec![KnownProvider { name: "ci-mi".into(), kind, status: "ACTIVE".into() }],
        };
        let (mi, asg) = (kind(ProviderKind::ManagedInstances), kind(ProviderKind::AutoScaling));
        assert_eq!(compatibilities(&profile, Some(&mi)), [Compatibility::Fargate, Compatibility::ManagedInstances]);
        assert_eq!(compatibilities(&profile, Some(&asg)), [Compatibility::Fargate, Compatibility::Ec2]);
        let mut props: crate::settings::Properties = Default::default();
        props.insert("Image".into(), Some("gocd/agent".into()));
        let elastic = ElasticProfile::parse(&props).expect("valid");
        let family = |kinds| family("k", &profile, &elastic, "us-east-1", kinds);
        assert_ne!(family(Some(&mi)), family(Some(&asg)), "other compatibilities, another family");
        assert_eq!(family(Some(&asg)), family(None), "an ASG's family is the one used before kinds were learned");
    }
}
