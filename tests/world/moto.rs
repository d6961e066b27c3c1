//! moto's standalone server as the tests' AWS (see `tests/world/README.md`).
//!
//! [`Moto::start`] runs `$MOTO_SERVER -H 127.0.0.1 -p <free port>` as a child of the test (one per
//! test, killed on drop), waits until it answers and switches ECS tasks to manual state
//! transitions, so a task stays RUNNING until someone stops it. Helpers build SDK configs for the
//! test's own clients (static keys, or AssumeRole into another account) and set up accounts.
//!
//! moto's accounts: calls with any static key act in the base account `123456789012`; the
//! credentials AssumeRole returns act in the role's account.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_credential_types::Credentials;
use aws_sdk_ec2::types::Filter;
use aws_sdk_ecs::types::{DesiredStatus, Task, TaskField};
use tokio::process::{Child, Command};

use super::http::{self, HttpResponse};

/// The account moto acts in for any static key.
pub const BASE_ACCOUNT: &str = "123456789012";
/// The region every test uses.
pub const REGION: &str = "us-east-1";
/// The plugin's and the tests' base access key id (distinctive, so the secret scan can find it).
pub const TEST_ACCESS_KEY_ID: &str = "AKIAWORLDE2E7Q2X9ZKD";
/// The matching secret key.
pub const TEST_SECRET_ACCESS_KEY: &str = "wOrLdE2eSecret/ecsEA+9f3b7c1d2e4a6b8c0d1e2f3a";

/// Where moto's server is: `$MOTO_SERVER`, or a panic that says how to get it. Never a skip.
pub fn moto_server_path() -> PathBuf {
    let Some(path) = std::env::var_os("MOTO_SERVER").filter(|p| !p.is_empty()) else {
        panic!(
            "MOTO_SERVER is not set: run scripts/test, which installs moto (or: export MOTO_SERVER=$(scripts/moto.sh))"
        );
    };
    let path = PathBuf::from(path);
    assert!(
        path.is_file(),
        "MOTO_SERVER={} does not exist: run scripts/test, which installs moto (or: export MOTO_SERVER=$(scripts/moto.sh))",
        path.display()
    );
    path
}

/// A free TCP port on loopback (bound, then released: a small race other tests may lose).
///
/// The port is taken below the kernel's ephemeral range (32768 and up on Linux): a port the
/// kernel hands out for `:0` can be taken again at once as the local port of any outgoing
/// connection (to moto, the proxy, Jaeger) before the server it was meant for binds it, which
/// failed a plugin's metrics listener with "Address already in use". Each process walks the
/// range 20000 to 31999 from its own starting point, so two test processes rarely meet, and a
/// port that cannot be bound now is skipped.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let start = (std::process::id().wrapping_mul(7_919) ^ nanos) % SPAN;
    let _ = NEXT.compare_exchange(u32::MAX, start, Ordering::SeqCst, Ordering::SeqCst);
    for _ in 0..SPAN {
        let port = (LOW + NEXT.fetch_add(1, Ordering::SeqCst) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {LOW}..{}", LOW + SPAN)
}

/// A running moto server, killed when dropped.
#[derive(Debug)]
pub struct Moto {
    child: Child,
    addr: SocketAddr,
}

/// Static credentials (for instance the answer of an AssumeRole).
#[derive(Debug, Clone)]
pub struct StaticCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

/// An SDK config acting as a role in the role's account.
#[derive(Debug, Clone)]
pub struct AssumedRole {
    pub config: SdkConfig,
    pub credentials: StaticCredentials,
    pub account: String,
    pub role_arn: String,
}

impl Moto {
    /// Starts a fresh moto on a free port and waits (up to ~20 s) until it answers.
    ///
    /// # Panics
    /// When `MOTO_SERVER` is unset or missing, or moto does not come up.
    pub async fn start() -> Moto {
        let path = moto_server_path();
        let mut last_error = String::new();
        for _attempt in 0..3 {
            let port = free_port();
            let addr: SocketAddr = ([127, 0, 0, 1], port).into();
            let mut cmd = Command::new(&path);
            cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]).stdin(Stdio::null()).kill_on_drop(true);
            if std::env::var_os("WORLD_MOTO_LOG").is_some() {
                let log = std::env::temp_dir().join(format!("ecs-ea-moto-{port}.log"));
                let file = std::fs::File::create(&log).expect("create moto log");
                eprintln!("world: moto log at {}", log.display());
                cmd.stdout(file.try_clone().expect("clone log")).stderr(file);
            } else {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
            let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", path.display()));
            let mut moto = Moto { child, addr };
            match moto.wait_ready(Duration::from_secs(20)).await {
                Ok(()) => {
                    moto.manual_task_transitions().await;
                    return moto;
                }
                Err(e) => last_error = e,
            }
        }
        panic!("moto did not start: {last_error}");
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("moto exited with {status} (port {} taken?)", self.addr.port()));
            }
            if let Ok(r) = http::simple(self.addr, "GET", "/moto-api/", None).await {
                if r.status == 200 {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(format!("moto on {} did not answer within {timeout:?}", self.addr));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Keeps ECS tasks RUNNING until StopTask (moto otherwise advances them on every DescribeTasks).
    async fn manual_task_transitions(&self) {
        let body = r#"{"model_name":"ecs::task","transition":{"progression":"manual","times":1000000000}}"#;
        let r = self.api("POST", "/moto-api/state-manager/set-transition", Some(body)).await;
        assert!(r.status < 300, "set-transition answered {}: {}", r.status, r.text());
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The socket address moto listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A call to moto's own API (`/moto-api/...`).
    pub async fn api(&self, method: &str, path: &str, body: Option<&str>) -> HttpResponse {
        http::simple(self.addr, method, path, body).await.unwrap_or_else(|e| panic!("moto-api {method} {path}: {e}"))
    }

    /// Clears all of moto's state (the transition setting survives).
    pub async fn reset(&self) {
        let r = self.api("POST", "/moto-api/reset", None).await;
        assert!(r.status < 300, "reset answered {}", r.status);
    }

    /// The base account (`123456789012`) with the test keys.
    pub async fn base_config(&self) -> SdkConfig {
        base_config_at(&self.endpoint()).await
    }

    /// AssumeRole (with the base keys) and an SDK config acting in the role's account.
    pub async fn assume_role_config(&self, role_arn: &str) -> AssumedRole {
        let (credentials, _) = assume_role_with(&self.base_config().await, role_arn, "e2e-world").await;
        let config = sdk_config_for(&self.endpoint(), &credentials, REGION).await;
        let account = role_arn.split(':').nth(4).unwrap_or_default().to_string();
        AssumedRole { config, credentials, account, role_arn: role_arn.to_string() }
    }

    /// Long-term keys of an IAM user `gocd` in `account`, made through the account's
    /// `gocd-admin` role (moto ties an access key to the account whose IAM created it), and an
    /// SDK config acting with them. Once per account and moto.
    pub async fn static_keys_in(&self, account: &str) -> (StaticCredentials, SdkConfig) {
        let assumed = self.assume_role_config(&format!("arn:aws:iam::{account}:role/gocd-admin")).await;
        let iam = aws_sdk_iam::Client::new(&assumed.config);
        iam.create_user()
            .user_name("gocd")
            .send()
            .await
            .unwrap_or_else(|e| panic!("CreateUser: {}", aws_error_text(&e)));
        let out = iam
            .create_access_key()
            .user_name("gocd")
            .send()
            .await
            .unwrap_or_else(|e| panic!("CreateAccessKey: {}", aws_error_text(&e)));
        let key = out.access_key().expect("an access key");
        let credentials = StaticCredentials {
            access_key_id: key.access_key_id().to_string(),
            secret_access_key: key.secret_access_key().to_string(),
            session_token: None,
        };
        let config = sdk_config_for(&self.endpoint(), &credentials, REGION).await;
        let me = aws_sdk_sts::Client::new(&config).get_caller_identity().send().await.expect("GetCallerIdentity");
        assert_eq!(me.account(), Some(account), "moto puts the user's keys in {account}");
        (credentials, config)
    }
}

/// AssumeRole with `config` (moto's own endpoint, or a proxy's): the session's keys and when it
/// expires.
pub async fn assume_role_with(
    config: &SdkConfig,
    role_arn: &str,
    session_name: &str,
) -> (StaticCredentials, std::time::SystemTime) {
    let out = aws_sdk_sts::Client::new(config)
        .assume_role()
        .role_arn(role_arn)
        .role_session_name(session_name)
        .send()
        .await
        .unwrap_or_else(|e| panic!("AssumeRole {role_arn}: {}", aws_error_text(&e)));
    let c = out.credentials().expect("AssumeRole answered no credentials");
    let credentials = StaticCredentials {
        access_key_id: c.access_key_id().to_string(),
        secret_access_key: c.secret_access_key().to_string(),
        session_token: Some(c.session_token().to_string()),
    };
    (credentials, std::time::SystemTime::try_from(*c.expiration()).expect("an Expiration in range"))
}

/// The test keys of the base account (`123456789012`).
pub fn test_credentials() -> StaticCredentials {
    StaticCredentials {
        access_key_id: TEST_ACCESS_KEY_ID.into(),
        secret_access_key: TEST_SECRET_ACCESS_KEY.into(),
        session_token: None,
    }
}

/// The base account with the test keys at `endpoint` (moto's, or a proxy's in front of it).
pub async fn base_config_at(endpoint: &str) -> SdkConfig {
    sdk_config_for(endpoint, &test_credentials(), REGION).await
}

/// An SDK config with static credentials and an explicit endpoint (moto, or a proxy in front of it).
pub async fn sdk_config_for(endpoint: &str, creds: &StaticCredentials, region: &str) -> SdkConfig {
    let provider = Credentials::new(
        creds.access_key_id.clone(),
        creds.secret_access_key.clone(),
        creds.session_token.clone(),
        None,
        "e2e-world",
    );
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region.to_string()))
        .credentials_provider(SharedCredentialsProvider::new(provider))
        .endpoint_url(endpoint)
        .load()
        .await
}

/// An SDK error with its code and message (the SDK's `Display` says only "service error").
pub fn aws_error_text<E: std::error::Error>(e: &E) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Creates an ECS cluster in the config's account; returns its ARN.
pub async fn create_cluster(cfg: &SdkConfig, name: &str) -> String {
    let ecs = aws_sdk_ecs::Client::new(cfg);
    let out = ecs
        .create_cluster()
        .cluster_name(name)
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateCluster {name}: {}", aws_error_text(&e)));
    out.cluster().and_then(|c| c.cluster_arn()).expect("cluster ARN").to_string()
}

/// A task definition a team registered itself (what a `TaskDefinitionArn` names): one container
/// `agent` running `image`, awsvpc, 512 CPU / 1024 MiB, valid for `runs_on`
/// (`requiresCompatibilities`). Returns its ARN.
pub async fn register_team_task_definition(cfg: &SdkConfig, family: &str, image: &str, runs_on: &[&str]) -> String {
    let container = aws_sdk_ecs::types::ContainerDefinition::builder().name("agent").image(image).memory(1024).build();
    let compatibilities = runs_on.iter().map(|c| aws_sdk_ecs::types::Compatibility::from(*c)).collect();
    let registered = aws_sdk_ecs::Client::new(cfg)
        .register_task_definition()
        .family(family)
        .set_requires_compatibilities(Some(compatibilities))
        .network_mode(aws_sdk_ecs::types::NetworkMode::Awsvpc)
        .cpu("512")
        .memory("1024")
        .container_definitions(container)
        .send()
        .await
        .unwrap_or_else(|e| panic!("RegisterTaskDefinition {family}: {}", aws_error_text(&e)));
    registered.task_definition().and_then(|t| t.task_definition_arn()).expect("an ARN").to_string()
}

/// The default VPC of an account, its default-for-AZ subnets and its `default` security group.
#[derive(Debug, Clone)]
pub struct DefaultNetwork {
    pub vpc_id: String,
    pub subnet_ids: Vec<String>,
    pub security_group_id: String,
}

/// Discovers the default VPC's networking in the config's account and region.
pub async fn default_network(cfg: &SdkConfig) -> DefaultNetwork {
    let ec2 = aws_sdk_ec2::Client::new(cfg);
    let filter = |name: &str, value: &str| Filter::builder().name(name).values(value).build();
    let vpcs = ec2
        .describe_vpcs()
        .filters(filter("isDefault", "true"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("DescribeVpcs: {}", aws_error_text(&e)));
    let vpc_id = vpcs.vpcs().first().and_then(|v| v.vpc_id()).expect("a default VPC").to_string();
    let subnets = ec2
        .describe_subnets()
        .filters(filter("vpc-id", &vpc_id))
        .filters(filter("default-for-az", "true"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("DescribeSubnets: {}", aws_error_text(&e)));
    let subnet_ids = subnets.subnets().iter().filter_map(|s| s.subnet_id()).map(str::to_string).collect();
    let groups = ec2
        .describe_security_groups()
        .filters(filter("vpc-id", &vpc_id))
        .filters(filter("group-name", "default"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("DescribeSecurityGroups: {}", aws_error_text(&e)));
    let security_group_id =
        groups.security_groups().first().and_then(|g| g.group_id()).expect("a default group").to_string();
    DefaultNetwork { vpc_id, subnet_ids, security_group_id }
}

/// Whether a task belongs to the named cluster (moto's ListTasks/DescribeTasks ignore the cluster).
pub fn in_cluster(task: &Task, cluster: &str) -> bool {
    let arn = task.cluster_arn().unwrap_or("");
    arn == cluster || arn.ends_with(&format!(":cluster/{cluster}"))
}

/// Tasks of the cluster with the given desired status, described with their tags.
pub async fn tasks_with_status(cfg: &SdkConfig, cluster: &str, status: DesiredStatus) -> Vec<Task> {
    let ecs = aws_sdk_ecs::Client::new(cfg);
    let list = ecs
        .list_tasks()
        .cluster(cluster)
        .desired_status(status)
        .send()
        .await
        .unwrap_or_else(|e| panic!("ListTasks {cluster}: {}", aws_error_text(&e)));
    let mut tasks = Vec::new();
    for chunk in list.task_arns().chunks(100) {
        let out = ecs
            .describe_tasks()
            .cluster(cluster)
            .set_tasks(Some(chunk.to_vec()))
            .include(TaskField::Tags)
            .send()
            .await
            .unwrap_or_else(|e| panic!("DescribeTasks {cluster}: {}", aws_error_text(&e)));
        tasks.extend(out.tasks().iter().filter(|t| in_cluster(t, cluster)).cloned());
    }
    tasks
}

/// Tasks of the cluster still meant to run (desired RUNNING) and not yet STOPPED.
pub async fn live_tasks(cfg: &SdkConfig, cluster: &str) -> Vec<Task> {
    tasks_with_status(cfg, cluster, DesiredStatus::Running)
        .await
        .into_iter()
        .filter(|t| t.last_status() != Some("STOPPED"))
        .collect()
}

/// Every task of the cluster moto knows, running or stopped.
pub async fn all_tasks(cfg: &SdkConfig, cluster: &str) -> Vec<Task> {
    let mut tasks = tasks_with_status(cfg, cluster, DesiredStatus::Running).await;
    for t in tasks_with_status(cfg, cluster, DesiredStatus::Stopped).await {
        if !tasks.iter().any(|k| k.task_arn() == t.task_arn()) {
            tasks.push(t);
        }
    }
    tasks
}

/// The value of a task tag.
pub fn task_tag<'a>(task: &'a Task, key: &str) -> Option<&'a str> {
    task.tags().iter().find(|t| t.key() == Some(key)).and_then(|t| t.value())
}

/// The value of an environment variable in a task's container overrides.
pub fn task_override_env<'a>(task: &'a Task, name: &str) -> Option<&'a str> {
    task.overrides()?
        .container_overrides()
        .iter()
        .flat_map(|c| c.environment())
        .find(|kv| kv.name() == Some(name))
        .and_then(|kv| kv.value())
}

/// The plugin's binary as an operator runs it against `endpoint`: the test keys, none of this
/// process's AWS or proxy settings, no config or credentials file, and `region` as `AWS_REGION`
/// when given (else the command must find one in its flags or files).
pub fn operator_command(endpoint: &str, region: Option<&str>) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(super::host::plugin_binary());
    for (k, _) in std::env::vars_os() {
        let name = k.to_string_lossy();
        if name.starts_with("AWS_") || super::forward_proxy::is_proxy_variable(&name) {
            cmd.env_remove(k);
        }
    }
    cmd.env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", TEST_ACCESS_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", TEST_SECRET_ACCESS_KEY)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", "/nonexistent/ecs-ea-operator/config")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/ecs-ea-operator/credentials");
    if let Some(region) = region {
        cmd.env("AWS_REGION", region);
    }
    cmd
}
