//! RunTask: one task for one agent, with the per-agent data as container overrides, the tags
//! of `docs/protocol.md` "What a task carries", a client token from the job id and attempt, awsvpc
//! networking, and `FARGATE_SPOT` through a capacity provider strategy that falls back to `FARGATE`
//! when spot capacity is refused. With `CapacityProviderStrategy` the task goes through one
//! provider of the strategy, chosen so that the profile's launches follow its base and weights (ECS
//! applies them within one RunTask call only, and each call starts one task), or through the
//! cluster's default strategy. Returns as soon as ECS accepted the task.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, PoisonError};

use super::snapshot::{override_environment, LaunchSpec};
use crate::aws::budget::Category;
use crate::aws::ecs::{AwsVpc, Launch, LaunchRequest, PlacementRule, RunTaskRequest, Through};
use crate::aws::network::{self, Network};
use crate::aws::{AwsClients, AwsError, Failure};
use crate::cluster::agents::tasks::{Capacity, TaskView};
use crate::cluster::base::locks::Mutex;
use crate::settings::capacity_providers::next_provider;
use crate::settings::{ClusterProfile, ElasticProfile, LaunchType, ProviderStrategy};

/// How many tasks were launched through each capacity provider, by name: the next launch goes
/// where the strategy's base and weights say. A restarted process starts from the running tasks
/// it adopts ([`ProviderLaunches::adopt`]).
#[derive(Debug, Default)]
pub struct ProviderLaunches(Mutex<BTreeMap<String, u64>>);

impl ProviderLaunches {
    /// Chooses the provider for one more task of `strategy` and counts it.
    fn take(&self, strategy: &[crate::settings::ProviderShare]) -> String {
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let launched: Vec<u64> = strategy.iter().map(|s| counts.get(&s.name).copied().unwrap_or(0)).collect();
        let name = strategy[next_provider(strategy, &launched)].name.clone();
        *counts.entry(name.clone()).or_insert(0) += 1;
        name
    }

    /// A launch through `name` outside the strategy's turn (a fallback): it counts.
    fn count(&self, name: &str) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner).entry(name.to_string()).or_insert(0) += 1;
    }

    /// A launch through `name` failed: it does not count.
    fn give_back(&self, name: &str) {
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = counts.get_mut(name) {
            *n = n.saturating_sub(1);
        }
    }

    /// A new process adopted these running tasks (each task's `capacityProviderName`, or its
    /// launch type): they count as launches through their providers, so the next launches
    /// continue the strategy's split rather than start its base again.
    pub fn adopt<'t>(&self, providers: impl IntoIterator<Item = &'t str>) {
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for name in providers.into_iter().filter(|n| !n.is_empty()) {
            *counts.entry(name.to_string()).or_insert(0) += 1;
        }
    }

    /// Launches so far, by provider.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// (subnets, security groups) as configured: what a resolved network is kept under.
type NetworkKey = (Vec<String>, Vec<String>);

/// The subnets and security groups an engine's launches use, each configured set resolved
/// once (a failed lookup is not kept: the next launch tries again).
#[derive(Debug, Default)]
pub struct Networks {
    /// By (subnets, security groups) as configured.
    resolved: Mutex<HashMap<NetworkKey, Arc<tokio::sync::OnceCell<Network>>>>,
}

impl Networks {
    /// Subnets and groups for a launch: the elastic profile's, else the cluster profile's,
    /// else the default VPC's.
    ///
    /// # Errors
    /// The failed EC2 lookups.
    pub async fn resolve(
        &self,
        aws: &AwsClients,
        profile: &ClusterProfile,
        elastic: &ElasticProfile,
    ) -> Result<Network, AwsError> {
        let pick =
            |own: &Vec<String>, fallback: &Vec<String>| if own.is_empty() { fallback.clone() } else { own.clone() };
        let subnets = pick(&elastic.subnet_ids, &profile.subnet_ids);
        let groups = pick(&elastic.security_group_ids, &profile.security_group_ids);
        let cell = self
            .resolved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((subnets.clone(), groups.clone()))
            .or_default()
            .clone();
        let net = cell.get_or_try_init(|| network::resolve(aws, &subnets, &groups)).await?;
        Ok(net.clone())
    }
}

/// A task ECS accepted.
#[derive(Debug, Clone)]
pub struct Launched {
    /// ECS's description of it.
    pub task: TaskView,
    /// Where it runs.
    pub capacity: Capacity,
    /// Spot was refused and the task runs on FARGATE instead.
    pub fell_back_from_spot: bool,
}

/// A launch that failed.
#[derive(Debug)]
pub struct LaunchError {
    /// Why.
    pub error: AwsError,
    /// A RunTask whose answer was lost may have started the task, and we could not look: the
    /// agent must keep its slot (and its job) until a refresh tells whether the task exists.
    pub outcome_unknown: bool,
}

impl LaunchError {
    fn known(error: AwsError) -> Self {
        LaunchError { error, outcome_unknown: false }
    }
}

/// Starts the task.
///
/// # Errors
/// The failed RunTask call, or its `failures` when ECS started nothing.
pub async fn run_task(
    aws: &AwsClients,
    launches: &ProviderLaunches,
    spec: &LaunchSpec,
) -> Result<Launched, LaunchError> {
    match &spec.profile.capacity_providers {
        Some(ProviderStrategy::ClusterDefault) => {
            let task = run_once(aws, spec, Capacity::Provider, "", None).await?;
            let capacity = Capacity::from_ecs(&task.capacity).unwrap_or(Capacity::Provider);
            return Ok(Launched { task, capacity, fell_back_from_spot: false });
        }
        Some(ProviderStrategy::Providers(shares)) => {
            let name = launches.take(shares);
            let capacity = Capacity::from_ecs(&name).unwrap_or(Capacity::Provider);
            let refused = match run_once(aws, spec, capacity, "", Some(&name)).await {
                Ok(task) => return Ok(Launched { task, capacity, fell_back_from_spot: false }),
                Err(e) => {
                    launches.give_back(&name);
                    e
                }
            };
            // FARGATE_SPOT refused for capacity: the first other provider listed that is not
            // Spot takes the task, weight 0 or not (`FARGATE_SPOT:1` + `FARGATE:0` reads "Spot,
            // on-demand when Spot is short").
            let fallback = shares.iter().find(|s| s.name != name && s.name != "FARGATE_SPOT");
            let Some(other) = fallback
                .filter(|_| name == "FARGATE_SPOT" && !refused.outcome_unknown && is_capacity_refusal(&refused.error))
            else {
                return Err(refused);
            };
            tracing::warn!(agent_id = %spec.work.agent_id, reason = %refused.error.detail, provider = %other.name, "FARGATE_SPOT refused; launching through the next provider of the strategy");
            let capacity = Capacity::from_ecs(&other.name).unwrap_or(Capacity::Provider);
            let task = run_once(aws, spec, capacity, "-od", Some(&other.name)).await?;
            launches.count(&other.name);
            return Ok(Launched { task, capacity, fell_back_from_spot: true });
        }
        None => {}
    }
    match spec.profile.launch_type {
        LaunchType::FargateSpot => run_spot(aws, spec).await,
        LaunchType::Fargate => {
            let task = run_once(aws, spec, Capacity::Fargate, "", None).await?;
            Ok(Launched { task, capacity: Capacity::Fargate, fell_back_from_spot: false })
        }
        LaunchType::Ec2 => {
            let task = run_once(aws, spec, Capacity::Ec2, "", None).await?;
            Ok(Launched { task, capacity: Capacity::Ec2, fell_back_from_spot: false })
        }
    }
}

/// Through the `FARGATE_SPOT` capacity provider, on `FARGATE` when Spot capacity is refused.
async fn run_spot(aws: &AwsClients, spec: &LaunchSpec) -> Result<Launched, LaunchError> {
    match run_once(aws, spec, Capacity::FargateSpot, "", None).await {
        Ok(task) => Ok(Launched { task, capacity: Capacity::FargateSpot, fell_back_from_spot: false }),
        Err(e) if !e.outcome_unknown && is_capacity_refusal(&e.error) => {
            tracing::warn!(agent_id = %spec.work.agent_id, reason = %e.error.detail, "FARGATE_SPOT refused; launching on FARGATE");
            let task = run_once(aws, spec, Capacity::Fargate, "-od", None).await?;
            Ok(Launched { task, capacity: Capacity::Fargate, fell_back_from_spot: true })
        }
        Err(e) => Err(e),
    }
}

/// Where one agent's task goes on a Fargate cluster profile, beside what the profile says for
/// every agent ([`route`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// As the cluster profile says: its `LaunchType`, or its `CapacityProviderStrategy`.
    AsProfile,
    /// A warm agent where `WarmLaunchType` FARGATE says: on-demand.
    WarmOnDemand,
    /// A warm agent where `WarmLaunchType` FARGATE_SPOT says: through the `FARGATE_SPOT`
    /// provider (on `FARGATE` when Spot capacity is refused).
    WarmSpot,
    /// Spot interrupted the job's previous agent: its rerun runs on `FARGATE`, on-demand.
    Rerun,
}

/// Where the task of one agent goes: `warm` when it starts as a warm agent (no job of its own;
/// a job it is later given runs where it runs), `interrupted` when Spot interrupted its job's
/// previous agent. `WarmLaunchType` applies to warm agents on `LaunchType` FARGATE and
/// FARGATE_SPOT only (validation refuses it elsewhere); a job rerun after an interruption goes
/// on-demand wherever its agents can run on Spot, the profile's or its warm agents'.
pub fn route(
    profile: &crate::settings::ClusterProfile,
    warm_launch: Option<LaunchType>,
    warm: bool,
    interrupted: bool,
) -> Route {
    if profile.capacity_providers.is_some() || !profile.launch_type.is_fargate() {
        return Route::AsProfile;
    }
    match (warm, warm_launch) {
        (true, Some(LaunchType::FargateSpot)) => return Route::WarmSpot,
        (true, Some(_)) => return Route::WarmOnDemand,
        _ => {}
    }
    let spot_somewhere = profile.launch_type == LaunchType::FargateSpot || warm_launch == Some(LaunchType::FargateSpot);
    if interrupted && spot_somewhere {
        Route::Rerun
    } else {
        Route::AsProfile
    }
}

/// Starts the task where `route` says ([`run_task`] for [`Route::AsProfile`]).
///
/// # Errors
/// As [`run_task`].
pub async fn run_task_routed(
    aws: &AwsClients,
    launches: &ProviderLaunches,
    spec: &LaunchSpec,
    route: Route,
) -> Result<Launched, LaunchError> {
    match route {
        Route::AsProfile => run_task(aws, launches, spec).await,
        Route::WarmSpot => run_spot(aws, spec).await,
        Route::WarmOnDemand | Route::Rerun => run_task_on_demand(aws, spec).await,
    }
}

/// Starts the task on FARGATE (on-demand) whatever the profile's launch type: Spot interrupted
/// the job's previous agent, and its rerun must not land on Spot again.
///
/// # Errors
/// As [`run_task`].
pub async fn run_task_on_demand(aws: &AwsClients, spec: &LaunchSpec) -> Result<Launched, LaunchError> {
    let task = run_once(aws, spec, Capacity::Fargate, "-od", None).await?;
    Ok(Launched { task, capacity: Capacity::Fargate, fell_back_from_spot: false })
}

/// Starts the task on one EC2 container instance the plugin chose (StartTask, with the same
/// `startedBy`, tags and overrides as RunTask; `spec.network` is unused: EC2 tasks use bridge
/// networking). `Ok(None)` when ECS started nothing (no room after all): the work waits on.
/// StartTask takes no client token, so where an answer was lost the agent's task is looked for
/// before trying again, as for RunTask.
///
/// # Errors
/// The failed StartTask call (or the failed look for its task after a lost answer).
pub async fn start_task(
    aws: &AwsClients,
    spec: &LaunchSpec,
    container_instance: &str,
) -> Result<Option<TaskView>, AwsError> {
    let request = launch_request(spec);
    let mut attempt = 0;
    let answer = loop {
        attempt += 1;
        match aws.start_task_attempt(&request, container_instance, attempt).await {
            Ok(answer) => break answer,
            Err(e) if e.failure == Failure::Throttled && attempt < crate::aws::calls::MAX_ATTEMPTS => {
                aws.calls.back_off("StartTask", attempt, &e).await
            }
            // The answer was lost: ECS may have started the task.
            Err(e) if e.failure == Failure::Transient && attempt < crate::aws::calls::MAX_ATTEMPTS => {
                if let Some(task) = find_started(aws, spec).await? {
                    tracing::info!(task = %task.arn, "StartTask's answer was lost, but the task started: using it");
                    return Ok(Some(task));
                }
                aws.calls.back_off("StartTask", attempt, &e).await;
            }
            Err(e) => return Err(aws.calls.give_up("StartTask", attempt, e)),
        }
    };
    match answer {
        Launch::Started(task) => Ok(Some(*task)),
        Launch::NotPlaced(why) => {
            tracing::warn!(agent_id = %spec.work.agent_id, reason = %why.detail, "StartTask started nothing");
            Ok(None)
        }
    }
}

fn is_capacity_refusal(e: &AwsError) -> bool {
    e.failure == Failure::NoCapacity
}

/// One RunTask on `capacity`; `provider` names the capacity provider when the profile has a
/// `CapacityProviderStrategy` (then a strategy of that one provider is sent, never a launch
/// type; with neither, the cluster's default strategy applies).
async fn run_once(
    aws: &AwsClients,
    spec: &LaunchSpec,
    capacity: Capacity,
    token_suffix: &str,
    provider: Option<&str>,
) -> Result<TaskView, LaunchError> {
    let Some(net) = &spec.network else {
        let internal = "a Fargate launch without awsvpc networking (an internal error)";
        return Err(LaunchError::known(AwsError::in_answer("RunTask", internal)));
    };
    let elastic = &spec.work.elastic;
    let rule = |kind: &String, value: &Option<String>| PlacementRule { kind: kind.clone(), value: value.clone() };
    let request = RunTaskRequest {
        launch: launch_request(spec),
        client_token: format!("{}{token_suffix}", spec.client_token),
        network: AwsVpc {
            subnets: net.subnets.clone(),
            security_groups: net.security_groups.clone(),
            assign_public_ip: spec.profile.assign_public_ip,
        },
        // `PlatformVersion` (Fargate only; validation refuses it for EC2 cluster profiles).
        platform_version: if matches!(capacity, Capacity::Fargate | Capacity::FargateSpot) {
            elastic.platform_version.clone()
        } else {
            None
        },
        // Placement (validated to come only with a strategy that may place on EC2 instances).
        placement_strategy: elastic.placement_strategy.iter().map(|s| rule(&s.kind, &s.field)).collect(),
        placement_constraints: elastic.placement_constraints.iter().map(|c| rule(&c.kind, &c.expression)).collect(),
        through: match (provider, capacity) {
            (Some(name), _) => Through::Provider(name.to_string()),
            (None, Capacity::Fargate) => Through::Fargate,
            (None, Capacity::Ec2) => Through::Ec2,
            (None, Capacity::FargateSpot) => Through::Provider("FARGATE_SPOT".to_string()),
            // The cluster's default capacity provider strategy: neither a launch type nor a strategy.
            (None, Capacity::Provider) => Through::ClusterDefault,
        },
    };
    match run_task_idempotently(aws, spec, &request, run_task_buckets(provider, capacity)).await? {
        RunOutcome::Answer(Launch::Started(task)) | RunOutcome::AlreadyStarted(task) => Ok(*task),
        RunOutcome::Answer(Launch::NotPlaced(why)) => Err(LaunchError::known(why)),
    }
}

enum RunOutcome {
    Answer(Launch),
    AlreadyStarted(Box<TaskView>),
}

/// RunTask with retries that cannot start a second task: the client token makes AWS return
/// the first task on a retry; and where an answer was lost (dropped connection, timeout, 5xx)
/// we look for the agent's task before trying again, which also holds where a token is not
/// honoured (moto). When that look fails too, we stop trying: the caller learns that the
/// outcome is unknown and keeps the agent's slot until a refresh settles it.
/// The budget buckets a RunTask draws on (`docs/aws-rules.md`, "Quotas"): Fargate's RunTask rate
/// when its task runs on Fargate; the bucket StartTask and StopTask share when an Auto Scaling
/// group or ECS Managed Instances provider (or the EC2 launch type) places it; both when the
/// cluster's default strategy decides, which may be either.
fn run_task_buckets(provider: Option<&str>, capacity: Capacity) -> &'static [Category] {
    const FARGATE: &[Category] = &[Category::FargateRunTask];
    const EC2: &[Category] = &[Category::EcsEc2Launch];
    const EITHER: &[Category] = &[Category::FargateRunTask, Category::EcsEc2Launch];
    match (provider, capacity) {
        (Some("FARGATE" | "FARGATE_SPOT"), _) => FARGATE,
        (Some(_), _) => EC2,
        (None, Capacity::Fargate | Capacity::FargateSpot) => FARGATE,
        (None, Capacity::Ec2) => EC2,
        (None, Capacity::Provider) => EITHER,
    }
}

async fn run_task_idempotently(
    aws: &AwsClients,
    spec: &LaunchSpec,
    request: &RunTaskRequest,
    buckets: &[Category],
) -> Result<RunOutcome, LaunchError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match aws.run_task_attempt(request, buckets, attempt).await {
            Ok(out) => return Ok(RunOutcome::Answer(out)),
            // Throttled, or refused outright: AWS did not act on it.
            Err(e) if e.failure != Failure::Transient => {
                if e.throttled() && attempt < crate::aws::calls::MAX_ATTEMPTS {
                    aws.calls.back_off_in(buckets, "RunTask", attempt, &e).await;
                } else {
                    return Err(LaunchError::known(aws.calls.give_up("RunTask", attempt, e)));
                }
            }
            // The answer was lost: AWS may have started the task.
            Err(e) => match find_started(aws, spec).await {
                Ok(Some(task)) => {
                    tracing::info!(task = %task.arn, "RunTask's answer was lost, but the task started: using it");
                    return Ok(RunOutcome::AlreadyStarted(Box::new(task)));
                }
                Ok(None) if attempt < crate::aws::calls::MAX_ATTEMPTS => {
                    aws.calls.back_off_in(buckets, "RunTask", attempt, &e).await
                }
                Ok(None) => return Err(LaunchError::known(aws.calls.give_up("RunTask", attempt, e))),
                Err(look) => {
                    tracing::warn!(error = %look, "RunTask's answer was lost and the task could not be looked for: its outcome is unknown");
                    return Err(LaunchError { error: aws.calls.give_up("RunTask", attempt, e), outcome_unknown: true });
                }
            },
        }
    }
}

/// The running task of this launch's agent, if one exists.
async fn find_started(aws: &AwsClients, spec: &LaunchSpec) -> Result<Option<TaskView>, AwsError> {
    let cluster = spec.profile.cluster_name.as_str();
    let arns = crate::cluster::agents::tasks::list_running(aws, cluster, &spec.started_by).await?;
    let suffix = crate::cluster::base::identity::cluster_arn_suffix(cluster);
    let tasks =
        crate::cluster::agents::tasks::describe(aws, cluster, &suffix, &arns, &spec.server_id, &spec.cluster_key)
            .await?;
    Ok(tasks.into_iter().find(|t| t.agent_id() == Some(spec.work.agent_id.as_str())))
}

/// What RunTask and StartTask both send: the task definition, `startedBy`, the agent
/// container's environment overrides and the tags.
fn launch_request(spec: &LaunchSpec) -> LaunchRequest {
    LaunchRequest {
        cluster: spec.profile.cluster_name.clone(),
        task_definition: spec.work.task_definition.arn.clone(),
        started_by: spec.started_by.clone(),
        container: spec.work.task_definition.agent_container.clone(),
        environment: override_environment(spec),
        command: spec.command_override.clone(),
        enable_execute_command: spec.work.elastic.enable_execute_command,
        tags: spec.tags.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(pairs: &[(&str, &str)]) -> crate::settings::ClusterProfile {
        let props = pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect();
        crate::settings::ClusterProfile::parse(&props).unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn warm_agents_go_where_warm_launch_type_says_and_reruns_go_on_demand() {
        use LaunchType::{Fargate, FargateSpot};
        let fargate = profile(&[("ClusterName", "ci")]);
        let spot = profile(&[("ClusterName", "ci"), ("LaunchType", "FARGATE_SPOT")]);
        // A warm agent: WarmLaunchType, whatever the lending job went through.
        assert_eq!(route(&fargate, Some(FargateSpot), true, false), Route::WarmSpot);
        assert_eq!(route(&fargate, Some(FargateSpot), true, true), Route::WarmSpot);
        assert_eq!(route(&spot, Some(Fargate), true, false), Route::WarmOnDemand);
        assert_eq!(route(&spot, Some(FargateSpot), true, false), Route::WarmSpot);
        // Without WarmLaunchType: the profile's own launch type.
        assert_eq!(route(&fargate, None, true, false), Route::AsProfile);
        assert_eq!(route(&spot, None, true, false), Route::AsProfile);
        // An agent started for its job: the profile's launch type; after an interruption,
        // on-demand where any of the profile's agents run on Spot.
        assert_eq!(route(&fargate, Some(FargateSpot), false, false), Route::AsProfile);
        assert_eq!(route(&fargate, Some(FargateSpot), false, true), Route::Rerun);
        assert_eq!(route(&spot, None, false, true), Route::Rerun);
        assert_eq!(route(&spot, Some(Fargate), false, true), Route::Rerun);
        assert_eq!(route(&fargate, None, false, true), Route::AsProfile, "nothing of it runs on Spot");
        assert_eq!(route(&fargate, Some(Fargate), false, true), Route::AsProfile);
        // A strategy or EC2 decides itself (validation refuses WarmLaunchType there).
        let strategy = profile(&[("ClusterName", "ci"), ("CapacityProviderStrategy", "FARGATE_SPOT:1\nFARGATE:0")]);
        assert_eq!(route(&strategy, Some(FargateSpot), true, false), Route::AsProfile);
        let ec2 = profile(&[
            ("ClusterName", "ci"),
            ("LaunchType", "EC2"),
            ("Ec2InstanceType", "c5.xlarge"),
            ("Ec2InstanceProfile", "ecsInstanceRole"),
            ("Ec2AmiId", "ami-0a1b2c3d"),
        ]);
        assert_eq!(route(&ec2, Some(FargateSpot), true, true), Route::AsProfile);
    }

    #[test]
    fn a_run_task_draws_on_the_bucket_of_where_its_task_runs() {
        assert_eq!(run_task_buckets(None, Capacity::Fargate), [Category::FargateRunTask]);
        assert_eq!(run_task_buckets(None, Capacity::FargateSpot), [Category::FargateRunTask]);
        assert_eq!(run_task_buckets(Some("FARGATE_SPOT"), Capacity::Provider), [Category::FargateRunTask]);
        assert_eq!(run_task_buckets(Some("ci-asg"), Capacity::Provider), [Category::EcsEc2Launch]);
        assert_eq!(run_task_buckets(None, Capacity::Ec2), [Category::EcsEc2Launch]);
        assert_eq!(
            run_task_buckets(None, Capacity::Provider),
            [Category::FargateRunTask, Category::EcsEc2Launch],
            "the cluster's default strategy may place it either way"
        );
    }
}
