//! One span per AWS call attempt made within a job's trace (the port's
//! `aws::calls::CallStats::attempt_in` opens it): a `tracing` span that the logging setup's
//! OpenTelemetry layer turns into a child of the job's current span, named after the operation
//! and carrying AWS's request id, or the error code of a failed attempt. Only the operation, the
//! attempt, the request id and the error code: never a request's content (a task's environment
//! holds the agent's registration key).

use opentelemetry::trace::TraceContextExt as _;
use opentelemetry::Context;
use tracing::field::Empty;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// A span for one attempt of `operation`, a child of the job span the caller runs in; a
/// disabled span (no trace) outside a job's trace or while traces are off.
pub fn span(operation: &'static str, attempt: u32) -> Span {
    let cx = Context::current();
    if !super::enabled() || !cx.has_active_span() {
        return Span::none();
    }
    let span = tracing::info_span!(
        target: "ecs_elastic_agent::telemetry",
        "aws call",
        otel.name = operation,
        otel.kind = "client",
        rpc.system = "aws-api",
        rpc.method = operation,
        aws.attempt = attempt,
        aws.request_id = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    );
    // Fails only when no OpenTelemetry layer is installed: the span then stays a log span.
    let _ = span.set_parent(cx);
    span
}

/// Records AWS's answer on `span`: its request id, and the error code when it failed.
pub fn answered(span: &Span, request_id: Option<&str>, error_code: Option<&str>) {
    if span.is_disabled() {
        return;
    }
    if let Some(id) = request_id {
        span.record("aws.request_id", id);
    }
    if let Some(code) = error_code {
        span.record("error.type", code);
        span.record("otel.status_code", "ERROR");
    }
}
