//! Traces: with the standard `OTEL_*` variables set, the plugin sends one trace per
//! job to a real Jaeger (all-in-one, in-memory storage, on free loopback ports) over OTLP, once
//! over `http/protobuf` and once over `grpc`, and each again over TLS (a test CA made with the
//! `openssl` command, trusted through `OTEL_EXPORTER_OTLP_CERTIFICATE`); the test reads them
//! back through Jaeger's query API: the job's span, its start's phases end to end
//! (create-agent → ... → job assigned), each create-agent GoCD sent (re-sent ones in the same
//! trace), the RunTask with AWS's request id, the build and the job-completion; the task's `TRACEPARENT` (its RunTask overrides, read back
//! from moto) names the same trace; no registration key nor AWS key is in a span. On EC2, the
//! StartTask made once an instance has room is in the job's trace too. A job cancelled while
//! it waited has its trace ended when its idle agent is stopped. Without the variables, no
//! exporter is set up and the task gets no `TRACEPARENT`.
//!
//! Needs `JAEGER_BIN` (scripts/test builds Jaeger once, outside the clone: `scripts/jaeger.sh`)
//! and `MOTO_SERVER`; without them the tests panic, never skip.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::process::{Child, Command};

use crate::scenario_ext::*;
use crate::world::moto::{self, free_port};
use crate::world::profiles::{cluster_props, elastic_props};
use crate::world::*;

/// The service name the plugin reports by default.
const SERVICE: &str = "ecs-elastic-agent";

/// A Jaeger all-in-one on free loopback ports, killed when dropped.
struct Jaeger {
    _child: Child,
    otlp_grpc: u16,
    otlp_http: u16,
    query: SocketAddr,
    _config: tempfile_path::TempFile,
    /// With TLS on its OTLP receivers: the test CA's certificate, for the plugin to trust.
    tls: Option<TestCertificates>,
    /// Whether the receivers ask for a client certificate the test CA signed (mutual TLS).
    mutual: bool,
}

/// TLS on Jaeger's OTLP receivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tls {
    /// Plain `http://`.
    Off,
    /// The server's certificate, signed by the test CA.
    Server,
    /// And a client certificate the test CA signed, which the receivers require.
    Mutual,
}

/// A CA, a server certificate it signed for 127.0.0.1 and a client certificate it signed,
/// made with the `openssl` command in a directory of their own, removed when dropped.
struct TestCertificates {
    dir: PathBuf,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

impl TestCertificates {
    fn make() -> TestCertificates {
        let dir = std::env::temp_dir().join(format!("ecs-ea-otlp-tls-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).expect("a directory for the test certificates");
        // Each command's arguments, split at spaces (none has a space of its own).
        let run = |args: &str| {
            let out = std::process::Command::new("openssl")
                .args(args.split_whitespace())
                .current_dir(&dir)
                .output()
                .unwrap_or_else(|e| {
                    panic!("the openssl command is needed for the TLS test (apt-get install openssl): {e}")
                });
            assert!(out.status.success(), "openssl {args}: {}", String::from_utf8_lossy(&out.stderr));
        };
        let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
        run(&format!(
            "req -x509 {ec} -keyout ca.key -out ca.pem -days 2 -subj /CN=ecs-ea-test-CA \
             -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign"
        ));
        run(&format!("req {ec} -keyout server.key -out server.csr -subj /CN=127.0.0.1"));
        std::fs::write(
            dir.join("server.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .expect("write the extensions file");
        run("x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext");
        run(&format!("req {ec} -keyout client.key -out client.csr -subj /CN=ecs-elastic-agent"));
        std::fs::write(
            dir.join("client.ext"),
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n",
        )
        .expect("write the client's extensions file");
        run("x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile client.ext");
        TestCertificates {
            ca: dir.join("ca.pem"),
            cert: dir.join("server.pem"),
            key: dir.join("server.key"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
            dir,
        }
    }
}

impl Drop for TestCertificates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A file removed when dropped (Jaeger's config).
mod tempfile_path {
    pub struct TempFile(pub std::path::PathBuf);
    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

fn jaeger_binary() -> PathBuf {
    let Some(path) = std::env::var_os("JAEGER_BIN").filter(|p| !p.is_empty()) else {
        panic!(
            "JAEGER_BIN is not set: run scripts/test, which builds Jaeger (or: export JAEGER_BIN=$(scripts/jaeger.sh))"
        );
    };
    let path = PathBuf::from(path);
    assert!(path.is_file(), "JAEGER_BIN={} does not exist: run scripts/jaeger.sh", path.display());
    path
}

impl Jaeger {
    /// Starts Jaeger with OTLP receivers and the query API on free ports, and waits until its
    /// query API answers.
    async fn start() -> Jaeger {
        Self::start_with(Tls::Off).await
    }

    /// [`Jaeger::start`] with TLS on both OTLP receivers as `mode` says, by a test CA's
    /// certificates.
    async fn start_with(mode: Tls) -> Jaeger {
        let binary = jaeger_binary();
        let (otlp_grpc, otlp_http, query_http, query_grpc) = (free_port(), free_port(), free_port(), free_port());
        let tls = (mode != Tls::Off).then(TestCertificates::make);
        let mutual = mode == Tls::Mutual;
        let receiver_tls = tls.as_ref().map_or_else(String::new, |t| {
            let client_ca =
                if mutual { format!("\n          client_ca_file: {}", t.ca.display()) } else { String::new() };
            format!(
                "\n        tls:\n          cert_file: {}\n          key_file: {}{client_ca}",
                t.cert.display(),
                t.key.display()
            )
        });
        let config = format!(
            r#"service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    # Jaeger would otherwise trace itself to the default OTLP port.
    enable_tracing: false
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{query_http}
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 1000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{otlp_grpc}{receiver_tls}
      http:
        endpoint: 127.0.0.1:{otlp_http}{receiver_tls}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"#
        );
        let path = std::env::temp_dir().join(format!("ecs-ea-jaeger-{}-{otlp_http}.yaml", std::process::id()));
        std::fs::write(&path, config).expect("write Jaeger's config");
        let child = Command::new(&binary)
            .arg("--config")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let jaeger = Jaeger {
            _child: child,
            otlp_grpc,
            otlp_http,
            query: SocketAddr::from(([127, 0, 0, 1], query_http)),
            _config: tempfile_path::TempFile(path),
            tls,
            mutual,
        };
        let started = Instant::now();
        loop {
            if let Ok(r) = http::simple(jaeger.query, "GET", "/api/services", None).await {
                if r.status == 200 {
                    return jaeger;
                }
            }
            assert!(started.elapsed() < Duration::from_secs(30), "Jaeger's query API did not answer within 30 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The plugin's environment for sending traces here over `protocol` (over TLS, trusting
    /// the test CA, when Jaeger was started with it).
    fn plugin_env(&self, protocol: &str) -> Vec<(String, String)> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let port = if protocol == "grpc" { self.otlp_grpc } else { self.otlp_http };
        let mut env = vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), format!("{scheme}://127.0.0.1:{port}")),
            ("OTEL_EXPORTER_OTLP_PROTOCOL".into(), protocol.into()),
            // Spans leave within a fifth of a second rather than five (the SDK's default).
            ("OTEL_BSP_SCHEDULE_DELAY".into(), "200".into()),
        ];
        if let Some(tls) = &self.tls {
            env.push(("OTEL_EXPORTER_OTLP_CERTIFICATE".into(), tls.ca.display().to_string()));
            if self.mutual {
                env.push(("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE".into(), tls.client_cert.display().to_string()));
                env.push(("OTEL_EXPORTER_OTLP_CLIENT_KEY".into(), tls.client_key.display().to_string()));
            }
        }
        env
    }

    /// The trace whose root span is `root`, once `ready` says it is in (within 30 s).
    async fn trace_of(&self, root: &str, ready: impl Fn(&Trace) -> bool) -> Trace {
        let started = Instant::now();
        loop {
            let found = self.traces().await.into_iter().find(|t| !t.named(root).is_empty() && ready(t));
            if let Some(t) = found {
                return t;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "Jaeger has no trace of {root} as asked after 30 s");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// The traces of the plugin's service Jaeger holds (its v1 JSON API).
    async fn traces(&self) -> Vec<Trace> {
        let path = format!("/api/traces?service={SERVICE}&limit=1000&lookback=1h");
        let Ok(r) = http::simple(self.query, "GET", &path, None).await else { return Vec::new() };
        if r.status != 200 {
            return Vec::new();
        }
        let body: Value = serde_json::from_slice(&r.body).expect("Jaeger's answer is JSON");
        body["data"].as_array().map(|d| d.iter().map(Trace::of).collect()).unwrap_or_default()
    }
}

/// One trace as Jaeger returns it.
#[derive(Debug, Clone)]
struct Trace {
    id: String,
    spans: Vec<SpanView>,
    raw: String,
}

#[derive(Debug, Clone)]
struct SpanView {
    id: String,
    name: String,
    /// The span it is a child of.
    parent: Option<String>,
    /// Start and length, in microseconds (Jaeger's unit).
    start_us: u64,
    duration_us: u64,
    tags: BTreeMap<String, String>,
}

impl Trace {
    fn of(v: &Value) -> Trace {
        let spans = v["spans"]
            .as_array()
            .map(|spans| {
                spans
                    .iter()
                    .map(|s| SpanView {
                        id: s["spanID"].as_str().unwrap_or_default().to_string(),
                        name: s["operationName"].as_str().unwrap_or_default().to_string(),
                        parent: s["references"].as_array().and_then(|refs| {
                            refs.iter()
                                .find(|r| r["refType"] == "CHILD_OF")
                                .and_then(|r| r["spanID"].as_str())
                                .map(str::to_string)
                        }),
                        start_us: s["startTime"].as_u64().unwrap_or_default(),
                        duration_us: s["duration"].as_u64().unwrap_or_default(),
                        tags: s["tags"]
                            .as_array()
                            .map(|tags| {
                                tags.iter()
                                    .map(|t| {
                                        let value = match &t["value"] {
                                            Value::String(s) => s.clone(),
                                            other => other.to_string(),
                                        };
                                        (t["key"].as_str().unwrap_or_default().to_string(), value)
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Trace { id: v["traceID"].as_str().unwrap_or_default().to_string(), spans, raw: v.to_string() }
    }

    fn named(&self, name: &str) -> Vec<&SpanView> {
        self.spans.iter().filter(|s| s.name == name).collect()
    }

    fn names(&self) -> Vec<&str> {
        self.spans.iter().map(|s| s.name.as_str()).collect()
    }

    /// The start's phase spans, in time order.
    fn phases(&self) -> Vec<&SpanView> {
        let mut phases: Vec<&SpanView> =
            self.spans.iter().filter(|s| s.tags.contains_key("gocd.phase.until")).collect();
        phases.sort_by_key(|s| s.start_us);
        phases
    }
}

/// One job's trace is complete once its root (sent at job-completion) is in.
fn complete(traces: &[Trace], root: &str) -> bool {
    traces.iter().any(|t| !t.named(root).is_empty() && !t.named("job-completion").is_empty())
}

/// `jobs` jobs with traces sent over `protocol`: each job has exactly one trace, with its phases,
/// its create-agents, the RunTask and its request id, the build and the job-completion; the
/// task's `TRACEPARENT` names it; no auto-register key is in any span.
async fn one_trace_per_job(name: &'static str, protocol: &str, jobs: usize, tls: Tls) {
    let jaeger = Jaeger::start_with(tls).await;
    let mut w = Scenario::new(name).await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    // ECS's task times, which moto leaves out, so the start has all its phases as on AWS.
    w.proxy.add_rule("ecs.task_times", crate::world::proxy::aws_like::ecs_task_times(w.moto.addr()));
    let mut cfg = w.host_config().cluster_profile("base", cluster_props("gocd-a", &[])).elastic_profile(
        "small",
        "base",
        elastic_props(),
    );
    cfg.env.extend(jaeger.plugin_env(protocol));
    let aws_keys = [cfg.access_key_id.clone(), cfg.secret_access_key.clone()];
    // GoCD re-sends create-agent for a job still waiting: the agents take a while to register, so
    // each job gets a few, all in its one trace.
    cfg.starvation_interval = Duration::from_secs(1);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(2500), ..SimPolicy::default() });
    let handles = host.add_jobs(JobSpec::new("small", Duration::from_secs(1)), jobs).await;
    host.wait_until("every job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    host.wait_until("every job-completion answered", Duration::from_secs(30), |s| {
        s.jobs.iter().all(|j| j.completion_code.is_some())
    })
    .await;
    let roots: Vec<String> = handles.iter().map(|h| format!("job {}", locator(&host.job_identifier(*h)))).collect();

    // The jobs' traces leave within the batch delay; the rest at the plugin's shutdown.
    let started = Instant::now();
    let traces = loop {
        let traces = jaeger.traces().await;
        if roots.iter().all(|r| complete(&traces, r)) {
            break traces;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "Jaeger does not have every job's trace after 30 s: {:?}",
            traces.iter().map(Trace::names).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };

    let tasks = moto::all_tasks(&base, "gocd-a").await;
    assert_eq!(tasks.len(), jobs, "one task per job");
    for (h, root) in handles.iter().zip(&roots) {
        let mine: Vec<&Trace> = traces.iter().filter(|t| !t.named(root).is_empty()).collect();
        assert_eq!(mine.len(), 1, "{root}: one trace, not {}", mine.len());
        let trace = mine[0];
        let names = trace.names();
        assert_eq!(trace.named(root).len(), 1, "{root}: one job span: {names:?}");
        let root_span = trace.named(root)[0];

        // The start's phases follow each other from create-agent to the assignment, as children
        // of the job's span: all six, since the proxy adds the task times moto leaves out.
        let phases = trace.phases();
        let phase_names: Vec<&str> = phases.iter().map(|p| p.name.as_str()).collect();
        const STEPS: [&str; 6] =
            ["queued", "provisioning", "image pull", "container start", "agent registration", "assignment"];
        assert_eq!(phase_names, STEPS, "{root}: the start's phases: {names:?}");
        let last = phases[phases.len() - 1];
        assert_eq!(last.tags["gocd.phase.until"], "job assigned", "{root}: up to the assignment: {phase_names:?}");
        for p in &phases {
            assert_eq!(p.parent.as_deref(), Some(root_span.id.as_str()), "{root}: {} is a child of the job", p.name);
        }
        for pair in phases.windows(2) {
            let end = pair[0].start_us + pair[0].duration_us;
            assert!(end.abs_diff(pair[1].start_us) <= 1, "{root}: {} ends where {} starts", pair[0].name, pair[1].name);
        }
        assert!(phases[0].start_us >= root_span.start_us, "{root}: the phases start with the job's span");
        assert_eq!(trace.named("build").len(), 1, "{root}: {names:?}");
        assert_eq!(trace.named("job-completion").len(), 1, "{root}: {names:?}");
        let create_agents = trace.named("create-agent").len() as u32;
        let answered = host.create_agent_answered(*h);
        assert!(answered >= 2, "{root}: GoCD re-sent create-agent while the job waited ({answered})");
        assert_eq!(create_agents, answered, "{root}: every create-agent GoCD sent is in the job's one trace");
        let run_tasks = trace.named("RunTask");
        assert_eq!(run_tasks.len(), 1, "{root}: one RunTask: {names:?}");
        let request_id = run_tasks[0].tags.get("aws.request_id").cloned().unwrap_or_default();
        assert!(!request_id.is_empty(), "{root}: RunTask's request id: {:?}", run_tasks[0].tags);
        // Within the create-agent that made it.
        let run_task_parent = trace.spans.iter().find(|s| Some(&s.id) == run_tasks[0].parent.as_ref());
        assert_eq!(run_task_parent.map(|s| s.name.as_str()), Some("create-agent"), "{root}: RunTask's parent");
        assert!(!trace.named("StopTask").is_empty(), "{root}: the StopTask of job-completion: {names:?}");

        // The task carries the job's trace context.
        let job_id = host.job_identifier(*h).job_id.to_string();
        let task = tasks
            .iter()
            .find(|t| moto::task_tag(t, "gocd:job-id") == Some(job_id.as_str()))
            .unwrap_or_else(|| panic!("{root}: no task tagged with job id {job_id}"));
        let traceparent = moto::task_override_env(task, "TRACEPARENT")
            .unwrap_or_else(|| panic!("{root}: no TRACEPARENT in the task's overrides"));
        assert_eq!(
            traceparent,
            format!("00-{}-{}-01", trace.id, root_span.id),
            "{root}: TRACEPARENT names the job's trace and span"
        );
    }

    // No registration key (nor anything else secret GoCD sent) is in a trace.
    let keys: HashSet<String> = host.issued_keys().into_iter().collect();
    for t in &traces {
        for key in &keys {
            assert!(!t.raw.contains(key.as_str()), "an auto-register key is in trace {}", t.id);
        }
        for key in &aws_keys {
            assert!(!t.raw.contains(key.as_str()), "an AWS key is in trace {}", t.id);
        }
    }
    assert!(!keys.is_empty(), "GoCD issued registration keys");
    let spans: usize = traces.iter().map(|t| t.spans.len()).sum();
    let example: Vec<&str> =
        traces.first().map(|t| t.phases().iter().map(|p| p.name.as_str()).collect()).unwrap_or_default();
    eprintln!(
        "FIGURES: test={name} protocol={protocol} jobs={jobs} traces={} spans={spans} secs={} phases={example:?}",
        traces.len(),
        w.started.elapsed().as_secs()
    );
    drop(sim);
    host.shutdown().await;
    assert!(host.stderr_text().contains("sending traces over OTLP"), "the plugin said it sends traces");
}

/// EC2: the task starts by StartTask once an instance has room, outside any request GoCD sent;
/// it is still in the job's trace, as a `start on an EC2 instance` span with the StartTask in
/// it, and the task carries the job's `TRACEPARENT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ec2_jobs_start_task_is_in_its_trace() {
    use crate::ec2::{ec2_props, quarter_props};
    use crate::world::ec2::Ec2Policy;
    let jaeger = Jaeger::start().await;
    let mut w = Scenario::new("traces_ec2").await;
    let base = w.base.clone();
    w.ec2_cluster("base", &base, moto::TEST_ACCESS_KEY_ID, "gocd-ec2").await;
    let profile = ec2_props("gocd-ec2", &[("Ec2ScaleOutWaitSeconds", "0")]);
    let mut cfg = w.host_config().cluster_profile("ec2", profile).elastic_profile("quarter", "ec2", quarter_props());
    cfg.env.extend(jaeger.plugin_env("http/protobuf"));
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() });
    let ec2 = w.instances(&host, Ec2Policy::default());
    let h = host.add_jobs(JobSpec::new("quarter", Duration::from_secs(1)), 1).await[0];
    host.wait_until("the job completed", Duration::from_secs(90), |s| s.all_completed()).await;
    host.wait_until("job-completion answered", Duration::from_secs(30), |s| {
        s.jobs.iter().all(|j| j.completion_code.is_some())
    })
    .await;
    let root = format!("job {}", locator(&host.job_identifier(h)));
    let trace = jaeger.trace_of(&root, |t| !t.named("job-completion").is_empty()).await;
    let names = trace.names();
    let root_span = trace.named(&root)[0];
    let placed = trace.named("start on an EC2 instance");
    assert_eq!(placed.len(), 1, "one start on an instance: {names:?}");
    assert_eq!(placed[0].parent.as_deref(), Some(root_span.id.as_str()), "a child of the job's span");
    let start_tasks = trace.named("StartTask");
    assert_eq!(start_tasks.len(), 1, "one StartTask: {names:?}");
    assert_eq!(start_tasks[0].parent.as_deref(), Some(placed[0].id.as_str()), "within the start on the instance");
    assert!(!start_tasks[0].tags.get("aws.request_id").cloned().unwrap_or_default().is_empty(), "its request id");
    assert!(trace.named("RunTask").is_empty(), "no RunTask on EC2: {names:?}");
    let tasks = moto::all_tasks(&base, "gocd-ec2").await;
    assert_eq!(tasks.len(), 1, "one task");
    assert_eq!(
        moto::task_override_env(&tasks[0], "TRACEPARENT"),
        Some(format!("00-{}-{}-01", trace.id, root_span.id).as_str()),
        "the EC2 task carries the job's trace context"
    );
    eprintln!("FIGURES: test=traces_ec2 spans={} secs={}", trace.spans.len(), w.started.elapsed().as_secs());
    drop((sim, ec2));
    host.shutdown().await;
}

/// A job cancelled while its agent starts: GoCD stops asking for it, the agent registers and
/// sits idle, and once the plugin stops it ("its job is gone", after
/// `AgentRegisterTimeoutMinutes`) the job's trace ends, marked unfinished, while the plugin
/// runs on: not left open until the process stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_jobs_trace_ends_when_its_agent_is_stopped() {
    let jaeger = Jaeger::start().await;
    let mut w = Scenario::new("traces_cancelled").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let props = cluster_props("gocd-a", &[("AgentRegisterTimeoutMinutes", "1")]);
    let mut cfg = w.host_config().cluster_profile("base", props).elastic_profile("small", "base", elastic_props());
    cfg.env.extend(jaeger.plugin_env("http/protobuf"));
    let host = GoCdHost::launch(cfg).await;
    let h = host.add_job(JobSpec::new("small", Duration::from_secs(1))).await;
    let job_id = host.job_identifier(h).job_id;
    let mut policy = SimPolicy::default();
    policy.hold.insert(job_id.to_string());
    let sim = w.agents(&host, policy);
    sim.wait_until("the job's task seen", Duration::from_secs(30), |s| s.tasks_for_job(job_id) == 1).await;
    host.cancel_job(h);
    sim.release(job_id);
    sim.wait_until("the idle agent's task stopped", Duration::from_secs(150), |s| {
        s.tasks.values().any(|t| t.job_id.as_deref() == Some(&job_id.to_string()) && t.stopped)
    })
    .await;

    let root = format!("job {}", locator(&host.job_identifier(h)));
    // Its root span ends, and leaves, only when the trace ends.
    let trace = jaeger.trace_of(&root, |_| true).await;
    let names = trace.names();
    let unfinished = trace.named(&root)[0].tags.get("gocd.job.unfinished").cloned().unwrap_or_default();
    assert!(unfinished.contains("cancelled"), "the job's span says why it ended: {unfinished:?}");
    assert_eq!(trace.named("RunTask").len(), 1, "its one launch: {names:?}");
    assert!(trace.named("job-completion").is_empty() && trace.phases().is_empty(), "no agent took it: {names:?}");
    host.wait_until("the idle agent removed from GoCD", Duration::from_secs(30), |s| s.agents.is_empty()).await;
    eprintln!("FIGURES: test=traces_cancelled spans={} secs={}", trace.spans.len(), w.started.elapsed().as_secs());
    drop(sim);
    host.shutdown().await;
}

fn locator(j: &crate::world::host::JobIdentifier) -> String {
    format!("{}/{}/{}/{}/{}", j.pipeline_name, j.pipeline_counter, j.stage_name, j.stage_counter, j.job_name)
}

/// Two jobs over OTLP/HTTP (protobuf), the default protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_trace_per_job_over_http_protobuf() {
    one_trace_per_job("traces_http_protobuf", "http/protobuf", 2, Tls::Off).await;
}

/// One job over OTLP/gRPC.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_trace_per_job_over_grpc() {
    one_trace_per_job("traces_grpc", "grpc", 1, Tls::Off).await;
}

/// One job over OTLP/HTTP to an `https://` endpoint whose certificate a private CA signed,
/// trusted through `OTEL_EXPORTER_OTLP_CERTIFICATE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_trace_per_job_over_https() {
    one_trace_per_job("traces_https", "http/protobuf", 1, Tls::Server).await;
}

/// One job over OTLP/HTTPS to a collector that requires a client certificate (mutual TLS),
/// given through `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE` and `OTEL_EXPORTER_OTLP_CLIENT_KEY`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_trace_per_job_over_https_with_a_client_certificate() {
    one_trace_per_job("traces_https_mtls", "http/protobuf", 1, Tls::Mutual).await;
}

/// One job over OTLP/gRPC with mutual TLS, the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_trace_per_job_over_grpc_with_mutual_tls() {
    one_trace_per_job("traces_grpc_tls", "grpc", 1, Tls::Mutual).await;
}

/// Without the `OTEL_*` variables nothing is set up: no exporter (its log line is missing), and
/// the agent's task gets no `TRACEPARENT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_variables_no_exporter_and_no_traceparent() {
    let mut w = Scenario::new("traces_off").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let cfg = w.host_config().cluster_profile("base", cluster_props("gocd-a", &[])).elastic_profile(
        "small",
        "base",
        elastic_props(),
    );
    assert!(!cfg.env.iter().any(|(k, _)| k.starts_with("OTEL_")), "the test world sets no OTEL_* variable");
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    host.add_jobs(JobSpec::new("small", Duration::from_secs(1)), 1).await;
    host.wait_until("the job completed", Duration::from_secs(60), |s| s.all_completed()).await;
    let tasks = moto::all_tasks(&base, "gocd-a").await;
    assert_eq!(tasks.len(), 1, "one task");
    assert!(moto::task_override_env(&tasks[0], "GO_EA_AUTO_REGISTER_KEY").is_some(), "the overrides were read back");
    assert_eq!(moto::task_override_env(&tasks[0], "TRACEPARENT"), None, "no trace context without traces");
    drop(sim);
    host.shutdown().await;
    let log = host.stderr_text();
    assert!(log.contains("--- plugin process"), "the plugin's log was read");
    assert!(!log.contains("sending traces over OTLP"), "no exporter was set up");
}
