//! How the engine fails: an AWS call (kept whole, so a throttle stays a throttle up to the
//! metrics label and the status report), a call to GoCD, or a profile the engine cannot act on
//! as it stands (the message says what to change).

use super::gocd::HostCallError;
use super::guardrails::GuardrailError;
use super::snapshot::OverLimit;
use crate::aws::AwsError;

/// Anything a cluster profile's engine can fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    /// AWS refused or failed a call.
    #[error(transparent)]
    Aws(#[from] AwsError),
    /// A call to the GoCD server failed.
    #[error(transparent)]
    Gocd(#[from] HostCallError),
    /// The elastic profile does not fit the cluster profile (launch type, sizes, allow-lists);
    /// the message says what to change. The job's console and server health said so too.
    #[error("{0}")]
    Refused(String),
    /// The profiles cannot be acted on as they stand; the message says what to change.
    #[error("{0}")]
    Config(String),
}

/// A given task definition the cluster profile does not allow is a refusal: its sentence goes
/// to the job's console and server health as it reads.
impl From<GuardrailError> for EngineError {
    fn from(e: GuardrailError) -> Self {
        EngineError::Refused(e.to_string())
    }
}

/// A launch over AWS's limits is refused before it is sent, saying what to shorten.
impl From<OverLimit> for EngineError {
    fn from(e: OverLimit) -> Self {
        EngineError::Refused(e.to_string())
    }
}
