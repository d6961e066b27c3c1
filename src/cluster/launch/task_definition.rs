//! Task definitions: one family per (cluster profile, elastic profile), registered once and
//! reused — also after a restart, when DescribeTaskDefinition finds the family again. Nothing
//! per agent goes here: per-agent data travels as RunTask overrides (`docs/design.md`, "What the
//! plugin is").

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::sync::OnceCell;

pub use crate::aws::task_definitions::NetworkMode;
use crate::aws::task_definitions::RegisterRequest;
use crate::aws::{AwsClients, AwsError};
use crate::cluster::base::identity::{short_hash, Identity, TAG_CLUSTER_PROFILE, TAG_SERVER_ID};
use crate::cluster::base::locks::{Mutex, MutexGuard};
use crate::cluster::launch::providers::{Compatibility, ProviderKinds};
use crate::settings::{ClusterProfile, ElasticProfile, LaunchType};

/// The name of the agent container in task definitions we register.
pub use crate::settings::AGENT_CONTAINER;

/// The task definitions an engine launches with, by family: each registered (or looked up)
/// once, then reused. A failed lookup or registration is not kept: the next launch tries again.
#[derive(Debug, Default)]
pub struct TaskDefinitions {
    by_family: Mutex<HashMap<String, Arc<OnceCell<TaskDefinitionRef>>>>,
}

/// What a launch needs of a task definition: its family and what goes into it.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// The family, computed once with the request's snapshot ([`family`]).
    pub family: &'a str,
    /// The cluster profile.
    pub profile: &'a ClusterProfile,
    /// The strategy's providers by kind, when known.
    pub kinds: Option<&'a ProviderKinds>,
    /// The elastic profile: a `TaskDefinitionArn` it names is described, not registered.
    pub elastic: &'a ElasticProfile,
}

impl TaskDefinitions {
    /// The family's task definition: the one the elastic profile names, else ours, found or
    /// registered on first use.
    ///
    /// # Errors
    /// The failed lookup or registration.
    pub async fn get(
        &self,
        aws: &AwsClients,
        wanted: Wanted<'_>,
        us: &Identity,
    ) -> Result<TaskDefinitionRef, AwsError> {
        let cell = self
            .by_family
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(wanted.family.to_string())
            .or_default()
            .clone();
        let td = cell
            .get_or_try_init(|| async {
                match &wanted.elastic.task_definition_arn {
                    Some(arn) => describe_given(aws, arn, wanted.elastic.agent_container_name.as_deref()).await,
                    None => {
                        let Wanted { family, profile, kinds, elastic } = wanted;
                        find_or_register(aws, family, profile, kinds, elastic, &us.server_id, &us.key).await
                    }
                }
            })
            .await?;
        Ok(td.clone())
    }

    /// Forgets a family whose revision was deregistered: its next launch looks it up again.
    pub fn forget(&self, family: &str) {
        self.by_family.lock().unwrap_or_else(PoisonError::into_inner).remove(family);
    }
}

/// How often a cluster profile's families are looked at.
pub const SWEEP_EVERY: Duration = Duration::from_secs(3600);
/// How long an elastic profile seen keeps its family.
pub const SEEN_FOR: Duration = Duration::from_secs(3600);

/// What the task-definition sweep (`cleanup/task_definitions.rs`) remembers between passes:
/// the families in use lately, and when it may run next.
#[derive(Debug, Default)]
pub struct SweepState {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// No pass before this (start plus the grace).
    not_before: Option<SystemTime>,
    last_pass: Option<SystemTime>,
    seen: HashMap<String, SystemTime>,
}

impl SweepState {
    /// The state of an engine started at `started`, whose first pass waits `grace`.
    pub fn new(started: SystemTime, grace: Duration) -> Self {
        let inner = Inner { not_before: Some(started + grace), ..Inner::default() };
        SweepState { inner: Mutex::new(inner) }
    }

    /// `family` is in use now (a launch, or an elastic profile GoCD sent).
    pub fn saw(&self, family: &str, now: SystemTime) {
        self.lock().seen.insert(family.to_string(), now);
    }

    /// Families seen within [`SEEN_FOR`] of `now` (older ones are forgotten).
    pub(crate) fn recent(&self, now: SystemTime) -> BTreeSet<String> {
        let mut inner = self.lock();
        inner.seen.retain(|_, t| now.duration_since(*t).unwrap_or_default() < SEEN_FOR);
        inner.seen.keys().cloned().collect()
    }

    /// Claims the pass if one is due: once an hour, and the first not before the grace after
    /// start (`serve --task-definition-sweep-after`, an hour by default) — a process that just
    /// started has seen no elastic profile yet, and a family is never deregistered only because
    /// of that (its next job would register it again, and RegisterTaskDefinition allows one call
    /// a second per account).
    pub fn claim(&self, now: SystemTime) -> bool {
        let mut inner = self.lock();
        if inner.not_before.is_some_and(|t| now < t) {
            return false;
        }
        let due = inner.last_pass.is_none_or(|t| now.duration_since(t).unwrap_or_default() >= SWEEP_EVERY);
        if due {
            inner.last_pass = Some(now);
        }
        due
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The task definition a launch uses and which of its containers is the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDefinitionRef {
    /// ARN (or family:revision).
    pub arn: String,
    /// The GoCD agent container.
    pub agent_container: String,
    /// What it runs, for a task definition an elastic profile names (`TaskDefinitionArn`): the
    /// allow-lists check it (`guardrails`). `None` for ours, built from the checked profile.
    pub given: Option<std::sync::Arc<Contents>>,
}

pub use crate::aws::task_definitions::Contents;

impl Contents {
    /// What it may run on: what it requires and what ECS validated it for; EC2 when it names
    /// neither (ECS's default).
    pub fn runs_on(&self) -> Vec<Compatibility> {
        let mut out: Vec<Compatibility> = self.requires_compatibilities.clone();
        out.extend(self.compatibilities.iter().filter(|c| !self.requires_compatibilities.contains(c)).cloned());
        if out.is_empty() {
            out.push(Compatibility::Ec2);
        }
        out
    }
}

/// What the task definitions must be valid for: EC2 with `LaunchType` EC2; Fargate; with a
/// `CapacityProviderStrategy`, what its providers' kinds need (EC2 for an Auto Scaling group's,
/// MANAGED_INSTANCES for ECS Managed Instances), or Fargate and EC2 while the kinds are unknown
/// and a provider may be an Auto Scaling group's.
fn compatibilities(cluster: &ClusterProfile, kinds: Option<&ProviderKinds>) -> Vec<Compatibility> {
    match (&cluster.capacity_providers, cluster.launch_type) {
        (Some(_), _) if kinds.is_some() => kinds.map(ProviderKinds::compatibilities).unwrap_or_default(),
        (Some(strategy), _) if strategy.may_use_ec2() => vec![Compatibility::Fargate, Compatibility::Ec2],
        (_, LaunchType::Ec2) => vec![Compatibility::Ec2],
        _ => vec![Compatibility::Fargate],
    }
}

/// The family for this pair of profiles: ours, and different whenever anything that goes into
/// the task definition differs (the compatibilities too: `fargate`, `ec2`, `fargate+ec2`,
/// `fargate+managed_instances`, ...).
pub fn family(
    cluster_key: &str,
    cluster: &ClusterProfile,
    elastic: &ElasticProfile,
    region: &str,
    kinds: Option<&ProviderKinds>,
) -> String {
    let compat: Vec<String> = compatibilities(cluster, kinds).iter().map(|c| c.as_str().to_ascii_lowercase()).collect();
    let compat = compat.join("+");
    // The environment every agent of the pair shares lives in the task definition (RunTask's
    // overrides are limited to 8,192 characters), so a change of it is a new family.
    let environment: Vec<String> =
        shared_environment(cluster, elastic).iter().map(|(k, v)| format!("{k}={v}")).collect();
    let environment = environment.join("\n");
    let hash = short_hash(&[&elastic.hash, &compat, cluster.log_group.as_deref().unwrap_or(""), region, &environment]);
    format!("gocd-{cluster_key}-{hash}")
}

/// The environment every agent of a (cluster profile, elastic profile) pair gets: the cluster
/// profile's variables, then the elastic profile's, which win on a clash; in the order first set.
pub fn shared_environment(cluster: &ClusterProfile, elastic: &ElasticProfile) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, v) in cluster.environment_variables.iter().chain(elastic.environment.iter()) {
        match env.iter_mut().find(|(name, _)| name == k) {
            Some(slot) => slot.1 = v.clone(),
            None => env.push((k.clone(), v.clone())),
        }
    }
    env
}

/// Finds the family's active revision, or registers it.
///
/// # Errors
/// The failed DescribeTaskDefinition or RegisterTaskDefinition call.
pub async fn find_or_register(
    aws: &AwsClients,
    family: &str,
    cluster: &ClusterProfile,
    kinds: Option<&ProviderKinds>,
    elastic: &ElasticProfile,
    server_id: &str,
    cluster_key: &str,
) -> Result<TaskDefinitionRef, AwsError> {
    // A family not registered yet is the usual answer for a new elastic profile, not a failure.
    match aws.describe_family(family).await {
        // Only a revision this server registered: another GoCD server on the same cluster has
        // the same family names, and may deregister its revisions when it stops using them.
        Ok(Some(revision))
            if revision.active && revision.tags.get(TAG_SERVER_ID).map(String::as_str) == Some(server_id) =>
        {
            tracing::info!(family, "reusing task definition registered before");
            return Ok(TaskDefinitionRef {
                arn: revision.arn.unwrap_or_else(|| family.to_string()),
                agent_container: AGENT_CONTAINER.to_string(),
                given: None,
            });
        }
        Ok(_) => {}
        Err(e) if e.transient() => return Err(e),
        Err(e) => tracing::debug!(family, error = %e, "no task definition yet"),
    }
    register(aws, family, cluster, kinds, elastic, server_id, cluster_key).await
}

/// Looks up a task definition the elastic profile names, its agent container, and what it runs
/// (every image, its roles, secrets, privileged containers) for the allow-lists.
///
/// # Errors
/// The failed DescribeTaskDefinition call, or a task definition without that container.
pub async fn describe_given(
    aws: &AwsClients,
    arn: &str,
    container: Option<&str>,
) -> Result<TaskDefinitionRef, AwsError> {
    let td = aws
        .describe_task_definition(arn)
        .await?
        .ok_or_else(|| AwsError::in_answer("DescribeTaskDefinition", format!("task definition {arn} was not found")))?;
    let names: Vec<&str> = td.containers.iter().map(String::as_str).collect();
    let agent_container = match container {
        Some(wanted) if names.contains(&wanted) => wanted.to_string(),
        Some(wanted) => {
            return Err(AwsError::in_answer(
                "DescribeTaskDefinition",
                format!(
                "task definition {arn} has no container named {wanted:?} (it has {names:?}): fix AgentContainerName"
            ),
            ))
        }
        None => names.first().map(|n| n.to_string()).ok_or_else(|| {
            AwsError::in_answer("DescribeTaskDefinition", format!("task definition {arn} has no containers"))
        })?,
    };
    Ok(TaskDefinitionRef {
        arn: td.arn.unwrap_or_else(|| arn.to_string()),
        agent_container,
        given: Some(std::sync::Arc::new(td.contents)),
    })
}

/// Registers a new revision of `family` for the pair of profiles, tagged with `server_id` and
/// `cluster_key` (`try` registers its own each time, and removes it after).
///
/// # Errors
/// The failed RegisterTaskDefinition call.
pub async fn register(
    aws: &AwsClients,
    family: &str,
    cluster: &ClusterProfile,
    kinds: Option<&ProviderKinds>,
    elastic: &ElasticProfile,
    server_id: &str,
    cluster_key: &str,
) -> Result<TaskDefinitionRef, AwsError> {
    let fargate = cluster.launch_type != LaunchType::Ec2;
    let request = RegisterRequest {
        family,
        network_mode: network_mode(cluster, elastic),
        // An Auto Scaling group's capacity provider (or a cluster default that may name one)
        // places the task on EC2, ECS Managed Instances on its own instances: awsvpc task
        // definitions valid for each.
        compatibilities: compatibilities(cluster, kinds),
        // Fargate needs task-level sizes; on EC2 the container's cpu, memory and
        // memoryReservation are what ECS reserves on the instance (a task-level memory would
        // reserve the hard limit).
        task_size: fargate.then_some((elastic.cpu, elastic.memory)),
        // What the sidecars leave (validation keeps it positive).
        agent_size: elastic.agent_share().unwrap_or((elastic.cpu, elastic.memory)),
        environment: shared_environment(cluster, elastic),
        ephemeral_storage_gib: elastic.ephemeral_storage_gib.filter(|_| fargate),
        host_docker_socket: elastic.mount_docker_socket && !fargate,
        tags: vec![
            (TAG_SERVER_ID.to_string(), server_id.to_string()),
            (TAG_CLUSTER_PROFILE.to_string(), cluster_key.to_string()),
        ],
        cluster,
        elastic,
        region: &aws.region,
    };
    let arn = aws.register_task_definition(&request).await?;
    tracing::info!(family, arn, "registered task definition");
    Ok(TaskDefinitionRef { arn, agent_container: AGENT_CONTAINER.to_string(), given: None })
}

/// Fargate and capacity providers: `awsvpc`. Our EC2 instances: Linux tasks share the
/// instance's network (`bridge`: no ENI per task, no awsvpc limits); Windows tasks get ECS's
/// `<default>` (NAT), which the API names by leaving the mode out: ECS refuses `bridge` for
/// Windows containers.
fn network_mode(cluster: &ClusterProfile, elastic: &ElasticProfile) -> Option<NetworkMode> {
    if cluster.launch_type != LaunchType::Ec2 {
        Some(NetworkMode::Awsvpc)
    } else if elastic.operating_system_family.starts_with("WINDOWS") {
        None
    } else {
        Some(NetworkMode::Bridge)
    }
}

#[cfg(test)]
mod compat_tests {
    use super::*;
    use crate::settings::Properties;

    fn cluster(extra: &[(&str, &str)]) -> ClusterProfile {
        let mut p: Properties =
            [("ClusterName", "ci")].iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect();
        p.extend(extra.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))));
        ClusterProfile::parse(&p).expect("valid")
    }

    #[test]
    fn task_definitions_suit_ec2_too_when_a_provider_may_be_an_auto_scaling_group() {
        assert_eq!(compatibilities(&cluster(&[]), None), [Compatibility::Fargate]);
        let fargates = cluster(&[("CapacityProviderStrategy", "FARGATE\nFARGATE_SPOT:2")]);
        assert_eq!(compatibilities(&fargates, None), [Compatibility::Fargate]);
        let asg = cluster(&[("CapacityProviderStrategy", "FARGATE\nmy-asg")]);
        assert_eq!(compatibilities(&asg, None), [Compatibility::Fargate, Compatibility::Ec2]);
        let default = cluster(&[("CapacityProviderStrategy", "default")]);
        assert_eq!(compatibilities(&default, None), [Compatibility::Fargate, Compatibility::Ec2]);
    }

    #[test]
    fn windows_tasks_on_our_instances_get_the_default_network_mode_not_bridge() {
        let elastic = |os: &str| {
            let props: crate::settings::Properties = [("Image", "gocd/agent"), ("OperatingSystemFamily", os)]
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect();
            ElasticProfile::parse(&props).expect("valid")
        };
        let ec2 = cluster(&[
            ("LaunchType", "EC2"),
            ("Ec2InstanceType", "c5.xlarge"),
            ("Ec2AmiId", "ami-0abcdef1234567890"),
            ("Ec2InstanceProfile", "ecsInstanceRole"),
        ]);
        let (linux, windows) = (elastic("LINUX"), elastic("WINDOWS_SERVER_2022_CORE"));
        assert_eq!(network_mode(&ec2, &linux), Some(NetworkMode::Bridge));
        assert_eq!(network_mode(&ec2, &windows), None, "ECS's <default> (NAT): the mode left out");
        assert_eq!(network_mode(&cluster(&[]), &windows), Some(NetworkMode::Awsvpc), "Fargate");
        let asg = cluster(&[("CapacityProviderStrategy", "my-asg")]);
        assert_eq!(network_mode(&asg, &linux), Some(NetworkMode::Awsvpc));
    }

    #[test]
    fn managed_instances_get_their_compatibility_and_their_own_family() {
        use crate::cluster::launch::providers::{KnownProvider, ProviderKind, ResourceStatus};
        let profile = cluster(&[("CapacityProviderStrategy", "ci-mi")]);
        let kind = |kind| ProviderKinds {
            providers: vec![KnownProvider { name: "ci-mi".into(), kind, status: ResourceStatus::Active }],
        };
        let (mi, asg) = (kind(ProviderKind::ManagedInstances), kind(ProviderKind::AutoScaling));
        assert_eq!(compatibilities(&profile, Some(&mi)), [Compatibility::Fargate, Compatibility::ManagedInstances]);
        assert_eq!(compatibilities(&profile, Some(&asg)), [Compatibility::Fargate, Compatibility::Ec2]);
        let mut props: crate::settings::Properties = Default::default();
        props.insert("Image".into(), Some("gocd/agent".into()));
        let elastic = ElasticProfile::parse(&props).expect("valid");
        let family = |kinds| family("k", &profile, &elastic, "us-east-1", kinds);
        assert_ne!(family(Some(&mi)), family(Some(&asg)), "other compatibilities, another family");
        assert_eq!(family(Some(&asg)), family(None), "an ASG's family is the one used before kinds were learned");
    }
}

#[cfg(test)]
mod sweep_tests {
    use super::*;

    #[test]
    fn a_pass_is_due_once_an_hour_and_seen_families_expire() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let state = SweepState::new(t0 - SEEN_FOR, SEEN_FOR);
        assert!(!state.claim(t0 - Duration::from_secs(1)), "not in the first hour after a start");
        assert!(state.claim(t0));
        assert!(!state.claim(t0 + Duration::from_secs(60)));
        assert!(state.claim(t0 + SWEEP_EVERY));
        state.saw("gocd-k-a", t0);
        state.saw("gocd-k-b", t0 + Duration::from_secs(1800));
        let recent = state.recent(t0 + SEEN_FOR + Duration::from_secs(1));
        assert_eq!(recent.into_iter().collect::<Vec<_>>(), vec!["gocd-k-b".to_string()]);
    }
}
