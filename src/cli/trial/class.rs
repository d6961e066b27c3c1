//! `try`'s classes of failure: each has its exit status, a name the report prints, and the
//! fix. The table is in `try --help` and `docs/getting-started.md`; [`Class::ALL`] keeps the
//! three in step (a unit test compares them).

use crate::aws::stop_cause::{is_quota_text, StopCause};
use crate::aws::{AwsError, Failure};
use crate::settings::{ClusterProfile, ElasticProfile, LaunchType};

/// How a `try` run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The task ran and everything try created is gone.
    Ran,
    /// Another failure (a refusal of another kind, a task stopped for another reason).
    Failed,
    /// The profiles are not valid, do not fit each other, or are not something try can run.
    Profile,
    /// No region, credentials that do not work, a role that cannot be assumed, or the
    /// plugin's identity lacking a permission.
    Credentials,
    /// The image does not exist, or its registry refused the pull.
    Image,
    /// The task execution role is missing (`ExecutionRoleArn`) or lacks a permission.
    ExecutionRole,
    /// The task could not reach its registry (or ECR, Secrets Manager, CloudWatch Logs).
    NoRoute,
    /// No capacity for the task now.
    NoCapacity,
    /// An account quota or rate of AWS.
    Quota,
    /// The task did not reach RUNNING within `--timeout`.
    Timeout,
    /// The task ran, but something try created could not be removed (it says what).
    Leftover,
    /// The server's host name does not resolve from the tasks' subnets.
    ServerName,
    /// The server refused the tasks' connection, or it timed out.
    ServerUnreachable,
    /// The tasks do not trust the server's TLS certificate.
    ServerTls,
    /// The server answered with an HTTP error.
    ServerHttp,
    /// Something answered at the server URL, but not a GoCD server.
    NotGoCd,
    /// A material host given with `--material` could not be reached.
    Material,
    /// Interrupted (SIGINT or SIGTERM): what was created was removed first.
    Interrupted,
}

impl Class {
    /// Every class, in the order of the table.
    pub const ALL: [Class; 18] = [
        Class::Ran,
        Class::Failed,
        Class::Profile,
        Class::Credentials,
        Class::Image,
        Class::ExecutionRole,
        Class::NoRoute,
        Class::NoCapacity,
        Class::Quota,
        Class::Timeout,
        Class::Leftover,
        Class::ServerName,
        Class::ServerUnreachable,
        Class::ServerTls,
        Class::ServerHttp,
        Class::NotGoCd,
        Class::Material,
        Class::Interrupted,
    ];

    /// The exit status (2 is clap's: bad arguments).
    pub fn status(self) -> u8 {
        match self {
            Class::Ran => 0,
            Class::Failed => 1,
            Class::Profile => 3,
            Class::Credentials => 4,
            Class::Image => 5,
            Class::ExecutionRole => 6,
            Class::NoRoute => 7,
            Class::NoCapacity => 8,
            Class::Quota => 9,
            Class::Timeout => 10,
            Class::Leftover => 11,
            Class::ServerName => 12,
            Class::ServerUnreachable => 13,
            Class::ServerTls => 14,
            Class::ServerHttp => 15,
            Class::NotGoCd => 16,
            Class::Material => 17,
            Class::Interrupted => 130,
        }
    }

    /// The name the report's `FAIL` line starts with.
    pub fn name(self) -> &'static str {
        match self {
            Class::Ran => "ran",
            Class::Failed => "failed",
            Class::Profile => "profile",
            Class::Credentials => "credentials",
            Class::Image => "image",
            Class::ExecutionRole => "execution role",
            Class::NoRoute => "no route",
            Class::NoCapacity => "no capacity",
            Class::Quota => "quota",
            Class::Timeout => "timeout",
            Class::Leftover => "leftover",
            Class::ServerName => "server name",
            Class::ServerUnreachable => "server unreachable",
            Class::ServerTls => "server TLS",
            Class::ServerHttp => "server HTTP",
            Class::NotGoCd => "not GoCD",
            Class::Material => "material",
            Class::Interrupted => "interrupted",
        }
    }
}

/// A failed step: its class, what happened and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// The class (exit status).
    pub class: Class,
    /// What happened.
    pub finding: String,
    /// What to do.
    pub fix: String,
}

impl Failed {
    /// A failure of `class`.
    pub fn new(class: Class, finding: impl Into<String>, fix: impl Into<String>) -> Self {
        Failed { class, finding: finding.into(), fix: fix.into() }
    }
}

/// Whether the task needs an execution role to start, as the profiles stand: on Fargate, to
/// send its output to `LogGroup` (awslogs), to read `Secrets` or `RepositoryCredentialsArn`,
/// or to pull from ECR.
pub fn needs_execution_role(cluster: &ClusterProfile, elastic: &ElasticProfile) -> bool {
    let fargate = cluster.launch_type != LaunchType::Ec2;
    fargate
        && (cluster.log_group.is_some()
            || !elastic.secrets.is_empty()
            || elastic.repository_credentials_arn.is_some()
            || elastic.image.contains(".dkr.ecr."))
}

/// The class and fix of an AWS call that failed while try set up or launched the task.
pub fn of_aws(error: &AwsError, cluster: &ClusterProfile, elastic: &ElasticProfile) -> Failed {
    let finding = error.to_string();
    match error.failure {
        Failure::Throttled => Failed::new(
            Class::Quota,
            finding,
            "AWS throttled the calls after every retry: wait a minute, or raise the account's quota (Service Quotas, ECS and Fargate)",
        ),
        Failure::NoCapacity => Failed::new(
            Class::NoCapacity,
            finding,
            "try again later, add subnets in other Availability Zones, or use FARGATE (not FARGATE_SPOT) or another capacity provider",
        ),
        Failure::Denied | Failure::NotSent => Failed::new(
            Class::Credentials,
            finding,
            "give the plugin's identity the policy `ecs-elastic-agent iam-policy` prints for these profiles; `ecs-elastic-agent doctor` checks credentials and role",
        ),
        Failure::Refused
            if elastic.execution_role_arn.is_none()
                && needs_execution_role(cluster, elastic)
                && matches!(error.operation, "RegisterTaskDefinition" | "RunTask") =>
        {
            Failed::new(
                Class::ExecutionRole,
                format!("{finding} (the elastic profile sets no ExecutionRoleArn, and {})", execution_role_use(cluster, elastic)),
                "set ExecutionRoleArn in the elastic profile to a role ECS tasks may assume, with the policy `ecs-elastic-agent iam-policy --document execution-role-policy` prints",
            )
        }
        Failure::Refused if is_quota_text(&error.detail) => Failed::new(
            Class::Quota,
            finding,
            "raise the quota in Service Quotas (ECS and Fargate), or stop other tasks of the account",
        ),
        _ => Failed::new(
            Class::Failed,
            finding,
            "`ecs-elastic-agent doctor --cluster-profile ... --elastic-profile ...` checks the cluster, networking and roles",
        ),
    }
}

/// What the task needs its execution role for, in words.
fn execution_role_use(cluster: &ClusterProfile, elastic: &ElasticProfile) -> &'static str {
    if cluster.log_group.is_some() {
        "Fargate needs one to send the agent's output to LogGroup"
    } else if elastic.repository_credentials_arn.is_some() {
        "Fargate needs one to read RepositoryCredentialsArn"
    } else if !elastic.secrets.is_empty() {
        "Fargate needs one to read Secrets"
    } else {
        "Fargate needs one to pull from ECR"
    }
}

/// The class and fix of a task that stopped before it ran.
pub fn of_stop(cause: StopCause, reason: &str, elastic: &ElasticProfile) -> Failed {
    let image = &elastic.image;
    match cause {
        StopCause::ImageNotFound => Failed::new(
            Class::Image,
            format!("image {image} was not found: {reason}"),
            "correct Image in the elastic profile (repository, name and tag), or push the image",
        ),
        StopCause::ImageDenied => Failed::new(
            Class::Image,
            format!("the registry refused to let the task pull {image}: {reason}"),
            "make the image public, or give RepositoryCredentialsArn (a Secrets Manager secret with the registry's user name and password)",
        ),
        StopCause::ExecutionRole => {
            let role = elastic.execution_role_arn.as_deref().unwrap_or("(none: ExecutionRoleArn is not set)");
            Failed::new(
                Class::ExecutionRole,
                format!("the task execution role {role} may not do what the task needs to start: {reason}"),
                "attach the policy `ecs-elastic-agent iam-policy --document execution-role-policy` prints to ExecutionRoleArn's role (ECR, secrets, logs)",
            )
        }
        StopCause::NoRoute => Failed::new(
            Class::NoRoute,
            format!("the task could not reach its registry or AWS: {reason}"),
            "give the subnets a way out: AssignPublicIp true behind an internet gateway, a NAT gateway, or VPC endpoints (ecr.api, ecr.dkr, s3, logs); let the security groups send TCP 443 (`ecs-elastic-agent doctor` shows the reach line)",
        ),
        StopCause::Other => Failed::new(
            Class::Failed,
            format!("the task stopped before it ran: {reason}"),
            "read the stop reason above; `aws ecs describe-tasks` shows the containers' reasons",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_has_its_own_status_and_the_help_lists_each() {
        let mut statuses: Vec<u8> = Class::ALL.iter().map(|c| c.status()).collect();
        statuses.sort_unstable();
        statuses.dedup();
        assert_eq!(statuses.len(), Class::ALL.len(), "one status per class");
        assert!(!statuses.contains(&2), "2 is clap's");
        for class in Class::ALL {
            let row = format!("{:>5}  {}", class.status(), class.name());
            assert!(super::super::super::TRY_EXAMPLES.contains(&row), "--help lacks {row:?}");
        }
    }

    #[test]
    fn a_refusal_without_an_execution_role_names_execution_role_arn() {
        let props = |pairs: &[(&str, &str)]| -> crate::settings::Properties {
            pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect()
        };
        let cluster = ClusterProfile::parse(&props(&[("ClusterName", "ci"), ("LogGroup", "/gocd")])).unwrap();
        let elastic = ElasticProfile::parse(&props(&[("Image", "gocd/agent:v1")])).unwrap();
        let refused = AwsError::new("RegisterTaskDefinition", Failure::Refused, "ClientException: refused");
        let failed = of_aws(&refused, &cluster, &elastic);
        assert_eq!(failed.class, Class::ExecutionRole);
        assert!(failed.finding.contains("ExecutionRoleArn") && failed.fix.contains("ExecutionRoleArn"), "{failed:?}");
        let without_logs = ClusterProfile::parse(&props(&[("ClusterName", "ci")])).unwrap();
        assert_eq!(of_aws(&refused, &without_logs, &elastic).class, Class::Failed);
        let throttled = AwsError::new("RunTask", Failure::Throttled, "Rate exceeded");
        assert_eq!(of_aws(&throttled, &cluster, &elastic).class, Class::Quota);
        let full = AwsError::new("RunTask", Failure::NoCapacity, "RESOURCE:ENI");
        assert_eq!(of_aws(&full, &cluster, &elastic).class, Class::NoCapacity);
    }
}
