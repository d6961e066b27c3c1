//! The cluster profile's guardrails on what actually runs. An elastic profile's own `Image`,
//! `TaskRoleArn`, `ExecutionRoleArn`, `Secrets`, `Privileged` and `MountDockerSocket` are checked
//! by `settings::check_compatible`; with `TaskDefinitionArn` the plugin runs a task definition
//! someone else registered, so what that definition runs is checked here, once it is described
//! (once per definition, cached with it): every container's image against `AllowedImages`, its
//! task and execution roles against `AllowedTaskRoleArns` and `AllowedExecutionRoleArns`, every
//! secret it reads (and registry credentials) against `AllowedSecretArns`, every EFS file system
//! it mounts against `AllowedFileSystemIds`, privileged containers, a mounted Docker socket and
//! host system directories against `AllowPrivileged`. A profile's own `Sidecars`, `EfsVolumes`,
//! `RepositoryCredentialsArn` and `BindMounts` meet the same lists in `check_compatible`.
//!
//! With a `CapacityProviderStrategy`, such a task definition must also be valid for the kind of
//! every provider the strategy may send it to (FARGATE for Fargate's, EC2 for an Auto Scaling
//! group's, MANAGED_INSTANCES for ECS Managed Instances; [`check_providers`]): the plugin
//! registers its own task definitions so, but cannot change someone else's, and RunTask would
//! refuse it on that provider's turn only. And ECS Exec (`EnableExecuteCommand`) needs its task
//! role ([`check_exec`]).

use super::task_definition::TaskDefinitionRef;
use crate::cluster::launch::providers::ProviderKinds;
use crate::settings::{allowed, patterns, ClusterProfile, ElasticProfile};

pub use crate::cluster::base::error::GuardrailError;

/// `Err` naming everything in the task definition that the cluster profile does not allow;
/// `Ok` for our own task definitions (built from an elastic profile already checked).
///
/// # Errors
/// [`GuardrailError::NotAllowed`], listing every refusal.
pub fn check(profile: &ClusterProfile, td: &TaskDefinitionRef) -> Result<(), GuardrailError> {
    let Some(given) = &td.given else {
        return Ok(());
    };
    let mut problems = Vec::new();
    for (container, image) in given.images.iter().filter(|(_, image)| !allowed(&profile.allowed_images, image)) {
        problems.push(format!(
            "container {container:?} runs image {image:?}, which matches none of AllowedImages ({})",
            patterns(&profile.allowed_images)
        ));
    }
    let roles = [
        ("task role", &given.task_role_arn, &profile.allowed_task_role_arns, "AllowedTaskRoleArns"),
        ("execution role", &given.execution_role_arn, &profile.allowed_execution_role_arns, "AllowedExecutionRoleArns"),
    ];
    for (what, role, list, key) in roles {
        if let Some(role) = role.as_deref().filter(|r| !allowed(list, r)) {
            problems.push(format!("its {what} {role:?} matches none of {key} ({})", patterns(list)));
        }
    }
    for secret in given.secrets.iter().filter(|s| !allowed(&profile.allowed_secret_arns, s)) {
        problems.push(format!(
            "it reads the secret {secret:?}, which matches none of AllowedSecretArns ({})",
            patterns(&profile.allowed_secret_arns)
        ));
    }
    for fs in given.file_systems.iter().filter(|fs| !allowed(&profile.allowed_file_system_ids, fs)) {
        problems.push(format!(
            "it mounts the EFS file system {fs:?}, which matches none of AllowedFileSystemIds ({})",
            patterns(&profile.allowed_file_system_ids)
        ));
    }
    if !profile.allow_privileged {
        for path in &given.sensitive_host_paths {
            problems.push(format!("it mounts the host's {path}, and AllowPrivileged is off"));
        }
        for container in &given.privileged {
            problems.push(format!("container {container:?} runs privileged, and AllowPrivileged is off"));
        }
        if given.docker_socket {
            problems.push("it mounts the host's Docker socket, and AllowPrivileged is off".to_string());
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(GuardrailError::NotAllowed { task_definition: td.arn.clone(), problems })
}

/// `Err` when a task definition the elastic profile names lacks, in its
/// `requiresCompatibilities`, what a provider of the strategy needs: it names the task
/// definition, each such provider and what to add. `Ok` for our own task definitions
/// (registered for the kinds) and for providers ECS did not describe.
///
/// # Errors
/// [`GuardrailError::LacksCompatibilities`].
pub fn check_providers(kinds: &ProviderKinds, td: &TaskDefinitionRef) -> Result<(), GuardrailError> {
    let Some(given) = &td.given else {
        return Ok(());
    };
    let lacking = kinds.lacking(&given.runs_on());
    if lacking.is_empty() {
        return Ok(());
    }
    let providers: Vec<String> = lacking
        .iter()
        .map(|(p, needed)| format!("{} ({}) needs {}", p.name, p.kind.describe(), needed.as_str()))
        .collect();
    let mut add: Vec<String> = Vec::new();
    for needed in lacking.iter().map(|(_, needed)| needed.as_str()) {
        if !add.iter().any(|a| a == needed) {
            add.push(needed.to_string());
        }
    }
    let has: Vec<&str> = given.requires_compatibilities.iter().map(|c| c.as_str()).collect();
    let has = if has.is_empty() { "none (ECS then takes EC2)".to_string() } else { has.join(", ") };
    let mut wanted: Vec<String> = given.requires_compatibilities.iter().map(|c| c.as_str().to_string()).collect();
    wanted.extend(
        add.iter().filter(|a| !given.requires_compatibilities.iter().any(|c| c.as_str() == a.as_str())).cloned(),
    );
    Err(GuardrailError::LacksCompatibilities { task_definition: td.arn.clone(), providers, has, add, wanted })
}

/// `Err` when the elastic profile turns ECS Exec on (`EnableExecuteCommand`) for a task
/// definition it names that has no task role: ECS refuses such a RunTask or StartTask (Exec's
/// ssmmessages calls are made with the task role). `Ok` for our own task definitions
/// (`validate` requires `TaskRoleArn` with Exec).
///
/// # Errors
/// [`GuardrailError::ExecWithoutTaskRole`].
pub fn check_exec(elastic: &ElasticProfile, td: &TaskDefinitionRef) -> Result<(), GuardrailError> {
    match &td.given {
        Some(given) if elastic.enable_execute_command && given.task_role_arn.is_none() => {
            Err(GuardrailError::ExecWithoutTaskRole { task_definition: td.arn.clone() })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::check;
    use crate::aws::fake_aws::FakeAws;
    use crate::cluster::launch::task_definition::{describe_given, Contents, TaskDefinitionRef};
    use crate::settings::{ClusterProfile, Properties};

    fn profile(pairs: &[(&str, &str)]) -> ClusterProfile {
        let mut p: Properties = pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect();
        p.insert("ClusterName".into(), Some("ci".into()));
        ClusterProfile::parse(&p).expect("a valid cluster profile")
    }

    fn guarded() -> ClusterProfile {
        profile(&[
            ("AllowedImages", "gocd/*"),
            ("AllowedTaskRoleArns", "arn:aws:iam::123456789012:role/gocd-task-*"),
            ("AllowedExecutionRoleArns", "arn:aws:iam::123456789012:role/gocd-exec-*"),
            ("AllowedSecretArns", "arn:aws:secretsmanager:*:123456789012:secret:ci/*"),
        ])
    }

    fn definition(image: &str, task_role: &str, execution_role: &str, secret: &str) -> serde_json::Value {
        json!({
            "containerDefinitions": [
                {"name": "agent", "image": "gocd/agent:v1", "secrets": [{"name": "TOKEN", "valueFrom": secret}]},
                {"name": "sidecar", "image": image},
            ],
            "taskRoleArn": task_role,
            "executionRoleArn": execution_role,
        })
    }

    const TASK_ROLE: &str = "arn:aws:iam::123456789012:role/gocd-task-build";
    const EXEC_ROLE: &str = "arn:aws:iam::123456789012:role/gocd-exec-ci";
    const SECRET: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/npm";

    async fn described(name: &str, definition: serde_json::Value) -> TaskDefinitionRef {
        let aws = FakeAws::default();
        aws.seed_task_definition(name, definition);
        describe_given(&aws.clients(), name, Some("agent")).await.expect("described")
    }

    #[tokio::test]
    async fn ecs_exec_on_a_given_task_definition_needs_its_task_role() {
        let elastic = |exec: &str| {
            let p: Properties =
                [("Image", "gocd/agent:v1"), ("TaskDefinitionArn", "team-td:1"), ("EnableExecuteCommand", exec)]
                    .iter()
                    .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                    .collect();
            crate::settings::ElasticProfile::parse(&p).expect("valid")
        };
        let mut roleless = definition("gocd/helper:2", TASK_ROLE, EXEC_ROLE, SECRET);
        roleless.as_object_mut().expect("an object").remove("taskRoleArn");
        let roleless = described("team-td:1", roleless).await;
        let refused = super::check_exec(&elastic("true"), &roleless);
        assert_eq!(refused, Err(super::GuardrailError::ExecWithoutTaskRole { task_definition: roleless.arn.clone() }));
        let why = super::check_exec(&elastic("true"), &roleless).unwrap_err().to_string();
        assert!(why.contains("has no task role") && why.contains("EnableExecuteCommand"), "{why}");
        assert_eq!(super::check_exec(&elastic("false"), &roleless), Ok(()));
        let with_role = described("team-td:2", definition("gocd/helper:2", TASK_ROLE, EXEC_ROLE, SECRET)).await;
        assert_eq!(super::check_exec(&elastic("true"), &with_role), Ok(()));
    }

    #[tokio::test]
    async fn a_given_task_definition_is_checked_container_by_container_and_role_by_role() {
        let ok = described("team-td:3", definition("gocd/helper:2", TASK_ROLE, EXEC_ROLE, SECRET)).await;
        let contents = ok.given.as_deref().expect("what it runs");
        assert_eq!(contents.images.len(), 2);
        assert_eq!(contents.execution_role_arn.as_deref(), Some(EXEC_ROLE));
        assert_eq!(check(&guarded(), &ok), Ok(()));

        let image = described("team-td:4", definition("evil/miner", TASK_ROLE, EXEC_ROLE, SECRET)).await;
        let why = check(&guarded(), &image).unwrap_err().to_string();
        assert!(
            why.contains(
                "container \"sidecar\" runs image \"evil/miner\", which matches none of AllowedImages ('gocd/*')"
            ),
            "{why}"
        );

        let task_role = "arn:aws:iam::123456789012:role/admin";
        let role = described("team-td:5", definition("gocd/helper:2", task_role, EXEC_ROLE, SECRET)).await;
        let why = check(&guarded(), &role).unwrap_err().to_string();
        assert!(
            why.contains("its task role \"arn:aws:iam::123456789012:role/admin\" matches none of AllowedTaskRoleArns"),
            "{why}"
        );

        let exec = described("team-td:6", definition("gocd/helper:2", TASK_ROLE, task_role, SECRET)).await;
        let why = check(&guarded(), &exec).unwrap_err().to_string();
        assert!(
            why.contains(
                "its execution role \"arn:aws:iam::123456789012:role/admin\" matches none of AllowedExecutionRoleArns"
            ),
            "{why}"
        );

        let prod = "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db";
        let secret = described("team-td:7", definition("gocd/helper:2", TASK_ROLE, EXEC_ROLE, prod)).await;
        let why = check(&guarded(), &secret).unwrap_err().to_string();
        assert!(why.starts_with("task definition "), "{why}");
        assert!(
            why.contains("reads the secret \"arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db\""),
            "{why}"
        );

        assert_eq!(check(&profile(&[]), &secret), Ok(()), "no lists: anything goes");
    }

    #[tokio::test]
    async fn privileged_containers_and_the_docker_socket_need_allow_privileged() {
        let privileged = json!({
            "containerDefinitions": [{"name": "agent", "image": "gocd/agent:v1", "privileged": true}],
            "volumes": [{"name": "docker", "host": {"sourcePath": "/var/run/docker.sock"}}],
        });
        let td = described("dind", privileged).await;
        let why = check(&profile(&[]), &td).unwrap_err().to_string();
        assert!(why.contains("container \"agent\" runs privileged, and AllowPrivileged is off"), "{why}");
        assert!(why.contains("mounts the host's Docker socket"), "{why}");
        assert_eq!(check(&profile(&[("AllowPrivileged", "true")]), &td), Ok(()));
    }

    /// create-agent with a TaskDefinitionArn whose sidecar runs a disallowed image: refused
    /// before any RunTask, the reason in the job's console; an allowed one launches.
    #[tokio::test]
    async fn create_agent_refuses_a_given_task_definition_the_cluster_profile_does_not_allow() {
        use crate::aws::fake_aws::ACCOUNT;
        use crate::cluster::base::identity::cluster_key;
        use crate::cluster::tests::fake_gocd::FakeGocd;
        use crate::cluster::tests::fixtures::job;
        use crate::cluster::{AgentRequest, Cluster, EngineError, EngineOptions};
        use crate::secret::Secret;

        let aws = FakeAws::default();
        aws.seed_task_definition("team-bad:1", definition("evil/miner", TASK_ROLE, EXEC_ROLE, SECRET));
        aws.seed_task_definition("team-good:1", definition("gocd/helper:2", TASK_ROLE, EXEC_ROLE, SECRET));
        let gocd = Arc::new(FakeGocd::default());
        let mut props: Properties = [
            ("SubnetIds", "subnet-0a1b2c3d"),
            ("SecurityGroupIds", "sg-0a1b2c3d"),
            ("AllowedImages", "gocd/*"),
            ("AllowedExecutionRoleArns", "arn:aws:iam::123456789012:role/gocd-exec-*"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), Some(v.to_string())))
        .collect();
        props.insert("ClusterName".into(), Some("ci".into()));
        props.insert("Region".into(), Some("us-east-1".into()));
        let profile = ClusterProfile::parse(&props).expect("valid");
        let key = cluster_key(ACCOUNT, "us-east-1", "ci", None);
        let options = EngineOptions::default();
        let cluster =
            Arc::new(Cluster::new(key, "server-1".into(), aws.clients(), profile.clone(), gocd.clone(), &options));
        let request = |job_id: i64, td: &str| AgentRequest {
            profile: Arc::new(profile.clone()),
            settings: "team-a".into(),
            job: job(job_id),
            environment: None,
            auto_register_key: Secret::new(format!("key-{job_id}")),
            elastic_profile: [("Image", "gocd/agent:v1"), ("TaskDefinitionArn", td), ("AgentContainerName", "agent")]
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect(),
            site_url: Some("http://gocd.example:8153/go".into()),
        };
        let refused = cluster.create_agent(request(1, "team-bad:1")).await;
        let Err(EngineError::Refused(why)) = refused else { panic!("refused: {refused:?}") };
        let why = why.to_string();
        assert!(why.contains("runs image \"evil/miner\""), "{why}");
        assert_eq!(aws.count("RunTask"), 0, "nothing ran");
        assert!(gocd.console_of(1).iter().any(|l| l.contains("evil/miner")), "{:?}", gocd.console_of(1));
        cluster.create_agent(request(2, "team-good:1")).await.expect("an allowed task definition launches");
        assert_eq!(aws.count("RunTask"), 1);
    }

    #[tokio::test]
    async fn efs_file_systems_and_system_host_paths_of_a_given_task_definition_meet_the_lists() {
        let td = described(
            "cache-td:1",
            json!({
                "containerDefinitions": [{"name": "agent", "image": "gocd/agent:v1"}],
                "volumes": [
                    {"name": "cache", "efsVolumeConfiguration": {"fileSystemId": "fs-0badbad0"}},
                    {"name": "etc", "host": {"sourcePath": "/etc"}},
                ],
            }),
        )
        .await;
        let why = check(&profile(&[("AllowedFileSystemIds", "fs-0a1b2c3d")]), &td).unwrap_err().to_string();
        assert!(
            why.contains("it mounts the EFS file system \"fs-0badbad0\", which matches none of AllowedFileSystemIds ('fs-0a1b2c3d')"),
            "{why}"
        );
        assert!(why.contains("it mounts the host's /etc, and AllowPrivileged is off"), "{why}");
        let open = profile(&[("AllowPrivileged", "true"), ("AllowedFileSystemIds", "fs-0bad*")]);
        assert_eq!(check(&open, &td), Ok(()));
    }

    /// create-agent with an elastic profile whose sidecar runs a disallowed image: refused before
    /// any task definition is registered or task run, the sidecar and its image named in the
    /// job's console; the same profile with an allowed sidecar image launches.
    #[tokio::test]
    async fn create_agent_refuses_a_sidecar_whose_image_is_not_allowed() {
        use crate::aws::fake_aws::ACCOUNT;
        use crate::cluster::base::identity::cluster_key;
        use crate::cluster::tests::fake_gocd::FakeGocd;
        use crate::cluster::tests::fixtures::job;
        use crate::cluster::{AgentRequest, Cluster, EngineError, EngineOptions};
        use crate::secret::Secret;

        let aws = FakeAws::default();
        let gocd = Arc::new(FakeGocd::default());
        let profile = profile(&[
            ("Region", "us-east-1"),
            ("SubnetIds", "subnet-0a1b2c3d"),
            ("SecurityGroupIds", "sg-0a1b2c3d"),
            ("AllowedImages", "gocd/*\npostgres:*"),
        ]);
        let key = cluster_key(ACCOUNT, "us-east-1", "ci", None);
        let options = EngineOptions::default();
        let cluster =
            Arc::new(Cluster::new(key, "server-1".into(), aws.clients(), profile.clone(), gocd.clone(), &options));
        let request = |job_id: i64, sidecar_image: &str| AgentRequest {
            profile: Arc::new(profile.clone()),
            settings: "team-a".into(),
            job: job(job_id),
            environment: None,
            auto_register_key: Secret::new(format!("key-{job_id}")),
            elastic_profile: [
                ("Image", "gocd/agent:v1".to_string()),
                ("Sidecars", format!(r#"[{{"name": "db", "image": "{sidecar_image}", "memory": 512}}]"#)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Some(v)))
            .collect(),
            site_url: Some("http://gocd.example:8153/go".into()),
        };
        let refused = cluster.create_agent(request(1, "evil/miner:latest")).await;
        let Err(EngineError::Refused(why)) = refused else { panic!("refused: {refused:?}") };
        let why = why.to_string();
        assert!(
            why.contains(
                "Sidecars: Sidecar db runs image 'evil/miner:latest', which this cluster profile does not allow"
            ),
            "{why}"
        );
        assert_eq!((aws.count("RegisterTaskDefinition"), aws.count("RunTask")), (0, 0), "nothing registered or ran");
        assert!(gocd.console_of(1).iter().any(|l| l.contains("evil/miner")), "{:?}", gocd.console_of(1));
        cluster.create_agent(request(2, "postgres:16")).await.expect("an allowed sidecar launches");
        assert_eq!((aws.count("RegisterTaskDefinition"), aws.count("RunTask")), (1, 1));
    }

    #[test]
    fn our_own_task_definitions_are_not_checked_again() {
        let ours = TaskDefinitionRef { arn: "gocd-x:1".into(), agent_container: "gocd-agent".into(), given: None };
        assert_eq!(check(&guarded(), &ours), Ok(()));
        let given = TaskDefinitionRef { given: Some(Arc::new(Contents::default())), ..ours };
        assert_eq!(check(&guarded(), &given), Ok(()), "nothing in it, nothing refused");
    }
}
