//! The reads that find strays and leftovers (the decisions: `plan/leftovers.rs`; the words:
//! the module doc). Strays: what this GoCD server started under a cluster-profile key that no
//! longer exists — a profile deleted while the plugin was down, an edit that changed the key
//! (another role or account) unheard, or an upgrade that changed how keys are made. Nothing of
//! it may run on without an owner. Two ways find it:
//! - through GoCD's agents: their ids carry the old key, and server-ping stops their tasks
//!   before it removes the agents ([`Cluster::stop_strays`], one `startedBy` read);
//! - through the server's own tag, for what no agent names (a task that never registered, an
//!   agent an operator deleted, EC2 instances): the leftover sweep reads every running task of
//!   the cluster and every instance of the server in the account, and stops or terminates those
//!   whose `gocd:cluster-profile` no live profile has ([`Cluster::stop_leftover_tasks`],
//!   [`Cluster::terminate_leftover_instances`]). It runs at the second server-ping after a
//!   start (the first adopts) and every [`LEFTOVER_SWEEP_EVERY`] after, and only when every
//!   profile GoCD sent resolved.
//!
//! Only resources carrying this server's `gocd:server-id` are ever touched, and only in the
//! accounts and regions a live profile reaches (the credentials of a gone profile are gone).

use std::collections::HashSet;
use std::time::Duration;

use super::plan;
use crate::aws::{ec2, AwsError};
use crate::cluster::agents::tasks;
use crate::cluster::base::identity::cluster_arn_suffix;
use crate::cluster::base::identity::started_by;
use crate::cluster::Cluster;
use crate::ids::ClusterKey;

/// How often the leftover sweep runs after its first pass.
pub const LEFTOVER_SWEEP_EVERY: Duration = Duration::from_secs(30 * 60);

impl Cluster {
    /// Stops the running tasks in this profile's cluster that carry this server's id and the
    /// cluster-profile key `key` (and its `startedBy`). Returns how many were stopped.
    ///
    /// # Errors
    /// The failed ListTasks or DescribeTasks: nothing is taken as gone.
    pub async fn stop_strays(&self, key: &ClusterKey) -> Result<usize, AwsError> {
        let (profile, aws) = (self.profile(), self.aws());
        let cluster = profile.cluster_name.as_str();
        let arns = tasks::list_running(&aws, cluster, &started_by(self.server_id(), key)).await?;
        if arns.is_empty() {
            return Ok(0);
        }
        let suffix = cluster_arn_suffix(cluster);
        let described = tasks::describe(&aws, cluster, &suffix, &arns, self.server_id(), key).await?;
        let removed = self.clean_up(plan::strays(&described, &suffix, self.server_id(), key)).await?;
        Ok(removed.stopped_tasks.len())
    }

    /// Stops the running tasks in this profile's cluster that carry this server's id and a
    /// cluster-profile key not in `live` (every key this process serves or drains). Returns how
    /// many were stopped.
    ///
    /// # Errors
    /// The failed ListTasks or DescribeTasks: nothing is taken as gone.
    pub async fn stop_leftover_tasks(&self, live: &HashSet<ClusterKey>) -> Result<usize, AwsError> {
        let (profile, aws) = (self.profile(), self.aws());
        let cluster = profile.cluster_name.as_str();
        let arns = tasks::list_all_running(&aws, cluster).await?;
        let suffix = cluster_arn_suffix(cluster);
        let server = self.server_id();
        let described =
            tasks::describe_where(&aws, cluster, &arns, |t| plan::is_leftover_task(t, &suffix, server, live)).await?;
        let removed = self.clean_up(plan::leftover_tasks(&described, &suffix, server, live)).await?;
        Ok(removed.stopped_tasks.len())
    }

    /// Terminates the instances in this profile's account and region that carry this server's
    /// id and a cluster-profile key not in `live`. Their tasks end with them. Returns how many.
    ///
    /// # Errors
    /// The failed DescribeInstances or TerminateInstances.
    pub async fn terminate_leftover_instances(&self, live: &HashSet<ClusterKey>) -> Result<usize, AwsError> {
        let of_server = ec2::of_server(&self.aws(), self.server_id()).await?;
        let removed = self.clean_up(plan::leftover_instances(of_server, live)).await?;
        Ok(removed.terminated_instances.len())
    }
}
