//! The benchmark's machinery, shared by `benches/floors.rs` (every figure at full size, timed)
//! and `tests/e2e/bench_counts.rs` (the call-count figures at smaller N, asserted in CI):
//!
//! - [`figures`]: one function per figure; each builds its own world (a fresh moto, the counting
//!   proxy with AWS-like rules, the real plugin binary), measures, and returns table rows;
//! - [`events`]: the event queue's figures (detection with events against server-ping, reads per ping);
//! - [`seed`]: tasks put into moto as a previous plugin process would have left them;
//! - [`stdio`]: a blocking stdio driver that times at the pipe boundary, and the bare NDJSON echo;
//! - [`table`]: the one table the benchmark prints.
//!
//! Both crates declare `mod world;` (the test world) at their root; this module uses it.

#![allow(dead_code, clippy::print_stderr)]

pub mod events;
pub mod figures;
pub mod seed;
pub mod stdio;
pub mod table;
