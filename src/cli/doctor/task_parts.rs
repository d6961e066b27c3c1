//! What doctor can check of the elastic profiles' task keys with the clients it has:
//! the security groups of a task that mounts EFS let NFS (TCP 2049) out. The file systems,
//! their mount targets and the registry credentials secret need EFS and Secrets Manager
//! clients this binary does not carry: a warning says what to run instead.

use std::io;

use super::network::Network;
use super::{Aws, Report};
use crate::aws::AwsError;
use crate::settings::ElasticProfile;

/// NFS, the port EFS mounts use.
const NFS_PORT: u16 = 2049;

/// The checks, per elastic profile given (its file name for the lines).
pub(super) async fn all(
    aws: &Aws,
    network: Option<&Network>,
    elastic: &[(String, ElasticProfile)],
    r: &mut Report<'_>,
) -> io::Result<()> {
    for (shown, e) in elastic {
        if !e.efs_volumes.is_empty() {
            efs(aws, network, shown, e, r).await?;
        }
        if let Some(arn) = &e.repository_credentials_arn {
            r.warn(
                "registry credentials",
                format!("{shown}: secret {arn} not checked: this binary has no Secrets Manager client"),
                format!(
                    "check: aws secretsmanager describe-secret --secret-id {arn}; it must hold {{\"username\": ..., \"password\": ...}}, and the execution role read it (`ecs-elastic-agent iam-policy --document execution-role-policy`)"
                ),
            )?;
        }
    }
    Ok(())
}

async fn efs(
    aws: &Aws,
    network: Option<&Network>,
    shown: &str,
    e: &ElasticProfile,
    r: &mut Report<'_>,
) -> io::Result<()> {
    let file_systems: Vec<&str> = e.efs_volumes.iter().map(|v| v.file_system_id.as_str()).collect();
    let groups: Vec<String> = if e.security_group_ids.is_empty() {
        network.map(|n| n.groups.clone()).unwrap_or_default()
    } else {
        e.security_group_ids.clone()
    };
    if groups.is_empty() {
        r.warn("efs", format!("{shown}: the tasks' security groups are unknown (see network)"), None)?;
    } else {
        match nfs_out(aws, &groups).await {
            Ok(true) => {
                r.ok("efs", format!("{shown}: security group(s) {} let NFS (TCP 2049) out", groups.join(", ")))?
            }
            Ok(false) => r.fail(
                "efs",
                format!(
                    "{shown}: no outbound rule of security group(s) {} allows TCP 2049, so EFS cannot be mounted",
                    groups.join(", ")
                ),
                "allow outbound TCP 2049 to the file system's mount targets in one of the tasks' security groups",
            )?,
            Err(e) => r.warn("efs", format!("{shown}: security groups not checked: {}", e.detail), None)?,
        }
    }
    r.warn(
        "efs",
        format!("{shown}: file system(s) {} not checked: this binary has no EFS client", file_systems.join(", ")),
        format!(
            "check: aws efs describe-mount-targets --file-system-id {} --region {}; each task subnet's Availability Zone needs a mount target whose security group allows TCP 2049 from the tasks' groups{}",
            file_systems[0],
            aws.region,
            if e.efs_volumes.iter().any(|v| v.iam) {
                "; volumes with iam need the task role's elasticfilesystem permissions (`ecs-elastic-agent iam-policy --document task-role-policy`)"
            } else {
                ""
            }
        ),
    )
}

/// Whether an egress rule of any of `groups` allows TCP 2049 (to anywhere).
async fn nfs_out(aws: &Aws, groups: &[String]) -> Result<bool, AwsError> {
    let found = aws.security_groups(groups).await?;
    let rules: Vec<_> = found.into_iter().flat_map(|(_, _, egress)| egress).collect();
    Ok(super::network::allows_tcp_out(&rules, NFS_PORT))
}
