//! What changes in a cluster profile's engine as it works: its agents, the AWS resources it
//! resolved or launched, what happened to it lately, and the locks that keep its passes from
//! overlapping. The fixed part (who it is, how it is configured) stays in [`crate::cluster::Cluster`];
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

use super::locks::Mutex;
use crate::aws::network::Network;
use crate::cluster::accounting::{image_pulls, job_cost, job_wait};
use crate::cluster::agents::Registry;
use crate::cluster::capacity::warm::pools;
use crate::cluster::capacity::{ec2, providers};
use crate::cluster::cleanup::retirement;
use crate::cluster::events::queue;
use crate::cluster::events::Events;
use crate::cluster::job::task_definition::TaskDefinitionRef;
use crate::cluster::job::{assigned, launch};
use crate::cluster::{cleanup, EngineOptions, NetworkKey};
use crate::ids::TaskArn;

/// The changing part of one cluster profile's engine.
#[derive(Debug)]
pub(in crate::cluster) struct State {
    // The agents.
    /// Every agent, changed only through the registry's transitions (`agents/lifecycle.rs`).
    pub(in crate::cluster) registry: Mutex<Registry>,
    /// Agents that took their jobs, to be announced (`job/assigned.rs`).
    pub(in crate::cluster) took: Mutex<Vec<assigned::Took>>,
    /// How long jobs waited for their agents, by elastic profile and phase.
    pub(in crate::cluster) job_waits: Mutex<job_wait::WaitHistograms>,
    /// Image pulls by elastic profile and image, and the images' sizes (`accounting/image_pulls.rs`).
    pub(in crate::cluster) image_pulls: Mutex<image_pulls::ImagePulls>,
    /// Looks at the image pulls so far, each numbered under the registry's lock.
    pub(in crate::cluster) pull_looks: AtomicU64,
    /// Warm pools: unused keys and arrivals (`capacity/warm/pools.rs`).
    pub(in crate::cluster) warm: Mutex<pools::WarmPools>,
    /// What jobs and warm pools cost lately (`accounting/job_cost/`).
    pub(in crate::cluster) cost: Mutex<job_cost::CostState>,

    // What it resolved in AWS, or launched there.
    /// Task definitions by family, each registered (or looked up) once.
    pub(in crate::cluster) task_definitions: Mutex<HashMap<String, Arc<OnceCell<TaskDefinitionRef>>>>,
    /// Which families are in use, for the task-definition cleanup.
    pub(in crate::cluster) task_definition_sweep: cleanup::task_definitions::SweepState,
    /// Subnets and groups, each resolved once.
    pub(in crate::cluster) networks: Mutex<HashMap<NetworkKey, Arc<OnceCell<Network>>>>,
    /// The kinds of the strategy's capacity providers (Fargate, Auto Scaling group, ECS Managed
    /// Instances), learned once.
    pub(in crate::cluster) providers: providers::ProviderCache,
    /// Tasks launched through each capacity provider of `CapacityProviderStrategy`.
    pub(in crate::cluster) provider_launches: launch::ProviderLaunches,
    /// EC2 capacity (instances, waiting work, its loop); empty unless `LaunchType` is EC2.
    pub(in crate::cluster) ec2: ec2::Pool,

    // What happened lately.
    /// Recent events, for reports and server health.
    pub(in crate::cluster) events: Mutex<Events>,
    /// Orphan tasks stopped by the sweep so far.
    pub(in crate::cluster) swept_orphans: AtomicU64,
    /// Task ARNs the last orphan sweep marked (see `cleanup::plan::orphans`).
    pub(in crate::cluster) orphan_marks: Mutex<HashSet<TaskArn>>,
    /// What this profile knows of its event queue (`EventQueueUrl`).
    pub(in crate::cluster) queue: Mutex<queue::QueueStatus>,

    // The engine's own life.
    /// Set once the running tasks were adopted from AWS.
    pub(in crate::cluster) adopted: OnceCell<()>,
    /// Whether the profile was deleted or moved, and which teams' profiles were deleted.
    pub(in crate::cluster) retirement: retirement::RetirementState,
    /// Held while server-ping reconciles this profile: never twice at once.
    pub(in crate::cluster) ping_lock: tokio::sync::Mutex<()>,
    /// Held for one warm-pool pass: passes never overlap.
    pub(in crate::cluster) warm_pass: tokio::sync::Mutex<()>,
}

impl State {
    /// An engine's state before it adopted anything, made at `now`.
    pub(in crate::cluster) fn new(options: &EngineOptions, now: SystemTime) -> Self {
        State {
            registry: Mutex::new(Registry::default()),
            took: Mutex::new(Vec::new()),
            job_waits: Mutex::new(job_wait::WaitHistograms::default()),
            image_pulls: Mutex::new(image_pulls::ImagePulls::default()),
            pull_looks: AtomicU64::new(0),
            warm: Mutex::new(pools::WarmPools::default()),
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
            queue: Mutex::new(queue::QueueStatus::default()),
            adopted: OnceCell::new(),
            retirement: retirement::RetirementState::default(),
            ping_lock: tokio::sync::Mutex::new(()),
            warm_pass: tokio::sync::Mutex::new(()),
        }
    }
}
