//! The request registry: one line per v5 request, mapping its name to a typed handler
//! (rust-analyzer's `dispatch.rs`). Parsing the body into the request's params type happens
//! here once: a body of the wrong shape is a 400 naming the field, an unknown name a 404.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use crate::error::{PluginError, Result};
use crate::plugin::Plugin;
use crate::protocol::requests::HostRequest;
use crate::protocol::{check_request_version, MessageId, Request, Response};

type BoxFuture = Pin<Box<dyn Future<Output = Result<Value>> + Send>>;
type Handler = Box<dyn Fn(Arc<Plugin>, Value) -> BoxFuture + Send + Sync>;

/// Request name → handler.
pub struct Dispatcher {
    handlers: HashMap<&'static str, Handler>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher").field("requests", &self.handlers.len()).finish()
    }
}

impl Default for Dispatcher {
    fn default() -> Self {
        Self::new()
    }
}

impl Dispatcher {
    /// An empty registry.
    pub fn new() -> Self {
        Dispatcher { handlers: HashMap::new() }
    }

    /// Registers `handler` for request `R`.
    pub fn on<R, F, Fut>(mut self, handler: F) -> Self
    where
        R: HostRequest,
        F: Fn(Arc<Plugin>, R::Params) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R::Result>> + Send + 'static,
    {
        let boxed: Handler = Box::new(move |plugin, body| match parse_body::<R>(body) {
            Ok(params) => {
                let fut = handler(plugin, params);
                Box::pin(async move {
                    let result = fut.await?;
                    serde_json::to_value(result)
                        .map_err(|e| PluginError::Internal(format!("could not encode the answer: {e}")))
                })
            }
            Err(e) => Box::pin(std::future::ready(Err(e))),
        });
        self.handlers.insert(R::NAME, boxed);
        self
    }

    /// Whether `name` has a handler.
    pub fn knows(&self, name: &str) -> bool {
        self.handlers.contains_key(name)
    }

    /// Answers one request. Never panics; a panicking handler is a 500.
    pub async fn dispatch(&self, plugin: Arc<Plugin>, request: Request) -> Response {
        let Request { id, name, version, body } = request;
        if let Err(message) = check_request_version(&name, version.as_deref()) {
            return PluginError::BadRequest(message).to_response(Some(id));
        }
        let metrics = plugin.metrics().clone();
        let Some(handler) = self.handlers.get(name.as_str()) else {
            metrics.request("unknown", "unknown_request");
            return PluginError::UnknownRequest(name.chars().take(200).collect()).to_response(Some(id));
        };
        // `request`, not `name`: JSON logs put the span's own name under "name".
        let id_text = match &id {
            MessageId::Int(n) => n.to_string(),
            MessageId::Str(s) => s.clone(),
        };
        // should-assign-work is GoCD's hot path (every job × idle agent, under GoCD's lock) and
        // logs nothing of its own: its span is debug-level, which costs nothing at the default
        // level (an info span is a tenth of such a request's time, README "Performance").
        let span = if name == crate::protocol::requests::ShouldAssignWork::NAME {
            tracing::debug_span!("request", request = %name, id = %id_text)
        } else {
            tracing::info_span!("request", request = %name, id = %id_text)
        };
        let future = span.in_scope(|| handler(plugin, body));
        // Run in this task (already one per request): a panic is caught here, without paying for
        // a second task per request (README "Performance").
        let outcome = CatchUnwind(tracing::Instrument::instrument(future, span.clone())).await;
        let _in_request = span.enter();
        match outcome {
            Ok(Ok(body)) => {
                metrics.request(&name, "ok");
                Response::ok(id, body)
            }
            Ok(Err(error)) => {
                metrics.request(&name, error.metric_label());
                tracing::warn!(request = %name, code = error.code(), kind = error.metric_label(), %error, "request failed");
                error.to_response(Some(id))
            }
            Err(panic) => {
                metrics.request(&name, "panic");
                tracing::error!(request = %name, error = %panic_text(panic.as_ref()), "request handler panicked");
                PluginError::Internal(format!("the handler of {name} failed unexpectedly; see the plugin log"))
                    .to_response(Some(id))
            }
        }
    }
}

/// A future whose panic becomes an `Err` with the panic's payload (what `tokio::spawn` gives a
/// `JoinHandle`, without a task of its own).
struct CatchUnwind<F>(F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = std::result::Result<F::Output, Box<dyn std::any::Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let inner = &mut self.0;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(std::task::Poll::Ready(value)) => std::task::Poll::Ready(Ok(value)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        }
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(text), _) => (*text).to_string(),
        (None, Some(text)) => text.clone(),
        (None, None) => "a panic without a message".to_string(),
    }
}

fn parse_body<R: HostRequest>(body: Value) -> Result<R::Params> {
    // Straight from the value first: tracking the path costs a fifth of a cheap request's time
    // (README "Performance"), and only a body that does not fit needs it, for the message.
    if let Ok(params) = <R::Params as serde::Deserialize>::deserialize(&body) {
        return Ok(params);
    }
    serde_path_to_error::deserialize::<_, R::Params>(body).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let at = if path == "." { String::new() } else { format!(" at `{path}`") };
        let inner = crate::protocol::framing::without_quoted(&inner.to_string()); // no value echoed
        PluginError::BadRequest(format!("the body of {} is not what GoCD sends{at}: {inner}", R::NAME))
    })
}
