//! `doctor`'s permissions check: the identity the plugin acts as (the caller GetCallerIdentity
//! named: an assumed role's session, or an IAM user) has its own policies read — attached
//! managed policies at their default version, inline policies, and a user's groups' — and every
//! action `iam-policy` lists for this cluster profile and its elastic profiles (the same
//! derivation, so the actions a profile needs only conditionally are in it exactly when
//! `iam-policy` prints them) must be matched by an Allow statement and by no Deny.
//!
//! Actions only (`policy_actions`): resources, conditions, permission boundaries, service control
//! policies, session policies and resource policies are not read, and the line says so. When the
//! policies cannot be read (the identity may not read them, the caller is not a role or a
//! user), the line says what the check needs and that it was skipped: a warning, never a
//! failure.

use std::io;

use super::fix::fix_for;
use super::policy_actions::{evaluate, Policy};
use super::{Aws, Report};
use crate::aws::doctor_identity::{Caller, IdentityPolicy, MANAGED_POLICY_READS, ROLE_READS, USER_READS};
use crate::aws::{AwsError, Failure};
use crate::settings::{ClusterProfile, ElasticProfile};

const CHECK: &str = "permissions";

/// What the check does not read, said on its result line.
const ACTIONS_ONLY: &str =
    "actions only: resources, conditions, permission boundaries, SCPs, session and resource policies are not read";

/// The fix for actions the policies lack.
const ADD: &str = "add these actions, or attach the policy `ecs-elastic-agent iam-policy` prints; with the CloudFormation stack, update it to this version's template";

/// Actions AWS answers for every identity whatever its policies say: not looked for.
const NEED_NO_PERMISSION: &[&str] = &["sts:GetCallerIdentity"];

/// The check, for the identity `caller_arn` names.
pub(super) async fn check(
    aws: &Aws,
    profile: &ClusterProfile,
    elastic: &[(String, ElasticProfile)],
    caller_arn: &str,
    r: &mut Report<'_>,
) -> io::Result<()> {
    let needed = match needed(profile, elastic) {
        Ok(needed) => needed,
        Err(e) => {
            return r.warn(CHECK, format!("not checked: the policy of `iam-policy` could not be read: {e}"), None)
        }
    };
    let (who, reads, found) = match Caller::of_arn(caller_arn) {
        Caller::Root => {
            return r.warn(
                CHECK,
                format!("{caller_arn} is the account's root user: no IAM policy limits it"),
                "give the plugin an IAM role or user with the policy `ecs-elastic-agent iam-policy` prints (AWS advises against access keys of the root user)".to_string(),
            )
        }
        Caller::Other => {
            return r.warn(
                CHECK,
                format!("not checked: {caller_arn} is neither a role's session nor an IAM user, the identities whose policies this check reads"),
                "compare the identity's policies with `ecs-elastic-agent iam-policy`".to_string(),
            )
        }
        Caller::Role(name) => {
            let found = match aws.role_arn(&name).await {
                Ok(arn) => aws.role_policies(&name).await.map(|p| (format!("role {arn}"), p)),
                Err(e) => Err(e),
            };
            (format!("role {name}"), ROLE_READS, found)
        }
        Caller::User(name) => {
            let who = format!("user {caller_arn}");
            (who.clone(), USER_READS, aws.user_policies(&name).await.map(|p| (who, p)))
        }
    };
    match found {
        Ok((who, policies)) => report(&who, &policies, &needed, r),
        Err(e) => skipped(&who, reads, &e, r),
    }
}

/// The actions `iam-policy` lists for the profiles, in its order, but those that need no
/// permission.
fn needed(profile: &ClusterProfile, elastic: &[(String, ElasticProfile)]) -> Result<Vec<String>, String> {
    let elastic: Vec<ElasticProfile> = elastic.iter().map(|(_, e)| e.clone()).collect();
    let policy = Policy::of(&crate::cli::iam::policies(profile, &elastic).policy)?;
    let free = |a: &String| NEED_NO_PERMISSION.iter().any(|n| n.eq_ignore_ascii_case(a));
    Ok(policy.named_actions().into_iter().filter(|a| !free(a)).collect())
}

/// The policies could not be read: what the check needs, and that it was skipped.
fn skipped(who: &str, reads: &[&str], e: &AwsError, r: &mut Report<'_>) -> io::Result<()> {
    let needs = reads.iter().chain(MANAGED_POLICY_READS).copied().collect::<Vec<_>>().join(", ");
    if e.failure == Failure::Denied {
        return r.warn(
            CHECK,
            format!(
                "not checked: reading the policies of {who} was refused ({}); the check needs {needs} on the identity itself",
                e.detail
            ),
            "allow those reads (`ecs-elastic-agent iam-policy` includes them), or compare the identity's policies with `ecs-elastic-agent iam-policy`".to_string(),
        );
    }
    r.warn(
        CHECK,
        format!("not checked: the policies of {who} could not be read: {}", e.detail),
        fix_for(e, &needs, "compare the identity's policies with `ecs-elastic-agent iam-policy`"),
    )
}

/// The result lines: every action allowed, or those missing; and each Deny that matches.
fn report(who: &str, policies: &[IdentityPolicy], needed: &[String], r: &mut Report<'_>) -> io::Result<()> {
    let mut read = Vec::new();
    for p in policies {
        match Policy::parse(&p.document) {
            Ok(policy) => read.push((p, policy)),
            Err(e) => r.warn(
                CHECK,
                format!("{}'s {} could not be read ({e}): its statements are not counted", who, p.origin),
                None,
            )?,
        }
    }
    let named = if read.is_empty() {
        "no readable policy".to_string()
    } else {
        read.iter().map(|(p, _)| p.origin.to_string()).collect::<Vec<_>>().join(", ")
    };
    let documents: Vec<Policy> = read.iter().map(|(_, p)| p.clone()).collect();
    let found = evaluate(needed, &documents);
    if found.missing.is_empty() && found.denied.is_empty() {
        return r.ok(
            CHECK,
            format!(
                "the policies of {who} ({named}) allow all {} actions `iam-policy` lists for this profile ({ACTIONS_ONLY})",
                needed.len()
            ),
        );
    }
    if !found.missing.is_empty() {
        r.warn(
            CHECK,
            format!(
                "the policies of {who} ({named}) do not allow {} ({} of the {} actions `iam-policy` lists for this profile; {ACTIONS_ONLY})",
                found.missing.join(", "),
                found.missing.len(),
                needed.len()
            ),
            ADD.to_string(),
        )?;
    }
    // One line per policy with a matching Deny, its unconditional matches apart from the others.
    for (index, (policy, _)) in read.iter().enumerate() {
        for narrowed in [false, true] {
            let actions: Vec<&str> = found
                .denied
                .iter()
                .filter(|(_, i, d)| *i == index && d.narrowed == narrowed)
                .map(|(a, _, _)| a.as_str())
                .collect();
            if actions.is_empty() {
                continue;
            }
            let finding = if narrowed {
                format!(
                    "{who}'s {} has a Deny that may refuse {} (it carries a condition or names resources, not evaluated here)",
                    policy.origin,
                    actions.join(", ")
                )
            } else {
                format!("{who}'s {} denies {}", policy.origin, actions.join(", "))
            };
            r.warn(CHECK, finding, "narrow or remove the Deny so the plugin's calls are not refused".to_string())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{needed, report, skipped};
    use crate::aws::doctor_identity::{IdentityPolicy, PolicyOrigin, ROLE_READS};
    use crate::aws::{AwsError, Failure};
    use crate::cli::doctor::Report;
    use crate::settings::{ClusterProfile, ElasticProfile};

    fn cluster(pairs: &[(&str, &str)]) -> ClusterProfile {
        let props = pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect();
        ClusterProfile::parse(&props).expect("a valid cluster profile")
    }

    fn written(write: impl FnOnce(&mut Report<'_>) -> std::io::Result<()>) -> (Vec<String>, bool) {
        let mut out = Vec::new();
        let mut r = Report { out: &mut out, failed: false };
        write(&mut r).expect("written");
        let failed = r.failed;
        (String::from_utf8(out).expect("text").lines().map(str::to_string).collect(), failed)
    }

    fn managed(arn: &str, document: &str) -> IdentityPolicy {
        IdentityPolicy { origin: PolicyOrigin::Managed { arn: arn.into() }, document: document.into() }
    }

    #[test]
    fn the_actions_needed_are_iam_policys_as_the_profile_decides_them() {
        let fargate = cluster(&[("ClusterName", "ci"), ("Region", "us-east-1")]);
        let actions = needed(&fargate, &[]).expect("iam-policy's policy reads");
        assert!(actions.iter().any(|a| a == "ecs:RunTask") && actions.iter().any(|a| a == "iam:GetRole"));
        assert!(!actions.iter().any(|a| a == "ec2:RunInstances"), "{actions:?}");
        assert!(!actions.iter().any(|a| a == "sts:GetCallerIdentity"), "AWS answers it for anyone: {actions:?}");
        let ec2 = cluster(&[
            ("ClusterName", "ci"),
            ("Region", "us-east-1"),
            ("LaunchType", "EC2"),
            ("Ec2InstanceType", "c5.xlarge"),
            ("Ec2InstanceProfile", "ecsInstanceRole"),
            ("Ec2AmiId", "ami-0abcdef1234567890"),
        ]);
        let props = [("Image", "gocd/agent:1"), ("TaskRoleArn", "arn:aws:iam::123456789012:role/build")];
        let elastic = ElasticProfile::parse(&props.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect())
            .expect("a valid elastic profile");
        let actions = needed(&ec2, &[("build.json".into(), elastic)]).expect("iam-policy's policy reads");
        for a in ["ec2:RunInstances", "ecs:StartTask", "iam:PassRole"] {
            assert!(actions.iter().any(|x| x == a), "{a} missing from {actions:?}");
        }
        assert_eq!(actions.iter().filter(|a| *a == "iam:PassRole").count(), 1, "each action once");
    }

    #[test]
    fn missing_actions_and_denies_are_warnings_with_their_fix() {
        let needed: Vec<String> =
            ["ecs:ListTasks", "ecs:RunTask", "ec2:RunInstances", "ecs:StopTask"].map(String::from).into();
        let allow = r#"{"Statement": {"Effect": "Allow", "Action": ["ecs:*"], "Resource": "*"}}"#;
        let deny = "%7B%22Statement%22%3A%5B%7B%22Effect%22%3A%22Deny%22%2C%22Action%22%3A%22ecs%3AStopTask%22%2C%22Resource%22%3A%22%2A%22%2C%22Condition%22%3A%7B%22Bool%22%3A%7B%22aws%3AMultiFactorAuthPresent%22%3A%22false%22%7D%7D%7D%5D%7D";
        let policies = [
            managed("arn:aws:iam::123456789012:policy/ecs", allow),
            IdentityPolicy {
                origin: PolicyOrigin::Inline { name: "guard".into() },
                document: crate::aws::doctor_identity::decoded(deny),
            },
            managed("arn:aws:iam::123456789012:policy/broken", "{"),
        ];
        let (lines, failed) = written(|r| report("role arn:aws:iam::123456789012:role/gocd", &policies, &needed, r));
        assert!(!failed, "never a failure: {lines:#?}");
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(lines[0].starts_with("warn permissions: role arn:aws:iam::123456789012:role/gocd's managed policy arn:aws:iam::123456789012:policy/broken could not be read (not JSON"), "{}", lines[0]);
        assert!(
            lines[1].starts_with(
                "warn permissions: the policies of role arn:aws:iam::123456789012:role/gocd (managed policy arn:aws:iam::123456789012:policy/ecs, inline policy guard) do not allow ec2:RunInstances (1 of the 4 actions"
            ),
            "{}",
            lines[1]
        );
        assert!(
            lines[1].contains("; fix: add these actions, or attach the policy `ecs-elastic-agent iam-policy` prints"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].contains("inline policy guard has a Deny that may refuse ecs:StopTask (it carries a condition"),
            "{}",
            lines[2]
        );
    }

    #[test]
    fn all_allowed_is_ok_and_says_it_reads_actions_only() {
        let needed: Vec<String> = ["ecs:ListTasks", "ec2:DescribeVpcs"].map(String::from).into();
        let admin = r#"{"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}"#;
        let (lines, _) = written(|r| {
            report(
                "user arn:aws:iam::123456789012:user/gocd",
                &[managed("arn:aws:iam::aws:policy/AdministratorAccess", admin)],
                &needed,
                r,
            )
        });
        assert_eq!(
            lines,
            ["ok   permissions: the policies of user arn:aws:iam::123456789012:user/gocd (managed policy arn:aws:iam::aws:policy/AdministratorAccess) allow all 2 actions `iam-policy` lists for this profile (actions only: resources, conditions, permission boundaries, SCPs, session and resource policies are not read)"]
        );
    }

    #[test]
    fn a_refused_read_skips_the_check_and_names_what_it_needs() {
        let e = AwsError::new("ListAttachedRolePolicies", Failure::Denied, "AccessDenied: not authorized");
        let (lines, failed) = written(|r| skipped("role gocd", ROLE_READS, &e, r));
        assert!(!failed);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("warn permissions: not checked: reading the policies of role gocd was refused (AccessDenied: not authorized); the check needs iam:GetRole, iam:ListAttachedRolePolicies, iam:ListRolePolicies, iam:GetRolePolicy, iam:GetPolicy, iam:GetPolicyVersion on the identity itself; fix: "), "{}", lines[0]);
        let e = AwsError::new("GetRole", Failure::NotFound, "NoSuchEntity: no role gocd");
        let (lines, failed) = written(|r| skipped("role gocd", ROLE_READS, &e, r));
        assert!(!failed);
        assert!(
            lines[0].starts_with(
                "warn permissions: not checked: the policies of role gocd could not be read: NoSuchEntity"
            ),
            "{}",
            lines[0]
        );
    }
}
