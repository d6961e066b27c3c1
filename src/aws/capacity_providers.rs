//! The port's reads of ECS capacity providers: a cluster's default strategy (DescribeClusters)
//! and what each named provider is (DescribeCapacityProviders), each through the account's
//! budget, as plain [`DescribedProvider`]s. What the engine makes of a provider's kind (which
//! task definitions it takes) is the engine's (`cluster::providers`).

use aws_sdk_ecs::types::{CapacityProvider, CapacityProviderType};

use super::status::ResourceStatus;
use super::{AwsClients, AwsError};

/// The kind of capacity a provider gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// `FARGATE` or `FARGATE_SPOT`.
    Fargate,
    /// An Auto Scaling group's instances.
    AutoScaling,
    /// ECS Managed Instances (ECS launches and runs the instances).
    ManagedInstances,
    /// ECS did not describe it (not a provider of this account and region).
    Unknown,
}

/// What a task definition may run on (`requiresCompatibilities`, `compatibilities`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Compatibility {
    /// `FARGATE`.
    Fargate,
    /// `EC2`.
    Ec2,
    /// `MANAGED_INSTANCES`.
    ManagedInstances,
    /// `EXTERNAL`, or a value this plugin does not know.
    Other,
}

impl Compatibility {
    /// ECS's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Compatibility::Fargate => "FARGATE",
            Compatibility::Ec2 => "EC2",
            Compatibility::ManagedInstances => "MANAGED_INSTANCES",
            Compatibility::Other => "EXTERNAL",
        }
    }

    /// From ECS's spelling.
    pub fn from_ecs(value: &str) -> Compatibility {
        match value {
            "FARGATE" => Compatibility::Fargate,
            "EC2" => Compatibility::Ec2,
            "MANAGED_INSTANCES" => Compatibility::ManagedInstances,
            _ => Compatibility::Other,
        }
    }
}

/// One provider as ECS described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedProvider {
    /// Its short name.
    pub name: String,
    /// Its ARN.
    pub arn: Option<String>,
    /// What it is.
    pub kind: ProviderKind,
    /// ECS's status (`ACTIVE`, `INACTIVE`, `UNKNOWN` when ECS gave none).
    pub status: ResourceStatus,
}

impl AwsClients {
    /// The providers of `cluster`'s default capacity provider strategy, in order.
    ///
    /// # Errors
    /// The failed DescribeClusters call, or a cluster ECS does not have.
    pub async fn default_strategy(&self, cluster: &str) -> Result<Vec<String>, AwsError> {
        let out = self.calls.call("DescribeClusters", || self.ecs.describe_clusters().clusters(cluster).send()).await?;
        let found = out.clusters().first().ok_or_else(|| {
            AwsError::in_answer("DescribeClusters", format!("ECS cluster {cluster} was not found: check ClusterName"))
        })?;
        Ok(found.default_capacity_provider_strategy().iter().map(|i| i.capacity_provider().to_string()).collect())
    }

    /// Describes the providers named (one DescribeCapacityProviders).
    ///
    /// # Errors
    /// The failed call.
    pub async fn describe_capacity_providers(&self, names: Vec<String>) -> Result<Vec<DescribedProvider>, AwsError> {
        let request = self.ecs.describe_capacity_providers().set_capacity_providers(Some(names));
        let out = self.calls.call("DescribeCapacityProviders", || request.clone().send()).await?;
        Ok(out.capacity_providers().iter().map(described).collect())
    }
}

/// The plain picture of an SDK capacity provider (doctor reads its own answers with it until
/// its calls move into the port).
pub(crate) fn described(p: &CapacityProvider) -> DescribedProvider {
    DescribedProvider {
        name: p.name().unwrap_or_default().to_string(),
        arn: p.capacity_provider_arn().map(str::to_string),
        kind: kind_of(p),
        status: p.status().map_or_else(|| ResourceStatus::from("UNKNOWN"), ResourceStatus::from),
    }
}

/// The kind of a described provider: its `type`, else which provider block it carries.
fn kind_of(provider: &CapacityProvider) -> ProviderKind {
    match provider.r#type() {
        Some(CapacityProviderType::ManagedInstances) => ProviderKind::ManagedInstances,
        Some(CapacityProviderType::Ec2Autoscaling) => ProviderKind::AutoScaling,
        Some(CapacityProviderType::FargateSpot | CapacityProviderType::Fargate) => ProviderKind::Fargate,
        _ if provider.managed_instances_provider().is_some() => ProviderKind::ManagedInstances,
        _ if provider.auto_scaling_group_provider().is_some() => ProviderKind::AutoScaling,
        _ => ProviderKind::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ecs::types::{AutoScalingGroupProvider, CapacityProviderStatus};

    #[test]
    fn a_described_provider_s_kind() {
        let mi = CapacityProvider::builder().name("mi").r#type(CapacityProviderType::ManagedInstances).build();
        assert_eq!(kind_of(&mi), ProviderKind::ManagedInstances);
        let asg = CapacityProvider::builder()
            .name("asg")
            .status(CapacityProviderStatus::Active)
            .auto_scaling_group_provider(
                AutoScalingGroupProvider::builder().auto_scaling_group_arn("arn:asg").build().unwrap(),
            )
            .build();
        assert_eq!(kind_of(&asg), ProviderKind::AutoScaling, "moto sends no type: the block tells");
        assert_eq!(described(&asg).status, ResourceStatus::Active);
        assert_eq!(kind_of(&CapacityProvider::builder().name("x").build()), ProviderKind::Unknown);
        assert_eq!(described(&CapacityProvider::builder().name("x").build()).status.as_str(), "UNKNOWN");
    }

    #[test]
    fn compatibilities_keep_ecs_spelling() {
        for c in [Compatibility::Fargate, Compatibility::Ec2, Compatibility::ManagedInstances] {
            assert_eq!(Compatibility::from_ecs(c.as_str()), c);
        }
        assert_eq!(Compatibility::from_ecs("EXTERNAL"), Compatibility::Other);
    }
}
