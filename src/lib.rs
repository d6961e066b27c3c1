//! `ecs-elastic-agent`: GoCD elastic agents on AWS ECS (Fargate and EC2), as a stdio plugin.
//!
//! A GoCD-compatible server starts the binary and speaks the elastic-agent extension v5 to it,
//! one JSON message a line (see `docs/protocol.md`). For each job that needs an agent the
//! plugin starts a GoCD agent as an ECS task in the job's cluster profile's account.
//!
//! # Where things live
//! - [`protocol`]: the wire as pure data (envelopes, v5 bodies, callbacks).
//! - [`server`]: stdio, concurrency, calls back to the host (the engine's GoCD port).
//! - [`handlers`]: the request list and one thin adapter per request family.
//! - [`plugin`]: every cluster profile's engine, server-info, server-ping across profiles.
//! - [`cluster`]: the engine — one cluster profile's life, its registry, reconciler, launches
//!   and EC2 capacity.
//! - [`aws`]: SDK clients per account, the call budget, `AwsError`.
//! - [`cost`]: the price table and AWS's billing rules (pure; read by nothing in the engine yet).
//! - [`settings`]: profiles parsed and validated.
//! - [`cli`]: the operators' tools beside `serve` (validate, iam-policy, doctor, prices).
//! - [`metrics`]: Prometheus counters, served by `serve --metrics-addr`.
//! - [`telemetry`]: traces over OTLP when the standard `OTEL_*` variables ask for them: one
//!   trace per job start, with the wait's phases and the AWS calls.
//! - [`ids`]: the ids that cross modules (agent id, cluster key, settings fingerprint, task ARN,
//!   job key), each its own type.
//!
//! # Architecture invariants
//! - Only `server::connection` writes stdout; logs go to stderr through `tracing`.
//! - Layers import downwards only (docs/architecture.md): `protocol` imports nothing of ours but
//!   `secret` and does no I/O; nothing under `cluster`, `aws` or `settings` imports `server`,
//!   `handlers` or `plugin` — the engine reaches GoCD through [`cluster::Gocd`].
//! - A secret lives in [`secret::Secret`] and is exposed only where it is handed to AWS or a task.
//! - Bad input is answered and skipped; nothing a host sends stops the server.

// The engine's docs are written for its maintainers and read with private items
// (`cargo doc --document-private-items`), where a link to a private item resolves.
#![allow(rustdoc::private_intra_doc_links)]

pub mod aws;
pub mod cli;
pub mod cluster;
pub mod cost;
pub mod error;
pub mod handlers;
pub mod ids;
pub mod metrics;
pub mod platform;
pub mod plugin;
pub mod protocol;
pub mod secret;
pub mod server;
pub mod settings;
pub mod status;
pub mod telemetry;
