//! The in-memory picture of one cluster profile's agents: which agent was started for which
//! job, its task, and where it is in its life. It is rebuilt from AWS after a restart
//! (`adopt`), so losing it loses nothing. Pure data: no I/O, no clock of its own.
//!
//! Records are read by anyone (`get`, `all`) and changed only through the registry's named
//! transitions. Every state an agent can be in and every transition between them is on one
//! page, `lifecycle.rs`, over the records of `record.rs`; around it, `reuse.rs` decides which waiting agent a job takes (warm
//! starts), `observe.rs` folds a refresh and GoCD's agent list in, and `task_events.rs` what
//! the event queue says.

pub mod lifecycle;
mod observe;
mod record;
pub mod reuse;
pub mod steps;
pub mod task_events;
pub mod tasks;

pub use record::{AgentRecord, JobDone, NewAgent, Phase, Registry, Reservation, REMOVAL_SETTLES};
