//! Crash safety: the plugin is killed with SIGKILL at six points of a 50-job
//! burst and a new process is started each time (GoCD restarting its plugin). AWS is the only
//! store: every new process adopts the tasks it finds by their tags, so no job gets two agents,
//! no task leaks and every job finishes.
//!
//! The kill points (the waits between them drawn from `CRASH_SEED`):
//! 1. while the proxy holds a RunTask answer: the task exists in moto, the plugin never saw it;
//! 2. at a random moment of the burst;
//! 3. while a StopTask answer of a job-completion is held (the task stopped, the agent is not
//!    deleted yet);
//! 4. in the middle of a server-ping (a DescribeTasks answer held);
//! 5. at a random moment;
//! 6. while a RunTask answer is held again.
//!
//! Ends with the checks of `Scenario::finish`. Needs `MOTO_SERVER`; never skips.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::reliability::*;
use crate::world::proxy::faults::splitmix64;
use crate::world::*;

/// A rule that holds the answer of the next call of `operation` (after moto acted on it) for
/// ten minutes, once each time it is armed.
fn hold_next(proxy: &Proxy, name: &str, operation: &'static str) -> Arc<AtomicBool> {
    let armed = Arc::new(AtomicBool::new(false));
    let a = armed.clone();
    proxy.add_rule(name, move |call| {
        if call.is("ecs", operation) && a.swap(false, Ordering::SeqCst) {
            Verdict::DelayAnswer(Duration::from_secs(600))
        } else {
            Verdict::Forward
        }
    });
    armed
}

/// Arms a hold and waits until an answer is held (or `within` passes: the kill then happens
/// anyway, at whatever point the burst is).
async fn wait_for_hold(proxy: &Proxy, armed: &AtomicBool, within: Duration) -> bool {
    let before = proxy.answers_held();
    armed.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if proxy.answers_held() > before {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    armed.store(false, Ordering::SeqCst);
    false
}

/// Six SIGKILLs during a 50-job burst (`MaxAgents` 15), one new plugin process after each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_six_times_during_a_fifty_job_burst_no_doubles_no_leaks() {
    let mut w = Scenario::new("crash_fifty_job_burst").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let seed = seed("CRASH_SEED", 0xc4a5);
    let mut rng = seed;
    let mut random_ms = |lo: u64, hi: u64| {
        rng = splitmix64(rng);
        lo + rng % (hi - lo)
    };
    let hold_run = hold_next(&w.proxy, "hold-run-task", "RunTask");
    let hold_stop = hold_next(&w.proxy, "hold-stop-task", "StopTask");
    let hold_describe = hold_next(&w.proxy, "hold-describe-tasks", "DescribeTasks");
    let mut cfg = w
        .host_config()
        .cluster_profile("base", cluster_props("gocd-a", &[("MaxAgents", "15"), ("AgentRegisterTimeoutMinutes", "1")]))
        .elastic_profile("small", "base", elastic_props());
    cfg.starvation_interval = Duration::from_secs(3);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() });

    host.add_jobs(JobSpec::new("small", Duration::from_secs(5)), 50).await;
    let mut points = Vec::new();
    for point in 1..=6 {
        let held = match point {
            1 | 6 => wait_for_hold(&w.proxy, &hold_run, Duration::from_secs(20)).await,
            3 => wait_for_hold(&w.proxy, &hold_stop, Duration::from_secs(20)).await,
            4 => {
                host.pause_pings(true);
                let pinger = host.clone();
                tokio::spawn(async move {
                    let _ = pinger.server_ping().await;
                });
                let held = wait_for_hold(&w.proxy, &hold_describe, Duration::from_secs(10)).await;
                host.pause_pings(false);
                held
            }
            _ => {
                tokio::time::sleep(Duration::from_millis(random_ms(300, 2500))).await;
                false
            }
        };
        let (waiting, running, completed) = host.with_state(job_states);
        points.push(format!("{point}:{}{waiting}/{running}/{completed}", if held { "held," } else { "" }));
        host.kill().await;
        tokio::time::sleep(Duration::from_millis(random_ms(50, 800))).await;
        host.restart().await;
        tokio::time::sleep(Duration::from_millis(random_ms(300, 2000))).await;
    }

    host.wait_until("all 50 jobs completed after six crashes", Duration::from_secs(180), |s| s.all_completed()).await;
    // Job-completions lost in a crash leave idle agents: the plugin stops them after the
    // register timeout (1 minute here).
    assert_all_done(&host, &sim, Duration::from_secs(150)).await;
    let (processes, rejected) = host.with_state(|s| (s.generation, s.rejections.len()));
    assert_eq!(processes, 7, "six kills, six restarts");
    assert_eq!(rejected, 0);
    let started = w.proxy.ecs_tasks_started();
    let tasks_seen = sim.with_state(|s| s.tasks.len());
    assert_eq!(tasks_seen, 50, "one task per job, none twice (the proxy saw {started} RunTask answers)");
    w.finish(
        host,
        sim,
        &format!("seed={seed} kill_points(waiting/running/completed)={points:?} plugin_processes={processes} tasks=50 duplicates=0"),
    )
    .await;
}
