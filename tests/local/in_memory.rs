//! Drives the server core (`server::serve`) through in-memory pipes, playing the host
//! (nushell's `serve_plugin_io` tests, lsp-server's `Connection::memory`).

use std::time::Duration;

use ecs_elastic_agent::server::{serve, ServeOptions};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

/// The host's end of an in-memory plugin.
struct MemoryHost {
    to_plugin: Option<DuplexStream>,
    from_plugin: Lines<BufReader<DuplexStream>>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl MemoryHost {
    fn start() -> Self {
        let (host_out, plugin_in) = tokio::io::duplex(1 << 20);
        let (plugin_out, host_in) = tokio::io::duplex(1 << 20);
        let server =
            tokio::spawn(serve(BufReader::new(plugin_in), plugin_out, ServeOptions::default(), std::future::pending()));
        MemoryHost { to_plugin: Some(host_out), from_plugin: BufReader::new(host_in).lines(), server }
    }

    async fn send_raw(&mut self, line: &str) {
        let w = self.to_plugin.as_mut().expect("stdin still open");
        w.write_all(line.as_bytes()).await.unwrap();
        w.write_all(b"\n").await.unwrap();
    }

    async fn request(&mut self, id: i64, name: &str, body: Value) {
        let line = json!({"type":"request","id":id,"name":name,"version":"5.0","body":body}).to_string();
        self.send_raw(&line).await;
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.from_plugin.next_line())
            .await
            .expect("the plugin answered within 10 s")
            .unwrap()
            .expect("a line, not EOF");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
    }

    async fn close(mut self) -> Vec<Value> {
        self.to_plugin.take();
        let mut rest = Vec::new();
        while let Ok(Some(line)) = self.from_plugin.next_line().await {
            rest.push(serde_json::from_str(&line).unwrap());
        }
        self.server.await.unwrap().unwrap();
        rest
    }
}

async fn started() -> MemoryHost {
    let mut host = MemoryHost::start();
    let hello = host.next().await;
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["extension_versions"], json!(["5.0"]));
    host
}

#[tokio::test]
async fn hello_first_then_answers_in_any_order() {
    let mut host = started().await;
    for id in 0..200 {
        let name = if id % 2 == 0 { "cd.go.elastic-agent.get-capabilities" } else { "cd.go.elastic-agent.get-icon" };
        host.request(id, name, Value::Null).await;
    }
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let r = host.next().await;
        assert_eq!((r["type"].as_str(), r["code"].as_i64()), (Some("response"), Some(200)), "{r}");
        let id = r["id"].as_i64().unwrap();
        if id % 2 == 0 {
            assert_eq!(r["body"]["supports_cluster_status_report"], true);
        } else {
            assert_eq!(r["body"]["content_type"], "image/svg+xml");
        }
        assert!(seen.insert(id), "id {id} answered twice");
    }
    assert!(host.close().await.is_empty());
}

#[tokio::test]
async fn bad_lines_get_400_and_the_plugin_goes_on() {
    let mut host = started().await;
    host.send_raw("this is not json").await;
    let r = host.next().await;
    assert_eq!((r["id"].clone(), r["code"].as_i64()), (Value::Null, Some(400)));
    assert!(r["body"]["message"].as_str().unwrap().starts_with("line is not JSON"));
    host.send_raw(r#"{"type":"request","id":"s1"}"#).await;
    let r = host.next().await;
    assert_eq!((r["id"].as_str(), r["body"]["message"].as_str()), (Some("s1"), Some("request has no \"name\"")));
    host.request(9, "cd.go.elastic-agent.fly-to-the-moon", Value::Null).await;
    let r = host.next().await;
    assert_eq!((r["id"].as_i64(), r["code"].as_i64()), (Some(9), Some(404)));
    host.request(10, "cd.go.elastic-agent.validate-cluster-profile", json!({"ClusterName": 42})).await;
    let r = host.next().await;
    assert_eq!(r["code"], 400);
    let msg = r["body"]["message"].as_str().unwrap();
    assert!(msg.contains("`ClusterName`"), "{msg}");
    host.request(
        11,
        "cd.go.elastic-agent.should-assign-work",
        json!({"agent":{"agent_id":"a"},"job_identifier":{"pipeline_name":"p","pipeline_counter":"one","stage_name":"s","stage_counter":"1","job_name":"j","job_id":1}}),
    )
    .await;
    let r = host.next().await;
    assert_eq!(r["code"], 400);
    let msg = r["body"]["message"].as_str().unwrap();
    assert!(msg.contains("job_identifier.pipeline_counter"), "{msg}");
    host.request(12, "cd.go.elastic-agent.get-capabilities", Value::Null).await;
    assert_eq!(host.next().await["code"], 200);
    host.close().await;
}

#[tokio::test]
async fn a_thousand_malformed_lines_mixed_with_valid_ones() {
    let mut host = started().await;
    let garbage = [
        "{",
        "[]",
        "null",
        "\"str\"",
        r#"{"type":"request"}"#,
        r#"{"type":"request","id":{},"name":"x"}"#,
        r#"{"type":7,"id":1,"name":"x"}"#,
        r#"{"type":"request","id":1,"name":""}"#,
        "\u{0}\u{1}binary",
        r#"{"type":"request","id":"v","name":"cd.go.elastic-agent.get-icon","version":"4.0"}"#,
    ];
    let mut valid_ids = Vec::new();
    for i in 0..1000 {
        host.send_raw(garbage[i % garbage.len()]).await;
        if i % 10 == 3 {
            let id = 100_000 + i as i64;
            host.request(id, "cd.go.elastic-agent.validate-elastic-agent-profile", json!({"Image": "alpine:3"})).await;
            valid_ids.push(id);
        }
    }
    let mut answered_valid = 0;
    let mut bad = 0;
    for _ in 0..1100 {
        let r = host.next().await;
        match r["id"].as_i64() {
            Some(id) if id >= 100_000 => {
                assert_eq!(r["code"], 200, "{r}");
                assert!(r["body"].is_array(), "{r}");
                answered_valid += 1;
            }
            _ => {
                assert_eq!(r["code"], 400, "{r}");
                assert!(r["body"]["message"].is_string());
                bad += 1;
            }
        }
    }
    assert_eq!((answered_valid, bad), (valid_ids.len(), 1000));
    assert!(host.close().await.is_empty());
}

#[tokio::test]
async fn load_sequence_answers_every_call() {
    let mut host = started().await;
    let calls = [
        (
            "cd.go.elastic-agent.migrate-config",
            json!({"plugin_settings":{},"cluster_profiles":[],"elastic_agent_profiles":[]}),
        ),
        ("cd.go.elastic-agent.get-elastic-agent-profile-metadata", Value::Null),
        ("cd.go.elastic-agent.get-elastic-agent-profile-view", Value::Null),
        ("cd.go.elastic-agent.get-cluster-profile-metadata", Value::Null),
        ("cd.go.elastic-agent.get-cluster-profile-view", Value::Null),
        ("cd.go.elastic-agent.get-icon", Value::Null),
        ("cd.go.elastic-agent.get-capabilities", Value::Null),
        ("go.plugin-settings.get-configuration", Value::Null),
        ("go.plugin-settings.get-view", Value::Null),
        (
            "cd.go.elastic-agent.cluster-profile-changed",
            json!({"status":"deleted","cluster_profiles_properties":{"ClusterName":"c"}}),
        ),
    ];
    for (id, (name, body)) in calls.iter().enumerate() {
        host.request(id as i64, name, body.clone()).await;
        let r = host.next().await;
        assert_eq!(r["code"], 200, "{name}: {r}");
        match *name {
            "cd.go.elastic-agent.migrate-config" => {
                assert_eq!(r["body"], json!({"plugin_settings":{},"cluster_profiles":[],"elastic_agent_profiles":[]}))
            }
            n if n.ends_with("-view") && n.starts_with("cd.") => {
                assert!(r["body"]["template"].as_str().unwrap().contains("GOINPUTNAME["))
            }
            n if n.ends_with("-metadata") => assert!(!r["body"].as_array().unwrap().is_empty()),
            n if n.starts_with("go.plugin-settings") => assert_eq!(r["body"], json!({})),
            _ => {}
        }
    }
    host.close().await;
}

#[tokio::test]
async fn eof_ends_the_server_cleanly() {
    let host = started().await;
    assert!(host.close().await.is_empty());
}

/// A server-ping while GoCD's server-info fails (a fresh GoCD, a timeout): the plugin cannot
/// learn its profiles' keys, so it takes nothing as gone — no agent is disabled or deleted,
/// though GoCD lists one of ours — and says so in server health.
#[tokio::test]
async fn a_ping_that_cannot_learn_the_server_id_deletes_no_agent() {
    let mut host = started().await;
    let profile = json!({"ClusterName": "ci", "Region": "us-east-1"});
    host.request(1, "cd.go.elastic-agent.server-ping", json!({"all_cluster_profile_properties": [profile]})).await;
    let mut calls = Vec::new();
    loop {
        let line = host.next().await;
        if line["type"] == "response" {
            assert_eq!(line["id"], 1);
            assert_eq!(line["code"], 200, "{line}");
            break;
        }
        let name = line["name"].as_str().unwrap_or_default().to_string();
        let (code, body) = match name.as_str() {
            "go.processor.server-info.get" => (500, json!({"message": "GoCD is starting"})),
            "go.processor.elastic-agents.list-agents" => (
                200,
                json!([{"agent_id": "ea-0123456789ab-7-1a2b3c4d", "agent_state": "Building", "build_state": "Building", "config_state": "Enabled"}]),
            ),
            _ => (200, Value::Null),
        };
        calls.push((name, line["body"].clone()));
        host.send_raw(&json!({"type":"response","id":line["id"],"code":code,"body":body}).to_string()).await;
    }
    let names: Vec<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
    assert!(!names.iter().any(|n| n.contains("disable") || n.contains("delete")), "no agent removed: {names:?}");
    let health = calls.iter().find(|(n, _)| n == "go.processor.server-health.add-messages").expect("health told");
    assert!(health.1.to_string().contains("cannot be served"), "{}", health.1);
    host.close().await;
}
