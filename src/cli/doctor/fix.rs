//! What the doctor tells an operator to do when AWS refuses one of its reads: allow the action
//! when the answer was a refusal of access, else the check's own advice. Every check uses it.

use crate::aws::{AwsError, Failure};

/// A fix for an AccessDenied error, else `other`.
pub(super) fn fix_for(e: &AwsError, action: &str, other: impl Into<String>) -> String {
    if e.failure == Failure::Denied {
        format!("allow {action} to the plugin's identity (`ecs-elastic-agent iam-policy` prints the policy)")
    } else {
        other.into()
    }
}
