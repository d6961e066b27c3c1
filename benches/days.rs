//! More CI days like the reference one, so that a rule's figure can be told from the luck of one
//! trace: the reference day's model (its header in `tests/data/ec2_trace.csv`) played again with
//! other seeds.
//!
//! Each day keeps the reference day's shape (its jobs per half hour, as the rate of commits:
//! two peaks and a lunch dip) and draws everything else afresh: commits as a Poisson process at
//! that rate, each fanning out into 1–6 parallel jobs of one size requested within a minute,
//! three in ten followed by a second stage of 1–3 jobs once the first ends; durations log-normal
//! around 6 minutes (σ 0.8, the reference's spread) kept within 30 s and 1 h; sizes 45% 512/1024,
//! 30% 1024/1800, 17% 2048/3600, 8% 4096/7000.
//!
//! Shared by the EC2 cost bench and the job-wait bench (each includes this file).

/// One drawn job: as a trace's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drawn {
    /// Seconds after the day starts when GoCD asks for an agent.
    pub arrival: u64,
    /// Seconds it runs.
    pub duration: u64,
    /// CPU units and MiB of its elastic profile.
    pub cpu: u32,
    pub memory: u32,
}

/// The reference day's jobs per half hour (its arrivals counted by `arrival_s / 1800`).
const JOBS_PER_HALF_HOUR: [f64; 20] = [
    8.0, 58.0, 50.0, 86.0, 75.0, 83.0, 42.0, 21.0, 0.0, 13.0, 68.0, 122.0, 102.0, 99.0, 86.0, 30.0, 25.0, 19.0, 13.0,
    22.0,
];
/// Jobs per commit on average: 3.5 in the first stage, and 2 in a second stage three times in ten.
const JOBS_PER_COMMIT: f64 = 3.5 + 0.3 * 2.0;
const SECOND_STAGE: f64 = 0.3;
const MEDIAN_DURATION: f64 = 360.0;
const SIGMA: f64 = 0.8;
/// Task sizes and their shares.
const SIZES: [(f64, u32, u32); 4] = [(0.45, 512, 1024), (0.30, 1024, 1800), (0.17, 2048, 3600), (0.08, 4096, 7000)];

/// One generated day, in arrival order.
pub fn day(seed: u64) -> Vec<Drawn> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut jobs = Vec::new();
    for (half_hour, expected) in JOBS_PER_HALF_HOUR.iter().enumerate() {
        let rate = expected / JOBS_PER_COMMIT / 1800.0;
        if rate == 0.0 {
            continue;
        }
        let (start, end) = (half_hour as f64 * 1800.0, (half_hour + 1) as f64 * 1800.0);
        let mut t = start + exponential(&mut rng, rate);
        while t < end {
            commit(&mut rng, t as u64, &mut jobs);
            t += exponential(&mut rng, rate);
        }
    }
    jobs.sort_by_key(|j| j.arrival);
    jobs
}

/// The jobs of one commit: a first stage, and sometimes a second once the first has ended.
fn commit(rng: &mut fastrand::Rng, at: u64, jobs: &mut Vec<Drawn>) {
    let first_ends = stage(rng, at, 6, jobs);
    if rng.f64() < SECOND_STAGE {
        stage(rng, first_ends + 10, 3, jobs);
    }
}

/// 1 to `most` parallel jobs of one size requested within a minute of `at`; returns when the
/// last of them ends.
fn stage(rng: &mut fastrand::Rng, at: u64, most: u32, jobs: &mut Vec<Drawn>) -> u64 {
    let count = rng.u32(1..=most);
    let (cpu, memory) = size(rng);
    let mut last_end = at;
    for _ in 0..count {
        let arrival = at + rng.u64(0..60);
        let duration = (MEDIAN_DURATION * (SIGMA * normal(rng)).exp()).clamp(30.0, 3600.0) as u64;
        jobs.push(Drawn { arrival, duration, cpu, memory });
        last_end = last_end.max(arrival + duration);
    }
    last_end
}

fn size(rng: &mut fastrand::Rng) -> (u32, u32) {
    let mut x = rng.f64();
    for (share, cpu, memory) in SIZES {
        if x < share {
            return (cpu, memory);
        }
        x -= share;
    }
    let (_, cpu, memory) = SIZES[SIZES.len() - 1];
    (cpu, memory)
}

fn exponential(rng: &mut fastrand::Rng, rate: f64) -> f64 {
    -(1.0 - rng.f64()).ln() / rate
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut fastrand::Rng) -> f64 {
    let (u, v) = (1.0 - rng.f64(), rng.f64());
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}
