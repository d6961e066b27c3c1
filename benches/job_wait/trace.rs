//! The day of jobs: the reference trace (`tests/data/ec2_trace.csv`, the EC2 cost bench's), or
//! a CSV of the same columns from `--trace FILE`: `arrival_s,duration_s,cpu,memory`, lines
//! starting with `#` and the header ignored. A job's duration is how long it runs once an agent
//! has taken it.

/// One job.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// Seconds after the day starts when GoCD sends create-agent.
    pub arrival: u64,
    /// Seconds it runs on its agent.
    pub duration: u64,
    /// CPU units and MiB of its elastic profile (one pool per size).
    pub cpu: u32,
    pub memory: u32,
}

/// The reference day.
pub const REFERENCE: &str = include_str!("../../tests/data/ec2_trace.csv");

/// The pipeline a job of the trace stands for. The trace has no pipeline column; its jobs were
/// generated per commit, each commit fanning out into jobs of one size, so the size (elastic
/// profile) is what tells one kind of pipeline from another: one pipeline per size, named by it.
pub fn pipeline(job: &Job) -> String {
    format!("pipeline-{}cpu-{}mib", job.cpu, job.memory)
}

/// Parses a trace; jobs in arrival order.
pub fn parse(text: &str) -> Result<Vec<Job>, String> {
    let mut jobs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("arrival") {
            continue;
        }
        let bad = || format!("line {}: expected arrival_s,duration_s,cpu,memory: {line}", n + 1);
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let [arrival, duration, cpu, memory] = f[..] else { return Err(bad()) };
        jobs.push(Job {
            arrival: arrival.parse().map_err(|_| bad())?,
            duration: duration.parse().map_err(|_| bad())?,
            cpu: cpu.parse().map_err(|_| bad())?,
            memory: memory.parse().map_err(|_| bad())?,
        });
    }
    jobs.sort_by_key(|j| j.arrival);
    Ok(jobs)
}
