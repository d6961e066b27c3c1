//! Task definitions: which revisions of ours to deregister, given the revisions a pass read
//! (`task_definitions.rs` reads them, bounded by [`Budget`]). A revision is deregistered only
//! when all of these hold:
//! - its family is ours: `gocd-<cluster key>-…`, and the revision carries our server-id and
//!   cluster-profile tags (another GoCD server on the same cluster has the same family prefix);
//! - its family is not in use: no agent of this process that may still run uses it, and it is
//!   not the current one of an elastic profile seen in the last hour;
//! - fewer than [`MAX_DEREGISTER_PER_PASS`] were chosen before it in this pass.

use std::collections::{BTreeSet, HashMap};

use super::removals::{CleanupPlan, Kind};
use crate::cluster::base::identity::is_ours;

/// Most DeregisterTaskDefinition calls per pass.
pub const MAX_DEREGISTER_PER_PASS: usize = 5;
/// Most revisions described per pass (reads; bounds a pass over many foreign revisions).
pub const MAX_DESCRIBE_PER_PASS: usize = 25;

/// One revision a pass described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// Its ARN.
    pub arn: String,
    /// Its tags.
    pub tags: HashMap<String, String>,
}

/// The family of a task definition ARN (`arn:…:task-definition/<family>:<revision>`) or of
/// `family:revision`.
pub fn family_of(task_definition: &str) -> &str {
    let name = task_definition.rsplit_once('/').map_or(task_definition, |(_, n)| n);
    name.rsplit_once(':').map_or(name, |(family, _)| family)
}

/// What a pass may still read: it stops describing once it has found
/// [`MAX_DEREGISTER_PER_PASS`] revisions of ours or described [`MAX_DESCRIBE_PER_PASS`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    described: usize,
    ours: usize,
}

impl Budget {
    /// Whether the pass reads no more.
    pub fn spent(&self) -> bool {
        self.ours >= MAX_DEREGISTER_PER_PASS || self.described >= MAX_DESCRIBE_PER_PASS
    }

    /// Counts one revision described, of ours or not.
    pub fn described(&mut self, ours: bool) {
        self.described += 1;
        self.ours += usize::from(ours);
    }
}

/// The revisions to deregister among `read` (in the order read), for cluster profile `key` of
/// server `server_id`; `in_use` are the families kept, `kept` how many of ours the read skipped
/// as in use (for the report).
pub fn task_definitions(
    read: &[Revision],
    in_use: &BTreeSet<String>,
    server_id: &str,
    key: &str,
    kept: usize,
) -> CleanupPlan {
    let prefix = format!("gocd-{key}-");
    let mut plan = CleanupPlan::new(Kind::TaskDefinitions { kept });
    plan.deregister_task_definitions = read
        .iter()
        .filter(|r| {
            let family = family_of(&r.arn);
            family.starts_with(&prefix) && !in_use.contains(family)
        })
        .filter(|r| is_ours(&r.tags, server_id, key)) // else another GoCD server's (or by hand): not ours to remove
        .map(|r| r.arn.clone())
        .take(MAX_DEREGISTER_PER_PASS)
        .collect();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::base::identity::{TAG_CLUSTER_PROFILE, TAG_SERVER_ID};

    fn revision(family: &str, n: u32, server: &str, key: &str) -> Revision {
        let tags =
            [(TAG_SERVER_ID.to_string(), server.to_string()), (TAG_CLUSTER_PROFILE.to_string(), key.to_string())];
        Revision { arn: format!("arn:aws:ecs:us-east-1:1:task-definition/{family}:{n}"), tags: tags.into() }
    }

    #[test]
    fn families_of_arns_and_names() {
        assert_eq!(family_of("arn:aws:ecs:us-east-1:123456789012:task-definition/gocd-abc-123:7"), "gocd-abc-123");
        assert_eq!(family_of("gocd-abc-123:7"), "gocd-abc-123");
        assert_eq!(family_of("gocd-abc-123"), "gocd-abc-123");
    }

    #[test]
    fn only_unused_revisions_of_ours_go_and_at_most_five() {
        let in_use: BTreeSet<String> = ["gocd-k-used".to_string()].into();
        let mut read = vec![
            revision("gocd-k-used", 1, "sid", "k"),
            revision("gocd-k-foreign", 1, "another", "k"),
            revision("gocd-k-other-key", 1, "sid", "j"),
            revision("gocd-j-stale", 1, "sid", "k"),
        ];
        read.extend((0..7).map(|n| revision("gocd-k-stale", n, "sid", "k")));
        let plan = task_definitions(&read, &in_use, "sid", "k", 1);
        assert_eq!(plan.kind, Kind::TaskDefinitions { kept: 1 });
        let expected: Vec<String> =
            (0..5).map(|n| format!("arn:aws:ecs:us-east-1:1:task-definition/gocd-k-stale:{n}")).collect();
        assert_eq!(plan.deregister_task_definitions, expected);
        assert!(plan.stop_tasks.is_empty() && plan.terminate_instances.is_empty());
        assert!(task_definitions(&read[..4], &in_use, "sid", "k", 0).is_empty());
    }

    #[test]
    fn a_pass_reads_until_five_of_ours_or_twenty_five_revisions() {
        let mut budget = Budget::default();
        for _ in 0..MAX_DEREGISTER_PER_PASS {
            assert!(!budget.spent());
            budget.described(true);
        }
        assert!(budget.spent(), "five of ours found");
        let mut budget = Budget::default();
        for _ in 0..MAX_DESCRIBE_PER_PASS {
            assert!(!budget.spent());
            budget.described(false);
        }
        assert!(budget.spent(), "twenty-five foreign revisions read");
    }
}
