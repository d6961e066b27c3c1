//! `iam-policy`: for every example configuration the printed policies pass a JSON and IAM grammar
//! check (Version, Statement array, Effect, actions `service:Action`, resources `*` or ARNs,
//! conditions operator → {key → value}); scoping, the EC2 part and the trust policy are checked.

#![allow(clippy::tests_outside_test_module)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_ecs-elastic-agent");

fn profile(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles").join(name)
}

fn iam_policy(cluster: &Path, elastic: &[PathBuf]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("iam-policy").arg("--cluster-profile").arg(cluster);
    for e in elastic {
        cmd.arg("--elastic-profile").arg(e);
    }
    cmd.env("RUST_LOG", "off").output().expect("run iam-policy")
}

fn policies(cluster: &str, elastic: &[&str]) -> Value {
    let o = iam_policy(&profile(cluster), &elastic.iter().map(|e| profile(e)).collect::<Vec<_>>());
    assert!(o.status.success(), "{cluster}: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("iam-policy prints JSON")
}

/// `^[a-z0-9-]+:[A-Za-z*]+$`.
fn is_action(s: &str) -> bool {
    let Some((service, action)) = s.split_once(':') else {
        return false;
    };
    !service.is_empty()
        && service.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !action.is_empty()
        && action.bytes().all(|b| b.is_ascii_alphabetic() || b == b'*')
}

/// `*`, or `arn:partition:service:region:account:resource` (region and account may be empty).
fn is_resource(s: &str) -> bool {
    s == "*" || (s.starts_with("arn:") && s.splitn(6, ':').count() == 6 && !s.ends_with(':'))
}

fn strings(v: &Value) -> Result<Vec<&str>, String> {
    match v {
        Value::String(s) => Ok(vec![s]),
        Value::Array(a) if !a.is_empty() => {
            a.iter().map(|x| x.as_str().ok_or_else(|| format!("{x} is not a string"))).collect()
        }
        other => Err(format!("{other} is neither a string nor a non-empty array of strings")),
    }
}

/// The IAM policy grammar this test holds the output to; `Err` says what is wrong.
fn check_policy(p: &Value, trust: bool) -> Result<(), String> {
    let doc = p.as_object().ok_or("a policy is a JSON object")?;
    if doc.get("Version") != Some(&Value::from("2012-10-17")) {
        return Err("Version must be 2012-10-17".into());
    }
    let statements = doc
        .get("Statement")
        .and_then(Value::as_array)
        .filter(|s| !s.is_empty())
        .ok_or("Statement must be a non-empty array")?;
    let mut sids = std::collections::HashSet::new();
    for s in statements {
        let s = s.as_object().ok_or("a statement is an object")?;
        for key in s.keys() {
            if !["Sid", "Effect", "Action", "Resource", "Condition", "Principal"].contains(&key.as_str()) {
                return Err(format!("unknown statement key {key}"));
            }
        }
        if let Some(sid) = s.get("Sid") {
            let sid = sid.as_str().ok_or("Sid is a string")?;
            if sid.is_empty() || !sid.bytes().all(|b| b.is_ascii_alphanumeric()) || !sids.insert(sid.to_string()) {
                return Err(format!("Sid {sid:?} must be alphanumeric and unique"));
            }
        }
        match s.get("Effect").and_then(Value::as_str) {
            Some("Allow" | "Deny") => {}
            other => return Err(format!("Effect {other:?}")),
        }
        for action in strings(s.get("Action").ok_or("Action is required")?)? {
            if !is_action(action) {
                return Err(format!("action {action:?} does not match ^[a-z0-9-]+:[A-Za-z*]+$"));
            }
        }
        if trust {
            let principal =
                s.get("Principal").and_then(Value::as_object).ok_or("a trust policy statement has a Principal")?;
            if principal.is_empty() || s.contains_key("Resource") {
                return Err("a trust policy names a principal and no resource".into());
            }
        } else {
            if s.contains_key("Principal") {
                return Err("an identity policy has no Principal".into());
            }
            for resource in strings(s.get("Resource").ok_or("Resource is required")?)? {
                if !is_resource(resource) {
                    return Err(format!("resource {resource:?} is neither * nor an ARN"));
                }
            }
        }
        if let Some(condition) = s.get("Condition") {
            let operators = condition.as_object().filter(|c| !c.is_empty()).ok_or("Condition is a non-empty object")?;
            for (operator, keys) in operators {
                if operator.is_empty() || !operator.bytes().all(|b| b.is_ascii_alphabetic()) {
                    return Err(format!("condition operator {operator:?}"));
                }
                let keys =
                    keys.as_object().filter(|k| !k.is_empty()).ok_or(format!("{operator} maps keys to values"))?;
                for (key, value) in keys {
                    if !key.contains(':') {
                        return Err(format!("condition key {key:?} has no service prefix"));
                    }
                    strings(value).map_err(|e| format!("condition {operator} {key}: {e}"))?;
                }
            }
        }
    }
    Ok(())
}

fn statement<'a>(p: &'a Value, sid: &str) -> &'a Value {
    p["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["Sid"] == sid)
        .unwrap_or_else(|| panic!("no statement {sid} in {p:#}"))
}

fn actions(p: &Value) -> Vec<String> {
    p["Statement"].as_array().unwrap().iter().flat_map(|s| strings(&s["Action"]).unwrap()).map(str::to_string).collect()
}

#[test]
fn the_grammar_check_catches_what_it_should() {
    let good = serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ecs:ListTasks", "Resource": "*"}]});
    assert_eq!(check_policy(&good, false), Ok(()));
    for bad in [
        serde_json::json!({"Version": "2008-10-17", "Statement": [{"Effect": "Allow", "Action": "ecs:ListTasks", "Resource": "*"}]}),
        serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Maybe", "Action": "ecs:ListTasks", "Resource": "*"}]}),
        serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ListTasks", "Resource": "*"}]}),
        serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ecs:ListTasks", "Resource": "cluster/x"}]}),
        serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ecs:ListTasks", "Resource": "*", "Condition": {"StringEquals": "x"}}]}),
        serde_json::json!({"Version": "2012-10-17", "Statement": {"Effect": "Allow"}}),
    ] {
        assert!(check_policy(&bad, false).is_err(), "{bad}");
    }
}

#[test]
fn every_example_configuration_prints_a_valid_policy() {
    for (cluster, elastic) in [
        ("cluster-fargate.json", &["elastic-small.json"][..]),
        ("cluster-fargate.json", &[][..]),
        ("cluster-fargate-spot-assume-role.json", &["elastic-small.json"][..]),
        ("cluster-ec2.json", &["elastic-ec2-docker.json"][..]),
    ] {
        let out = policies(cluster, elastic);
        check_policy(&out["policy"], false).unwrap_or_else(|e| panic!("{cluster} policy: {e}\n{:#}", out["policy"]));
        let has_role = cluster.contains("assume-role");
        assert_eq!(out.get("trust_policy").is_some(), has_role, "{cluster}: trust policy only with RoleArn");
        if has_role {
            check_policy(&out["trust_policy"], true).unwrap_or_else(|e| panic!("{cluster} trust policy: {e}"));
            check_policy(&out["caller_policy"], false).unwrap_or_else(|e| panic!("{cluster} caller policy: {e}"));
        }
        let acts = actions(&out["policy"]);
        for needed in [
            "ecs:ListTasks",
            "ecs:DescribeTasks",
            "ecs:RunTask",
            "ecs:StopTask",
            "ecs:DescribeTaskDefinition",
            "ecs:RegisterTaskDefinition",
            "ecs:TagResource",
            "ecs:DeregisterTaskDefinition",
        ] {
            assert!(acts.iter().any(|a| a == needed), "{cluster}: {needed} missing from {acts:?}");
        }
        let ec2 = cluster.contains("ec2");
        for ec2_only in [
            "ec2:RunInstances",
            "ec2:TerminateInstances",
            "ec2:DescribeInstances",
            "ec2:CreateTags",
            "ecs:ListContainerInstances",
            "ecs:DescribeContainerInstances",
            "ecs:UpdateContainerInstancesState",
            "ecs:DeregisterContainerInstance",
            "ecs:StartTask",
        ] {
            assert_eq!(acts.iter().any(|a| a == ec2_only), ec2, "{cluster}: {ec2_only}");
        }
    }
}

#[test]
fn resources_are_scoped_to_the_cluster() {
    let out = policies("cluster-fargate-spot-assume-role.json", &["elastic-small.json"]);
    let p = &out["policy"];
    // RoleArn's account is where the calls land.
    assert_eq!(
        statement(p, "DescribeAndStopTasksOfTheCluster")["Resource"],
        "arn:aws:ecs:eu-west-1:210987654321:task/ci-spot/*"
    );
    let run = statement(p, "RunAgentTasksInTheCluster");
    assert!(run["Resource"].as_str().unwrap().starts_with("arn:aws:ecs:eu-west-1:210987654321:task-definition/gocd-"));
    assert_eq!(run["Condition"]["ArnEquals"]["ecs:cluster"], "arn:aws:ecs:eu-west-1:210987654321:cluster/ci-spot");
    let tag = statement(p, "TagTasksAndTaskDefinitionsAtCreation");
    assert_eq!(
        tag["Condition"]["StringEquals"]["ecs:CreateAction"],
        serde_json::json!(["RunTask", "RegisterTaskDefinition"])
    );
    // The example cluster profile sets ExternalId: the trust policy uses it.
    assert_eq!(out["trust_policy"]["Statement"][0]["Condition"]["StringEquals"]["sts:ExternalId"], "gocd-prod:ci-spot");
    assert_eq!(out["caller_policy"]["Statement"][0]["Resource"], "arn:aws:iam::210987654321:role/gocd-ecs-agents");
    // No elastic profile names a task role; AllowedTaskRoleArns only count without --elastic-profile.
    assert!(!actions(p).iter().any(|a| a == "iam:PassRole"));
    let without = policies("cluster-fargate-spot-assume-role.json", &[]);
    assert_eq!(
        statement(&without["policy"], "PassTaskAndExecutionRolesToEcsTasks")["Resource"],
        "arn:aws:iam::210987654321:role/gocd-task-*"
    );
}

#[test]
fn ec2_passes_only_the_named_roles() {
    let out = policies("cluster-ec2.json", &["elastic-ec2-docker.json"]);
    let p = &out["policy"];
    let pass = statement(p, "PassTaskAndExecutionRolesToEcsTasks");
    assert_eq!(
        pass["Resource"],
        serde_json::json!([
            "arn:aws:iam::123456789012:role/ecsTaskExecutionRole",
            "arn:aws:iam::123456789012:role/gocd-task-docker"
        ])
    );
    assert_eq!(pass["Condition"]["StringEquals"]["iam:PassedToService"], "ecs-tasks.amazonaws.com");
    let instance = statement(p, "PassTheInstanceRoleToEc2");
    assert_eq!(instance["Resource"], "arn:aws:iam::*:role/ecsInstanceRole");
    let terminate = statement(p, "TerminateOnlyOurContainerInstances");
    assert!(terminate["Condition"]["StringEquals"]["aws:ResourceTag/gocd:cluster-profile"].is_string());
    let launch = statement(p, "LaunchContainerInstancesFromTheProfile");
    let resources = strings(&launch["Resource"]).unwrap();
    assert!(resources.contains(&"arn:aws:ec2:us-west-2::image/ami-0abcdef1234567890"), "{resources:?}");
    assert!(resources.contains(&"arn:aws:ec2:us-west-2:*:subnet/subnet-0a1b2c3d"), "{resources:?}");
}

#[test]
fn invalid_profiles_print_no_policy() {
    let dir = std::env::temp_dir().join(format!("ecs-ea-cli-iam-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"ClusterName": "ci", "LaunchType": "SUBMARINE"}"#).unwrap();
    let o = iam_policy(&bad, &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{}: LaunchType: ", bad.display())), "{err}");
}
