//! The port's task definition calls of the sweep: ListTaskDefinitionFamilies,
//! ListTaskDefinitions, DescribeTaskDefinition (for its tags) and DeregisterTaskDefinition,
//! each through the account's budget, with plain names, ARNs and tags in and out. Which
//! revisions are ours and may go is the engine's (`cluster::task_definition_sweep`).

use std::collections::HashMap;

use aws_sdk_ecs::types::{TaskDefinitionFamilyStatus, TaskDefinitionField, TaskDefinitionStatus};

use super::{AwsClients, AwsError};

impl AwsClients {
    /// The ACTIVE task definition families whose names start with `prefix` (every page).
    ///
    /// # Errors
    /// The failed ListTaskDefinitionFamilies call.
    pub async fn list_families(&self, prefix: &str) -> Result<Vec<String>, AwsError> {
        let mut families = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let request = self
                .ecs
                .list_task_definition_families()
                .family_prefix(prefix)
                .status(TaskDefinitionFamilyStatus::Active)
                .set_next_token(next.take());
            let page = self.calls.call("ListTaskDefinitionFamilies", || request.clone().send()).await?;
            families.extend(page.families().iter().cloned());
            match page.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_string()),
                _ => return Ok(families),
            }
        }
    }

    /// The ARNs of up to 100 ACTIVE revisions of `family` (one page).
    ///
    /// # Errors
    /// The failed ListTaskDefinitions call.
    pub async fn list_revisions(&self, family: &str) -> Result<Vec<String>, AwsError> {
        let request = self
            .ecs
            .list_task_definitions()
            .family_prefix(family)
            .status(TaskDefinitionStatus::Active)
            .max_results(100);
        let out = self.calls.call("ListTaskDefinitions", || request.clone().send()).await?;
        Ok(out.task_definition_arns().to_vec())
    }

    /// The tags of one revision (DescribeTaskDefinition with tags).
    ///
    /// # Errors
    /// The failed call.
    pub async fn task_definition_tags(&self, arn: &str) -> Result<HashMap<String, String>, AwsError> {
        let describe = self.ecs.describe_task_definition().task_definition(arn).include(TaskDefinitionField::Tags);
        let out = self.calls.call("DescribeTaskDefinition", || describe.clone().send()).await?;
        Ok(out
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string())))
            .collect())
    }

    /// Deregisters one revision.
    ///
    /// # Errors
    /// The failed DeregisterTaskDefinition call.
    pub async fn deregister_task_definition(&self, arn: &str) -> Result<(), AwsError> {
        let deregister = self.ecs.deregister_task_definition().task_definition(arn);
        self.calls.call("DeregisterTaskDefinition", || deregister.clone().send()).await.map(|_| ())
    }
}
