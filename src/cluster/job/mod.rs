//! The verbs of one job's life: create-agent (`create`) takes a snapshot of the profiles,
//! checks them and launches the agent's task or queues it for an EC2 instance (`launch/`); the
//! agent takes its job (`assigned`, should-assign-work) and its work is done (`complete`,
//! job-completion).

pub mod assigned;
pub mod complete;
pub mod create;
