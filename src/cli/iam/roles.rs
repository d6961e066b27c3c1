//! What the elastic profiles' own roles need, as two more documents of `iam-policy`:
//!
//! - the task role (`--document task-role-policy`): EFS client mount, and write unless every
//!   mount of that file system is read-only, for volumes with `iam` authorization (through an
//!   access point when every such mount names one); the `ssmmessages` channels of ECS Exec;
//! - the execution role (`--document execution-role-policy`): the private-registry credentials
//!   secret, the `Secrets` it reads, the CloudWatch log group (and creating it with
//!   `awslogs-create-group`), private ECR images of the agent and its sidecars.
//!
//! One document covers every elastic profile given: pass the profiles that share one role.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::{document, statement, Scope};
use crate::settings::{ClusterProfile, ElasticProfile};

/// The task role's policy, `None` when no elastic profile given needs one.
pub(super) fn task_role_policy(scope: &Scope, elastic: &[ElasticProfile]) -> Option<Value> {
    let mut statements = Vec::new();
    // File system id -> (written to, access points of every IAM mount or None when one has none).
    let mut file_systems: BTreeMap<&str, (bool, Option<BTreeSet<&str>>)> = BTreeMap::new();
    for v in elastic.iter().flat_map(|e| &e.efs_volumes).filter(|v| v.iam) {
        let entry = file_systems.entry(&v.file_system_id).or_insert((false, Some(BTreeSet::new())));
        entry.0 |= !v.read_only;
        match (&mut entry.1, v.access_point_id.as_deref()) {
            (Some(points), Some(ap)) => {
                points.insert(ap);
            }
            (points, _) => *points = None,
        }
    }
    for (fs, (write, access_points)) in &file_systems {
        let actions: &[&str] = if *write {
            &["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"]
        } else {
            &["elasticfilesystem:ClientMount"]
        };
        let condition = access_points.as_ref().filter(|p| !p.is_empty()).map(|points| {
            let arns: Vec<String> =
                points.iter().map(|ap| scope.arn("elasticfilesystem", &format!("access-point/{ap}"))).collect();
            json!({ "StringEquals": { "elasticfilesystem:AccessPointArn": arns } })
        });
        let sid = format!("MountEfs{}", fs.replace('-', ""));
        let resource = scope.arn("elasticfilesystem", &format!("file-system/{fs}"));
        statements.push(statement(&sid, actions, vec![resource], condition));
    }
    if elastic.iter().any(|e| e.enable_execute_command) {
        statements.push(statement(
            "EcsExecChannels",
            &[
                "ssmmessages:CreateControlChannel",
                "ssmmessages:CreateDataChannel",
                "ssmmessages:OpenControlChannel",
                "ssmmessages:OpenDataChannel",
            ],
            vec!["*".into()],
            None,
        ));
    }
    (!statements.is_empty()).then(|| document(statements))
}

/// What the tool cannot know about the task role: a FireLens router writes with it.
pub(super) fn task_role_notes(elastic: &[ElasticProfile], notes: &mut Vec<String>) {
    if elastic.iter().any(|e| e.firelens().is_some()) {
        notes.push(
            "a FireLens sidecar sends the logs with the task role: give it what its output needs (for cloudwatch_logs: logs:CreateLogStream, logs:PutLogEvents, and logs:CreateLogGroup with auto_create_group)"
                .into(),
        );
    }
}

/// The execution role's policy, `None` when nothing given needs one.
pub(super) fn execution_role_policy(
    scope: &Scope,
    cluster: &ClusterProfile,
    elastic: &[ElasticProfile],
    notes: &mut Vec<String>,
) -> Option<Value> {
    let mut statements = Vec::new();
    let registry: BTreeSet<String> = elastic.iter().filter_map(|e| e.repository_credentials_arn.clone()).collect();
    if !registry.is_empty() {
        notes.push(
            "execution_role_policy: a registry credentials secret encrypted with a customer managed KMS key also needs kms:Decrypt on that key"
                .into(),
        );
        statements.push(statement(
            "ReadPrivateRegistryCredentials",
            &["secretsmanager:GetSecretValue"],
            registry.into_iter().collect(),
            None,
        ));
    }
    let secrets: Vec<&str> = elastic.iter().flat_map(|e| e.secrets.iter().map(|(_, arn)| arn.as_str())).collect();
    let from = |service: &str| -> Vec<String> {
        let prefix = format!(":{service}:");
        secrets
            .iter()
            .filter(|a| a.contains(&prefix))
            .map(|a| a.to_string())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let (manager, parameters) = (from("secretsmanager"), from("ssm"));
    if !manager.is_empty() {
        statements.push(statement("ReadSecretsManagerSecrets", &["secretsmanager:GetSecretValue"], manager, None));
    }
    if !parameters.is_empty() {
        statements.push(statement("ReadSsmParameters", &["ssm:GetParameters"], parameters, None));
    }
    if let Some(group) = &cluster.log_group {
        let group_arn = scope.arn("logs", &format!("log-group:{group}"));
        statements.push(statement(
            "WriteAgentLogs",
            &["logs:CreateLogStream", "logs:PutLogEvents"],
            vec![format!("{group_arn}:*")],
            None,
        ));
        let creates = elastic.iter().any(|e| {
            e.firelens().is_none() && e.log_options.iter().any(|(k, v)| k == "awslogs-create-group" && v == "true")
        });
        if creates {
            statements.push(statement(
                "CreateTheLogGroup",
                &["logs:CreateLogGroup"],
                vec![format!("{group_arn}:*")],
                None,
            ));
        }
    }
    let images = elastic
        .iter()
        .flat_map(|e| std::iter::once(e.image.as_str()).chain(e.sidecars.iter().map(|s| s.image.as_str())));
    let repositories: BTreeSet<String> = images.filter_map(|i| ecr_repository(scope, i)).collect();
    if !repositories.is_empty() {
        statements.push(statement("EcrLogin", &["ecr:GetAuthorizationToken"], vec!["*".into()], None));
        statements.push(statement(
            "PullPrivateEcrImages",
            &["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
            repositories.into_iter().collect(),
            None,
        ));
    }
    (!statements.is_empty()).then(|| document(statements))
}

/// `arn:...:ecr:<region>:<account>:repository/<name>` of a private ECR image.
fn ecr_repository(scope: &Scope, image: &str) -> Option<String> {
    let (host, path) = image.split_once('/')?;
    let account = host.split('.').next()?;
    let rest = host.strip_prefix(account)?.strip_prefix(".dkr.ecr.")?;
    let region = rest.strip_suffix(".amazonaws.com").or_else(|| rest.strip_suffix(".amazonaws.com.cn"))?;
    let name = path.split('@').next()?;
    let name = match name.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => name,
    };
    Some(format!("arn:{}:ecr:{region}:{account}:repository/{name}", scope.partition))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::policies;
    use crate::settings::{ClusterProfile, ElasticProfile, Properties};

    fn props(pairs: &[(&str, &str)]) -> Properties {
        pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect()
    }

    fn cluster(extra: &[(&str, &str)]) -> ClusterProfile {
        let mut p = props(&[("ClusterName", "arn:aws:ecs:us-east-1:123456789012:cluster/ci")]);
        p.extend(props(extra));
        ClusterProfile::parse(&p).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn elastic(pairs: &[(&str, &str)]) -> ElasticProfile {
        ElasticProfile::parse(&props(pairs)).unwrap_or_else(|e| panic!("{e:?}"))
    }

    const TASK_ROLE: &str = "arn:aws:iam::123456789012:role/build";
    const EXEC_ROLE: &str = "arn:aws:iam::123456789012:role/exec";

    #[test]
    fn the_task_role_mounts_efs_with_iam_and_writes_unless_read_only() {
        let e = elastic(&[
            ("Image", "gocd/agent:1"),
            ("TaskRoleArn", TASK_ROLE),
            (
                "EfsVolumes",
                "fs-0a1b2c3d /cache iam access-point=fsap-0123456789abcdef0\nfs-0123456789abcdef0 /tools iam read-only\nfs-0badbad0 /plain",
            ),
        ]);
        let p = policies(&cluster(&[]), &[e]);
        assert_eq!(
            p.task_role_policy,
            Some(json!({"Version": "2012-10-17", "Statement": [
                {
                    "Sid": "MountEfsfs0123456789abcdef0",
                    "Effect": "Allow",
                    "Action": "elasticfilesystem:ClientMount",
                    "Resource": "arn:aws:elasticfilesystem:us-east-1:123456789012:file-system/fs-0123456789abcdef0",
                },
                {
                    "Sid": "MountEfsfs0a1b2c3d",
                    "Effect": "Allow",
                    "Action": ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"],
                    "Resource": "arn:aws:elasticfilesystem:us-east-1:123456789012:file-system/fs-0a1b2c3d",
                    "Condition": {"StringEquals": {"elasticfilesystem:AccessPointArn": [
                        "arn:aws:elasticfilesystem:us-east-1:123456789012:access-point/fsap-0123456789abcdef0"
                    ]}},
                },
            ]}))
        );
        assert!(
            p.notes.iter().any(|n| n.starts_with("EFS volumes without iam need no IAM permission")),
            "{:?}",
            p.notes
        );
        assert_eq!(policies(&cluster(&[]), &[elastic(&[("Image", "gocd/agent:1")])]).task_role_policy, None);
    }

    #[test]
    fn the_execution_role_reads_registry_credentials_secrets_logs_and_ecr() {
        let registry = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/registry-AbCdEf";
        let e = elastic(&[
            ("Image", "registry.example.com/ci/agent:1"),
            ("ExecutionRoleArn", EXEC_ROLE),
            ("RepositoryCredentialsArn", registry),
            ("Secrets", "NPM=arn:aws:ssm:us-east-1:123456789012:parameter/ci/npm"),
            ("LogOptions", "awslogs-create-group=true"),
            (
                "Sidecars",
                r#"[{"name": "db", "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/ci/postgres:16", "memory": 512}]"#,
            ),
        ]);
        let p = policies(&cluster(&[("LogGroup", "/gocd/agents")]), &[e]);
        let doc = p.execution_role_policy.expect("an execution role policy");
        let sids: Vec<&str> =
            doc["Statement"].as_array().into_iter().flatten().filter_map(|s| s["Sid"].as_str()).collect();
        assert_eq!(
            sids,
            [
                "ReadPrivateRegistryCredentials",
                "ReadSsmParameters",
                "WriteAgentLogs",
                "CreateTheLogGroup",
                "EcrLogin",
                "PullPrivateEcrImages"
            ]
        );
        let statement =
            |sid: &str| doc["Statement"].as_array().into_iter().flatten().find(|s| s["Sid"] == sid).cloned();
        assert_eq!(statement("ReadPrivateRegistryCredentials").map(|s| s["Resource"].clone()), Some(json!(registry)));
        assert_eq!(
            statement("WriteAgentLogs").map(|s| s["Resource"].clone()),
            Some(json!("arn:aws:logs:us-east-1:123456789012:log-group:/gocd/agents:*"))
        );
        assert_eq!(
            statement("PullPrivateEcrImages").map(|s| s["Resource"].clone()),
            Some(json!("arn:aws:ecr:us-east-1:123456789012:repository/ci/postgres"))
        );
        assert_eq!(policies(&cluster(&[]), &[elastic(&[("Image", "gocd/agent:1")])]).execution_role_policy, None);
    }

    #[test]
    fn a_firelens_router_is_noted_for_the_task_role() {
        let routed = elastic(&[
            ("Image", "gocd/agent:1"),
            (
                "Sidecars",
                r#"[{"name": "log", "image": "amazon/aws-for-fluent-bit:stable", "memory": 64, "firelens": "fluentbit"}]"#,
            ),
        ]);
        let p = policies(&cluster(&[]), &[routed]);
        assert!(
            p.notes.iter().any(|n| n.starts_with("a FireLens sidecar sends the logs with the task role")),
            "{:?}",
            p.notes
        );
        let plain = policies(&cluster(&[]), &[elastic(&[("Image", "gocd/agent:1")])]);
        assert!(!plain.notes.iter().any(|n| n.contains("FireLens")));
    }
}
