//! The event queue's figures: how soon the agent of a task stopped by hand is
//! deleted with events (the test world's EventBridge stand-in feeding a moto SQS queue) against
//! server-ping alone, and ECS reads per server-ping while events flow.

use std::time::{Duration, Instant};

use super::figures::Aws;
use super::table::Row;
use crate::world::eventbridge::{self, EventBridge};
use crate::world::host::{GoCdHost, JobSpec, JobState};
use crate::world::profiles::{cluster_props, elastic_props};
use crate::world::{moto, AgentSimulator, Fleet, SimPolicy};

const CLUSTER: &str = "bench-events";
/// Never within the figure: every ping is sent by the benchmark.
const NO_TIMER: Duration = Duration::from_secs(3600);

/// `agents` running agents, some of whose tasks are stopped by hand; returns the rows and a note.
pub async fn figures(agents: usize) -> (Vec<Row>, String) {
    let aws = Aws::start().await;
    moto::create_cluster(&aws.base, CLUSTER).await;
    let queue = eventbridge::create_queue(&aws.base, "bench-events").await;
    let fleet = Fleet::new("base", &aws.base, CLUSTER);
    let bridge = EventBridge::start(vec![fleet.clone()], &aws.base, &queue).await;
    let mut cfg = aws
        .host_config()
        .cluster_profile("base", cluster_props(CLUSTER, &[("EventQueueUrl", &queue), ("MaxAgents", "1000")]))
        .elastic_profile("small", "base", elastic_props());
    cfg.ping_interval = NO_TIMER;
    cfg.starvation_interval = NO_TIMER;
    let host = GoCdHost::launch(cfg).await;
    let sim = AgentSimulator::start(&host, vec![fleet], SimPolicy::default());
    let jobs = host.add_jobs(JobSpec::new("small", Duration::from_secs(3000)), agents).await;
    host.wait_until("every job building", Duration::from_secs(600), |s| {
        jobs.iter().all(|j| matches!(s.job(*j).state, JobState::Running { .. }))
    })
    .await;

    // Detection: stop tasks one at a time, by hand, and time until GoCD deleted their agents.
    let mut took = Vec::new();
    let mark = aws.proxy.mark();
    for job in jobs.iter().take(5) {
        let JobState::Running { agent_id } = host.job_state(*job) else { continue };
        let job_id = host.job_identifier(*job).job_id;
        sim.stop_task_by_hand(job_id, "stopped by the benchmark").await;
        let at = Instant::now();
        host.wait_until("the agent deleted", Duration::from_secs(60), |s| s.deleted_agents.contains(&agent_id)).await;
        took.push(at.elapsed());
    }
    took.sort();
    let median = took[took.len() / 2];
    let between = aws.proxy.counts_since(mark);
    let ecs_reads_between =
        between.get("ecs:ListTasks").copied().unwrap_or(0) + between.get("ecs:DescribeTasks").copied().unwrap_or(0);

    // ECS reads per server-ping while the rescheduled jobs' tasks start and events flow.
    let mark = aws.proxy.mark();
    const PINGS: u64 = 3;
    for _ in 0..PINGS {
        host.server_ping().await.expect("server-ping answered");
    }
    let counts = aws.proxy.counts_since(mark);
    let reads =
        counts.get("ecs:ListTasks").copied().unwrap_or(0) + counts.get("ecs:DescribeTasks").copied().unwrap_or(0);
    let per_ping = reads.div_ceil(PINGS);
    let floor = 2 * (agents as u64).div_ceil(100);
    let sent = bridge.with_state(|s| s.total());
    host.shutdown().await;

    let rows = vec![
        Row {
            figure: "agent of a task stopped by hand deleted, with EventQueueUrl (median of 5)".into(),
            floor: "event delivery".into(),
            goal: "< 5 s".into(),
            measured: format!("{} ms", median.as_millis()),
            ratio: "—".into(),
            met: median < Duration::from_secs(5),
        },
        Row {
            figure: "the same, server-ping only".into(),
            floor: "the next server-ping".into(),
            goal: "≤ 1 ping interval".into(),
            measured: "up to 60 s (GoCD pings every minute)".into(),
            ratio: "—".into(),
            met: true,
        },
        Row::count(
            format!("ECS read calls per server-ping with events flowing, N = {agents} running agents"),
            floor,
            floor + 2,
            format!("≤ {}", floor + 2),
            per_ping,
        ),
    ];
    let note = format!(
        "Events: {agents} agents; 5 tasks stopped by hand one at a time, agents deleted after {took:?}, with {ecs_reads_between} \
         ECS reads meanwhile (the events need none); {sent} events sent by the EventBridge stand-in; server-ping only waits \
         for the next ping (tests/e2e/events.rs measures 10 s at a 10 s interval)"
    );
    drop(sim);
    (rows, note)
}
