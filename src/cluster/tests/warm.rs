//! Warm agents (`WarmAgents`, `WarmSchedule`) through the engine: a pool forms from an agent
//! kept after its job, a job that finds a waiting agent needs no RunTask and leaves its key for
//! a replacement, and a closed schedule retires the pool.

use super::{props, World};
use crate::cluster::job::create::Created;
use crate::cluster::tests::fixtures::job;
use crate::cluster::AgentRequest;

/// A request of an elastic profile keeping `warm` agents, `schedule` saying when.
fn warm_request(w: &World, job_id: i64, warm: &str, schedule: &str) -> AgentRequest {
    let mut request = w.request(job_id, &format!("key-{job_id}"));
    let mut extra = vec![("WarmAgents", warm)];
    if !schedule.is_empty() {
        extra.push(("WarmSchedule", schedule));
    }
    request.elastic_profile.extend(props(&extra));
    request
}

/// The auto-register key each RunTask sent, in order.
fn keys_run(w: &World) -> Vec<String> {
    w.aws
        .run_requests()
        .iter()
        .map(|r| {
            let env = r["overrides"]["containerOverrides"][0]["environment"].as_array().cloned().unwrap_or_default();
            env.iter()
                .find(|e| e["name"] == "GO_EA_AUTO_REGISTER_KEY")
                .and_then(|e| e["value"].as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Job `job_id` runs on its agent and completes; returns the agent.
async fn run_job(w: &World, job_id: i64) -> crate::ids::AgentId {
    let agent_id = w.agent_of(job_id);
    assert!(w.cluster.should_assign(&agent_id, &job(job_id), super::no_offer));
    w.cluster.complete(&agent_id, &job(job_id)).await;
    agent_id
}

#[tokio::test]
async fn a_job_given_a_kept_agent_leaves_its_key_to_a_replacement_warm_agent() {
    let w = World::new(5);
    // Job 1 starts cold (no key unused yet) and its agent is kept for the pool.
    let created = w.cluster.create_agent(warm_request(&w, 1, "2", "")).await.expect("started");
    assert!(matches!(created, Created::Started(_)));
    let first = run_job(&w, 1).await;
    w.cluster.tend_warm_pools().await;
    assert_eq!(keys_run(&w), ["key-1"], "no key to start a warm agent with yet");

    // Job 2 takes the kept agent: no task for it; its key starts a warm agent.
    let created = w.cluster.create_agent(warm_request(&w, 2, "2", "")).await.expect("answered");
    assert_eq!(created, Created::Reused);
    assert_eq!(w.agent_of(2), first);
    w.cluster.tend_warm_pools().await;
    assert_eq!(keys_run(&w), ["key-1", "key-2"], "the replacement runs on job 2's unused key");
    let warm = w.cluster.registry().all().find(|a| a.warm).map(|a| a.agent_id.clone()).expect("a warm agent");
    assert!(w.cluster.registry().live_for_job(1).is_none_or(|a| a.agent_id != warm), "it serves no job");

    // Job 3 finds the warm agent: no RunTask in its path, and its key starts the next one.
    let created = w.cluster.create_agent(warm_request(&w, 3, "2", "")).await.expect("answered");
    assert_eq!(created, Created::Reused);
    assert_eq!(w.agent_of(3), warm);
    assert_eq!(keys_run(&w).len(), 2, "nothing started for job 3 itself");
    w.cluster.tend_warm_pools().await;
    assert_eq!(keys_run(&w), ["key-1", "key-2", "key-3"]);
    // A pass with the pool full starts nothing more, and no key is ever used twice.
    w.cluster.tend_warm_pools().await;
    assert_eq!(keys_run(&w).len(), 3);
}

#[tokio::test]
async fn outside_the_warm_schedule_the_pool_is_retired() {
    let w = started_outside_its_schedule().await;
    let kept = run_job(&w, 1).await;
    // It waits half a minute in its pool before the next pass.
    w.clock.advance(std::time::Duration::from_secs(30));
    w.cluster.tend_warm_pools().await;
    let registry = w.cluster.registry();
    let a = registry.get(&kept).expect("record");
    assert_ne!(a.phase, crate::cluster::agents::Phase::Running, "retired: the schedule is closed");
    drop(registry);
    assert!(w.gocd.deleted().contains(&kept.to_string()), "and removed from GoCD");
    let (_, pools) = w.cluster.cost_totals();
    assert!(pools.iter().any(|(_, usd)| *usd > 0.0), "its idle time until retired is its pool's cost: {pools:?}");
}

#[tokio::test]
async fn a_kept_agent_retired_before_its_jobs_cost_is_said_charges_its_pool_only_its_wait() {
    let w = started_outside_its_schedule().await;
    let agent_id = w.agent_of(1);
    assert!(w.cluster.should_assign(&agent_id, &job(1), super::no_offer));
    // The job runs ten minutes; its agent is kept at its end, and a warm pass retires it before
    // job-completion has said the job's cost (no charge mark yet), thirty seconds later.
    w.clock.advance(std::time::Duration::from_secs(600));
    let done = w.cluster.registry().job_done(&agent_id, 1, w.cluster.now());
    assert!(matches!(done, crate::cluster::agents::JobDone::Keep { .. }), "kept: {done:?}");
    w.clock.advance(std::time::Duration::from_secs(30));
    w.cluster.tend_warm_pools().await;
    assert!(w.gocd.deleted().contains(&agent_id.to_string()), "retired");
    let (_, pools) = w.cluster.cost_totals();
    let idle: f64 = pools.iter().map(|(_, usd)| usd).sum();
    // Its 0.5 vCPU and 1 GB cost about 2.5 cents an hour on Fargate: its 30 s wait costs some
    // 0.0002 USD, and ten minutes at even one cent an hour 0.0017 USD.
    let ten_minutes_at_a_cent_an_hour = 0.01 * 600.0 / 3600.0;
    assert!(
        idle > 0.0 && idle < ten_minutes_at_a_cent_an_hour,
        "the pool pays its 30 s wait, not the job's 10 min: {idle}"
    );
}

/// A world whose job 1 started an agent of a warm profile whose schedule is closed now.
async fn started_outside_its_schedule() -> World {
    let w = World::new(5);
    // One minute, two days from the engine's now (UTC): closed now, whenever the test runs.
    let closed = format!("{} 00:00-00:01 UTC", weekday_in_two_days(w.cluster.now()));
    w.cluster.create_agent(warm_request(&w, 1, "2", &closed)).await.expect("started");
    // The pass the request started runs now, while the agent starts, not at a moment the
    // runtime picks.
    w.cluster.background_settled().await;
    w
}

/// The UTC weekday two days after `now`, as `WarmSchedule` names it.
fn weekday_in_two_days(now: std::time::SystemTime) -> &'static str {
    let days = now.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs() / 86_400;
    // 1970-01-01 was a Thursday.
    ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][usize::try_from((days + 2) % 7).unwrap_or(0)]
}
