//! One version everywhere an operator reads one: the crate's (`Cargo.toml`) is what the binary's
//! `--version` prints, what the GoCD plugin jar is built as (`packaging/gocd-plugin/pom.xml`: the
//! jar's file name, `plugin.xml` and `META-INF/MANIFEST.MF` take it from there; the jar's own tests
//! read them in the built jar), what the stdio host manifest says (`packaging/plugin.json`), what
//! the CloudFormation stacks' `Description` begins with, what the plugin's IAM policy names in its
//! first `Sid` (as `iam-policy` prints it and as the cluster stack holds it), and a section of
//! `CHANGELOG.md`. The release archive's name carries it too (`tests/local/packaging.rs` builds one).

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_ecs-elastic-agent");
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The Sid IAM takes for the version (letters and digits only): 0.1.0 is `...0dot1dot0`.
fn version_sid() -> String {
    let spelt: String = VERSION
        .chars()
        .map(|c| match c {
            '.' => "dot".to_string(),
            '-' => "dash".to_string(),
            '+' => "plus".to_string(),
            c => c.to_string(),
        })
        .collect();
    format!("EcsElasticAgentVersion{spelt}")
}

#[test]
fn the_binary_says_the_crates_version() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("ecs-elastic-agent {VERSION}"));
}

#[test]
fn the_jar_is_built_as_the_crates_version() {
    let pom = read("packaging/gocd-plugin/pom.xml");
    // The project's own <version>, two spaces in (dependencies' are deeper).
    let project: Vec<&str> =
        pom.lines().filter_map(|l| l.strip_prefix("  <version>").and_then(|v| v.strip_suffix("</version>"))).collect();
    assert_eq!(project, [VERSION], "pom.xml's project version is Cargo.toml's");
    assert!(
        pom.contains("<finalName>ecs-elastic-agent-gocd-${project.version}</finalName>"),
        "the jar's file name carries the version"
    );
    assert!(
        pom.contains("<addDefaultImplementationEntries>true</addDefaultImplementationEntries>"),
        "MANIFEST.MF's Implementation-Version is the project's version"
    );
    let plugin_xml = read("packaging/gocd-plugin/src/main/resources/plugin.xml");
    assert!(plugin_xml.contains("<version>${project.version}</version>"), "plugin.xml takes the version from pom.xml");
    let properties = read("packaging/gocd-plugin/src/main/resources/ecs-elastic-agent-gocd.properties");
    assert!(properties.lines().any(|l| l == "version=${project.version}"), "the jar's properties take it too");
}

#[test]
fn the_host_manifest_says_the_crates_version() {
    let manifest: Value = serde_json::from_str(&read("packaging/plugin.json")).unwrap();
    assert_eq!(manifest["version"], VERSION);
}

/// An operator comparing a deployed stack with a release reads the version in the console's stack
/// list (`packaging/build.sh` checks the same before it packages anything).
#[test]
fn the_stacks_descriptions_name_the_crates_version() {
    for stack in ["cluster", "member-account"] {
        let text = read(&format!("packaging/cloudformation/{stack}.yaml"));
        let first = text
            .lines()
            .skip_while(|l| !l.starts_with("Description:"))
            .nth(1)
            .unwrap_or_else(|| panic!("{stack}.yaml has a Description"));
        let expected = format!("ecs-elastic-agent {VERSION}, ");
        assert!(
            first.trim_start().starts_with(&expected),
            "{stack}.yaml's Description begins with \"{expected}\" (the version in Cargo.toml): {first}"
        );
    }
}

#[test]
fn the_policy_names_the_crates_version_in_its_first_sid() {
    let sid = version_sid();
    assert!(sid.bytes().all(|b| b.is_ascii_alphanumeric()), "IAM takes only letters and digits in a Sid: {sid}");
    let out = Command::new(BIN)
        .current_dir(repo())
        .args(["iam-policy", "--cluster-profile", "profiles/cluster-fargate.json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let policy: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(policy["Statement"][0]["Sid"], sid.as_str(), "iam-policy's first statement");
    // The cluster stack holds the same statement (src/cli/cloudformation_tests.rs compares the
    // whole policy); here, that its version is this one.
    let stack = read("packaging/cloudformation/cluster.yaml");
    assert!(stack.contains(&format!("- Sid: {sid}\n")), "cluster.yaml's policy names {sid}");
    for file in ["packaging/iam/cluster-fargate.json", "packaging/iam/cluster-ec2.json"] {
        let committed: Value = serde_json::from_str(&read(file)).unwrap();
        assert_eq!(committed["Statement"][0]["Sid"], sid.as_str(), "{file}: run packaging/build.sh iam");
    }
}

#[test]
fn the_changelog_has_a_section_for_the_crates_version() {
    let changelog = read("CHANGELOG.md");
    assert!(
        changelog.lines().any(|l| l.starts_with(&format!("## [{VERSION}]"))),
        "CHANGELOG.md has a \"## [{VERSION}]\" section: say what this version changes and what an operator must do"
    );
}
