//! EC2 capacity at run time: create-agent queues its work here ([`enqueue`], which returns at
//! once), and one background loop per EC2 cluster profile ([`ensure_running`]) does passes:
//! observe (our instances by tag, the cluster's container instances), plan ([`super::plan`]),
//! apply (retire, start waiting tasks with StartTask, launch instances). It comes back every
//! 2 s while work waits or instances start or go, every 10 s while instances run, else when
//! woken. The loop holds only a `Weak` reference to its cluster between passes and is aborted
//! when the cluster is dropped or at plugin shutdown ([`super::Pool::stop`]).

use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use aws_sdk_ecs::types::ContainerInstanceStatus;
use tokio::sync::Notify;

use super::api::{self, LaunchRequest, Refusal, TAG_OS};
use super::plan::{self, Placement, Plan, RetireReason, Retirement};
use super::pool::{Ec2Instance, WaitingTask};
use super::user_data::{self, Join};
use super::{OsClass, Resources};
use crate::aws::network::{self, Network};
use crate::aws::AwsError;
use crate::cluster::identity::{client_token, task_tags, TaskLabels, TAG_CLUSTER_PROFILE, TAG_SERVER_ID};
use crate::cluster::launch::{start_task, AgentEnv, LaunchSpec};
use crate::cluster::registry::{Phase, Registry};
use crate::cluster::tasks::TaskView;
use crate::cluster::Cluster;
use crate::error::{PluginError, Result};
use crate::protocol::host_calls::HealthKind;
use crate::protocol::requests::CreateAgentParams;
use crate::server::host::HostClient;
use crate::settings::{ClusterProfile, Ec2Capacity, ElasticProfile};

/// Pause between passes while work waits or instances start or retire.
const BUSY: Duration = Duration::from_secs(2);
/// Pause while instances run (their idle clocks tick).
const STEADY: Duration = Duration::from_secs(10);
/// Pause with nothing at all (a wake-up comes first when work arrives).
const QUIET: Duration = Duration::from_secs(60);
/// Pause after a failed pass.
const AFTER_ERROR: Duration = Duration::from_secs(5);
/// Longest one pass may take.
const PASS_BUDGET: Duration = Duration::from_secs(90);
/// First and longest pause of launches after RunInstances failed.
const LAUNCH_BACKOFF: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(300));
/// Waiting work GoCD has not asked about for this long (at least) is dropped: the job is gone.
const WAITING_EXPIRES_AFTER: Duration = Duration::from_secs(5 * 60);

/// What create-agent hands over for one agent.
#[derive(Debug)]
pub struct Work<'a> {
    /// The checked elastic profile.
    pub elastic: &'a ElasticProfile,
    /// The request.
    pub params: &'a CreateAgentParams,
    /// `GO_EA_SERVER_URL`.
    pub server_url: &'a str,
    /// The reserved agent id.
    pub agent_id: &'a str,
    /// Launch attempt of the job.
    pub attempt: u32,
}

/// Queues an agent of an EC2 cluster profile and wakes its loop; never waits for capacity.
/// Returns the line for the job's console.
///
/// # Errors
/// The task definition could not be registered, or the task is larger than one instance of
/// the profile's type.
pub async fn enqueue(cluster: &Arc<Cluster>, host: &HostClient, work: Work<'_>) -> Result<String> {
    let profile = cluster.profile();
    let cfg = profile.ec2.clone().ok_or_else(|| PluginError::Internal("an EC2 launch for a cluster profile without Ec2 settings".into()))?;
    let task_definition = cluster.task_definition(work.elastic).await?;
    let need = Resources::new(work.elastic.cpu, work.elastic.memory_reservation.unwrap_or(work.elastic.memory));
    let capacity = cluster.ec2.state().capacity(&cfg.instance_type);
    if let Some(capacity) = capacity.filter(|c| !c.fits(need)) {
        return Err(PluginError::Config(format!(
            "the task reserves {} CPU units and {} MiB, but an {} instance offers ECS only {} CPU units and {} MiB: \
             lower Cpu/Memory (or MemoryReservation) in the elastic profile, or choose a larger Ec2InstanceType",
            need.cpu, need.memory, cfg.instance_type, capacity.cpu, capacity.memory
        )));
    }
    let now = SystemTime::now();
    let os = OsClass::of_family(&work.elastic.operating_system_family);
    {
        let mut st = cluster.ec2.state();
        st.waiting.retain(|w| w.agent_id != work.agent_id);
        st.waiting.push(WaitingTask {
            agent_id: work.agent_id.to_string(),
            job: work.params.job_identifier.clone(),
            environment: work.params.environment.clone(),
            attempt: work.attempt,
            elastic: Arc::new(work.elastic.clone()),
            task_definition,
            server_url: work.server_url.to_string(),
            key: work.params.auto_register_key.clone(),
            need,
            os,
            since: now,
            last_asked: now,
        });
    }
    {
        let mut registry = cluster.registry();
        if let Some(record) = registry.get_mut(work.agent_id) {
            record.capacity = Some("EC2".into());
        }
    }
    ensure_running(cluster, host);
    cluster.ec2.wake();
    tracing::info!(need_cpu = need.cpu, need_memory = need.memory, os = os.as_str(), "agent queued for room on an EC2 container instance");
    Ok(format!(
        "agent {} waits for room on an EC2 container instance ({} CPU units, {} MiB): it starts as soon as one has room; \
         {} instances are launched as needed, up to Ec2MaxInstances {}",
        work.agent_id, need.cpu, need.memory, cfg.instance_type, cfg.max_instances
    ))
}

/// Starts the cluster's background loop unless it runs.
pub fn ensure_running(cluster: &Arc<Cluster>, host: &HostClient) {
    let mut task = cluster.ec2.task.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if task.as_ref().is_some_and(|t| !t.is_finished()) {
        return;
    }
    let weak = Arc::downgrade(cluster);
    let wake = cluster.ec2.wake.clone();
    *task = Some(tokio::spawn(run(weak, wake, host.clone())));
}

async fn run(cluster: Weak<Cluster>, wake: Arc<Notify>, host: HostClient) {
    loop {
        let pause = {
            let Some(cluster) = cluster.upgrade() else { return };
            let outcome = tokio::time::timeout(PASS_BUDGET, pass(&cluster, &host)).await;
            let now = SystemTime::now();
            let (pause, error) = match outcome {
                Ok(Ok(pause)) => (pause, None),
                Ok(Err(e)) => (AFTER_ERROR, Some(e.to_string())),
                Err(_) => (AFTER_ERROR, Some(format!("a pass took longer than {} s", PASS_BUDGET.as_secs()))),
            };
            if let Some(e) = &error {
                cluster.event(HealthKind::Error, format!("EC2 capacity could not be managed: {e}"));
            }
            cluster.ec2.state().last_pass = Some((now, error));
            pause
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = wake.notified() => {}
        }
    }
}

/// One pass: observe, plan, apply. Returns the pause before the next.
async fn pass(cluster: &Cluster, host: &HostClient) -> Result<Duration, AwsError> {
    let _one_at_a_time = cluster.ec2.pass_lock.lock().await;
    let profile = cluster.profile();
    let Some(cfg) = profile.ec2.clone() else {
        drop_waiting(cluster, "the cluster profile's LaunchType is no longer EC2");
        return Ok(QUIET);
    };
    expire_waiting(cluster, &profile, SystemTime::now());

    let described_at = SystemTime::now();
    let instances = api::describe_ours(&cluster.aws, &cluster.server_id, &cluster.key).await?;
    let containers = api::container_instances(&cluster.aws, &profile.cluster_name).await?;
    let now = SystemTime::now();
    let observed = cluster.ec2.state().observe(instances, containers, described_at, now);
    let mut leftovers = observed.deregister;
    if !observed.unknown.is_empty() {
        leftovers.extend(classify_unknown(cluster, observed.unknown).await?);
    }
    for arn in leftovers {
        match api::deregister(&cluster.aws, &profile.cluster_name, &arn).await {
            Ok(()) => tracing::info!(container_instance = %arn, "deregistered the container instance of a terminated instance"),
            Err(e) => tracing::warn!(container_instance = %arn, error = %e, "could not deregister a leftover container instance"),
        }
    }

    let decided: Plan = {
        let st = cluster.ec2.state();
        plan::plan(&st.slots(), &st.demands(), &st.policy(&cfg), now)
    };
    if decided != Plan::default() {
        tracing::debug!(?decided, "EC2 plan");
    }
    for r in &decided.retire {
        retire(cluster, &profile, r).await;
    }
    refuse_too_big(cluster, host, &cfg, &decided.too_big).await;
    for p in &decided.start {
        start(cluster, host, &profile, p).await;
    }
    if !decided.launch.is_empty() {
        launch(cluster, &profile, &cfg, &decided.launch).await;
    }
    let st = cluster.ec2.state();
    let beat = if st.busy() {
        BUSY
    } else if st.instances.is_empty() {
        QUIET
    } else {
        STEADY
    };
    let due = st.next_deadline(&st.policy(&cfg), SystemTime::now()).map(|d| d + Duration::from_millis(500));
    Ok(due.map_or(beat, |d| d.clamp(Duration::from_millis(500), beat)))
}

/// Container instances whose EC2 instance we do not know: ours (by tag) and gone → deregister;
/// anything else is remembered as not ours and never touched.
async fn classify_unknown(cluster: &Cluster, unknown: Vec<(String, String)>) -> Result<Vec<String>, AwsError> {
    let ids: Vec<String> = unknown.iter().map(|(id, _)| id.clone()).collect();
    let states = api::states_of_ours(&cluster.aws, &ids, &cluster.server_id, &cluster.key).await?;
    let mut st = cluster.ec2.state();
    let mut deregister = Vec::new();
    for (id, arn) in unknown {
        match states.iter().find(|(i, _)| *i == id) {
            Some((_, state)) if state != "pending" && state != "running" => {
                st.gone.insert(id, SystemTime::now());
                deregister.push(arn);
            }
            Some(_) => {} // ours and alive: the next description lists it.
            None => {
                st.foreign.insert(id);
            }
        }
    }
    Ok(deregister)
}

/// Drain, deregister, terminate. A container instance that cannot be deregistered (a task
/// arrived) is set ACTIVE again and kept.
async fn retire(cluster: &Cluster, profile: &ClusterProfile, r: &Retirement) {
    let container = {
        let mut st = cluster.ec2.state();
        let Some(record) = st.instances.get_mut(&r.instance) else { return };
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
async fn start(cluster: &Cluster, host: &HostClient, profile: &ClusterProfile, p: &Placement) {
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
            let line = format!("[ecs-elastic-agent] started agent {agent_id} as ECS task {arn} on EC2 instance {instance}");
            let _ = host.console_log(&work.job, line).await;
        }
        Ok(None) => tracing::info!(agent_id, instance, "ECS started nothing on the instance (no room after all); the task waits"),
        Err(e) if e.transient => tracing::info!(agent_id, instance, error = %e, "StartTask failed for now; the task waits"),
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
async fn refuse_too_big(cluster: &Cluster, host: &HostClient, cfg: &Ec2Capacity, ids: &[String]) {
    for id in ids {
        let work = {
            let mut st = cluster.ec2.state();
            let capacity = st.capacity(&cfg.instance_type).unwrap_or_default();
            let work = st.waiting.iter().find(|w| &w.agent_id == id).cloned();
            st.waiting.retain(|w| &w.agent_id != id);
            work.map(|w| (w, capacity))
        };
        let Some((work, capacity)) = work else { continue };
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

/// Launches instances, grouped by OS: spot first when asked, on-demand when spot capacity is
/// refused, then the next subnet (another zone) when on-demand capacity is refused too.
async fn launch(cluster: &Cluster, profile: &ClusterProfile, cfg: &Ec2Capacity, oses: &[OsClass]) {
    let now = SystemTime::now();
    if cluster.ec2.state().launch_backoff.is_some_and(|(until, _)| now < until) {
        return;
    }
    let network = match instance_network(cluster, profile).await {
        Ok(n) => n,
        Err(e) => return launch_failed(cluster, format!("could not resolve subnets and security groups: {e}")),
    };
    for os in [OsClass::Linux, OsClass::Windows] {
        let count = oses.iter().filter(|o| **o == os).count() as u32;
        if count == 0 {
            continue;
        }
        match launch_some(cluster, profile, cfg, &network, os, count).await {
            Ok((instances, fell_back)) => {
                let ids: Vec<&str> = instances.iter().map(|i| i.id.as_str()).collect();
                tracing::info!(?ids, os = os.as_str(), spot = cfg.spot && !fell_back, "launched EC2 instances");
                let mut st = cluster.ec2.state();
                st.launched(&instances, SystemTime::now());
                st.counters.launched += instances.len() as u64;
                if fell_back {
                    st.counters.spot_fallbacks += instances.len() as u64;
                }
                st.launch_backoff = None;
            }
            Err(message) => return launch_failed(cluster, message),
        }
    }
}

async fn launch_some(
    cluster: &Cluster,
    profile: &ClusterProfile,
    cfg: &Ec2Capacity,
    network: &Network,
    os: OsClass,
    count: u32,
) -> Result<(Vec<Ec2Instance>, bool), String> {
    let first = cluster.ec2.state().counters.launched as usize;
    let subnets: Vec<&String> = network.subnets.iter().cycle().skip(first % network.subnets.len().max(1)).take(network.subnets.len()).collect();
    let join = Join {
        cluster: profile.cluster_short_name(),
        server_id: &cluster.server_id,
        cluster_key: &cluster.key,
        extra: cfg.user_data.as_deref(),
    };
    let mut tags: Vec<(String, String)> = profile.tags.iter().filter(|(k, _)| !k.starts_with("gocd:") && k != "Name").cloned().collect();
    tags.push((TAG_SERVER_ID.into(), cluster.server_id.clone()));
    tags.push((TAG_CLUSTER_PROFILE.into(), cluster.key.clone()));
    tags.push((TAG_OS.into(), os.as_str().into()));
    tags.push(("Name".into(), format!("gocd-ecs-agents {}", profile.cluster_short_name())));
    let mut refusals: Vec<Refusal> = Vec::new();
    let mut spot = cfg.spot;
    for subnet in subnets {
        loop {
            let request = LaunchRequest {
                ami_id: &cfg.ami_id,
                instance_type: &cfg.instance_type,
                instance_profile: &cfg.instance_profile,
                subnet,
                security_groups: &network.security_groups,
                key_pair: cfg.key_pair.as_deref(),
                root_volume_gib: cfg.root_volume_gib,
                user_data: user_data::encoded(os, &join),
                os,
                tags: tags.clone(),
                count,
                spot,
                client_token: format!("gocd-{}-{}", cluster.key, uuid::Uuid::new_v4().simple()),
            };
            match api::run_instances(&cluster.aws, &request).await {
                Ok(Ok(instances)) if !instances.is_empty() => {
                    let fell_back = cfg.spot && !spot;
                    if fell_back {
                        let why: Vec<String> = refusals.iter().map(|r| format!("{}: {}", r.code, r.message)).collect();
                        cluster.event(
                            HealthKind::Warning,
                            format!("EC2 spot capacity was refused ({}); launched {} on-demand instance(s) instead", why.join("; "), instances.len()),
                        );
                    }
                    return Ok((instances, fell_back));
                }
                Ok(Ok(_)) => return Err("RunInstances launched no instance and gave no reason".into()),
                Ok(Err(refusal)) => {
                    tracing::warn!(subnet = %subnet, spot, code = %refusal.code, message = %refusal.message, "EC2 refused capacity");
                    refusals.push(refusal);
                    if spot {
                        spot = false;
                        continue;
                    }
                    break;
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }
    let why: Vec<String> = refusals.iter().map(|r| format!("{}: {}", r.code, r.message)).collect();
    Err(format!("EC2 has no {} capacity in any subnet: {}", cfg.instance_type, why.join("; ")))
}

fn launch_failed(cluster: &Cluster, message: String) {
    let now = SystemTime::now();
    let backoff = {
        let mut st = cluster.ec2.state();
        let next = st.launch_backoff.map_or(LAUNCH_BACKOFF.0, |(_, b)| (b * 2).min(LAUNCH_BACKOFF.1));
        st.launch_backoff = Some((now + next, next));
        next
    };
    cluster.event(
        HealthKind::Error,
        format!("could not launch EC2 instances (next try in {} s): {message}", backoff.as_secs()),
    );
}

/// The cluster profile's subnets and groups (else the default VPC's), resolved once.
async fn instance_network(cluster: &Cluster, profile: &ClusterProfile) -> Result<Network, AwsError> {
    let key = (profile.subnet_ids.clone(), profile.security_group_ids.clone());
    let mut cached = cluster.ec2.network.lock().await;
    if let Some((k, n)) = cached.as_ref() {
        if *k == key {
            return Ok(n.clone());
        }
    }
    let resolved = network::resolve(&cluster.aws, &key.0, &key.1).await?;
    *cached = Some((key, resolved.clone()));
    Ok(resolved)
}

/// Drops waiting work GoCD stopped asking for (the job was cancelled or went elsewhere), and
/// work whose reservation is no longer live.
fn expire_waiting(cluster: &Cluster, profile: &ClusterProfile, now: SystemTime) {
    let limit = Duration::from_secs(u64::from(profile.agent_register_timeout_minutes) * 60).max(WAITING_EXPIRES_AFTER);
    let expired: Vec<String> = {
        let registry = cluster.registry();
        let mut st = cluster.ec2.state();
        let mut expired = Vec::new();
        st.waiting.retain(|w| {
            let live = registry.get(&w.agent_id).is_some_and(|a| a.phase == Phase::Launching);
            let asked_lately = now.duration_since(w.last_asked).unwrap_or_default() < limit;
            if live && !asked_lately {
                expired.push(w.agent_id.clone());
            }
            live && asked_lately
        });
        expired
    };
    let mut registry = cluster.registry();
    for id in expired {
        tracing::info!(agent_id = %id, "GoCD stopped asking for this waiting agent; dropped");
        registry.stopped(&id, format!("GoCD did not ask for this agent for {} minutes: its job is gone", limit.as_secs() / 60), now);
    }
}

fn drop_waiting(cluster: &Cluster, why: &str) {
    let dropped: Vec<String> = cluster.ec2.state().waiting.drain(..).map(|w| w.agent_id).collect();
    let mut registry = cluster.registry();
    for id in dropped {
        registry.stopped(&id, why, SystemTime::now());
    }
}
