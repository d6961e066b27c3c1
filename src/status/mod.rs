//! Status reports: plain snapshots of what the plugin knows, rendered to HTML by minijinja with
//! HTML auto-escaping (every value a user, GoCD or AWS controls is escaped; links are built from
//! percent-encoded parts). Laid out like GoCD's own pages: summary counts first, then tables.
//! No remote assets (one inline `<style>`, no scripts, no fonts, no images); no secret is ever
//! put into a snapshot (no credentials, no auto-register key, no environment values).
//!
//! [`ClusterFacts`] is what a snapshot is built from, so tests can build one without AWS.

pub mod cost;
pub mod links;
mod render;
pub mod time;

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::Serialize;

pub use render::{render_agent, render_cluster, render_plugin};
pub use time::When;

use crate::aws::budget::Category;
use crate::aws::calls::OpCounts;
use crate::cluster::agents::tasks::{ContainerView, StopCode, TaskStatus};
use crate::cluster::agents::{AgentRecord, Phase};
use crate::cluster::base::recent::Event;
use crate::cluster::Cluster;
use crate::ids::{AgentId, ClusterKey, TaskArn};
use crate::protocol::host_calls::HealthKind;
use crate::settings::ClusterProfile;

/// One cluster profile, as the reports show it.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterSnapshot {
    /// Cluster name or ARN.
    pub cluster_name: String,
    /// Profile key.
    pub key: ClusterKey,
    /// Region.
    pub region: String,
    /// FARGATE, FARGATE_SPOT or EC2, or the `CapacityProviderStrategy` in words.
    pub launch_type: String,
    /// Role, if any.
    pub role_arn: Option<String>,
    /// Assumed session expiry.
    pub role_expires: Option<When>,
    /// Why AssumeRole last failed.
    pub role_error: Option<String>,
    /// AssumeRole calls so far.
    pub assume_role_calls: u64,
    /// Live agents (launching plus running).
    pub live: usize,
    /// MaxAgents.
    pub max_agents: u32,
    /// `live` as a percentage of `max_agents` (0 to 100).
    pub capacity_percent: u32,
    /// AgentRegisterTimeoutMinutes.
    pub register_timeout_minutes: u32,
    /// LogGroup.
    pub log_group: Option<String>,
    /// CloudWatch link to the log group.
    pub log_group_url: Option<String>,
    /// Agents by state, every state in a fixed order.
    pub states: Vec<StateCount>,
    /// Tasks ECS holds in `PROVISIONING` (a capacity provider scaling out for them), and when
    /// the oldest of them was created.
    pub provisioning: Provisioning,
    /// Agents, newest first.
    pub agents: Vec<AgentRow>,
    /// Recent events, newest first.
    pub events: Vec<EventRow>,
    /// Errors among `events`.
    pub errors: usize,
    /// Warnings among `events`.
    pub warnings: usize,
    /// Newest problem, if any.
    pub last_problem: Option<EventRow>,
    /// Calls by operation.
    pub calls: Vec<CallRow>,
    /// All call attempts.
    pub calls_total: u64,
    /// All throttled attempts.
    pub throttled_total: u64,
    /// All retries.
    pub retries_total: u64,
    /// Calls that failed for good.
    pub failed_total: u64,
    /// Tasks stopped by the orphan sweep.
    pub swept_orphans: u64,
    /// ECS console link.
    pub console_url: String,
    /// EC2 capacity (instances against min and max, waiting work) when `LaunchType` is EC2.
    pub ec2: Option<crate::cluster::capacity::ec2::report::PoolSnapshot<When>>,
    /// Agents Spot interrupted (Fargate Spot).
    pub spot_interruptions: u64,
    /// The same, by elastic profile (its hash), those with any.
    pub spot_interruptions_by_profile: Vec<ProfileCount>,
    /// Warm starts: jobs given to a kept agent, and jobs of a reusing elastic profile that
    /// started a task.
    pub reuse_hits: u64,
    /// See `reuse_hits`.
    pub reuse_misses: u64,
    /// The warm pools (`WarmAgents`), one row each.
    pub warm_pools: Vec<crate::cluster::capacity::warm::pools::PoolStatus>,
    /// The event queue (`EventQueueUrl`) and what came of it, when one is set.
    pub event_queue: Option<crate::cluster::base::recent::QueueStatus>,
    /// What jobs and warm pools cost lately (in memory since the plugin started).
    pub cost: cost::CostView,
    /// Image pulls per elastic profile and image (`cluster::image_pulls`).
    pub images: Vec<ImageRow>,
}

/// One image of one elastic profile: its pulls, their p50 and p95, its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageRow {
    /// The elastic profile's hash.
    pub elastic_profile: String,
    /// The image.
    pub image: String,
    /// Pulls counted since the plugin started.
    pub pulls: u64,
    /// Pulls in the window p50 and p95 are taken over.
    pub window: usize,
    /// Median pull, e.g. `14.2 s`.
    pub p50: String,
    /// 95th percentile pull.
    pub p95: String,
    /// ECR's `imageSizeInBytes`, e.g. `312.4 MiB`; `None` where ECR did not say.
    pub size: Option<String>,
}

/// The rows of the "Images" table.
pub fn image_rows(pulls: &crate::cluster::accounting::image_pulls::ImagePulls) -> Vec<ImageRow> {
    let secs = |d: Option<std::time::Duration>| d.map_or_else(String::new, |d| format!("{:.1} s", d.as_secs_f64()));
    pulls
        .all()
        .map(|(elastic_profile, image, s)| ImageRow {
            elastic_profile: elastic_profile.to_string(),
            image: image.to_string(),
            pulls: s.pulls,
            window: s.window(),
            p50: secs(s.p50()),
            p95: secs(s.p95()),
            size: pulls.size(image).map(size_text),
        })
        .collect()
}

/// `312.4 MiB`, `1.2 GiB`.
fn size_text(bytes: u64) -> String {
    let mib = bytes as f64 / (1024.0 * 1024.0);
    if mib >= 1024.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

/// A count for one elastic profile (its hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfileCount {
    /// The elastic profile's hash.
    pub elastic_profile: String,
    /// How many.
    pub count: u64,
}

/// How many agents are in one state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateCount {
    /// State name.
    pub label: &'static str,
    /// CSS class of its badge.
    pub class: &'static str,
    /// Agents in it.
    pub count: usize,
}

/// The job an agent serves.
#[derive(Debug, Clone, Serialize)]
pub struct JobView {
    /// `pipeline/counter/stage/counter/job`.
    pub locator: String,
    /// Pipeline name.
    pub pipeline: String,
    /// Pipeline counter.
    pub pipeline_counter: i64,
    /// Stage name.
    pub stage: String,
    /// Stage counter.
    pub stage_counter: String,
    /// Job name.
    pub job: String,
    /// GoCD's job id.
    pub job_id: i64,
    /// GoCD's job page (relative to the GoCD server).
    pub url: String,
}

/// One agent.
#[derive(Debug, Clone, Serialize)]
pub struct AgentRow {
    /// Agent id.
    pub agent_id: AgentId,
    /// Its job.
    pub job: JobView,
    /// State for people: launching, starting, idle, building, stopping, stopped.
    pub state: &'static str,
    /// CSS class of the state badge.
    pub state_class: &'static str,
    /// Whether GoCD listed it.
    pub registered: bool,
    /// Whether it stopped because something failed (exit code, failed start, launch error).
    pub failed: bool,
    /// Capacity used.
    pub capacity: String,
    /// Image.
    pub image: String,
    /// Hash of its elastic profile.
    pub elastic_profile: String,
    /// Creation time.
    pub created: When,
    /// Task id (last ARN segment).
    pub task_id: Option<String>,
    /// Task ARN.
    pub task_arn: Option<TaskArn>,
    /// ECS console link to the task.
    pub task_url: Option<String>,
    /// Why it stopped.
    pub stop_reason: Option<String>,
    /// ECS status (`—` before there is a task).
    #[serde(serialize_with = "or_dash")]
    pub last_status: Option<TaskStatus>,
    /// Desired status (`—` before there is a task).
    #[serde(serialize_with = "or_dash")]
    pub desired_status: Option<TaskStatus>,
    /// Stop code.
    pub stop_code: Option<StopCode>,
    /// Containers.
    pub containers: Vec<ContainerView>,
    /// The pipeline's environment.
    pub environment: Option<String>,
    /// Launch attempt.
    pub attempt: u32,
    /// Jobs it was given (more than one with warm starts).
    pub jobs_served: usize,
    /// Kept after its last job, waiting for the next (warm starts).
    pub waiting_for_next_job: bool,
    /// A warm agent not given a job yet (`job` only lent it its key).
    pub warm_without_job: bool,
    /// Task CPU units and memory, as ECS reports them.
    pub size: Option<String>,
    /// Availability zone.
    pub availability_zone: Option<String>,
    /// The task's tags, by key.
    pub tags: Vec<(String, String)>,
    /// Asked for, task accepted, image pull, running, registered, took its job, stopped.
    pub timeline: Vec<TimelineStep>,
    /// CloudWatch logs link.
    pub logs_url: Option<String>,
}

/// One step of an agent's life.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineStep {
    /// Step name.
    pub name: &'static str,
    /// When, if it happened.
    pub at: Option<When>,
    /// Time since the previous step that happened (`12 s`).
    pub after: Option<String>,
    /// `done`, `pending`, `failed` or `skipped` (a later step happened, this one not seen).
    pub state: &'static str,
}

/// One event (the same message seen again counts as a repeat of its newest occurrence).
#[derive(Debug, Clone, Serialize)]
pub struct EventRow {
    /// `warning` or `error`.
    pub kind: &'static str,
    /// When (the newest occurrence).
    pub at: When,
    /// What.
    pub message: String,
    /// How many times it happened among the kept events.
    pub repeats: usize,
}

/// Calls of one operation.
#[derive(Debug, Clone, Serialize)]
pub struct CallRow {
    /// Operation.
    pub operation: String,
    /// API budget category.
    pub category: String,
    /// Counts.
    pub counts: OpCounts,
}

/// What a cluster snapshot is made of (read from a [`Cluster`], or built by a test).
#[derive(Debug, Clone)]
pub struct ClusterFacts<'a> {
    /// Profile key.
    pub key: &'a str,
    /// The profile.
    pub profile: &'a ClusterProfile,
    /// Region the clients call.
    pub region: &'a str,
    /// Every agent record.
    pub agents: Vec<AgentRecord>,
    /// Recent events, newest first.
    pub events: Vec<Event>,
    /// Calls by operation.
    pub calls: BTreeMap<&'static str, OpCounts>,
    /// Session expiry of the assumed role.
    pub role_expires: Option<SystemTime>,
    /// Last AssumeRole failure.
    pub role_error: Option<String>,
    /// AssumeRole calls.
    pub assume_role_calls: u64,
    /// Tasks stopped by the orphan sweep.
    pub swept_orphans: u64,
}

/// Takes a snapshot of a cluster from memory.
pub fn snapshot(cluster: &Cluster) -> ClusterSnapshot {
    let (profile, aws) = (cluster.profile(), cluster.aws());
    // One lock at a time: each read's guard goes at the end of its own statement.
    let agents = cluster.registry().all().cloned().collect();
    let events = cluster.events().recent();
    let facts = ClusterFacts {
        key: cluster.key(),
        profile: &profile,
        region: &aws.region,
        agents,
        events,
        calls: aws.calls.snapshot(),
        role_expires: aws.role.expires(),
        role_error: aws.role.last_error(),
        assume_role_calls: aws.role.assume_role_calls.load(std::sync::atomic::Ordering::Relaxed),
        swept_orphans: cluster.swept_orphans(),
    };
    let now = cluster.now();
    let mut snapshot = build_snapshot(&facts, now);
    if let Some(kinds) = cluster.kinds(&profile) {
        // Each provider's kind and status, as learned at the first create-agent.
        snapshot.launch_type = format!("{} ({})", snapshot.launch_type, kinds.describe());
    }
    snapshot.ec2 = profile.ec2.as_ref().map(|cfg| cluster.ec2().snapshot(&profile, cfg, |t| When::at(t, now)));
    snapshot.spot_interruptions = cluster.registry().interruptions();
    snapshot.spot_interruptions_by_profile = cluster
        .registry()
        .interruptions_by_profile()
        .iter()
        .map(|(elastic_profile, count)| ProfileCount { elastic_profile: elastic_profile.clone(), count: *count })
        .collect();
    (snapshot.reuse_hits, snapshot.reuse_misses) = cluster.registry().reuse_counts();
    snapshot.warm_pools = cluster.warm_pool_status(now);
    snapshot.cost = cost::cost_view(&cluster.cost_summary(now));
    snapshot.images = image_rows(&cluster.image_pulls());
    if let Some(url) = &profile.event_queue_url {
        let mut queue = cluster.queue_status().clone();
        queue.url = Some(url.clone());
        snapshot.event_queue = Some(queue);
    }
    snapshot
}

/// Builds a snapshot as of `now`.
pub fn build_snapshot(facts: &ClusterFacts<'_>, now: SystemTime) -> ClusterSnapshot {
    let profile = facts.profile;
    let region = facts.region.to_string();
    let name_only = profile.cluster_short_name().to_string();
    let mut agents: Vec<&AgentRecord> = facts.agents.iter().collect();
    agents.sort_by_key(|a| std::cmp::Reverse(a.created_at));
    let rows: Vec<AgentRow> =
        agents.iter().map(|a| agent_row(a, &region, &name_only, profile.log_group.as_deref(), now)).collect();
    let live = agents.iter().filter(|a| a.phase.is_live()).count();
    let prefix = format!("ECS cluster {} ({region}): ", profile.cluster_name);
    let events = event_rows(&facts.events, &prefix, now);
    let calls: Vec<CallRow> = facts
        .calls
        .iter()
        .map(|(op, counts)| CallRow {
            operation: op.to_string(),
            category: category_label(Category::of(op)),
            counts: *counts,
        })
        .collect();
    let sum = |f: fn(&OpCounts) -> u64| calls.iter().map(|c| f(&c.counts)).sum::<u64>();
    let max = profile.max_agents.max(1) as usize;
    ClusterSnapshot {
        key: facts.key.into(),
        launch_type: match &profile.capacity_providers {
            Some(strategy) => strategy.to_string(),
            None => profile.launch_type.as_str().to_string(),
        },
        role_arn: profile.role_arn.clone(),
        role_expires: facts.role_expires.map(|t| When::at(t, now)),
        role_error: facts.role_error.clone(),
        assume_role_calls: facts.assume_role_calls,
        live,
        max_agents: profile.max_agents,
        capacity_percent: (live.min(max) * 100 / max) as u32,
        register_timeout_minutes: profile.agent_register_timeout_minutes,
        log_group_url: profile.log_group.as_deref().map(|g| links::log_group(&region, g)),
        log_group: profile.log_group.clone(),
        states: count_states(&rows),
        provisioning: provisioning(&rows),
        agents: rows,
        errors: events.iter().filter(|e| e.kind == "error").count(),
        warnings: events.iter().filter(|e| e.kind == "warning").count(),
        last_problem: events.first().cloned(),
        events,
        calls_total: sum(|c| c.calls),
        throttled_total: sum(|c| c.throttled),
        retries_total: sum(|c| c.retries),
        failed_total: sum(|c| c.failed),
        calls,
        swept_orphans: facts.swept_orphans,
        console_url: links::ecs_cluster(&region, &name_only),
        ec2: None,
        spot_interruptions: 0,
        spot_interruptions_by_profile: Vec::new(),
        reuse_hits: 0,
        reuse_misses: 0,
        warm_pools: Vec::new(),
        event_queue: None,
        cost: cost::CostView::default(),
        images: Vec::new(),
        region,
        cluster_name: profile.cluster_name.clone(),
    }
}

/// Finds an agent by id, or by the job it serves (newest first).
pub fn find_agent(cluster: &Cluster, agent_id: Option<&str>, job_id: Option<i64>) -> Option<AgentRow> {
    let (profile, aws) = (cluster.profile(), cluster.aws());
    let registry = cluster.registry();
    let record = match (agent_id, job_id) {
        (Some(id), _) => registry.get(id),
        (None, Some(job)) => registry.all().filter(|a| a.job.job_id == job).max_by_key(|a| a.created_at),
        (None, None) => None,
    }?;
    Some(agent_row(record, &aws.region, profile.cluster_short_name(), profile.log_group.as_deref(), cluster.now()))
}

/// A task's status as the report shows it: `—` when there is no task yet.
fn or_dash<S: serde::Serializer>(status: &Option<TaskStatus>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(status.as_ref().map_or("—", TaskStatus::as_str))
}

/// The states of the reports, in display order: (label, badge class).
const STATES: [(&str, &str); 6] = [
    ("launching", "st-launching"),
    ("starting", "st-starting"),
    ("idle", "st-idle"),
    ("building", "st-building"),
    ("stopping", "st-stopping"),
    ("stopped", "st-stopped"),
];

/// Tasks waiting in `PROVISIONING`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Provisioning {
    /// How many.
    pub count: usize,
    /// When the oldest was created.
    pub oldest: Option<When>,
}

/// The tasks of `rows` that ECS holds in `PROVISIONING`.
fn provisioning(rows: &[AgentRow]) -> Provisioning {
    let waiting: Vec<&AgentRow> = rows.iter().filter(|r| r.last_status == Some(TaskStatus::Provisioning)).collect();
    let oldest = waiting.iter().min_by(|a, b| a.created.iso.cmp(&b.created.iso)).map(|r| r.created.clone());
    Provisioning { count: waiting.len(), oldest }
}

fn count_states(rows: &[AgentRow]) -> Vec<StateCount> {
    STATES
        .iter()
        .map(|(label, class)| StateCount { label, class, count: rows.iter().filter(|r| r.state == *label).count() })
        .collect()
}

/// The state people want to see: the phase, refined by what GoCD said.
fn state_of(a: &AgentRecord) -> (&'static str, &'static str) {
    let label = match a.phase {
        Phase::Launching => "launching",
        Phase::Running if a.registered_at.is_none() => "starting",
        Phase::Running if a.idle_since.is_some() || a.assigned_at.is_none() => "idle",
        Phase::Running => "building",
        Phase::Stopping => "stopping",
        Phase::Stopped => "stopped",
    };
    STATES.iter().copied().find(|(l, _)| *l == label).unwrap_or(("stopped", "st-stopped"))
}

/// One agent as of `now`; `cluster` is the cluster's short name.
pub fn agent_row(a: &AgentRecord, region: &str, cluster: &str, log_group: Option<&str>, now: SystemTime) -> AgentRow {
    let task = a.task.as_ref();
    let task_id = a.task_arn.as_ref().and_then(|arn| arn.rsplit('/').next()).map(str::to_string);
    let task_url = task_id.as_ref().map(|id| links::ecs_task(region, cluster, id));
    let container = task.and_then(|t| t.containers.first()).map_or("gocd-agent", |c| c.name.as_str());
    let logs_url = match (log_group, &task_id) {
        (Some(group), Some(id)) => Some(links::log_stream(region, group, &format!("gocd/{container}/{id}"))),
        _ => None,
    };
    let containers = task.map(|t| t.containers.clone()).unwrap_or_default();
    let stop_code = task.and_then(|t| t.stop_code.clone());
    let failed = a.phase == Phase::Stopped
        && (containers.iter().any(|c| c.exit_code.is_some_and(|code| code != 0))
            || matches!(stop_code, Some(StopCode::TaskFailedToStart | StopCode::EssentialContainerExited))
            || a.stop_reason.as_deref().is_some_and(|r| r.starts_with("launch failed")));
    let (state, state_class) = state_of(a);
    let mut tags: Vec<(String, String)> =
        task.map(|t| t.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default();
    tags.sort();
    let job = &a.job;
    AgentRow {
        agent_id: a.agent_id.clone(),
        job: JobView {
            locator: job.locator(),
            pipeline: job.pipeline_name.clone(),
            pipeline_counter: job.pipeline_counter,
            stage: job.stage_name.clone(),
            stage_counter: job.stage_counter.clone(),
            job: job.job_name.clone(),
            job_id: job.job_id,
            url: links::gocd_job(
                &job.pipeline_name,
                job.pipeline_counter,
                &job.stage_name,
                &job.stage_counter,
                &job.job_name,
            ),
        },
        state,
        state_class,
        registered: a.registered_at.is_some(),
        failed,
        capacity: a.capacity.map(|c| c.as_str().to_string()).unwrap_or_default(),
        image: a.image.clone(),
        elastic_profile: a.elastic_profile.clone(),
        created: When::at(a.created_at, now),
        task_id,
        task_arn: a.task_arn.clone(),
        task_url,
        stop_reason: a.stop_reason.clone(),
        last_status: task.map(|t| t.last_status.clone()),
        desired_status: task.map(|t| t.desired_status.clone()),
        stop_code,
        containers,
        environment: a.environment.clone(),
        attempt: a.attempt,
        jobs_served: a.served_jobs.len(),
        waiting_for_next_job: a.waiting_since.is_some(),
        warm_without_job: a.warm && a.served_jobs.is_empty(),
        size: task.and_then(|t| Some(format!("{} CPU units, {} MiB", t.cpu.as_ref()?, t.memory.as_ref()?))),
        availability_zone: task.and_then(|t| t.availability_zone.clone()),
        tags,
        timeline: timeline(a, failed, now),
        logs_url,
    }
}

/// The agent's start, phase by phase (the points of a job's wait, `cluster::job_wait`), then
/// its stop. A point ECS did not report while a later one happened is "not reported"; a point a
/// stopped agent never reached is "not reached", not "not yet".
fn timeline(a: &AgentRecord, failed: bool, now: SystemTime) -> Vec<TimelineStep> {
    let task = a.task.as_ref();
    let stopped = if a.phase == Phase::Stopped { a.stopped_at.or(task.and_then(|t| t.stopped_at)) } else { None };
    let points: [(&'static str, Option<SystemTime>); 8] = [
        ("asked for (create-agent)", Some(a.job_requested_at.unwrap_or(a.created_at))),
        ("task accepted", task.and_then(|t| t.created_at)),
        ("image pull started", task.and_then(|t| t.pull_started_at)),
        ("image pulled", task.and_then(|t| t.pull_stopped_at)),
        ("running", task.and_then(|t| t.started_at)),
        ("registered", a.registered_at),
        ("took its job", a.assigned_at),
        ("stopped", stopped),
    ];
    let last_done = points.iter().rposition(|(_, t)| t.is_some()).unwrap_or(0);
    // The last point is the stop, shown failed when the agent stopped because something failed.
    let stop = points.len() - 1;
    let mut previous: Option<SystemTime> = None;
    points
        .iter()
        .enumerate()
        .map(|(i, (name, at))| {
            let after = match (previous, at) {
                (Some(p), Some(t)) => Some(time::span(t.duration_since(p).unwrap_or_default())),
                _ => None,
            };
            if at.is_some() {
                previous = *at;
            }
            let state = match at {
                Some(_) if i == stop && failed => "failed",
                Some(_) => "done",
                None if i < last_done && stopped.is_none() => "skipped",
                None if stopped.is_some() => "never",
                None => "pending",
            };
            TimelineStep { name, at: at.map(|t| When::at(t, now)), after, state }
        })
        .collect()
}

/// Events newest first, repeats folded into their newest occurrence, at most 30 rows; the
/// `ECS cluster NAME (REGION): ` prefix of server-health messages is left out (the report says
/// which cluster).
fn event_rows(events: &[Event], prefix: &str, now: SystemTime) -> Vec<EventRow> {
    let mut rows: Vec<EventRow> = Vec::new();
    for e in events {
        let message = e.message.strip_prefix(prefix).unwrap_or(&e.message);
        let kind = match e.kind {
            HealthKind::Warning => "warning",
            HealthKind::Error => "error",
        };
        if let Some(row) = rows.iter_mut().find(|r| r.message == message && r.kind == kind) {
            row.repeats += 1;
        } else if rows.len() < 30 {
            rows.push(EventRow { kind, at: When::at(e.at, now), message: message.to_string(), repeats: 1 });
        }
    }
    rows
}

/// `EcsRead` → `ecs read`.
fn category_label(category: Category) -> String {
    let mut label = String::new();
    for (i, ch) in format!("{category:?}").chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            label.push(' ');
        }
        label.push(ch.to_ascii_lowercase());
    }
    label
}
