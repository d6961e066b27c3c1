//! The job's wait, said when its agent takes it: one console line with the phases, the
//! histograms counted, and one DescribeTasks at most for the start times the record lacks.

use super::{no_offer, World};
use crate::cluster::accounting::job_wait::WaitPhase;
use crate::cluster::tests::fixtures::job;

#[tokio::test]
async fn an_agent_taking_its_job_writes_the_wait_in_its_console_once() {
    let w = World::new(5);
    w.cluster.create_agent(w.request(7, "key-1")).await.expect("launched");
    let agent_id = w.agent_of(7);
    let describes = w.aws.count("DescribeTasks");
    assert!(w.cluster.should_assign(&agent_id, &job(7), no_offer));
    w.cluster.background_settled().await;
    let lines: Vec<String> = w.gocd.console_of(7).into_iter().filter(|l| l.contains("ready in")).collect();
    assert_eq!(lines.len(), 1, "{:?}", w.gocd.console_of(7));
    assert!(lines[0].contains(&format!("agent {agent_id} ready in")) && lines[0].contains("queued"), "{}", lines[0]);
    assert_eq!(w.aws.count("DescribeTasks"), describes + 1, "the start times read once");
    // GoCD asks again (the agent took the job already): nothing more is said or read.
    assert!(w.cluster.should_assign(&agent_id, &job(7), no_offer));
    w.cluster.background_settled().await;
    assert_eq!(w.gocd.console_of(7).iter().filter(|l| l.contains("ready in")).count(), 1);
    assert_eq!(w.aws.count("DescribeTasks"), describes + 1);
    let waits = w.cluster.job_waits();
    let total: u64 =
        waits.all().filter(|(_, p, _)| *p == WaitPhase::Total).map(|(_, _, h)| h.counts.iter().sum::<u64>()).sum();
    assert_eq!(total, 1, "one job's wait counted");
}
