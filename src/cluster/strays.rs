//! Strays: running tasks this GoCD server started in this profile's cluster under a cluster
//! profile key that no longer exists — a profile deleted while the plugin was down, an edit that
//! changed the key (another role or account) unheard, or an upgrade that changed how keys are
//! made. GoCD still lists their agents (ids carry the old key); server-ping stops their tasks
//! before it removes the agents, so nothing runs on without an owner.

use super::identity::started_by;
use super::{cluster_arn_suffix, tasks, Cluster};
use crate::aws::AwsError;

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
        let mut stopped = 0;
        for task in strays.iter().filter(|t| !t.is_stopping()) {
            let reason = "its cluster profile no longer exists in GoCD";
            if self.stop_task(&task.arn, reason).await.is_ok() {
                stopped += 1;
            }
        }
        if stopped > 0 {
            let message = format!("stopped {stopped} task(s) of a cluster profile that no longer exists (key {key})");
            self.event(crate::protocol::host_calls::HealthKind::Warning, message);
        }
        Ok(stopped)
    }
}
