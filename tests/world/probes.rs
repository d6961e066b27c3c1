//! `ProbeRunner`: plays the container of a task that runs `try`'s probe in place of the agent.
//!
//! No container runs in moto. This runner watches one cluster every 300 ms for live tasks whose
//! agent container's overrides carry the probe's variables (`ECS_EA_PROBE_SERVER_URL`,
//! `ECS_EA_PROBE_MATERIALS`), decides from the task's network ([`TaskNetwork`], read from moto
//! as AWS keeps it) what the probe script would meet, and ends the task as ECS ends a task whose
//! essential container exited: STOPPED, stop code `EssentialContainerExited`, and the
//! container's exit code. moto keeps no exit codes (it shows `exitCode` 0 on every container,
//! running or not), so a rule of the proxy (`world.container_exits`) answers DescribeTasks as
//! ECS does: no exit code on a container that has not exited, the probe's on one that has.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_ecs::types::DesiredStatus;
use serde_json::Value;
use tokio::task::JoinHandle;

use super::moto::{aws_error_text, task_override_env};
use super::network::{material_host, Internet, TaskNetwork};
use super::proxy::{aws_like::fetch_blocking, Call, Proxy, Verdict};

/// The exit of a task's container: (container name, exit code).
type Exits = Arc<Mutex<HashMap<String, (String, i32)>>>;

/// Runs the probes of one cluster; stops when dropped.
pub struct ProbeRunner {
    exits: Exits,
    task: JoinHandle<()>,
}

impl Drop for ProbeRunner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ProbeRunner {
    /// Watches `cluster` (through the test's own client `cfg`) and answers the probes of its
    /// tasks against `internet`; adds the proxy's rule that shows their exit codes.
    pub fn start(proxy: &Proxy, cfg: &SdkConfig, cluster: &str, internet: Internet) -> ProbeRunner {
        let exits: Exits = Arc::default();
        proxy.add_rule("world.container_exits", container_exits(proxy, exits.clone()));
        let run_tasks = proxy.requests_reader("ecs", "RunTask");
        let (cfg, cluster, shared) = (cfg.clone(), cluster.to_string(), exits.clone());
        let task = tokio::spawn(async move {
            loop {
                if let Err(e) = run_due(&run_tasks(), &cfg, &cluster, &internet, &shared).await {
                    eprintln!("probe runner: {e}");
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        ProbeRunner { exits, task }
    }

    /// The exit codes given so far, by task ARN.
    pub fn exits(&self) -> HashMap<String, i32> {
        self.exits.lock().unwrap().iter().map(|(arn, (_, code))| (arn.clone(), *code)).collect()
    }
}

/// Ends every live probe task not ended yet.
async fn run_due(
    run_tasks: &[Value],
    cfg: &SdkConfig,
    cluster: &str,
    internet: &Internet,
    exits: &Exits,
) -> Result<(), String> {
    let ecs = aws_sdk_ecs::Client::new(cfg);
    let listed = ecs
        .list_tasks()
        .cluster(cluster)
        .desired_status(DesiredStatus::Running)
        .send()
        .await
        .map_err(|e| format!("ListTasks: {}", aws_error_text(&e)))?;
    let arns: Vec<String> =
        listed.task_arns().iter().filter(|a| !exits.lock().unwrap().contains_key(*a)).cloned().collect();
    if arns.is_empty() {
        return Ok(());
    }
    let described = ecs
        .describe_tasks()
        .cluster(cluster)
        .set_tasks(Some(arns))
        .send()
        .await
        .map_err(|e| format!("DescribeTasks: {}", aws_error_text(&e)))?;
    for task in described.tasks() {
        let (Some(arn), Some(server)) = (task.task_arn(), task_override_env(task, "ECS_EA_PROBE_SERVER_URL")) else {
            continue;
        };
        let materials: Vec<(String, u16)> = task_override_env(task, "ECS_EA_PROBE_MATERIALS")
            .unwrap_or("")
            .split_whitespace()
            .map(|m| {
                let (host, port) = m.rsplit_once(':').unwrap_or((m, "0"));
                (host.to_string(), port.parse().unwrap_or(0))
            })
            .collect();
        let container = task
            .overrides()
            .and_then(|o| o.container_overrides().first())
            .and_then(|c| c.name())
            .unwrap_or("gocd-agent")
            .to_string();
        // Not readable yet (its RunTask not logged yet): the next poll decides.
        let Ok(network) = TaskNetwork::read(cfg, cluster, arn, run_tasks).await else { continue };
        let code = network.probe_exit(internet, Some(server), &materials);
        exits.lock().unwrap().insert(arn.to_string(), (container, code));
        ecs.stop_task()
            .cluster(cluster)
            .task(arn)
            .reason("Essential container in task exited")
            .send()
            .await
            .map_err(|e| format!("StopTask: {}", aws_error_text(&e)))?;
    }
    Ok(())
}

/// DescribeTasks answers as ECS gives them for a task whose essential container exited: the
/// container's `exitCode`, the task STOPPED with stop code `EssentialContainerExited`.
fn container_exits(proxy: &Proxy, exits: Exits) -> impl Fn(&Call) -> Verdict + Send + Sync + 'static {
    let upstream = proxy.upstream();
    move |call: &Call| {
        if !call.is("ecs", "DescribeTasks") {
            return Verdict::Forward;
        }
        let mut answer = match fetch_blocking(upstream, &call.request) {
            Ok(answer) => answer,
            Err(_) => return Verdict::Forward,
        };
        let Ok(mut body) = serde_json::from_slice::<Value>(&answer.body) else {
            return Verdict::Respond(answer);
        };
        let exits = exits.lock().unwrap();
        for task in body["tasks"].as_array_mut().into_iter().flatten() {
            let Some((container, code)) = task["taskArn"].as_str().and_then(|a| exits.get(a)).cloned() else {
                if task["lastStatus"] != "STOPPED" {
                    for c in task["containers"].as_array_mut().into_iter().flatten() {
                        if let Some(c) = c.as_object_mut() {
                            c.remove("exitCode");
                        }
                    }
                }
                continue;
            };
            task["lastStatus"] = "STOPPED".into();
            task["desiredStatus"] = "STOPPED".into();
            task["stopCode"] = "EssentialContainerExited".into();
            task["stoppedReason"] = "Essential container in task exited".into();
            for c in task["containers"].as_array_mut().into_iter().flatten() {
                if c["name"] == container.as_str() {
                    c["exitCode"] = code.into();
                    c["lastStatus"] = "STOPPED".into();
                }
            }
        }
        answer.body = body.to_string().into_bytes();
        Verdict::Respond(answer)
    }
}

/// The host and port of each material a job names.
pub fn material_hosts(materials: &[String]) -> Vec<(String, u16)> {
    materials.iter().map(|m| material_host(m)).collect()
}
