//! The benches' kit, shared with the end-to-end tests: [`support`] drives the plugin over stdio
//! and measures the floors bench's figures; [`soak`] is the compressed day with every fault at
//! once and its invariants (`cargo bench --bench soak`, and short in the end-to-end tests).

#![allow(clippy::print_stderr)]

use test_world as world;

pub mod soak;
pub mod support;
