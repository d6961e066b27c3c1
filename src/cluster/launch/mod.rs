//! What a job's task is and how it starts: the request's snapshot of its profiles and the
//! launch built from it once (`snapshot`), the cluster profile's guardrails (`guardrails`), the
//! task definition, registered once per family (`task_definition`), the kinds of the strategy's
//! capacity providers (`providers`), and RunTask itself, with the networks it resolves
//! (`run_task`).

pub mod guardrails;
pub mod providers;
pub mod run_task;
pub mod snapshot;
pub mod task_definition;
