//! `plan`: one cluster profile of theirs split per launch type, ids kept, profiles our validation
//! refuses not written, other plugins' profiles skipped.

use super::input::{read_text, Theirs};
use super::plan;

fn theirs(clusters: &str, elastics: &str) -> Theirs {
    let mut theirs = Theirs::default();
    read_text(clusters, &mut theirs).unwrap();
    read_text(elastics, &mut theirs).unwrap();
    theirs
}

const CLUSTER: &str = r#"{"_embedded": {"profiles": [
  {"id": "c", "plugin_id": "com.thoughtworks.gocd.elastic-agent.ecs", "properties": [
    {"key": "ClusterName", "value": "ci"}, {"key": "GoServerUrl", "value": "https://gocd.example.com/go"},
    {"key": "AWSRegion", "value": "eu-west-1"}, {"key": "IamInstanceProfile", "value": "ecsInstanceRole"},
    {"key": "LinuxAmi", "value": "ami-0abcdef1234567890"}, {"key": "LinuxInstanceType", "value": "c5.large"}]},
  {"id": "d", "plugin_id": "cd.go.contrib.elastic-agent.docker", "properties": []}]}}"#;

fn elastic(id: &str, cluster: &str, props: &[(&str, &str)]) -> String {
    let props: Vec<String> = props.iter().map(|(k, v)| format!(r#"{{"key": "{k}", "value": "{v}"}}"#)).collect();
    format!(r#"{{"id": "{id}", "cluster_profile_id": "{cluster}", "properties": [{}]}}"#, props.join(","))
}

fn list(items: &[String]) -> String {
    format!(r#"{{"_embedded": {{"profiles": [{}]}}}}"#, items.join(","))
}

#[test]
fn one_cluster_profile_of_theirs_becomes_one_of_ours_per_launch_type() {
    let elastics = list(&[
        elastic("a", "c", &[("Image", "i"), ("Fargate", "true"), ("MaxMemory", "2G"), ("CPU", "1024")]),
        elastic("b", "c", &[("Image", "i"), ("Fargate", "true"), ("MaxMemory", "1G"), ("CPU", "512")]),
        elastic("e", "c", &[("Image", "i"), ("MaxMemory", "1G")]),
        elastic("f", "c", &[("Image", "i"), ("MaxMemory", "1G"), ("InstanceType", "m5.large")]),
        elastic("p", "c", &[("Image", "i"), ("MaxMemory", "1G"), ("Privileged", "true")]),
        elastic("s", "c", &[("Image", "i"), ("RunAsSpotInstance", "true")]),
        elastic("k", "d", &[("Image", "i")]),
    ]);
    let plan = plan(&theirs(CLUSTER, &elastics));
    let of = |id: &str| plan.elastics.iter().find(|e| e.id == id).unwrap();
    assert_eq!(of("a").cluster_id, "c-fargate");
    assert_eq!(of("b").cluster_id, "c-fargate", "the same cluster profile for the same launch type");
    assert_eq!(of("e").cluster_id, "c-ec2");
    assert_eq!(of("f").cluster_id, "c-ec2-f", "its own instance type: a cluster profile of its own");
    assert_eq!(of("p").cluster_id, "c-ec2", "privileged agents share it, and it allows them");
    assert_eq!(of("s").cluster_id, "c-ec2-spot");
    let cluster = |id: &str| plan.clusters.iter().find(|c| c.id == id).unwrap();
    assert_eq!(cluster("c-ec2").properties.get("AllowPrivileged").map(String::as_str), Some("true"));
    assert_eq!(cluster("c-ec2-f").properties["Ec2InstanceType"], "m5.large");
    assert_eq!(cluster("c-ec2-spot").properties["Ec2Spot"], "true");
    assert!(plan.elastics.iter().all(super::OurElastic::written), "{:?}", plan.elastics);
    assert!(plan.skipped.iter().any(|(_, id, why)| id == "d" && why.contains("cd.go.contrib.elastic-agent.docker")));
    assert!(plan.skipped.iter().any(|(_, id, _)| id == "k"));
}

#[test]
fn profiles_our_validation_refuses_are_not_written_and_say_why() {
    // No LinuxAmi on their side (their plugin looked one up): ours needs Ec2AmiId.
    let cluster = CLUSTER.replace(r#"{"key": "LinuxAmi", "value": "ami-0abcdef1234567890"}, "#, "");
    let elastics = list(&[
        elastic("ec2", "c", &[("Image", "i")]),
        elastic("ok", "c", &[("Image", "i"), ("Fargate", "true")]),
        elastic("lost", "nowhere", &[("Image", "i")]),
    ]);
    let plan = plan(&theirs(&cluster, &elastics));
    let ec2 = plan.elastics.iter().find(|e| e.id == "ec2").unwrap();
    assert!(!ec2.written());
    assert!(ec2.problems.iter().any(|p| p.contains("c-ec2")), "{:?}", ec2.problems);
    assert!(plan.clusters.iter().find(|c| c.id == "c-ec2").unwrap().problems.iter().any(|p| p.starts_with("Ec2AmiId")));
    assert!(plan.elastics.iter().find(|e| e.id == "ok").unwrap().written());
    assert!(plan.skipped.iter().any(|(_, id, why)| id == "lost" && why.contains("not in the input")));
    let report = super::report::markdown(&plan, &[], std::path::Path::new("imported"));
    assert!(report.contains("## Not written") && report.contains("Ec2AmiId"));
}

#[test]
fn the_test_data_translates_into_valid_profiles_only() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import");
    for files in [&["cluster-profiles.json", "elastic-profiles.json"][..], &["cruise-config.xml"][..]] {
        let mut theirs = Theirs::default();
        for f in files {
            super::input::read_file(&dir.join(f), &mut theirs).unwrap();
        }
        let plan = plan(&theirs);
        assert!(plan.elastics.len() >= 3);
        for e in &plan.elastics {
            assert!(e.written(), "{}: {:?}", e.id, e.problems);
        }
    }
}
