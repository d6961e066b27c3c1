//! Isolation and orphans:
//!
//! - two GoCD servers (two plugin processes with different server ids) on one ECS cluster, and two
//!   cluster profiles of one account, never stop, adopt or count each other's tasks, also across a
//!   kill and restart; `MaxAgents` is per server and per profile; one server's task-definition
//!   sweep leaves the other's revisions alone;
//! - a task of ours that nothing explains is stopped by the two-phase orphan sweep on the second
//!   server-ping, and tasks of another server are never touched;
//! - task-definition revisions of ours that nothing uses are deregistered, at most five a pass,
//!   once an hour, and never another server's or another cluster profile's.
//!
//! Every test ends with the checks of `Scenario::finish`. Needs `MOTO_SERVER`; never skips.

use crate::world;
use std::collections::BTreeSet;
use std::time::Duration;

use crate::reliability::*;
use crate::world::host::{HostState, JobState};
use crate::world::moto::{self, aws_error_text, REGION};
use crate::world::profiles::IMAGE;
use crate::world::*;
use aws_config::SdkConfig;
use aws_sdk_ecs::types::{
    AwsVpcConfiguration, Compatibility, ContainerDefinition, LaunchType, NetworkConfiguration, NetworkMode, Tag,
    TaskDefinitionStatus,
};
use ecs_elastic_agent::cluster::base::identity::cluster_key;

/// A host on `proxy` (no metrics endpoint: one per test is enough).
fn plain_config(proxy: &Proxy) -> HostConfig {
    HostConfig::new(&proxy.endpoint())
}

/// Two GoCD servers share one cluster, `MaxAgents` 4 each: both reach 4 live tasks at once (8 in
/// the cluster), neither stops or adopts the other's tasks, also when one is killed and
/// restarted; one server's task-definition sweep leaves the other's revision alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_gocd_servers_on_one_cluster_never_touch_each_other() {
    let mut w = Scenario::new("two_servers_one_cluster").await;
    let base = w.base.clone();
    w.cluster("shared", &base, "gocd-a").await;
    let proxy_b = Proxy::start(w.moto.addr()).await;
    let profile = cluster_props("gocd-a", &[("MaxAgents", "4"), ("AgentRegisterTimeoutMinutes", "1")]);
    let cfg_a = sweeping_at_once(w.host_config()).cluster_profile("c", profile.clone()).elastic_profile(
        "small",
        "c",
        elastic_props(),
    );
    let cfg_b = plain_config(&proxy_b).cluster_profile("c", profile).elastic_profile("small", "c", elastic_props());
    let a = GoCdHost::launch(cfg_a).await;
    let b = GoCdHost::launch(cfg_b).await;
    assert_ne!(a.server_id(), b.server_id());
    let only = |h: &GoCdHost| SimPolicy { only_server_id: Some(h.server_id().to_string()), ..SimPolicy::default() };
    let sim_a = w.agents(&a, only(&a));
    let sim_b = w.agents(&b, only(&b));

    a.add_jobs(JobSpec::new("small", Duration::from_secs(8)), 8).await;
    // B's first job once A's task definition is registered: moto registers two revisions of one
    // family sent at the same instant as one (both get revision 1, the later one's tags win),
    // where AWS gives each its own; the sweep below tells the two servers' revisions apart.
    sim_a.wait_until("A's first task", Duration::from_secs(30), |s| !s.tasks.is_empty()).await;
    b.add_jobs(JobSpec::new("small", Duration::from_secs(8)), 8).await;
    // Both at their own limit at the same time: the count is per server.
    let both_full = |s: &world::host::HostState| job_states(s).1 == 4;
    a.wait_until("server A running 4 jobs", Duration::from_secs(60), both_full).await;
    b.wait_until("server B running 4 jobs", Duration::from_secs(60), both_full).await;
    let live = moto::live_tasks(&base, "gocd-a").await.len();
    assert_eq!(live, 8, "4 tasks of each server live in the cluster");

    // Kill A with its agents running and start it again: it adopts its own 4 tasks only.
    let b_tasks_before: BTreeSet<String> = sim_b.with_state(|s| s.tasks.keys().cloned().collect());
    a.kill().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.restart().await;
    let ping = a.server_ping().await.expect("server-ping after the restart");
    assert_eq!(ping.code, 200);
    let view = a.cluster_status_report("c").await.expect("cluster status report").body["view"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for arn in &b_tasks_before {
        let id = arn.rsplit('/').next().unwrap_or(arn);
        assert!(!view.contains(id), "server A's report shows B's task {id}");
    }

    a.wait_until("all of A's jobs completed", Duration::from_secs(120), |s| s.all_completed()).await;
    b.wait_until("all of B's jobs completed", Duration::from_secs(120), |s| s.all_completed()).await;
    assert_all_done(&a, &sim_a, Duration::from_secs(90)).await;
    assert_all_done(&b, &sim_b, Duration::from_secs(90)).await;
    for (sim, h) in [(&sim_a, "A"), (&sim_b, "B")] {
        let peak = sim.with_state(|s| s.max_live_per_fleet[0]);
        assert_eq!(peak, 4, "server {h} peaked at {peak} live tasks (MaxAgents 4)");
    }

    // Every StopTask a server sent named one of its own tasks.
    let a_tasks: BTreeSet<String> = sim_a.with_state(|s| s.tasks.keys().cloned().collect());
    let b_tasks: BTreeSet<String> = sim_b.with_state(|s| s.tasks.keys().cloned().collect());
    assert_eq!((a_tasks.len(), b_tasks.len()), (8, 8));
    for (proxy, own, other) in [(&w.proxy, &a_tasks, &b_tasks), (&proxy_b, &b_tasks, &a_tasks)] {
        for arn in stop_task_targets(proxy) {
            assert!(own.contains(&arn), "a StopTask for {arn}, not a task of this server");
            assert!(!other.contains(&arn));
        }
    }
    sim_b
        .wait_until("every task of B seen stopped", Duration::from_secs(15), |s| s.tasks.values().all(|t| t.stopped))
        .await;
    let b_reasons: Vec<Option<String>> =
        sim_b.with_state(|s| s.tasks.values().map(|t| t.stopped_reason.clone()).collect());
    for r in &b_reasons {
        assert!(r.as_deref().is_some_and(|r| r.contains("completed")), "a task of B stopped for {r:?}");
    }

    // A new process of A with nothing running sweeps the task-definition family both servers
    // use: its own revision goes, B's stays (B keeps launching with it).
    let family_arns = active_task_definitions(&base).await;
    a.restart().await;
    a.server_ping().await.expect("server-ping of the new process");
    let after = active_task_definitions(&base).await;
    let b_job = b.add_job(JobSpec::new("small", Duration::from_secs(1))).await;
    b.wait_until("B's new job completed", Duration::from_secs(60), |s| {
        matches!(s.job(b_job).state, JobState::Completed { .. })
    })
    .await;
    let b_used = task_definitions_of(&base, "gocd-a", b.server_id()).await;
    for td in &b_used {
        assert!(
            after.contains(td),
            "B's task definition {td} was deregistered by A (before: {family_arns:?}, after: {after:?})"
        );
    }
    let a_used = task_definitions_of(&base, "gocd-a", a.server_id()).await;
    assert!(
        a_used.iter().all(|td| !after.contains(td)),
        "A's unused revision stays registered: {a_used:?} of {after:?}"
    );
    assert_all_done(&b, &sim_b, Duration::from_secs(60)).await;
    let stops = (stop_task_targets(&w.proxy).len(), stop_task_targets(&proxy_b).len());
    w.finish_hosts(
        &[a, b],
        vec![sim_a, sim_b],
        &format!(
            "servers=2 tasks_per_server=8 max_live_per_server=4 live_at_peak={live} stop_task_calls(a,b)={stops:?}"
        ),
    )
    .await;
}

/// Task ARNs named by the StopTask calls a proxy saw.
fn stop_task_targets(proxy: &Proxy) -> Vec<String> {
    proxy.requests("ecs", "StopTask").into_iter().filter_map(|body| body["task"].as_str().map(str::to_string)).collect()
}

/// Every ACTIVE task definition ARN in the account.
async fn active_task_definitions(cfg: &SdkConfig) -> BTreeSet<String> {
    let ecs = aws_sdk_ecs::Client::new(cfg);
    let out = ecs
        .list_task_definitions()
        .status(TaskDefinitionStatus::Active)
        .send()
        .await
        .unwrap_or_else(|e| panic!("ListTaskDefinitions: {}", aws_error_text(&e)));
    out.task_definition_arns().iter().cloned().collect()
}

/// The task definitions the tasks of one server in a cluster ran with.
async fn task_definitions_of(cfg: &SdkConfig, cluster: &str, server_id: &str) -> BTreeSet<String> {
    moto::all_tasks(cfg, cluster)
        .await
        .iter()
        .filter(|t| moto::task_tag(t, "gocd:server-id") == Some(server_id))
        .filter_map(|t| t.task_definition_arn().map(str::to_string))
        .collect()
}

/// Two cluster profiles of one account (two clusters, `MaxAgents` 2 and 5): each reaches its own
/// limit while the other is full, and a kill and restart of the plugin adopts each profile's
/// tasks into that profile only.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_cluster_profiles_of_one_account_count_and_adopt_apart() {
    let mut w = Scenario::new("two_profiles_one_account").await;
    let base = w.base.clone();
    w.cluster("small", &base, "gocd-a").await;
    let base2 = w.base.clone();
    w.cluster("large", &base2, "gocd-b").await;
    let cfg = w
        .host_config()
        .cluster_profile("small", cluster_props("gocd-a", &[("MaxAgents", "2"), ("AgentRegisterTimeoutMinutes", "1")]))
        .cluster_profile("large", cluster_props("gocd-b", &[("MaxAgents", "5"), ("AgentRegisterTimeoutMinutes", "1")]))
        .elastic_profile("on-small", "small", elastic_props())
        .elastic_profile("on-large", "large", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    let small = host.add_jobs(JobSpec::new("on-small", Duration::from_secs(6)), 6).await;
    let large = host.add_jobs(JobSpec::new("on-large", Duration::from_secs(6)), 10).await;
    let running = |hs: &[JobHandle], s: &world::host::HostState| {
        hs.iter().filter(|h| matches!(s.job(**h).state, JobState::Running { .. })).count()
    };
    host.wait_until("2 small and 5 large jobs running at once", Duration::from_secs(60), |s| {
        running(&small, s) == 2 && running(&large, s) == 5
    })
    .await;
    host.kill().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    host.restart().await;
    host.wait_until("all jobs completed", Duration::from_secs(150), |s| s.all_completed()).await;
    assert_all_done(&host, &sim, Duration::from_secs(120)).await;
    let peaks = sim.with_state(|s| s.max_live_per_fleet.clone());
    assert_eq!(peaks, vec![2, 5], "live tasks per cluster never above its own MaxAgents, and each reached it");
    let tasks = sim.with_state(|s| {
        s.tasks.values().map(|t| (t.fleet, t.tags.get("gocd:cluster-profile").cloned())).collect::<Vec<_>>()
    });
    let keys: Vec<BTreeSet<Option<String>>> =
        (0..2).map(|f| tasks.iter().filter(|t| t.0 == f).map(|t| t.1.clone()).collect()).collect();
    assert_eq!(keys[0].len(), 1);
    assert_eq!(keys[1].len(), 1);
    assert_ne!(keys[0], keys[1], "each cluster's tasks carry its own profile key");
    w.finish(host, sim, &format!("profiles=2 peaks={peaks:?}")).await;
}

/// A Fargate task definition registered by hand, with these tags; returns its ARN.
async fn register_by_hand(ecs: &aws_sdk_ecs::Client, family: &str, tags: &[(&str, &str)]) -> String {
    let container = ContainerDefinition::builder().name("x").image(IMAGE).cpu(256).memory(512).build();
    let mut request = ecs
        .register_task_definition()
        .family(family)
        .requires_compatibilities(Compatibility::Fargate)
        .network_mode(NetworkMode::Awsvpc)
        .cpu("256")
        .memory("512")
        .container_definitions(container);
    for (k, v) in tags {
        request = request.tags(Tag::builder().key(*k).value(*v).build());
    }
    let out = request.send().await.unwrap_or_else(|e| panic!("RegisterTaskDefinition: {}", aws_error_text(&e)));
    out.task_definition().and_then(|t| t.task_definition_arn()).unwrap().to_string()
}

/// Starts a task by hand with this `startedBy` and these tags (no overrides: no agent registers).
async fn run_by_hand(cfg: &SdkConfig, cluster: &str, td: &str, started_by: &str, tags: &[(String, String)]) -> String {
    let ecs = aws_sdk_ecs::Client::new(cfg);
    let net = moto::default_network(cfg).await;
    let vpc = AwsVpcConfiguration::builder()
        .subnets(net.subnet_ids[0].clone())
        .security_groups(net.security_group_id.clone())
        .build()
        .unwrap();
    let mut request = ecs
        .run_task()
        .cluster(cluster)
        .task_definition(td)
        .launch_type(LaunchType::Fargate)
        .started_by(started_by)
        .network_configuration(NetworkConfiguration::builder().awsvpc_configuration(vpc).build());
    for (k, v) in tags {
        request = request.tags(Tag::builder().key(k).value(v).build());
    }
    let out = request.send().await.unwrap_or_else(|e| panic!("RunTask: {}", aws_error_text(&e)));
    out.tasks()[0].task_arn().unwrap().to_string()
}

/// Orphans and foreigners: a task of ours that no agent explains, and a second task of an agent
/// that runs, are marked on the first server-ping and stopped on the second; tasks of another
/// server (its tags, or its tags and `startedBy`) are never touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn orphans_are_stopped_on_the_second_ping_and_foreign_tasks_never() {
    let mut w = Scenario::new("orphan_sweep").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let mut cfg = w.host_config().cluster_profile("base", cluster_props("gocd-a", &[])).elastic_profile(
        "small",
        "base",
        elastic_props(),
    );
    cfg.ping_interval = Duration::from_secs(3600); // pings only when the test sends them
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    let job = host.add_job(JobSpec::new("small", Duration::from_secs(20))).await;
    host.wait_until("the job building", Duration::from_secs(60), |s| {
        matches!(s.job(job).state, JobState::Running { .. })
    })
    .await;
    let ours = moto::live_tasks(&base, "gocd-a").await;
    assert_eq!(ours.len(), 1);
    let agent_task = &ours[0];
    let agent_arn = agent_task.task_arn().unwrap().to_string();
    let started_by = agent_task.started_by().unwrap().to_string();
    let td = agent_task.task_definition_arn().unwrap().to_string();
    let tags: Vec<(String, String)> = agent_task
        .tags()
        .iter()
        .map(|t| (t.key().unwrap_or("").to_string(), t.value().unwrap_or("").to_string()))
        .collect();
    let tag = |k: &str| tags.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).unwrap();
    let ownership = vec![
        ("gocd:server-id".to_string(), tag("gocd:server-id")),
        ("gocd:cluster-profile".to_string(), tag("gocd:cluster-profile")),
    ];
    let unexplained = run_by_hand(&base, "gocd-a", &td, &started_by, &ownership).await;
    let second = run_by_hand(&base, "gocd-a", &td, &started_by, &tags).await;
    let mut other_server_tags = tags.clone();
    for t in &mut other_server_tags {
        if t.0 == "gocd:server-id" {
            t.1 = "gocd-another-server".into();
        }
    }
    let foreign_tags = run_by_hand(&base, "gocd-a", &td, &started_by, &other_server_tags).await;
    let foreign_all = run_by_hand(&base, "gocd-a", &td, "gocd-0123456789-0123456789ab", &other_server_tags).await;

    let live = |arns: &[&String]| {
        let arns: Vec<String> = arns.iter().map(|a| a.to_string()).collect();
        let base = base.clone();
        async move {
            let live: BTreeSet<String> = moto::live_tasks(&base, "gocd-a")
                .await
                .iter()
                .filter_map(|t| t.task_arn().map(str::to_string))
                .collect();
            arns.iter().map(|a| live.contains(a)).collect::<Vec<bool>>()
        }
    };
    let all = [&agent_arn, &unexplained, &second, &foreign_tags, &foreign_all];
    assert_eq!(host.server_ping().await.expect("ping 1").code, 200);
    assert_eq!(live(&all).await, vec![true; 5], "the first ping only marks");
    assert_eq!(host.server_ping().await.expect("ping 2").code, 200);
    assert_eq!(
        live(&all).await,
        vec![true, false, false, true, true],
        "the second ping stops the two orphans, and only them"
    );
    for _ in 0..2 {
        host.server_ping().await.expect("more pings");
    }
    assert_eq!(live(&all).await, vec![true, false, false, true, true], "foreign tasks stay");
    let reasons: Vec<String> = moto::all_tasks(&base, "gocd-a")
        .await
        .iter()
        .filter(|t| [&unexplained, &second].contains(&&t.task_arn().unwrap_or("").to_string()))
        .filter_map(|t| t.stopped_reason().map(str::to_string))
        .collect();
    assert_eq!(reasons.len(), 2);
    assert!(reasons.iter().all(|r| r.contains("orphan")), "{reasons:?}");
    let stops = stop_task_targets(&w.proxy);
    assert!(!stops.contains(&foreign_tags) && !stops.contains(&foreign_all), "StopTask on a foreign task: {stops:?}");
    host.wait_until("the orphans named in server health", Duration::from_secs(10), |s| {
        s.health_history.iter().filter(|m| m.message.contains("orphan")).count() >= 2
    })
    .await;

    // The agent's own task was never in doubt: its job finishes normally.
    assert!(matches!(host.job_state(job), JobState::Running { .. }));
    host.wait_until("the job completed", Duration::from_secs(60), |s| s.all_completed()).await;
    host.wait_until("its agent deleted", Duration::from_secs(30), |s| s.agents.is_empty()).await;
    assert!(host.rejections().is_empty());
    // The hand-made tasks carry the job's tags too; only the plugin's registered an agent.
    let registered = sim.with_state(|s| {
        s.tasks.values().filter(|t| t.registration.is_some()).map(|t| t.task_arn.clone()).collect::<Vec<_>>()
    });
    assert_eq!(registered, vec![agent_arn.clone()]);
    let ecs = aws_sdk_ecs::Client::new(&base);
    for arn in [&foreign_tags, &foreign_all] {
        ecs.stop_task().cluster("gocd-a").task(arn).send().await.expect("the test stops its foreign tasks");
    }
    let swept = stops.len();
    w.finish(host, sim, &format!("orphans_stopped=2 foreign_untouched=2 stop_task_calls={swept}")).await;
}

/// Unused task-definition revisions of ours: seven stale families registered before the plugin
/// starts; the first pass deregisters five (the per-pass bound), the next ping none (once an
/// hour); the family a running agent uses, another server's family and another cluster
/// profile's family stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unused_task_definitions_are_deregistered_five_a_pass() {
    let mut w = Scenario::new("task_definition_sweep").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let mut cfg = sweeping_at_once(w.host_config())
        .cluster_profile("base", cluster_props("gocd-a", &[]))
        .elastic_profile("small", "base", elastic_props());
    cfg.ping_interval = Duration::from_secs(3600);
    let host = GoCdHost::new(cfg);
    let key = cluster_key(moto::BASE_ACCOUNT, REGION, "gocd-a", None);
    let ecs = aws_sdk_ecs::Client::new(&base);
    let mine = [("gocd:server-id", host.server_id()), ("gocd:cluster-profile", key.as_str())];
    let mut stale = Vec::new();
    for i in 0..7 {
        stale.push(register_by_hand(&ecs, &format!("gocd-{key}-stale{i}"), &mine).await);
    }
    let foreign = register_by_hand(
        &ecs,
        &format!("gocd-{key}-foreign"),
        &[("gocd:server-id", "gocd-another-server"), ("gocd:cluster-profile", key.as_str())],
    )
    .await;
    let other_profile = register_by_hand(
        &ecs,
        "gocd-000000000000-other",
        &[("gocd:server-id", host.server_id()), ("gocd:cluster-profile", "000000000000")],
    )
    .await;
    host.spawn_plugin().await.expect("plugin started");
    host.load().await;
    host.start_loops();
    let sim = w.agents(&host, SimPolicy::default());
    let job = host.add_job(JobSpec::new("small", Duration::from_secs(12))).await;
    host.wait_until("the job building", Duration::from_secs(60), |s| {
        matches!(s.job(job).state, JobState::Running { .. })
    })
    .await;
    let in_use = moto::live_tasks(&base, "gocd-a").await[0].task_definition_arn().unwrap().to_string();

    let mark = w.proxy.mark();
    assert_eq!(host.server_ping().await.expect("ping").code, 200);
    let first = w.proxy.counts_since(mark);
    let active = active_task_definitions(&base).await;
    let stale_left = stale.iter().filter(|a| active.contains(*a)).count();
    assert_eq!(stale_left, 2, "five of seven stale revisions go in one pass: {first:?}");
    assert_eq!(first.get("ecs:DeregisterTaskDefinition"), Some(&5));
    for keep in [&in_use, &foreign, &other_profile] {
        assert!(active.contains(keep), "{keep} must stay registered");
    }
    let mark = w.proxy.mark();
    for _ in 0..2 {
        host.server_ping().await.expect("ping");
    }
    let later = w.proxy.counts_since(mark);
    assert_eq!(later.get("ecs:DeregisterTaskDefinition"), None, "one pass an hour: {later:?}");
    assert_eq!(later.get("ecs:ListTaskDefinitionFamilies"), None, "one pass an hour: {later:?}");
    assert_eq!(active_task_definitions(&base).await, active);

    host.wait_until("the job completed", Duration::from_secs(60), |s| s.all_completed()).await;
    assert_all_done(&host, &sim, Duration::from_secs(30)).await;
    w.finish(host, sim, &format!("stale=7 deregistered_first_pass=5 first_pass_calls={first:?}")).await;
}

/// The plugin sweeps unused task-definition revisions from its first ping (by default it waits
/// an hour after a start, until it has seen the elastic profiles in use).
fn sweeping_at_once(mut cfg: world::HostConfig) -> world::HostConfig {
    if let Some((_, args)) = cfg.program.as_mut() {
        args.extend(["--task-definition-sweep-after".to_string(), "0s".to_string()]);
    }
    cfg
}

/// Two teams' cluster profiles on ONE cluster, account and role (`MaxAgents` 2 and 3, their own
/// tags): each keeps its own limit during a burst of both (live tasks counted in moto by the
/// team's settings tag), and each team's tasks carry its own tags only.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_teams_on_one_cluster_keep_their_own_max_agents_and_tags() {
    let mut w = Scenario::new("two_teams_one_cluster").await;
    let base = w.base.clone();
    w.cluster("shared", &base, "gocd-a").await;
    let team = |max: &'static str, tag: &'static str, images: &'static str| {
        let limits =
            [("MaxAgents", max), ("AgentRegisterTimeoutMinutes", "1"), ("Tags", tag), ("AllowedImages", images)];
        cluster_props("gocd-a", &limits)
    };
    // Team a allows any gocd/ image, team b only the agent image the world uses.
    let other_image = props(&[("Image", "gocd/gocd-agent-ubuntu-22.04:v24.1.0"), ("Cpu", "512"), ("Memory", "1024")]);
    let cfg = w
        .host_config()
        .cluster_profile("team-a", team("2", "team=a", "gocd/*"))
        .cluster_profile("team-b", team("3", "team=b", IMAGE))
        .elastic_profile("on-a", "team-a", elastic_props())
        .elastic_profile("on-b", "team-b", elastic_props())
        .elastic_profile("ubuntu-on-a", "team-a", other_image.clone())
        .elastic_profile("ubuntu-on-b", "team-b", other_image);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    host.add_jobs(JobSpec::new("on-a", Duration::from_secs(6)), 6).await;
    host.add_jobs(JobSpec::new("on-b", Duration::from_secs(6)), 8).await;
    host.add_jobs(JobSpec::new("ubuntu-on-a", Duration::from_secs(2)), 1).await;
    let refused = host.add_job(JobSpec::new("ubuntu-on-b", Duration::from_secs(2))).await;
    host.wait_until("team b's allow-list refuses the ubuntu image", Duration::from_secs(60), |s| {
        s.console.iter().any(|c| c.job == Some(refused) && c.text.contains("AllowedImages"))
    })
    .await;
    host.cancel_job(refused);
    let fleet = w.fleets[0].clone();
    let mut peaks: std::collections::BTreeMap<String, usize> = Default::default();
    let deadline = std::time::Instant::now() + Duration::from_secs(150);
    let finished =
        |s: &HostState| s.count_jobs(|j| !matches!(j, JobState::Completed { .. } | JobState::Cancelled)) == 0;
    while !host.with_state(finished) {
        assert!(std::time::Instant::now() < deadline, "all jobs completed in time");
        let mut live: std::collections::BTreeMap<String, usize> = Default::default();
        for t in moto::live_tasks(&fleet.config, &fleet.cluster).await {
            let team = moto::task_tag(&t, "team").unwrap_or("none").to_string();
            *live.entry(team).or_default() += 1;
        }
        for (team, n) in live {
            let peak = peaks.entry(team).or_default();
            *peak = (*peak).max(n);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_all_done(&host, &sim, Duration::from_secs(120)).await;
    assert_eq!(peaks.get("a"), Some(&2), "team a at its own MaxAgents, never above: {peaks:?}");
    assert_eq!(peaks.get("b"), Some(&3), "team b at its own MaxAgents, never above: {peaks:?}");
    assert_eq!(peaks.get("none"), None, "every task carries its team's tag: {peaks:?}");
    let ubuntu = moto::all_tasks(&fleet.config, &fleet.cluster)
        .await
        .iter()
        .filter(|t| t.containers().iter().any(|c| c.image().is_some_and(|i| i.contains("ubuntu"))))
        .map(|t| moto::task_tag(t, "team").unwrap_or("none").to_string())
        .collect::<Vec<_>>();
    assert_eq!(ubuntu, ["a"], "the ubuntu image ran for team a only");
    w.finish(host, sim, &format!("teams=2 peaks={peaks:?}")).await;
}
