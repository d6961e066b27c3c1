//! The actions the engine takes on an agent once it has decided (server-ping's plan, an event
//! from the queue, a warm pool retiring an idle agent), as data: `reconcile/apply.rs` carries
//! them out.

use crate::ids::{AgentId, TaskArn};
use crate::protocol::types::JobIdentifier;

/// One thing to do to an agent, its task or its job: what server-ping plans, and what the
/// event queue and the warm pools ask for, all carried out by server-ping's apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Stop a task that should not run any more.
    StopTask {
        /// The agent.
        agent_id: AgentId,
        /// Its task.
        task_arn: TaskArn,
        /// Why, for the stop reason, the log and the job console.
        reason: String,
        /// The job to tell, when it is still waiting.
        job: Option<JobIdentifier>,
    },
    /// Disable and delete a GoCD agent (its task is gone or going).
    RemoveAgent {
        /// The agent.
        agent_id: AgentId,
        /// Why.
        reason: String,
    },
    /// GoCD no longer asks for the job an idle agent was started for (it was cancelled while
    /// it waited, or another agent took it): the job's trace ends, unless an agent took it.
    JobGone {
        /// The job.
        job: JobIdentifier,
    },
    /// Tell operators and the job that a task stopped before its job completed.
    ReportUnexpectedStop {
        /// The agent.
        agent_id: AgentId,
        /// The job it ran.
        job: JobIdentifier,
        /// ECS's stop reason and exit codes.
        reason: String,
    },
}
