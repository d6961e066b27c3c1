//! What the reliability tests (`faults`, `crash`, `isolation`, `capacity`, `reuse`, `tenancy`)
//! share beyond the world's [`Scenario`]: the plugin's own call counters from its metrics
//! endpoint, the checks every test ends with ([`Scenario::finish`]: no task of ours left running,
//! no job with two tasks, no registration GoCD refused, no secret in anything operators read, a
//! clean shutdown) and the `FIGURES:` line.
//!
//! Uses `crate::world`, the test world this binary compiles once.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use crate::world::host::{HostState, JobState};
use crate::world::*;

pub use crate::world::profiles::{cluster_props, elastic_props};

/// A seed from `$name` (decimal), else `default`: printed in the figures so a run can be replayed.
pub fn seed(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// What these tests do with a scenario, beside what the test world gives.
pub(crate) trait ReliabilityScenario {
    /// The plugin's own counters of AWS calls, summed by API budget category:
    /// category → (calls, throttled, retries, failed). Empty when the endpoint is not up.
    async fn plugin_calls_by_category(&self) -> BTreeMap<String, [u64; 4]>;
    /// The common end of a test with one host: no live task, status reports rendered and every
    /// text operators read scanned for secrets, a clean shutdown, the `FIGURES:` line.
    async fn finish(self, host: GoCdHost, sim: AgentSimulator, extra: &str);
    /// [`Scenario::finish`] for several hosts (GoCD servers) on the same moto.
    async fn finish_hosts(self, hosts: &[GoCdHost], sims: Vec<AgentSimulator>, extra: &str);
}

impl ReliabilityScenario for Scenario {
    /// The plugin's own counters of AWS calls, summed by API budget category:
    /// category → (calls, throttled, retries, failed). Empty when the endpoint is not up.
    async fn plugin_calls_by_category(&self) -> BTreeMap<String, [u64; 4]> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.metrics_port));
        let Ok(r) = crate::world::http::simple(addr, "GET", "/metrics", None).await else {
            return BTreeMap::new();
        };
        parse_calls_by_category(&r.text())
    }

    /// The common end of a test with one host: no live task, status reports rendered and every
    /// text operators read scanned for secrets, a clean shutdown, the `FIGURES:` line.
    async fn finish(self, host: GoCdHost, sim: AgentSimulator, extra: &str) {
        self.finish_hosts(&[host], vec![sim], extra).await;
    }

    /// [`Scenario::finish`] for several hosts (GoCD servers) on the same moto.
    async fn finish_hosts(self, hosts: &[GoCdHost], sims: Vec<AgentSimulator>, extra: &str) {
        self.assert_no_live_tasks(Duration::from_secs(120)).await;
        self.dump_calls();
        let mut scanned = 0;
        for host in hosts {
            host.pause_pings(true);
            let _ = host.plugin_status_report().await;
            let ids: Vec<String> = host.config().cluster_profiles.iter().map(|c| c.id.clone()).collect();
            for id in &ids {
                let _ = host.cluster_status_report(id).await;
            }
            let scanner = SecretScanner::from_world(host, Some(&self.proxy));
            scanner.assert_host_clean(host);
            scanned += scanner.len();
        }
        let by_category = self.plugin_calls_by_category().await;
        eprintln!(
            "FIGURES: test={} secs={} aws_calls_at_proxy={} run_task={} stop_task={} plugin_calls_by_category(calls,throttled,retries,failed)={:?} secrets_scanned={} {}",
            self.name,
            self.started.elapsed().as_secs(),
            self.proxy.total(),
            self.proxy.count("ecs:RunTask"),
            self.proxy.count("ecs:StopTask"),
            by_category,
            scanned,
            extra,
        );
        drop(sims);
        for host in hosts {
            host.shutdown().await;
        }
        drop(self.moto);
    }
}

/// Sums `ecs_ea_aws_{calls,throttled,retries,failures}_total` by their `category` label.
pub fn parse_calls_by_category(text: &str) -> BTreeMap<String, [u64; 4]> {
    let series = [
        "ecs_ea_aws_calls_total{",
        "ecs_ea_aws_throttled_total{",
        "ecs_ea_aws_retries_total{",
        "ecs_ea_aws_failures_total{",
    ];
    let mut out: BTreeMap<String, [u64; 4]> = BTreeMap::new();
    for line in text.lines() {
        let Some(i) = series.iter().position(|s| line.starts_with(s)) else {
            continue;
        };
        let Some(category) = line.split("category=\"").nth(1).and_then(|r| r.split('"').next()) else {
            continue;
        };
        let value: f64 = line.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
        out.entry(category.to_string()).or_default()[i] += value as u64;
    }
    out
}

/// Every job's current GoCD job id and the ids it had before reschedules.
pub fn all_job_ids(s: &HostState) -> Vec<i64> {
    s.jobs.iter().flat_map(|j| j.previous_job_ids.iter().copied().chain([j.identifier.job_id])).collect()
}

/// Every job completed, every agent deleted, no registration refused, no job id with two tasks.
/// Returns how many job-completion calls did not answer 200 (they may fail under faults; the
/// plugin cleans up on later pings).
pub async fn assert_all_done(host: &GoCdHost, sim: &AgentSimulator, within: Duration) -> usize {
    host.wait_until("every agent deleted", within, |s| s.agents.is_empty()).await;
    let (rejections, failed_completions, ids) = host.with_state(|s: &HostState| {
        (s.rejections.clone(), s.jobs.iter().filter(|j| j.completion_code != Some(200)).count(), all_job_ids(s))
    });
    assert!(rejections.is_empty(), "GoCD refused registrations: {rejections:?}");
    let dups = sim.with_state(|s| s.duplicate_jobs());
    assert!(dups.is_empty(), "jobs with more than one task: {dups:?}");
    // A job cancelled before it ran needs no task.
    let current: Vec<i64> = host.with_state(|s| {
        s.jobs.iter().filter(|j| j.state != JobState::Cancelled).map(|j| j.identifier.job_id).collect()
    });
    for id in current {
        assert_eq!(sim.tasks_for_job(id), 1, "job {id} ran in {} tasks", sim.tasks_for_job(id));
    }
    assert!(!ids.is_empty());
    failed_completions
}

/// Jobs by state: (waiting, running, completed).
pub fn job_states(s: &HostState) -> (usize, usize, usize) {
    (
        s.count_jobs(|j| *j == JobState::Waiting),
        s.count_jobs(|j| matches!(j, JobState::Running { .. })),
        s.count_jobs(|j| matches!(j, JobState::Completed { .. })),
    )
}
