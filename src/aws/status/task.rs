//! An ECS task's status: its `lastStatus` and its `desiredStatus` (and a container's
//! `lastStatus`), the steps of ECS's task lifecycle.

use super::aws_values;

aws_values! {
    /// One step of an ECS task's lifecycle, as `lastStatus` or `desiredStatus` names it.
    pub enum TaskStatus {
        /// ECS is preparing the task's network and capacity.
        Provisioning = "PROVISIONING",
        /// Pulling the images, starting the containers.
        Pending = "PENDING",
        /// Setting up after the containers started (load balancers, service discovery).
        Activating = "ACTIVATING",
        /// Running.
        Running = "RUNNING",
        /// Tearing down what `ACTIVATING` set up.
        Deactivating = "DEACTIVATING",
        /// Stopping the containers.
        Stopping = "STOPPING",
        /// Releasing the task's network and capacity.
        Deprovisioning = "DEPROVISIONING",
        /// Stopped.
        Stopped = "STOPPED",
        /// A passing state after the task stopped, which DescribeTasks may show.
        Deleted = "DELETED",
    }
}

impl TaskStatus {
    /// Whether ECS is stopping the task or has stopped it (`DEACTIVATING`, `STOPPING`,
    /// `DEPROVISIONING`, `STOPPED`).
    pub fn is_stopping(&self) -> bool {
        matches!(self, Self::Deactivating | Self::Stopping | Self::Deprovisioning | Self::Stopped)
    }
}

impl From<&aws_sdk_ecs::types::DesiredStatus> for TaskStatus {
    fn from(status: &aws_sdk_ecs::types::DesiredStatus) -> Self {
        Self::from(status.as_str())
    }
}
