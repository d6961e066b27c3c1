//! `leftovers`: what the plugin created in one account and region, listed — tasks, EC2
//! instances and task-definition revisions carrying a GoCD server's and a cluster profile's tags —
//! and, with `--remove`, stopped, terminated and deregistered. For an operator removing the
//! plugin from an account, or cleaning up after a GoCD server that is gone.
//!
//! The credentials are the SDK's default chain (`AWS_PROFILE`, `AWS_REGION`, ...), or a cluster
//! profile's keys and role, built as the plugin builds them (`aws::accounts`); every call goes
//! through the port (`aws::leftovers` and the engine's own reads), so `AWS_ENDPOINT_URL`
//! applies as it does to the plugin, and so do its pacing and retries.
//!
//! The rule is the plugin's own: nothing without both owner tags is listed or touched
//! ([`found::owner`]). A listing changes nothing. A removal that fails is said with AWS's
//! reason and the fix, and the rest goes on.

pub mod found;

use std::io::{self, Write};
use std::sync::Arc;
use std::time::SystemTime;

use self::found::{in_cluster, owner, Counts, Kind, Leftover, FAMILY_PREFIX};
use super::files::load_cluster;
use super::LeftoversArgs;
use crate::aws::ecs::Stopped;
use crate::aws::leftovers::TERMINATE_BATCH;
use crate::aws::status::{ResourceStatus, TaskStatus};
use crate::aws::{Accounts, AwsClients, AwsError, Failure};
use crate::cluster::cleanup::plan::family_of;
use crate::settings::ClusterProfile;

/// The reason StopTask records on each task stopped.
const STOP_REASON: &str = "stopped by ecs-elastic-agent leftovers --remove";

/// Runs `leftovers`; `Ok(true)` when everything was read and, with `--remove`, removed.
///
/// # Errors
/// Only when writing to `out` fails.
pub async fn run(args: &LeftoversArgs, out: &mut dyn Write) -> io::Result<bool> {
    let mut r = Report { out, failed: 0 };
    let Some(aws) = clients(args, &mut r).await? else { return Ok(false) };
    let only = args.server_id.as_deref();
    let mut found = tasks(&aws, &args.clusters, only, &mut r).await?;
    found.extend(instances(&aws, only, &mut r).await?);
    found.extend(task_definitions(&aws, only, &mut r).await?);
    let now = SystemTime::now();
    for f in &found {
        r.say(f.line(now))?;
    }
    let counts = Counts::of(&found);
    if !args.remove {
        r.say(found::listed_summary(&counts))?;
        return Ok(r.failed == 0);
    }
    let removed = remove(&aws, &found, &mut r).await?;
    let unremoved = counts.total() - removed.total();
    r.say(found::removed_summary(&removed, unremoved))?;
    Ok(r.failed == 0)
}

/// Writes the lines and counts the failures.
struct Report<'a> {
    out: &'a mut dyn Write,
    failed: usize,
}

impl Report<'_> {
    fn say(&mut self, line: impl std::fmt::Display) -> io::Result<()> {
        writeln!(self.out, "{}", one_line(&line.to_string()))?;
        self.out.flush()
    }

    /// `FAIL <what>: <AWS's reason>; fix: <what to do>`.
    fn fail(&mut self, what: &str, why: impl std::fmt::Display, fix: &str) -> io::Result<()> {
        self.failed += 1;
        self.say(format!("FAIL {what}: {why}; fix: {fix}"))
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// What to do about a failed call of the identity running the command, which needed
/// `permission`; `if_absent` when what it named does not exist.
fn fix(e: &AwsError, permission: &str, if_absent: &str) -> String {
    match e.failure {
        Failure::Denied => format!(
            "grant {permission} to the identity running the command (`ecs-elastic-agent leftovers --help` lists every permission it needs)"
        ),
        Failure::NotFound => if_absent.to_string(),
        Failure::Throttled => "AWS throttled it past every retry: run the command again in a minute".to_string(),
        Failure::Transient => "AWS did not answer in time: run the command again".to_string(),
        Failure::NotSent => "check the credentials and region (AWS_PROFILE, AWS_REGION, or the cluster profile's keys and RoleArn); `ecs-elastic-agent doctor` says why they do not work".to_string(),
        Failure::WrongState => "its state changed while the command ran: run the command again".to_string(),
        Failure::NoCapacity | Failure::DryRunPassed | Failure::Refused => {
            "AWS refused it as asked: its reason says what to change".to_string()
        }
    }
}

/// The clients: a cluster profile's credentials and role, or the SDK's default chain; the
/// region of `--region`, else the profile's, else the SDK's default. `None` (said) when they
/// cannot be had.
async fn clients(args: &LeftoversArgs, r: &mut Report<'_>) -> io::Result<Option<Arc<AwsClients>>> {
    let Some(mut profile) = profile(args, r)? else { return Ok(None) };
    if let Some(region) = &args.region {
        profile.region = Some(region.clone());
    }
    if profile.role_arn.is_some() && profile.external_id.is_none() && args.server_id.is_none() {
        r.fail(
            "credentials",
            "the cluster profile has a RoleArn and no ExternalId: the plugin assumes it with gocd:server-id:<GoCD's server id>",
            "pass --server-id (Admin > Server Details in GoCD)",
        )?;
        return Ok(None);
    }
    let Ok(aws) = Accounts::default().clients_for(&profile, args.server_id.as_deref().unwrap_or_default()).await else {
        r.fail("region", "no region: the SDK's default region chain names none", "pass --region, or set AWS_REGION")?;
        return Ok(None);
    };
    let Some(account) = aws.account_id.clone() else {
        r.fail(
            "credentials",
            "the account of the credentials could not be learnt (STS GetCallerIdentity failed)",
            "check the credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID, ...); RUST_LOG=aws_config=info shows why they do not work",
        )?;
        return Ok(None);
    };
    let whose = args.server_id.as_deref().map_or_else(String::new, |id| format!(", of GoCD server {id} only"));
    r.say(format!("leftovers in {} (account {account}){whose}", aws.region))?;
    Ok(Some(aws))
}

/// The cluster profile of `--cluster-profile`, else one that names nothing (the SDK's default
/// credentials and region).
fn profile(args: &LeftoversArgs, r: &mut Report<'_>) -> io::Result<Option<ClusterProfile>> {
    let Some(path) = &args.cluster_profile else {
        let props = [("ClusterName".to_string(), Some("leftovers".to_string()))].into_iter().collect();
        return Ok(ClusterProfile::parse(&props).ok());
    };
    let fix = "correct the profile (`ecs-elastic-agent validate` lists the same problems)";
    match load_cluster(path) {
        Err(why) => r.fail("profile", format!("{}: {why}", path.display()), fix).map(|()| None),
        Ok(loaded) => match loaded.parsed {
            Ok(profile) => Ok(Some(profile)),
            Err(problems) => {
                let problems: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.key, p.message)).collect();
                r.fail("profile", format!("{}: {}", path.display(), problems.join("; ")), fix).map(|()| None)
            }
        },
    }
}

/// The plugin's live tasks in `clusters`, or in every cluster of the region.
async fn tasks(
    aws: &AwsClients,
    clusters: &[String],
    only: Option<&str>,
    r: &mut Report<'_>,
) -> io::Result<Vec<Leftover>> {
    let clusters = if clusters.is_empty() {
        match aws.list_clusters().await {
            Ok(arns) => arns,
            Err(e) => {
                let fix = fix(&e, "ecs:ListClusters", "run the command again");
                r.fail("list clusters", &e, &fix)?;
                return Ok(Vec::new());
            }
        }
    } else {
        clusters.to_vec()
    };
    let mut found = Vec::new();
    for cluster in &clusters {
        match tasks_of(aws, cluster, only).await {
            Ok(tasks) => found.extend(tasks),
            Err(e) => {
                let absent = format!("no cluster {cluster} in {}: check --cluster and --region", aws.region);
                let fix = fix(&e, "ecs:ListTasks and ecs:DescribeTasks", &absent);
                r.fail(&format!("list tasks of cluster {}", found::cluster_name(cluster)), &e, &fix)?;
            }
        }
    }
    Ok(found)
}

/// The plugin's live tasks of one cluster (ListTasks, then DescribeTasks with tags).
async fn tasks_of(aws: &AwsClients, cluster: &str, only: Option<&str>) -> Result<Vec<Leftover>, AwsError> {
    // Whoever started them: the owner tags, read below, say which are the plugin's.
    let arns = aws.list_tasks(cluster, None).await?;
    if arns.is_empty() {
        return Ok(Vec::new());
    }
    let ours = |t: &crate::aws::task_view::TaskView| {
        in_cluster(&t.cluster_arn, cluster) && t.last_status != TaskStatus::Stopped && owner(&t.tags, only).is_some()
    };
    let described = aws.describe_tasks(cluster, &arns, ours).await?;
    let mut found: Vec<Leftover> = described
        .into_iter()
        .filter_map(|t| {
            Some(Leftover {
                kind: Kind::Task,
                owner: owner(&t.tags, only)?,
                state: t.last_status.to_string(),
                since: t.created_at,
                extra: vec![("cluster", found::cluster_name(&t.cluster_arn).to_string())],
                cluster: Some(t.cluster_arn),
                id: t.arn,
            })
        })
        .collect();
    found.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(found)
}

/// The plugin's instances that are not terminated (stopped ones included).
async fn instances(aws: &AwsClients, only: Option<&str>, r: &mut Report<'_>) -> io::Result<Vec<Leftover>> {
    let listed = match aws.instances_with_server_tag(only).await {
        Ok(listed) => listed,
        Err(e) => {
            r.fail("list instances", &e, &fix(&e, "ec2:DescribeInstances", "run the command again"))?;
            return Ok(Vec::new());
        }
    };
    let mut found: Vec<Leftover> = listed
        .into_iter()
        .filter_map(|i| {
            Some(Leftover {
                kind: Kind::Instance,
                owner: owner(&i.tags, only)?,
                state: i.state.to_string(),
                since: i.launched_at,
                cluster: None,
                extra: vec![("type", i.instance_type)],
                id: i.id,
            })
        })
        .collect();
    found.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(found)
}

/// The plugin's ACTIVE task-definition revisions (families `gocd-*`, revisions with both owner
/// tags).
async fn task_definitions(aws: &AwsClients, only: Option<&str>, r: &mut Report<'_>) -> io::Result<Vec<Leftover>> {
    let families = match aws.list_families(FAMILY_PREFIX).await {
        Ok(families) => families,
        Err(e) => {
            let fix = fix(&e, "ecs:ListTaskDefinitionFamilies", "run the command again");
            r.fail("list task definition families", &e, &fix)?;
            return Ok(Vec::new());
        }
    };
    let mut found = Vec::new();
    for family in families.iter().filter(|f| f.starts_with(FAMILY_PREFIX)) {
        match revisions_of(aws, family, only).await {
            Ok(revisions) => found.extend(revisions),
            Err(e) => {
                let fix = fix(
                    &e,
                    "ecs:ListTaskDefinitions and ecs:DescribeTaskDefinition",
                    "it went while the command ran: run the command again",
                );
                r.fail(&format!("list task definitions of family {family}"), &e, &fix)?;
            }
        }
    }
    Ok(found)
}

/// The plugin's ACTIVE revisions of one family.
async fn revisions_of(aws: &AwsClients, family: &str, only: Option<&str>) -> Result<Vec<Leftover>, AwsError> {
    let mut found = Vec::new();
    for arn in aws.active_revisions(family).await? {
        if family_of(&arn) != family {
            continue; // a fake that answers by prefix
        }
        let Some(revision) = aws.tagged_revision(&arn).await? else { continue };
        if revision.status != ResourceStatus::Active {
            continue;
        }
        let Some(owner) = owner(&revision.tags, only) else { continue };
        found.push(Leftover {
            kind: Kind::TaskDefinition,
            id: revision.arn,
            owner,
            state: revision.status.to_string(),
            since: revision.registered_at,
            cluster: None,
            extra: Vec::new(),
        });
    }
    Ok(found)
}

/// Stops the tasks, terminates the instances, deregisters the revisions: one line each. What
/// was removed, by kind.
async fn remove(aws: &AwsClients, found: &[Leftover], r: &mut Report<'_>) -> io::Result<Counts> {
    let mut removed = Counts::default();
    for task in found.iter().filter(|f| f.kind == Kind::Task) {
        let cluster = task.cluster.as_deref().unwrap_or_default();
        match aws.stop_task(cluster, &task.id, STOP_REASON).await {
            Ok(Stopped::Stopping) => r.say(format!("stopped task {}", task.id))?,
            Ok(Stopped::AlreadyGone) => r.say(format!("stopped task {} (ECS no longer knew it)", task.id))?,
            Err(e) => {
                let fix = fix(&e, "ecs:StopTask", "run the command again");
                r.fail(&format!("stop task {}", task.id), &e, &fix)?;
                continue;
            }
        }
        removed.add(Kind::Task);
    }
    let ids: Vec<String> = found.iter().filter(|f| f.kind == Kind::Instance).map(|f| f.id.clone()).collect();
    for batch in ids.chunks(TERMINATE_BATCH) {
        removed.instances += terminate(aws, batch, r).await?;
    }
    for revision in found.iter().filter(|f| f.kind == Kind::TaskDefinition) {
        match aws.deregister_task_definition(&revision.id).await {
            Ok(()) => r.say(format!("deregistered task-definition {}", revision.id))?,
            Err(e) if e.failure == Failure::NotFound => {
                r.say(format!("deregistered task-definition {} (ECS no longer knew it)", revision.id))?;
            }
            Err(e) => {
                let fix = fix(&e, "ecs:DeregisterTaskDefinition", "run the command again");
                r.fail(&format!("deregister task-definition {}", revision.id), &e, &fix)?;
                continue;
            }
        }
        removed.add(Kind::TaskDefinition);
    }
    Ok(removed)
}

/// Terminates one batch of instances; how many were terminated. EC2 refuses a whole batch
/// that names an instance it no longer knows: the batch is then tried one instance at a time.
async fn terminate(aws: &AwsClients, batch: &[String], r: &mut Report<'_>) -> io::Result<usize> {
    match aws.terminate_instances(batch).await {
        Ok(answered) => {
            for id in batch {
                match answered.iter().find(|t| &t.id == id) {
                    Some(t) => r.say(format!("terminated instance {id} (was {}, now {})", t.previous, t.current))?,
                    None => r.say(format!("terminated instance {id}"))?,
                }
            }
            Ok(batch.len())
        }
        Err(e) if e.failure == Failure::NotFound && batch.len() > 1 => {
            let mut terminated = 0;
            for id in batch {
                terminated += Box::pin(terminate(aws, std::slice::from_ref(id), r)).await?;
            }
            Ok(terminated)
        }
        Err(e) if e.failure == Failure::NotFound => {
            for id in batch {
                r.say(format!("terminated instance {id} (EC2 no longer knew it)"))?;
            }
            Ok(batch.len())
        }
        Err(e) => {
            let fix = fix(&e, "ec2:TerminateInstances", "run the command again");
            for id in batch {
                r.fail(&format!("terminate instance {id}"), &e, &fix)?;
            }
            Ok(0)
        }
    }
}
