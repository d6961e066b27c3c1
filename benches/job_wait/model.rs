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

use ecs_elastic_agent::cost::{fargate_task_cost, Market, PriceTable, TaskSize};

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

/// GoCD's build-assignment timer: the server looks for scheduled jobs every 5 s (GoCD's
/// `cruise.properties`), and sends create-agent for a job at the first tick after it is
/// scheduled. A job scheduled at second
/// `s` of the day gets its create-agent at the next multiple of 5 s (0 to 4 s later): every cold
/// path waits for it; a job an idle registered agent takes is assignable at once ([`pickup`]).
pub const ASSIGNMENT_TIMER: u64 = 5;

/// When GoCD sends create-agent for a job scheduled at `scheduled`.
pub fn create_agent_at(scheduled: u64) -> u64 {
    scheduled.div_ceil(ASSIGNMENT_TIMER) * ASSIGNMENT_TIMER
}

/// Lazy loading (SOCI): AWS says Fargate tasks "start up to 60 % faster" with a SOCI index
/// (re:Invent 2023, CON307, "Reducing AWS Fargate startup times by lazy loading container
/// images"; AWS News Blog, "AWS Fargate Enables Faster Container Startup using Seekable OCI").
/// The bench takes the 60 % off the image pull alone, not off the whole start: 43 s become 18 s
/// for the 413 MB image, so creation to start is 32 s instead of 57 s (44 % shorter, within
/// AWS's "up to").
pub const SOCI_PULL_SAVING: f64 = 0.6;

/// The image pull on Fargate with a SOCI index.
pub fn pull_soci(image_mb: u64) -> u64 {
    (pull(image_mb) as f64 * (1.0 - SOCI_PULL_SAVING)).ceil() as u64
}

/// create-agent to the agent registered, for a cold Fargate start with lazy loading.
pub fn fargate_cold_soci(image_mb: u64) -> u64 {
    RUNTASK + PROVISION + pull_soci(image_mb) + AGENT
}

/// Fargate Spot interruptions: AWS gives a two-minute warning (SIGTERM and an "ECS Task State
/// Change" event) before it stops the task ("How do I handle Spot termination notices in AWS
/// Fargate Spot tasks?", AWS Knowledge Center; Amazon ECS Developer Guide, "Fargate capacity
/// providers").
pub const SPOT_WARNING: u64 = 120;
/// AWS publishes no interruption rate for Fargate Spot. The EC2 Spot Instance Advisor's lowest
/// "frequency of interruption" band is "<5%" (the share of Spot capacity reclaimed over the
/// trailing month; common instance types in us-east-1 sit in it): the bench applies its upper
/// edge to Fargate Spot, 5 % of Spot tasks interrupted.
pub const SPOT_INTERRUPTED: f64 = 0.05;
/// An interrupted Spot task gets its warning at a moment drawn uniformly within this long after
/// it registers (a warm agent on the reference day lives minutes to tens of minutes).
pub const SPOT_WARNING_WITHIN: u64 = 1800;

/// A deterministic draw in [0, 1) for `key` and `salt` (SplitMix64): the same every run.
pub fn draw(key: u64, salt: u64) -> f64 {
    let mut z = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

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
/// plugin's billing rules (`ecs_elastic_agent::cost::bill`); on Fargate Spot (`spot`) at the
/// plugin's Spot price: the table's `fargate_spot_discount` off vCPU and memory (0.7 in the
/// embedded table, AWS's "up to 70 %"; a `PriceTable` file may set another).
pub fn fargate_cost(cpu: u32, memory: u32, seconds: u64, spot: bool) -> f64 {
    let (vcpu, memory_gb) = fargate_size(cpu, memory);
    let market = if spot { Market::FargateSpot } else { Market::Fargate };
    let size = TaskSize { vcpu, memory_gb, market, ..TaskSize::linux(cpu, memory) };
    let start = SystemTime::UNIX_EPOCH;
    fargate_task_cost(prices(), &size, REGION, start, start + Duration::from_secs(seconds))
        .unwrap_or_else(|e| panic!("{e}"))
}
