//! Tasks ECS does not describe: stopped tasks it has forgotten, and tasks of another cluster.
//!
//! Stopped tasks are forgotten (`docs/aws-rules.md`, "ECS: reads": "stopped tasks stay listed for about
//! an hour, then disappear"). moto keeps them forever; AWS, an hour after a task stopped,
//! describes it no more (DescribeTasks lists its ARN under `failures` with reason `MISSING`) and
//! lists it no more (ListTasks with `desiredStatus` STOPPED).
//!
//! moto keeps no `stoppedAt`, so the proxy notes when a task stopped: the StopTask answer that
//! stopped it, else the first DescribeTasks answer that shows it STOPPED. Once the time a test
//! set with [`AwsRules::forget_stopped_tasks_after`] (`Proxy::forget_stopped_tasks_after`; AWS's
//! hour by default) has passed since, DescribeTasks and ListTasks answer as AWS does, and
//! StopTask answers `InvalidParameterException` "The referenced task was not found." (moto stops
//! it again, or fails with a 500).
//!
//! DescribeTasks describes only the named cluster's tasks (`ecs.describe_tasks.cluster`): moto
//! finds a task in any cluster; AWS answers a task of another cluster `MISSING` too.

use std::time::Instant;

use serde_json::{json, Value};

use super::super::http::{self, HttpResponse};
use super::super::proxy::{task_id, Call};
use super::*;

/// How long AWS keeps a stopped task: about an hour.
pub const STOPPED_TASKS_KEPT: Duration = Duration::from_secs(3600);

impl AwsRules {
    /// Forgets stopped tasks `kept` after they stopped, instead of AWS's hour.
    pub fn forget_stopped_tasks_after(&self, kept: Duration) {
        eprintln!("aws-rules: {STOPPED_TASKS_FORGOTTEN}: stopped tasks are forgotten {kept:?} after they stop");
        *self.stopped_kept.lock().unwrap() = Some(kept);
    }

    /// Notes that a task stopped now, unless it was noted before.
    pub(super) fn task_stopped(&self, arn: &str) {
        self.stopped.lock().unwrap().entry(task_id(arn)).or_insert_with(Instant::now);
    }

    /// Whether ECS has forgotten this task by now.
    pub(super) fn forgotten(&self, arn: &str) -> bool {
        let kept = self.stopped_kept.lock().unwrap().unwrap_or(STOPPED_TASKS_KEPT);
        self.on(STOPPED_TASKS_FORGOTTEN)
            && self.stopped.lock().unwrap().get(&task_id(arn)).is_some_and(|at| at.elapsed() >= kept)
    }

    /// StopTask as AWS answers it for a task it has forgotten; `None` for any other task.
    pub(super) fn stop_forgotten_task(&self, call: &Call) -> Option<HttpResponse> {
        let body = call.json()?;
        let task = body["task"].as_str()?;
        self.forgotten(task).then(|| {
            let message = "The referenced task was not found.";
            HttpResponse::aws_json_error(400, "InvalidParameterException", message)
        })
    }

    /// DescribeTasks as AWS answers it: tasks forgotten by now, and tasks of another cluster, are
    /// `MISSING`; tasks STOPPED in the answer are noted.
    pub(super) async fn describe_tasks_as_aws(&self, call: &Call, upstream: SocketAddr) -> HttpResponse {
        let answer = match http::send(upstream, &call.request).await {
            Ok(answer) if answer.status == 200 => answer,
            Ok(other) => return other,
            Err(e) => return HttpResponse::upstream_failed(&e),
        };
        let Ok(mut v) = serde_json::from_slice::<Value>(&answer.body) else {
            return answer;
        };
        let cluster = format!(":cluster/{}", cluster_name(&call.json().unwrap_or(Value::Null)));
        let elsewhere = |task: &Value| {
            self.on(DESCRIBE_TASKS_CLUSTER) && !task["clusterArn"].as_str().unwrap_or_default().ends_with(&cluster)
        };
        let tasks = v["tasks"].as_array().cloned().unwrap_or_default();
        let mut kept = Vec::with_capacity(tasks.len());
        let mut missing = Vec::new();
        for task in tasks {
            let arn = task["taskArn"].as_str().unwrap_or_default().to_string();
            if task["lastStatus"] == "STOPPED" {
                self.task_stopped(&arn);
            }
            if elsewhere(&task) {
                missing.push(json!({ "arn": arn, "reason": "MISSING" }));
                continue;
            }
            if self.forgotten(&arn) {
                missing.push(json!({ "arn": arn, "reason": "MISSING" }));
            } else {
                kept.push(task);
            }
        }
        if missing.is_empty() {
            return answer;
        }
        let mut failures = v["failures"].as_array().cloned().unwrap_or_default();
        failures.extend(missing);
        v["tasks"] = json!(kept);
        v["failures"] = json!(failures);
        HttpResponse::aws_json(200, &v)
    }
}
