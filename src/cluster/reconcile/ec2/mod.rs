//! The EC2 loop: one background pass per engine, every few seconds while there is work, that
//! keeps the engine's own EC2 instances (`capacity/ec2/`) matched to the work waiting for them.
//! It observes the cluster once (DescribeInstances of our instances, the container instances),
//! then for each pool of a served profile plans (`capacity::ec2::plan`, pure) and applies.
//!
//! - [`driver`]: create-agent's entry ([`Cluster::enqueue_on_ec2`](crate::cluster::Cluster)) and
//!   the loop itself; each pass observes, then plans and applies pool by pool (`pool_pass.rs`).
//! - `apply.rs`: a plan's steps on instances (place work with StartTask, retire, stop, start,
//!   refuse work no type can run); `launch.rs`: RunInstances, with the Spot fallback.

mod apply;
pub mod driver;
mod launch;
mod pool_pass;
#[cfg(test)]
mod tests;
