//! `validate`: the example profiles pass (each elastic profile with the cluster profile it is
//! meant for), problems come out one line each as `FILE: Key: message` with the messages of the
//! v5 validate calls, elastic profiles are checked against the cluster profile, exit code 0 or 1.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ecs_elastic_agent::settings::{validate_cluster_profile, validate_elastic_profile};

const BIN: &str = env!("CARGO_BIN_EXE_ecs-elastic-agent");

/// Which example elastic profiles belong to which example cluster profile.
const PAIRS: [(&str, &[&str]); 3] = [
    ("cluster-fargate.json", &["elastic-small.json", "elastic-fargate-build.json"]),
    ("cluster-fargate-spot-assume-role.json", &["elastic-small.json"]),
    ("cluster-ec2.json", &["elastic-ec2-docker.json"]),
];

fn profiles() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles")
}

fn validate(cluster: &Path, elastic: &[&Path]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("validate").arg("--cluster-profile").arg(cluster);
    for e in elastic {
        cmd.arg("--elastic-profile").arg(e);
    }
    cmd.env("RUST_LOG", "off").output().expect("run validate")
}

fn lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect()
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ecs-ea-cli-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn every_example_profile_passes_with_its_cluster_profile() {
    for (cluster, elastics) in PAIRS {
        let cluster = profiles().join(cluster);
        let elastic: Vec<PathBuf> = elastics.iter().map(|e| profiles().join(e)).collect();
        let refs: Vec<&Path> = elastic.iter().map(PathBuf::as_path).collect();
        let o = validate(&cluster, &refs);
        assert_eq!(o.status.code(), Some(0), "{}: {:?}", cluster.display(), lines(&o));
        let mut want = vec![format!("{}: ok", cluster.display())];
        want.extend(elastic.iter().map(|e| format!("{}: ok", e.display())));
        assert_eq!(lines(&o), want);
    }
    // Every file in profiles/ is in a pair.
    for entry in std::fs::read_dir(profiles()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let listed = PAIRS.iter().any(|(c, es)| *c == name || es.contains(&name.as_str()));
        assert!(listed, "profiles/{name} is not checked by this test");
    }
}

#[test]
fn problems_are_the_messages_of_the_v5_validate_calls_one_line_each() {
    let text = r#"{"ClusterName": "not a name!", "MaxAgents": "0", "Region": null, "Surprise": "x"}"#;
    let cluster = temp_file("bad-cluster.json", text);
    let o = validate(&cluster, &[]);
    assert_eq!(o.status.code(), Some(1));
    let props = ecs_elastic_agent::cli::files::parse_properties(text).unwrap();
    let want: Vec<String> = validate_cluster_profile(&props)
        .iter()
        .map(|e| format!("{}: {}: {}", cluster.display(), e.key, e.message))
        .collect();
    assert!(want.len() >= 3, "{want:?}");
    assert_eq!(lines(&o), want);

    let elastic_text = r#"{"Cpu": "lots", "Environment": "NO_EQUALS_SIGN"}"#;
    let elastic = temp_file("bad-elastic.json", elastic_text);
    let o = validate(&profiles().join("cluster-fargate.json"), &[&elastic]);
    assert_eq!(o.status.code(), Some(1));
    let props = ecs_elastic_agent::cli::files::parse_properties(elastic_text).unwrap();
    let mut want = vec![format!("{}: ok", profiles().join("cluster-fargate.json").display())];
    want.extend(
        validate_elastic_profile(&props).iter().map(|e| format!("{}: {}: {}", elastic.display(), e.key, e.message)),
    );
    assert_eq!(lines(&o), want);
}

#[test]
fn elastic_profiles_are_checked_against_the_cluster_profile() {
    let o = validate(&profiles().join("cluster-fargate.json"), &[&profiles().join("elastic-ec2-docker.json")]);
    assert_eq!(o.status.code(), Some(1));
    let out = lines(&o);
    let file = profiles().join("elastic-ec2-docker.json").display().to_string();
    assert!(
        out.iter().any(|l| l.starts_with(&format!("{file}: Privileged: ")) && l.contains("only applies on EC2")),
        "{out:?}"
    );
    let not_allowed =
        temp_file("other-image.json", r#"{"Image": "docker.io/library/ubuntu:24.04", "Cpu": "512", "Memory": "1024"}"#);
    let o = validate(&profiles().join("cluster-fargate.json"), &[&not_allowed]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        lines(&o)[1].contains(": Image: Image 'docker.io/library/ubuntu:24.04' is not allowed by this cluster profile"),
        "{:?}",
        lines(&o)
    );
}

#[test]
fn what_no_cluster_profile_runs_is_refused_whatever_the_cluster_profile() {
    let text = r#"{"Image": "alpine", "PlatformVersion": "1.4.0", "BindMounts": "/var/cache /cache"}"#;
    let elastic = temp_file("fargate-and-ec2.json", text);
    let props = ecs_elastic_agent::cli::files::parse_properties(text).unwrap();
    let want: Vec<String> = validate_elastic_profile(&props)
        .iter()
        .map(|e| format!("{}: {}: {}", elastic.display(), e.key, e.message))
        .collect();
    assert_eq!(want.len(), 1, "{want:?}");
    let invalid_cluster = temp_file("submarine.json", r#"{"LaunchType": "SUBMARINE"}"#);
    for cluster in [profiles().join("cluster-fargate.json"), profiles().join("cluster-ec2.json"), invalid_cluster] {
        let o = validate(&cluster, &[&elastic]);
        assert_eq!(o.status.code(), Some(1));
        let out = lines(&o);
        assert_eq!(out[out.len() - 1..], want, "{}", cluster.display());
    }
}

#[test]
fn unusable_files_are_named() {
    let o = validate(Path::new("/nonexistent/cluster.json"), &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(lines(&o)[0].starts_with("/nonexistent/cluster.json: cannot read the file: "), "{:?}", lines(&o));
    let numbers = temp_file("numbers.json", r#"{"ClusterName": "ci", "MaxAgents": 10}"#);
    let o = validate(&numbers, &[]);
    assert_eq!(
        lines(&o),
        vec![format!(
            "{}: MaxAgents: every value must be a JSON string, as GoCD sends them (write \"10\", not a number)",
            numbers.display()
        )]
    );
    let invalid_cluster = temp_file("invalid.json", r#"{"LaunchType": "SUBMARINE"}"#);
    let o = validate(&invalid_cluster, &[&profiles().join("elastic-small.json")]);
    let out = lines(&o);
    assert_eq!(
        out.last().unwrap(),
        &format!(
            "{}: ok (not checked against the cluster profile, which is not valid)",
            profiles().join("elastic-small.json").display()
        )
    );
}

#[test]
fn secrets_are_never_echoed() {
    let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzSECRETKEY";
    let text = format!(
        r#"{{"ClusterName": "ci", "AccessKeyId": "AKIA-not valid!", "SecretAccessKey": "{secret} with spaces"}}"#
    );
    let cluster = temp_file("secret.json", &text);
    let o = validate(&cluster, &[]);
    assert_eq!(o.status.code(), Some(1));
    let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!all.contains(secret) && !all.contains("AKIA-not"), "{all}");
}
