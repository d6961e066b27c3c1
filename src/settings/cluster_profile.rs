//! The cluster profile: one AWS account or role, one region, one ECS cluster (`docs/design.md`,
//! "Profiles").
//!
//! [`ClusterProfile::parse`] turns GoCD's string map into typed values and reports every problem
//! at once; the EC2 capacity part lives in [`super::ec2_capacity`].

use super::basics::{quote, LaunchType};
use super::capacity_providers::{self, ProviderStrategy};
use super::ec2_capacity::{self, Ec2Capacity};
use super::fields::Fields;
use super::keys::{ProfileKind, LAUNCH_TYPES};
use super::line_rules::{ENV_VARIABLES, TAGS};
use super::syntax;
use crate::protocol::profiles::{FieldError, Properties};
use crate::secret::Secret;

/// Static AWS credentials from the profile (both keys are given, or neither).
#[derive(Debug, Clone)]
pub struct StaticCredentials {
    /// `AccessKeyId`.
    pub access_key_id: Secret<String>,
    /// `SecretAccessKey`.
    pub secret_access_key: Secret<String>,
}

/// A parsed, valid cluster profile.
#[derive(Debug, Clone)]
pub struct ClusterProfile {
    /// `ClusterName`: the cluster's name or ARN, as given.
    pub cluster_name: String,
    /// `Region`, else the region of a `ClusterName` ARN; `None` means the SDK's default region.
    pub region: Option<String>,
    /// `GoServerUrl`; `None` means the server's own site URL.
    pub go_server_url: Option<String>,
    /// `AccessKeyId` and `SecretAccessKey`; `None` means the SDK's default credential chain.
    pub static_credentials: Option<StaticCredentials>,
    /// `RoleArn`: every call of this profile runs as this role.
    pub role_arn: Option<String>,
    /// `ExternalId` as given; see [`ClusterProfile::external_id`] for the effective value.
    pub external_id: Option<Secret<String>>,
    /// `RoleSessionName` as given; see [`ClusterProfile::role_session_name`] for the effective value.
    pub role_session_name: Option<String>,
    /// `LaunchType`, default Fargate.
    pub launch_type: LaunchType,
    /// `SubnetIds`; empty means the default VPC's default subnets.
    pub subnet_ids: Vec<String>,
    /// `SecurityGroupIds`; empty means the default VPC's default group.
    pub security_group_ids: Vec<String>,
    /// `AssignPublicIp`, default false.
    pub assign_public_ip: bool,
    /// `MaxAgents`: running plus pending agents, default 10.
    pub max_agents: u32,
    /// `AgentRegisterTimeoutMinutes`, default 10.
    pub agent_register_timeout_minutes: u32,
    /// `EnvironmentVariables`, in the order given.
    pub environment_variables: Vec<(String, String)>,
    /// `Tags`, in the order given.
    pub tags: Vec<(String, String)>,
    /// `LogGroup` for the awslogs driver.
    pub log_group: Option<String>,
    /// `EventQueueUrl`: the SQS queue EventBridge feeds with this cluster's events.
    pub event_queue_url: Option<String>,
    /// `PriceTable`: a price file laid over the embedded price table (checked to read as one).
    pub price_table: Option<String>,
    /// `AllowedImages`; empty means any image.
    pub allowed_images: Vec<glob::Pattern>,
    /// `AllowedTaskRoleArns`; empty means any task role.
    pub allowed_task_role_arns: Vec<glob::Pattern>,
    /// `AllowedExecutionRoleArns`; empty means any execution role.
    pub allowed_execution_role_arns: Vec<glob::Pattern>,
    /// `AllowedSecretArns`; empty means any secret.
    pub allowed_secret_arns: Vec<glob::Pattern>,
    /// `AllowedFileSystemIds`; empty means any EFS file system.
    pub allowed_file_system_ids: Vec<glob::Pattern>,
    /// `AllowPrivileged`, default false: needed before any elastic profile may be privileged or
    /// mount the Docker socket.
    pub allow_privileged: bool,
    /// The `Ec2*` settings: `Some` exactly when the launch type is EC2.
    pub ec2: Option<Ec2Capacity>,
    /// `CapacityProviderStrategy`: RunTask through these capacity providers (or the cluster's
    /// default strategy) instead of `LaunchType`, which is then left out (and reads FARGATE:
    /// awsvpc task definitions, Fargate's rules).
    pub capacity_providers: Option<ProviderStrategy>,
}

impl ClusterProfile {
    /// Parses and validates a cluster profile.
    ///
    /// # Errors
    /// Every problem found, one [`FieldError`] each, keyed by the property.
    pub fn parse(props: &Properties) -> Result<ClusterProfile, Vec<FieldError>> {
        let mut f = Fields::new(props, ProfileKind::Cluster);
        let cluster_name = f.required("ClusterName", check_cluster_name);
        let region = read_region(&mut f, cluster_name.as_deref());
        let go_server_url = f.string("GoServerUrl", |v| {
            syntax::check_go_server_url(v).map_err(|why| {
                format!("GoServerUrl {} is not a GoCD server URL: {why}, like https://gocd.example.com/go.", quote(v))
            })
        });
        let static_credentials = read_credentials(&mut f);
        let (role_arn, external_id, role_session_name) = read_role(&mut f);
        let launch_type = f.choice("LaunchType", LAUNCH_TYPES).and_then(LaunchType::from_name);
        let profile = ClusterProfile {
            cluster_name: cluster_name.unwrap_or_default(),
            region,
            go_server_url,
            static_credentials,
            role_arn,
            external_id,
            role_session_name,
            launch_type: launch_type.unwrap_or(LaunchType::Fargate),
            subnet_ids: f.id_list("SubnetIds", "subnet", "subnet id", 16),
            security_group_ids: f.id_list("SecurityGroupIds", "sg", "security group id", 5),
            assign_public_ip: f.boolean("AssignPublicIp", false),
            max_agents: f.number("MaxAgents", 1..=1000, 10),
            agent_register_timeout_minutes: f.number("AgentRegisterTimeoutMinutes", 1..=120, 10),
            environment_variables: f.key_values("EnvironmentVariables", &ENV_VARIABLES),
            tags: f.key_values("Tags", &TAGS),
            log_group: f.string("LogGroup", check_log_group),
            event_queue_url: f.string("EventQueueUrl", check_event_queue_url),
            price_table: f.string("PriceTable", check_price_table),
            allowed_images: f.globs("AllowedImages"),
            allowed_task_role_arns: f.globs("AllowedTaskRoleArns"),
            allowed_execution_role_arns: f.globs("AllowedExecutionRoleArns"),
            allowed_secret_arns: f.globs("AllowedSecretArns"),
            allowed_file_system_ids: f.globs("AllowedFileSystemIds"),
            allow_privileged: f.boolean("AllowPrivileged", false),
            ec2: ec2_capacity::read(&mut f, launch_type),
            capacity_providers: capacity_providers::read(&mut f, launch_type),
        };
        f.finish(profile)
    }

    /// The ARN of the `EventQueueUrl` queue, in `region` (the profile's).
    pub fn event_queue_arn(&self, region: &str) -> Option<String> {
        let (account, name) = syntax::sqs_queue_url(self.event_queue_url.as_deref()?)?;
        Some(format!("arn:aws:sqs:{region}:{account}:{name}"))
    }

    /// The cluster's short name (the last part of an ARN).
    pub fn cluster_short_name(&self) -> &str {
        syntax::cluster_arn(&self.cluster_name).map_or(&self.cluster_name, |(_, name)| name)
    }

    /// The AssumeRole session name: `RoleSessionName`, else `gocd-ecs-<cluster>` sanitised to
    /// IAM's characters and cut at 64.
    pub fn role_session_name(&self) -> String {
        if let Some(name) = &self.role_session_name {
            return name.clone();
        }
        format!("gocd-ecs-{}", self.cluster_short_name())
            .chars()
            .map(|c| if syntax::is_iam_char(c) { c } else { '-' })
            .take(64)
            .collect()
    }

    /// The AssumeRole external id: `ExternalId`, else `gocd:server-id:<server_id>`; `None`
    /// without `RoleArn`.
    pub fn external_id(&self, server_id: &str) -> Option<String> {
        self.role_arn.as_ref()?;
        Some(match &self.external_id {
            Some(id) => id.expose().clone(),
            None => format!("gocd:server-id:{server_id}"),
        })
    }
}

/// Validates a cluster profile: every problem, or nothing when it is valid.
pub fn validate_cluster_profile(props: &Properties) -> Vec<FieldError> {
    ClusterProfile::parse(props).err().unwrap_or_default()
}

fn check_cluster_name(v: &str) -> Result<(), String> {
    if syntax::is_ecs_name(v) || syntax::cluster_arn(v).is_some() {
        Ok(())
    } else if v.starts_with("arn:") {
        Err(format!(
            "ClusterName {} is not an ECS cluster ARN: it must look like arn:aws:ecs:us-east-1:123456789012:cluster/gocd-agents.",
            quote(v)
        ))
    } else {
        Err(format!(
            "ClusterName {} is not a cluster name: use 1 to 255 letters, digits, '-' and '_', or the cluster's ARN.",
            quote(v)
        ))
    }
}

/// `Region`, checked against the region of a cluster ARN, else that ARN's region.
fn read_region(f: &mut Fields<'_>, cluster_name: Option<&str>) -> Option<String> {
    let region = f.string("Region", |v| {
        if syntax::is_region(v) {
            return Ok(());
        }
        let hint = if syntax::is_region(&v.to_lowercase()) { " (region names are lowercase)" } else { "" };
        Err(format!(
            "Region {} is not an AWS region name{hint}; use one like us-east-1, eu-west-3 or ap-southeast-4.",
            quote(v)
        ))
    });
    let arn_region = cluster_name.and_then(syntax::cluster_arn).map(|(region, _)| region);
    match (region, arn_region) {
        (Some(region), Some(arn_region)) if region != arn_region => {
            let message = format!("Region is {region} but the ClusterName ARN is in {arn_region}; they must agree.");
            f.error("Region", message);
            Some(region)
        }
        (None, Some(arn_region)) if !f.has_error("Region") => Some(arn_region.to_string()),
        (region, _) => region,
    }
}

/// `AccessKeyId` and `SecretAccessKey`: both or neither; values are never quoted.
fn read_credentials(f: &mut Fields<'_>) -> Option<StaticCredentials> {
    let access_key_id = f.string("AccessKeyId", |v| {
        if v.bytes().all(|b| b.is_ascii_alphanumeric()) {
            Ok(())
        } else {
            Err("AccessKeyId may contain only letters and digits.".to_string())
        }
    });
    let secret_access_key = f.string("SecretAccessKey", |v| {
        if v.contains(char::is_whitespace) {
            Err("SecretAccessKey must not contain spaces.".to_string())
        } else {
            Ok(())
        }
    });
    match (f.is_set("AccessKeyId"), f.is_set("SecretAccessKey")) {
        (true, false) => {
            f.error("SecretAccessKey", "SecretAccessKey is required when AccessKeyId is set: give both or neither.")
        }
        (false, true) => {
            f.error("AccessKeyId", "AccessKeyId is required when SecretAccessKey is set: give both or neither.")
        }
        _ => {}
    }
    Some(StaticCredentials {
        access_key_id: Secret::new(access_key_id?),
        secret_access_key: Secret::new(secret_access_key?),
    })
}

/// `RoleArn`, `ExternalId` and `RoleSessionName` (the last two need the first).
fn read_role(f: &mut Fields<'_>) -> (Option<String>, Option<Secret<String>>, Option<String>) {
    let role_arn = f.string("RoleArn", |v| {
        if syntax::is_role_arn(v) {
            Ok(())
        } else {
            Err(format!(
                "RoleArn {} is not an IAM role ARN: it must look like arn:aws:iam::123456789012:role/gocd-ecs-agents.",
                quote(v)
            ))
        }
    });
    let external_id = f.string("ExternalId", |v| {
        let ok = (2..=1224).contains(&v.len()) && v.chars().all(|c| syntax::is_iam_char(c) || c == ':' || c == '/');
        if ok {
            Ok(())
        } else {
            Err("ExternalId must be 2 to 1224 characters: letters, digits and _ + = , . @ : / -.".to_string())
        }
    });
    let role_session_name = f.string("RoleSessionName", |v| {
        if syntax::is_iam_name(v, 64) && v.len() >= 2 {
            Ok(())
        } else {
            Err(format!("RoleSessionName {} must be 2 to 64 characters: letters, digits and _ + = , . @ -.", quote(v)))
        }
    });
    if !f.is_set("RoleArn") {
        for key in ["ExternalId", "RoleSessionName"] {
            if f.is_set(key) {
                f.error(key, format!("{key} only applies when RoleArn is set."));
            }
        }
    }
    (role_arn, external_id.map(Secret::new), role_session_name)
}

fn check_log_group(v: &str) -> Result<(), String> {
    if syntax::is_log_group(v) {
        Ok(())
    } else {
        Err(format!(
            "LogGroup {} is not a CloudWatch log group name: use 1 to 512 letters, digits and . - _ / #.",
            quote(v)
        ))
    }
}

/// A price file that reads as a price table (`crate::cost`).
fn check_price_table(v: &str) -> Result<(), String> {
    crate::cost::PriceTable::load(std::path::Path::new(v)).map(|_| ()).map_err(|e| {
        format!(
            "PriceTable: {e}. Name a JSON price file readable by the GoCD server, in the format \
             `ecs-elastic-agent prices` prints (`prices --refresh --out FILE` writes one)."
        )
    })
}

/// An SQS queue URL: `http(s)://host/<12-digit account>/<queue name>` (AWS's
/// `https://sqs.<region>.amazonaws.com/...`, or an endpoint of the operator's choosing).
fn check_event_queue_url(v: &str) -> Result<(), String> {
    if syntax::sqs_queue_url(v).is_some() {
        Ok(())
    } else {
        Err(format!(
            "EventQueueUrl {} is not an SQS queue URL: use the queue's URL as SQS shows it, like \
             https://sqs.us-east-1.amazonaws.com/123456789012/gocd-ecs-events.",
            quote(v)
        ))
    }
}
