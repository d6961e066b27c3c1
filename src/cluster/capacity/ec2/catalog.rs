//! The listed instance types and AMIs as AWS describes them: each type's vCPUs, memory and CPU
//! architecture (one DescribeInstanceTypes for every type of `Ec2InstanceType`), each AMI's
//! architecture, platform and root snapshot size (one DescribeImages for every AMI of
//! `Ec2AmiId`). Read once per engine ([`load`], cached in the pool) and checked: every listed
//! type needs a listed AMI of its architecture.
//!
//! When DescribeInstanceTypes is refused (no `ec2:DescribeInstanceTypes`, throttled past the
//! retries), the types are estimated from their names ([`super::capacity::estimate`],
//! [`Arch::guess`]) and [`Catalog::estimated`] says why; the describe is tried again after
//! [`RETRY_ESTIMATE`]. A single AMI EC2 cannot describe serves every type, as before types could
//! be listed.

use std::time::{Duration, SystemTime};

use super::{api, capacity, Arch, OsClass};
pub use crate::aws::ec2_types::{AmiInfo, TypeInfo};
use crate::aws::{outcome, AwsClients, AwsError, Failure};
use crate::cluster::base::clock::Clock;
use crate::settings::Ec2Capacity;

/// How long estimated type figures are used before DescribeInstanceTypes is tried again.
pub const RETRY_ESTIMATE: Duration = Duration::from_secs(15 * 60);

/// The profile's types and AMIs, described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// `Ec2InstanceType`'s types in the operator's order, those EC2 does not know left out.
    pub types: Vec<TypeInfo>,
    /// `Ec2AmiId`'s AMIs in the operator's order.
    pub amis: Vec<AmiInfo>,
    /// Why the types' figures are estimates from their names, when they are.
    pub estimated: Option<String>,
    /// What is wrong with the profile, in the operator's words (a type EC2 does not offer, a
    /// type whose architecture has no AMI, an AMI that does not exist).
    pub problems: Vec<String>,
    /// When it was read.
    pub read_at: SystemTime,
    /// The settings it was read for (`Ec2InstanceType`, `Ec2AmiId`).
    pub key: CatalogKey,
}

/// The settings a catalog was read for: re-read when they change.
pub type CatalogKey = (Vec<String>, Vec<String>);

impl Catalog {
    /// The settings it was read for.
    pub fn key_of(cfg: &Ec2Capacity) -> CatalogKey {
        (cfg.instance_types.clone(), cfg.ami_ids.clone())
    }

    /// The settings it was read for.
    pub fn types_key(&self) -> CatalogKey {
        self.key.clone()
    }

    /// Whether it should be read again (estimates, after [`RETRY_ESTIMATE`]).
    pub fn stale(&self, now: SystemTime) -> bool {
        self.estimated.is_some() && now.duration_since(self.read_at).unwrap_or_default() >= RETRY_ESTIMATE
    }

    /// The type's description.
    pub fn type_info(&self, name: &str) -> Option<&TypeInfo> {
        self.types.iter().find(|t| t.name == name)
    }

    /// The type's architecture (described, else guessed from its name).
    pub fn arch_of(&self, name: &str) -> Arch {
        self.type_info(name).map_or_else(|| Arch::guess(name), |t| t.arch)
    }

    /// The AMI an instance of this architecture and OS is launched with: one of that
    /// architecture and platform, else of that architecture; a single AMI EC2 did not describe
    /// serves everything.
    pub fn ami_for(&self, arch: Arch, os: OsClass) -> Option<&AmiInfo> {
        if let [only] = self.amis.as_slice() {
            if only.arch.is_none() {
                return Some(only);
            }
        }
        let of_arch = || self.amis.iter().filter(move |a| a.arch == Some(arch));
        of_arch().find(|a| a.os == os).or_else(|| of_arch().next())
    }

    /// The types instances can be launched with: those with an AMI of their architecture.
    pub fn launchable(&self) -> impl Iterator<Item = &TypeInfo> {
        self.types.iter().filter(|t| self.ami_for(t.arch, OsClass::Linux).is_some())
    }
}

/// Why work of this architecture cannot run on the profile's instances.
pub(in crate::cluster) fn no_type_message(cfg: &Ec2Capacity, arch: Arch) -> String {
    format!(
        "the elastic profile's CpuArchitecture is {}, but the cluster profile's Ec2InstanceType ({}) lists no {} type that can be launched: \
         add one (with an {} AMI in Ec2AmiId), or change the elastic profile's CpuArchitecture",
        match arch {
            Arch::X86_64 => "X86_64",
            Arch::Arm64 => "ARM64",
        },
        cfg.instance_types.join(", "),
        arch.as_str(),
        arch.as_str()
    )
}

/// Builds the catalog from what EC2 answered (pure: the describes are [`load`]'s).
pub fn build(
    cfg: &Ec2Capacity,
    region: &str,
    types: Result<Vec<TypeInfo>, AwsError>,
    amis: Result<Vec<AmiInfo>, AwsError>,
    now: SystemTime,
) -> Catalog {
    let mut problems = Vec::new();
    let guessed =
        |name: &String| TypeInfo { name: name.clone(), arch: Arch::guess(name), capacity: capacity::estimate(name) };
    let (types, estimated) = match types {
        Ok(described) => {
            let in_order = cfg.instance_types.iter().filter_map(|n| described.iter().find(|t| &t.name == n).cloned());
            (in_order.collect(), None)
        }
        Err(e) if e.failure == Failure::NotFound => {
            // EC2 names the types it does not offer: the others stay.
            let unknown = outcome::unknown_instance_types(&e.detail, &cfg.instance_types);
            problems.push(format!(
                "Ec2InstanceType lists {} that EC2 does not offer in {region} ({}): correct or remove {}.",
                names(&unknown),
                e.detail,
                if unknown.len() == 1 { "it" } else { "them" }
            ));
            let known = cfg.instance_types.iter().filter(|n| !unknown.contains(n)).map(guessed);
            (known.collect(), Some(format!("DescribeInstanceTypes was refused: {}", e.detail)))
        }
        Err(e) => (
            cfg.instance_types.iter().map(guessed).collect(),
            Some(format!(
                "DescribeInstanceTypes failed ({}); sizes and architectures are estimated from the type names (grant ec2:DescribeInstanceTypes)",
                e.detail
            )),
        ),
    };
    let single = cfg.ami_ids.len() == 1;
    let amis = match amis {
        Ok(described) => cfg
            .ami_ids
            .iter()
            .map(|id| {
                described.iter().find(|a| &a.id == id).cloned().unwrap_or_else(|| {
                    if !single {
                        problems.push(format!("Ec2AmiId {id} does not exist in {region}: correct or remove it."));
                    }
                    undescribed(id)
                })
            })
            .collect(),
        Err(e) => {
            if !single {
                problems.push(format!(
                    "the architectures of Ec2AmiId's AMIs could not be read ({}): each listed AMI must exist in {region} (and the plugin needs ec2:DescribeImages).",
                    e.detail
                ));
            }
            cfg.ami_ids.iter().map(|id| undescribed(id)).collect()
        }
    };
    let mut catalog = Catalog { types, amis, estimated, problems, read_at: now, key: Catalog::key_of(cfg) };
    let orphans: Vec<String> = catalog
        .types
        .iter()
        .filter(|t| catalog.ami_for(t.arch, OsClass::Linux).is_none())
        .map(|t| no_ami(t, &catalog.amis, region))
        .collect();
    catalog.problems.extend(orphans);
    catalog
}

fn undescribed(id: &str) -> AmiInfo {
    AmiInfo { id: id.to_string(), arch: None, os: OsClass::Linux, root_gib: 0 }
}

fn names(list: &[&String]) -> String {
    list.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
}

/// "c6g.xlarge is arm64, but Ec2AmiId lists no arm64 AMI ...".
fn no_ami(t: &TypeInfo, amis: &[AmiInfo], region: &str) -> String {
    let listed: Vec<String> = amis
        .iter()
        .map(|a| format!("{} is {}", a.id, a.arch.map_or("of unknown architecture", Arch::as_str)))
        .collect();
    let parameter = match t.arch {
        Arch::X86_64 => "amazon-linux-2023/recommended/image_id",
        Arch::Arm64 => "amazon-linux-2023/arm64/recommended/image_id",
    };
    format!(
        "Ec2InstanceType {} is {}, but Ec2AmiId lists no {} AMI ({}): no instance of it is launched. Add an {} ECS-optimised AMI to Ec2AmiId (aws ssm get-parameters --names /aws/service/ecs/optimized-ami/{parameter} --region {region}), or remove {} from Ec2InstanceType.",
        t.name,
        t.arch.as_str(),
        t.arch.as_str(),
        listed.join(", "),
        t.arch.as_str(),
        t.name
    )
}

/// Reads the catalog: one DescribeInstanceTypes and one DescribeImages, through the account's
/// budget; it is dated by `clock` once read.
pub async fn load(aws: &AwsClients, cfg: &Ec2Capacity, clock: &dyn Clock) -> Catalog {
    let types = api::describe_instance_types(aws, &cfg.instance_types).await;
    let amis = api::describe_images(aws, &cfg.ami_ids).await;
    build(cfg, &aws.region, types, amis, clock.now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::capacity::ec2::Resources;

    fn cfg(types: &[&str], amis: &[&str]) -> Ec2Capacity {
        Ec2Capacity {
            instance_types: types.iter().map(|s| s.to_string()).collect(),
            ami_ids: amis.iter().map(|s| s.to_string()).collect(),
            ..Ec2Capacity::for_tests()
        }
    }

    fn t(name: &str, arch: Arch) -> TypeInfo {
        TypeInfo { name: name.into(), arch, capacity: Some(Resources::new(4096, 7482)) }
    }

    fn ami(id: &str, arch: Arch) -> AmiInfo {
        AmiInfo { id: id.into(), arch: Some(arch), os: OsClass::Linux, root_gib: 30 }
    }

    fn refused(code: &str, detail: &str) -> AwsError {
        AwsError {
            operation: "DescribeInstanceTypes",
            code: Some(code.into()),
            detail: detail.into(),
            failure: crate::aws::outcome::classify("DescribeInstanceTypes", Some(code), detail, Some(400)),
        }
    }

    #[test]
    fn each_type_gets_the_ami_of_its_architecture() {
        let c = cfg(&["c5.xlarge", "c6g.xlarge"], &["ami-11111111", "ami-22222222"]);
        let types = Ok(vec![t("c6g.xlarge", Arch::Arm64), t("c5.xlarge", Arch::X86_64)]);
        let amis = Ok(vec![ami("ami-11111111", Arch::X86_64), ami("ami-22222222", Arch::Arm64)]);
        let cat = build(&c, "us-east-1", types, amis, SystemTime::UNIX_EPOCH);
        assert!(cat.problems.is_empty(), "{:?}", cat.problems);
        assert_eq!(cat.types.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["c5.xlarge", "c6g.xlarge"]);
        assert_eq!(cat.ami_for(Arch::Arm64, OsClass::Linux).map(|a| a.id.as_str()), Some("ami-22222222"));
        assert_eq!(cat.ami_for(Arch::X86_64, OsClass::Linux).map(|a| a.id.as_str()), Some("ami-11111111"));
        assert_eq!(cat.launchable().count(), 2);
    }

    #[test]
    fn a_type_whose_architecture_has_no_ami_is_a_problem_in_words() {
        let c = cfg(&["c5.xlarge", "c6g.xlarge"], &["ami-11111111"]);
        let types = Ok(vec![t("c5.xlarge", Arch::X86_64), t("c6g.xlarge", Arch::Arm64)]);
        let cat = build(&c, "eu-west-1", types, Ok(vec![ami("ami-11111111", Arch::X86_64)]), SystemTime::UNIX_EPOCH);
        assert_eq!(cat.problems.len(), 1, "{:?}", cat.problems);
        let p = &cat.problems[0];
        assert!(
            p.starts_with(
                "Ec2InstanceType c6g.xlarge is arm64, but Ec2AmiId lists no arm64 AMI (ami-11111111 is x86_64)"
            ),
            "{p}"
        );
        assert!(p.contains("amazon-linux-2023/arm64/recommended") && p.contains("eu-west-1"), "{p}");
        assert_eq!(cat.launchable().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["c5.xlarge"]);
    }

    #[test]
    fn one_undescribed_ami_serves_every_type_as_before() {
        let c = cfg(&["c5.xlarge", "c6g.xlarge"], &["ami-0abcdef1234567890"]);
        let types = Ok(vec![t("c5.xlarge", Arch::X86_64), t("c6g.xlarge", Arch::Arm64)]);
        let cat = build(&c, "us-east-1", types, Err(refused("InvalidAMIID.NotFound", "no")), SystemTime::UNIX_EPOCH);
        assert!(cat.problems.is_empty(), "{:?}", cat.problems);
        assert_eq!(cat.launchable().count(), 2);
    }

    #[test]
    fn a_refused_describe_falls_back_to_estimates_and_says_so() {
        let c = cfg(&["c5.xlarge", "c6g.xlarge"], &["ami-11111111", "ami-22222222"]);
        let amis = Ok(vec![ami("ami-11111111", Arch::X86_64), ami("ami-22222222", Arch::Arm64)]);
        let cat = build(&c, "us-east-1", Err(refused("UnauthorizedOperation", "denied")), amis, SystemTime::UNIX_EPOCH);
        assert!(cat.estimated.as_deref().is_some_and(|e| e.contains("ec2:DescribeInstanceTypes")), "{cat:?}");
        assert_eq!(cat.arch_of("c6g.xlarge"), Arch::Arm64);
        assert_eq!(cat.type_info("c5.xlarge").and_then(|t| t.capacity), Some(Resources::new(4096, 7482)));
        assert!(cat.problems.is_empty());
        assert!(!cat.stale(SystemTime::UNIX_EPOCH + Duration::from_secs(60)));
        assert!(cat.stale(SystemTime::UNIX_EPOCH + RETRY_ESTIMATE));
    }

    #[test]
    fn a_type_ec2_does_not_offer_is_named_and_left_out() {
        let c = cfg(&["c5.xlarge", "zz9.huge"], &["ami-11111111"]);
        let e = refused("InvalidInstanceType", "The following supplied instance types do not exist: [zz9.huge]");
        let cat = build(&c, "us-east-1", Err(e), Ok(vec![ami("ami-11111111", Arch::X86_64)]), SystemTime::UNIX_EPOCH);
        assert_eq!(cat.types.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["c5.xlarge"]);
        assert!(
            cat.problems[0].starts_with("Ec2InstanceType lists zz9.huge that EC2 does not offer in us-east-1"),
            "{:?}",
            cat.problems
        );
    }

    #[test]
    fn a_missing_ami_among_several_is_a_problem() {
        let c = cfg(&["c5.xlarge"], &["ami-11111111", "ami-33333333"]);
        let cat = build(
            &c,
            "us-east-1",
            Ok(vec![t("c5.xlarge", Arch::X86_64)]),
            Ok(vec![ami("ami-11111111", Arch::X86_64)]),
            SystemTime::UNIX_EPOCH,
        );
        assert_eq!(
            cat.problems,
            vec!["Ec2AmiId ami-33333333 does not exist in us-east-1: correct or remove it.".to_string()]
        );
    }
}
