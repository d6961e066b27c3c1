//! Elastic agent profile rules.

use super::*;

const BASE: &[(&str, &str)] = &[("Image", "alpine:3.19")];
const EXEC: &[(&str, &str)] = &[("Image", "alpine"), ("ExecutionRoleArn", "arn:aws:iam::123456789012:role/exec")];
const TASK_DEF: &[(&str, &str)] = &[("Image", "alpine"), ("TaskDefinitionArn", "gocd-agent:3")];

fn parse(p: &Properties) -> ElasticProfile {
    ElasticProfile::parse(p).unwrap_or_else(|e| panic!("{e:?}"))
}

#[test]
fn every_rule_has_a_good_and_a_bad_value() {
    let v = validate_elastic_profile;
    let ssm = "arn:aws:ssm:us-east-1:123456789012:parameter/ci/token";
    let secrets_manager = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/npm-AbCdEf";
    check_rule(
        v,
        BASE,
        "Image",
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/gocd/agent:v1",
        &["gocd agent", "Gocd/Agent", &format!("a{}", "b".repeat(255))],
    );
    check_rule(v, BASE, "Cpu", "16384", &["1", "16385", "1 vCPU"]);
    check_rule(v, BASE, "Memory", "122880", &["5", "122881", "2GB"]);
    check_rule(v, BASE, "MemoryReservation", "2048", &["2049", "5"]);
    check_rule(v, BASE, "Environment", "A=1\nB=", &["A B=1", "A=1\nA=1", "A"]);
    check_rule(
        v,
        EXEC,
        "Secrets",
        &format!("A={ssm}\nB={secrets_manager}"),
        &["A=arn:aws:s3:::bucket/key", "A=", &format!("1A={ssm}"), &format!("A={ssm}\nA={ssm}")],
    );
    check_rule(
        v,
        BASE,
        "TaskRoleArn",
        "arn:aws:iam::123456789012:role/build",
        &["build", "arn:aws:iam::123456789012:policy/x"],
    );
    check_rule(v, BASE, "ExecutionRoleArn", "arn:aws:iam::123456789012:role/exec", &["arn:aws:iam::123:role/exec"]);
    check_rule(v, BASE, "OperatingSystemFamily", "WINDOWS_SERVER_2022_CORE", &["windows", "WINDOWS_SERVER_2012"]);
    check_rule(v, BASE, "CpuArchitecture", "ARM64", &["arm64", "AMD64"]);
    check_rule(v, BASE, "EphemeralStorageGiB", "200", &["20", "201"]);
    check_rule(v, BASE, "Privileged", "true", &["on"]);
    check_rule(v, BASE, "MountDockerSocket", "false", &["off"]);
    let with_task_role = &[("Image", "alpine:3.19"), ("TaskRoleArn", "arn:aws:iam::123456789012:role/gocd-task")];
    check_rule(v, with_task_role, "EnableExecuteCommand", "TRUE", &["enabled"]);
    check_rule(v, BASE, "EnableExecuteCommand", "false", &["true"]);
    check_rule(v, BASE, "SubnetIds", "subnet-0a1b2c3d", &["subnet-0a1b2c3"]);
    check_rule(v, BASE, "SecurityGroupIds", "sg-0a1b2c3d, sg-0123456789abcdef0", &["sg-0a1b2c3d sg-0a1b2c3d"]);
    check_rule(v, BASE, "Tags", "team=ci", &["aws:cloudformation:stack=x", "gocd:elastic-agent-id=x"]);
    check_rule(
        v,
        BASE,
        "TaskDefinitionArn",
        "arn:aws:ecs:us-east-1:123456789012:task-definition/gocd-agent:7",
        &["gocd agent", "gocd:latest"],
    );
    check_rule(v, TASK_DEF, "AgentContainerName", "gocd_agent-1", &["gocd agent"]);
}

#[test]
fn a_minimal_profile_gets_the_documented_defaults() {
    let e = parse(&props(&[("Image", " alpine ")]));
    assert_eq!(e.image, "alpine");
    assert_eq!((e.cpu, e.memory, e.memory_reservation), (1024, 2048, None));
    assert!(e.command.is_empty() && e.environment.is_empty() && e.secrets.is_empty() && e.tags.is_empty());
    assert_eq!((e.operating_system_family.as_str(), e.cpu_architecture.as_str()), ("LINUX", "X86_64"));
    assert_eq!(e.ephemeral_storage_gib, None);
    assert!(!e.privileged && !e.mount_docker_socket && !e.enable_execute_command);
    assert!(e.task_role_arn.is_none() && e.execution_role_arn.is_none());
    assert!(e.task_definition_arn.is_none() && e.agent_container_name.is_none());
    assert_eq!(e.hash, profile_hash(&props(&[("Image", "alpine")])));
    assert_eq!(e.hash(), e.hash);
}

#[test]
fn a_full_profile_is_typed() {
    let p = profile_file("elastic-ec2-docker");
    let e = parse(&p);
    assert_eq!((e.cpu, e.memory, e.memory_reservation), (2048, 4096, Some(3072)));
    assert!(e.privileged && e.mount_docker_socket);
    assert_eq!(
        e.secrets,
        [("NPM_TOKEN".to_string(), "arn:aws:ssm:us-west-2:123456789012:parameter/ci/npm-token".to_string())]
    );
    assert_eq!(e.hash, profile_hash(&p));
}

#[test]
fn command_keeps_one_trimmed_argument_per_line() {
    let e = parse(&props(&[("Image", "alpine"), ("Command", "  sh \n\n-c\n echo 'a  b' \n")]));
    assert_eq!(e.command, ["sh", "-c", "echo 'a  b'"]);
}

#[test]
fn secrets_need_an_execution_role_and_their_own_names() {
    let ssm = "arn:aws:ssm:us-east-1:123456789012:parameter/token";
    let errors = validate_elastic_profile(&props(&[("Image", "alpine"), ("Secrets", &format!("TOKEN={ssm}"))]));
    assert_eq!(
        messages_for(&errors, "Secrets"),
        ["Secrets need ExecutionRoleArn: ECS reads them with the execution role."]
    );
    let clash = validate_elastic_profile(&with(&with_env(EXEC, "TOKEN=plain"), "Secrets", &format!("TOKEN={ssm}")));
    assert_eq!(messages_for(&clash, "Secrets"), ["TOKEN is set both in Environment and in Secrets; keep one."]);
}

fn with_env<'a>(base: &[(&'a str, &'a str)], env: &'a str) -> Vec<(&'a str, &'a str)> {
    base.iter().copied().chain([("Environment", env)]).collect()
}

#[test]
fn environment_values_are_never_echoed() {
    let errors = validate_elastic_profile(&props(&[
        ("Image", "alpine"),
        ("Environment", "GOOD=1\nBAD KEY=hunter2\nNOEQUALS hunter3"),
    ]));
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors.iter().all(|e| !e.message.contains("hunter")), "{errors:?}");
    assert_eq!(
        errors[0].message,
        "Line 2: 'BAD KEY' is not a valid variable name: use letters, digits and _, not starting with a digit."
    );
    assert_eq!(errors[1].message, "Line 3 must look like KEY=VALUE but has no '='.");
}

#[test]
fn memory_reservation_is_at_most_memory() {
    let errors =
        validate_elastic_profile(&props(&[("Image", "alpine"), ("Memory", "1024"), ("MemoryReservation", "1025")]));
    assert_eq!(
        messages_for(&errors, "MemoryReservation"),
        ["MemoryReservation (1025 MiB) must not be more than Memory (1024 MiB)."]
    );
}

#[test]
fn arm64_is_linux_only() {
    let errors = validate_elastic_profile(&props(&[
        ("Image", "alpine"),
        ("OperatingSystemFamily", "WINDOWS_SERVER_2022_FULL"),
        ("CpuArchitecture", "ARM64"),
    ]));
    assert_eq!(messages_for(&errors, "CpuArchitecture"), ["ARM64 is only available with OperatingSystemFamily LINUX."]);
}

#[test]
fn task_definition_settings_go_together() {
    let errors = validate_elastic_profile(&props(&[("Image", "alpine"), ("AgentContainerName", "agent")]));
    assert_eq!(
        messages_for(&errors, "AgentContainerName"),
        ["AgentContainerName only applies when TaskDefinitionArn is set."]
    );
    let ssm = "arn:aws:ssm:us-east-1:123456789012:parameter/token";
    let conflicts = validate_elastic_profile(&props(&[
        ("Image", "alpine"),
        ("TaskDefinitionArn", "gocd-agent"),
        ("Secrets", &format!("TOKEN={ssm}")),
        ("Privileged", "true"),
        ("MountDockerSocket", "true"),
        ("Command", "run"),
    ]));
    let keys: Vec<&str> = conflicts.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["Secrets", "Privileged", "MountDockerSocket"]);
    assert!(conflicts[0].message.contains("cannot be added to an existing task definition"));
    let e = parse(&with(TASK_DEF, "AgentContainerName", "agent"));
    assert_eq!(
        (e.task_definition_arn.as_deref(), e.agent_container_name.as_deref()),
        (Some("gocd-agent:3"), Some("agent"))
    );
}

#[test]
fn nulls_blanks_and_unknown_keys() {
    let mut p = props(&[("Image", "alpine"), ("Cpu", " "), ("Memroy", "512"), ("ClusterName", "ci")]);
    p.insert("Memory".into(), None);
    p.insert("Unused".into(), None);
    let errors = validate_elastic_profile(&p);
    assert_eq!(messages_for(&errors, "Memroy"), ["'Memroy' is not a setting of this plugin. Did you mean Memory?"]);
    assert_eq!(
        messages_for(&errors, "ClusterName"),
        ["'ClusterName' is not a setting of this plugin's elastic agent profiles; it belongs in the cluster profile."]
    );
    assert_eq!(errors.len(), 2, "a null or blank unknown key is not set, so harmless: {errors:?}");
    let mut image_null = Properties::new();
    image_null.insert("Image".into(), None);
    assert_eq!(
        validate_elastic_profile(&image_null),
        [FieldError { key: "Image".into(), message: "Image is required.".into() }]
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let errors = validate_elastic_profile(&props(&[
        ("Cpu", "lots"),
        ("Memory", "0"),
        ("Privileged", "sure"),
        ("TaskRoleArn", "role"),
        ("Tags", "aws:x=1"),
    ]));
    let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["Image", "Cpu", "Memory", "TaskRoleArn", "Privileged", "Tags"]);
    assert_eq!(errors[1].message, "Cpu must be a whole number from 2 to 16384; 'lots' is not.");
}

#[test]
fn reuse_is_off_by_default_and_its_keys_have_ranges() {
    assert_eq!(parse(&props(BASE)).reuse, None, "one job per agent unless asked");
    let reusing = parse(&props(&[("Image", "alpine"), ("ReuseIdleMinutes", "5")]));
    let expected = crate::settings::Reuse { idle: std::time::Duration::from_secs(300), max_jobs: 10 };
    assert_eq!(reusing.reuse, Some(expected));
    const REUSING: &[(&str, &str)] = &[("Image", "alpine"), ("ReuseIdleMinutes", "5")];
    check_rule(validate_elastic_profile, BASE, "ReuseIdleMinutes", "120", &["121", "-1", "five"]);
    check_rule(validate_elastic_profile, REUSING, "ReuseMaxJobs", "1000", &["0", "1001"]);
    let without = validate_elastic_profile(&props(&[("Image", "alpine"), ("ReuseMaxJobs", "3")]));
    assert!(
        without.iter().any(|e| e.key == "ReuseMaxJobs" && e.message.contains("needs ReuseIdleMinutes")),
        "{without:?}"
    );
}
