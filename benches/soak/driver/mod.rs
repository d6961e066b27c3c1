//! The soak: a compressed day of jobs through the real plugin, on moto behind the
//! strict proxy, with every fault at once, then the invariants checked and printed. Shared by
//! `cargo bench --bench soak` (the full day, `--jobs 10000`) and the short run in the e2e binary
//! (`soak::`), which is the same code at a smaller job count.
//!
//! - [`setup`]: three accounts, six profile pairs (Fargate and EC2; reuse and warm agents on
//!   some), the event queue and its misbehaving delivery, the simulators;
//! - [`day`]: jobs arriving on a day's curve and the faults' timetable (throttling and 5xx
//!   throughout; SIGKILLs; the queue deleted, recreated and unreachable; one account's
//!   credentials refused), with the plugin's memory sampled from `/proc/<pid>/status`;
//! - [`checks`]: the invariants and the summary (README "Soak").
//!
//! The crate that includes this declares `mod world;` (the test world) at its root.

#![allow(dead_code, clippy::print_stderr)]

pub mod checks;
pub mod day;
pub mod setup;

use std::time::Duration;

/// What one soak run does.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// Jobs over the day.
    pub jobs: usize,
    /// Jobs scheduled per second of wall time, on average (the day's curve around it).
    pub jobs_per_sec: f64,
    /// Seed of the faults, delays, poison and job mix.
    pub seed: u64,
    /// How often the plugin is killed with SIGKILL.
    pub kills: usize,
}

impl SoakOptions {
    /// A run of `jobs` jobs at the default pace.
    pub fn new(jobs: usize) -> SoakOptions {
        SoakOptions { jobs, jobs_per_sec: 6.0, seed: 0x50a4_0036, kills: 3 }
    }

    /// The wall time jobs arrive over (the compressed day).
    pub fn day(&self) -> Duration {
        Duration::from_secs_f64(self.jobs as f64 / self.jobs_per_sec)
    }
}

/// Runs the soak; returns its summary (checks included).
pub async fn run(options: &SoakOptions) -> checks::Summary {
    let world = setup::SoakWorld::build(options).await;
    let outcome = day::play(&world, options).await;
    checks::check(world, outcome, options).await
}
