//! The end-to-end tests: the real plugin binary against moto (the local AWS) behind the test
//! world's strict proxy, driven by a simulated GoCD. One binary, so the test world and the AWS SDK
//! are compiled and linked once. Run one area with a filter: `scripts/test --test e2e ec2::`.
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`); without it the tests panic, never skip.

#![allow(clippy::print_stderr, clippy::tests_outside_test_module)]

use test_world as world;

/// What the end-to-end files add to a scenario that other files use too.
mod scenario_ext {
    pub(crate) use crate::{ec2::Ec2Scenario, reliability::ReliabilityScenario};
}

#[path = "../../benches/support/mod.rs"]
mod support;

mod reliability;

#[path = "../../benches/soak/driver/mod.rs"]
mod soak_driver;

mod aws_rules;
mod bench_counts;
mod capacity;
mod cli_doctor;
mod cloudformation;
mod cost;
mod crash;
mod ec2;
mod events;
mod fargate;
mod faults;
mod guide;
mod hostile_input;
mod images;
mod import;
mod isolation;
mod leftovers;
mod metrics;
mod proxy;
mod reuse;
mod soak;
mod task_contents;
mod tenancy;
mod traces;
mod try_cmd;
mod upgrade;
mod warm;
mod world_checks;
