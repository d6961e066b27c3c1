//! Strays: what this GoCD server started under a cluster-profile key that no longer exists — a
//! profile deleted while the plugin was down, an edit that changed the key (another role or
//! account) unheard, or an upgrade that changed how keys are made. Nothing of it may run on
//! without an owner. Two ways find them:
//! - through GoCD's agents: their ids carry the old key, and server-ping stops their tasks
//!   before it removes the agents ([`Cluster::stop_strays`], one `startedBy` read);
//! - through the server's own tag, for what no agent names (a task that never registered, an
//!   agent an operator deleted, EC2 instances): the leftover sweep reads every running task of
//!   the cluster and every instance of the server in the account, and stops or terminates those
//!   whose `gocd:cluster-profile` no live profile has ([`Cluster::stop_leftover_tasks`],
//!   [`Cluster::terminate_leftover_instances`]). It runs at the second server-ping after a start
//!   (the first adopts) and every [`LEFTOVER_SWEEP_EVERY`] after, and only when every profile GoCD sent resolved.
//!
//! Only resources carrying this server's `gocd:server-id` are ever touched, and only in the
//! accounts and regions a live profile reaches (the credentials of a gone profile are gone).

use std::collections::HashSet;
use std::time::Duration;

use super::identity::{started_by, TAG_CLUSTER_PROFILE, TAG_SERVER_ID};
use super::{cluster_arn_suffix, ec2, tasks, Cluster};
use crate::aws::AwsError;
use crate::protocol::host_calls::HealthKind;

/// How often the leftover sweep runs after its first pass.
pub const LEFTOVER_SWEEP_EVERY: Duration = Duration::from_secs(30 * 60);
/// What ECS shows as the stop reason of a leftover.
const GONE: &str = "its cluster profile no longer exists in GoCD";

impl Cluster {
    /// Stops the running tasks in this profile's cluster that carry this server's id and the
    /// cluster-profile key `key` (and its `startedBy`). Returns how many were stopped.
    ///
    /// # Errors
    /// The failed ListTasks or DescribeTasks: nothing is taken as gone.
    pub async fn stop_strays(&self, key: &str) -> Result<usize, AwsError> {
        let (profile, aws) = (self.profile(), self.aws());
        let cluster = profile.cluster_name.as_str();
        let arns = tasks::list_running(&aws, cluster, &started_by(&self.server_id, key)).await?;
        if arns.is_empty() {
            return Ok(0);
        }
        let strays = tasks::describe(&aws, cluster, &cluster_arn_suffix(cluster), &arns, &self.server_id, key).await?;
        let stopped = self.stop_gone(&strays).await;
        if stopped > 0 {
            let message = format!("stopped {stopped} task(s) of a cluster profile that no longer exists (key {key})");
            self.event(HealthKind::Warning, message);
        }
        Ok(stopped)
    }

    /// Stops the running tasks in this profile's cluster that carry this server's id and a
    /// cluster-profile key not in `live` (every key this process serves or drains). Returns how
    /// many were stopped.
    ///
    /// # Errors
    /// The failed ListTasks or DescribeTasks: nothing is taken as gone.
    pub async fn stop_leftover_tasks(&self, live: &HashSet<String>) -> Result<usize, AwsError> {
        let (profile, aws) = (self.profile(), self.aws());
        let cluster = profile.cluster_name.as_str();
        let arns = tasks::list_all_running(&aws, cluster).await?;
        let suffix = cluster_arn_suffix(cluster);
        let server = Some(self.server_id.as_str());
        let leftovers = tasks::describe_where(&aws, cluster, &arns, |t| {
            t.cluster_arn.ends_with(&suffix)
                && t.tags.get(TAG_SERVER_ID).map(String::as_str) == server
                && t.tags.get(TAG_CLUSTER_PROFILE).is_some_and(|key| !live.contains(key))
        })
        .await?;
        let stopped = self.stop_gone(&leftovers).await;
        if stopped > 0 {
            let message = format!("stopped {stopped} leftover task(s) of cluster profiles that no longer exist");
            self.event(HealthKind::Warning, message);
        }
        Ok(stopped)
    }

    /// Stops those of `tasks` not stopping yet, saying their profile is gone; how many were.
    async fn stop_gone(&self, tasks: &[tasks::TaskView]) -> usize {
        let mut stopped = 0;
        for task in tasks.iter().filter(|t| !t.is_stopping()) {
            if self.stop_task(&task.arn, GONE).await.is_ok() {
                stopped += 1;
            }
        }
        stopped
    }

    /// Terminates the instances in this profile's account and region that carry this server's
    /// id and a cluster-profile key not in `live`. Their tasks end with them. Returns how many.
    ///
    /// # Errors
    /// The failed DescribeInstances or TerminateInstances.
    pub async fn terminate_leftover_instances(&self, live: &HashSet<String>) -> Result<usize, AwsError> {
        let aws = self.aws();
        let leftovers: Vec<String> = ec2::api::of_server(&aws, &self.server_id)
            .await?
            .into_iter()
            .filter(|(_, key)| !live.contains(key))
            .map(|(id, _)| id)
            .collect();
        if leftovers.is_empty() {
            return Ok(0);
        }
        ec2::api::terminate(&aws, &leftovers).await?;
        let message = format!(
            "terminated {} leftover instance(s) of cluster profiles that no longer exist: {}",
            leftovers.len(),
            leftovers.join(", ")
        );
        self.event(HealthKind::Warning, message);
        Ok(leftovers.len())
    }
}
