//! Carrying out a [`CleanupPlan`] through the AWS port, and telling what was removed: the one
//! place cleanup calls StopTask, TerminateInstances, DeregisterContainerInstance and
//! DeregisterTaskDefinition, and the one place its log lines and health messages are written.

use std::sync::atomic::Ordering;

use super::plan::{family_of, leftover_container_instances, CleanupPlan, Kind};
use crate::aws::status::Ec2State;
use crate::aws::{ec2, AwsError};
use crate::cluster::capacity::ec2::pool::Observed;
use crate::cluster::Cluster;
use crate::protocol::host_calls::HealthKind;

/// What a plan removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Removed {
    /// Tasks ECS accepted to stop (or no longer knew).
    pub stopped_tasks: Vec<crate::ids::TaskArn>,
    /// Instances terminated.
    pub terminated_instances: Vec<String>,
    /// Container instances deregistered.
    pub deregistered_container_instances: Vec<String>,
    /// Task-definition revisions deregistered.
    pub deregistered_task_definitions: Vec<String>,
}

impl Cluster {
    /// Deregisters the container instances the EC2 pass found left behind (`observed`: those
    /// of our instances that went, and those of instances it did not know, `ours` being EC2's
    /// answer for those), and tells the pool which of the unknown instances are gone and which
    /// are not ours. Deregistering only: a failure is logged and the next pass tries again.
    pub(in crate::cluster) async fn clean_up_container_instances(
        &self,
        observed: Observed,
        ours: &[(String, Ec2State)],
    ) {
        let (leftovers, learned) = leftover_container_instances(observed.deregister, observed.unknown, ours);
        {
            let now = self.now();
            let mut st = self.ec2().state();
            for id in learned.gone {
                st.went(id, now);
            }
            st.not_ours(learned.foreign);
        }
        let _deregistered = self.clean_up(leftovers).await;
    }

    /// Applies `plan`: stops its tasks (one that fails is left for the next pass; `stop_task`
    /// says so in server health), terminates its instances in one call, deregisters its container
    /// instances (a failure is logged and left) and its task definitions (the first failure
    /// ends the pass: what was deregistered before it stays deregistered). Then tells what was
    /// removed, as the plan's kind says.
    ///
    /// # Errors
    /// The failed TerminateInstances or DeregisterTaskDefinition.
    pub async fn clean_up(&self, plan: CleanupPlan) -> Result<Removed, AwsError> {
        let mut removed = Removed::default();
        for (task_arn, reason) in &plan.stop_tasks {
            if self.stop_task(task_arn, reason).await.is_ok() {
                if plan.kind == Kind::Orphans {
                    self.state.swept_orphans.fetch_add(1, Ordering::Relaxed);
                    self.event(HealthKind::Warning, format!("stopped task {task_arn}: {reason}"));
                }
                removed.stopped_tasks.push(task_arn.clone());
            }
        }
        if !plan.terminate_instances.is_empty() {
            ec2::terminate(&self.aws(), &plan.terminate_instances).await?;
            removed.terminated_instances = plan.terminate_instances;
        }
        for arn in plan.deregister_container_instances {
            match ec2::deregister(&self.aws(), &self.profile().cluster_name, &arn).await {
                Ok(()) => {
                    tracing::info!(container_instance = %arn, "deregistered the container instance of a terminated instance");
                    removed.deregistered_container_instances.push(arn);
                }
                Err(e) => {
                    tracing::warn!(container_instance = %arn, error = %e, "could not deregister a leftover container instance")
                }
            }
        }
        for arn in plan.deregister_task_definitions {
            self.aws().deregister_task_definition(&arn).await?;
            // A later launch of this family registers it afresh instead of using a cached revision.
            self.state.task_definitions.forget(family_of(&arn));
            removed.deregistered_task_definitions.push(arn);
        }
        self.report(&plan.kind, &removed);
        Ok(removed)
    }

    /// The summary of what a plan removed (orphans are told one by one, as they stop).
    fn report(&self, kind: &Kind, removed: &Removed) {
        let stopped = removed.stopped_tasks.len();
        match kind {
            Kind::Orphans => {}
            Kind::Strays { key } if stopped > 0 => {
                let message =
                    format!("stopped {stopped} task(s) of a cluster profile that no longer exists (key {key})");
                self.event(HealthKind::Warning, message);
            }
            Kind::Strays { .. } => {}
            Kind::Leftovers => {
                if stopped > 0 {
                    let message =
                        format!("stopped {stopped} leftover task(s) of cluster profiles that no longer exist");
                    self.event(HealthKind::Warning, message);
                }
                let terminated = &removed.terminated_instances;
                if !terminated.is_empty() {
                    let message = format!(
                        "terminated {} leftover instance(s) of cluster profiles that no longer exist: {}",
                        terminated.len(),
                        terminated.join(", ")
                    );
                    self.event(HealthKind::Warning, message);
                }
            }
            Kind::TaskDefinitions { kept } => {
                let deregistered = &removed.deregistered_task_definitions;
                if !deregistered.is_empty() {
                    tracing::info!(?deregistered, kept, "deregistered task definitions no agent uses");
                }
            }
        }
    }
}
