//! `cargo bench --bench soak`: a compressed day of 10,000 jobs through the real plugin on moto,
//! with every fault at once, then the invariants (README "Soak"; `driver/` is the run itself,
//! shared with the short soak in the e2e binary, `tests/e2e/soak.rs`).
//!
//! `-- --jobs N` sets the jobs (default 10,000), `-- --rate R` the jobs scheduled per second
//! (default 12), `-- --seed S` the draws. Needs `MOTO_SERVER` (`export MOTO_SERVER=$(scripts/moto.sh)`).
//! Progress goes to stderr, the summary to stdout; the exit status is 1 when an invariant fails.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use test_world as world;

mod driver;

use std::process::ExitCode;

fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok())
}

fn main() -> ExitCode {
    // cargo appends `--bench`; every other argument is ours.
    let args: Vec<String> = std::env::args().filter(|a| a != "--bench").collect();
    let mut options = driver::SoakOptions::new(arg(&args, "--jobs").unwrap_or(10_000));
    if let Some(rate) = arg(&args, "--rate") {
        options.jobs_per_sec = rate;
    }
    if let Some(seed) = arg(&args, "--seed") {
        options.seed = seed;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("soak: no tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "soak: {} jobs at {} a second (a day of {:.0} s), plugin {}",
        options.jobs,
        options.jobs_per_sec,
        options.day().as_secs_f64(),
        world::host::plugin_binary().display()
    );
    let summary = runtime.block_on(driver::run(&options));
    println!("{}", summary.render());
    if summary.all_held() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
