//! Counting AWS calls: every call the plugin makes goes through [`CallStats::call`], which
//! counts it by operation (and its throttles and failures) and turns SDK errors into
//! [`AwsError`]s. The counts feed the cluster status report.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Mutex, PoisonError};

use aws_sdk_ecs::error::ProvideErrorMetadata;
use aws_smithy_runtime_api::client::result::SdkError;
use serde::Serialize;

use super::AwsError;

/// Counts for one operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OpCounts {
    /// Calls made.
    pub calls: u64,
    /// Calls AWS throttled (after the SDK's own retries).
    pub throttled: u64,
    /// Calls that failed for any reason.
    pub failed: u64,
}

/// Calls by operation.
#[derive(Debug, Default)]
pub struct CallStats {
    ops: Mutex<BTreeMap<&'static str, OpCounts>>,
}

impl CallStats {
    /// Runs one AWS call, counting it.
    ///
    /// # Errors
    /// The call's error, described.
    pub async fn call<T, E, R, F>(&self, operation: &'static str, call: F) -> Result<T, AwsError>
    where
        F: Future<Output = Result<T, SdkError<E, R>>>,
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: Debug,
    {
        let result = call.await.map_err(|e| AwsError::from_sdk(operation, &e));
        let mut ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        let counts = ops.entry(operation).or_default();
        counts.calls += 1;
        if let Err(e) = &result {
            counts.failed += 1;
            if e.throttled {
                counts.throttled += 1;
            }
            tracing::warn!(operation, code = e.code.as_deref().unwrap_or(""), error = %e.detail, "AWS call failed");
        }
        result
    }

    /// A copy of the counts.
    pub fn snapshot(&self) -> BTreeMap<&'static str, OpCounts> {
        self.ops.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Total calls of all operations.
    pub fn total(&self) -> u64 {
        self.snapshot().values().map(|c| c.calls).sum()
    }
}
