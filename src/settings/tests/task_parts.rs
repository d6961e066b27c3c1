//! The task keys of what real builds need: volumes, registry credentials, limits, health check, platform
//! version, log options and sidecars; each valid alone, and refused where the launch type (or
//! the operating system, or the cluster profile's allow-lists) cannot take it.

use super::*;

const BASE: &[(&str, &str)] = &[("Image", "alpine:3.19")];
const TASK_ROLE: &str = "arn:aws:iam::123456789012:role/gocd-task";
const EXEC_ROLE: &str = "arn:aws:iam::123456789012:role/gocd-exec";
const REGISTRY_SECRET: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/registry-AbCdEf";

fn parse(p: &Properties) -> ElasticProfile {
    ElasticProfile::parse(p).unwrap_or_else(|e| panic!("{e:?}"))
}

fn cluster(pairs: &[(&str, &str)]) -> ClusterProfile {
    ClusterProfile::parse(&props(pairs)).unwrap_or_else(|e| panic!("{e:?}"))
}

fn fargate(extra: &[(&str, &str)]) -> ClusterProfile {
    let mut pairs = vec![("ClusterName", "ci")];
    pairs.extend_from_slice(extra);
    cluster(&pairs)
}

fn ec2(extra: &[(&str, &str)]) -> ClusterProfile {
    let mut pairs = vec![
        ("ClusterName", "ci"),
        ("LaunchType", "EC2"),
        ("Ec2InstanceType", "c5.xlarge"),
        ("Ec2InstanceProfile", "ecsInstanceRole"),
        ("Ec2AmiId", "ami-0a1b2c3d"),
    ];
    pairs.extend_from_slice(extra);
    cluster(&pairs)
}

/// A Fargate-sized profile (1024/2048) with `extra`.
fn elastic(extra: &[(&str, &str)]) -> ElasticProfile {
    let mut pairs = vec![("Image", "alpine:3.19")];
    pairs.extend_from_slice(extra);
    parse(&props(&pairs))
}

fn refusals(cluster: &ClusterProfile, elastic: &ElasticProfile) -> Vec<(String, String)> {
    check_compatible(cluster, elastic).into_iter().map(|e| (e.key, e.message)).collect()
}

#[test]
fn every_new_key_has_a_good_and_a_bad_value() {
    let v = validate_elastic_profile;
    check_rule(
        v,
        BASE,
        "EfsVolumes",
        "fs-0a1b2c3d:/ci/gradle /home/go/.gradle read-only\nfs-0123456789abcdef0 /cache access-point=fsap-0123456789abcdef0",
        &[
            "fs-0a1b2c3d",
            "fs-xyz /cache",
            "fs-0a1b2c3d cache",
            "fs-0a1b2c3d /cache sometimes",
            "fs-0a1b2c3d /cache access-point=ap-1",
            "fs-0a1b2c3d /cache access-point=fsap-0123456789abcdef0 no-transit-encryption",
            "fs-0a1b2c3d:/ci /cache access-point=fsap-0123456789abcdef0",
            "fs-0a1b2c3d /cache\nfs-0a1b2c3e /cache",
        ],
    );
    check_rule(
        v,
        BASE,
        "BindMounts",
        "/var/cache/m2 /home/go/.m2 read-only",
        &["/var/cache/m2", "cache /m2", "/a /b rw"],
    );
    check_rule(
        v,
        &[("Image", "alpine"), ("ExecutionRoleArn", EXEC_ROLE)],
        "RepositoryCredentialsArn",
        REGISTRY_SECRET,
        &["ci/registry", "arn:aws:ssm:us-east-1:123456789012:parameter/ci/registry"],
    );
    check_rule(v, BASE, "StopTimeoutSeconds", "120", &["1", "121", "2m"]);
    check_rule(v, BASE, "Ulimits", "nofile=65536:1048576\nnproc=4096", &["files=10", "nofile=10:5", "nofile=many"]);
    check_rule(v, BASE, "InitProcessEnabled", "true", &["yes"]);
    check_rule(v, BASE, "SharedMemoryMiB", "1024", &["0", "4096", "1GB"]);
    check_rule(
        v,
        BASE,
        "HealthCheck",
        "command=pgrep -f agent-bootstrapper\ninterval=30\ntimeout=5\nretries=3\nstartPeriod=300",
        &[
            "interval=30",
            "command=x\ninterval=4",
            "command=x\ntimeout=61",
            "command=x\nretries=0",
            "command=x\ncolour=red",
        ],
    );
    check_rule(v, BASE, "PlatformVersion", "1.4.0", &["latest", "1.4", "v1.4.0"]);
    check_rule(
        v,
        BASE,
        "LogOptions",
        "awslogs-create-group=true\nmode=non-blocking",
        &["awslogs-group=/elsewhere", "awslogs-create-group=yes", "tag=x", "noequals"],
    );
    check_rule(
        v,
        BASE,
        "Sidecars",
        r#"[{"name": "postgres", "image": "postgres:16", "memory": 512, "cpu": 256, "essential": false,
             "environment": {"POSTGRES_PASSWORD": "ci"}, "command": ["postgres", "-c", "fsync=off"]}]"#,
        &[
            "postgres:16",
            r#"[{"name": "db", "image": "postgres:16"}]"#,
            r#"[{"name": "db", "image": "postgres:16", "memory": 512, "ports": [5432]}]"#,
            r#"[{"name": "gocd-agent", "image": "postgres:16", "memory": 512}]"#,
            r#"[{"name": "db", "image": "Postgres", "memory": 512}]"#,
            r#"[{"name": "db", "image": "postgres", "memory": 512}, {"name": "db", "image": "redis", "memory": 512}]"#,
            r#"[{"name": "db", "image": "postgres", "memory": 512, "environment": {"1A": "x"}}]"#,
            r#"[{"name": "log", "image": "fluent-bit", "memory": 64, "firelens": "logstash"}]"#,
            r#"[{"name": "db", "image": "postgres", "memory": 1900}]"#,
            r#"[{"name": "db", "image": "postgres", "memory": 64, "cpu": 2048}]"#,
        ],
    );
}

#[test]
fn the_task_keys_parse_into_the_documented_values() {
    let e = elastic(&[
        ("TaskRoleArn", TASK_ROLE),
        ("ExecutionRoleArn", EXEC_ROLE),
        ("EfsVolumes", "fs-0a1b2c3d:/ci /cache read-only iam"),
        ("RepositoryCredentialsArn", REGISTRY_SECRET),
        ("StopTimeoutSeconds", "120"),
        ("Ulimits", "nofile=65536:1048576\nnproc=4096"),
        ("InitProcessEnabled", "true"),
        ("HealthCheck", "command=pgrep java\nretries=5"),
        ("PlatformVersion", "LATEST"),
        ("LogOptions", "awslogs-create-group=true"),
        ("Sidecars", r#"[{"name": "docker", "image": "docker:26-dind", "memory": 512, "cpu": 256}]"#),
    ]);
    let efs = &e.efs_volumes[0];
    assert_eq!((efs.file_system_id.as_str(), efs.root_directory.as_deref()), ("fs-0a1b2c3d", Some("/ci")));
    assert!(efs.read_only && efs.iam && efs.transit_encryption && efs.access_point_id.is_none());
    assert_eq!(e.stop_timeout_seconds, Some(120));
    assert_eq!(
        e.ulimits.iter().map(|u| (u.name.as_str(), u.soft, u.hard)).collect::<Vec<_>>(),
        [("nofile", 65536, 1_048_576), ("nproc", 4096, 4096)]
    );
    let h = e.health_check.as_ref().expect("a health check");
    assert_eq!((h.command.as_str(), h.interval, h.timeout, h.retries, h.start_period), ("pgrep java", 30, 5, 5, 0));
    assert!(e.init_process_enabled);
    assert_eq!(e.sidecars[0].name, "docker");
    assert!(e.sidecars[0].essential, "ECS's default");
    assert_eq!(e.agent_share(), Some((1024 - 256, 2048 - 512)));
    let defaults = elastic(&[]);
    assert!(defaults.efs_volumes.is_empty() && defaults.sidecars.is_empty() && defaults.health_check.is_none());
    assert_eq!(defaults.agent_share(), Some((1024, 2048)));
}

#[test]
fn what_needs_another_key_says_which() {
    let e = validate_elastic_profile(&props(&[("Image", "alpine"), ("EfsVolumes", "fs-0a1b2c3d /cache iam")]));
    assert_eq!(
        messages_for(&e, "EfsVolumes"),
        ["EFS volumes with iam mount as the task role: set TaskRoleArn to a role allowed to mount them."]
    );
    let e = validate_elastic_profile(&props(&[("Image", "alpine"), ("RepositoryCredentialsArn", REGISTRY_SECRET)]));
    assert_eq!(messages_for(&e, "RepositoryCredentialsArn"), [
        "RepositoryCredentialsArn needs ExecutionRoleArn: ECS reads the registry credentials with the execution role."
    ]);
    let windows = [
        ("Image", "mcr.microsoft.com/windows/servercore:ltsc2022"),
        ("OperatingSystemFamily", "WINDOWS_SERVER_2022_CORE"),
    ];
    for (key, value) in [
        ("EfsVolumes", "fs-0a1b2c3d /cache"),
        ("Ulimits", "nofile=1024"),
        ("InitProcessEnabled", "true"),
        ("SharedMemoryMiB", "512"),
    ] {
        let mut p = props(&windows);
        p.insert(key.into(), Some(value.into()));
        let errors = validate_elastic_profile(&p);
        assert_eq!(
            messages_for(&errors, key),
            [format!("{key} only applies to Linux containers; OperatingSystemFamily is WINDOWS_SERVER_2022_CORE.")],
            "{errors:?}"
        );
    }
    let e = validate_elastic_profile(&props(&[
        ("Image", "alpine"),
        ("Memory", "2048"),
        ("MemoryReservation", "2000"),
        ("Sidecars", r#"[{"name": "db", "image": "postgres", "memory": 1024}]"#),
    ]));
    assert_eq!(
        messages_for(&e, "MemoryReservation"),
        ["MemoryReservation (2000 MiB) must not be more than what the sidecars leave the agent (1024 MiB)."]
    );
}

#[test]
fn none_of_them_can_be_added_to_a_given_task_definition() {
    for (key, value) in [
        ("EfsVolumes", "fs-0a1b2c3d /cache"),
        ("BindMounts", "/var/cache /cache"),
        ("RepositoryCredentialsArn", REGISTRY_SECRET),
        ("StopTimeoutSeconds", "60"),
        ("Ulimits", "nofile=1024"),
        ("InitProcessEnabled", "true"),
        ("SharedMemoryMiB", "512"),
        ("HealthCheck", "command=true"),
        ("LogOptions", "mode=non-blocking"),
        ("Sidecars", r#"[{"name": "db", "image": "postgres", "memory": 512}]"#),
    ] {
        let errors =
            validate_elastic_profile(&props(&[("Image", "alpine"), ("TaskDefinitionArn", "team-td:3"), (key, value)]));
        assert_eq!(
            messages_for(&errors, key),
            [format!("{key} cannot be added to an existing task definition; set it in the task definition named by TaskDefinitionArn instead.")],
            "{errors:?}"
        );
    }
    // PlatformVersion is RunTask's, not the task definition's: it goes with a given one.
    let given = [("Image", "alpine"), ("TaskDefinitionArn", "team-td:3"), ("PlatformVersion", "1.4.0")];
    assert_eq!(validate_elastic_profile(&props(&given)), []);
}

#[test]
fn ec2_only_keys_are_refused_on_fargate() {
    for launch in ["FARGATE", "FARGATE_SPOT"] {
        let cluster = fargate(&[("LaunchType", launch)]);
        for (key, value) in [("BindMounts", "/var/cache/m2 /home/go/.m2"), ("SharedMemoryMiB", "512")] {
            assert_eq!(
                refusals(&cluster, &elastic(&[(key, value)])),
                [(
                    key.to_string(),
                    format!("{key} only applies on EC2; this cluster profile's launch type is {launch}.")
                )]
            );
        }
        let privileged = elastic(&[(
            "Sidecars",
            r#"[{"name": "docker", "image": "docker:dind", "memory": 512, "privileged": true}]"#,
        )]);
        assert_eq!(refusals(&cluster, &privileged), [(
            "Sidecars".to_string(),
            format!("Sidecar docker asks to run privileged, which Fargate refuses; this cluster profile's launch type is {launch}.")
        )]);
    }
}

#[test]
fn fargate_only_keys_are_refused_on_ec2() {
    let ec2 = ec2(&[]);
    assert_eq!(
        refusals(&ec2, &elastic(&[("PlatformVersion", "1.4.0")])),
        [(
            "PlatformVersion".to_string(),
            "PlatformVersion only applies on Fargate; this cluster profile's launch type is EC2.".to_string()
        )]
    );
    // And what both take is fine on both.
    let both = elastic(&[
        ("EfsVolumes", "fs-0a1b2c3d /cache"),
        ("StopTimeoutSeconds", "120"),
        ("Ulimits", "nofile=65536"),
        ("InitProcessEnabled", "true"),
        ("HealthCheck", "command=true"),
        ("Sidecars", r#"[{"name": "db", "image": "postgres:16", "memory": 512}]"#),
    ]);
    assert_eq!(refusals(&ec2, &both), []);
    assert_eq!(refusals(&fargate(&[]), &both), []);
    let shm = elastic(&[("SharedMemoryMiB", "512"), ("BindMounts", "/var/cache/m2 /home/go/.m2")]);
    assert_eq!(refusals(&ec2, &shm), []);
}

#[test]
fn efs_needs_platform_version_1_4_on_fargate() {
    let old = elastic(&[("EfsVolumes", "fs-0a1b2c3d /cache"), ("PlatformVersion", "1.3.0")]);
    assert_eq!(
        refusals(&fargate(&[]), &old),
        [(
            "PlatformVersion".to_string(),
            "EFS volumes need Fargate platform version 1.4.0 or later; PlatformVersion is 1.3.0.".to_string()
        )]
    );
    let new = elastic(&[("EfsVolumes", "fs-0a1b2c3d /cache"), ("PlatformVersion", "1.4.0")]);
    assert_eq!(refusals(&fargate(&[]), &new), []);
}

#[test]
fn the_allow_lists_cover_sidecar_images_file_systems_and_registry_credentials() {
    let guarded = fargate(&[
        ("AllowedImages", "gocd/*\npostgres:*"),
        ("AllowedFileSystemIds", "fs-0a1b2c3d"),
        ("AllowedSecretArns", "arn:aws:secretsmanager:*:123456789012:secret:ci/*"),
    ]);
    let ok = parse(&props(&[
        ("Image", "gocd/agent:v1"),
        ("ExecutionRoleArn", EXEC_ROLE),
        ("EfsVolumes", "fs-0a1b2c3d /cache"),
        ("RepositoryCredentialsArn", REGISTRY_SECRET),
        ("Sidecars", r#"[{"name": "db", "image": "postgres:16", "memory": 512}]"#),
    ]));
    assert_eq!(refusals(&guarded, &ok), []);
    let bad = parse(&props(&[
        ("Image", "gocd/agent:v1"),
        ("ExecutionRoleArn", EXEC_ROLE),
        ("EfsVolumes", "fs-0a1b2c3d /cache\nfs-0badbad0 /other"),
        ("RepositoryCredentialsArn", "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/registry"),
        ("Sidecars", r#"[{"name": "miner", "image": "evil/miner:latest", "memory": 512}]"#),
    ]));
    assert_eq!(refusals(&guarded, &bad), [
        (
            "Sidecars".to_string(),
            "Sidecar miner runs image 'evil/miner:latest', which this cluster profile does not allow; AllowedImages are: 'gocd/*', 'postgres:*'.".to_string()
        ),
        (
            "EfsVolumes".to_string(),
            "EFS file system fs-0badbad0 is not allowed by this cluster profile; AllowedFileSystemIds are: 'fs-0a1b2c3d'.".to_string()
        ),
        (
            "RepositoryCredentialsArn".to_string(),
            "RepositoryCredentialsArn 'arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/registry' is not allowed by this cluster profile; AllowedSecretArns are: 'arn:aws:secretsmanager:*:123456789012:secret:ci/*'.".to_string()
        ),
    ]);
}

#[test]
fn privileged_sidecars_and_system_bind_mounts_need_allow_privileged_on_ec2() {
    let asks = elastic(&[
        ("BindMounts", "/var/run/docker.sock /var/run/docker.sock\n/var/cache/m2 /home/go/.m2"),
        ("Sidecars", r#"[{"name": "docker", "image": "docker:dind", "memory": 512, "privileged": true}]"#),
    ]);
    let keys: Vec<String> = refusals(&ec2(&[]), &asks).into_iter().map(|(k, m)| format!("{k}: {m}")).collect();
    assert_eq!(keys, [
        "Sidecars: Sidecar docker runs privileged, which needs AllowPrivileged in the cluster profile: such a task controls the EC2 instance and every other task on it.",
        "BindMounts: Mounting the instance's /var/run/docker.sock needs AllowPrivileged in the cluster profile: it gives the build control of the EC2 instance and every other task on it.",
    ]);
    assert_eq!(refusals(&ec2(&[("AllowPrivileged", "true")]), &asks), []);
}

#[test]
fn awslogs_options_need_the_cluster_profiles_log_group_firelens_does_not() {
    let awslogs = elastic(&[("ExecutionRoleArn", EXEC_ROLE), ("LogOptions", "awslogs-create-group=true")]);
    assert_eq!(refusals(&fargate(&[]), &awslogs), [(
        "LogOptions".to_string(),
        "LogOptions set awslogs options, but this cluster profile sends no logs to CloudWatch (no LogGroup); set LogGroup there, or add a FireLens sidecar.".to_string()
    )]);
    assert_eq!(refusals(&fargate(&[("LogGroup", "/gocd/agents")]), &awslogs), []);
    let firelens = elastic(&[
        ("LogOptions", "Name=cloudwatch_logs\nregion=us-east-1\nlog_group_name=/ci/builds"),
        (
            "Sidecars",
            r#"[{"name": "log-router", "image": "amazon/aws-for-fluent-bit:stable", "memory": 64, "essential": true, "firelens": "fluentbit"}]"#,
        ),
    ]);
    assert_eq!(firelens.firelens(), Some("fluentbit"));
    assert_eq!(refusals(&fargate(&[]), &firelens), []);
}

#[test]
fn the_new_keys_change_the_profile_hash() {
    let base = elastic(&[]).hash;
    for (key, value) in [
        ("EfsVolumes", "fs-0a1b2c3d /cache"),
        ("StopTimeoutSeconds", "60"),
        ("Sidecars", r#"[{"name": "db", "image": "postgres", "memory": 512}]"#),
        ("PlatformVersion", "1.4.0"),
    ] {
        assert_ne!(elastic(&[(key, value)]).hash, base, "{key}");
    }
}
