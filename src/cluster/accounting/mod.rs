//! What a job's life measured and cost: its wait for an agent (`job_wait`) and the phases of its
//! start (`start_phases`), image pulls (`image_pulls`), and its cost (`job_cost`), with the prices
//! the table lacks read while the plugin runs (`price_fill`).

pub mod image_pulls;
pub mod job_cost;
pub mod job_wait;
pub mod price_fill;
pub mod start_phases;
