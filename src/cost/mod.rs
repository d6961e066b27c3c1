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
//! `prices.json` says it in its notes, which `prices` prints: each group of figures with the
//! public transcription of the AWS Price List or pricing page it was read from, and the date.
//! Fargate Linux x86 in 20 regions (ARM64, Windows and ephemeral storage where a transcription
//! was found); EC2 for the 49 listed types in us-east-1, us-east-2, us-west-2, eu-west-1,
//! eu-central-1, ap-southeast-1 and ap-northeast-1; gp3 in six regions. Nothing is filled in by
//! guess: what is absent comes from `prices --refresh` and a cluster profile's `PriceTable`.

pub mod bill;
pub mod job;
pub mod ledger;
pub mod price_list;
pub mod prices;

pub use bill::{
    ec2_instance_cost, fargate_billing_start, fargate_hourly, fargate_task_cost, gp3_hourly, CostError, Market,
    TaskSize,
};
pub use prices::{BadPriceFile, FargateRate, FargateRegion, NoPrice, PriceTable};
