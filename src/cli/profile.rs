//! `profile --from-stack`: the cluster profile a CloudFormation stack of
//! `packaging/cloudformation/` made, from the stack's outputs (DescribeStacks, in `aws::cloudformation`).
//!
//! The templates name each output after the profile key it fills: an output named after a
//! cluster profile key goes into the profile; one named after an elastic profile key
//! (`ExecutionRoleArn`, `TaskRoleArn`) is noted for the elastic profiles; others (the policy's
//! ARN) are left out. Secure keys (credentials) are never taken from outputs, which anyone who
//! may describe the stack reads. The profile is checked as `validate` checks it before it is
//! printed.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::Duration;

use super::ProfileArgs;
use crate::aws::cloudformation::{default_config, describe_stack};
use crate::aws::Failure;
use crate::settings::keys::ProfileKind;
use crate::settings::{ClusterProfile, Properties};

/// What a set of stack outputs makes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FromOutputs {
    /// The cluster profile's keys and values.
    pub cluster: BTreeMap<String, String>,
    /// Outputs named after elastic profile keys, for the elastic profiles.
    pub elastic: BTreeMap<String, String>,
    /// Outputs that fill no key (or a secure one), by name, with why.
    pub left_out: Vec<String>,
}

impl FromOutputs {
    /// GoCD's property map of the cluster profile.
    pub fn properties(&self) -> Properties {
        self.cluster.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect()
    }
}

/// Sorts outputs (`(stack, key, value)`, in order) into profile keys.
///
/// # Errors
/// A sentence when two stacks give one key different values.
pub fn from_outputs(outputs: &[(String, String, String)]) -> Result<FromOutputs, String> {
    let mut made = FromOutputs::default();
    let mut given_by: BTreeMap<&str, &str> = BTreeMap::new();
    for (stack, key, value) in outputs {
        let target = if let Some(spec) = ProfileKind::Cluster.spec(key) {
            if spec.secure {
                made.left_out.push(format!("{key} (of stack {stack}): a secret is never taken from a stack output"));
                continue;
            }
            &mut made.cluster
        } else if ProfileKind::Elastic.spec(key).is_some() {
            &mut made.elastic
        } else {
            made.left_out.push(format!("{key} (of stack {stack}): fills no profile key"));
            continue;
        };
        // An empty output is a key left to its default.
        if value.is_empty() {
            continue;
        }
        if let Some(before) = target.get(key.as_str()) {
            if before != value {
                let first = given_by.get(key.as_str()).copied().unwrap_or("?");
                return Err(format!("stacks {first} and {stack} give {key} different values: {before} and {value}"));
            }
        }
        target.insert(key.clone(), value.clone());
        given_by.insert(key, stack);
    }
    Ok(made)
}

/// Reads the stacks, prints the cluster profile on `out` (notes on `err`); `Ok(false)` when a
/// stack cannot be read or the profile is not valid (why goes to `err`, nothing to `out`).
///
/// # Errors
/// Only when writing fails.
pub async fn run(args: &ProfileArgs, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<bool> {
    let Some(config) = default_config(args.region.as_deref()).await else {
        writeln!(err, "no region: pass --region, or set AWS_REGION or a region in the AWS config file")?;
        return Ok(false);
    };
    let timeout = Duration::from_secs(args.timeout.max(1));
    let mut outputs = Vec::new();
    for name in &args.from_stacks {
        let stack = match describe_stack(&config, name, timeout).await {
            Ok(stack) => stack,
            Err(e) => {
                let hint = match e.failure {
                    Failure::NotFound => " (check the name and --region)",
                    Failure::Denied => " (the credentials need cloudformation:DescribeStacks on it)",
                    _ => "",
                };
                writeln!(err, "stack {name}: {e}{hint}")?;
                return Ok(false);
            }
        };
        if !stack.settled() {
            writeln!(err, "stack {name} is {}: its outputs are not (yet) its template's", stack.status)?;
            return Ok(false);
        }
        outputs.extend(stack.outputs.into_iter().map(|(k, v)| (stack.name.clone(), k, v)));
    }
    let made = match from_outputs(&outputs) {
        Ok(made) => made,
        Err(why) => {
            writeln!(err, "{why}")?;
            return Ok(false);
        }
    };
    if let Err(problems) = ClusterProfile::parse(&made.properties()) {
        for p in problems {
            writeln!(err, "{}: {}", p.key, p.message.replace(['\n', '\r'], " "))?;
        }
        writeln!(err, "no profile printed: the stacks' outputs do not make a valid cluster profile")?;
        return Ok(false);
    }
    let text = serde_json::to_string_pretty(&made.cluster).map_err(io::Error::other)?;
    writeln!(out, "{text}")?;
    for (key, value) in &made.elastic {
        writeln!(err, "note: for the elastic profiles: {key} = {value}")?;
    }
    for why in &made.left_out {
        writeln!(err, "note: not in the profile: {why}")?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outputs(stack: &str, pairs: &[(&str, &str)]) -> Vec<(String, String, String)> {
        pairs.iter().map(|(k, v)| (stack.to_string(), k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn outputs_named_after_cluster_keys_make_the_profile() {
        let made = from_outputs(&outputs(
            "gocd",
            &[
                ("ClusterName", "gocd-agents"),
                ("Region", "eu-west-1"),
                ("SubnetIds", "subnet-0a1b2c3d,subnet-4e5f6a7b"),
                ("SecurityGroupIds", "sg-0123abcd"),
                ("AssignPublicIp", "false"),
                ("LogGroup", "/gocd/gocd/agents"),
                ("EventQueueUrl", "https://sqs.eu-west-1.amazonaws.com/123456789012/gocd-events"),
                ("AllowedExecutionRoleArns", "arn:aws:iam::123456789012:role/gocd-execution"),
                ("ExecutionRoleArn", "arn:aws:iam::123456789012:role/gocd-execution"),
                ("TaskRoleArn", "arn:aws:iam::123456789012:role/gocd-task"),
                ("PluginPolicyArn", "arn:aws:iam::123456789012:policy/gocd-PluginPolicy-X"),
                ("GoServerUrl", ""),
            ],
        ))
        .unwrap();
        let keys: Vec<&str> = made.cluster.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "AllowedExecutionRoleArns",
                "AssignPublicIp",
                "ClusterName",
                "EventQueueUrl",
                "LogGroup",
                "Region",
                "SecurityGroupIds",
                "SubnetIds"
            ]
        );
        assert_eq!(made.elastic.keys().map(String::as_str).collect::<Vec<_>>(), ["ExecutionRoleArn", "TaskRoleArn"]);
        assert_eq!(made.left_out.len(), 1, "{:?}", made.left_out);
        assert!(made.left_out[0].starts_with("PluginPolicyArn"));
        let profile = ClusterProfile::parse(&made.properties()).expect("validate accepts it");
        assert_eq!(profile.cluster_name, "gocd-agents");
        assert_eq!(profile.subnet_ids.len(), 2);
    }

    #[test]
    fn a_member_account_adds_its_role_and_stacks_must_agree() {
        let mut all = outputs("gocd", &[("ClusterName", "gocd-agents"), ("Region", "eu-west-1")]);
        all.extend(outputs("gocd-role", &[("RoleArn", "arn:aws:iam::210987654321:role/gocd-ecs-agents")]));
        let made = from_outputs(&all).unwrap();
        assert_eq!(made.cluster["RoleArn"], "arn:aws:iam::210987654321:role/gocd-ecs-agents");
        assert!(ClusterProfile::parse(&made.properties()).is_ok());

        all.extend(outputs("other", &[("Region", "us-east-1")]));
        let why = from_outputs(&all).unwrap_err();
        assert!(why.contains("gocd and other give Region different values"), "{why}");
        // The same value twice is fine.
        let twice = [outputs("a", &[("Region", "eu-west-1")]), outputs("b", &[("Region", "eu-west-1")])].concat();
        assert_eq!(from_outputs(&twice).unwrap().cluster["Region"], "eu-west-1");
    }

    #[test]
    fn secrets_are_never_taken_from_outputs() {
        let made = from_outputs(&outputs(
            "gocd",
            &[("ClusterName", "c"), ("AccessKeyId", "AKIAEXAMPLE"), ("SecretAccessKey", "not-printed")],
        ))
        .unwrap();
        assert_eq!(made.cluster.keys().collect::<Vec<_>>(), ["ClusterName"]);
        let text = made.left_out.join("\n");
        assert!(text.contains("AccessKeyId") && !text.contains("AKIAEXAMPLE") && !text.contains("not-printed"));
    }
}
