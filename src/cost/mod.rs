//! What AWS charges for the plugin's agents: the price table and AWS's billing rules. Pure: no
//! I/O but reading a price file the operator names, no AWS calls (the Price List is read through
//! the port, `aws::pricing`, by `prices --refresh`).
//!
//! - [`prices`]: the table (Fargate by region, OS and architecture; EC2 on demand by region and
//!   type; gp3), embedded with its date and source, and price files laid over it.
//! - [`bill`]: per-second billing with AWS's minimums: a Fargate task's cost, an EC2 instance's.
//! - [`price_list`]: a table made from the Price List's product documents (what
//!   `prices --refresh` writes).
//! - [`job`]: what one job cost and what is its warm pool's (how an agent's billed time is
//!   split; a job's share of an EC2 instance).
//! - [`ledger`]: the last eight days of cost per pipeline, stage and warm pool, in memory.
//!
//! # Which embedded figures were checked
//! `prices.json` says it in its notes, which `prices` prints: Fargate us-east-1 and us-east-2
//! (Linux x86 and ARM64, Windows, ephemeral storage) against transcriptions of the Price List;
//! eu-central-1 (ARM64 only), ap-southeast-2 and sa-east-1 (Linux) from one transcription of
//! AWS's page each; EC2 us-east-1 for the 49 listed types from a file generated from the Price
//! List (2026-07-20); gp3 us-east-1. Nothing else is filled in by guess: other regions come
//! from `prices --refresh` and a cluster profile's `PriceTable`.

pub mod bill;
pub mod job;
pub mod ledger;
pub mod price_list;
pub mod prices;

pub use bill::{
    ec2_instance_cost, fargate_billing_start, fargate_hourly, fargate_task_cost, Arch, Capacity, CostError, Os,
    TaskSize,
};
pub use prices::{BadPriceFile, FargateRate, FargateRegion, NoPrice, PriceTable};
