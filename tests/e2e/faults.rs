//! Reliability under AWS faults: the fault proxy between the plugin and
//! moto injects throttling in AWS's wire formats, 500/503 answers, added latency and dropped
//! connections (some after moto acted, so the answer is lost); the GoCD side is not faulty.
//!
//! - 100 jobs with 30% throttling, 5% 5xx and 2% dropped connections on every call: each job gets
//!   exactly one agent and finishes, GoCD never refuses a registration, no task is left running.
//! - Every call faulted for a minute, then none: the plugin recovers by itself and serves the jobs
//!   that waited; the recovery time (faults off → every waiting job running) is measured.
//! - Static keys in the cluster profile and failing paths (a subnet that does not exist, a role
//!   that cannot be assumed, STS errors): no key, secret or token reaches what operators read.
//!
//! Each test ends in `Scenario::finish` (no task left, secret scan, `FIGURES:` line; see
//! `tests/e2e/reliability.rs`). `FAULT_SEED=<n>` replays a run's fault decisions.
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`); without it the tests panic, never skip.

use crate::world;
use std::time::{Duration, Instant};

use crate::reliability::*;
use crate::world::proxy::faults::{FaultRates, Faults};
use crate::world::proxy::rules;
use crate::world::*;

/// 100 jobs, every AWS call of the plugin at 30% throttling, 5% 5xx, 2% dropped connections
/// (half after moto acted) and 5% with up to 200 ms latency: one agent per job, all finish,
/// nothing leaks, and the plugin's own counters agree with the throttling the proxy injected.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hundred_jobs_under_throttling_5xx_and_dropped_connections() {
    let mut w = Scenario::new("hundred_jobs_under_faults").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let seed = seed("FAULT_SEED", 0x5eed_0005);
    let faults = Faults::new(seed, FaultRates::new(0.30, 0.05, 0.02).with_latency(0.05, Duration::from_millis(200)));
    // Whatever the seed: the answers of three RunTasks are lost after moto started their tasks.
    let lost = std::sync::atomic::AtomicU32::new(0);
    w.proxy.add_rule("lose-run-task-answers", move |call| {
        let nth = call.is("ecs", "RunTask").then(|| lost.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
        match nth {
            Some(3 | 10 | 20) => Verdict::DropAnswer,
            _ => Verdict::Forward,
        }
    });
    w.proxy.add_rule("faults", faults.rule());
    let mut cfg = w
        .host_config()
        .cluster_profile("base", cluster_props("gocd-a", &[("MaxAgents", "50")]))
        .elastic_profile("small", "base", elastic_props());
    cfg.starvation_interval = Duration::from_secs(3);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(200), ..SimPolicy::default() });

    let t0 = Instant::now();
    host.add_jobs(JobSpec::new("small", Duration::from_secs(2)), 100).await;
    host.wait_until("all 100 jobs completed under faults", Duration::from_secs(300), |s| s.all_completed()).await;
    let all_done = t0.elapsed();
    let failed_completions = assert_all_done(&host, &sim, Duration::from_secs(90)).await;
    assert_eq!(host.with_state(|s| s.jobs.len()), 100);
    let rescheduled: usize = host.with_state(|s| s.jobs.iter().map(|j| j.previous_job_ids.len()).sum());

    // Settle with the faults still on: the pings clean up whatever job-completion left behind.
    w.assert_no_live_tasks(Duration::from_secs(120)).await;
    faults.set(FaultRates::NONE);
    // A throttle the proxy answered just before the switch may still be on its way to the
    // plugin: let it land before both sides are counted.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let injected = faults.counts();
    let plugin = w.plugin_calls_by_category().await;
    let plugin_throttled: u64 = plugin.values().map(|c| c[1]).sum();
    let plugin_retries: u64 = plugin.values().map(|c| c[2]).sum();
    assert!(injected.throttled > 100, "the proxy throttled only {} calls", injected.throttled);
    assert!(
        injected.throttled * 5 >= injected.calls && injected.server_errors > 0,
        "faults at the rates asked: {injected:?}"
    );
    let lost_answers = w
        .proxy
        .log()
        .iter()
        .filter(|r| r.key() == "ecs:RunTask" && r.outcome == world::proxy::Outcome::DroppedAfterForward)
        .count();
    assert!(lost_answers >= 3, "RunTask answers lost: {lost_answers}");
    assert!(
        host.stderr_text().contains("RunTask's answer was lost, but the task started"),
        "the plugin found the tasks of the lost answers"
    );
    // AssumeRole is not one of the plugin's counted calls, and none happens here: every throttle
    // the proxy answered was seen (and counted) by the plugin.
    assert_eq!(
        plugin_throttled, injected.throttled,
        "the plugin counted {plugin_throttled} throttled attempts; the proxy throttled {}",
        injected.throttled
    );
    assert!(plugin_retries >= injected.faulted() * 9 / 10, "retries {plugin_retries} for {injected:?}");
    let max_live = sim.max_live();
    w.finish(
        host,
        sim,
        &format!(
            "seed={seed} jobs=100 lost_run_task_answers={lost_answers} all_completed_after_s={} rescheduled={rescheduled} failed_job_completions={failed_completions} duplicates=0 leaks=0 max_live_tasks={max_live} injected={injected:?}",
            all_done.as_secs()
        ),
    )
    .await;
}

/// Every AWS call faulted for a minute (throttling, 5xx, dropped connections, some after moto
/// acted), then none: jobs that were running finish and are cleaned up, jobs that arrived during
/// the outage start once it ends, without duplicates or leaks; the recovery time is measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_minute_of_total_outage_then_recovery() {
    const OUTAGE: Duration = Duration::from_secs(60);
    let mut w = Scenario::new("total_outage_then_recovery").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let seed = seed("FAULT_SEED", 0x0_07a6e);
    let faults = Faults::new(seed, FaultRates::NONE);
    w.proxy.add_rule("faults", faults.rule());
    let mut cfg = w
        .host_config()
        .cluster_profile("base", cluster_props("gocd-a", &[("MaxAgents", "50")]))
        .elastic_profile("small", "base", elastic_props());
    cfg.starvation_interval = Duration::from_secs(3);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    // Ten jobs building when the outage starts; they finish during it.
    host.add_jobs(JobSpec::new("small", Duration::from_secs(15)), 10).await;
    host.wait_until("10 jobs building", Duration::from_secs(60), |s| job_states(s).1 == 10).await;
    let before = faults.counts();
    faults.set(FaultRates::all(0.6));
    let outage_started = Instant::now();
    let during = host.add_jobs(JobSpec::new("small", Duration::from_secs(3)), 20).await;
    tokio::time::sleep(OUTAGE.saturating_sub(outage_started.elapsed())).await;
    let (waiting, running, _) = host.with_state(job_states);
    let injected = faults.counts().since(&before);
    assert_eq!(injected.calls, injected.faulted(), "every call in the outage failed");
    // Only tasks whose RunTask reached moto before the answer was lost can run now.
    assert!(waiting >= 10, "most jobs wait while every AWS call fails ({waiting} waiting, {running} running)");

    faults.set(FaultRates::NONE);
    let off = Instant::now();
    host.wait_until("every job of the outage running or done", Duration::from_secs(90), |s| {
        during.iter().all(|h| !matches!(s.job(*h).state, JobState::Waiting))
    })
    .await;
    let recovery = off.elapsed();
    host.wait_until("all jobs completed", Duration::from_secs(90), |s| s.all_completed()).await;
    let failed_completions = assert_all_done(&host, &sim, Duration::from_secs(90)).await;
    assert!(
        recovery <= Duration::from_secs(30),
        "the plugin took {recovery:?} after AWS came back to start the waiting jobs"
    );
    w.finish(
        host,
        sim,
        &format!(
            "seed={seed} outage_s={} recovery_ms={} waiting_at_end_of_outage={waiting} failed_job_completions={failed_completions} injected_in_outage={injected:?}",
            OUTAGE.as_secs(),
            recovery.as_millis()
        ),
    )
    .await;
}

/// A RunTask whose answer is lost after moto started the task, and the plugin cannot look for the
/// task either (every ListTasks throttled for 10 s): the agent keeps its slot and its job until a
/// refresh finds the task; the job runs on that task, and re-sent create-agents start no second.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_run_task_answer_that_cannot_be_checked_never_doubles_the_job() {
    let mut w = Scenario::new("lost_answer_unknown_outcome").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let lost_at: std::sync::Arc<std::sync::Mutex<Option<Instant>>> = Default::default();
    let l = lost_at.clone();
    w.proxy.add_rule("lose-first-run-task", move |call| {
        let mut lost = l.lock().unwrap();
        match (call.is("ecs", "RunTask"), *lost) {
            (true, None) => {
                *lost = Some(Instant::now());
                Verdict::DropAnswer
            }
            (false, Some(t)) if call.is("ecs", "ListTasks") && t.elapsed() < Duration::from_secs(10) => {
                world::proxy::faults::throttle("ecs")
            }
            _ => Verdict::Forward,
        }
    });
    let mut cfg = w.host_config().cluster_profile("base", cluster_props("gocd-a", &[])).elastic_profile(
        "small",
        "base",
        elastic_props(),
    );
    cfg.starvation_interval = Duration::from_secs(2);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    let job = host.add_job(JobSpec::new("small", Duration::from_secs(20))).await;
    host.wait_until("the job completed", Duration::from_secs(90), |s| s.all_completed()).await;
    assert_all_done(&host, &sim, Duration::from_secs(60)).await;
    let job_id = host.job_identifier(job).job_id;
    assert_eq!(sim.tasks_for_job(job_id), 1);
    assert!(host.stderr_text().contains("its outcome is unknown"), "the plugin could not look for the task");
    let (posted, run_tasks) = (host.with_state(|s| s.job(job).create_agent_posted), w.proxy.count("ecs:RunTask"));
    assert_eq!(run_tasks, 1, "one RunTask, whose answer was lost; no second one");
    w.finish(host, sim, &format!("create_agent_posted={posted} tasks_for_the_job=1")).await;
}

const STATIC_KEY_ID: &str = "AKIASTATICE2E5R7T9W1";
const STATIC_SECRET: &str = "sTaTiC/e2eSecret+Key0a1b2c3d4e5f6a7b8c9d0e1f";
const ROLE_ARN: &str = "arn:aws:iam::111111111111:role/gocd-agents";
const DENIED_ROLE_ARN: &str = "arn:aws:iam::222222222222:role/gocd-forbidden";

/// Static keys in cluster profiles, and the paths where things fail: a subnet that does not
/// exist (the launch fails), a role that cannot be assumed, STS answering errors, bad profiles
/// sent for validation. Every log line, status report, error answer, health message and console
/// line is scanned: no access key, secret key, session token or auto-register key may appear.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn static_keys_and_failing_paths_leak_no_secret() {
    let mut w = Scenario::new("static_keys_error_paths").await;
    let base = w.base.clone();
    let role = w.moto.assume_role_config(ROLE_ARN).await;
    w.cluster("base", &base, "gocd-a").await;
    w.cluster("role", &role.config, "gocd-r").await;
    w.cluster("subnet", &base, "gocd-s").await;
    w.proxy.add_rule("deny", rules::deny_assume_role(DENIED_ROLE_ARN));
    // The first AssumeRole is throttled, the second answered 500, in STS's formats (the SDK's
    // credential provider retries both).
    let assumes = std::sync::atomic::AtomicU32::new(0);
    w.proxy.add_rule("sts-faults", move |call| {
        if !call.is("sts", "AssumeRole") {
            return Verdict::Forward;
        }
        match assumes.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => world::proxy::faults::throttle("sts"),
            1 => world::proxy::faults::server_error("sts", false),
            _ => Verdict::Forward,
        }
    });
    let keys = [("AccessKeyId", STATIC_KEY_ID), ("SecretAccessKey", STATIC_SECRET)];
    let with_keys = |cluster: &str, extra: &[(&str, &str)]| {
        let mut e: Vec<(&str, &str)> = keys.to_vec();
        e.extend_from_slice(extra);
        cluster_props(cluster, &e)
    };
    let cfg = w
        .host_config()
        .cluster_profile("good", with_keys("gocd-a", &[]))
        .cluster_profile(
            "bad-subnet",
            with_keys("gocd-s", &[("SubnetIds", "subnet-0deadbeef0000000"), ("Tags", "team=bad-subnet")]),
        )
        .cluster_profile("role", with_keys("gocd-r", &[("RoleArn", ROLE_ARN)]))
        .cluster_profile("denied", with_keys("gocd-x", &[("RoleArn", DENIED_ROLE_ARN)]))
        .elastic_profile("good", "good", elastic_props())
        .elastic_profile("bad-subnet", "bad-subnet", elastic_props())
        .elastic_profile("role", "role", elastic_props())
        .elastic_profile("denied", "denied", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    let good = host.add_jobs(JobSpec::new("good", Duration::from_secs(2)), 3).await;
    let via_role = host.add_jobs(JobSpec::new("role", Duration::from_secs(2)), 2).await;
    let bad = host.add_job(JobSpec::new("bad-subnet", Duration::from_secs(2))).await;
    let denied = host.add_job(JobSpec::new("denied", Duration::from_secs(2))).await;
    host.wait_until("the good and role jobs completed", Duration::from_secs(120), |s| {
        good.iter().chain(&via_role).all(|h| matches!(s.job(*h).state, JobState::Completed { .. }))
    })
    .await;
    host.wait_until("both failing jobs refused at least twice", Duration::from_secs(60), |s| {
        s.job(bad).create_agent_failed >= 2 && s.job(denied).create_agent_failed >= 2
    })
    .await;
    let errors = host.with_state(|s| s.error_responses.iter().map(|e| e.body.to_string()).collect::<Vec<_>>());
    assert!(
        errors.iter().any(|e| e.contains("subnet-0deadbeef0000000")),
        "the bad subnet is named in an error: {errors:?}"
    );
    host.wait_until("a health error for the denied role", Duration::from_secs(30), |s| {
        s.health_history.iter().any(|m| m.message.contains(DENIED_ROLE_ARN) || m.message.contains("gocd-x"))
    })
    .await;

    // Error answers that quote profiles: validation of bad combinations with the secret in them.
    for body in [
        serde_json::json!({"ClusterName": "gocd-a", "SecretAccessKey": STATIC_SECRET}),
        serde_json::json!({"ClusterName": "gocd-a", "AccessKeyId": STATIC_KEY_ID}),
        serde_json::json!({"ClusterName": "gocd-a", "AccessKeyId": STATIC_KEY_ID, "SecretAccessKey": STATIC_SECRET, "Region": "mars-north-1", "MaxAgents": "lots"}),
        serde_json::json!({"ClusterName": "gocd-a", "AccessKeyId": 42, "SecretAccessKey": [STATIC_SECRET]}),
    ] {
        let r = host.request("validate-cluster-profile", body).await.expect("validate answered");
        let text = r.body.to_string();
        assert!(!text.contains(STATIC_SECRET) && !text.contains(STATIC_KEY_ID), "validation echoes a secret: {text}");
    }
    // A create-agent and status reports naming the broken profiles: the answers are errors or views.
    for id in ["bad-subnet", "denied", "role", "good"] {
        let _ = host.cluster_status_report(id).await;
        let _ = host.agent_status_report(id, Some("ea-000000000000-1-nope"), Some(bad)).await;
    }
    host.cancel_job(bad);
    host.cancel_job(denied);
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    let dups = sim.with_state(|s| s.duplicate_jobs());
    assert!(dups.is_empty(), "{dups:?}");
    let scanner_size = SecretScanner::from_world(&host, Some(&w.proxy)).len();
    assert!(
        scanner_size >= 2 + 2 + 5,
        "the scan looks for the static keys, the role's keys and every auto-register key"
    );
    let stderr = host.stderr_text();
    assert!(!stderr.contains(STATIC_SECRET) && !stderr.contains(STATIC_KEY_ID));
    let assume_calls = w.proxy.count("sts:AssumeRole");
    assert!(assume_calls >= 3, "AssumeRole was retried after STS's errors: {assume_calls} calls");
    w.finish(host, sim, &format!("secrets_looked_for={scanner_size} assume_role_calls={assume_calls}")).await;
}
