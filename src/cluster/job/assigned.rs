//! An agent took its job: the job's wait is measured phase by phase ([`crate::cluster::accounting::job_wait`]),
//! written as one line in the job's console, logged, counted in the wait histograms, and, with
//! traces on, recorded as the phase spans of the job's trace (`telemetry::jobs`).
//!
//! should-assign-work answers from memory under GoCD's lock, so the rest happens in the
//! background. The task's pull and start times come from its record when a refresh or an event
//! brought them; else the tasks taking jobs at that moment are described together (one
//! DescribeTasks per 100), once: a job start costs at most that one read, shared. An agent
//! adopted after a restart is not announced: its job's create-agent went to the process before.

use std::sync::{Arc, PoisonError};
use std::time::SystemTime;

use crate::cluster::accounting::job_wait::{measure, StartPoints, Took};
use crate::cluster::accounting::start_phases::{phase_spans, TracePoints};
use crate::cluster::base::gocd::console_line;
use crate::cluster::Cluster;
use crate::ids::AgentId;
use crate::protocol::types::JobIdentifier;

impl Cluster {
    /// Queues the announcement of an agent taking `job` at `at` (the caller decided it is one,
    /// under the registry's lock); starts the background flush unless one runs (it takes what
    /// queued meanwhile too).
    pub(in crate::cluster) fn took_job(
        self: &Arc<Self>,
        agent_id: &AgentId,
        job: &JobIdentifier,
        at: SystemTime,
        reused: bool,
        console: bool,
    ) {
        let took = Took { agent_id: agent_id.clone(), job: job.clone(), at, reused, console };
        let start = {
            let mut pending = self.state.took.lock().unwrap_or_else(PoisonError::into_inner);
            pending.push(took);
            pending.len() == 1
        };
        if start {
            let cluster = self.clone();
            self.spawn_background(async move { cluster.announce_pending().await });
        }
    }

    /// Announces every queued start, describing the tasks whose times are missing, until none
    /// is left.
    async fn announce_pending(self: Arc<Self>) {
        loop {
            let batch: Vec<Took> = self.state.took.lock().unwrap_or_else(PoisonError::into_inner).clone();
            if batch.is_empty() {
                return;
            }
            self.fill_start_times(&batch).await;
            for took in &batch {
                self.announce(took).await;
            }
            let mut pending = self.state.took.lock().unwrap_or_else(PoisonError::into_inner);
            pending.drain(..batch.len());
            if pending.is_empty() {
                return;
            }
        }
    }

    /// Describes the batch's tasks whose pull or start times the record lacks (one call per 100).
    async fn fill_start_times(&self, batch: &[Took]) {
        let missing: Vec<String> = {
            let registry = self.registry();
            batch
                .iter()
                .filter(|t| !t.reused)
                .filter_map(|t| registry.get(&t.agent_id))
                .filter(|a| a.task.as_ref().is_none_or(|t| t.pull_stopped_at.is_none() || t.started_at.is_none()))
                .filter_map(|a| a.task_arn.as_deref().map(str::to_string))
                .collect()
        };
        if missing.is_empty() {
            return;
        }
        let profile = self.profile();
        let suffix = crate::cluster::base::identity::cluster_arn_suffix(&profile.cluster_name);
        let aws = self.aws();
        match crate::cluster::agents::tasks::describe(
            &aws,
            &profile.cluster_name,
            &suffix,
            &missing,
            self.server_id(),
            self.key(),
        )
        .await
        {
            Ok(tasks) => {
                let mut registry = self.registry();
                for task in &tasks {
                    registry.task_event(task);
                }
            }
            // The line goes out with the phases the record knows.
            Err(e) => tracing::info!(error = %e, "could not read the start times of tasks taking their jobs"),
        }
    }

    /// Measures one start and says it: the job's console, the log, the histograms.
    async fn announce(&self, took: &Took) {
        let (wait, elastic_profile, trace) = {
            let registry = self.registry();
            let Some(a) = registry.get(&took.agent_id) else { return };
            let Some(requested) = a.job_requested_at else { return };
            let points = StartPoints::of_task(requested, a.task.as_ref(), took.at, took.reused);
            let registered = match (a.registered_at, a.asked_for_work_at) {
                (Some(listed), Some(asked)) => Some(listed.min(asked)),
                (listed, asked) => listed.or(asked),
            };
            let running = a.task.as_ref().and_then(|t| t.started_at);
            let trace = TracePoints { wait: points.clone(), running, registered };
            (measure(&points), a.elastic_profile.clone(), trace)
        };
        self.job_waits().observe(&elastic_profile, &wait);
        crate::telemetry::jobs::assigned(&took.job, &phase_spans(&trace), took.reused);
        let phases: Vec<String> = wait
            .phases
            .iter()
            .map(|(steps, d)| {
                let names: Vec<&str> = steps.iter().map(|s| s.label()).collect();
                format!("{}={:.1}", names.join("+"), d.as_secs_f64())
            })
            .collect();
        tracing::info!(
            agent_id = %took.agent_id,
            job = %took.job.locator(),
            wait_s = wait.total.as_secs_f64(),
            phases = %phases.join(" "),
            reused = took.reused,
            "agent took its job"
        );
        if took.console {
            let _ = self.gocd.console_log(&took.job, console_line(wait.console_text(&took.agent_id))).await;
        }
    }
}
