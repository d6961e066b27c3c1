//! Test fixtures shared by the cluster module's table tests: a job and an ECS task of ours.

use crate::cluster::agents::tasks::{TaskStatus, TaskView};
use crate::cluster::base::identity::{task_tags, TaskLabels};
use crate::protocol::types::JobIdentifier;
use crate::settings::Properties;

/// Job `id` of pipeline `p/1/s/1/j`.
pub fn job(id: i64) -> JobIdentifier {
    JobIdentifier {
        pipeline_name: "p".into(),
        pipeline_label: "1".into(),
        pipeline_counter: 1,
        stage_name: "s".into(),
        stage_counter: "1".into(),
        job_name: "j".into(),
        job_id: id,
    }
}

/// The tags of a task of agent `agent` for job `job_id` (server `sid`, cluster key `key`).
pub fn tags(agent: &str, job_id: i64) -> Vec<(String, String)> {
    let job = job(job_id);
    let labels = TaskLabels {
        server_id: "sid",
        cluster_key: "key",
        agent_id: agent,
        job: &job,
        environment: None,
        elastic_profile: "h",
        attempt: 1,
        settings: "",
    };
    task_tags(&labels, &[])
}

/// A task with these tags, in `status` (`RUNNING` or `STOPPED`, stopped by a user).
pub fn task(arn: &str, tags: Vec<(String, String)>, status: TaskStatus) -> TaskView {
    let stopped = status == TaskStatus::Stopped;
    TaskView {
        arn: arn.into(),
        cluster_arn: "arn:aws:ecs:us-east-1:1:cluster/c".into(),
        last_status: status,
        desired_status: if stopped { TaskStatus::Stopped } else { TaskStatus::Running },
        capacity: "FARGATE".into(),
        task_definition: "td".into(),
        tags: tags.into_iter().collect(),
        stop_code: None,
        stopped_reason: stopped.then(|| "Task stopped by user".into()),
        containers: vec![],
        created_at: None,
        pull_started_at: None,
        pull_stopped_at: None,
        started_at: None,
        stopped_at: None,
        availability_zone: None,
        cpu: None,
        memory: None,
        container_instance_arn: None,
    }
}

/// Profile properties from pairs, as GoCD sends them.
pub fn props(pairs: &[(&str, &str)]) -> Properties {
    pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect()
}
