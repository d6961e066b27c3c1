//! Seeding moto with tasks as a previous plugin process would have left them, through moto's own
//! ECS API and the test's own clients (never through the counting proxy): one RunTask per task
//! with our `startedBy`, every tag of `docs/protocol.md` "What a task carries" (server id,
//! cluster-profile key, a distinct agent id `ea-<cluster key>-<job id>-<8 hex>` and job) and the
//! agent's overrides. The plugin adopts such tasks as its own on its next read of the cluster.

use std::sync::Arc;

use aws_config::SdkConfig;
use aws_sdk_ecs::types::{
    AssignPublicIp, AwsVpcConfiguration, Compatibility, ContainerDefinition, ContainerOverride, KeyValuePair,
    LaunchType, NetworkConfiguration, NetworkMode, Tag, TaskOverride,
};
use ecs_elastic_agent::cluster::base::identity::{self, TaskLabels};
use ecs_elastic_agent::protocol::types::JobIdentifier;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::world::moto::{self, aws_error_text};

/// The family of the seeded tasks' task definition.
const SEED_FAMILY: &str = "gocd-bench-seed";
/// RunTask calls in flight while seeding.
const SEED_CONCURRENCY: usize = 16;

/// One seeded task.
#[derive(Debug, Clone)]
pub struct Seeded {
    /// Its agent id.
    pub agent_id: String,
    /// The job it was "started" for.
    pub job: JobIdentifier,
    /// Its ARN.
    pub task_arn: String,
}

/// Whose tasks to seed, and where.
#[derive(Debug, Clone)]
pub struct Owner {
    /// GoCD's server id.
    pub server_id: String,
    /// The cluster profile's key (`identity::cluster_key`).
    pub cluster_key: ecs_elastic_agent::ids::ClusterKey,
    /// The ECS cluster.
    pub cluster: String,
}

impl Owner {
    /// The owner of a cluster profile without a role, in `region`.
    pub fn new(server_id: &str, region: &str, cluster: &str) -> Owner {
        Owner {
            server_id: server_id.into(),
            cluster_key: identity::cluster_key(moto::BASE_ACCOUNT, region, cluster, None),
            cluster: cluster.into(),
        }
    }
}

/// The job a seeded task serves.
pub fn job(job_id: i64) -> JobIdentifier {
    JobIdentifier {
        pipeline_name: "bench".into(),
        pipeline_label: "1".into(),
        pipeline_counter: 1,
        stage_name: "build".into(),
        stage_counter: "1".into(),
        job_name: format!("job-{job_id}"),
        job_id,
    }
}

/// Starts `n` RUNNING tasks of `owner` in moto (jobs `first_job_id..`), 16 RunTask calls at a time.
///
/// # Panics
/// When moto refuses a call.
pub async fn seed_tasks(cfg: &SdkConfig, owner: &Owner, first_job_id: i64, n: usize) -> Vec<Seeded> {
    let ecs = aws_sdk_ecs::Client::new(cfg);
    let task_definition = seed_task_definition(&ecs).await;
    let net = moto::default_network(cfg).await;
    let network = NetworkConfiguration::builder()
        .awsvpc_configuration(
            AwsVpcConfiguration::builder()
                .set_subnets(Some(net.subnet_ids))
                .security_groups(net.security_group_id)
                .assign_public_ip(AssignPublicIp::Disabled)
                .build()
                .expect("awsvpc configuration"),
        )
        .build();
    let started_by = identity::started_by(&owner.server_id, &owner.cluster_key);
    let slots = Arc::new(Semaphore::new(SEED_CONCURRENCY));
    let mut runs = JoinSet::new();
    for i in 0..n {
        let job_id = first_job_id + i as i64;
        let (ecs, owner, network, started_by, task_definition) =
            (ecs.clone(), owner.clone(), network.clone(), started_by.clone(), task_definition.clone());
        let slots = slots.clone();
        runs.spawn(async move {
            let _slot = slots.acquire_owned().await.expect("semaphore");
            let job = job(job_id);
            let agent_id = format!("ea-{}-{job_id}-{:08x}", owner.cluster_key, job_id as u32);
            let labels = TaskLabels {
                server_id: &owner.server_id,
                cluster_key: &owner.cluster_key,
                agent_id: &agent_id,
                job: &job,
                environment: None,
                elastic_profile: "bench-seed",
                attempt: 1,
                settings: "",
            };
            let tags =
                identity::task_tags(&labels, &[]).into_iter().map(|(k, v)| Tag::builder().key(k).value(v).build());
            let overrides = TaskOverride::builder()
                .container_overrides(
                    ContainerOverride::builder()
                        .name("gocd-agent")
                        .environment(
                            KeyValuePair::builder()
                                .name("GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID")
                                .value(&agent_id)
                                .build(),
                        )
                        .build(),
                )
                .build();
            let out = ecs
                .run_task()
                .cluster(&owner.cluster)
                .task_definition(&task_definition)
                .count(1)
                .launch_type(LaunchType::Fargate)
                .started_by(started_by)
                .network_configuration(network)
                .overrides(overrides)
                .set_tags(Some(tags.collect()))
                .send()
                .await
                .unwrap_or_else(|e| panic!("seeding RunTask: {}", aws_error_text(&e)));
            let task_arn = out.tasks().first().and_then(|t| t.task_arn()).expect("a seeded task").to_string();
            Seeded { agent_id, job, task_arn }
        });
    }
    let mut seeded = Vec::with_capacity(n);
    while let Some(done) = runs.join_next().await {
        seeded.push(done.expect("a seeding task panicked"));
    }
    seeded.sort_by_key(|s| s.job.job_id);
    seeded
}

/// Registers the seeded tasks' task definition (moto keeps revisions; any active one will do).
async fn seed_task_definition(ecs: &aws_sdk_ecs::Client) -> String {
    let container = ContainerDefinition::builder()
        .name("gocd-agent")
        .image("gocd/gocd-agent-alpine-3.19:v24.1.0")
        .cpu(512)
        .memory(1024)
        .essential(true)
        .build();
    let out = ecs
        .register_task_definition()
        .family(SEED_FAMILY)
        .network_mode(NetworkMode::Awsvpc)
        .requires_compatibilities(Compatibility::Fargate)
        .cpu("512")
        .memory("1024")
        .container_definitions(container)
        .send()
        .await
        .unwrap_or_else(|e| panic!("seeding RegisterTaskDefinition: {}", aws_error_text(&e)));
    out.task_definition().and_then(|td| td.task_definition_arn()).expect("task definition ARN").to_string()
}
