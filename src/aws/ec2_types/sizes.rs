//! What an instance type offers ECS: CPU units (1024 a vCPU) and the memory the ECS agent
//! registers, estimated from the type's name until an instance of it registers (then the
//! registered figures win: see `cluster::ec2::pool::PoolState::capacity`).
//!
//! The ECS agent registers somewhat less memory than the instance has (the kernel and the agent
//! keep some): a c5.xlarge (8 GiB) registers 7482 MiB, and the same ratio is used for every type.

use super::Resources;

/// Registered MiB per physical MiB (7482 of 8192 on a c5.xlarge).
const REGISTERED_MEMORY_RATIO: (u32, u32) = (7482, 8192);

/// The resources an instance of `instance_type` registers, when its name says (families c, m,
/// r, t, x and z of any generation: `c5.xlarge`, `m7g.2xlarge`, `t3a.medium`, `r6i.large`).
pub fn estimate(instance_type: &str) -> Option<Resources> {
    let (family, size) = instance_type.split_once('.')?;
    let class = family.chars().next()?;
    let vcpus = vcpus(class, size)?;
    let gib_per_vcpu = match class {
        'c' => 2.0,
        'm' => 4.0,
        'r' | 'z' => 8.0,
        'x' => 16.0,
        't' => return burstable(size),
        _ => return None,
    };
    Some(resources(vcpus, gib_per_vcpu * f64::from(vcpus)))
}

/// vCPUs of a size name: `large` 2, `xlarge` 4, `Nxlarge` 4·N; `medium` 1 (2 on t types).
fn vcpus(class: char, size: &str) -> Option<u32> {
    match size {
        "nano" | "micro" | "small" if class == 't' => Some(2),
        "medium" if class == 't' => Some(2),
        "medium" => Some(1),
        "large" => Some(2),
        "xlarge" => Some(4),
        _ => size.strip_suffix("xlarge")?.parse::<u32>().ok().filter(|n| *n > 0).map(|n| n * 4),
    }
}

/// t2/t3/t3a/t4g: two vCPUs up to `large`, memory doubling per size.
fn burstable(size: &str) -> Option<Resources> {
    let (vcpus, gib) = match size {
        "nano" => (2, 0.5),
        "micro" => (2, 1.0),
        "small" => (2, 2.0),
        "medium" => (2, 4.0),
        "large" => (2, 8.0),
        "xlarge" => (4, 16.0),
        "2xlarge" => (8, 32.0),
        _ => return None,
    };
    Some(resources(vcpus, gib))
}

/// What an instance with `vcpus` vCPUs and `memory_mib` MiB (as DescribeInstanceTypes says)
/// registers with ECS.
pub fn from_size(vcpus: u32, memory_mib: u64) -> Resources {
    let registered = memory_mib * u64::from(REGISTERED_MEMORY_RATIO.0) / u64::from(REGISTERED_MEMORY_RATIO.1);
    Resources::new(vcpus.saturating_mul(1024), u32::try_from(registered).unwrap_or(u32::MAX))
}

fn resources(vcpus: u32, gib: f64) -> Resources {
    let physical = (gib * 1024.0) as u64;
    let registered = physical * u64::from(REGISTERED_MEMORY_RATIO.0) / u64::from(REGISTERED_MEMORY_RATIO.1);
    Resources::new(vcpus * 1024, u32::try_from(registered).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_common_types() {
        assert_eq!(estimate("c5.xlarge"), Some(Resources::new(4096, 7482)));
        assert_eq!(estimate("m5.2xlarge"), Some(Resources::new(8192, 29928)));
        assert_eq!(estimate("m6g.medium"), Some(Resources::new(1024, 3741)));
        assert_eq!(estimate("t3a.medium"), Some(Resources::new(2048, 3741)));
        assert_eq!(estimate("r6i.large"), Some(Resources::new(2048, 14964)));
        assert_eq!(estimate("c7g.16xlarge").map(|r| r.cpu), Some(65536));
    }

    #[test]
    fn described_sizes_register_like_estimates() {
        assert_eq!(from_size(4, 8192), Resources::new(4096, 7482));
        assert_eq!(from_size(2, 4096), estimate("c5.large").unwrap());
    }

    #[test]
    fn unknown_types_have_no_estimate() {
        assert_eq!(estimate("p4d.24xlarge"), None);
        assert_eq!(estimate("c5.metal"), None);
        assert_eq!(estimate("nonsense"), None);
    }
}
