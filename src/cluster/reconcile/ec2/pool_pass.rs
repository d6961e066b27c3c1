//! One share of an EC2 pass, after the cluster was observed: a pool's instances and waiting work
//! planned with its own cluster profile ([`crate::cluster::capacity::ec2::plan`], then [`crate::cluster::capacity::ec2::plan::parked`] for its
//! stopped instances) and the plan applied (retire, stop, refuse, start, start a stopped
//! instance again or launch), or the instances left over from pools no profile has, retired as
//! they empty ([`wind_down`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::{apply, launch};
use crate::cluster::capacity::ec2::plan::parked::Reuse;
use crate::cluster::capacity::ec2::plan::{self, Plan, RetireReason};
use crate::cluster::capacity::ec2::pools::{Group, PoolConfig};
use crate::cluster::Cluster;
use crate::ids::Ec2PoolKey;
use crate::settings::{ClusterProfile, Ec2Capacity};

/// What one share plans.
#[derive(Debug, Clone, Copy)]
pub(super) enum Share<'a> {
    /// A pool of a served cluster profile, with that profile.
    Pool(&'a PoolConfig),
    /// The instances of no pool among these current ones.
    LeftOver(&'a BTreeSet<Ec2PoolKey>),
}

impl Share<'_> {
    fn group(&self) -> Group<'_> {
        match self {
            Share::Pool(pool) => Group::Pool(&pool.key),
            Share::LeftOver(current) => Group::LeftOver(current),
        }
    }

    /// The settings it is planned with: the pool's, or those of winding down.
    fn cfg(&self) -> Ec2Capacity {
        match self {
            Share::Pool(pool) => pool.cfg.clone(),
            Share::LeftOver(_) => wind_down(),
        }
    }
}

/// Plans and applies one share; returns how long until its next idle or register deadline.
pub(super) async fn run(cluster: &Cluster, share: Share<'_>) -> Option<Duration> {
    let (group, cfg) = (share.group(), share.cfg());
    let (mut decided, reuse) = decide(cluster, share, &cfg);
    if decided != Plan::default() || reuse != Reuse::default() {
        tracing::debug!(?decided, ?reuse, pool = ?group.key(), "EC2 plan");
    }
    // Draining, deregistering and stopping name the ECS cluster, which every pool shares.
    let profile: Arc<ClusterProfile> = match share {
        Share::Pool(pool) => pool.profile.clone(),
        Share::LeftOver(_) => cluster.profile(),
    };
    for r in &decided.retire {
        apply::retire(cluster, &profile, r).await;
    }
    for id in &reuse.stop {
        apply::stop(cluster, &profile, id).await;
    }
    if let Share::Pool(pool) = share {
        apply::refuse_too_big(cluster, pool, &decided.too_big).await;
        apply::refuse_no_type(cluster, pool, &decided.no_type).await;
        for p in &decided.start {
            apply::start(cluster, p).await;
        }
        start_or_launch(cluster, pool, &mut decided, reuse).await;
    }
    let st = cluster.ec2().state();
    st.next_deadline(&group, &st.policy(&group, &cfg), cluster.now())
}

/// The plan of one share (`cfg`: its settings), from the state as the pass observed it: the
/// planner's, then the stopped instances'. A left-over share's retirements are all for being
/// left over, but for the broken.
fn decide(cluster: &Cluster, share: Share<'_>, cfg: &Ec2Capacity) -> (Plan, Reuse) {
    let group = share.group();
    let st = cluster.ec2().state();
    let (slots, policy) = (st.slots(&group), st.policy(&group, cfg));
    let mut decided = plan::plan(&slots, &st.demands(&group), &policy, cluster.now());
    let catalog = st.memory(group.key()).and_then(|m| m.catalog().cloned());
    let current = |os, arch| match share {
        Share::Pool(pool) => {
            launch::current_fingerprint(cluster, &pool.profile, &pool.cfg, catalog.as_ref()?, os, arch)
        }
        // Nothing left over is started again.
        Share::LeftOver(_) => None,
    };
    let reuse = plan::parked::reuse(&mut decided, &st.parked(&group, current), &slots, &policy, cfg.stopped_instances);
    if let Share::LeftOver(_) = share {
        let broken = [RetireReason::NeverRegistered, RetireReason::Unhealthy];
        decided
            .retire
            .iter_mut()
            .filter(|r| !broken.contains(&r.reason))
            .for_each(|r| r.reason = RetireReason::LeftOver);
    }
    (decided, reuse)
}

/// Starts the stopped instances the plan chose again (one EC2 will not start now is replaced
/// by the launch it stood for), then launches: on-demand where the work must run on demand, else
/// as the profile says. Nothing while the pool's launches back off.
async fn start_or_launch(cluster: &Cluster, pool: &PoolConfig, decided: &mut Plan, reuse: Reuse) {
    let now = cluster.now();
    let backing_off = {
        let st = cluster.ec2().state();
        st.memory(Some(&pool.key)).is_some_and(|m| m.backing_off(now))
    };
    if !backing_off {
        for r in reuse.start {
            if !apply::restart(cluster, &pool.profile, &r.instance).await {
                let launches = if r.on_demand { &mut decided.launch_on_demand } else { &mut decided.launch };
                launches.push(r.launch);
            }
        }
    }
    if !decided.launch_on_demand.is_empty() {
        let on_demand = Ec2Capacity { spot: false, ..pool.cfg.clone() };
        launch::launch(cluster, pool, &on_demand, &decided.launch_on_demand).await;
    }
    if !decided.launch.is_empty() {
        if pool.cfg.spot {
            cluster.ec2().state().memory_mut(&pool.key).turned_spot(decided.launch.len());
        }
        launch::launch(cluster, pool, &pool.cfg, &decided.launch).await;
    }
}

/// Limits for instances of no current pool: nothing launched or started again, and each retired
/// (terminated, never kept stopped) once it has had no task for a minute.
fn wind_down() -> Ec2Capacity {
    Ec2Capacity {
        instance_types: Vec::new(),
        instance_profile: String::new(),
        ami_ids: Vec::new(),
        min_instances: 0,
        max_instances: 0,
        idle_minutes: 1,
        register_timeout_minutes: 5,
        scale_out_wait_seconds: 0,
        spot: false,
        key_pair: None,
        root_volume_gib: 30,
        user_data: None,
        stopped_instances: 0,
    }
}
