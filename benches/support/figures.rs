//! The figures of README "Performance", one function each. Every figure runs in its own world:
//! a fresh moto, the counting proxy between the plugin and moto with AWS's own rules on (every
//! proxy enforces `tests/world/aws_rules.rs` by default: request limits, ListTasks paging, and
//! AWS's rate quotas per account and region), plus `world::proxy::aws_like`'s request limits and
//! paging, and the real plugin binary. AWS calls are counted by the proxy, never by the plugin's
//! own counters.
//!
//! Count figures are deterministic; time figures depend on the machine and on moto, and are
//! only checked when asked (`check_time`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use ecs_elastic_agent::cluster::base::identity;
use serde_json::{json, Value};
use tokio::task::JoinSet;

use super::seed::{self, Owner, Seeded};
use super::stdio::{percentile, Launch, StdioProcess};
use super::table::{ratio, Row};
use crate::world::ec2::{create_instance_profile, Ec2Policy, InstanceSimulator};
use crate::world::host::{props, GoCdHost, HostConfig, Props};
use crate::world::moto::{self, Moto, REGION, TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY};
use crate::world::profiles::{self, elastic_props};
use crate::world::proxy::{aws_like, Outcome, Proxy};
use crate::world::Fleet;

/// The role of the AssumeRole figure (moto lets the base account assume it).
pub const ROLE_ARN: &str = "arn:aws:iam::111111111111:role/gocd-bench";
const ROLE_ACCOUNT: &str = "111111111111";
const SERVER_PING: &str = "cd.go.elastic-agent.server-ping";
const SHOULD_ASSIGN_WORK: &str = "cd.go.elastic-agent.should-assign-work";

/// The plugin binary (release under `cargo bench`, debug under `cargo test`), found as every
/// world finds it.
pub use crate::world::host::plugin_binary;

/// The plugin's environment, as the host simulator sets it: AWS is `endpoint`, with test keys.
pub fn plugin_env(endpoint: &str) -> Vec<(String, String)> {
    [
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_ACCESS_KEY_ID", TEST_ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", TEST_SECRET_ACCESS_KEY),
        ("AWS_REGION", REGION),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/nonexistent/ecs-ea-bench/config"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/ecs-ea-bench/credentials"),
        ("RUST_LOG", "info"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// A fresh moto and the counting proxy in front of it, answering as AWS would.
pub struct Aws {
    /// moto.
    pub moto: Moto,
    /// The proxy the plugin talks to.
    pub proxy: Proxy,
    /// The base account, for the benchmark's own calls (straight to moto, not counted).
    pub base: SdkConfig,
}

impl Aws {
    /// Starts both.
    pub async fn start() -> Aws {
        let moto = Moto::start().await;
        let proxy = Proxy::start(moto.addr()).await;
        proxy.add_rule("aws-request-limits", aws_like::ecs_request_limits());
        proxy.add_rule("aws-list-tasks-paging", aws_like::list_tasks_paging(moto.addr()));
        let base = moto.base_config().await;
        Aws { moto, proxy, base }
    }

    /// A host simulator config for the plugin binary, pointed at the proxy.
    pub fn host_config(&self) -> HostConfig {
        let mut cfg = HostConfig::new(&self.proxy.endpoint());
        cfg.program = Some((plugin_binary(), vec!["serve".into()]));
        // Figures are measured at the level a server runs at (the test world logs at trace).
        cfg.env.push(("RUST_LOG".into(), "info".into()));
        cfg
    }
}

/// A Fargate cluster profile for a benchmark: room for every agent, and agents that never
/// register (nothing plays the containers here) are left alone for the whole run.
pub fn cluster_props(cluster: &str, extra: &[(&str, &str)]) -> Props {
    let mut p = profiles::cluster_props(cluster, &[("MaxAgents", "1000"), ("AgentRegisterTimeoutMinutes", "120")]);
    p.extend(props(extra));
    p
}

fn ceil_div(n: usize, d: usize) -> u64 {
    n.div_ceil(d) as u64
}

fn is_ecs_read(key: &str) -> bool {
    key.strip_prefix("ecs:")
        .is_some_and(|op| op.starts_with("List") || op.starts_with("Describe") || op.starts_with("Get"))
}

fn sum(counts: &BTreeMap<String, u64>, keep: impl Fn(&str) -> bool) -> u64 {
    counts.iter().filter(|(k, _)| keep(k)).map(|(_, v)| v).sum()
}

fn job_json(job_id: i64) -> Value {
    serde_json::to_value(seed::job(job_id)).expect("a job identifier as JSON")
}

fn create_agent_body(host: &GoCdHost, cluster: &Props, elastic: &Props, job_id: i64) -> Value {
    json!({
        "auto_register_key": host.issue_key(None),
        "elastic_agent_profile_properties": elastic,
        "cluster_profile_properties": cluster,
        "job_identifier": job_json(job_id),
    })
}

fn should_assign_work_body(agent_id: &str, job: &Value, cluster: &Props) -> Value {
    json!({
        "agent": {"agent_id": agent_id, "agent_state": "Idle", "build_state": "Idle", "config_state": "Enabled"},
        "job_identifier": job,
        "elastic_agent_profile_properties": elastic_props(),
        "cluster_profile_properties": cluster,
    })
}

/// Sends requests from the host simulator, `at_once` in flight; panics on any non-200 answer.
async fn send_all(host: &GoCdHost, requests: Vec<(&'static str, Value)>, at_once: usize) {
    let mut pending = requests.into_iter();
    let mut in_flight = JoinSet::new();
    loop {
        while in_flight.len() < at_once {
            let Some((name, body)) = pending.next() else { break };
            let host = host.clone();
            in_flight.spawn(async move { (name, host.request(name, body).await) });
        }
        let Some(done) = in_flight.join_next().await else { break };
        let (name, reply) = done.expect("a request task panicked");
        match reply {
            Ok(r) if r.code == 200 => {}
            Ok(r) => panic!("{name} answered {}: {}", r.code, r.body),
            Err(e) => panic!("{name} got no answer: {e:?}\n{}", host.with_state(|s| s.summary())),
        }
    }
}

/// A stdio call from async code (the driver blocks; the proxy keeps running on other workers).
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn server_ping(plugin: &mut StdioProcess, cluster: &Props) {
    let body = json!({"all_cluster_profile_properties": [cluster]});
    let (_, answer) =
        blocking(|| plugin.call(SERVER_PING, &body, Duration::from_secs(300))).expect("server-ping answered");
    assert_eq!(answer["code"], 200, "server-ping answered {answer}");
}

/// Sizes of the stdio timing figures (run on the plugin that tracks the largest N).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// should-assign-work calls timed one at a time (after a warm-up of a tenth as many).
    pub latency_samples: usize,
    /// should-assign-work calls pipelined per throughput round.
    pub throughput_requests: usize,
    /// Rounds of it (the best counts, for the plugin and the echo alike).
    pub throughput_rounds: usize,
}

/// What [`reads_per_ping`] found.
#[derive(Debug, Default)]
pub struct ReadsOutcome {
    /// Rows for the table.
    pub rows: Vec<Row>,
    /// Notes for the table.
    pub notes: Vec<String>,
}

/// ECS read calls per server-ping with N of our tasks running in one cluster, for each N in
/// `ns` (ascending): moto is seeded up to N, one ping adopts the new tasks, two more are
/// counted. With `timing`, the stdio figures are then measured on the same plugin process,
/// which tracks the largest N agents: should-assign-work latency, throughput against the bare
/// echo, and resident memory.
pub async fn reads_per_ping(ns: &[usize], timing: Option<Timing>) -> ReadsOutcome {
    const CLUSTER: &str = "bench-reads";
    const COUNTED_PINGS: usize = 2;
    let aws = Aws::start().await;
    moto::create_cluster(&aws.base, CLUSTER).await;
    let server_id = format!("gocd-bench-{}", uuid::Uuid::new_v4());
    let owner = Owner::new(&server_id, REGION, CLUSTER);
    let cluster = cluster_props(CLUSTER, &[]);
    let launch = Launch::plugin(&plugin_binary(), plugin_env(&aws.proxy.endpoint()), &server_id);
    let mut plugin = blocking(|| StdioProcess::spawn(&launch)).expect("the plugin starts");
    let mut out = ReadsOutcome::default();
    let mut seeded: Vec<Seeded> = Vec::new();
    let mut seed_secs = 0.0;
    for &n in ns {
        let more = n.saturating_sub(seeded.len());
        eprintln!("floors: seeding {more} tasks in moto (N = {n})");
        let t = Instant::now();
        seeded.extend(seed::seed_tasks(&aws.base, &owner, 100_000 + seeded.len() as i64, more).await);
        seed_secs += t.elapsed().as_secs_f64();
        server_ping(&mut plugin, &cluster); // adopts the new tasks
        let mut per_ping = Vec::new();
        let mut ping_secs = Vec::new();
        for _ in 0..COUNTED_PINGS {
            let mark = aws.proxy.mark();
            let t = Instant::now();
            server_ping(&mut plugin, &cluster);
            ping_secs.push(t.elapsed().as_secs_f64());
            let counts = aws.proxy.counts_since(mark);
            let reads = sum(&counts, is_ecs_read);
            let others: BTreeMap<&String, &u64> = counts.iter().filter(|(k, _)| !is_ecs_read(k)).collect();
            if !others.is_empty() {
                out.notes.push(format!("N = {n}: a server-ping also made {others:?}"));
            }
            per_ping.push((reads, counts));
        }
        let worst = per_ping.iter().map(|(r, _)| *r).max().unwrap_or(0);
        let floor = 2 * ceil_div(n, 100);
        out.rows.push(Row::count(
            format!("ECS read calls per server-ping, N = {n} running agents"),
            floor,
            floor + 2,
            format!("≤ {}", floor + 2),
            worst,
        ));
        let by_op = &per_ping[0].1;
        eprintln!(
            "floors: N = {n}: {worst} ECS reads per ping ({by_op:?}), {:.1} s per ping on moto",
            ping_secs.iter().sum::<f64>() / ping_secs.len() as f64
        );
    }
    out.notes.push(format!(
        "ECS reads per ping: moto seeded through its own API (RunTask count 1 per task, {} tasks in {seed_secs:.0} s, \
         tagged and startedBy as the plugin would; not counted); one ping adopts them, the worst of the next \
         {COUNTED_PINGS} is shown; ListTasks paged by 100 and DescribeTasks capped at 100 by the proxy, as in AWS",
        seeded.len()
    ));
    if let Some(timing) = timing {
        stdio_figures(&mut plugin, &seeded, &cluster, timing, &mut out);
    }
    blocking(|| plugin.close());
    out
}

fn stdio_figures(
    plugin: &mut StdioProcess,
    seeded: &[Seeded],
    cluster: &Props,
    timing: Timing,
    out: &mut ReadsOutcome,
) {
    let n = seeded.len();
    let bodies: Vec<Value> =
        seeded.iter().map(|s| should_assign_work_body(&s.agent_id, &job_json(s.job.job_id), cluster)).collect();
    // Latency, one request at a time (GoCD asks under a global lock): warm-up, then timed.
    let (mut plugin_lat, yes) = blocking(|| latencies(plugin, &bodies, timing.latency_samples));
    assert_eq!(yes, timing.latency_samples, "should-assign-work said no for agents the plugin tracks");
    let rss_kib = plugin.status_kib("VmRSS").unwrap_or(0);
    let hwm_kib = plugin.status_kib("VmHWM").unwrap_or(0);
    // Heap and stacks apart from the binary's code and data mapped from its file.
    let anon_kib = plugin.status_kib("RssAnon").unwrap_or(0);
    let file_kib = plugin.status_kib("RssFile").unwrap_or(0);
    let mut echo = blocking(|| StdioProcess::spawn(&Launch::echo())).expect("the echo starts");
    let (mut echo_lat, _) = blocking(|| latencies(&mut echo, &bodies, timing.latency_samples));
    plugin_lat.sort();
    echo_lat.sort();
    let (p50, p99, max) =
        (percentile(&plugin_lat, 50.0), percentile(&plugin_lat, 99.0), percentile(&plugin_lat, 100.0));
    let echo_p99 = percentile(&echo_lat, 99.0);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    out.rows.push(Row {
        figure: format!("should-assign-work latency, {n} tracked agents, at the stdio boundary"),
        floor: format!("memory lookup (bare echo p99 {:.0} µs)", us(echo_p99)),
        goal: "p99 < 1 ms".into(),
        measured: format!("p50 {:.0} µs, p99 {:.0} µs", us(p50), us(p99)),
        ratio: ratio(us(p99), us(echo_p99), "× echo p99"),
        met: p99 < Duration::from_millis(1),
    });
    out.notes.push(format!(
        "Latency: {} should-assign-work calls, one at a time, each for a different adopted agent and its own job \
         (all answered true), after {} warm-up calls; timed from writing the line to reading the answer; max {:.0} µs",
        timing.latency_samples,
        timing.latency_samples / 10,
        us(max)
    ));
    // Throughput, pipelined: the same lines to the plugin and to the echo; best round of each.
    let rate = |p: &mut StdioProcess| -> f64 {
        let mut best = 0.0f64;
        for _ in 0..timing.throughput_rounds {
            let lines: Vec<String> = (0..timing.throughput_requests)
                .map(|i| p.request_line(SHOULD_ASSIGN_WORK, &bodies[i % bodies.len()]).1)
                .collect();
            let took = blocking(|| p.pipelined(Arc::new(lines), Duration::from_secs(60))).expect("every answer");
            best = best.max(timing.throughput_requests as f64 / took.as_secs_f64());
        }
        best
    };
    let plugin_rate = rate(plugin);
    let echo_rate = rate(&mut echo);
    blocking(|| echo.close());
    out.rows.push(Row {
        figure: "cheap requests per second through stdio (should-assign-work, pipelined)".into(),
        floor: format!("bare NDJSON echo, same run: {echo_rate:.0}/s"),
        goal: "≥ 50% of the echo".into(),
        measured: format!("{plugin_rate:.0}/s"),
        ratio: ratio(plugin_rate, echo_rate, " of echo"),
        met: plugin_rate >= 0.5 * echo_rate,
    });
    out.notes.push(format!(
        "Throughput: {} should-assign-work lines written as fast as the pipe takes them while the answers are read; \
         best of {} rounds, for the plugin and for the echo (this executable with {}=1: read a line, parse it, \
         write the answer, flush when the input is drained)",
        timing.throughput_requests,
        timing.throughput_rounds,
        super::stdio::ECHO_ENV
    ));
    let mib = |kib: u64| kib as f64 / 1024.0;
    out.rows.push(Row {
        figure: format!("resident memory, {n} tracked agents"),
        floor: "—".into(),
        goal: "< 40 MiB".into(),
        measured: format!("{:.1} MiB", mib(rss_kib)),
        ratio: ratio(mib(rss_kib), 40.0, " of goal"),
        met: rss_kib > 0 && mib(rss_kib) < 40.0,
    });
    out.notes.push(format!(
        "Memory: VmRSS of the plugin process from /proc/<pid>/status after adoption, pings and the latency run \
         (peak VmHWM {:.1} MiB): {:.1} MiB anonymous (heap, stacks), {:.1} MiB mapped from the binary and \
         libraries",
        mib(hwm_kib),
        mib(anon_kib),
        mib(file_kib)
    ));
}

/// `samples` calls one at a time (after samples/10 not timed), cycling through `bodies`: the
/// times, and how many answered `true`.
fn latencies(p: &mut StdioProcess, bodies: &[Value], samples: usize) -> (Vec<Duration>, usize) {
    let warm = samples / 10;
    let mut times = Vec::with_capacity(samples);
    let mut yes = 0;
    for i in 0..warm + samples {
        // A stride through the agents, so consecutive calls touch different records.
        let body = &bodies[(i * 7919) % bodies.len()];
        let (id, line) = p.request_line(SHOULD_ASSIGN_WORK, body);
        let (took, answer) = p.call_line(id, &line, Duration::from_secs(10)).expect("an answer");
        if i >= warm {
            times.push(took);
            yes += usize::from(answer["body"] == true);
        }
    }
    (times, yes)
}

/// Time from starting the plugin to reading its hello line, `starts` times.
pub fn hello_times(starts: usize) -> Row {
    let launch = Launch::plugin(&plugin_binary(), plugin_env("http://127.0.0.1:9"), "bench");
    let mut times: Vec<Duration> = (0..starts)
        .map(|_| {
            let p = StdioProcess::spawn(&launch).expect("the plugin starts");
            let took = p.hello_after;
            p.close();
            took
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (p50, max) = (percentile(&times, 50.0), percentile(&times, 100.0));
    Row {
        figure: "time from start to the hello line".into(),
        floor: "—".into(),
        goal: "< 20 ms".into(),
        measured: format!("p50 {:.1} ms, max {:.1} ms ({starts} starts)", ms(p50), ms(max)),
        ratio: ratio(ms(p50), 20.0, " of goal"),
        met: p50 < Duration::from_millis(20),
    }
}

/// AssumeRole calls over `requests` requests to one role-based cluster profile: a GoCD-like mix
/// (create-agent for new jobs, re-sent create-agent, server-ping, should-assign-work, cluster and
/// agent status reports), 25 in flight at a time, through the host simulator.
pub async fn assume_role(requests: usize) -> (Row, String) {
    const CLUSTER: &str = "bench-role";
    let aws = Aws::start().await;
    let role = aws.moto.assume_role_config(ROLE_ARN).await; // the benchmark's own, straight to moto
    moto::create_cluster(&role.config, CLUSTER).await;
    let cluster = cluster_props(CLUSTER, &[("RoleArn", ROLE_ARN)]);
    let elastic = elastic_props();
    let cfg =
        aws.host_config().cluster_profile("role", cluster.clone()).elastic_profile("small", "role", elastic.clone());
    let host = GoCdHost::start(cfg).await;
    host.load().await;
    let account = ROLE_ARN.split(':').nth(4).unwrap_or_default();
    let key = identity::cluster_key(account, REGION, CLUSTER, Some(ROLE_ARN));
    let mark = aws.proxy.mark();
    let mut batch = Vec::with_capacity(requests);
    for i in 0..requests {
        let job_id = 50_000 + i as i64;
        let request = match i % 20 {
            0 | 2 | 4 | 6 | 10 | 12 | 14 | 16 => ("create-agent", create_agent_body(&host, &cluster, &elastic, job_id)),
            8 | 18 => ("create-agent", create_agent_body(&host, &cluster, &elastic, job_id - 2)),
            1 => ("server-ping", json!({"all_cluster_profile_properties": [cluster]})),
            11 => ("plugin-status-report", json!({"all_cluster_profiles_properties": [cluster]})),
            3 | 5 | 13 | 15 => {
                let agent = format!("ea-{key}-{}-00000000", job_id - 3);
                ("should-assign-work", should_assign_work_body(&agent, &job_json(job_id - 3), &cluster))
            }
            7 | 17 => ("cluster-status-report", json!({"cluster_profile_properties": cluster})),
            _ => (
                "agent-status-report",
                json!({"cluster_profile_properties": cluster, "job_identifier": job_json(job_id - 9)}),
            ),
        };
        batch.push(request);
    }
    let t = Instant::now();
    send_all(&host, batch, 25).await;
    let secs = t.elapsed().as_secs_f64();
    let log = aws.proxy.log();
    let since = &log[mark..];
    let assumes = since.iter().filter(|r| r.key() == "sts:AssumeRole").count() as u64;
    let as_role = since.iter().filter(|r| r.assumed_account.as_deref() == Some(ROLE_ACCOUNT)).count();
    let counts = aws.proxy.counts_since(mark);
    host.shutdown().await;
    let row =
        Row::count(format!("AssumeRole calls over {requests} requests to one role-based profile"), 1, 1, "1", assumes);
    let note = format!(
        "AssumeRole: {requests} requests (in every 20: 8 create-agent for a new job, 2 re-sent create-agent, \
         1 server-ping, 4 should-assign-work, 2 cluster, 2 agent and 1 plugin status report), 25 in flight, in \
         {secs:.1} s; {as_role} AWS calls were made as the role ({} RunTask, {} ListTasks, {} DescribeTasks)",
        counts.get("ecs:RunTask").unwrap_or(&0),
        counts.get("ecs:ListTasks").unwrap_or(&0),
        counts.get("ecs:DescribeTasks").unwrap_or(&0)
    );
    (row, note)
}

/// RegisterTaskDefinition calls for `launches` create-agent calls of one elastic profile, all
/// sent at once.
pub async fn task_definitions(launches: usize) -> (Row, String) {
    const CLUSTER: &str = "bench-td";
    let aws = Aws::start().await;
    moto::create_cluster(&aws.base, CLUSTER).await;
    let cluster = cluster_props(CLUSTER, &[]);
    let elastic = elastic_props();
    let cfg =
        aws.host_config().cluster_profile("base", cluster.clone()).elastic_profile("small", "base", elastic.clone());
    let host = GoCdHost::start(cfg).await;
    host.load().await;
    let mark = aws.proxy.mark();
    let batch = (0..launches)
        .map(|i| ("create-agent", create_agent_body(&host, &cluster, &elastic, 60_000 + i as i64)))
        .collect();
    send_all(&host, batch, launches).await;
    let counts = aws.proxy.counts_since(mark);
    host.shutdown().await;
    let count = |k: &str| counts.get(k).copied().unwrap_or(0);
    let row = Row::count(
        format!("RegisterTaskDefinition calls for {launches} launches of one elastic profile"),
        1,
        1,
        "1",
        count("ecs:RegisterTaskDefinition"),
    );
    let note = format!(
        "Task definitions: {launches} create-agent calls for distinct jobs sent at once: {} RunTask, {} \
         DescribeTaskDefinition (the family looked up once), {} RegisterTaskDefinition",
        count("ecs:RunTask"),
        count("ecs:DescribeTaskDefinition"),
        count("ecs:RegisterTaskDefinition")
    );
    (row, note)
}

/// What the proxy saw of one launch operation (`ecs:RunTask` or `ecs:StartTask`) in a burst.
struct LaunchCalls {
    /// Calls that reached the proxy.
    calls: usize,
    /// Calls answered by a rule instead of moto: AWS's quotas (`aws-rules:ecs.…_rate`) or any
    /// other rule.
    refused: usize,
    /// Seconds from `started` to the last call moto answered.
    last_answered: f64,
    /// Seconds from `started` to the first and the last call reaching the proxy.
    first_sent: f64,
    last_sent: f64,
    /// moto's answer time, p50 and max, in ms.
    p50_ms: f64,
    max_ms: f64,
    /// Refusals of any call by AWS's rules since `started`, by rule.
    aws_refusals: BTreeMap<String, usize>,
}

fn launch_calls(aws: &Aws, mark: usize, key: &str, started: Instant) -> LaunchCalls {
    let log = aws.proxy.log();
    let calls: Vec<_> = log[mark..].iter().filter(|r| r.key() == key).collect();
    let refused = calls.iter().filter(|r| r.rule.is_some()).count();
    let secs = |t: Instant| t.saturating_duration_since(started).as_secs_f64();
    let forwarded = || calls.iter().filter(|r| r.outcome == Outcome::Forwarded);
    let mut answer_ms: Vec<f64> =
        forwarded().map(|r| r.at.saturating_duration_since(r.received).as_secs_f64() * 1000.0).collect();
    answer_ms.sort_by(f64::total_cmp);
    let mut aws_refusals = BTreeMap::new();
    for r in aws.proxy.aws_refusals().iter().filter(|r| r.at >= started) {
        *aws_refusals.entry(format!("{} {}", r.rule, r.key)).or_insert(0) += 1;
    }
    LaunchCalls {
        calls: calls.len(),
        refused,
        last_answered: forwarded().map(|r| secs(r.at)).fold(0.0, f64::max),
        first_sent: calls.iter().map(|r| secs(r.received)).fold(f64::INFINITY, f64::min),
        last_sent: calls.iter().map(|r| secs(r.received)).fold(0.0, f64::max),
        p50_ms: answer_ms.get(answer_ms.len() / 2).copied().unwrap_or_default(),
        max_ms: answer_ms.last().copied().unwrap_or_default(),
        aws_refusals,
    }
}

/// `n` Fargate create-agent calls at once, one account, with AWS's own quotas enforced by the
/// proxy (`tests/world/aws_rules.rs`: RunTask on Fargate burst 20, 20/s; Fargate task launches
/// burst 100, 20/s; `ThrottlingException` beyond): every task launched, no RunTask answered by
/// any rule, and (when `check_time`) within 1.1× the floor (n−20)/20 s + 1 s, timed from the
/// first create-agent sent to the last RunTask answered.
pub async fn launch_burst(n: usize, check_time: bool) -> (Row, String) {
    const CLUSTER: &str = "bench-burst";
    let aws = Aws::start().await;
    moto::create_cluster(&aws.base, CLUSTER).await;
    // moto builds a region's EC2 defaults on its first EC2 call (0.8 s here; AWS has no such
    // cost): done before the clock starts, straight to moto and not counted.
    moto::default_network(&aws.base).await;
    let cluster = cluster_props(CLUSTER, &[]);
    let elastic = elastic_props();
    let cfg =
        aws.host_config().cluster_profile("base", cluster.clone()).elastic_profile("small", "base", elastic.clone());
    let host = GoCdHost::start(cfg).await;
    host.load().await;
    let mark = aws.proxy.mark();
    let batch =
        (0..n).map(|i| ("create-agent", create_agent_body(&host, &cluster, &elastic, 70_000 + i as i64))).collect();
    let started = Instant::now();
    send_all(&host, batch, n).await;
    let answered = started.elapsed();
    let run = launch_calls(&aws, mark, "ecs:RunTask", started);
    let launched = aws.proxy.ecs_tasks_started() as usize;
    host.shutdown().await;
    let floor = n.saturating_sub(20) as f64 / 20.0 + 1.0;
    let secs = run.last_answered;
    let in_time = !check_time || secs <= 1.1 * floor;
    let row = Row {
        figure: format!(
            "{n} Fargate create-agent calls in a burst, AWS's quotas enforced (RunTask 20 + 20/s, launches 100 + 20/s)"
        ),
        floor: format!("{floor:.2} s"),
        goal: format!("all launched, 0 throttled, ≤ {:.2} s", 1.1 * floor),
        measured: format!("{launched} launched, {} throttled, {secs:.2} s", run.refused),
        ratio: ratio(secs, floor, "× floor"),
        met: launched == n && run.refused == 0 && in_time,
    };
    let note = format!(
        "Fargate burst: {n} create-agent calls for distinct jobs sent at once (MaxAgents 1000), one account and region, \
         every rule of tests/world/aws_rules.rs on (RunTask on Fargate burst 20, 20/s; Fargate launches burst 100, \
         20/s); floor (n−20)/20 s + 1 s; the plugin's own RunTask budget is burst 19, 19/s; timed from the first sent \
         to the last RunTask answered (moto's EC2 defaults built beforehand); the first RunTask reached the proxy after \
         {:.2} s, the last after {:.2} s; moto answered RunTask in {:.0} ms (p50), {:.0} ms (max); every create-agent \
         answered after {:.2} s; {} RunTask calls reached the proxy, {} answered by a rule; AWS-rule refusals of any \
         call: {:?}",
        run.first_sent,
        run.last_sent,
        run.p50_ms,
        run.max_ms,
        answered.as_secs_f64(),
        run.calls,
        run.refused,
        run.aws_refusals
    );
    (row, note)
}

/// The EC2 instance type of the StartTask burst. moto registers every container instance with
/// 4096 CPU units and 7482 MiB whatever the type (the instance simulator's resources are not
/// kept), so a c5.xlarge, whose resources those are, holds 14 tasks of [`EC2_TASK`].
const EC2_INSTANCE_TYPE: &str = "c5.xlarge";
/// CPU units and MiB of each task of the StartTask burst.
const EC2_TASK: (&str, &str) = ("256", "512");
const EC2_TASKS_PER_INSTANCE: usize = 14;
const EC2_INSTANCE_PROFILE: &str = "gocd-bench-instance";
const EC2_AMI: &str = "ami-0abcdef1234567890";

/// `n` EC2 create-agent calls at once, one account, onto container instances that are already
/// registered (`Ec2MinInstances` of them, launched by the plugin and registered by the instance
/// simulator before the clock starts), with AWS's own quotas enforced by the proxy (RunTask and
/// StartTask on EC2 and StopTask share burst 100, 40/s): every task started, no StartTask
/// answered by any rule, and (when `check_time`) within 1.2× the floor (n−100)/40 s, timed from
/// the first create-agent sent to the last StartTask answered.
pub async fn ec2_start_burst(n: usize, check_time: bool) -> (Row, String) {
    const CLUSTER: &str = "bench-ec2-burst";
    let instances = n.div_ceil(EC2_TASKS_PER_INSTANCE) + 1;
    let aws = Aws::start().await;
    moto::create_cluster(&aws.base, CLUSTER).await;
    create_instance_profile(aws.moto.addr(), TEST_ACCESS_KEY_ID, EC2_INSTANCE_PROFILE).await;
    moto::default_network(&aws.base).await;
    let count = instances.to_string();
    let cluster = cluster_props(
        CLUSTER,
        &[
            ("LaunchType", "EC2"),
            ("Ec2InstanceType", EC2_INSTANCE_TYPE),
            ("Ec2InstanceProfile", EC2_INSTANCE_PROFILE),
            ("Ec2AmiId", EC2_AMI),
            ("Ec2MinInstances", &count),
            ("Ec2MaxInstances", &count),
            ("Ec2IdleMinutes", "120"),
        ],
    );
    let elastic = props(&[("Image", profiles::IMAGE), ("Cpu", EC2_TASK.0), ("Memory", EC2_TASK.1)]);
    let cfg = aws.host_config().cluster_profile("ec2", cluster.clone()).elastic_profile("tiny", "ec2", elastic.clone());
    let host = GoCdHost::start(cfg).await;
    host.load().await;
    let policy = Ec2Policy { register_delay: Duration::from_millis(200), ..Ec2Policy::default() };
    let sim = InstanceSimulator::start(vec![Fleet::new("base", &aws.base, CLUSTER)], host.server_id(), policy);
    // The first server-ping starts the profile's EC2 loop, which launches Ec2MinInstances.
    let warm = Instant::now();
    let ping = host.server_ping().await.expect("server-ping answered");
    assert_eq!(ping.code, 200, "server-ping answered {}", ping.body);
    sim.wait_until("every instance registered", Duration::from_secs(180), |s| {
        s.instances.values().filter(|i| i.registered_at.is_some()).count() >= instances
    })
    .await;
    let warm_secs = warm.elapsed().as_secs_f64();
    let mark = aws.proxy.mark();
    let batch =
        (0..n).map(|i| ("create-agent", create_agent_body(&host, &cluster, &elastic, 80_000 + i as i64))).collect();
    let started = Instant::now();
    send_all(&host, batch, n).await;
    let answered = started.elapsed();
    // create-agent only queues EC2 work: wait for the plugin's loop to start every task (or
    // to start none for 20 s).
    let (mut seen, mut progress) = (0, Instant::now());
    loop {
        let started_tasks =
            aws.proxy.log()[mark..].iter().filter(|r| r.key() == "ecs:StartTask" && r.status == 200).count();
        if started_tasks > seen {
            (seen, progress) = (started_tasks, Instant::now());
        }
        if started_tasks >= n || progress.elapsed() > Duration::from_secs(20) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let start = launch_calls(&aws, mark, "ecs:StartTask", started);
    let live = moto::live_tasks(&aws.base, CLUSTER).await;
    let launched = live.len();
    let mut per_instance: BTreeMap<String, usize> = BTreeMap::new();
    for t in &live {
        *per_instance.entry(t.container_instance_arn().unwrap_or_default().to_string()).or_insert(0) += 1;
    }
    let counts = aws.proxy.counts_since(mark);
    host.shutdown().await;
    drop(sim);
    let floor = n.saturating_sub(100) as f64 / 40.0;
    let secs = start.last_answered;
    let in_time = !check_time || secs <= 1.2 * floor.max(0.1);
    let row = Row {
        figure: format!(
            "{n} EC2 create-agent calls in a burst, StartTask on {instances} registered instances, AWS's quota \
             enforced (RunTask/StartTask/StopTask 100 + 40/s)"
        ),
        floor: format!("{floor:.2} s"),
        goal: format!("all started, 0 throttled, ≤ {:.2} s", 1.2 * floor),
        measured: format!("{launched} started, {} throttled, {secs:.2} s", start.refused),
        ratio: ratio(secs, floor, "× floor"),
        met: launched == n && start.refused == 0 && in_time,
    };
    let note = format!(
        "EC2 burst: {instances} {EC2_INSTANCE_TYPE} instances (Ec2MinInstances) launched by the plugin and registered by \
         the instance simulator (moto: 4096 CPU, 7482 MiB each) in {warm_secs:.1} s before the clock starts; then {n} \
         create-agent calls for distinct jobs ({} CPU, {} MiB, so {EC2_TASKS_PER_INSTANCE} a instance) sent at once, \
         one account and region, every rule of tests/world/aws_rules.rs on (EC2 RunTask/StartTask and StopTask share \
         burst 100, 40/s); floor (n−100)/40 s; the plugin's own bucket is 95/38, of which StartTask leaves 10 to \
         StopTask; timed from the first sent to the last StartTask answered; create-agent queues EC2 work and every \
         one answered after {:.2} s; the first StartTask reached the proxy after {:.2} s, the last after {:.2} s \
         (the plugin's loop sends them one at a time); moto answered StartTask in {:.0} ms (p50), {:.0} ms (max); {} \
         StartTask calls, {} answered by a rule; tasks per instance {:?}; AWS-rule refusals of any call: {:?}; calls: \
         {counts:?}",
        EC2_TASK.0,
        EC2_TASK.1,
        answered.as_secs_f64(),
        start.first_sent,
        start.last_sent,
        start.p50_ms,
        start.max_ms,
        start.calls,
        start.refused,
        per_instance.values().collect::<Vec<_>>(),
        start.aws_refusals
    );
    (row, note)
}

/// A plugin restarted (kill -9, new process, GoCD's load sequence, first server-ping) with `n`
/// of its tasks running: AWS calls of the new process and the time until that ping answers.
/// Floor 2·⌈n/100⌉ calls; goal floor + 5 calls and (when `check_time`) under 5 s on moto.
pub async fn restart_adoption(n: usize, check_time: bool) -> (Row, String) {
    const CLUSTER: &str = "bench-adopt";
    let aws = Aws::start().await;
    moto::create_cluster(&aws.base, CLUSTER).await;
    let cluster = cluster_props(CLUSTER, &[]);
    let cfg = aws.host_config().cluster_profile("base", cluster).elastic_profile("small", "base", elastic_props());
    let host = GoCdHost::new(cfg);
    let owner = Owner::new(host.server_id(), REGION, CLUSTER);
    eprintln!("floors: seeding {n} tasks in moto for the restart");
    let seeded = seed::seed_tasks(&aws.base, &owner, 200_000, n).await;
    host.spawn_plugin().await.expect("the plugin starts");
    host.load().await;
    let first = host.server_ping().await.expect("the first process adopts");
    assert_eq!(first.code, 200);
    let mark = aws.proxy.mark();
    let started = Instant::now();
    host.restart().await;
    let reply = host.server_ping().await.expect("the first ping after the restart");
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(reply.code, 200, "server-ping answered {}", reply.body);
    let counts = aws.proxy.counts_since(mark);
    let calls: u64 = counts.values().sum();
    // Adopted: GoCD's next question about any of these agents is answered from memory.
    let probe = &seeded[seeded.len() / 2];
    let yes = host
        .request(
            "should-assign-work",
            should_assign_work_body(&probe.agent_id, &job_json(probe.job.job_id), &cluster_props(CLUSTER, &[])),
        )
        .await
        .expect("should-assign-work answered");
    assert_eq!(yes.body, true, "the restarted plugin does not know agent {}", probe.agent_id);
    host.shutdown().await;
    let floor = 2 * ceil_div(n, 100);
    let in_time = !check_time || secs < 5.0;
    let row = Row {
        figure: format!("restart adoption of {n} live tasks"),
        floor: format!("{floor} calls"),
        goal: format!("≤ {} calls, under 5 s on moto", floor + 5),
        measured: format!("{calls} calls, {secs:.2} s"),
        ratio: ratio(calls as f64, floor as f64, "× floor"),
        met: calls <= floor + 5 && in_time,
    };
    let note = format!(
        "Restart: {n} tasks seeded through moto's API; the plugin is killed (-9) and started again; counted and timed \
         from the kill to the answer of the new process's first server-ping (load sequence included): {counts:?}"
    );
    (row, note)
}
