//! The connection to the host: the only writer of stdout, the bounded line reader, and the map
//! of our calls still waiting for the host's answer (nushell's engine calls, lsp-server's
//! `req_queue`). A waiter is registered before its request is written; when stdin closes every
//! waiter is failed, never left hanging.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use crate::protocol::framing::{encode, summarize_outgoing};
use crate::protocol::{MessageId, Outgoing, Response};

/// How many lines may wait for the writer before senders wait.
const OUTBOX_DEPTH: usize = 4096;

/// Why a call to the host got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFailure {
    /// The connection closed first.
    Closed,
    /// The timeout passed first.
    TimedOut,
}

/// The shared half of the connection: send lines, make calls, route answers.
#[derive(Debug)]
pub struct Connection {
    outbox: mpsc::Sender<Outgoing>,
    pending: Mutex<Pending>,
    stop_writer: Arc<tokio::sync::Notify>,
}

#[derive(Debug, Default)]
struct Pending {
    next_id: u64,
    waiters: HashMap<i64, oneshot::Sender<Response>>,
    closed: bool,
}

impl Connection {
    /// A connection writing to `output` through a writer task; returns the writer's handle,
    /// which ends (after flushing) once every `Connection` clone is dropped.
    pub fn start<W>(output: W) -> (Arc<Connection>, tokio::task::JoinHandle<io::Result<()>>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (outbox, inbox) = mpsc::channel(OUTBOX_DEPTH);
        let stop_writer = Arc::new(tokio::sync::Notify::new());
        let writer = tokio::spawn(write_lines(inbox, output, stop_writer.clone()));
        (Arc::new(Connection { outbox, pending: Mutex::new(Pending::default()), stop_writer }), writer)
    }

    /// Makes the writer write what is queued, flush and end, even while background work still
    /// holds a handle on the connection (shutdown).
    pub fn stop_writer(&self) {
        self.stop_writer.notify_one();
    }

    /// Queues one line for stdout. Returns false when the writer is gone.
    pub async fn send(&self, message: Outgoing) -> bool {
        self.outbox.send(message).await.is_ok()
    }

    /// Sends a request to the host and waits for its answer, at most `timeout`.
    ///
    /// # Errors
    /// [`CallFailure::Closed`] when the connection closed (or was closed already),
    /// [`CallFailure::TimedOut`] when no answer came in time.
    pub async fn call(
        &self,
        name: &str,
        version: &str,
        body: Value,
        timeout: Duration,
    ) -> Result<Response, CallFailure> {
        let (id, answer) = self.register()?;
        let request =
            Outgoing::Request { id: MessageId::Int(id), name: name.to_string(), version: version.to_string(), body };
        if !self.send(request).await {
            self.forget(id);
            return Err(CallFailure::Closed);
        }
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(CallFailure::Closed),
            Err(_) => {
                self.forget(id);
                Err(CallFailure::TimedOut)
            }
        }
    }

    /// Routes a host response to the call waiting for it. Returns false for an unknown id.
    pub fn complete(&self, response: Response) -> bool {
        let Some(MessageId::Int(id)) = response.id else { return false };
        let waiter = self.lock().waiters.remove(&id);
        match waiter {
            Some(waiter) => waiter.send(response).is_ok(),
            None => false,
        }
    }

    /// Fails every waiting call and refuses new ones (stdin closed).
    pub fn close(&self) {
        let mut pending = self.lock();
        pending.closed = true;
        pending.waiters.clear();
    }

    /// Calls still waiting for an answer.
    pub fn calls_in_flight(&self) -> usize {
        self.lock().waiters.len()
    }

    fn register(&self) -> Result<(i64, oneshot::Receiver<Response>), CallFailure> {
        let mut pending = self.lock();
        if pending.closed {
            return Err(CallFailure::Closed);
        }
        pending.next_id = pending.next_id.checked_add(1).ok_or(CallFailure::Closed)?;
        let id = i64::try_from(pending.next_id).map_err(|_| CallFailure::Closed)?;
        let (tx, rx) = oneshot::channel();
        pending.waiters.insert(id, tx);
        Ok((id, rx))
    }

    fn forget(&self, id: i64) {
        self.lock().waiters.remove(&id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut inbox: mpsc::Receiver<Outgoing>,
    mut output: W,
    stop: Arc<tokio::sync::Notify>,
) -> io::Result<()> {
    let mut batch = Vec::with_capacity(64 * 1024);
    loop {
        let message = tokio::select! {
            message = inbox.recv() => message,
            () = stop.notified() => None,
        };
        let Some(message) = message else { break };
        // Everything already queued goes out in one write and one flush: one system call for
        // a burst of answers, not one (and a blocking-pool round trip for tokio's stdout) each.
        // Letting the requests already running finish first makes the bursts larger.
        push_line(&mut batch, &message);
        tokio::task::yield_now().await;
        while let Ok(message) = inbox.try_recv() {
            push_line(&mut batch, &message);
            if batch.len() >= MAX_BATCH_BYTES {
                write_batch(&mut output, &mut batch).await?;
            }
        }
        write_batch(&mut output, &mut batch).await?;
        output.flush().await?;
    }
    while let Ok(message) = inbox.try_recv() {
        push_line(&mut batch, &message);
    }
    write_batch(&mut output, &mut batch).await?;
    output.flush().await
}

/// A batch is written as soon as it holds this many bytes (a longer line is written whole).
const MAX_BATCH_BYTES: usize = 1 << 20;

fn push_line(batch: &mut Vec<u8>, message: &Outgoing) {
    let line = encode(message);
    if tracing::enabled!(tracing::Level::TRACE) {
        // Name, id and size only: a line's body may carry what operators must not read in a log.
        tracing::trace!(line = %summarize_outgoing(message, line.len() - 1), "> ");
    }
    batch.extend_from_slice(&line);
}

async fn write_batch<W: AsyncWrite + Unpin>(output: &mut W, batch: &mut Vec<u8>) -> io::Result<()> {
    if !batch.is_empty() {
        output.write_all(batch).await?;
        batch.clear();
        batch.shrink_to(MAX_BATCH_BYTES);
    }
    Ok(())
}

/// One line read from the host.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line, without its `\n`.
    Text(Vec<u8>),
    /// A line over the limit; its bytes were skipped. Carries how many were seen.
    TooLong(usize),
    /// End of input.
    Eof,
}

/// Reads one line of at most `max` bytes into `buf`, skipping (not buffering) what is over.
///
/// # Errors
/// I/O errors of the input.
pub async fn read_line<R: AsyncBufRead + Unpin>(input: &mut R, buf: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    buf.clear();
    let mut seen = 0usize;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (seen, seen > max) {
                (0, _) => Line::Eof,
                (n, true) => Line::TooLong(n),
                _ => Line::Text(std::mem::take(buf)),
            });
        }
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..i], i + 1),
            None => (available, available.len()),
        };
        seen += chunk.len();
        if seen <= max {
            buf.extend_from_slice(chunk);
        } else {
            buf.clear();
        }
        let ended = done > chunk.len();
        input.consume(done);
        if ended {
            // A copy of the right size: `buf` keeps its capacity for the next line.
            return Ok(if seen > max { Line::TooLong(seen) } else { Line::Text(buf.clone()) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        let mut reader = BufReader::with_capacity(8, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let line = read_line(&mut reader, &mut buf, max).await.unwrap();
            let eof = line == Line::Eof;
            out.push(line);
            if eof {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn splits_lines_across_small_buffers() {
        let got = lines(b"abcdefghijkl\nxy\n\nlast", 100).await;
        assert_eq!(
            got,
            vec![
                Line::Text(b"abcdefghijkl".to_vec()),
                Line::Text(b"xy".to_vec()),
                Line::Text(Vec::new()),
                Line::Text(b"last".to_vec()),
                Line::Eof
            ]
        );
    }

    #[tokio::test]
    async fn skips_a_huge_line_and_goes_on() {
        let mut input = vec![b'x'; 50];
        input.extend_from_slice(b"\nok\n");
        assert_eq!(lines(&input, 10).await, vec![Line::TooLong(50), Line::Text(b"ok".to_vec()), Line::Eof]);
        assert_eq!(lines(&[b'y'; 30], 10).await, vec![Line::TooLong(30), Line::Eof]);
    }

    #[tokio::test]
    async fn eof_on_empty_input() {
        assert_eq!(lines(b"", 10).await, vec![Line::Eof]);
    }

    #[tokio::test]
    async fn calls_are_answered_timed_out_or_failed_on_close() {
        let (out, _reader) = tokio::io::duplex(1 << 16);
        let (conn, _writer) = Connection::start(out);
        // Answered.
        let c = conn.clone();
        let call = tokio::spawn(async move { c.call("go.x", "1.0", Value::Null, Duration::from_secs(5)).await });
        while conn.calls_in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(conn.complete(Response::ok(MessageId::Int(1), Value::Bool(true))));
        assert_eq!(call.await.unwrap().unwrap().body, Value::Bool(true));
        // Timed out, and its waiter forgotten.
        let got = conn.call("go.x", "1.0", Value::Null, Duration::from_millis(10)).await;
        assert_eq!(got.unwrap_err(), CallFailure::TimedOut);
        assert_eq!(conn.calls_in_flight(), 0);
        assert!(!conn.complete(Response::ok(MessageId::Int(2), Value::Null)), "late answers are dropped");
        // Failed on close, and refused after.
        let c = conn.clone();
        let call = tokio::spawn(async move { c.call("go.x", "1.0", Value::Null, Duration::from_secs(60)).await });
        while conn.calls_in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        conn.close();
        assert_eq!(call.await.unwrap().unwrap_err(), CallFailure::Closed);
        assert_eq!(
            conn.call("go.x", "1.0", Value::Null, Duration::from_secs(1)).await.unwrap_err(),
            CallFailure::Closed
        );
    }
}
