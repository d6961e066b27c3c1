//! Warm agents, end to end on moto behind the strict proxy, with a simulated cold
//! start (agents register 4 s after their task appears) and the world's GoCD refusing any
//! registration whose key was used or is older than its validity:
//!
//! - with `WarmAgents` 2, once create-agent requests brought unused keys, two idle agents are
//!   kept; a job takes one without waiting for a cold start, and a replacement starts on an
//!   unused key (that job's, or an older one held); no agent ever registers with a used or
//!   expired key; `WarmAgents` taken out of the profile retires the pool;
//! - outside the `WarmSchedule` window, no agent is kept;
//! - with `WarmLaunchType` FARGATE_SPOT on a FARGATE cluster profile, warm agents start through
//!   the FARGATE_SPOT provider on unused young keys, a job one takes runs there and its cost line
//!   prices it at Fargate Spot; Spot taking back an idle one only starts a replacement (no job
//!   hears of it); Spot interrupting one mid-job reruns the job on FARGATE, its console saying
//!   why.
//!
//! Needs `MOTO_SERVER`; never skips.

use std::time::Duration;

use crate::scenario_ext::*;
use crate::world::eventbridge::{self, EventBridge};
use crate::world::host::{JobHandle, JobState, Props};
use crate::world::profiles::{cluster_props, elastic_props};
use crate::world::*;

/// How long a cold start takes in this world.
const COLD_START: Duration = Duration::from_secs(4);

fn warm(extra: &[(&str, &str)]) -> Props {
    let mut p = elastic_props();
    p.extend(crate::world::host::props(extra));
    p
}

/// Adds a job and waits until it completed and its job-completion was answered; returns it
/// and its wait from scheduled to assigned (within a minute: an EC2 instance's launch included).
pub(crate) async fn run_one(host: &GoCdHost, profile: &str) -> (JobHandle, Duration) {
    let h = host.add_job(JobSpec::new(profile, Duration::from_millis(500))).await;
    host.wait_until("the job completed and job-completion answered", Duration::from_secs(60), |s| {
        matches!(s.job(h).state, JobState::Completed { .. }) && s.job(h).completion_code.is_some()
    })
    .await;
    let wait = host.with_state(|s| s.job(h).started_at.expect("assigned") - s.job(h).added_at);
    (h, wait)
}

/// Whether the agent that ran job `h` had its task before the job was scheduled.
pub(crate) fn started_before(host: &GoCdHost, sim: &AgentSimulator, h: JobHandle) -> bool {
    let (taker, added) = (agent_of(host, h), host.with_state(|s| s.job(h).added_at));
    sim.with_state(|s| s.tasks.values().any(|t| t.agent_id.as_deref() == Some(taker.as_str()) && t.first_seen < added))
}

fn agent_of(host: &GoCdHost, h: JobHandle) -> String {
    host.with_state(|s| match &s.job(h).state {
        JobState::Completed { agent_id } => agent_id.clone(),
        other => panic!("job not completed: {other:?}"),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_warm_agents_are_kept_and_a_job_takes_one_without_a_cold_start() {
    let mut w = Scenario::new("warm_two").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let cfg = w.host_config().cluster_profile("p", cluster_props("gocd-a", &[])).elastic_profile(
        "warm",
        "p",
        warm(&[("WarmAgents", "2")]),
    );
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: COLD_START, ..SimPolicy::default() });

    // The first job starts cold; its agent is kept. The second takes it: no task of its own,
    // and its unused key starts a warm agent.
    let (_, first_wait) = run_one(&host, "warm").await;
    assert!(first_wait >= COLD_START, "the first job starts cold: {first_wait:?}");
    let (second, _) = run_one(&host, "warm").await;
    // The kept agent, or (under load, GoCD re-sending the first job's create-agent) a warm agent
    // started on that re-sent key: either was there before the second job.
    assert!(started_before(&host, &sim, second), "a kept or warm agent took the second job");
    host.wait_until("two idle agents kept", Duration::from_secs(60), |s| {
        s.agents.len() == 2 && s.agents.iter().all(|a| a.agent_state == "Idle")
    })
    .await;
    // Settled: the surplus (warm agents on keys of GoCD's re-sent create-agents) retired, so the
    // plugin's pool holds exactly these two and the third job's key is needed.
    sim.wait_until("two live tasks, both registered", Duration::from_secs(60), |s| {
        let live: Vec<_> = s.tasks.values().filter(|t| !t.stopped).collect();
        live.len() == 2 && live.iter().all(|t| matches!(t.registration, Some(Ok(()))))
    })
    .await;
    // The first job's task, and warm agents on the keys of the second job and of GoCD's
    // re-sent create-agents for the first (a surplus one retires).
    let run_tasks = w.proxy.count("ecs:RunTask");
    assert!((2..=4).contains(&run_tasks), "RunTask calls: {run_tasks}");

    // The third job finds a warm agent: it waits for GoCD's poll, not a cold start, and its key
    // starts the replacement.
    let (third, third_wait) = run_one(&host, "warm").await;
    // Its agent's task was there before the job: a kept agent, or a warm one (idle, or still
    // starting on an earlier key; the pool may have retired one beyond its two meanwhile).
    assert!(started_before(&host, &sim, third), "a kept or warm agent took it, not one started for it");
    assert!(third_wait < COLD_START + Duration::from_secs(1), "no cold start in its path: {third_wait:?}");
    // The replacement runs on the oldest unused key held: the third job's, or an older one of a
    // re-sent create-agent (the oldest goes first, it expires first).
    let added = host.with_state(|s| s.job(third).added_at);
    let keys: Vec<String> = host.with_state(|s| s.jobs.iter().flat_map(|j| j.keys.clone()).collect());
    sim.wait_until("a replacement started after the third job, on a job's key", Duration::from_secs(30), |s| {
        s.tasks.values().any(|t| t.first_seen > added && t.auto_register_key.as_ref().is_some_and(|k| keys.contains(k)))
    })
    .await;
    assert_eq!(w.proxy.count("ecs:RunTask"), run_tasks + 1, "one more task: the replacement");
    host.wait_until("the pool back at two idle agents", Duration::from_secs(60), |s| {
        s.agents.iter().filter(|a| a.agent_state == "Idle").count() == 2
    })
    .await;
    let report = host.cluster_status_report("p").await.expect("answered");
    let page = report.body["view"].as_str().unwrap_or_default().to_string();
    if let Some(dir) = std::env::var_os("STATUS_REPORTS_DIR") {
        let html = format!("<!doctype html><html><head><meta charset=\"utf-8\"></head><body style=\"margin:0\"><div style=\"padding:20px 28px\">{page}</div></body></html>\n");
        std::fs::write(std::path::Path::new(&dir).join("cluster-warm.html"), html).expect("write the page");
    }
    let pool_line = page.split("Warm pools").nth(1).and_then(|r| r.split("</td>").next()).unwrap_or_default();
    assert!(pool_line.contains("aiming at 2 (WarmAgents 2)"), "the pool: {pool_line}");
    let console = host.console_log(third).join("\n");
    assert!(
        console.contains("kept after its previous job, no new task") || console.contains("reuses agent"),
        "{console}"
    );

    // WarmAgents taken out: the next job's request carries it, and the pool retires.
    host.edit_elastic_profile("warm", elastic_props());
    run_one(&host, "warm").await;
    host.wait_until("every agent retired", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    let rejections = host.rejections();
    assert!(rejections.is_empty(), "no agent registered with a used or expired key: {rejections:?}");
    let figures = format!(
        "first_wait_ms={} third_wait_ms={} run_task={}",
        first_wait.as_millis(),
        third_wait.as_millis(),
        w.proxy.count("ecs:RunTask")
    );
    w.finish(host, sim, &figures).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn outside_the_warm_schedule_no_agent_is_kept() {
    let mut w = Scenario::new("warm_closed").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let closed = format!("{} 00:00-00:01 UTC", weekday_in_two_days());
    let cfg = w.host_config().cluster_profile("p", cluster_props("gocd-a", &[])).elastic_profile(
        "warm",
        "p",
        warm(&[("WarmAgents", "2"), ("WarmSchedule", &closed)]),
    );
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(500), ..SimPolicy::default() });
    run_one(&host, "warm").await;
    run_one(&host, "warm").await;
    host.wait_until("no agent kept", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    assert!(host.rejections().is_empty());
    let figures = format!("run_task={}", w.proxy.count("ecs:RunTask"));
    w.finish(host, sim, &figures).await;
}

/// The UTC weekday two days from now, as `WarmSchedule` names it: a window then is closed now.
fn weekday_in_two_days() -> &'static str {
    let days =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs() / 86_400;
    // 1970-01-01 was a Thursday.
    ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][usize::try_from((days + 2) % 7).unwrap_or(0)]
}

/// Whether a RunTask went through the FARGATE_SPOT provider (no launch type).
fn through_spot(run: &serde_json::Value) -> bool {
    run["capacityProviderStrategy"][0]["capacityProvider"] == "FARGATE_SPOT" && run.get("launchType").is_none()
}

/// The one live task, once it is registered (the pool's one warm agent): its ARN and agent id.
async fn the_idle_warm_task(sim: &AgentSimulator, what: &str, after: std::time::Instant) -> (String, String) {
    sim.wait_until(what, Duration::from_secs(60), |s| {
        let live: Vec<_> = s.tasks.values().filter(|t| !t.stopped).collect();
        live.len() == 1 && live[0].first_seen > after && matches!(live[0].registration, Some(Ok(())))
    })
    .await;
    sim.with_state(|s| {
        let t = s.tasks.values().find(|t| !t.stopped).expect("the live task");
        (t.task_arn.clone(), t.agent_id.clone().expect("an agent id"))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn warm_agents_on_fargate_spot_serve_jobs_and_spot_interruptions_cost_no_job() {
    let mut w = Scenario::new("warm_spot").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let queue = eventbridge::create_queue(&base, "gocd-ecs-events").await;
    let bridge = EventBridge::start(w.fleets.clone(), &base, &queue).await;
    // One job per agent, so every agent after the first cold one is a warm agent.
    let reuse = [("ReuseIdleMinutes", "10"), ("ReuseMaxJobs", "1")];
    let mut spot = reuse.to_vec();
    spot.extend([("WarmAgents", "1"), ("WarmLaunchType", "FARGATE_SPOT")]);
    let cfg = w
        .host_config()
        .cluster_profile("p", cluster_props("gocd-a", &[("EventQueueUrl", &queue)]))
        .elastic_profile("warm", "p", warm(&spot));
    let host = GoCdHost::launch(cfg).await;
    // A cold start of 8 s: GoCD re-sends the first job's create-agent (every 3 s) twice, with
    // two new keys: one starts the warm agent, the other is held.
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_secs(8), ..SimPolicy::default() });
    let start = std::time::Instant::now();

    // The first job starts cold, on FARGATE; a warm agent starts through FARGATE_SPOT on one of
    // the keys of its re-sent create-agents.
    let (first, _) = run_one(&host, "warm").await;
    let (warm_arn, warm_agent) = the_idle_warm_task(&sim, "the warm agent registered, idle", start).await;
    // Which RunTask started which agent is told by its key, not by its place in the log: on a
    // loaded machine a warm agent's RunTask can be answered before the cold one's.
    let (seen, first_keys) =
        (sim.with_state(|s| s.tasks[&warm_arn].clone()), host.with_state(|s| s.job(first).keys.clone()));
    let runs = w.proxy.requests("ecs", "RunTask");
    let (cold, warm_runs): (Vec<_>, Vec<_>) = runs.iter().partition(|r| {
        crate::world::proxy::request_override_env(r, "GO_EA_AUTO_REGISTER_KEY") == Some(first_keys[0].as_str())
    });
    assert!(!cold.is_empty(), "the cold job's RunTask carries its first key: {runs:?}");
    assert!(cold.iter().all(|r| r["launchType"] == "FARGATE"), "the cold job runs where the profile says: {cold:?}");
    assert!(warm_runs.iter().all(|r| through_spot(r)), "warm agents go through FARGATE_SPOT: {runs:?}");
    assert_eq!(seen.capacity_provider.as_deref(), Some("FARGATE_SPOT"), "{seen:?}");
    let key = seen.auto_register_key.clone().expect("a key");
    assert!(first_keys.contains(&key) && first_keys[0] != key, "an unused key of a re-sent create-agent");

    // Spot takes the idle warm agent back: it is removed, a replacement starts on the held key,
    // and no job hears of it.
    no_pings(&host).await;
    bridge.interrupt_spot(&w.fleets[0], &warm_arn).await;
    host.wait_until("the interrupted warm agent deleted", Duration::from_secs(30), |s| {
        s.deleted_agents.contains(&warm_agent)
    })
    .await;
    host.wait_until("server health says why", Duration::from_secs(10), |s| s.health_ever_mentions("SpotInterruption"))
        .await;
    host.pause_pings(false);
    let interrupted_at = std::time::Instant::now();
    let (replacement_arn, replacement) =
        the_idle_warm_task(&sim, "a replacement warm agent registered", interrupted_at).await;
    let replacement_key = sim.with_state(|s| s.tasks[&replacement_arn].auto_register_key.clone()).expect("a key");
    assert!(first_keys.contains(&replacement_key) && replacement_key != key, "its own unused key");
    assert!(through_spot(w.proxy.requests("ecs", "RunTask").last().expect("a RunTask")));
    let heard = host.with_state(|s| s.console.iter().any(|c| c.text.contains(&warm_agent)));
    assert!(!heard, "no job's console mentions the idle agent Spot took back");

    // A job takes the warm agent and runs there; its cost line prices it at Fargate Spot.
    let (second, wait) = run_one(&host, "warm").await;
    assert_eq!(agent_of(&host, second), replacement, "the warm agent took it");
    assert!(wait < Duration::from_secs(8), "no cold start: {wait:?}");
    host.wait_until("the job's cost line", Duration::from_secs(10), |s| {
        s.console.iter().any(|c| c.job == Some(second) && c.text.contains("on Fargate Spot,"))
    })
    .await;

    // The second job's key started the next warm agent; a long job takes it, and Spot
    // interrupts it mid-job: the job reruns on FARGATE, its console saying why.
    let second_added = host.with_state(|s| s.job(second).added_at);
    let (busy_arn, busy_agent) = the_idle_warm_task(&sim, "the next warm agent registered", second_added).await;
    let long = host.add_job(JobSpec::new("warm", Duration::from_secs(60))).await;
    host.wait_until(
        "the long job building",
        Duration::from_secs(30),
        |s| matches!(&s.job(long).state, JobState::Running { agent_id } if *agent_id == busy_agent),
    )
    .await;
    no_pings(&host).await;
    let before = w.proxy.requests("ecs", "RunTask").len();
    bridge.interrupt_spot(&w.fleets[0], &busy_arn).await;
    host.wait_until("the cause in the job's console", Duration::from_secs(30), |s| {
        s.console.iter().any(|c| c.text.contains("Your Spot Task was interrupted") && c.text.contains("on-demand"))
    })
    .await;
    host.pause_pings(false);
    crate::events::shorten_reruns(&host, &[long]).await;
    host.wait_until("the rescheduled job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    let runs = w.proxy.requests("ecs", "RunTask");
    let reruns: Vec<_> = runs[before..].iter().filter(|r| !through_spot(r)).collect();
    assert_eq!(reruns.len(), 1, "one on-demand task, the rerun's: {:?}", &runs[before..]);
    assert_eq!(reruns[0]["launchType"], "FARGATE", "{}", reruns[0]);
    assert!(reruns[0].get("capacityProviderStrategy").is_none(), "{}", reruns[0]);
    assert!(host.with_state(|s| s.console.iter().any(|c| c.text.contains("on FARGATE (on-demand: Spot interrupted"))));
    let report = host.cluster_status_report("p").await.expect("answered");
    let page = report.body["view"].as_str().unwrap_or_default().to_string();
    let row = page.split("Spot interruptions").nth(1).and_then(|r| r.split("</tr>").next()).unwrap_or_default();
    assert!(row.contains("2 agents") && row.contains(": 2</div>"), "two, both of the warm profile: {row}");
    assert!(page.contains("on FARGATE_SPOT"), "the pool's launch type");

    // WarmAgents taken out: the pool retires.
    host.edit_elastic_profile("warm", warm(&reuse));
    run_one(&host, "warm").await;
    host.wait_until("every agent retired", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    let rejections = host.rejections();
    assert!(rejections.is_empty(), "no agent registered with a used or expired key: {rejections:?}");
    let figures = format!("run_task={}", w.proxy.count("ecs:RunTask"));
    drop(bridge);
    w.finish(host, sim, &figures).await;
}

/// Pauses server-ping and waits until none is in flight (a ping would see a stopped task
/// before its event, without the event's stop code).
async fn no_pings(host: &GoCdHost) {
    host.pause_pings(true);
    host.wait_until("in-flight pings done", Duration::from_secs(60), |s| s.pings.iter().all(|p| p.finished.is_some()))
        .await;
}
