//! The plugin's main job, end to end, against a local AWS (moto's server): a simulated GoCD
//! server loads the real plugin binary, schedules jobs on two cluster profiles in two AWS
//! accounts (one through AssumeRole), a simulated fleet registers the agents of the Fargate tasks
//! the plugin starts, the jobs run and finish, the plugin stops every task and deletes every
//! agent. The cluster status reports are written to files whose paths are printed last.
//!
//! Run it with `scripts/demo` (which installs moto first), or
//! `MOTO_SERVER=/path/to/moto_server cargo run --example demo`.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use test_world as world;

use std::time::Duration;

use world::moto::{self, REGION};
use world::*;

const ROLE_ARN: &str = "arn:aws:iam::111111111111:role/gocd-agents";

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    say("starting a local AWS (moto) on a free loopback port");
    let moto = Moto::start().await;
    let base = moto.base_config().await;
    let role = moto.assume_role_config(ROLE_ARN).await;
    moto::create_cluster(&base, "ci-shared").await;
    moto::create_cluster(&role.config, "ci-team-b").await;
    say("created ECS cluster ci-shared in account 123456789012 and ci-team-b in account 111111111111");

    let cluster = |name: &str, extra: &[(&str, &str)]| {
        let mut p = props(&[("ClusterName", name), ("Region", REGION), ("MaxAgents", "5")]);
        p.extend(props(extra));
        p
    };
    let elastic = props(&[("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0"), ("Cpu", "512"), ("Memory", "1024")]);
    let config = HostConfig::new(&moto.endpoint())
        .cluster_profile("shared", cluster("ci-shared", &[]))
        .cluster_profile("team-b", cluster("ci-team-b", &[("RoleArn", ROLE_ARN), ("LaunchType", "FARGATE_SPOT")]))
        .elastic_profile("small-shared", "shared", elastic.clone())
        .elastic_profile("small-team-b", "team-b", elastic);
    let host = GoCdHost::launch(config).await;
    say("GoCD (simulated) loaded the plugin: migrate-config, metadata, views, icon, capabilities");
    let fleet = vec![Fleet::new("shared", &base, "ci-shared"), Fleet::new("team-b", &role.config, "ci-team-b")];
    let agents = AgentSimulator::start(
        &host,
        fleet,
        SimPolicy { register_delay: Duration::from_millis(500), ..SimPolicy::default() },
    );

    for _ in 0..4 {
        host.add_job(JobSpec::new("small-shared", Duration::from_secs(4))).await;
        host.add_job(JobSpec::new("small-team-b", Duration::from_secs(4)).in_environment("prod")).await;
    }
    say("scheduled 8 jobs; the plugin starts one Fargate task per job");
    host.wait_until("every job to finish", Duration::from_secs(240), |s| s.all_completed()).await;
    host.wait_until("every agent deleted", Duration::from_secs(90), |s| s.agents.is_empty()).await;
    say(&format!("all 8 jobs finished in {} tasks; every agent was deleted", agents.with_state(|s| s.tasks.len())));

    let dir = std::env::temp_dir().join("ecs-elastic-agent-demo");
    std::fs::create_dir_all(&dir).expect("create the report folder");
    let mut written = Vec::new();
    for id in ["shared", "team-b"] {
        let reply = host.cluster_status_report(id).await.expect("cluster status report answered");
        let view = reply.body["view"].as_str().unwrap_or_default().to_string();
        let path = dir.join(format!("cluster-status-{id}.html"));
        std::fs::write(&path, page(&view)).expect("write the report");
        written.push(path);
    }
    host.shutdown().await;
    drop(agents);
    for path in written {
        println!("cluster status report written to {}", path.display());
    }
}

fn say(line: &str) {
    eprintln!("demo: {line}");
}

fn page(view: &str) -> String {
    format!("<!doctype html><html><head><meta charset=\"utf-8\"><title>ECS elastic agents</title></head><body>{view}</body></html>\n")
}
