//! How the engine fails: an AWS call (kept whole, so a throttle stays a throttle up to the
//! metrics label and the status report), a call to GoCD, or a profile the engine cannot act on
//! as it stands (the message says what to change).

use super::gocd::HostCallError;
use crate::aws::AwsError;
use crate::cluster::cleanup::retirement::Retirement;
use crate::cluster::job::guardrails::GuardrailError;
use crate::cluster::job::snapshot::OverLimit;
use crate::settings::FieldError;

/// Anything a cluster profile's engine can fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    /// AWS refused or failed a call.
    #[error(transparent)]
    Aws(#[from] AwsError),
    /// A call to the GoCD server failed.
    #[error(transparent)]
    Gocd(#[from] HostCallError),
    /// The engine would not start an agent for the job as the profiles stand; it reads as the
    /// sentence that says what to change. The job's console and server health said so too.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The profiles cannot be acted on as they stand; the message says what to change.
    #[error("{0}")]
    Config(String),
}

/// Why no agent was started for a job, kept typed so callers match on the cause, not on words.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Refusal {
    /// GoCD deleted or replaced the cluster profile: its engine takes no new work.
    #[error("no agent started for job {job}: this cluster profile is retired ({why:?})")]
    Retired {
        /// The job's locator.
        job: String,
        /// Deleted or replaced.
        why: Retirement,
    },
    /// The elastic profile does not fit the cluster profile (launch type, sizes, keys a
    /// capacity provider refuses).
    #[error("no agent started for job {job}: the elastic profile does not fit this cluster profile: {misfit}")]
    Misfit {
        /// The job's locator.
        job: String,
        /// Each key that does not fit, and why.
        misfit: Misfit,
    },
    /// A given task definition the cluster profile does not allow.
    #[error(transparent)]
    Guardrail(#[from] GuardrailError),
    /// A launch over AWS's limits, refused before it is sent.
    #[error(transparent)]
    OverLimit(#[from] OverLimit),
}

impl From<GuardrailError> for EngineError {
    fn from(e: GuardrailError) -> Self {
        EngineError::Refused(e.into())
    }
}

impl From<OverLimit> for EngineError {
    fn from(e: OverLimit) -> Self {
        EngineError::Refused(e.into())
    }
}

/// What makes an elastic profile unfit for a cluster profile, by key; it reads as one
/// sentence for a console line: `Key: message; Key: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", in_words(.0))]
pub struct Misfit(pub Vec<FieldError>);

/// Field errors as one sentence for a console line: `KEY: message; KEY: message`.
fn in_words(problems: &[FieldError]) -> String {
    problems.iter().map(|e| format!("{}: {}", e.key, e.message)).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misfit_reads_key_by_key() {
        let problem = |key: &str, message: &str| FieldError { key: key.into(), message: message.into() };
        let misfit = Misfit(vec![problem("Cpu", "too small."), problem("Memory", "too large.")]);
        assert_eq!(misfit.to_string(), "Cpu: too small.; Memory: too large.");
    }
}
