//! Warm starts, end to end on moto behind the strict proxy, with a simulated cold
//! start (the world's agents register 4 s after their task appears):
//!
//! - 20 back-to-back jobs of a `ReuseIdleMinutes` profile run on one task, and the time from a
//!   job being scheduled to being assigned drops from the cold start to GoCD's poll interval;
//! - with reuse off, every job gets its own task and waits for its cold start, as before;
//! - two reusing profiles never share an agent.
//!
//! (An agent bound to two jobs at once under concurrent should-assign-work and create-agent calls
//! is ruled out by the engine test `a_kept_agent_is_bound_to_exactly_one_job_under_concurrent_asks`.)
//! Needs `MOTO_SERVER`; never skips.

use crate::world;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::reliability::*;
use crate::world::host::{JobHandle, JobState, Props};
use crate::world::*;

/// GoCD's agent poll interval in this world (`assign_interval`): what a warm job waits at best.
const COLD_START: Duration = Duration::from_secs(4);

fn cold_world() -> SimPolicy {
    SimPolicy { register_delay: COLD_START, ..SimPolicy::default() }
}

fn reusing(max_jobs: &str) -> Props {
    let mut p = elastic_props();
    p.extend(world::host::props(&[("ReuseIdleMinutes", "5"), ("ReuseMaxJobs", max_jobs)]));
    p
}

/// Runs `n` jobs one after the other (each scheduled once the previous one completed and its
/// job-completion was answered); returns each job's wait from scheduled to assigned.
async fn back_to_back(host: &GoCdHost, profiles: &[&str], n: usize) -> (Vec<JobHandle>, Vec<Duration>) {
    let (mut jobs, mut waits) = (Vec::new(), Vec::new());
    for i in 0..n {
        let h = host.add_job(JobSpec::new(profiles[i % profiles.len()], Duration::from_millis(500))).await;
        host.wait_until("the job completed and job-completion answered", Duration::from_secs(60), |s| {
            matches!(s.job(h).state, JobState::Completed { .. }) && s.job(h).completion_code.is_some()
        })
        .await;
        let wait = host.with_state(|s| s.job(h).started_at.expect("assigned") - s.job(h).added_at);
        jobs.push(h);
        waits.push(wait);
    }
    (jobs, waits)
}

fn median(waits: &[Duration]) -> Duration {
    let mut sorted = waits.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// The agent each job ran on.
fn agents_of(host: &GoCdHost, jobs: &[JobHandle]) -> Vec<String> {
    host.with_state(|s| {
        jobs.iter()
            .map(|h| match &s.job(*h).state {
                JobState::Completed { agent_id } => agent_id.clone(),
                other => panic!("job not completed: {other:?}"),
            })
            .collect()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_back_to_back_jobs_reuse_one_agent_and_wait_for_no_cold_start() {
    let mut w = Scenario::new("reuse_twenty").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let cfg =
        w.host_config().cluster_profile("p", cluster_props("gocd-a", &[])).elastic_profile("warm", "p", reusing("20"));
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, cold_world());
    let (jobs, waits) = back_to_back(&host, &["warm"], 20).await;
    let run_tasks = w.proxy.count("ecs:RunTask");
    let agents: BTreeSet<String> = agents_of(&host, &jobs).into_iter().collect();
    assert!(run_tasks <= 2, "20 jobs on at most 2 tasks, not 20: {run_tasks}");
    assert_eq!(agents.len() as u64, run_tasks, "one agent a task");
    assert!(waits[0] >= COLD_START, "the first job waits for its cold start: {:?}", waits[0]);
    let warm = median(&waits[1..]);
    assert!(warm < COLD_START / 2, "the next 19 wait for GoCD's poll, not a cold start: median {warm:?}");
    // ReuseMaxJobs 20: the twentieth job's end stops and deletes the agent.
    host.wait_until("the agent deleted after its 20th job", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    let report = host.cluster_status_report("p").await.expect("answered");
    let page = report.body["view"].as_str().unwrap_or_default().to_string();
    assert!(page.contains("19 jobs on a kept agent, 1 started a task"), "the report counts hits and misses");
    let console = host.console_log(jobs[1]);
    assert!(console.iter().any(|l| l.contains("reuses agent")), "the console says it reuses: {console:?}");
    let figures = format!(
        "jobs=20 run_task={run_tasks} first_wait_ms={} warm_median_wait_ms={} warm_max_wait_ms={}",
        waits[0].as_millis(),
        warm.as_millis(),
        waits[1..].iter().max().expect("19 waits").as_millis()
    );
    w.finish(host, sim, &figures).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_reuse_every_job_gets_its_own_task_and_waits_for_its_cold_start() {
    let mut w = Scenario::new("reuse_off").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let cfg = w.host_config().cluster_profile("p", cluster_props("gocd-a", &[])).elastic_profile(
        "cold",
        "p",
        elastic_props(),
    );
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, cold_world());
    let (jobs, waits) = back_to_back(&host, &["cold"], 5).await;
    assert_all_done(&host, &sim, Duration::from_secs(60)).await;
    assert_eq!(w.proxy.count("ecs:RunTask"), 5, "one task a job, as before");
    assert_eq!(agents_of(&host, &jobs).into_iter().collect::<BTreeSet<_>>().len(), 5);
    assert!(waits.iter().all(|w| *w >= COLD_START), "every job waits for a cold start: {waits:?}");
    let figures = format!("jobs=5 run_task=5 median_wait_ms={}", median(&waits).as_millis());
    w.finish(host, sim, &figures).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_reusing_profiles_never_share_an_agent() {
    let mut w = Scenario::new("reuse_two_profiles").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let mut bigger = reusing("3");
    bigger.extend(world::host::props(&[("Memory", "2048")]));
    let cfg = w
        .host_config()
        .cluster_profile("p", cluster_props("gocd-a", &[]))
        .elastic_profile("small", "p", reusing("3"))
        .elastic_profile("bigger", "p", bigger);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, cold_world());
    let (jobs, _) = back_to_back(&host, &["small", "bigger"], 6).await;
    let mut profiles_by_agent: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (h, agent) in jobs.iter().zip(agents_of(&host, &jobs)) {
        let profile = host.with_state(|s| s.job(*h).spec.elastic_profile.clone());
        profiles_by_agent.entry(agent).or_default().insert(profile);
    }
    assert_eq!(profiles_by_agent.len(), 2, "one agent a profile: {profiles_by_agent:?}");
    assert!(profiles_by_agent.values().all(|p| p.len() == 1), "no agent ran both profiles: {profiles_by_agent:?}");
    assert_eq!(w.proxy.count("ecs:RunTask"), 2);
    host.wait_until("both agents deleted after 3 jobs each", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    w.finish(host, sim, &format!("jobs=6 run_task=2 agents={}", profiles_by_agent.len())).await;
}
