//! `try`: one agent task started for real from a cluster profile and an elastic profile, as the
//! plugin starts one — the same clients, task definition, networking, tags and RunTask
//! (`cluster::task_definition`, `cluster::launch`) — watched until it runs, then stopped, with
//! everything `try` created removed. No GoCD server is involved: the agent gets an obviously
//! fake registration key and never registers.
//!
//! What marks a try task: the server id tag is `try` (no GoCD server's: a server id is a
//! UUID), so no plugin's cleanup ever takes it for one of its agents, and the `gocd:try` tag
//! says what it is. Its task definition is a family of its own (`gocd-<key>-try-<hash>`),
//! registered for the run, then deregistered and deleted. `try` creates no log group (the
//! awslogs driver writes to the `LogGroup` that exists).
//!
//! Steps: profiles → clients and account → task definition → networking → RunTask → wait
//! for RUNNING (`watch`), then the start's phases, the image pull and, for an ECR image on
//! Fargate, its SOCI index (`pull`) → stop the task, deregister and delete the task definition. A
//! failure names its class ([`class::Class`]: the exit status), what happened and the fix.

pub mod class;
pub mod probe;
mod pull;
mod watch;

use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use self::class::{Class, Failed};
use super::files::{load_cluster, load_elastic};
use super::TryArgs;
use crate::aws::{Accounts, AwsClients};
use crate::cluster::base::identity::{self, settings_fingerprint, Identity, TAG_TRY};
use crate::cluster::launch::guardrails;
use crate::cluster::launch::providers::{self, ProviderKinds};
use crate::cluster::launch::run_task::{run_task, ProviderLaunches};
use crate::cluster::launch::task_definition::{self, TaskDefinitionRef};
use crate::cluster::{LaunchSpec, Work};
use crate::protocol::types::JobIdentifier;
use crate::secret::Secret;
use crate::settings::{check_compatible, managed_instances, ClusterProfile, ElasticProfile, LaunchType};

/// The server id a try task's tags carry.
pub const TRY_SERVER_ID: &str = "try";

/// The registration key a try agent gets: not a key, and said to be none.
const FAKE_REGISTER_KEY: &str = "not-a-key-ecs-elastic-agent-try";

/// The GoCD URL a try agent gets when the profile sets no `GoServerUrl`.
const NO_SERVER_URL: &str = "https://gocd.invalid/go";

/// Runs `try`; the class of how it ended (its exit status).
///
/// # Errors
/// Only when writing to `out` fails.
pub async fn run(args: &TryArgs, out: &mut dyn Write) -> io::Result<Class> {
    let mut report = Report { out };
    let mut run = Run { created: Created::default(), aws: None };
    // SIGINT or SIGTERM ends the run where it is; what it created is removed all the same.
    let ended = tokio::select! {
        ended = run.go(args, &mut report) => Some(ended),
        () = watch::interrupted() => None,
    };
    let ended = ended.unwrap_or_else(|| {
        let caveat = match run.created.task {
            Some(_) => "",
            None => " (a RunTask in flight may still start its task: look for the tag gocd:try=true)",
        };
        Err(Failed::new(
            Class::Interrupted,
            format!("interrupted{caveat}"),
            "nothing: try removes what it knows it created",
        ))
    });
    let leftovers = run.clean_up(args, &mut report).await?;
    let class = match ended {
        Ok(probed) if leftovers == 0 => {
            let said = match probed {
                Probed::Yes => "the agent task ran where agents run, reached what it probed, and everything try created is removed",
                Probed::No => "the agent task ran and everything try created is removed (the agent did not register: no GoCD server was probed)",
            };
            report.line("ok", said)?;
            Class::Ran
        }
        Ok(_) => Class::Leftover,
        Err(failed) => {
            report.fail(&failed)?;
            failed.class
        }
    };
    Ok(class)
}

/// Writes the report's lines.
struct Report<'a> {
    out: &'a mut dyn Write,
}

impl Report<'_> {
    fn line(&mut self, what: &str, text: impl std::fmt::Display) -> io::Result<()> {
        writeln!(self.out, "{what}: {}", one_line(&text.to_string()))?;
        self.out.flush()
    }

    fn fail(&mut self, failed: &Failed) -> io::Result<()> {
        let Failed { class, finding, fix } = failed;
        writeln!(
            self.out,
            "FAIL {}: {}; fix: {} (exit status {})",
            class.name(),
            one_line(finding),
            one_line(fix),
            class.status()
        )?;
        self.out.flush()
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// What this run created, to remove.
#[derive(Debug, Default)]
struct Created {
    /// The cluster and the task started.
    task: Option<(String, String)>,
    /// The task definition revision registered.
    task_definition: Option<String>,
}

struct Run {
    created: Created,
    aws: Option<Arc<AwsClients>>,
}

impl Run {
    /// The run up to a running task and, with something to probe, the probe's end (or the
    /// first failure).
    async fn go(&mut self, args: &TryArgs, r: &mut Report<'_>) -> Result<Probed, Failed> {
        let (cluster, elastic, properties) = profiles(args)?;
        if cluster.launch_type == LaunchType::Ec2 && cluster.capacity_providers.is_none() {
            return Err(Failed::new(
                Class::Profile,
                "LaunchType EC2: the agents run on the plugin's own instances, which only a running plugin starts",
                "try a Fargate or capacity-provider cluster profile; `ecs-elastic-agent doctor` checks an EC2 one",
            ));
        }
        let aws = clients(&cluster, args.server_id.as_deref()).await?;
        self.aws = Some(aws.clone());
        let Some(account) = aws.account_id.clone() else {
            return Err(Failed::new(
                Class::Credentials,
                "the account of the credentials could not be learnt (STS GetCallerIdentity failed)",
                "`ecs-elastic-agent doctor --cluster-profile ...` shows why the credentials do not work",
            ));
        };
        let key = identity::cluster_key(&account, &aws.region, &cluster.cluster_name, cluster.role_arn.as_deref());
        let who = Identity::new(key.clone(), TRY_SERVER_ID.to_string());
        r.line(
            "try",
            format!(
                "cluster {} in {} (account {account}), image {}; tags: gocd:server-id={TRY_SERVER_ID}, {TAG_TRY}=true",
                cluster.cluster_name, aws.region, elastic.image
            ),
        )
        .map_err(write_failed)?;
        let kinds = provider_kinds(&aws, &cluster, &elastic).await?;
        let td = self.task_definition(&aws, &who, &cluster, &elastic, kinds.as_ref(), r).await?;
        guardrails::check(&cluster, &td)
            .and_then(|()| guardrails::check_exec(&elastic, &td))
            .and_then(|()| kinds.as_ref().map_or(Ok(()), |k| guardrails::check_providers(k, &td)))
            .map_err(|e| {
                Failed::new(
                    Class::Profile,
                    e.to_string(),
                    "register a task definition that fits, or widen the cluster profile's allow-lists",
                )
            })?;
        let network = network(&aws, &cluster, &elastic).await?;
        let probe = Probe::of(args, &cluster)?;
        let cluster = Arc::new(cluster);
        let elastic = Arc::new(elastic);
        let work = Work {
            agent_id: identity::new_agent_id(&key, &try_job()),
            attempt: 1,
            job: try_job(),
            environment: None,
            elastic: elastic.clone(),
            task_definition: td,
            server_url: cluster.go_server_url.clone().unwrap_or_else(|| NO_SERVER_URL.to_string()),
            auto_register_key: Secret::new(FAKE_REGISTER_KEY.to_string()),
            settings: settings_fingerprint(&properties),
            traceparent: None,
        };
        let mut spec = LaunchSpec::for_identity(&who, cluster.clone(), work, Some(network));
        spec.tags.push((TAG_TRY.to_string(), "true".to_string()));
        match &probe {
            Some(p) => {
                spec.command_override = Some(probe::command());
                spec.extra_environment = probe::environment(p.server_url.as_deref().unwrap_or(""), &p.materials);
                r.line("probe", p.describe()).map_err(write_failed)?;
            }
            None => r
                .line(
                    "probe",
                    "none: the cluster profile sets no GoServerUrl, so nothing proves the agents reach GoCD; give --server-url URL (the URL agents use, ending in /go)",
                )
                .map_err(write_failed)?,
        }
        spec.fits_aws().map_err(|e| Failed::new(Class::Profile, e.to_string(), "change the profiles as it says"))?;
        match &probe {
            Some(_) => r.line("agent", format!("{} runs the probe in place of the agent", spec.work.agent_id)),
            None => r.line(
                "agent",
                format!("{} (it gets a fake registration key and will not register)", spec.work.agent_id),
            ),
        }
        .map_err(write_failed)?;
        let asked = SystemTime::now();
        let started = Instant::now();
        let launched = run_task(&aws, &ProviderLaunches::default(), &spec).await.map_err(|e| {
            let mut failed = class::of_aws(&e.error, &cluster, &elastic);
            if e.outcome_unknown {
                failed
                    .finding
                    .push_str(" (RunTask's answer was lost: a task may have started; look for the tag gocd:try=true)");
            }
            failed
        })?;
        let task = launched.task;
        self.created.task = Some((cluster.cluster_name.clone(), task.arn.clone()));
        r.line(
            "task",
            format!("{} accepted on {} after {}", task.arn, launched.capacity, watch::secs(started.elapsed())),
        )
        .map_err(write_failed)?;
        let timeout = Duration::from_secs(args.timeout.max(1));
        let container = spec.work.task_definition.agent_container.clone();
        let exits = probe.as_ref().map(|_| container.as_str());
        let watched =
            watch::Watched { aws: &aws, cluster: &cluster.cluster_name, arn: &task.arn, timeout, elastic: &elastic };
        let running = watch::until_running(&watched, asked, exits, r).await?;
        watch::phases(&running, asked, r).map_err(write_failed)?;
        pull::report(&aws, &cluster, &elastic, &running, r).await.map_err(write_failed)?;
        watch::logs(&cluster, &aws.region, &spec.work.task_definition, &running, r).map_err(write_failed)?;
        let Some(probe) = probe else { return Ok(Probed::No) };
        let status = watch::until_exited(&watched, asked, &running, &container, r).await?;
        let outcome = probe::Outcome::of_exit(status);
        let server = probe.server_url.as_deref().unwrap_or("(no server URL)");
        outcome.verdict(server, &probe.materials)?;
        r.line("probe", probe.reached()).map_err(write_failed)?;
        Ok(Probed::Yes)
    }

    /// A `TaskDefinitionArn` as given; else a revision of try's own family, registered now.
    async fn task_definition(
        &mut self,
        aws: &AwsClients,
        who: &Identity,
        cluster: &ClusterProfile,
        elastic: &ElasticProfile,
        kinds: Option<&ProviderKinds>,
        r: &mut Report<'_>,
    ) -> Result<TaskDefinitionRef, Failed> {
        if let Some(arn) = &elastic.task_definition_arn {
            let td = task_definition::describe_given(aws, arn, elastic.agent_container_name.as_deref())
                .await
                .map_err(|e| class::of_aws(&e, cluster, elastic))?;
            r.line("task definition", format!("{} (the elastic profile's: not removed)", td.arn))
                .map_err(write_failed)?;
            return Ok(td);
        }
        let family = try_family(&who.key, &task_definition::family(&who.key, cluster, elastic, &aws.region, kinds));
        let td = task_definition::register(aws, &family, cluster, kinds, elastic, &who.server_id, &who.key)
            .await
            .map_err(|e| class::of_aws(&e, cluster, elastic))?;
        self.created.task_definition = Some(td.arn.clone());
        r.line("task definition", format!("registered {}", td.arn)).map_err(write_failed)?;
        Ok(td)
    }

    /// Stops the task and removes the task definition; how many of them could not be removed.
    async fn clean_up(&mut self, args: &TryArgs, r: &mut Report<'_>) -> io::Result<usize> {
        let Some(aws) = self.aws.clone() else { return Ok(0) };
        let mut left = 0;
        if let Some((cluster, arn)) = self.created.task.take() {
            let timeout = Duration::from_secs(args.timeout.max(1));
            match watch::stop(&aws, &cluster, &arn, timeout).await {
                Ok(watch::Stop::Stopped(took)) => {
                    r.line("cleanup", format!("stopped task {arn} ({})", watch::secs(took)))?
                }
                Ok(watch::Stop::Stopping(took)) => r.line(
                    "cleanup",
                    format!(
                        "task {arn} is stopping (ECS took the StopTask; not STOPPED yet after {})",
                        watch::secs(took)
                    ),
                )?,
                Err(e) => {
                    left += 1;
                    r.line("LEFT", format!("task {arn} could not be stopped: {e}; stop it: aws ecs stop-task --cluster {cluster} --task {arn} --region {}", aws.region))?;
                }
            }
        }
        if let Some(arn) = self.created.task_definition.take() {
            match aws.deregister_task_definition(&arn).await {
                Err(e) => {
                    left += 1;
                    r.line("LEFT", format!("task definition {arn} could not be deregistered: {e}; deregister it: aws ecs deregister-task-definition --task-definition {arn} --region {}", aws.region))?;
                }
                // Deregistered, it is what the plugin leaves of its own revisions; deleting it
                // too needs ecs:DeleteTaskDefinitions, which the plugin's policy does not grant.
                Ok(()) => match aws.delete_task_definition(&arn).await {
                    Ok(()) => r.line("cleanup", format!("deregistered and deleted task definition {arn}"))?,
                    Err(e) => r.line(
                        "cleanup",
                        format!("deregistered task definition {arn} (INACTIVE: nothing runs it), not deleted: {e}"),
                    )?,
                },
            }
        }
        Ok(left)
    }
}

/// Whether a run that ended well probed anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probed {
    Yes,
    No,
}

/// What the task probes in place of running the agent: the server URL (`--server-url`, else
/// the profile's `GoServerUrl`) and the `--material` hosts.
#[derive(Debug, Clone)]
struct Probe {
    server_url: Option<String>,
    materials: Vec<probe::Material>,
}

impl Probe {
    /// `None` when there is nothing to probe (no URL and no material).
    fn of(args: &TryArgs, cluster: &ClusterProfile) -> Result<Option<Probe>, Failed> {
        let server_url = args.server_url.clone().or_else(|| cluster.go_server_url.clone());
        if let (Some(url), Some(_)) = (&server_url, &args.server_url) {
            crate::settings::check_go_server_url(url).map_err(|why| {
                Failed::new(
                    Class::Profile,
                    format!("--server-url {url}: {why}"),
                    "give the URL agents use, ending in /go (http://host:8153/go, or https://host/go behind a proxy)",
                )
            })?;
        }
        let materials =
            args.materials.iter().map(|m| probe::Material::parse(m)).collect::<Result<Vec<_>, _>>().map_err(|why| {
                Failed::new(
                    Class::Profile,
                    format!("--material: {why}"),
                    "name the material as its pipeline does, or as host:port",
                )
            })?;
        if server_url.is_none() && materials.is_empty() {
            return Ok(None);
        }
        Ok(Some(Probe { server_url, materials }))
    }

    fn hosts(&self) -> String {
        self.materials.iter().map(probe::Material::host_port).collect::<Vec<_>>().join(", ")
    }

    fn describe(&self) -> String {
        let server = self.server_url.as_ref().map(|u| format!("GoCD at {u}"));
        let materials = (!self.materials.is_empty()).then(|| format!("material host(s) {}", self.hosts()));
        let what: Vec<String> = server.into_iter().chain(materials).collect();
        format!("the task will reach {} from the profile's subnets and security groups, and exit", what.join(" and "))
    }

    fn reached(&self) -> String {
        let mut said = Vec::new();
        if let Some(url) = &self.server_url {
            said.push(format!("{url} answered as a GoCD server"));
        }
        if !self.materials.is_empty() {
            said.push(format!("material host(s) {} took a connection", self.hosts()));
        }
        format!("{}, from where the agents run", said.join("; "))
    }
}

/// A report line that could not be written ends the run (then cleanup still runs).
fn write_failed(e: io::Error) -> Failed {
    Failed::new(Class::Failed, format!("could not write the report: {e}"), "check stdout")
}

/// The profiles, valid and fitting each other; and the cluster profile's properties.
fn profiles(args: &TryArgs) -> Result<(ClusterProfile, ElasticProfile, crate::settings::Properties), Failed> {
    let fix = "correct the profile (`ecs-elastic-agent validate` lists the same problems)";
    let in_words = |problems: Vec<crate::settings::FieldError>| {
        problems.iter().map(|p| format!("{}: {}", p.key, p.message)).collect::<Vec<_>>().join("; ")
    };
    let path = args.cluster_profile.display();
    let loaded = load_cluster(&args.cluster_profile)
        .map_err(|why| Failed::new(Class::Profile, format!("{path}: {why}"), fix))?;
    let cluster = loaded.parsed.map_err(|p| Failed::new(Class::Profile, format!("{path}: {}", in_words(p)), fix))?;
    let path = args.elastic_profile.display();
    let elastic = load_elastic(&args.elastic_profile)
        .map_err(|why| Failed::new(Class::Profile, format!("{path}: {why}"), fix))?;
    let elastic = elastic.parsed.map_err(|p| Failed::new(Class::Profile, format!("{path}: {}", in_words(p)), fix))?;
    let misfit = check_compatible(&cluster, &elastic);
    // What AWS itself refuses for want of an execution role (awslogs or a private ECR image on
    // Fargate: RegisterTaskDefinition's "Fargate requires task definition to have execution
    // role ARN"), the plugin refuses first: its class is the execution role's, not the profile's.
    if misfit.iter().any(|p| p.key == "ExecutionRoleArn") {
        return Err(Failed::new(
            Class::ExecutionRole,
            format!("{path} does not fit the cluster profile, and AWS would refuse the launch: {}", in_words(misfit)),
            "set ExecutionRoleArn in the elastic profile to a role ECS tasks may assume, with the policy `ecs-elastic-agent iam-policy --document execution-role-policy` prints",
        ));
    }
    if !misfit.is_empty() {
        return Err(Failed::new(
            Class::Profile,
            format!("{path} does not fit the cluster profile: {}", in_words(misfit)),
            fix,
        ));
    }
    Ok((cluster, elastic, loaded.properties))
}

/// The plugin's clients for the profile (the external id from `--server-id` when the profile
/// has a `RoleArn` and no `ExternalId`).
async fn clients(cluster: &ClusterProfile, server_id: Option<&str>) -> Result<Arc<AwsClients>, Failed> {
    if cluster.role_arn.is_some() && cluster.external_id.is_none() && server_id.is_none() {
        return Err(Failed::new(
            Class::Credentials,
            "the profile has a RoleArn and no ExternalId: the plugin assumes it with gocd:server-id:<GoCD's server id>",
            "pass --server-id (Admin > Server Details in GoCD)",
        ));
    }
    Accounts::default()
        .clients_for(cluster, server_id.unwrap_or(TRY_SERVER_ID))
        .await
        .map_err(|e| Failed::new(Class::Credentials, e.to_string(), "set Region in the cluster profile, or AWS_REGION"))
}

/// The kinds of the strategy's providers, learnt as create-agent learns them, and the keys ECS
/// Managed Instances refuses.
async fn provider_kinds(
    aws: &AwsClients,
    cluster: &ClusterProfile,
    elastic: &ElasticProfile,
) -> Result<Option<ProviderKinds>, Failed> {
    let Some(strategy) = &cluster.capacity_providers else { return Ok(None) };
    let kinds = providers::learn(aws, &cluster.cluster_name, strategy)
        .await
        .map_err(|e| class::of_aws(&e, cluster, elastic))?;
    if let Some(provider) = kinds.managed_instances() {
        let problems = managed_instances::check(elastic, provider);
        if let Some(p) = problems.first() {
            return Err(Failed::new(
                Class::Profile,
                format!("{}: {}", p.key, p.message),
                "change the elastic profile for ECS Managed Instances",
            ));
        }
    }
    Ok(Some(kinds))
}

/// Subnets and groups as the engine resolves them: the elastic profile's, else the cluster
/// profile's, else the default VPC's.
async fn network(
    aws: &AwsClients,
    cluster: &ClusterProfile,
    elastic: &ElasticProfile,
) -> Result<crate::aws::network::Network, Failed> {
    let subnets = if elastic.subnet_ids.is_empty() { &cluster.subnet_ids } else { &elastic.subnet_ids };
    let groups =
        if elastic.security_group_ids.is_empty() { &cluster.security_group_ids } else { &elastic.security_group_ids };
    crate::aws::network::resolve(aws, subnets, groups).await.map_err(|e| class::of_aws(&e, cluster, elastic))
}

/// try's family beside the engine's `gocd-<key>-<hash>`: `gocd-<key>-try-<hash>`, inside the
/// `gocd-<key>-*` task definitions the plugin's policy allows (`iam-policy`); the engine's sweep
/// leaves its revisions alone (their server id tag is not its own).
fn try_family(key: &str, engine_family: &str) -> String {
    let prefix = format!("gocd-{key}-");
    match engine_family.strip_prefix(&prefix) {
        Some(hash) => format!("{prefix}try-{hash}"),
        None => format!("{engine_family}-try"),
    }
}

/// The job a try task's tags name: none of GoCD's.
fn try_job() -> JobIdentifier {
    JobIdentifier {
        pipeline_name: "ecs-elastic-agent-try".into(),
        pipeline_label: "try".into(),
        pipeline_counter: 0,
        stage_name: "try".into(),
        stage_counter: "0".into(),
        job_name: "try".into(),
        job_id: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> crate::settings::Properties {
        pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect()
    }

    fn cluster() -> ClusterProfile {
        ClusterProfile::parse(&props(&[("ClusterName", "ci")])).expect("valid")
    }

    fn elastic() -> ElasticProfile {
        ElasticProfile::parse(&props(&[("Image", "gocd/agent:v1")])).expect("valid")
    }

    #[test]
    fn try_has_a_family_of_its_own() {
        let engine = task_definition::family("0123456789ab", &cluster(), &elastic(), "us-east-1", None);
        let ours = try_family("0123456789ab", &engine);
        assert_eq!(ours, engine.replace("gocd-0123456789ab-", "gocd-0123456789ab-try-"));
        assert!(ours.starts_with("gocd-0123456789ab-try-"), "within the policy's gocd-<key>-*: {ours}");
    }
}
