//! `serve --metrics-addr`: the real binary, loaded by the GoCD host simulator, runs a job on
//! moto; a scrape of `GET /metrics` shows launches by result, the launch-to-register histogram,
//! agents by state, AWS calls by operation and category, and requests; other paths are 404.
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::world::moto::{self, free_port, REGION};
use crate::world::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// (status line, headers, body) of one HTTP/1.1 exchange; the server closes the connection.
pub(crate) async fn http_get(addr: SocketAddr, path: &str) -> (String, String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect to the metrics port");
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: */*\r\n\r\n").as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw)).await.expect("answer in time").unwrap();
    let text = String::from_utf8(raw).expect("UTF-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_string(), headers.to_lowercase(), body.to_string())
}

/// The value of the first sample whose line starts with `prefix` (name and labels).
pub(crate) fn value(body: &str, prefix: &str) -> Option<f64> {
    body.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scrapes_show_launches_registrations_agents_and_aws_calls() {
    let moto = Moto::start().await;
    let base = moto.base_config().await;
    moto::create_cluster(&base, "ci").await;
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_ecs-elastic-agent"));
    let mut config = HostConfig::new(&moto.endpoint())
        .cluster_profile("ci", props(&[("ClusterName", "ci"), ("Region", REGION), ("MaxAgents", "1")]))
        .elastic_profile(
            "small",
            "ci",
            props(&[("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0"), ("Cpu", "512"), ("Memory", "1024")]),
        );
    config.program = Some((bin, vec!["serve".into(), "--metrics-addr".into(), addr.to_string()]));
    let host = GoCdHost::launch(config).await;
    let sim = AgentSimulator::start(
        &host,
        vec![Fleet::new("ci", &base, "ci")],
        SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() },
    );

    let (status, headers, body) = http_get(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(headers.contains("content-type: text/plain; version=0.0.4"), "{headers}");
    assert!(
        body.contains("ecs_ea_requests_total{request=\"get-capabilities\",result=\"ok\"} 1"),
        "the load sequence is counted:\n{body}"
    );

    // Two jobs, MaxAgents 1: one starts, the other waits (and is re-sent) until the first is done.
    // Each builds long enough for a server-ping (every 2 s) to see its agent registered.
    let first = host.add_job(JobSpec::new("small", Duration::from_secs(6))).await;
    let second = host.add_job(JobSpec::new("small", Duration::from_secs(6))).await;
    host.wait_until("both jobs to finish", Duration::from_secs(120), |s| {
        matches!(s.job(first).state, JobState::Completed { .. })
            && matches!(s.job(second).state, JobState::Completed { .. })
    })
    .await;
    host.wait_until("a ping after the last registration", Duration::from_secs(30), |s| {
        s.pings.iter().filter(|p| p.finished.is_some()).count() >= 3
    })
    .await;

    let (status, _, body) = http_get(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    eprintln!("{body}");
    assert!(value(&body, "ecs_ea_launches_total{result=\"started\"}").unwrap() >= 2.0, "{body}");
    assert!(
        value(&body, "ecs_ea_launches_total{result=\"max_agents_reached\"}").unwrap() >= 1.0,
        "the second job waited"
    );
    assert_eq!(value(&body, "ecs_ea_launches_total{result=\"failed\"}"), Some(0.0));
    assert!(value(&body, "ecs_ea_launch_to_register_seconds_count").unwrap() >= 2.0, "each registration observed once");
    assert!(value(&body, "ecs_ea_launch_to_register_seconds_bucket{le=\"+Inf\"}").unwrap() >= 2.0);
    assert!(body.contains("# TYPE ecs_ea_launch_to_register_seconds histogram"));
    assert!(
        body.lines().any(|l| l.starts_with("ecs_ea_agents{cluster=\"ci\",") && l.contains("state=\"stopped\"")),
        "{body}"
    );
    assert_eq!(value(&body, "ecs_ea_max_agents{cluster=\"ci\","), Some(1.0));
    let run_task =
        "ecs_ea_aws_calls_total{region=\"us-east-1\",role=\"\",category=\"fargate_run_task\",operation=\"RunTask\"}";
    assert!(value(&body, run_task).unwrap() >= 2.0, "{body}");
    assert!(body.contains("ecs_ea_aws_retries_total{") && body.contains("ecs_ea_aws_throttled_total{"));
    assert!(value(&body, "ecs_ea_requests_total{request=\"create-agent\",result=\"ok\"}").unwrap() >= 2.0);
    assert!(body.contains("ecs_ea_orphans_swept_total{cluster=\"ci\","));
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let (series, v) = line.rsplit_once(' ').unwrap_or_else(|| panic!("sample line {line:?}"));
        assert!(v.parse::<f64>().is_ok() && !series.is_empty(), "sample line {line:?}");
    }
    let secrets = SecretScanner::from_world(&host, None);
    secrets.assert_clean("/metrics", &body);

    let (status, _, _) = http_get(addr, "/").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, _, _) = http_get(addr, "/metrics/../secrets").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    drop(sim);
    host.shutdown().await;
    let stderr = host.stderr_text();
    assert!(stderr.contains(&format!("http://{addr}/metrics")), "the address is logged");
    assert!(
        stderr.contains("request=\"cd.go.elastic-agent.create-agent\"")
            || stderr.contains("request{request=cd.go.elastic-agent.create-agent"),
        "request spans in the log"
    );
    drop(moto);
}
