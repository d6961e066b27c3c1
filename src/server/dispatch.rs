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
                    serde_json::to_value(result).map_err(|e| PluginError::Internal(format!("could not encode the answer: {e}")))
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
        let span = tracing::info_span!("request", request = %name, id = %id_text);
        let future = span.in_scope(|| handler(plugin, body));
        let outcome = tokio::spawn(tracing::Instrument::instrument(future, span.clone())).await;
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
            Err(join) => {
                metrics.request(&name, "panic");
                tracing::error!(request = %name, error = %join, "request handler panicked");
                PluginError::Internal(format!("the handler of {name} failed unexpectedly; see the plugin log")).to_response(Some(id))
            }
        }
    }
}

fn parse_body<R: HostRequest>(body: Value) -> Result<R::Params> {
    serde_path_to_error::deserialize::<_, R::Params>(body).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let at = if path == "." { String::new() } else { format!(" at `{path}`") };
        PluginError::BadRequest(format!("the body of {} is not what GoCD sends{at}: {inner}", R::NAME))
    })
}
