//! Cleanup: everything the engine removes that it did not remove in the normal course of a job,
//! decided in one place ([`plan`], pure) and carried out by one function ([`Cluster::clean_up`],
//! `apply.rs`). Four words name what is removed and why:
//!
//! - **orphans**: tasks of this cluster profile that nothing explains (no agent record to adopt
//!   them into, a record already stopped, or a second task of one agent). Found by server-ping's
//!   reconcile in its own refresh; stopped two-phase (marked on one pass, stopped on the next if
//!   still unexplained): [`plan::orphans`].
//! - **strays**: tasks this GoCD server started under a cluster-profile key that no longer
//!   exists, found through GoCD's agents whose ids carry the old key ([`Cluster::stop_strays`]):
//!   [`plan::strays`].
//! - **leftovers**: what this server's tags say is ours but no live profile owns — running tasks
//!   and EC2 instances whose `gocd:cluster-profile` no live profile has
//!   ([`Cluster::stop_leftover_tasks`], [`Cluster::terminate_leftover_instances`]), and the
//!   container instances our terminated instances left registered in a cluster (the EC2 driver's
//!   pass): [`plan::leftover_tasks`], [`plan::leftover_instances`],
//!   [`plan::leftover_container_instances`].
//! - **task definitions**: revisions of ours no agent uses and no elastic profile seen lately
//!   names, at most [`task_definitions::MAX_DEREGISTER_PER_PASS`] a pass and one pass an hour
//!   ([`task_definitions::run`]): [`plan::task_definitions`].
//!
//! Every plan has one shape, [`CleanupPlan`]: its kind (which of the four, for the report) and
//! the task ARNs to stop (each with its reason), instances to terminate, container instances and
//! task-definition revisions to deregister.
//!
//! # Safety rules
//! - Only resources carrying this server's `gocd:server-id` tag are touched; for per-profile ones
//!   (orphans, strays, task definitions, container instances) also the cluster-profile's key.
//!   The reads filter by them and the plan functions check them again.
//! - Orphans are stopped only when unexplained on two passes in a row (the marks go in and out
//!   of [`plan::orphans`]).
//! - Task definitions: one pass an hour per cluster profile, none in the grace after a start,
//!   at most [`task_definitions::MAX_DEREGISTER_PER_PASS`] deregistrations and a bounded number
//!   of reads a pass.
//!
//! Files: `plan/` (the pure decisions, one file per kind), `apply.rs` (the AWS calls through the
//! port, the log lines and health messages), `strays.rs` (the reads for strays and leftovers),
//! `task_definitions.rs` (the once-an-hour state and the reads for task definitions),
//! `retirement.rs` (a cluster profile GoCD deleted or replaced: its engine takes no new work and
//! winds down).

pub(super) mod retirement;

mod apply;
pub mod plan;
pub mod strays;
pub mod task_definitions;

pub use apply::Removed;
pub use plan::{CleanupPlan, Kind};
pub use strays::LEFTOVER_SWEEP_EVERY;

#[cfg(doc)]
use super::Cluster;
