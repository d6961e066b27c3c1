//! Image pulls, end to end on moto behind the strict proxy: the proxy adds ECS's
//! `pullStartedAt`/`pullStoppedAt` (which moto leaves out) to DescribeTasks; after two jobs on
//! an ECR image, the cluster status report's "Images" table has the image's two pulls, their
//! p50 and p95 and its size as ECR tells it (DescribeImages, read once however often the report
//! is asked for), and `/metrics` has the `ecs_ea_image_pull_seconds` histogram with two pulls
//! for the cluster profile, elastic profile and image.
//!
//! With `STATUS_REPORTS_DIR=DIR` the cluster report is also written there, as
//! `images-cluster.html`, to look at (`scripts/screenshots` photographs such pages).
//!
//! Needs `MOTO_SERVER`; never skips.

use std::net::SocketAddr;
use std::time::Duration;

use crate::metrics::{http_get, value};
use crate::scenario_ext::*;
use crate::world::moto::REGION;
use crate::world::profiles::cluster_props;
use crate::world::*;

/// The agent image, in the ECR registry of moto's account and region.
const IMAGE: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gocd/agent:v24.1.0";

/// A Docker image manifest whose config moto takes for the image's size (moto's
/// `imageSizeInBytes` is the config's `size`): 5 MiB.
const MANIFEST: &str = r#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
"config":{"mediaType":"application/vnd.docker.container.image.v1+json","size":5242880,"digest":"sha256:1111111111111111111111111111111111111111111111111111111111111111"},
"layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","size":5242880,"digest":"sha256:2222222222222222222222222222222222222222222222222222222222222222"}]}"#;

/// Pushes `manifest` to `repository:tag` in moto's ECR (creating the repository if needed).
pub(crate) async fn push_manifest(
    base: &aws_config::SdkConfig,
    repository: &str,
    tag: &str,
    manifest: &str,
    media_type: &str,
) {
    let ecr = aws_sdk_ecr::Client::new(base);
    let _ = ecr.create_repository().repository_name(repository).send().await;
    ecr.put_image()
        .repository_name(repository)
        .image_tag(tag)
        .image_manifest(manifest)
        .image_manifest_media_type(media_type)
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutImage {repository}:{tag}: {e:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pull_times_per_image_are_in_the_status_report_and_the_metrics() {
    let mut w = Scenario::new("image_pulls").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    push_manifest(&base, "gocd/agent", "v24.1.0", MANIFEST, "application/vnd.docker.distribution.manifest.v2+json")
        .await;
    // ECS's task times, which moto leaves out, so each start has its image pull as on AWS.
    w.proxy.add_rule("ecs.task_times", crate::world::proxy::aws_like::ecs_task_times(w.moto.addr()));
    let elastic = props(&[
        ("Image", IMAGE),
        ("Cpu", "512"),
        ("Memory", "1024"),
        ("ExecutionRoleArn", "arn:aws:iam::123456789012:role/ecsTaskExecutionRole"),
    ]);
    let cfg = w.host_config().cluster_profile("p", cluster_props("gocd-a", &[])).elastic_profile("small", "p", elastic);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() });
    host.add_jobs(JobSpec::new("small", Duration::from_secs(1)), 2).await;
    host.wait_until("every job completed", Duration::from_secs(120), |s| s.all_completed()).await;

    // The report: two pulls of the image, their p50 and p95, its size from ECR.
    let page = loop_until_two_pulls(&host).await;
    let row = image_row(&page).expect("a row for the image");
    assert!(row.contains("<td class=\"num\">2</td>"), "two pulls: {row}");
    assert!(row.contains(" s<div class=\"sub\">of the last 2</div>"), "p50 over the two: {row}");
    assert!(row.contains("5.0 MiB"), "ECR's size: {row}");
    let before = w.proxy.count("ecr:DescribeImages");
    assert_eq!(before, 1, "one DescribeImages for the image");
    let _ = host.cluster_status_report("p").await.expect("answered");
    assert_eq!(w.proxy.count("ecr:DescribeImages"), 1, "the size is read at most once an hour");
    if let Some(dir) = std::env::var_os("STATUS_REPORTS_DIR") {
        let html = format!("<!doctype html><html><head><meta charset=\"utf-8\"></head><body style=\"margin:0\"><div style=\"padding:20px 28px\">{page}</div></body></html>\n");
        std::fs::write(std::path::Path::new(&dir).join("images-cluster.html"), html).expect("write the page");
    }

    // The metric: a histogram per cluster profile, elastic profile and image.
    let addr: SocketAddr = ([127, 0, 0, 1], w.metrics_port).into();
    let (status, _, body) = http_get(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("# TYPE ecs_ea_image_pull_seconds histogram"), "{body}");
    let count = body
        .lines()
        .find(|l| {
            l.starts_with("ecs_ea_image_pull_seconds_count{cluster=\"gocd-a\",")
                && l.contains(&format!("image=\"{IMAGE}\""))
        })
        .unwrap_or_else(|| panic!("no pull count for the image:\n{body}"));
    assert!(count.contains(&format!("region=\"{REGION}\"")) && count.contains("elastic_profile=\""), "{count}");
    assert_eq!(value(count, "ecs_ea_image_pull_seconds_count"), Some(2.0), "{count}");
    let inf = "le=\"+Inf\"} 2";
    assert!(
        body.lines()
            .any(|l| l.starts_with("ecs_ea_image_pull_seconds_bucket{") && l.contains(IMAGE) && l.ends_with(inf)),
        "{body}"
    );
    let sum = value(&body, "ecs_ea_image_pull_seconds_sum{cluster=\"gocd-a\",").expect("a sum");
    assert!((0.0..2.0).contains(&sum), "two pulls of under a second each: {sum}");

    let figures = format!("pulls=2 pull_sum_s={sum:.3}");
    w.finish(host, sim, &figures).await;
}

/// The cluster report once its Images table has the image's two pulls (the second job's task
/// times may come with the next refresh).
async fn loop_until_two_pulls(host: &GoCdHost) -> String {
    let started = std::time::Instant::now();
    loop {
        let report = host.cluster_status_report("p").await.expect("cluster status report");
        let page = report.body["view"].as_str().unwrap_or_default().to_string();
        assert!(page.contains("<h3>Images</h3>"), "{page}");
        if image_row(&page).is_some_and(|row| row.contains("<td class=\"num\">2</td>")) {
            return page;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no two pulls in the report after 90 s: {:?}\n{page}",
            image_row(&page)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The Images table's row of [`IMAGE`], from the image's cell to the row's end (the agents'
/// table names the image too). The template engine escapes `/`, as in every value.
fn image_row(page: &str) -> Option<&str> {
    let table = page.find("<h3>Images</h3>")?;
    let start = table + page[table..].find(&format!("<td><code>{}</code></td>", IMAGE.replace('/', "&#x2f;")))?;
    let end = page[start..].find("</tr>").map_or(page.len(), |i| start + i);
    Some(&page[start..end])
}
