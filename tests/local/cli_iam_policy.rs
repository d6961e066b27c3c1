//! `iam-policy`: for every example configuration the printed policies pass a JSON and IAM grammar
//! check (Version, Statement array, Effect, actions `service:Action`, resources `*` or ARNs,
//! conditions operator → {key → value}); scoping, the EC2 part and the trust policy are checked.
//! Each invocation prints one document as IAM takes it (`--document`), and the policy allows
//! every AWS call the plugin's source makes, with the tag and cluster conditions IAM enforces.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_ecs-elastic-agent");

fn profile(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles").join(name)
}

fn iam_policy(cluster: &Path, elastic: &[PathBuf]) -> Output {
    iam_document(cluster, elastic, "policy")
}

fn iam_document(cluster: &Path, elastic: &[PathBuf], document: &str) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("iam-policy").arg("--document").arg(document).arg("--cluster-profile").arg(cluster);
    for e in elastic {
        cmd.arg("--elastic-profile").arg(e);
    }
    cmd.env("RUST_LOG", "off").output().expect("run iam-policy")
}

/// `{"policy": .., "trust_policy": .., "caller_policy": ..}`, the documents that apply, each
/// printed by its own invocation.
fn policies(cluster: &str, elastic: &[&str]) -> Value {
    let elastic: Vec<PathBuf> = elastic.iter().map(|e| profile(e)).collect();
    let mut out = serde_json::Map::new();
    for (document, key) in [("policy", "policy"), ("trust-policy", "trust_policy"), ("caller-policy", "caller_policy")]
    {
        let o = iam_document(&profile(cluster), &elastic, document);
        if document != "policy" && o.status.code() == Some(1) && o.stdout.is_empty() {
            assert!(String::from_utf8_lossy(&o.stderr).contains("no RoleArn"), "{cluster} {document}");
            continue;
        }
        assert!(o.status.success(), "{cluster} {document}: {}", String::from_utf8_lossy(&o.stderr));
        out.insert(key.into(), serde_json::from_slice(&o.stdout).expect("iam-policy prints JSON"));
    }
    Value::Object(out)
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
                // IAM's grammar: an optional set qualifier, then the operator's name.
                let name =
                    ["ForAllValues:", "ForAnyValue:"].iter().find_map(|q| operator.strip_prefix(q)).unwrap_or(operator);
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphabetic()) {
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
            "ec2:StopInstances",
            "ec2:StartInstances",
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
        statement(p, "DescribeTasksOfTheCluster")["Resource"],
        "arn:aws:ecs:eu-west-1:210987654321:task/ci-spot/*"
    );
    assert_eq!(
        statement(p, "StopOnlyOurTasksOfTheCluster")["Resource"],
        "arn:aws:ecs:eu-west-1:210987654321:task/ci-spot/*"
    );
    let run = statement(p, "RunAgentTasksInTheClusterTaggedForThisProfile");
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
    // The example names no account: the profile's key (a hash of account, region and cluster)
    // is unknown, so the tag must be present rather than equal.
    assert_eq!(terminate["Condition"]["Null"]["aws:ResourceTag/gocd:cluster-profile"], "false");
    let launch = statement(p, "LaunchContainerInstancesFromTheProfile");
    let resources = strings(&launch["Resource"]).unwrap();
    assert!(resources.contains(&"arn:aws:ec2:us-west-2::image/ami-0abcdef1234567890"), "{resources:?}");
    assert!(resources.contains(&"arn:aws:ec2:us-west-2:*:subnet/subnet-0a1b2c3d"), "{resources:?}");
    // Spot: the warning's tag, on our instances only, and no other tag.
    let mark = statement(p, "MarkOurSpotInstancesWarned");
    assert_eq!(mark["Action"], "ec2:CreateTags");
    assert_eq!(mark["Condition"]["Null"]["aws:ResourceTag/gocd:cluster-profile"], "false");
    assert_eq!(mark["Condition"]["Null"]["aws:ResourceTag/gocd:server-id"], "false");
    assert_eq!(mark["Condition"]["ForAllValues:StringEquals"]["aws:TagKeys"], serde_json::json!(["gocd:spot-warned"]));
}

/// Every operation the plugin's source calls (`calls.call("…")`, `call_unless`, `attempt`,
/// `attempt_in`), as `service:Operation`.
fn operations_the_plugin_calls() -> std::collections::BTreeSet<String> {
    const EC2: &[&str] = &[
        "DescribeVpcs",
        "DescribeSubnets",
        "DescribeSecurityGroups",
        "DescribeRouteTables",
        "DescribeVpcEndpoints",
        "DescribeInstances",
        "DescribeImages",
        "DescribeInstanceTypes",
        "DescribeKeyPairs",
        "RunInstances",
        "TerminateInstances",
        "StopInstances",
        "StartInstances",
        "CreateTags",
        "DescribeSpotPriceHistory",
    ];
    let mut found = std::collections::BTreeSet::new();
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("fake_aws.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // `attempt_in` names its buckets first, then the operation.
            for opener in [".call(", ".call_unless(", ".attempt(", ".attempt_in("] {
                for (at, _) in text.match_indices(opener) {
                    let rest = &text[at + opener.len()..];
                    let rest =
                        if opener == ".attempt_in(" { rest.split_once(',').map_or("", |(_, r)| r) } else { rest };
                    let rest = rest.trim_start();
                    let Some(name) = rest.strip_prefix('"').and_then(|r| r.split('"').next()) else { continue };
                    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphabetic()) {
                        continue;
                    }
                    let service = match name {
                        "GetCallerIdentity" | "AssumeRole" => "sts",
                        "GetInstanceProfile"
                        | "GetRole"
                        | "ListAttachedRolePolicies"
                        | "ListRolePolicies"
                        | "GetRolePolicy"
                        | "ListAttachedUserPolicies"
                        | "ListUserPolicies"
                        | "GetUserPolicy"
                        | "ListGroupsForUser"
                        | "ListAttachedGroupPolicies"
                        | "ListGroupPolicies"
                        | "GetGroupPolicy"
                        | "GetPolicy"
                        | "GetPolicyVersion" => "iam",
                        "ReceiveMessage" | "DeleteMessageBatch" | "GetQueueAttributes" => "sqs",
                        "ListRuleNamesByTarget" => "events",
                        "GetProducts" => "pricing",
                        "BatchGetImage" | "ListImageReferrers" => "ecr",
                        n if EC2.contains(&n) => "ec2",
                        _ => "ecs",
                    };
                    // IAM authorises DeleteMessageBatch as sqs:DeleteMessage.
                    let name = if name == "DeleteMessageBatch" { "DeleteMessage" } else { name };
                    found.insert(format!("{service}:{name}"));
                }
            }
        }
    }
    found
}

/// The policy allows every call the plugin makes (the end-to-end suites make these same calls
/// through the proxy), and IAM itself keeps the calls that change things to this cluster and
/// this cluster profile's tagged resources.
#[test]
fn the_policy_covers_every_call_the_plugin_makes_under_tag_and_cluster_conditions() {
    let called = operations_the_plugin_calls();
    assert!(called.len() >= 20, "the scan found the plugin's calls: {called:?}");
    let ec2 = policies("cluster-ec2.json", &["elastic-ec2-docker.json"]);
    let role = policies("cluster-fargate-spot-assume-role.json", &["elastic-small.json"]);
    let mut allowed: std::collections::BTreeSet<String> = actions(&ec2["policy"]).into_iter().collect();
    allowed.extend(actions(&role["caller_policy"]));
    // GetCallerIdentity needs no permission (AWS answers it for any identity). DeleteTaskDefinitions is made by
    // `try` only, to delete the revision it registered: without it `try` leaves that revision
    // INACTIVE, as the plugin leaves its own, and says so (docs/getting-started.md). ListClusters
    // is `leftovers`' only, an operator's tool run with the operator's credentials
    // (docs/operators.md, "leftovers").
    // The ECR reads are optional: without them the Images table shows no size and `doctor`'s
    // soci line says it could not read the image (docs/operators.md, "Image pulls and SOCI").
    let not_the_plugins = [
        "sts:GetCallerIdentity",
        "ecs:DeleteTaskDefinitions",
        "ecs:ListClusters",
        "ecr:BatchGetImage",
        "ecr:ListImageReferrers",
    ];
    let missing: Vec<&String> =
        called.iter().filter(|c| !allowed.contains(*c) && !not_the_plugins.contains(&c.as_str())).collect();
    assert!(missing.is_empty(), "calls the policy does not allow: {missing:?}");
    let needless: Vec<&String> = allowed
        .iter()
        .filter(|a| {
            !called.contains(*a)
                && !["ecs:TagResource", "ec2:CreateTags", "iam:PassRole", "sts:AssumeRole"].contains(&a.as_str())
        })
        .collect();
    assert!(needless.is_empty(), "actions no call of the plugin needs: {needless:?}");

    let p = &ec2["policy"];
    let ours = |sid: &str, prefix: &str| {
        let c = &statement(p, sid)["Condition"];
        // The EC2 example names no account, so the profile's key is unknown: the tag must be there.
        assert_eq!(c["Null"][format!("{prefix}/gocd:cluster-profile")], "false", "{sid}: {c}");
        assert_eq!(c["Null"][format!("{prefix}/gocd:server-id")], "false", "{sid}: {c}");
        c.clone()
    };
    let stop = ours("StopOnlyOurTasksOfTheCluster", "aws:ResourceTag");
    assert_eq!(stop["ArnEquals"]["ecs:cluster"], "arn:aws:ecs:us-west-2:*:cluster/gocd-ec2");
    let run = ours("RunAgentTasksInTheClusterTaggedForThisProfile", "aws:RequestTag");
    assert_eq!(run["ArnEquals"]["ecs:cluster"], "arn:aws:ecs:us-west-2:*:cluster/gocd-ec2");
    assert_eq!(
        statement(p, "RunAgentTasksInTheClusterTaggedForThisProfile")["Action"],
        serde_json::json!(["ecs:RunTask", "ecs:StartTask"])
    );
    ours("TerminateOnlyOurContainerInstances", "aws:ResourceTag");
    ours("LaunchContainerInstancesTaggedForThisProfile", "aws:RequestTag");
    // Where the account is known (RoleArn), the tag must equal this profile's key.
    let keyed = &statement(&role["policy"], "StopOnlyOurTasksOfTheCluster")["Condition"];
    assert!(keyed["StringEquals"]["aws:ResourceTag/gocd:cluster-profile"].is_string(), "{keyed}");
    let keyed = &statement(&role["policy"], "RunAgentTasksInTheClusterTaggedForThisProfile")["Condition"];
    assert!(keyed["StringEquals"]["aws:RequestTag/gocd:cluster-profile"].is_string(), "{keyed}");
    assert_eq!(keyed["ArnEquals"]["ecs:cluster"], "arn:aws:ecs:eu-west-1:210987654321:cluster/ci-spot");
    assert_eq!(
        statement(p, "ListTasksOfTheCluster")["Condition"]["ArnEquals"]["ecs:cluster"],
        "arn:aws:ecs:us-west-2:*:cluster/gocd-ec2"
    );
    // Every statement that stops, terminates or starts something carries a condition.
    for s in p["Statement"].as_array().unwrap() {
        let acts = strings(&s["Action"]).unwrap();
        if acts.iter().any(|a| {
            [
                "ecs:StopTask",
                "ecs:RunTask",
                "ecs:StartTask",
                "ec2:TerminateInstances",
                "ec2:StopInstances",
                "ec2:StartInstances",
                "iam:PassRole",
            ]
            .contains(a)
        }) {
            assert!(s.get("Condition").is_some(), "unconditioned: {s}");
        }
    }
}

#[test]
fn each_invocation_prints_one_document_iam_takes_as_it_is() {
    let cluster = profile("cluster-fargate-spot-assume-role.json");
    for document in ["policy", "trust-policy", "caller-policy"] {
        let o = iam_document(&cluster, &[], document);
        assert!(o.status.success(), "{document}: {}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
        assert_eq!(v["Version"], "2012-10-17", "{document} is a bare policy document: {v}");
        check_policy(&v, document == "trust-policy").unwrap_or_else(|e| panic!("{document}: {e}"));
    }
    let o = iam_policy(&cluster, &[]);
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert!(v.get("policy").is_none() && v.get("Statement").is_some(), "the default is the policy itself");
    let o = iam_document(&profile("cluster-fargate.json"), &[], "trust-policy");
    assert_eq!(o.status.code(), Some(1), "no RoleArn, no trust policy");
    assert!(o.stdout.is_empty());
}

/// The elastic profiles' roles: the task role mounts the EFS cache through its
/// access point; the execution role writes the logs; a profile needing neither prints nothing.
#[test]
fn task_and_execution_role_documents_cover_what_the_elastic_profiles_use() {
    let build = [profile("elastic-fargate-build.json")];
    let o = iam_document(&profile("cluster-fargate.json"), &build, "task-role-policy");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    check_policy(&v, false).unwrap_or_else(|e| panic!("task role policy: {e}"));
    let mount = statement(&v, "MountEfsfs0a1b2c3d");
    assert_eq!(mount["Action"], serde_json::json!(["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"]));
    assert_eq!(mount["Resource"], "arn:aws:elasticfilesystem:us-east-1:*:file-system/fs-0a1b2c3d");
    assert_eq!(
        mount["Condition"]["StringEquals"]["elasticfilesystem:AccessPointArn"],
        serde_json::json!(["arn:aws:elasticfilesystem:us-east-1:*:access-point/fsap-0123456789abcdef0"])
    );
    let o = iam_document(&profile("cluster-fargate.json"), &build, "execution-role-policy");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    check_policy(&v, false).unwrap_or_else(|e| panic!("execution role policy: {e}"));
    assert_eq!(
        statement(&v, "PullPrivateEcrImages")["Resource"],
        "arn:aws:ecr:us-east-1:123456789012:repository/gocd/postgres",
        "the sidecar's private ECR image"
    );
    let o = iam_document(&profile("cluster-fargate.json"), &[profile("elastic-small.json")], "execution-role-policy");
    assert_eq!(o.status.code(), Some(1), "no secrets, registry credentials, logs or ECR: nothing to print");
    assert!(String::from_utf8_lossy(&o.stderr).contains("no execution role policy printed"));
    let o = iam_document(&profile("cluster-fargate.json"), &[profile("elastic-small.json")], "task-role-policy");
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
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

/// IAM takes at most 6,144 characters (whitespace not counted) in a managed policy, which is how
/// the cluster stack attaches the plugin's policy: every example document fits. A document over
/// the limit gets a note from `iam-policy` saying what to do instead.
#[test]
fn every_example_policy_fits_a_managed_policy() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/iam");
    for entry in std::fs::read_dir(&dir).expect("packaging/iam") {
        let path = entry.expect("entry").path();
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("JSON");
        let size = doc.to_string().chars().count();
        assert!(size <= 6144, "{} is {size} characters, over IAM's 6144 for a managed policy", path.display());
    }
}
