//! Cost per job through the engine: a completed job's console line, the ledger's row for its
//! pipeline and stage, the counters by elastic profile; a kept agent's wait between jobs is its
//! pool's, not the next job's.

use super::{job, no_offer, reusing, World};
use crate::cluster::job::complete::Completed;

#[tokio::test]
async fn a_completed_job_says_its_cost_and_counts_it_for_its_pipeline_and_profile() {
    let w = World::new(5);
    w.cluster.create_agent(w.request(7, "k")).await.expect("launched");
    let agent_id = w.agent_of(7);
    assert_eq!(w.cluster.complete(&agent_id, &job(7)).await, Completed::Stopped);
    let console = w.gocd.console_of(7);
    let line = console.iter().find(|l| l.contains("this job's agent ran")).unwrap_or_else(|| panic!("{console:?}"));
    // 0.5 vCPU 1 GB, us-east-1, a minute at least: (0.5 × 0.04048 + 0.004445) / 60.
    assert!(line.contains("on Fargate, 0.5 vCPU 1 GB, us-east-1 (AWS bills 1 min at least): $0.0004"), "{line}");
    let summary = w.cluster.cost_summary(w.cluster.now());
    assert_eq!((summary.stages.len(), summary.today.jobs), (1, 1));
    assert_eq!((summary.stages[0].pipeline.as_str(), summary.stages[0].stage.as_str()), ("p", "s"));
    let (jobs, pools) = w.cluster.cost_totals();
    assert_eq!(jobs.len(), 1);
    assert!((jobs[0].1 - summary.today.usd).abs() < 1e-12 && jobs[0].1 > 0.0);
    assert!(pools.is_empty(), "an agent started for its job has no pool time");
}

#[tokio::test]
async fn a_kept_agents_jobs_pay_their_own_time_and_the_wait_between_is_the_pools() {
    let w = World::new(5);
    let agent_id = super::registered_agent(&w, reusing(&w, 1)).await;
    assert_eq!(w.cluster.complete(&agent_id, &job(1)).await, Completed::Kept);
    // The agent waits a minute in its pool before the next job takes it.
    w.clock.advance(std::time::Duration::from_secs(60));
    w.cluster.create_agent(reusing(&w, 2)).await.expect("reused");
    assert!(w.cluster.should_assign(&agent_id, &job(2), no_offer));
    assert_eq!(w.cluster.complete(&agent_id, &job(2)).await, Completed::Kept);
    let console = w.gocd.console_of(2);
    let line = console.iter().find(|l| l.contains("this job ran")).unwrap_or_else(|| panic!("{console:?}"));
    assert!(line.contains("warm pool's cost"), "{line}");
    let (jobs, pools) = w.cluster.cost_totals();
    assert_eq!((jobs.len(), pools.len()), (1, 1), "{jobs:?} {pools:?}");
    assert!(pools[0].1 > 0.0);
    let summary = w.cluster.cost_summary(w.cluster.now());
    assert_eq!(summary.today.jobs, 2);
    assert!(summary.pools_today_usd > 0.0);
}
