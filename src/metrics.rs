//! Prometheus metrics (text exposition format 0.0.4), served at `GET /metrics` when
//! `serve --metrics-addr ADDR` is given; off otherwise (the counters still count, nobody reads).
//!
//! - counted as things happen: launches by result, launch-to-register seconds (histogram),
//!   requests by name and result;
//! - computed at scrape from the plugin's clusters: agents by cluster profile, elastic profile and
//!   state, `MaxAgents`, orphans swept, AWS calls, throttles, retries and failures by operation
//!   and category (from each account's `CallStats`), AssumeRole calls, what completed jobs and
//!   warm pools' idle agents cost (USD counters by cluster profile and elastic profile).
//!
//! Metrics never see the plugin itself: the plugin registers as a [`ClusterGauges`] after start
//! (held weakly), and a scrape asks it for its clusters.
//!
//! The HTTP side is a minimal HTTP/1.1 responder on tokio: one request per connection,
//! `GET /metrics` → 200, anything else → 404. No secret is ever a label: labels are cluster
//! names, regions, role ARNs, profile hashes, request names and result words.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::aws::budget::Category;
use crate::cluster::accounting::job_wait::WAIT_BUCKETS;
use crate::cluster::agents::Phase;
use crate::cluster::Cluster;
use crate::settings::LaunchType;

/// What a scrape reads the cluster gauges from (the plugin, which registers with
/// [`Metrics::attach`]).
pub trait ClusterGauges: Send + Sync {
    /// Every cluster known now, in a stable order.
    fn clusters(&self) -> Vec<Arc<Cluster>>;
}

/// What one create-agent came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchResult {
    /// ECS accepted the task on the capacity the profile asked for.
    Started,
    /// FARGATE_SPOT was refused and the task runs on FARGATE.
    FellBackToFargate,
    /// The elastic profile does not fit the cluster profile (allow-lists, sizes, launch type).
    Refused,
    /// The launch failed (task definition, networking or RunTask).
    Failed,
    /// A live agent already serves the job: nothing started.
    Deduplicated,
    /// `MaxAgents` agents are live: the job waits.
    MaxAgentsReached,
}

impl LaunchResult {
    const ALL: [LaunchResult; 6] = [
        LaunchResult::Started,
        LaunchResult::FellBackToFargate,
        LaunchResult::Refused,
        LaunchResult::Failed,
        LaunchResult::Deduplicated,
        LaunchResult::MaxAgentsReached,
    ];

    /// The `result` label.
    pub fn label(self) -> &'static str {
        match self {
            LaunchResult::Started => "started",
            LaunchResult::FellBackToFargate => "fell_back_to_fargate",
            LaunchResult::Refused => "refused",
            LaunchResult::Failed => "failed",
            LaunchResult::Deduplicated => "deduplicated",
            LaunchResult::MaxAgentsReached => "max_agents_reached",
        }
    }

    /// `Started`, or `FellBackToFargate` when a FARGATE_SPOT profile's task runs on FARGATE.
    pub fn started_on(launch_type: LaunchType, capacity: Option<&str>) -> LaunchResult {
        if launch_type == LaunchType::FargateSpot && capacity == Some("FARGATE") {
            LaunchResult::FellBackToFargate
        } else {
            LaunchResult::Started
        }
    }
}

/// Upper bounds (seconds) of the launch-to-register histogram.
const REGISTER_BUCKETS: [f64; 12] = [5.0, 10.0, 15.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 900.0];

#[derive(Debug, Default, Clone)]
struct Histogram {
    /// Observations per bucket (not cumulative); the last slot is +Inf.
    counts: [u64; REGISTER_BUCKETS.len() + 1],
    sum: f64,
}

/// The plugin's metrics (shared by the plugin and the HTTP side).
#[derive(Debug, Default)]
pub struct Metrics {
    launches: [AtomicU64; LaunchResult::ALL.len()],
    register: Mutex<Histogram>,
    requests: Mutex<BTreeMap<(String, &'static str), u64>>,
    gauges: Mutex<Option<Weak<dyn ClusterGauges>>>,
}

impl Metrics {
    /// Counts one create-agent outcome.
    pub fn launch(&self, result: LaunchResult) {
        let i = LaunchResult::ALL.iter().position(|r| *r == result).unwrap_or(0);
        self.launches[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Observes how long an agent took from create-agent to GoCD listing it.
    pub fn registered_after(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let mut h = self.register.lock().unwrap_or_else(PoisonError::into_inner);
        let i = REGISTER_BUCKETS.iter().position(|b| secs <= *b).unwrap_or(REGISTER_BUCKETS.len());
        h.counts[i] += 1;
        h.sum += secs;
    }

    /// Counts one answered request: its v5 name and `ok` or the error's `metric_label`.
    pub fn request(&self, name: &str, result: &'static str) {
        let short = name.strip_prefix("cd.go.elastic-agent.").unwrap_or(name).to_string();
        *self.requests.lock().unwrap_or_else(PoisonError::into_inner).entry((short, result)).or_default() += 1;
    }

    /// Lets scrapes read the clusters of `gauges` (held weakly: metrics never keep it alive).
    pub fn attach<G: ClusterGauges + 'static>(&self, gauges: &Arc<G>) {
        let weak: Weak<G> = Arc::downgrade(gauges);
        *self.gauges.lock().unwrap_or_else(PoisonError::into_inner) = Some(weak);
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        let gauges = self.gauges.lock().unwrap_or_else(PoisonError::into_inner).as_ref().and_then(|w| w.upgrade());
        header(&mut out, "ecs_ea_build_info", "gauge", "The plugin's version.");
        sample(&mut out, "ecs_ea_build_info", &[("version", env!("CARGO_PKG_VERSION"))], 1.0);
        if let Some(gauges) = &gauges {
            clusters(&mut out, &gauges.clusters());
        }
        header(&mut out, "ecs_ea_launches_total", "counter", "create-agent outcomes by result.");
        for (r, n) in LaunchResult::ALL.iter().zip(&self.launches) {
            sample(&mut out, "ecs_ea_launches_total", &[("result", r.label())], n.load(Ordering::Relaxed) as f64);
        }
        self.render_histogram(&mut out);
        header(
            &mut out,
            "ecs_ea_requests_total",
            "counter",
            "Requests from GoCD answered, by request and result (ok or the error kind).",
        );
        for ((name, result), n) in self.requests.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            sample(&mut out, "ecs_ea_requests_total", &[("request", name), ("result", result)], *n as f64);
        }
        out
    }

    fn render_histogram(&self, out: &mut String) {
        let name = "ecs_ea_launch_to_register_seconds";
        let h = self.register.lock().unwrap_or_else(PoisonError::into_inner).clone();
        header(
            out,
            name,
            "histogram",
            "Seconds from create-agent to server-ping first seeing the agent registered with GoCD.",
        );
        histogram(out, name, &[], &REGISTER_BUCKETS, &h.counts, h.sum);
    }
}

/// One histogram's samples: cumulative `_bucket`s over `bounds` (then `+Inf`, the last of
/// `counts`, which are per bucket), `_sum` and `_count`, each with `labels`.
fn histogram(out: &mut String, name: &str, labels: &[(&str, &str)], bounds: &[f64], counts: &[u64], sum: f64) {
    let bucket = format!("{name}_bucket");
    let mut cumulative = 0;
    for (i, count) in counts.iter().enumerate() {
        cumulative += count;
        let le = bounds.get(i).map_or_else(|| "+Inf".to_string(), f64::to_string);
        let with_le: Vec<(&str, &str)> = labels.iter().copied().chain([("le", le.as_str())]).collect();
        sample(out, &bucket, &with_le, cumulative as f64);
    }
    sample(out, &format!("{name}_sum"), labels, sum);
    sample(out, &format!("{name}_count"), labels, cumulative as f64);
}

/// Agents, limits, AWS calls and AssumeRole calls of every known cluster.
fn clusters(out: &mut String, clusters: &[Arc<Cluster>]) {
    header(
        out,
        "ecs_ea_agents",
        "gauge",
        "Agents the plugin knows, by cluster profile, elastic profile (hash) and state.",
    );
    for c in clusters {
        let profile = c.profile();
        let mut by: BTreeMap<String, [u64; 4]> = BTreeMap::new();
        for a in c.registry().all() {
            by.entry(a.elastic_profile.clone()).or_default()[phase_index(a.phase)] += 1;
        }
        for (elastic, counts) in &by {
            for (state, n) in ["launching", "running", "stopping", "stopped"].iter().zip(counts) {
                let labels = [
                    ("cluster", profile.cluster_name.as_str()),
                    ("cluster_profile", c.key()),
                    ("region", &c.aws().region),
                    ("elastic_profile", elastic),
                    ("state", state),
                ];
                sample(out, "ecs_ea_agents", &labels, *n as f64);
            }
        }
    }
    header(out, "ecs_ea_max_agents", "gauge", "MaxAgents of each cluster profile.");
    for c in clusters {
        let profile = c.profile();
        let labels =
            [("cluster", profile.cluster_name.as_str()), ("cluster_profile", c.key()), ("region", &c.aws().region)];
        sample(out, "ecs_ea_max_agents", &labels, f64::from(profile.max_agents));
    }
    header(
        out,
        "ecs_ea_orphans_swept_total",
        "counter",
        "Tasks of ours that no agent record explained, stopped by the orphan sweep.",
    );
    for c in clusters {
        let profile = c.profile();
        let labels =
            [("cluster", profile.cluster_name.as_str()), ("cluster_profile", c.key()), ("region", &c.aws().region)];
        sample(out, "ecs_ea_orphans_swept_total", &labels, c.swept_orphans() as f64);
    }
    job_waits(out, clusters);
    image_pulls(out, clusters);
    costs(out, clusters);
    aws_calls(out, clusters);
}

/// What completed jobs cost, and warm pools' idle agents, in USD since the plugin started, by
/// cluster profile and elastic profile (no pipeline labels: their number is the users').
fn costs(out: &mut String, clusters: &[Arc<Cluster>]) {
    let totals: Vec<_> = clusters.iter().map(|c| (c, c.cost_totals())).collect();
    let jobs = "ecs_ea_job_cost_usd_total";
    header(
        out,
        jobs,
        "counter",
        "What completed jobs cost in USD (their agents' share, by the price table), by cluster profile and elastic profile (hash).",
    );
    for (c, (job_totals, _)) in &totals {
        cost_samples(out, jobs, c, job_totals);
    }
    let pools = "ecs_ea_warm_pool_idle_cost_usd_total";
    header(
        out,
        pools,
        "counter",
        "What warm and kept agents cost in USD while they waited idle for a job, by cluster profile and elastic profile (hash).",
    );
    for (c, (_, pool_totals)) in &totals {
        cost_samples(out, pools, c, pool_totals);
    }
}

fn cost_samples(out: &mut String, name: &str, c: &Cluster, totals: &[(String, f64)]) {
    let profile = c.profile();
    let region = c.aws().region.clone();
    for (elastic, usd) in totals {
        let labels = [
            ("cluster", profile.cluster_name.as_str()),
            ("cluster_profile", c.key().as_str()),
            ("region", region.as_str()),
            ("elastic_profile", elastic.as_str()),
        ];
        sample(out, name, &labels, *usd);
    }
}

/// The job-wait histograms: from create-agent to the agent taking its job, per phase.
fn job_waits(out: &mut String, clusters: &[Arc<Cluster>]) {
    let name = "ecs_ea_job_wait_seconds";
    header(
        out,
        name,
        "histogram",
        "Seconds a job waited for its agent, by cluster profile, elastic profile (hash) and phase \
         (queued, provisioning, image_pull, agent_start, total).",
    );
    for c in clusters {
        let profile = c.profile();
        let region = c.aws().region.clone();
        for (elastic, phase, h) in c.job_waits().all() {
            let labels = [
                ("cluster", profile.cluster_name.as_str()),
                ("cluster_profile", c.key().as_str()),
                ("region", region.as_str()),
                ("elastic_profile", elastic),
                ("phase", phase.label()),
            ];
            histogram(out, name, &labels, &WAIT_BUCKETS, &h.counts, h.sum);
        }
    }
}

/// The image-pull histograms: ECS's `pullStartedAt` to `pullStoppedAt` of each agent task the
/// plugin saw start, per image (`cluster::image_pulls`).
fn image_pulls(out: &mut String, clusters: &[Arc<Cluster>]) {
    let name = "ecs_ea_image_pull_seconds";
    header(
        out,
        name,
        "histogram",
        "Seconds an agent task's image pull took (ECS's pullStartedAt to pullStoppedAt), by cluster profile, \
         elastic profile (hash) and image.",
    );
    for c in clusters {
        let profile = c.profile();
        let region = c.aws().region.clone();
        for (elastic, image, s) in c.image_pulls().all() {
            let labels = [
                ("cluster", profile.cluster_name.as_str()),
                ("cluster_profile", c.key().as_str()),
                ("region", region.as_str()),
                ("elastic_profile", elastic),
                ("image", image),
            ];
            histogram(out, name, &labels, &WAIT_BUCKETS, &s.histogram.counts, s.histogram.sum);
        }
    }
}

fn phase_index(phase: Phase) -> usize {
    match phase {
        Phase::Launching => 0,
        Phase::Running => 1,
        Phase::Stopping => 2,
        Phase::Stopped => 3,
    }
}

/// Call counts per account (clients shared by several profiles are counted once).
fn aws_calls(out: &mut String, clusters: &[Arc<Cluster>]) {
    type Key = (String, String, String, &'static str);
    let mut seen = Vec::new();
    let mut calls: BTreeMap<Key, [u64; 4]> = BTreeMap::new();
    let mut assume: BTreeMap<(String, String), u64> = BTreeMap::new();
    for c in clusters {
        let stats = Arc::as_ptr(&c.aws().calls);
        if seen.contains(&stats) {
            continue;
        }
        seen.push(stats);
        let role = c.aws().role_arn.clone().unwrap_or_default();
        for (op, n) in c.aws().calls.snapshot() {
            let key = (c.aws().region.clone(), role.clone(), category_label(Category::of(op)), op);
            let e = calls.entry(key).or_default();
            for (slot, v) in e.iter_mut().zip([n.calls, n.throttled, n.retries, n.failed]) {
                *slot += v;
            }
        }
        if !role.is_empty() {
            *assume.entry((c.aws().region.clone(), role)).or_default() +=
                c.aws().role.assume_role_calls.load(Ordering::Relaxed);
        }
    }
    let series = [
        ("ecs_ea_aws_calls_total", "AWS call attempts, by operation and API budget category."),
        ("ecs_ea_aws_throttled_total", "AWS call attempts AWS throttled."),
        ("ecs_ea_aws_retries_total", "AWS call attempts that were retries."),
        ("ecs_ea_aws_failures_total", "AWS calls that failed for good (after retries)."),
    ];
    for (i, (name, help)) in series.iter().enumerate() {
        header(out, name, "counter", help);
        for ((region, role, category, op), n) in &calls {
            let labels = [("region", region.as_str()), ("role", role), ("category", category), ("operation", op)];
            sample(out, name, &labels, n[i] as f64);
        }
    }
    header(out, "ecs_ea_assume_role_calls_total", "counter", "AssumeRole calls (one per session and refresh).");
    for ((region, role), n) in &assume {
        sample(out, "ecs_ea_assume_role_calls_total", &[("region", region), ("role", role)], *n as f64);
    }
}

/// `EcsRead` → `ecs_read`.
fn category_label(category: Category) -> String {
    let mut label = String::new();
    for (i, ch) in format!("{category:?}").chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            label.push('_');
        }
        label.push(ch.to_ascii_lowercase());
    }
    label
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape_label(v));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Label values escape `\`, `"` and newlines.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The largest request head read before answering.
const MAX_HEAD: usize = 16 * 1024;
/// How long one connection may take.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections answered at once; further ones wait in the listen backlog (each one
/// used to get a task and up to 10 s, however many arrived).
pub const MAX_CONNECTIONS: usize = 16;

/// Answers scrapes on `listener` until the task is dropped (the runtime ends with the plugin).
pub async fn serve_http(listener: TcpListener, metrics: Arc<Metrics>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        // A free slot first: beyond MAX_CONNECTIONS the kernel's backlog holds the rest.
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        match listener.accept().await {
            Ok((stream, _peer)) => {
                let metrics = metrics.clone();
                tokio::spawn(async move {
                    if let Ok(Err(e)) = tokio::time::timeout(CONNECTION_TIMEOUT, answer(stream, &metrics)).await {
                        tracing::debug!(error = %e, "metrics connection failed");
                    }
                    drop(slot);
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "metrics listener could not accept a connection");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

async fn answer(mut stream: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 || head.len() + n > MAX_HEAD {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    let mut first = text.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, content_type, body) = if method == "GET" && path == "/metrics" {
        ("200 OK", "text/plain; version=0.0.4; charset=utf-8", metrics.render())
    } else {
        ("404 Not Found", "text/plain; charset=utf-8", "not found: metrics are at GET /metrics\n".to_string())
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histogram_render_in_text_format() {
        let m = Metrics::default();
        m.launch(LaunchResult::Started);
        m.launch(LaunchResult::started_on(LaunchType::FargateSpot, Some("FARGATE")));
        m.launch(LaunchResult::Deduplicated);
        m.registered_after(Duration::from_secs(12));
        m.registered_after(Duration::from_secs(2000));
        m.request("cd.go.elastic-agent.create-agent", "ok");
        let text = m.render();
        assert!(text.contains("ecs_ea_launches_total{result=\"started\"} 1\n"), "{text}");
        assert!(text.contains("ecs_ea_launches_total{result=\"fell_back_to_fargate\"} 1\n"));
        assert!(text.contains("ecs_ea_launches_total{result=\"refused\"} 0\n"));
        assert!(text.contains("ecs_ea_launch_to_register_seconds_bucket{le=\"10\"} 0\n"));
        assert!(text.contains("ecs_ea_launch_to_register_seconds_bucket{le=\"15\"} 1\n"));
        assert!(text.contains("ecs_ea_launch_to_register_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("ecs_ea_launch_to_register_seconds_sum 2012\n"));
        assert!(text.contains("ecs_ea_launch_to_register_seconds_count 2\n"));
        assert!(text.contains("ecs_ea_requests_total{request=\"create-agent\",result=\"ok\"} 1\n"));
        assert!(text.contains("# TYPE ecs_ea_launch_to_register_seconds histogram\n"));
    }

    #[test]
    fn labels_are_escaped_and_categories_snake_cased() {
        let mut out = String::new();
        sample(&mut out, "m", &[("a", "x\"y\\z\nw")], 1.0);
        assert_eq!(out, "m{a=\"x\\\"y\\\\z\\nw\"} 1\n");
        assert_eq!(category_label(Category::EcsRead), "ecs_read");
        assert_eq!(category_label(Category::Sts), "sts");
    }
}
