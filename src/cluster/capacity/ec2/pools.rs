//! An engine's EC2 pools. The cluster profiles that name one ECS cluster in one account share
//! one engine (`docs/design.md`, "Where the truth lives"), yet each plans its EC2 capacity with
//! its own settings: the instances launched under one profile's EC2 settings are one pool, with
//! that profile's instance types and AMIs (its catalog), limits, launch policy, launch backoff
//! and pre-pulled images ([`PoolMemory`]). A Windows profile and a Linux one on one cluster thus
//! never judge or launch each other's work.
//!
//! A pool is keyed by [`pool_key`], a short hash of the profile's EC2 settings, which every
//! instance carries as its `gocd:ec2-pool` tag: after a restart each instance is adopted into its
//! profile's pool by that tag. Profiles whose EC2 settings are identical plan alike, and share
//! one pool.
//!
//! An instance whose pool no served profile has (its profile was deleted, left EC2, or had its
//! EC2 settings edited; or an earlier version launched it without the tag) is left over
//! ([`Group::LeftOver`]): it takes no new work and is retired once it has no task. After a
//! restart that waits until a server-ping has handed the engine every cluster profile GoCD has
//! ([`Pools::settled`]): until then an instance of a profile not heard yet is left alone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::catalog::Catalog;
use super::Resources;
use crate::cluster::base::identity::short_hash;
use crate::ids::Ec2PoolKey;
use crate::settings::{ClusterProfile, Ec2Capacity};

/// The key of the pool of `profile`'s EC2 settings (`None` unless its `LaunchType` is EC2): a
/// short hash of every `Ec2*` setting and of what else its instances are launched with (subnets,
/// security groups, `AssignPublicIp`, `Tags`). Any other property (`MaxAgents`, credentials,
/// images...) may change without changing the pool.
pub fn pool_key(profile: &ClusterProfile) -> Option<Ec2PoolKey> {
    let Ec2Capacity {
        instance_types,
        instance_profile,
        ami_ids,
        min_instances,
        max_instances,
        idle_minutes,
        register_timeout_minutes,
        scale_out_wait_seconds,
        spot,
        key_pair,
        root_volume_gib,
        user_data,
        stopped_instances,
    } = profile.ec2.as_ref()?;
    let tags: Vec<String> = profile.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let lines = [
        format!("Ec2InstanceType={}", instance_types.join(",")),
        format!("Ec2InstanceProfile={instance_profile}"),
        format!("Ec2AmiId={}", ami_ids.join(",")),
        format!("Ec2MinInstances={min_instances}"),
        format!("Ec2MaxInstances={max_instances}"),
        format!("Ec2IdleMinutes={idle_minutes}"),
        format!("Ec2RegisterTimeoutMinutes={register_timeout_minutes}"),
        format!("Ec2ScaleOutWaitSeconds={scale_out_wait_seconds}"),
        format!("Ec2Spot={spot}"),
        format!("Ec2KeyPair={}", key_pair.as_deref().unwrap_or("")),
        format!("Ec2RootVolumeGiB={root_volume_gib}"),
        format!("Ec2UserData={}", user_data.as_deref().unwrap_or("")),
        format!("Ec2StoppedInstances={stopped_instances}"),
        format!("SubnetIds={}", profile.subnet_ids.join(",")),
        format!("SecurityGroupIds={}", profile.security_group_ids.join(",")),
        format!("AssignPublicIp={}", profile.assign_public_ip),
        format!("Tags={}", tags.join("\n")),
    ];
    let parts: Vec<&str> = lines.iter().map(String::as_str).collect();
    Some(short_hash(&parts).into())
}

/// One pool a served cluster profile has: its key and the profile its instances are planned and
/// launched with.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// [`pool_key`] of `profile`.
    pub key: Ec2PoolKey,
    /// The cluster profile as GoCD last sent it (the first by settings fingerprint, when several
    /// share the pool: their EC2 settings are the same).
    pub profile: Arc<ClusterProfile>,
    /// Its EC2 settings.
    pub cfg: Ec2Capacity,
}

/// The engine's pools for one pass.
#[derive(Debug, Clone, Default)]
pub struct Pools {
    /// The pools of the served cluster profiles, in the order of their settings fingerprints;
    /// none once the engine retired.
    pub current: Vec<PoolConfig>,
    /// Their keys.
    pub keys: BTreeSet<Ec2PoolKey>,
    /// Whether an instance of no current pool is known to be left over: a server-ping handed
    /// the engine every profile GoCD has, or the engine retired.
    pub settled: bool,
}

impl Pools {
    /// The pools of the cluster profiles an engine serves now (`profiles`, all GoCD has when
    /// `heard_all`); none when the engine `retired`.
    pub fn of(profiles: Vec<Arc<ClusterProfile>>, heard_all: bool, retired: bool) -> Pools {
        if retired {
            return Pools { settled: true, ..Pools::default() };
        }
        let mut pools = Pools { settled: heard_all, ..Pools::default() };
        for profile in profiles {
            let (Some(key), Some(cfg)) = (pool_key(&profile), profile.ec2.clone()) else { continue };
            if pools.keys.insert(key.clone()) {
                pools.current.push(PoolConfig { key, profile, cfg });
            }
        }
        pools
    }

    /// The current pool of this key.
    pub fn get(&self, key: &Ec2PoolKey) -> Option<&PoolConfig> {
        self.current.iter().find(|p| p.key == *key)
    }
}

/// The served cluster profile whose EC2 settings are pool `key`'s (the first by settings
/// fingerprint, when several share it), retired engine or not; `None` when no served profile
/// has that pool (the instance is left over, untagged, or its profile not heard since the
/// process started).
pub fn pool_profile(profiles: Vec<Arc<ClusterProfile>>, key: &Ec2PoolKey) -> Option<Arc<ClusterProfile>> {
    profiles.into_iter().find(|p| pool_key(p).as_ref() == Some(key))
}

/// Whether an engine has EC2 capacity to manage: the profile GoCD sent `last` is EC2, or
/// another of the `profiles` it serves on the same ECS cluster is.
pub fn serves_ec2(last: &ClusterProfile, profiles: &[Arc<ClusterProfile>]) -> bool {
    last.ec2.is_some() || profiles.iter().any(|p| p.ec2.is_some())
}

/// Which instances and waiting work one plan covers.
#[derive(Debug, Clone, Copy)]
pub enum Group<'a> {
    /// Those of one pool.
    Pool(&'a Ec2PoolKey),
    /// Those of no pool among these current ones (or of none at all): left over.
    LeftOver(&'a BTreeSet<Ec2PoolKey>),
}

impl Group<'_> {
    /// Whether something of pool `pool` is in the group.
    pub fn holds(&self, pool: Option<&Ec2PoolKey>) -> bool {
        match (self, pool) {
            (Group::Pool(key), Some(pool)) => *key == pool,
            (Group::Pool(_), None) => false,
            (Group::LeftOver(current), pool) => pool.is_none_or(|p| !current.contains(p)),
        }
    }

    /// The pool's key, when the group is one pool.
    pub fn key(&self) -> Option<&Ec2PoolKey> {
        match self {
            Group::Pool(key) => Some(key),
            Group::LeftOver(_) => None,
        }
    }
}

/// Counters for the status report.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Counters {
    /// Instances launched.
    pub launched: u64,
    /// Of which after spot was refused.
    pub spot_fallbacks: u64,
    /// Instances terminated.
    pub terminated: u64,
    /// Tasks started on instances.
    pub placed: u64,
    /// Idle instances stopped into the stopped pool (`Ec2StoppedInstances`).
    pub stopped: u64,
    /// Stopped instances started again instead of launching new ones.
    pub restarted: u64,
}

/// What the engine learned and decided for one pool: kept across passes, rebuilt after a
/// restart (the catalog is read again, the rest starts afresh).
#[derive(Debug, Default)]
pub struct PoolMemory {
    /// The listed types and AMIs as AWS described them (read at the pool's first pass).
    catalog: Option<Arc<Catalog>>,
    /// What instances of each type registered (the truth beats the estimate).
    registered_capacity: BTreeMap<String, Resources>,
    /// No launch before this time (after a failed RunInstances), and the current backoff.
    launch_backoff: Option<(SystemTime, Duration)>,
    /// The subnet (index into the profile's) the next launch tries first: past the last one
    /// that refused or launched, so a zone that refused is not the first asked again.
    next_subnet: usize,
    /// Spot launches so far: the round-robin over fitting types continues from here.
    spot_turn: usize,
    /// The images of the elastic profiles this pool's work ran, the most recent first (at most
    /// [`IMAGES_KEPT`]): new instances pull them at boot.
    images: Vec<String>,
    /// Its totals, for the status report.
    counters: Counters,
}

/// How many images [`PoolMemory::images`] keeps for the pre-pull at boot.
const IMAGES_KEPT: usize = 20;

/// First and longest pause of a pool's launches after RunInstances failed.
const LAUNCH_BACKOFF: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(300));

impl PoolMemory {
    /// The pool's types and AMIs as AWS last described them, if read.
    pub fn catalog(&self) -> Option<&Arc<Catalog>> {
        self.catalog.as_ref()
    }

    /// Keeps a new description of the pool's types and AMIs (`None`: forget it, read again).
    pub fn set_catalog(&mut self, catalog: Option<Catalog>) {
        self.catalog = catalog.map(Arc::new);
    }

    /// What an instance of this type registered in the pool, if one did.
    pub fn registered_capacity(&self, instance_type: &str) -> Option<Resources> {
        self.registered_capacity.get(instance_type).copied()
    }

    /// An instance of this type registered with this much.
    pub fn registered(&mut self, instance_type: &str, total: Resources) {
        self.registered_capacity.insert(instance_type.to_string(), total);
    }

    /// Whether the pool's launches pause at `now` after a failed RunInstances.
    pub fn backing_off(&self, now: SystemTime) -> bool {
        self.launch_backoff.is_some_and(|(until, _)| now < until)
    }

    /// The current pause of launches after a failure, if any.
    pub fn launch_backoff(&self) -> Option<Duration> {
        self.launch_backoff.map(|(_, pause)| pause)
    }

    /// A launch failed at `now`: the next waits [`LAUNCH_BACKOFF`]'s first pause, doubled at
    /// each failure in a row up to its longest. Returns the pause.
    pub fn launch_failed(&mut self, now: SystemTime) -> Duration {
        let next = self.launch_backoff.map_or(LAUNCH_BACKOFF.0, |(_, b)| (b * 2).min(LAUNCH_BACKOFF.1));
        self.launch_backoff = Some((now + next, next));
        next
    }

    /// `n` instances launched (`fell_back`: on-demand after spot was refused); launches no
    /// longer pause.
    pub fn launched(&mut self, n: usize, fell_back: bool) {
        self.counters.launched += n as u64;
        if fell_back {
            self.counters.spot_fallbacks += n as u64;
        }
        self.launch_backoff = None;
    }

    /// The subnet (index into the profile's `n`) the next launch tries first.
    pub fn next_subnet(&self, n: usize) -> usize {
        self.next_subnet % n.max(1)
    }

    /// A launch is tried in subnet `index` of `n`: the next starts past it.
    pub fn tried_subnet(&mut self, index: usize, n: usize) {
        self.next_subnet = (index + 1) % n.max(1);
    }

    /// Spot launches so far: the round-robin over fitting types continues from here.
    pub fn spot_turn(&self) -> usize {
        self.spot_turn
    }

    /// `n` spot launches were asked for.
    pub fn turned_spot(&mut self, n: usize) {
        self.spot_turn += n;
    }

    /// The images the pool's work ran, the most recent first.
    pub fn images(&self) -> &[String] {
        &self.images
    }

    /// Records an image of work queued in the pool, most recent first.
    pub fn saw_image(&mut self, image: &str) {
        self.images.retain(|i| i != image);
        self.images.insert(0, image.to_string());
        self.images.truncate(IMAGES_KEPT);
    }

    /// Its totals, for the status report.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Counts in its totals.
    pub fn count(&mut self, add: impl FnOnce(&mut Counters)) {
        add(&mut self.counters);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::tests::fixtures::props;

    fn profile(extra: &[(&str, &str)]) -> ClusterProfile {
        let mut p = props(&[
            ("ClusterName", "ci"),
            ("LaunchType", "EC2"),
            ("Ec2InstanceType", "c5.xlarge"),
            ("Ec2AmiId", "ami-0abcdef1234567890"),
            ("Ec2InstanceProfile", "ecs-agents"),
        ]);
        p.extend(props(extra));
        ClusterProfile::parse(&p).expect("a valid EC2 cluster profile")
    }

    #[test]
    fn the_pool_is_the_ec2_settings_not_every_property() {
        let base = pool_key(&profile(&[])).expect("an EC2 profile has a pool");
        assert_eq!(base.len(), 12);
        let other_keys = [("MaxAgents", "40"), ("GoServerUrl", "https://gocd.example/go")];
        assert_eq!(pool_key(&profile(&other_keys)), Some(base.clone()), "any other property may change");
        for (key, value) in [
            ("Ec2InstanceType", "m5.4xlarge"),
            ("Ec2AmiId", "ami-0fedcba9876543210"),
            ("Ec2MaxInstances", "9"),
            ("Ec2Spot", "true"),
            ("SubnetIds", "subnet-0a1b2c3d"),
            ("Tags", "team=mobile"),
        ] {
            assert_ne!(pool_key(&profile(&[(key, value)])), Some(base.clone()), "{key}");
        }
        let fargate = ClusterProfile::parse(&props(&[("ClusterName", "ci")])).expect("a Fargate profile");
        assert_eq!(pool_key(&fargate), None);
    }

    #[test]
    fn left_over_is_what_no_current_pool_holds() {
        let (a, b): (Ec2PoolKey, Ec2PoolKey) = ("aaaaaaaaaaaa".into(), "bbbbbbbbbbbb".into());
        let current = BTreeSet::from([a.clone()]);
        assert!(Group::Pool(&a).holds(Some(&a)) && !Group::Pool(&a).holds(Some(&b)) && !Group::Pool(&a).holds(None));
        let left = Group::LeftOver(&current);
        assert!(!left.holds(Some(&a)) && left.holds(Some(&b)) && left.holds(None), "untagged ones too");
    }
}
