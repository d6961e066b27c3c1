//! Applying a plan's steps to one instance or one task: retire (drain, deregister, terminate),
//! start a waiting task on its instance (StartTask), refuse work no instance can hold.

use std::time::SystemTime;

use aws_sdk_ecs::types::ContainerInstanceStatus;

use super::api;
use super::plan::{Placement, RetireReason, Retirement};
use crate::aws::network::Network;
use crate::cluster::identity::{client_token, task_tags, TaskLabels};
use crate::cluster::launch::{start_task, AgentEnv, LaunchSpec};
use crate::cluster::registry::{Phase, Registry};
use crate::cluster::tasks::TaskView;
use crate::cluster::Cluster;
use crate::protocol::host_calls::HealthKind;
use crate::server::host::HostClient;
use crate::settings::{ClusterProfile, Ec2Capacity};

/// Drain, deregister, terminate. A container instance that cannot be deregistered (a task
/// arrived) is set ACTIVE again and kept.
pub(super) async fn retire(cluster: &Cluster, profile: &ClusterProfile, r: &Retirement) {
    let container = {
        let mut st = cluster.ec2.state();
        let Some(record) = st.instances.get_mut(&r.instance) else {
            return;
        };
        record.retiring = Some(r.reason);
        record.container.as_ref().map(|c| c.arn.clone())
    };
    let cluster_name = profile.cluster_name.as_str();
    if let Some(arn) = &container {
        if let Err(e) = api::set_state(&cluster.aws, cluster_name, arn, ContainerInstanceStatus::Draining).await {
            tracing::info!(instance = %r.instance, error = %e, "could not set the container instance DRAINING; deregistering anyway");
        }
        if let Err(e) = api::deregister(&cluster.aws, cluster_name, arn).await {
            tracing::warn!(instance = %r.instance, error = %e, "could not deregister the container instance; keeping the instance");
            let _ = api::set_state(&cluster.aws, cluster_name, arn, ContainerInstanceStatus::Active).await;
            if let Some(record) = cluster.ec2.state().instances.get_mut(&r.instance) {
                record.retiring = None;
            }
            return;
        }
    }
    match api::terminate(&cluster.aws, std::slice::from_ref(&r.instance)).await {
        Ok(()) => {
            let mut st = cluster.ec2.state();
            st.counters.terminated += 1;
            st.gone.insert(r.instance.clone(), SystemTime::now());
            if let Some(record) = st.instances.get_mut(&r.instance) {
                record.container = None;
                record.ec2_state = "shutting-down".into();
            }
            drop(st);
            let message = format!("terminated EC2 instance {}: {}", r.instance, r.reason.describe());
            match r.reason {
                RetireReason::Idle => tracing::info!(instance = %r.instance, "{message}"),
                RetireReason::NeverRegistered | RetireReason::Unhealthy => cluster.event(HealthKind::Warning, message),
            }
        }
        Err(e) => {
            cluster.event(HealthKind::Warning, format!("could not terminate EC2 instance {}: {e}", r.instance));
            // Deregistered already: the next passes see it unregistered and retry.
            if let Some(record) = cluster.ec2.state().instances.get_mut(&r.instance) {
                record.retiring = None;
                record.container = None;
            }
        }
    }
}

/// Starts one waiting task on its instance.
pub(super) async fn start(cluster: &Cluster, host: &HostClient, profile: &ClusterProfile, p: &Placement) {
    let (work, container) = {
        let st = cluster.ec2.state();
        let work = st.waiting.iter().find(|w| w.agent_id == p.demand).cloned();
        let container = st.instances.get(&p.instance).and_then(|r| r.container.as_ref()).map(|c| c.arn.clone());
        match (work, container) {
            (Some(w), Some(c)) => (w, c),
            _ => return,
        }
    };
    if !cluster.registry().get(&work.agent_id).is_some_and(|a| a.phase == Phase::Launching) {
        cluster.ec2.state().waiting.retain(|w| w.agent_id != work.agent_id);
        return;
    }
    let mut user_tags = profile.tags.clone();
    user_tags.extend(work.elastic.tags.iter().cloned());
    let no_network = Network { subnets: Vec::new(), security_groups: Vec::new() };
    let spec = LaunchSpec {
        cluster: profile,
        elastic: &work.elastic,
        task_definition: &work.task_definition,
        network: &no_network,
        started_by: &cluster.started_by,
        tags: task_tags(
            &TaskLabels {
                server_id: &cluster.server_id,
                cluster_key: &cluster.key,
                agent_id: &work.agent_id,
                job: &work.job,
                environment: work.environment.as_deref(),
                elastic_profile: &work.elastic.hash,
                attempt: work.attempt,
            },
            &user_tags,
        ),
        agent: AgentEnv {
            server_url: &work.server_url,
            auto_register_key: &work.key,
            environment: work.environment.as_deref(),
            agent_id: &work.agent_id,
        },
        client_token: client_token(&cluster.server_id, &cluster.key, work.job.job_id, work.attempt, ""),
    };
    let outcome = start_task(&cluster.aws, &spec, &container).await;
    let now = SystemTime::now();
    let (agent_id, instance) = (work.agent_id.as_str(), p.instance.as_str());
    match outcome {
        Ok(Some(task)) => {
            let arn = task.arn.clone();
            cluster.ec2.state().placed(instance, agent_id, work.need, now);
            started(&mut cluster.registry(), agent_id, task, now);
            tracing::info!(agent_id, instance, task = %arn, "started agent task on an EC2 container instance");
            let line =
                format!("[ecs-elastic-agent] started agent {agent_id} as ECS task {arn} on EC2 instance {instance}");
            let _ = host.console_log(&work.job, line).await;
        }
        Ok(None) => tracing::info!(
            agent_id,
            instance,
            "ECS started nothing on the instance (no room after all); the task waits"
        ),
        Err(e) if e.transient => {
            tracing::info!(agent_id, instance, error = %e, "StartTask failed for now; the task waits")
        }
        Err(e) => {
            cluster.ec2.state().waiting.retain(|w| w.agent_id != work.agent_id);
            cluster.registry().stopped(&work.agent_id, format!("launch failed: {e}"), now);
            let message = format!("could not start an agent for job {}: {e}", work.job.locator());
            cluster.event(HealthKind::Error, message.clone());
            let _ = host.console_log(&work.job, format!("[ecs-elastic-agent] {message}")).await;
        }
    }
}

/// Records a started task: the agent runs now, and its register timeout counts from now.
fn started(registry: &mut Registry, agent_id: &str, task: TaskView, now: SystemTime) {
    registry.launched(agent_id, task);
    if let Some(record) = registry.get_mut(agent_id) {
        record.capacity = Some("EC2".into());
        record.created_at = now;
    }
}

/// Work larger than an instance (learned once one registered): it can never start.
pub(super) async fn refuse_too_big(cluster: &Cluster, host: &HostClient, cfg: &Ec2Capacity, ids: &[String]) {
    for id in ids {
        let work = {
            let mut st = cluster.ec2.state();
            let capacity = st.capacity(&cfg.instance_type).unwrap_or_default();
            let work = st.waiting.iter().find(|w| &w.agent_id == id).cloned();
            st.waiting.retain(|w| &w.agent_id != id);
            work.map(|w| (w, capacity))
        };
        let Some((work, capacity)) = work else {
            continue;
        };
        let message = format!(
            "no agent started for job {}: the task reserves {} CPU units and {} MiB but an {} instance registers {} CPU units and {} MiB",
            work.job.locator(),
            work.need.cpu,
            work.need.memory,
            cfg.instance_type,
            capacity.cpu,
            capacity.memory
        );
        cluster.registry().stopped(id, message.clone(), SystemTime::now());
        cluster.event(HealthKind::Warning, message.clone());
        let _ = host.console_log(&work.job, format!("[ecs-elastic-agent] {message}")).await;
    }
}
