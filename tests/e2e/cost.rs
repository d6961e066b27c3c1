//! Cost per job, end to end on moto behind the strict proxy: two Fargate jobs run one
//! after the other; each job's console ends with its cost line, the cluster status report lists
//! each pipeline with that cost, `ecs_ea_job_cost_usd_total` grows by the same amount after
//! each job, and the log has one `job cost` line per job with its pipeline, stage and job.
//!
//! With `STATUS_REPORTS_DIR=DIR` the cluster report is also written there, as
//! `cost-cluster.html`, to look at (`scripts/screenshots` photographs such pages).
//!
//! Needs `MOTO_SERVER`; never skips.

use std::net::SocketAddr;
use std::time::Duration;

use crate::metrics::{http_get, value};
use crate::scenario_ext::*;
use crate::world::host::{JobHandle, JobState};
use crate::world::profiles::{cluster_props, elastic_props};
use crate::world::*;

/// The USD amount a console line ends with (`…: $0.0004`, four decimals).
fn amount(line: &str) -> f64 {
    let (_, tail) = line.rsplit_once('$').unwrap_or_else(|| panic!("no amount in {line:?}"));
    tail.trim_end_matches(|c: char| !c.is_ascii_digit()).parse().unwrap_or_else(|e| panic!("{line:?}: {e}"))
}

/// Runs one job to its completion and returns its cost line.
async fn run_job(host: &GoCdHost) -> (JobHandle, String) {
    let h = host.add_job(JobSpec::new("small", Duration::from_secs(2))).await;
    host.wait_until("the job completed and job-completion answered", Duration::from_secs(90), |s| {
        matches!(s.job(h).state, JobState::Completed { .. }) && s.job(h).completion_code.is_some()
    })
    .await;
    (h, host.cost_line(h).await)
}

/// The job-cost counter of the elastic profile's series (0 before any job).
async fn counter(addr: SocketAddr) -> f64 {
    let (status, _, body) = http_get(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("# TYPE ecs_ea_job_cost_usd_total counter"), "{body}");
    assert!(
        !body.lines().any(|l| l.starts_with("ecs_ea_job_cost_usd_total{") && l.contains("pipeline")),
        "no pipeline label"
    );
    value(&body, "ecs_ea_job_cost_usd_total{cluster=\"gocd-a\",").unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_jobs_cost_is_in_its_console_the_report_the_metric_and_the_log() {
    let mut w = Scenario::new("cost_per_job").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let cfg = w.host_config().cluster_profile("p", cluster_props("gocd-a", &[])).elastic_profile(
        "small",
        "p",
        elastic_props(),
    );
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() });
    let addr: SocketAddr = ([127, 0, 0, 1], w.metrics_port).into();
    assert_eq!(counter(addr).await, 0.0, "nothing before the first job");

    let (first, line) = run_job(&host).await;
    assert!(line.contains("on Fargate, 0.5 vCPU 1 GB, us-east-1"), "{line}");
    let first_usd = amount(&line);
    assert!(first_usd > 0.0, "{line}");
    let after_first = counter(addr).await;
    assert!((after_first - first_usd).abs() < 0.00005, "the metric grew by the console's {first_usd}: {after_first}");

    let (second, line) = run_job(&host).await;
    let second_usd = amount(&line);
    let after_second = counter(addr).await;
    assert!(
        (after_second - after_first - second_usd).abs() < 0.00005,
        "the metric grew by the second job's {second_usd}: {after_first} → {after_second}"
    );

    let report = host.cluster_status_report("p").await.expect("answered");
    let page = report.body["view"].as_str().unwrap_or_default().to_string();
    let (p1, p2) = host.with_state(|s| {
        (s.job(first).identifier.pipeline_name.clone(), s.job(second).identifier.pipeline_name.clone())
    });
    for (pipeline, usd) in [(&p1, first_usd), (&p2, second_usd)] {
        let row = format!("<tr><td>{pipeline}</td><td>build</td><td class=\"num\">${usd:.4}");
        assert!(page.contains(&row), "the report lists {pipeline} at ${usd:.4}:\n{page}");
    }
    assert!(page.contains("Kept in memory only"), "the report says the history is lost on restart");
    if let Some(dir) = std::env::var_os("STATUS_REPORTS_DIR") {
        let html = format!("<!doctype html><html><head><meta charset=\"utf-8\"></head><body style=\"margin:0\"><div style=\"padding:20px 28px\">{page}</div></body></html>\n");
        std::fs::write(std::path::Path::new(&dir).join("cost-cluster.html"), html).expect("write the page");
    }

    let stderr = host.stderr_text();
    let logged: Vec<&str> = stderr.lines().filter(|l| l.contains("job cost")).collect();
    assert_eq!(logged.len(), 2, "one log line per job: {logged:#?}");
    for (line, pipeline) in logged.iter().zip([&p1, &p2]) {
        assert!(
            line.contains(pipeline.as_str()) && line.contains("stage=build") && line.contains("cost_usd="),
            "{line}"
        );
    }

    let figures = format!("jobs=2 first_usd={first_usd} second_usd={second_usd} metric_usd={after_second}");
    w.finish(host, sim, &figures).await;
}
