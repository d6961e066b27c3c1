//! The port's plain EC2 data: what DescribeInstances, DescribeContainerInstances,
//! DescribeInstanceTypes and DescribeImages say, as the engine reads it (CPU units and MiB,
//! architectures, OS classes), never an SDK type.

pub mod sizes;

use std::time::SystemTime;

use serde::Serialize;

use super::status::{ContainerInstanceStatus, Ec2State};
use crate::ids::Ec2PoolKey;
pub use crate::platform::{Arch, OsClass};

/// CPU units (1024 a vCPU) and memory in MiB, as ECS counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Resources {
    /// CPU units.
    pub cpu: u32,
    /// MiB.
    pub memory: u32,
}

impl Resources {
    /// `cpu` units and `memory` MiB.
    pub const fn new(cpu: u32, memory: u32) -> Self {
        Resources { cpu, memory }
    }

    /// Whether `need` fits into this much room.
    pub fn fits(self, need: Resources) -> bool {
        need.cpu <= self.cpu && need.memory <= self.memory
    }

    /// What is left after taking `used` (never below zero).
    pub fn minus(self, used: Resources) -> Resources {
        Resources { cpu: self.cpu.saturating_sub(used.cpu), memory: self.memory.saturating_sub(used.memory) }
    }

    /// The sum.
    pub fn plus(self, more: Resources) -> Resources {
        Resources { cpu: self.cpu.saturating_add(more.cpu), memory: self.memory.saturating_add(more.memory) }
    }

    /// The larger of this amount's CPU and memory shares of `whole` (0.0 to 1.0 when it fits):
    /// the dominant share, by which tasks are sorted and bins compared.
    pub fn share_of(self, whole: Resources) -> f64 {
        let part = |a: u32, b: u32| {
            if b == 0 {
                f64::from(a.min(1))
            } else {
                f64::from(a) / f64::from(b)
            }
        };
        part(self.cpu, whole.cpu).max(part(self.memory, whole.memory))
    }
}

/// One instance type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeInfo {
    /// `c5.xlarge`.
    pub name: String,
    /// Its CPU architecture.
    pub arch: Arch,
    /// What an instance of it registers with ECS (described, else estimated from the name);
    /// `None` when neither says.
    pub capacity: Option<Resources>,
}

/// One AMI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmiInfo {
    /// `ami-...`.
    pub id: String,
    /// Its architecture; `None` when EC2 did not describe it.
    pub arch: Option<Arch>,
    /// Windows or Linux (EC2's `Platform`).
    pub os: OsClass,
    /// Its root snapshot size in GiB (0 when unknown): RunInstances refuses a smaller root volume.
    pub root_gib: u32,
}

impl AmiInfo {
    /// The root volume, in GiB, an instance launched from this AMI gets when `asked` is set
    /// (`Ec2RootVolumeGiB`): never smaller than the AMI's own root, which RunInstances refuses.
    pub fn root_volume_gib(&self, asked: u32) -> u32 {
        asked.max(self.root_gib)
    }
}

/// One instance as DescribeInstances shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ec2Instance {
    /// Instance id.
    pub id: String,
    /// Instance type.
    pub instance_type: String,
    /// `pending`, `running`, ...
    pub state: Ec2State,
    /// When EC2 launched it.
    pub launched_at: Option<SystemTime>,
    /// Spot (else on-demand).
    pub spot: bool,
    /// Its OS (our `gocd:os` tag, else EC2's platform).
    pub os: OsClass,
    /// When EC2 Spot warned that it will interrupt it (our `gocd:spot-warned` tag), if it did.
    pub spot_warned_at: Option<SystemTime>,
    /// The fingerprint of the launch settings it was launched with (our `gocd:launch-spec`
    /// tag): a stopped instance is started again only while it matches the profile's.
    pub launch_spec: Option<String>,
    /// The EC2 pool it was launched into (our `gocd:ec2-pool` tag: the key of the cluster
    /// profile's EC2 settings); `None` for an instance launched without one.
    pub pool: Option<Ec2PoolKey>,
}

/// One container instance as DescribeContainerInstances shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerInstance {
    /// Container instance ARN.
    pub arn: String,
    /// The EC2 instance behind it.
    pub ec2_id: Option<String>,
    /// Its instance type (the ECS agent's `ecs.instance-type` attribute).
    pub instance_type: Option<String>,
    /// Its availability zone (the ECS agent's `ecs.availability-zone` attribute).
    pub zone: Option<String>,
    /// `ACTIVE`, `DRAINING`, ...
    pub status: ContainerInstanceStatus,
    /// Whether its ECS agent is connected.
    pub connected: bool,
    /// Registered CPU and memory.
    pub total: Resources,
    /// Remaining CPU and memory.
    pub remaining: Resources,
    /// Running plus pending tasks.
    pub tasks: u32,
}

impl ContainerInstance {
    /// ACTIVE with its ECS agent connected: ECS places tasks on it.
    pub fn usable(&self) -> bool {
        self.status == ContainerInstanceStatus::Active && self.connected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_fit_subtract_and_share() {
        let room = Resources::new(4096, 7482);
        assert!(room.fits(Resources::new(1024, 1800)));
        assert!(!room.fits(Resources::new(1024, 8000)));
        assert_eq!(room.minus(Resources::new(5000, 1800)), Resources::new(0, 5682));
        assert_eq!(Resources::new(1024, 3741).share_of(room), 0.5);
        assert_eq!(Resources::new(2048, 100).share_of(room), 0.5);
    }
}
