//! The stdio server: hello first, then read host lines, answer each request on its own task
//! (many in flight, answered in any order), route host answers to our waiting calls, and shut
//! down on EOF or a signal after the requests in flight finish (10 s at most).
//!
//! `serve` is the testable core: `main` hands it stdin and stdout, tests hand it in-memory pipes.

pub mod connection;
pub mod host;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::task::JoinSet;

use self::connection::{read_line, Connection, Line};
use self::host::{HostClient, DEFAULT_CALL_TIMEOUT};
use crate::handlers::{self, Dispatcher};
use crate::plugin::{Plugin, PluginOptions};
use crate::protocol::framing::{decode, summarize, too_long, BadLine};
use crate::protocol::{Incoming, Outgoing, MAX_LINE_BYTES};

/// How long requests in flight may take to finish after input ends.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Host requests handled at once. The reader waits for a free slot before it reads the next
/// line (never dropping one), so memory is bounded by this many requests (each line at most
/// `MAX_LINE_BYTES`, 16 MiB) plus the pipe's buffer, however fast the host writes.
/// GoCD itself sends few at once (5 create-agent threads, a ping, the scheduler's
/// should-assign-work calls one by one).
pub const MAX_IN_FLIGHT: usize = 256;

/// Knobs of one server run.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Timeout of each call to the host.
    pub call_timeout: Duration,
    /// Grace period for requests in flight at shutdown.
    pub shutdown_grace: Duration,
    /// What the plugin itself needs.
    pub plugin: PluginOptions,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            call_timeout: DEFAULT_CALL_TIMEOUT,
            shutdown_grace: SHUTDOWN_GRACE,
            plugin: PluginOptions::default(),
        }
    }
}

/// Sends server health when an event from a queue changed it (a stop, a drain, an unreadable
/// queue), so it need not wait for the next server-ping; several at once go out as one update.
async fn send_health_on_events(plugin: std::sync::Weak<Plugin>) {
    let Some(changed) = plugin.upgrade().map(|p| p.health_changed()) else { return };
    loop {
        changed.notified().await;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let Some(plugin) = plugin.upgrade() else { return };
        if let Err(e) = plugin.send_health().await {
            tracing::debug!(error = %e, "server health not sent after an event; the next server-ping sends it");
        }
    }
}

/// Serves the protocol on `input`/`output` until EOF or `shutdown` resolves.
///
/// # Errors
/// Only I/O errors of the output; bad input is answered, never fatal.
pub async fn serve<R, W, S>(input: R, output: W, options: ServeOptions, shutdown: S) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
    S: Future<Output = ()>,
{
    let (connection, writer) = Connection::start(output);
    connection.send(Outgoing::hello()).await;
    let host = HostClient::new(connection.clone(), options.call_timeout);
    let plugin = Arc::new(Plugin::new(Arc::new(host), options.plugin.clone()));
    plugin.metrics().attach(&plugin);
    let health = tokio::spawn(send_health_on_events(Arc::downgrade(&plugin)));
    let dispatcher = Arc::new(handlers::dispatcher());

    let in_flight = read_until_done(input, &connection, &plugin, &dispatcher, shutdown).await;
    connection.close();
    finish_in_flight(in_flight, options.shutdown_grace).await;
    plugin.shutdown();
    health.abort();
    drop(plugin);
    connection.stop_writer();
    drop(connection);
    match writer.await {
        Ok(result) => result,
        Err(e) => Err(std::io::Error::other(e)),
    }
}

async fn read_until_done<R, S>(
    mut input: R,
    connection: &Arc<Connection>,
    plugin: &Arc<Plugin>,
    dispatcher: &Arc<Dispatcher>,
    shutdown: S,
) -> JoinSet<()>
where
    R: AsyncBufRead + Unpin,
    S: Future<Output = ()>,
{
    let mut in_flight = JoinSet::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
    tokio::pin!(shutdown);
    loop {
        while in_flight.try_join_next().is_some() {}
        let line = tokio::select! {
            line = read_line(&mut input, &mut buf, MAX_LINE_BYTES) => line,
            () = &mut shutdown => {
                tracing::info!("shutdown signal: finishing requests in flight");
                return in_flight;
            }
        };
        let incoming = match line {
            Ok(Line::Text(text)) => {
                if tracing::enabled!(tracing::Level::TRACE) {
                    // Name, id and size only: a line's body may carry secrets.
                    tracing::trace!(line = %summarize(&text), "< ");
                }
                if !may_be_answer(&text) {
                    // A request: parsed on its own task too, beside the reading of the next
                    // lines, not before it (README "Performance"). At MAX_IN_FLIGHT the reader
                    // waits for a slot; answers to our calls are never held back by the cap
                    // except behind a request that waits (its calls time out at worst).
                    let slot = tokio::select! {
                        slot = slots.clone().acquire_owned() => match slot {
                            Ok(slot) => slot,
                            Err(_) => return in_flight,
                        },
                        () = &mut shutdown => {
                            tracing::info!("shutdown signal: finishing requests in flight");
                            return in_flight;
                        }
                    };
                    let (plugin, dispatcher, connection) = (plugin.clone(), dispatcher.clone(), connection.clone());
                    in_flight.spawn(async move {
                        let _slot = slot;
                        match decode(&text) {
                            Ok(Incoming::Request(request)) => {
                                let response = dispatcher.dispatch(plugin, request).await;
                                connection.send(response.into()).await;
                            }
                            Ok(Incoming::Response(response)) => route_answer(&connection, response),
                            Err(bad) => answer_bad_line(&connection, bad).await,
                        }
                    });
                    continue;
                }
                decode(&text)
            }
            Ok(Line::TooLong(len)) => Err(too_long(len)),
            Ok(Line::Eof) => {
                tracing::info!("stdin closed: finishing requests in flight");
                return in_flight;
            }
            Err(e) => {
                tracing::error!(error = %e, "reading stdin failed: shutting down");
                return in_flight;
            }
        };
        match incoming {
            Ok(Incoming::Request(request)) => {
                // A request line that mentions "response" somewhere: rare, and capped like any.
                let Ok(slot) = slots.clone().acquire_owned().await else { return in_flight };
                let (plugin, dispatcher, connection) = (plugin.clone(), dispatcher.clone(), connection.clone());
                in_flight.spawn(async move {
                    let _slot = slot;
                    let response = dispatcher.dispatch(plugin, request).await;
                    connection.send(response.into()).await;
                });
            }
            Ok(Incoming::Response(response)) => route_answer(connection, response),
            Err(bad) => answer_bad_line(connection, bad).await,
        }
    }
}

/// Whether a line may be the host's answer to one of our calls. Those are routed by the reader
/// itself, in order (an answer just before EOF still reaches its call); any other line goes to
/// a task of its own.
fn may_be_answer(line: &[u8]) -> bool {
    const RESPONSE: &[u8] = b"\"response\"";
    line.windows(RESPONSE.len()).any(|w| w == RESPONSE)
}

fn route_answer(connection: &Connection, response: crate::protocol::Response) {
    let id = response.id.clone();
    if !connection.complete(response) {
        tracing::warn!(id = ?id, "answer from the host to no call in flight; dropped");
    }
}

async fn answer_bad_line(connection: &Connection, bad: BadLine) {
    tracing::warn!(id = ?bad.id, problem = %bad.message, "bad line from the host");
    if bad.was_response {
        return; // a response is never answered; logged is all we can do.
    }
    connection.send(crate::protocol::Response::error(bad.id, 400, &bad.message).into()).await;
}

async fn finish_in_flight(mut in_flight: JoinSet<()>, grace: Duration) {
    let drained = tokio::time::timeout(grace, async { while in_flight.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(abandoned = in_flight.len(), "requests still running after the shutdown grace period");
        in_flight.abort_all();
    }
}
