//! End-to-end scenarios of what real builds need inside the task: EFS volumes, bind
//! mounts, registry credentials, stop timeout, ulimits, init process, shared memory, health
//! check, platform version, log options and sidecars. Each scenario runs real jobs through the
//! real plugin, the GoCD host simulator and moto behind the strict proxy, and asserts the exact
//! task definition the plugin registered, as the proxy recorded the request AWS would receive
//! (moto keeps only part of it), and the RunTask or StartTask that used it.
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`); without it the tests panic, never skip.

use std::time::Duration;

use crate::world::ec2::{create_instance_profile, Ec2Policy, InstanceSimulator};
use crate::world::host::{HostState, Props};
use crate::world::moto::{REGION, TEST_ACCESS_KEY_ID};
use crate::world::profiles::{cluster_props, IMAGE};
use crate::world::*;
use serde_json::{json, Value};

const TASK_ROLE: &str = "arn:aws:iam::123456789012:role/gocd-task-build";
const EXEC_ROLE: &str = "arn:aws:iam::123456789012:role/gocd-exec-ci";
const REGISTRY_SECRET: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/registry-AbCdEf";
const AMI: &str = "ami-0abcdef1234567890";
const INSTANCE_PROFILE: &str = "gocd-ecs-instance";

/// The one RegisterTaskDefinition body the proxy forwarded for `family_of` (a container image
/// that only that elastic profile runs), with `family` and `tags` checked and taken out.
fn registered(w: &Scenario, image: &str, server_id: &str) -> Value {
    let bodies: Vec<Value> = w
        .proxy
        .log()
        .into_iter()
        .filter(|r| r.key() == "ecs:RegisterTaskDefinition" && r.rule.is_none() && r.status == 200)
        .filter_map(|r| r.json)
        .filter(|b| b["containerDefinitions"][0]["image"] == image)
        .collect();
    assert_eq!(bodies.len(), 1, "one registration for {image}: {bodies:#?}");
    let mut body = bodies.into_iter().next().unwrap_or_default();
    let map = body.as_object_mut().expect("a JSON object");
    let family = map.remove("family").unwrap_or_default();
    assert!(family.as_str().is_some_and(|f| f.starts_with("gocd-")), "family {family}");
    let tags = map.remove("tags").unwrap_or_default();
    assert_eq!(tags[0], json!({"key": "gocd:server-id", "value": server_id}), "tags {tags}");
    assert_eq!(tags[1]["key"], "gocd:cluster-profile", "tags {tags}");
    body
}

/// The agent container's environment as the plugin shares it (the registration variables
/// travel as overrides).
fn no_environment() -> Value {
    json!([])
}

/// Runs one job per elastic profile to completion and checks the world is clean.
async fn run_jobs(host: &GoCdHost, sim: &AgentSimulator, profiles: &[&str]) {
    for p in profiles {
        host.add_job(JobSpec::new(p, Duration::from_secs(2))).await;
    }
    host.wait_until("every job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    let (rejections, ids) = host.with_state(|s: &HostState| {
        (s.rejections.clone(), s.jobs.iter().map(|j| j.identifier.job_id).collect::<Vec<_>>())
    });
    assert!(rejections.is_empty(), "GoCD refused registrations: {rejections:?}");
    for id in ids {
        assert_eq!(sim.tasks_for_job(id), 1, "job {id} ran in {} tasks", sim.tasks_for_job(id));
    }
}

/// Fargate: a build with an EFS cache (IAM authorization through an access point, and a plain
/// read-only directory), private-registry credentials, a two-minute stop timeout, ulimits, an
/// init process, a health check, platform version 1.4.0, awslogs options and a Postgres sidecar;
/// and a second build whose logs go through a FireLens sidecar. Both run their jobs, and the
/// proxy recorded exactly the task definitions below (and the platform version on RunTask).
/// A third profile's sidecar image is not in `AllowedImages`: its job is refused, nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fargate_tasks_carry_volumes_limits_health_logs_and_sidecars() {
    let mut w = Scenario::new("fargate_task_contents").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let cluster = cluster_props(
        "gocd-a",
        &[
            ("LogGroup", "/gocd/agents"),
            ("AllowedImages", "gocd/*\npostgres:*\namazon/aws-for-fluent-bit:*"),
            ("AllowedFileSystemIds", "fs-0a1b2c3d\nfs-0123456789abcdef0"),
            ("AllowedSecretArns", "arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/*"),
        ],
    );
    let build = props(&[
        ("Image", IMAGE),
        ("Cpu", "1024"),
        ("Memory", "4096"),
        ("TaskRoleArn", TASK_ROLE),
        ("ExecutionRoleArn", EXEC_ROLE),
        (
            "EfsVolumes",
            "fs-0a1b2c3d /home/go/.gradle iam access-point=fsap-0123456789abcdef0\nfs-0123456789abcdef0:/tools /opt/tools read-only",
        ),
        ("RepositoryCredentialsArn", REGISTRY_SECRET),
        ("StopTimeoutSeconds", "120"),
        ("Ulimits", "nofile=65536:1048576"),
        ("InitProcessEnabled", "true"),
        ("HealthCheck", "command=pgrep -f agent-bootstrapper\ninterval=10\nretries=5\nstartPeriod=60"),
        ("PlatformVersion", "1.4.0"),
        ("LogOptions", "awslogs-create-group=true\nmode=non-blocking"),
        (
            "Sidecars",
            r#"[{"name": "postgres", "image": "postgres:16", "cpu": 256, "memory": 1024, "essential": false,
                 "environment": {"POSTGRES_PASSWORD": "ci"}, "command": ["postgres", "-c", "fsync=off"]}]"#,
        ),
    ]);
    let firelens_image = "gocd/gocd-agent-alpine-3.19:v24.1.0-firelens";
    let routed = props(&[
        ("Image", firelens_image),
        ("Cpu", "512"),
        ("Memory", "1024"),
        ("ExecutionRoleArn", EXEC_ROLE),
        ("LogOptions", "Name=cloudwatch_logs\nregion=us-east-1\nlog_group_name=/ci/builds\nauto_create_group=true"),
        (
            "Sidecars",
            r#"[{"name": "log-router", "image": "amazon/aws-for-fluent-bit:stable", "memory": 128, "firelens": "fluentbit"}]"#,
        ),
    ]);
    let miner = props(&[
        ("Image", IMAGE),
        ("Cpu", "512"),
        ("Memory", "1024"),
        ("Sidecars", r#"[{"name": "helper", "image": "evil/miner:latest", "memory": 128}]"#),
    ]);
    let cfg = w
        .host_config()
        .cluster_profile("base", cluster)
        .elastic_profile("build", "base", build)
        .elastic_profile("routed", "base", routed)
        .elastic_profile("miner", "base", miner);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() });
    run_jobs(&host, &sim, &["build", "routed"]).await;

    let server_id = host.server_id().to_string();
    let awslogs = |extra: &[(&str, &str)]| {
        let mut options =
            json!({"awslogs-group": "/gocd/agents", "awslogs-region": REGION, "awslogs-stream-prefix": "gocd"});
        for (k, v) in extra {
            options[*k] = json!(v);
        }
        json!({"logDriver": "awslogs", "options": options})
    };
    let credentials = json!({"credentialsParameter": REGISTRY_SECRET});
    assert_eq!(
        registered(&w, IMAGE, &server_id),
        json!({
            "containerDefinitions": [
                {
                    "name": "gocd-agent",
                    "image": IMAGE,
                    "essential": true,
                    "cpu": 768,
                    "memory": 3072,
                    "environment": no_environment(),
                    "privileged": false,
                    "logConfiguration": awslogs(&[("awslogs-create-group", "true"), ("mode", "non-blocking")]),
                    "mountPoints": [
                        {"sourceVolume": "efs-1", "containerPath": "/home/go/.gradle", "readOnly": false},
                        {"sourceVolume": "efs-2", "containerPath": "/opt/tools", "readOnly": true},
                    ],
                    "ulimits": [{"name": "nofile", "softLimit": 65536, "hardLimit": 1048576}],
                    "linuxParameters": {"initProcessEnabled": true},
                    "stopTimeout": 120,
                    "healthCheck": {
                        "command": ["CMD-SHELL", "pgrep -f agent-bootstrapper"],
                        "interval": 10,
                        "timeout": 5,
                        "retries": 5,
                        "startPeriod": 60,
                    },
                    "repositoryCredentials": credentials,
                },
                {
                    "name": "postgres",
                    "image": "postgres:16",
                    "essential": false,
                    "cpu": 256,
                    "memory": 1024,
                    "command": ["postgres", "-c", "fsync=off"],
                    "environment": [{"name": "POSTGRES_PASSWORD", "value": "ci"}],
                    "logConfiguration": awslogs(&[]),
                    "repositoryCredentials": credentials,
                },
            ],
            "networkMode": "awsvpc",
            "requiresCompatibilities": ["FARGATE"],
            "cpu": "1024",
            "memory": "4096",
            "runtimePlatform": {"operatingSystemFamily": "LINUX", "cpuArchitecture": "X86_64"},
            "taskRoleArn": TASK_ROLE,
            "executionRoleArn": EXEC_ROLE,
            "volumes": [
                {
                    "name": "efs-1",
                    "efsVolumeConfiguration": {
                        "fileSystemId": "fs-0a1b2c3d",
                        "transitEncryption": "ENABLED",
                        "authorizationConfig": {"accessPointId": "fsap-0123456789abcdef0", "iam": "ENABLED"},
                    },
                },
                {
                    "name": "efs-2",
                    "efsVolumeConfiguration": {
                        "fileSystemId": "fs-0123456789abcdef0",
                        "rootDirectory": "/tools",
                        "transitEncryption": "ENABLED",
                    },
                },
            ],
        })
    );
    assert_eq!(
        registered(&w, firelens_image, &server_id),
        json!({
            "containerDefinitions": [
                {
                    "name": "gocd-agent",
                    "image": firelens_image,
                    "essential": true,
                    "cpu": 512,
                    "memory": 896,
                    "environment": no_environment(),
                    "privileged": false,
                    "logConfiguration": {"logDriver": "awsfirelens", "options": {
                        "Name": "cloudwatch_logs",
                        "region": "us-east-1",
                        "log_group_name": "/ci/builds",
                        "auto_create_group": "true",
                    }},
                },
                {
                    "name": "log-router",
                    "image": "amazon/aws-for-fluent-bit:stable",
                    "essential": true,
                    "cpu": 0,
                    "memory": 128,
                    "logConfiguration": awslogs(&[]),
                    "firelensConfiguration": {"type": "fluentbit"},
                },
            ],
            "networkMode": "awsvpc",
            "requiresCompatibilities": ["FARGATE"],
            "cpu": "512",
            "memory": "1024",
            "runtimePlatform": {"operatingSystemFamily": "LINUX", "cpuArchitecture": "X86_64"},
            "executionRoleArn": EXEC_ROLE,
        })
    );
    // PlatformVersion travels on RunTask (it is not part of a task definition); only where set.
    let run_tasks: Vec<Value> = w
        .proxy
        .log()
        .into_iter()
        .filter(|r| r.key() == "ecs:RunTask" && r.rule.is_none())
        .filter_map(|r| r.json)
        .collect();
    assert_eq!(run_tasks.len(), 2, "one RunTask per job: {run_tasks:#?}");
    let mut versions: Vec<Value> = run_tasks.iter().map(|r| r["platformVersion"].clone()).collect();
    versions.sort_by_key(Value::is_null);
    assert_eq!(versions, [json!("1.4.0"), Value::Null]);

    // A sidecar whose image the cluster profile does not allow: refused before AWS, with the
    // reason in the job's console; nothing registered or run for it.
    let refused = host.add_job(JobSpec::new("miner", Duration::from_secs(2))).await;
    host.wait_until("the refusal in the job's console", Duration::from_secs(60), |s| {
        s.console.iter().any(|c| c.job == Some(refused) && c.text.contains("evil/miner:latest"))
    })
    .await;
    let console = host.console_log(refused).join("\n");
    assert!(
        console.contains("Sidecar helper runs image 'evil/miner:latest', which this cluster profile does not allow"),
        "{console}"
    );
    assert_eq!(host.job_state(refused), JobState::Waiting);
    assert_eq!(w.proxy.count("ecs:RegisterTaskDefinition"), 2, "nothing registered for the refused profile");
    assert_eq!(w.proxy.count("ecs:RunTask"), 2, "nothing run for the refused profile");

    w.assert_no_live_tasks(Duration::from_secs(60)).await;
    let scanner = SecretScanner::from_world(&host, Some(&w.proxy));
    scanner.assert_host_clean(&host);
    drop(sim);
    host.shutdown().await;
}

/// EC2: host directories, shared memory and a privileged Docker daemon sidecar (the cluster
/// profile allows privileged tasks) run a job with StartTask on a container instance, and the
/// proxy recorded exactly this task definition.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ec2_tasks_carry_bind_mounts_shared_memory_and_a_privileged_sidecar() {
    let mut w = Scenario::new("ec2_task_contents").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-ec2").await;
    create_instance_profile(w.moto.addr(), TEST_ACCESS_KEY_ID, INSTANCE_PROFILE).await;
    let cluster: Props = props(&[
        ("ClusterName", "gocd-ec2"),
        ("Region", REGION),
        ("LaunchType", "EC2"),
        ("Ec2InstanceType", "c5.xlarge"),
        ("Ec2InstanceProfile", INSTANCE_PROFILE),
        ("Ec2AmiId", AMI),
        ("Ec2IdleMinutes", "1"),
        ("AllowPrivileged", "true"),
        ("AllowedImages", "gocd/*\ndocker:*"),
    ]);
    let docker = props(&[
        ("Image", IMAGE),
        ("Cpu", "2048"),
        ("Memory", "4096"),
        ("BindMounts", "/var/cache/gocd-m2 /home/go/.m2\n/opt/ci-tools /opt/ci-tools read-only"),
        ("SharedMemoryMiB", "1024"),
        ("StopTimeoutSeconds", "90"),
        (
            "Sidecars",
            r#"[{"name": "docker", "image": "docker:26-dind", "cpu": 1024, "memory": 1536, "privileged": true,
                 "environment": {"DOCKER_TLS_CERTDIR": ""}}]"#,
        ),
    ]);
    let cfg = w.host_config().cluster_profile("ec2", cluster).elastic_profile("docker", "ec2", docker);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() });
    let ec2 = InstanceSimulator::start(w.fleets.clone(), host.server_id(), Ec2Policy::default());
    run_jobs(&host, &sim, &["docker"]).await;

    let server_id = host.server_id().to_string();
    assert_eq!(
        registered(&w, IMAGE, &server_id),
        json!({
            "containerDefinitions": [
                {
                    "name": "gocd-agent",
                    "image": IMAGE,
                    "essential": true,
                    "cpu": 1024,
                    "memory": 2560,
                    "environment": no_environment(),
                    "privileged": false,
                    "mountPoints": [
                        {"sourceVolume": "bind-1", "containerPath": "/home/go/.m2", "readOnly": false},
                        {"sourceVolume": "bind-2", "containerPath": "/opt/ci-tools", "readOnly": true},
                    ],
                    "linuxParameters": {"sharedMemorySize": 1024},
                    "stopTimeout": 90,
                },
                {
                    "name": "docker",
                    "image": "docker:26-dind",
                    "essential": true,
                    "cpu": 1024,
                    "memory": 1536,
                    "environment": [{"name": "DOCKER_TLS_CERTDIR", "value": ""}],
                    "privileged": true,
                },
            ],
            "networkMode": "bridge",
            "requiresCompatibilities": ["EC2"],
            "runtimePlatform": {"operatingSystemFamily": "LINUX", "cpuArchitecture": "X86_64"},
            "volumes": [
                {"name": "bind-1", "host": {"sourcePath": "/var/cache/gocd-m2"}},
                {"name": "bind-2", "host": {"sourcePath": "/opt/ci-tools"}},
            ],
        })
    );
    let started: Vec<Value> = w
        .proxy
        .log()
        .into_iter()
        .filter(|r| r.key() == "ecs:StartTask" && r.rule.is_none())
        .filter_map(|r| r.json)
        .collect();
    assert_eq!(started.len(), 1, "the job's task was started on an instance: {started:#?}");
    assert!(started[0].get("platformVersion").is_none(), "no platform version on EC2");

    w.assert_no_live_tasks(Duration::from_secs(60)).await;
    let scanner = SecretScanner::from_world(&host, Some(&w.proxy));
    scanner.assert_host_clean(&host);
    drop(sim);
    drop(ec2);
    host.shutdown().await;
}
