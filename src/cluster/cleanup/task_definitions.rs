//! The task-definition sweep's state and reads: it deregisters task-definition revisions of ours
//! that nothing uses any more (an elastic profile was edited, so its family changed; or it was
//! deleted). At most once an hour per cluster profile, from server-ping, and at most
//! [`MAX_DEREGISTER_PER_PASS`] revisions a pass, so it stays far inside the
//! RegisterTaskDefinition budget (burst 20, 1/s, shared with registering). Which revisions go:
//! `plan/task_definitions.rs`; in use are the families of agents of this process that may still
//! run and those of elastic profiles seen in the last hour (create-agent, or a launch).

use std::collections::BTreeSet;
use std::time::SystemTime;

use super::plan::{self, family_of, Budget, Revision};
use crate::aws::AwsError;
use crate::cluster::base::identity::is_ours;
use crate::cluster::launch::snapshot::RequestSnapshot;
use crate::cluster::Cluster;

pub use super::plan::MAX_DEREGISTER_PER_PASS;
pub use crate::cluster::launch::task_definition::{SweepState, SEEN_FOR, SWEEP_EVERY};

impl Cluster {
    /// GoCD asked for an agent of this elastic profile: the family of the request's own
    /// snapshot (not of the profile stored meanwhile) stays registered.
    pub fn saw_elastic_profile(&self, snapshot: &RequestSnapshot) {
        if snapshot.registers_its_own() {
            self.state.task_definition_sweep.saw(&snapshot.family, self.now());
        }
    }

    /// The families no agent of this process that may still run uses, and none seen lately.
    fn families_in_use(&self, now: SystemTime) -> BTreeSet<String> {
        let mut used = self.state.task_definition_sweep.recent(now);
        used.extend(
            self.registry()
                .all()
                .filter(|a| a.phase.occupies_capacity())
                .filter_map(|a| a.task.as_ref())
                .map(|t| family_of(&t.task_definition).to_string()),
        );
        used
    }
}

/// Runs a pass if one is due; failures are logged (the next pass, an hour later, tries again).
pub async fn run(cluster: &Cluster) {
    if !cluster.state.task_definition_sweep.claim(cluster.now()) {
        return;
    }
    if let Err(e) = sweep(cluster).await {
        tracing::warn!(error = %e, "could not look for unused task definitions; trying again in an hour")
    }
}

/// One pass (without the once-an-hour check): read, plan, apply. Returns the revisions
/// deregistered.
///
/// # Errors
/// The first failed call; what was deregistered before it stays deregistered.
pub async fn sweep(cluster: &Cluster) -> Result<Vec<String>, AwsError> {
    let read = read(cluster).await?;
    let plan = plan::task_definitions(&read.revisions, &read.in_use, cluster.server_id(), cluster.key(), read.kept);
    Ok(cluster.clean_up(plan).await?.deregistered_task_definitions)
}

/// What a pass read.
#[derive(Debug)]
struct Read {
    /// The revisions of this profile's families not in use, with their tags, as far as the
    /// pass's [`Budget`] reached.
    revisions: Vec<Revision>,
    /// The families in use when the families were listed.
    in_use: BTreeSet<String>,
    /// How many families of ours were skipped as in use.
    kept: usize,
}

/// Reads the families of this profile and the revisions of those not in use. The AWS calls:
/// ListTaskDefinitionFamilies (`familyPrefix` is a real prefix there; ListTaskDefinitions takes
/// a whole family name), ListTaskDefinitions per stale family, DescribeTaskDefinition with tags
/// per revision.
async fn read(cluster: &Cluster) -> Result<Read, AwsError> {
    let aws = &cluster.aws();
    let prefix = format!("gocd-{}-", cluster.key());
    let mut families = aws.list_families(&prefix).await?;
    families.retain(|f| f.starts_with(&prefix));
    let in_use = cluster.families_in_use(cluster.now());
    let (mut revisions, mut kept, mut budget) = (Vec::new(), 0, Budget::default());
    for family in families {
        if in_use.contains(&family) {
            kept += 1;
            continue;
        }
        if budget.spent() {
            break;
        }
        for arn in aws.list_revisions(&family).await? {
            if budget.spent() {
                break;
            }
            if family_of(&arn) != family {
                continue; // moto answers by prefix; AWS by family
            }
            let tags = aws.task_definition_tags(&arn).await?;
            budget.described(is_ours(&tags, cluster.server_id(), cluster.key()));
            revisions.push(Revision { arn, tags });
        }
    }
    Ok(Read { revisions, in_use, kept })
}
