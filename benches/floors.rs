//! `cargo bench --bench floors`: the plugin against the floor of AWS calls and the ceiling of
//! speed (README "Performance"). Runs every figure against moto and the simulators, counts AWS
//! calls at the counting proxy, and prints one table: figure, floor, goal, measured, ratio.
//!
//! Needs `MOTO_SERVER` (`export MOTO_SERVER=$(scripts/moto.sh)`). Progress goes to stderr, the
//! table to stdout; the exit status is 1 when a goal is missed. `-- --quick` runs every figure
//! at a smaller size (a smoke run; its numbers are not the README's); `-- --only burst` (or
//! `burst-fargate`, `burst-ec2`, `reads`, ...) a subset. It also runs in the test profile
//! (`cargo test --bench floors -- --only burst`, a debug build of the plugin). `FLOORS_PLUGIN_LOG=<file>`
//! keeps the stdio-driven plugin's log; `ECS_EA_PLUGIN_BIN` measures another build of the plugin.
//!
//! With `FLOORS_NDJSON_ECHO=1` this executable is the bare NDJSON echo the throughput figure
//! compares with.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use test_world as world;

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
    ec2_burst: usize,
    adoption: usize,
    events_agents: usize,
}

fn main() -> ExitCode {
    if std::env::var_os(support::stdio::ECHO_ENV).is_some() {
        return match support::stdio::run_echo() {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        };
    }
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--only reads,role,td,burst,restart,events,hello`: a subset of the figures (the table shows those);
    // `burst` is both bursts, `burst-fargate` or `burst-ec2` one of them.
    let only: Option<Vec<String>> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|l| l.split(',').map(str::to_string).collect());
    let sizes = if quick {
        Sizes {
            reads_n: vec![100, 500],
            timing: Timing { latency_samples: 500, throughput_requests: 5_000, throughput_rounds: 2 },
            hello_starts: 5,
            role_requests: 100,
            launches: 20,
            burst: 150,
            ec2_burst: 200,
            adoption: 300,
            events_agents: 20,
        }
    } else {
        Sizes {
            reads_n: vec![100, 1_000, 5_000],
            timing: Timing { latency_samples: 5_000, throughput_requests: 20_000, throughput_rounds: 3 },
            hello_starts: 21,
            role_requests: 1_000,
            launches: 100,
            burst: 500,
            ec2_burst: 500,
            adoption: 2_000,
            events_agents: 100,
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
    // `--reads 100,1000`: the N of the ECS-reads figure (the stdio figures run at the last N).
    let mut sizes = sizes;
    if let Some(list) = args.iter().position(|a| a == "--reads").and_then(|i| args.get(i + 1)) {
        sizes.reads_n = list.split(',').filter_map(|n| n.trim().parse().ok()).collect();
    }
    let wanted = |figure: &str| only.as_ref().is_none_or(|o| o.iter().any(|f| f == figure));
    let table = runtime.block_on(run(&sizes, &wanted));
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

async fn run(sizes: &Sizes, wanted: &dyn Fn(&str) -> bool) -> Table {
    let mut reads = figures::ReadsOutcome::default();
    if wanted("reads") {
        eprintln!("floors: ECS reads per server-ping, then the stdio figures");
        reads = figures::reads_per_ping(&sizes.reads_n, Some(sizes.timing)).await;
    }
    let mut role = None;
    if wanted("role") {
        eprintln!("floors: AssumeRole over {} requests", sizes.role_requests);
        role = Some(figures::assume_role(sizes.role_requests).await);
    }
    let mut td = None;
    if wanted("td") {
        eprintln!("floors: task definitions over {} launches", sizes.launches);
        td = Some(figures::task_definitions(sizes.launches).await);
    }
    let mut burst = None;
    if wanted("burst") || wanted("burst-fargate") {
        eprintln!("floors: a burst of {} Fargate create-agent calls", sizes.burst);
        burst = Some(figures::launch_burst(sizes.burst, true).await);
    }
    let mut ec2_burst = None;
    if wanted("burst") || wanted("burst-ec2") {
        eprintln!("floors: a burst of {} EC2 create-agent calls (StartTask)", sizes.ec2_burst);
        ec2_burst = Some(figures::ec2_start_burst(sizes.ec2_burst, true).await);
    }
    let mut adoption = None;
    if wanted("restart") {
        eprintln!("floors: restart adoption of {} tasks", sizes.adoption);
        adoption = Some(figures::restart_adoption(sizes.adoption, true).await);
    }
    let mut events = None;
    if wanted("events") {
        eprintln!("floors: the event queue, {} agents", sizes.events_agents);
        events = Some(support::events::figures(sizes.events_agents).await);
    }
    let mut hello = None;
    if wanted("hello") {
        eprintln!("floors: start to hello, {} starts", sizes.hello_starts);
        hello = Some(tokio::task::block_in_place(|| figures::hello_times(sizes.hello_starts)));
    }

    // The README's order: counts, then stdio, then the burst and the restart, then the process.
    let mut table = Table::default();
    let (per_ping, stdio): (Vec<_>, Vec<_>) = reads.rows.into_iter().partition(|r| r.figure.starts_with("ECS read"));
    let (memory, stdio): (Vec<_>, Vec<_>) = stdio.into_iter().partition(|r| r.figure.starts_with("resident memory"));
    let mut notes = reads.notes;
    let mut add = |table: &mut Table, figure: Option<(support::table::Row, String)>| {
        if let Some((row, note)) = figure {
            table.extend([row]);
            notes.push(note);
        }
    };
    table.extend(per_ping);
    add(&mut table, role);
    add(&mut table, td);
    table.extend(stdio);
    add(&mut table, burst);
    add(&mut table, ec2_burst);
    add(&mut table, adoption);
    if let Some((rows, note)) = events {
        table.extend(rows);
        notes.push(note);
    }
    table.extend(memory);
    table.extend(hello);
    for note in notes {
        table.note(note);
    }
    table.note(format!(
        "Run: plugin binary {}, moto from MOTO_SERVER on loopback, {} CPUs; AWS calls counted at the proxy",
        figures::plugin_binary().display(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    ));
    table
}
