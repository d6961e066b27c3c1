//! The parts of our task definition that come from the elastic profile's task keys:
//! the agent container's volumes, limits, health check and logs, and the sidecar containers.
//! Pure builders over the SDK's types, in the port; `register_task_definition` puts them together.

use aws_sdk_ecs::types::{
    ContainerDefinition, EfsAuthorizationConfig, EfsAuthorizationConfigIam, EfsTransitEncryption,
    EfsVolumeConfiguration, FirelensConfiguration, FirelensConfigurationType, HealthCheck, HostVolumeProperties,
    KeyValuePair, LinuxParameters, LogConfiguration, LogDriver, MountPoint, RepositoryCredentials, Ulimit, UlimitName,
    Volume,
};

use crate::aws::AwsError;
use crate::settings::task_parts::Sidecar;
use crate::settings::{ClusterProfile, ElasticProfile};

fn built<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> Result<T, AwsError> {
    r.map_err(|e| AwsError::in_answer("RegisterTaskDefinition", format!("{what}: {e}")))
}

/// The task's volumes: EFS file systems (`efs-1`, ...) and host directories (`bind-1`, ...), in
/// the profile's order.
pub(super) fn volumes(elastic: &ElasticProfile) -> Result<Vec<Volume>, AwsError> {
    let mut out = Vec::new();
    for (i, v) in elastic.efs_volumes.iter().enumerate() {
        let mut auth = EfsAuthorizationConfig::builder().set_access_point_id(v.access_point_id.clone());
        if v.iam {
            auth = auth.iam(EfsAuthorizationConfigIam::Enabled);
        }
        let auth = (v.iam || v.access_point_id.is_some()).then(|| auth.build());
        let efs = EfsVolumeConfiguration::builder()
            .file_system_id(&v.file_system_id)
            .set_root_directory(v.root_directory.clone())
            .transit_encryption(if v.transit_encryption {
                EfsTransitEncryption::Enabled
            } else {
                EfsTransitEncryption::Disabled
            })
            .set_authorization_config(auth);
        let efs = built("EFS volume", efs.build())?;
        out.push(Volume::builder().name(format!("efs-{}", i + 1)).efs_volume_configuration(efs).build());
    }
    for (i, b) in elastic.bind_mounts.iter().enumerate() {
        out.push(
            Volume::builder()
                .name(format!("bind-{}", i + 1))
                .host(HostVolumeProperties::builder().source_path(&b.host_path).build())
                .build(),
        );
    }
    Ok(out)
}

/// The agent container's mount points of [`volumes`].
pub(super) fn mount_points(elastic: &ElasticProfile) -> Vec<MountPoint> {
    let efs = elastic.efs_volumes.iter().enumerate().map(|(i, v)| {
        MountPoint::builder()
            .source_volume(format!("efs-{}", i + 1))
            .container_path(&v.container_path)
            .read_only(v.read_only)
            .build()
    });
    let bind = elastic.bind_mounts.iter().enumerate().map(|(i, b)| {
        MountPoint::builder()
            .source_volume(format!("bind-{}", i + 1))
            .container_path(&b.container_path)
            .read_only(b.read_only)
            .build()
    });
    efs.chain(bind).collect()
}

/// The agent container's settings of the task keys: limits, init, shared memory, stop timeout,
/// health check, registry credentials.
pub(super) fn agent(
    mut def: aws_sdk_ecs::types::builders::ContainerDefinitionBuilder,
    elastic: &ElasticProfile,
) -> Result<aws_sdk_ecs::types::builders::ContainerDefinitionBuilder, AwsError> {
    for u in &elastic.ulimits {
        let ulimit = Ulimit::builder()
            .name(UlimitName::from(u.name.as_str()))
            .soft_limit(u.soft as i32)
            .hard_limit(u.hard as i32)
            .build();
        def = def.ulimits(built("ulimit", ulimit)?);
    }
    if elastic.init_process_enabled || elastic.shared_memory_mib.is_some() {
        let mut linux = LinuxParameters::builder().set_shared_memory_size(elastic.shared_memory_mib.map(|m| m as i32));
        if elastic.init_process_enabled {
            linux = linux.init_process_enabled(true);
        }
        def = def.linux_parameters(linux.build());
    }
    def = def.set_stop_timeout(elastic.stop_timeout_seconds.map(|s| s as i32));
    if let Some(h) = &elastic.health_check {
        let check = HealthCheck::builder()
            .command("CMD-SHELL")
            .command(&h.command)
            .interval(h.interval as i32)
            .timeout(h.timeout as i32)
            .retries(h.retries as i32)
            .start_period(h.start_period as i32)
            .build();
        def = def.health_check(built("health check", check)?);
    }
    if let Some(creds) = repository_credentials(elastic, &elastic.image)? {
        def = def.repository_credentials(creds);
    }
    Ok(def)
}

/// `RepositoryCredentialsArn` for an image from the agent image's registry.
fn repository_credentials(elastic: &ElasticProfile, image: &str) -> Result<Option<RepositoryCredentials>, AwsError> {
    let Some(arn) = &elastic.repository_credentials_arn else {
        return Ok(None);
    };
    if registry(image) != registry(&elastic.image) {
        return Ok(None);
    }
    Ok(Some(built("repository credentials", RepositoryCredentials::builder().credentials_parameter(arn).build())?))
}

/// The registry host of an image reference (`docker.io` when none is named).
fn registry(image: &str) -> &str {
    match image.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => first,
        _ => "docker.io",
    }
}

/// The agent container's log configuration: FireLens when a sidecar routes the logs, else
/// awslogs to the cluster profile's `LogGroup` with the profile's options; none without either.
pub(super) fn agent_logs(
    cluster: &ClusterProfile,
    elastic: &ElasticProfile,
    region: &str,
) -> Result<Option<LogConfiguration>, AwsError> {
    if elastic.firelens().is_some() {
        let mut logs = LogConfiguration::builder().log_driver(LogDriver::Awsfirelens);
        for (k, v) in &elastic.log_options {
            logs = logs.options(k, v);
        }
        return Ok(Some(built("log configuration", logs.build())?));
    }
    awslogs(cluster, elastic, region, true)
}

/// awslogs to the cluster profile's `LogGroup` (the profile's options on the agent only).
fn awslogs(
    cluster: &ClusterProfile,
    elastic: &ElasticProfile,
    region: &str,
    with_options: bool,
) -> Result<Option<LogConfiguration>, AwsError> {
    let Some(group) = &cluster.log_group else {
        return Ok(None);
    };
    let mut logs = LogConfiguration::builder()
        .log_driver(LogDriver::Awslogs)
        .options("awslogs-group", group)
        .options("awslogs-region", region)
        .options("awslogs-stream-prefix", "gocd");
    if with_options {
        for (k, v) in &elastic.log_options {
            logs = logs.options(k, v);
        }
    }
    Ok(Some(built("log configuration", logs.build())?))
}

/// The sidecar containers, each with its own cpu and memory, logging beside the agent.
pub(super) fn sidecars(
    cluster: &ClusterProfile,
    elastic: &ElasticProfile,
    region: &str,
) -> Result<Vec<ContainerDefinition>, AwsError> {
    elastic.sidecars.iter().map(|s| sidecar(cluster, elastic, region, s)).collect()
}

fn sidecar(
    cluster: &ClusterProfile,
    elastic: &ElasticProfile,
    region: &str,
    s: &Sidecar,
) -> Result<ContainerDefinition, AwsError> {
    let mut def = ContainerDefinition::builder()
        .name(&s.name)
        .image(&s.image)
        .essential(s.essential)
        .cpu(s.cpu as i32)
        .memory(s.memory as i32)
        .set_command((!s.command.is_empty()).then(|| s.command.clone()))
        .set_environment(
            (!s.environment.is_empty())
                .then(|| s.environment.iter().map(|(k, v)| KeyValuePair::builder().name(k).value(v).build()).collect()),
        )
        .set_privileged(s.privileged.then_some(true))
        .set_log_configuration(awslogs(cluster, elastic, region, false)?);
    if let Some(kind) = &s.firelens {
        let firelens = FirelensConfiguration::builder().r#type(FirelensConfigurationType::from(kind.as_str())).build();
        def = def.firelens_configuration(built("FireLens configuration", firelens)?);
    }
    if let Some(creds) = repository_credentials(elastic, &s.image)? {
        def = def.repository_credentials(creds);
    }
    Ok(def.build())
}
