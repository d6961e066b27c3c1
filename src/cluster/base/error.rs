//! How the engine fails: an AWS call (kept whole, so a throttle stays a throttle up to the
//! metrics label and the status report), a call to GoCD, or a profile the engine cannot act on
//! as it stands (the message says what to change).

use super::gocd::HostCallError;
use crate::aws::AwsError;
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

/// Why a task definition an elastic profile names may not run. Each reads as one sentence for
/// the job's console and server health, saying what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardrailError {
    /// It runs what the cluster profile's allow-lists or `AllowPrivileged` do not allow.
    #[error("task definition {task_definition} is not allowed by this cluster profile: {}", .problems.join("; "))]
    NotAllowed {
        /// Its ARN.
        task_definition: String,
        /// Every refusal, one clause each.
        problems: Vec<String>,
    },
    /// Its `requiresCompatibilities` lack what a provider of the strategy needs.
    #[error(
        "task definition {task_definition} cannot run on every capacity provider of this cluster profile's \
         CapacityProviderStrategy: {}; its requiresCompatibilities: {has}. Add {} to its requiresCompatibilities \
         (register a revision with requiresCompatibilities {} and name it in TaskDefinitionArn), or leave those \
         providers out of the strategy",
        .providers.join("; "),
        .add.join(" and "),
        .wanted.join(", ")
    )]
    LacksCompatibilities {
        /// Its ARN.
        task_definition: String,
        /// Each provider that cannot run it: `name (kind) needs COMPATIBILITY`.
        providers: Vec<String>,
        /// What its `requiresCompatibilities` say now, in words.
        has: String,
        /// The compatibilities to add.
        add: Vec<String>,
        /// The `requiresCompatibilities` that would do.
        wanted: Vec<String>,
    },
    /// ECS Exec is on, and it has no task role.
    #[error(
        "task definition {task_definition} has no task role, and this elastic profile sets EnableExecuteCommand: ECS Exec needs              one (allowing the ssmmessages calls Exec makes). Register a revision with a taskRoleArn and name it in              TaskDefinitionArn, or turn EnableExecuteCommand off"
    )]
    ExecWithoutTaskRole {
        /// Its ARN.
        task_definition: String,
    },
}

/// A launch AWS would refuse as it stands; each reads as the sentence that says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverLimit {
    /// The agent container's overrides are longer than RunTask takes.
    #[error(
        "the agent's environment overrides would be {length} characters, more than the {max} \
         ECS takes in one RunTask: with TaskDefinitionArn the profiles' EnvironmentVariables and Environment \
         travel as overrides; shorten them or put them in that task definition",
        max = MAX_OVERRIDES_CHARS
    )]
    Overrides {
        /// Their length, as AWS counts it.
        length: usize,
    },
    /// More tags than AWS allows on a task.
    #[error("the task would carry {tags} tags, more than the {max} AWS allows: remove some of the profiles' Tags", max = MAX_TAGS)]
    Tags {
        /// How many it would carry.
        tags: usize,
    },
}

/// AWS's limit on tags per resource.
pub const MAX_TAGS: usize = 50;

/// AWS's limit on the JSON of RunTask's `containerOverrides`.
pub const MAX_OVERRIDES_CHARS: usize = 8192;

/// Why a cluster profile's engine no longer serves new work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retirement {
    /// GoCD deleted the profile: its tasks are stopped at once, its instances retired.
    Deleted,
    /// An edit moved the profile elsewhere (another key), or GoCD stopped sending it: nothing
    /// new starts here, and its tasks stop as their jobs complete.
    Replaced,
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
