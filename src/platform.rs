//! What a task runs on, as every part of the plugin names it: the CPU architecture and the
//! operating system class. ECS places a task only on capacity of both its own; Fargate bills
//! them at different rates; EC2 instances, their types and AMIs carry them too.

use serde::Serialize;

/// Which kind of instance a task needs: ECS runs Linux tasks on Linux instances and Windows
/// tasks on Windows instances only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum OsClass {
    /// Linux (any `OperatingSystemFamily` not starting with `WINDOWS`).
    Linux,
    /// Windows Server (`WINDOWS_SERVER_*`).
    Windows,
}

impl OsClass {
    /// The class of an elastic profile's `OperatingSystemFamily`.
    pub fn of_family(family: &str) -> OsClass {
        if family.to_ascii_uppercase().starts_with("WINDOWS") {
            OsClass::Windows
        } else {
            OsClass::Linux
        }
    }

    /// `linux` or `windows`: the value of the instance's `gocd:os` tag.
    pub fn as_str(self) -> &'static str {
        match self {
            OsClass::Linux => "linux",
            OsClass::Windows => "windows",
        }
    }

    /// The class a `gocd:os` tag (or EC2's `platform`) names; Linux when unknown.
    pub fn from_tag(value: Option<&str>) -> OsClass {
        match value {
            Some(v) if v.eq_ignore_ascii_case("windows") => OsClass::Windows,
            _ => OsClass::Linux,
        }
    }
}

/// A CPU architecture: of an elastic profile's tasks (`CpuArchitecture`), of an instance type,
/// of an AMI. ECS runs a task only on an instance of its architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Arch {
    /// x86-64 (`X86_64` in ECS, `x86_64` in EC2).
    X86_64,
    /// 64-bit ARM, Graviton (`ARM64` in ECS, `arm64` in EC2).
    Arm64,
}

impl Arch {
    /// The architecture of an elastic profile's `CpuArchitecture` (`X86_64` or `ARM64`).
    pub fn of_ecs(value: &str) -> Arch {
        if value.eq_ignore_ascii_case("ARM64") {
            Arch::Arm64
        } else {
            Arch::X86_64
        }
    }

    /// EC2's name of an architecture (`x86_64`, `arm64`, as DescribeInstanceTypes and
    /// DescribeImages say); `None` for others (`i386`, `x86_64_mac`, `arm64_mac`).
    pub fn of_ec2(value: &str) -> Option<Arch> {
        match value {
            "x86_64" => Some(Arch::X86_64),
            "arm64" => Some(Arch::Arm64),
            _ => None,
        }
    }

    /// EC2's name: `x86_64` or `arm64`.
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Arm64 => "arm64",
        }
    }

    /// A guess from the type's name when EC2 cannot be asked: Graviton families have a `g`
    /// after the generation digit (`c6g`, `m7gd`, `t4g`, `c7gn`, `g5g`), and the first Graviton
    /// family is `a1`; every other family is x86-64.
    pub fn guess(instance_type: &str) -> Arch {
        let family = instance_type.split('.').next().unwrap_or_default();
        if family == "a1" {
            return Arch::Arm64;
        }
        let after_digit = family.trim_start_matches(|c: char| c.is_ascii_lowercase());
        let suffix = after_digit.trim_start_matches(|c: char| c.is_ascii_digit());
        if !after_digit.is_empty() && suffix.starts_with('g') {
            Arch::Arm64
        } else {
            Arch::X86_64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_classes() {
        assert_eq!(OsClass::of_family("LINUX"), OsClass::Linux);
        assert_eq!(OsClass::of_family("WINDOWS_SERVER_2022_CORE"), OsClass::Windows);
        assert_eq!(OsClass::from_tag(Some("windows")), OsClass::Windows);
        assert_eq!(OsClass::from_tag(None), OsClass::Linux);
    }

    #[test]
    fn architectures() {
        assert_eq!(Arch::of_ecs("ARM64"), Arch::Arm64);
        assert_eq!(Arch::of_ecs("X86_64"), Arch::X86_64);
        assert_eq!(Arch::of_ec2("arm64"), Some(Arch::Arm64));
        assert_eq!(Arch::of_ec2("i386"), None);
        for t in ["c6g.xlarge", "m7gd.large", "t4g.micro", "a1.large", "g5g.xlarge", "im4gn.large", "c7gn.medium"] {
            assert_eq!(Arch::guess(t), Arch::Arm64, "{t}");
        }
        for t in ["c5.xlarge", "m5.large", "g4dn.xlarge", "c6i.large", "u-6tb1.metal", "inf2.xlarge", "c5a.large"] {
            assert_eq!(Arch::guess(t), Arch::X86_64, "{t}");
        }
    }
}
