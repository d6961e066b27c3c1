//! Each job's trace. A job's start spans several requests (create-agent, re-sent while the job
//! waits; should-assign-work; job-completion), so its trace is kept here, in memory, by job
//! (its locator, which a rerun changes), from its first create-agent to its job-completion:
//!
//! ```text
//! job pipeline/1/stage/1/job                      create-agent received → job-completion
//! ├── create-agent                                each one GoCD sent for the job
//! │   └── RunTask (aws.request_id ...)            the AWS calls it made (`calls`)
//! ├── start on an EC2 instance                    EC2: once an instance has room (`within_job`)
//! │   └── StartTask (aws.request_id ...)
//! ├── queued                                      create-agent received → task accepted
//! ├── provisioning, image pull, container start   ECS: PROVISIONING, PENDING → RUNNING
//! ├── agent registration, assignment              RUNNING → registered → job assigned
//! ├── build                                       the agent took the job → job-completion
//! └── job-completion                              (or the job's span ends, marked unfinished,
//!     └── StopTask                                 when it was cancelled: `gone`)
//! ```
//!
//! The phases are recorded when the agent takes the job, with the start and end times measured
//! then (ECS's `createdAt`, `pullStartedAt`, ...; `cluster::start_phases`). The agent's task
//! gets the job's trace context as `TRACEPARENT` ([`traceparent`]), so a build can continue the
//! trace. A job cancelled while it waited ends when the plugin stops its idle agent for it
//! ([`gone`]); one whose completion never comes otherwise is ended when the process stops, or
//! when more than [`MAX_OPEN`] jobs are open (the oldest first). Everything here does nothing
//! while traces are off.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::{Span as _, SpanKind, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};

use crate::protocol::types::JobIdentifier;

/// Jobs whose trace is open at most; past it the oldest is ended.
pub const MAX_OPEN: usize = 10_000;

/// One phase of a job's start, as a span of its trace (`cluster::start_phases` measures them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseSpan {
    /// The span's name: `image pull`, or `provisioning through container start` for steps
    /// whose boundary was not reported.
    pub name: String,
    /// When it started.
    pub start: SystemTime,
    /// When it ended.
    pub end: SystemTime,
    /// The point it ends at, in words (`task accepted`, `agent registered`, `job assigned`).
    pub to: &'static str,
    /// The task's ECS status during the span, when it had one status throughout.
    pub ecs_status: Option<&'static str>,
}

/// One job's open trace.
#[derive(Debug)]
struct JobTrace {
    /// The context whose span is the job's root span.
    root: Context,
    opened: SystemTime,
    /// When the agent took the job (the build span starts there).
    assigned: Option<SystemTime>,
}

static OPEN: Mutex<Option<HashMap<String, JobTrace>>> = Mutex::new(None);

fn open() -> MutexGuard<'static, Option<HashMap<String, JobTrace>>> {
    OPEN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A request's work, boxed: the handlers' futures are large in debug builds, and a wrapper
/// holding one inline would add its size to every frame that polls it (a worker's stack).
pub type Work<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs create-agent's work for `job` within a `create-agent` span of the job's trace, which
/// it opens on the job's first create-agent.
pub async fn create_agent<T>(job: &JobIdentifier, work: Work<'_, T>) -> T {
    in_span(request_context(job, "create-agent", SpanKind::Server, true), work).await.0
}

/// Runs job-completion's work for `job` within a `job-completion` span of the job's trace, then
/// ends the trace: the build span (the agent took the job → now) and the job's root span.
pub async fn job_completion<T>(job: &JobIdentifier, work: Work<'_, T>) -> T {
    let (out, traced) = in_span(request_context(job, "job-completion", SpanKind::Server, false), work).await;
    if traced {
        end(job, None);
    }
    out
}

/// Runs work the engine does for `job` on its own, outside a request GoCD sent (EC2's StartTask
/// once an instance has room), within a `name` span of the job's open trace, so its AWS calls
/// are children of it. Runs it as it is while traces are off or the job has no open trace.
pub async fn within_job<T>(job: &JobIdentifier, name: &'static str, work: Work<'_, T>) -> T {
    in_span(request_context(job, name, SpanKind::Internal, false), work).await.0
}

/// Runs `work` within `cx`'s span and ends the span; as it is when there is none. Also says
/// whether there was one.
async fn in_span<T>(cx: Option<Context>, work: Work<'_, T>) -> (T, bool) {
    let out = work.with_context(cx.clone().unwrap_or_default()).await;
    if let Some(cx) = &cx {
        cx.span().end();
    }
    (out, cx.is_some())
}

/// The agent took `job`: its start's phases as spans of the job's trace. `reused`: a kept
/// agent took it (no task was started, no phases).
pub fn assigned(job: &JobIdentifier, phases: &[PhaseSpan], reused: bool) {
    let Some(tracer) = super::tracer() else { return };
    let now = SystemTime::now();
    let mut guard = open();
    let Some(trace) = guard.as_mut().and_then(|o| o.get_mut(&job.locator())) else { return };
    trace.assigned = Some(phases.last().map_or(now, |p| p.end));
    trace.root.span().set_attribute(KeyValue::new("gocd.agent_reused", reused));
    for phase in phases {
        let mut attributes = vec![KeyValue::new("gocd.phase.until", phase.to)];
        if let Some(status) = phase.ecs_status {
            attributes.push(KeyValue::new("aws.ecs.task.last_status", status));
        }
        let mut span = tracer
            .span_builder(phase.name.clone())
            .with_kind(SpanKind::Internal)
            .with_start_time(phase.start)
            .with_attributes(attributes)
            .start_with_context(tracer, &trace.root);
        span.end_with_timestamp(phase.end);
    }
}

/// GoCD stopped asking for `job` and no agent took it (cancelled while it waited): its trace
/// ends now, saying `why`. A job some agent took keeps its trace until its job-completion: the
/// agent started for it may go idle while another (a kept or warm one) runs the job.
pub fn gone(job: &JobIdentifier, why: &str) {
    let trace = {
        let mut guard = open();
        let Some(map) = guard.as_mut() else { return };
        let key = job.locator();
        match map.get(&key) {
            Some(trace) if trace.assigned.is_none() => map.remove(&key),
            _ => None,
        }
    };
    if let Some(trace) = trace {
        close(trace, Some(why));
    }
}

/// The W3C trace context of `job`'s trace, for the `TRACEPARENT` of the agent task started for
/// it: `00-<trace id>-<span id of the job's span>-<flags>`. Only within the job's own trace (a
/// request GoCD sent for the job): `None` while traces are off, when the job has no open trace,
/// or for a task started outside it (a warm agent that only borrows the job's key).
pub fn traceparent(job: &JobIdentifier) -> Option<String> {
    let current = Context::current();
    if !current.has_active_span() {
        return None;
    }
    let guard = open();
    let trace = guard.as_ref()?.get(&job.locator())?;
    let span = trace.root.span();
    let sc = span.span_context();
    let within = current.span().span_context().trace_id() == sc.trace_id();
    (within && sc.is_valid()).then(|| format!("00-{}-{}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8()))
}

/// How many jobs have an open trace.
pub fn open_count() -> usize {
    open().as_ref().map_or(0, HashMap::len)
}

/// Ends every open trace, saying `why` on each (the process stops).
pub fn end_all(why: &str) {
    let all: Vec<JobTrace> = open().take().map(|o| o.into_values().collect()).unwrap_or_default();
    for trace in all {
        close(trace, Some(why));
    }
}

/// A context whose span is a new `name` span in `job`'s trace; the trace is opened first when
/// `start` says so and the job has none yet.
fn request_context(job: &JobIdentifier, name: &'static str, kind: SpanKind, start: bool) -> Option<Context> {
    let tracer = super::tracer()?;
    let (root, evicted) = {
        let mut guard = open();
        let map = guard.get_or_insert_with(HashMap::new);
        let key = job.locator();
        let mut evicted = None;
        if !map.contains_key(&key) {
            if !start {
                return None;
            }
            evicted = evict_oldest(map);
            let trace = JobTrace { root: root_context(tracer, job), opened: SystemTime::now(), assigned: None };
            map.insert(key.clone(), trace);
        }
        (map.get(&key)?.root.clone(), evicted)
    };
    if let Some(trace) = evicted {
        close(trace, Some("more jobs were open than the plugin keeps"));
    }
    let span = tracer.span_builder(name).with_kind(kind).start_with_context(tracer, &root);
    Some(root.with_span(span))
}

/// The job's root span, with what identifies the job (nothing secret: no key, no environment).
fn root_context(tracer: &opentelemetry_sdk::trace::SdkTracer, job: &JobIdentifier) -> Context {
    let span = tracer
        .span_builder(format!("job {}", job.locator()))
        .with_kind(SpanKind::Internal)
        .with_attributes([
            KeyValue::new("gocd.job.locator", job.locator()),
            KeyValue::new("gocd.pipeline", job.pipeline_name.clone()),
            KeyValue::new("gocd.pipeline.counter", job.pipeline_counter),
            KeyValue::new("gocd.stage", job.stage_name.clone()),
            KeyValue::new("gocd.stage.counter", job.stage_counter.clone()),
            KeyValue::new("gocd.job", job.job_name.clone()),
            KeyValue::new("gocd.job.id", job.job_id),
        ])
        .start_with_context(tracer, &Context::new());
    Context::new().with_span(span)
}

/// Takes the oldest open trace out when the map is full.
fn evict_oldest(map: &mut HashMap<String, JobTrace>) -> Option<JobTrace> {
    if map.len() < MAX_OPEN {
        return None;
    }
    let key = map.iter().min_by_key(|(_, t)| t.opened).map(|(k, _)| k.clone())?;
    map.remove(&key)
}

/// Ends `job`'s trace.
fn end(job: &JobIdentifier, why: Option<&str>) {
    let trace = open().as_mut().and_then(|o| o.remove(&job.locator()));
    if let Some(trace) = trace {
        close(trace, why);
    }
}

/// Records the build span (when the agent took the job) and ends the root span, now.
fn close(trace: JobTrace, why: Option<&str>) {
    let now = SystemTime::now();
    if let (Some(tracer), Some(assigned)) = (super::tracer(), trace.assigned) {
        let mut build = tracer.span_builder("build").with_start_time(assigned).start_with_context(tracer, &trace.root);
        build.end_with_timestamp(now);
    }
    let root = trace.root.span();
    if let Some(why) = why {
        root.set_attribute(KeyValue::new("gocd.job.unfinished", why.to_string()));
    }
    root.end_with_timestamp(now);
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A job identifier.
    pub fn job(pipeline: &str, counter: i64) -> JobIdentifier {
        JobIdentifier {
            pipeline_name: pipeline.into(),
            pipeline_label: counter.to_string(),
            pipeline_counter: counter,
            stage_name: "build".into(),
            stage_counter: "1".into(),
            job_name: "compile".into(),
            job_id: counter,
        }
    }

    #[tokio::test]
    async fn with_traces_off_the_requests_run_as_they_are() {
        let j = job("p", 2);
        assert_eq!(create_agent(&j, Box::pin(async { 7 })).await, 7);
        assert_eq!(job_completion(&j, Box::pin(async { 8 })).await, 8);
        assert_eq!(within_job(&j, "start on an EC2 instance", Box::pin(async { 9 })).await, 9);
        gone(&j, "cancelled");
        assert_eq!(traceparent(&j), None);
        assert_eq!(open_count(), 0);
    }
}
