//! `cargo bench --bench floors`: the plugin against the floor of AWS calls and the ceiling of
//! speed (README "Performance"). Runs every figure against moto and the simulators, counts AWS
//! calls at the counting proxy, and prints one table: figure, floor, goal, measured, ratio.
//!
//! Needs `MOTO_SERVER` (`export MOTO_SERVER=$(scripts/moto.sh)`). Progress goes to stderr, the
//! table to stdout; the exit status is 1 when a goal is missed. `-- --quick` runs every figure
//! at a smaller size (a smoke run; its numbers are not the README's). `FLOORS_PLUGIN_LOG=<file>`
//! keeps the stdio-driven plugin's log; `ECS_EA_PLUGIN_BIN` measures another build of the plugin.
//!
//! With `FLOORS_NDJSON_ECHO=1` this executable is the bare NDJSON echo the throughput figure
//! compares with.

#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "../tests/world/mod.rs"]
mod world;

#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::time::Instant;

use support::figures::{self, Timing};
use support::table::Table;

/// Sizes of one run.
struct Sizes {
    reads_n: Vec<usize>,
    timing: Timing,
    hello_starts: usize,
    role_requests: usize,
    launches: usize,
    burst: usize,
    adoption: usize,
}

fn main() -> ExitCode {
    if std::env::var_os(support::stdio::ECHO_ENV).is_some() {
        return match support::stdio::run_echo() {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        };
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes = if quick {
        Sizes {
            reads_n: vec![100, 500],
            timing: Timing { latency_samples: 500, throughput_requests: 5_000, throughput_rounds: 2 },
            hello_starts: 5,
            role_requests: 100,
            launches: 20,
            burst: 150,
            adoption: 300,
        }
    } else {
        Sizes {
            reads_n: vec![100, 1_000, 5_000],
            timing: Timing { latency_samples: 5_000, throughput_requests: 20_000, throughput_rounds: 3 },
            hello_starts: 21,
            role_requests: 1_000,
            launches: 100,
            burst: 500,
            adoption: 2_000,
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("floors: no tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    eprintln!("floors: plugin {}", figures::plugin_binary().display());
    let table = runtime.block_on(run(&sizes));
    println!("{}", table.render());
    eprintln!("floors: done in {:.0} s", started.elapsed().as_secs_f64());
    if table.all_met() {
        ExitCode::SUCCESS
    } else {
        for row in table.missed() {
            eprintln!("floors: goal missed: {}: {} (goal {})", row.figure, row.measured, row.goal);
        }
        ExitCode::FAILURE
    }
}

async fn run(sizes: &Sizes) -> Table {
    eprintln!("floors: ECS reads per server-ping, then the stdio figures");
    let reads = figures::reads_per_ping(&sizes.reads_n, Some(sizes.timing)).await;
    eprintln!("floors: AssumeRole over {} requests", sizes.role_requests);
    let (role, role_note) = figures::assume_role(sizes.role_requests).await;
    eprintln!("floors: task definitions over {} launches", sizes.launches);
    let (td, td_note) = figures::task_definitions(sizes.launches).await;
    eprintln!("floors: a burst of {} create-agent calls", sizes.burst);
    let (burst, burst_note) = figures::launch_burst(sizes.burst, true).await;
    eprintln!("floors: restart adoption of {} tasks", sizes.adoption);
    let (adoption, adoption_note) = figures::restart_adoption(sizes.adoption, true).await;
    eprintln!("floors: start to hello, {} starts", sizes.hello_starts);
    let hello = tokio::task::block_in_place(|| figures::hello_times(sizes.hello_starts));

    // The README's order: counts, then stdio, then the burst and the restart, then the process.
    let mut table = Table::default();
    let (per_ping, stdio): (Vec<_>, Vec<_>) = reads.rows.into_iter().partition(|r| r.figure.starts_with("ECS read"));
    let (memory, stdio): (Vec<_>, Vec<_>) = stdio.into_iter().partition(|r| r.figure.starts_with("resident memory"));
    table.extend(per_ping);
    table.extend([role, td]);
    table.extend(stdio);
    table.extend([burst, adoption]);
    table.extend(memory);
    table.extend([hello]);
    for note in reads.notes.into_iter().chain([role_note, td_note, burst_note, adoption_note]) {
        table.note(note);
    }
    table.note(format!(
        "Run: plugin binary {}, moto from MOTO_SERVER on loopback, {} CPUs; AWS calls counted at the proxy",
        figures::plugin_binary().display(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    ));
    table
}
