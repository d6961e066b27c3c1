//! The port's ECS task calls: ListTasks, DescribeTasks, StopTask, RunTask and StartTask, each
//! through the account's budget ([`CallStats`](super::CallStats)), taking and returning the
//! project's plain types ([`TaskView`], [`LaunchRequest`]) and typed outcomes, never SDK types.
//! Which tasks to keep, when to retry a launch and what a lost answer means are the engine's.

use aws_sdk_ecs::operation::run_task::builders::RunTaskFluentBuilder;
use aws_sdk_ecs::operation::start_task::builders::StartTaskFluentBuilder;
use aws_sdk_ecs::types::{
    AssignPublicIp, AwsVpcConfiguration, CapacityProviderStrategyItem, ContainerInstanceStatus, ContainerOverride,
    DesiredStatus, Failure as EcsFailure, KeyValuePair, LaunchType, NetworkConfiguration, PlacementConstraint,
    PlacementConstraintType, PlacementStrategy, PlacementStrategyType, Tag, TaskField, TaskOverride,
};

use super::budget::Category;
use super::outcome::Placement;
use super::status::TaskStatus;
use super::task_view::TaskView;
use super::{AwsClients, AwsError, Failure};

/// AWS's limit of ARNs per DescribeTasks.
pub const DESCRIBE_CHUNK: usize = 100;

/// What StopTask came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// ECS is stopping the task.
    Stopping,
    /// ECS no longer knows the task (stopped long enough ago to be forgotten, or never in this
    /// cluster): it is not running.
    AlreadyGone,
}

/// A container instance's status the plugin sets (UpdateContainerInstancesState).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceStatus {
    /// Takes new tasks.
    Active,
    /// Takes no new tasks; its running tasks go on.
    Draining,
}

/// Where a RunTask places its task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Through {
    /// The `FARGATE` launch type.
    Fargate,
    /// The `EC2` launch type.
    Ec2,
    /// A strategy of this one capacity provider.
    Provider(String),
    /// Neither a launch type nor a strategy: the cluster's default capacity provider strategy.
    ClusterDefault,
}

/// awsvpc networking of a Fargate task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsVpc {
    /// Subnet ids.
    pub subnets: Vec<String>,
    /// Security group ids.
    pub security_groups: Vec<String>,
    /// Whether the task gets a public IP.
    pub assign_public_ip: bool,
}

/// One placement strategy or constraint of the elastic profile: ECS's `type` and its
/// `field` or `expression`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementRule {
    /// `type`.
    pub kind: String,
    /// `field` (strategy) or `expression` (constraint).
    pub value: Option<String>,
}

/// Everything one RunTask or StartTask sends, as the engine decided it.
#[derive(Debug, Clone, Default)]
pub struct LaunchRequest {
    /// Cluster name.
    pub cluster: String,
    /// Task definition ARN.
    pub task_definition: String,
    /// `startedBy`.
    pub started_by: String,
    /// The container the environment overrides go to.
    pub container: String,
    /// The agent container's environment overrides.
    pub environment: Vec<(String, String)>,
    /// A command in place of the agent container's (only `try`'s probe sets one).
    pub command: Option<Vec<String>>,
    /// `enableExecuteCommand`.
    pub enable_execute_command: bool,
    /// Every tag of the task.
    pub tags: Vec<(String, String)>,
}

/// What RunTask sends on top of a [`LaunchRequest`].
#[derive(Debug, Clone)]
pub struct RunTaskRequest {
    /// The common part.
    pub launch: LaunchRequest,
    /// Idempotency token: the same on every retry of one launch.
    pub client_token: String,
    /// awsvpc networking.
    pub network: AwsVpc,
    /// `platformVersion` (Fargate only).
    pub platform_version: Option<String>,
    /// Placement strategies.
    pub placement_strategy: Vec<PlacementRule>,
    /// Placement constraints.
    pub placement_constraints: Vec<PlacementRule>,
    /// Launch type, provider or the cluster's default.
    pub through: Through,
}

/// What a RunTask or StartTask that ECS answered came to.
#[derive(Debug, Clone)]
pub enum Launch {
    /// ECS accepted the task.
    Started(Box<TaskView>),
    /// ECS placed nothing: its `failures`, classified (no capacity, or refused), and said.
    NotPlaced(AwsError),
}

impl AwsClients {
    /// The ARNs of running tasks in `cluster`, of `started_by` when given (every page).
    ///
    /// # Errors
    /// The failed ListTasks call.
    pub async fn list_tasks(&self, cluster: &str, started_by: Option<&str>) -> Result<Vec<String>, AwsError> {
        // AWS: "when you specify startedBy as the filter, it must be the only filter"; the
        // default desiredStatus is RUNNING already.
        self.list_task_pages(cluster, started_by, None).await
    }

    /// The ARNs of the tasks in `cluster` whose desired status is `desired` (every page):
    /// `RUNNING` lists the tasks ECS keeps running, `STOPPED` those stopped lately (ECS lists a
    /// stopped task for about an hour).
    ///
    /// # Errors
    /// The failed ListTasks call.
    pub async fn list_tasks_desired(&self, cluster: &str, desired: &TaskStatus) -> Result<Vec<String>, AwsError> {
        self.list_task_pages(cluster, None, Some(DesiredStatus::from(desired.as_str()))).await
    }

    /// Every page of one ListTasks.
    async fn list_task_pages(
        &self,
        cluster: &str,
        started_by: Option<&str>,
        desired: Option<DesiredStatus>,
    ) -> Result<Vec<String>, AwsError> {
        let mut arns = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let request = self
                .ecs
                .list_tasks()
                .cluster(cluster)
                .set_started_by(started_by.map(str::to_string))
                .set_desired_status(desired.clone())
                .max_results(100)
                .set_next_token(next.take());
            let page = self.calls.call("ListTasks", || request.clone().send()).await?;
            arns.extend(page.task_arns().iter().cloned());
            match page.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_string()),
                _ => return Ok(arns),
            }
        }
    }

    /// The ARNs of the running tasks on one container instance (one page: an instance runs far
    /// fewer than 100 tasks).
    ///
    /// # Errors
    /// The failed ListTasks call.
    pub async fn list_tasks_on(&self, cluster: &str, container_instance: &str) -> Result<Vec<String>, AwsError> {
        let request = self.ecs.list_tasks().cluster(cluster).container_instance(container_instance);
        let out = self.calls.call("ListTasks", || request.clone().send()).await?;
        Ok(out.task_arns.unwrap_or_default())
    }

    /// Sets a container instance DRAINING (or ACTIVE again).
    ///
    /// # Errors
    /// The failed UpdateContainerInstancesState call.
    pub async fn set_instance_status(
        &self,
        cluster: &str,
        container_instance: &str,
        status: InstanceStatus,
    ) -> Result<(), AwsError> {
        let status = match status {
            InstanceStatus::Active => ContainerInstanceStatus::Active,
            InstanceStatus::Draining => ContainerInstanceStatus::Draining,
        };
        let request = self
            .ecs
            .update_container_instances_state()
            .cluster(cluster)
            .container_instances(container_instance)
            .status(status);
        self.calls.call("UpdateContainerInstancesState", || request.clone().send()).await.map(|_| ())
    }

    /// Describes tasks by ARN in chunks of [`DESCRIBE_CHUNK`], with tags, keeping those `keep`
    /// takes (chunk by chunk, so only what is kept stays in memory).
    ///
    /// # Errors
    /// The first failed DescribeTasks call.
    pub async fn describe_tasks(
        &self,
        cluster: &str,
        arns: &[String],
        keep: impl Fn(&TaskView) -> bool,
    ) -> Result<Vec<TaskView>, AwsError> {
        let mut tasks = Vec::with_capacity(arns.len());
        for chunk in arns.chunks(DESCRIBE_CHUNK) {
            let request =
                self.ecs.describe_tasks().cluster(cluster).set_tasks(Some(chunk.to_vec())).include(TaskField::Tags);
            let out = self.calls.call("DescribeTasks", || request.clone().send()).await?;
            tasks.extend(out.tasks().iter().map(TaskView::from_sdk).filter(|t| keep(t)));
        }
        Ok(tasks)
    }

    /// StopTask with `reason` (cut to ECS's 255 characters).
    ///
    /// # Errors
    /// The failed StopTask call (a task ECS does not know is [`Stopped::AlreadyGone`]).
    pub async fn stop_task(&self, cluster: &str, task: &str, reason: &str) -> Result<Stopped, AwsError> {
        let reason: String = reason.chars().take(255).collect();
        let request = self.ecs.stop_task().cluster(cluster).task(task).reason(reason);
        match self.calls.call("StopTask", || request.clone().send()).await {
            Ok(_) => Ok(Stopped::Stopping),
            Err(e) if e.failure == Failure::NotFound => Ok(Stopped::AlreadyGone),
            Err(e) => Err(e),
        }
    }

    /// One attempt of RunTask, charged to `buckets` (the caller retries: a retry sends the same
    /// client token, so AWS returns the first task rather than start a second).
    ///
    /// # Errors
    /// The attempt's error, classified: `Throttled` (AWS did not act), `Transient` (the call
    /// may have left: the outcome is unknown), or a refusal.
    pub async fn run_task_attempt(
        &self,
        request: &RunTaskRequest,
        buckets: &[Category],
        attempt: u32,
    ) -> Result<Launch, AwsError> {
        let send = run_task_builder(self, request)?.send();
        let out = self.calls.attempt_in(buckets, "RunTask", attempt, send).await?;
        if let Some(task) = out.tasks().first() {
            return Ok(Launch::Started(Box::new(TaskView::from_sdk(task))));
        }
        Ok(Launch::NotPlaced(not_placed("RunTask", out.failures())))
    }

    /// One attempt of StartTask on `container_instance` (the caller retries: StartTask takes no
    /// client token, so after a lost answer the caller looks for the task first).
    ///
    /// # Errors
    /// As [`AwsClients::run_task_attempt`].
    pub async fn start_task_attempt(
        &self,
        request: &LaunchRequest,
        container_instance: &str,
        attempt: u32,
    ) -> Result<Launch, AwsError> {
        let send = start_task_builder(self, request, container_instance).send();
        let out = self.calls.attempt("StartTask", attempt, send).await?;
        if let Some(task) = out.tasks().first() {
            return Ok(Launch::Started(Box::new(TaskView::from_sdk(task))));
        }
        Ok(Launch::NotPlaced(not_placed("StartTask", out.failures())))
    }
}

/// The error of a launch that placed nothing: its reasons said, and classified.
fn not_placed(operation: &'static str, failures: &[EcsFailure]) -> AwsError {
    let placements: Vec<Placement> =
        failures.iter().map(|f| Placement::of(f.reason().unwrap_or(""), f.detail().unwrap_or(""))).collect();
    let reasons: Vec<String> = failures
        .iter()
        .map(|f| {
            format!(
                "{}{}",
                f.reason().unwrap_or("unknown reason"),
                f.detail().map(|d| format!(" ({d})")).unwrap_or_default()
            )
        })
        .collect();
    let detail = if reasons.is_empty() {
        "ECS started no task and gave no reason (no capacity)".to_string()
    } else {
        reasons.join("; ")
    };
    AwsError::new(operation, Placement::failure_of_all(&placements), detail)
}

fn tags(request: &LaunchRequest) -> Vec<Tag> {
    request.tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()
}

/// The agent container's environment overrides.
fn overrides(request: &LaunchRequest) -> TaskOverride {
    let env = request.environment.iter().map(|(k, v)| KeyValuePair::builder().name(k).value(v).build());
    let container = ContainerOverride::builder()
        .name(&request.container)
        .set_environment(Some(env.collect()))
        .set_command(request.command.clone())
        .build();
    TaskOverride::builder().container_overrides(container).build()
}

fn start_task_builder(aws: &AwsClients, request: &LaunchRequest, container_instance: &str) -> StartTaskFluentBuilder {
    aws.ecs
        .start_task()
        .cluster(&request.cluster)
        .task_definition(&request.task_definition)
        .container_instances(container_instance)
        .started_by(&request.started_by)
        .overrides(overrides(request))
        .enable_execute_command(request.enable_execute_command)
        .set_tags(Some(tags(request)))
}

fn run_task_builder(aws: &AwsClients, request: &RunTaskRequest) -> Result<RunTaskFluentBuilder, AwsError> {
    let launch = &request.launch;
    let public_ip = if request.network.assign_public_ip { AssignPublicIp::Enabled } else { AssignPublicIp::Disabled };
    let vpc = AwsVpcConfiguration::builder()
        .set_subnets(Some(request.network.subnets.clone()))
        .set_security_groups(Some(request.network.security_groups.clone()))
        .assign_public_ip(public_ip)
        .build()
        .map_err(|e| AwsError::in_answer("RunTask", e.to_string()))?;
    let mut builder = aws
        .ecs
        .run_task()
        .cluster(&launch.cluster)
        .task_definition(&launch.task_definition)
        .count(1)
        .started_by(&launch.started_by)
        .client_token(&request.client_token)
        .network_configuration(NetworkConfiguration::builder().awsvpc_configuration(vpc).build())
        .overrides(overrides(launch))
        .enable_execute_command(launch.enable_execute_command)
        .set_tags(Some(tags(launch)))
        .set_platform_version(request.platform_version.clone());
    for s in &request.placement_strategy {
        let kind = PlacementStrategyType::from(s.kind.as_str());
        builder =
            builder.placement_strategy(PlacementStrategy::builder().r#type(kind).set_field(s.value.clone()).build());
    }
    for c in &request.placement_constraints {
        let kind = PlacementConstraintType::from(c.kind.as_str());
        builder = builder
            .placement_constraints(PlacementConstraint::builder().r#type(kind).set_expression(c.value.clone()).build());
    }
    let through = |name: &str| {
        CapacityProviderStrategyItem::builder()
            .capacity_provider(name)
            .weight(1)
            .build()
            .map_err(|e| AwsError::in_answer("RunTask", e.to_string()))
    };
    Ok(match &request.through {
        Through::Fargate => builder.launch_type(LaunchType::Fargate),
        Through::Ec2 => builder.launch_type(LaunchType::Ec2),
        Through::Provider(name) => builder.capacity_provider_strategy(through(name)?),
        Through::ClusterDefault => builder,
    })
}
