//! A GoCD server that reaches AWS only through an HTTP proxy (`packaging/INSTALL.md`, "Through
//! an HTTP proxy"): the plugin started with `HTTP_PROXY`/`HTTPS_PROXY` naming the world's
//! authenticating forward proxy (`world::forward_proxy`), in front of the recording proxy and
//! moto.
//!
//! - Jobs' whole lives (create-agent through job-completion, on a profile with its own
//!   credentials' account and one through AssumeRole, with an event queue): every AWS call the
//!   recording proxy saw came through the forward proxy, operation for operation, and neither the
//!   proxy's password nor its `Proxy-Authorization` value reaches what operators read.
//! - The same with `NO_PROXY` naming the endpoint: the job runs and nothing goes through the proxy.
//! - The operators' tools that call AWS (`doctor`, `profile --from-stack`, `leftovers`), with the
//!   lower-case `http_proxy`/`https_proxy`: every call through the proxy.
//! - The forward proxy itself: absolute-form requests forwarded, CONNECT tunnels carried, 407
//!   without its credentials.
//!
//! The world's endpoints are plain `http://127.0.0.1:PORT`, so `HTTP_PROXY` is the variable that
//! applies (`HTTPS_PROXY` is set too, as an operator would); `NO_PROXY` is set empty where the
//! calls must go through the proxy. The world starts the plugin without the test process's own
//! proxy variables. Needs `MOTO_SERVER` (see `scripts/moto.sh`).

use crate::world;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::world::eventbridge;
use crate::world::forward_proxy::ForwardProxy;
use crate::world::http::{self, HttpRequest};
use crate::world::moto::{self, Moto, REGION};
use crate::world::profiles::{cluster_props, elastic_props};
use crate::world::*;

const ROLE_ARN: &str = "arn:aws:iam::111111111111:role/gocd-agents";
const PROXY_USER: &str = "gocd-server";
const PROXY_PASSWORD: &str = "pr0xy-Pa55word-e2e-41c7";

/// The plugin's proxy variables, all naming `url`: upper case (`HTTP_PROXY`, `HTTPS_PROXY`,
/// `NO_PROXY`) or lower case.
fn proxy_env(url: &str, no_proxy: &str, upper: bool) -> Vec<(String, String)> {
    let vars = [("HTTP_PROXY", url), ("HTTPS_PROXY", url), ("NO_PROXY", no_proxy)];
    vars.iter().map(|(k, v)| (if upper { k.to_string() } else { k.to_ascii_lowercase() }, v.to_string())).collect()
}

/// The calls the recording proxy logged, per operation (as the forward proxy counts them).
fn recorded_operations(proxy: &Proxy) -> BTreeMap<String, u64> {
    let mut ops = BTreeMap::new();
    for r in proxy.log() {
        *ops.entry(r.operation.clone()).or_insert(0) += 1;
    }
    ops
}

/// Waits (bounded: a long poll in flight at the end may still be on its way back) until the
/// forward proxy has carried to the recording proxy exactly the calls it logged, operation for
/// operation, and nothing to any other target; panics naming the difference.
async fn assert_every_call_went_through(forward: &ForwardProxy, proxy: &Proxy) {
    let target = proxy.addr().to_string();
    let settled = tokio::time::timeout(Duration::from_secs(40), async {
        loop {
            if forward.carried_to(&target).operations == recorded_operations(proxy) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    let carried = forward.carried_to(&target);
    let recorded = recorded_operations(proxy);
    assert!(
        settled.is_ok(),
        "calls that reached AWS around the proxy, or through it unlogged:\n  recorded: {recorded:?}\n  carried:  {:?}",
        carried.operations
    );
    assert_eq!(carried.requests, proxy.total(), "every logged call was carried once");
    assert!(proxy.total() > 0, "no AWS call at all");
    let others: Vec<String> = forward.carried().into_keys().filter(|t| *t != target).collect();
    assert!(others.is_empty(), "the proxy carried calls to other targets: {others:?}");
    let totals = forward.totals();
    assert_eq!((totals.refused, totals.failed, totals.tunnels), (0, 0, 0), "{totals:?}");
}

/// The scanner of the world's secrets, plus the proxy's password and its `Proxy-Authorization` value.
fn scanner_with_proxy(host: &GoCdHost, proxy: &Proxy, forward: &ForwardProxy) -> SecretScanner {
    let mut scanner = SecretScanner::from_world(host, Some(proxy));
    scanner.add(SecretKind::Other, PROXY_PASSWORD);
    if let Some(authorization) = forward.authorization() {
        scanner.add(SecretKind::Other, authorization.trim_start_matches("Basic "));
    }
    scanner
}

/// Every job completed with job-completion answered 200, every agent deleted, one task a job.
async fn assert_jobs_done(host: &GoCdHost, sim: &AgentSimulator) {
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    host.wait_until("every job-completion answered", Duration::from_secs(30), |s| {
        s.jobs.iter().all(|j| j.completion_code.is_some())
    })
    .await;
    let jobs = host.with_state(|s| s.jobs.iter().map(|j| (j.identifier.job_id, j.completion_code)).collect::<Vec<_>>());
    for (id, code) in jobs {
        assert_eq!(code, Some(200), "job-completion of job {id} answered {code:?}");
        assert_eq!(sim.tasks_for_job(id), 1, "job {id} ran in {} tasks", sim.tasks_for_job(id));
    }
}

/// With `HTTP_PROXY`/`HTTPS_PROXY` naming an authenticating proxy and `NO_PROXY` empty, two jobs'
/// whole lives — one on a profile in its credentials' own account (STS GetCallerIdentity) with
/// an event queue (SQS), one through AssumeRole — send every AWS call through the proxy, and its
/// credentials reach no text operators read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_aws_call_of_a_jobs_life_goes_through_the_proxy() {
    let mut w = Scenario::new("proxy_every_call").await;
    let forward = ForwardProxy::with_credentials(PROXY_USER, PROXY_PASSWORD).await;
    let base = w.base.clone();
    let role = w.moto.assume_role_config(ROLE_ARN).await;
    w.cluster("base", &base, "gocd-a").await;
    w.cluster("role", &role.config, "gocd-b").await;
    let queue = eventbridge::create_queue(&base, "gocd-ecs-events").await;
    let mut cfg = w
        .host_config()
        .cluster_profile("base", cluster_props("gocd-a", &[("EventQueueUrl", &queue)]))
        .cluster_profile("role", cluster_props("gocd-b", &[("RoleArn", ROLE_ARN)]))
        .elastic_profile("small-a", "base", elastic_props())
        .elastic_profile("small-b", "role", elastic_props());
    cfg.env.extend(proxy_env(&forward.url(), "", true));
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    host.add_job(JobSpec::new("small-a", Duration::from_secs(2))).await;
    host.add_job(JobSpec::new("small-b", Duration::from_secs(2))).await;
    host.wait_until("both jobs completed", Duration::from_secs(120), |s| s.all_completed()).await;
    assert_jobs_done(&host, &sim).await;
    w.assert_no_live_tasks(Duration::from_secs(60)).await;
    // The event queue's first long poll is answered after its 20 s wait.
    let proxy = &w.proxy;
    world::wait_for("an event queue long poll answered", Duration::from_secs(40), || async {
        proxy.count("sqs:ReceiveMessage") > 0
    })
    .await;

    let _ = host.plugin_status_report().await;
    for id in ["base", "role"] {
        let _ = host.cluster_status_report(id).await;
    }
    let scanner = scanner_with_proxy(&host, &w.proxy, &forward);
    scanner.assert_host_clean(&host);
    drop(sim);
    host.shutdown().await;

    assert_every_call_went_through(&forward, &w.proxy).await;
    let carried = forward.carried_to(&w.proxy.addr().to_string());
    let counts = w.proxy.counts();
    for key in [
        "sts:GetCallerIdentity",
        "sts:AssumeRole",
        "ecs:RegisterTaskDefinition",
        "ecs:RunTask",
        "ecs:DescribeTasks",
        "ecs:StopTask",
        "ec2:DescribeSubnets",
        "sqs:ReceiveMessage",
    ] {
        assert!(counts.get(key).is_some_and(|n| *n > 0), "no {key} in {counts:?}");
    }
    w.dump_calls();
    eprintln!(
        "FIGURES: test={} secs={} aws_calls={} through_proxy={} by_operation={:?}",
        w.name,
        w.started.elapsed().as_secs(),
        w.proxy.total(),
        carried.requests,
        counts
    );
}

/// With `NO_PROXY` naming the endpoint's address (beside the link-local credential endpoints
/// `packaging/INSTALL.md` names), a job's whole life sends nothing through the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_proxy_naming_the_endpoint_keeps_every_call_off_the_proxy() {
    let mut w = Scenario::new("proxy_bypassed").await;
    let forward = ForwardProxy::with_credentials(PROXY_USER, PROXY_PASSWORD).await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let mut cfg = w.host_config().cluster_profile("base", cluster_props("gocd-a", &[])).elastic_profile(
        "small",
        "base",
        elastic_props(),
    );
    cfg.env.extend(proxy_env(&forward.url(), "169.254.169.254,169.254.170.2,127.0.0.1", true));
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    host.add_job(JobSpec::new("small", Duration::from_secs(2))).await;
    host.wait_until("the job completed", Duration::from_secs(90), |s| s.all_completed()).await;
    assert_jobs_done(&host, &sim).await;
    w.assert_no_live_tasks(Duration::from_secs(60)).await;
    let scanner = scanner_with_proxy(&host, &w.proxy, &forward);
    scanner.assert_host_clean(&host);
    drop(sim);
    host.shutdown().await;

    assert!(w.proxy.count("ecs:RunTask") > 0, "the job ran: {:?}", w.proxy.counts());
    assert!(forward.carried().is_empty(), "NO_PROXY names the endpoint, yet the proxy saw {:?}", forward.carried());
    eprintln!("FIGURES: test={} aws_calls={} through_proxy=0", w.name, w.proxy.total());
}

fn profile_file(props: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ecs-ea-proxy-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cluster.json");
    let map: serde_json::Map<String, serde_json::Value> =
        props.iter().map(|(k, v)| (k.to_string(), (*v).into())).collect();
    std::fs::write(&path, serde_json::Value::Object(map).to_string()).unwrap();
    path
}

/// Runs the binary as an operator with AWS at `endpoint`, the lower-case proxy variables naming
/// `forward`, at log level trace; (exit code, stdout, stderr).
async fn through_proxy(endpoint: &str, forward: &ForwardProxy, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = moto::operator_command(endpoint, Some(REGION));
    cmd.args(args).env("RUST_LOG", "trace").envs(proxy_env(&forward.url(), "", false));
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output()).await.expect("in time").expect("run");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// `doctor` (through AssumeRole, with an event queue), `profile --from-stack` and `leftovers`,
/// with `http_proxy`/`https_proxy` in lower case and `no_proxy` empty: every AWS call of each
/// through the proxy, and its password in none of their output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_tools_go_through_the_lower_case_proxy_variables() {
    let moto = Moto::start().await;
    let proxy = Proxy::start(moto.addr()).await;
    let forward = ForwardProxy::with_credentials(PROXY_USER, PROXY_PASSWORD).await;
    let role = moto.assume_role_config(ROLE_ARN).await;
    moto::create_cluster(&role.config, "ci").await;
    let queue = eventbridge::create_queue(&role.config, "gocd-ecs-events").await;
    let path = profile_file(&[
        ("ClusterName", "ci"),
        ("Region", REGION),
        ("RoleArn", ROLE_ARN),
        ("EventQueueUrl", &queue),
        ("GoServerUrl", "https://gocd.example.com/go"),
    ]);
    let endpoint = proxy.endpoint();
    let mut outputs = Vec::new();
    let (code, stdout, stderr) = through_proxy(
        &endpoint,
        &forward,
        &["doctor", "--cluster-profile", path.to_str().unwrap(), "--server-id", "e2e-server", "--timeout", "20"],
    )
    .await;
    assert!(stdout.lines().any(|l| l.starts_with("ok   role: assumed")), "doctor ({code:?}):\n{stdout}");
    outputs.push(("doctor", stdout, stderr));
    let (code, stdout, stderr) =
        through_proxy(&endpoint, &forward, &["profile", "--from-stack", "no-such-stack", "--region", REGION]).await;
    assert_ne!(code, Some(0), "a stack that does not exist: {stdout}");
    outputs.push(("profile --from-stack", stdout, stderr));
    let (code, stdout, stderr) = through_proxy(&endpoint, &forward, &["leftovers", "--region", REGION]).await;
    assert_eq!(code, Some(0), "leftovers:\n{stdout}{stderr}");
    outputs.push(("leftovers", stdout, stderr));

    let mut scanner = SecretScanner::new();
    scanner.add(SecretKind::Other, PROXY_PASSWORD);
    scanner.add(SecretKind::Other, forward.authorization().unwrap().trim_start_matches("Basic "));
    for (command, stdout, stderr) in &outputs {
        scanner.assert_clean(&format!("{command}'s stdout"), stdout);
        scanner.assert_clean(&format!("{command}'s stderr"), stderr);
    }
    assert_every_call_went_through(&forward, &proxy).await;
    let counts = proxy.counts();
    for key in [
        "sts:GetCallerIdentity",
        "sts:AssumeRole",
        "ecs:DescribeClusters",
        "ec2:DescribeSubnets",
        "sqs:GetQueueAttributes",
        "events:ListRuleNamesByTarget",
        "cloudformation:DescribeStacks",
        "ecs:ListClusters",
    ] {
        assert!(counts.get(key).is_some_and(|n| *n > 0), "no {key} in {counts:?}");
    }
    assert!(counts.keys().any(|k| k.starts_with("iam:")), "doctor read nothing of IAM: {counts:?}");
    eprintln!(
        "FIGURES: test=proxy_operators_tools aws_calls={} through_proxy={} by_operation={counts:?}",
        proxy.total(),
        forward.totals().requests
    );
}

/// The forward proxy itself: an absolute-form request goes to its origin in origin form, a
/// CONNECT tunnel carries bytes both ways, and without its credentials both are refused (407).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forward_proxy_carries_requests_and_tunnels_and_refuses_strangers() {
    let moto = Moto::start().await;
    let forward = ForwardProxy::with_credentials(PROXY_USER, PROXY_PASSWORD).await;
    let origin = moto.addr().to_string();
    let authorization = forward.authorization().unwrap().to_string();
    let request = |method: &str, target: &str, auth: Option<&str>| {
        let mut headers = vec![("Host".to_string(), origin.clone())];
        if let Some(a) = auth {
            headers.push(("Proxy-Authorization".into(), a.to_string()));
        }
        HttpRequest {
            method: method.into(),
            target: target.into(),
            version: "HTTP/1.1".into(),
            headers,
            body: if method == "POST" { b"{}".to_vec() } else { Vec::new() },
        }
    };

    // Absolute form, twice on one connection: forwarded, and the connection kept.
    let stream = TcpStream::connect(forward.addr()).await.unwrap();
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    for _ in 0..2 {
        let req = request("POST", &format!("http://{origin}/moto-api/reset"), Some(&authorization));
        http::write_request(&mut wr, &req, false).await.unwrap();
        let answer = http::read_response(&mut rd, false).await.unwrap();
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    drop((rd, wr));
    // Without credentials: 407, nothing carried.
    let refused =
        http::send(forward.addr(), &request("POST", &format!("http://{origin}/moto-api/reset"), None)).await.unwrap();
    assert_eq!(refused.status, 407);
    assert!(refused.header("proxy-authenticate").is_some_and(|v| v.starts_with("Basic")));

    // CONNECT, then a plain request to moto through the tunnel.
    let mut tunnel = TcpStream::connect(forward.addr()).await.unwrap();
    let connect =
        format!("CONNECT {origin} HTTP/1.1\r\nHost: {origin}\r\nProxy-Authorization: {authorization}\r\n\r\n");
    tunnel.write_all(connect.as_bytes()).await.unwrap();
    let mut tunnel = BufReader::new(tunnel);
    let established = http::read_response(&mut tunnel, true).await.unwrap();
    assert_eq!(established.status, 200);
    http::write_request(tunnel.get_mut(), &request("GET", "/moto-api/", None), true).await.unwrap();
    let answer = http::read_response(&mut tunnel, false).await.unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    drop(tunnel);
    // CONNECT without credentials: 407.
    let mut stranger = TcpStream::connect(forward.addr()).await.unwrap();
    stranger.write_all(format!("CONNECT {origin} HTTP/1.1\r\nHost: {origin}\r\n\r\n").as_bytes()).await.unwrap();
    let mut stranger = BufReader::new(stranger);
    assert_eq!(http::read_response(&mut stranger, false).await.unwrap().status, 407);

    let carried = forward.carried_to(&origin);
    assert_eq!((carried.requests, carried.tunnels, carried.refused, carried.failed), (2, 1, 2, 0), "{carried:?}");
    assert_eq!(carried.operations.get("?"), Some(&2));
}
