//! End-to-end scenarios of the event queue: the real plugin, moto, the GoCD host
//! simulator, and the test world's EventBridge stand-in (`world/eventbridge.rs`) sending the
//! "ECS Task State Change" events AWS documents to a moto SQS queue named by `EventQueueUrl`.
//!
//! - a task stopped by hand has its agent deleted within 5 s on the event, with server-pings
//!   paused (measured; the same test without a queue waits for the next ping);
//! - events of tasks that are not ours change nothing;
//! - a queue that cannot be read, or that no rule feeds, falls back to server-ping, with a
//!   server-health warning;
//! - a Fargate Spot interruption is reported with its cause, and the rescheduled job runs on
//!   FARGATE;
//! - an EC2 Spot warning drains its instance, new work starts elsewhere, and the jobs that were
//!   on it run again on an on-demand instance.
//!
//! Each ends with no task of ours running, no AWS rule broken, a secret scan, and a `FIGURES:`
//! line (`-- --nocapture`). Needs `MOTO_SERVER` (see `scripts/moto.sh`).

use crate::world;
use std::time::{Duration, Instant};

use crate::world::eventbridge::{self, EventBridge};
use crate::world::moto;
use crate::world::profiles::{cluster_props, elastic_props};
use crate::world::*;

const CLUSTER: &str = "gocd-a";
/// Longer than any of these tests waits for an event: a ping never does the events' work.
const SLOW_PING: Duration = Duration::from_secs(30);

/// What these tests do with a scenario, beside what the test world gives.
pub(crate) trait EventsScenario {
    async fn finish_events(self, host: GoCdHost, sim: AgentSimulator, extra: &str);
}

impl EventsScenario for Scenario {
    async fn finish_events(self, host: GoCdHost, sim: AgentSimulator, extra: &str) {
        self.assert_no_live_tasks(Duration::from_secs(60)).await;
        self.dump_calls();
        let _ = host.plugin_status_report().await;
        for id in host.config().cluster_profiles.iter().map(|c| c.id.clone()).collect::<Vec<_>>() {
            let _ = host.cluster_status_report(&id).await;
        }
        let scanner = SecretScanner::from_world(&host, Some(&self.proxy));
        scanner.assert_host_clean(&host);
        let counts = self.proxy.counts();
        let count = |k: &str| counts.get(k).copied().unwrap_or(0);
        eprintln!(
            "FIGURES: test={} secs={} aws_calls={} sqs_receive={} sqs_delete={} ecs_list_tasks={} ecs_describe_tasks={} run_task={} stop_task={} {}",
            self.name,
            self.started.elapsed().as_secs(),
            self.proxy.total(),
            count("sqs:ReceiveMessage"),
            count("sqs:DeleteMessageBatch"),
            count("ecs:ListTasks"),
            count("ecs:DescribeTasks"),
            count("ecs:RunTask"),
            count("ecs:StopTask"),
            extra,
        );
        drop(sim);
        host.shutdown().await;
        drop(self.moto);
    }
}

/// Starts one job and waits until it builds; returns its handle and agent.
async fn one_building_job(host: &GoCdHost, duration: Duration) -> (JobHandle, String) {
    let job = host.add_job(JobSpec::new("small", duration)).await;
    host.wait_until("the job building", Duration::from_secs(60), |s| {
        matches!(s.job(job).state, JobState::Running { .. })
    })
    .await;
    let JobState::Running { agent_id } = host.job_state(job) else { unreachable!() };
    (job, agent_id)
}

/// Once each of `jobs` is rescheduled (GoCD reschedules a job whose agent is deleted while it
/// builds), its rerun builds for [`RERUN`]: the first run was given long enough to be stopped
/// while building, on a loaded machine too; what these tests check of a rerun is where it runs
/// and that it completes, which a short build shows as well as a long one.
pub(crate) async fn shorten_reruns(host: &GoCdHost, jobs: &[JobHandle]) {
    host.wait_until("the jobs rescheduled", Duration::from_secs(60), |s| {
        jobs.iter().all(|j| !s.job(*j).previous_job_ids.is_empty())
    })
    .await;
    host.as_operator(|s| {
        for j in jobs {
            s.jobs[j.0].spec.duration = RERUN;
        }
    });
}

/// How long a rerun builds ([`shorten_reruns`]).
const RERUN: Duration = Duration::from_secs(2);

/// Pauses server-ping and waits until none is in flight.
async fn no_pings(host: &GoCdHost) {
    host.pause_pings(true);
    host.wait_until("in-flight pings done", Duration::from_secs(60), |s| s.pings.iter().all(|p| p.finished.is_some()))
        .await;
}

/// Stops the job's task by hand; returns how long until GoCD deleted its agent.
async fn stop_and_time_the_delete(
    host: &GoCdHost,
    sim: &AgentSimulator,
    job: JobHandle,
    agent: &str,
    within: Duration,
) -> Duration {
    let job_id = host.job_identifier(job).job_id;
    sim.stop_task_by_hand(job_id, "Essential container in task exited (e2e-events-4242)").await;
    let stopped_at = Instant::now();
    host.wait_until("the agent of the stopped task deleted", within, |s| s.deleted_agents.iter().any(|a| a == agent))
        .await;
    stopped_at.elapsed()
}

/// A world with the events queue and the rule feeding it from the cluster.
async fn world_with_events(name: &'static str) -> (Scenario, String, EventBridge) {
    let mut w = Scenario::new(name).await;
    let base = w.base.clone();
    w.cluster("base", &base, CLUSTER).await;
    let queue = eventbridge::create_queue(&base, "gocd-ecs-events").await;
    let bridge = EventBridge::start(w.fleets.clone(), &base, &queue).await;
    (w, queue, bridge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_events_a_task_stopped_by_hand_has_its_agent_deleted_within_seconds() {
    let (w, queue, bridge) = world_with_events("events_stop_by_hand").await;
    let mut cfg = w
        .host_config()
        .cluster_profile("base", cluster_props(CLUSTER, &[("EventQueueUrl", &queue)]))
        .elastic_profile("small", "base", elastic_props());
    cfg.ping_interval = SLOW_PING;
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    let (job, agent) = one_building_job(&host, Duration::from_secs(40)).await;
    no_pings(&host).await; // from here on only an event can delete the agent
    let pings_before = host.with_state(|s| s.pings.len());

    let took = stop_and_time_the_delete(&host, &sim, job, &agent, Duration::from_secs(20)).await;
    shorten_reruns(&host, &[job]).await;
    eprintln!("DETECTION: with events, agent deleted {} ms after StopTask (server-ping paused)", took.as_millis());
    assert!(took < Duration::from_secs(5), "agent deleted only after {took:?}");
    assert_eq!(host.with_state(|s| s.pings.len()), pings_before, "no server-ping ran");
    host.wait_until("the stop reason in the job's console and server health", Duration::from_secs(10), |s| {
        s.console.iter().any(|c| c.text.contains("e2e-events-4242")) && s.health_ever_mentions("e2e-events-4242")
    })
    .await;
    assert_eq!(host.with_state(|s| s.pings.len()), pings_before, "told without a server-ping");
    host.pause_pings(false);
    host.wait_until("the rescheduled job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    assert!(bridge.with_state(|s| s.errors.is_empty()));
    let base = w.base.clone();
    wait_for("the queue drained", Duration::from_secs(30), || async { eventbridge::queued(&base, &queue).await == 0 })
        .await;
    let events = bridge.with_state(|s| s.total());
    w.finish_events(host, sim, &format!("detection_ms_events={} events_sent={events}", took.as_millis())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_events_the_same_stop_waits_for_the_next_server_ping() {
    let mut w = Scenario::new("no_events_stop_by_hand").await;
    let base = w.base.clone();
    w.cluster("base", &base, CLUSTER).await;
    let mut cfg = w.host_config().cluster_profile("base", cluster_props(CLUSTER, &[])).elastic_profile(
        "small",
        "base",
        elastic_props(),
    );
    let ping = Duration::from_secs(10);
    cfg.ping_interval = ping;
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    let (job, agent) = one_building_job(&host, Duration::from_secs(40)).await;
    // Right after a ping: the next one is a whole interval away.
    let pings = host.with_state(|s| s.pings.len());
    host.wait_until("a ping to finish", ping * 3, |s| {
        s.pings.len() > pings && s.pings.iter().all(|p| p.finished.is_some())
    })
    .await;

    let took = stop_and_time_the_delete(&host, &sim, job, &agent, ping * 3).await;
    shorten_reruns(&host, &[job]).await;
    eprintln!(
        "DETECTION: without events, agent deleted {} ms after StopTask (ping interval {} s)",
        took.as_millis(),
        ping.as_secs()
    );
    assert!(
        took >= Duration::from_secs(3),
        "deleted after {took:?}: only a server-ping can have done it, seconds later"
    );
    host.wait_until("the rescheduled job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    w.finish_events(host, sim, &format!("detection_ms_ping={} ping_interval_s={}", took.as_millis(), ping.as_secs()))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_of_tasks_that_are_not_ours_change_nothing() {
    let (mut w, queue, _) = world_with_events("events_foreign").await;
    let base = w.base.clone();
    // The rule is too wide: it also sends another cluster's events, and other tools run tasks
    // in ours. The queue carries them all.
    w.cluster("other", &base, "someone-elses").await;
    let bridge = EventBridge::start(w.fleets.clone(), &base, &queue).await;
    let mut cfg = w
        .host_config()
        .cluster_profile("base", cluster_props(CLUSTER, &[("EventQueueUrl", &queue)]))
        .elastic_profile("small", "base", elastic_props());
    cfg.ping_interval = SLOW_PING;
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    let (_job, agent) = one_building_job(&host, Duration::from_secs(12)).await;

    let mut foreign = Vec::new();
    for cluster in [CLUSTER, "someone-elses"] {
        let arn = run_foreign_task(&base, cluster).await;
        tokio::time::sleep(Duration::from_millis(500)).await; // its RUNNING event first
        stop_foreign_task(&base, cluster, &arn).await;
        foreign.push(arn);
    }
    wait_for("the foreign tasks' events sent", Duration::from_secs(20), || async {
        bridge.with_state(|s| {
            foreign.iter().all(|a| s.sent.get(a).and_then(|e| e.last()).is_some_and(|e| e.1 == "STOPPED"))
        })
    })
    .await;
    wait_for("the queue drained", Duration::from_secs(30), || async { eventbridge::queued(&base, &queue).await == 0 })
        .await;
    let (deleted, disabled) = host.with_state(|s| (s.deleted_agents.clone(), s.disabled_agents.clone()));
    assert!(!deleted.contains(&agent) && !disabled.contains(&agent), "our agent was touched: {deleted:?} {disabled:?}");
    assert_eq!(host.with_state(|s| s.agents.len()), 1, "our agent still registered");
    host.wait_until("the job completed", Duration::from_secs(60), |s| s.all_completed()).await;
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    for arn in &foreign {
        assert!(!host.with_state(|s| s.health_ever_mentions(arn)), "health mentions a foreign task {arn}");
        assert_eq!(
            moto::all_tasks(&base, CLUSTER)
                .await
                .iter()
                .chain(moto::all_tasks(&base, "someone-elses").await.iter())
                .filter(|t| t.task_arn() == Some(arn) && t.stopped_reason() != Some("stopped by its owner"))
                .count(),
            0,
            "the plugin stopped a foreign task"
        );
    }
    let job_id = host.with_state(|s| s.jobs[0].identifier.job_id);
    assert_eq!(sim.tasks_for_job(job_id), 1);
    w.finish_events(host, sim, &format!("foreign_tasks={}", foreign.len())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreadable_queue_falls_back_to_server_ping_with_a_health_warning() {
    let mut w = Scenario::new("events_broken_queue").await;
    let base = w.base.clone();
    w.cluster("base", &base, CLUSTER).await;
    let missing = format!("{}/{}/no-such-queue", w.moto.endpoint(), moto::BASE_ACCOUNT);
    let mut cfg = w
        .host_config()
        .cluster_profile("base", cluster_props(CLUSTER, &[("EventQueueUrl", &missing)]))
        .elastic_profile("small", "base", elastic_props());
    let ping = Duration::from_secs(3);
    cfg.ping_interval = ping;
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    let (job, agent) = one_building_job(&host, Duration::from_secs(20)).await;
    host.wait_until("server health says the queue cannot be read", Duration::from_secs(30), |s| {
        s.health_ever_mentions("could not be read") && s.health_ever_mentions("no-such-queue")
    })
    .await;
    let took = stop_and_time_the_delete(&host, &sim, job, &agent, ping * 3 + Duration::from_secs(10)).await;
    shorten_reruns(&host, &[job]).await;
    host.wait_until("the rescheduled job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    w.finish_events(host, sim, &format!("detection_ms_broken_queue={}", took.as_millis())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queue_no_rule_feeds_falls_back_to_server_ping_with_a_health_warning() {
    let mut w = Scenario::new("events_silent_queue").await;
    let base = w.base.clone();
    w.cluster("base", &base, CLUSTER).await;
    let queue = eventbridge::create_queue(&base, "gocd-ecs-events").await; // no rule feeds it
    let mut cfg = w
        .host_config()
        .cluster_profile("base", cluster_props(CLUSTER, &[("EventQueueUrl", &queue)]))
        .elastic_profile("small", "base", elastic_props());
    let ping = Duration::from_secs(3);
    cfg.ping_interval = ping;
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    let (job, agent) = one_building_job(&host, Duration::from_secs(20)).await;
    let took = stop_and_time_the_delete(&host, &sim, job, &agent, ping * 3 + Duration::from_secs(10)).await;
    shorten_reruns(&host, &[job]).await;
    // A ping may be quicker than EventBridge: the queue is said to have missed a stop when its
    // event has not come 30 s later (checked after each long poll, at most 20 s).
    host.wait_until("server health says the queue told nothing", Duration::from_secs(90), |s| {
        s.health_ever_mentions("told nothing of it")
    })
    .await;
    host.wait_until("the rescheduled job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    w.finish_events(host, sim, &format!("detection_ms_silent_queue={}", took.as_millis())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fargate_spot_interruption_is_reported_and_the_rescheduled_job_runs_on_fargate() {
    let (w, queue, bridge) = world_with_events("events_spot_interruption").await;
    let mut cfg = w
        .host_config()
        .cluster_profile("base", cluster_props(CLUSTER, &[("EventQueueUrl", &queue), ("LaunchType", "FARGATE_SPOT")]))
        .elastic_profile("small", "base", elastic_props());
    cfg.ping_interval = SLOW_PING;
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    let (job, agent) = one_building_job(&host, Duration::from_secs(20)).await;
    let first = w.proxy.requests("ecs", "RunTask");
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["capacityProviderStrategy"][0]["capacityProvider"], "FARGATE_SPOT", "{}", first[0]);
    no_pings(&host).await;

    let job_id = host.job_identifier(job).job_id;
    let arn =
        sim.with_state(|s| s.tasks.values().find(|t| t.job_id == Some(job_id.to_string())).map(|t| t.task_arn.clone()));
    let fleet = w.fleets[0].clone();
    bridge.interrupt_spot(&fleet, &arn.expect("the job's task")).await;
    let interrupted_at = Instant::now();
    host.wait_until("the interrupted agent deleted", Duration::from_secs(20), |s| s.deleted_agents.contains(&agent))
        .await;
    let took = interrupted_at.elapsed();
    shorten_reruns(&host, &[job]).await;
    host.wait_until("the cause in the console and server health", Duration::from_secs(10), |s| {
        s.console.iter().any(|c| c.text.contains("Your Spot Task was interrupted") && c.text.contains("on-demand"))
            && s.health_ever_mentions("SpotInterruption")
    })
    .await;
    host.pause_pings(false);
    host.wait_until("the rescheduled job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    let runs = w.proxy.requests("ecs", "RunTask");
    assert_eq!(runs.len(), 2, "one RunTask per agent");
    assert_eq!(runs[1]["launchType"], "FARGATE", "the rescheduled job runs on demand: {}", runs[1]);
    assert!(runs[1].get("capacityProviderStrategy").is_none(), "{}", runs[1]);
    assert!(host.with_state(|s| s.console.iter().any(|c| c.text.contains("on FARGATE (on-demand: Spot interrupted"))));
    let report = host.cluster_status_report("base").await.expect("cluster status report");
    assert!(report.body.to_string().contains("Spot interruptions"), "the report counts interruptions");
    w.finish_events(host, sim, &format!("spot_detection_ms={}", took.as_millis())).await;
}

/// Starts a task of another tool (not the plugin's `startedBy`, none of its tags) in `cluster`.
async fn run_foreign_task(cfg: &aws_config::SdkConfig, cluster: &str) -> String {
    use aws_sdk_ecs::types::{AwsVpcConfiguration, ContainerDefinition, LaunchType, NetworkConfiguration};
    let ecs = aws_sdk_ecs::Client::new(cfg);
    let container = ContainerDefinition::builder().name("web").image("nginx:1").cpu(256).memory(512).build();
    ecs.register_task_definition()
        .family("someone-elses-web")
        .container_definitions(container)
        .network_mode(aws_sdk_ecs::types::NetworkMode::Awsvpc)
        .requires_compatibilities(aws_sdk_ecs::types::Compatibility::Fargate)
        .cpu("256")
        .memory("512")
        .send()
        .await
        .expect("RegisterTaskDefinition");
    let net = moto::default_network(cfg).await;
    let vpc = AwsVpcConfiguration::builder()
        .set_subnets(Some(net.subnet_ids.clone()))
        .security_groups(net.security_group_id.clone())
        .build()
        .expect("awsvpc");
    let out = ecs
        .run_task()
        .cluster(cluster)
        .task_definition("someone-elses-web")
        .launch_type(LaunchType::Fargate)
        .started_by("someone-elses-deployer")
        .network_configuration(NetworkConfiguration::builder().awsvpc_configuration(vpc).build())
        .send()
        .await
        .unwrap_or_else(|e| panic!("RunTask: {}", moto::aws_error_text(&e)));
    out.tasks()[0].task_arn().expect("an ARN").to_string()
}

async fn stop_foreign_task(cfg: &aws_config::SdkConfig, cluster: &str, arn: &str) {
    aws_sdk_ecs::Client::new(cfg)
        .stop_task()
        .cluster(cluster)
        .task(arn)
        .reason("stopped by its owner")
        .send()
        .await
        .unwrap_or_else(|e| panic!("StopTask: {}", moto::aws_error_text(&e)));
}

/// An EC2 profile: c5.xlarge instances (four 1024/1800 tasks each), idle after 1 minute.
fn ec2_props(cluster: &str, queue: &str) -> world::host::Props {
    cluster_props(
        cluster,
        &[
            ("LaunchType", "EC2"),
            ("Ec2InstanceType", "c5.xlarge"),
            ("Ec2InstanceProfile", "gocd-ecs-instance"),
            ("Ec2AmiId", "ami-0abcdef1234567890"),
            ("Ec2IdleMinutes", "1"),
            ("Ec2MaxInstances", "4"),
            ("Ec2Spot", "true"),
            ("EventQueueUrl", queue),
        ],
    )
}

/// Each RunInstances' market (`spot` or `on-demand`), in order, as the proxy saw them.
fn record_markets(w: &Scenario) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    let markets = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = markets.clone();
    w.proxy.add_rule("markets", move |call| {
        if call.is("ec2", "RunInstances") {
            let market = call.form_param("InstanceMarketOptions.MarketType").unwrap_or("on-demand").to_string();
            seen.lock().unwrap().push(market);
        }
        world::proxy::Verdict::Forward
    });
    markets
}

/// Spot takes the instance: its tasks stop (as ECS stops them), then EC2 terminates it.
async fn spot_takes(w: &Scenario, host: &GoCdHost, jobs: &[JobHandle], instance: &str) {
    let ecs = aws_sdk_ecs::Client::new(&w.base);
    let ids: Vec<String> = jobs.iter().map(|j| host.job_identifier(*j).job_id.to_string()).collect();
    for t in moto::all_tasks(&w.base, CLUSTER).await {
        if ids.iter().any(|id| moto::task_tag(&t, "gocd:job-id") == Some(id.as_str())) {
            let reason = format!("Host EC2 (instance {instance}) terminated.");
            ecs.stop_task()
                .cluster(CLUSTER)
                .task(t.task_arn().unwrap_or_default())
                .reason(reason)
                .send()
                .await
                .expect("StopTask");
        }
    }
    aws_sdk_ec2::Client::new(&w.base)
        .terminate_instances()
        .instance_ids(instance)
        .send()
        .await
        .expect("TerminateInstances");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_spot_warning_outlives_a_plugin_restart() {
    use world::ec2::{create_instance_profile, Ec2Policy, InstanceSimulator};
    let (w, queue, bridge) = world_with_events("events_ec2_spot_restart").await;
    create_instance_profile(w.moto.addr(), moto::TEST_ACCESS_KEY_ID, "gocd-ecs-instance").await;
    let markets = record_markets(&w);
    // Half an instance each: two to an instance.
    let half = props(&[("Image", world::profiles::IMAGE), ("Cpu", "2048"), ("Memory", "3600")]);
    let cfg = w.host_config().cluster_profile("ec2", ec2_props(CLUSTER, &queue)).elastic_profile("half", "ec2", half);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() });
    let ec2 = InstanceSimulator::start(w.fleets.clone(), host.server_id(), Ec2Policy::default());

    let first = host.add_jobs(JobSpec::new("half", Duration::from_secs(120)), 2).await;
    host.wait_until("both jobs building", Duration::from_secs(90), |s| {
        first.iter().all(|j| matches!(s.job(*j).state, JobState::Running { .. }))
    })
    .await;
    let doomed = ec2.instances()[0].id.clone();
    bridge.spot_warning(moto::BASE_ACCOUNT, &doomed).await;
    wait_for("the replacement for both reruns registered", Duration::from_secs(30), || async {
        ec2.instances().iter().filter(|i| i.container_instance_arn.is_some()).count() == 2
    })
    .await;
    assert_eq!(*markets.lock().unwrap(), ["spot", "on-demand"]);
    let ec2_api = aws_sdk_ec2::Client::new(&w.base);
    let described = ec2_api.describe_instances().instance_ids(&doomed).send().await.expect("DescribeInstances");
    let tags = described.reservations()[0].instances()[0].tags();
    assert!(tags.iter().any(|t| t.key() == Some("gocd:spot-warned")), "the warning is tagged: {tags:?}");

    // The plugin restarts; a new job takes half of the room kept for the reruns. A plugin that
    // remembers the warning launches on-demand room for the other rerun now, before Spot takes
    // the instance; one that forgot would launch it only once the rerun waits.
    host.restart().await;
    let late = host.add_job(JobSpec::new("half", Duration::from_secs(5))).await;
    host.wait_until("the late job building", Duration::from_secs(60), |s| {
        matches!(s.job(late).state, JobState::Running { .. })
    })
    .await;
    wait_for("on-demand room for the second rerun", Duration::from_secs(20), || async {
        markets.lock().unwrap().len() == 3
    })
    .await;
    assert_eq!(*markets.lock().unwrap(), ["spot", "on-demand", "on-demand"]);

    spot_takes(&w, &host, &first, &doomed).await;
    shorten_reruns(&host, &first).await;
    host.wait_until("every job completed", Duration::from_secs(180), |s| s.all_completed()).await;
    assert_eq!(markets.lock().unwrap().len(), 3, "nothing launched once the reruns came");
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    drop(ec2);
    w.finish_events(host, sim, &format!("drained_instance={doomed}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ec2_spot_warning_drains_its_instance_and_new_work_starts_elsewhere() {
    use world::ec2::{create_instance_profile, Ec2Policy, InstanceSimulator};
    let (w, queue, bridge) = world_with_events("events_ec2_spot_warning").await;
    create_instance_profile(w.moto.addr(), moto::TEST_ACCESS_KEY_ID, "gocd-ecs-instance").await;
    let markets = record_markets(&w);
    let quarter = props(&[("Image", world::profiles::IMAGE), ("Cpu", "1024"), ("Memory", "1800")]);
    let cfg =
        w.host_config().cluster_profile("ec2", ec2_props(CLUSTER, &queue)).elastic_profile("quarter", "ec2", quarter);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() });
    let ec2 = InstanceSimulator::start(w.fleets.clone(), host.server_id(), Ec2Policy::default());

    let first = host.add_jobs(JobSpec::new("quarter", Duration::from_secs(90)), 2).await;
    host.wait_until("both jobs building", Duration::from_secs(90), |s| {
        first.iter().all(|j| matches!(s.job(*j).state, JobState::Running { .. }))
    })
    .await;
    let instances = ec2.instances();
    assert_eq!(instances.len(), 1, "both on one instance");
    let (doomed, container) =
        (instances[0].id.clone(), instances[0].container_instance_arn.clone().expect("registered"));

    bridge.spot_warning(moto::BASE_ACCOUNT, &doomed).await;
    let warned_at = Instant::now();
    // Room for the two reruns is launched on demand during the warning, before anything stops.
    wait_for("an on-demand instance launched for the reruns", Duration::from_secs(15), || async {
        markets.lock().unwrap().len() == 2
    })
    .await;
    let replacement_after = warned_at.elapsed();
    assert_eq!(*markets.lock().unwrap(), ["spot", "on-demand"], "the replacement runs on demand");
    let ecs = aws_sdk_ecs::Client::new(&w.base);
    wait_for("the instance drained", Duration::from_secs(15), || async {
        let out = ecs.describe_container_instances().cluster(CLUSTER).container_instances(&container).send().await;
        out.ok().is_some_and(|o| o.container_instances().first().and_then(|c| c.status()) == Some("DRAINING"))
    })
    .await;
    host.wait_until("each job on it told", Duration::from_secs(10), |s| {
        first.iter().all(|j| {
            s.console.iter().any(|c| {
                c.job == Some(*j) && c.text.contains("EC2 Spot interrupts instance") && c.text.contains(&doomed)
            })
        })
    })
    .await;

    // Work that arrives now starts on another instance.
    let late = host.add_job(JobSpec::new("quarter", Duration::from_secs(5))).await;
    host.wait_until("the late job building", Duration::from_secs(90), |s| {
        matches!(s.job(late).state, JobState::Running { .. })
    })
    .await;
    let late_id = host.job_identifier(late).job_id.to_string();
    let on = moto::all_tasks(&w.base, CLUSTER)
        .await
        .into_iter()
        .find(|t| moto::task_tag(t, "gocd:job-id") == Some(late_id.as_str()))
        .and_then(|t| t.container_instance_arn().map(str::to_string));
    assert!(on.is_some() && on.as_deref() != Some(container.as_str()), "the late job ran on the drained instance");
    assert_eq!(ec2.instances().len(), 2, "one replacement instance, for the late job and the reruns");

    // Two minutes later Spot takes the instance: its tasks stop with it (as ECS stops them).
    spot_takes(&w, &host, &first, &doomed).await;
    shorten_reruns(&host, &first).await;
    // GoCD reschedules both jobs; their agents run on an on-demand instance, and say so.
    host.wait_until("the rescheduled jobs told they run on demand", Duration::from_secs(60), |s| {
        first
            .iter()
            .all(|j| s.console.iter().any(|c| c.job == Some(*j) && c.text.contains("on-demand: Spot interrupted")))
    })
    .await;
    host.wait_until("every job completed", Duration::from_secs(180), |s| s.all_completed()).await;
    assert_eq!(*markets.lock().unwrap(), ["spot", "on-demand"], "no instance launched after the warning's");
    let rescheduled: Vec<String> = first.iter().map(|j| host.job_identifier(*j).job_id.to_string()).collect();
    let ec2_api = aws_sdk_ec2::Client::new(&w.base);
    for t in moto::all_tasks(&w.base, CLUSTER).await {
        if !rescheduled.iter().any(|id| moto::task_tag(&t, "gocd:job-id") == Some(id.as_str())) {
            continue;
        }
        let arn = t.container_instance_arn().expect("an EC2 task").to_string();
        let ci = ecs
            .describe_container_instances()
            .cluster(CLUSTER)
            .container_instances(&arn)
            .send()
            .await
            .expect("DescribeContainerInstances");
        let id = ci.container_instances()[0].ec2_instance_id().expect("its instance").to_string();
        let described = ec2_api.describe_instances().instance_ids(&id).send().await.expect("DescribeInstances");
        let instance = &described.reservations()[0].instances()[0];
        assert!(instance.instance_lifecycle().is_none(), "a rescheduled job ran on spot instance {id}");
    }
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    let report = host.cluster_status_report("ec2").await.expect("cluster status report").body.to_string();
    assert!(report.contains("Spot interruptions"), "the report counts interruptions");
    drop(ec2);
    w.finish_events(
        host,
        sim,
        &format!("drained_instance={doomed} replacement_launched_after_ms={}", replacement_after.as_millis()),
    )
    .await;
}
