//! Watching the try task: DescribeTasks every two seconds until it runs or stops (each new
//! `lastStatus` printed with its time), the phases of its start from ECS's own timestamps
//! (named as `cluster::job_wait` names them, up to RUNNING), where its output is, and its stop.

use std::io;
use std::time::{Duration, Instant, SystemTime};

use super::class::{self, Class, Failed};
use super::Report;
use crate::aws::stop_cause::StopCause;
use crate::aws::{AwsClients, AwsError};
use crate::cluster::accounting::job_wait::WaitPhase;
use crate::cluster::agents::tasks::{TaskStatus, TaskView};
use crate::cluster::launch::task_definition::TaskDefinitionRef;
use crate::settings::{ClusterProfile, ElasticProfile};

/// How often the task is described.
const POLL: Duration = Duration::from_secs(2);

/// `1.2 s`.
pub(super) fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The task watched: where it is, how long to wait, and its elastic profile (to name a
/// failure's fix).
#[derive(Clone, Copy)]
pub(super) struct Watched<'a> {
    pub(super) aws: &'a AwsClients,
    pub(super) cluster: &'a str,
    pub(super) arn: &'a str,
    pub(super) timeout: Duration,
    pub(super) elastic: &'a ElasticProfile,
}

/// Waits until the task is RUNNING (its description then), printing each status it passes. With
/// `exits`, the container of that name runs a command that ends by itself: its task may be
/// STOPPED by the first look, and that is a task that ran when the container has an exit code.
///
/// # Errors
/// The task stopped (classified by its stop reason), did not run within `timeout`, could not
/// be described, or the run was interrupted.
pub(super) async fn until_running(
    w: &Watched<'_>,
    asked: SystemTime,
    exits: Option<&str>,
    r: &mut Report<'_>,
) -> Result<TaskView, Failed> {
    let Watched { aws, cluster, arn, timeout, elastic } = *w;
    let started = Instant::now();
    let mut last = TaskStatus::default();
    loop {
        let task = look(aws, cluster, arn).await?;
        if let Some(task) = &task {
            if task.last_status != last {
                last.clone_from(&task.last_status);
                let since = SystemTime::now().duration_since(asked).unwrap_or_default();
                r.line("status", format!("{last} after {}", secs(since))).map_err(super::write_failed)?;
            }
            match task.last_status {
                TaskStatus::Running => return Ok(task.clone()),
                _ if exits.is_some_and(|c| exit_code(task, c).is_some()) => return Ok(task.clone()),
                TaskStatus::Stopped | TaskStatus::Deprovisioning | TaskStatus::Stopping => {
                    return Err(stopped(task, elastic))
                }
                _ => {}
            }
        }
        if started.elapsed() >= timeout {
            return Err(Failed::new(
                Class::Timeout,
                format!("the task was not RUNNING after {} (last status {})", secs(timeout), or_none(last.as_str())),
                "a large image takes long to pull: give a longer --timeout; else look at the task in the ECS console",
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The exit code of the container `name`, once it exited (ECS gives one when the container
/// stopped; its task is then on its way to STOPPED).
fn exit_code(task: &TaskView, name: &str) -> Option<i32> {
    let stopping = task.last_status.is_stopping();
    task.containers.iter().find(|c| c.name == name).and_then(|c| c.exit_code).filter(|_| stopping)
}

/// Waits until the container `name` of a task that runs a command ending by itself has exited,
/// printing each status the task passes; its exit code.
///
/// # Errors
/// The task stopped with no exit code for it (classified by its stop reason), it did not exit
/// within `timeout`, or the task could not be described.
pub(super) async fn until_exited(
    w: &Watched<'_>,
    asked: SystemTime,
    seen: &TaskView,
    name: &str,
    r: &mut Report<'_>,
) -> Result<i32, Failed> {
    let Watched { aws, cluster, arn, timeout, elastic } = *w;
    let started = Instant::now();
    let mut last = seen.last_status.clone();
    let mut next = Some(seen.clone());
    loop {
        // The first look is the one until_running ended with.
        let task = match next.take() {
            Some(seen) => Some(seen),
            None => look(aws, cluster, arn).await?,
        };
        let since = || secs(SystemTime::now().duration_since(asked).unwrap_or_default());
        if let Some(task) = &task {
            if let Some(code) = exit_code(task, name) {
                r.line("status", format!("the probe exited with status {code} after {}", since()))
                    .map_err(super::write_failed)?;
                return Ok(code);
            }
            if task.last_status != last {
                last.clone_from(&task.last_status);
                r.line("status", format!("{last} after {}", since())).map_err(super::write_failed)?;
            }
            if task.last_status == TaskStatus::Stopped {
                return Err(stopped(task, elastic));
            }
        }
        if started.elapsed() >= timeout {
            return Err(Failed::new(
                Class::Timeout,
                format!("the probe had not exited after {} (last status {})", secs(timeout), or_none(last.as_str())),
                "the probe gives each connection 30 s at most: look at the task in the ECS console",
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "none yet"
    } else {
        s
    }
}

/// The failure of a task that stopped before it ran.
fn stopped(task: &TaskView, elastic: &ElasticProfile) -> Failed {
    let mut reasons: Vec<String> = task.stopped_reason.iter().cloned().collect();
    reasons.extend(task.containers.iter().filter_map(|c| c.reason.as_ref().map(|r| format!("{}: {r}", c.name))));
    if let Some(code) = &task.stop_code {
        reasons.insert(0, code.to_string());
    }
    let reason = if reasons.is_empty() { "ECS gave no reason".to_string() } else { reasons.join("; ") };
    class::of_stop(StopCause::of(task), &reason, elastic)
}

/// SIGINT or SIGTERM.
pub(super) async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// [`describe`], a failure of which ends the watch.
async fn look(aws: &AwsClients, cluster: &str, arn: &str) -> Result<Option<TaskView>, Failed> {
    describe(aws, cluster, arn)
        .await
        .map_err(|e| Failed::new(Class::Failed, e.to_string(), "`ecs-elastic-agent doctor` checks ecs:DescribeTasks"))
}

/// The task as ECS describes it now; `None` while ECS does not show it yet.
async fn describe(aws: &AwsClients, cluster: &str, arn: &str) -> Result<Option<TaskView>, AwsError> {
    let tasks = aws.describe_tasks(cluster, &[arn.to_string()], |_| true).await?;
    Ok(tasks.into_iter().next())
}

/// The phases of the start up to RUNNING, from ECS's timestamps: queued (RunTask sent to
/// accepted), provisioning, image pull, then container start (pulled to RUNNING). A point ECS
/// did not report folds its phase into the next one whose end is known.
pub(super) fn phases(task: &TaskView, asked: SystemTime, r: &mut Report<'_>) -> io::Result<()> {
    let points = [
        (WaitPhase::Queued.words(), task.created_at),
        (WaitPhase::Provisioning.words(), task.pull_started_at),
        (WaitPhase::ImagePull.words(), task.pull_stopped_at),
        ("container start", task.started_at.or(Some(SystemTime::now()))),
    ];
    let mut parts = Vec::new();
    let (mut from, mut first_unknown) = (asked, None::<&str>);
    for (name, end) in points {
        let Some(end) = end else {
            first_unknown.get_or_insert(name);
            continue;
        };
        let took = end.duration_since(from).unwrap_or_default();
        let named = match first_unknown.take() {
            Some(start) => format!("{start} through {name}"),
            None => name.to_string(),
        };
        parts.push(format!("{named} {}", secs(took)));
        from = end;
    }
    let total = from.duration_since(asked).unwrap_or_default();
    r.line("phases", format!("{} (total {} to RUNNING)", parts.join(", "), secs(total)))
}

/// Where the agent's output is: try reads no logs itself (the plugin has no CloudWatch Logs
/// client); it names the stream and the command that prints its first lines.
pub(super) fn logs(
    cluster: &ClusterProfile,
    region: &str,
    td: &TaskDefinitionRef,
    task: &TaskView,
    r: &mut Report<'_>,
) -> io::Result<()> {
    let task_id = task.arn.rsplit('/').next().unwrap_or(&task.arn);
    match (&cluster.log_group, &td.given) {
        (_, Some(_)) => r.line("logs", format!("as the log configuration of {} says", td.arn)),
        (None, None) => r.line("logs", "the cluster profile sets no LogGroup: the agent's output is not kept"),
        (Some(group), None) => {
            let stream = format!("gocd/{}/{task_id}", td.agent_container);
            r.line(
                "logs",
                format!(
                    "group {group}, stream {stream}; its first lines: aws logs get-log-events --region {region} --log-group-name {group} --log-stream-name {stream} --start-from-head --limit 20 --query 'events[].message'"
                ),
            )
        }
    }
}

/// What became of a StopTask.
pub(super) enum Stop {
    /// ECS says STOPPED, after this long.
    Stopped(Duration),
    /// ECS took the StopTask (desired STOPPED) but the task was not STOPPED within the wait.
    Stopping(Duration),
}

/// Stops the task and waits (up to `timeout`) until ECS says STOPPED.
///
/// # Errors
/// The failed StopTask call: the task may still run.
pub(super) async fn stop(aws: &AwsClients, cluster: &str, arn: &str, timeout: Duration) -> Result<Stop, String> {
    let started = Instant::now();
    aws.stop_task(cluster, arn, "ecs-elastic-agent try: done").await.map_err(|e| e.to_string())?;
    loop {
        match describe(aws, cluster, arn).await {
            Ok(Some(task)) if task.last_status != TaskStatus::Stopped => {}
            // Gone from ECS's answers, or STOPPED.
            Ok(_) => return Ok(Stop::Stopped(started.elapsed())),
            // The StopTask was taken: the task stops whether or not we can watch it.
            Err(_) => return Ok(Stop::Stopping(started.elapsed())),
        }
        if started.elapsed() >= timeout {
            return Ok(Stop::Stopping(started.elapsed()));
        }
        tokio::time::sleep(POLL).await;
    }
}
