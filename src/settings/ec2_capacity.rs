//! The `Ec2*` part of a cluster profile: the container instances the plugin launches and retires.
//!
//! These keys only apply when `LaunchType` is `EC2`; set with another launch type they are errors.
//! `Ec2InstanceType` and `Ec2AmiId` take lists (comma-separated and/or one per line): several
//! instance types, and one AMI per CPU architecture among them.

use super::basics::{quote, LaunchType};
use super::fields::Fields;
use super::syntax;

/// What EC2 takes as user data, in bytes before base64 (`docs/aws-rules.md`, "EC2").
pub const EC2_USER_DATA_MAX: usize = 16 * 1024;
/// Room kept for the plugin's join script around `Ec2UserData` (`cluster::ec2::user_data`; a
/// test there checks the script with the longest names stays within it).
pub const JOIN_SCRIPT_RESERVE: usize = 1024;
/// Largest `Ec2UserData`, in bytes: what EC2 takes less the join script's room.
const USER_DATA_MAX: usize = EC2_USER_DATA_MAX - JOIN_SCRIPT_RESERVE;

/// `Ec2ScaleOutWaitSeconds`' default: how long a task waits for room on a busy instance at most
/// (the planner's `LAUNCH_PATIENCE`). 0, launching at once: the defaults keep a job's wait within
/// one instance start, and win cost back by means that do not make jobs wait (the stopped pool,
/// [`STOPPED_INSTANCES_DEFAULT`]; README "Job wait" measures both against a patience of 600 s,
/// the default before, which cost less and made the slowest jobs in twenty wait five minutes).
pub const SCALE_OUT_WAIT_SECONDS: u32 = 0;

/// `Ec2StoppedInstances`' default: idle on-demand instances stopped rather than terminated, so a
/// scale-out starts one (registered in tens of seconds, its images cached) before launching a new
/// one. Five keep the reference day's 95th-percentile wait within one instance start, for about
/// 2.40 USD a month of root volume each (README "Job wait").
pub const STOPPED_INSTANCES_DEFAULT: u32 = 5;

/// The most `Ec2StoppedInstances` allows: each stopped instance keeps its root volume (billed).
pub const STOPPED_INSTANCES_MAX: u32 = 50;

/// EC2 capacity settings (present exactly when the launch type is EC2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ec2Capacity {
    /// `Ec2InstanceType`: one or more types, such as `c5.xlarge, c6g.xlarge`, in the
    /// operator's order (which breaks ties between equally sized types).
    pub instance_types: Vec<String>,
    /// `Ec2InstanceProfile`: an instance profile name or ARN.
    pub instance_profile: String,
    /// `Ec2AmiId`: one ECS-optimised AMI per CPU architecture (and OS) among the types.
    pub ami_ids: Vec<String>,
    /// `Ec2MinInstances`, default 0.
    pub min_instances: u32,
    /// `Ec2MaxInstances`, default 5, never below the minimum.
    pub max_instances: u32,
    /// `Ec2IdleMinutes`, default 10 (0: an instance goes as soon as it runs no task).
    pub idle_minutes: u32,
    /// `Ec2RegisterTimeoutMinutes`, default 5.
    pub register_timeout_minutes: u32,
    /// `Ec2ScaleOutWaitSeconds`, default [`SCALE_OUT_WAIT_SECONDS`]: how long a task waits for
    /// room to free on a busy instance before an instance is launched for it (0: at once).
    pub scale_out_wait_seconds: u32,
    /// `Ec2Spot`, default false.
    pub spot: bool,
    /// `Ec2KeyPair`.
    pub key_pair: Option<String>,
    /// `Ec2RootVolumeGiB`, default 30.
    pub root_volume_gib: u32,
    /// `Ec2UserData`, appended to the generated script.
    pub user_data: Option<String>,
    /// `Ec2StoppedInstances`, default [`STOPPED_INSTANCES_DEFAULT`]: how many idle on-demand instances are stopped (EBS
    /// kept) rather than terminated, to be started again before a new one is launched.
    pub stopped_instances: u32,
}

/// Every `Ec2*` key of the cluster profile table.
fn ec2_keys() -> impl Iterator<Item = &'static str> {
    super::keys::CLUSTER_KEYS.iter().map(|s| s.key).filter(|k| k.starts_with("Ec2"))
}

/// Reads the `Ec2*` keys. `launch_type` is `None` when `LaunchType` itself was invalid: then the
/// keys are syntax-checked but neither required nor refused.
pub(crate) fn read(f: &mut Fields<'_>, launch_type: Option<LaunchType>) -> Option<Ec2Capacity> {
    if let Some(other) = launch_type.filter(|t| *t != LaunchType::Ec2) {
        for key in ec2_keys() {
            if f.is_set(key) {
                let message = format!("{key} only applies when LaunchType is EC2 (it is {}).", other.as_str());
                f.error(key, message);
            }
        }
        return None;
    }
    let ec2 = launch_type == Some(LaunchType::Ec2);
    let instance_types = list(&required_on_ec2(f, ec2, "Ec2InstanceType", check_instance_types));
    let instance_profile = required_on_ec2(f, ec2, "Ec2InstanceProfile", check_instance_profile);
    let ami_ids = list(&required_on_ec2(f, ec2, "Ec2AmiId", check_amis));
    let min_instances = f.number("Ec2MinInstances", 0..=100, 0);
    let max_instances = f.number("Ec2MaxInstances", 1..=100, 5);
    if min_instances > max_instances && !f.has_error("Ec2MaxInstances") {
        let message =
            format!("Ec2MinInstances ({min_instances}) must not be more than Ec2MaxInstances ({max_instances}).");
        f.error("Ec2MinInstances", message);
    }
    let capacity = Ec2Capacity {
        instance_types,
        instance_profile,
        ami_ids,
        min_instances,
        max_instances,
        idle_minutes: f.number("Ec2IdleMinutes", 0..=1440, 10),
        register_timeout_minutes: f.number("Ec2RegisterTimeoutMinutes", 1..=60, 5),
        scale_out_wait_seconds: f.number("Ec2ScaleOutWaitSeconds", 0..=1800, SCALE_OUT_WAIT_SECONDS),
        spot: f.boolean("Ec2Spot", false),
        key_pair: f.string("Ec2KeyPair", check_key_pair),
        // The ECS-optimised AMIs' root snapshot is 30 GiB: RunInstances refuses a smaller root volume.
        root_volume_gib: f.number("Ec2RootVolumeGiB", 30..=16384, 30),
        user_data: f.string("Ec2UserData", check_user_data),
        stopped_instances: f.number("Ec2StoppedInstances", 0..=STOPPED_INSTANCES_MAX, STOPPED_INSTANCES_DEFAULT),
    };
    ec2.then_some(capacity)
}

/// A string that must be set when `ec2`; empty when not set or bad.
fn required_on_ec2(f: &mut Fields<'_>, ec2: bool, key: &str, check: fn(&str) -> Result<(), String>) -> String {
    if ec2 && !f.is_set(key) {
        f.error(key, format!("{key} is required when LaunchType is EC2."));
    }
    f.string(key, check).unwrap_or_default()
}

/// The items of a list value: split at commas and line ends, trimmed, empty ones dropped.
pub(crate) fn list(v: &str) -> Vec<String> {
    v.split([',', '\n']).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// Each item checked, no item twice, at least one.
fn check_list(key: &str, v: &str, check: fn(&str) -> Result<(), String>) -> Result<(), String> {
    let items = list(v);
    if items.is_empty() {
        return Err(format!("{key} is empty."));
    }
    let problems: Vec<String> = items.iter().filter_map(|i| check(i).err()).collect();
    if !problems.is_empty() {
        return Err(problems.join(" "));
    }
    if let Some((_, dup)) = items.iter().enumerate().find(|(n, i)| items[..*n].contains(i)) {
        return Err(format!("{key} lists {} twice.", quote(dup)));
    }
    Ok(())
}

fn check_instance_types(v: &str) -> Result<(), String> {
    check_list("Ec2InstanceType", v, check_instance_type)
}

fn check_instance_type(v: &str) -> Result<(), String> {
    if syntax::is_instance_type(v) {
        Ok(())
    } else {
        Err(format!(
            "Ec2InstanceType {} is not an EC2 instance type; use one like c5.xlarge or t3a.medium (several: separated by commas or one per line).",
            quote(v)
        ))
    }
}

fn check_amis(v: &str) -> Result<(), String> {
    check_list("Ec2AmiId", v, check_ami)
}

fn check_instance_profile(v: &str) -> Result<(), String> {
    if syntax::is_iam_name(v, 128) || syntax::is_instance_profile_arn(v) {
        Ok(())
    } else {
        Err(format!(
            "Ec2InstanceProfile {} is neither an instance profile name nor an instance profile ARN (arn:aws:iam::123456789012:instance-profile/ecsInstanceRole).",
            quote(v)
        ))
    }
}

fn check_ami(v: &str) -> Result<(), String> {
    if syntax::is_hex_id(v, "ami") {
        Ok(())
    } else {
        Err(format!(
            "Ec2AmiId {} is not an AMI id: it must be ami- followed by 8 or 17 lowercase hex digits, like ami-0abcdef1234567890.",
            quote(v)
        ))
    }
}

impl Ec2Capacity {
    /// The first listed type (what the status report names when one type is listed).
    pub fn first_type(&self) -> &str {
        self.instance_types.first().map_or("", String::as_str)
    }

    /// A c5.xlarge profile for unit tests.
    #[cfg(test)]
    pub fn for_tests() -> Ec2Capacity {
        Ec2Capacity {
            instance_types: vec!["c5.xlarge".into()],
            instance_profile: "p".into(),
            ami_ids: vec!["ami-12345678".into()],
            min_instances: 0,
            max_instances: 5,
            idle_minutes: 1,
            register_timeout_minutes: 5,
            scale_out_wait_seconds: SCALE_OUT_WAIT_SECONDS,
            spot: false,
            key_pair: None,
            root_volume_gib: 30,
            user_data: None,
            stopped_instances: 0,
        }
    }
}

fn check_key_pair(v: &str) -> Result<(), String> {
    if syntax::is_key_pair_name(v) {
        Ok(())
    } else {
        Err(format!("Ec2KeyPair {} is not a key pair name: use 1 to 255 ASCII characters.", quote(v)))
    }
}

fn check_user_data(v: &str) -> Result<(), String> {
    if v.len() <= USER_DATA_MAX {
        Ok(())
    } else {
        Err(format!(
            "Ec2UserData is {} bytes; at most {USER_DATA_MAX} are allowed (EC2 takes 16 KiB of user data, and the plugin's join script needs the rest).",
            v.len()
        ))
    }
}
