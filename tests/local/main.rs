//! The tests that need no AWS emulator: the binary's command line (`--help`, `validate`,
//! `iam-policy`, logs), the stdio server in memory and through the real binary (protocol
//! transcripts), the status reports' HTML, the profile forms in headless Chromium, the release
//! archive, and rules read from the source (no status compared as a string, the engine's time
//! from its clock). One binary, linked once.

#![allow(clippy::print_stderr, clippy::tests_outside_test_module)]

mod cli_help;
mod cli_iam_policy;
mod cli_import;
mod cli_logs;
mod cli_validate;
mod clock_reads;
mod in_memory;
mod packaging;
mod profile_views;
mod references;
mod source_scan;
mod status_literals;
mod status_reports;
mod transcripts;
mod versions;
