//! Tenancy, edits and failures, end to end on moto behind the strict proxy:
//!
//! - two cluster profiles with static keys of two accounts and one cluster name each launch in
//!   their own account;
//! - a cluster renamed from its name to its ARN (same cluster) orphans nothing and starts no
//!   second task for any job;
//! - `MaxAgents` raised during a burst is never exceeded, before or after, and no job gets two
//!   tasks;
//! - with ECS unreachable, job-completion and the status reports still answer 200, and a job
//!   whose agent cannot be started says why in its console.
//!
//! Needs `MOTO_SERVER`; never skips.

use crate::world;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::reliability::*;
use crate::world::host::Props;
use crate::world::moto::{self, REGION};
use crate::world::proxy::Verdict;
use crate::world::*;
use aws_config::SdkConfig;

/// Waits for every job to complete, then checks each ran on exactly one task and every agent
/// was deleted.
async fn all_jobs_done(host: &GoCdHost, sim: &AgentSimulator, within: Duration) {
    host.wait_until("every job completed", within, |s| s.all_completed()).await;
    assert_all_done(host, sim, Duration::from_secs(60)).await;
}

/// Live tasks of a fleet counted by their `team` tag.
async fn live_by_team(config: &SdkConfig, cluster: &str) -> BTreeMap<String, usize> {
    let mut live = BTreeMap::new();
    for t in moto::live_tasks(config, cluster).await {
        *live.entry(moto::task_tag(&t, "team").unwrap_or("none").to_string()).or_default() += 1;
    }
    live
}

/// How many tasks were ever started for each job (by the task's job-id tag), in a fleet.
async fn tasks_per_job(config: &SdkConfig, cluster: &str) -> BTreeMap<String, usize> {
    let mut per_job = BTreeMap::new();
    for t in moto::all_tasks(config, cluster).await {
        *per_job.entry(moto::task_tag(&t, "gocd:job-id").unwrap_or("none").to_string()).or_default() += 1;
    }
    per_job
}

/// Two cluster profiles, each with the static keys of its own account, both naming cluster
/// `gocd` in one region: each team's jobs run in its own account, none in the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_static_key_accounts_with_one_cluster_name_each_launch_in_their_own_account() {
    let mut w = Scenario::new("two_static_key_accounts").await;
    let base = w.base.clone();
    let (keys, other) = w.moto.static_keys_in("222222222222").await;
    w.cluster("base", &base, "gocd").await;
    w.cluster("other", &other, "gocd").await;
    let (id, secret) = (keys.access_key_id.as_str(), keys.secret_access_key.as_str());
    let cfg = w
        .host_config()
        .cluster_profile("a", cluster_props("gocd", &[("Tags", "team=a")]))
        .cluster_profile(
            "b",
            cluster_props("gocd", &[("Tags", "team=b"), ("AccessKeyId", id), ("SecretAccessKey", secret)]),
        )
        .elastic_profile("on-a", "a", elastic_props())
        .elastic_profile("on-b", "b", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    host.add_jobs(JobSpec::new("on-a", Duration::from_secs(3)), 3).await;
    host.add_jobs(JobSpec::new("on-b", Duration::from_secs(3)), 4).await;
    all_jobs_done(&host, &sim, Duration::from_secs(120)).await;

    let mut seen = BTreeMap::new();
    for f in &w.fleets {
        let mut teams = BTreeMap::new();
        for t in moto::all_tasks(&f.config, &f.cluster).await {
            *teams.entry(moto::task_tag(&t, "team").unwrap_or("none").to_string()).or_insert(0) += 1;
        }
        seen.insert(f.label.clone(), teams);
    }
    assert_eq!(seen["base"], BTreeMap::from([("a".to_string(), 3)]), "account 123456789012 ran team a only: {seen:?}");
    assert_eq!(seen["other"], BTreeMap::from([("b".to_string(), 4)]), "account 222222222222 ran team b only: {seen:?}");
    w.finish(host, sim, &format!("tasks_by_account={seen:?}")).await;
}

/// A cluster profile edited from the cluster's name to its ARN while jobs run: the same cluster,
/// so the same engine. Every job completes on its one task, no agent is removed as unknown, and
/// nothing is left running.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_renamed_from_name_to_arn_orphans_nothing() {
    let mut w = Scenario::new("renamed_to_arn").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let by_name = cluster_props("gocd-a", &[("MaxAgents", "4")]);
    let cfg = w.host_config().cluster_profile("p", by_name).elastic_profile("small", "p", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    host.add_jobs(JobSpec::new("small", Duration::from_secs(8)), 6).await;
    host.wait_until("jobs building", Duration::from_secs(60), |s| job_states(s).1 >= 2).await;
    let arn = format!("arn:aws:ecs:{REGION}:123456789012:cluster/gocd-a");
    let reply = host.edit_cluster_profile("p", cluster_props(&arn, &[("MaxAgents", "4")])).await.expect("answered");
    assert_eq!(reply.code, 200);
    all_jobs_done(&host, &sim, Duration::from_secs(120)).await;

    let fleet = &w.fleets[0];
    let per_job = tasks_per_job(&fleet.config, &fleet.cluster).await;
    assert_eq!(per_job.len(), 6, "one task a job: {per_job:?}");
    assert!(per_job.values().all(|n| *n == 1), "no job got a second task: {per_job:?}");
    let stderr = host.stderr_text();
    assert!(!stderr.contains("cluster profile moved"), "the rename is the same cluster, not a move");
    assert!(!stderr.contains("removing GoCD agents of cluster profiles that no longer exist"));
    w.finish(host, sim, &format!("jobs=6 tasks={}", per_job.values().sum::<usize>())).await;
}

/// `MaxAgents` 2 raised to 5 in the middle of a burst of 12 jobs: the live tasks (counted in
/// moto every 200 ms) never pass the limit in force, reach the new one, and no job gets two.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn max_agents_raised_during_a_burst_is_never_exceeded_and_no_job_gets_two_tasks() {
    let mut w = Scenario::new("max_agents_raised").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let with_max = |max: &str| -> Props { cluster_props("gocd-a", &[("MaxAgents", max), ("Tags", "team=a")]) };
    let cfg = w.host_config().cluster_profile("p", with_max("2")).elastic_profile("small", "p", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    host.add_jobs(JobSpec::new("small", Duration::from_secs(6)), 12).await;
    let fleet = w.fleets[0].clone();
    let (mut peak_before, mut peak_after, mut raised) = (0, 0, false);
    let started = Instant::now();
    while !host.with_state(|s| s.all_completed()) {
        assert!(started.elapsed() < Duration::from_secs(180), "all jobs completed in time");
        let live = live_by_team(&fleet.config, &fleet.cluster).await.values().sum::<usize>();
        if raised {
            peak_after = peak_after.max(live);
        } else {
            peak_before = peak_before.max(live);
            if live == 2 {
                let reply = host.edit_cluster_profile("p", with_max("5")).await.expect("answered");
                assert_eq!(reply.code, 200);
                raised = true;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    all_jobs_done(&host, &sim, Duration::from_secs(60)).await;
    assert!(raised, "the burst reached 2 live tasks");
    assert_eq!(peak_before, 2, "never above 2 before the edit");
    assert!(peak_after <= 5, "never above 5 after it: {peak_after}");
    assert!(peak_after > 2, "the raised limit is used: {peak_after}");
    let per_job = tasks_per_job(&fleet.config, &fleet.cluster).await;
    assert_eq!(per_job.len(), 12);
    assert!(per_job.values().all(|n| *n == 1), "no job got a second task: {per_job:?}");
    w.finish(host, sim, &format!("peak_before={peak_before} peak_after={peak_after} tasks=12")).await;
}

/// ECS unreachable (every ECS call answered 503): job-completion still answers 200 (it records
/// what to clean up), the cluster and agent status reports answer 200 and say what failed in
/// their page, and a job that needs an agent says why in its console. When ECS is back, the
/// cleanup happens and the job runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_ecs_unreachable_job_completion_and_reports_answer_200_and_the_console_says_why() {
    let mut w = Scenario::new("ecs_unreachable").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let cfg = w.host_config().cluster_profile("p", cluster_props("gocd-a", &[])).elastic_profile(
        "small",
        "p",
        elastic_props(),
    );
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    let first = host.add_job(JobSpec::new("small", Duration::from_secs(3))).await;
    all_jobs_done(&host, &sim, Duration::from_secs(60)).await;
    let agent_id = host.with_state(|s| s.deleted_agents.last().cloned()).expect("the first job's agent was deleted");

    w.proxy.add_rule("ecs down", |call| {
        if call.service == "ecs" {
            Verdict::ecs_error(503, "ServiceUnavailableException", "Service Unavailable")
        } else {
            Verdict::Forward
        }
    });
    let job = host.job_identifier(first).to_json();
    let body = serde_json::json!({"elastic_agent_id": agent_id, "job_identifier": job,
        "cluster_profile_properties": cluster_props("gocd-a", &[]), "elastic_agent_profile_properties": elastic_props()});
    let completion = host.request("job-completion", body).await.expect("answered");
    assert_eq!(completion.code, 200, "job-completion: {}", completion.body);
    let report = host.cluster_status_report("p").await.expect("answered");
    assert_eq!(report.code, 200, "cluster status report: {}", report.body);
    let agent_report = host.agent_status_report("p", Some(&agent_id), None).await.expect("answered");
    assert_eq!(agent_report.code, 200, "agent status report: {}", agent_report.body);

    let waiting = host.add_job(JobSpec::new("small", Duration::from_secs(3))).await;
    host.wait_until("the console says why no agent starts", Duration::from_secs(60), |s| {
        s.console.iter().any(|c| {
            c.job == Some(waiting) && (c.text.contains("Service Unavailable") || c.text.contains("could not start"))
        })
    })
    .await;
    let console = host.console_log(waiting);
    assert!(console.iter().all(|l| !l.contains("DispatchFailure") && !l.contains("{ ")), "plain words: {console:?}");

    w.proxy.remove_rule("ecs down");
    all_jobs_done(&host, &sim, Duration::from_secs(120)).await;
    let line = console.iter().find(|l| l.contains("Service Unavailable") || l.contains("could not start")).cloned();
    w.finish(host, sim, &format!("console={line:?}")).await;
}

/// Three agents building long jobs get stuck behind the plugin's back: one deleted from GoCD by
/// an operator, one in LostContact, one Idle after GoCD took its job away (rescheduled or
/// cancelled: GoCD sends no job-completion then). With `AgentRegisterTimeoutMinutes` 1, each
/// task is stopped within two minutes, the two agents GoCD still lists are deleted, and the
/// reasons are in the tasks' stop reasons.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_stuck_agent_state_ends_with_its_task_stopped() {
    let mut w = Scenario::new("stuck_agents").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let cfg = w
        .host_config()
        .cluster_profile("p", cluster_props("gocd-a", &[("AgentRegisterTimeoutMinutes", "1")]))
        .elastic_profile("small", "p", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());
    let jobs = host.add_jobs(JobSpec::new("small", Duration::from_secs(900)), 3).await;
    host.wait_until("3 jobs building", Duration::from_secs(60), |s| job_states(s).1 == 3).await;
    let agents: Vec<String> = host.with_state(|s| s.agents.iter().map(|a| a.agent_id.clone()).collect());
    assert_eq!(agents.len(), 3);
    // A server-ping sees all three registered before anything goes wrong.
    assert_eq!(host.server_ping().await.expect("answered").code, 200);
    let stuck_at = Instant::now();
    host.as_operator(|s| {
        // No job goes on: GoCD took them away (nothing new is asked of the plugin for them).
        for h in &jobs {
            s.jobs[h.0].state = world::host::JobState::Cancelled;
        }
        s.agents.retain(|a| a.agent_id != agents[0]);
        let lost = s.agents.iter_mut().find(|a| a.agent_id == agents[1]).expect("listed");
        (lost.agent_state, lost.build_state) = ("LostContact", "Unknown");
        let idle = s.agents.iter_mut().find(|a| a.agent_id == agents[2]).expect("listed");
        (idle.agent_state, idle.build_state, idle.job) = ("Idle", "Idle", None);
    });
    let fleet = w.fleets[0].clone();
    let deadline = Instant::now() + Duration::from_secs(200);
    while !moto::live_tasks(&fleet.config, &fleet.cluster).await.is_empty() {
        assert!(Instant::now() < deadline, "every stuck task stopped within 200 s");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let stopped_after = stuck_at.elapsed();
    host.wait_until("the listed stuck agents deleted", Duration::from_secs(30), |s| s.agents.is_empty()).await;
    let deleted = host.with_state(|s| s.deleted_agents.clone());
    assert!(deleted.contains(&agents[1]) && deleted.contains(&agents[2]), "{deleted:?}");
    let reasons: Vec<String> = moto::all_tasks(&fleet.config, &fleet.cluster)
        .await
        .iter()
        .filter_map(|t| t.stopped_reason().map(str::to_string))
        .collect();
    for why in ["is no longer listed by GoCD", "lost contact with GoCD", "idle for over 1 minute"] {
        assert!(reasons.iter().any(|r| r.contains(why)), "a task stopped because {why}: {reasons:?}");
    }
    assert_eq!(sim.with_state(|s| s.duplicate_jobs()).len(), 0);
    w.finish(host, sim, &format!("stuck=3 all_stopped_after_secs={}", stopped_after.as_secs())).await;
}
