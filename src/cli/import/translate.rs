//! The key translation: their cluster and elastic profile keys to ours, with a [`Note`] per key
//! saying where it went, how its value was converted, or why it was not carried over.
//!
//! Secrets are never copied: their static AWS keys, registry passwords and auth tokens, and every
//! value GoCD handed out encrypted.

use std::collections::BTreeMap;

use super::input::{Profile, Value};
use super::units::{cpu_units, fargate_size, java_bool, size_to_mib, Launch, Variant};
use crate::settings::task_parts::is_sensitive_host_path;

/// What became of one of their keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Carried over to our key `to`; `detail` says how, when it is more than a copy.
    Mapped {
        /// Our key (or keys, in words).
        to: String,
        /// The conversion, or empty.
        detail: String,
    },
    /// Our plugin has no counterpart: what to do instead.
    NoCounterpart(String),
    /// The value could not be carried over (a secret, an encrypted value, a value that does not
    /// parse): what to do.
    NotCarried(String),
}

/// One of their keys and its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Their key.
    pub key: String,
    /// What became of it.
    pub outcome: Outcome,
}

/// Our plugin id.
pub const OUR_PLUGIN_ID: &str = "cd.go.contrib.elastic-agent.ecs";
/// GoCD's ECS elastic agent plugin's id.
pub const THEIR_PLUGIN_ID: &str = "com.thoughtworks.gocd.elastic-agent.ecs";

const CREDENTIALS_ADVICE: &str = "not copied (a secret): give the plugin a role instead (RoleArn, or the GoCD server's own credentials: instance profile, task role, environment), or type AccessKeyId and SecretAccessKey again in the new cluster profile";
const REGISTRY_ADVICE: &str = "put the registry's username and password in a Secrets Manager secret and name it in each elastic profile's RepositoryCredentialsArn (with an ExecutionRoleArn that may read it)";
const ENCRYPTED_ADVICE: &str =
    "not carried over: GoCD hands secure values out only encrypted; type it again in the new profile";

/// Keys whose values are secrets, whether or not the input has them in clear.
pub fn is_secret(key: &str) -> bool {
    matches!(key, "AWSAccessKeyId" | "AWSSecretAccessKey") || key.ends_with("Password") || key.ends_with("AuthToken")
}

fn mapped(to: &str, detail: impl Into<String>) -> Outcome {
    Outcome::Mapped { to: to.to_string(), detail: detail.into() }
}

fn none(what: &str) -> Outcome {
    Outcome::NoCounterpart(what.to_string())
}

/// A whole number within `min..=max`: the number kept in range, and a sentence when it had to be.
fn in_range(text: &str, min: u32, max: u32) -> Result<(u32, String), String> {
    let n: u64 = text.trim().parse().map_err(|_| format!("`{}` is not a whole number", text.trim()))?;
    let kept = u32::try_from(n.clamp(u64::from(min), u64::from(max))).unwrap_or(max);
    let why = if u64::from(kept) == n { String::new() } else { format!("{n} is outside {min} to {max}: {kept}") };
    Ok((kept, why))
}

/// The awslogs options our elastic profiles take in `LogOptions`.
const AWSLOGS_OPTIONS: &[&str] =
    &["awslogs-create-group", "awslogs-datetime-format", "awslogs-multiline-pattern", "mode", "max-buffer-size"];

/// Their cluster profile's log settings in ours: the log group, and the options each elastic
/// profile takes; `None` unless the driver is awslogs with a group.
fn awslogs(cluster: &Profile) -> Option<(String, Vec<String>)> {
    if cluster.clear("LogDriver")? != "awslogs" {
        return None;
    }
    let options: Vec<(String, String)> = cluster
        .clear("LogOptions")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let group = options.iter().find(|(k, _)| k == "awslogs-group")?.1.clone();
    let kept = options
        .iter()
        .filter(|(k, _)| AWSLOGS_OPTIONS.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    Some((group, kept))
}

/// What became of each key of their cluster profile.
pub fn cluster_notes(cluster: &Profile) -> Vec<Note> {
    cluster
        .properties
        .iter()
        .map(|p| {
            let clear = match &p.value {
                Value::Clear(v) => v.trim(),
                Value::Encrypted => "",
            };
            let outcome = if is_secret(&p.key) {
                if p.key.starts_with("AWS") {
                    Outcome::NotCarried(CREDENTIALS_ADVICE.to_string())
                } else {
                    Outcome::NotCarried(format!("not copied (a secret): {REGISTRY_ADVICE}"))
                }
            } else if p.value == Value::Encrypted {
                Outcome::NotCarried(ENCRYPTED_ADVICE.to_string())
            } else {
                cluster_key(&p.key, clear, cluster)
            };
            Note { key: p.key.clone(), outcome }
        })
        .collect()
}

fn ranged(to: &str, value: &str, min: u32, max: u32, unit: &str) -> Outcome {
    if value.is_empty() {
        return mapped(to, "empty: our default");
    }
    match in_range(value, min, max) {
        Ok((_, why)) if why.is_empty() => mapped(to, unit),
        Ok((_, why)) => mapped(to, format!("{unit}; {why}")),
        Err(e) => Outcome::NotCarried(format!("{e}: our default applies; set {to} by hand")),
    }
}

fn cluster_key(key: &str, value: &str, cluster: &Profile) -> Outcome {
    let ec2 = |to: &str, which: &str| mapped(to, format!("EC2 {which} cluster profiles only"));
    let script = |which: &str| {
        mapped("Ec2UserData", format!("EC2 {which} cluster profiles only; appended to the plugin's own user data: remove lines that set ECS_CLUSTER or start the ECS agent"))
    };
    match key {
        "GoServerUrl" | "ClusterName" | "EnvironmentVariables" | "SubnetIds" | "SecurityGroupIds" => mapped(key, ""),
        "AWSRegion" => mapped("Region", ""),
        "ContainerAutoregisterTimeout" => ranged("AgentRegisterTimeoutMinutes", value, 1, 120, "minutes"),
        "MaxContainerDataVolumeSize" => none("a Docker storage-driver setting: on Fargate set the elastic profile's EphemeralStorageGiB, on EC2 size the instances' Ec2RootVolumeGiB"),
        "KeyPairName" => ec2("Ec2KeyPair", "Linux and Windows"),
        "IamInstanceProfile" => ec2("Ec2InstanceProfile", "Linux and Windows"),
        "LogDriver" if value.is_empty() => mapped("(none)", "empty: no log configuration"),
        "LogDriver" if value == "awslogs" && awslogs(cluster).is_some() => mapped("LogGroup", "awslogs: the group of LogOptions' awslogs-group"),
        "LogDriver" => none("our agents log with awslogs to LogGroup, or through a FireLens sidecar (elastic profile Sidecars and LogOptions); set one of them by hand"),
        "LogOptions" => match awslogs(cluster) {
            Some((_, kept)) => mapped(
                "LogGroup, LogOptions",
                format!(
                    "awslogs-group → cluster LogGroup; {} → each elastic profile's LogOptions; others (awslogs-region, awslogs-stream-prefix, ...) dropped: ours logs in the cluster's region, one stream per agent",
                    if kept.is_empty() { "no other option".to_string() } else { kept.iter().map(|k| k.split('=').next().unwrap_or_default()).collect::<Vec<_>>().join(", ") }
                ),
            ),
            None if value.is_empty() => mapped("(none)", "empty"),
            None => none("without the awslogs driver and an awslogs-group these options have no counterpart"),
        },
        "LinuxAmi" => ec2("Ec2AmiId", "Linux"),
        "WindowsAmi" => ec2("Ec2AmiId", "Windows"),
        "LinuxInstanceType" => ec2("Ec2InstanceType", "Linux"),
        "WindowsInstanceType" => ec2("Ec2InstanceType", "Windows"),
        "LinuxRegisterTimeout" | "WindowsRegisterTimeout" => ranged("Ec2RegisterTimeoutMinutes", value, 1, 60, "minutes; EC2 cluster profiles of that OS"),
        "MinLinuxInstanceCount" | "MinWindowsInstanceCount" => ranged("Ec2MinInstances", value, 0, 100, "on-demand EC2 cluster profiles of that OS (spot ones keep none)"),
        "MaxLinuxInstancesAllowed" | "MaxWindowsInstancesAllowed" => ranged("Ec2MaxInstances", value, 1, 100, "on-demand EC2 cluster profiles of that OS"),
        "MaxLinuxSpotInstanceAllowed" | "MaxWindowsSpotInstanceAllowed" => ranged("Ec2MaxInstances", value, 1, 100, "spot EC2 cluster profiles (Ec2Spot) of that OS"),
        "LinuxOSVolumeSize" | "WindowsOSVolumeSize" => ranged("Ec2RootVolumeGiB", value, 8, 16384, "GiB; EC2 cluster profiles of that OS"),
        "LinuxDockerVolumeType" | "LinuxDockerVolumeSize" | "LinuxDockerVolumeProvisionedIOPS" => none("our instances have one root volume, which holds Docker's data too: size it with Ec2RootVolumeGiB"),
        "LinuxOSVolumeType" | "WindowsOSVolumeType" | "LinuxOSVolumeProvisionedIOPS" | "WindowsOSVolumeProvisionedIOPS" => none("our root volumes are gp3 with its baseline IOPS"),
        "LinuxUserdataScript" => script("Linux"),
        "WindowsUserdataScript" => script("Windows"),
        "LinuxStopPolicy" | "WindowsStopPolicy" if value.to_ascii_lowercase().contains("terminate") => mapped("Ec2StoppedInstances", "terminate idle instances: 0"),
        "LinuxStopPolicy" | "WindowsStopPolicy" => mapped("Ec2StoppedInstances", "stop idle instances: our default keeps up to 5 stopped"),
        "StopLinuxInstanceAfter" | "StopWindowsInstanceAfter" => ranged("Ec2IdleMinutes", value, 0, 1440, "minutes idle; on-demand EC2 cluster profiles of that OS"),
        "TerminateIdleLinuxSpotInstanceAfter" | "TerminateIdleWindowsSpotInstanceAfter" => ranged("Ec2IdleMinutes", value, 0, 1440, "minutes idle; spot EC2 cluster profiles of that OS"),
        "TerminateStoppedLinuxInstanceAfter" | "TerminateStoppedWindowsInstanceAfter" => none("stopped instances are kept up to a count (Ec2StoppedInstances), not for a time"),
        "PrivateDockerRegistryAuthType" | "PrivateDockerRegistryUrl" | "PrivateDockerRegistryEmail" | "PrivateDockerRegistryUsername" => none(REGISTRY_ADVICE),
        "EfsDnsOrIP" => none("mount EFS per elastic profile with EfsVolumes (fs-ID[:/dir] /container/path; Linux only)"),
        "LinuxVolumeEncryption" | "LinuxDockerEncryption" => none("turn on EBS encryption by default for the account and region"),
        _ => none("not a key of their plugin that import knows: check it by hand"),
    }
}

/// Our cluster profile for `variant`, from their cluster profile and the EC2 keys of their
/// elastic profile (`AMI`, `InstanceType`, `IAMInstanceProfile` win over the cluster's), without
/// `AllowPrivileged` (the caller adds it for the elastic profiles that need it).
pub fn cluster_properties(cluster: &Profile, elastic: &Profile, variant: Variant) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut put = |key: &str, value: Option<String>| {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            out.insert(key.to_string(), v);
        }
    };
    let c = |key: &str| cluster.clear(key).filter(|_| !is_secret(key)).map(str::to_string);
    let num =
        |key: &str, min: u32, max: u32| cluster.clear(key).and_then(|v| in_range(v, min, max).ok()).map(|(n, _)| n);
    put("ClusterName", c("ClusterName"));
    put("GoServerUrl", c("GoServerUrl"));
    put("Region", c("AWSRegion"));
    put("SubnetIds", c("SubnetIds"));
    put("SecurityGroupIds", c("SecurityGroupIds"));
    put("EnvironmentVariables", c("EnvironmentVariables"));
    put("AgentRegisterTimeoutMinutes", num("ContainerAutoregisterTimeout", 1, 120).map(|n| n.to_string()));
    put("LogGroup", awslogs(cluster).map(|(group, _)| group));
    put("LaunchType", Some(variant.launch.launch_type().to_string()));
    if !variant.launch.is_ec2() {
        return out;
    }
    let os = if variant.windows { "Windows" } else { "Linux" };
    let spot = variant.launch == Launch::Ec2Spot;
    let e = |key: &str| elastic.clear(key).map(str::to_string);
    put("Ec2KeyPair", c("KeyPairName"));
    put("Ec2InstanceProfile", e("IAMInstanceProfile").or_else(|| c("IamInstanceProfile")));
    put("Ec2AmiId", e("AMI").or_else(|| c(&format!("{os}Ami"))));
    put("Ec2InstanceType", e("InstanceType").or_else(|| c(&format!("{os}InstanceType"))));
    put("Ec2RegisterTimeoutMinutes", num(&format!("{os}RegisterTimeout"), 1, 60).map(|n| n.to_string()));
    put("Ec2RootVolumeGiB", num(&format!("{os}OSVolumeSize"), 8, 16384).map(|n| n.to_string()));
    put("Ec2UserData", c(&format!("{os}UserdataScript")));
    if cluster.clear(&format!("{os}StopPolicy")).is_some_and(|p| p.to_ascii_lowercase().contains("terminate")) {
        put("Ec2StoppedInstances", Some("0".to_string()));
    }
    let (min, max, idle) = if spot {
        (
            None,
            num(&format!("Max{os}SpotInstanceAllowed"), 1, 100),
            num(&format!("TerminateIdle{os}SpotInstanceAfter"), 0, 1440),
        )
    } else {
        (
            num(&format!("Min{os}InstanceCount"), 0, 100),
            num(&format!("Max{os}InstancesAllowed"), 1, 100),
            num(&format!("Stop{os}InstanceAfter"), 0, 1440),
        )
    };
    put("Ec2MinInstances", min.map(|n| n.to_string()));
    put("Ec2MaxInstances", max.map(|m| m.max(min.unwrap_or(0)).to_string()));
    put("Ec2IdleMinutes", idle.map(|n| n.to_string()));
    if spot {
        put("Ec2Spot", Some("true".to_string()));
    }
    out
}

/// One of their elastic profiles in ours.
#[derive(Debug, Clone)]
pub struct Elastic {
    /// Where it runs.
    pub variant: Variant,
    /// Our elastic profile's properties.
    pub properties: BTreeMap<String, String>,
    /// Whether its cluster profile must allow privileged agents (Privileged, MountDockerSocket,
    /// a system directory bind-mounted).
    pub needs_privileged: bool,
    /// What became of each of its keys.
    pub notes: Vec<Note>,
}

/// Translates their elastic profile, which runs with their `cluster` profile.
pub fn elastic(profile: &Profile, cluster: &Profile) -> Elastic {
    let windows = profile.clear("Platform").is_some_and(|p| p.eq_ignore_ascii_case("windows"));
    let fargate = java_bool(profile.clear("Fargate"));
    let spot = java_bool(profile.clear("RunAsSpotInstance"));
    let (variant, launch_note) = Variant::of(fargate, spot, windows);
    let mut props = BTreeMap::new();
    let mut notes = Vec::new();
    let mut needs_privileged = false;
    let mut memory: Option<u32> = None;
    let mut cpu: Option<u32> = None;
    for p in &profile.properties {
        let value = match &p.value {
            Value::Clear(v) => v.trim().to_string(),
            Value::Encrypted => {
                notes.push(Note { key: p.key.clone(), outcome: Outcome::NotCarried(ENCRYPTED_ADVICE.to_string()) });
                continue;
            }
        };
        let outcome = if is_secret(&p.key) {
            Outcome::NotCarried("not copied (a secret): type it again".to_string())
        } else {
            match p.key.as_str() {
                "Image" | "Command" | "Environment" | "ExecutionRoleArn" | "TaskRoleArn" | "SubnetIds" | "SecurityGroupIds" => {
                    props.insert(p.key.clone(), value.clone());
                    mapped(&p.key, "")
                }
                "MaxMemory" | "ReservedMemory" => {
                    let to = if p.key == "MaxMemory" { "Memory" } else { "MemoryReservation" };
                    match size_to_mib(&value) {
                        _ if value.is_empty() => mapped(to, "empty: not set"),
                        Ok(_) if to == "MemoryReservation" && !variant.launch.is_ec2() => {
                            none("a soft memory limit is EC2's only: on Fargate the task's Memory is all of it")
                        }
                        Ok(mib) => {
                            if to == "Memory" {
                                memory = Some(mib);
                            }
                            props.insert(to.to_string(), mib.to_string());
                            mapped(to, format!("{value} → {mib} MiB"))
                        }
                        Err(e) => Outcome::NotCarried(format!("{e}: our default applies; set {to} in MiB by hand")),
                    }
                }
                "CPU" => match cpu_units(&value) {
                    Ok(Some(units)) => {
                        let kept = units.clamp(2, 16384);
                        cpu = Some(kept);
                        props.insert("Cpu".to_string(), kept.to_string());
                        let why = if kept == units { String::new() } else { format!("; {units} is outside 2 to 16384: {kept}") };
                        mapped("Cpu", format!("CPU units, as ours (1024 = 1 vCPU): {value}{why}"))
                    }
                    Ok(None) => mapped("Cpu", "0 or empty (no reservation in ECS): our default, 1024"),
                    Err(e) => Outcome::NotCarried(format!("{e}: our default applies (1024)")),
                },
                "Fargate" | "RunAsSpotInstance" => mapped(
                    "LaunchType (cluster profile)",
                    format!("Fargate {fargate}, RunAsSpotInstance {spot} → {}", variant.launch.launch_type())
                        + &launch_note.clone().map(|n| format!("; {n}")).unwrap_or_default(),
                ),
                "Platform" if windows => {
                    props.insert("OperatingSystemFamily".to_string(), "WINDOWS_SERVER_2019_FULL".to_string());
                    mapped("OperatingSystemFamily", "WINDOWS → WINDOWS_SERVER_2019_FULL: check it matches your Windows AMI or image")
                }
                "Platform" => mapped("OperatingSystemFamily", format!("{} → LINUX (our default)", if value.is_empty() { "empty" } else { &value })),
                "MountDockerSocket" | "Privileged" if java_bool(Some(&value)) && !variant.launch.is_ec2() => {
                    none("EC2 only: Fargate runs no privileged container and has no Docker socket; build images with a tool that needs neither (kaniko, buildah), or run this profile on EC2")
                }
                "MountDockerSocket" | "Privileged" if java_bool(Some(&value)) => {
                    needs_privileged = true;
                    props.insert(p.key.clone(), "true".to_string());
                    mapped(&p.key, "true; its cluster profile gets AllowPrivileged true (decide whether it should)")
                }
                "MountDockerSocket" | "Privileged" => mapped(&p.key, "false: not set"),
                "AMI" | "InstanceType" | "IAMInstanceProfile" if variant.launch.is_ec2() => {
                    let to = match p.key.as_str() {
                        "AMI" => "Ec2AmiId",
                        "InstanceType" => "Ec2InstanceType",
                        _ => "Ec2InstanceProfile",
                    };
                    mapped(to, "a cluster profile key in ours: this elastic profile's cluster profile gets it")
                }
                "AMI" | "InstanceType" | "IAMInstanceProfile" => none("EC2 only; this profile runs on Fargate"),
                "BindMount" => bind_mounts(&value, variant.launch.is_ec2(), &mut props, &mut needs_privileged),
                "SpotPrice" => none("ours bids up to the on-demand price (AWS's default): no maximum price"),
                "SpotRequestExpiresAfter" => none("ours falls back to on-demand when spot capacity is short"),
                _ => none("not a key of their plugin that import knows: check it by hand"),
            }
        };
        notes.push(Note { key: p.key.clone(), outcome });
    }
    let reservation = props.get("MemoryReservation").and_then(|r| r.parse::<u32>().ok());
    if reservation.is_some_and(|r| r > memory.unwrap_or(2048)) {
        props.remove("MemoryReservation");
        if let Some(n) = notes.iter_mut().find(|n| n.key == "ReservedMemory") {
            n.outcome = Outcome::NotCarried(
                "more than the task's Memory, which ours does not allow: set MemoryReservation by hand".to_string(),
            );
        }
    }
    if let Some((_, kept)) = awslogs(cluster) {
        if !kept.is_empty() {
            props.insert("LogOptions".to_string(), kept.join("\n"));
        }
    }
    if !variant.launch.is_ec2() {
        // Windows tasks on Fargate take 1 vCPU at least.
        let least_cpu = if windows { 1024 } else { 0 };
        let (want_cpu, want_mem) = (cpu.unwrap_or(1024).max(least_cpu), memory.unwrap_or(2048));
        let given = (cpu.unwrap_or(1024), memory.unwrap_or(2048));
        let outcome = match fargate_size(want_cpu, want_mem) {
            Ok(((c, m), changed)) if changed || (c, m) != given => {
                props.insert("Cpu".to_string(), c.to_string());
                props.insert("Memory".to_string(), m.to_string());
                let (gc, gm) = given;
                let why = if windows && gc < 1024 { "a Fargate size for Windows" } else { "a Fargate size" };
                Some(format!("Cpu {gc} with Memory {gm} MiB is not {why}: rounded up to Cpu {c}, Memory {m}"))
            }
            Ok(_) => None,
            Err(e) => Some(format!("{e}: run it on EC2 or make it smaller")),
        };
        if let Some(text) = outcome {
            notes.push(Note { key: "(Fargate size)".to_string(), outcome: mapped("Cpu, Memory", text) });
        }
    }
    Elastic { variant, properties: props, needs_privileged, notes }
}

/// Their `BindMount` (a JSON list of `{Name, SourcePath, ContainerPath}`) as our `BindMounts`
/// lines.
fn bind_mounts(value: &str, ec2: bool, props: &mut BTreeMap<String, String>, privileged: &mut bool) -> Outcome {
    if value.is_empty() {
        return mapped("BindMounts", "empty");
    }
    if !ec2 {
        return none("EC2 only (an instance's directories); on Fargate use EfsVolumes or EphemeralStorageGiB");
    }
    let Ok(serde_json::Value::Array(mounts)) = serde_json::from_str::<serde_json::Value>(value) else {
        return Outcome::NotCarried(
            "not a JSON list of {Name, SourcePath, ContainerPath}: write BindMounts by hand".to_string(),
        );
    };
    let mut lines = Vec::new();
    for m in &mounts {
        let field = |k: &str| m.get(k).and_then(serde_json::Value::as_str).map(str::trim).unwrap_or_default();
        let (source, target) = (field("SourcePath"), field("ContainerPath"));
        if source.is_empty() || target.is_empty() {
            return Outcome::NotCarried(
                "a mount without SourcePath or ContainerPath: write BindMounts by hand".to_string(),
            );
        }
        *privileged |= is_sensitive_host_path(source);
        lines.push(format!("{source} {target}"));
    }
    props.insert("BindMounts".to_string(), lines.join("\n"));
    mapped("BindMounts", format!("{} mount(s), one line each: SourcePath ContainerPath (Name dropped)", lines.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::import::input::Property;

    fn profile(pairs: &[(&str, &str)]) -> Profile {
        Profile {
            id: "p".to_string(),
            plugin_id: None,
            cluster_profile_id: None,
            properties: pairs
                .iter()
                .map(|(k, v)| Property { key: k.to_string(), value: Value::Clear(v.to_string()) })
                .collect(),
        }
    }

    #[test]
    fn fargate_profiles_are_rounded_and_lose_ec2_keys() {
        let cluster = profile(&[("ClusterName", "ci")]);
        let e = elastic(
            &profile(&[
                ("Image", "i"),
                ("MaxMemory", "3G"),
                ("ReservedMemory", "1G"),
                ("CPU", "1024"),
                ("Fargate", "true"),
                ("Privileged", "true"),
            ]),
            &cluster,
        );
        assert_eq!(e.variant.launch, Launch::Fargate);
        assert_eq!(e.properties.get("Memory").map(String::as_str), Some("3072"));
        assert!(!e.properties.contains_key("MemoryReservation") && !e.properties.contains_key("Privileged"));
        let e =
            elastic(&profile(&[("Image", "i"), ("MaxMemory", "1500M"), ("CPU", "256"), ("Fargate", "true")]), &cluster);
        assert_eq!((e.properties["Cpu"].as_str(), e.properties["Memory"].as_str()), ("256", "2048"));
        assert!(e
            .notes
            .iter()
            .any(|n| matches!(&n.outcome, Outcome::Mapped { detail, .. } if detail.contains("rounded up"))));
        // Windows on Fargate: 1 vCPU at least.
        let windows =
            [("Image", "i"), ("MaxMemory", "1G"), ("CPU", "512"), ("Fargate", "true"), ("Platform", "WINDOWS")];
        let e = elastic(&profile(&windows), &cluster);
        assert_eq!((e.properties["Cpu"].as_str(), e.properties["Memory"].as_str()), ("1024", "2048"));
        assert_eq!(e.properties["OperatingSystemFamily"], "WINDOWS_SERVER_2019_FULL");
    }

    #[test]
    fn ec2_profiles_take_their_cluster_keys_and_secrets_stay_out() {
        let cluster = profile(&[
            ("ClusterName", "ci"),
            ("AWSSecretAccessKey", "s3cret"),
            ("LinuxAmi", "ami-1"),
            ("LinuxInstanceType", "c5.large"),
            ("IamInstanceProfile", "ecs"),
            ("MaxLinuxSpotInstanceAllowed", "300"),
            ("LinuxStopPolicy", "TerminateIdleInstance"),
        ]);
        let their = profile(&[
            ("Image", "i"),
            ("RunAsSpotInstance", "true"),
            ("InstanceType", "m5.large"),
            (
                "BindMount",
                r#"[{"Name":"d","SourcePath":"/var/run/docker.sock","ContainerPath":"/var/run/docker.sock"}]"#,
            ),
        ]);
        let e = elastic(&their, &cluster);
        assert_eq!(e.variant.suffix(), "ec2-spot");
        assert!(e.needs_privileged);
        assert_eq!(e.properties["BindMounts"], "/var/run/docker.sock /var/run/docker.sock");
        let c = cluster_properties(&cluster, &their, e.variant);
        assert_eq!(c["Ec2InstanceType"], "m5.large");
        assert_eq!(c["Ec2MaxInstances"], "100");
        assert_eq!(c["Ec2Spot"], "true");
        assert_eq!(c["Ec2StoppedInstances"], "0");
        assert!(!c.values().any(|v| v.contains("s3cret")));
        let notes = cluster_notes(&cluster);
        assert!(matches!(&notes[1].outcome, Outcome::NotCarried(why) if why.contains("RoleArn")));
    }
}
