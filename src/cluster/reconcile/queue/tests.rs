//! The event queue against the engine tests' fake AWS (its SQS answers at once, never waits):
//! one poll at a time through [`poll_once`], as the background poller does it.

use crate::cluster::tests::fixtures::props;
use std::sync::Arc;

use serde_json::json;

use super::{poll_once, Handled, AFTER_ERROR};
use crate::aws::fake_aws::{FakeAws, ACCOUNT, REGION};
use crate::aws::status::TaskStatus;
use crate::cluster::agents::Phase;
use crate::cluster::base::clock::ManualClock;
use crate::cluster::base::identity::cluster_key;
use crate::cluster::tests::engine::{self, cluster_profile, TestEngine};
use crate::cluster::tests::fake_gocd::FakeGocd;
use crate::cluster::tests::fixtures::job;
use crate::cluster::{Cluster, EngineOptions};
use crate::protocol::types::{AgentMetadata, AgentState, BuildState, ConfigState};
use crate::settings::ClusterProfile;

const QUEUE: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/gocd-events";

struct World {
    aws: FakeAws,
    gocd: Arc<FakeGocd>,
    /// The engine's time: it starts at the wall's and moves only when a test advances it.
    clock: Arc<ManualClock>,
    cluster: Arc<Cluster>,
}

impl World {
    fn new(launch_type: &str) -> World {
        let profile = cluster_profile(&[("LaunchType", launch_type), ("EventQueueUrl", QUEUE)]);
        let aws = FakeAws::default();
        let TestEngine { gocd, clock, cluster } = TestEngine::start(aws.clients(), profile);
        World { aws, gocd, clock, cluster }
    }

    /// An agent started for job `job_id` (its task RUNNING) and registered with GoCD.
    async fn running_agent(&self, job_id: i64) -> (String, String) {
        let request = engine::request(&self.cluster, job_id, &format!("key-{job_id}"));
        self.cluster.create_agent(request).await.expect("launched");
        let agent = self.cluster.registry().live_for_job(job_id).cloned().expect("a live agent");
        self.gocd.agents.lock().unwrap().push(AgentMetadata {
            agent_id: agent.agent_id.to_string(),
            agent_state: AgentState::Building,
            build_state: BuildState::Building,
            config_state: ConfigState::Enabled,
        });
        (agent.agent_id.into(), agent.task_arn.expect("a task").into())
    }

    async fn poll(&self) -> Option<std::time::Duration> {
        poll_once(QUEUE, &self.cluster, std::slice::from_ref(&self.cluster)).await
    }

    fn health(&self) -> Vec<String> {
        self.cluster.events().recent().into_iter().map(|e| e.message).collect()
    }
}

/// An "ECS Task State Change" event as EventBridge delivers it to SQS.
fn task_event(arn: &str, started_by: &str, cluster: &str, status: TaskStatus, stop: Option<(&str, &str)>) -> String {
    let desired = if status.is_stopping() { TaskStatus::Stopped } else { TaskStatus::Running };
    let mut detail = json!({
        "clusterArn": format!("arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/{cluster}"),
        "taskArn": arn,
        "startedBy": started_by,
        "lastStatus": status.as_str(),
        "desiredStatus": desired.as_str(),
        "launchType": "FARGATE",
        "containers": [{ "name": "gocd-agent", "lastStatus": status.as_str(), "exitCode": 137 }],
        "version": 3,
    });
    if let Some((code, reason)) = stop {
        detail["stopCode"] = json!(code);
        detail["stoppedReason"] = json!(reason);
    }
    json!({
        "version": "0", "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718", "detail-type": "ECS Task State Change",
        "source": "aws.ecs", "account": ACCOUNT, "time": "2026-12-01T02:00:00Z", "region": REGION,
        "resources": [arn], "detail": detail,
    })
    .to_string()
}

#[tokio::test]
async fn a_stopped_task_has_its_agent_removed_on_the_event_with_its_stop_code_and_reason() {
    let w = World::new("FARGATE");
    let (agent, arn) = w.running_agent(7).await;
    w.aws.stop_by_ecs(&arn, "OutOfMemoryError: container killed");
    let reads_before = w.aws.count("DescribeTasks") + w.aws.count("ListTasks");
    let started_by = w.cluster.started_by();
    w.aws.send_event(&task_event(
        &arn,
        started_by,
        "ci",
        TaskStatus::Stopped,
        Some(("EssentialContainerExited", "OutOfMemoryError: container killed")),
    ));

    assert_eq!(w.poll().await, None, "messages came: no pause");
    assert_eq!(w.gocd.deleted(), vec![agent.clone()], "deleted on the event, no server-ping");
    assert_eq!(*w.gocd.disabled.lock().unwrap(), vec![agent.clone()]);
    let console = w.gocd.console_of(7).join("\n");
    assert!(
        console.contains("OutOfMemoryError") && console.contains("stop code EssentialContainerExited"),
        "{console}"
    );
    assert!(w.health().iter().any(|m| m.contains("OutOfMemoryError") && m.contains(&agent)), "{:?}", w.health());
    let record = w.cluster.registry().get(&agent).cloned().unwrap();
    assert_eq!(record.phase, Phase::Stopped);
    assert!(record.stop_reason.unwrap().contains("EssentialContainerExited"));
    assert_eq!(w.aws.queued(), 0, "handled messages are deleted");
    assert_eq!(w.aws.count("DescribeTasks") + w.aws.count("ListTasks"), reads_before, "an event costs no ECS read");
    assert_eq!(w.aws.count("sqs:DeleteMessageBatch"), 1);
    let status = w.cluster.queue_status().clone();
    assert_eq!((status.events, status.stops, status.missed), (1, 1, 0));

    // The next server-ping finds nothing more to do or say.
    let lines = w.gocd.console_of(7).len();
    w.cluster.ping(std::collections::HashMap::new()).await.expect("ping");
    assert_eq!(w.gocd.console_of(7).len(), lines, "the job is told once");
    assert_eq!(w.cluster.queue_status().missed, 0);
}

#[tokio::test]
async fn events_of_tasks_that_are_not_ours_change_nothing() {
    let w = World::new("FARGATE");
    let (agent, arn) = w.running_agent(7).await;
    let ours = w.cluster.started_by();
    let foreign = [
        task_event(&arn, "gocd-another-server-000000", "ci", TaskStatus::Stopped, None), // another server's startedBy
        task_event(&arn, ours, "other-cluster", TaskStatus::Stopped, None),            // another cluster
        task_event("arn:aws:ecs:us-east-1:123456789012:task/ci/unknown", ours, "ci", TaskStatus::Stopped, None),
        r#"{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"i-0123456789abcdef0","instance-action":"terminate"}}"#.to_string(),
        r#"{"detail-type":"ECS Deployment State Change","source":"aws.ecs","detail":{}}"#.to_string(),
        "not an event".to_string(),
    ];
    for body in &foreign {
        if let Ok(event) = super::parse::parse(body) {
            assert_eq!(w.cluster.on_event(&event).await.expect("handled"), Handled::NotOurs, "{body}");
        }
        w.aws.send_event(body);
    }
    w.poll().await;
    assert!(w.gocd.deleted().is_empty() && w.gocd.disabled.lock().unwrap().is_empty());
    assert!(w.gocd.console_of(7).iter().all(|l| !l.contains("stopped")), "{:?}", w.gocd.console_of(7));
    let record = w.cluster.registry().get(&agent).cloned().unwrap();
    assert_eq!(record.phase, Phase::Running);
    assert!(!record.task.unwrap().is_stopping());
    assert_eq!(w.aws.queued(), 0, "read and dropped: a queue serves one GoCD server");
    assert_eq!(w.cluster.queue_status().events, 0);
}

#[tokio::test]
async fn a_fargate_spot_interruption_is_reported_and_the_rescheduled_job_runs_on_demand() {
    let w = World::new("FARGATE_SPOT");
    let (agent, arn) = w.running_agent(7).await;
    assert!(w.aws.run_requests()[0]["capacityProviderStrategy"][0]["capacityProvider"] == "FARGATE_SPOT");
    let started_by = w.cluster.started_by();
    let interrupted = Some(("SpotInterruption", "Your Spot Task was interrupted."));
    w.aws.send_event(&task_event(&arn, started_by, "ci", TaskStatus::Stopped, interrupted));
    w.poll().await;
    assert_eq!(w.gocd.deleted(), vec![agent]);
    let console = w.gocd.console_of(7).join("\n");
    assert!(console.contains("Your Spot Task was interrupted") && console.contains("on-demand"), "{console}");
    assert_eq!(w.cluster.registry().interruptions(), 1);

    // GoCD reschedules the job (a new job id, the same job): its agent runs on FARGATE.
    w.running_agent(8).await;
    let rerun = &w.aws.run_requests()[1];
    assert_eq!(rerun["launchType"], "FARGATE", "{rerun}");
    assert!(rerun.get("capacityProviderStrategy").is_none(), "{rerun}");
    assert!(
        w.gocd.console_of(8).iter().any(|l| l.contains("on FARGATE (on-demand: Spot interrupted")),
        "{:?}",
        w.gocd.console_of(8)
    );
    // Another job still goes to Spot.
    let mut other = job(9);
    other.job_name = "another".into();
    assert!(!w.cluster.registry().was_interrupted(&other));
}

#[tokio::test]
async fn an_unreadable_queue_is_told_in_health_and_polling_carries_on() {
    let w = World::new("FARGATE");
    let (agent, arn) = w.running_agent(7).await;
    w.aws.fail_next(
        "ReceiveMessage",
        400,
        "AWS.SimpleQueueService.NonExistentQueue",
        "The specified queue does not exist.",
    );
    assert_eq!(w.poll().await, Some(AFTER_ERROR));
    let warned: Vec<String> = w.health().into_iter().filter(|m| m.contains("could not be read")).collect();
    assert_eq!(warned.len(), 1, "{:?}", w.health());
    assert!(warned[0].contains(QUEUE) && warned[0].contains("NonExistentQueue"), "{warned:?}");
    assert!(w.cluster.queue_status().error.is_some());
    // The same failure again is not told again at once.
    w.aws.fail_next(
        "ReceiveMessage",
        400,
        "AWS.SimpleQueueService.NonExistentQueue",
        "The specified queue does not exist.",
    );
    w.poll().await;
    assert_eq!(w.health().iter().filter(|m| m.contains("could not be read")).count(), 1);

    // server-ping still removes the agent of a stopped task.
    w.aws.stop_by_ecs(&arn, "Task stopped by hand");
    let gocd: std::collections::HashMap<_, _> =
        w.gocd.agents.lock().unwrap().iter().map(|a| (a.agent_id.as_str().into(), a.clone())).collect();
    w.cluster.ping(gocd).await.expect("ping");
    assert_eq!(w.gocd.deleted(), vec![agent]);
    // A read that works again clears the error, and server health says so once.
    w.poll().await;
    assert!(w.cluster.queue_status().healthy());
    let again: Vec<String> = w.health().into_iter().filter(|m| m.contains("is read again")).collect();
    assert_eq!(again.len(), 1, "{:?}", w.health());
    assert!(again[0].contains(QUEUE), "{again:?}");
    w.poll().await;
    assert_eq!(w.health().iter().filter(|m| m.contains("is read again")).count(), 1, "told once, not at every read");
}

#[tokio::test]
async fn a_silent_queue_is_told_in_health_when_server_ping_finds_a_stop_it_missed() {
    let w = World::new("FARGATE");
    let (agent, arn) = w.running_agent(7).await;
    let (_, late_arn) = w.running_agent(8).await;
    w.poll().await; // read, empty: the queue works but no rule feeds it
    w.aws.stop_by_ecs(&arn, "Task stopped by hand");
    w.aws.stop_by_ecs(&late_arn, "Task stopped by hand");
    let gocd: std::collections::HashMap<_, _> =
        w.gocd.agents.lock().unwrap().iter().map(|a| (a.agent_id.as_str().into(), a.clone())).collect();
    w.cluster.ping(gocd).await.expect("ping");
    assert!(w.gocd.deleted().contains(&agent), "server-ping removed it");
    // The second stop's event comes, late: that one was not missed.
    let started_by = w.cluster.started_by();
    w.aws.send_event(&task_event(&late_arn, started_by, "ci", TaskStatus::Stopped, None));
    w.poll().await;
    w.cluster.queue_settle(w.cluster.now());
    assert_eq!(w.cluster.queue_status().missed, 0, "a ping may be quicker than EventBridge");
    w.clock.advance(super::MISSED_AFTER);
    w.cluster.queue_settle(w.cluster.now());
    assert_eq!(w.cluster.queue_status().missed, 1);
    let warned: Vec<String> = w.health().into_iter().filter(|m| m.contains("told nothing of it")).collect();
    assert_eq!(warned.len(), 1, "{:?}", w.health());
    assert!(warned[0].contains(&agent) && warned[0].contains("EventBridge rule"), "{warned:?}");
}

#[tokio::test]
async fn a_poller_reads_for_serving_profiles_and_stops_when_none_names_its_queue() {
    let w = World::new("FARGATE");
    let (agent, arn) = w.running_agent(7).await;
    let queues = super::EventQueues::default();
    queues.sync(std::slice::from_ref(&w.cluster));
    assert_eq!(queues.urls(), vec![QUEUE.to_string()]);
    // The background poller hands the event to the engine and deletes it.
    let started_by = w.cluster.started_by();
    w.aws.send_event(&task_event(
        &arn,
        started_by,
        "ci",
        TaskStatus::Stopped,
        Some(("TaskFailedToStart", "CannotPullContainerError")),
    ));
    // The poller says when an event changed what server health says: wait for that, not for time.
    let changed = queues.changed();
    while !(w.gocd.deleted().contains(&agent) && w.aws.queued() == 0) {
        tokio::time::timeout(std::time::Duration::from_secs(10), changed.notified())
            .await
            .expect("the poller handed the event on within 10 s");
    }
    assert_eq!(w.gocd.deleted(), vec![agent]);
    assert_eq!(w.aws.queued(), 0);
    // A profile whose engine is retired no longer reads its queue.
    w.cluster.retire(crate::cluster::Retirement::Replaced);
    queues.sync(std::slice::from_ref(&w.cluster));
    assert!(queues.urls().is_empty());
    w.aws.send_event(&task_event(&arn, started_by, "ci", TaskStatus::Stopped, None));
    // On this single-threaded runtime a live poller would read at the next turns of the
    // scheduler; the aborted one never runs again.
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert_eq!(w.aws.queued(), 1, "nobody reads the queue any more");
}

#[tokio::test]
async fn two_profiles_sharing_a_queue_each_act_on_their_own_tasks_only() {
    let a = World::new("FARGATE");
    // Another team's profile on the same cluster through another role: another key, another
    // startedBy, the same queue and the same (fake) account.
    let p = props(&[
        ("ClusterName", "ci"),
        ("Region", REGION),
        ("SubnetIds", "subnet-0a1b2c3d"),
        ("SecurityGroupIds", "sg-0a1b2c3d"),
        ("RoleArn", "arn:aws:iam::123456789012:role/team-b"),
        ("EventQueueUrl", QUEUE),
    ]);
    let key = cluster_key(ACCOUNT, REGION, "ci", Some("arn:aws:iam::123456789012:role/team-b"));
    let gocd_b = Arc::new(FakeGocd::default());
    let profile = ClusterProfile::parse(&p).expect("valid");
    let b = World {
        aws: a.aws.clone(),
        gocd: gocd_b.clone(),
        clock: a.clock.clone(),
        cluster: Arc::new(Cluster::with_clock(
            key,
            "server-1".into(),
            a.aws.clients(),
            profile,
            gocd_b,
            &EngineOptions::default(),
            a.clock.clone(),
        )),
    };
    assert_ne!(a.cluster.started_by(), b.cluster.started_by());
    let (agent_a, arn_a) = a.running_agent(7).await;
    let (agent_b, arn_b) = b.running_agent(8).await;
    let both = [a.cluster.clone(), b.cluster.clone()];
    a.aws.send_event(&task_event(&arn_b, b.cluster.started_by(), "ci", TaskStatus::Stopped, None));
    poll_once(QUEUE, &a.cluster, &both).await;
    assert_eq!(b.gocd.deleted(), vec![agent_b], "B's agent removed by B's engine");
    assert!(a.gocd.deleted().is_empty(), "A's engine acted on nothing");
    assert_eq!(a.cluster.registry().get(&agent_a).map(|r| r.phase), Some(Phase::Running));
    // And A's own stop, read through the same poller.
    a.aws.send_event(&task_event(&arn_a, a.cluster.started_by(), "ci", TaskStatus::Stopped, None));
    poll_once(QUEUE, &a.cluster, &both).await;
    assert_eq!(a.gocd.deleted(), vec![agent_a]);
    assert_eq!(b.gocd.deleted().len(), 1);
    assert_eq!(a.aws.queued(), 0);
}
