//! `create-agent`: from GoCD's request to RunTask and back, without waiting for the task.
//!
//! 1. the cluster profile → its `Cluster` (clients, agents; adopted from AWS once),
//! 2. the elastic profile, checked against the cluster profile (launch type, allow-lists);
//!    a refusal goes to the job's console and to server health,
//! 3. one atomic reservation: a live agent for the job means nothing to do, `MaxAgents` live
//!    agents means the job waits for GoCD's next create-agent,
//! 4. task definition (registered once) and networking (resolved once), looked up together,
//! 5. RunTask with the agent's registration data as overrides and a client token from the job
//!    id and attempt; the reservation becomes the agent's record, or is released on failure.
//!    On EC2 the work is queued instead (`ec2::driver::enqueue`): the cluster's loop starts it
//!    on an instance with room, launching instances as needed.

use std::sync::Arc;
use std::time::SystemTime;

use tracing::Instrument;

use crate::cluster::identity::{client_token, new_agent_id, task_tags, TaskLabels};
use crate::cluster::launch::{run_task, AgentEnv, LaunchSpec};
use crate::cluster::registry::Reservation;
use crate::cluster::Cluster;
use crate::ec2;
use crate::error::{PluginError, Result};
use crate::metrics::LaunchResult;
use crate::plugin::{describe, Plugin};
use crate::protocol::host_calls::HealthKind;
use crate::protocol::requests::CreateAgentParams;
use crate::protocol::types::JobIdentifier;
use crate::settings::{check_compatible, ElasticProfile, FieldError, LaunchType};

/// Starts an agent for the job unless one already serves it.
pub async fn create_agent(plugin: Arc<Plugin>, params: CreateAgentParams) -> Result<()> {
    let job = params.job_identifier.clone();
    let cluster = plugin.cluster(&params.cluster_profile_properties).await?;
    let elastic = match checked_elastic_profile(&cluster, &params) {
        Ok(elastic) => elastic,
        Err(problems) => {
            plugin.metrics().launch(LaunchResult::Refused);
            return refuse(&plugin, &cluster, &job, &problems).await;
        }
    };
    cluster.saw_elastic_profile(&elastic);
    cluster.ensure_adopted().await?;
    let server = plugin.server_info().await?;
    let profile = cluster.profile();
    let server_url =
        profile.go_server_url.clone().or_else(|| server.agent_url().map(str::to_string)).ok_or_else(|| {
            PluginError::Config(
                "GoCD's server-info has no site URL and the cluster profile sets no GoServerUrl: set GoServerUrl"
                    .into(),
            )
        })?;

    let reservation = cluster.registry().reserve(
        &job,
        new_agent_id(&cluster.key, &job),
        profile.max_agents as usize,
        |record| {
            record.environment = params.environment.clone();
            record.elastic_profile = elastic.hash.clone();
            record.image = elastic.image.clone();
        },
        SystemTime::now(),
    );
    let (agent_id, attempt) = match reservation {
        Reservation::Existing(agent_id) => {
            tracing::info!(job = %job.locator(), agent_id, "an agent already serves this job; nothing to start");
            if profile.launch_type == LaunchType::Ec2 {
                // Still waiting for room? It registers with the newest key GoCD sent.
                cluster.ec2.renew(&agent_id, &params.auto_register_key, SystemTime::now());
            }
            plugin.metrics().launch(LaunchResult::Deduplicated);
            return Ok(());
        }
        Reservation::Finished => {
            tracing::info!(job = %job.locator(), "this job already completed; a late create-agent starts nothing");
            plugin.metrics().launch(LaunchResult::Deduplicated);
            return Ok(());
        }
        Reservation::Full { live } => {
            let message =
                format!("{live} agents are running or starting, the MaxAgents of this cluster profile: the job waits");
            tracing::info!(job = %job.locator(), "{message}");
            plugin.metrics().launch(LaunchResult::MaxAgentsReached);
            let _ = plugin.host().console_log(&job, format!("[ecs-elastic-agent] {message}")).await;
            return Ok(());
        }
        Reservation::Reserved { agent_id, attempt } => (agent_id, attempt),
    };

    let span =
        tracing::info_span!("launch", cluster = %profile.cluster_name, agent_id = %agent_id, job = %job.locator());
    let started = if profile.launch_type == LaunchType::Ec2 {
        // EC2: the work waits for room on an instance of ours; this call never waits for it.
        let work = ec2::driver::Work {
            elastic: &elastic,
            params: &params,
            server_url: &server_url,
            agent_id: &agent_id,
            attempt,
        };
        ec2::driver::enqueue(&cluster, plugin.host(), work).instrument(span).await
    } else {
        launch(&cluster, &elastic, &params, &server.server_id, &server_url, &agent_id, attempt).instrument(span).await
    };
    match started {
        Ok(line) => {
            let capacity = cluster.registry().get(&agent_id).and_then(|a| a.capacity.clone());
            plugin.metrics().launch(LaunchResult::started_on(profile.launch_type, capacity.as_deref()));
            let _ = plugin.host().console_log(&job, format!("[ecs-elastic-agent] {line}")).await;
            Ok(())
        }
        Err(error) => {
            plugin.metrics().launch(LaunchResult::Failed);
            cluster.registry().launch_failed(&agent_id, format!("launch failed: {error}"), SystemTime::now());
            cluster.event(HealthKind::Error, format!("could not start an agent for job {}: {error}", job.locator()));
            let _ =
                plugin.host().console_log(&job, format!("[ecs-elastic-agent] could not start an agent: {error}")).await;
            Err(error)
        }
    }
}

fn checked_elastic_profile(cluster: &Cluster, params: &CreateAgentParams) -> Result<ElasticProfile, Vec<FieldError>> {
    let elastic = ElasticProfile::parse(&params.elastic_agent_profile_properties)?;
    let problems = check_compatible(&cluster.profile(), &elastic);
    if problems.is_empty() {
        Ok(elastic)
    } else {
        Err(problems)
    }
}

/// Says in the job's console and in server health why no agent was started.
async fn refuse(plugin: &Plugin, cluster: &Cluster, job: &JobIdentifier, problems: &[FieldError]) -> Result<()> {
    let message = format!(
        "no agent started for job {}: the elastic profile does not fit this cluster profile: {}",
        job.locator(),
        describe(problems)
    );
    cluster.event(HealthKind::Warning, message.clone());
    let _ = plugin.host().console_log(job, format!("[ecs-elastic-agent] {message}")).await;
    Err(PluginError::Config(message))
}

async fn launch(
    cluster: &Cluster,
    elastic: &ElasticProfile,
    params: &CreateAgentParams,
    server_id: &str,
    server_url: &str,
    agent_id: &str,
    attempt: u32,
) -> Result<String> {
    let profile = cluster.profile();
    // Both are cached after the first launch; the first one waits for the slower, not the sum.
    let (task_definition, network) = tokio::try_join!(cluster.task_definition(elastic), cluster.network(elastic))?;
    let mut user_tags = profile.tags.clone();
    user_tags.extend(elastic.tags.iter().cloned());
    let job = &params.job_identifier;
    let spec = LaunchSpec {
        cluster: &profile,
        elastic,
        task_definition: &task_definition,
        network: &network,
        started_by: &cluster.started_by,
        tags: task_tags(
            &TaskLabels {
                server_id,
                cluster_key: &cluster.key,
                agent_id,
                job,
                environment: params.environment.as_deref(),
                elastic_profile: &elastic.hash,
                attempt,
            },
            &user_tags,
        ),
        agent: AgentEnv {
            server_url,
            auto_register_key: &params.auto_register_key,
            environment: params.environment.as_deref(),
            agent_id,
        },
        client_token: client_token(server_id, &cluster.key, job.job_id, attempt, ""),
    };
    let launched = run_task(&cluster.aws, &spec).await.map_err(|failure| {
        if failure.outcome_unknown {
            cluster.registry().launch_unknown(agent_id, SystemTime::now());
        }
        failure.error
    })?;
    let arn = launched.task.arn.clone();
    if launched.fell_back_from_spot {
        cluster
            .event(HealthKind::Warning, format!("FARGATE_SPOT capacity was refused; agent {agent_id} runs on FARGATE"));
    }
    {
        let mut registry = cluster.registry();
        registry.launched(agent_id, launched.task);
        if let Some(record) = registry.get_mut(agent_id) {
            record.capacity = Some(launched.capacity.clone());
        }
    }
    tracing::info!(task = %arn, capacity = %launched.capacity, "started agent task");
    Ok(format!("started agent {agent_id} as ECS task {arn} on {}", launched.capacity))
}
