//! EC2 capacity at run time: create-agent queues its work here ([`enqueue`], in the pool of the
//! cluster profile it sent, and returns at once), and one background loop per engine
//! ([`ensure_running`]) does passes: observe the whole cluster once (our instances by tag, the
//! cluster's container instances; the container instances our gone instances left go through
//! cleanup, `cluster/cleanup/`), then for each pool of a served cluster profile
//! ([`crate::cluster::capacity::ec2::pools`]) plan with that profile's settings
//! ([`crate::cluster::capacity::ec2::plan`]) and apply (retire, start waiting tasks
//! with StartTask, launch instances: `pool_pass.rs`), then retire what is left over of
//! pools no profile has. It comes back every 2 s while work waits or instances start or go,
//! every 10 s while instances run (sooner when an idle or register deadline falls due), else
//! when woken. The loop holds only a `Weak` reference to its cluster between passes and is
//! aborted when the cluster is dropped or at plugin shutdown ([`crate::cluster::capacity::ec2::pool::Pool::stop`]).

use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;

use super::apply;
use super::pool_pass::{self, Share};
use crate::aws::AwsError;
use crate::cluster::agents::Phase;
use crate::cluster::base::error::EngineError;
use crate::cluster::capacity::ec2::catalog::{self, Catalog};
use crate::cluster::capacity::ec2::plan::TypeOffer;
use crate::cluster::capacity::ec2::pool::WaitingTask;
use crate::cluster::capacity::ec2::pools::{pool_key, PoolConfig, Pools};
use crate::cluster::capacity::ec2::{api, Arch, ContainerInstanceStatus, OsClass, Resources};
use crate::cluster::launch::snapshot::LaunchSpec;
use crate::cluster::Cluster;
use crate::ids::AgentId;
use crate::protocol::host_calls::HealthKind;

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
/// Waiting work GoCD has not asked about for this long (at least) is dropped: the job is gone.
const WAITING_EXPIRES_AFTER: Duration = Duration::from_secs(5 * 60);
/// A warm agent's work (no job asks for it, so GoCD never renews its key) waits for room this
/// long at most: its key was at most `warm::KEY_MAX_AGE` (20 minutes) old when it was queued, so
/// it is placed with five minutes of the key's 30 left for the agent to register, or dropped.
const WARM_WAITS_AT_MOST: Duration = Duration::from_secs(5 * 60);

impl Cluster {
    /// Queues an agent of an EC2 cluster profile and wakes its loop; never waits for capacity.
    /// Returns the line for the job's console.
    ///
    /// # Errors
    /// No listed instance type has the task's CPU architecture, or the task is larger than every
    /// listed type of it.
    pub(in crate::cluster) fn enqueue_on_ec2(self: &Arc<Self>, spec: LaunchSpec) -> Result<String, EngineError> {
        enqueue(self, spec)
    }
}

/// [`Cluster::enqueue_on_ec2`].
fn enqueue(cluster: &Arc<Cluster>, spec: LaunchSpec) -> Result<String, EngineError> {
    // The pool of the profile this very request sent: its types, AMIs and limits.
    let (Some(cfg), Some(pool)) = (spec.profile.ec2.clone(), pool_key(&spec.profile)) else {
        let why = "an EC2 launch for a cluster profile without EC2 settings: set Ec2InstanceType";
        return Err(EngineError::Config(why.into()));
    };
    let work = &spec.work;
    let need = Resources::new(work.elastic.cpu, work.elastic.memory_reservation.unwrap_or(work.elastic.memory));
    let arch = Arch::of_ecs(&work.elastic.cpu_architecture);
    let offers: Vec<TypeOffer> =
        cluster.ec2().state().offers(Some(&pool), &cfg).into_iter().filter(|t| t.arch == arch).collect();
    if offers.is_empty() {
        return Err(EngineError::Config(catalog::no_type_message(&cfg, arch)));
    }
    if offers.iter().all(|t| t.known && !t.capacity.fits(need)) {
        let sizes: Vec<String> = offers
            .iter()
            .map(|t| format!("{} {} CPU units and {} MiB", t.name, t.capacity.cpu, t.capacity.memory))
            .collect();
        return Err(EngineError::Config(format!(
            "the task reserves {} CPU units and {} MiB, but no listed {} instance type offers ECS that much ({}): \
             lower Cpu/Memory (or MemoryReservation) in the elastic profile, or add a larger type to Ec2InstanceType",
            need.cpu,
            need.memory,
            arch.as_str(),
            sizes.join("; ")
        )));
    }
    let now = cluster.now();
    let os = OsClass::of_family(&work.elastic.operating_system_family);
    // Spot interrupted this job's previous agent: it runs on an on-demand instance.
    let on_demand = cfg.spot && cluster.registry().was_interrupted(&work.job);
    let agent_id = work.agent_id.clone();
    {
        let mut st = cluster.ec2().state();
        // Pulled at boot by the instances launched from now on (user_data.rs): only what
        // Docker pulls without the task's credentials.
        if work.elastic.repository_credentials_arn.is_none()
            && crate::cluster::capacity::ec2::user_data::prepullable(&work.elastic.image)
        {
            st.memory_mut(&pool).saw_image(&work.elastic.image);
        }
        st.queue(WaitingTask { spec, need, os, arch, since: now, last_asked: now, on_demand, pool });
    }
    cluster.registry().queued_on_ec2(&agent_id);
    ensure_running(cluster);
    cluster.ec2().wake();
    tracing::info!(
        need_cpu = need.cpu,
        need_memory = need.memory,
        os = os.as_str(),
        arch = arch.as_str(),
        on_demand,
        "agent queued for room on an EC2 container instance"
    );
    let market = if on_demand { " (on-demand: Spot interrupted this job's previous agent)" } else { "" };
    let types: Vec<&str> = offers.iter().map(|t| t.name.as_str()).collect();
    Ok(format!(
        "agent {agent_id} waits for room on an {} EC2 container instance{market} ({} CPU units, {} MiB): it starts as soon as one has room; \
         {} instances are launched as needed, up to Ec2MaxInstances {}",
        arch.as_str(),
        need.cpu,
        need.memory,
        types.join(" or "),
        cfg.max_instances
    ))
}

/// A pool's instance types and AMIs as AWS describes them: read at its first pass (and again
/// after a fallback to estimates); what is wrong with them goes to server health once per read.
async fn ensure_catalog(cluster: &Cluster, pool: &PoolConfig) {
    let (now, cfg) = (cluster.now(), &pool.cfg);
    let current = cluster.ec2().state().memory(Some(&pool.key)).and_then(|m| m.catalog().cloned());
    if current.as_ref().is_some_and(|c| c.types_key() == Catalog::key_of(cfg) && !c.stale(now)) {
        return;
    }
    let catalog = catalog::load(&cluster.aws(), cfg, cluster.clock()).await;
    if let Some(why) = &catalog.estimated {
        cluster.event(HealthKind::Warning, format!("EC2 instance types: {why}"));
    }
    for problem in &catalog.problems {
        cluster.event(HealthKind::Error, problem.clone());
    }
    tracing::info!(pool = %pool.key, types = ?catalog.types, amis = ?catalog.amis, "described the EC2 instance types and AMIs");
    cluster.ec2().state().memory_mut(&pool.key).set_catalog(Some(catalog));
}

/// Starts the cluster's background loop unless it runs.
pub fn ensure_running(cluster: &Arc<Cluster>) {
    let weak = Arc::downgrade(cluster);
    cluster.ec2().ensure_loop(|wake| tokio::spawn(run(weak, wake)));
}

async fn run(cluster: Weak<Cluster>, wake: Arc<Notify>) {
    loop {
        let pause = {
            let Some(cluster) = cluster.upgrade() else {
                return;
            };
            let outcome = tokio::time::timeout(PASS_BUDGET, pass(&cluster)).await;
            let now = cluster.now();
            let (pause, error) = match outcome {
                Ok(Ok(pause)) => (pause, None),
                Ok(Err(e)) => (AFTER_ERROR, Some(e.to_string())),
                Err(_) => (AFTER_ERROR, Some(format!("a pass took longer than {} s", PASS_BUDGET.as_secs()))),
            };
            if let Some(e) = &error {
                cluster.event(HealthKind::Error, format!("EC2 capacity could not be managed: {e}"));
            }
            cluster.ec2().state().pass_finished(now, error);
            pause
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = wake.notified() => {}
        }
    }
}

/// One pass: observe the whole cluster once, then plan and apply each pool with its own
/// profile, then what is left over. Returns the pause before the next.
pub(super) async fn pass(cluster: &Cluster) -> Result<Duration, AwsError> {
    let _one_at_a_time = cluster.ec2().one_pass().await;
    let (profiles, heard_all) = cluster.served_profiles();
    let pools = Pools::of(profiles, heard_all, cluster.retired().is_some());
    drop_waiting_of_no_pool(cluster, &pools);
    expire_waiting(cluster, cluster.now());
    if pools.current.is_empty() && cluster.ec2().state().has_no_instance() {
        // No EC2 profile is served and nothing of ours is left: new work wakes the loop.
        return Ok(QUIET);
    }
    observe(cluster).await?;
    for pool in &pools.current {
        ensure_catalog(cluster, pool).await;
    }
    reactivate_restarted(cluster).await;
    let mut deadlines = Vec::new();
    for pool in &pools.current {
        deadlines.push(pool_pass::run(cluster, Share::Pool(pool)).await);
    }
    // Instances of no current pool: left alone until every profile was heard (a restart).
    if pools.settled {
        deadlines.push(pool_pass::run(cluster, Share::LeftOver(&pools.keys)).await);
    }
    let st = cluster.ec2().state();
    let beat = if st.busy() {
        BUSY
    } else if st.instances().all(|r| r.parked()) {
        // Nothing, or only stopped pools: new work wakes the loop.
        QUIET
    } else {
        STEADY
    };
    let due = deadlines.into_iter().flatten().min().map(|d| d + Duration::from_millis(500));
    Ok(due.map_or(beat, |d| d.clamp(Duration::from_millis(500), beat)))
}

/// One description of our instances and of the cluster's container instances (the same two
/// reads whatever the number of pools), folded into the state; the container instances our gone
/// instances left are deregistered (cleanup).
async fn observe(cluster: &Cluster) -> Result<(), AwsError> {
    let described_at = cluster.now();
    let instances = api::describe_ours(&cluster.aws(), cluster.server_id(), cluster.key()).await?;
    let containers = api::container_instances(&cluster.aws(), &cluster.profile().cluster_name).await?;
    let now = cluster.now();
    let observed = cluster.ec2().state().observe(instances, containers, described_at, now);
    let ours = if observed.unknown.is_empty() {
        Vec::new()
    } else {
        let ids: Vec<String> = observed.unknown.iter().map(|(id, _)| id.clone()).collect();
        api::states_of_ours(&cluster.aws(), &ids, cluster.server_id(), cluster.key()).await?
    };
    cluster.clean_up_container_instances(observed, &ours).await;
    Ok(())
}

/// Sets ACTIVE the container instances of instances started again that are still DRAINING (the
/// call after StartInstances failed).
async fn reactivate_restarted(cluster: &Cluster) {
    let profile = cluster.profile();
    let due: Vec<(String, String)> = cluster
        .ec2()
        .state()
        .instances()
        .filter(|r| r.restarting() && r.retiring().is_none())
        .filter_map(|r| {
            let draining = r.container().filter(|c| c.status == ContainerInstanceStatus::Draining);
            draining.map(|c| (r.id().to_string(), c.arn.clone()))
        })
        .collect();
    for (id, arn) in due {
        apply::reactivate(cluster, &profile, &id, &arn).await;
    }
}

/// Drops waiting work GoCD stopped asking for (the job was cancelled or went elsewhere: after its
/// own profile's `AgentRegisterTimeoutMinutes`, at least [`WAITING_EXPIRES_AFTER`]), a warm
/// agent's work that found no room in time ([`WARM_WAITS_AT_MOST`]), and work whose reservation
/// is no longer live.
fn expire_waiting(cluster: &Cluster, now: SystemTime) {
    let limit = |w: &WaitingTask| {
        let minutes = w.spec.profile.agent_register_timeout_minutes;
        Duration::from_secs(u64::from(minutes) * 60).max(WAITING_EXPIRES_AFTER)
    };
    let expired: Vec<(AgentId, String)> = {
        let registry = cluster.registry();
        let mut st = cluster.ec2().state();
        let mut expired = Vec::new();
        st.drop_waiting(|w| {
            let record = registry.get(&w.spec.work.agent_id).filter(|a| a.phase == Phase::Launching);
            let Some(record) = record else { return true };
            // A warm agent not yet given a job: nobody renews its key.
            let (since, most, why) = if record.warm && record.waiting_since.is_some() {
                (w.since, WARM_WAITS_AT_MOST, "this warm agent found no room in time: its key would expire")
            } else {
                (w.last_asked, limit(w), "GoCD stopped asking for this agent: its job is gone")
            };
            let in_time = now.duration_since(since).unwrap_or_default() < most;
            if !in_time {
                let why = format!("{why} (waited {} minutes)", most.as_secs() / 60);
                expired.push((w.spec.work.agent_id.clone(), why));
            }
            !in_time
        });
        expired
    };
    let mut registry = cluster.registry();
    for (id, why) in expired {
        tracing::info!(agent_id = %id, "{why}; dropped");
        registry.stopped(&id, why, now);
    }
}

/// Drops waiting work whose pool no served profile has: the engine retired, or the work's
/// cluster profile was deleted, left EC2 or had its EC2 settings edited since its create-agent
/// (GoCD asks again, and the work is queued anew under the current settings).
fn drop_waiting_of_no_pool(cluster: &Cluster, pools: &Pools) {
    let why = if cluster.retired().is_some() {
        "the cluster profile is retired"
    } else {
        "the cluster profile's EC2 settings changed (or it was deleted, or left EC2) while the agent waited for \
         room: GoCD asks again, and the agent waits under the current settings"
    };
    let dropped: Vec<AgentId> = {
        let mut st = cluster.ec2().state();
        let gone = st.drop_waiting(|w| !pools.keys.contains(&w.pool));
        gone.into_iter().map(|w| w.spec.work.agent_id).collect()
    };
    let now = cluster.now();
    let mut registry = cluster.registry();
    for id in dropped {
        tracing::info!(agent_id = %id, "{why}; dropped");
        registry.stopped(&id, why, now);
    }
}
