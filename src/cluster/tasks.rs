//! Reading tasks back from ECS: one paginated ListTasks by `startedBy` and DescribeTasks in
//! chunks of 100 with tags (`docs/design.md`, "Where the truth lives"), kept only when the cluster
//! and both ownership tags are ours. [`TaskView`] is the plain-data picture the rest of the plugin
//! works with.

use std::collections::HashMap;
use std::time::SystemTime;

use aws_sdk_ecs::types::{Task, TaskField};
use serde::Serialize;

use super::identity::{is_ours, TAG_AGENT_ID};
use crate::aws::{AwsClients, AwsError};

/// AWS's limit of ARNs per DescribeTasks.
pub const DESCRIBE_CHUNK: usize = 100;

/// One task as ECS last described it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskView {
    /// Task ARN.
    pub arn: String,
    /// Cluster ARN.
    pub cluster_arn: String,
    /// `lastStatus` (PROVISIONING … RUNNING … STOPPED).
    pub last_status: String,
    /// `desiredStatus`.
    pub desired_status: String,
    /// Launch type, or capacity provider when launched through one.
    pub capacity: String,
    /// Task definition ARN.
    pub task_definition: String,
    /// Tags.
    pub tags: HashMap<String, String>,
    /// `stopCode`.
    pub stop_code: Option<String>,
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
}

/// One container of a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerView {
    /// Container name.
    pub name: String,
    /// Image.
    pub image: Option<String>,
    /// Its last status.
    pub last_status: Option<String>,
    /// Exit code once stopped.
    pub exit_code: Option<i32>,
    /// Why it stopped.
    pub reason: Option<String>,
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
            && tags.len() == fresh.tags.keys().filter(|k| !is_own_tag(k)).count()
            && tags.iter().all(|(k, v)| fresh.tags.get(k) == Some(v))
    }

    /// Whether ECS has stopped it, or is stopping it.
    pub fn is_stopping(&self) -> bool {
        self.desired_status == "STOPPED"
            || matches!(self.last_status.as_str(), "DEACTIVATING" | "STOPPING" | "DEPROVISIONING" | "STOPPED")
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
        if self.last_status != "STOPPED" {
            self.stop_code = None;
            self.stopped_reason = None;
            for c in &mut self.containers {
                c.exit_code = None;
                c.reason = None;
            }
        }
        self.last_status = "STOPPED".into();
        self.desired_status = "STOPPED".into();
        self.stopped_reason.get_or_insert_with(|| "ECS no longer knows this task".into());
    }

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
            last_status: task.last_status().unwrap_or_default().to_string(),
            desired_status: task.desired_status().unwrap_or_default().to_string(),
            capacity,
            task_definition: task.task_definition_arn().unwrap_or_default().to_string(),
            tags: task
                .tags()
                .iter()
                .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string())))
                .collect(),
            stop_code: task.stop_code().map(|c| c.as_str().to_string()),
            stopped_reason: task.stopped_reason().filter(|r| !r.is_empty()).map(str::to_string),
            containers: task
                .containers()
                .iter()
                .map(|c| ContainerView {
                    name: c.name().unwrap_or_default().to_string(),
                    image: c.image().map(str::to_string),
                    last_status: c.last_status().map(str::to_string),
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
        }
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
/// leftover sweep's read (`strays.rs`), which looks at tags because the `startedBy` of a gone
/// cluster profile is not known.
///
/// # Errors
/// The failed ListTasks call.
pub async fn list_all_running(aws: &AwsClients, cluster: &str) -> Result<Vec<String>, AwsError> {
    list(aws, cluster, None).await
}

async fn list(aws: &AwsClients, cluster: &str, started_by: Option<&str>) -> Result<Vec<String>, AwsError> {
    let mut arns = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let request = aws
            .ecs
            .list_tasks()
            .cluster(cluster)
            // AWS: "when you specify startedBy as the filter, it must be the only filter"; the
            // default desiredStatus is RUNNING already.
            .set_started_by(started_by.map(str::to_string))
            .max_results(100)
            .set_next_token(next.take());
        let page = aws.calls.call("ListTasks", || request.clone().send()).await?;
        arns.extend(page.task_arns().iter().cloned());
        match page.next_token() {
            Some(token) if !token.is_empty() => next = Some(token.to_string()),
            _ => return Ok(arns),
        }
    }
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
    let mut tasks = Vec::with_capacity(arns.len());
    for chunk in arns.chunks(DESCRIBE_CHUNK) {
        let request =
            aws.ecs.describe_tasks().cluster(cluster).set_tasks(Some(chunk.to_vec())).include(TaskField::Tags);
        let out = aws.calls.call("DescribeTasks", || request.clone().send()).await?;
        tasks.extend(out.tasks().iter().map(TaskView::from_sdk).filter(|t| keep(t)));
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ecs::types::{Container, Tag};

    #[test]
    fn a_task_ecs_forgot_says_so_not_what_it_said_while_running() {
        let running = Task::builder()
            .task_arn("arn:aws:ecs:us-east-1:123456789012:task/ci/abc")
            .last_status("RUNNING")
            .desired_status("RUNNING")
            .stopped_reason("")
            .containers(Container::builder().name("gocd-agent").exit_code(0).build())
            .build();
        let mut view = TaskView::from_sdk(&running);
        assert_eq!(view.stopped_reason, None, "an empty stoppedReason is no reason");
        view.forgotten_by_ecs();
        assert_eq!((view.last_status.as_str(), view.desired_status.as_str()), ("STOPPED", "STOPPED"));
        assert_eq!(view.stop_summary(), "ECS no longer knows this task");

        let stopped = Task::builder()
            .task_arn("arn:aws:ecs:us-east-1:123456789012:task/ci/def")
            .last_status("STOPPED")
            .stopped_reason("Task stopped by user")
            .containers(Container::builder().name("gocd-agent").exit_code(143).build())
            .build();
        let mut view = TaskView::from_sdk(&stopped);
        view.forgotten_by_ecs();
        assert_eq!(view.stop_summary(), "Task stopped by user; container gocd-agent exited 143", "seen stopped: kept");
    }

    #[test]
    fn reads_an_sdk_task() {
        let task = Task::builder()
            .task_arn("arn:aws:ecs:us-east-1:123456789012:task/ci/abc")
            .cluster_arn("arn:aws:ecs:us-east-1:123456789012:cluster/ci")
            .last_status("STOPPED")
            .desired_status("STOPPED")
            .stopped_reason("Essential container in task exited")
            .stop_code(aws_sdk_ecs::types::TaskStopCode::EssentialContainerExited)
            .containers(Container::builder().name("gocd-agent").exit_code(137).reason("OutOfMemoryError").build())
            .tags(Tag::builder().key(TAG_AGENT_ID).value("ea-1").build())
            .build();
        let view = TaskView::from_sdk(&task);
        assert_eq!(view.agent_id(), Some("ea-1"));
        assert!(view.is_stopping());
        assert_eq!(
            view.stop_summary(),
            "Essential container in task exited; stop code EssentialContainerExited; container gocd-agent exited 137: OutOfMemoryError"
        );
    }
}
