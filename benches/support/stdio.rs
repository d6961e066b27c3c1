//! The measuring end of a stdio wire: a blocking driver for one process that speaks the framing
//! of `docs/protocol.md` (the plugin, or the bare NDJSON echo below), timing at the pipe boundary.
//!
//! The GoCD host simulator (`tests/world/host`) plays GoCD faithfully but adds its own
//! scheduling to every request; here a request is written and flushed to the child's stdin on
//! the caller's thread and its response line is stamped the moment a dedicated reader thread
//! has read it, so what is timed is the process under test and two pipes. Callbacks
//! (`go.processor.*`) are answered on the reader thread: server-info with the given server id,
//! an empty agent list, and an empty answer to the rest.

use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How to start the process under test.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment set on top of ours (every inherited `AWS_*` variable is removed first).
    pub env: Vec<(String, String)>,
    /// What server-info answers.
    pub server_id: String,
}

impl Launch {
    /// `program serve` with `env`.
    pub fn plugin(program: &Path, env: Vec<(String, String)>, server_id: &str) -> Launch {
        Launch { program: program.to_path_buf(), args: vec!["serve".into()], env, server_id: server_id.into() }
    }

    /// This very executable in echo mode (see [`run_echo`]).
    pub fn echo() -> Launch {
        Launch {
            program: std::env::current_exe().expect("the path of this executable"),
            args: Vec::new(),
            env: vec![(ECHO_ENV.into(), "1".into())],
            server_id: String::new(),
        }
    }
}

/// Set to make a benchmark executable act as the bare NDJSON echo.
pub const ECHO_ENV: &str = "FLOORS_NDJSON_ECHO";

/// Shared by the caller and the reader thread (which answers callbacks); `None` once closed.
type Stdin = Arc<Mutex<Option<BufWriter<ChildStdin>>>>;

/// One running process and the reader of its stdout.
#[derive(Debug)]
pub struct StdioProcess {
    child: Child,
    stdin: Stdin,
    responses: Receiver<(Instant, Vec<u8>)>,
    reader: Option<JoinHandle<()>>,
    next_id: u64,
    /// From just before `spawn` to the moment the hello line was read.
    pub hello_after: Duration,
    /// The hello line.
    pub hello: Value,
}

impl StdioProcess {
    /// Starts the process and waits (20 s at most) for its first line, which must be a hello.
    ///
    /// # Errors
    /// When it cannot start or says no hello.
    pub fn spawn(launch: &Launch) -> Result<StdioProcess, String> {
        let mut cmd = Command::new(&launch.program);
        cmd.args(&launch.args);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("AWS_") {
                cmd.env_remove(k);
            }
        }
        cmd.envs(launch.env.iter().map(|(k, v)| (k, v)));
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(stderr_target());
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", launch.program.display()))?;
        let stdin: Stdin =
            Arc::new(Mutex::new(Some(BufWriter::with_capacity(64 * 1024, child.stdin.take().expect("stdin")))));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, responses) = mpsc::channel();
        let (hello_tx, hello_rx) = mpsc::channel();
        let (server_id, answers) = (launch.server_id.clone(), stdin.clone());
        let reader = std::thread::spawn(move || read_stdout(stdout, tx, hello_tx, &answers, &server_id));
        let (at, hello) = match hello_rx.recv_timeout(Duration::from_secs(20)) {
            Ok(got) => got,
            Err(_) => {
                let _ = child.kill();
                return Err(format!("{} wrote no line within 20 s", launch.program.display()));
            }
        };
        let hello: Value = serde_json::from_slice(&hello).map_err(|e| format!("the first line is not JSON: {e}"))?;
        if hello["type"] != "hello" {
            return Err(format!("the first line is not a hello: {hello}"));
        }
        Ok(StdioProcess { child, stdin, responses, reader: Some(reader), next_id: 1, hello_after: at - started, hello })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A request line with a fresh id: `(id, line without newline)`.
    pub fn request_line(&mut self, name: &str, body: &Value) -> (u64, String) {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"type": "request", "id": id, "name": name, "version": "5.0", "body": body}).to_string();
        (id, line)
    }

    /// Sends one request and waits for its response: the time from writing the line to reading
    /// the answer, and the answer's envelope.
    ///
    /// # Errors
    /// When the process is gone or no answer comes within `timeout`.
    pub fn call(&mut self, name: &str, body: &Value, timeout: Duration) -> Result<(Duration, Value), String> {
        let (id, line) = self.request_line(name, body);
        self.call_line(id, &line, timeout)
    }

    /// [`StdioProcess::call`] with a line built before (by [`StdioProcess::request_line`]).
    ///
    /// # Errors
    /// As [`StdioProcess::call`].
    pub fn call_line(&mut self, id: u64, line: &str, timeout: Duration) -> Result<(Duration, Value), String> {
        let sent = Instant::now();
        {
            let mut guard = self.stdin.lock().unwrap();
            let w = guard.as_mut().ok_or("stdin is closed")?;
            w.write_all(line.as_bytes())
                .and_then(|()| w.write_all(b"\n"))
                .and_then(|()| w.flush())
                .map_err(|e| format!("write: {e}"))?;
        }
        let deadline = sent + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (at, raw) = match self.responses.recv_timeout(left) {
                Ok(got) => got,
                Err(RecvTimeoutError::Timeout) => return Err(format!("no answer to request {id} within {timeout:?}")),
                Err(RecvTimeoutError::Disconnected) => return Err("the process closed stdout".into()),
            };
            let envelope: Value = serde_json::from_slice(&raw).map_err(|e| format!("an answer is not JSON: {e}"))?;
            if envelope["id"] == id {
                return Ok((at - sent, envelope));
            }
        }
    }

    /// Writes every line (each a request with its own id) as fast as the pipe takes them, from
    /// another thread, and waits for as many answers: the time from the first write to the last
    /// answer read.
    ///
    /// # Errors
    /// When the process is gone or the answers stop coming for `stall`.
    pub fn pipelined(&mut self, lines: Arc<Vec<String>>, stall: Duration) -> Result<Duration, String> {
        let stdin = self.stdin.clone();
        let n = lines.len();
        let started = Instant::now();
        let writer = std::thread::spawn(move || -> io::Result<()> {
            let mut guard = stdin.lock().unwrap();
            let w = guard.as_mut().ok_or_else(|| io::Error::other("stdin is closed"))?;
            for line in lines.iter() {
                w.write_all(line.as_bytes())?;
                w.write_all(b"\n")?;
            }
            w.flush()
        });
        let mut last = started;
        for got in 0..n {
            match self.responses.recv_timeout(stall) {
                Ok((at, _)) => last = at,
                Err(_) => return Err(format!("only {got} of {n} answers came")),
            }
        }
        writer.join().map_err(|_| "the writer panicked")?.map_err(|e| format!("write: {e}"))?;
        Ok(last - started)
    }

    /// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`, ...).
    pub fn status_kib(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let line = status.lines().find(|l| l.starts_with(&format!("{field}:")))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// Closes stdin and waits (15 s at most) for the exit; kills it after that.
    pub fn close(mut self) -> Option<ExitStatus> {
        self.stdin.lock().unwrap().take();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                if let Some(r) = self.reader.take() {
                    let _ = r.join();
                }
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for StdioProcess {
    fn drop(&mut self) {
        if self.stdin.lock().unwrap().take().is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The plugin's stderr: a file when `FLOORS_PLUGIN_LOG` names one (appended), else nowhere.
fn stderr_target() -> Stdio {
    let file = std::env::var_os("FLOORS_PLUGIN_LOG")
        .and_then(|path| std::fs::OpenOptions::new().create(true).append(true).open(path).ok());
    file.map_or_else(Stdio::null, Stdio::from)
}

fn read_stdout(
    stdout: std::process::ChildStdout,
    responses: mpsc::Sender<(Instant, Vec<u8>)>,
    hello: mpsc::Sender<(Instant, Vec<u8>)>,
    stdin: &Stdin,
    server_id: &str,
) {
    let mut reader = BufReader::with_capacity(1 << 20, stdout);
    let mut first = Some(hello);
    loop {
        let mut line = Vec::with_capacity(128);
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let at = Instant::now();
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if let Some(hello) = first.take() {
            let _ = hello.send((at, line));
            continue;
        }
        if contains(&line, br#""type":"request""#) {
            answer_callback(&line, stdin, server_id);
        } else if responses.send((at, line)).is_err() {
            return;
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn answer_callback(line: &[u8], stdin: &Stdin, server_id: &str) {
    let Ok(request) = serde_json::from_slice::<Value>(line) else { return };
    let body = match request["name"].as_str().unwrap_or("") {
        "go.processor.server-info.get" => json!({
            "server_id": server_id,
            "site_url": "http://gocd.bench:8153/go",
            "secure_site_url": "https://gocd.bench/go",
        }),
        "go.processor.elastic-agents.list-agents" => json!([]),
        _ => Value::Null,
    };
    let answer = json!({"type": "response", "id": request["id"], "code": 200, "body": body}).to_string();
    let mut guard = stdin.lock().unwrap();
    let Some(w) = guard.as_mut() else { return };
    let _ = w.write_all(answer.as_bytes()).and_then(|()| w.write_all(b"\n")).and_then(|()| w.flush());
}

/// The bare NDJSON echo the plugin's throughput is compared with: a hello line, then for every
/// line read, parse it as JSON and write `{"type":"response","id":<its id>,"code":200,"body":false}`;
/// output is flushed whenever no more input is buffered. What any stdio JSON server must at least do.
///
/// # Errors
/// I/O errors of stdin or stdout.
pub fn run_echo() -> io::Result<()> {
    let stdin = io::stdin();
    let mut input = BufReader::with_capacity(256 * 1024, stdin.lock());
    let stdout = io::stdout();
    let mut output = BufWriter::with_capacity(64 * 1024, stdout.lock());
    output.write_all(br#"{"type":"hello","protocol":1,"plugin_id":"ndjson-echo","extension":"elastic-agent","extension_versions":["5.0"]}"#)?;
    output.write_all(b"\n")?;
    output.flush()?;
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return output.flush();
        }
        let id = serde_json::from_slice::<Value>(&line).map(|v| v["id"].clone()).unwrap_or(Value::Null);
        serde_json::to_writer(&mut output, &json!({"type": "response", "id": id, "code": 200, "body": false}))?;
        output.write_all(b"\n")?;
        if input.buffer().is_empty() {
            output.flush()?;
        }
    }
}

/// Percentile (0..=100) of sorted durations.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
