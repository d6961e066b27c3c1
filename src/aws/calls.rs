//! Every AWS call the plugin makes goes through [`CallStats::call`]: it waits for the
//! account's budget ([`Budget`]), sends, retries throttling, 5xx and dropped connections with
//! jittered exponential backoff (the SDK's own retries are off, so each attempt is counted and
//! paced), pauses the whole category while AWS throttles, and counts calls, throttles and
//! retries by operation for the status report. A retried RunTask carries the same client token.
//! Within a job's trace each attempt is a span with AWS's request id (`telemetry::calls`).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use aws_sdk_ecs::error::ProvideErrorMetadata;
use aws_sdk_ecs::operation::RequestId;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_runtime_api::http::Response;
use serde::Serialize;
use tracing::Instrument;

use super::budget::{Budget, Category};
use super::AwsError;

/// Attempts per call before the error is returned (the caller or the next ping tries again).
pub const MAX_ATTEMPTS: u32 = 6;
/// First backoff; doubles per attempt, with full jitter.
const BASE_BACKOFF: Duration = Duration::from_millis(200);
/// Longest single backoff.
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// Counts for one operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OpCounts {
    /// Attempts sent to AWS (retries included).
    pub calls: u64,
    /// Attempts AWS throttled.
    pub throttled: u64,
    /// Attempts that were retries.
    pub retries: u64,
    /// Calls that failed for good (after retries).
    pub failed: u64,
}

/// Calls by operation (of one set of clients), and the account's budget (shared by every set
/// of clients of the account and region).
#[derive(Debug, Default)]
pub struct CallStats {
    ops: Mutex<BTreeMap<&'static str, OpCounts>>,
    budget: Arc<Budget>,
}

impl CallStats {
    /// Counts of their own, against the account's `budget`.
    pub fn new(budget: Arc<Budget>) -> Self {
        CallStats { ops: Mutex::default(), budget }
    }

    /// Runs one AWS call (`send` builds and sends it; it is called again for each retry).
    ///
    /// # Errors
    /// The last attempt's error, described, when it is not transient or attempts ran out.
    pub async fn call<T, E, F, Fut>(&self, operation: &'static str, send: F) -> Result<T, AwsError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, Response>>>,
        T: RequestId,
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        self.call_unless(operation, |_| false, send).await
    }

    /// [`CallStats::call`] for a call where some errors are an ordinary answer (a lookup that
    /// finds nothing): an error `expected` accepts comes back at once, not retried, not counted
    /// as failed and not logged as a warning.
    ///
    /// # Errors
    /// The expected error, or as [`CallStats::call`].
    pub async fn call_unless<T, E, F, Fut>(
        &self,
        operation: &'static str,
        expected: impl Fn(&AwsError) -> bool,
        mut send: F,
    ) -> Result<T, AwsError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, Response>>>,
        T: RequestId,
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.attempt(operation, attempt, send()).await {
                Ok(value) => return Ok(value),
                Err(e) if expected(&e) => return Err(e),
                Err(e) if e.transient() && attempt < MAX_ATTEMPTS => self.back_off(operation, attempt, &e).await,
                Err(e) => return Err(self.give_up(operation, attempt, e)),
            }
        }
    }

    /// Waits for `amount` tokens of a resource bucket of the account's budget (EC2's instances
    /// launched or terminated), on top of the tokens its call takes.
    pub async fn spend(&self, category: Category, amount: u32) {
        self.budget.acquire_many(category, amount).await;
    }

    /// One attempt: waits for the budget, sends, counts. `attempt` is 1 for the first.
    ///
    /// # Errors
    /// The attempt's error, described (not retried here).
    pub async fn attempt<T, E, Fut>(&self, operation: &'static str, attempt: u32, send: Fut) -> Result<T, AwsError>
    where
        Fut: Future<Output = Result<T, SdkError<E, Response>>>,
        T: RequestId,
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        self.attempt_in(&[Category::of(operation)], operation, attempt, send).await
    }

    /// [`CallStats::attempt`] charged to `buckets` rather than the operation's own category:
    /// RunTask, whose AWS rate depends on where its task runs (Fargate's, or the EC2 bucket
    /// StartTask and StopTask share; both when the cluster's default strategy decides).
    ///
    /// # Errors
    /// As [`CallStats::attempt`].
    pub async fn attempt_in<T, E, Fut>(
        &self,
        buckets: &[Category],
        operation: &'static str,
        attempt: u32,
        send: Fut,
    ) -> Result<T, AwsError>
    where
        Fut: Future<Output = Result<T, SdkError<E, Response>>>,
        T: RequestId,
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        for bucket in buckets {
            self.budget.acquire(*bucket).await;
        }
        let span = crate::telemetry::calls::span(operation, attempt);
        // Boxed: an SDK call's future is large in debug builds, and this one is in every call.
        let answer = Box::pin(send.instrument(span.clone())).await;
        let request_id = answer.request_id().map(str::to_string);
        let result = answer.map_err(|e| AwsError::from_sdk(operation, &e));
        let code = result.as_ref().err().map(|e| e.code.clone().unwrap_or_else(|| format!("{:?}", e.failure)));
        crate::telemetry::calls::answered(&span, request_id.as_deref(), code.as_deref());
        self.count(operation, &result, attempt > 1);
        result
    }

    /// Sleeps a jittered exponential backoff after a transient failure; a throttle also pauses
    /// the whole category for that long.
    pub async fn back_off(&self, operation: &'static str, attempt: u32, error: &AwsError) {
        self.back_off_in(&[Category::of(operation)], operation, attempt, error).await;
    }

    /// [`CallStats::back_off`] for an attempt charged to `buckets` ([`CallStats::attempt_in`]):
    /// a throttle pauses each of them.
    pub async fn back_off_in(&self, buckets: &[Category], operation: &'static str, attempt: u32, error: &AwsError) {
        let backoff = backoff(attempt);
        if error.throttled() {
            for bucket in buckets {
                self.budget.throttled(*bucket, backoff);
            }
        }
        tracing::info!(operation, attempt, backoff_ms = backoff.as_millis() as u64, error = %error.detail, "AWS call will be retried");
        tokio::time::sleep(backoff).await;
    }

    /// Records a call that failed for good and hands its error back.
    pub fn give_up(&self, operation: &'static str, attempt: u32, error: AwsError) -> AwsError {
        self.lock().entry(operation).or_default().failed += 1;
        tracing::warn!(operation, attempt, code = error.code.as_deref().unwrap_or(""), error = %error.detail, "AWS call failed");
        error
    }

    /// Whether calls of this operation's category are paused by throttling right now.
    pub fn is_throttled(&self, operation: &str) -> bool {
        self.budget.is_paused(Category::of(operation))
    }

    /// Adds another set's counts to these (calls made before these clients existed).
    pub fn absorb(&self, other: &CallStats) {
        let theirs = other.snapshot();
        let mut ops = self.lock();
        for (op, c) in theirs {
            let mine = ops.entry(op).or_default();
            mine.calls += c.calls;
            mine.throttled += c.throttled;
            mine.retries += c.retries;
            mine.failed += c.failed;
        }
    }

    /// A copy of the counts.
    pub fn snapshot(&self) -> BTreeMap<&'static str, OpCounts> {
        self.lock().clone()
    }

    /// Counts summed by category.
    pub fn by_category(&self) -> BTreeMap<Category, OpCounts> {
        let mut out: BTreeMap<Category, OpCounts> = BTreeMap::new();
        for (op, c) in self.snapshot() {
            let e = out.entry(Category::of(op)).or_default();
            e.calls += c.calls;
            e.throttled += c.throttled;
            e.retries += c.retries;
            e.failed += c.failed;
        }
        out
    }

    /// Total attempts of all operations.
    pub fn total(&self) -> u64 {
        self.snapshot().values().map(|c| c.calls).sum()
    }

    fn count<T>(&self, operation: &'static str, result: &Result<T, AwsError>, retry: bool) {
        let mut ops = self.lock();
        let counts = ops.entry(operation).or_default();
        counts.calls += 1;
        if retry {
            counts.retries += 1;
        }
        if matches!(result, Err(e) if e.throttled()) {
            counts.throttled += 1;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, OpCounts>> {
        self.ops.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Full-jitter exponential backoff: uniform in [base·2^(n-1) / 2, base·2^(n-1)], capped.
fn backoff(attempt: u32) -> Duration {
    let ceiling = BASE_BACKOFF.saturating_mul(1 << attempt.min(10).saturating_sub(1)).min(MAX_BACKOFF);
    let jitter = (uuid::Uuid::new_v4().as_u128() % 1000) as f64 / 1000.0;
    ceiling.mul_f64(0.5 + jitter / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ecs::operation::describe_task_definition::{DescribeTaskDefinitionError, DescribeTaskDefinitionOutput};
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    /// What ECS answers DescribeTaskDefinition for a family it does not have.
    async fn client_exception() -> Result<DescribeTaskDefinitionOutput, SdkError<DescribeTaskDefinitionError, Response>>
    {
        let meta = ErrorMetadata::builder().code("ClientException").message("Unable to describe task definition.");
        let status = StatusCode::try_from(400).expect("a status code");
        Err(SdkError::service_error(
            DescribeTaskDefinitionError::generic(meta.build()),
            Response::new(status, SdkBody::empty()),
        ))
    }

    #[tokio::test]
    async fn an_expected_answer_is_not_a_failure() {
        let calls = CallStats::default();
        let absent = |e: &AwsError| e.failure == crate::aws::Failure::NotFound;
        let found = calls.call_unless("DescribeTaskDefinition", absent, client_exception).await;
        assert_eq!(found.map_err(|e| e.code), Err(Some("ClientException".to_string())));
        let counts = calls.snapshot()["DescribeTaskDefinition"];
        assert_eq!(counts, OpCounts { calls: 1, throttled: 0, retries: 0, failed: 0 });
        // The same answer where nothing expects it is a failure.
        assert!(calls.call("DescribeTaskDefinition", client_exception).await.is_err());
        assert_eq!(calls.snapshot()["DescribeTaskDefinition"].failed, 1);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let first = backoff(1);
        assert!(first >= Duration::from_millis(100) && first <= Duration::from_millis(200), "{first:?}");
        let fifth = backoff(5);
        assert!(fifth >= Duration::from_millis(1600) && fifth <= Duration::from_millis(3200), "{fifth:?}");
        assert!(backoff(30) <= MAX_BACKOFF);
    }
}
