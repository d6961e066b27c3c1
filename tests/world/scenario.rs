//! One test's world in one value: a fresh moto, the proxy in front of it (the plugin's AWS
//! endpoint), the base account's SDK config, and the ECS clusters (fleets) the agent simulator
//! watches. What every end-to-end crate does with it lives here; how a test ends (its
//! `finish`, the checks and the `FIGURES:` line) is each crate's own `impl Scenario`.

use std::time::{Duration, Instant};

use aws_config::SdkConfig;

use super::moto::{self, Moto};
use super::{AgentSimulator, Fleet, GoCdHost, HostConfig, Proxy, SimPolicy};

/// One test's world.
pub struct Scenario {
    /// The test's name, for the `FIGURES:` line.
    pub name: &'static str,
    pub started: Instant,
    pub moto: Moto,
    pub proxy: Proxy,
    /// The base account, for the test's own calls (straight to moto, not counted).
    pub base: SdkConfig,
    pub fleets: Vec<Fleet>,
    /// The plugin's `--metrics-addr` port (the same for every process of the test).
    pub metrics_port: u16,
}

impl Scenario {
    pub async fn new(name: &'static str) -> Scenario {
        let moto = Moto::start().await;
        let proxy = Proxy::start(moto.addr()).await;
        let base = moto.base_config().await;
        Scenario {
            name,
            started: Instant::now(),
            moto,
            proxy,
            base,
            fleets: Vec::new(),
            metrics_port: moto::free_port(),
        }
    }

    /// Creates an ECS cluster in the account of `cfg` and watches it.
    pub async fn cluster(&mut self, label: &str, cfg: &SdkConfig, cluster: &str) {
        moto::create_cluster(cfg, cluster).await;
        self.fleets.push(Fleet::new(label, cfg, cluster));
    }

    /// A host config pointing the plugin at the proxy, with its metrics endpoint on.
    pub fn host_config(&self) -> HostConfig {
        let mut cfg = HostConfig::new(&self.proxy.endpoint());
        cfg.program = Some((
            super::host::plugin_binary(),
            vec!["serve".into(), "--metrics-addr".into(), format!("127.0.0.1:{}", self.metrics_port)],
        ));
        cfg
    }

    /// The agent simulator over every fleet of the test.
    pub fn agents(&self, host: &GoCdHost, policy: SimPolicy) -> AgentSimulator {
        AgentSimulator::start(host, self.fleets.clone(), policy)
    }

    /// The plugin sent AWS nothing that real AWS would refuse (tests/world/aws_rules.rs): every
    /// refusal of the strict rules fails the test.
    pub fn assert_no_aws_rule_broken(&self) {
        let refused: Vec<String> = self
            .proxy
            .aws_refusals()
            .iter()
            .map(|r| format!("{} {}: {} {}", r.key, r.rule, r.code, r.message))
            .collect();
        assert!(refused.is_empty(), "the plugin sent what real AWS refuses: {refused:#?}");
    }

    /// Waits (bounded) until no fleet has a live task, then asserts it, and that no call the
    /// plugin made broke a rule of real AWS.
    pub async fn assert_no_live_tasks(&self, within: Duration) {
        self.assert_no_aws_rule_broken();
        let deadline = Instant::now() + within;
        loop {
            let mut left = Vec::new();
            for f in &self.fleets {
                for t in moto::live_tasks(&f.config, &f.cluster).await {
                    left.push(format!(
                        "{}: {} (job {:?}, server {:?}, status {:?})",
                        f.label,
                        t.task_arn().unwrap_or("?"),
                        moto::task_tag(&t, "gocd:job-id"),
                        moto::task_tag(&t, "gocd:server-id"),
                        t.last_status()
                    ));
                }
            }
            if left.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "tasks still RUNNING after {within:?}:\n  {}", left.join("\n  "));
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// With `WORLD_DUMP_CALLS=1`, every call the proxy saw, on stderr.
    pub fn dump_calls(&self) {
        if std::env::var_os("WORLD_DUMP_CALLS").is_none() {
            return;
        }
        for r in self.proxy.log() {
            eprintln!(
                "CALL {:>7}ms {} {} {:?} key={:?} account={:?} role={:?} rule={:?}",
                (r.at - self.started).as_millis(),
                r.key(),
                r.status,
                r.outcome,
                r.access_key_id,
                r.assumed_account,
                r.role_arn,
                r.rule
            );
        }
    }
}
