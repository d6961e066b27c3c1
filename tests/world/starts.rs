//! ECS's start of a task, timed as on AWS: a proxy rewrite ([`Proxy::add_rewrite`]) that gives
//! each task started through the proxy a start that takes time, and the times ECS reports.
//!
//! moto runs a task at once: RunTask answers RUNNING, and DescribeTasks carries none of
//! `createdAt`, `pullStartedAt`, `pullStoppedAt` or `startedAt`. With [`TaskStarts`], each task
//! of a RunTask answer gets a timeline from that moment: PROVISIONING for [`TaskStarts::provisioning`],
//! then PENDING while its image is pulled (each image's pull times are the test's: the pulls of
//! a large image take longer), then the container's start, then RUNNING. The RunTask answer and
//! each DescribeTasks answer say the status the task has reached and the times it has passed,
//! in real time: a test waits for a start as the plugin does. A task stopped (StopTask through
//! the proxy, or moto's answer saying STOPPED) keeps only the times it reached before it stopped:
//! one stopped during its pull has `pullStartedAt` and no `pullStoppedAt`, as on AWS.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::http::HttpResponse;
use super::proxy::Call;
#[allow(unused_imports)]
use super::Proxy;

/// How long each phase of a task's start takes.
#[derive(Debug, Clone)]
pub struct TaskStarts {
    /// RunTask to the start of the pull (capacity, the task's network interface).
    pub provisioning: Duration,
    /// Each image's pulls, in the order of the RunTasks that start tasks of it (the last one
    /// repeats).
    pub pulls: Vec<(String, Vec<Duration>)>,
    /// The pull of an image `pulls` does not name.
    pub other_pull: Duration,
    /// The end of the pull to RUNNING (the container's start).
    pub container_start: Duration,
}

/// One task's start, as the world times it.
#[derive(Debug, Clone, Copy)]
struct Timeline {
    created: SystemTime,
    pull_started: SystemTime,
    pull_stopped: SystemTime,
    started: SystemTime,
    /// When it stopped, once it did.
    stopped: Option<SystemTime>,
}

#[derive(Debug, Default)]
struct Seen {
    tasks: HashMap<String, Timeline>,
    /// Tasks started per image so far.
    pulled: HashMap<String, usize>,
}

impl TaskStarts {
    /// The pull of the next task of `image`.
    fn pull_of(&self, image: &str, seen: &mut Seen) -> Duration {
        let n = seen.pulled.entry(image.to_string()).or_default();
        let pull = match self.pulls.iter().find(|(i, _)| i == image) {
            Some((_, pulls)) => pulls.get(*n).or(pulls.last()).copied().unwrap_or(self.other_pull),
            None => self.other_pull,
        };
        *n += 1;
        pull
    }

    /// The rewrite: note each task RunTask starts, and answer RunTask and DescribeTasks with the
    /// status and times each task has reached.
    pub fn rewrite(self) -> impl Fn(&Call, &mut HttpResponse) + Send + Sync + 'static {
        let seen: Arc<Mutex<Seen>> = Arc::default();
        move |call: &Call, answer: &mut HttpResponse| {
            let start = call.is("ecs", "RunTask");
            if answer.status != 200 || !(start || call.is("ecs", "DescribeTasks") || call.is("ecs", "StopTask")) {
                return;
            }
            let Ok(mut body) = serde_json::from_slice::<Value>(&answer.body) else { return };
            let now = SystemTime::now();
            let mut seen = seen.lock().unwrap();
            if call.is("ecs", "StopTask") {
                if let Some(t) = body["task"]["taskArn"].as_str().and_then(|arn| seen.tasks.get_mut(arn)) {
                    t.stopped.get_or_insert(now);
                }
                return;
            }
            for task in body["tasks"].as_array_mut().into_iter().flatten() {
                let Some(arn) = task["taskArn"].as_str().map(str::to_string) else { continue };
                if start && !seen.tasks.contains_key(&arn) {
                    let image = task["containers"][0]["image"].as_str().unwrap_or_default().to_string();
                    let pull = self.pull_of(&image, &mut seen);
                    let pull_started = now + self.provisioning;
                    let pull_stopped = pull_started + pull;
                    let timeline = Timeline {
                        created: now,
                        pull_started,
                        pull_stopped,
                        started: pull_stopped + self.container_start,
                        stopped: None,
                    };
                    seen.tasks.insert(arn.clone(), timeline);
                }
                let Some(timeline) = seen.tasks.get_mut(&arn) else { continue };
                if task["lastStatus"] == "STOPPED" {
                    timeline.stopped.get_or_insert(now);
                }
                as_reached(task, *timeline, now);
            }
            answer.body = body.to_string().into_bytes();
        }
    }
}

/// Sets a task's times to those its start has passed by `now` (or by its stop), and, while moto
/// says RUNNING before the start is over, the status it is in.
fn as_reached(task: &mut Value, t: Timeline, now: SystemTime) {
    let until = t.stopped.map_or(now, |s| s.min(now));
    let epoch = |at: SystemTime| json!(at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64());
    let Some(fields) = task.as_object_mut() else { return };
    fields.insert("createdAt".into(), epoch(t.created));
    for (key, at) in [("pullStartedAt", t.pull_started), ("pullStoppedAt", t.pull_stopped), ("startedAt", t.started)] {
        if at <= until {
            fields.insert(key.into(), epoch(at));
        } else {
            fields.remove(key);
        }
    }
    if let Some(stopped) = t.stopped {
        fields.entry("stoppedAt").or_insert_with(|| epoch(stopped));
    }
    if fields.get("lastStatus").and_then(Value::as_str) != Some("RUNNING") || now >= t.started {
        return;
    }
    let status = if now < t.pull_started { "PROVISIONING" } else { "PENDING" };
    fields.insert("lastStatus".into(), json!(status));
    for c in fields.get_mut("containers").and_then(Value::as_array_mut).into_iter().flatten() {
        c["lastStatus"] = json!("PENDING");
    }
}
