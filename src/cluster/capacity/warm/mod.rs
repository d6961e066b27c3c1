//! Warm agents: idle, registered agents kept ready for one elastic profile pair (elastic profile
//! and cluster profile) and GoCD environment, so that a job finds an agent at once instead of
//! waiting for a task to be provisioned, pull its image and start the GoCD agent. This module is
//! the pool's pure planner, shared by the plugin and the job-wait benchmark
//! (`benches/job_wait`): functions of a snapshot and a clock, no I/O, no clock of their own.
//!
//! - [`schedule`]: `WarmSchedule`, when warm agents are kept (weekday and time windows in an
//!   IANA time zone; empty means always);
//! - [`mod@target`]: `WarmAgents`, how many are kept (a number, or `auto` sized from the arrivals of
//!   the last hour and of the coming hour on the last three days);
//! - [`mod@plan`]: one pass over a pool — which unused keys start warm agents, which idle agents
//!   retire, which keys are dropped;
//! - [`pools`]: the pools of one cluster profile at run time, and the pass that applies the plan
//!   (the one part here that acts).
//!
//! # The key rule
//!
//! GoCD registers an elastic agent only with an ephemeral auto-register key that came with a
//! create-agent request: each key is single use and expires 30 minutes after GoCD made it
//! (`gocd.ephemeral.auto.register.key.expiry.millis`, [`plan::KEY_LIFETIME`]). The plugin has no
//! other way to get one. So a warm agent can only be started with a key that
//!
//! - no agent has used: the key of a create-agent whose job was served by a warm or kept agent
//!   (that job needed no new agent), or of a re-sent create-agent for a job already being
//!   served; a job started cold uses its own key;
//! - is young enough for the agent to register before the key expires: the plugin uses a key
//!   only while it is at most [`plan::KEY_MAX_AGE`] (20 minutes) old, which leaves 10 minutes
//!   for the task to be provisioned, pull its image and for the agent to start and register —
//!   several times the one to two minutes that takes on Fargate or on a running EC2 instance.
//!   Older keys are dropped (`WarmPlan::drop_keys`) and never used.
//!
//! Among the usable keys the oldest is used first: it is the one closest to expiring, so using
//! it first wastes the fewest keys, and every key used is still within the margin above.
//!
//! Hence a pool first forms from agents kept after their jobs (a job started cold leaves no
//! unused key), and is refreshed by agents started on the keys of the jobs it served. After a
//! quiet stretch longer than [`plan::KEY_MAX_AGE`] no key is left: the first jobs after a quiet
//! night start cold, and the pool forms again from their agents. Keys are held in memory only
//! and are never logged.
//!
//! Warm agents count within `MaxAgents`: the planner starts no more than the headroom it is
//! given. Lowering the target or leaving the schedule's window (the target is then 0) retires the
//! surplus idle agents, those idle longest first, at the next pass.

pub mod pools;

pub mod plan;
pub mod target;

/// When a pool keeps warm agents (an elastic-profile setting, parsed with the others).
pub use crate::settings::warm_schedule as schedule;

pub use plan::{key_usable, plan, IdleAgent, PoolView, UnusedKey, WarmPlan, KEY_LIFETIME, KEY_MAX_AGE};
pub use schedule::{ScheduleError, WarmSchedule};
pub use target::{
    auto_size, earlier_burst, recent_burst, target, WarmAgents, WarmAgentsError, AUTO_AHEAD, AUTO_LOOKBACK, AUTO_MAX,
    AUTO_MEMORY, AUTO_MEMORY_DAYS, MAX_WARM_AGENTS,
};
