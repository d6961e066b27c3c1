//! An ECS container instance's `status` (whether its ECS agent is connected is a separate
//! flag, `agentConnected`).

use super::aws_values;

aws_values! {
    /// A container instance's `status`.
    pub enum ContainerInstanceStatus {
        /// Takes new tasks.
        Active = "ACTIVE",
        /// Takes no new tasks; its running tasks go on.
        Draining = "DRAINING",
        /// Registering (ENI trunking, an instance attaching).
        Registering = "REGISTERING",
        /// Deregistering.
        Deregistering = "DEREGISTERING",
        /// Its registration failed.
        RegistrationFailed = "REGISTRATION_FAILED",
        /// Deregistered: ECS still lists it for a while.
        Inactive = "INACTIVE",
    }
}

impl From<&aws_sdk_ecs::types::ContainerInstanceStatus> for ContainerInstanceStatus {
    fn from(status: &aws_sdk_ecs::types::ContainerInstanceStatus) -> Self {
        Self::from(status.as_str())
    }
}
