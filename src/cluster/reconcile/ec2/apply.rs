//! Applying a plan's steps to one instance or one task: retire (drain, deregister, terminate),
//! stop an idle instance into the stopped pool and start one again, start a waiting task on its
//! instance (StartTask), refuse work no instance can hold.

use crate::aws::ecs::InstanceStatus;
use crate::aws::Failure;
use crate::cluster::agents::Phase;
use crate::cluster::base::gocd::console_line;
use crate::cluster::capacity::ec2::api;
use crate::cluster::capacity::ec2::plan::{Placement, RetireReason, Retirement};
use crate::cluster::capacity::ec2::pool::WaitingTask;
use crate::cluster::capacity::ec2::pools::PoolConfig;
use crate::cluster::capacity::ec2::ContainerInstanceStatus;
use crate::cluster::launch::run_task::start_task;
use crate::cluster::Cluster;
use crate::protocol::host_calls::HealthKind;
use crate::settings::ClusterProfile;

/// Drain, deregister, terminate. A container instance that cannot be deregistered (a task
/// arrived) is set ACTIVE again and kept.
pub(super) async fn retire(cluster: &Cluster, profile: &ClusterProfile, r: &Retirement) {
    let (container, parked) = {
        let mut st = cluster.ec2().state();
        let Some(record) = st.instance_mut(&r.instance) else {
            return;
        };
        record.retire(r.reason);
        (record.container().map(|c| c.arn.clone()), record.parked())
    };
    let cluster_name = profile.cluster_name.as_str();
    if let Some(arn) = &container {
        if let Err(e) = cluster.aws().set_instance_status(cluster_name, arn, InstanceStatus::Draining).await {
            tracing::info!(instance = %r.instance, error = %e, "could not set the container instance DRAINING; deregistering anyway");
        }
        if let Err(e) = api::deregister(&cluster.aws(), cluster_name, arn).await {
            tracing::warn!(instance = %r.instance, error = %e, "could not deregister the container instance; keeping the instance");
            if !parked {
                let _ = cluster.aws().set_instance_status(cluster_name, arn, InstanceStatus::Active).await;
            }
            if let Some(record) = cluster.ec2().state().instance_mut(&r.instance) {
                record.kept();
            }
            return;
        }
    }
    match api::terminate(&cluster.aws(), std::slice::from_ref(&r.instance)).await {
        Ok(()) => {
            let mut st = cluster.ec2().state();
            st.count(&r.instance, |c| c.terminated += 1);
            st.went(r.instance.clone(), cluster.now());
            if let Some(record) = st.instance_mut(&r.instance) {
                record.terminating();
            }
            drop(st);
            let message = format!("terminated EC2 instance {}: {}", r.instance, r.reason.describe());
            match r.reason {
                RetireReason::Idle | RetireReason::SurplusStopped | RetireReason::LeftOver => {
                    tracing::info!(instance = %r.instance, "{message}")
                }
                RetireReason::NeverRegistered | RetireReason::Unhealthy | RetireReason::Stale => {
                    cluster.event(HealthKind::Warning, message);
                }
            }
        }
        Err(e) => {
            cluster.event(HealthKind::Warning, format!("could not terminate EC2 instance {}: {e}", r.instance));
            // Deregistered already: the next passes see it unregistered and retry.
            if let Some(record) = cluster.ec2().state().instance_mut(&r.instance) {
                record.deregistered();
            }
        }
    }
}

/// Stops an idle instance into the stopped pool (`Ec2StoppedInstances`): its container instance
/// is set DRAINING (nothing is placed on it) but stays registered, so that its ECS agent, whose
/// state file is on the kept root volume, comes back as the same container instance on start;
/// then StopInstances. A failed stop sets the container instance ACTIVE again and keeps the
/// instance running: the next pass decides anew.
pub(super) async fn stop(cluster: &Cluster, profile: &ClusterProfile, id: &str) {
    let container = {
        let mut st = cluster.ec2().state();
        let Some(record) = st.instance_mut(id) else {
            return;
        };
        record.retire(RetireReason::Idle);
        record.container().map(|c| c.arn.clone())
    };
    let cluster_name = profile.cluster_name.as_str();
    if let Some(arn) = &container {
        if let Err(e) = cluster.aws().set_instance_status(cluster_name, arn, InstanceStatus::Draining).await {
            tracing::info!(instance = %id, error = %e, "could not set the container instance DRAINING; stopping anyway");
        }
    }
    let outcome = api::stop(&cluster.aws(), id).await;
    let now = cluster.now();
    match outcome {
        Ok(()) => {
            let mut st = cluster.ec2().state();
            st.count(id, |c| c.stopped += 1);
            if let Some(record) = st.instance_mut(id) {
                record.stopping(now);
            }
            drop(st);
            tracing::info!(instance = %id, "stopped EC2 instance into the stopped pool (Ec2StoppedInstances): it ran no task for Ec2IdleMinutes");
        }
        Err(e) => {
            cluster.event(
                HealthKind::Warning,
                format!("could not stop idle EC2 instance {id} (it is kept running; the next pass decides again): {e}"),
            );
            if let Some(arn) = &container {
                let _ = cluster.aws().set_instance_status(cluster_name, arn, InstanceStatus::Active).await;
            }
            if let Some(record) = cluster.ec2().state().instance_mut(id) {
                record.kept();
            }
        }
    }
}

/// Starts a stopped instance of ours again for waiting work, and sets its container instance
/// ACTIVE (its agent reconnects as the same one). Returns whether it started: when EC2 has no
/// capacity for it now, or it is not stopped after all, the caller launches a new instance.
pub(super) async fn restart(cluster: &Cluster, profile: &ClusterProfile, id: &str) -> bool {
    match api::start(&cluster.aws(), id).await {
        Ok(()) => {
            let container = {
                let mut st = cluster.ec2().state();
                st.count(id, |c| c.restarted += 1);
                let Some(record) = st.instance_mut(id) else {
                    return true;
                };
                record.restarted(cluster.now());
                record.container().map(|c| c.arn.clone())
            };
            tracing::info!(instance = %id, "started a stopped EC2 instance again instead of launching a new one");
            if let Some(arn) = container {
                reactivate(cluster, profile, id, &arn).await;
            }
            true
        }
        Err(e) if e.failure == Failure::NoCapacity => {
            tracing::info!(instance = %id, error = %e, "EC2 has no capacity to start the stopped instance now; launching a new one instead");
            false
        }
        Err(e) if e.failure == Failure::WrongState => {
            tracing::info!(instance = %id, error = %e, "the stopped instance cannot be started yet; launching a new one instead");
            false
        }
        Err(e) => {
            cluster.event(
                HealthKind::Warning,
                format!("could not start stopped EC2 instance {id}; launching a new one instead: {e}"),
            );
            false
        }
    }
}

/// Sets the container instance of an instance started again ACTIVE (it was DRAINING while
/// stopped); a failure is logged and the next pass tries again.
pub(super) async fn reactivate(cluster: &Cluster, profile: &ClusterProfile, id: &str, arn: &str) {
    match cluster.aws().set_instance_status(&profile.cluster_name, arn, InstanceStatus::Active).await {
        Ok(()) => {
            if let Some(record) = cluster.ec2().state().instance_mut(id) {
                record.container_status(ContainerInstanceStatus::Active);
            }
        }
        Err(e) => {
            tracing::info!(instance = %id, error = %e, "could not set the restarted instance's container instance ACTIVE; the next pass tries again")
        }
    }
}

/// Starts one waiting task on its instance.
pub(super) async fn start(cluster: &Cluster, p: &Placement) {
    let (waiting, container) = {
        let st = cluster.ec2().state();
        let work = st.waiting_for(&p.demand).cloned();
        let container = st.instance(&p.instance).and_then(|r| r.container()).map(|c| c.arn.clone());
        match (work, container) {
            (Some(w), Some(c)) => (w, c),
            _ => return,
        }
    };
    let work = &waiting.spec.work;
    if !cluster.registry().get(&work.agent_id).is_some_and(|a| a.phase == Phase::Launching) {
        cluster.ec2().state().take_waiting(&work.agent_id);
        return;
    }
    // The launch its create-agent built, with that request's profile.
    let aws = cluster.aws();
    let start = Box::pin(start_task(&aws, &waiting.spec, &container));
    let outcome = crate::telemetry::jobs::within_job(&work.job, "start on an EC2 instance", start).await;
    let now = cluster.now();
    let (agent_id, instance) = (work.agent_id.as_str(), p.instance.as_str());
    match outcome {
        Ok(Some(task)) => {
            let arn = task.arn.clone();
            cluster.ec2().state().placed(instance, agent_id, waiting.need, now);
            cluster.registry().started_on_instance(agent_id, task, now);
            tracing::info!(agent_id, instance, task = %arn, "started agent task on an EC2 container instance");
            let line = console_line(format!("started agent {agent_id} as ECS task {arn} on EC2 instance {instance}"));
            let _ = cluster.gocd().console_log(&work.job, line).await;
        }
        Ok(None) => tracing::info!(
            agent_id,
            instance,
            "ECS started nothing on the instance (no room after all); the task waits"
        ),
        Err(e) if e.transient() => {
            tracing::info!(agent_id, instance, error = %e, "StartTask failed for now; the task waits")
        }
        Err(e) => {
            cluster.ec2().state().take_waiting(&work.agent_id);
            cluster.registry().stopped(&work.agent_id, format!("launch failed: {e}"), now);
            let message = format!("could not start an agent for job {}: {e}", work.job.locator());
            cluster.event(HealthKind::Error, message.clone());
            let _ = cluster.gocd().console_log(&work.job, console_line(message)).await;
        }
    }
}

/// Work larger than every type its pool lists of its architecture (learned once one
/// registered, or from EC2's description): it can never start.
pub(super) async fn refuse_too_big(cluster: &Cluster, pool: &PoolConfig, ids: &[String]) {
    for id in ids {
        let Some(waiting) = take(cluster, id) else {
            continue;
        };
        let offers: Vec<String> = cluster
            .ec2()
            .state()
            .offers(Some(&pool.key), &pool.cfg)
            .into_iter()
            .filter(|t| t.arch == waiting.arch)
            .map(|t| format!("{} registers {} CPU units and {} MiB", t.name, t.capacity.cpu, t.capacity.memory))
            .collect();
        let message = format!(
            "no agent started for job {}: the task reserves {} CPU units and {} MiB but no listed {} instance type holds it ({})",
            waiting.spec.work.job.locator(),
            waiting.need.cpu,
            waiting.need.memory,
            waiting.arch.as_str(),
            offers.join("; ")
        );
        refuse(cluster, &waiting, message).await;
    }
}

/// Work whose CPU architecture no launchable type of its pool has: it can never start.
pub(super) async fn refuse_no_type(cluster: &Cluster, pool: &PoolConfig, ids: &[String]) {
    for id in ids {
        let Some(waiting) = take(cluster, id) else {
            continue;
        };
        let message = format!(
            "no agent started for job {}: {}",
            waiting.spec.work.job.locator(),
            crate::cluster::capacity::ec2::catalog::no_type_message(&pool.cfg, waiting.arch)
        );
        refuse(cluster, &waiting, message).await;
    }
}

/// Takes a waiting task off the queue.
fn take(cluster: &Cluster, id: &str) -> Option<WaitingTask> {
    cluster.ec2().state().take_waiting(id)
}

/// Releases a refused task's agent and says why (health, the job's console).
async fn refuse(cluster: &Cluster, waiting: &WaitingTask, message: String) {
    cluster.registry().stopped(&waiting.spec.work.agent_id, message.clone(), cluster.now());
    cluster.event(HealthKind::Warning, message.clone());
    let _ = cluster.gocd().console_log(&waiting.spec.work.job, console_line(message)).await;
}
