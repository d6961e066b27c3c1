//! The `status` ECS gives a cluster, a task-definition revision or a capacity provider: one
//! vocabulary, each resource using part of it.

use super::aws_values;

aws_values! {
    /// The status of a cluster, a task-definition revision or a capacity provider.
    pub enum ResourceStatus {
        /// In use: a cluster takes tasks, a revision may be run, a provider places tasks.
        Active = "ACTIVE",
        /// Deleted or deregistered (ECS still describes it for a while).
        Inactive = "INACTIVE",
        /// Being created (a cluster's or a provider's resources).
        Provisioning = "PROVISIONING",
        /// Being deleted (a cluster's or a provider's resources).
        Deprovisioning = "DEPROVISIONING",
        /// A cluster whose resources could not be created.
        Failed = "FAILED",
        /// A revision on its way out after DeleteTaskDefinitions.
        DeleteInProgress = "DELETE_IN_PROGRESS",
    }
}

impl From<&aws_sdk_ecs::types::TaskDefinitionStatus> for ResourceStatus {
    fn from(status: &aws_sdk_ecs::types::TaskDefinitionStatus) -> Self {
        Self::from(status.as_str())
    }
}

impl From<&aws_sdk_ecs::types::CapacityProviderStatus> for ResourceStatus {
    fn from(status: &aws_sdk_ecs::types::CapacityProviderStatus) -> Self {
        Self::from(status.as_str())
    }
}
