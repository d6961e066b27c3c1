//! Strays and leftovers: what this GoCD server started that no live cluster profile owns any
//! more (the reads that find them: `strays.rs`), and the container instances our terminated
//! instances left registered in a cluster (found by the EC2 driver's pass).
//!
//! Every function takes what the reads returned and keeps only what carries this server's id
//! (and, where a profile is named, its key) again, so a read that filtered less never widens
//! what is removed.

use std::collections::HashSet;

use super::removals::{CleanupPlan, Kind};
use crate::aws::status::Ec2State;
use crate::cluster::agents::tasks::TaskView;
use crate::cluster::base::identity::{is_ours, TAG_CLUSTER_PROFILE, TAG_SERVER_ID};
use crate::ids::ClusterKey;

/// What ECS shows as the stop reason of a stray or leftover task.
pub const GONE: &str = "its cluster profile no longer exists in GoCD";

/// Strays: of `tasks` (described in one cluster), those of this server and the vanished key
/// `key`, in the cluster whose task ARNs end with `cluster_arn_suffix`, not stopping yet.
pub fn strays(tasks: &[TaskView], cluster_arn_suffix: &str, server_id: &str, key: &ClusterKey) -> CleanupPlan {
    let mut plan = CleanupPlan::new(Kind::Strays { key: key.clone() });
    plan.stop_tasks = tasks
        .iter()
        .filter(|t| t.cluster_arn.ends_with(cluster_arn_suffix) && is_ours(&t.tags, server_id, key))
        .filter(|t| !t.is_stopping())
        .map(|t| (t.arn.as_str().into(), GONE.to_string()))
        .collect();
    plan
}

/// Whether a task is a leftover: in the cluster whose ARNs end with `cluster_arn_suffix`, of
/// this server, under a cluster-profile key not in `live`. The read keeps only these.
pub fn is_leftover_task(
    task: &TaskView,
    cluster_arn_suffix: &str,
    server_id: &str,
    live: &HashSet<ClusterKey>,
) -> bool {
    task.cluster_arn.ends_with(cluster_arn_suffix)
        && task.tags.get(TAG_SERVER_ID).map(String::as_str) == Some(server_id)
        && task.tags.get(TAG_CLUSTER_PROFILE).is_some_and(|key| !live.contains(key.as_str()))
}

/// Leftover tasks: of `tasks`, the leftovers ([`is_leftover_task`]) not stopping yet.
pub fn leftover_tasks(
    tasks: &[TaskView],
    cluster_arn_suffix: &str,
    server_id: &str,
    live: &HashSet<ClusterKey>,
) -> CleanupPlan {
    let mut plan = CleanupPlan::new(Kind::Leftovers);
    plan.stop_tasks = tasks
        .iter()
        .filter(|t| is_leftover_task(t, cluster_arn_suffix, server_id, live))
        .filter(|t| !t.is_stopping())
        .map(|t| (t.arn.as_str().into(), GONE.to_string()))
        .collect();
    plan
}

/// Leftover instances: of this server's instances in an account and region, as (id,
/// `gocd:cluster-profile` key) — the read asks EC2 for this server's tag only — those whose key
/// is not in `live`. Their tasks end with them.
pub fn leftover_instances(of_server: Vec<(String, String)>, live: &HashSet<ClusterKey>) -> CleanupPlan {
    let mut plan = CleanupPlan::new(Kind::Leftovers);
    plan.terminate_instances =
        of_server.into_iter().filter(|(_, key)| !live.contains(key.as_str())).map(|(id, _)| id).collect();
    plan
}

/// What the EC2 driver learned of the container instances whose EC2 instance it did not know.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// EC2 instance ids of ours that are gone (their container instances are deregistered).
    pub gone: Vec<String>,
    /// EC2 instance ids that are not ours: never touched, never asked about again.
    pub foreign: Vec<String>,
}

/// Leftover container instances of one EC2 cluster profile: `vanished` (the container instance
/// ARNs of our instances the pool saw go), then those of `unknown` (EC2 instance id, container
/// instance ARN) whose instance `ours` (EC2's answer for those ids, filtered by this server's and
/// this profile's tags: (id, state)) shows neither pending nor running. An unknown instance of
/// ours that is alive is left for the next description to list; one EC2 did not return is
/// foreign.
pub fn leftover_container_instances(
    vanished: Vec<String>,
    unknown: Vec<(String, String)>,
    ours: &[(String, Ec2State)],
) -> (CleanupPlan, Unknown) {
    let mut plan = CleanupPlan::new(Kind::Leftovers);
    plan.deregister_container_instances = vanished;
    let mut learned = Unknown::default();
    for (id, arn) in unknown {
        match ours.iter().find(|(i, _)| *i == id) {
            Some((_, state)) if !matches!(state, Ec2State::Pending | Ec2State::Running) => {
                learned.gone.push(id);
                plan.deregister_container_instances.push(arn);
            }
            Some(_) => {} // ours and alive: the next description lists it.
            None => learned.foreign.push(id),
        }
    }
    (plan, learned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::agents::tasks::TaskStatus;
    use crate::cluster::tests::fixtures::task;

    const SUFFIX: &str = ":cluster/c";

    fn tagged(arn: &str, server: &str, key: &str, status: TaskStatus) -> TaskView {
        task(arn, vec![(TAG_SERVER_ID.into(), server.into()), (TAG_CLUSTER_PROFILE.into(), key.into())], status)
    }

    fn arns(plan: &CleanupPlan) -> Vec<&str> {
        plan.stop_tasks.iter().map(|(arn, _)| arn.as_str()).collect()
    }

    #[test]
    fn strays_are_this_servers_tasks_of_the_vanished_key_only() {
        let tasks = [
            tagged("t-stray", "sid", "old", TaskStatus::Running),
            tagged("t-stopping", "sid", "old", TaskStatus::Stopped),
            tagged("t-live-key", "sid", "live", TaskStatus::Running),
            tagged("t-other-server", "another", "old", TaskStatus::Running),
        ];
        let plan = strays(&tasks, SUFFIX, "sid", &"old".into());
        assert_eq!(plan.kind, Kind::Strays { key: "old".into() });
        assert_eq!(arns(&plan), ["t-stray"]);
        assert_eq!(plan.stop_tasks[0].1, GONE);
        assert!(strays(&tasks, ":cluster/elsewhere", "sid", &"old".into()).is_empty(), "another cluster's task");
    }

    #[test]
    fn leftover_tasks_carry_this_server_and_a_key_no_live_profile_has() {
        let live: HashSet<ClusterKey> = [ClusterKey::from("live")].into();
        let untagged = task("t-untagged", vec![(TAG_SERVER_ID.into(), "sid".into())], TaskStatus::Running);
        let tasks = [
            tagged("t-left", "sid", "gone", TaskStatus::Running),
            tagged("t-left-stopping", "sid", "gone", TaskStatus::Stopped),
            tagged("t-live", "sid", "live", TaskStatus::Running),
            tagged("t-foreign", "another", "gone", TaskStatus::Running),
            untagged.clone(),
        ];
        let plan = leftover_tasks(&tasks, SUFFIX, "sid", &live);
        assert_eq!(plan.kind, Kind::Leftovers);
        assert_eq!(arns(&plan), ["t-left"]);
        assert!(is_leftover_task(&tasks[1], SUFFIX, "sid", &live), "the read keeps it; the plan skips it");
        assert!(!is_leftover_task(&untagged, SUFFIX, "sid", &live), "no key: not a leftover");
        assert!(leftover_tasks(&tasks, ":cluster/elsewhere", "sid", &live).is_empty());
    }

    #[test]
    fn leftover_instances_are_those_of_keys_no_live_profile_has() {
        let live: HashSet<ClusterKey> = [ClusterKey::from("live")].into();
        let of_server = vec![("i-1".to_string(), "gone".to_string()), ("i-2".to_string(), "live".to_string())];
        let plan = leftover_instances(of_server, &live);
        assert_eq!(plan.terminate_instances, ["i-1"]);
        assert!(plan.stop_tasks.is_empty() && plan.deregister_container_instances.is_empty());
        assert!(leftover_instances(vec![], &live).is_empty());
    }

    #[test]
    fn container_instances_of_gone_instances_of_ours_are_deregistered_and_others_never() {
        let unknown = vec![
            ("i-gone".to_string(), "arn:ci/i-gone".to_string()),
            ("i-alive".to_string(), "arn:ci/i-alive".to_string()),
            ("i-foreign".to_string(), "arn:ci/i-foreign".to_string()),
        ];
        let ours = [("i-gone".to_string(), Ec2State::Terminated), ("i-alive".to_string(), Ec2State::Running)];
        let (plan, learned) = leftover_container_instances(vec!["arn:ci/i-vanished".into()], unknown, &ours);
        assert_eq!(plan.deregister_container_instances, ["arn:ci/i-vanished", "arn:ci/i-gone"]);
        assert_eq!(learned, Unknown { gone: vec!["i-gone".into()], foreign: vec!["i-foreign".into()] });
        let (plan, learned) = leftover_container_instances(vec![], vec![], &[]);
        assert!(plan.is_empty() && learned == Unknown::default());
    }
}
