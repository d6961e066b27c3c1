//! `doctor`: a cluster profile checked against AWS with the credentials the plugin would use,
//! one line per check — `ok`, `warn` or `FAIL` — saying what was found and how to fix it.
//!
//! The credentials are built as the plugin builds them (`aws::accounts`): the profile's static
//! keys or the SDK's default chain, then AssumeRole into `RoleArn` with the external id and
//! session name of the profile. Every call goes through the SDK, so `AWS_ENDPOINT_URL` (and the
//! rest of the SDK's environment) applies as it does to the plugin. Nothing is created, changed
//! or started: reads, and one EC2 `DryRun` for EC2 profiles.
//!
//! Order: profile, region, credentials, role (a failure there stops the rest), then cluster,
//! networking, what the tasks reach (`reach`: routes and endpoints; `server`: `GoServerUrl`, a
//! URL a GoCD server answers at, and its port; `egress`: the ports builds check out materials
//! over — SSH 22, git:// 9418, HTTP 80, HTTPS 443 — per set of security groups, the elastic
//! profiles' own included; `image`: Docker Hub images pulled anonymously through a NAT gateway),
//! the elastic profiles' EFS volumes and registry credentials, capacity, the task definitions
//! elastic profiles name (`TaskDefinitionArn`), SOCI indexes of Fargate profiles' ECR images
//! (`soci`, with the image's pulls measured in the last hour), EC2 (image, instance profile, key pair, dry run),
//! log group, tasks, and the identity's own IAM policies against the actions `iam-policy` lists
//! (`permissions`).

mod checks;
mod ec2_types;
mod egress;
mod event_queue;
mod fix;
mod given;
mod image;
mod network;
mod permissions;
mod policy_actions;
mod reach;
pub mod soci;
mod task_parts;

use std::fmt::Display;
use std::io::{self, Write};
use std::time::Duration;

use aws_config::meta::region::ProvideRegion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::SdkConfig;
use aws_credential_types::provider::SharedCredentialsProvider;

use super::files::{load_cluster, load_elastic};
use super::DoctorArgs;

use crate::aws::AwsError;
use crate::settings::{check_compatible, ClusterProfile, ElasticProfile};

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Fine.
    Ok,
    /// Works, but worth a look (or could not be checked).
    Warn,
    /// The plugin would fail here.
    Fail,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
        }
    }
}

/// Writes the lines and remembers whether anything failed.
struct Report<'a> {
    out: &'a mut dyn Write,
    failed: bool,
}

impl Report<'_> {
    /// `VERDICT check: finding; fix: ...` on one line.
    fn line(&mut self, verdict: Verdict, check: &str, finding: impl Display, fix: Option<String>) -> io::Result<()> {
        self.failed |= verdict == Verdict::Fail;
        let finding = one_line(&finding.to_string());
        match fix {
            Some(fix) => writeln!(self.out, "{:<4} {check}: {finding}; fix: {}", verdict.label(), one_line(&fix))?,
            None => writeln!(self.out, "{:<4} {check}: {finding}", verdict.label())?,
        }
        self.out.flush()
    }

    fn ok(&mut self, check: &str, finding: impl Display) -> io::Result<()> {
        self.line(Verdict::Ok, check, finding, None)
    }

    fn warn(&mut self, check: &str, finding: impl Display, fix: impl Into<Option<String>>) -> io::Result<()> {
        self.line(Verdict::Warn, check, finding, fix.into())
    }

    fn fail(&mut self, check: &str, finding: impl Display, fix: impl Into<String>) -> io::Result<()> {
        self.line(Verdict::Fail, check, finding, Some(fix.into()))
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// The port's clients for the checks.
use crate::aws::doctor::{within, CheckClients as Aws};

/// Runs every check; `Ok(true)` when none failed.
///
/// # Errors
/// Only when writing to `out` fails.
pub async fn run(args: &DoctorArgs, out: &mut dyn Write) -> io::Result<bool> {
    let mut r = Report { out, failed: false };
    let timeout = Duration::from_secs(args.timeout.max(1));
    let Some(profile) = profile(args, &mut r)? else {
        return Ok(false);
    };
    let elastic = pairs(args, &profile, &mut r)?;
    let Some(region) = region(&profile, &mut r).await? else {
        return Ok(false);
    };
    let base = base_config(&profile, &region, timeout).await;
    let Some(caller) = credentials(&profile, &base, timeout, &mut r).await? else {
        r.warn("other checks", "skipped: they need working credentials", None)?;
        return Ok(false);
    };
    let Some((config, caller)) = role(&profile, args.server_id.as_deref(), base, caller, timeout, &mut r).await? else {
        r.warn("other checks", "skipped: they need the role", None)?;
        return Ok(false);
    };
    let aws = Aws::new(&config, region, caller.account, profile.cluster_short_name().to_string(), timeout);
    checks::all(&aws, &profile, &elastic, args.server_id.as_deref(), &caller.arn, &mut r).await?;
    Ok(!r.failed)
}

fn profile(args: &DoctorArgs, r: &mut Report<'_>) -> io::Result<Option<ClusterProfile>> {
    let path = args.cluster_profile.display();
    match load_cluster(&args.cluster_profile) {
        Err(why) => r
            .fail(
                "profile",
                format!("{path}: {why}"),
                "give a JSON object of key to string, like profiles/cluster-fargate.json",
            )
            .map(|_| None),
        Ok(loaded) => match loaded.parsed {
            Ok(profile) => {
                r.ok(
                    "profile",
                    format!(
                        "{path} is a valid cluster profile ({}, cluster {})",
                        profile.launch_type.as_str(),
                        profile.cluster_name
                    ),
                )?;
                Ok(Some(profile))
            }
            Err(problems) => {
                for p in problems {
                    r.fail(
                        "profile",
                        format!("{path}: {}: {}", p.key, p.message),
                        "correct the profile (`ecs-elastic-agent validate` lists the same problems)",
                    )?;
                }
                Ok(None)
            }
        },
    }
}

/// Each elastic profile given, checked against the cluster profile as create-agent checks it
/// (what real AWS would refuse, and the allow-lists): no AWS call. Returns the valid ones, with
/// their file names, for the checks that need AWS.
fn pairs(args: &DoctorArgs, cluster: &ClusterProfile, r: &mut Report<'_>) -> io::Result<Vec<(String, ElasticProfile)>> {
    let mut valid = Vec::new();
    for path in &args.elastic_profiles {
        let shown = path.display();
        let problems = match load_elastic(path) {
            Err(why) => vec![format!("{why}")],
            Ok(loaded) => match loaded.parsed {
                Ok(elastic) => {
                    let problems: Vec<String> = check_compatible(cluster, &elastic)
                        .into_iter()
                        .map(|p| format!("{}: {}", p.key, p.message))
                        .collect();
                    valid.push((shown.to_string(), elastic));
                    problems
                }
                Err(problems) => problems.into_iter().map(|p| format!("{}: {}", p.key, p.message)).collect(),
            },
        };
        if problems.is_empty() {
            r.ok("elastic profile", format!("{shown} fits this cluster profile"))?;
        }
        for p in problems {
            r.fail(
                "elastic profile",
                format!("{shown}: {p}"),
                "correct the elastic profile, or the cluster profile's allow-lists",
            )?;
        }
    }
    Ok(valid)
}

async fn region(profile: &ClusterProfile, r: &mut Report<'_>) -> io::Result<Option<String>> {
    if let Some(region) = &profile.region {
        r.ok("region", format!("{region} (from the cluster profile)"))?;
        return Ok(Some(region.clone()));
    }
    match aws_config::default_provider::region::default_provider().region().await {
        Some(region) => {
            r.ok("region", format!("{region} (from the SDK's default region chain: the profile sets no Region)"))?;
            Ok(Some(region.to_string()))
        }
        None => {
            r.fail(
                "region",
                "the profile sets no Region and the SDK's default region chain names none",
                "set Region in the cluster profile",
            )?;
            Ok(None)
        }
    }
}

/// Base credentials as the plugin loads them: the profile's keys, else the SDK's default chain.
async fn base_config(profile: &ClusterProfile, region: &str, timeout: Duration) -> SdkConfig {
    let timeouts = TimeoutConfig::builder().connect_timeout(Duration::from_secs(5)).operation_timeout(timeout).build();
    let loader = crate::aws::accounts::base_loader(profile, region)
        .timeout_config(timeouts)
        .retry_config(RetryConfig::standard().with_max_attempts(2));
    loader.load().await
}

/// Who sts:GetCallerIdentity says the credentials are.
#[derive(Debug, Clone)]
struct CallerIdentity {
    /// The caller's ARN (an IAM user, an assumed role's session, ...).
    arn: String,
    /// The account it acts in.
    account: String,
}

/// sts:GetCallerIdentity with the base credentials; the caller on success.
async fn credentials(
    profile: &ClusterProfile,
    base: &SdkConfig,
    timeout: Duration,
    r: &mut Report<'_>,
) -> io::Result<Option<CallerIdentity>> {
    let source = if profile.static_credentials.is_some() {
        "the profile's AccessKeyId"
    } else {
        "the SDK's default credential chain"
    };
    match caller_identity(base, timeout).await {
        Ok((arn, account)) => {
            r.ok("credentials", format!("{source} resolves to {arn} (account {account})"))?;
            Ok(Some(CallerIdentity { arn, account }))
        }
        Err(e) => {
            let fix = if profile.static_credentials.is_some() {
                "check AccessKeyId and SecretAccessKey (is the key deleted or inactive?)"
            } else {
                "give the GoCD server's process AWS credentials (environment, ~/.aws, an instance or task role), or set AccessKeyId and SecretAccessKey"
            };
            r.fail("credentials", format!("{source} does not work: {}", e.detail.trim_end_matches('.')), fix)?;
            Ok(None)
        }
    }
}

/// With `RoleArn`: AssumeRole as the plugin does it (external id, session name); the config to
/// use from here on and the caller it acts as (the role's session, in the role's account).
async fn role(
    profile: &ClusterProfile,
    server_id: Option<&str>,
    base: SdkConfig,
    caller: CallerIdentity,
    timeout: Duration,
    r: &mut Report<'_>,
) -> io::Result<Option<(SdkConfig, CallerIdentity)>> {
    let Some(role_arn) = &profile.role_arn else {
        r.ok("role", "no RoleArn: the plugin calls AWS with these credentials")?;
        return Ok(Some((base, caller)));
    };
    let account = caller.account;
    let (external_id, described) = match (&profile.external_id, server_id) {
        (Some(id), _) => (id.expose().clone(), "the profile's ExternalId".to_string()),
        (None, Some(server)) => {
            let id = format!("gocd:server-id:{server}");
            (id.clone(), id)
        }
        (None, None) => {
            let id = "gocd:server-id:unknown".to_string();
            r.warn(
                "external id",
                "ExternalId is not set, so the plugin uses gocd:server-id:<GoCD's server id>; checking with gocd:server-id:unknown",
                "pass --server-id (Admin > Server Details in GoCD) to check with the external id the plugin uses".to_string(),
            )?;
            (id.clone(), id)
        }
    };
    let provider =
        crate::aws::accounts::assume_role_provider(&base, role_arn, Some(external_id), profile.role_session_name())
            .await;
    let config = base.clone().into_builder().credentials_provider(SharedCredentialsProvider::new(provider)).build();
    match caller_identity(&config, timeout).await {
        Ok((arn, role_account)) => {
            r.ok(
                "role",
                format!(
                    "assumed {role_arn} as {arn} (external id {described}, session name {})",
                    profile.role_session_name()
                ),
            )?;
            Ok(Some((config, CallerIdentity { arn, account: role_account })))
        }
        Err(e) => {
            r.fail(
                "role",
                format!("account {account} cannot assume {role_arn}: {}", e.detail),
                format!(
                    "the role's trust policy must allow account {account} with sts:ExternalId = {described}, and the caller needs sts:AssumeRole on the role (`ecs-elastic-agent iam-policy` prints both)"
                ),
            )?;
            Ok(None)
        }
    }
}

/// (caller ARN, account) from sts:GetCallerIdentity.
async fn caller_identity(config: &SdkConfig, timeout: Duration) -> Result<(String, String), AwsError> {
    let sts = aws_sdk_sts::Client::new(config);
    let out = within(timeout, "GetCallerIdentity", async {
        sts.get_caller_identity().send().await.map_err(|e| AwsError::from_sdk_chain("GetCallerIdentity", &e))
    })
    .await?;
    Ok((out.arn().unwrap_or("?").to_string(), out.account().unwrap_or("?").to_string()))
}
