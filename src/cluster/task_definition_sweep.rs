//! Deregisters task-definition revisions of ours that nothing uses any more (an elastic profile
//! was edited, so its family changed; or it was deleted). At most once an hour per cluster
//! profile, from server-ping, and at most [`MAX_DEREGISTER_PER_PASS`] revisions a pass, so it
//! stays far inside the RegisterTaskDefinition budget (burst 20, 1/s, shared with registering).
//!
//! A revision is deregistered only when all of these hold:
//! - its family is ours: `gocd-<cluster key>-…`, and the revision carries our server-id and
//!   cluster-profile tags (another GoCD server on the same cluster has the same family prefix);
//! - no agent of this process that may still run uses that family;
//! - the family is not the current one of an elastic profile seen in the last hour (create-agent,
//!   or a launch).
//!
//! The AWS calls: ListTaskDefinitionFamilies (`familyPrefix` is a real prefix there;
//! ListTaskDefinitions takes a whole family name), ListTaskDefinitions per stale family,
//! DescribeTaskDefinition with tags per revision, DeregisterTaskDefinition.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use super::identity::{TAG_CLUSTER_PROFILE, TAG_SERVER_ID};
use super::snapshot::RequestSnapshot;
use super::Cluster;
use crate::aws::AwsError;

/// How often a cluster profile's families are looked at.
pub const SWEEP_EVERY: Duration = Duration::from_secs(3600);
/// How long an elastic profile seen keeps its family.
pub const SEEN_FOR: Duration = Duration::from_secs(3600);
/// Most DeregisterTaskDefinition calls per pass.
pub const MAX_DEREGISTER_PER_PASS: usize = 5;
/// Most revisions described per pass (reads; bounds a pass over many foreign revisions).
const MAX_DESCRIBE_PER_PASS: usize = 25;

/// What one cluster profile remembers between passes.
#[derive(Debug, Default)]
pub struct SweepState {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// No pass before this (start plus the grace).
    not_before: Option<SystemTime>,
    last_pass: Option<SystemTime>,
    seen: HashMap<String, SystemTime>,
}

impl SweepState {
    /// The state of an engine started at `started`, whose first pass waits `grace`.
    pub fn new(started: SystemTime, grace: Duration) -> Self {
        let inner = Inner { not_before: Some(started + grace), ..Inner::default() };
        SweepState { inner: Mutex::new(inner) }
    }

    /// `family` is in use now (a launch, or an elastic profile GoCD sent).
    pub fn saw(&self, family: &str, now: SystemTime) {
        self.lock().seen.insert(family.to_string(), now);
    }

    /// Families seen within [`SEEN_FOR`] of `now` (older ones are forgotten).
    pub(super) fn recent(&self, now: SystemTime) -> BTreeSet<String> {
        let mut inner = self.lock();
        inner.seen.retain(|_, t| now.duration_since(*t).unwrap_or_default() < SEEN_FOR);
        inner.seen.keys().cloned().collect()
    }

    /// Claims the pass if one is due: once an hour, and the first not before the grace after
    /// start (`serve --task-definition-sweep-after`, an hour by default) — a process that just
    /// started has seen no elastic profile yet, and a family is never deregistered only because
    /// of that (its next job would register it again, and RegisterTaskDefinition allows one call
    /// a second per account).
    fn claim(&self, now: SystemTime) -> bool {
        let mut inner = self.lock();
        if inner.not_before.is_some_and(|t| now < t) {
            return false;
        }
        let due = inner.last_pass.is_none_or(|t| now.duration_since(t).unwrap_or_default() >= SWEEP_EVERY);
        if due {
            inner.last_pass = Some(now);
        }
        due
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepOutcome {
    /// Revisions deregistered (ARNs).
    pub deregistered: Vec<String>,
    /// Families of ours that were kept because they are in use.
    pub kept: usize,
}

/// The family of a task definition ARN (`arn:…:task-definition/<family>:<revision>`) or of
/// `family:revision`.
pub fn family_of(task_definition: &str) -> &str {
    let name = task_definition.rsplit_once('/').map_or(task_definition, |(_, n)| n);
    name.rsplit_once(':').map_or(name, |(family, _)| family)
}

impl Cluster {
    /// GoCD asked for an agent of this elastic profile: the family of the request's own
    /// snapshot (not of the profile stored meanwhile) stays registered.
    pub fn saw_elastic_profile(&self, snapshot: &RequestSnapshot) {
        if snapshot.registers_its_own() {
            self.task_definition_sweep.saw(&snapshot.family, SystemTime::now());
        }
    }

    /// The families no agent of this process that may still run uses, and none seen lately.
    fn families_in_use(&self, now: SystemTime) -> BTreeSet<String> {
        let mut used = self.task_definition_sweep.recent(now);
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
    if !cluster.task_definition_sweep.claim(SystemTime::now()) {
        return;
    }
    match sweep(cluster).await {
        Ok(outcome) if !outcome.deregistered.is_empty() => {
            tracing::info!(deregistered = ?outcome.deregistered, kept = outcome.kept, "deregistered task definitions no agent uses")
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(error = %e, "could not look for unused task definitions; trying again in an hour")
        }
    }
}

/// One pass (without the once-an-hour check).
///
/// # Errors
/// The first failed call; what was deregistered before it stays deregistered.
pub async fn sweep(cluster: &Cluster) -> Result<SweepOutcome, AwsError> {
    let aws = &cluster.aws();
    let prefix = format!("gocd-{}-", cluster.key);
    let mut families = aws.list_families(&prefix).await?;
    families.retain(|f| f.starts_with(&prefix));
    let in_use = cluster.families_in_use(SystemTime::now());
    let mut outcome = SweepOutcome::default();
    let mut described = 0;
    for family in families {
        if in_use.contains(&family) {
            outcome.kept += 1;
            continue;
        }
        if outcome.deregistered.len() >= MAX_DEREGISTER_PER_PASS || described >= MAX_DESCRIBE_PER_PASS {
            break;
        }
        let revisions = aws.list_revisions(&family).await?;
        let before = outcome.deregistered.len();
        for arn in &revisions {
            if outcome.deregistered.len() >= MAX_DEREGISTER_PER_PASS || described >= MAX_DESCRIBE_PER_PASS {
                break;
            }
            if family_of(arn) != family {
                continue; // moto answers by prefix; AWS by family
            }
            described += 1;
            let tags = aws.task_definition_tags(arn).await?;
            let tag = |key: &str| tags.get(key).map(String::as_str);
            if tag(TAG_SERVER_ID) != Some(cluster.server_id.as_str())
                || tag(TAG_CLUSTER_PROFILE) != Some(cluster.key.as_str())
            {
                continue; // registered by another GoCD server (or by hand): not ours to remove
            }
            aws.deregister_task_definition(arn).await?;
            outcome.deregistered.push(arn.clone());
        }
        if outcome.deregistered.len() > before {
            // A later launch of this family registers it afresh instead of using a cached revision.
            cluster.task_definitions.lock().unwrap_or_else(PoisonError::into_inner).remove(&family);
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_of_arns_and_names() {
        assert_eq!(family_of("arn:aws:ecs:us-east-1:123456789012:task-definition/gocd-abc-123:7"), "gocd-abc-123");
        assert_eq!(family_of("gocd-abc-123:7"), "gocd-abc-123");
        assert_eq!(family_of("gocd-abc-123"), "gocd-abc-123");
    }

    #[test]
    fn a_pass_is_due_once_an_hour_and_seen_families_expire() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let state = SweepState::new(t0 - SEEN_FOR, SEEN_FOR);
        assert!(!state.claim(t0 - Duration::from_secs(1)), "not in the first hour after a start");
        assert!(state.claim(t0));
        assert!(!state.claim(t0 + Duration::from_secs(60)));
        assert!(state.claim(t0 + SWEEP_EVERY));
        state.saw("gocd-k-a", t0);
        state.saw("gocd-k-b", t0 + Duration::from_secs(1800));
        let recent = state.recent(t0 + SEEN_FOR + Duration::from_secs(1));
        assert_eq!(recent.into_iter().collect::<Vec<_>>(), vec!["gocd-k-b".to_string()]);
    }
}
