//! Logs: stderr only, text or JSON (`--log-format json`), levels from `RUST_LOG`, every request
//! in a span with its name and id, no colour codes when stderr is not a terminal.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_ecs-elastic-agent");
const BAD_CREATE: &str =
    r#"{"type":"request","id":7,"name":"cd.go.elastic-agent.create-agent","version":"5.0","body":{}}"#;

/// Runs `serve` with these lines on stdin; (stdout, stderr).
fn serve(args: &[&str], rust_log: &str, lines: &[&str]) -> (String, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .env("RUST_LOG", rust_log)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn json_logs_carry_the_request_span() {
    let (stdout, stderr) = serve(&["--log-format", "json", "serve"], "info", &[BAD_CREATE]);
    assert!(stdout.lines().all(|l| serde_json::from_str::<Value>(l).is_ok()), "stdout holds only protocol lines");
    assert!(stdout.contains(r#""id":7,"code":400"#), "{stdout}");
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("log line {l:?} is not JSON: {e}")))
        .collect();
    let failed = lines
        .iter()
        .find(|l| l["fields"]["message"] == "request failed")
        .unwrap_or_else(|| panic!("no 'request failed' line in {stderr}"));
    assert_eq!(failed["level"], "WARN");
    assert_eq!(failed["span"]["name"], "request");
    assert_eq!(failed["span"]["request"], "cd.go.elastic-agent.create-agent");
    assert_eq!(failed["span"]["id"], "7");
}

#[test]
fn text_logs_follow_rust_log_without_colour_codes() {
    let (_, stderr) = serve(&["serve"], "info", &[BAD_CREATE]);
    assert!(stderr.contains("request{request=cd.go.elastic-agent.create-agent id=7}"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "no ANSI escapes into a pipe: {stderr:?}");
    let (_, quiet) = serve(&["serve"], "error", &[BAD_CREATE]);
    assert!(quiet.is_empty(), "RUST_LOG=error hides the warning: {quiet}");
}
