//! The engine's locks: `std::sync`'s in release builds, lock-order checked in debug and test
//! builds.
//!
//! [`Mutex`], [`MutexGuard`] and [`RwLock`] are `tracing_mutex::stdsync`'s. With
//! `debug_assertions` (every `cargo build` and `cargo test`, so the unit tests, the local tests
//! and the debug plugin binary the end-to-end tests run) each lock taken while another is held
//! adds the pair (held → taken) to one graph for the whole process, and a pair that would close
//! a cycle panics before it waits: two code paths that take two locks in opposite orders fail
//! the first test that runs both, instead of deadlocking one day in production. Without
//! `debug_assertions` (release builds, the benches) they are `std::sync`'s own types, unchanged.
//! Either way the API is std's: `lock()`, `read()` and `write()` return a `LockResult` whose
//! `PoisonError` is std's, so `unwrap_or_else(PoisonError::into_inner)` reads on past a panic
//! as before.
//!
//! The order is checked per lock, not per kind of lock: one engine's registry and another's are
//! two locks, and two orders count as a cycle when one process takes both on the same locks.
//!
//! Which locks there are, what each guards, the few taken while another is held and their
//! order: docs/architecture.md, "Locks".

pub use tracing_mutex::stdsync::{Mutex, MutexGuard, RwLock};

#[cfg(test)]
mod tests {
    use std::sync::PoisonError;

    use super::{Mutex, RwLock};

    #[test]
    fn locks_taken_in_one_order_pass() {
        let (a, b, c) = (Mutex::new(1), RwLock::new(2), Mutex::new(3));
        for _ in 0..2 {
            let a = a.lock().unwrap_or_else(PoisonError::into_inner);
            let b = b.read().unwrap_or_else(PoisonError::into_inner);
            let c = c.lock().unwrap_or_else(PoisonError::into_inner);
            assert_eq!(*a + *b + *c, 6);
        }
        // One at a time, in any order: nothing is held, nothing to check.
        drop(c.lock());
        drop(a.lock());
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "Found cycle in mutex dependency graph")]
    fn two_locks_taken_in_both_orders_panic() {
        let (a, b) = (Mutex::new(()), Mutex::new(()));
        {
            let _a = a.lock().unwrap_or_else(PoisonError::into_inner);
            let _b = b.lock().unwrap_or_else(PoisonError::into_inner);
        }
        let _b = b.lock().unwrap_or_else(PoisonError::into_inner);
        let _a = a.lock().unwrap_or_else(PoisonError::into_inner);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "Found cycle in mutex dependency graph")]
    fn a_cycle_through_three_locks_panics() {
        let (a, b, c) = (Mutex::new(()), RwLock::new(()), Mutex::new(()));
        {
            let _a = a.lock().unwrap_or_else(PoisonError::into_inner);
            let _b = b.write().unwrap_or_else(PoisonError::into_inner);
        }
        {
            let _b = b.read().unwrap_or_else(PoisonError::into_inner);
            let _c = c.lock().unwrap_or_else(PoisonError::into_inner);
        }
        let _c = c.lock().unwrap_or_else(PoisonError::into_inner);
        let _a = a.lock().unwrap_or_else(PoisonError::into_inner);
    }
}
