//! What to remove and why, as pure functions of what was observed: one file per kind, every one
//! returning a [`CleanupPlan`]. No I/O and no clock here; the reads happen before (reconcile's
//! refresh, `strays.rs`, `task_definitions.rs`, the EC2 driver), the calls after (`apply.rs`).

mod leftovers;
mod orphans;
mod removals;
mod task_definitions;

pub use leftovers::{
    is_leftover_task, leftover_container_instances, leftover_instances, leftover_tasks, strays, Unknown, GONE,
};
pub use orphans::{orphans, Orphans};
pub use removals::{CleanupPlan, Kind};
pub use task_definitions::{
    family_of, task_definitions, Budget, Revision, MAX_DEREGISTER_PER_PASS, MAX_DESCRIBE_PER_PASS,
};
