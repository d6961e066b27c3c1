//! The cluster report's cost section: what jobs cost today and over the last seven days, per
//! pipeline and stage, the costliest pipelines, and the warm pools' idle cost — from the
//! engine's in-memory ledger (`cost::ledger`), with amounts already in words.

use serde::Serialize;

use crate::cost::job::usd;
use crate::cost::ledger::{Summary, DAYS_KEPT};

/// The cost section.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CostView {
    /// Jobs' cost today (UTC).
    pub today: String,
    /// Jobs today.
    pub jobs_today: u64,
    /// Jobs' cost over the last seven days.
    pub week: String,
    /// Jobs over the last seven days.
    pub jobs_week: u64,
    /// Warm pools' idle cost today.
    pub pools_today: String,
    /// Warm pools' idle cost over the last seven days.
    pub pools_week: String,
    /// Per pipeline and stage, costliest over the week first.
    pub stages: Vec<StageLine>,
    /// The costliest pipelines over the week.
    pub top: Vec<PipelineLine>,
    /// Per warm pool (elastic profile hash).
    pub pools: Vec<PoolLine>,
    /// Days the ledger keeps.
    pub days_kept: i64,
}

/// One (pipeline, stage).
#[derive(Debug, Clone, Serialize)]
pub struct StageLine {
    /// Pipeline.
    pub pipeline: String,
    /// Stage.
    pub stage: String,
    /// Today.
    pub today: String,
    /// Jobs today.
    pub jobs_today: u64,
    /// Seven days.
    pub week: String,
    /// Jobs in seven days.
    pub jobs_week: u64,
}

/// One pipeline.
#[derive(Debug, Clone, Serialize)]
pub struct PipelineLine {
    /// Pipeline.
    pub pipeline: String,
    /// Seven days.
    pub week: String,
    /// Jobs in seven days.
    pub jobs: u64,
    /// Its part of the week's jobs' cost, 0 to 100.
    pub percent: u32,
}

/// One warm pool.
#[derive(Debug, Clone, Serialize)]
pub struct PoolLine {
    /// The elastic profile's hash.
    pub elastic_profile: String,
    /// Idle cost today.
    pub today: String,
    /// Idle cost over seven days.
    pub week: String,
}

/// The section of a ledger summary.
pub fn cost_view(s: &Summary) -> CostView {
    let percent = |x: f64| if s.week.usd > 0.0 { (x / s.week.usd * 100.0).round().clamp(0.0, 100.0) as u32 } else { 0 };
    CostView {
        today: usd(s.today.usd),
        jobs_today: s.today.jobs,
        week: usd(s.week.usd),
        jobs_week: s.week.jobs,
        pools_today: usd(s.pools_today_usd),
        pools_week: usd(s.pools_week_usd),
        stages: s
            .stages
            .iter()
            .map(|r| StageLine {
                pipeline: r.pipeline.clone(),
                stage: r.stage.clone(),
                today: usd(r.today.usd),
                jobs_today: r.today.jobs,
                week: usd(r.week.usd),
                jobs_week: r.week.jobs,
            })
            .collect(),
        top: s
            .top_pipelines
            .iter()
            .map(|p| PipelineLine {
                pipeline: p.pipeline.clone(),
                week: usd(p.week.usd),
                jobs: p.week.jobs,
                percent: percent(p.week.usd),
            })
            .collect(),
        pools: s
            .pools
            .iter()
            .map(|p| PoolLine {
                elastic_profile: p.elastic_profile.clone(),
                today: usd(p.today_usd),
                week: usd(p.week_usd),
            })
            .collect(),
        days_kept: DAYS_KEPT,
    }
}
