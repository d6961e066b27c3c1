//! The benchmark's call counts as a regression guard (`benches/floors.rs` runs them at full size,
//! timed): AWS calls counted at the proxy, with ListTasks paged and DescribeTasks capped as AWS
//! does. Counts are deterministic, so they are asserted; times are not, so they are only printed
//! (`cargo test --test e2e bench_counts:: -- --nocapture` shows each figure's table row).
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`); without it the tests panic, never skip.

use crate::support::figures;
use crate::support::table::{Row, Table};

fn check(rows: Vec<Row>) {
    let table = Table { rows, notes: Vec::new() };
    eprint!("{}", table.render());
    let missed: Vec<String> =
        table.missed().iter().map(|r| format!("{}: {} (goal {})", r.figure, r.measured, r.goal)).collect();
    assert!(missed.is_empty(), "goals missed:\n  {}", missed.join("\n  "));
}

/// ECS reads per server-ping: 2·⌈N/100⌉ + 2 at most, at N = 100 and 1,000.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ecs_reads_per_server_ping_stay_at_the_floor() {
    let out = figures::reads_per_ping(&[100, 1_000], None).await;
    eprintln!("{}", out.notes.join("\n"));
    check(out.rows);
}

/// One AssumeRole for 1,000 requests to a role-based profile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_assume_role_over_a_thousand_requests() {
    let (row, note) = figures::assume_role(1_000).await;
    eprintln!("{note}");
    check(vec![row]);
}

/// One RegisterTaskDefinition for 100 launches of one elastic profile, sent at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_task_definition_for_a_hundred_launches() {
    let (row, note) = figures::task_definitions(100).await;
    eprintln!("{note}");
    check(vec![row]);
}

/// A Fargate burst of 60, three times AWS's RunTask burst of 20, with AWS's quotas on: every
/// task launched, not one RunTask throttled (time not checked; about 3 s of pacing).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_launch_burst_is_never_throttled() {
    let (row, note) = figures::launch_burst(60, false).await;
    eprintln!("{note}");
    check(vec![row]);
}

/// An EC2 burst of 120 StartTasks, above AWS's burst of 100 for EC2 launches and stops, onto 10
/// registered container instances with AWS's quotas on: every task started, not one StartTask
/// throttled (time not checked).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ec2_start_task_burst_is_never_throttled() {
    let (row, note) = figures::ec2_start_burst(120, false).await;
    eprintln!("{note}");
    check(vec![row]);
}

/// A restarted plugin adopts 1,000 live tasks in 2·⌈N/100⌉ + 5 calls at most.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restart_adoption_reads_each_task_once() {
    let (row, note) = figures::restart_adoption(1_000, false).await;
    eprintln!("{note}");
    check(vec![row]);
}
