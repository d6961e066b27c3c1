//! The engine reads the time from its clock (`src/cluster/base/clock.rs`), never from the wall: tests
//! then move time by advancing a manual clock instead of sleeping. This scans the non-test code
//! of `src/cluster` for a read of the wall clock (`SystemTime::now()`, or `SystemTime::now`
//! passed as a function) anywhere but the clock module. Test code may read the wall
//! (`source_scan` says what test code is), though the clock serves it too.

use crate::source_scan::{non_test_lines, src};

/// The one file of the engine that reads the wall clock.
const CLOCK: &str = "src/cluster/base/clock.rs";

/// Whether `code` reads the wall clock.
fn reads_the_wall(code: &str) -> bool {
    code.match_indices("SystemTime::now").any(|(at, found)| {
        let after = code[at + found.len()..].chars().next();
        !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn the_engine_reads_the_time_only_from_its_clock() {
    let found: Vec<String> = non_test_lines(&src().join("cluster"))
        .into_iter()
        .filter(|line| line.file != CLOCK && reads_the_wall(&line.code))
        .map(|line| format!("{}: {}", line.at(), line.code.trim()))
        .collect();
    assert!(
        found.is_empty(),
        "the engine reads the time from its clock: use `Cluster::now` (or a `now` or `&dyn Clock` passed in) \
         instead of the wall clock:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_wall_clock_reads() {
    for code in [
        "let now = SystemTime::now();",
        "registry.stopped(&id, why, std::time::SystemTime::now());",
        "record.spot_warned_at.is_none().then(SystemTime::now)",
    ] {
        assert!(reads_the_wall(code), "{code}");
    }
    for code in ["let now = cluster.now();", "let later = SystemTime::now_or_never();", "Instant::now()"] {
        assert!(!reads_the_wall(code), "{code}");
    }
}
