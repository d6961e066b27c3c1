//! What jobs and warm pools cost lately, in memory: per UTC day, per (pipeline, stage) and per
//! elastic profile, for the cluster status report (today, the last seven days, the top
//! pipelines) and the Prometheus counters (totals since the process started).
//!
//! There is no database: the ledger is lost when the plugin restarts, and it holds at most
//! [`DAYS_KEPT`] days of at most [`MAX_STAGES_PER_DAY`] (pipeline, stage) rows each (later
//! ones of a day are added to one `(other pipelines)` row), so its memory is bounded whatever
//! GoCD sends. The report says so.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::Serialize;

/// Days kept: today and the seven before it.
pub const DAYS_KEPT: i64 = 8;
/// (pipeline, stage) rows kept per day; later ones go to [`OTHER`].
pub const MAX_STAGES_PER_DAY: usize = 2000;
/// The row that holds what did not fit.
pub const OTHER: &str = "(other pipelines)";
/// Elastic profiles kept per day and in the totals (the same bound).
const MAX_PROFILES: usize = 500;

/// Days since the Unix epoch, in UTC.
pub fn day_of(t: SystemTime) -> i64 {
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    i64::try_from(secs / 86_400).unwrap_or(i64::MAX)
}

/// Cost and job count of one (pipeline, stage) on one day.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Tally {
    /// USD.
    pub usd: f64,
    /// Jobs.
    pub jobs: u64,
}

impl Tally {
    fn add(&mut self, usd: f64, jobs: u64) {
        self.usd += usd;
        self.jobs += jobs;
    }
}

#[derive(Debug, Default)]
struct Day {
    stages: BTreeMap<(String, String), Tally>,
    /// Warm pool idle cost by elastic profile.
    pools: BTreeMap<String, f64>,
}

/// The ledger of one cluster profile.
#[derive(Debug, Default)]
pub struct Ledger {
    days: BTreeMap<i64, Day>,
    /// Jobs' cost by elastic profile since the process started.
    jobs_total: BTreeMap<String, f64>,
    /// Pools' idle cost by elastic profile since the process started.
    pools_total: BTreeMap<String, f64>,
}

/// One (pipeline, stage) in the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageRow {
    /// Pipeline name.
    pub pipeline: String,
    /// Stage name.
    pub stage: String,
    /// Today (UTC).
    pub today: Tally,
    /// Today and the six days before.
    pub week: Tally,
}

/// One pipeline over the seven days.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineRow {
    /// Pipeline name.
    pub pipeline: String,
    /// Today and the six days before.
    pub week: Tally,
}

/// One warm pool (elastic profile).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolRow {
    /// The elastic profile's hash.
    pub elastic_profile: String,
    /// Its agents' idle cost today (UTC).
    pub today_usd: f64,
    /// Over the seven days.
    pub week_usd: f64,
}

/// What the report shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Jobs today.
    pub today: Tally,
    /// Jobs over the seven days.
    pub week: Tally,
    /// Warm pools' idle cost today.
    pub pools_today_usd: f64,
    /// Warm pools' idle cost over the seven days.
    pub pools_week_usd: f64,
    /// Per (pipeline, stage), costliest over the week first.
    pub stages: Vec<StageRow>,
    /// The costliest pipelines over the week, at most `top` of them.
    pub top_pipelines: Vec<PipelineRow>,
    /// Per warm pool.
    pub pools: Vec<PoolRow>,
}

impl Ledger {
    /// A job's cost, on the day it completed.
    pub fn job(&mut self, at: SystemTime, pipeline: &str, stage: &str, elastic_profile: &str, usd: f64) {
        let day = self.day(at);
        let key = if day.stages.len() < MAX_STAGES_PER_DAY || day.stages.contains_key(&(pipeline.into(), stage.into()))
        {
            (pipeline.to_string(), stage.to_string())
        } else {
            (OTHER.to_string(), String::new())
        };
        day.stages.entry(key).or_default().add(usd, 1);
        add_bounded(&mut self.jobs_total, elastic_profile, usd);
    }

    /// A warm or kept agent's idle time, its pool's cost, on the day it ended.
    pub fn pool_idle(&mut self, at: SystemTime, elastic_profile: &str, usd: f64) {
        let day = self.day(at);
        add_bounded(&mut day.pools, elastic_profile, usd);
        add_bounded(&mut self.pools_total, elastic_profile, usd);
    }

    /// Jobs' cost by elastic profile since the process started (the counter's samples).
    pub fn jobs_total(&self) -> &BTreeMap<String, f64> {
        &self.jobs_total
    }

    /// Pools' idle cost by elastic profile since the process started.
    pub fn pools_total(&self) -> &BTreeMap<String, f64> {
        &self.pools_total
    }

    /// Today and the seven days up to `now`, with at most `top` pipelines in the top list.
    pub fn summary(&self, now: SystemTime, top: usize) -> Summary {
        let today = day_of(now);
        let mut out = Summary::default();
        let mut stages: BTreeMap<(String, String), (Tally, Tally)> = BTreeMap::new();
        let mut pools: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for (d, day) in self.days.range(today - 6..=today) {
            for (key, t) in &day.stages {
                let row = stages.entry(key.clone()).or_default();
                row.1.add(t.usd, t.jobs);
                out.week.add(t.usd, t.jobs);
                if *d == today {
                    row.0.add(t.usd, t.jobs);
                    out.today.add(t.usd, t.jobs);
                }
            }
            for (profile, usd) in &day.pools {
                let row = pools.entry(profile.clone()).or_default();
                row.1 += usd;
                out.pools_week_usd += usd;
                if *d == today {
                    row.0 += usd;
                    out.pools_today_usd += usd;
                }
            }
        }
        let mut by_pipeline: BTreeMap<String, Tally> = BTreeMap::new();
        for ((pipeline, stage), (today, week)) in stages {
            by_pipeline.entry(pipeline.clone()).or_default().add(week.usd, week.jobs);
            out.stages.push(StageRow { pipeline, stage, today, week });
        }
        out.stages.sort_by(|a, b| b.week.usd.total_cmp(&a.week.usd));
        out.top_pipelines = by_pipeline.into_iter().map(|(pipeline, week)| PipelineRow { pipeline, week }).collect();
        out.top_pipelines.sort_by(|a, b| b.week.usd.total_cmp(&a.week.usd));
        out.top_pipelines.truncate(top);
        out.pools = pools
            .into_iter()
            .map(|(elastic_profile, (today_usd, week_usd))| PoolRow { elastic_profile, today_usd, week_usd })
            .collect();
        out
    }

    /// The day of `at`, made when new; days older than [`DAYS_KEPT`] before the newest go.
    fn day(&mut self, at: SystemTime) -> &mut Day {
        let d = day_of(at);
        let newest = self.days.keys().next_back().copied().unwrap_or(d).max(d);
        self.days.retain(|k, _| *k > newest - DAYS_KEPT);
        self.days.entry(d).or_default()
    }
}

/// Adds to a map keyed by elastic profile, holding at most [`MAX_PROFILES`] keys (one more
/// goes to [`OTHER`]).
fn add_bounded(map: &mut BTreeMap<String, f64>, key: &str, usd: f64) {
    let key = if map.len() < MAX_PROFILES || map.contains_key(key) { key } else { OTHER };
    *map.entry(key.to_string()).or_default() += usd;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn day(d: u64, hour: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(20_000 * 86_400 + d * 86_400 + hour * 3600)
    }

    #[test]
    fn today_and_the_week_per_pipeline_and_stage() {
        let mut l = Ledger::default();
        l.job(day(0, 10), "build", "test", "p1", 0.5);
        l.job(day(6, 9), "build", "test", "p1", 0.25);
        l.job(day(6, 10), "build", "deploy", "p1", 0.125);
        l.job(day(6, 11), "docs", "site", "p2", 1.0);
        l.pool_idle(day(6, 12), "p1", 0.0625);
        let s = l.summary(day(6, 23), 1);
        assert_eq!(s.today, Tally { usd: 1.375, jobs: 3 });
        assert_eq!(s.week, Tally { usd: 1.875, jobs: 4 });
        let build_test = s.stages.iter().find(|r| r.pipeline == "build" && r.stage == "test").expect("row");
        assert_eq!((build_test.today.usd, build_test.week.usd, build_test.week.jobs), (0.25, 0.75, 2));
        assert_eq!(s.top_pipelines, vec![PipelineRow { pipeline: "docs".into(), week: Tally { usd: 1.0, jobs: 1 } }]);
        assert_eq!(s.pools_today_usd, 0.0625);
        assert_eq!(l.jobs_total().get("p1"), Some(&0.875));
        assert_eq!(l.pools_total().get("p1"), Some(&0.0625));
        let next_week = l.summary(day(7, 1), 5);
        assert_eq!(next_week.week.jobs, 3, "day 0 left the seven days");
    }

    #[test]
    fn memory_is_bounded_in_days_and_rows() {
        let mut l = Ledger::default();
        for d in 0..30 {
            l.job(day(d, 1), "build", "test", "p1", 1.0);
        }
        assert_eq!(l.days.len(), DAYS_KEPT as usize);
        for i in 0..MAX_STAGES_PER_DAY + 50 {
            l.job(day(30, 2), &format!("pipeline-{i}"), "s", "p1", 1.0);
        }
        let today = &l.days[&day_of(day(30, 2))];
        assert_eq!(today.stages.len(), MAX_STAGES_PER_DAY + 1);
        assert_eq!(today.stages[&(OTHER.to_string(), String::new())].jobs, 50);
        assert_eq!(l.jobs_total()["p1"], 30.0 + (MAX_STAGES_PER_DAY + 50) as f64, "nothing is lost from totals");
    }
}
