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

/// `doctor` without credentials: its own FAIL line says what is wrong and how to fix it, and the
/// SDK's raw credential-chain warning (a Debug dump of each provider's error) does not follow it
/// on stderr. The instance metadata service here refuses every request, as it does where IMDS
/// is turned off or a proxy denies it.
#[test]
fn doctor_without_credentials_prints_its_own_line_only() {
    let imds = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", imds.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in imds.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut buf = [0u8; 4096];
            let _ = std::io::Read::read(&mut conn, &mut buf);
            let body = "denied";
            let _ = write!(
                conn,
                "HTTP/1.1 403 Forbidden\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let profiles = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/cluster-fargate.json");
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("AWS_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .args(["doctor", "--timeout", "10", "--cluster-profile"])
        .arg(profiles)
        .env("HOME", std::env::temp_dir().join("ecs-ea-no-home"))
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", &endpoint)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let line = stdout.lines().find(|l| l.starts_with("FAIL credentials")).expect("a credentials line");
    assert!(line.contains("; fix: give the GoCD server's process AWS credentials"), "{line}");
    assert!(!line.contains(".;"), "{line}");
    assert!(stderr.is_empty(), "doctor's stderr: {stderr}");
}
