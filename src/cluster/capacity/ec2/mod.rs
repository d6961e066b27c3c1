//! EC2 capacity: the container instances the plugin launches into a cluster profile's account,
//! packs with agent tasks and retires when idle (`LaunchType` `EC2`). One engine serves every
//! cluster profile of its ECS cluster, and holds one pool of instances per profile's EC2
//! settings ([`pools`]): each profile's work is planned and launched with its own settings.
//!
//! - [`plan`]: the pure decisions — where each waiting task goes, how many instances to
//!   launch, which to retire — as functions of a snapshot and a clock, shared by the plugin and
//!   the cost benchmark (`benches/ec2_cost/`); [`plan::parked`] then rewrites a plan for the
//!   stopped-instance pool (`Ec2StoppedInstances`: stop instead of terminate, start a stopped
//!   instance instead of launching).
//! - [`capacity`]: CPU units and MiB an instance type registers with ECS (the port's
//!   `aws::ec2_types::sizes`).
//! - [`pools`]: which pools the engine has (one per served profile's EC2 settings, keyed by
//!   their hash, which each instance carries as its `gocd:ec2-pool` tag), what was learned for
//!   each, and what is left over from settings no profile has any more.
//! - [`catalog`]: the listed instance types (vCPUs, memory, architectures) and AMIs
//!   (architecture, platform, root size) as AWS describes them, once per pool.
//! - [`user_data`]: the script that joins an instance to the cluster (Linux or Windows).
//! - [`instance`]: one instance's record, its states and transitions on one page.
//! - [`pool`]: the engine's instances and waiting work, each of its pool, in memory (rebuilt
//!   from AWS after a restart: instances from their tags, waiting work from GoCD's re-sent
//!   create-agent).
//! - [`report`]: the status report's instance table and counts, of one profile's pool.
//! - [`api`]: the port's EC2 and ECS calls (`aws::ec2`: RunInstances, DescribeInstances by our
//!   tags, container instances, deregister, terminate), with plain data (`aws::ec2_types`).
//!
//! The EC2 loop that acts on all this (observe the cluster, then plan and apply each pool every
//! few seconds while there is work: retire, stop, start, place, launch) is `reconcile/ec2/`.
//!
//! # Invariants
//! - Only instances carrying both our `gocd:server-id` and `gocd:cluster-profile` tags are
//!   described, drained, deregistered, stopped, started or terminated.
//! - Work is placed only on instances of its own profile's pool, and an instance is launched
//!   only with its pool's profile's settings (types, AMI, instance profile, network, tags). An
//!   instance of no served profile's pool takes no work and is retired once it has no task,
//!   once every profile was heard (after a restart: the first server-ping).
//! - A stopped instance is started again only while its `gocd:launch-spec` fingerprint is its
//!   pool's current one; it is neither placed on nor counted against `Ec2MaxInstances`.
//! - An instance with a task on it (ECS's count or one we placed in the last minute) is never
//!   retired; `Ec2MaxInstances` counts instances still starting.
//! - create-agent never waits for capacity: the work waits here, in memory, with its
//!   auto-register key in a [`crate::secret::Secret`].

pub mod catalog;
pub mod instance;
pub mod plan;
pub mod pool;
pub mod pools;
pub mod report;
pub mod user_data;

/// The port's EC2 and ECS container instance calls.
pub use crate::aws::ec2 as api;
/// The port's instance type figures.
pub use crate::aws::ec2_types::sizes as capacity;
pub use crate::aws::ec2_types::{Arch, OsClass, Resources};
pub use crate::aws::status::{ContainerInstanceStatus, Ec2State};
