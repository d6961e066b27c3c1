//! The short soak: the compressed day of `cargo bench --bench soak` at 500 jobs
//! (`SOAK_JOBS` changes it), with every fault at once, and the same invariants, so a regression
//! fails CI. The run itself is `benches/soak/driver/`. Needs `MOTO_SERVER`; never skips.

use crate::soak_driver::{self, SoakOptions};

/// The short run's jobs: at the driver's 6 jobs a second, an 83 s day, about two and a half
/// minutes with the settling at the end, run beside the jar's Maven tests by `scripts/test`.
const SHORT_SOAK_JOBS: usize = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_short_soak_keeps_every_invariant() {
    let jobs = std::env::var("SOAK_JOBS").ok().and_then(|j| j.parse().ok()).unwrap_or(SHORT_SOAK_JOBS);
    let summary = soak_driver::run(&SoakOptions::new(jobs)).await;
    let text = summary.render();
    eprintln!("SOAK:\n{text}");
    assert!(summary.all_held(), "an invariant of the soak failed:\n{text}");
}
