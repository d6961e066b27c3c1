//! What the engine makes of the tasks it reads back from ECS (through the port's ListTasks by
//! `startedBy` and DescribeTasks in chunks of 100 with tags, `aws::ecs`): kept only when the
//! cluster and both ownership tags are ours. [`TaskView`], the port's plain picture of a task,
//! gets its engine meaning here (its agent, whether it stops, why it stopped), and [`Capacity`]
//! names where a task runs.

pub use crate::aws::ecs::DESCRIBE_CHUNK;
pub use crate::aws::status::{StopCode, TaskStatus};
pub use crate::aws::task_view::{ContainerView, TaskView};
use serde::Serialize;

use crate::aws::{AwsClients, AwsError};
use crate::cluster::base::identity::{is_ours, TAG_AGENT_ID};

/// Where a task runs: what the registry records and the status report shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Capacity {
    /// Fargate, on-demand.
    Fargate,
    /// Fargate Spot (through the `FARGATE_SPOT` capacity provider).
    FargateSpot,
    /// An EC2 container instance.
    Ec2,
    /// A capacity provider other than Fargate's (an Auto Scaling group's), or the cluster's
    /// default strategy (`CapacityProviderStrategy`).
    Provider,
}

impl Capacity {
    /// ECS's own spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Capacity::Fargate => "FARGATE",
            Capacity::FargateSpot => "FARGATE_SPOT",
            Capacity::Ec2 => "EC2",
            Capacity::Provider => "CAPACITY_PROVIDER",
        }
    }

    /// ECS's launch type or capacity provider name, when it is one of ours.
    pub fn from_ecs(value: &str) -> Option<Capacity> {
        match value {
            "FARGATE" => Some(Capacity::Fargate),
            "FARGATE_SPOT" => Some(Capacity::FargateSpot),
            "EC2" => Some(Capacity::Ec2),
            _ => None,
        }
    }
}

impl std::fmt::Display for Capacity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TaskView {
    /// The agent id tag.
    pub fn agent_id(&self) -> Option<&str> {
        self.tags.get(TAG_AGENT_ID).map(String::as_str)
    }

    /// This view as an agent's record keeps it: without the plugin's own `gocd:` tags, which the
    /// record holds in its own fields (job, agent id, profile, attempt); the profiles' tags stay.
    /// Half of what an agent costs in memory otherwise (README "Performance").
    pub fn without_own_tags(mut self) -> TaskView {
        self.tags.retain(|k, _| !is_own_tag(k));
        self.tags.shrink_to_fit();
        self
    }

    /// [`TaskView::without_own_tags`] of a view still needed whole: copies only what is kept.
    pub fn kept_copy(&self) -> TaskView {
        let TaskView {
            arn,
            cluster_arn,
            last_status,
            desired_status,
            capacity,
            task_definition,
            tags,
            stop_code,
            stopped_reason,
            containers,
            created_at,
            pull_started_at,
            pull_stopped_at,
            started_at,
            stopped_at,
            availability_zone,
            cpu,
            memory,
            container_instance_arn,
        } = self;
        TaskView {
            arn: arn.clone(),
            cluster_arn: cluster_arn.clone(),
            last_status: last_status.clone(),
            desired_status: desired_status.clone(),
            capacity: capacity.clone(),
            task_definition: task_definition.clone(),
            tags: tags.iter().filter(|(k, _)| !is_own_tag(k)).map(|(k, v)| (k.clone(), v.clone())).collect(),
            stop_code: stop_code.clone(),
            stopped_reason: stopped_reason.clone(),
            containers: containers.clone(),
            created_at: *created_at,
            pull_started_at: *pull_started_at,
            pull_stopped_at: *pull_stopped_at,
            started_at: *started_at,
            stopped_at: *stopped_at,
            availability_zone: availability_zone.clone(),
            cpu: cpu.clone(),
            memory: memory.clone(),
            container_instance_arn: container_instance_arn.clone(),
        }
    }

    /// Whether a fresh description says nothing that this kept view (see
    /// [`TaskView::without_own_tags`]) does not already say.
    pub fn unchanged_by(&self, fresh: &TaskView) -> bool {
        let TaskView {
            arn,
            cluster_arn,
            last_status,
            desired_status,
            capacity,
            task_definition,
            tags,
            stop_code,
            stopped_reason,
            containers,
            created_at,
            pull_started_at,
            pull_stopped_at,
            started_at,
            stopped_at,
            availability_zone,
            cpu,
            memory,
            container_instance_arn,
        } = self;
        *arn == fresh.arn
            && *cluster_arn == fresh.cluster_arn
            && *last_status == fresh.last_status
            && *desired_status == fresh.desired_status
            && *capacity == fresh.capacity
            && *task_definition == fresh.task_definition
            && *stop_code == fresh.stop_code
            && *stopped_reason == fresh.stopped_reason
            && *containers == fresh.containers
            && *created_at == fresh.created_at
            && *pull_started_at == fresh.pull_started_at
            && *pull_stopped_at == fresh.pull_stopped_at
            && *started_at == fresh.started_at
            && *stopped_at == fresh.stopped_at
            && *availability_zone == fresh.availability_zone
            && *cpu == fresh.cpu
            && *memory == fresh.memory
            && *container_instance_arn == fresh.container_instance_arn
            && tags.len() == fresh.tags.keys().filter(|k| !is_own_tag(k)).count()
            && tags.iter().all(|(k, v)| fresh.tags.get(k) == Some(v))
    }

    /// Whether ECS has stopped it, or is stopping it.
    pub fn is_stopping(&self) -> bool {
        self.desired_status == TaskStatus::Stopped || self.last_status.is_stopping()
    }

    /// Why it stopped, in one line: stop code, reason and the containers' exit codes.
    pub fn stop_summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(reason) = &self.stopped_reason {
            parts.push(reason.clone());
        }
        if let Some(code) = &self.stop_code {
            parts.push(format!("stop code {code}"));
        }
        for c in &self.containers {
            match (c.exit_code, &c.reason) {
                (Some(code), Some(reason)) => parts.push(format!("container {} exited {code}: {reason}", c.name)),
                (Some(code), None) => parts.push(format!("container {} exited {code}", c.name)),
                (None, Some(reason)) => parts.push(format!("container {}: {reason}", c.name)),
                (None, None) => {}
            }
        }
        if parts.is_empty() {
            "ECS gave no reason".to_string()
        } else {
            parts.join("; ")
        }
    }

    /// Marks the task stopped because ECS no longer knows it (an hour after a task stops, ECS
    /// forgets it). A copy kept from while it ran says nothing of why it stopped, so its stop
    /// details are dropped rather than shown as the reason.
    pub fn forgotten_by_ecs(&mut self) {
        if self.last_status != TaskStatus::Stopped {
            self.stop_code = None;
            self.stopped_reason = None;
            for c in &mut self.containers {
                c.exit_code = None;
                c.reason = None;
            }
        }
        self.last_status = TaskStatus::Stopped;
        self.desired_status = TaskStatus::Stopped;
        self.stopped_reason.get_or_insert_with(|| "ECS no longer knows this task".into());
    }
}

/// The plugin's own tags (`docs/design.md`, "Where the truth lives"); users may not set `gocd:`
/// keys.
fn is_own_tag(key: &str) -> bool {
    key.starts_with("gocd:")
}

/// Lists the ARNs of running tasks we started in `cluster` (every page).
///
/// # Errors
/// The failed ListTasks call.
pub async fn list_running(aws: &AwsClients, cluster: &str, started_by: &str) -> Result<Vec<String>, AwsError> {
    list(aws, cluster, Some(started_by)).await
}

/// Lists the ARNs of every running task in `cluster`, whoever started it (every page): the
/// leftover sweep's read (`cleanup/strays.rs`), which looks at tags because the `startedBy` of a gone
/// cluster profile is not known.
///
/// # Errors
/// The failed ListTasks call.
pub async fn list_all_running(aws: &AwsClients, cluster: &str) -> Result<Vec<String>, AwsError> {
    list(aws, cluster, None).await
}

async fn list(aws: &AwsClients, cluster: &str, started_by: Option<&str>) -> Result<Vec<String>, AwsError> {
    aws.list_tasks(cluster, started_by).await
}

/// Describes tasks by ARN in chunks of [`DESCRIBE_CHUNK`], with tags, keeping only ours.
///
/// # Errors
/// The first failed DescribeTasks call.
pub async fn describe(
    aws: &AwsClients,
    cluster: &str,
    cluster_arn_suffix: &str,
    arns: &[String],
    server_id: &str,
    cluster_key: &str,
) -> Result<Vec<TaskView>, AwsError> {
    describe_where(aws, cluster, arns, |t| {
        t.cluster_arn.ends_with(cluster_arn_suffix) && is_ours(&t.tags, server_id, cluster_key)
    })
    .await
}

/// Describes tasks by ARN in chunks of [`DESCRIBE_CHUNK`], with tags, keeping those `keep` takes.
///
/// # Errors
/// The first failed DescribeTasks call.
pub async fn describe_where(
    aws: &AwsClients,
    cluster: &str,
    arns: &[String],
    keep: impl Fn(&TaskView) -> bool,
) -> Result<Vec<TaskView>, AwsError> {
    aws.describe_tasks(cluster, arns, keep).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(arn: &str, last_status: TaskStatus, reason: Option<&str>, exit_code: i32) -> TaskView {
        TaskView {
            arn: arn.into(),
            last_status: last_status.clone(),
            desired_status: last_status,
            stopped_reason: reason.map(str::to_string),
            containers: vec![ContainerView {
                name: "gocd-agent".into(),
                image: None,
                last_status: None,
                exit_code: Some(exit_code),
                reason: None,
            }],
            ..TaskView::default()
        }
    }

    #[test]
    fn a_task_ecs_forgot_says_so_not_what_it_said_while_running() {
        let mut view = task("arn:aws:ecs:us-east-1:123456789012:task/ci/abc", TaskStatus::Running, None, 0);
        view.forgotten_by_ecs();
        assert_eq!((&view.last_status, &view.desired_status), (&TaskStatus::Stopped, &TaskStatus::Stopped));
        assert_eq!(view.stop_summary(), "ECS no longer knows this task");

        let mut view = task(
            "arn:aws:ecs:us-east-1:123456789012:task/ci/def",
            TaskStatus::Stopped,
            Some("Task stopped by user"),
            143,
        );
        view.forgotten_by_ecs();
        assert_eq!(view.stop_summary(), "Task stopped by user; container gocd-agent exited 143", "seen stopped: kept");
    }

    #[test]
    fn says_why_a_task_stopped() {
        let mut view = task(
            "arn:aws:ecs:us-east-1:123456789012:task/ci/abc",
            TaskStatus::Stopped,
            Some("Essential container in task exited"),
            137,
        );
        view.stop_code = Some(StopCode::EssentialContainerExited);
        view.containers[0].reason = Some("OutOfMemoryError".into());
        view.tags.insert(TAG_AGENT_ID.into(), "ea-1".into());
        assert_eq!(view.agent_id(), Some("ea-1"));
        assert!(view.is_stopping());
        assert_eq!(
            view.stop_summary(),
            "Essential container in task exited; stop code EssentialContainerExited; container gocd-agent exited 137: OutOfMemoryError"
        );
    }
}
