//! `server-ping`: every cluster profile reconciled on its own task, so a slow or broken
//! account never stalls another. Per profile: refresh tasks, fold in GoCD's agents, plan,
//! apply (stop tasks, remove agents, tell jobs). Then one server-health update for all.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::task::JoinSet;
use tracing::Instrument;

use super::job_completion::stop_task;
use crate::cluster::identity::cluster_key_of_agent;
use crate::cluster::reconcile::{self, Step};
use crate::cluster::sweep;
use crate::cluster::Cluster;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::plugin::Plugin;
use crate::protocol::host_calls::{HealthKind, HealthMessage};
use crate::protocol::requests::ServerPingParams;
use crate::protocol::types::AgentMetadata;
use crate::server::host::HostClient;
use crate::settings::LaunchType;

/// How long one cluster profile's reconcile may take before the ping moves on without it.
const PER_CLUSTER_BUDGET: Duration = Duration::from_secs(40);

/// Reconciles every cluster profile GoCD sent.
pub async fn server_ping(plugin: Arc<Plugin>, params: ServerPingParams) -> Result<()> {
    let mut problems = Vec::new();
    let mut clusters = Vec::new();
    let mut all_keys_known = true;
    for props in &params.all_cluster_profile_properties {
        match plugin.cluster(props).await {
            Ok(cluster) => clusters.push(cluster),
            Err(e) => {
                all_keys_known &= plugin.cluster_key(props).await.is_ok();
                problems.push(HealthMessage {
                    kind: HealthKind::Error,
                    message: format!("a cluster profile cannot be served: {e}"),
                });
            }
        }
    }
    let agents = plugin.host().list_agents().await?;
    let by_cluster = group_by_cluster(&agents);

    let mut pings = JoinSet::new();
    for cluster in &clusters {
        if cluster.profile().launch_type == LaunchType::Ec2 {
            // Adopts the profile's instances after a restart, retires idle ones, places waiting work.
            crate::ec2::driver::ensure_running(cluster, plugin.host());
        }
        let (cluster, host, metrics) = (cluster.clone(), plugin.host().clone(), plugin.metrics().clone());
        let gocd = by_cluster.get(cluster.key.as_str()).cloned().unwrap_or_default();
        // A child of the request's span: AWS errors in the log name the cluster they are about.
        let span =
            tracing::info_span!("cluster", cluster = %cluster.profile().cluster_name, region = %cluster.aws.region);
        pings.spawn(async move {
            let ping = ping_cluster(&cluster, &host, gocd, &metrics).instrument(span);
            let outcome = tokio::time::timeout(PER_CLUSTER_BUDGET, ping).await;
            match outcome {
                Ok(Ok(())) => {}
                Ok(Err(e)) => cluster.event(HealthKind::Error, format!("server-ping could not reconcile: {e}")),
                Err(_) => cluster.event(
                    HealthKind::Error,
                    format!("server-ping gave up after {} s; AWS is slow or unreachable", PER_CLUSTER_BUDGET.as_secs()),
                ),
            }
        });
    }
    while pings.join_next().await.is_some() {}

    if all_keys_known {
        remove_agents_of_unknown_profiles(&plugin, &clusters, &agents).await;
    }
    let now = SystemTime::now();
    for cluster in plugin.known_clusters() {
        problems.extend(
            cluster.events().fresh(now).into_iter().map(|e| HealthMessage { kind: e.kind, message: e.message }),
        );
        cluster.registry().prune(now);
    }
    plugin.host().set_health_messages(&problems).await?;
    Ok(())
}

fn group_by_cluster(agents: &[AgentMetadata]) -> HashMap<&str, HashMap<String, AgentMetadata>> {
    let mut by_cluster: HashMap<&str, HashMap<String, AgentMetadata>> = HashMap::new();
    for agent in agents {
        if let Some(key) = cluster_key_of_agent(&agent.agent_id) {
            by_cluster.entry(key).or_default().insert(agent.agent_id.clone(), agent.clone());
        }
    }
    by_cluster
}

async fn ping_cluster(
    cluster: &Cluster,
    host: &HostClient,
    gocd: HashMap<String, AgentMetadata>,
    metrics: &Metrics,
) -> Result<()> {
    let _one_at_a_time = cluster.ping_lock.lock().await;
    let refreshed_at = SystemTime::now();
    // The ping that adopts (the first after a start) reuses the adoption's reads: 2·⌈N/100⌉ calls, not twice that.
    let refresh = match cluster.adopt().await? {
        Some(adopted) => adopted,
        None => cluster.refresh().await?,
    };
    let now = SystemTime::now();
    let timeout = Duration::from_secs(u64::from(cluster.profile().agent_register_timeout_minutes) * 60);
    let (steps, orphans) = {
        let mut registry = cluster.registry();
        let registered =
            reconcile::observe(&mut registry, &refresh.running, &refresh.described, &refresh.missing, &gocd, now);
        registered.into_iter().for_each(|d| metrics.registered_after(d));
        registry.settle_unknown_launches(refreshed_at);
        let mut marks = cluster.orphan_marks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let swept = sweep::sweep(&registry, &refresh.running, &marks);
        *marks = swept.marks;
        (reconcile::plan(&registry, &gocd, timeout, now), swept.stop)
    };
    for (task_arn, reason) in orphans {
        if stop_task(cluster, &task_arn, &reason).await.is_ok() {
            cluster.swept_orphans.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            cluster.event(HealthKind::Warning, format!("stopped task {task_arn}: {reason}"));
        }
    }
    crate::cluster::task_definition_sweep::run(cluster).await;
    apply(cluster, host, steps).await
}

async fn apply(cluster: &Cluster, host: &HostClient, steps: Vec<Step>) -> Result<()> {
    let mut remove = Vec::new();
    for step in steps {
        match step {
            Step::StopTask { agent_id, task_arn, reason, job } => {
                tracing::info!(agent_id, task = %task_arn, %reason, "stopping task");
                if stop_task(cluster, &task_arn, &reason).await.is_ok() {
                    cluster.registry().stopped(&agent_id, reason.clone(), SystemTime::now());
                    if let Some(job) = job {
                        cluster.event(
                            HealthKind::Warning,
                            format!("stopped agent {agent_id} of job {}: {reason}", job.locator()),
                        );
                        let _ = host
                            .console_log(&job, format!("[ecs-elastic-agent] stopped agent {agent_id}: {reason}"))
                            .await;
                    }
                }
            }
            Step::ReportUnexpectedStop { agent_id, job, reason } => {
                cluster.registry().stopped(&agent_id, reason.clone(), SystemTime::now());
                let message = format!(
                    "the task of agent {agent_id} (job {}) stopped before the job completed: {reason}",
                    job.locator()
                );
                cluster.event(HealthKind::Error, message.clone());
                let _ = host.console_log(&job, format!("[ecs-elastic-agent] {message}")).await;
            }
            Step::RemoveAgent { agent_id, reason } => {
                tracing::info!(agent_id, %reason, "removing agent from GoCD");
                remove.push(agent_id);
            }
        }
    }
    remove.sort();
    remove.dedup();
    host.disable_agents(&remove).await?;
    host.delete_agents(&remove).await?;
    Ok(())
}

/// Our agents whose cluster profile no longer exists have nothing to run on: remove them.
async fn remove_agents_of_unknown_profiles(plugin: &Plugin, clusters: &[Arc<Cluster>], agents: &[AgentMetadata]) {
    let keys: HashSet<&str> = clusters.iter().map(|c| c.key.as_str()).collect();
    let orphans: Vec<String> = agents
        .iter()
        .filter(|a| cluster_key_of_agent(&a.agent_id).is_some_and(|k| !keys.contains(k)))
        .map(|a| a.agent_id.clone())
        .collect();
    if orphans.is_empty() {
        return;
    }
    tracing::warn!(count = orphans.len(), "removing GoCD agents of cluster profiles that no longer exist");
    if plugin.host().disable_agents(&orphans).await.is_ok() {
        let _ = plugin.host().delete_agents(&orphans).await;
    }
}
