//! End-to-end scenarios of the plugin's Fargate support, each in its own world:
//! a fresh moto, a proxy in front of it (the plugin's `AWS_ENDPOINT_URL`), the real plugin driven
//! by the GoCD host simulator, and the agent simulator registering the agents of its tasks.
//!
//! Every scenario ends in [`Scenario::finish_fargate`]: no task of ours left RUNNING (checked with the
//! test's own SDK clients), no secret in what operators read, a clean plugin shutdown, and one
//! `FIGURES:` line on stderr (AWS calls by operation, per quiet server-ping, AssumeRole and
//! RegisterTaskDefinition counts, peak live tasks). `cargo test --test e2e fargate:: -- --nocapture`
//! shows them.
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`); without it the tests panic, never skip.

use crate::world;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::world::host::HostState;
use crate::world::moto;
use crate::world::profiles::{cluster_props, elastic_props};
use crate::world::proxy::{rules, Outcome};
use crate::world::*;

const ROLE_ARN: &str = "arn:aws:iam::111111111111:role/gocd-agents";
const DENIED_ROLE_ARN: &str = "arn:aws:iam::222222222222:role/gocd-forbidden";

/// What these tests do with a scenario, beside what the test world gives.
pub(crate) trait FargateScenario {
    /// The common end: no live task, quiet-ping figures, status reports and secret scan, clean
    /// shutdown, the `FIGURES:` line.
    async fn finish_fargate(self, host: GoCdHost, sim: AgentSimulator, extra: &str);
}

impl FargateScenario for Scenario {
    /// The common end: no live task, quiet-ping figures, status reports and secret scan, clean
    /// shutdown, the `FIGURES:` line.
    async fn finish_fargate(self, host: GoCdHost, sim: AgentSimulator, extra: &str) {
        self.assert_no_live_tasks(Duration::from_secs(60)).await;

        self.dump_calls();

        // AWS calls inside the timed pings of the run (approximate: other calls may overlap).
        let windows =
            host.with_state(|s| s.pings.iter().filter_map(|p| Some((p.started, p.finished?))).collect::<Vec<_>>());
        let log = self.proxy.log();
        let in_windows = log.iter().filter(|r| windows.iter().any(|(a, b)| r.at >= *a && r.at <= *b)).count();
        let busy_per_ping = in_windows as f64 / windows.len().max(1) as f64;

        // AWS calls per server-ping, measured on quiet pings with the timer paused.
        host.pause_pings(true);
        host.wait_until("the last timed ping to finish", Duration::from_secs(60), |s| {
            s.pings.iter().all(|p| p.finished.is_some())
        })
        .await;
        let mark = self.proxy.mark();
        const QUIET_PINGS: u64 = 3;
        for _ in 0..QUIET_PINGS {
            let r = host.server_ping().await.expect("server-ping answered");
            assert_eq!(r.code, 200, "server-ping answered {}: {}", r.code, r.body);
        }
        let per_ping = self.proxy.counts_since(mark);
        let per_ping_total: u64 = per_ping.values().sum();

        // Status reports: rendered for the secret scan (their content is other tests' business).
        let _ = host.plugin_status_report().await;
        let cluster_ids: Vec<String> = host.config().cluster_profiles.iter().map(|c| c.id.clone()).collect();
        for id in &cluster_ids {
            let _ = host.cluster_status_report(id).await;
        }
        let scanner = SecretScanner::from_world(&host, Some(&self.proxy));
        scanner.assert_host_clean(&host);

        let counts = self.proxy.counts();
        let count = |k: &str| counts.get(k).copied().unwrap_or(0);
        let jobs = host.with_state(|s| s.jobs.len());
        let per_ping_avg: BTreeMap<&String, f64> =
            per_ping.iter().map(|(k, v)| (k, *v as f64 / QUIET_PINGS as f64)).collect();
        eprintln!(
            "FIGURES: test={} secs={} jobs={} aws_calls={} pings={} calls_per_ping_during_run~{:.1} calls_per_quiet_ping={:.1} per_quiet_ping_by_op={:?} assume_role={} register_task_definition={} run_task={} stop_task={} max_live_tasks_seen={} max_live_tasks_proxy={} secrets_scanned={} {} all_calls={:?}",
            self.name,
            self.started.elapsed().as_secs(),
            jobs,
            self.proxy.total(),
            windows.len(),
            busy_per_ping,
            per_ping_total as f64 / QUIET_PINGS as f64,
            per_ping_avg,
            count("sts:AssumeRole"),
            count("ecs:RegisterTaskDefinition"),
            count("ecs:RunTask"),
            count("ecs:StopTask"),
            sim.max_live(),
            self.proxy.ecs_live_high_water(),
            scanner.len(),
            extra,
            counts,
        );
        drop(sim);
        host.shutdown().await;
        drop(self.moto);
    }
}

/// Every job completed, every agent deleted, no registration refused, no job with two tasks.
async fn assert_all_done(host: &GoCdHost, sim: &AgentSimulator) {
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    // The plugin deletes the agent while it handles job-completion, so the last answers may
    // still be on their way when the registry is already empty.
    host.wait_until("every job-completion answered", Duration::from_secs(30), |s| {
        s.jobs.iter().all(|j| j.completion_code.is_some())
    })
    .await;
    let (rejections, completions, ids) = host.with_state(|s: &HostState| {
        (
            s.rejections.clone(),
            s.jobs.iter().map(|j| (j.identifier.job_id, j.completion_code)).collect::<Vec<_>>(),
            s.jobs.iter().map(|j| j.identifier.job_id).collect::<Vec<_>>(),
        )
    });
    assert!(rejections.is_empty(), "GoCD refused registrations: {rejections:?}");
    for (id, code) in completions {
        assert_eq!(code, Some(200), "job-completion of job {id} answered {code:?}");
    }
    for id in ids {
        assert_eq!(sim.tasks_for_job(id), 1, "job {id} ran in {} tasks", sim.tasks_for_job(id));
    }
    let dups = sim.with_state(|s| s.duplicate_jobs());
    assert!(dups.is_empty(), "jobs with more than one task: {dups:?}");
}

/// (a) 20 jobs over two cluster profiles in two accounts (one through AssumeRole) all run and
/// finish, every task stopped, every agent deleted; the tasks carry the tags of `docs/protocol.md`, "What a task carries".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_jobs_over_two_accounts_run_and_clean_up() {
    let mut w = Scenario::new("twenty_jobs_two_accounts").await;
    let role = w.moto.assume_role_config(ROLE_ARN).await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    w.cluster("role", &role.config, "gocd-b").await;
    let cfg = w
        .host_config()
        .cluster_profile("base", cluster_props("gocd-a", &[("MaxAgents", "10")]))
        .cluster_profile("role", cluster_props("gocd-b", &[("MaxAgents", "10"), ("RoleArn", ROLE_ARN)]))
        .elastic_profile("small-a", "base", elastic_props())
        .elastic_profile("small-b", "role", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() });

    let mut jobs = Vec::new();
    for _ in 0..10 {
        jobs.push(host.add_job(JobSpec::new("small-a", Duration::from_secs(3))).await);
        jobs.push(host.add_job(JobSpec::new("small-b", Duration::from_secs(3)).in_environment("prod")).await);
    }
    host.wait_until("all 20 jobs completed", Duration::from_secs(240), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;

    // Where the tasks ran and what they carried.
    let server_id = host.server_id().to_string();
    let (tasks, by_job) = sim.with_state(|s| (s.tasks.values().cloned().collect::<Vec<_>>(), s.tasks_per_job.clone()));
    assert_eq!(tasks.len(), 20, "one task per job");
    for t in &tasks {
        let job =
            host.with_state(|s| s.jobs.iter().find(|j| Some(j.identifier.job_id.to_string()) == t.job_id).cloned());
        let job = job.unwrap_or_else(|| panic!("task {} has no known gocd:job-id tag: {:?}", t.task_arn, t.tags));
        let want_fleet = if job.spec.elastic_profile == "small-b" { 1 } else { 0 };
        assert_eq!(t.fleet, want_fleet, "job {} ran in the wrong account", job.identifier.job_id);
        assert_eq!(t.tags.get("gocd:server-id"), Some(&server_id), "tags {:?}", t.tags);
        assert!(t.tags.contains_key("gocd:cluster-profile"), "tags {:?}", t.tags);
        assert_eq!(t.tags.get("gocd:elastic-agent-id"), t.agent_id.as_ref(), "tags {:?}", t.tags);
        assert_eq!(t.tags.get("gocd:pipeline"), Some(&job.identifier.pipeline_name), "tags {:?}", t.tags);
        assert_eq!(t.tags.get("gocd:job"), Some(&job.identifier.job_name), "tags {:?}", t.tags);
        let started_by = t.started_by.clone().unwrap_or_default();
        assert!(!started_by.is_empty() && started_by.len() <= 36, "startedBy {started_by:?}");
        assert_eq!(
            t.server_url.as_deref(),
            Some("https://gocd.test/go"),
            "GO_EA_SERVER_URL defaults to secure_site_url"
        );
        assert_eq!(t.plugin_id.as_deref(), Some(world::host::PLUGIN_ID));
        let env = if want_fleet == 1 { Some("prod") } else { None };
        assert_eq!(t.environment.as_deref(), env, "GO_EA_AUTO_REGISTER_ENVIRONMENT only when the job has one");
        assert!(t.auto_register_key.as_deref().is_some_and(|k| job.keys.iter().any(|j| j == k)), "key of another job");
    }
    assert_eq!(by_job.len(), 20);

    // Each job's console says how long it waited for its agent, phase by phase.
    for h in &jobs {
        let console = host.console_log(*h);
        let ready: Vec<&String> = console.iter().filter(|l| l.contains(" ready in ")).collect();
        assert_eq!(ready.len(), 1, "one wait line per job: {console:?}");
        assert!(ready[0].contains("queued"), "the phases: {}", ready[0]);
    }
    eprintln!(
        "a wait line: {}",
        host.console_log(jobs[0]).iter().find(|l| l.contains(" ready in ")).cloned().unwrap_or_default()
    );

    // One AssumeRole for the role profile, with the default external id; task definitions reused.
    let assumes: Vec<_> = w.proxy.log().into_iter().filter(|r| r.key() == "sts:AssumeRole").collect();
    assert_eq!(assumes.len(), 1, "AssumeRole calls: {assumes:?}");
    assert_eq!(assumes[0].role_arn.as_deref(), Some(ROLE_ARN));
    assert_eq!(assumes[0].external_id.as_deref(), Some(format!("gocd:server-id:{server_id}").as_str()));
    assert_eq!(
        w.proxy.count("ecs:RegisterTaskDefinition"),
        2,
        "one task definition per (cluster profile, elastic profile)"
    );
    let role_calls = w.proxy.log().iter().filter(|r| r.assumed_account.as_deref() == Some("111111111111")).count();
    assert!(role_calls > 0, "no call acted in the role's account");
    w.finish_fargate(host, sim, &format!("role_account_calls={role_calls}")).await;
}

/// (b) create-agent re-sent 5 times for one waiting job starts one task.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn create_agent_resent_five_times_starts_one_task() {
    let mut w = Scenario::new("resent_create_agent").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let mut cfg = w.host_config().cluster_profile("base", cluster_props("gocd-a", &[])).elastic_profile(
        "small",
        "base",
        elastic_props(),
    );
    cfg.starvation_interval = Duration::from_secs(2);
    let host = GoCdHost::launch(cfg).await;
    let job = host.add_job(JobSpec::new("small", Duration::from_secs(2))).await;
    let job_id = host.job_identifier(job).job_id;
    let mut policy = SimPolicy::default();
    policy.hold.insert(job_id.to_string());
    let sim = w.agents(&host, policy);

    host.wait_until("create-agent answered 6 times (first + 5 re-sends)", Duration::from_secs(60), |s| {
        s.job(job).create_agent_answered >= 6
    })
    .await;
    assert_eq!(host.job_state(job), JobState::Waiting);
    assert_eq!(
        w.proxy.count("ecs:RunTask"),
        1,
        "re-sent create-agent must not start more tasks: {:?}",
        w.proxy.counts()
    );
    sim.wait_until("the one task seen", Duration::from_secs(10), |s| s.tasks_for_job(job_id) == 1).await;
    let keys = host.with_state(|s| s.job(job).keys.len());
    assert!(keys >= 6, "each create-agent carries a fresh key");

    sim.release(job_id);
    host.wait_until("the job completed", Duration::from_secs(60), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;
    assert_eq!(w.proxy.count("ecs:RunTask"), 1);
    let posted = host.with_state(|s| s.job(job).create_agent_posted);
    w.finish_fargate(host, sim, &format!("create_agent_posted={posted}")).await;
}

/// (c) a burst of 50 create-agent calls with `MaxAgents` 10 never has more than 10 live tasks,
/// and every job still gets served.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn burst_of_fifty_never_exceeds_max_agents() {
    let mut w = Scenario::new("burst_fifty_max_ten").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let mut cfg = w
        .host_config()
        .cluster_profile("base", cluster_props("gocd-a", &[("MaxAgents", "10")]))
        .elastic_profile("small", "base", elastic_props());
    cfg.create_agent_concurrency = 50;
    cfg.starvation_interval = Duration::from_secs(3);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(500), ..SimPolicy::default() });

    host.add_jobs(JobSpec::new("small", Duration::from_secs(2)), 50).await;
    host.wait_until("all 50 jobs completed", Duration::from_secs(360), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;
    assert!(sim.max_live() <= 10, "{} live tasks seen at once (MaxAgents 10)", sim.max_live());
    // The exact count (the sampled one above can miss short overlaps): RunTask answers minus
    // StopTask calls seen by the proxy. Above 10 means a task was started while another's
    // StopTask had not yet completed: a stopping task is still live and still counts.
    assert!(
        w.proxy.ecs_live_high_water() <= 10,
        "{} tasks were live at once by the proxy's count (RunTask answers minus completed StopTask calls); MaxAgents is 10",
        w.proxy.ecs_live_high_water()
    );
    assert_eq!(w.proxy.ecs_tasks_started(), 50);
    let posted: u32 = host.with_state(|s| s.jobs.iter().map(|j| j.create_agent_posted).sum());
    w.finish_fargate(host, sim, &format!("create_agent_posted={posted}")).await;
}

/// (d) kill -9 the plugin with 10 agents live, start a new one: all 10 jobs finish and clean up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn plugin_killed_with_ten_agents_live_and_restarted_finishes_every_job() {
    let mut w = Scenario::new("kill_and_restart").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let cfg = w.host_config().cluster_profile("base", cluster_props("gocd-a", &[("MaxAgents", "10")])).elastic_profile(
        "small",
        "base",
        elastic_props(),
    );
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    host.add_jobs(JobSpec::new("small", Duration::from_secs(25)), 10).await;
    host.wait_until("10 jobs building", Duration::from_secs(90), |s| {
        s.count_jobs(|j| matches!(j, JobState::Running { .. })) == 10
    })
    .await;
    host.kill().await;
    assert_eq!(moto::live_tasks(&base, "gocd-a").await.len(), 10, "a killed plugin leaves its tasks running");
    tokio::time::sleep(Duration::from_secs(1)).await;
    host.restart().await;

    host.wait_until("all 10 jobs completed after the restart", Duration::from_secs(150), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;
    assert_eq!(w.proxy.count("ecs:RunTask"), 10, "the new process must adopt, not relaunch");
    w.finish_fargate(host, sim, "plugin_processes=2").await;
}

/// One job on one Fargate profile (`gocd-a`), building on its agent.
struct Building {
    w: Scenario,
    host: GoCdHost,
    sim: AgentSimulator,
    ping: Duration,
    job_id: i64,
    agent_id: String,
}

/// Starts a world whose one job (of `secs`) is building.
async fn one_job_building(label: &'static str, secs: u64) -> Building {
    let mut w = Scenario::new(label).await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let cfg = w.host_config().cluster_profile("base", cluster_props("gocd-a", &[])).elastic_profile(
        "small",
        "base",
        elastic_props(),
    );
    let ping = cfg.ping_interval;
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    let job = host.add_job(JobSpec::new("small", Duration::from_secs(secs))).await;
    host.wait_until("the job building", Duration::from_secs(60), |s| {
        matches!(s.job(job).state, JobState::Running { .. })
    })
    .await;
    let JobState::Running { agent_id } = host.job_state(job) else { unreachable!() };
    let job_id = host.job_identifier(job).job_id;
    Building { w, host, sim, ping, job_id, agent_id }
}

/// (e) a task stopped by hand mid-job gets its agent deleted on the next ping, and a
/// server-health message or the job's console log names the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn task_stopped_by_hand_gets_its_agent_deleted_with_the_reason() {
    const REASON: &str = "Essential container in task exited (e2e-stopped-by-hand-4711)";
    let Building { w, host, sim, ping, job_id: first_job_id, agent_id } =
        one_job_building("task_stopped_by_hand", 20).await;
    sim.stop_task_by_hand(first_job_id, REASON).await;
    let stopped_at = Instant::now();

    host.wait_until("the agent of the stopped task deleted", ping * 3 + Duration::from_secs(10), |s| {
        s.deleted_agents.contains(&agent_id)
    })
    .await;
    let deleted_after = stopped_at.elapsed();
    host.wait_until("the stop reason named in server-health or the console log", Duration::from_secs(15), |s| {
        s.health_ever_mentions("e2e-stopped-by-hand-4711")
            || s.console.iter().any(|c| c.text.contains("e2e-stopped-by-hand-4711"))
    })
    .await;

    // GoCD reschedules the job; it runs again on a new agent and finishes.
    host.wait_until("the rescheduled job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;
    assert_eq!(sim.tasks_for_job(first_job_id), 1);
    w.finish_fargate(host, sim, &format!("agent_deleted_after_ms={}", deleted_after.as_millis())).await;
}

/// (e2) a task ECS has forgotten: an operator stops it through AWS while the plugin is not
/// looking (pings paused), and ECS forgets it before the plugin's next look (AWS keeps a stopped
/// task about an hour; 3 s here, `aws_rules/stopped_tasks.rs`). The next ping's DescribeTasks
/// answers MISSING; the agent is deleted, saying ECS no longer knows its task, and the job runs
/// again on a new agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_task_ecs_has_forgotten_gets_its_agent_deleted() {
    let Building { w, host, sim, ping, job_id, agent_id } = one_job_building("task_forgotten", 30).await;
    w.proxy.forget_stopped_tasks_after(Duration::from_secs(3));
    let job_id = job_id.to_string();
    let arn = sim
        .with_state(|s| s.tasks.values().find(|t| t.job_id.as_deref() == Some(&job_id)).map(|t| t.task_arn.clone()))
        .expect("the job's task");
    host.pause_pings(true);
    host.wait_until("the last ping to finish", Duration::from_secs(60), |s| {
        s.pings.iter().all(|p| p.finished.is_some())
    })
    .await;
    let operator = aws_sdk_ecs::Client::new(&moto::base_config_at(&w.proxy.endpoint()).await);
    operator
        .stop_task()
        .cluster("gocd-a")
        .task(&arn)
        .reason("stopped by an operator")
        .send()
        .await
        .unwrap_or_else(|e| panic!("StopTask: {}", moto::aws_error_text(&e)));
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mark = w.proxy.mark();
    host.pause_pings(false);

    host.wait_until("the agent of the forgotten task deleted", ping * 3 + Duration::from_secs(10), |s| {
        s.deleted_agents.contains(&agent_id)
    })
    .await;
    host.wait_until("ECS's forgetting named in server-health or the console log", Duration::from_secs(15), |s| {
        s.health_ever_mentions("ECS no longer knows this task")
            || s.console.iter().any(|c| c.text.contains("ECS no longer knows this task"))
    })
    .await;
    let described = w.proxy.counts_since(mark).get("ecs:DescribeTasks").copied().unwrap_or(0);
    assert!(described >= 1, "the plugin never described the task it had lost");
    host.wait_until("the rescheduled job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;
    w.finish_fargate(host, sim, "").await;
}

/// (f) a job whose agent never registers has its task stopped after `AgentRegisterTimeoutMinutes`
/// (1, the minimum): not before the minute, and soon after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn task_whose_agent_never_registers_is_stopped_after_the_timeout() {
    let mut w = Scenario::new("register_timeout").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let mut cfg = w
        .host_config()
        .cluster_profile("base", cluster_props("gocd-a", &[("AgentRegisterTimeoutMinutes", "1")]))
        .elastic_profile("small", "base", elastic_props());
    cfg.starvation_interval = Duration::from_secs(600); // no re-send during the test
    let host = GoCdHost::launch(cfg).await;
    let job = host.add_job(JobSpec::new("small", Duration::from_secs(2))).await;
    let asked_at = Instant::now();
    let job_id = host.job_identifier(job).job_id;
    let mut policy = SimPolicy::default();
    policy.never_register.insert(job_id.to_string());
    let sim = w.agents(&host, policy);

    sim.wait_until("the job's task seen", Duration::from_secs(30), |s| s.tasks_for_job(job_id) == 1).await;
    sim.wait_until("the unregistered task stopped", Duration::from_secs(150), |s| {
        s.tasks.values().any(|t| t.job_id.as_deref() == Some(&job_id.to_string()) && t.stopped)
    })
    .await;
    let stopped_after = asked_at.elapsed();
    assert!(stopped_after >= Duration::from_secs(58), "stopped after {stopped_after:?}, before the 1-minute timeout");
    assert!(stopped_after <= Duration::from_secs(100), "stopped only after {stopped_after:?}");
    let reason = sim.with_state(|s| s.tasks.values().find_map(|t| t.stopped_reason.clone()));
    assert_eq!(host.job_state(job), JobState::Waiting);
    assert!(host.registry().is_empty());
    assert_eq!(sim.tasks_for_job(job_id), 1);
    host.cancel_job(job);
    w.finish_fargate(host, sim, &format!("stopped_after_s={} stop_reason={reason:?}", stopped_after.as_secs())).await;
}

/// (g) a `FARGATE_SPOT` launch refused for capacity (the proxy answers as AWS does) lands on FARGATE.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fargate_spot_refused_for_capacity_lands_on_fargate() {
    let mut w = Scenario::new("spot_falls_back").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    w.proxy.add_rule("spot-capacity", rules::fargate_spot_capacity_refused());
    let cfg = w
        .host_config()
        .cluster_profile("base", cluster_props("gocd-a", &[("LaunchType", "FARGATE_SPOT")]))
        .elastic_profile("small", "base", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    host.add_jobs(JobSpec::new("small", Duration::from_secs(2)), 2).await;
    host.wait_until("both jobs completed", Duration::from_secs(90), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;

    let log = w.proxy.log();
    let refused = log.iter().filter(|r| r.key() == "ecs:RunTask" && r.outcome == Outcome::Answered).count();
    let launched = log.iter().filter(|r| r.key() == "ecs:RunTask" && r.outcome == Outcome::Forwarded).count();
    assert!(refused >= 1, "the plugin never asked for FARGATE_SPOT");
    assert_eq!(launched, 2, "one FARGATE launch per job");
    for t in sim.with_state(|s| s.tasks.values().cloned().collect::<Vec<_>>()) {
        let on_fargate = t.capacity_provider.as_deref() == Some("FARGATE")
            || (t.capacity_provider.is_none() && t.launch_type.as_deref() == Some("FARGATE"));
        assert!(on_fargate, "task {} ran on {:?}/{:?}", t.task_arn, t.capacity_provider, t.launch_type);
    }
    w.finish_fargate(host, sim, &format!("spot_refused={refused}")).await;
}

/// (h) a profile whose role cannot be assumed fails alone: a server-health error names it, its
/// job waits, and another account's jobs are served without delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_role_that_cannot_be_assumed_fails_alone() {
    let mut w = Scenario::new("denied_role_isolated").await;
    let base = w.base.clone();
    let denied = w.moto.assume_role_config(DENIED_ROLE_ARN).await; // the test itself may; the plugin may not
    w.cluster("base", &base, "gocd-a").await;
    w.cluster("denied", &denied.config, "gocd-x").await;
    w.proxy.add_rule("deny", rules::deny_assume_role(DENIED_ROLE_ARN));
    let cfg = w
        .host_config()
        .cluster_profile("good", cluster_props("gocd-a", &[]))
        .cluster_profile("denied", cluster_props("gocd-x", &[("RoleArn", DENIED_ROLE_ARN)]))
        .elastic_profile("small-good", "good", elastic_props())
        .elastic_profile("small-denied", "denied", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    let stuck = host.add_job(JobSpec::new("small-denied", Duration::from_secs(2))).await;
    let good = host.add_jobs(JobSpec::new("small-good", Duration::from_secs(2)), 4).await;
    host.wait_until("the good account's jobs completed", Duration::from_secs(90), |s| {
        good.iter().all(|h| matches!(s.job(*h).state, JobState::Completed { .. }))
    })
    .await;
    let slowest =
        host.with_state(|s| good.iter().map(|h| s.job(*h).completed_at.unwrap() - s.job(*h).added_at).max().unwrap());
    assert!(slowest <= Duration::from_secs(30), "a good job took {slowest:?}: the denied role delays the others");

    host.wait_until("a server-health error naming the denied profile", Duration::from_secs(30), |s| {
        s.health_history
            .iter()
            .any(|m| m.kind == "error" && (m.message.contains(DENIED_ROLE_ARN) || m.message.contains("gocd-x")))
    })
    .await;
    assert_eq!(host.job_state(stuck), JobState::Waiting);
    assert!(moto::all_tasks(&denied.config, "gocd-x").await.is_empty(), "nothing may start in the denied account");
    host.cancel_job(stuck);
    let good_ids: Vec<i64> = good.iter().map(|h| host.job_identifier(*h).job_id).collect();
    for id in good_ids {
        assert_eq!(sim.tasks_for_job(id), 1);
    }
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    let denied_calls = w.proxy.log().iter().filter(|r| r.outcome == Outcome::Answered).count();
    w.finish_fargate(
        host,
        sim,
        &format!("assume_role_denied={denied_calls} slowest_good_job_ms={}", slowest.as_millis()),
    )
    .await;
}

/// (i) an assumed role's session is renewed before it expires. The proxy makes sessions last
/// 20 s instead of AWS's hour and refuses calls signed by an expired one (`ExpiredTokenException`,
/// `tests/world/aws_rules/sessions.rs`); jobs arriving for 50 s all run with nothing refused, the
/// plugin moves on to a new session as each runs out, and asks STS once per session, not per call
/// (the SDK renews 5-10 s before expiry, so a session serves at least 10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_assumed_role_session_is_renewed_before_it_expires() {
    const SESSION: Duration = Duration::from_secs(20);
    let mut w = Scenario::new("session_renewed").await;
    let role = w.moto.assume_role_config(ROLE_ARN).await;
    w.cluster("role", &role.config, "gocd-b").await;
    w.proxy.shorten_sessions(SESSION);
    let cfg = w
        .host_config()
        .cluster_profile("role", cluster_props("gocd-b", &[("RoleArn", ROLE_ARN)]))
        .elastic_profile("small", "role", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    let started = Instant::now();
    let mut jobs = 0;
    while started.elapsed() < Duration::from_secs(50) {
        host.add_job(JobSpec::new("small", Duration::from_secs(3))).await;
        jobs += 1;
        tokio::time::sleep(Duration::from_secs(7)).await;
    }
    host.wait_until("every job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    let elapsed = started.elapsed();
    assert_all_done(&host, &sim).await;

    let expired: Vec<_> =
        w.proxy.aws_refusals().into_iter().filter(|r| r.rule == world::aws_rules::STS_SESSION_EXPIRY).collect();
    assert!(expired.is_empty(), "calls signed by an expired session: {expired:#?}");
    let log = w.proxy.log();
    let assumes = log.iter().filter(|r| r.key() == "sts:AssumeRole").count();
    let sessions: std::collections::HashSet<&str> = log
        .iter()
        .filter(|r| r.assumed_account.as_deref() == Some("111111111111"))
        .filter_map(|r| r.access_key_id.as_deref())
        .collect();
    let lifetimes = (elapsed.as_secs_f64() / SESSION.as_secs_f64()).floor() as usize;
    assert!(
        sessions.len() >= lifetimes,
        "{} sessions signed calls over {elapsed:?} of {SESSION:?} sessions: one was used past its expiry",
        sessions.len()
    );
    let most = (elapsed.as_secs_f64() / 10.0).ceil() as usize + 1;
    assert!(assumes <= most, "{assumes} AssumeRole calls over {elapsed:?}: more than one per session ({most})");
    w.finish_fargate(host, sim, &format!("jobs={jobs} assume_role_calls={assumes} sessions_used={}", sessions.len()))
        .await;
}
