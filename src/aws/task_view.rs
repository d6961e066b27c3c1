//! The port's plain picture of an ECS task ([`TaskView`]), built from the SDK's `Task` here
//! and nowhere else; what the engine makes of a task (its agent, whether it stops, why it
//! stopped) is the engine's own (`cluster::tasks`).

use std::collections::HashMap;
use std::time::SystemTime;

use aws_sdk_ecs::types::Task;
use serde::Serialize;

use super::status::{StopCode, TaskStatus};

/// One task as ECS last described it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TaskView {
    /// Task ARN.
    pub arn: String,
    /// Cluster ARN.
    pub cluster_arn: String,
    /// `lastStatus` (PROVISIONING … RUNNING … STOPPED).
    pub last_status: TaskStatus,
    /// `desiredStatus`.
    pub desired_status: TaskStatus,
    /// Launch type, or capacity provider when launched through one.
    pub capacity: String,
    /// Task definition ARN.
    pub task_definition: String,
    /// Tags.
    pub tags: HashMap<String, String>,
    /// `stopCode`.
    pub stop_code: Option<StopCode>,
    /// `stoppedReason`.
    pub stopped_reason: Option<String>,
    /// Each container's name, image, exit code and reason.
    pub containers: Vec<ContainerView>,
    /// When ECS accepted the task.
    pub created_at: Option<SystemTime>,
    /// Image pull started.
    pub pull_started_at: Option<SystemTime>,
    /// Image pull finished.
    pub pull_stopped_at: Option<SystemTime>,
    /// Task running.
    pub started_at: Option<SystemTime>,
    /// Task stopped.
    pub stopped_at: Option<SystemTime>,
    /// Availability zone.
    pub availability_zone: Option<String>,
    /// Task-level CPU units.
    pub cpu: Option<String>,
    /// Task-level memory MiB.
    pub memory: Option<String>,
    /// The container instance it runs on (EC2 launch type).
    pub container_instance_arn: Option<String>,
}

/// One container of a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerView {
    /// Container name.
    pub name: String,
    /// Image.
    pub image: Option<String>,
    /// Its last status.
    pub last_status: Option<TaskStatus>,
    /// Exit code once stopped.
    pub exit_code: Option<i32>,
    /// Why it stopped.
    pub reason: Option<String>,
}

impl TaskView {
    /// Builds the view of an SDK task.
    pub fn from_sdk(task: &Task) -> Self {
        let time = |t: Option<&aws_smithy_types::DateTime>| t.and_then(|t| SystemTime::try_from(*t).ok());
        let capacity = task
            .capacity_provider_name()
            .map(str::to_string)
            .or_else(|| task.launch_type().map(|l| l.as_str().to_string()).filter(|s| !s.is_empty()))
            .unwrap_or_default();
        TaskView {
            arn: task.task_arn().unwrap_or_default().to_string(),
            cluster_arn: task.cluster_arn().unwrap_or_default().to_string(),
            last_status: task.last_status().map(TaskStatus::from).unwrap_or_default(),
            desired_status: task.desired_status().map(TaskStatus::from).unwrap_or_default(),
            capacity,
            task_definition: task.task_definition_arn().unwrap_or_default().to_string(),
            tags: task
                .tags()
                .iter()
                .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string())))
                .collect(),
            stop_code: task.stop_code().map(StopCode::from),
            stopped_reason: task.stopped_reason().filter(|r| !r.is_empty()).map(str::to_string),
            containers: task
                .containers()
                .iter()
                .map(|c| ContainerView {
                    name: c.name().unwrap_or_default().to_string(),
                    image: c.image().map(str::to_string),
                    last_status: c.last_status().map(TaskStatus::from),
                    exit_code: c.exit_code(),
                    reason: c.reason().map(str::to_string),
                })
                .collect(),
            created_at: time(task.created_at()),
            pull_started_at: time(task.pull_started_at()),
            pull_stopped_at: time(task.pull_stopped_at()),
            started_at: time(task.started_at()),
            stopped_at: time(task.stopped_at()),
            availability_zone: task.availability_zone().map(str::to_string),
            cpu: task.cpu().map(str::to_string),
            memory: task.memory().map(str::to_string),
            container_instance_arn: task.container_instance_arn().map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ecs::types::{Container, Tag};

    #[test]
    fn reads_an_sdk_task() {
        let task = Task::builder()
            .task_arn("arn:aws:ecs:us-east-1:123456789012:task/ci/abc")
            .cluster_arn("arn:aws:ecs:us-east-1:123456789012:cluster/ci")
            .last_status("STOPPED")
            .desired_status("STOPPED")
            .stopped_reason("Essential container in task exited")
            .stop_code(aws_sdk_ecs::types::TaskStopCode::EssentialContainerExited)
            .launch_type(aws_sdk_ecs::types::LaunchType::Fargate)
            .containers(Container::builder().name("gocd-agent").exit_code(137).reason("OutOfMemoryError").build())
            .tags(Tag::builder().key("gocd:agent-id").value("ea-1").build())
            .build();
        let view = TaskView::from_sdk(&task);
        assert_eq!(view.tags.get("gocd:agent-id").map(String::as_str), Some("ea-1"));
        assert_eq!((&view.last_status, &view.desired_status), (&TaskStatus::Stopped, &TaskStatus::Stopped));
        assert_eq!(view.stop_code, Some(StopCode::EssentialContainerExited));
        assert_eq!(view.capacity, "FARGATE");
        assert_eq!(view.containers[0].exit_code, Some(137));
        assert_eq!(view.containers[0].reason.as_deref(), Some("OutOfMemoryError"));
    }

    #[test]
    fn an_empty_stopped_reason_is_no_reason() {
        let task =
            Task::builder().task_arn("arn:aws:ecs:us-east-1:123456789012:task/ci/abc").stopped_reason("").build();
        assert_eq!(TaskView::from_sdk(&task).stopped_reason, None);
    }
}
