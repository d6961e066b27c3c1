//! The API budget (`docs/design.md`, "Accounts, credentials and the API budget";
//! `docs/aws-rules.md`, "Quotas"): client-side token buckets per
//! (account id, region, category), set just below AWS's published limits and shared by every
//! cluster profile and every credential set of the account (two roles in one account share one
//! budget: `Accounts` hands them the same [`Budget`]), plus a pause per category while AWS says
//! we are too fast, so throttling never snowballs.

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
    /// RunTask of a task that runs on Fargate or Fargate Spot (AWS: 20 calls a second, burst
    /// and sustained; each call launches one task, within Fargate's 100/20 launch bucket).
    /// Through the cluster's default strategy a RunTask draws on this and on
    /// [`Category::EcsEc2Launch`] (`launch::run_task_buckets`).
    FargateRunTask,
    /// StartTask on our EC2 container instances, and RunTask through an Auto Scaling group or
    /// ECS Managed Instances provider (AWS: burst 100, 40/s, shared with StopTask).
    /// Draws on one bucket with [`Category::EcsStop`], and always leaves it
    /// [`STOP_RESERVE`] tokens.
    EcsEc2Launch,
    /// StopTask (AWS: shares the 100/40 bucket with EC2 launches). Launches leave it a reserve
    /// of that bucket, so stopping tasks never starves behind a burst of launches.
    EcsStop,
    /// RegisterTaskDefinition, DeregisterTaskDefinition (AWS: burst 20, 1/s).
    EcsRegister,
    /// Other ECS writes: container instance registration changes, tagging.
    EcsWrite,
    /// EC2 Describe* (AWS: burst 100, 20/s).
    Ec2Read,
    /// RunInstances (AWS: a request bucket of its own, burst 5, 2/s; EC2's "Request throttling"
    /// page). A launch of several instances is one call.
    Ec2Launch,
    /// TerminateInstances, CreateTags (AWS: a bucket per action, TerminateInstances burst 100,
    /// 5/s, CreateTags 100, 10/s; other mutating actions 50, 5/s).
    Ec2Write,
    /// Instances RunInstances starts, one token each, on top of [`Category::Ec2Launch`] (AWS's
    /// resource bucket: 1000 instances, 2/s). Taken with [`Budget::acquire_many`].
    Ec2InstancesLaunched,
    /// Instances TerminateInstances ends, one token each, on top of [`Category::Ec2Write`] (AWS's
    /// resource bucket: 1000 instances, 20/s). Taken with [`Budget::acquire_many`].
    Ec2InstancesTerminated,
    /// STS.
    Sts,
    /// SQS ReceiveMessage and DeleteMessageBatch on the event queue (`EventQueueUrl`). AWS
    /// publishes no per-account rate for them; the budget keeps the plugin's pollers (one long
    /// poll per profile at a time) from ever becoming a burst.
    Sqs,
}

impl Category {
    /// The category of an operation by name.
    pub fn of(operation: &str) -> Category {
        match operation {
            "RunTask" => Category::FargateRunTask,
            "StartTask" => Category::EcsEc2Launch,
            "StopTask" => Category::EcsStop,
            "RegisterTaskDefinition" | "DeregisterTaskDefinition" => Category::EcsRegister,
            "DeregisterContainerInstance" | "TagResource" | "UpdateContainerInstancesState" => Category::EcsWrite,
            // StartInstances has a bucket of RunInstances' size (EC2's "Request throttling");
            // sharing RunInstances' keeps both within theirs.
            "RunInstances" | "StartInstances" => Category::Ec2Launch,
            "TerminateInstances" | "StopInstances" | "CreateTags" => Category::Ec2Write,
            "AssumeRole" | "GetCallerIdentity" => Category::Sts,
            "ReceiveMessage" | "DeleteMessageBatch" | "DeleteMessage" | "GetQueueAttributes" => Category::Sqs,
            op if op.starts_with("Describe") && EC2_READS.contains(&op) => Category::Ec2Read,
            _ => Category::EcsRead,
        }
    }

    /// (burst, refill per second): just below AWS's published limits.
    pub fn limits(self) -> (f64, f64) {
        match self {
            Category::EcsRead => (95.0, 19.0),
            Category::FargateRunTask => (19.0, 19.0),
            // One bucket for both (see `bucket`), below the 100/40 they share at AWS.
            Category::EcsEc2Launch | Category::EcsStop => (95.0, 38.0),
            Category::EcsRegister => (18.0, 0.9),
            Category::EcsWrite => (45.0, 9.0),
            Category::Ec2Read => (95.0, 19.0),
            Category::Ec2Launch => (4.0, 1.8),
            Category::Ec2Write => (45.0, 4.5),
            Category::Ec2InstancesLaunched => (950.0, 1.9),
            Category::Ec2InstancesTerminated => (950.0, 19.0),
            Category::Sts => (45.0, 9.0),
            Category::Sqs => (45.0, 9.0),
        }
    }
}

impl Category {
    /// The category whose bucket calls of this one draw on (calls that share an AWS quota
    /// share one bucket).
    pub fn bucket(self) -> Category {
        match self {
            Category::EcsStop => Category::EcsEc2Launch,
            other => other,
        }
    }

    /// Tokens a call of this category must leave in its bucket.
    fn reserve(self) -> f64 {
        match self {
            Category::EcsEc2Launch => STOP_RESERVE,
            _ => 0.0,
        }
    }
}

/// Tokens of the shared EC2-launch and StopTask bucket that launches never take.
pub const STOP_RESERVE: f64 = 10.0;

const EC2_READS: &[&str] = &[
    "DescribeVpcs",
    "DescribeSubnets",
    "DescribeSecurityGroups",
    "DescribeInstances",
    "DescribeImages",
    "DescribeInstanceTypes",
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
    /// A bucket first used at `now`, by a budget made at `born`. Fargate's RunTask bucket starts
    /// with only what AWS refilled since then: a process started after another was killed (or a
    /// plugin restart) cannot know how much of AWS's 20 the last second spent, and its backlog of
    /// waiting jobs would otherwise go out as a burst AWS throttles. Every other bucket is large
    /// beside what one second of the plugin spends, and starts full.
    fn new(category: Category, born: Instant, now: Instant) -> Self {
        let (burst, rate) = category.limits();
        let tokens = match category {
            Category::FargateRunTask => (now.saturating_duration_since(born).as_secs_f64() * rate).min(burst),
            _ => burst,
        };
        Bucket { tokens, burst, rate, at: now, paused_until: None }
    }

    /// Takes `amount` tokens now (at most the burst), leaving `reserve` in the bucket, or says
    /// how long to wait for them.
    fn take(&mut self, now: Instant, reserve: f64, amount: f64) -> Option<Duration> {
        if let Some(until) = self.paused_until {
            if until > now {
                return Some(until - now);
            }
            self.paused_until = None;
        }
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.at = now;
        // A token refilled over exactly the wait computed below may come to 0.999…: take it,
        // rather than wait a few nanoseconds (which a paused clock never advances) again and again.
        let amount = amount.min(self.burst - reserve);
        let need = amount + reserve;
        if self.tokens >= need - 1e-9 {
            self.tokens = (self.tokens - amount).max(0.0);
            None
        } else {
            let wait = Duration::from_secs_f64((need - self.tokens) / self.rate);
            Some(wait.max(Duration::from_millis(1)))
        }
    }
}

/// Token buckets of one account and region.
#[derive(Debug)]
pub struct Budget {
    buckets: Mutex<HashMap<Category, Bucket>>,
    /// When this budget (this process's first call to the account) was made.
    born: Instant,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { buckets: Mutex::new(HashMap::new()), born: Instant::now() }
    }
}

impl Budget {
    /// Waits until a call of `category` may go out.
    pub async fn acquire(&self, category: Category) {
        self.acquire_many(category, 1).await;
    }

    /// Waits until `amount` tokens of `category` are there, and takes them: instances a
    /// RunInstances or TerminateInstances call counts against EC2's resource buckets. More than
    /// a burst waits for a full bucket and takes it all.
    pub async fn acquire_many(&self, category: Category, amount: u32) {
        loop {
            let wait = {
                let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                let pool = category.bucket();
                let bucket = buckets.entry(pool).or_insert_with(|| Bucket::new(pool, self.born, now));
                bucket.take(now, category.reserve(), f64::from(amount))
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
        let pool = category.bucket();
        let bucket = buckets.entry(pool).or_insert_with(|| Bucket::new(pool, self.born, now));
        bucket.tokens = 0.0;
        bucket.at = now;
        let until = now + pause;
        bucket.paused_until = Some(bucket.paused_until.map_or(until, |u| u.max(until)));
    }

    /// Whether `category` is paused for throttling right now.
    pub fn is_paused(&self, category: Category) -> bool {
        let buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        buckets.get(&category.bucket()).and_then(|b| b.paused_until).is_some_and(|u| u > Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_by_operation() {
        assert_eq!(Category::of("RunTask"), Category::FargateRunTask);
        assert_eq!(Category::of("StartTask"), Category::EcsEc2Launch);
        assert_eq!(Category::of("StopTask"), Category::EcsStop);
        assert_eq!(Category::of("DescribeTasks"), Category::EcsRead);
        assert_eq!(Category::of("DescribeSubnets"), Category::Ec2Read);
        assert_eq!(Category::of("RegisterTaskDefinition"), Category::EcsRegister);
        assert_eq!(Category::of("TerminateInstances"), Category::Ec2Write);
        assert_eq!(Category::of("RunInstances"), Category::Ec2Launch);
        assert_eq!(Category::of("StartInstances"), Category::Ec2Launch, "EC2: burst 5, 2/s, as RunInstances");
        assert_eq!(Category::of("StopInstances"), Category::Ec2Write);
        assert_eq!(Category::of("ReceiveMessage"), Category::Sqs);
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_then_the_refill_rate() {
        let budget = Budget::default();
        tokio::time::advance(Duration::from_secs(1)).await;
        let start = Instant::now();
        for _ in 0..19 {
            budget.acquire(Category::FargateRunTask).await;
        }
        assert!(start.elapsed() < Duration::from_millis(1), "the burst goes out at once");
        for _ in 0..19 {
            budget.acquire(Category::FargateRunTask).await;
        }
        let took = start.elapsed().as_secs_f64();
        assert!((0.95..=1.05).contains(&took), "19 more at 19/s take a second, took {took}");
    }

    /// The soak's SIGKILLs: the new process met a backlog of waiting jobs with a full RunTask
    /// bucket while the killed one had spent AWS's in its last second, and AWS throttled.
    #[tokio::test(start_paused = true)]
    async fn a_new_process_launches_only_what_aws_refilled_since_it_started() {
        let budget = Budget::default();
        let start = Instant::now();
        for _ in 0..19 {
            budget.acquire(Category::FargateRunTask).await;
        }
        let took = start.elapsed().as_secs_f64();
        assert!((0.95..=1.05).contains(&took), "19 launches in the first second, not at once: took {took}");
        let later = Budget::default();
        tokio::time::advance(Duration::from_secs(3)).await;
        let start = Instant::now();
        for _ in 0..19 {
            later.acquire(Category::FargateRunTask).await;
        }
        assert!(start.elapsed() < Duration::from_millis(1), "a second after it started, a full burst");
        let fresh = Budget::default();
        for _ in 0..95 {
            fresh.acquire(Category::EcsRead).await;
        }
        assert!(start.elapsed() < Duration::from_millis(1), "other buckets start full");
    }

    #[tokio::test(start_paused = true)]
    async fn run_instances_keeps_under_ec2s_five_then_two_a_second() {
        let budget = Budget::default();
        let start = Instant::now();
        for _ in 0..4 {
            budget.acquire(Category::Ec2Launch).await;
        }
        assert!(start.elapsed() < Duration::from_millis(1), "4 at once, under EC2's burst of 5");
        for _ in 0..9 {
            budget.acquire(Category::Ec2Launch).await;
        }
        let took = start.elapsed().as_secs_f64();
        assert!((4.9..=5.1).contains(&took), "9 more at 1.8/s take 5 s (EC2 refills 2/s), took {took}");
        budget.acquire(Category::Ec2Write).await;
        assert!((start.elapsed().as_secs_f64() - took) < 0.001, "TerminateInstances is not held by launches");
    }

    #[tokio::test(start_paused = true)]
    async fn instances_count_against_ec2s_resource_buckets() {
        let budget = Budget::default();
        let start = Instant::now();
        budget.acquire_many(Category::Ec2InstancesLaunched, 900).await;
        assert!(start.elapsed() < Duration::from_millis(1), "900 instances at once, under EC2's 1000");
        budget.acquire_many(Category::Ec2InstancesLaunched, 69).await;
        let took = start.elapsed().as_secs_f64();
        assert!((9.9..=10.1).contains(&took), "19 instances more than the 950 kept wait 10 s at 1.9/s, took {took}");
        budget.acquire_many(Category::Ec2InstancesLaunched, 5000).await;
        assert!(start.elapsed().as_secs_f64() <= took + 501.0, "more than a burst waits for a full bucket, no more");
    }

    #[tokio::test(start_paused = true)]
    async fn ec2_launches_leave_stops_a_reserve_of_their_shared_bucket() {
        let budget = Budget::default();
        let start = Instant::now();
        for _ in 0..85 {
            budget.acquire(Category::EcsEc2Launch).await;
        }
        assert!(start.elapsed() < Duration::from_millis(1), "85 launches at once");
        for _ in 0..10 {
            budget.acquire(Category::EcsStop).await;
        }
        assert!(start.elapsed() < Duration::from_millis(1), "the 10 reserved stops go out at once too");
        budget.acquire(Category::EcsEc2Launch).await;
        assert!(start.elapsed() >= Duration::from_millis(280), "the next launch waits for the refill");
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_pauses_the_category_only() {
        let budget = Budget::default();
        budget.throttled(Category::FargateRunTask, Duration::from_secs(2));
        assert!(budget.is_paused(Category::FargateRunTask));
        let start = Instant::now();
        budget.acquire(Category::EcsRead).await;
        assert!(start.elapsed() < Duration::from_millis(1), "reads are not held by a launch throttle");
        budget.acquire(Category::EcsStop).await;
        assert!(start.elapsed() < Duration::from_millis(1), "stops are not held by a Fargate throttle");
        budget.acquire(Category::FargateRunTask).await;
        assert!(start.elapsed() >= Duration::from_secs(2), "launches wait out the pause");
        assert!(!budget.is_paused(Category::FargateRunTask));
    }
}
