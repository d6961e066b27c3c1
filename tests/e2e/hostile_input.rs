//! Hostile input.
//!
//! 1. A fuzz run of the stdio codec and of every v5 request body through the real binary:
//!    random bytes, truncated JSON, valid envelopes of every request name with valid, mutated or
//!    random bodies, wrong types, huge strings, deep nesting, unicode, response lines, unknown
//!    names, and one line over the 16 MiB limit. The plugin must never crash or hang and must
//!    answer every line as docs/protocol.md, "Ordering, concurrency and bad input" says: each request line with a readable id exactly once
//!    (with that id), each line without one with a 400 whose id is null, response lines never.
//!    An oracle written here (serde_json and those rules, not the plugin's decoder) says what
//!    each line must get. `FUZZ_LINES` (default 20 000; 1 000 000 for the long run) and
//!    `FUZZ_SEED` choose the run; a tiny SplitMix64 generator written here makes it replayable.
//!    AWS is a local stub that refuses every call at once (no AWS is reachable or needed).
//! 2. Hostile strings (HTML, `<script>`, quotes, newlines, template syntax, very long values) in
//!    job names, profile values and AWS tags render harmlessly in every status report (plugin,
//!    cluster, agent), before and after a restart that reads them back from the task's tags.
//!
//! 3. Nothing secret in any output at `RUST_LOG=trace`: a fuzz batch whose cluster
//!    profiles carry static keys, then a short Fargate run with static keys and AssumeRole; every
//!    byte of stderr, stdout, status reports, error answers, health and console lines scanned.
//!
//! Parts 2 and 3 need `MOTO_SERVER` (see `scripts/moto.sh`); they panic without it, never skip.

use crate::world;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::world::*;
use ecs_elastic_agent::protocol::requests::ALL_NAMES;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpListener;
use tokio::process::Command;
use tokio::sync::mpsc;

// ---------------------------------------------------------------------------------------------
// The generator.

/// SplitMix64: small, fast, good enough, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const HOSTILE: &[&str] = &[
    "<script>alert(1)</script>",
    "\"'><img src=x onerror=alert(1)>",
    "{{ 7*7 }}{% for x in y %}",
    "line\nbreak\r\nand\ttab",
    "\u{0}nul\u{1}\u{1f}",
    "🦀 日本語 é ñ \u{202e}evil\u{feff}\u{200b}",
    "' OR 1=1 --",
    "../../etc/passwd",
    "%s%n%x",
    "javascript:alert(1)",
    "",
    " ",
    "AKIAIOSFODNN7EXAMPLE",
    "-1",
    "1e309",
    "NaN",
    "true",
    "null",
];

fn hostile_string(rng: &mut Rng) -> String {
    match rng.below(8) {
        0 => "x".repeat(rng.below(5000) as usize),
        1 => (0..rng.below(40)).map(|_| char::from_u32(rng.below(0x11_0000) as u32).unwrap_or('\u{fffd}')).collect(),
        2 => format!("{}{}", rng.pick(HOSTILE), rng.pick(HOSTILE)),
        _ => rng.pick(HOSTILE).to_string(),
    }
}

fn random_json(rng: &mut Rng, depth: u32) -> Value {
    let k = if depth == 0 { rng.below(5) } else { rng.below(7) };
    match k {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(2)),
        2 => match rng.below(4) {
            0 => json!(rng.next() as i64),
            1 => json!(rng.below(100)),
            2 => json!((rng.next() as f64) / 7.0),
            _ => json!(u64::MAX),
        },
        3 | 4 => Value::String(hostile_string(rng)),
        5 => Value::Array((0..rng.below(5)).map(|_| random_json(rng, depth - 1)).collect()),
        _ => Value::Object(
            (0..rng.below(5))
                .map(|_| (hostile_string(rng).chars().take(30).collect(), random_json(rng, depth - 1)))
                .collect(),
        ),
    }
}

/// Static keys in the fuzzed cluster profiles: no output of the plugin may show them, whatever
/// the mutation (a profile sent as one string, a key of the wrong type) or the log level.
const FUZZ_KEY_ID: &str = "AKIAFUZZSTATIC7K3Y9Q";
const FUZZ_SECRET: &str = "fUzZ/static+Secret0a1b2c3d4e5f6a7b8c9d0e1f2";
/// The auto-register key of every fuzzed create-agent.
const FUZZ_REGISTER_KEY: &str = "0c6c6ad8-4a47-4b4c-9a4f-0d1f3e2a6b7c";
/// The base credentials of the fuzzed plugin.
const FUZZ_ENV_KEY_ID: &str = "AKIAFUZZFUZZFUZZFUZZ";
const FUZZ_ENV_SECRET: &str = "fuzz/fuzz+fuzz/fuzz+fuzz/fuzz+fuzz/fuzz";

fn cluster_profile() -> Value {
    json!({"ClusterName": "fuzz-cluster", "Region": "us-east-1", "MaxAgents": "5", "LaunchType": "FARGATE", "AccessKeyId": FUZZ_KEY_ID, "SecretAccessKey": FUZZ_SECRET})
}

/// Every secret a fuzz run hands the plugin.
fn fuzz_secrets() -> SecretScanner {
    let mut s = SecretScanner::new();
    s.add(SecretKind::AccessKeyId, FUZZ_KEY_ID)
        .add(SecretKind::SecretAccessKey, FUZZ_SECRET)
        .add(SecretKind::AutoRegisterKey, FUZZ_REGISTER_KEY)
        .add(SecretKind::AccessKeyId, FUZZ_ENV_KEY_ID)
        .add(SecretKind::SecretAccessKey, FUZZ_ENV_SECRET);
    s
}

fn elastic_profile() -> Value {
    json!({"Image": "gocd/gocd-agent-alpine-3.19:v24.1.0", "Cpu": "512", "Memory": "1024", "Environment": "A=1\nB=2", "Tags": "team=ci"})
}

fn job_identifier(n: u64) -> Value {
    json!({"pipeline_name": "p", "pipeline_label": "1", "pipeline_counter": 1, "stage_name": "s", "stage_counter": "1", "job_name": "j", "job_id": n})
}

/// A valid body of every request name (what GoCD sends).
fn template(name: &str, n: u64) -> Value {
    let short = name.trim_start_matches("cd.go.elastic-agent.");
    match short {
        "validate-elastic-agent-profile" => elastic_profile(),
        "validate-cluster-profile" => cluster_profile(),
        "create-agent" => json!({
            "auto_register_key": FUZZ_REGISTER_KEY,
            "elastic_agent_profile_properties": elastic_profile(),
            "cluster_profile_properties": cluster_profile(),
            "environment": "prod",
            "job_identifier": job_identifier(n),
        }),
        "server-ping" => json!({"all_cluster_profile_properties": [cluster_profile()]}),
        "should-assign-work" => json!({
            "agent": {"agent_id": format!("ea-0123456789ab-{n}-abcdef01"), "agent_state": "Idle", "build_state": "Idle", "config_state": "Enabled"},
            "job_identifier": job_identifier(n),
            "elastic_agent_profile_properties": elastic_profile(),
            "cluster_profile_properties": cluster_profile(),
        }),
        "job-completion" => json!({
            "elastic_agent_id": format!("ea-0123456789ab-{n}-abcdef01"),
            "job_identifier": job_identifier(n),
            "elastic_agent_profile_properties": elastic_profile(),
            "cluster_profile_properties": cluster_profile(),
        }),
        "plugin-status-report" => json!({"all_cluster_profiles_properties": [cluster_profile()]}),
        "agent-status-report" => json!({
            "cluster_profile_properties": cluster_profile(),
            "elastic_agent_id": format!("ea-0123456789ab-{n}-abcdef01"),
            "job_identifier": job_identifier(n),
        }),
        "cluster-status-report" => json!({"cluster_profile_properties": cluster_profile()}),
        "migrate-config" => json!({
            "plugin_settings": {"url": "https://x"},
            "cluster_profiles": [{"id": "c", "plugin_id": "cd.go.contrib.elastic-agent.ecs", "properties": cluster_profile()}],
            "elastic_agent_profiles": [{"id": "e", "plugin_id": "cd.go.contrib.elastic-agent.ecs", "cluster_profile_id": "c", "properties": elastic_profile()}],
        }),
        "cluster-profile-changed" => json!({
            "status": "updated",
            "old_cluster_profiles_properties": cluster_profile(),
            "cluster_profiles_properties": cluster_profile(),
        }),
        _ => Value::Null,
    }
}

/// One random change somewhere inside `v`.
fn mutate(rng: &mut Rng, v: &mut Value, depth: u32) {
    let descend = depth < 6 && rng.below(3) != 0;
    match v {
        Value::Object(map) if descend && !map.is_empty() => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = rng.pick(&keys).clone();
            if let Some(child) = map.get_mut(&key) {
                mutate(rng, child, depth + 1);
            }
            return;
        }
        Value::Array(items) if descend && !items.is_empty() => {
            let i = rng.below(items.len() as u64) as usize;
            mutate(rng, &mut items[i], depth + 1);
            return;
        }
        _ => {}
    }
    match rng.below(9) {
        0 => *v = Value::Null,
        1 => *v = random_json(rng, 2),
        2 => *v = Value::String(hostile_string(rng)),
        3 => {
            if let Value::Object(map) = v {
                let keys: Vec<String> = map.keys().cloned().collect();
                if !keys.is_empty() {
                    let key = rng.pick(&keys).clone();
                    map.remove(&key);
                }
            }
        }
        4 => {
            if let Value::Object(map) = v {
                map.insert(hostile_string(rng).chars().take(40).collect(), random_json(rng, 1));
            } else {
                *v = json!([v.clone()]);
            }
        }
        5 => *v = json!(v.to_string()),
        6 => *v = json!(rng.next() as i64),
        7 => *v = json!({}),
        _ => *v = json!([]),
    }
}

fn nested(depth: usize) -> String {
    let (open, close) = if depth % 2 == 0 { ("[", "]") } else { ("{\"a\":", "}") };
    format!("{}1{}", open.repeat(depth), close.repeat(depth))
}

/// The request names fuzzed: every v5 name and the two generic plugin-settings requests.
fn names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = ALL_NAMES.to_vec();
    names.extend(["go.plugin-settings.get-configuration", "go.plugin-settings.get-view"]);
    names
}

/// One generated line (never with a `\n` inside).
fn line(rng: &mut Rng, n: u64, names: &[&'static str]) -> Vec<u8> {
    let name = *rng.pick(names);
    let id = if n % 2 == 0 { json!(n) } else { json!(format!("s{n}")) };
    let envelope = |body: Value| json!({"type": "request", "id": id, "name": name, "version": "5.0", "body": body});
    let mut bytes = match rng.below(100) {
        0..=9 => (0..rng.below(300)).map(|_| rng.next() as u8).collect(),
        10..=19 => {
            let full = envelope(template(name, n)).to_string().into_bytes();
            full[..rng.below(full.len() as u64) as usize].to_vec()
        }
        20..=34 => envelope(template(name, n)).to_string().into_bytes(),
        35..=64 => {
            let mut body = template(name, n);
            for _ in 0..=rng.below(3) {
                mutate(rng, &mut body, 0);
            }
            envelope(body).to_string().into_bytes()
        }
        65..=71 => envelope(random_json(rng, 4)).to_string().into_bytes(),
        72..=79 => {
            let mut e = envelope(template(name, n));
            let obj = e.as_object_mut().expect("an object");
            match rng.below(10) {
                0 => {
                    obj.insert("id".into(), json!(-(n as i64) - 1)); // still readable, still unique
                }
                1 => {
                    obj.insert(
                        "id".into(),
                        rng.pick(&[
                            json!(1.5),
                            json!(true),
                            json!([1]),
                            json!({"n": 1}),
                            Value::Null,
                            json!(1e300),
                            json!(-0.0),
                        ])
                        .clone(),
                    );
                }
                2 => {
                    obj.remove("id");
                }
                3 => {
                    obj.insert(
                        "type".into(),
                        rng.pick(&[json!("hello"), json!(1), Value::Null, json!("REQUEST")]).clone(),
                    );
                }
                4 => {
                    obj.remove("type");
                }
                5 => {
                    obj.insert("name".into(), rng.pick(&[json!(""), json!(7), Value::Null, json!(["x"])]).clone());
                }
                6 => {
                    obj.remove("name");
                }
                7 => {
                    obj.insert("version".into(), rng.pick(&[json!("4.0"), json!(5), json!({}), json!("")]).clone());
                }
                8 => {
                    obj.remove("body");
                }
                _ => {
                    obj.insert(hostile_string(rng).chars().take(20).collect(), random_json(rng, 2));
                }
            }
            e.to_string().into_bytes()
        }
        80..=84 => random_json(rng, 3).to_string().into_bytes(),
        85..=89 => {
            let small = json!(rng.below(40));
            let id = rng.pick(&[small, json!("s1"), Value::Null, json!(1.5)]).clone();
            let mut r = json!({"type": "response", "id": id, "body": random_json(rng, 2)});
            if rng.chance(2) {
                r["code"] = json!(rng.pick(&[200, 400, 404, 500, 70000]));
            }
            r.to_string().into_bytes()
        }
        90..=93 => {
            let unknown = format!("cd.go.elastic-agent.{}", hostile_string(rng).chars().take(50).collect::<String>());
            json!({"type": "request", "id": id, "name": unknown, "version": "5.0", "body": null})
                .to_string()
                .into_bytes()
        }
        94..=96 => {
            let depth = 10 + rng.below(400) as usize;
            format!(r#"{{"type":"request","id":{id},"name":"{name}","version":"5.0","body":{}}}"#, nested(depth))
                .into_bytes()
        }
        97 if rng.chance(20) => {
            let mut body = template(name, n);
            let big = "A".repeat(64 * 1024 + rng.below(1 << 20) as usize);
            if let Value::Object(map) = &mut body {
                map.insert("Image".into(), json!(big));
            } else {
                body = json!(big);
            }
            envelope(body).to_string().into_bytes()
        }
        _ => {
            let mut b = envelope(template(name, n)).to_string().into_bytes();
            if rng.chance(2) {
                b.push(b'\r');
            } else {
                b.splice(0..0, *b"  \t");
            }
            b
        }
    };
    for b in &mut bytes {
        if *b == b'\n' {
            *b = b' ';
        }
    }
    bytes
}

/// What the plugin must answer a line with (docs/protocol.md, "Ordering, concurrency and bad input"): `Some(Some(id))` one answer with
/// that id, `Some(None)` one 400 with id null, `None` nothing (a response line).
fn oracle(line: &[u8]) -> Option<Option<String>> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(line) else {
        return Some(None);
    };
    let id = match obj.get("id") {
        Some(Value::Number(n)) => n.as_i64().map(|i| json!(i).to_string()),
        Some(Value::String(s)) => Some(json!(s).to_string()),
        _ => None,
    };
    let Some(id) = id else { return Some(None) };
    if obj.get("type") == Some(&json!("response")) {
        return None;
    }
    Some(Some(id))
}

// ---------------------------------------------------------------------------------------------
// The stand-in for AWS: refuses every call at once, so nothing waits and nothing leaves the box.

async fn no_aws() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (rd, mut wr) = stream.into_split();
                let mut rd = BufReader::new(rd);
                while let Ok(Some(_)) = world::http::read_request(&mut rd).await {
                    let answer =
                        world::http::HttpResponse::aws_json_error(400, "ClientException", "no AWS in the fuzz test");
                    if world::http::write_response(&mut wr, &answer, false).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

// ---------------------------------------------------------------------------------------------
// The run.

/// What the lines sent must get.
#[derive(Debug, Default)]
struct Expected {
    ids: HashMap<String, u32>,
    null_ids: u64,
    unanswered: u64,
}

impl Expected {
    fn add(&mut self, line: &[u8]) {
        match oracle(line) {
            Some(Some(id)) => *self.ids.entry(id).or_default() += 1,
            Some(None) => self.null_ids += 1,
            None => self.unanswered += 1,
        }
    }
}

#[derive(Debug, Default)]
struct Tally {
    by_id: HashMap<String, u32>,
    null_ids: u64,
    codes: HashMap<i64, u64>,
    violations: Vec<String>,
    callbacks: u64,
}

/// The host's answer to one of the plugin's callbacks.
fn callback_answer(name: &str) -> (i64, Value) {
    match name {
        "go.processor.server-info.get" => (
            200,
            json!({"server_id": "fuzz-server", "site_url": "http://gocd.test:8153/go", "secure_site_url": "https://gocd.test/go"}),
        ),
        "go.processor.elastic-agents.list-agents" => (200, json!([])),
        n if n.starts_with("go.processor.") => (200, Value::Null),
        _ => (404, json!({"message": "unknown"})),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_lines_never_crash_or_hang_the_plugin_and_each_gets_its_answer() {
    let lines: u64 = std::env::var("FUZZ_LINES").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let seed: u64 = std::env::var("FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0xf022_5eed);
    let out = fuzz_run(lines, seed, "error", false).await;
    fuzz_secrets().assert_clean("the plugin's stderr", &out.stderr);
}

/// What a fuzz run's plugin wrote.
struct FuzzOutput {
    stderr: String,
    /// Every stdout line, when kept.
    stdout: String,
}

/// Sends `lines` fuzzed lines (and one over the limit) to a plugin logging at `rust_log`,
/// checks every answer against the oracle, and returns what the plugin wrote.
async fn fuzz_run(lines: u64, seed: u64, rust_log: &str, keep_stdout: bool) -> FuzzOutput {
    let started = Instant::now();
    let aws = no_aws().await;
    let mut child = Command::new(PathBuf::from(env!("CARGO_BIN_EXE_ecs-elastic-agent")))
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("AWS_ENDPOINT_URL", format!("http://{aws}"))
        .env("AWS_ACCESS_KEY_ID", FUZZ_ENV_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", FUZZ_ENV_SECRET)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", "/nonexistent/ecs-ea-fuzz/config")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/ecs-ea-fuzz/credentials")
        .env("RUST_LOG", rust_log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the plugin");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let stderr_task = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });

    // stdin: callback answers first, fuzz lines as they come.
    let (fuzz_tx, mut fuzz_rx) = mpsc::channel::<Vec<u8>>(256);
    let (answer_tx, mut answer_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        let mut w = BufWriter::with_capacity(1 << 16, stdin);
        let mut fuzz_open = true;
        loop {
            let next = if fuzz_open {
                tokio::select! {
                    biased;
                    Some(a) = answer_rx.recv() => Some(a),
                    f = fuzz_rx.recv() => {
                        // `None`: the run is over; answer what is queued, then close stdin.
                        fuzz_open = f.is_some();
                        f
                    }
                }
            } else {
                answer_rx.try_recv().ok()
            };
            let Some(mut bytes) = next else {
                if fuzz_open {
                    continue;
                }
                break;
            };
            bytes.push(b'\n');
            if w.write_all(&bytes).await.is_err() {
                break;
            }
            if answer_rx.is_empty() && fuzz_rx.is_empty() && w.flush().await.is_err() {
                break;
            }
        }
        let _ = w.flush().await;
        // Dropping the writer closes stdin: EOF for the plugin.
    });

    // stdout: count answers, answer callbacks, check every line.
    let tally = std::sync::Arc::new(std::sync::Mutex::new(Tally::default()));
    let t = tally.clone();
    let kept_stdout = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let kept = kept_stdout.clone();
    let reader = tokio::spawn(async move {
        let mut r = BufReader::with_capacity(1 << 16, stdout);
        let mut buf = Vec::new();
        let mut first = true;
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if keep_stdout && !world::host::is_migrate_config_answer(&buf) {
                kept.lock().unwrap().push_str(&String::from_utf8_lossy(&buf));
            }
            let Some(text) = buf.strip_suffix(b"\n") else {
                t.lock().unwrap().violations.push("stdout ended without a newline".into());
                break;
            };
            let Ok(Value::Object(msg)) = serde_json::from_slice::<Value>(text) else {
                t.lock().unwrap().violations.push(format!(
                    "stdout line is not a JSON object: {}",
                    String::from_utf8_lossy(&text[..text.len().min(200)])
                ));
                continue;
            };
            let kind = msg.get("type").and_then(Value::as_str).unwrap_or("");
            if std::mem::take(&mut first) {
                if kind != "hello" {
                    t.lock().unwrap().violations.push("the first line is not the hello".into());
                }
                continue;
            }
            match kind {
                "response" => {
                    let mut tally = t.lock().unwrap();
                    let code = msg.get("code").and_then(Value::as_i64).unwrap_or(-1);
                    *tally.codes.entry(code).or_default() += 1;
                    match msg.get("id") {
                        Some(Value::Null) => {
                            tally.null_ids += 1;
                            if code != 400 {
                                tally.violations.push(format!("an answer with id null has code {code}"));
                            }
                        }
                        Some(id) => *tally.by_id.entry(id.to_string()).or_default() += 1,
                        None => tally.violations.push("a response without id".into()),
                    }
                    if code != 200 && !msg.get("body").and_then(|b| b.get("message")).is_some_and(Value::is_string) {
                        tally
                            .violations
                            .push(format!("a {code} answer without a message: {}", Value::Object(msg.clone())));
                    }
                }
                "request" => {
                    t.lock().unwrap().callbacks += 1;
                    let name = msg.get("name").and_then(Value::as_str).unwrap_or("");
                    let (code, body) = callback_answer(name);
                    let id = msg.get("id").cloned().unwrap_or(Value::Null);
                    let answer = json!({"type": "response", "id": id, "code": code, "body": body});
                    let _ = answer_tx.send(answer.to_string().into_bytes());
                }
                other => t.lock().unwrap().violations.push(format!("stdout line of type {other:?}")),
            }
        }
    });

    // Generate, expect, send.
    let names = names();
    let mut rng = Rng(seed);
    let mut want = Expected::default();
    // One line over the 16 MiB limit, answered 400 with id null and skipped.
    let huge = format!(r#"{{"type":"request","id":1,"name":"x","body":"{}"}}"#, "a".repeat(16 * 1024 * 1024 + 10));
    want.null_ids += 1;
    fuzz_tx.send(huge.into_bytes()).await.expect("writer up");
    let mut progress = Instant::now();
    for n in 1..=lines {
        let bytes = line(&mut rng, n + 1, &names);
        want.add(&bytes);
        if fuzz_tx.send(bytes).await.is_err() {
            break;
        }
        if progress.elapsed() > Duration::from_secs(10) {
            progress = Instant::now();
            let (ids, nulls) = tally.lock().map(|t| (t.by_id.len(), t.null_ids)).unwrap_or_default();
            eprintln!(
                "fuzz: {n} of {lines} lines sent, {ids} ids and {nulls} null ids answered, {:?}",
                started.elapsed()
            );
        }
    }
    let Expected { ids: expected, null_ids: expected_null, unanswered } = want;
    let duplicates: Vec<(&String, &u32)> = expected.iter().filter(|(_, c)| **c > 1).collect();
    assert!(duplicates.is_empty(), "the generator made duplicate ids: {duplicates:?}");
    let want_ids = expected.len() as u64;

    // Every answer, in bounded time.
    let deadline = Instant::now() + Duration::from_secs(120 + lines / 2000);
    loop {
        let (ids, nulls) = {
            let t = tally.lock().unwrap();
            (t.by_id.len() as u64, t.null_ids)
        };
        if ids >= want_ids && nulls >= expected_null {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the plugin hangs: {ids} of {want_ids} ids and {nulls} of {expected_null} null-id answers after {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await; // anything extra shows up now
    drop(fuzz_tx);
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
    let _ = writer.await;
    let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
    let stderr = stderr_task.await.unwrap_or_default();

    let t = tally.lock().unwrap();
    assert!(
        t.violations.is_empty(),
        "{} stdout problems, first: {:?}",
        t.violations.len(),
        &t.violations[..t.violations.len().min(5)]
    );
    let twice: Vec<_> = t.by_id.iter().filter(|(_, c)| **c != 1).take(5).collect();
    assert!(twice.is_empty(), "ids answered more than once: {twice:?}");
    let missing: Vec<_> = expected.keys().filter(|id| !t.by_id.contains_key(*id)).take(5).collect();
    assert!(missing.is_empty(), "request ids never answered: {missing:?}");
    let extra: Vec<_> = t.by_id.keys().filter(|id| !expected.contains_key(*id)).take(5).collect();
    assert!(extra.is_empty(), "answers to ids never sent as requests: {extra:?}");
    assert_eq!(t.null_ids, expected_null, "400s with id null");
    assert!(!stderr.contains("panicked"), "the plugin panicked:\n{}", &stderr[..stderr.len().min(4000)]);
    match status {
        Ok(Ok(s)) => {
            assert!(s.success(), "the plugin exited with {s} after EOF; stderr:\n{}", &stderr[..stderr.len().min(4000)])
        }
        other => panic!("the plugin did not exit within 20 s of EOF: {other:?}"),
    }
    let mut codes: Vec<_> = t.codes.iter().collect();
    codes.sort();
    eprintln!(
        "FIGURES: test=fuzz rust_log={rust_log} seed={seed} lines={} answered_by_id={} null_id_400s={} response_lines_unanswered={unanswered} callbacks_answered={} codes={codes:?} secs={:.1} stderr_bytes={}",
        lines + 1,
        t.by_id.len(),
        t.null_ids,
        t.callbacks,
        started.elapsed().as_secs_f64(),
        stderr.len()
    );
    let stdout = std::mem::take(&mut *kept_stdout.lock().unwrap());
    FuzzOutput { stderr, stdout }
}

#[test]
fn the_generator_covers_every_request_name_and_the_oracle_follows_a4() {
    for name in names() {
        let _ = template(name, 1);
    }
    assert!(ALL_NAMES.len() >= 17, "{ALL_NAMES:?}");
    assert_eq!(oracle(b"garbage"), Some(None));
    assert_eq!(oracle(br#"{"type":"request","id":3,"name":"x"}"#), Some(Some("3".into())));
    assert_eq!(oracle(br#"{"type":"request","id":"a","name":"x"}"#), Some(Some("\"a\"".into())));
    assert_eq!(oracle(br#"{"type":"response","id":3,"code":200}"#), None);
    assert_eq!(oracle(br#"{"type":"response","id":1.5}"#), Some(None));
    assert_eq!(oracle(br#"{"id":3}"#), Some(Some("3".into())));
    assert_eq!(oracle(b"[1]"), Some(None));
    let mut rng = Rng(1);
    let names = names();
    for n in 0..2000 {
        assert!(!line(&mut rng, n, &names).contains(&b'\n'));
    }
}

// ---------------------------------------------------------------------------------------------
// Part 2: hostile strings in status reports.

/// Markup that only appears raw when a value was not escaped (escaped, `onerror=` is just text).
const XSS: &[&str] = &["<script", "<img", "<svg", "\"'>", "</td></tr><"];

/// A status view holds none of the hostile markup raw.
fn assert_harmless(what: &str, view: &str) {
    let lower = view.to_ascii_lowercase();
    for bad in XSS {
        assert!(!lower.contains(bad), "{what}: raw {bad:?} in the view");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_strings_render_escaped_in_every_status_report() {
    use world::moto::{self, REGION};
    let moto_server = Moto::start().await;
    let proxy = Proxy::start(moto_server.addr()).await;
    let base = moto_server.base_config().await;
    moto::create_cluster(&base, "gocd-a").await;
    let cluster = world::props(&[("ClusterName", "gocd-a"), ("Region", REGION), ("Tags", "team=ci:ops @x")]);
    let elastic = world::props(&[
        ("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0"),
        ("Environment", "EVIL=<script>alert('env')</script>\nQUOTE=\"'><img src=x onerror=alert(2)>"),
    ]);
    let cfg = HostConfig::new(&proxy.endpoint()).cluster_profile("c", cluster.clone()).elastic_profile(
        "e",
        "c",
        elastic.clone(),
    );
    let host = GoCdHost::launch(cfg).await;
    let sim = AgentSimulator::start(&host, vec![Fleet::new("base", &base, "gocd-a")], SimPolicy::default());
    let long = "<script>alert('long')</script>".repeat(300);
    let job = json!({
        "pipeline_name": "<script>alert('pipeline')</script>",
        "pipeline_label": "\"'><img src=x onerror=alert(3)>",
        "pipeline_counter": 7,
        "stage_name": "{{ 7*7 }}{% raw %}</td></tr><svg onload=alert(4)>",
        "stage_counter": "1\n<script>alert(5)</script>",
        "job_name": long,
        "job_id": 424242,
    });
    let key = host.issue_key(None);
    let body = json!({
        "auto_register_key": key,
        "elastic_agent_profile_properties": elastic,
        "cluster_profile_properties": cluster,
        "environment": "<script>alert('env-name')</script>",
        "job_identifier": job,
    });
    let r = host.request("create-agent", body).await.expect("create-agent answered");
    assert_eq!(r.code, 200, "{}", r.body);
    sim.wait_until("the hostile job's task", Duration::from_secs(30), |s| s.tasks_for_job(424242) == 1).await;
    let agent_id = sim.with_state(|s| s.tasks.values().find_map(|t| t.agent_id.clone())).expect("agent id");
    let broken = world::props(&[
        ("ClusterName", "<script>alert('cluster')</script>"),
        ("Region", "<img src=x onerror=alert(6)>"),
    ]);
    let mut views = Vec::new();
    for round in ["before the restart", "after the restart (names read back from the task's tags)"] {
        let plugin = host
            .status_report("plugin", json!({"all_cluster_profiles_properties": [cluster_profile_of(&host), broken]}))
            .await
            .expect("plugin report");
        let cluster_report = host.cluster_status_report("c").await.expect("cluster report");
        let by_agent = host
            .status_report(
                "agent",
                json!({"cluster_profile_properties": cluster_profile_of(&host), "elastic_agent_id": agent_id}),
            )
            .await
            .expect("agent report");
        let by_job = host
            .status_report(
                "agent",
                json!({"cluster_profile_properties": cluster_profile_of(&host), "job_identifier": job}),
            )
            .await
            .expect("agent report by job");
        let unknown = host
            .status_report("agent", json!({"cluster_profile_properties": {}, "elastic_agent_id": "<script>alert('id')</script>", "job_identifier": job}))
            .await
            .expect("agent report of an unknown agent");
        for (what, reply) in [
            ("plugin", plugin),
            ("cluster", cluster_report),
            ("agent", by_agent),
            ("agent by job", by_job),
            ("unknown agent", unknown),
        ] {
            assert_eq!(reply.code, 200, "{what} {round}: {}", reply.body);
            let view = reply.body["view"].as_str().unwrap_or_default().to_string();
            assert_harmless(&format!("{what} report {round}"), &view);
            views.push((what, view));
        }
        if round.starts_with("before") {
            host.kill().await;
            host.restart().await;
        }
    }
    let rendered = views.iter().filter(|(_, v)| v.contains("&lt;script&gt;alert(") || v.contains("&lt;script")).count();
    assert!(rendered >= 4, "the hostile names were rendered (escaped) in the reports");
    // Clean up: the job completes, the task stops.
    let done = json!({
        "elastic_agent_id": agent_id,
        "job_identifier": job,
        "elastic_agent_profile_properties": elastic_props_of(&host),
        "cluster_profile_properties": cluster_profile_of(&host),
    });
    assert_eq!(host.request("job-completion", done).await.expect("job-completion").code, 200);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !moto::live_tasks(&base, "gocd-a").await.is_empty() {
        assert!(Instant::now() < deadline, "the hostile job's task still runs");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    SecretScanner::from_world(&host, Some(&proxy)).assert_host_clean(&host);
    eprintln!("FIGURES: test=hostile_strings views_checked={} escaped_renderings={rendered}", views.len());
    drop(sim);
    host.shutdown().await;
}

fn cluster_profile_of(host: &GoCdHost) -> Value {
    json!(host.config().cluster_profiles[0].properties)
}

fn elastic_props_of(host: &GoCdHost) -> Value {
    json!(host.config().elastic_profiles[0].properties)
}

/// At `RUST_LOG=trace` (the SDK's, hyper's and the plugin's every event) nothing
/// secret reaches any byte the plugin writes. (1) A fuzz batch whose cluster profiles carry
/// static keys: stderr and every stdout line scanned. (2) A short Fargate run on moto with
/// static keys in two cluster profiles, one of them through AssumeRole (session keys handed
/// out through the proxy), jobs to completion, status reports: the plugin's stderr, stdout,
/// status reports, error answers, health messages and console lines scanned for the static
/// keys, the base keys, every session key and token AssumeRole returned, and every
/// auto-register key GoCD issued.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_secret_reaches_any_output_at_trace_level() {
    const ROLE_ARN: &str = "arn:aws:iam::111111111111:role/gocd-agents";
    let started = Instant::now();
    let out = fuzz_run(3_000, 0x7ace_5eed, "trace", true).await;
    let secrets = fuzz_secrets();
    assert!(out.stderr.lines().count() > 3_000, "trace logs every line: {} lines", out.stderr.lines().count());
    secrets.assert_clean("the fuzzed plugin's stderr at trace", &out.stderr);
    secrets.assert_clean("the fuzzed plugin's stdout at trace", &out.stdout);
    let fuzz_bytes = out.stderr.len() + out.stdout.len();

    let moto_server = Moto::start().await;
    let proxy = Proxy::start(moto_server.addr()).await;
    let base = moto_server.base_config().await;
    let role = moto_server.assume_role_config(ROLE_ARN).await;
    world::moto::create_cluster(&base, "gocd-a").await;
    world::moto::create_cluster(&role.config, "gocd-r").await;
    let keys = [("AccessKeyId", FUZZ_KEY_ID), ("SecretAccessKey", FUZZ_SECRET)];
    let mut role_props = keys.to_vec();
    role_props.push(("RoleArn", ROLE_ARN));
    let mut cfg = HostConfig::new(&proxy.endpoint())
        .cluster_profile("static", world::profiles::cluster_props("gocd-a", &keys))
        .cluster_profile("role", world::profiles::cluster_props("gocd-r", &role_props))
        .elastic_profile("static", "static", world::profiles::elastic_props())
        .elastic_profile("role", "role", world::profiles::elastic_props());
    cfg.env.push(("RUST_LOG".into(), "trace".into()));
    cfg.keep_stdout = true;
    let host = GoCdHost::launch(cfg).await;
    let fleets = vec![Fleet::new("static", &base, "gocd-a"), Fleet::new("role", &role.config, "gocd-r")];
    let sim = AgentSimulator::start(&host, fleets, SimPolicy::default());
    host.add_jobs(JobSpec::new("static", Duration::from_secs(1)), 2).await;
    host.add_jobs(JobSpec::new("role", Duration::from_secs(1)), 2).await;
    host.wait_until("the 4 jobs completed", Duration::from_secs(90), |s| s.all_completed()).await;
    let _ = host.plugin_status_report().await;
    for id in ["static", "role"] {
        let _ = host.cluster_status_report(id).await;
    }
    let mut scanner = SecretScanner::from_world(&host, Some(&proxy));
    scanner.add(SecretKind::SessionToken, role.credentials.session_token.as_deref().unwrap_or_default());
    assert!(
        proxy.captured_credentials().iter().any(|c| c.credentials.session_token.is_some()),
        "the plugin assumed the role through the proxy"
    );
    assert!(scanner.len() >= 2 + 3 + 4, "static keys, the session's keys and token, 4 register keys");
    let (stderr_bytes, stdout_bytes) = host.with_state(|s| (s.stderr.len(), s.stdout.len()));
    assert!(host.stderr_text().contains("TRACE"), "the plugin logged at trace");
    scanner.assert_host_clean(&host);
    drop(sim);
    host.shutdown().await;
    eprintln!(
        "FIGURES: test=trace_secrets secs={:.1} fuzz_output_bytes={fuzz_bytes} e2e_stderr_bytes={stderr_bytes} e2e_stdout_bytes={stdout_bytes} secrets_looked_for={} leaks=0",
        started.elapsed().as_secs_f64(),
        scanner.len() + secrets.len()
    );
}
