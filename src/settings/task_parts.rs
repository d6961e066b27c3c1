//! What real builds need inside the task, read from the elastic profile: EFS volumes,
//! bind mounts, ulimits, a health check, log options and sidecar containers. Each reader takes the
//! profile's [`Fields`] and records every problem in words a team lead understands; the rules that
//! need the cluster profile too (launch type, allow-lists, `LogGroup`) are in [`super::compat`].
//!
//! Value syntaxes (one item per line, like `Environment` and `Tags`):
//!
//! - `EfsVolumes`: `fs-ID[:/root/dir] /container/path [read-only] [iam] [access-point=fsap-ID]
//!   [no-transit-encryption]`; transit encryption is on unless switched off.
//! - `BindMounts`: `/host/path /container/path [read-only]` (EC2 only).
//! - `Ulimits`: `NAME=SOFT[:HARD]` (`nofile=65536:1048576`); the hard limit defaults to the soft.
//! - `HealthCheck`: `KEY=VALUE` with `command` (a shell command), `interval`, `timeout`,
//!   `retries`, `startPeriod` (seconds, ECS's ranges).
//! - `LogOptions`: `KEY=VALUE` log driver options: awslogs' own (with the cluster profile's
//!   `LogGroup`), or FireLens output options when a sidecar is the FireLens router.
//! - `Sidecars`: a JSON list of `{name, image, cpu, memory, essential, environment, command,
//!   privileged, firelens}`.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::basics::quote;
use super::fields::{Fields, LineRule};
use super::line_rules::check_env_name;
use super::syntax;

/// One EFS volume mounted into the agent container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EfsVolume {
    /// `fs-...`.
    pub file_system_id: String,
    /// The directory of the file system to mount; `None` means its root.
    pub root_directory: Option<String>,
    /// Where it appears in the agent container.
    pub container_path: String,
    /// Mounted read-only.
    pub read_only: bool,
    /// EFS IAM authorization with the task role.
    pub iam: bool,
    /// `fsap-...`.
    pub access_point_id: Option<String>,
    /// Transit encryption (TLS to EFS); on unless `no-transit-encryption`.
    pub transit_encryption: bool,
}

/// One host directory mounted into the agent container (EC2 only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    /// The instance's directory.
    pub host_path: String,
    /// Where it appears in the agent container.
    pub container_path: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// One resource limit of the agent container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ulimit {
    /// ECS's name (`nofile`, `nproc`, ...).
    pub name: String,
    /// Soft limit.
    pub soft: u32,
    /// Hard limit, at least the soft one.
    pub hard: u32,
}

/// The agent container's health check (`CMD-SHELL`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// The shell command; exit 0 means healthy.
    pub command: String,
    /// Seconds between checks, 5 to 300 (ECS default 30).
    pub interval: u32,
    /// Seconds before a check fails, 2 to 60 (ECS default 5).
    pub timeout: u32,
    /// Failures before unhealthy, 1 to 10 (ECS default 3).
    pub retries: u32,
    /// Seconds of grace after start, 0 to 300 (ECS default 0).
    pub start_period: u32,
}

/// One extra container beside the GoCD agent.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sidecar {
    /// Container name, unique in the task, not the agent's.
    pub name: String,
    /// Docker image.
    pub image: String,
    /// CPU units taken from the task's `Cpu` (default 0).
    #[serde(default)]
    pub cpu: u32,
    /// Memory (MiB) taken from the task's `Memory`.
    pub memory: u32,
    /// Whether the task stops when it stops (ECS's default: true).
    #[serde(default = "yes")]
    pub essential: bool,
    /// Environment variables.
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    /// Command, one argument per item; empty means the image's.
    #[serde(default)]
    pub command: Vec<String>,
    /// Privileged (EC2 with `AllowPrivileged` only).
    #[serde(default)]
    pub privileged: bool,
    /// `fluentbit` or `fluentd`: this container is the task's FireLens log router.
    #[serde(default)]
    pub firelens: Option<String>,
}

fn yes() -> bool {
    true
}

/// ECS's ulimit names.
pub const ULIMIT_NAMES: &[&str] = &[
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
];

/// awslogs options a profile may set; the group, region and stream prefix are the plugin's.
pub const AWSLOGS_OPTIONS: &[&str] =
    &["awslogs-create-group", "awslogs-datetime-format", "awslogs-multiline-pattern", "mode", "max-buffer-size"];

/// FireLens router types.
pub const FIRELENS_TYPES: &[&str] = &["fluentbit", "fluentd"];

/// At most this many volumes of each kind: ECS's task definition stays readable and small.
const MAX_VOLUMES: usize = 10;
/// ECS allows 10 containers a task definition; one is the agent.
pub const MAX_SIDECARS: usize = 9;

/// An absolute path without spaces, `..` or control characters.
fn is_absolute_path(p: &str) -> bool {
    p.starts_with('/')
        && p.len() <= 4096
        && !p.contains(|c: char| c.is_whitespace() || c.is_control())
        && !p.split('/').any(|s| s == "..")
}

/// `EfsVolumes`.
pub(crate) fn efs_volumes(f: &mut Fields<'_>) -> Vec<EfsVolume> {
    let key = "EfsVolumes";
    let mut out: Vec<EfsVolume> = Vec::new();
    for (n, line) in numbered_lines(f, key) {
        match efs_line(&line) {
            Ok(v) if out.iter().any(|o| o.container_path == v.container_path) => {
                f.error(key, format!("Line {n}: {} is mounted twice; use one line per path.", v.container_path))
            }
            Ok(v) => out.push(v),
            Err(why) => f.error(key, format!("Line {n}: {why}.")),
        }
    }
    if out.len() > MAX_VOLUMES {
        f.error(key, format!("EfsVolumes lists {} volumes; at most {MAX_VOLUMES} are allowed.", out.len()));
    }
    out
}

fn efs_line(line: &str) -> Result<EfsVolume, String> {
    let shape = "it must look like fs-0a1b2c3d[:/directory] /container/path [read-only] [iam] [access-point=fsap-...] [no-transit-encryption]";
    let mut words = line.split_whitespace();
    let (Some(source), Some(container_path)) = (words.next(), words.next()) else {
        return Err(shape.to_string());
    };
    let (file_system_id, root_directory) = match source.split_once(':') {
        Some((fs, dir)) => (fs, Some(dir)),
        None => (source, None),
    };
    if !syntax::is_hex_id(file_system_id, "fs") {
        return Err(format!("{} is not an EFS file system id like fs-0a1b2c3d; {shape}", quote(file_system_id)));
    }
    if let Some(dir) = root_directory.filter(|d| !is_absolute_path(d)) {
        return Err(format!("the directory {} on the file system must start with /", quote(dir)));
    }
    if !is_absolute_path(container_path) {
        return Err(format!("the container path {} must be an absolute path like /cache", quote(container_path)));
    }
    let mut v = EfsVolume {
        file_system_id: file_system_id.to_string(),
        root_directory: root_directory.map(str::to_string),
        container_path: container_path.to_string(),
        read_only: false,
        iam: false,
        access_point_id: None,
        transit_encryption: true,
    };
    for word in words {
        match word {
            "read-only" => v.read_only = true,
            "iam" => v.iam = true,
            "no-transit-encryption" => v.transit_encryption = false,
            _ => match word.strip_prefix("access-point=") {
                Some(ap) if syntax::is_hex_id(ap, "fsap") => v.access_point_id = Some(ap.to_string()),
                Some(ap) => {
                    return Err(format!("{} is not an EFS access point id like fsap-0123456789abcdef0", quote(ap)))
                }
                None => {
                    return Err(format!(
                        "{} is not an option; use read-only, iam, access-point=fsap-... or no-transit-encryption",
                        quote(word)
                    ))
                }
            },
        }
    }
    // AWS's own rules (EFSVolumeConfiguration): IAM authorization and access points need TLS,
    // and an access point fixes the directory itself.
    if !v.transit_encryption && (v.iam || v.access_point_id.is_some()) {
        return Err("iam and access points need transit encryption; remove no-transit-encryption".to_string());
    }
    if v.access_point_id.is_some() && v.root_directory.as_deref().is_some_and(|d| d != "/") {
        return Err("with an access point the access point sets the directory; remove the :/directory".to_string());
    }
    Ok(v)
}

/// Host paths whose mount controls the instance: they need `AllowPrivileged`.
const SENSITIVE_HOST_PATHS: &[&str] =
    &["/", "/etc", "/proc", "/sys", "/dev", "/boot", "/root", "/run", "/var/run", "/var/lib/docker", "/var/lib/ecs"];

/// Whether mounting `host_path` gives the container power over the instance (the Docker socket,
/// system directories).
pub fn is_sensitive_host_path(host_path: &str) -> bool {
    let path = host_path.trim_end_matches('/');
    let path = if path.is_empty() { "/" } else { path };
    path.ends_with("docker.sock")
        || SENSITIVE_HOST_PATHS.iter().any(|s| path == *s || (*s != "/" && path.starts_with(&format!("{s}/"))))
}

/// `BindMounts`.
pub(crate) fn bind_mounts(f: &mut Fields<'_>) -> Vec<BindMount> {
    let key = "BindMounts";
    let mut out: Vec<BindMount> = Vec::new();
    for (n, line) in numbered_lines(f, key) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let parsed = match words.as_slice() {
            [host, container] => Some((host, container, false)),
            [host, container, "read-only"] => Some((host, container, true)),
            _ => None,
        };
        let Some((host, container, read_only)) = parsed else {
            f.error(key, format!("Line {n}: it must look like /host/path /container/path [read-only]."));
            continue;
        };
        if !is_absolute_path(host) || !is_absolute_path(container) {
            f.error(key, format!("Line {n}: both paths must be absolute, like /var/cache/m2 /home/go/.m2."));
        } else if out.iter().any(|b| b.container_path == *container) {
            f.error(key, format!("Line {n}: {container} is mounted twice; use one line per path."));
        } else {
            out.push(BindMount { host_path: host.to_string(), container_path: container.to_string(), read_only });
        }
    }
    if out.len() > MAX_VOLUMES {
        f.error(key, format!("BindMounts lists {} mounts; at most {MAX_VOLUMES} are allowed.", out.len()));
    }
    out
}

fn numbered_lines(f: &Fields<'_>, key: &str) -> Vec<(usize, String)> {
    let Some(value) = f.raw(key) else {
        return Vec::new();
    };
    value.lines().enumerate().map(|(i, l)| (i + 1, l.trim().to_string())).filter(|(_, l)| !l.is_empty()).collect()
}

const ULIMITS: LineRule = LineRule {
    noun: "limit",
    check_key: |name| {
        if ULIMIT_NAMES.contains(&name) {
            Ok(())
        } else {
            Err(format!("{} is not a limit ECS knows; use one of {}", quote(name), ULIMIT_NAMES.join(", ")))
        }
    },
    check_value: |name, value| parse_ulimit(value).map(|_| ()).map_err(|why| format!("{name}: {why}")),
    max: None,
};

fn parse_ulimit(value: &str) -> Result<(u32, u32), String> {
    let number = |s: &str| {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|n| *n <= i32::MAX as u32)
            .ok_or_else(|| format!("{} must be SOFT or SOFT:HARD, whole numbers like 65536:1048576", quote(value)))
    };
    let (soft, hard) = match value.split_once(':') {
        Some((soft, hard)) => (number(soft)?, number(hard)?),
        None => (number(value)?, number(value)?),
    };
    if soft > hard {
        return Err(format!("the soft limit {soft} is above the hard limit {hard}"));
    }
    Ok((soft, hard))
}

/// `Ulimits`.
pub(crate) fn ulimits(f: &mut Fields<'_>) -> Vec<Ulimit> {
    f.key_values("Ulimits", &ULIMITS)
        .into_iter()
        .filter_map(|(name, value)| parse_ulimit(&value).ok().map(|(soft, hard)| Ulimit { name, soft, hard }))
        .collect()
}

const HEALTH_KEYS: &[(&str, u32, u32, u32)] =
    &[("interval", 5, 300, 30), ("timeout", 2, 60, 5), ("retries", 1, 10, 3), ("startPeriod", 0, 300, 0)];

const HEALTH: LineRule = LineRule {
    noun: "setting",
    check_key: |k| {
        if k == "command" || HEALTH_KEYS.iter().any(|(name, ..)| *name == k) {
            Ok(())
        } else {
            Err(format!(
                "{} is not a health check setting; use command, interval, timeout, retries or startPeriod",
                quote(k)
            ))
        }
    },
    check_value: |k, v| {
        if k == "command" {
            return if v.is_empty() { Err("command must not be empty".to_string()) } else { Ok(()) };
        }
        let (_, low, high, _) = HEALTH_KEYS.iter().find(|(name, ..)| *name == k).copied().unwrap_or(("", 0, 0, 0));
        match v.parse::<u32>() {
            Ok(n) if (low..=high).contains(&n) => Ok(()),
            _ => Err(format!("{k} must be a whole number of seconds from {low} to {high}; {} is not", quote(v))),
        }
    },
    max: None,
};

/// `HealthCheck`.
pub(crate) fn health_check(f: &mut Fields<'_>) -> Option<HealthCheck> {
    if !f.is_set("HealthCheck") {
        return None;
    }
    let pairs = f.key_values("HealthCheck", &HEALTH);
    let get = |k: &str| pairs.iter().find(|(name, _)| name == k).map(|(_, v)| v.clone());
    let Some(command) = get("command") else {
        if !f.has_error("HealthCheck") {
            f.error(
                "HealthCheck",
                "HealthCheck needs a command line, like command=curl -fs http://localhost:8152/ || exit 1.",
            );
        }
        return None;
    };
    let number = |k: &str| {
        let (_, _, _, default) = HEALTH_KEYS.iter().find(|(name, ..)| *name == k).copied().unwrap_or(("", 0, 0, 0));
        get(k).and_then(|v| v.parse().ok()).unwrap_or(default)
    };
    Some(HealthCheck {
        command,
        interval: number("interval"),
        timeout: number("timeout"),
        retries: number("retries"),
        start_period: number("startPeriod"),
    })
}

const LOG_OPTIONS: LineRule = LineRule {
    noun: "option",
    check_key: |k| {
        let ok = !k.is_empty() && k.len() <= 128 && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if ok {
            Ok(())
        } else {
            Err(format!("{} is not a log option name (letters, digits, - _ .)", quote(k)))
        }
    },
    check_value: |k, v| if v.is_empty() { Err(format!("{k} needs a value")) } else { Ok(()) },
    max: Some(20),
};

/// `LogOptions` (which options are allowed depends on the sidecars: see [`check_log_options`]).
pub(crate) fn log_options(f: &mut Fields<'_>) -> Vec<(String, String)> {
    f.key_values("LogOptions", &LOG_OPTIONS)
}

/// Without a FireLens sidecar the options go to awslogs: only its own, not the plugin's.
pub(crate) fn check_log_options(f: &mut Fields<'_>, options: &[(String, String)], firelens: bool) {
    if firelens {
        return;
    }
    for (k, _) in options.iter().filter(|(k, _)| !AWSLOGS_OPTIONS.contains(&k.as_str())) {
        let message = if k.starts_with("awslogs-group") || k == "awslogs-region" || k == "awslogs-stream-prefix" {
            format!("{k} is set by the plugin from the cluster profile's LogGroup and region; remove it.")
        } else {
            format!(
                "{k} is not an awslogs option this plugin passes on; use {} (or a FireLens sidecar for other outputs).",
                AWSLOGS_OPTIONS.join(", ")
            )
        };
        f.error("LogOptions", message);
    }
    if let Some((_, v)) = options.iter().find(|(k, v)| k == "awslogs-create-group" && v != "true" && v != "false") {
        f.error("LogOptions", format!("awslogs-create-group must be true or false; {} is not.", quote(v)));
    }
}

/// `Sidecars`: the JSON list, each container checked; names unique and not the agent's.
pub(crate) fn sidecars(f: &mut Fields<'_>, agent_container: &str) -> Vec<Sidecar> {
    let key = "Sidecars";
    let Some(text) = f.raw(key) else {
        return Vec::new();
    };
    let sidecars: Vec<Sidecar> = match serde_json::from_str(text) {
        Ok(list) => list,
        Err(e) => {
            f.error(
                key,
                format!(
                    "Sidecars must be a JSON list like [{{\"name\": \"docker\", \"image\": \"docker:26-dind\", \"memory\": 1024}}]: {e}."
                ),
            );
            return Vec::new();
        }
    };
    if sidecars.len() > MAX_SIDECARS {
        f.error(
            key,
            format!(
                "Sidecars lists {} containers; ECS allows at most {MAX_SIDECARS} beside the agent.",
                sidecars.len()
            ),
        );
    }
    for (i, s) in sidecars.iter().enumerate() {
        let who = if s.name.is_empty() { format!("sidecar {}", i + 1) } else { format!("sidecar {}", s.name) };
        if !syntax::is_ecs_name(&s.name) {
            f.error(key, format!("{who}: name {} must be 1 to 255 letters, digits, '-' and '_'.", quote(&s.name)));
        } else if s.name == agent_container {
            f.error(key, format!("{who}: the name {agent_container} is the GoCD agent's; choose another."));
        } else if sidecars[..i].iter().any(|o| o.name == s.name) {
            f.error(key, format!("{who}: the name is used twice; each container needs its own."));
        }
        if let Err(why) = syntax::check_image(&s.image) {
            f.error(key, format!("{who}: image {} is not a Docker image reference: {why}.", quote(&s.image)));
        }
        if !(6..=122_880).contains(&s.memory) {
            f.error(key, format!("{who}: memory must be 6 to 122880 MiB; {} is not.", s.memory));
        }
        if s.cpu > 16_384 {
            f.error(key, format!("{who}: cpu must be 0 to 16384 units; {} is not.", s.cpu));
        }
        for name in s.environment.keys() {
            if let Err(why) = check_env_name(name) {
                f.error(key, format!("{who}: {why}."));
            }
        }
        if let Some(kind) = s.firelens.as_deref().filter(|k| !FIRELENS_TYPES.contains(k)) {
            f.error(key, format!("{who}: firelens must be fluentbit or fluentd; {} is not.", quote(kind)));
        }
    }
    if sidecars.iter().filter(|s| s.firelens.is_some()).count() > 1 {
        f.error(key, "Only one sidecar can be the FireLens log router.");
    }
    sidecars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efs_lines() {
        let v = efs_line("fs-0a1b2c3d:/ci/gradle /home/go/.gradle read-only").expect("valid");
        assert_eq!(v.root_directory.as_deref(), Some("/ci/gradle"));
        assert!(v.read_only && v.transit_encryption && !v.iam);
        let v = efs_line("fs-0a1b2c3d /cache iam access-point=fsap-0123456789abcdef0").expect("valid");
        assert_eq!(v.access_point_id.as_deref(), Some("fsap-0123456789abcdef0"));
        assert!(efs_line("fs-0a1b2c3d /cache iam no-transit-encryption").unwrap_err().contains("transit"));
        assert!(efs_line("fs-0a1b2c3d:/x /cache access-point=fsap-0123456789abcdef0").is_err());
        assert!(efs_line("fs-0a1b2c3d cache").is_err());
        assert!(efs_line("fs-0a1b2c3d /cache rw").unwrap_err().contains("'rw' is not an option"));
        assert!(efs_line("efs-1 /cache").is_err());
    }

    #[test]
    fn sensitive_host_paths() {
        for p in ["/", "/etc", "/etc/", "/var/run/docker.sock", "/run/docker.sock", "/proc/1", "/var/lib/docker/x"] {
            assert!(is_sensitive_host_path(p), "{p}");
        }
        for p in ["/var/cache/m2", "/data", "/etcetera", "/home/ec2-user/cache"] {
            assert!(!is_sensitive_host_path(p), "{p}");
        }
    }

    #[test]
    fn ulimit_values() {
        assert_eq!(parse_ulimit("1024"), Ok((1024, 1024)));
        assert_eq!(parse_ulimit("1024:4096"), Ok((1024, 4096)));
        assert!(parse_ulimit("4096:1024").is_err());
        assert!(parse_ulimit("lots").is_err());
    }
}
