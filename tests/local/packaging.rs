//! The release archive: `packaging/build.sh` (with `BINARY=` the binary cargo built for this test,
//! so nothing is compiled twice) produces a tarball with the binary, the host manifest, the
//! example profiles, their IAM policies and the install docs; the packaged binary, started
//! through the manifest's command, says hello with the manifest's id, version and extension.
//! The archive also carries the CloudFormation stacks, the getting-started guide, the profile
//! keys and the changelog; a machine without the aarch64 cross toolchain still gets its archive,
//! with a warning on stderr saying what is missing and how to install it.
//! The committed `packaging/iam/*.json` are what `iam-policy` prints for the example profiles:
//! `<cluster>.json` the policy, with RoleArn also `<cluster>.trust-policy.json` and
//! `<cluster>.caller-policy.json`, each a bare document IAM takes as it is.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_ecs-elastic-agent");
const PAIRS: [(&str, &str); 3] = [
    ("cluster-fargate", "elastic-small"),
    ("cluster-fargate-spot-assume-role", "elastic-small"),
    ("cluster-ec2", "elastic-ec2-docker"),
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ecs-ea-packaging-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The committed files: (file name, cluster profile, elastic profile, document).
fn iam_files() -> Vec<(String, &'static str, &'static str, &'static str)> {
    let mut files = Vec::new();
    for (cluster, elastic) in PAIRS {
        files.push((format!("{cluster}.json"), cluster, elastic, "policy"));
        if cluster.contains("assume-role") {
            for document in ["trust-policy", "caller-policy"] {
                files.push((format!("{cluster}.{document}.json"), cluster, elastic, document));
            }
        }
    }
    files
}

#[test]
fn committed_iam_policies_match_the_command() {
    for (file, cluster, elastic, document) in iam_files() {
        let out = Command::new(BIN)
            .current_dir(repo())
            .args([
                "iam-policy",
                "--document",
                document,
                "--cluster-profile",
                &format!("profiles/{cluster}.json"),
                "--elastic-profile",
                &format!("profiles/{elastic}.json"),
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{file}: {}", String::from_utf8_lossy(&out.stderr));
        let committed = std::fs::read_to_string(repo().join(format!("packaging/iam/{file}"))).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            committed,
            "packaging/iam/{file} is stale: run packaging/build.sh iam"
        );
        let doc: Value = serde_json::from_str(&committed).unwrap();
        assert_eq!(doc["Version"], "2012-10-17", "packaging/iam/{file} is a bare policy document");
    }
    let committed = std::fs::read_dir(repo().join("packaging/iam")).unwrap().count();
    assert_eq!(committed, iam_files().len(), "packaging/iam holds exactly the printed documents");
}

#[test]
fn the_archive_holds_everything_and_its_binary_starts_through_the_manifest() {
    let dist = temp_dir("dist");
    // AARCH64=auto as a release build has it, on a machine without the cross gcc (named after one
    // no machine has, so the test is the same where the toolchain is installed).
    let out = Command::new("bash")
        .arg(repo().join("packaging/build.sh"))
        .env("BINARY", BIN)
        .env("DIST_DIR", &dist)
        .env("JAR", "0")
        .env("AARCH64", "auto")
        .env("AARCH64_GCC", "no-such-aarch64-linux-gnu-gcc")
        .output()
        .expect("run packaging/build.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "packaging/build.sh failed:\n{stderr}");
    assert!(
        stderr.contains("WARNING: building WITHOUT the Linux aarch64 binary")
            && stderr.contains("no-such-aarch64-linux-gnu-gcc")
            && stderr.contains("apt-get install gcc-aarch64-linux-gnu"),
        "build.sh says loudly what the aarch64 build lacks and how to install it:\n{stderr}"
    );
    let archive = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let archive = if archive.is_absolute() { archive } else { repo().join(archive) };
    let name = archive.file_name().unwrap().to_string_lossy().trim_end_matches(".tar.gz").to_string();
    assert!(name.starts_with(&format!("ecs-elastic-agent-{}-", env!("CARGO_PKG_VERSION"))), "{name}");

    let unpacked = temp_dir("unpacked");
    let status = Command::new("tar").arg("-xzf").arg(&archive).arg("-C").arg(&unpacked).status().unwrap();
    assert!(status.success());
    let root = unpacked.join(&name);
    for file in [
        "bin/ecs-elastic-agent",
        "plugin.json",
        "INSTALL.md",
        "README.md",
        "docs/operators.md",
        "docs/protocol.md",
        "docs/getting-started.md",
        "docs/profile-keys.md",
        "docs/images/cluster-profile-view.png",
        "docs/images/elastic-profile-view.png",
        "CHANGELOG.md",
        "profiles/cluster-fargate.json",
        "profiles/elastic-small.json",
        "iam/cluster-fargate.json",
        "iam/cluster-ec2.json",
        "iam/cluster-fargate-spot-assume-role.json",
    ] {
        assert!(root.join(file).is_file(), "{file} is missing from the archive");
    }
    for entry in std::fs::read_dir(repo().join("packaging/cloudformation")).unwrap() {
        let path = entry.unwrap().path();
        // The stacks and their README, as committed.
        if path.extension().is_some_and(|e| e == "yaml" || e == "md") {
            let file = path.file_name().unwrap().to_string_lossy().to_string();
            let packaged = std::fs::read(root.join("cloudformation").join(&file))
                .unwrap_or_else(|e| panic!("cloudformation/{file} is missing from the archive: {e}"));
            assert_eq!(packaged, std::fs::read(&path).unwrap(), "cloudformation/{file} as committed");
        }
    }
    let changelog = std::fs::read_to_string(root.join("CHANGELOG.md")).unwrap();
    assert!(
        changelog.contains(&format!("## [{}]", env!("CARGO_PKG_VERSION"))),
        "CHANGELOG.md has a section for this version"
    );
    for (file, ..) in iam_files() {
        let packaged = std::fs::read(root.join(format!("iam/{file}"))).unwrap();
        assert_eq!(packaged, std::fs::read(repo().join(format!("packaging/iam/{file}"))).unwrap());
        let policy: Value = serde_json::from_slice(&packaged).unwrap();
        assert_eq!(policy["Version"], "2012-10-17");
    }
    let install = std::fs::read_to_string(root.join("INSTALL.md")).unwrap();
    for needed in ["plugin.json", "iam-policy", "doctor", "validate", "--metrics-addr", "RUST_LOG"] {
        assert!(install.contains(needed), "INSTALL.md says nothing about {needed}");
    }

    let manifest: Value = serde_json::from_str(&std::fs::read_to_string(root.join("plugin.json")).unwrap()).unwrap();
    assert_eq!(manifest["id"], "cd.go.contrib.elastic-agent.ecs");
    assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(manifest["extension"], "elastic-agent");
    assert_eq!(manifest["extension_versions"], serde_json::json!(["5.0"]));
    let command: Vec<String> = manifest["command"]
        .as_array()
        .expect("command is an array")
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    let hello = start_through_manifest(&root, &command);
    for key in ["id", "version", "extension", "extension_versions"] {
        let hello_key = if key == "id" { "plugin_id" } else { key };
        assert_eq!(hello[hello_key], manifest[key], "hello {hello_key} agrees with plugin.json {key}");
    }
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["protocol"], manifest["protocol"]);
}

/// Starts the manifest's command in the unpacked directory, reads the hello line, closes stdin
/// and waits for exit 0.
fn start_through_manifest(root: &Path, command: &[String]) -> Value {
    let mut child = Command::new(root.join(&command[0]))
        .args(&command[1..])
        .current_dir(root)
        .env("RUST_LOG", "warn")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the packaged plugin");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("read the hello line");
    drop(child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the packaged plugin did not exit after EOF");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit status {status}");
    serde_json::from_str(line.trim_end()).unwrap_or_else(|e| panic!("hello line {line:?}: {e}"))
}
