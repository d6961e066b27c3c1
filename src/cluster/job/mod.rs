//! One job's way through the engine, in order: create-agent (`create`) takes a snapshot of the
//! profiles (`snapshot`), checks them against the cluster profile's guardrails (`guardrails`),
//! registers the task definition (`task_definition`) and launches the task (`launch`); the agent
//! takes its job (`assigned`) and its work is done (`complete`).

pub(super) mod assigned;
pub mod complete;
pub(super) mod create;
pub mod guardrails;
pub mod launch;
pub(super) mod snapshot;
pub mod task_definition;
