//! `iam-policy`: the least-privilege IAM policy a cluster profile (and its elastic profiles)
//! needs, derived from the calls the plugin makes (`docs/design.md`, "Where the truth lives" and
//! "The lifecycle"):
//!
//! - ECS reads and stops only tasks of the profile's cluster, runs only our task definition
//!   families (`gocd-<cluster key>-*`, or the `TaskDefinitionArn`s given) in that cluster, and
//!   tags only at creation (RunTask with `tags` needs `ecs:TagResource`);
//! - EC2 describe calls for the default networking (and `doctor`);
//! - `doctor`'s reads of the identity's own IAM policies, for its permissions check ([`identity`]);
//! - with `LaunchType` EC2: RunInstances from the profile's AMI, subnets and groups, tagged with
//!   the cluster profile at launch; TerminateInstances, StopInstances and StartInstances (the
//!   stopped pool, `Ec2StoppedInstances`) only of instances carrying that tag; the
//!   container-instance calls of the cluster and StartTask;
//! - `iam:PassRole` only for the task, execution and instance roles, only to their services;
//! - with `RoleArn`: the role's trust policy (external id condition) and the caller's policy;
//! - the elastic profiles' task and execution roles: what their EFS volumes, ECS Exec,
//!   registry credentials, secrets, logs and private ECR images need ([`roles`]).
//!
//! Pure: no AWS call. Where a value is unknown (no region, no account in any ARN) the ARN part is
//! `*` and a note on stderr says so.

mod events;
mod identity;
mod roles;

use std::collections::BTreeSet;
use std::io::{self, Write};

use serde_json::{json, Map, Value};

use super::files::{load_cluster, load_elastic};
use super::{IamPolicyArgs, PolicyDocument};
use crate::cluster::base::identity::cluster_key;
use crate::cluster::capacity::ec2::api::TAG_SPOT_WARNED;
use crate::settings::{ClusterProfile, ElasticProfile, LaunchType};

/// The policies one configuration needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Policies {
    /// The plugin's identity (the role of `RoleArn` when set).
    pub policy: Value,
    /// The trust policy of `RoleArn` (only with `RoleArn`).
    pub trust_policy: Option<Value>,
    /// What the GoCD server's own identity needs to assume `RoleArn` (only with `RoleArn`).
    pub caller_policy: Option<Value>,
    /// What the elastic profiles' task role needs (EFS IAM mounts, ECS Exec), when anything.
    pub task_role_policy: Option<Value>,
    /// What their execution role needs (registry credentials, secrets, logs, ECR), when anything.
    pub execution_role_policy: Option<Value>,
    /// The EventBridge rule's event pattern (only with `EventQueueUrl`).
    pub event_rule_pattern: Option<Value>,
    /// The event queue's access policy (only with `EventQueueUrl`).
    pub queue_policy: Option<Value>,
    /// Assumptions and placeholders, for a human.
    pub notes: Vec<String>,
}

impl Policies {
    /// One document as IAM takes it (`put-role-policy --policy-document`, `create-role
    /// --assume-role-policy-document`); `None` for the trust and caller policies without `RoleArn`.
    pub fn document(&self, which: PolicyDocument) -> Option<&Value> {
        match which {
            PolicyDocument::Policy => Some(&self.policy),
            PolicyDocument::TrustPolicy => self.trust_policy.as_ref(),
            PolicyDocument::CallerPolicy => self.caller_policy.as_ref(),
            PolicyDocument::TaskRolePolicy => self.task_role_policy.as_ref(),
            PolicyDocument::ExecutionRolePolicy => self.execution_role_policy.as_ref(),
            PolicyDocument::EventRulePattern => self.event_rule_pattern.as_ref(),
            PolicyDocument::QueuePolicy => self.queue_policy.as_ref(),
        }
    }

    /// `{"policy": .., "trust_policy": .., "caller_policy": ..}` (the last two only with `RoleArn`).
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("policy".into(), self.policy.clone());
        if let Some(trust) = &self.trust_policy {
            out.insert("trust_policy".into(), trust.clone());
        }
        if let Some(caller) = &self.caller_policy {
            out.insert("caller_policy".into(), caller.clone());
        }
        if let Some(task) = &self.task_role_policy {
            out.insert("task_role_policy".into(), task.clone());
        }
        if let Some(execution) = &self.execution_role_policy {
            out.insert("execution_role_policy".into(), execution.clone());
        }
        if let Some(pattern) = &self.event_rule_pattern {
            out.insert("event_rule_pattern".into(), pattern.clone());
        }
        if let Some(queue) = &self.queue_policy {
            out.insert("queue_policy".into(), queue.clone());
        }
        Value::Object(out)
    }
}

/// Prints the document asked for on `out` (as IAM takes it), notes on `err`; `Ok(false)` when a
/// profile is not valid or the document does not apply (why goes to `err`, nothing to `out`).
///
/// # Errors
/// Only when writing fails.
pub fn run(args: &IamPolicyArgs, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<bool> {
    let (document, args) = (args.document, &args.files);
    let mut problems = Vec::new();
    let cluster = match load_cluster(&args.cluster_profile) {
        Ok(loaded) => loaded
            .parsed
            .map_err(|p| problems.extend(p.into_iter().map(|e| line(&args.cluster_profile, &e.key, &e.message))))
            .ok(),
        Err(why) => {
            problems.push(format!("{}: {why}", args.cluster_profile.display()));
            None
        }
    };
    let mut elastic = Vec::new();
    for path in &args.elastic_profiles {
        match load_elastic(path) {
            Ok(loaded) => match loaded.parsed {
                Ok(profile) => elastic.push(profile),
                Err(p) => problems.extend(p.into_iter().map(|e| line(path, &e.key, &e.message))),
            },
            Err(why) => problems.push(format!("{}: {why}", path.display())),
        }
    }
    let Some(cluster) = cluster.filter(|_| problems.is_empty()) else {
        for p in &problems {
            writeln!(err, "{p}")?;
        }
        writeln!(
            err,
            "no policy printed: fix the profiles first (`ecs-elastic-agent validate` shows the same problems)"
        )?;
        return Ok(false);
    };
    let policies = policies(&cluster, &elastic);
    let Some(doc) = policies.document(document) else {
        let why = match document {
            PolicyDocument::TaskRolePolicy => {
                "no elastic profile given mounts an EFS volume with iam or enables ECS Exec, so the task role needs nothing from this plugin's keys"
            }
            PolicyDocument::ExecutionRolePolicy => {
                "no elastic profile given reads secrets, registry credentials or private ECR images, and the cluster profile sets no LogGroup"
            }
            PolicyDocument::EventRulePattern | PolicyDocument::QueuePolicy => {
                "the cluster profile sets no EventQueueUrl, so no EventBridge rule or queue is needed"
            }
            _ => "the cluster profile sets no RoleArn, so the plugin assumes no role",
        };
        writeln!(err, "no {} printed: {why}", name(document))?;
        return Ok(false);
    };
    let text = serde_json::to_string_pretty(doc).map_err(io::Error::other)?;
    writeln!(out, "{text}")?;
    for note in &policies.notes {
        writeln!(err, "note: {note}")?;
    }
    let size = policy_size(doc);
    if size > MANAGED_POLICY_MAX {
        writeln!(
            err,
            "note: this document is {size} characters as IAM counts them (without whitespace), more than the \
             {MANAGED_POLICY_MAX} IAM takes in a managed policy: put it inline on the role (up to 10240 for all \
             of a role's inline policies), or split its statements between two managed policies"
        )?;
    }
    Ok(true)
}

/// The most characters IAM takes in a managed policy, whitespace not counted.
pub const MANAGED_POLICY_MAX: usize = 6144;

/// A policy document's size as IAM counts it against its limits: its characters, whitespace
/// outside the JSON's strings not counted (the compact form has none).
pub fn policy_size(doc: &Value) -> usize {
    doc.to_string().chars().count()
}

fn name(document: PolicyDocument) -> &'static str {
    match document {
        PolicyDocument::Policy => "policy",
        PolicyDocument::TrustPolicy => "trust policy",
        PolicyDocument::CallerPolicy => "caller policy",
        PolicyDocument::TaskRolePolicy => "task role policy",
        PolicyDocument::ExecutionRolePolicy => "execution role policy",
        PolicyDocument::EventRulePattern => "event rule pattern",
        PolicyDocument::QueuePolicy => "queue policy",
    }
}

fn line(path: &std::path::Path, key: &str, message: &str) -> String {
    format!("{}: {key}: {}", path.display(), message.replace(['\n', '\r'], " "))
}

/// Where the plugin's calls land: partition, region, account and cluster.
#[derive(Debug, Clone)]
struct Scope {
    partition: String,
    region: String,
    account: String,
    cluster: String,
    /// The cluster profile key (needs a known region): names our families and tags.
    key: Option<String>,
}

impl Scope {
    fn of(cluster: &ClusterProfile) -> Scope {
        let arn_part = |arn: &str, i: usize| arn.split(':').nth(i).filter(|s| !s.is_empty()).map(str::to_string);
        let cluster_arn = Some(cluster.cluster_name.as_str()).filter(|c| c.starts_with("arn:"));
        let role_arn = cluster.role_arn.as_deref();
        let region = cluster.region.clone();
        let partition = cluster_arn
            .or(role_arn)
            .and_then(|a| arn_part(a, 1))
            .unwrap_or_else(|| partition_of(region.as_deref().unwrap_or("")).to_string());
        // With RoleArn every call runs in the role's account.
        let account = role_arn.and_then(|a| arn_part(a, 4)).or_else(|| cluster_arn.and_then(|a| arn_part(a, 4)));
        Scope {
            partition,
            key: region
                .as_deref()
                .zip(account.as_deref())
                .map(|(r, a)| cluster_key(a, r, &cluster.cluster_name, role_arn).into_string()),
            region: region.unwrap_or_else(|| "*".into()),
            account: account.unwrap_or_else(|| "*".into()),
            cluster: cluster.cluster_short_name().to_string(),
        }
    }

    fn arn(&self, service: &str, resource: &str) -> String {
        format!("arn:{}:{service}:{}:{}:{resource}", self.partition, self.region, self.account)
    }

    fn cluster_arn(&self) -> String {
        self.arn("ecs", &format!("cluster/{}", self.cluster))
    }

    fn iam(&self, account: &str, resource: &str) -> String {
        format!("arn:{}:iam::{account}:{resource}", self.partition)
    }

    /// Our task definition families (`gocd-<key>-<hash>`), every revision.
    fn our_families(&self) -> String {
        match &self.key {
            Some(key) => self.arn("ecs", &format!("task-definition/gocd-{key}-*:*")),
            None => self.arn("ecs", "task-definition/gocd-*:*"),
        }
    }

    /// A condition that the tags say "this cluster profile, of some GoCD server" (`prefix` is
    /// `aws:ResourceTag` or `aws:RequestTag`), joined with `also` (e.g. `ecs:cluster`).
    fn ours_condition(&self, prefix: &str, also: Option<Value>) -> Value {
        let mut condition = self.tag_condition(prefix);
        let server = format!("{prefix}/gocd:server-id");
        let map = condition.as_object_mut().expect("an object");
        let null = map.entry("Null").or_insert_with(|| json!({}));
        null[server.as_str()] = json!("false");
        if let Some(Value::Object(extra)) = also {
            for (operator, tests) in extra {
                let entry = map.entry(operator).or_insert_with(|| json!({}));
                for (k, v) in tests.as_object().into_iter().flatten() {
                    entry[k.as_str()] = v.clone();
                }
            }
        }
        condition
    }

    /// A condition that a tag says "this cluster profile" (`prefix` is `aws:ResourceTag` or `aws:RequestTag`).
    fn tag_condition(&self, prefix: &str) -> Value {
        let key = format!("{prefix}/gocd:cluster-profile");
        match &self.key {
            Some(value) => json!({ "StringEquals": { key: value } }),
            None => json!({ "Null": { key: "false" } }),
        }
    }
}

fn partition_of(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else {
        "aws"
    }
}

/// One statement; a single action or resource is written as a string.
fn statement(sid: &str, actions: &[&str], resources: Vec<String>, condition: Option<Value>) -> Value {
    let one_or_many = |mut v: Vec<String>| {
        if v.len() == 1 {
            Value::String(v.remove(0))
        } else {
            json!(v)
        }
    };
    let mut s = Map::new();
    s.insert("Sid".into(), json!(sid));
    s.insert("Effect".into(), json!("Allow"));
    s.insert("Action".into(), one_or_many(actions.iter().map(|a| a.to_string()).collect()));
    s.insert("Resource".into(), one_or_many(resources));
    if let Some(c) = condition {
        s.insert("Condition".into(), c);
    }
    Value::Object(s)
}

/// The Sid that names the version of the plugin a policy was printed by: IAM takes only letters
/// and digits in a Sid, so `0.1.0` is `EcsElasticAgentVersion0dot1dot0` (`-` is `dash` and `+` is
/// `plus`, the rest of a version's characters are letters and digits).
pub fn version_sid(version: &str) -> String {
    let mut sid = String::from("EcsElasticAgentVersion");
    for c in version.chars() {
        match c {
            '.' => sid.push_str("dot"),
            '-' => sid.push_str("dash"),
            '+' => sid.push_str("plus"),
            c if c.is_ascii_alphanumeric() => sid.push(c),
            _ => {}
        }
    }
    sid
}

/// The policy's first statement, which says in IAM (console, `get-policy-version`) which version
/// of the plugin the policy is for. It allows sts:GetCallerIdentity, which the plugin calls to
/// learn the account it acts in and which AWS answers for every identity whatever its policies
/// say, so it grants nothing the identity does not already have.
fn version_statement(version: &str) -> Value {
    statement(&version_sid(version), &["sts:GetCallerIdentity"], vec!["*".into()], None)
}

fn document(statements: Vec<Value>) -> Value {
    json!({ "Version": "2012-10-17", "Statement": statements })
}

/// The policies `cluster` and its `elastic` profiles need.
pub fn policies(cluster: &ClusterProfile, elastic: &[ElasticProfile]) -> Policies {
    let scope = Scope::of(cluster);
    let mut notes = Vec::new();
    if scope.region == "*" {
        notes.push("the cluster profile names no Region: ARNs use * for the region and our task definition families are gocd-*".into());
    }
    if scope.account == "*" {
        notes.push("no account id in ClusterName or RoleArn: ARNs use * for the account (put the account id in to narrow them)".into());
    }
    let ec2 = cluster.launch_type == LaunchType::Ec2;
    let cluster_condition = json!({ "ArnEquals": { "ecs:cluster": scope.cluster_arn() } });
    let tasks = scope.arn("ecs", &format!("task/{}/*", scope.cluster));
    let families = task_definitions(&scope, elastic);

    let mut statements = vec![
        version_statement(env!("CARGO_PKG_VERSION")),
        statement("ListTasksOfTheCluster", &["ecs:ListTasks"], vec!["*".into()], Some(cluster_condition.clone())),
        statement("DescribeTasksOfTheCluster", &["ecs:DescribeTasks"], vec![tasks.clone()], None),
        // IAM itself keeps the plugin to its own tasks: StopTask only on tasks tagged with this
        // cluster profile (and some GoCD server), RunTask/StartTask only tagging them so.
        statement(
            "StopOnlyOurTasksOfTheCluster",
            &["ecs:StopTask"],
            vec![tasks.clone()],
            Some(scope.ours_condition("aws:ResourceTag", Some(cluster_condition.clone()))),
        ),
        statement(
            "RunAgentTasksInTheClusterTaggedForThisProfile",
            if ec2 { &["ecs:RunTask", "ecs:StartTask"] } else { &["ecs:RunTask"] },
            families.clone(),
            Some(scope.ours_condition("aws:RequestTag", Some(cluster_condition))),
        ),
    ];
    let registers = elastic.is_empty() || elastic.iter().any(|e| e.task_definition_arn.is_none());
    let mut create_actions = vec!["RunTask"];
    if ec2 {
        create_actions.push("StartTask");
    }
    let mut tagged = vec![tasks];
    if registers {
        create_actions.push("RegisterTaskDefinition");
        tagged.push(scope.our_families());
    }
    statements.push(statement(
        "TagTasksAndTaskDefinitionsAtCreation",
        &["ecs:TagResource"],
        tagged,
        Some(json!({ "StringEquals": { "ecs:CreateAction": create_actions } })),
    ));
    let task_definition_actions: &[&str] = if registers {
        &[
            "ecs:DescribeTaskDefinition",
            "ecs:RegisterTaskDefinition",
            "ecs:DeregisterTaskDefinition",
            "ecs:ListTaskDefinitionFamilies",
            "ecs:ListTaskDefinitions",
        ]
    } else {
        &["ecs:DescribeTaskDefinition"]
    };
    // AWS allows no resource-level permissions for these.
    statements.push(statement("TaskDefinitions", task_definition_actions, vec!["*".into()], None));
    statements.push(statement(
        "DescribeNetworking",
        &[
            "ec2:DescribeVpcs",
            "ec2:DescribeSubnets",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeRouteTables",
            "ec2:DescribeVpcEndpoints",
        ],
        vec!["*".into()],
        None,
    ));
    statements.push(statement("DoctorChecksTheCluster", &["ecs:DescribeClusters"], vec![scope.cluster_arn()], None));
    statements.push(statement(
        "DoctorChecksCapacityProviders",
        &["ecs:DescribeCapacityProviders"],
        vec!["*".into()],
        None,
    ));
    statements.extend(identity::statements(cluster, &scope));
    // A price the embedded table lacks (a newer region, an instance type it does not list) is
    // read from the Price List at a job's completion (read-only; no resource-level permission).
    statements.push(statement("ReadPricesTheTableLacks", &["pricing:GetProducts"], vec!["*".into()], None));
    if ec2 {
        statements.extend(ec2_statements(cluster, elastic, &scope, &mut notes));
    } else if may_use_instances(cluster) {
        // A job on an Auto Scaling group's instance is priced by the instance's type, and at the
        // Spot price when it is a Spot instance (read only; no resource-level permission).
        statements.push(statement(
            "DescribeContainerInstancesForCost",
            &["ecs:DescribeContainerInstances"],
            vec![scope.arn("ecs", &format!("container-instance/{}/*", scope.cluster))],
            None,
        ));
        statements.push(statement(
            "DescribeInstancesAndSpotPricesForCost",
            &["ec2:DescribeInstances", "ec2:DescribeSpotPriceHistory"],
            vec!["*".into()],
            None,
        ));
    }
    if let Some(pass) = pass_task_roles(cluster, elastic, &mut notes) {
        statements.push(pass);
    }
    statements.extend(events::statements(cluster, &scope));
    notes.extend(events::notes(cluster, &scope));
    if cluster.log_group.is_some() {
        notes.push(
            "LogGroup: the tasks' execution role (not this policy) needs logs:CreateLogStream and logs:PutLogEvents on the log group (--document execution-role-policy)"
                .into(),
        );
    }
    let (trust_policy, caller_policy) = match &cluster.role_arn {
        Some(role) => {
            let (trust, caller) = role_policies(cluster, role, &scope);
            notes.push(
                "trust_policy: replace <GOCD_ACCOUNT_ID> with the account of the GoCD server's own credentials".into(),
            );
            if cluster.external_id.is_none() {
                notes.push(
                    "trust_policy: replace <SERVER_ID> with GoCD's server id (Admin > Server Details), or set ExternalId in the cluster profile"
                        .into(),
                );
            }
            (Some(trust), Some(caller))
        }
        None => (None, None),
    };
    let task_role_policy = roles::task_role_policy(&scope, elastic);
    roles::task_role_notes(elastic, &mut notes);
    let execution_role_policy = roles::execution_role_policy(&scope, cluster, elastic, &mut notes);
    if elastic.iter().any(|e| e.efs_volumes.iter().any(|v| !v.iam)) {
        notes.push(
            "EFS volumes without iam need no IAM permission: the file system policy and its mount targets' security groups decide who mounts them"
                .into(),
        );
    }
    Policies {
        policy: document(statements),
        trust_policy,
        caller_policy,
        task_role_policy,
        execution_role_policy,
        event_rule_pattern: events::rule_pattern(cluster, &scope),
        queue_policy: events::queue_policy(cluster, &scope),
        notes,
    }
}

/// Task definitions RunTask may use: our families (when any elastic profile registers its own)
/// and the ones named by `TaskDefinitionArn`.
fn task_definitions(scope: &Scope, elastic: &[ElasticProfile]) -> Vec<String> {
    let mut out = BTreeSet::new();
    if elastic.is_empty() || elastic.iter().any(|e| e.task_definition_arn.is_none()) {
        out.insert(scope.our_families());
    }
    for given in elastic.iter().filter_map(|e| e.task_definition_arn.as_deref()) {
        let arn = if given.starts_with("arn:") {
            let revision = given.rsplit('/').next().is_some_and(|last| last.contains(':'));
            if revision {
                given.to_string()
            } else {
                format!("{given}:*")
            }
        } else if given.contains(':') {
            scope.arn("ecs", &format!("task-definition/{given}"))
        } else {
            scope.arn("ecs", &format!("task-definition/{given}:*"))
        };
        out.insert(arn);
    }
    out.into_iter().collect()
}

/// `iam:PassRole` for the task and execution roles, to ECS tasks only.
fn pass_task_roles(cluster: &ClusterProfile, elastic: &[ElasticProfile], notes: &mut Vec<String>) -> Option<Value> {
    let mut roles = BTreeSet::new();
    for e in elastic {
        roles.extend(e.task_role_arn.iter().cloned());
        roles.extend(e.execution_role_arn.iter().cloned());
    }
    if elastic.is_empty() {
        let lists = [
            ("AllowedTaskRoleArns", &cluster.allowed_task_role_arns),
            ("AllowedExecutionRoleArns", &cluster.allowed_execution_role_arns),
        ];
        for (key, list) in lists {
            for pattern in list.iter() {
                // IAM understands * and ? only.
                if pattern.as_str().contains(['[', ']']) {
                    notes.push(format!(
                        "{key} pattern {} uses [...], which IAM does not understand; left out",
                        pattern.as_str()
                    ));
                } else {
                    roles.insert(pattern.as_str().to_string());
                }
            }
        }
        notes.push(
            "no --elastic-profile given: iam:PassRole covers AllowedTaskRoleArns and AllowedExecutionRoleArns only; pass the elastic profiles to add their task and execution roles"
                .into(),
        );
    }
    if elastic.iter().any(|e| e.task_definition_arn.is_some()) {
        notes.push(
            "a TaskDefinitionArn is given: add its task and execution roles to iam:PassRole (the plugin checks them against the allow-lists at create-agent)"
                .into(),
        );
    }
    if roles.is_empty() {
        return None;
    }
    Some(statement(
        "PassTaskAndExecutionRolesToEcsTasks",
        &["iam:PassRole"],
        roles.into_iter().collect(),
        Some(json!({ "StringEquals": { "iam:PassedToService": "ecs-tasks.amazonaws.com" } })),
    ))
}

/// Whether `CapacityProviderStrategy` may place tasks on container instances (any provider that
/// is not Fargate's, or the cluster's default strategy).
fn may_use_instances(cluster: &ClusterProfile) -> bool {
    cluster.capacity_providers.as_ref().is_some_and(|s| crate::cluster::launch::providers::known_by_name(s).is_none())
}

/// The EC2 capacity the plugin launches and retires (LaunchType EC2).
fn ec2_statements(
    cluster: &ClusterProfile,
    elastic: &[ElasticProfile],
    scope: &Scope,
    notes: &mut Vec<String>,
) -> Vec<Value> {
    let Some(capacity) = &cluster.ec2 else {
        return Vec::new();
    };
    let ec2 = |resource: &str| scope.arn("ec2", resource);
    let ids = |kind: &str, configured: Vec<&String>| -> Vec<String> {
        if configured.is_empty() {
            vec![ec2(&format!("{kind}/*"))]
        } else {
            configured.into_iter().collect::<BTreeSet<_>>().into_iter().map(|id| ec2(&format!("{kind}/{id}"))).collect()
        }
    };
    let elastic_subnets: Vec<&String> = elastic.iter().flat_map(|e| &e.subnet_ids).collect();
    let elastic_groups: Vec<&String> = elastic.iter().flat_map(|e| &e.security_group_ids).collect();
    // Instances go where the cluster profile says; tasks may name other subnets and groups.
    let subnets: Vec<&String> = if cluster.subnet_ids.is_empty() {
        Vec::new()
    } else {
        cluster.subnet_ids.iter().chain(elastic_subnets).collect()
    };
    let groups: Vec<&String> = if cluster.security_group_ids.is_empty() {
        Vec::new()
    } else {
        cluster.security_group_ids.iter().chain(elastic_groups).collect()
    };
    let images =
        capacity.ami_ids.iter().map(|ami| format!("arn:{}:ec2:{}::image/{ami}", scope.partition, scope.region));
    let mut launch_from: Vec<String> = images.collect();
    launch_from.extend([ec2("network-interface/*"), ec2("volume/*")]);
    launch_from.extend(ids("subnet", subnets));
    launch_from.extend(ids("security-group", groups));
    if let Some(key_pair) = &capacity.key_pair {
        launch_from.push(ec2(&format!("key-pair/{key_pair}")));
    }
    let mut created = vec![ec2("instance/*"), ec2("volume/*"), ec2("network-interface/*")];
    if capacity.spot {
        launch_from.push(ec2("spot-instances-request/*"));
        created.push(ec2("spot-instances-request/*"));
    }
    let (role_account, role_name) = instance_role(&capacity.instance_profile, &scope.account);
    notes.push(format!(
        "iam:PassRole for the instance role assumes the role of instance profile {} is named {role_name}; change it if not",
        capacity.instance_profile
    ));
    let profile_arn = if capacity.instance_profile.starts_with("arn:") {
        capacity.instance_profile.clone()
    } else {
        scope.iam(&scope.account, &format!("instance-profile/{}", capacity.instance_profile))
    };
    let mut statements = vec![
        statement(
            "LaunchContainerInstancesTaggedForThisProfile",
            &["ec2:RunInstances"],
            vec![ec2("instance/*")],
            Some(scope.ours_condition("aws:RequestTag", None)),
        ),
        statement("LaunchContainerInstancesFromTheProfile", &["ec2:RunInstances"], launch_from, None),
        statement(
            "TagContainerInstancesAtLaunch",
            &["ec2:CreateTags"],
            created,
            Some(json!({ "StringEquals": { "ec2:CreateAction": "RunInstances" } })),
        ),
        statement(
            "TerminateOnlyOurContainerInstances",
            // Stop and start: the stopped-instance pool (`Ec2StoppedInstances`), under the same
            // tag condition as terminate.
            &["ec2:TerminateInstances", "ec2:StopInstances", "ec2:StartInstances"],
            vec![ec2("instance/*")],
            Some(scope.ours_condition("aws:ResourceTag", None)),
        ),
        // AWS allows no resource-level permissions for Describe calls.
        statement(
            "DescribeInstancesAndImages",
            &["ec2:DescribeInstances", "ec2:DescribeImages", "ec2:DescribeInstanceTypes", "ec2:DescribeKeyPairs"],
            vec!["*".into()],
            None,
        ),
        statement(
            "ContainerInstancesOfTheCluster",
            &["ecs:ListContainerInstances", "ecs:DeregisterContainerInstance"],
            vec![scope.cluster_arn()],
            None,
        ),
        statement(
            "DescribeAndDrainContainerInstancesOfTheCluster",
            &["ecs:DescribeContainerInstances", "ecs:UpdateContainerInstancesState"],
            vec![scope.arn("ecs", &format!("container-instance/{}/*", scope.cluster))],
            None,
        ),
        statement(
            "PassTheInstanceRoleToEc2",
            &["iam:PassRole"],
            vec![scope.iam(&role_account, &format!("role/{role_name}"))],
            Some(json!({ "StringEquals": { "iam:PassedToService": "ec2.amazonaws.com" } })),
        ),
        statement("DoctorChecksTheInstanceProfile", &["iam:GetInstanceProfile"], vec![profile_arn], None),
    ];
    if capacity.spot {
        // The Spot warning is one event: the tag keeps it for a plugin that restarts.
        let only_that_tag = json!({ "ForAllValues:StringEquals": { "aws:TagKeys": [TAG_SPOT_WARNED] } });
        statements.push(statement(
            "MarkOurSpotInstancesWarned",
            &["ec2:CreateTags"],
            vec![ec2("instance/*")],
            Some(scope.ours_condition("aws:ResourceTag", Some(only_that_tag))),
        ));
        // A job on a Spot instance is priced at its Spot price (no resource-level permission).
        statements.push(statement("ReadSpotPricesForCost", &["ec2:DescribeSpotPriceHistory"], vec!["*".into()], None));
    }
    statements
}

/// (account, role name) of an instance profile given by name or ARN.
fn instance_role(instance_profile: &str, default_account: &str) -> (String, String) {
    if let Some(rest) = instance_profile.strip_prefix("arn:") {
        let account = rest.split(':').nth(3).filter(|a| !a.is_empty()).unwrap_or(default_account);
        let name = rest.rsplit('/').next().unwrap_or(instance_profile);
        return (account.to_string(), name.to_string());
    }
    (default_account.to_string(), instance_profile.to_string())
}

/// The role's trust policy and what the caller needs to assume it.
fn role_policies(cluster: &ClusterProfile, role: &str, scope: &Scope) -> (Value, Value) {
    let external_id = match &cluster.external_id {
        Some(id) => id.expose().clone(),
        None => "gocd:server-id:<SERVER_ID>".to_string(),
    };
    let trust = json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "GoCdServerAssumesThisRole",
            "Effect": "Allow",
            "Principal": { "AWS": format!("arn:{}:iam::<GOCD_ACCOUNT_ID>:root", scope.partition) },
            "Action": "sts:AssumeRole",
            "Condition": { "StringEquals": { "sts:ExternalId": external_id } }
        }]
    });
    let caller = document(vec![statement("AssumeTheAgentsRole", &["sts:AssumeRole"], vec![role.to_string()], None)]);
    (trust, caller)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Properties;

    fn cluster(pairs: &[(&str, &str)]) -> ClusterProfile {
        let props: Properties = pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect();
        ClusterProfile::parse(&props).unwrap()
    }

    fn elastic(pairs: &[(&str, &str)]) -> ElasticProfile {
        let props: Properties = pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect();
        ElasticProfile::parse(&props).unwrap()
    }

    fn sids(p: &Value) -> Vec<String> {
        p["Statement"].as_array().unwrap().iter().map(|s| s["Sid"].as_str().unwrap().to_string()).collect()
    }

    fn find<'a>(p: &'a Value, sid: &str) -> &'a Value {
        p["Statement"].as_array().unwrap().iter().find(|s| s["Sid"] == sid).unwrap()
    }

    #[test]
    fn fargate_scopes_everything_to_the_cluster() {
        let c = cluster(&[("ClusterName", "arn:aws:ecs:us-east-1:123456789012:cluster/ci")]);
        let p = policies(
            &c,
            &[elastic(&[("Image", "gocd/agent:1"), ("TaskRoleArn", "arn:aws:iam::123456789012:role/build")])],
        );
        assert!(p.trust_policy.is_none());
        let key = cluster_key("123456789012", "us-east-1", "arn:aws:ecs:us-east-1:123456789012:cluster/ci", None);
        let run = find(&p.policy, "RunAgentTasksInTheClusterTaggedForThisProfile");
        assert_eq!(run["Action"], "ecs:RunTask");
        assert_eq!(run["Resource"], format!("arn:aws:ecs:us-east-1:123456789012:task-definition/gocd-{key}-*:*"));
        assert_eq!(run["Condition"]["ArnEquals"]["ecs:cluster"], "arn:aws:ecs:us-east-1:123456789012:cluster/ci");
        assert_eq!(
            find(&p.policy, "DescribeTasksOfTheCluster")["Resource"],
            "arn:aws:ecs:us-east-1:123456789012:task/ci/*"
        );
        let stop = find(&p.policy, "StopOnlyOurTasksOfTheCluster");
        assert_eq!(stop["Resource"], "arn:aws:ecs:us-east-1:123456789012:task/ci/*");
        assert_eq!(stop["Condition"]["StringEquals"]["aws:ResourceTag/gocd:cluster-profile"], key.as_str());
        assert_eq!(stop["Condition"]["Null"]["aws:ResourceTag/gocd:server-id"], "false");
        assert_eq!(stop["Condition"]["ArnEquals"]["ecs:cluster"], "arn:aws:ecs:us-east-1:123456789012:cluster/ci");
        assert_eq!(run["Condition"]["StringEquals"]["aws:RequestTag/gocd:cluster-profile"], key.as_str());
        assert_eq!(
            find(&p.policy, "PassTaskAndExecutionRolesToEcsTasks")["Resource"],
            "arn:aws:iam::123456789012:role/build"
        );
        assert!(!sids(&p.policy).iter().any(|s| s.contains("ContainerInstance")), "no EC2 on Fargate");
    }

    #[test]
    fn the_first_statement_names_the_version_in_a_sid_iam_takes() {
        assert_eq!(version_sid("0.1.0"), "EcsElasticAgentVersion0dot1dot0");
        assert_eq!(version_sid("1.10.2-rc.1+build.7"), "EcsElasticAgentVersion1dot10dot2dashrcdot1plusbuilddot7");
        let p = policies(&cluster(&[("ClusterName", "ci"), ("Region", "us-east-1")]), &[]).policy;
        let first = &p["Statement"][0];
        let sid = first["Sid"].as_str().unwrap();
        assert_eq!(sid, version_sid(env!("CARGO_PKG_VERSION")));
        assert!(sid.bytes().all(|b| b.is_ascii_alphanumeric()), "IAM takes only letters and digits: {sid}");
        // sts:GetCallerIdentity needs no permission: the statement grants nothing new.
        assert_eq!(first["Action"], "sts:GetCallerIdentity");
        assert_eq!(first["Resource"], "*");
        assert!(first.get("Condition").is_none());
    }

    #[test]
    fn an_auto_scaling_groups_provider_may_describe_its_container_instances_for_cost() {
        let asg = cluster(&[("ClusterName", "ci"), ("Region", "us-east-1"), ("CapacityProviderStrategy", "ci-asg")]);
        let p = policies(&asg, &[]);
        let describe = find(&p.policy, "DescribeContainerInstancesForCost");
        assert_eq!(describe["Action"], "ecs:DescribeContainerInstances");
        assert_eq!(describe["Resource"], "arn:aws:ecs:us-east-1:*:container-instance/ci/*");
        let spot = find(&p.policy, "DescribeInstancesAndSpotPricesForCost");
        assert_eq!(spot["Action"], json!(["ec2:DescribeInstances", "ec2:DescribeSpotPriceHistory"]));
        let fargate = cluster(&[("ClusterName", "ci"), ("CapacityProviderStrategy", "FARGATE_SPOT:1\nFARGATE:0")]);
        assert!(!sids(&policies(&fargate, &[]).policy).iter().any(|s| s.contains("ContainerInstances")));
    }

    #[test]
    fn ec2_adds_instances_and_the_instance_role() {
        let c = cluster(&[
            ("ClusterName", "ci"),
            ("Region", "eu-west-1"),
            ("LaunchType", "EC2"),
            ("Ec2InstanceType", "c5.xlarge"),
            ("Ec2InstanceProfile", "ecsInstanceRole"),
            ("Ec2AmiId", "ami-0abcdef1234567890"),
        ]);
        let p = policies(&c, &[]);
        let ids = sids(&p.policy);
        for sid in ["TerminateOnlyOurContainerInstances", "ContainerInstancesOfTheCluster", "PassTheInstanceRoleToEc2"]
        {
            assert!(ids.iter().any(|s| s == sid), "{sid} missing from {ids:?}");
        }
        let launch = find(&p.policy, "LaunchContainerInstancesFromTheProfile");
        assert!(launch["Resource"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "arn:aws:ec2:eu-west-1::image/ami-0abcdef1234567890"));
        assert_eq!(find(&p.policy, "PassTheInstanceRoleToEc2")["Resource"], "arn:aws:iam::*:role/ecsInstanceRole");
        assert_eq!(
            find(&p.policy, "RunAgentTasksInTheClusterTaggedForThisProfile")["Action"],
            json!(["ecs:RunTask", "ecs:StartTask"])
        );
    }

    #[test]
    fn role_arn_brings_a_trust_policy_with_the_external_id() {
        let c = cluster(&[
            ("ClusterName", "ci"),
            ("Region", "us-east-1"),
            ("RoleArn", "arn:aws:iam::210987654321:role/gocd"),
        ]);
        let p = policies(&c, &[]);
        let trust = p.trust_policy.unwrap();
        assert_eq!(trust["Statement"][0]["Condition"]["StringEquals"]["sts:ExternalId"], "gocd:server-id:<SERVER_ID>");
        assert_eq!(p.caller_policy.unwrap()["Statement"][0]["Resource"], "arn:aws:iam::210987654321:role/gocd");
        assert_eq!(
            find(&p.policy, "DoctorChecksTheCluster")["Resource"],
            "arn:aws:ecs:us-east-1:210987654321:cluster/ci"
        );
        let c = cluster(&[
            ("ClusterName", "ci"),
            ("RoleArn", "arn:aws:iam::210987654321:role/gocd"),
            ("ExternalId", "team-b"),
        ]);
        let trust = policies(&c, &[]).trust_policy.unwrap();
        assert_eq!(trust["Statement"][0]["Condition"]["StringEquals"]["sts:ExternalId"], "team-b");
    }

    #[test]
    fn given_task_definitions_replace_our_families() {
        let c = cluster(&[("ClusterName", "ci"), ("Region", "us-east-1")]);
        let e = elastic(&[("Image", "gocd/agent:1"), ("TaskDefinitionArn", "agent:3")]);
        let p = policies(&c, &[e]);
        assert_eq!(
            find(&p.policy, "RunAgentTasksInTheClusterTaggedForThisProfile")["Resource"],
            "arn:aws:ecs:us-east-1:*:task-definition/agent:3"
        );
        assert_eq!(find(&p.policy, "TaskDefinitions")["Action"], "ecs:DescribeTaskDefinition");
    }
}
