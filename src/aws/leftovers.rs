//! The port's calls for `ecs-elastic-agent leftovers` (`cli::leftovers`): the clusters of a
//! region (ListClusters) (a cluster's tasks are `ecs::list_tasks`'s), the
//! instances that carry a GoCD server's tag (DescribeInstances), the ACTIVE revisions of a
//! task-definition family with their tags and age (ListTaskDefinitions, DescribeTaskDefinition),
//! and TerminateInstances with each instance's outcome. Each goes through the account's budget
//! and retries ([`CallStats`](super::CallStats)), pages to the end, and returns plain data.
//! Which of it is the plugin's, and what to remove, is the command's.

use std::collections::HashMap;
use std::time::SystemTime;

use aws_sdk_ec2::types::Filter;
use aws_sdk_ecs::types::{TaskDefinitionField, TaskDefinitionStatus};

use super::budget::Category;
use super::status::{Ec2State, ResourceStatus};
use super::tags::TAG_SERVER_ID;
use super::{AwsClients, AwsError, Failure};

/// AWS's limit of instance ids per TerminateInstances.
pub const TERMINATE_BATCH: usize = 1000;

/// An EC2 instance, with every tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaggedInstance {
    /// Its id.
    pub id: String,
    /// Its state (`running`, `stopped`, ...).
    pub state: Ec2State,
    /// Its instance type.
    pub instance_type: String,
    /// When it was launched (last started, for one that was stopped).
    pub launched_at: Option<SystemTime>,
    /// Its tags.
    pub tags: HashMap<String, String>,
}

/// A task-definition revision, with its tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaggedRevision {
    /// Its ARN.
    pub arn: String,
    /// `ACTIVE` or `INACTIVE` (`DELETE_IN_PROGRESS` on its way out).
    pub status: ResourceStatus,
    /// When it was registered.
    pub registered_at: Option<SystemTime>,
    /// Its tags.
    pub tags: HashMap<String, String>,
}

/// What TerminateInstances answered for one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminating {
    /// The instance id.
    pub id: String,
    /// Its state before.
    pub previous: Ec2State,
    /// Its state now (`shutting-down`, `terminated`).
    pub current: Ec2State,
}

impl AwsClients {
    /// The ARNs of every cluster of the region (every page).
    ///
    /// # Errors
    /// The failed ListClusters call.
    pub async fn list_clusters(&self) -> Result<Vec<String>, AwsError> {
        let mut arns = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let request = self.ecs.list_clusters().max_results(100).set_next_token(next.take());
            let page = self.calls.call("ListClusters", || request.clone().send()).await?;
            arns.extend(page.cluster_arns().iter().cloned());
            match page.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_string()),
                _ => return Ok(arns),
            }
        }
    }

    /// The instances not terminated that carry the `gocd:server-id` tag (of `server_id` when
    /// given), with every tag (every page).
    ///
    /// # Errors
    /// The failed DescribeInstances call.
    pub async fn instances_with_server_tag(&self, server_id: Option<&str>) -> Result<Vec<TaggedInstance>, AwsError> {
        let mut filters =
            vec![Filter::builder().name("tag-key").values(TAG_SERVER_ID).build(), super::ec2::not_terminated()];
        if let Some(id) = server_id {
            filters.push(Filter::builder().name(format!("tag:{TAG_SERVER_ID}")).values(id).build());
        }
        let mut found = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let request = self
                .ec2
                .describe_instances()
                .set_filters(Some(filters.clone()))
                .max_results(1000)
                .set_next_token(next.take());
            let page = self.calls.call("DescribeInstances", || request.clone().send()).await?;
            found.extend(page.reservations().iter().flat_map(|r| r.instances()).filter_map(instance_view));
            match page.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_string()),
                _ => return Ok(found),
            }
        }
    }

    /// The ARNs of the ACTIVE revisions of exactly `family` (every page).
    ///
    /// # Errors
    /// The failed ListTaskDefinitions call.
    pub async fn active_revisions(&self, family: &str) -> Result<Vec<String>, AwsError> {
        let mut arns = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let request = self
                .ecs
                .list_task_definitions()
                .family_prefix(family)
                .status(TaskDefinitionStatus::Active)
                .max_results(100)
                .set_next_token(next.take());
            let page = self.calls.call("ListTaskDefinitions", || request.clone().send()).await?;
            arns.extend(page.task_definition_arns().iter().cloned());
            match page.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_string()),
                _ => return Ok(arns),
            }
        }
    }

    /// One revision with its tags; `None` when ECS no longer has it.
    ///
    /// # Errors
    /// The failed DescribeTaskDefinition call.
    pub async fn tagged_revision(&self, arn: &str) -> Result<Option<TaggedRevision>, AwsError> {
        let describe = self.ecs.describe_task_definition().task_definition(arn).include(TaskDefinitionField::Tags);
        let absent = |e: &AwsError| e.failure == Failure::NotFound;
        let out = match self.calls.call_unless("DescribeTaskDefinition", absent, || describe.clone().send()).await {
            Ok(out) => out,
            Err(e) if absent(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let tags = out
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string())))
            .collect();
        Ok(out.task_definition().map(|td| TaggedRevision {
            arn: td.task_definition_arn().unwrap_or(arn).to_string(),
            status: td.status().map(ResourceStatus::from).unwrap_or_default(),
            registered_at: td.registered_at().and_then(|t| SystemTime::try_from(*t).ok()),
            tags,
        }))
    }

    /// Terminates these instances, at most [`TERMINATE_BATCH`]: what EC2 answered for each.
    ///
    /// # Errors
    /// The failed TerminateInstances call (none of the batch was terminated).
    pub async fn terminate_instances(&self, ids: &[String]) -> Result<Vec<Terminating>, AwsError> {
        let ids = &ids[..ids.len().min(TERMINATE_BATCH)];
        let request = self.ec2.terminate_instances().set_instance_ids(Some(ids.to_vec()));
        self.calls.spend(Category::Ec2InstancesTerminated, u32::try_from(ids.len()).unwrap_or(u32::MAX)).await;
        let out = self.calls.call("TerminateInstances", || request.clone().send()).await?;
        let state = |s: Option<&aws_sdk_ec2::types::InstanceState>| {
            s.and_then(|s| s.name()).map(Ec2State::from).unwrap_or_default()
        };
        Ok(out
            .terminating_instances()
            .iter()
            .filter_map(|c| {
                Some(Terminating {
                    id: c.instance_id()?.to_string(),
                    previous: state(c.previous_state()),
                    current: state(c.current_state()),
                })
            })
            .collect())
    }
}

fn instance_view(i: &aws_sdk_ec2::types::Instance) -> Option<TaggedInstance> {
    Some(TaggedInstance {
        id: i.instance_id()?.to_string(),
        state: i.state().and_then(|s| s.name()).map(Ec2State::from).unwrap_or_default(),
        instance_type: i.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
        launched_at: i.launch_time().and_then(|t| SystemTime::try_from(*t).ok()),
        tags: i
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string())))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{Instance, InstanceState, InstanceStateName, InstanceType, Tag};

    #[test]
    fn reads_an_instance_with_its_tags() {
        let i = Instance::builder()
            .instance_id("i-0abc")
            .instance_type(InstanceType::C5Xlarge)
            .state(InstanceState::builder().name(InstanceStateName::Stopped).build())
            .tags(Tag::builder().key(TAG_SERVER_ID).value("A").build())
            .build();
        let v = instance_view(&i).expect("an instance with an id");
        assert_eq!((v.id.as_str(), &v.state, v.instance_type.as_str()), ("i-0abc", &Ec2State::Stopped, "c5.xlarge"));
        assert_eq!(v.tags.get(TAG_SERVER_ID).map(String::as_str), Some("A"));
        assert_eq!(instance_view(&Instance::builder().build()), None, "no id, nothing to name");
    }
}
