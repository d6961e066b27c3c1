//! Tests of the settings module through its public API: every rule with a good and a bad value,
//! all problems at once, nulls, unknown keys, secrets never echoed, metadata, hashes, the
//! sample profiles under `profiles/`.

mod cluster;
mod compat;
mod elastic;
mod no_cluster_fits;
mod task_parts;

use super::*;

/// A property map from `(key, value)` pairs.
fn props(pairs: &[(&str, &str)]) -> Properties {
    pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect()
}

/// `base` with `key` set to `value`.
fn with(base: &[(&str, &str)], key: &str, value: &str) -> Properties {
    let mut p = props(base);
    p.insert(key.to_string(), Some(value.to_string()));
    p
}

/// The messages of `errors` keyed by `key`.
fn messages_for<'a>(errors: &'a [FieldError], key: &str) -> Vec<&'a str> {
    errors.iter().filter(|e| e.key == key).map(|e| e.message.as_str()).collect()
}

/// Checks one rule: `good` gives no error; each `bad` gives exactly one error, keyed by `key`.
#[track_caller]
fn check_rule(
    validate: fn(&Properties) -> Vec<FieldError>,
    base: &[(&str, &str)],
    key: &str,
    good: &str,
    bad: &[&str],
) {
    assert_eq!(validate(&with(base, key, good)), [], "{key}={good:?} should be valid");
    for bad in bad {
        let errors = validate(&with(base, key, bad));
        assert_eq!(errors.len(), 1, "{key}={bad:?} should give one error: {errors:?}");
        assert_eq!(errors[0].key, key, "{key}={bad:?}: {errors:?}");
        assert!(errors[0].message.ends_with(['.', '?']), "a sentence: {}", errors[0].message);
    }
}

fn profile_file(name: &str) -> Properties {
    let text = match name {
        "cluster-fargate" => include_str!("../../../profiles/cluster-fargate.json"),
        "cluster-fargate-spot-assume-role" => {
            include_str!("../../../profiles/cluster-fargate-spot-assume-role.json")
        }
        "cluster-ec2" => include_str!("../../../profiles/cluster-ec2.json"),
        "elastic-small" => include_str!("../../../profiles/elastic-small.json"),
        "elastic-ec2-docker" => include_str!("../../../profiles/elastic-ec2-docker.json"),
        "elastic-fargate-build" => include_str!("../../../profiles/elastic-fargate-build.json"),
        other => panic!("no profile {other}"),
    };
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn sample_profiles_are_valid() {
    for name in ["cluster-fargate", "cluster-fargate-spot-assume-role", "cluster-ec2"] {
        assert_eq!(validate_cluster_profile(&profile_file(name)), [], "{name}");
    }
    for name in ["elastic-small", "elastic-ec2-docker", "elastic-fargate-build"] {
        assert_eq!(validate_elastic_profile(&profile_file(name)), [], "{name}");
    }
}

#[test]
fn sample_profiles_fit_together_as_intended() {
    let cluster = |name| ClusterProfile::parse(&profile_file(name)).expect(name);
    let elastic = |name| ElasticProfile::parse(&profile_file(name)).expect(name);
    assert_eq!(check_compatible(&cluster("cluster-fargate"), &elastic("elastic-small")), []);
    assert_eq!(check_compatible(&cluster("cluster-fargate-spot-assume-role"), &elastic("elastic-small")), []);
    assert_eq!(check_compatible(&cluster("cluster-ec2"), &elastic("elastic-small")), []);
    assert_eq!(check_compatible(&cluster("cluster-ec2"), &elastic("elastic-ec2-docker")), []);
    assert_eq!(check_compatible(&cluster("cluster-ec2"), &elastic("elastic-fargate-build")), []);
    assert_eq!(check_compatible(&cluster("cluster-fargate"), &elastic("elastic-fargate-build")), []);
    // cluster-fargate allows gocd-agent images and the team's ECR: a Docker Hub sidecar is refused.
    let mut hub = profile_file("elastic-fargate-build");
    let sidecars = r#"[{"name": "postgres", "image": "postgres:16", "memory": 2048}]"#;
    hub.insert("Sidecars".into(), Some(sidecars.into()));
    let refused = check_compatible(&cluster("cluster-fargate"), &ElasticProfile::parse(&hub).expect("valid"));
    assert_eq!(refused.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["Sidecars"], "{refused:?}");
    let refused = check_compatible(&cluster("cluster-fargate"), &elastic("elastic-ec2-docker"));
    let keys: Vec<&str> = refused.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["MemoryReservation", "Privileged", "MountDockerSocket"]);
}

#[test]
fn field_errors_serialize_as_gocd_expects() {
    let error = FieldError { key: "Image".into(), message: "Image is required.".into() };
    let json = serde_json::to_string(&error).unwrap_or_default();
    assert_eq!(json, r#"{"key":"Image","message":"Image is required."}"#);
    assert_eq!(serde_json::from_str::<FieldError>(&json).ok(), Some(error));
}

#[test]
fn metadata_lists_every_key_with_exact_json() {
    let cluster = serde_json::to_string(&cluster_profile_metadata()).unwrap_or_default();
    assert!(cluster.starts_with(
        r#"[{"key":"ClusterName","metadata":{"required":true,"secure":false}},{"key":"Region","metadata":{"required":false,"secure":false}},"#
    ), "{cluster}");
    assert!(cluster.contains(r#"{"key":"AccessKeyId","metadata":{"required":false,"secure":true}}"#));
    assert!(cluster.contains(r#"{"key":"SecretAccessKey","metadata":{"required":false,"secure":true}}"#));
    assert!(cluster.contains(r#"{"key":"Ec2AmiId","metadata":{"required":false,"secure":false}}"#));
    let elastic = serde_json::to_string(&elastic_profile_metadata()).unwrap_or_default();
    assert!(elastic.starts_with(
        r#"[{"key":"Image","metadata":{"required":true,"secure":false}},{"key":"Cpu","metadata":{"required":false,"secure":false}},"#
    ), "{elastic}");
    let keys: Vec<String> = cluster_profile_metadata().into_iter().map(|m| m.key).collect();
    let table: Vec<&str> = keys::CLUSTER_KEYS.iter().map(|s| s.key).collect();
    assert_eq!(keys, table);
    assert_eq!(elastic_profile_metadata().len(), keys::ELASTIC_KEYS.len());
}

#[test]
fn profile_hash_is_short_stable_and_ignores_unset_values() {
    let base = profile_hash(&props(&[("ClusterName", "ci")]));
    assert_eq!(base, "7d098241548a");
    let mut noisy = props(&[("ClusterName", "  ci \n"), ("Region", "  ")]);
    noisy.insert("MaxAgents".into(), None);
    assert_eq!(profile_hash(&noisy), base);
    assert_ne!(profile_hash(&props(&[("ClusterName", "ci2")])), base);
    assert_eq!(profile_hash(&props(&[("Memory", "4096"), ("Image", "alpine")])), "5423199035f7");
    assert_eq!(profile_hash(&Properties::new()).len(), 12);
    assert!(base.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
}

#[test]
fn the_views_are_non_blank_templates() {
    assert!(cluster_profile_view().contains("GOINPUTNAME[ClusterName]"));
    assert!(elastic_profile_view().contains("GOINPUTNAME[Image]"));
}
