//! What changes in a cluster profile's engine as it works: its agents, the AWS resources it
//! resolved or launched, what happened to it lately, and the locks that keep its passes from
//! overlapping. The fixed part (who it is, how it is configured) stays in [`super::Cluster`];
//! everything here is rebuilt from AWS after a restart (`Cluster::ensure_adopted`) or learned
//! again on the next request.
//!
//! Each part has its own lock, never held across an `.await` (the pass locks excepted, which
//! exist to be held across one), so no request waits for another's AWS call. Almost every lock
//! is taken alone; the few held together and their order, checked in debug and test builds
//! ([`super::locks`]), are in docs/architecture.md, "Locks".

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::OnceCell;

use super::events::Events;
use super::locks::Mutex;
use super::registry::Registry;
use super::task_definition::TaskDefinitionRef;
use super::{
    assigned, cleanup, ec2, event_queue, image_pulls, job_cost, job_wait, launch, providers, retirement, warm_pools,
    EngineOptions, NetworkKey,
};
use crate::aws::network::Network;
use crate::ids::TaskArn;

/// The changing part of one cluster profile's engine.
#[derive(Debug)]
pub(super) struct State {
    // The agents.
    /// Every agent, changed only through the registry's transitions (`registry/lifecycle.rs`).
    pub(super) registry: Mutex<Registry>,
    /// Agents that took their jobs, to be announced (`assigned.rs`).
    pub(super) took: Mutex<Vec<assigned::Took>>,
    /// How long jobs waited for their agents, by elastic profile and phase.
    pub(super) job_waits: Mutex<job_wait::WaitHistograms>,
    /// Image pulls by elastic profile and image, and the images' sizes (`image_pulls.rs`).
    pub(super) image_pulls: Mutex<image_pulls::ImagePulls>,
    /// Looks at the image pulls so far, each numbered under the registry's lock.
    pub(super) pull_looks: AtomicU64,
    /// Warm pools: unused keys and arrivals (`warm_pools.rs`).
    pub(super) warm: Mutex<warm_pools::WarmPools>,
    /// What jobs and warm pools cost lately (`job_cost.rs`).
    pub(super) cost: Mutex<job_cost::CostState>,

    // What it resolved in AWS, or launched there.
    /// Task definitions by family, each registered (or looked up) once.
    pub(super) task_definitions: Mutex<HashMap<String, Arc<OnceCell<TaskDefinitionRef>>>>,
    /// Which families are in use, for the task-definition cleanup.
    pub(super) task_definition_sweep: cleanup::task_definitions::SweepState,
    /// Subnets and groups, each resolved once.
    pub(super) networks: Mutex<HashMap<NetworkKey, Arc<OnceCell<Network>>>>,
    /// The kinds of the strategy's capacity providers (Fargate, Auto Scaling group, ECS Managed
    /// Instances), learned once.
    pub(super) providers: providers::ProviderCache,
    /// Tasks launched through each capacity provider of `CapacityProviderStrategy`.
    pub(super) provider_launches: launch::ProviderLaunches,
    /// EC2 capacity (instances, waiting work, its loop); empty unless `LaunchType` is EC2.
    pub(super) ec2: ec2::Pool,

    // What happened lately.
    /// Recent events, for reports and server health.
    pub(super) events: Mutex<Events>,
    /// Orphan tasks stopped by the sweep so far.
    pub(super) swept_orphans: AtomicU64,
    /// Task ARNs the last orphan sweep marked (see `cleanup::plan::orphans`).
    pub(super) orphan_marks: Mutex<HashSet<TaskArn>>,
    /// What this profile knows of its event queue (`EventQueueUrl`).
    pub(super) queue: Mutex<event_queue::QueueStatus>,

    // The engine's own life.
    /// Set once the running tasks were adopted from AWS.
    pub(super) adopted: OnceCell<()>,
    /// Whether the profile was deleted or moved, and which teams' profiles were deleted.
    pub(super) retirement: retirement::RetirementState,
    /// Held while server-ping reconciles this profile: never twice at once.
    pub(super) ping_lock: tokio::sync::Mutex<()>,
    /// Held for one warm-pool pass: passes never overlap.
    pub(super) warm_pass: tokio::sync::Mutex<()>,
}

impl State {
    /// An engine's state before it adopted anything, made at `now`.
    pub(super) fn new(options: &EngineOptions, now: SystemTime) -> Self {
        State {
            registry: Mutex::new(Registry::default()),
            took: Mutex::new(Vec::new()),
            job_waits: Mutex::new(job_wait::WaitHistograms::default()),
            image_pulls: Mutex::new(image_pulls::ImagePulls::default()),
            pull_looks: AtomicU64::new(0),
            warm: Mutex::new(warm_pools::WarmPools::default()),
            cost: Mutex::new(job_cost::CostState::default()),
            task_definitions: Mutex::new(HashMap::new()),
            task_definition_sweep: cleanup::task_definitions::SweepState::new(now, options.task_definition_sweep_after),
            networks: Mutex::new(HashMap::new()),
            providers: providers::ProviderCache::default(),
            provider_launches: launch::ProviderLaunches::default(),
            ec2: ec2::Pool::default(),
            events: Mutex::new(Events::default()),
            swept_orphans: AtomicU64::new(0),
            orphan_marks: Mutex::new(HashSet::new()),
            queue: Mutex::new(event_queue::QueueStatus::default()),
            adopted: OnceCell::new(),
            retirement: retirement::RetirementState::default(),
            ping_lock: tokio::sync::Mutex::new(()),
            warm_pass: tokio::sync::Mutex::new(()),
        }
    }
}
