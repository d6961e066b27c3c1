//! The engine's time. Every decision that depends on the time of day (deadlines, ages, backoffs,
//! what an event or a record was stamped with) reads it from one [`Clock`] that the engine is
//! given at construction, never from the wall directly: production passes [`SystemClock`], and
//! tests and benches pass a [`ManualClock`] they advance, so time passes in them without
//! sleeping. This module is the only reader of the wall clock in the engine: [`SystemClock::now`],
//! and [`ManualClock::from_the_wall`] for a test's start (`tests/local/clock_reads.rs` checks
//! the engine's other non-test code).
//!
//! Time waited rather than read stays with tokio: the pauses between background passes
//! (`tokio::time::sleep`), the limits on how long a pass or an AWS read may take
//! (`tokio::time::timeout`), and the event-queue poller's pace (a monotonic `Instant`).

use std::fmt::Debug;
use std::sync::PoisonError;
use std::time::{Duration, SystemTime};

use super::locks::Mutex;

/// Where the engine reads the time.
pub trait Clock: Debug + Send + Sync {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The wall clock: the engine's time in production.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock for tests and benches: it stands still at the time it was given until it is moved
/// ([`ManualClock::advance`], [`ManualClock::set`]). Shared between threads; its lock is held
/// only inside its methods.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<SystemTime>,
}

impl ManualClock {
    /// A clock that reads `start` until moved.
    pub fn new(start: SystemTime) -> Self {
        ManualClock { now: Mutex::new(start) }
    }

    /// A clock that reads the wall's time of its making until moved: for a test world whose
    /// other parts (a fake AWS stamping its tasks) read the wall.
    pub fn from_the_wall() -> Self {
        Self::new(SystemTime::now())
    }

    /// Moves the clock `by` forward.
    pub fn advance(&self, by: Duration) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) += by;
    }

    /// Sets the clock to `at` (earlier or later).
    pub fn set(&self, at: SystemTime) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let clock = ManualClock::new(start);
        assert_eq!(clock.now(), start);
        assert_eq!(clock.now(), start, "it stands still");
        clock.advance(Duration::from_secs(90));
        assert_eq!(clock.now(), start + Duration::from_secs(90));
        clock.set(start);
        assert_eq!(clock.now(), start, "set goes back as well as forward");
    }
}
