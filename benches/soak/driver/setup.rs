//! The soak's world: three accounts (the base one with the host's keys, two more with static keys
//! in their cluster profiles), six cluster profiles with one elastic profile each, an event queue
//! fed from account A's clusters by an EventBridge stand-in that delivers every event twice, out
//! of order, among poison messages, and the agent and instance simulators.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_config::SdkConfig;

use super::SoakOptions;
use crate::world::ec2::{create_instance_profile, Ec2Policy, InstanceSimulator};
use crate::world::eventbridge::{self, Delivery, EventBridge};
use crate::world::host::Props;
use crate::world::moto::{self, REGION};
use crate::world::profiles::{cluster_props, elastic_props, IMAGE};
use crate::world::proxy::faults::{FaultRates, Faults};
use crate::world::*;

/// The account whose credentials are refused for a stretch.
pub const REFUSED_ACCOUNT: &str = "333333333333";
/// The EC2 profile's instance profile and AMI.
const INSTANCE_PROFILE: &str = "gocd-ecs-instance";
const AMI: &str = "ami-0abcdef1234567890";
/// Throttling and 5xx on every call the plugin makes, all day.
pub const THROTTLE: f64 = 0.10;
pub const SERVER_ERRORS: f64 = 0.02;
/// The share of the queue's messages that are poison.
pub const POISON_SHARE: f64 = 0.01;

/// One profile pair: its id (cluster and elastic profile alike), account, share of the jobs,
/// and what it keeps between jobs.
#[derive(Debug, Clone)]
pub struct Pair {
    pub id: &'static str,
    pub account: &'static str,
    pub share: u32,
    /// Agents kept by design at the end: warm agents, or idle reusable ones.
    pub kept: Kept,
    pub ec2: bool,
}

/// What a profile keeps running between jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    Nothing,
    /// `WarmAgents` n.
    Warm(usize),
    /// `ReuseIdleMinutes`: idle agents kept up to the profile's `MaxAgents`.
    Reuse(usize),
}

/// The six pairs.
pub fn pairs() -> Vec<Pair> {
    vec![
        Pair { id: "a-cold", account: moto::BASE_ACCOUNT, share: 25, kept: Kept::Nothing, ec2: false },
        Pair { id: "a-reuse", account: moto::BASE_ACCOUNT, share: 20, kept: Kept::Reuse(12), ec2: false },
        Pair { id: "b-warm", account: "222222222222", share: 15, kept: Kept::Warm(2), ec2: false },
        Pair { id: "b-ec2", account: "222222222222", share: 15, kept: Kept::Nothing, ec2: true },
        Pair { id: "c-cold", account: REFUSED_ACCOUNT, share: 15, kept: Kept::Nothing, ec2: false },
        Pair { id: "c-reuse", account: REFUSED_ACCOUNT, share: 10, kept: Kept::Reuse(12), ec2: false },
    ]
}

/// Everything a soak run acts on.
pub struct SoakWorld {
    pub w: Scenario,
    pub host: GoCdHost,
    pub sim: AgentSimulator,
    pub ec2: InstanceSimulator,
    pub bridge: EventBridge,
    pub faults: Faults,
    pub queue_url: String,
    /// The queue's account (A), for deleting and recreating it.
    pub queue_cfg: SdkConfig,
    /// The refused account's access key id (the proxy refuses calls signed with it).
    pub refused_key: String,
    /// While set, every call signed with `refused_key` is refused as AWS refuses a bad key.
    pub refusing: Arc<AtomicBool>,
    /// While set, every SQS call of the plugin has its connection dropped.
    pub queue_down: Arc<AtomicBool>,
    pub pairs: Vec<Pair>,
    /// Fleet index of each pair's cluster (same order as `pairs`).
    pub fleet_of: Vec<usize>,
}

fn with(mut p: Props, extra: &[(&str, &str)]) -> Props {
    p.extend(props(extra));
    p
}

impl SoakWorld {
    pub async fn build(options: &SoakOptions) -> SoakWorld {
        let mut w = Scenario::new("soak").await;
        let a = w.base.clone();
        let (b_keys, b) = w.moto.static_keys_in("222222222222").await;
        let (c_keys, c) = w.moto.static_keys_in(REFUSED_ACCOUNT).await;
        let pairs = pairs();
        let mut fleet_of = Vec::new();
        for pair in &pairs {
            let cfg = match pair.account {
                "222222222222" => &b,
                REFUSED_ACCOUNT => &c,
                _ => &a,
            };
            fleet_of.push(w.fleets.len());
            w.cluster(pair.id, cfg, &format!("soak-{}", pair.id)).await;
        }
        create_instance_profile(w.moto.addr(), &b_keys.access_key_id, INSTANCE_PROFILE).await;
        let queue_url = eventbridge::create_queue(&a, "soak-events").await;
        let a_fleets: Vec<Fleet> = pairs
            .iter()
            .zip(&fleet_of)
            .filter(|(p, _)| p.account == moto::BASE_ACCOUNT)
            .map(|(_, i)| w.fleets[*i].clone())
            .collect();
        let delivery = Delivery {
            twice: true,
            max_delay: Duration::from_secs(4),
            poison_share: POISON_SHARE,
            seed: options.seed,
            live_only: true,
        };
        let bridge = EventBridge::start_with(a_fleets, &a, &queue_url, delivery).await;

        let faults = Faults::new(options.seed, FaultRates::new(THROTTLE, SERVER_ERRORS, 0.0));
        let refused_key = c_keys.access_key_id.clone();
        let mut cfg = w.host_config();
        // Info, not trace: a day of trace lines would be gigabytes in the host's memory.
        cfg.env.push(("RUST_LOG".into(), "info".into()));
        // GoCD as it copes with hundreds of waiting jobs: one create-agent per job in its queue,
        // re-sent every 5 s; each idle agent offered 32 jobs a round, each pair again after 3 s.
        cfg.starvation_interval = Duration::from_secs(5);
        cfg.one_create_agent_in_flight = true;
        cfg.asks_per_agent_round = 32;
        cfg.reask_interval = Duration::from_secs(3);
        for pair in &pairs {
            let cluster = format!("soak-{}", pair.id);
            let keys: Vec<(&str, &str)> = match pair.account {
                "222222222222" => {
                    vec![("AccessKeyId", &b_keys.access_key_id), ("SecretAccessKey", &b_keys.secret_access_key)]
                }
                REFUSED_ACCOUNT => {
                    vec![("AccessKeyId", &c_keys.access_key_id), ("SecretAccessKey", &c_keys.secret_access_key)]
                }
                _ => vec![("EventQueueUrl", &queue_url)],
            };
            let mut common = vec![("AgentRegisterTimeoutMinutes", "1")];
            common.extend(keys);
            let (cluster_profile, elastic) = if pair.ec2 {
                let cp = with(
                    props(&[
                        ("ClusterName", &cluster),
                        ("Region", REGION),
                        ("LaunchType", "EC2"),
                        ("Ec2InstanceType", "c5.xlarge"),
                        ("Ec2InstanceProfile", INSTANCE_PROFILE),
                        ("Ec2AmiId", AMI),
                        ("Ec2IdleMinutes", "1"),
                        ("Ec2MaxInstances", "8"),
                        ("MaxAgents", "30"),
                    ]),
                    &common,
                );
                (cp, props(&[("Image", IMAGE), ("Cpu", "1024"), ("Memory", "1800")]))
            } else {
                // Room for the busiest hour: a job holds its agent for about 4 s (launch,
                // registration, 0.5 to 3 s of build), at noon a cold pair gets 2.5 jobs a second.
                let max = match pair.kept {
                    Kept::Reuse(n) => n.to_string(),
                    _ => "30".to_string(),
                };
                let mut extra = common.clone();
                extra.push(("MaxAgents", &max));
                let cp = cluster_props(&cluster, &extra);
                let ep = match pair.kept {
                    Kept::Warm(n) => with(elastic_props(), &[("WarmAgents", &n.to_string())]),
                    Kept::Reuse(_) => with(elastic_props(), &[("ReuseIdleMinutes", "1"), ("ReuseMaxJobs", "25")]),
                    Kept::Nothing => elastic_props(),
                };
                (cp, ep)
            };
            cfg = cfg.cluster_profile(pair.id, cluster_profile).elastic_profile(pair.id, pair.id, elastic);
        }
        let key = refused_key.clone();
        let refusing = Arc::new(AtomicBool::new(false));
        let queue_down = Arc::new(AtomicBool::new(false));
        let down = queue_down.clone();
        w.proxy.add_rule("queue-unreachable", move |call| {
            if down.load(Ordering::SeqCst) && call.service == "sqs" {
                Verdict::Drop
            } else {
                Verdict::Forward
            }
        });
        let refused = refusing.clone();
        w.proxy.add_rule("credentials-refused", move |call| {
            if !refused.load(Ordering::SeqCst) || call.access_key_id.as_deref() != Some(key.as_str()) {
                return Verdict::Forward;
            }
            let invalid = "The security token included in the request is invalid.";
            match call.service.as_str() {
                "ecs" => Verdict::ecs_error(400, "UnrecognizedClientException", invalid),
                "ec2" => Verdict::ec2_error(
                    401,
                    "AuthFailure",
                    "AWS was not able to validate the provided access credentials",
                ),
                "sts" => Verdict::sts_error(403, "InvalidClientTokenId", invalid),
                _ => Verdict::Forward,
            }
        });
        w.proxy.add_rule("faults", faults.rule());
        let host = GoCdHost::launch(cfg).await;
        let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() });
        let ec2_fleets: Vec<Fleet> =
            pairs.iter().zip(&fleet_of).filter(|(p, _)| p.ec2).map(|(_, i)| w.fleets[*i].clone()).collect();
        let ec2 = InstanceSimulator::start(
            ec2_fleets,
            host.server_id(),
            Ec2Policy { register_delay: Duration::from_millis(500), ..Ec2Policy::default() },
        );
        SoakWorld {
            w,
            host,
            sim,
            ec2,
            bridge,
            faults,
            queue_url,
            queue_cfg: a,
            refused_key,
            refusing,
            queue_down,
            pairs,
            fleet_of,
        }
    }
}
