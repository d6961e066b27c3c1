//! The start model, phase by phase, and the prices: every figure the job-wait bench assumes,
//! each from a published source named here and in README "Job wait".
//!
//! Fargate, cold: create-agent → RunTask accepted ([`RUNTASK`]) → PROVISIONING ([`PROVISION`])
//! → PENDING, the image pull ([`pull`]) → RUNNING → the agent starts, downloads its jars from the
//! GoCD server and registers ([`AGENT`]) → the agent asks for work and GoCD assigns the job
//! ([`pickup`]). Billing runs from the start of the pull to the task's stop.
//!
//! EC2: an instance registers [`EC2_BOOT`] after its launch; a task placed on it pulls the image
//! if the instance has not pulled it before (else [`PULL_CACHED`]), then the agent starts and
//! is picked up as above. Instances are billed from launch to termination.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use ecs_elastic_agent::cost::{fargate_task_cost, PriceTable, TaskSize};

/// create-agent to RunTask accepted: one AWS call (the plugin's own, under a second).
pub const RUNTASK: u64 = 1;
/// Fargate PROVISIONING and ENI attachment: the measured 57 s from creation to start of a
/// 413 MB image on Fargate (elasticscale, "Reduce AWS Fargate pull times with SOCI"), less the
/// pull's 76 % share of a container's start (AWS News Blog, "AWS Fargate Enables Faster
/// Container Startup using Seekable OCI", citing Harter et al., "Slacker", FAST '16): 14 s.
pub const PROVISION: u64 = 14;
/// The image the published Fargate figure pulled, and its pull time (76 % of 57 s).
pub const MEASURED_IMAGE_MB: u64 = 413;
pub const MEASURED_PULL: u64 = 43;
/// The GoCD agent image assumed unless `--image-mb` says otherwise: the measured image's size
/// (a GoCD agent image with a JDK and build tools is of that order).
pub const IMAGE_MB: u64 = 413;
/// Pulling an image an EC2 instance already holds (ECS's default pull behaviour checks the
/// manifest; the layers are cached).
pub const PULL_CACHED: u64 = 1;
/// The agent's own start: the bootstrapper downloads agent.jar, agent-launcher.jar and
/// agent-plugins.zip from the GoCD server and registers: 21 s in GoCD's docker elastic agents
/// (gocd-contrib/docker-elastic-agents-plugin issue 38; gocd/gocd issue 11215: about 10 of
/// 15 s downloading and loading jars and zips).
pub const AGENT: u64 = 21;
/// Launch to container-instance registration: the EC2 cost bench's figure (benches/ec2_cost),
/// about 30 s of boot to SSH for c5.xlarge Linux AMIs (daemonology.net, "EC2 boot time
/// benchmarking", 2021) plus the ECS agent's start and registration.
pub const EC2_BOOT: u64 = 90;
/// Start of a stopped instance (`Ec2StoppedInstances`) to its container instance back in
/// service: pre-initialised instances of an EC2 Auto Scaling warm pool, kept stopped, "can be
/// launched to serve traffic in as low as 30 seconds" (InfoQ, "AWS Launches EC2 Auto Scaling Warm
/// Pools", May 2021, on AWS's launch post), plus 10 s assumed for the ECS agent to restore its
/// state file and reconnect as the same container instance (ECS's warm-pool support restarts the
/// agent the same way).
pub const EC2_RESTART: u64 = 40;
/// Launch to the start of the image pre-pull the plugin's user data runs in the background:
/// Docker is up with the OS, about 30 s of boot to SSH for c5.xlarge (daemonology.net, as
/// [`EC2_BOOT`]); the pull then takes [`pull`], so a 413 MB image is cached before the instance
/// registers.
pub const PREPULL_START: u64 = 30;
/// What a stopped instance costs: its root volume of [`ROOT_GIB`] (`Ec2RootVolumeGiB`'s
/// default) at [`gp3_gib_month`].
pub const ROOT_GIB: f64 = 30.0;
/// AWS bills a GiB-month as 730 hours.
pub const HOURS_PER_MONTH: f64 = 730.0;

/// GoCD's agent work loop (gocd/gocd pull request 11286, GoCD 23.1): after registering or
/// finishing a job an agent asks for work after 1 s, then backs off by 1.5× up to every 10 s;
/// the server assigns work asynchronously, so a job is taken at the first ask at least
/// [`ASSIGN_LAG`] after it became assignable.
pub const GET_WORK_DELAY: f64 = 1.0;
pub const GET_WORK_BACKOFF: f64 = 1.5;
pub const GET_WORK_INTERVAL: f64 = 10.0;
pub const ASSIGN_LAG: u64 = 1;

/// The region whose prices the bench uses.
pub const REGION: &str = "us-east-1";

/// The plugin's price table (`ecs_elastic_agent::cost`, README "Cost"): Fargate Linux/x86 per
/// vCPU-hour and GB-hour, billed per second with a one-minute minimum from the pull's start; EC2
/// on demand per hour.
pub fn prices() -> &'static PriceTable {
    static PRICES: OnceLock<PriceTable> = OnceLock::new();
    PRICES.get_or_init(PriceTable::embedded)
}

/// c5.xlarge on demand, Linux, per hour, in [`REGION`].
pub fn c5_xlarge_hour() -> f64 {
    prices().ec2_hour(REGION, "c5.xlarge").unwrap_or_else(|e| panic!("{e}"))
}

/// gp3 storage per GiB-month in [`REGION`], from the price table.
pub fn gp3_gib_month() -> f64 {
    prices().gp3_gb_month(REGION).unwrap_or_else(|e| panic!("{e}"))
}

/// The image pull on Fargate (or the first on an EC2 instance), in proportion to the
/// published figure.
pub fn pull(image_mb: u64) -> u64 {
    (image_mb * MEASURED_PULL).div_ceil(MEASURED_IMAGE_MB)
}

/// create-agent to the agent registered, for a cold Fargate start.
pub fn fargate_cold(image_mb: u64) -> u64 {
    RUNTASK + PROVISION + pull(image_mb) + AGENT
}

/// When an agent idle (registered, or done with its last job) since `idle_since` takes a job
/// that became assignable at `ready`: its first ask for work at or after `ready + ASSIGN_LAG`.
pub fn pickup(idle_since: u64, ready: u64) -> u64 {
    let due = ready.max(idle_since) + ASSIGN_LAG;
    let (mut ask, mut delay) = (idle_since as f64 + GET_WORK_DELAY, GET_WORK_DELAY);
    while ask < due as f64 {
        delay = (delay * GET_WORK_BACKOFF).min(GET_WORK_INTERVAL);
        ask += delay;
    }
    ask.ceil() as u64
}

/// Fargate's size for a task of `cpu` units and `memory` MiB: its vCPUs, and its memory in GB
/// rounded up to the least Fargate allows for that CPU.
pub fn fargate_size(cpu: u32, memory: u32) -> (f64, f64) {
    let least_gb = match cpu {
        0..=256 => 0.5,
        257..=512 => 1.0,
        513..=1024 => 2.0,
        1025..=2048 => 4.0,
        2049..=4096 => 8.0,
        8192 => 16.0,
        _ => 32.0,
    };
    (f64::from(cpu) / 1024.0, f64::from(memory.div_ceil(1024)).max(least_gb))
}

/// What a Fargate task of that size costs for `seconds` (billed from its pull's start), by the
/// plugin's billing rules (`ecs_elastic_agent::cost::bill`).
pub fn fargate_cost(cpu: u32, memory: u32, seconds: u64) -> f64 {
    let (vcpu, memory_gb) = fargate_size(cpu, memory);
    let size = TaskSize { vcpu, memory_gb, ..TaskSize::linux(cpu, memory) };
    let start = SystemTime::UNIX_EPOCH;
    fargate_task_cost(prices(), &size, REGION, start, start + Duration::from_secs(seconds))
        .unwrap_or_else(|e| panic!("{e}"))
}
