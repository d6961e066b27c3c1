//! AWS's own rules, enforced by the proxy on every call of every end-to-end test
//! (`docs/aws-rules.md`): moto accepts almost anything, AWS does not, so the
//! proxy refuses what AWS refuses, in AWS's wire format (ECS `{"__type":..,"message":..}` with
//! HTTP 400, EC2 `<Response><Errors><Error>` XML, STS `<ErrorResponse>` XML), never forwarding the
//! refused call; and it makes moto answer as AWS does where they differ (client tokens, ListTasks
//! paging and defaults). [`super::proxy::Proxy::start`] installs all of them; `tests/e2e/aws_rules.rs`
//! proves each one refuses a call that breaks it and passes one that keeps it.
//!
//! Every refusal is logged on stderr (`aws-rules: refused ecs:RunTask (123456789012/us-east-1):
//! ecs.run_task.count: InvalidParameterException: ...`), kept in [`AwsRules::refusals`]
//! (`proxy.aws_refusals()`), and in the call log as `rule = Some("aws-rules:<name>")`.
//!
//! A test may switch one rule off only to prove the plugin copes when AWS itself is inconsistent:
//! `proxy.relax("ecs.run_task.fargate_rate", "why")` (logged; an unknown name panics).
//!
//! The account of a call is the account of the role whose AssumeRole credentials signed it (as the
//! proxy saw them), else moto's base account `123456789012`; its region is the SigV4 scope's.
//! Checks run in this order: session expiry, validation, client-token conflict, quotas; then the
//! test's own rules; then, for calls still forwarded, the emulations (client-token replay,
//! ListTasks paging, session expiry learnt from AssumeRole answers).
//!
//! | rule | AWS's answer when broken | `docs/aws-rules.md` section (AWS page) |
//! |---|---|---|
//! | `ecs.run_task.count` | `InvalidParameterException` (count 1-10) | ECS: RunTask (API_RunTask) |
//! | `ecs.run_task.started_by` | `InvalidParameterException` (≤36 of `[A-Za-z0-9_-]`) | ECS: RunTask |
//! | `ecs.run_task.client_token` | `InvalidParameterException` (≤64 ASCII) | ECS: RunTask |
//! | `ecs.run_task.client_token_conflict` | `ConflictException` HTTP 400 (same token per account, region and cluster, different request body; kept for the proxy's life, AWS 24 h) | ECS: RunTask |
//! | `ecs.run_task.client_token_replay` | same token, same body: the first answer again, not forwarded (no new task); a call arriving while the first is in flight waits for its answer | ECS: RunTask |
//! | `ecs.run_task.overrides_length` | `InvalidParameterException` "Container Overrides length must be at most 8192" | ECS: RunTask |
//! | `ecs.run_task.tags` | `InvalidParameterException` (≤50, "Multiple tags contain the same key", key 1-128, value 0-256, letters, digits, spaces, `+-=._:/@`, no `aws:` key prefix) | ECS: RunTask |
//! | `ecs.run_task.exec_needs_task_role` | `InvalidParameterException` (`enableExecuteCommand` without the task definition's or the override's `taskRoleArn`) | ECS: RunTask |
//! | `ecs.run_task.launch_type` | `InvalidParameterException` (only `EC2`, `FARGATE`, `EXTERNAL`; there is no `FARGATE_SPOT` launch type) | ECS: RunTask (Fargate Spot) |
//! | `ecs.run_task.launch_type_and_strategy` | `InvalidParameterException` (`launchType` with `capacityProviderStrategy`) | ECS: RunTask (Fargate Spot) |
//! | `ecs.run_task.spot_not_windows` | `InvalidParameterException` (Fargate Spot with a Windows task definition) | ECS: RunTask (Fargate Spot) |
//! | `ecs.run_task.awsvpc` | `InvalidParameterException` (Fargate or ECS Managed Instances without `networkConfiguration.awsvpcConfiguration`; >16 subnets; >5 security groups) | ECS: RunTask (awsvpc) |
//! | `ecs.run_task.strategy_limits` | `InvalidParameterException` (a capacity provider strategy of more than 20 providers, or more than one with a base) | ECS: RunTask (capacityProviderStrategy) |
//! | `ecs.run_task.strategy_mix` | `InvalidParameterException` "A capacity provider strategy cannot contain a mix of capacity providers using Auto Scaling groups and Fargate providers. ..." | ECS: capacity providers |
//! | `ecs.run_task.provider_in_cluster` | `InvalidParameterException` (a provider other than Fargate's that is not one of the cluster's) | ECS: capacity providers |
//! | `ecs.run_task.provider_compatibility` | `InvalidParameterException` "Task definition does not support launch_type X." (the strategy's provider needs FARGATE, EC2 or MANAGED_INSTANCES in `requiresCompatibilities`) | ECS: capacity providers |
//! | `ecs.register_task_definition.managed_instances` | `ClientException` (requiring MANAGED_INSTANCES with `disableNetworking`, `dnsSearchDomains`, `dnsServers`, `dockerLabels`, `dockerSecurityOptions`, `dockerVolumeConfiguration`, `ephemeralStorage`, `extraHosts`, `hostname`, `ipcMode`, `links`, `maxSwap`, `proxyConfiguration`, `sharedMemorySize`, host `sourcePath` volumes, `swappiness` or `tmpfs`) | ECS Managed Instances task definitions |
//! | `ecs.register_task_definition.names` | `ClientException` (family and container names ≤255 of `[A-Za-z0-9_-]`) | ECS: task definitions |
//! | `ecs.register_task_definition.awslogs_needs_execution_role` | `ClientException` "Fargate requires task definition to have execution role ARN to support log driver awslogs." | ECS: task definitions |
//! | `ecs.register_task_definition.fargate_size` | `ClientException` (task-level cpu and memory required, one of Fargate's pairs) | ECS: task definitions (Fargate task sizes) |
//! | `ecs.register_task_definition.windows` | `ClientException` (Windows on Fargate: cpu 1024-4096, `WINDOWS_SERVER_2019_*`/`2022_*` only; no ARM64 with Windows) | ECS: task definitions |
//! | `ecs.register_task_definition.network_mode` | `ClientException` (`bridge` with Windows; Fargate needs `awsvpc`) | ECS: task definitions |
//! | `ecs.register_task_definition.ephemeral_storage` | `ClientException` (`sizeInGiB` 21-200, Fargate only) | ECS: task definitions |
//! | `ecs.register_task_definition.fargate_privileged` | `ClientException` (on Fargate: `privileged`, added capabilities other than `SYS_PTRACE`, `devices`, `sharedMemorySize`, `tmpfs`) | ECS: task definitions |
//! | `ecs.register_task_definition.essential` | `ClientException` (at least one container must be essential) | ECS: task definitions |
//! | `ecs.register_task_definition.fargate_container_sizes` | `ClientException` (on Fargate the containers' cpu and memory add up to at most the task's) | ECS: task definitions (Fargate task sizes) |
//! | `ecs.register_task_definition.stop_timeout` | `ClientException` (`stopTimeout` at most 120 seconds) | ECS: task definitions (container definition `stopTimeout`) |
//! | `ecs.register_task_definition.fargate_host_path` | `ClientException` (on Fargate a volume's `host.sourcePath`) | ECS: task definitions (bind mounts) |
//! | `ecs.register_task_definition.efs` | `ClientException` (`transitEncryption` ENABLED with IAM authorization or an access point; with an access point `rootDirectory` omitted or `/`) | ECS: task definitions (EFSVolumeConfiguration) |
//! | `ecs.register_task_definition.health_check` | `ClientException` (`interval` 5-300, `timeout` 2-60, `retries` 1-10, `startPeriod` 0-300) | ECS: task definitions (HealthCheck) |
//! | `ecs.managed_instances` | emulation: providers a test names ECS Managed Instances ([`AwsRules::managed_instances_provider`]) are described as AWS does (moto says MISSING); see `aws_rules/capacity.rs` | |
//! | `ecs.delete_task_definitions.max` | `InvalidParameterException` (≤10 ARNs a call) | ECS: task definitions |
//! | `ecs.list_tasks.max_results` | `InvalidParameterException` (`maxResults` 1-100) | ECS: reads (API_ListTasks) |
//! | `ecs.list_tasks.started_by_alone` | `InvalidParameterException` (`startedBy` with `desiredStatus`, `family`, `containerInstance`, `serviceName` or `launchType`) | ECS: reads (API_ListTasks) |
//! | `ecs.list_tasks.paging` | emulation: pages of `maxResults` (default and most 100) with a `nextToken`; without `desiredStatus` RUNNING tasks only; only the requested cluster's tasks (moto matches cluster names as substrings and lists STOPPED tasks by default) | ECS: reads (API_ListTasks); `tests/world/README.md` |
//! | `ecs.stopped_tasks_forgotten` | emulation: a task an hour after it stopped (a StopTask through the proxy, else the first answer showing it STOPPED; a test may shorten the hour with [`AwsRules::forget_stopped_tasks_after`]) is `MISSING` in DescribeTasks' `failures`, no longer listed, and StopTask answers `InvalidParameterException` "The referenced task was not found."; see `aws_rules/stopped_tasks.rs` | ECS: reads |
//! | `ecs.describe_tasks.cluster` | emulation: a task of another cluster than the one named is `MISSING` in DescribeTasks' `failures` (moto finds tasks in any cluster); see `aws_rules/stopped_tasks.rs` | ECS: reads (API_DescribeTasks) |
//! | `ecs.describe_tasks.max` | `InvalidParameterException` "Tasks cannot be longer than 100." | ECS: reads (API_DescribeTasks) |
//! | `ecs.container_instance_resources` | emulation: a container instance's `registeredResources` are what ECS registers for its type (1024 CPU units a vCPU, 7482 MiB of each 8192 of the type's memory, from moto's DescribeInstanceTypes), its `remainingResources` those less what moto took for its tasks (moto registers 4096 and 7482 whatever the type); see `aws_rules/container_instances.rs` | ECS: reads (DescribeContainerInstances); `tests/world/README.md` |
//! | `ecs.stop_task.reason_length` | `InvalidParameterException` (`reason` ≤255 characters; AWS may truncate, the proxy refuses) | ECS: reads (StopTask) |
//! | `ecs.run_task.fargate_rate` | `ThrottlingException` "Rate exceeded" HTTP 400: RunTask calls on Fargate, burst 20, 20/s | Quotas; ECS: RunTask (throttling) |
//! | `ecs.fargate.on_demand_launch_rate` | `ThrottlingException`: Fargate on-demand tasks launched (a RunTask's `count`), burst 100, 20/s | Quotas; ECS: RunTask |
//! | `ecs.fargate.spot_launch_rate` | `ThrottlingException`: Fargate Spot tasks launched, burst 100, 20/s | Quotas; ECS: RunTask |
//! | `ecs.ec2_run_start_stop_rate` | `ThrottlingException`: RunTask/StartTask on EC2 and StopTask calls, burst 100, 40/s | Quotas |
//! | `ecs.read_rate` | `ThrottlingException`: ECS `List*`/`Describe*` calls, burst 100, 20/s | Quotas |
//! | `ecs.register_task_definition.rate` | `ThrottlingException`: RegisterTaskDefinition calls, burst 20, 1/s | Quotas; ECS: task definitions |
//! | `ec2.run_instances.user_data_size` | `InvalidParameterValue` (user data ≤16 KB before base64) | EC2 (API_RunInstances) |
//! | `ec2.run_instances.root_volume_size` | `InvalidBlockDeviceMapping` (a volume under 30 GiB on the AMI's root device: `/dev/xvda`, or `/dev/sda1` on Windows, as moto's DescribeImages names it) | EC2 (API_RunInstances) |
//! | `ec2.run_instances.instance_profile_arn_or_name` | `InvalidParameterCombination` (`IamInstanceProfile` with both `Arn` and `Name`) | EC2 (API_RunInstances) |
//! | `ec2.run_instances.tags` | `InvalidParameterValue` (≤50 tags per resource, keys unique) | EC2 (API_RunInstances) |
//! | `ec2.run_instances.architecture` | `InvalidParameterValue` "The architecture 'arm64' of the specified instance type does not match the architecture 'x86_64' of the specified AMI..." (the type's architectures from moto's DescribeInstanceTypes, the AMI's from its DescribeImages; an AMI moto does not know is let through) | EC2 (API_RunInstances) |
//! | `ec2.describe.filter_values` | `FilterLimitExceeded` "The maximum number of filter values specified on a single call is 200" (the values of all of a `Describe*` call's filters together) | EC2 (API_DescribeInstances, filters) |
//! | `ec2.request_rate` | `RequestLimitExceeded` HTTP 503: a bucket per EC2 action (non-mutating 100, 20/s; unfiltered and unpaged `DescribeInstances` and six more 50, 10/s; mutating 50, 5/s; `RunInstances` 5, 2/s; `TerminateInstances` 100, 5/s; `CreateTags` 100, 10/s); see `aws_rules/ec2_rates.rs` | Quotas (EC2 request throttling) |
//! | `ec2.resource_rate` | `RequestLimitExceeded` HTTP 503: instances launched (`MaxCount`) 1000, 2/s; instances terminated 1000, 20/s | Quotas (EC2 request throttling) |
//! | `sts.assume_role.role_session_name` | `ValidationError` (2-64 of `[\w+=,.@-]`) | STS (API_AssumeRole) |
//! | `sts.assume_role.external_id` | `ValidationError` (2-1224 of `[\w+=,.@:/-]`) | STS (API_AssumeRole) |
//! | `sts.session.expiry` | `ExpiredTokenException` HTTP 403 "The security token included in the request is expired" (a call signed by an AssumeRole session after its `Expiration`; a test may shorten sessions with [`AwsRules::shorten_sessions`]); see `aws_rules/sessions.rs` | STS (API_AssumeRole); common errors |
//!
//! Quotas are token buckets per (account, region, rule; EC2's also per action); a refused call still spends its token in
//! the buckets checked before the one that refused it. A Fargate RunTask spends one token of
//! `ecs.run_task.fargate_rate` and `count` tokens of the launch bucket (split by the strategy's
//! weights between on-demand and Spot); a replayed RunTask (same client token) launches nothing.
//! Not enforced: "only INACTIVE revisions" for DeleteTaskDefinitions (the plugin never deletes
//! task definitions).

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::http::{self, HttpRequest, HttpResponse};
use super::proxy::{Call, Verdict};

mod capacity;
mod container_instances;
mod ec2_rates;
mod sessions;
mod stopped_tasks;

pub use container_instances::ecs_registers;

/// The headers of `call` that sign it (moto checks no signature, but reads the account and
/// region from them), for a call the world makes to moto on the caller's behalf.
fn signing_headers(call: &Call) -> Vec<(String, String)> {
    let signing = ["host", "authorization", "x-amz-date", "x-amz-security-token"];
    call.request.headers.iter().filter(|(k, _)| signing.iter().any(|h| k.eq_ignore_ascii_case(h))).cloned().collect()
}

/// A SigV4 `Authorization` header with EC2 as its credential scope's service
/// (`Credential=KEY/DATE/REGION/SERVICE/aws4_request`).
fn ec2_scope(authorization: &str) -> String {
    let Some((head, rest)) = authorization.split_once("Credential=") else {
        return authorization.to_string();
    };
    let (credential, tail) = match rest.split_once(',') {
        Some((credential, tail)) => (credential, format!(",{tail}")),
        None => (rest, String::new()),
    };
    let mut parts: Vec<&str> = credential.split('/').collect();
    if parts.len() == 5 {
        parts[3] = "ec2";
    }
    format!("{head}Credential={}{tail}", parts.join("/"))
}

/// Every rule, by name.
pub const RULES: &[&str] = &[
    RUN_TASK_COUNT,
    RUN_TASK_STARTED_BY,
    RUN_TASK_CLIENT_TOKEN,
    RUN_TASK_CLIENT_TOKEN_CONFLICT,
    RUN_TASK_CLIENT_TOKEN_REPLAY,
    RUN_TASK_OVERRIDES_LENGTH,
    RUN_TASK_TAGS,
    RUN_TASK_EXEC_NEEDS_TASK_ROLE,
    RUN_TASK_LAUNCH_TYPE,
    RUN_TASK_LAUNCH_TYPE_AND_STRATEGY,
    RUN_TASK_SPOT_NOT_WINDOWS,
    RUN_TASK_AWSVPC,
    RUN_TASK_STRATEGY_LIMITS,
    RUN_TASK_STRATEGY_MIX,
    RUN_TASK_PROVIDER_IN_CLUSTER,
    RUN_TASK_PROVIDER_COMPATIBILITY,
    TD_MANAGED_INSTANCES,
    TD_NAMES,
    TD_AWSLOGS_NEEDS_EXECUTION_ROLE,
    TD_FARGATE_SIZE,
    TD_WINDOWS,
    TD_NETWORK_MODE,
    TD_EPHEMERAL_STORAGE,
    TD_FARGATE_PRIVILEGED,
    TD_ESSENTIAL,
    TD_FARGATE_CONTAINER_SIZES,
    TD_STOP_TIMEOUT,
    TD_FARGATE_HOST_PATH,
    TD_EFS,
    TD_HEALTH_CHECK,
    DELETE_TD_MAX,
    LIST_TASKS_MAX_RESULTS,
    LIST_TASKS_STARTED_BY_ALONE,
    LIST_TASKS_PAGING,
    STOPPED_TASKS_FORGOTTEN,
    DESCRIBE_TASKS_CLUSTER,
    DESCRIBE_TASKS_MAX,
    STOP_TASK_REASON_LENGTH,
    CONTAINER_INSTANCE_RESOURCES,
    FARGATE_RUN_TASK_RATE,
    FARGATE_ON_DEMAND_LAUNCH_RATE,
    FARGATE_SPOT_LAUNCH_RATE,
    EC2_RUN_START_STOP_RATE,
    READ_RATE,
    REGISTER_TD_RATE,
    EC2_USER_DATA_SIZE,
    EC2_ROOT_VOLUME_SIZE,
    EC2_INSTANCE_PROFILE_ARN_OR_NAME,
    EC2_TAGS,
    EC2_ARCHITECTURE,
    EC2_FILTER_VALUES,
    EC2_REQUEST_RATE,
    EC2_RESOURCE_RATE,
    STS_ROLE_SESSION_NAME,
    STS_EXTERNAL_ID,
    STS_SESSION_EXPIRY,
];

pub const RUN_TASK_COUNT: &str = "ecs.run_task.count";
pub const RUN_TASK_STARTED_BY: &str = "ecs.run_task.started_by";
pub const RUN_TASK_CLIENT_TOKEN: &str = "ecs.run_task.client_token";
pub const RUN_TASK_CLIENT_TOKEN_CONFLICT: &str = "ecs.run_task.client_token_conflict";
pub const RUN_TASK_CLIENT_TOKEN_REPLAY: &str = "ecs.run_task.client_token_replay";
pub const RUN_TASK_OVERRIDES_LENGTH: &str = "ecs.run_task.overrides_length";
pub const RUN_TASK_TAGS: &str = "ecs.run_task.tags";
pub const RUN_TASK_EXEC_NEEDS_TASK_ROLE: &str = "ecs.run_task.exec_needs_task_role";
pub const RUN_TASK_LAUNCH_TYPE: &str = "ecs.run_task.launch_type";
pub const RUN_TASK_LAUNCH_TYPE_AND_STRATEGY: &str = "ecs.run_task.launch_type_and_strategy";
pub const RUN_TASK_SPOT_NOT_WINDOWS: &str = "ecs.run_task.spot_not_windows";
pub const RUN_TASK_AWSVPC: &str = "ecs.run_task.awsvpc";
pub const RUN_TASK_STRATEGY_LIMITS: &str = "ecs.run_task.strategy_limits";
pub const RUN_TASK_STRATEGY_MIX: &str = "ecs.run_task.strategy_mix";
pub const RUN_TASK_PROVIDER_IN_CLUSTER: &str = "ecs.run_task.provider_in_cluster";
pub const RUN_TASK_PROVIDER_COMPATIBILITY: &str = "ecs.run_task.provider_compatibility";
pub const TD_MANAGED_INSTANCES: &str = "ecs.register_task_definition.managed_instances";
pub const TD_NAMES: &str = "ecs.register_task_definition.names";
pub const TD_AWSLOGS_NEEDS_EXECUTION_ROLE: &str = "ecs.register_task_definition.awslogs_needs_execution_role";
pub const TD_FARGATE_SIZE: &str = "ecs.register_task_definition.fargate_size";
pub const TD_WINDOWS: &str = "ecs.register_task_definition.windows";
pub const TD_NETWORK_MODE: &str = "ecs.register_task_definition.network_mode";
pub const TD_EPHEMERAL_STORAGE: &str = "ecs.register_task_definition.ephemeral_storage";
pub const TD_FARGATE_PRIVILEGED: &str = "ecs.register_task_definition.fargate_privileged";
pub const TD_ESSENTIAL: &str = "ecs.register_task_definition.essential";
pub const TD_FARGATE_CONTAINER_SIZES: &str = "ecs.register_task_definition.fargate_container_sizes";
pub const TD_STOP_TIMEOUT: &str = "ecs.register_task_definition.stop_timeout";
pub const TD_FARGATE_HOST_PATH: &str = "ecs.register_task_definition.fargate_host_path";
pub const TD_EFS: &str = "ecs.register_task_definition.efs";
pub const TD_HEALTH_CHECK: &str = "ecs.register_task_definition.health_check";
pub const DELETE_TD_MAX: &str = "ecs.delete_task_definitions.max";
pub const LIST_TASKS_MAX_RESULTS: &str = "ecs.list_tasks.max_results";
pub const LIST_TASKS_STARTED_BY_ALONE: &str = "ecs.list_tasks.started_by_alone";
pub const LIST_TASKS_PAGING: &str = "ecs.list_tasks.paging";
pub const STOPPED_TASKS_FORGOTTEN: &str = "ecs.stopped_tasks_forgotten";
pub const DESCRIBE_TASKS_CLUSTER: &str = "ecs.describe_tasks.cluster";
pub const DESCRIBE_TASKS_MAX: &str = "ecs.describe_tasks.max";
pub const STOP_TASK_REASON_LENGTH: &str = "ecs.stop_task.reason_length";
pub const CONTAINER_INSTANCE_RESOURCES: &str = "ecs.container_instance_resources";
pub const FARGATE_RUN_TASK_RATE: &str = "ecs.run_task.fargate_rate";
pub const FARGATE_ON_DEMAND_LAUNCH_RATE: &str = "ecs.fargate.on_demand_launch_rate";
pub const FARGATE_SPOT_LAUNCH_RATE: &str = "ecs.fargate.spot_launch_rate";
pub const EC2_RUN_START_STOP_RATE: &str = "ecs.ec2_run_start_stop_rate";
pub const READ_RATE: &str = "ecs.read_rate";
pub const REGISTER_TD_RATE: &str = "ecs.register_task_definition.rate";
pub const EC2_USER_DATA_SIZE: &str = "ec2.run_instances.user_data_size";
pub const EC2_ROOT_VOLUME_SIZE: &str = "ec2.run_instances.root_volume_size";
pub const EC2_INSTANCE_PROFILE_ARN_OR_NAME: &str = "ec2.run_instances.instance_profile_arn_or_name";
pub const EC2_TAGS: &str = "ec2.run_instances.tags";
pub const EC2_ARCHITECTURE: &str = "ec2.run_instances.architecture";
pub const EC2_FILTER_VALUES: &str = "ec2.describe.filter_values";
pub const EC2_REQUEST_RATE: &str = "ec2.request_rate";
pub const EC2_RESOURCE_RATE: &str = "ec2.resource_rate";
pub const STS_ROLE_SESSION_NAME: &str = "sts.assume_role.role_session_name";
pub const STS_EXTERNAL_ID: &str = "sts.assume_role.external_id";
pub const STS_SESSION_EXPIRY: &str = "sts.session.expiry";

/// GiB of the root snapshot of current ECS-optimised Amazon Linux 2023 AMIs (`docs/aws-rules.md`, "EC2"), below
/// which a root volume is refused; Windows AMIs (whose snapshots moto says are 15 GiB) are held
/// to the same floor, the plugin's default.
const ROOT_SNAPSHOT_GIB: u64 = 30;

/// The account moto acts in for any key that no AssumeRole through the proxy handed out.
pub const DEFAULT_ACCOUNT: &str = "123456789012";

/// AWS's largest (and default) ListTasks page.
pub const LIST_TASKS_PAGE: usize = 100;
/// How long a RunTask with a client token in flight makes another with the same token wait.
const REPLAY_WAIT: Duration = Duration::from_secs(30);

/// A quota: burst and refill per second.
#[derive(Debug, Clone, Copy)]
pub struct Quota {
    pub burst: f64,
    pub per_second: f64,
}

pub const FARGATE_RUN_TASK_QUOTA: Quota = Quota { burst: 20.0, per_second: 20.0 };
pub const FARGATE_LAUNCH_QUOTA: Quota = Quota { burst: 100.0, per_second: 20.0 };
pub const EC2_RUN_START_STOP_QUOTA: Quota = Quota { burst: 100.0, per_second: 40.0 };
pub const READ_QUOTA: Quota = Quota { burst: 100.0, per_second: 20.0 };
pub const REGISTER_TD_QUOTA: Quota = Quota { burst: 20.0, per_second: 1.0 };

/// One call the rules refused.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub at: Instant,
    /// The rule's name (`ecs.run_task.count`).
    pub rule: &'static str,
    /// `service:Operation`.
    pub key: String,
    pub account: String,
    pub region: String,
    pub status: u16,
    /// AWS's error type or code (`InvalidParameterException`, `ValidationError`, ...).
    pub code: String,
    pub message: String,
}

/// A broken rule: AWS's error for it.
struct Broken {
    rule: &'static str,
    status: u16,
    code: &'static str,
    message: String,
}

fn broken(rule: &'static str, code: &'static str, message: impl Into<String>) -> Broken {
    Broken { rule, status: 400, code, message: message.into() }
}

fn invalid(rule: &'static str, message: impl Into<String>) -> Broken {
    broken(rule, "InvalidParameterException", message)
}

fn client(rule: &'static str, message: impl Into<String>) -> Broken {
    broken(rule, "ClientException", message)
}

fn throttled(rule: &'static str) -> Broken {
    broken(rule, "ThrottlingException", "Rate exceeded")
}

/// Tokens a call takes from one bucket (named by rule, or rule and action), under a rule.
struct Spend {
    rule: &'static str,
    bucket: String,
    quota: Quota,
    n: f64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

struct TokenEntry {
    body: Value,
    answer: Option<HttpResponse>,
}

/// What RunTask rules need to know of a task definition.
#[derive(Debug, Clone, Copy, Default)]
struct TaskDefInfo {
    task_role: bool,
    windows: bool,
    /// `requiresCompatibilities` (none given means EC2).
    fargate: bool,
    ec2: bool,
    managed_instances: bool,
}

/// What the forwarding stage did instead of a plain forward.
pub enum Emulated {
    /// Answered from what moto said (possibly several calls, or a rewritten request).
    Answer(std::io::Result<HttpResponse>),
    /// The answer of an earlier call, replayed without reaching moto.
    Replay(HttpResponse),
}

type Key3 = (String, String, String);

/// The rules' state for one proxy.
#[derive(Default)]
pub struct AwsRules {
    relaxed: Mutex<HashMap<String, String>>,
    buckets: Mutex<HashMap<Key3, Bucket>>,
    tokens: Mutex<HashMap<(String, String, String, String), TokenEntry>>,
    task_defs: Mutex<HashMap<Key3, TaskDefInfo>>,
    /// What moto's describes say of instance types and AMIs (architectures, root devices), by
    /// action, name and element (`None`: unknown).
    described: Mutex<HashMap<String, Option<Vec<String>>>>,
    pages: Mutex<HashMap<String, Vec<Value>>>,
    refusals: Mutex<Vec<Refusal>>,
    /// Capacity providers a test named ECS Managed Instances (`capacity.rs`).
    managed_instances: Mutex<HashSet<String>>,
    /// When each assumed-role session the proxy handed out expires, by access key id
    /// (`sessions.rs`).
    sessions: Mutex<HashMap<String, std::time::SystemTime>>,
    /// The lifetime a test gave later sessions (`sessions.rs`).
    session_lifetime: Mutex<Option<Duration>>,
    /// When each stopped task stopped, by task id (`stopped_tasks.rs`).
    stopped: Mutex<HashMap<String, Instant>>,
    /// How long a test has ECS keep stopped tasks (`stopped_tasks.rs`; default an hour).
    stopped_kept: Mutex<Option<Duration>>,
}

impl std::fmt::Debug for AwsRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsRules").field("relaxed", &*self.relaxed.lock().unwrap()).finish()
    }
}

impl AwsRules {
    /// Switches one rule off (for a test proving the plugin copes when AWS itself is
    /// inconsistent), saying why on stderr.
    ///
    /// # Panics
    /// When no rule has that name.
    pub fn relax(&self, rule: &str, reason: &str) {
        assert!(RULES.contains(&rule), "no AWS rule named {rule:?}; the rules are {RULES:?}");
        eprintln!("aws-rules: relaxed {rule}: {reason}");
        self.relaxed.lock().unwrap().insert(rule.to_string(), reason.to_string());
    }

    /// Switches every rule off, saying why on stderr.
    pub fn relax_all(&self, reason: &str) {
        eprintln!("aws-rules: relaxed every rule: {reason}");
        let mut relaxed = self.relaxed.lock().unwrap();
        for rule in RULES {
            relaxed.insert(rule.to_string(), reason.to_string());
        }
    }

    /// Whether a rule is on.
    pub fn on(&self, rule: &str) -> bool {
        !self.relaxed.lock().unwrap().contains_key(rule)
    }

    /// Every call refused so far.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.refusals.lock().unwrap().clone()
    }

    /// Validation, client-token conflicts and quotas: AWS's answer when the call breaks a rule,
    /// with the rule's name; logged on stderr.
    pub async fn check(&self, call: &Call, upstream: SocketAddr) -> Option<(&'static str, Verdict)> {
        let checked = match self.session_expiry(call) {
            Ok(()) => self.validate(call, upstream).await.and_then(|()| self.quotas(call)),
            expired => expired,
        };
        let Err(broken) = checked else {
            return None;
        };
        eprintln!(
            "aws-rules: refused {} ({}/{}): {}: {}: {}",
            call.key(),
            call.account,
            call.region,
            broken.rule,
            broken.code,
            broken.message
        );
        self.refusals.lock().unwrap().push(Refusal {
            at: Instant::now(),
            rule: broken.rule,
            key: call.key(),
            account: call.account.clone(),
            region: call.region.clone(),
            status: broken.status,
            code: broken.code.to_string(),
            message: broken.message.clone(),
        });
        let verdict = match call.service.as_str() {
            "ec2" => Verdict::ec2_error(broken.status, broken.code, &broken.message),
            "sts" | "iam" => Verdict::sts_error(broken.status, broken.code, &broken.message),
            _ => Verdict::ecs_error(broken.status, broken.code, &broken.message),
        };
        Some((broken.rule, verdict))
    }

    async fn validate(&self, call: &Call, upstream: SocketAddr) -> Result<(), Broken> {
        match (call.service.as_str(), call.operation.as_str()) {
            ("ecs", op) => {
                let body = call.json().unwrap_or(Value::Null);
                match op {
                    "RunTask" => self.run_task(call, &body, upstream).await,
                    "RegisterTaskDefinition" => self.register_task_definition(&body),
                    "DeleteTaskDefinitions" => self.check_len(DELETE_TD_MAX, &body["taskDefinitions"], 10, || {
                        "taskDefinitions can have at most 10 items.".into()
                    }),
                    "ListTasks" => self.list_tasks(&body),
                    "DescribeTasks" => self.check_len(DESCRIBE_TASKS_MAX, &body["tasks"], 100, || {
                        "Tasks cannot be longer than 100.".into()
                    }),
                    "StopTask" => match body["reason"].as_str() {
                        Some(r) if self.on(STOP_TASK_REASON_LENGTH) && r.chars().count() > 255 => Err(invalid(
                            STOP_TASK_REASON_LENGTH,
                            format!("reason must be at most 255 characters (it has {}).", r.chars().count()),
                        )),
                        _ => Ok(()),
                    },
                    _ => Ok(()),
                }
            }
            ("ec2", "RunInstances") => {
                self.run_instances(call)?;
                self.run_instances_root_volume(call, upstream).await?;
                self.run_instances_architecture(call, upstream).await
            }
            ("ec2", op) if op.starts_with("Describe") => self.ec2_filter_values(call),
            ("sts", "AssumeRole") => self.assume_role(call),
            _ => Ok(()),
        }
    }

    fn check_len(
        &self,
        rule: &'static str,
        list: &Value,
        max: usize,
        message: impl FnOnce() -> String,
    ) -> Result<(), Broken> {
        if self.on(rule) && list.as_array().is_some_and(|l| l.len() > max) {
            return Err(invalid(rule, message()));
        }
        Ok(())
    }

    async fn run_task(&self, call: &Call, v: &Value, upstream: SocketAddr) -> Result<(), Broken> {
        let count = v["count"].as_i64().unwrap_or(1);
        if self.on(RUN_TASK_COUNT) && !(1..=10).contains(&count) {
            return Err(invalid(RUN_TASK_COUNT, format!("count must be between 1 and 10 (it is {count}).")));
        }
        if let Some(s) = v["startedBy"].as_str() {
            let ok = s.chars().count() <= 36 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if self.on(RUN_TASK_STARTED_BY) && !ok {
                return Err(invalid(
                    RUN_TASK_STARTED_BY,
                    "startedBy can be up to 36 letters (uppercase and lowercase), numbers, hyphens (-), and underscores (_).",
                ));
            }
        }
        if let Some(t) = v["clientToken"].as_str() {
            if self.on(RUN_TASK_CLIENT_TOKEN) && (t.chars().count() > 64 || !t.is_ascii()) {
                return Err(invalid(RUN_TASK_CLIENT_TOKEN, "clientToken can be up to 64 ASCII characters."));
            }
        }
        let containers = &v["overrides"]["containerOverrides"];
        if self.on(RUN_TASK_OVERRIDES_LENGTH) && !containers.is_null() && containers.to_string().chars().count() > 8192
        {
            return Err(invalid(RUN_TASK_OVERRIDES_LENGTH, "Container Overrides length must be at most 8192"));
        }
        if self.on(RUN_TASK_TAGS) {
            ecs_tags(&v["tags"])?;
        }
        let launch_type = v["launchType"].as_str();
        let strategy = v["capacityProviderStrategy"].as_array().cloned().unwrap_or_default();
        if let Some(lt) = launch_type {
            if self.on(RUN_TASK_LAUNCH_TYPE) && !["EC2", "FARGATE", "EXTERNAL"].contains(&lt) {
                let hint = if lt == "FARGATE_SPOT" {
                    " There is no FARGATE_SPOT launch type: use a capacityProviderStrategy with the FARGATE_SPOT capacity provider."
                } else {
                    ""
                };
                return Err(invalid(
                    RUN_TASK_LAUNCH_TYPE,
                    format!("launchType '{lt}' is not valid: it must be one of EC2, FARGATE, EXTERNAL.{hint}"),
                ));
            }
            if self.on(RUN_TASK_LAUNCH_TYPE_AND_STRATEGY) && !strategy.is_empty() {
                return Err(invalid(
                    RUN_TASK_LAUNCH_TYPE_AND_STRATEGY,
                    "Specifying both a launch type and capacity provider strategy is not supported. Remove one and try again.",
                ));
            }
        }
        self.capacity_strategy(call, v, upstream).await?;
        let spot = strategy.iter().any(|s| s["capacityProvider"] == "FARGATE_SPOT");
        if fargate_run_task(v)
            && self.on(RUN_TASK_AWSVPC)
            && !v["networkConfiguration"]["awsvpcConfiguration"].is_object()
        {
            return Err(invalid(
                RUN_TASK_AWSVPC,
                "Network Configuration must be provided when networkMode 'awsvpc' is specified.",
            ));
        }
        let awsvpc = &v["networkConfiguration"]["awsvpcConfiguration"];
        if self.on(RUN_TASK_AWSVPC) {
            if awsvpc["subnets"].as_array().is_some_and(|s| s.len() > 16) {
                return Err(invalid(RUN_TASK_AWSVPC, "subnets can have at most 16 items."));
            }
            if awsvpc["securityGroups"].as_array().is_some_and(|s| s.len() > 5) {
                return Err(invalid(RUN_TASK_AWSVPC, "securityGroups can have at most 5 items."));
            }
        }
        let exec = v["enableExecuteCommand"].as_bool() == Some(true)
            && v["overrides"]["taskRoleArn"].as_str().is_none_or(str::is_empty)
            && self.on(RUN_TASK_EXEC_NEEDS_TASK_ROLE);
        let spot_check = spot && self.on(RUN_TASK_SPOT_NOT_WINDOWS);
        if exec || spot_check {
            if let Some(td) = self.task_def_info(call, v["taskDefinition"].as_str().unwrap_or(""), upstream).await {
                if exec && !td.task_role {
                    return Err(invalid(
                        RUN_TASK_EXEC_NEEDS_TASK_ROLE,
                        "The task definition has no task role (taskRoleArn), and the overrides name none: ECS Exec (enableExecuteCommand) needs one.",
                    ));
                }
                if spot_check && td.windows {
                    return Err(invalid(
                        RUN_TASK_SPOT_NOT_WINDOWS,
                        "Fargate Spot is not supported for Windows containers: use the FARGATE capacity provider.",
                    ));
                }
            }
        }
        if self.on(RUN_TASK_CLIENT_TOKEN_CONFLICT) {
            if let Some(key) = token_key(call, v) {
                if let Some(entry) = self.tokens.lock().unwrap().get(&key) {
                    if entry.body != *v {
                        return Err(broken(
                            RUN_TASK_CLIENT_TOKEN_CONFLICT,
                            "ConflictException",
                            format!(
                                "The clientToken '{}' was already used with different parameters in this cluster.",
                                key.3
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn register_task_definition(&self, v: &Value) -> Result<(), Broken> {
        self.managed_instances_task_definition(v)?;
        let fargate = v["requiresCompatibilities"].as_array().is_some_and(|c| c.iter().any(|c| c == "FARGATE"));
        let containers = v["containerDefinitions"].as_array().cloned().unwrap_or_default();
        if self.on(TD_NAMES) {
            let family = v["family"].as_str().unwrap_or("");
            if !name_ok(family) {
                return Err(client(
                    TD_NAMES,
                    "Family name can be up to 255 letters (uppercase and lowercase), numbers, hyphens, and underscores.",
                ));
            }
            if containers.iter().any(|c| !name_ok(c["name"].as_str().unwrap_or(""))) {
                return Err(client(
                    TD_NAMES,
                    "Container name can be up to 255 letters (uppercase and lowercase), numbers, hyphens, and underscores.",
                ));
            }
        }
        let awslogs = containers.iter().any(|c| c["logConfiguration"]["logDriver"] == "awslogs");
        let execution_role = v["executionRoleArn"].as_str().is_some_and(|r| !r.is_empty());
        if self.on(TD_AWSLOGS_NEEDS_EXECUTION_ROLE) && fargate && awslogs && !execution_role {
            return Err(client(
                TD_AWSLOGS_NEEDS_EXECUTION_ROLE,
                "Fargate requires task definition to have execution role ARN to support log driver awslogs.",
            ));
        }
        let os = v["runtimePlatform"]["operatingSystemFamily"].as_str().unwrap_or("LINUX");
        let windows = os.starts_with("WINDOWS");
        let cpu = task_size(&v["cpu"], "vcpu");
        let memory = task_size(&v["memory"], "gb");
        if self.on(TD_WINDOWS) && windows {
            if v["runtimePlatform"]["cpuArchitecture"] == "ARM64" {
                return Err(client(TD_WINDOWS, "ARM64 is not supported for Windows containers."));
            }
            if fargate {
                let family_ok = ["WINDOWS_SERVER_2019_FULL", "WINDOWS_SERVER_2019_CORE"]
                    .iter()
                    .chain(&["WINDOWS_SERVER_2022_FULL", "WINDOWS_SERVER_2022_CORE"])
                    .any(|f| *f == os);
                if !family_ok {
                    return Err(client(
                        TD_WINDOWS,
                        format!("Fargate does not support the operating system family {os}: use WINDOWS_SERVER_2019_* or WINDOWS_SERVER_2022_*."),
                    ));
                }
                if cpu.is_some_and(|c| !(1024..=4096).contains(&c)) {
                    return Err(client(TD_WINDOWS, "Windows containers on Fargate need a task cpu of 1024 to 4096."));
                }
            }
        }
        let network_mode = v["networkMode"].as_str();
        if self.on(TD_NETWORK_MODE) {
            if windows && network_mode == Some("bridge") {
                return Err(client(
                    TD_NETWORK_MODE,
                    "The bridge network mode is not supported for Windows containers: use default or awsvpc.",
                ));
            }
            if fargate && network_mode != Some("awsvpc") {
                return Err(client(TD_NETWORK_MODE, "Fargate only supports network mode 'awsvpc'."));
            }
        }
        if self.on(TD_FARGATE_SIZE) && fargate {
            let Some(cpu) = cpu else {
                return Err(client(TD_FARGATE_SIZE, "Fargate requires that 'cpu' be defined at the task level."));
            };
            let Some(memory) = memory else {
                return Err(client(TD_FARGATE_SIZE, "Fargate requires that 'memory' be defined at the task level."));
            };
            if !fargate_size_ok(cpu, memory) {
                return Err(client(
                    TD_FARGATE_SIZE,
                    format!("No Fargate configuration exists for given values: {cpu} CPU, {memory} memory. See the Amazon ECS documentation for the valid values."),
                ));
            }
        }
        if let Some(size) = v["ephemeralStorage"]["sizeInGiB"].as_i64() {
            if self.on(TD_EPHEMERAL_STORAGE) && !fargate {
                return Err(client(TD_EPHEMERAL_STORAGE, "Ephemeral storage is only supported for Fargate tasks."));
            }
            if self.on(TD_EPHEMERAL_STORAGE) && !(21..=200).contains(&size) {
                return Err(client(
                    TD_EPHEMERAL_STORAGE,
                    format!("The ephemeral storage size must be between 21 and 200 GiB (it is {size})."),
                ));
            }
        }
        if self.on(TD_FARGATE_PRIVILEGED) && fargate {
            for c in &containers {
                let name = c["name"].as_str().unwrap_or("");
                if c["privileged"].as_bool() == Some(true) {
                    return Err(client(
                        TD_FARGATE_PRIVILEGED,
                        format!("Privileged containers are not supported on Fargate (container {name})."),
                    ));
                }
                let linux = &c["linuxParameters"];
                let added = linux["capabilities"]["add"].as_array().cloned().unwrap_or_default();
                if let Some(cap) = added.iter().filter_map(Value::as_str).find(|c| *c != "SYS_PTRACE") {
                    return Err(client(
                        TD_FARGATE_PRIVILEGED,
                        format!("Fargate only supports adding the SYS_PTRACE kernel capability ({cap} in container {name})."),
                    ));
                }
                for field in ["devices", "sharedMemorySize", "tmpfs"] {
                    let given = &linux[field];
                    if !given.is_null() && !given.as_array().is_some_and(Vec::is_empty) {
                        return Err(client(
                            TD_FARGATE_PRIVILEGED,
                            format!("The '{field}' linux parameter is not supported on Fargate (container {name})."),
                        ));
                    }
                }
            }
        }
        self.task_contents(v, fargate, &containers, cpu, memory)
    }

    /// The rules on what a task runs: essential containers, container sizes within
    /// a Fargate task's, stop timeouts, bind mounts, EFS volumes and health checks.
    fn task_contents(
        &self,
        v: &Value,
        fargate: bool,
        containers: &[Value],
        cpu: Option<u64>,
        memory: Option<u64>,
    ) -> Result<(), Broken> {
        if self.on(TD_ESSENTIAL) && !containers.is_empty() && containers.iter().all(|c| c["essential"] == false) {
            return Err(client(TD_ESSENTIAL, "At least one essential container is required."));
        }
        if self.on(TD_FARGATE_CONTAINER_SIZES) && fargate {
            let sum = |field: &str| containers.iter().filter_map(|c| c[field].as_u64()).sum::<u64>();
            if let Some(task_memory) = memory.filter(|m| sum("memory") > *m) {
                return Err(client(
                    TD_FARGATE_CONTAINER_SIZES,
                    format!(
                        "The sum of the containers' memory ({}) exceeds the task memory ({task_memory}).",
                        sum("memory")
                    ),
                ));
            }
            if let Some(task_cpu) = cpu.filter(|c| sum("cpu") > *c) {
                return Err(client(
                    TD_FARGATE_CONTAINER_SIZES,
                    format!("The sum of the containers' cpu ({}) exceeds the task cpu ({task_cpu}).", sum("cpu")),
                ));
            }
        }
        for c in containers {
            let name = c["name"].as_str().unwrap_or("");
            if let Some(t) = c["stopTimeout"].as_i64().filter(|t| self.on(TD_STOP_TIMEOUT) && *t > 120) {
                return Err(client(
                    TD_STOP_TIMEOUT,
                    format!(
                        "The stop timeout of container {name} is {t}; the maximum stop timeout value is 120 seconds."
                    ),
                ));
            }
            let h = &c["healthCheck"];
            if self.on(TD_HEALTH_CHECK) && !h.is_null() {
                for (field, low, high) in
                    [("interval", 5, 300), ("timeout", 2, 60), ("retries", 1, 10), ("startPeriod", 0, 300)]
                {
                    if let Some(n) = h[field].as_i64().filter(|n| !(low..=high).contains(n)) {
                        return Err(client(
                            TD_HEALTH_CHECK,
                            format!("Health check {field} of container {name} must be between {low} and {high} (it is {n})."),
                        ));
                    }
                }
            }
        }
        for volume in v["volumes"].as_array().into_iter().flatten() {
            let name = volume["name"].as_str().unwrap_or("");
            if self.on(TD_FARGATE_HOST_PATH) && fargate && volume["host"]["sourcePath"].is_string() {
                return Err(client(
                    TD_FARGATE_HOST_PATH,
                    format!("Fargate does not support the host sourcePath parameter (volume {name})."),
                ));
            }
            let efs = &volume["efsVolumeConfiguration"];
            if self.on(TD_EFS) && !efs.is_null() {
                let auth = &efs["authorizationConfig"];
                let access_point = auth["accessPointId"].as_str().is_some_and(|a| !a.is_empty());
                let iam = auth["iam"] == "ENABLED";
                if (iam || access_point) && efs["transitEncryption"] != "ENABLED" {
                    return Err(client(
                        TD_EFS,
                        format!("Transit encryption must be enabled when IAM authorization or an access point is used (volume {name})."),
                    ));
                }
                if access_point && efs["rootDirectory"].as_str().is_some_and(|d| d != "/") {
                    return Err(client(
                        TD_EFS,
                        format!("The root directory must be omitted or set to '/' when an access point is used (volume {name})."),
                    ));
                }
            }
        }
        Ok(())
    }

    fn list_tasks(&self, v: &Value) -> Result<(), Broken> {
        if let Some(n) = v.get("maxResults").filter(|n| !n.is_null()) {
            if self.on(LIST_TASKS_MAX_RESULTS) && !n.as_i64().is_some_and(|n| (1..=100).contains(&n)) {
                return Err(invalid(LIST_TASKS_MAX_RESULTS, "maxResults must be between 1 and 100."));
            }
        }
        if self.on(LIST_TASKS_STARTED_BY_ALONE) && v["startedBy"].is_string() {
            let others: Vec<&str> = ["desiredStatus", "family", "containerInstance", "serviceName", "launchType"]
                .into_iter()
                .filter(|f| v.get(*f).is_some_and(|x| !x.is_null()))
                .collect();
            if !others.is_empty() {
                return Err(invalid(
                    LIST_TASKS_STARTED_BY_ALONE,
                    format!(
                        "When you specify startedBy as the filter, it must be the only filter that you use (also given: {}).",
                        others.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// EC2 takes at most 200 filter values in one `Describe*` call, over all of its filters.
    fn ec2_filter_values(&self, call: &Call) -> Result<(), Broken> {
        let values = call.form.iter().filter(|(k, _)| k.starts_with("Filter.") && k.split('.').nth(2) == Some("Value"));
        let values = values.count();
        if self.on(EC2_FILTER_VALUES) && values > 200 {
            return Err(broken(
                EC2_FILTER_VALUES,
                "FilterLimitExceeded",
                format!("The maximum number of filter values specified on a single call is 200 (it has {values})."),
            ));
        }
        Ok(())
    }

    fn run_instances(&self, call: &Call) -> Result<(), Broken> {
        let ec2 = |rule, code, message: String| broken(rule, code, message);
        if let Some(data) = call.form_param("UserData") {
            let data = data.trim_end();
            let padding = data.chars().rev().take_while(|c| *c == '=').count();
            let decoded = (data.len() / 4) * 3 + [0, 0, 1, 2][data.len() % 4] - padding.min(2);
            if self.on(EC2_USER_DATA_SIZE) && decoded > 16 * 1024 {
                return Err(ec2(
                    EC2_USER_DATA_SIZE,
                    "InvalidParameterValue",
                    format!("User data is limited to 16384 bytes (it has {decoded})."),
                ));
            }
        }
        if self.on(EC2_INSTANCE_PROFILE_ARN_OR_NAME)
            && call.form_param("IamInstanceProfile.Arn").is_some()
            && call.form_param("IamInstanceProfile.Name").is_some()
        {
            return Err(ec2(
                EC2_INSTANCE_PROFILE_ARN_OR_NAME,
                "InvalidParameterCombination",
                "The parameter 'iamInstanceProfile.name' may not be used in combination with 'iamInstanceProfile.arn'"
                    .into(),
            ));
        }
        if self.on(EC2_TAGS) {
            let mut keys: HashMap<String, Vec<String>> = HashMap::new();
            for (k, v) in &call.form {
                let Some(rest) = k.strip_prefix("TagSpecification.") else { continue };
                let mut parts = rest.split('.');
                if let (Some(n), Some("Tag"), Some(_), Some("Key")) =
                    (parts.next(), parts.next(), parts.next(), parts.next())
                {
                    keys.entry(n.to_string()).or_default().push(v.clone());
                }
            }
            for (n, keys) in keys {
                let resource = call.form_param(&format!("TagSpecification.{n}.ResourceType")).unwrap_or("resource");
                if keys.len() > 50 {
                    return Err(ec2(
                        EC2_TAGS,
                        "InvalidParameterValue",
                        format!("The number of tags for the {resource} ({}) exceeds the limit of 50.", keys.len()),
                    ));
                }
                let mut seen = HashSet::new();
                if let Some(dup) = keys.iter().find(|k| !seen.insert(k.as_str())) {
                    return Err(ec2(
                        EC2_TAGS,
                        "InvalidParameterValue",
                        format!("Duplicate tag key '{dup}' specified."),
                    ));
                }
            }
        }
        Ok(())
    }

    /// A volume mapped on the AMI's root device (as moto's DescribeImages names it: `/dev/xvda`
    /// on Amazon Linux, `/dev/sda1` on Windows; `/dev/xvda` for an AMI moto does not know) must
    /// be at least [`ROOT_SNAPSHOT_GIB`], the snapshot of current ECS-optimised AMIs.
    async fn run_instances_root_volume(&self, call: &Call, upstream: SocketAddr) -> Result<(), Broken> {
        let mappings: Vec<(&str, &str)> = call
            .form
            .iter()
            .filter_map(|(k, device)| {
                let prefix = k.strip_suffix(".DeviceName").filter(|p| p.starts_with("BlockDeviceMapping."))?;
                Some((prefix, device.as_str()))
            })
            .collect();
        if !self.on(EC2_ROOT_VOLUME_SIZE) || mappings.is_empty() {
            return Ok(());
        }
        let root = match call.form_param("ImageId") {
            Some(ami) => self.described(call, upstream, "DescribeImages", "ImageId.1", ami, "rootDeviceName").await,
            None => None,
        };
        let root = root.and_then(|r| r.into_iter().next()).unwrap_or_else(|| "/dev/xvda".to_string());
        for (prefix, device) in mappings.into_iter().filter(|(_, device)| *device == root) {
            let size = call.form_param(&format!("{prefix}.Ebs.VolumeSize")).and_then(|s| s.parse::<u64>().ok());
            if let Some(size) = size.filter(|s| *s < ROOT_SNAPSHOT_GIB) {
                let snapshot =
                    if device == "/dev/sda1" { "snap-0ecswin2022root000" } else { "snap-0ecsal2023root0000" };
                return Err(broken(
                    EC2_ROOT_VOLUME_SIZE,
                    "InvalidBlockDeviceMapping",
                    format!("Volume of size {size}GB is smaller than snapshot '{snapshot}', expect size >= {ROOT_SNAPSHOT_GIB}GB"),
                ));
            }
        }
        Ok(())
    }

    /// An instance type launched with an AMI of another architecture.
    async fn run_instances_architecture(&self, call: &Call, upstream: SocketAddr) -> Result<(), Broken> {
        let (Some(ami), Some(instance_type)) = (call.form_param("ImageId"), call.form_param("InstanceType")) else {
            return Ok(());
        };
        if !self.on(EC2_ARCHITECTURE) {
            return Ok(());
        }
        let image = self.described(call, upstream, "DescribeImages", "ImageId.1", ami, "architecture").await;
        let types = self
            .described(
                call,
                upstream,
                "DescribeInstanceTypes",
                "InstanceType.1",
                instance_type,
                "supportedArchitectures",
            )
            .await;
        let (Some(image), Some(types)) = (image, types) else {
            return Ok(());
        };
        match (image.first(), types.first()) {
            (Some(a), Some(t)) if !types.contains(a) => Err(broken(
                EC2_ARCHITECTURE,
                "InvalidParameterValue",
                format!(
                    "The architecture '{t}' of the specified instance type does not match the architecture '{a}' of the specified AMI. Specify an instance type and an AMI that have matching architectures, and try again. You can use 'describe-instance-types' or 'describe-images' to discover the architecture of the instance type or AMI."
                ),
            )),
            _ => Ok(()),
        }
    }

    /// What moto names in the `element` of a describe of one AMI or instance type (the items of a
    /// list, or the one value; `None` when moto does not know it); asked once per name and element.
    async fn described(
        &self,
        call: &Call,
        upstream: SocketAddr,
        action: &str,
        parameter: &str,
        name: &str,
        element: &str,
    ) -> Option<Vec<String>> {
        let key = format!("{action}/{name}/{element}");
        if let Some(known) = self.described.lock().unwrap().get(&key) {
            return known.clone();
        }
        let body = format!("Action={action}&Version=2016-11-15&{parameter}={name}").into_bytes();
        // EC2's: moto serves the service the credential scope names (the call may be ECS's).
        let mut headers: Vec<(String, String)> = signing_headers(call)
            .into_iter()
            .map(|(k, v)| {
                let v = if k.eq_ignore_ascii_case("authorization") { ec2_scope(&v) } else { v };
                (k, v)
            })
            .collect();
        headers.push(("Content-Type".into(), "application/x-www-form-urlencoded; charset=utf-8".into()));
        let request =
            HttpRequest { method: "POST".into(), target: "/".into(), version: "HTTP/1.1".into(), headers, body };
        let answer = http::send(upstream, &request).await.ok()?;
        let found = (answer.status == 200).then(|| {
            let text = String::from_utf8_lossy(&answer.body);
            let (open, close) = (format!("<{element}>"), format!("</{element}>"));
            let inner = text.split_once(&open).and_then(|(_, rest)| rest.split_once(&close)).map(|(inner, _)| inner);
            match inner {
                Some(inner) if inner.contains("<item>") => inner
                    .split("<item>")
                    .skip(1)
                    .filter_map(|i| i.split_once("</item>").map(|(v, _)| v.trim().to_string()))
                    .collect(),
                Some(inner) => vec![inner.trim().to_string()],
                None => Vec::new(),
            }
        });
        let found = found.filter(|items: &Vec<String>| !items.is_empty());
        self.described.lock().unwrap().insert(key, found.clone());
        found
    }

    fn assume_role(&self, call: &Call) -> Result<(), Broken> {
        let fail = |rule, constraint: String| {
            broken(rule, "ValidationError", format!("1 validation error detected: {constraint}"))
        };
        let name = call.form_param("RoleSessionName").unwrap_or("");
        if self.on(STS_ROLE_SESSION_NAME) {
            let len = name.chars().count();
            let ok_char = |c: char| c.is_ascii_alphanumeric() || "_+=,.@-".contains(c);
            if !(2..=64).contains(&len) || !name.chars().all(ok_char) {
                let why = if len < 2 {
                    "Member must have length greater than or equal to 2".to_string()
                } else if len > 64 {
                    "Member must have length less than or equal to 64".to_string()
                } else {
                    "Member must satisfy regular expression pattern: [\\w+=,.@-]*".to_string()
                };
                return Err(fail(
                    STS_ROLE_SESSION_NAME,
                    format!("Value '{name}' at 'roleSessionName' failed to satisfy constraint: {why}"),
                ));
            }
        }
        if let Some(id) = call.form_param("ExternalId") {
            let len = id.chars().count();
            let ok_char = |c: char| c.is_ascii_alphanumeric() || "_+=,.@:/-".contains(c);
            if self.on(STS_EXTERNAL_ID) && (!(2..=1224).contains(&len) || !id.chars().all(ok_char)) {
                let why = if len < 2 {
                    "Member must have length greater than or equal to 2"
                } else if len > 1224 {
                    "Member must have length less than or equal to 1224"
                } else {
                    "Member must satisfy regular expression pattern: [\\w+=,.@:\\/-]*"
                };
                // The value stays out of the message: an external id is half a secret.
                return Err(fail(
                    STS_EXTERNAL_ID,
                    format!("Value at 'externalId' failed to satisfy constraint: {why}"),
                ));
            }
        }
        Ok(())
    }

    /// The task definition a RunTask names, from RegisterTaskDefinition answers seen, else from
    /// moto (DescribeTaskDefinition in the call's account and region). `None` when unknown.
    async fn task_def_info(&self, call: &Call, reference: &str, upstream: SocketAddr) -> Option<TaskDefInfo> {
        let short = reference.rsplit("task-definition/").next().unwrap_or(reference).to_string();
        let key = (call.account.clone(), call.region.clone(), short.clone());
        if let Some(info) = self.task_defs.lock().unwrap().get(&key) {
            return Some(*info);
        }
        let body = json!({ "taskDefinition": reference }).to_string().into_bytes();
        let mut headers = signing_headers(call);
        headers.push(("Content-Type".into(), "application/x-amz-json-1.1".into()));
        headers.push(("X-Amz-Target".into(), "AmazonEC2ContainerServiceV20141113.DescribeTaskDefinition".into()));
        let request =
            HttpRequest { method: "POST".into(), target: "/".into(), version: "HTTP/1.1".into(), headers, body };
        let answer = http::send(upstream, &request).await.ok().filter(|a| a.status == 200)?;
        let td = serde_json::from_slice::<Value>(&answer.body).ok()?["taskDefinition"].clone();
        let info = task_def_info(&td);
        if short.contains(':') {
            self.task_defs.lock().unwrap().insert(key, info);
        }
        Some(info)
    }

    fn quotas(&self, call: &Call) -> Result<(), Broken> {
        match call.service.as_str() {
            "ecs" => self.ecs_quotas(call),
            "ec2" => self.ec2_quotas(call),
            _ => Ok(()),
        }
    }

    fn ecs_quotas(&self, call: &Call) -> Result<(), Broken> {
        let op = call.operation.as_str();
        let mut spends: Vec<(&'static str, Quota, f64)> = Vec::new();
        match op {
            "RunTask" => {
                let v = call.json().unwrap_or(Value::Null);
                if fargate_run_task(&v) {
                    spends.push((FARGATE_RUN_TASK_RATE, FARGATE_RUN_TASK_QUOTA, 1.0));
                    let replay = token_key(call, &v)
                        .is_some_and(|k| self.tokens.lock().unwrap().get(&k).is_some_and(|e| e.body == v));
                    if !replay {
                        let (on_demand, spot) = fargate_split(&v);
                        if on_demand > 0 {
                            spends.push((FARGATE_ON_DEMAND_LAUNCH_RATE, FARGATE_LAUNCH_QUOTA, on_demand as f64));
                        }
                        if spot > 0 {
                            spends.push((FARGATE_SPOT_LAUNCH_RATE, FARGATE_LAUNCH_QUOTA, spot as f64));
                        }
                    }
                } else {
                    spends.push((EC2_RUN_START_STOP_RATE, EC2_RUN_START_STOP_QUOTA, 1.0));
                }
            }
            "StartTask" | "StopTask" => spends.push((EC2_RUN_START_STOP_RATE, EC2_RUN_START_STOP_QUOTA, 1.0)),
            "RegisterTaskDefinition" => spends.push((REGISTER_TD_RATE, REGISTER_TD_QUOTA, 1.0)),
            _ if op.starts_with("List") || op.starts_with("Describe") => spends.push((READ_RATE, READ_QUOTA, 1.0)),
            _ => {}
        }
        let spends = spends.into_iter().map(|(rule, quota, n)| Spend { rule, bucket: rule.to_string(), quota, n });
        self.spend(call, spends).map_err(throttled)
    }

    /// Takes each spend's tokens from its bucket of the call's account and region, in order;
    /// the rule of the first bucket short of tokens (the buckets before it keep the spend).
    fn spend(&self, call: &Call, spends: impl IntoIterator<Item = Spend>) -> Result<(), &'static str> {
        let mut buckets = self.buckets.lock().unwrap();
        let now = Instant::now();
        for Spend { rule, bucket, quota, n } in spends {
            if !self.on(rule) {
                continue;
            }
            let bucket = buckets
                .entry((call.account.clone(), call.region.clone(), bucket))
                .or_insert(Bucket { tokens: quota.burst, at: now });
            let tokens =
                (bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * quota.per_second).min(quota.burst);
            bucket.at = now;
            if tokens + 1e-9 >= n {
                bucket.tokens = tokens - n;
            } else {
                bucket.tokens = tokens;
                return Err(rule);
            }
        }
        Ok(())
    }

    /// The forwarding stage for calls AWS answers differently from moto: RunTask with a client
    /// token seen before (replayed), ListTasks (paged as AWS does), container instances (with
    /// their type's resources). `None`: forward as is.
    pub async fn forward(&self, call: &Call, upstream: SocketAddr) -> Option<Emulated> {
        if call.is("ecs", "DescribeCapacityProviders") {
            return self.describe_capacity_providers(call, upstream).await;
        }
        if call.is("sts", "AssumeRole") {
            return Some(self.assume_role_answer(call, upstream).await);
        }
        if call.is("ecs", "DescribeTasks") && (self.on(STOPPED_TASKS_FORGOTTEN) || self.on(DESCRIBE_TASKS_CLUSTER)) {
            return Some(Emulated::Answer(Ok(self.describe_tasks_as_aws(call, upstream).await)));
        }
        if call.is("ecs", "StopTask") && self.on(STOPPED_TASKS_FORGOTTEN) {
            if let Some(answer) = self.stop_forgotten_task(call) {
                return Some(Emulated::Answer(Ok(answer)));
            }
        }
        if call.is("ecs", "ListTasks") && self.on(LIST_TASKS_PAGING) {
            return Some(Emulated::Answer(Ok(self.list_tasks_page(call, upstream).await)));
        }
        if self.answers_container_instances(call) {
            return Some(Emulated::Answer(Ok(self.container_instances_as_aws(call, upstream).await)));
        }
        if !call.is("ecs", "RunTask") || !self.on(RUN_TASK_CLIENT_TOKEN_REPLAY) {
            return None;
        }
        let body = call.json()?;
        let key = token_key(call, &body)?;
        let deadline = Instant::now() + REPLAY_WAIT;
        loop {
            {
                let mut tokens = self.tokens.lock().unwrap();
                match tokens.get(&key) {
                    Some(e) if e.body != body => {
                        let message = "The clientToken was already used with different parameters in this cluster.";
                        let answer = HttpResponse::aws_json_error(400, "ConflictException", message);
                        return Some(Emulated::Replay(answer));
                    }
                    Some(TokenEntry { answer: Some(answer), .. }) => {
                        eprintln!(
                            "aws-rules: {RUN_TASK_CLIENT_TOKEN_REPLAY}: RunTask clientToken {} answered again",
                            key.3
                        );
                        return Some(Emulated::Replay(answer.clone()));
                    }
                    Some(_) if Instant::now() < deadline => {}
                    _ => {
                        tokens.insert(key.clone(), TokenEntry { body: body.clone(), answer: None });
                        break;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let answer = http::send(upstream, &call.request).await;
        let mut tokens = self.tokens.lock().unwrap();
        match &answer {
            Ok(a) if a.status == 200 => {
                if let Some(e) = tokens.get_mut(&key) {
                    e.answer = Some(a.clone());
                }
            }
            _ => {
                tokens.remove(&key);
            }
        }
        Some(Emulated::Answer(answer))
    }

    async fn list_tasks_page(&self, call: &Call, upstream: SocketAddr) -> HttpResponse {
        let body = call.json().unwrap_or(Value::Null);
        let arns = match body["nextToken"].as_str() {
            Some(token) => match self.pages.lock().unwrap().remove(token) {
                Some(rest) => rest,
                None => return invalid_next_token(),
            },
            None => {
                let answer = match http::send(upstream, &list_tasks_request(call)).await {
                    Ok(a) => a,
                    Err(e) => return HttpResponse::upstream_failed(&e),
                };
                match list_tasks_arns(call, &answer) {
                    Some(all) => all.into_iter().filter(|a| !self.forgotten(a.as_str().unwrap_or(""))).collect(),
                    None => return answer,
                }
            }
        };
        list_tasks_answer(&body, arns, &self.pages)
    }

    /// Side records from forwarded answers: task definitions registered, tasks stopped.
    pub fn observe(&self, call: &Call, response: &HttpResponse) {
        if response.status != 200 {
            return;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&response.body) else {
            return;
        };
        if call.is("ecs", "StopTask") {
            if let Some(arn) = v["task"]["taskArn"].as_str() {
                self.task_stopped(arn);
            }
            return;
        }
        if !call.is("ecs", "RegisterTaskDefinition") {
            return;
        }
        let td = &v["taskDefinition"];
        let (Some(family), Some(revision)) = (td["family"].as_str(), td["revision"].as_i64()) else {
            return;
        };
        let info = task_def_info(td);
        let mut defs = self.task_defs.lock().unwrap();
        for name in [format!("{family}:{revision}"), family.to_string()] {
            defs.insert((call.account.clone(), call.region.clone(), name), info);
        }
    }
}

fn task_def_info(td: &Value) -> TaskDefInfo {
    let requires: Vec<&str> =
        td["requiresCompatibilities"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let requires = if requires.is_empty() { vec!["EC2"] } else { requires };
    TaskDefInfo {
        fargate: requires.contains(&"FARGATE"),
        ec2: requires.contains(&"EC2"),
        managed_instances: requires.contains(&"MANAGED_INSTANCES"),
        task_role: td["taskRoleArn"].as_str().is_some_and(|r| !r.is_empty()),
        windows: td["runtimePlatform"]["operatingSystemFamily"].as_str().is_some_and(|o| o.starts_with("WINDOWS")),
    }
}

/// The cluster name a call names (`cluster`, an ARN or a name; `default` when absent).
pub fn cluster_name(v: &Value) -> String {
    let c = v["cluster"].as_str().filter(|c| !c.is_empty()).unwrap_or("default");
    c.rsplit(":cluster/").next().unwrap_or(c).to_string()
}

fn token_key(call: &Call, v: &Value) -> Option<(String, String, String, String)> {
    let token = v["clientToken"].as_str()?;
    Some((call.account.clone(), call.region.clone(), cluster_name(v), token.to_string()))
}

/// Whether a RunTask runs on Fargate (launch type or a Fargate capacity provider).
fn fargate_run_task(v: &Value) -> bool {
    v["launchType"] == "FARGATE"
        || v["capacityProviderStrategy"].as_array().is_some_and(|s| {
            s.iter().any(|i| i["capacityProvider"] == "FARGATE" || i["capacityProvider"] == "FARGATE_SPOT")
        })
}

/// A Fargate RunTask's tasks split between on-demand and Spot (by the strategy's base, then weights).
fn fargate_split(v: &Value) -> (u64, u64) {
    let count = v["count"].as_u64().unwrap_or(1);
    let Some(strategy) = v["capacityProviderStrategy"].as_array().filter(|s| !s.is_empty()) else {
        return (count, 0);
    };
    let item = |name: &str| {
        strategy
            .iter()
            .find(|i| i["capacityProvider"] == name)
            .map(|i| (i["base"].as_u64().unwrap_or(0), i["weight"].as_u64().unwrap_or(0)))
    };
    let (od_base, od_weight) = item("FARGATE").unwrap_or((0, 0));
    let (spot_base, spot_weight) = item("FARGATE_SPOT").unwrap_or((0, 0));
    let mut od = od_base.min(count);
    let mut spot = spot_base.min(count - od);
    let rest = count - od - spot;
    match (od_weight, spot_weight) {
        (0, 0) if item("FARGATE_SPOT").is_some() && item("FARGATE").is_none() => spot += rest,
        (0, 0) => od += rest,
        (o, s) => {
            let s_share = (rest * s).div_ceil(o + s);
            spot += s_share;
            od += rest - s_share;
        }
    }
    (od, spot)
}

fn ecs_tags(tags: &Value) -> Result<(), Broken> {
    let Some(tags) = tags.as_array() else {
        return Ok(());
    };
    if tags.len() > 50 {
        return Err(invalid(RUN_TASK_TAGS, format!("Tags can have at most 50 items (there are {}).", tags.len())));
    }
    let mut seen = HashSet::new();
    let ok_char = |c: char| c.is_alphanumeric() || c == ' ' || "+-=._:/@".contains(c);
    for t in tags {
        let key = t["key"].as_str().unwrap_or("");
        let value = t["value"].as_str().unwrap_or("");
        if !seen.insert(key) {
            return Err(invalid(RUN_TASK_TAGS, "Multiple tags contain the same key"));
        }
        if !(1..=128).contains(&key.chars().count()) {
            return Err(invalid(RUN_TASK_TAGS, "Tag keys must be 1 to 128 characters long."));
        }
        if value.chars().count() > 256 {
            return Err(invalid(RUN_TASK_TAGS, format!("The value of tag '{key}' is longer than 256 characters.")));
        }
        if !key.chars().all(ok_char) || !value.chars().all(ok_char) {
            return Err(invalid(
                RUN_TASK_TAGS,
                format!("Tag '{key}' has characters other than letters, numbers, spaces and + - = . _ : / @."),
            ));
        }
        if key.to_ascii_lowercase().starts_with("aws:") {
            return Err(invalid(RUN_TASK_TAGS, format!("Tag key '{key}' uses the reserved prefix 'aws:'.")));
        }
    }
    Ok(())
}

fn name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= 255
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A task-level cpu (`"1024"`, `"1 vCPU"`) or memory (`"2048"`, `"2 GB"`) in CPU units or MiB.
fn task_size(v: &Value, unit: &str) -> Option<u64> {
    let s = match v {
        Value::String(s) => s.trim().to_ascii_lowercase(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    match s.strip_suffix(unit) {
        Some(n) => n.trim().parse::<f64>().ok().map(|n| (n * 1024.0).round() as u64),
        None => s.parse().ok(),
    }
}

/// Fargate's task sizes (`docs/aws-rules.md`, "ECS: task definitions").
pub fn fargate_size_ok(cpu: u64, memory: u64) -> bool {
    let range = |lo: u64, hi: u64, step: u64| (lo..=hi).contains(&memory) && (memory - lo) % step == 0;
    match cpu {
        256 => [512, 1024, 2048].contains(&memory),
        512 => range(1024, 4096, 1024),
        1024 => range(2048, 8192, 1024),
        2048 => range(4096, 16384, 1024),
        4096 => range(8192, 30720, 1024),
        8192 => range(16384, 61440, 4096),
        16384 => range(32768, 122880, 8192),
        _ => false,
    }
}

/// The ListTasks request moto should get for a first page: `desiredStatus` RUNNING when the call
/// names none (AWS's default; moto's lists STOPPED tasks too), without `maxResults`/`nextToken`.
pub fn list_tasks_request(call: &Call) -> HttpRequest {
    let mut request = call.request.clone();
    if let Some(mut body) = call.json().filter(Value::is_object) {
        let map = body.as_object_mut().expect("an object");
        map.remove("maxResults");
        map.remove("nextToken");
        if map.get("desiredStatus").is_none_or(Value::is_null) {
            map.insert("desiredStatus".into(), json!("RUNNING"));
        }
        request.body = body.to_string().into_bytes();
    }
    request
}

/// The task ARNs of moto's ListTasks answer, only the requested cluster's (moto matches cluster
/// names as substrings). `None` when the answer is not a successful one.
pub fn list_tasks_arns(call: &Call, answer: &HttpResponse) -> Option<Vec<Value>> {
    if answer.status != 200 {
        return None;
    }
    let all = serde_json::from_slice::<Value>(&answer.body).ok()?["taskArns"].as_array()?.clone();
    let cluster = cluster_name(&call.json().unwrap_or(Value::Null));
    let marker = format!(":task/{cluster}/");
    Some(
        all.into_iter()
            .filter(|a| {
                let arn = a.as_str().unwrap_or("");
                // Short-format ARNs (no cluster in them) cannot be told apart: kept.
                arn.contains(&marker) || arn.matches('/').count() < 2
            })
            .collect(),
    )
}

/// The first `maxResults` (at most 100) of `arns`, the rest kept under a fresh `nextToken`.
pub fn list_tasks_answer(
    body: &Value,
    mut arns: Vec<Value>,
    kept: &Mutex<HashMap<String, Vec<Value>>>,
) -> HttpResponse {
    let size = body["maxResults"].as_u64().map_or(LIST_TASKS_PAGE, |n| (n as usize).clamp(1, LIST_TASKS_PAGE));
    let rest = if arns.len() > size { arns.split_off(size) } else { Vec::new() };
    let mut page = json!({ "taskArns": arns });
    if !rest.is_empty() {
        let token = uuid::Uuid::new_v4().simple().to_string();
        kept.lock().unwrap().insert(token.clone(), rest);
        page["nextToken"] = json!(token);
    }
    HttpResponse::aws_json(200, &page)
}

/// AWS's answer to a `nextToken` it never gave.
pub fn invalid_next_token() -> HttpResponse {
    HttpResponse::aws_json_error(400, "InvalidParameterException", "The specified nextToken is not valid.")
}
