//! Status reports: plain snapshots of what the plugin knows, rendered to HTML by minijinja
//! with HTML auto-escaping (every value a user or AWS controls is escaped). No remote assets;
//! no secret is ever put into a snapshot.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::SystemTime;

use minijinja::{context, Environment};
use serde::Serialize;

use crate::cluster::events::Event;
use crate::cluster::registry::{AgentRecord, Phase};
use crate::cluster::tasks::ContainerView;
use crate::cluster::Cluster;
use crate::aws::calls::OpCounts;

/// One cluster profile, as the reports show it.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterSnapshot {
    /// Cluster name or ARN.
    pub cluster_name: String,
    /// Profile key.
    pub key: String,
    /// Region.
    pub region: String,
    /// FARGATE, FARGATE_SPOT or EC2.
    pub launch_type: String,
    /// Role, if any.
    pub role_arn: Option<String>,
    /// Assumed session expiry.
    pub role_expires: Option<String>,
    /// Why AssumeRole last failed.
    pub role_error: Option<String>,
    /// AssumeRole calls so far.
    pub assume_role_calls: u64,
    /// Live agents.
    pub live: usize,
    /// MaxAgents.
    pub max_agents: u32,
    /// AgentRegisterTimeoutMinutes.
    pub register_timeout_minutes: u32,
    /// Agents by phase.
    pub by_phase: BTreeMap<String, usize>,
    /// Agents, newest first.
    pub agents: Vec<AgentRow>,
    /// Recent events, newest first.
    pub events: Vec<EventRow>,
    /// Newest problem, if any.
    pub last_problem: Option<EventRow>,
    /// Calls by operation.
    pub calls: BTreeMap<String, OpCounts>,
    /// All calls.
    pub calls_total: u64,
    /// All throttled calls.
    pub throttled_total: u64,
    /// ECS console link.
    pub console_url: String,
}

/// One agent row.
#[derive(Debug, Clone, Serialize)]
pub struct AgentRow {
    /// Agent id.
    pub agent_id: String,
    /// Job locator.
    pub job: String,
    /// Phase name.
    pub phase: String,
    /// Whether GoCD listed it.
    pub registered: bool,
    /// Capacity used.
    pub capacity: String,
    /// Image.
    pub image: String,
    /// Creation time.
    pub created: String,
    /// Task id (last ARN segment).
    pub task_id: Option<String>,
    /// Task ARN.
    pub task_arn: Option<String>,
    /// ECS console link to the task.
    pub task_url: Option<String>,
    /// Why it stopped.
    pub stop_reason: Option<String>,
    /// ECS statuses.
    pub last_status: String,
    /// Desired status.
    pub desired_status: String,
    /// Stop code.
    pub stop_code: Option<String>,
    /// Containers.
    pub containers: Vec<ContainerView>,
    /// The pipeline's environment.
    pub environment: String,
    /// Launch attempt.
    pub attempt: u32,
    /// Created, image pulled, started, registered, stopped.
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
    pub at: Option<String>,
}

/// One event row.
#[derive(Debug, Clone, Serialize)]
pub struct EventRow {
    /// `warning` or `error`.
    pub kind: String,
    /// When.
    pub at: String,
    /// What.
    pub message: String,
}

/// Takes a snapshot of a cluster from memory.
pub fn snapshot(cluster: &Cluster) -> ClusterSnapshot {
    let profile = cluster.profile();
    let region = cluster.aws.region.clone();
    let cluster_name = profile.cluster_name.clone();
    let name_only = cluster_name.rsplit('/').next().unwrap_or(&cluster_name).to_string();
    let console_url = format!("https://{region}.console.aws.amazon.com/ecs/v2/clusters/{name_only}/tasks?region={region}");
    let registry = cluster.registry().clone();
    let mut agents: Vec<&AgentRecord> = registry.all().collect();
    agents.sort_by_key(|a| std::cmp::Reverse(a.created_at));
    let rows: Vec<AgentRow> = agents.iter().map(|a| agent_row(a, &region, &name_only, profile.log_group.as_deref())).collect();
    let mut by_phase = BTreeMap::new();
    for a in &agents {
        *by_phase.entry(format!("{:?}", a.phase)).or_insert(0) += 1;
    }
    let events: Vec<EventRow> = cluster.events().recent().iter().take(30).map(event_row).collect();
    let calls: BTreeMap<String, OpCounts> = cluster.aws.calls.snapshot().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    ClusterSnapshot {
        key: cluster.key.clone(),
        launch_type: profile.launch_type.as_str().to_string(),
        role_arn: profile.role_arn.clone(),
        role_expires: cluster.aws.role.expires().map(when),
        role_error: cluster.aws.role.last_error(),
        assume_role_calls: cluster.aws.role.assume_role_calls.load(std::sync::atomic::Ordering::Relaxed),
        live: registry.live_count(),
        max_agents: profile.max_agents,
        register_timeout_minutes: profile.agent_register_timeout_minutes,
        by_phase,
        agents: rows,
        last_problem: events.first().cloned(),
        events,
        calls_total: calls.values().map(|c| c.calls).sum(),
        throttled_total: calls.values().map(|c| c.throttled).sum(),
        calls,
        console_url,
        region,
        cluster_name,
    }
}

/// Finds an agent by id, or by the job it serves (newest first).
pub fn find_agent(cluster: &Cluster, agent_id: Option<&str>, job_id: Option<i64>) -> Option<AgentRow> {
    let profile = cluster.profile();
    let registry = cluster.registry();
    let record = match (agent_id, job_id) {
        (Some(id), _) => registry.get(id),
        (None, Some(job)) => registry.all().filter(|a| a.job.job_id == job).max_by_key(|a| a.created_at),
        (None, None) => None,
    }?;
    let name_only = profile.cluster_name.rsplit('/').next().unwrap_or(&profile.cluster_name).to_string();
    Some(agent_row(record, &cluster.aws.region, &name_only, profile.log_group.as_deref()))
}

fn agent_row(a: &AgentRecord, region: &str, cluster: &str, log_group: Option<&str>) -> AgentRow {
    let task = a.task.as_ref();
    let task_id = a.task_arn.as_ref().and_then(|arn| arn.rsplit('/').next()).map(str::to_string);
    let task_url = task_id
        .as_ref()
        .map(|id| format!("https://{region}.console.aws.amazon.com/ecs/v2/clusters/{cluster}/tasks/{id}/configuration?region={region}"));
    let logs_url = match (log_group, &task_id) {
        (Some(group), Some(id)) => Some(format!(
            "https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#logsV2:log-groups/log-group/{}/log-events/{}",
            group.replace('/', "$252F"),
            format!("gocd/gocd-agent/{id}").replace('/', "$252F")
        )),
        _ => None,
    };
    let stopped = a.stopped_at.or(task.and_then(|t| t.stopped_at));
    AgentRow {
        agent_id: a.agent_id.clone(),
        job: a.job.locator(),
        phase: format!("{:?}", a.phase),
        registered: a.registered_at.is_some(),
        capacity: a.capacity.clone().unwrap_or_default(),
        image: a.image.clone(),
        created: when(a.created_at),
        task_id,
        task_arn: a.task_arn.clone(),
        task_url,
        stop_reason: a.stop_reason.clone(),
        last_status: task.map(|t| t.last_status.clone()).unwrap_or_else(|| "—".into()),
        desired_status: task.map(|t| t.desired_status.clone()).unwrap_or_else(|| "—".into()),
        stop_code: task.and_then(|t| t.stop_code.clone()),
        containers: task.map(|t| t.containers.clone()).unwrap_or_default(),
        environment: a.environment.clone().unwrap_or_else(|| "none".into()),
        attempt: a.attempt,
        timeline: vec![
            TimelineStep { name: "created", at: Some(when(task.and_then(|t| t.created_at).unwrap_or(a.created_at))) },
            TimelineStep { name: "image pulled", at: task.and_then(|t| t.pull_stopped_at).map(when) },
            TimelineStep { name: "started", at: task.and_then(|t| t.started_at).map(when) },
            TimelineStep { name: "registered", at: a.registered_at.map(when) },
            TimelineStep { name: "stopped", at: if a.phase == Phase::Stopped { stopped.map(when) } else { None } },
        ],
        logs_url,
    }
}

fn event_row(e: &Event) -> EventRow {
    let kind = match e.kind {
        crate::protocol::host_calls::HealthKind::Warning => "warning",
        crate::protocol::host_calls::HealthKind::Error => "error",
    };
    EventRow { kind: kind.into(), at: when(e.at), message: e.message.clone() }
}

/// `2026-11-30T13:04:11Z (3 min ago)`.
pub fn when(t: SystemTime) -> String {
    let absolute = humantime::format_rfc3339_seconds(t).to_string();
    let relative = match SystemTime::now().duration_since(t) {
        Ok(d) if d.as_secs() < 60 => format!("{} s ago", d.as_secs()),
        Ok(d) if d.as_secs() < 3600 => format!("{} min ago", d.as_secs() / 60),
        Ok(d) => format!("{} h ago", d.as_secs() / 3600),
        Err(e) => format!("in {} min", e.duration().as_secs() / 60),
    };
    format!("{absolute} ({relative})")
}

fn env() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        for (name, source) in [
            ("base.html", include_str!("templates/base.html")),
            ("plugin.html", include_str!("templates/plugin.html")),
            ("cluster.html", include_str!("templates/cluster.html")),
            ("agent.html", include_str!("templates/agent.html")),
        ] {
            if let Err(e) = env.add_template(name, source) {
                tracing::error!(template = name, error = %e, "status template does not compile");
            }
        }
        env
    })
}

fn render(name: &str, ctx: minijinja::Value) -> String {
    env()
        .get_template(name)
        .and_then(|t| t.render(ctx))
        .unwrap_or_else(|e| format!("<div>The {name} status report could not be rendered: {}</div>", escape(&e.to_string())))
}

/// The plugin report: every cluster profile at a glance.
pub fn render_plugin(server_id: &str, clusters: &[ClusterSnapshot], broken: &[String]) -> String {
    let totals = context! {
        live => clusters.iter().map(|c| c.live).sum::<usize>(),
        max => clusters.iter().map(|c| c.max_agents as usize).sum::<usize>(),
        errors => clusters.iter().map(|c| c.events.iter().filter(|e| e.kind == "error").count()).sum::<usize>() + broken.len(),
    };
    render("plugin.html", context! { version => env!("CARGO_PKG_VERSION"), server_id, clusters, broken, totals })
}

/// The cluster report.
pub fn render_cluster(c: &ClusterSnapshot) -> String {
    render("cluster.html", context! { c })
}

/// The agent report (`a` is `None` when the agent is unknown).
pub fn render_agent(a: Option<&AgentRow>, cluster_name: &str, region: &str, asked_agent: Option<&str>, asked_job: Option<&str>) -> String {
    render("agent.html", context! { a, cluster_name, region, asked_agent, asked_job })
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
