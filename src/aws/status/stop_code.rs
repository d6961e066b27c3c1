//! Why ECS stopped a task: its `stopCode`.

use super::aws_values;

aws_values! {
    /// A task's `stopCode`.
    pub enum StopCode {
        /// The task never ran: an image pull, a secret, the network or a container failed.
        TaskFailedToStart = "TaskFailedToStart",
        /// An essential container exited.
        EssentialContainerExited = "EssentialContainerExited",
        /// Someone called StopTask.
        UserInitiated = "UserInitiated",
        /// A service's scheduler stopped it.
        ServiceSchedulerInitiated = "ServiceSchedulerInitiated",
        /// Fargate Spot took its capacity back.
        SpotInterruption = "SpotInterruption",
        /// Its instance or Fargate capacity was retired.
        TerminationNotice = "TerminationNotice",
        /// ECS stopped it for the health of the infrastructure under it.
        InfrastructureHealth = "InfrastructureHealth",
    }
}

impl From<&aws_sdk_ecs::types::TaskStopCode> for StopCode {
    fn from(code: &aws_sdk_ecs::types::TaskStopCode) -> Self {
        Self::from(code.as_str())
    }
}
