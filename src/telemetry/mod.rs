//! Traces over OTLP: when the standard `OTEL_*` variables ask for them, one trace per
//! job start — the job's wait phase by phase, the requests GoCD sent for it and the AWS calls
//! they made — exported to an OpenTelemetry collector (Jaeger, Tempo, an OpenTelemetry
//! Collector, ...). Nothing is set up, and nothing leaves the process, when they are unset.
//!
//! - This module: the exporter, from the environment ([`Telemetry::from_env`]), and its
//!   shutdown, which sends what is still buffered.
//! - [`jobs`]: each job's trace, kept in memory by job across the requests that make it.
//! - [`calls`]: one span per AWS call made within a job's trace, with AWS's request id.
//! - `tls`: the exporter's transport, over TLS for an `https://` endpoint.
//!
//! The SDK reads the standard variables itself: `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the
//! default, or `grpc`), `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`,
//! `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`, `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME`
//! (here `ecs-elastic-agent` by default); `OTEL_EXPORTER_OTLP_CERTIFICATE` is read here
//! (`tls`). `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn traces off. The exporter never writes stdout (the GoCD protocol's); its own problems go
//! to the log on stderr.

pub mod calls;
pub mod jobs;
mod tls;

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;

/// The service name when `OTEL_SERVICE_NAME` does not say one.
pub const SERVICE_NAME: &str = "ecs-elastic-agent";

/// The `tracing` target of the spans that become OpenTelemetry spans (the AWS calls); the
/// logging setup gives them to the OpenTelemetry layer only.
pub const SPAN_TARGET: &str = "ecs_elastic_agent::telemetry";

/// How long shutdown waits for the last spans to be sent.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The process's tracer, set once by [`Telemetry::from_env`]; while unset every function of
/// this module does nothing.
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// The tracer, when traces are on.
fn tracer() -> Option<&'static SdkTracer> {
    TRACER.get()
}

/// Whether traces are on in this process.
pub fn enabled() -> bool {
    TRACER.get().is_some()
}

/// The exporter set up from the environment; [`Telemetry::shutdown`] sends what is buffered.
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Sets up the OTLP exporter when the process's environment asks for traces (see the module
    /// doc), with a batch span processor on the current tokio runtime (call it within one).
    /// `Ok(None)`: traces are off.
    ///
    /// # Errors
    /// The exporter could not be built from the variables (an endpoint that is no URL): the
    /// message says which; the plugin then runs without traces.
    pub fn from_env() -> Result<Option<Telemetry>, String> {
        Self::from(|name| std::env::var(name).ok())
    }

    /// [`Telemetry::from_env`] with the variables this module decides by read through `var`
    /// (the SDK reads the rest from the process's environment).
    fn from(var: impl Fn(&str) -> Option<String>) -> Result<Option<Telemetry>, String> {
        if !wanted(&var) {
            return Ok(None);
        }
        let exporter = tls::exporter(&var).map_err(|e| format!("traces are off: {e}"))?;
        let processor = BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
        let mut resource = Resource::builder();
        if !service_named(&var) {
            resource = resource.with_service_name(SERVICE_NAME);
        }
        let resource =
            resource.with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))).build();
        let provider = SdkTracerProvider::builder().with_span_processor(processor).with_resource(resource).build();
        let tracer = provider.tracer(SERVICE_NAME);
        TRACER.set(tracer).map_err(|_| "traces were set up twice".to_string())?;
        Ok(Some(Telemetry { provider }))
    }

    /// The tracer, for the logging setup's OpenTelemetry layer.
    pub fn tracer(&self) -> SdkTracer {
        self.provider.tracer(SERVICE_NAME)
    }

    /// Ends the traces of jobs still open (their spans so far are sent) and sends every
    /// buffered span, waiting at most a few seconds.
    pub async fn shutdown(self) {
        jobs::end_all("the plugin stopped before the job completed");
        let provider = self.provider;
        // The processor's task runs on this runtime: wait for it from a blocking thread.
        let done = tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(SHUTDOWN_WAIT)).await;
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the last spans may not have been sent"),
            Err(e) => tracing::warn!(error = %e, "the last spans may not have been sent"),
        }
    }
}

/// Whether the variables ask for traces: an OTLP endpoint is set, and neither
/// `OTEL_SDK_DISABLED` nor `OTEL_TRACES_EXPORTER` says no.
fn wanted(var: &impl Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| var(name).is_some_and(|v| !v.trim().is_empty());
    let endpoint = set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let exporter_none = var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"));
    endpoint && !disabled && !exporter_none
}

/// Whether the variables name the service (`OTEL_SERVICE_NAME`, or `service.name` among
/// `OTEL_RESOURCE_ATTRIBUTES`); else it is [`SERVICE_NAME`].
fn service_named(var: &impl Fn(&str) -> Option<String>) -> bool {
    let named = var("OTEL_SERVICE_NAME").is_some_and(|s| !s.trim().is_empty());
    let in_attributes = var("OTEL_RESOURCE_ATTRIBUTES")
        .is_some_and(|a| a.split(',').any(|kv| kv.split('=').next().is_some_and(|k| k.trim() == "service.name")));
    named || in_attributes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The variables `pairs` say, as [`Telemetry::from`] reads them (the module's tests share it).
    pub(super) fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn without_the_variables_nothing_is_set_up() {
        let telemetry = Telemetry::from(vars(&[("OTEL_SERVICE_NAME", "x"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]));
        assert!(matches!(telemetry, Ok(None)), "{telemetry:?}");
        assert!(!enabled(), "no tracer without an endpoint");
        // Every entry point is then a no-op.
        let job = jobs::tests::job("p", 1);
        assert_eq!(jobs::traceparent(&job), None);
        let now = std::time::SystemTime::now();
        let phase =
            jobs::PhaseSpan { name: "queued".into(), start: now, end: now, to: "task accepted", ecs_status: None };
        jobs::assigned(&job, &[phase], false);
        assert_eq!(jobs::open_count(), 0);
        assert!(calls::span("RunTask", 1).is_disabled());
    }

    #[test]
    fn an_endpoint_asks_for_traces_unless_they_are_turned_off() {
        assert!(wanted(&vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")])));
        assert!(wanted(&vars(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")])));
        assert!(!wanted(&vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])));
        assert!(!wanted(&vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"), ("OTEL_SDK_DISABLED", "true")])));
        assert!(!wanted(&vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"), ("OTEL_TRACES_EXPORTER", "none")])));
        assert!(!wanted(&vars(&[])));
    }

    #[test]
    fn the_service_is_ecs_elastic_agent_unless_the_variables_name_it() {
        assert!(!service_named(&vars(&[])));
        assert!(!service_named(&vars(&[("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci")])));
        assert!(service_named(&vars(&[("OTEL_SERVICE_NAME", "gocd-plugin")])));
        assert!(service_named(&vars(&[("OTEL_RESOURCE_ATTRIBUTES", "team=ci, service.name=gocd-plugin")])));
    }
}
