//! Runs the real binary on NDJSON transcripts and checks that stdout holds nothing but protocol
//! lines, each answered as `docs/protocol.md` says. Also `--help`, `--version` and signal shutdown.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_ecs-elastic-agent");

/// Runs the binary with `input` on stdin, returns (stdout lines as JSON, stderr, exit code).
fn run(input: &[u8]) -> (Vec<Value>, String, i32) {
    let mut child = Command::new(BIN)
        .arg("serve")
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the plugin binary starts");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    assert!(stdout.is_empty() || stdout.ends_with('\n'), "stdout ends with a newline");
    let lines = stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l}"));
            assert!(v.is_object(), "stdout line is not an object: {l}");
            assert!(matches!(v["type"].as_str(), Some("hello" | "response" | "request")), "not a protocol line: {l}");
            v
        })
        .collect();
    (lines, String::from_utf8_lossy(&out.stderr).into_owned(), out.status.code().unwrap_or(-1))
}

fn by_id(lines: &[Value], id: Value) -> &Value {
    lines.iter().find(|l| l["id"] == id).unwrap_or_else(|| panic!("no answer for id {id}"))
}

#[test]
fn load_sequence_transcript() {
    let (lines, _, code) = run(include_bytes!("fixtures/load-sequence.jsonl"));
    assert_eq!(code, 0);
    assert_eq!(lines[0]["type"], "hello");
    assert_eq!(lines[0]["plugin_id"], "cd.go.contrib.elastic-agent.ecs");
    assert_eq!(lines.len(), 10, "hello plus one answer per request");
    for id in 1..=9 {
        assert_eq!(by_id(&lines, id.into())["code"], 200);
    }
    assert_eq!(by_id(&lines, 7.into())["body"]["supports_plugin_status_report"], true);
    let metadata = by_id(&lines, 4.into())["body"].as_array().unwrap().clone();
    let secure: Vec<&str> =
        metadata.iter().filter(|m| m["metadata"]["secure"] == true).map(|m| m["key"].as_str().unwrap()).collect();
    assert_eq!(secure, ["AccessKeyId", "SecretAccessKey"]);
    let icon = &by_id(&lines, 6.into())["body"];
    assert_eq!(icon["content_type"], "image/svg+xml");
    assert!(!icon["data"].as_str().unwrap().contains('\n'));
}

#[test]
fn bad_input_transcript() {
    let (lines, stderr, code) = run(include_bytes!("fixtures/bad-input.jsonl"));
    assert_eq!(code, 0);
    let nulls: Vec<&Value> = lines.iter().filter(|l| l["type"] == "response" && l["id"].is_null()).collect();
    assert_eq!(nulls.len(), 3, "three lines had no readable id: {lines:?}");
    assert!(nulls.iter().all(|l| l["code"] == 400));
    assert_eq!(by_id(&lines, "no-name".into())["code"], 400);
    assert_eq!(by_id(&lines, 20.into())["code"], 404);
    let r = by_id(&lines, 21.into());
    assert_eq!(r["code"], 400);
    assert!(r["body"]["message"].as_str().unwrap().contains("`Image`"), "{r}");
    assert_eq!(by_id(&lines, 22.into())["code"], 200);
    let r = by_id(&lines, 23.into());
    assert_eq!(r["code"], 200);
    let keys: Vec<&str> = r["body"].as_array().unwrap().iter().map(|e| e["key"].as_str().unwrap()).collect();
    assert!(keys.contains(&"ClusterName") && keys.contains(&"Bogus"), "{r}");
    assert!(!lines.iter().any(|l| l["id"] == 999), "a stray response is never answered");
    assert!(stderr.contains("no call in flight"), "the stray response is logged: {stderr}");
}

#[test]
fn a_line_over_16_mib_is_refused_and_the_next_one_answered() {
    let mut input = Vec::with_capacity(17 << 20);
    input.extend_from_slice(br#"{"type":"request","id":1,"name":"cd.go.elastic-agent.get-icon","body":""#);
    input.resize(16 * 1024 * 1024 + 100, b'a');
    input.extend_from_slice(b"\"}\n");
    input.extend_from_slice(
        br#"{"type":"request","id":2,"name":"cd.go.elastic-agent.get-capabilities","version":"5.0","body":null}"#,
    );
    input.push(b'\n');
    let (lines, _, code) = run(&input);
    assert_eq!(code, 0);
    assert_eq!(lines.len(), 3);
    assert_eq!((lines[1]["id"].clone(), lines[1]["code"].clone()), (Value::Null, 400.into()));
    assert!(lines[1]["body"]["message"].as_str().unwrap().contains("longer than the limit"));
    assert_eq!(lines[2]["code"], 200);
}

#[test]
fn sigterm_shuts_down_cleanly() {
    let child = Command::new(BIN).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "only the hello line: {stdout}");
}

#[test]
fn help_and_version() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!("ecs-elastic-agent {}", env!("CARGO_PKG_VERSION"))
    );
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("serve") && help.contains("Examples"), "{help}");
    let out = Command::new(BIN).args(["serve", "--help"]).output().unwrap();
    assert!(out.status.success());
}
