//! The end-to-end test world (`docs/design.md`, "The test world"): moto as AWS, a proxy in front of it, a GoCD host
//! simulator driving the real plugin binary over stdio, and an agent simulator playing the
//! containers. A crate of the workspace (`Cargo.toml` beside this file), compiled once for the
//! end-to-end tests, the `soak` and `floors` benches and the `demo` and `screenshots` examples.
//!
//! - [`moto`]: moto's server per test, SDK configs for the test's own clients, account set-up.
//! - [`proxy`]: HTTP proxy between plugin and moto; counts calls, rules answer or drop them.
//! - [`forward_proxy`]: `ForwardProxy`, the GoCD server's outbound proxy (`HTTP_PROXY`): forwards
//!   absolute-form requests and CONNECT tunnels, and counts what it carried per target.
//! - [`aws_rules`]: AWS's own rules (`docs/aws-rules.md`), enforced by every proxy on every call.
//!   `README.md` beside this file: the stand-ins where moto knows nothing (ECS Managed Instances).
//! - [`host`]: `GoCdHost`, the GoCD server simulator.
//! - [`agents`]: `AgentSimulator`, registers the agent of every task the plugin starts.
//! - [`ec2`]: `InstanceSimulator`, the ECS agent of every EC2 instance the plugin launches.
//! - [`network`]: what a task's connections meet (DNS, security groups, routes, firewalls, TLS,
//!   GoCD's answer), read from moto as AWS keeps it; the agents and `try`'s probe obey it.
//! - [`probes`]: `ProbeRunner`, the container of a task that runs `try`'s probe.
//! - [`eventbridge`]: `EventBridge`, a rule's delivery of ECS task state changes to a moto SQS queue.
//! - [`profiles`]: the agent image and the small Fargate profiles tests start from.
//! - [`scenario`]: `Scenario`, one test's moto, proxy and watched clusters.
//! - [`secrets`]: `SecretScanner`, fails a test when a secret reaches what operators read.
//! - [`stack`]: the cluster stack in moto's CloudFormation, and what moto leaves out of it.
//! - [`starts`]: `TaskStarts`, a task's start timed as on AWS (PROVISIONING, the image pull,
//!   PENDING, RUNNING, with ECS's times), through a proxy rewrite.
//! - [`http`]: the minimal HTTP/1.1 codec the proxy and moto-api calls use.
//!
//! Environment: `MOTO_SERVER` (required: path of `moto_server`, see `scripts/moto.sh`);
//! `WORLD_ECHO_PLUGIN_STDERR=1` echoes the plugin's stderr live; `WORLD_MOTO_LOG=1` writes each
//! moto's log to `$TMPDIR/ecs-ea-moto-<port>.log`; `WORLD_AWS_RULES=off` switches the proxy's AWS
//! rules off (a diagnosis only).

#![allow(dead_code)]

pub mod agents;
pub mod aws_rules;
pub mod ec2;
pub mod eventbridge;
pub mod forward_proxy;
pub mod host;
pub mod http;
pub mod moto;
pub mod network;
pub mod probes;
pub mod profiles;
pub mod proxy;
pub mod scenario;
pub mod secrets;
pub mod stack;
pub mod starts;

#[allow(unused_imports)]
pub use agents::{AgentSimulator, Fleet, SimPolicy};
#[allow(unused_imports)]
pub use host::{props, GoCdHost, HostConfig, JobHandle, JobSpec, JobState};
#[allow(unused_imports)]
pub use moto::Moto;
#[allow(unused_imports)]
pub use proxy::{Proxy, Verdict};
#[allow(unused_imports)]
pub use scenario::Scenario;
#[allow(unused_imports)]
pub use secrets::{SecretKind, SecretScanner};

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls an async condition every 200 ms until it holds.
///
/// # Panics
/// After `timeout`, naming `what`.
pub async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if cond().await {
            return;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
