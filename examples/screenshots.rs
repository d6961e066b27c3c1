//! Renders every status report (plugin, cluster, agent, unknown agent) with real data from a run
//! against a local AWS (moto), for `scripts/screenshots` to photograph.
//!
//! The run: three cluster profiles in two accounts (one FARGATE with a log group and an image
//! allow-list, one FARGATE_SPOT through AssumeRole whose first spot launches are refused, one EC2
//! whose instances the instance simulator registers), a few jobs that finish, some that keep
//! building, one whose agent never registers, one whose task an operator stops by hand, one
//! refused for its image, and some throttled ECS reads. Then each report is written as a
//! standalone HTML page into the folder given as the first argument.
//!
//! `MOTO_SERVER=/path/to/moto_server cargo run --example screenshots -- /tmp/reports`

#![allow(clippy::print_stdout, clippy::print_stderr)]

use test_world as world;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use world::moto::{self, REGION};
use world::profiles::IMAGE;
use world::proxy::{rules, Call};
use world::*;

const ROLE_ARN: &str = "arn:aws:iam::111111111111:role/gocd-agents";

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "target/status-reports".into()));
    std::fs::create_dir_all(&dir).expect("create the output folder");
    let moto = Moto::start().await;
    let proxy = Proxy::start(moto.addr()).await;
    let base = moto.base_config().await;
    let role = moto.assume_role_config(ROLE_ARN).await;
    moto::create_cluster(&base, "ci-shared").await;
    moto::create_cluster(&role.config, "ci-team-b").await;
    moto::create_cluster(&base, "ci-ec2").await;
    world::ec2::create_instance_profile(moto.addr(), moto::TEST_ACCESS_KEY_ID, "gocd-ecs-instance").await;
    refuse_first_spot_launches(&proxy, 2);
    throttle_some_reads(&proxy, 3);

    let shared = props(&[
        ("ClusterName", "ci-shared"),
        ("Region", REGION),
        ("MaxAgents", "8"),
        ("LogGroup", "/gocd/agents"),
        ("AllowedImages", "gocd/gocd-agent-*"),
        ("Tags", "team=platform\ncost-center=ci"),
    ]);
    let team_b = props(&[
        ("ClusterName", "ci-team-b"),
        ("Region", REGION),
        ("RoleArn", ROLE_ARN),
        ("LaunchType", "FARGATE_SPOT"),
        ("MaxAgents", "4"),
    ]);
    let ec2 = props(&[
        ("ClusterName", "ci-ec2"),
        ("Region", REGION),
        ("LaunchType", "EC2"),
        ("Ec2InstanceType", "c5.xlarge"),
        ("Ec2InstanceProfile", "gocd-ecs-instance"),
        ("Ec2AmiId", "ami-0abcdef1234567890"),
        ("Ec2MaxInstances", "3"),
    ]);
    let large = props(&[("Image", IMAGE), ("Cpu", "2048"), ("Memory", "3000")]);
    let small = props(&[
        ("Image", IMAGE),
        ("Cpu", "512"),
        ("Memory", "1024"),
        ("Tags", "size=small"),
        // The shared profile's LogGroup needs an execution role on Fargate.
        ("ExecutionRoleArn", "arn:aws:iam::123456789012:role/ecsTaskExecutionRole"),
    ]);
    let rogue = props(&[("Image", "docker.io/library/ubuntu:24.04"), ("Cpu", "512"), ("Memory", "1024")]);
    let config = HostConfig::new(&proxy.endpoint())
        .cluster_profile("shared", shared)
        .cluster_profile("team-b", team_b)
        .elastic_profile("small", "shared", small.clone())
        .elastic_profile("rogue", "shared", rogue)
        .cluster_profile("ec2", ec2)
        .elastic_profile("spot", "team-b", small)
        .elastic_profile("large", "ec2", large);
    let host = GoCdHost::launch(config).await;
    let fleets = vec![
        Fleet::new("shared", &base, "ci-shared"),
        Fleet::new("team-b", &role.config, "ci-team-b"),
        Fleet::new("ec2", &base, "ci-ec2"),
    ];
    let instances =
        world::ec2::InstanceSimulator::start(fleets.clone(), host.server_id(), world::ec2::Ec2Policy::default());
    let sim = AgentSimulator::start(
        &host,
        fleets,
        SimPolicy { register_delay: Duration::from_millis(1500), ..SimPolicy::default() },
    );

    let quick = host.add_jobs(JobSpec::new("small", Duration::from_secs(3)), 3).await;
    let long = host.add_job(JobSpec::new("small", Duration::from_secs(3600)).in_environment("production")).await;
    let stopped = host.add_job(JobSpec::new("small", Duration::from_secs(3600))).await;
    host.add_jobs(JobSpec::new("spot", Duration::from_secs(3600)), 2).await;
    host.add_job(JobSpec::new("spot", Duration::from_secs(4))).await;
    let stuck_job = host.job_identifier(host.add_job(JobSpec::new("small", Duration::from_secs(60))).await).job_id;
    sim.never_register(stuck_job);
    host.add_job(JobSpec::new("rogue", Duration::from_secs(3))).await;
    let ec2_jobs = host.add_jobs(JobSpec::new("large", Duration::from_secs(3600)), 3).await;
    say("scheduled 13 jobs on three cluster profiles");

    host.wait_until("the quick jobs to finish", Duration::from_secs(180), |s| {
        quick.iter().all(|h| matches!(s.job(*h).state, JobState::Completed { .. }))
    })
    .await;
    host.wait_until("the long jobs to build", Duration::from_secs(120), |s| {
        matches!(s.job(long).state, JobState::Running { .. })
            && matches!(s.job(stopped).state, JobState::Running { .. })
    })
    .await;
    host.wait_until("the EC2 jobs to build", Duration::from_secs(180), |s| {
        ec2_jobs.iter().all(|h| matches!(s.job(*h).state, JobState::Running { .. }))
    })
    .await;
    let agent_of = |h: JobHandle| {
        host.with_state(|s| match &s.job(h).state {
            JobState::Running { agent_id } => agent_id.clone(),
            other => panic!("job {h:?} is {other:?}"),
        })
    };
    let (long_agent, stopped_agent) = (agent_of(long), agent_of(stopped));
    let stopped_job = host.job_identifier(stopped).job_id;
    sim.stop_task_by_hand(stopped_job, "Essential container in task exited").await;
    host.wait_until("the stop to be noticed", Duration::from_secs(60), |s| {
        s.health_ever_mentions("stopped before the job completed")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    say("jobs finished, built, got stuck, stopped and refused; rendering the reports");

    let mut pages = Vec::new();
    pages.push(write(&dir, "plugin", &view(host.plugin_status_report().await)));
    pages.push(write(&dir, "cluster", &view(host.cluster_status_report("shared").await)));
    pages.push(write(&dir, "cluster-team-b", &view(host.cluster_status_report("team-b").await)));
    pages.push(write(&dir, "cluster-ec2", &view(host.cluster_status_report("ec2").await)));
    pages.push(write(&dir, "agent", &view(host.agent_status_report("shared", Some(&long_agent), None).await)));
    pages.push(write(
        &dir,
        "agent-stopped",
        &view(host.agent_status_report("shared", Some(&stopped_agent), None).await),
    ));
    pages.push(write(
        &dir,
        "agent-unknown",
        &view(host.agent_status_report("shared", Some("ea-0123456789ab-42-deadbeef"), None).await),
    ));
    host.shutdown().await;
    drop(sim);
    drop(instances);
    for page in pages {
        println!("{}", page.display());
    }
}

/// The first `n` FARGATE_SPOT launches are refused for capacity (then the plugin falls back).
fn refuse_first_spot_launches(proxy: &Proxy, n: usize) {
    let refuse = rules::fargate_spot_capacity_refused();
    let seen = Arc::new(AtomicUsize::new(0));
    proxy.add_rule("refuse-some-spot", move |call: &Call| {
        if rules::asks_fargate_spot(call) && seen.fetch_add(1, Ordering::SeqCst) < n {
            refuse(call)
        } else {
            Verdict::Forward
        }
    });
}

/// A few ECS DescribeTasks are throttled (the plugin retries them).
fn throttle_some_reads(proxy: &Proxy, n: usize) {
    let seen = Arc::new(AtomicUsize::new(0));
    proxy.add_rule("throttle-some-reads", move |call: &Call| {
        let k = if call.is("ecs", "DescribeTasks") {
            seen.fetch_add(1, Ordering::SeqCst)
        } else {
            return Verdict::Forward;
        };
        if (5..5 + n).contains(&k) {
            Verdict::ecs_error(400, "ThrottlingException", "Rate exceeded")
        } else {
            Verdict::Forward
        }
    });
}

fn view(reply: Result<world::host::Reply, world::host::HostError>) -> String {
    let reply = reply.expect("the status report was answered");
    assert_eq!(reply.code, 200, "status report answered {}: {}", reply.code, reply.body);
    reply.body["view"].as_str().unwrap_or_default().to_string()
}

fn write(dir: &Path, name: &str, view: &str) -> PathBuf {
    let path = dir.join(format!("{name}.html"));
    std::fs::write(&path, page(name, view)).expect("write the report");
    path
}

/// A page like GoCD's status report page around the plugin's view.
fn page(name: &str, view: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{name} status report</title>\
         <style>body{{margin:0;background:#fff}}.page{{padding:20px 28px}}</style></head>\
         <body><div class=\"page\">{view}</div></body></html>\n"
    )
}

fn say(line: &str) {
    eprintln!("screenshots: {line}");
}
