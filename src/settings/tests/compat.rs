//! Rules that need both profiles.

use super::*;

fn cluster(pairs: &[(&str, &str)]) -> ClusterProfile {
    ClusterProfile::parse(&props(pairs)).unwrap_or_else(|e| panic!("{e:?}"))
}

fn elastic(pairs: &[(&str, &str)]) -> ElasticProfile {
    ElasticProfile::parse(&props(pairs)).unwrap_or_else(|e| panic!("{e:?}"))
}

fn fargate() -> ClusterProfile {
    cluster(&[("ClusterName", "ci")])
}

fn ec2() -> ClusterProfile {
    cluster(&[
        ("ClusterName", "ci"),
        ("LaunchType", "EC2"),
        ("Ec2InstanceType", "c5.xlarge"),
        ("Ec2InstanceProfile", "ecsInstanceRole"),
        ("Ec2AmiId", "ami-0a1b2c3d"),
    ])
}

fn ec2_allowing_privileged() -> ClusterProfile {
    cluster(&[
        ("ClusterName", "ci"),
        ("LaunchType", "EC2"),
        ("Ec2InstanceType", "c5.xlarge"),
        ("Ec2InstanceProfile", "ecsInstanceRole"),
        ("Ec2AmiId", "ami-0a1b2c3d"),
        ("AllowPrivileged", "true"),
    ])
}

fn sized(cpu: u32, memory: u32) -> ElasticProfile {
    elastic(&[("Image", "alpine"), ("Cpu", &cpu.to_string()), ("Memory", &memory.to_string())])
}

#[test]
fn every_fargate_size_is_accepted() {
    let valid: &[(u32, Vec<u32>)] = &[
        (256, vec![512, 1024, 2048]),
        (512, (1..=4).map(|g| g * 1024).collect()),
        (1024, (2..=8).map(|g| g * 1024).collect()),
        (2048, (4..=16).map(|g| g * 1024).collect()),
        (4096, (8..=30).map(|g| g * 1024).collect()),
        (8192, (4..=15).map(|g| g * 4096).collect()),
        (16384, (4..=15).map(|g| g * 8192).collect()),
    ];
    for (cpu, memories) in valid {
        for memory in memories {
            assert_eq!(check_compatible(&fargate(), &sized(*cpu, *memory)), [], "{cpu}/{memory}");
        }
    }
}

#[test]
fn other_sizes_are_refused_with_the_allowed_values() {
    let errors = check_compatible(&fargate(), &sized(1024, 1024));
    assert_eq!(
        errors,
        [FieldError {
            key: "Memory".into(),
            message: "On Fargate, Cpu 1024 allows Memory 2048 to 8192 in steps of 1024 (MiB); 1024 is not one of them."
                .into(),
        }]
    );
    let errors = check_compatible(&fargate(), &sized(256, 1536));
    assert_eq!(
        errors[0].message,
        "On Fargate, Cpu 256 allows Memory 512, 1024 or 2048 (MiB); 1536 is not one of them."
    );
    let errors = check_compatible(&fargate(), &sized(8192, 20000));
    assert_eq!(errors[0].key, "Memory");
    let errors = check_compatible(&fargate(), &sized(1000, 2048));
    assert_eq!(
        errors,
        [FieldError {
            key: "Cpu".into(),
            message: "On Fargate, Cpu must be 256, 512, 1024, 2048, 4096, 8192 or 16384; 1000 is not.".into(),
        }]
    );
    assert_eq!(check_compatible(&ec2(), &sized(1000, 1000)), [], "any size on EC2");
}

#[test]
fn ec2_only_settings_are_refused_on_fargate() {
    let e = elastic(&[
        ("Image", "alpine"),
        ("MemoryReservation", "1024"),
        ("Privileged", "true"),
        ("MountDockerSocket", "TRUE"),
    ]);
    let errors = check_compatible(&fargate(), &e);
    let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["MemoryReservation", "Privileged", "MountDockerSocket"]);
    assert_eq!(errors[1].message, "Privileged only applies on EC2; this cluster profile's launch type is FARGATE.");
    assert_eq!(check_compatible(&ec2_allowing_privileged(), &e), []);
    let off = elastic(&[("Image", "alpine"), ("Privileged", "false")]);
    assert_eq!(check_compatible(&fargate(), &off), []);
}

#[test]
fn windows_cannot_use_fargate_spot() {
    let spot = cluster(&[("ClusterName", "ci"), ("LaunchType", "FARGATE_SPOT")]);
    let windows = elastic(&[("Image", "alpine"), ("OperatingSystemFamily", "WINDOWS_SERVER_2019_CORE")]);
    let errors = check_compatible(&spot, &windows);
    assert_eq!(messages_for(&errors, "OperatingSystemFamily"), [
        "Windows tasks (WINDOWS_SERVER_2019_CORE) cannot run on FARGATE_SPOT; use a cluster profile with FARGATE or EC2."
    ]);
    assert_eq!(check_compatible(&fargate(), &windows), []);
    assert_eq!(check_compatible(&spot, &elastic(&[("Image", "alpine")])), []);
}

#[test]
fn ephemeral_storage_is_fargate_only() {
    let e = elastic(&[("Image", "alpine"), ("EphemeralStorageGiB", "50")]);
    assert_eq!(check_compatible(&fargate(), &e), []);
    let errors = check_compatible(&ec2(), &e);
    assert_eq!(
        messages_for(&errors, "EphemeralStorageGiB"),
        ["EphemeralStorageGiB only applies on Fargate; this cluster profile's launch type is EC2."]
    );
}

#[test]
fn images_must_be_allowed() {
    let guarded = cluster(&[("ClusterName", "ci"), ("AllowedImages", "gocd/*\n*.dkr.ecr.*.amazonaws.com/ci/*")]);
    assert_eq!(check_compatible(&guarded, &elastic(&[("Image", "gocd/agent:v1")])), []);
    let ecr = elastic(&[
        ("Image", "1.dkr.ecr.eu-west-1.amazonaws.com/ci/x:1"),
        ("ExecutionRoleArn", "arn:aws:iam::123456789012:role/ecsTaskExecutionRole"),
    ]);
    assert_eq!(check_compatible(&guarded, &ecr), []);
    let errors = check_compatible(&guarded, &elastic(&[("Image", "evil/miner")]));
    assert_eq!(errors, [FieldError {
        key: "Image".into(),
        message: "Image 'evil/miner' is not allowed by this cluster profile; AllowedImages are: 'gocd/*', '*.dkr.ecr.*.amazonaws.com/ci/*'.".into(),
    }]);
    assert_eq!(check_compatible(&fargate(), &elastic(&[("Image", "evil/miner")])), [], "no list, any image");
}

#[test]
fn task_roles_must_be_allowed_when_set() {
    let guarded = cluster(&[("ClusterName", "ci"), ("AllowedTaskRoleArns", "arn:aws:iam::123456789012:role/gocd-*")]);
    let role = |arn: &str| elastic(&[("Image", "alpine"), ("TaskRoleArn", arn)]);
    assert_eq!(check_compatible(&guarded, &role("arn:aws:iam::123456789012:role/gocd-build")), []);
    let errors = check_compatible(&guarded, &role("arn:aws:iam::123456789012:role/admin"));
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].key, "TaskRoleArn");
    assert!(errors[0].message.starts_with("TaskRoleArn 'arn:aws:iam::123456789012:role/admin' is not allowed"));
    assert_eq!(check_compatible(&guarded, &elastic(&[("Image", "alpine")])), [], "no task role, nothing to check");
}

#[test]
fn privileged_and_the_docker_socket_need_the_cluster_profiles_consent() {
    let privileged = elastic(&[("Image", "alpine"), ("Privileged", "true")]);
    let socket = elastic(&[("Image", "alpine"), ("MountDockerSocket", "true")]);
    let errors = check_compatible(&ec2(), &privileged);
    assert_eq!(messages_for(&errors, "Privileged"), [
        "Privileged needs AllowPrivileged in the cluster profile: such a task controls the EC2 instance and every other task on it."
    ]);
    assert_eq!(errors.len(), 1);
    let errors = check_compatible(&ec2(), &socket);
    assert_eq!(errors.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["MountDockerSocket"]);
    assert_eq!(check_compatible(&ec2_allowing_privileged(), &privileged), []);
    assert_eq!(check_compatible(&ec2_allowing_privileged(), &socket), []);
    assert_eq!(check_compatible(&ec2(), &elastic(&[("Image", "alpine")])), [], "nothing asked, nothing refused");
}

#[test]
fn execution_roles_and_secrets_must_be_allowed_when_set() {
    let guarded = cluster(&[
        ("ClusterName", "ci"),
        ("AllowedExecutionRoleArns", "arn:aws:iam::123456789012:role/gocd-exec-*"),
        (
            "AllowedSecretArns",
            "arn:aws:secretsmanager:*:123456789012:secret:ci/*\narn:aws:ssm:*:123456789012:parameter/ci/*",
        ),
    ]);
    let with =
        |role: &str, secrets: &str| elastic(&[("Image", "alpine"), ("ExecutionRoleArn", role), ("Secrets", secrets)]);
    let good_role = "arn:aws:iam::123456789012:role/gocd-exec-ci";
    let good = "A=arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/npm\nB=arn:aws:ssm:us-east-1:123456789012:parameter/ci/x";
    assert_eq!(check_compatible(&guarded, &with(good_role, good)), []);
    let errors = check_compatible(&guarded, &with("arn:aws:iam::123456789012:role/admin", good));
    assert_eq!(messages_for(&errors, "ExecutionRoleArn"), [
        "ExecutionRoleArn 'arn:aws:iam::123456789012:role/admin' is not allowed by this cluster profile; AllowedExecutionRoleArns are: 'arn:aws:iam::123456789012:role/gocd-exec-*'."
    ]);
    let errors = check_compatible(
        &guarded,
        &with(good_role, "PROD=arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db"),
    );
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].key, "Secrets");
    assert!(errors[0].message.starts_with("Secret PROD reads 'arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db', which this cluster profile does not allow"), "{}", errors[0].message);
    assert_eq!(
        check_compatible(&fargate(), &with("arn:aws:iam::210987654321:role/any", good)),
        [],
        "no lists, anything"
    );
}

#[test]
fn tags_of_both_profiles_count_together() {
    let tags = |range: std::ops::Range<u32>| range.map(|i| format!("k{i}=v")).collect::<Vec<_>>().join("\n");
    let c = cluster(&[("ClusterName", "ci"), ("Tags", &tags(0..30))]);
    assert_eq!(
        check_compatible(&c, &elastic(&[("Image", "alpine"), ("Tags", &tags(20..37))])),
        [],
        "overrides count once"
    );
    let errors = check_compatible(&c, &elastic(&[("Image", "alpine"), ("Tags", &tags(30..38))]));
    assert_eq!(
        messages_for(&errors, "Tags"),
        ["With the cluster profile's tags a task would get 38 user tags; at most 37 fit beside the plugin's own \
          (AWS allows 50 in all)."]
    );
}

#[test]
fn what_real_aws_refuses_is_refused_at_create_agent() {
    let role = "arn:aws:iam::123456789012:role/ecsTaskExecutionRole";
    let logs = cluster(&[("ClusterName", "ci"), ("LogGroup", "/gocd/agents")]);
    let errors = check_compatible(&logs, &elastic(&[("Image", "alpine")]));
    assert!(messages_for(&errors, "ExecutionRoleArn")[0].contains("LogGroup"), "{errors:?}");
    assert_eq!(check_compatible(&logs, &elastic(&[("Image", "alpine"), ("ExecutionRoleArn", role)])), []);
    assert_eq!(check_compatible(&ec2(), &elastic(&[("Image", "alpine")])), [], "EC2 instances pull and log themselves");

    let windows = |cpu: &str, family: &str| {
        elastic(&[("Image", "w"), ("Cpu", cpu), ("Memory", "4096"), ("OperatingSystemFamily", family)])
    };
    assert_eq!(check_compatible(&fargate(), &windows("1024", "WINDOWS_SERVER_2022_CORE")), []);
    let errors = check_compatible(&fargate(), &windows("512", "WINDOWS_SERVER_2016_FULL"));
    let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
    assert!(keys.contains(&"Cpu") && keys.contains(&"OperatingSystemFamily"), "{errors:?}");

    let spot = cluster(&[("ClusterName", "ci"), ("LaunchType", "FARGATE_SPOT")]);
    let arm = elastic(&[("Image", "alpine"), ("CpuArchitecture", "ARM64")]);
    assert_eq!(check_compatible(&spot, &arm), [], "Fargate Spot runs ARM64 from platform version 1.4.0");
    assert_eq!(check_compatible(&fargate(), &arm), []);
    let old_platform = elastic(&[("Image", "alpine"), ("CpuArchitecture", "ARM64"), ("PlatformVersion", "1.3.0")]);
    for cluster in [&spot, &fargate()] {
        let errors = check_compatible(cluster, &old_platform);
        assert_eq!(
            messages_for(&errors, "CpuArchitecture"),
            ["ARM64 tasks on Fargate need platform version 1.4.0 or later; PlatformVersion is 1.3.0."]
        );
    }
}
