//! `import`: the profiles of GoCD's own ECS plugin (tests/data/import/, both forms GoCD gives
//! them) become ours; every flat profile pair written passes `validate`; the report names every
//! key of the input; no secret of the input reaches a written file, stdout or stderr.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_ecs-elastic-agent");

/// Values of the inputs that must never come out: clear secrets (XML exported unencrypted) and
/// GoCD's encrypted values.
const SECRETS: &[&str] = &[
    "ENCRYPTED-ACCESS-KEY-ID-MARKER",
    "ENCRYPTED-SECRET-ACCESS-KEY-MARKER",
    "ENCRYPTED-REGISTRY-PASSWORD-MARKER",
    "XML-ENCRYPTED-SECRET-MARKER",
    "AKIAEXPORTEDINCLEAR00",
    "CLEAR-AUTH-TOKEN-MARKER",
    "CLEAR-REGISTRY-PASSWORD-MARKER",
    "AES:",
];

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import").join(name)
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The keys of the input: `"key": "X"` in the JSON, `<key>X</key>` in the XML.
fn input_keys(text: &str) -> Vec<String> {
    let mut keys = Vec::new();
    for (open, close) in [("\"key\": \"", "\""), ("<key>", "</key>")] {
        for part in text.split(open).skip(1) {
            keys.push(part.split(close).next().unwrap().to_string());
        }
    }
    keys
}

/// Runs `import` in a folder of its own with `--out imported`, checks what it wrote, and returns
/// the report's text with the inputs' folder written as the repository's.
fn import_and_check(name: &str, inputs: &[&str], skipped: &[&str]) -> String {
    let cwd = std::env::temp_dir().join(format!("ecs-ea-import-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cwd);
    std::fs::create_dir_all(&cwd).unwrap();
    let out = cwd.join("imported");
    let paths: Vec<PathBuf> = inputs.iter().map(|i| data(i)).collect();
    let run = Command::new(BIN)
        .current_dir(&cwd)
        .args(["import", "--out", "imported"])
        .args(&paths)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    let stderr = String::from_utf8_lossy(&run.stderr).to_string();
    assert!(run.status.success(), "{name}: {stdout}{stderr}");
    for id in skipped {
        assert!(
            stdout.lines().any(|l| l.starts_with("skipped") && l.contains(id)),
            "{name}: {id} not skipped: {stdout}"
        );
    }

    // Each elastic profile of the input was written under its own id, and validates with its
    // cluster profile.
    let flat = out.join("profiles");
    let written: Vec<(String, String)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("wrote elastic profile "))
        .map(|l| {
            let (id, rest) = l.split_once(" (cluster profile ").unwrap();
            (id.to_string(), rest.split(',').next().unwrap().to_string())
        })
        .collect();
    assert!(written.len() >= 3, "{stdout}");
    for (elastic, cluster) in &written {
        let api = out.join("gocd-api/elastic-profiles").join(format!("{elastic}.json"));
        let body: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&api).unwrap()).unwrap();
        assert_eq!(body["id"], elastic.as_str());
        assert_eq!(body["cluster_profile_id"], cluster.as_str());
        let api = out.join("gocd-api/cluster-profiles").join(format!("{cluster}.json"));
        let body: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&api).unwrap()).unwrap();
        assert_eq!(body["plugin_id"], "cd.go.contrib.elastic-agent.ecs");
        let validate = Command::new(BIN)
            .arg("validate")
            .arg("--cluster-profile")
            .arg(flat.join(format!("cluster-{cluster}.json")))
            .arg("--elastic-profile")
            .arg(flat.join(format!("elastic-{elastic}.json")))
            .env("RUST_LOG", "off")
            .output()
            .unwrap();
        assert!(validate.status.success(), "{name}: {elastic}: {}", String::from_utf8_lossy(&validate.stdout));
    }

    // The report names every key of the input.
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for input in &paths {
        for key in input_keys(&std::fs::read_to_string(input).unwrap()) {
            assert!(report.contains(&format!("`{key}`")) || skipped_key(&key), "{name}: report misses {key}");
        }
    }

    // No secret anywhere.
    let mut outputs: Vec<(String, String)> = vec![("stdout".into(), stdout), ("stderr".into(), stderr)];
    for f in files_under(&out) {
        outputs.push((f.display().to_string(), std::fs::read_to_string(&f).unwrap()));
    }
    for (what, text) in &outputs {
        for secret in SECRETS {
            assert!(!text.contains(secret), "{name}: {what} carries {secret}");
        }
    }
    let _ = std::fs::remove_dir_all(&cwd);
    report.replace(&data("").display().to_string(), "tests/data/import/")
}

/// Keys of the other plugins' profiles, which are skipped whole.
fn skipped_key(key: &str) -> bool {
    key == "go_server_url"
}

#[test]
fn gocd_api_json_imports_into_valid_profiles_without_secrets() {
    let report = import_and_check("api", &["cluster-profiles.json", "elastic-profiles.json"], &["k8s", "k8s-small"]);
    // The report of these inputs, kept as an example of one. After a change to the report,
    // regenerate it: `ecs-elastic-agent import --out imported tests/data/import/cluster-profiles.json
    // tests/data/import/elastic-profiles.json`, then copy imported's report over it.
    let expected = std::fs::read_to_string(data("report.md")).unwrap();
    assert_eq!(report, expected, "tests/data/import/report.md is not what import writes now");
}

#[test]
fn cruise_config_xml_imports_into_valid_profiles_without_secrets() {
    let _ = import_and_check("xml", &["cruise-config.xml"], &["docker-local", "docker-small"]);
}

#[test]
fn unreadable_input_fails_and_writes_nothing() {
    let out = std::env::temp_dir().join(format!("ecs-ea-import-bad-{}", std::process::id()));
    let bad = std::env::temp_dir().join(format!("ecs-ea-import-bad-{}.json", std::process::id()));
    std::fs::write(&bad, "{\"nothing\": 1}").unwrap();
    let run = Command::new(BIN).arg("import").arg("--out").arg(&out).arg(&bad).output().unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stdout).contains("not GoCD's API JSON"));
    assert!(!out.exists());
    let _ = std::fs::remove_file(&bad);
}

#[path = "gocd_stand_in.rs"]
mod gocd_stand_in;

#[test]
fn apply_creates_cluster_profiles_and_switches_elastic_profiles_in_place() {
    use serde_json::json;
    const TOKEN: &str = "gocd-access-token-NEVER-PRINTED-7f3a";
    // GoCD as it is before the switch: their elastic profile `build-small` (to be switched), and
    // `ecs-prod-ec2` already created by an earlier run (to be replaced with its ETag).
    let (url, state) = gocd_stand_in::start(
        TOKEN,
        &[
            (
                "/go/api/elastic/profiles/build-small",
                json!({"id": "build-small", "cluster_profile_id": "ecs-prod", "properties": []}),
            ),
            (
                "/go/api/admin/elastic/cluster_profiles/ecs-prod-ec2",
                json!({"id": "ecs-prod-ec2", "plugin_id": "cd.go.contrib.elastic-agent.ecs", "properties": [
                    {"key": "Region", "value": "eu-west-1"},
                    {"key": "SecretAccessKey", "encrypted_value": "AES:c2VjcmV0:ZW5jcnlwdGVk"}
                ]}),
            ),
        ],
    );
    let cwd = std::env::temp_dir().join(format!("ecs-ea-import-apply-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cwd);
    std::fs::create_dir_all(&cwd).unwrap();
    let run = Command::new(BIN)
        .current_dir(&cwd)
        .args(["import", "--out", "imported", "--apply", "--server", &url])
        .arg(data("cluster-profiles.json"))
        .arg(data("elastic-profiles.json"))
        .env("GOCD_TOKEN", TOKEN)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    let stderr = String::from_utf8_lossy(&run.stderr).to_string();
    assert!(run.status.success(), "{stdout}{stderr}");
    assert!(!stdout.contains(TOKEN) && !stderr.contains(TOKEN), "the token was printed");
    assert!(stdout.contains("created cluster profile ecs-prod-fargate"), "{stdout}");
    assert!(stdout.contains("updated cluster profile ecs-prod-ec2"), "{stdout}");
    assert!(stdout.contains("switched elastic profile build-small (cluster profile ecs-prod-fargate)"), "{stdout}");
    assert!(stdout.contains("created elastic profile docker-builds"), "{stdout}");

    let state = state.lock().unwrap();
    assert!(state.authorizations.iter().all(|a| a == &format!("Bearer {TOKEN}")));
    let switched = &state.profiles["/go/api/elastic/profiles/build-small"];
    assert_eq!(switched.0["cluster_profile_id"], "ecs-prod-fargate");
    assert_eq!(switched.1, 2, "replaced once");
    let created = &state.profiles["/go/api/admin/elastic/cluster_profiles/ecs-prod-fargate"].0;
    assert_eq!(created["plugin_id"], "cd.go.contrib.elastic-agent.ecs");
    // Every PUT carried the ETag of a GET before it.
    for (method, path, if_match) in &state.calls {
        if method == "PUT" {
            assert_eq!(if_match.as_deref(), Some("\"rev-1\""), "PUT {path}");
        }
    }
    // Cluster profiles before the elastic profiles that point at them.
    let first_elastic = state.calls.iter().position(|(_, p, _)| p.starts_with("/go/api/elastic/")).unwrap();
    let last_cluster = state.calls.iter().rposition(|(_, p, _)| p.starts_with("/go/api/admin/")).unwrap();
    assert!(last_cluster < first_elastic, "{:?}", state.calls);
    let _ = std::fs::remove_dir_all(&cwd);
}

#[test]
fn apply_without_a_token_sends_nothing_and_a_foreign_profile_is_left_alone() {
    use serde_json::json;
    let (url, state) = gocd_stand_in::start(
        "t",
        &[(
            "/go/api/admin/elastic/cluster_profiles/ecs-staging-fargate",
            json!({"id": "ecs-staging-fargate", "plugin_id": "cd.go.contrib.elastic-agent.docker", "properties": []}),
        )],
    );
    let cwd = std::env::temp_dir().join(format!("ecs-ea-import-apply-fail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cwd);
    std::fs::create_dir_all(&cwd).unwrap();
    let import = |token: Option<&str>| {
        let mut cmd = Command::new(BIN);
        cmd.current_dir(&cwd).args(["import", "--out", "imported", "--apply", "--server", &url]);
        cmd.arg(data("cruise-config.xml")).env_remove("GOCD_TOKEN").env("RUST_LOG", "off");
        if let Some(token) = token {
            cmd.env("GOCD_TOKEN", token);
        }
        let run = cmd.output().unwrap();
        (run.status.code(), String::from_utf8_lossy(&run.stdout).to_string())
    };
    let (code, stdout) = import(None);
    assert_eq!(code, Some(1));
    assert!(stdout.contains("set GOCD_TOKEN"), "{stdout}");
    assert!(state.lock().unwrap().calls.is_empty());

    let (code, stdout) = import(Some("t"));
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL cluster profile ecs-staging-fargate") && stdout.contains("left as it is"),
        "{stdout}"
    );
    assert!(stdout.contains("FAIL elastic profile staging-fargate"), "{stdout}");
    assert!(stdout.contains("created elastic profile staging-spot"), "{stdout}");
    let state = state.lock().unwrap();
    assert_eq!(
        state.profiles["/go/api/admin/elastic/cluster_profiles/ecs-staging-fargate"].0["plugin_id"],
        "cd.go.contrib.elastic-agent.docker"
    );
    let _ = std::fs::remove_dir_all(&cwd);
}

/// GoCD refuses two elastic profiles (its 422, validation failed): each stays as it was in GoCD,
/// the output names GoCD's message, the cluster profile this run created only for a refused one
/// is deleted again with its ETag, and the one that existed before the run is not deleted but
/// gets its earlier properties back.
#[test]
fn apply_refused_by_gocd_leaves_the_profile_as_it_was_and_deletes_what_it_created_for_it() {
    use serde_json::json;
    const TOKEN: &str = "gocd-access-token-refused-2c9e";
    let their = |id: &str| {
        json!({"id": id, "cluster_profile_id": "ecs-prod", "properties": [
            {"key": "Image", "value": "gocd/gocd-agent-alpine-3.19:v24.1.0"}, {"key": "Fargate", "value": "true"}
        ]})
    };
    // `build-tiny` is alone in the cluster profile `ecs-prod-fargate-spot`, which the run creates;
    // `linux-ec2` is alone in `ecs-prod-ec2`, which an earlier run created.
    let (url, state) = gocd_stand_in::start_refusing(
        TOKEN,
        &[
            ("/go/api/elastic/profiles/build-small", their("build-small")),
            ("/go/api/elastic/profiles/build-tiny", their("build-tiny")),
            ("/go/api/elastic/profiles/linux-ec2", their("linux-ec2")),
            (
                "/go/api/admin/elastic/cluster_profiles/ecs-prod-ec2",
                json!({"id": "ecs-prod-ec2", "plugin_id": "cd.go.contrib.elastic-agent.ecs", "properties": [
                    {"key": "Region", "value": "eu-west-1"},
                    {"key": "SecretAccessKey", "encrypted_value": "AES:c2VjcmV0:ZW5jcnlwdGVk"}
                ]}),
            ),
        ],
        &["build-tiny", "linux-ec2"],
    );
    let before = state.lock().unwrap().profiles.clone();
    let cwd = std::env::temp_dir().join(format!("ecs-ea-import-apply-refused-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cwd);
    std::fs::create_dir_all(&cwd).unwrap();
    let run = Command::new(BIN)
        .current_dir(&cwd)
        .args(["import", "--out", "imported", "--apply", "--server", &url])
        .arg(data("cluster-profiles.json"))
        .arg(data("elastic-profiles.json"))
        .env("GOCD_TOKEN", TOKEN)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    assert_eq!(run.status.code(), Some(1), "{stdout}");
    assert!(!stdout.contains(TOKEN), "the token was printed");
    for id in ["build-tiny", "linux-ec2"] {
        let line = stdout.lines().find(|l| l.starts_with(&format!("FAIL elastic profile {id}:"))).unwrap_or_default();
        assert!(line.contains("HTTP 422") && line.contains(&gocd_stand_in::refusal_message(id)), "{stdout}");
        assert!(line.contains("left as it was"), "{stdout}");
    }
    assert!(stdout.contains("switched elastic profile build-small (cluster profile ecs-prod-fargate)"), "{stdout}");
    assert!(stdout.contains("created cluster profile ecs-prod-fargate-spot"), "{stdout}");
    assert!(stdout.contains("deleted cluster profile ecs-prod-fargate-spot again"), "{stdout}");
    assert!(!stdout.contains("deleted cluster profile ecs-prod-ec2"), "{stdout}");
    assert!(stdout.contains("updated cluster profile ecs-prod-ec2"), "{stdout}");
    assert!(stdout.contains("restored cluster profile ecs-prod-ec2"), "{stdout}");

    let state = state.lock().unwrap();
    // The refused profiles are as they were: same body, same revision.
    for path in ["/go/api/elastic/profiles/build-tiny", "/go/api/elastic/profiles/linux-ec2"] {
        assert_eq!(state.profiles.get(path), before.get(path), "{path} changed");
    }
    // The cluster profile created for build-tiny alone is gone, deleted with the ETag it had.
    let spot = "/go/api/admin/elastic/cluster_profiles/ecs-prod-fargate-spot";
    assert!(!state.profiles.contains_key(spot), "{spot} left behind");
    assert_eq!(state.deleted, [(spot.to_string(), Some("\"rev-1\"".to_string()))], "the only DELETE");
    let created = state.calls.iter().position(|(m, p, _)| m == "POST" && p.ends_with("/cluster_profiles")).unwrap();
    let deleted = state.calls.iter().position(|(m, _, _)| m == "DELETE").unwrap();
    assert!(created < deleted);
    // The one that existed before the run is still there, never deleted, with the properties it
    // had (its secret as GoCD holds it): updated, then put back with its new ETag.
    let ec2 = "/go/api/admin/elastic/cluster_profiles/ecs-prod-ec2";
    assert_eq!(state.profiles[ec2].0, before[ec2].0, "{ec2} not restored");
    let puts: Vec<&Option<String>> =
        state.calls.iter().filter(|(m, p, _)| m == "PUT" && p == ec2).map(|(_, _, etag)| etag).collect();
    assert_eq!(puts.len(), 2, "replaced, then restored: {puts:?}");
    assert_ne!(puts[0], puts[1], "the restore sent the ETag of the replaced profile");
    // The others GoCD took are the run's.
    assert_eq!(state.profiles["/go/api/elastic/profiles/build-small"].0["cluster_profile_id"], "ecs-prod-fargate");
    // Nothing else GoCD had before changed except what the run switched or replaced.
    for (path, was) in &before {
        if path.ends_with("/build-small") || path == ec2 {
            continue;
        }
        assert_eq!(state.profiles.get(path), Some(was), "{path} changed");
    }
    let _ = std::fs::remove_dir_all(&cwd);
}
