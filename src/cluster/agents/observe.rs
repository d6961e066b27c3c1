//! The registry's biggest transition: folding what a refresh saw in ECS and what GoCD lists
//! into the records (adopting tasks started before this process, attaching tasks to their
//! records, noting registrations and idleness).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::record::{AgentRecord, Phase, Registry};
use crate::cluster::agents::tasks::Capacity;
use crate::cluster::agents::tasks::TaskView;
use crate::cluster::base::identity::job_from_tags;
use crate::ids::{AgentId, TaskArn};
use crate::protocol::types::{AgentMetadata, AgentState, BuildState};

impl Registry {
    /// Folds ECS's task descriptions and GoCD's agent list into the registry.
    ///
    /// `running` are the tasks ECS lists as ours and running; `described` any task described for
    /// another reason (records whose task no longer runs); `missing` the task ARNs ECS no longer
    /// knows at all. Returns how long each agent GoCD lists for the first time took from
    /// create-agent to now (the launch-to-register metric).
    pub fn observe(
        &mut self,
        running: &[TaskView],
        described: &[TaskView],
        missing: &[TaskArn],
        gocd: &HashMap<AgentId, AgentMetadata>,
        now: SystemTime,
    ) -> Vec<Duration> {
        let mut registered = Vec::new();
        for task in running.iter().chain(described) {
            let known = self.agent_of(task).map(|a| a.agent_id.clone());
            let agent_id = match known.or_else(|| task.agent_id().map(AgentId::from)) {
                Some(id) => id,
                None => continue,
            };
            if self.get(&agent_id).is_none() {
                if let Some(record) = adopted_record(task, &agent_id, now) {
                    tracing::info!(agent_id = agent_id.as_str(), task = %task.arn, "adopted a task started before this process");
                    self.adopt(record);
                } else {
                    continue;
                }
            }
            if let Some(record) = self.get_mut(&agent_id) {
                if record.task_arn.as_deref().is_some_and(|own| own != task.arn) {
                    continue; // a duplicate task of this agent: the orphan sweep deals with it
                }
                record.task_arn.get_or_insert_with(|| task.arn.as_str().into());
                // Unchanged (the common case): keep the copy we have rather than allocate a new one
                // for every agent on every ping.
                if !record.task.as_ref().is_some_and(|kept| kept.unchanged_by(task)) {
                    record.task = Some(task.kept_copy());
                }
                record.task_found();
            }
        }
        for arn in missing {
            if let Some(agent_id) = self.by_task(arn).map(|a| a.agent_id.clone()) {
                if let Some(record) = self.get_mut(&agent_id) {
                    if let Some(task) = &mut record.task {
                        task.forgotten_by_ecs();
                    }
                }
            }
        }
        for record in self.all_mut() {
            match gocd.get(&record.agent_id) {
                Some(agent) => {
                    if record.registered_at.is_none() {
                        registered.push(now.duration_since(record.created_at).unwrap_or_default());
                    }
                    record.registered_at.get_or_insert(now);
                    record.last_listed = Some(now);
                    if matches!(agent.agent_state, AgentState::LostContact | AgentState::Missing) {
                        record.unhealthy_since.get_or_insert(now);
                    } else {
                        record.unhealthy_since = None;
                    }
                    let idle = agent.agent_state == AgentState::Idle && agent.build_state == BuildState::Idle;
                    if idle {
                        record.idle_since.get_or_insert(now);
                    } else {
                        record.idle_since = None;
                        if agent.build_state == BuildState::Building || agent.agent_state == AgentState::Building {
                            record.assigned_at.get_or_insert(now);
                        }
                    }
                }
                None => record.idle_since = None,
            }
            // Asked to stop, and ECS says it has: the agent is done (and no longer counts).
            let task_gone = record.task.as_ref().is_some_and(TaskView::is_stopping) || record.task_arn.is_none();
            if task_gone {
                record.stop_seen(now);
            }
        }
        registered
    }
}

fn adopted_record(task: &TaskView, agent_id: &str, now: SystemTime) -> Option<AgentRecord> {
    let job = job_from_tags(&task.tags)?;
    let job_id = job.job_id;
    let stopped = task.is_stopping();
    Some(AgentRecord {
        agent_id: agent_id.into(),
        job,
        environment: task.tags.get(crate::cluster::base::identity::TAG_ENVIRONMENT).cloned(),
        elastic_profile: task
            .tags
            .get(crate::cluster::base::identity::TAG_ELASTIC_PROFILE)
            .cloned()
            .unwrap_or_default(),
        settings: task
            .tags
            .get(crate::cluster::base::identity::TAG_CLUSTER_SETTINGS)
            .cloned()
            .unwrap_or_default()
            .into(),
        image: task.containers.first().and_then(|c| c.image.clone()).unwrap_or_default(),
        attempt: task.tags.get(crate::cluster::base::identity::TAG_ATTEMPT).and_then(|a| a.parse().ok()).unwrap_or(1),
        phase: if stopped { Phase::Stopped } else { Phase::Running },
        task_arn: Some(task.arn.as_str().into()),
        capacity: Capacity::from_ecs(&task.capacity),
        created_at: task.created_at.unwrap_or(now),
        job_requested_at: None,
        job_asked_at: None,
        registered_at: None,
        asked_for_work_at: None,
        idle_since: None,
        last_listed: None,
        unhealthy_since: None,
        assigned_at: None,
        stopped_at: stopped.then_some(task.stopped_at.unwrap_or(now)),
        stop_reason: stopped.then(|| task.stop_summary()),
        task: Some(task.kept_copy()),
        // Reuse settings live in the elastic profile, not in tags: an adopted agent runs its job
        // out and is stopped (docs/operators.md "Warm starts").
        reuse: None,
        served_jobs: vec![job_id],
        waiting_since: None,
        warm: false,
        removed_at: None,
    })
}
