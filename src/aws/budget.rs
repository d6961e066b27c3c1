//! The API budget (DESIGN.md §5): client-side token buckets per (account, region, category),
//! set just below AWS's published limits and shared by every cluster profile of the account,
//! plus a pause per category while AWS says we are too fast, so throttling never snowballs.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

/// Kinds of calls that share one AWS rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Category {
    /// ListTasks, DescribeTasks, DescribeTaskDefinition, ListContainerInstances, ... (AWS: burst 100, 20/s).
    EcsRead,
    /// RunTask, StartTask, StopTask (AWS: burst 100, 40/s).
    EcsLaunch,
    /// RegisterTaskDefinition, DeregisterTaskDefinition (AWS: burst 20, 1/s).
    EcsRegister,
    /// Other ECS writes: container instance registration changes, tagging.
    EcsWrite,
    /// EC2 Describe* (AWS: burst 100, 20/s).
    Ec2Read,
    /// RunInstances, TerminateInstances, CreateTags (AWS: non-mutating 100/20; mutating burst 50, 5/s).
    Ec2Write,
    /// STS.
    Sts,
}

impl Category {
    /// The category of an operation by name.
    pub fn of(operation: &str) -> Category {
        match operation {
            "RunTask" | "StartTask" | "StopTask" => Category::EcsLaunch,
            "RegisterTaskDefinition" | "DeregisterTaskDefinition" => Category::EcsRegister,
            "DeregisterContainerInstance" | "TagResource" | "UpdateContainerInstancesState" => Category::EcsWrite,
            "RunInstances" | "TerminateInstances" | "CreateTags" => Category::Ec2Write,
            "AssumeRole" | "GetCallerIdentity" => Category::Sts,
            op if op.starts_with("Describe") && EC2_READS.contains(&op) => Category::Ec2Read,
            _ => Category::EcsRead,
        }
    }

    /// (burst, refill per second): just below AWS's published limits.
    pub fn limits(self) -> (f64, f64) {
        match self {
            Category::EcsRead => (95.0, 19.0),
            Category::EcsLaunch => (95.0, 38.0),
            Category::EcsRegister => (18.0, 0.9),
            Category::EcsWrite => (45.0, 9.0),
            Category::Ec2Read => (95.0, 19.0),
            Category::Ec2Write => (45.0, 4.5),
            Category::Sts => (45.0, 9.0),
        }
    }
}

const EC2_READS: &[&str] = &[
    "DescribeVpcs",
    "DescribeSubnets",
    "DescribeSecurityGroups",
    "DescribeInstances",
    "DescribeImages",
    "DescribeSpotInstanceRequests",
];

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    burst: f64,
    rate: f64,
    at: Instant,
    paused_until: Option<Instant>,
}

impl Bucket {
    fn new(category: Category, now: Instant) -> Self {
        let (burst, rate) = category.limits();
        Bucket { tokens: burst, burst, rate, at: now, paused_until: None }
    }

    /// Takes a token now, or says how long to wait for one.
    fn take(&mut self, now: Instant) -> Option<Duration> {
        if let Some(until) = self.paused_until {
            if until > now {
                return Some(until - now);
            }
            self.paused_until = None;
        }
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
    }
}

/// Token buckets of one account and region.
#[derive(Debug, Default)]
pub struct Budget {
    buckets: Mutex<HashMap<Category, Bucket>>,
}

impl Budget {
    /// Waits until a call of `category` may go out.
    pub async fn acquire(&self, category: Category) {
        loop {
            let wait = {
                let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                buckets.entry(category).or_insert_with(|| Bucket::new(category, now)).take(now)
            };
            match wait {
                None => return,
                Some(d) => tokio::time::sleep(d).await,
            }
        }
    }

    /// AWS throttled a call of `category`: hold every call of it for `pause` and drain the
    /// bucket, so the next calls trickle in at the refill rate instead of bursting again.
    pub fn throttled(&self, category: Category, pause: Duration) {
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let bucket = buckets.entry(category).or_insert_with(|| Bucket::new(category, now));
        bucket.tokens = 0.0;
        bucket.at = now;
        let until = now + pause;
        bucket.paused_until = Some(bucket.paused_until.map_or(until, |u| u.max(until)));
    }

    /// Whether `category` is paused for throttling right now.
    pub fn is_paused(&self, category: Category) -> bool {
        let buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        buckets.get(&category).and_then(|b| b.paused_until).is_some_and(|u| u > Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_by_operation() {
        assert_eq!(Category::of("RunTask"), Category::EcsLaunch);
        assert_eq!(Category::of("DescribeTasks"), Category::EcsRead);
        assert_eq!(Category::of("DescribeSubnets"), Category::Ec2Read);
        assert_eq!(Category::of("RegisterTaskDefinition"), Category::EcsRegister);
        assert_eq!(Category::of("TerminateInstances"), Category::Ec2Write);
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_then_the_refill_rate() {
        let budget = Budget::default();
        let start = Instant::now();
        for _ in 0..95 {
            budget.acquire(Category::EcsLaunch).await;
        }
        assert!(start.elapsed() < Duration::from_millis(1), "the burst goes out at once");
        for _ in 0..38 {
            budget.acquire(Category::EcsLaunch).await;
        }
        let took = start.elapsed().as_secs_f64();
        assert!((0.95..=1.05).contains(&took), "38 more at 38/s take a second, took {took}");
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_pauses_the_category_only() {
        let budget = Budget::default();
        budget.throttled(Category::EcsLaunch, Duration::from_secs(2));
        assert!(budget.is_paused(Category::EcsLaunch));
        let start = Instant::now();
        budget.acquire(Category::EcsRead).await;
        assert!(start.elapsed() < Duration::from_millis(1), "reads are not held by a launch throttle");
        budget.acquire(Category::EcsLaunch).await;
        assert!(start.elapsed() >= Duration::from_secs(2), "launches wait out the pause");
        assert!(!budget.is_paused(Category::EcsLaunch));
    }
}
