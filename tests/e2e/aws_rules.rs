//! The proxy's AWS rules (`tests/world/aws_rules.rs`, `docs/aws-rules.md`), each proved: a call that
//! breaks it is refused with AWS's error type and HTTP status (and the rule's name in the proxy's
//! refusals), a call that keeps it passes. Driven with the AWS SDK straight at the proxy, so a rule
//! cannot silently stop working while the end-to-end tests (which all run behind these rules)
//! still pass.
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`); without it the tests panic, never skip.

use crate::world;
use std::time::{Duration, Instant, SystemTime};

use crate::world::aws_rules;
use crate::world::moto::{self, aws_error_text, DefaultNetwork, StaticCredentials};
use crate::world::*;
use aws_config::retry::RetryConfig;
use aws_config::SdkConfig;
use aws_sdk_ecs::types::{
    AwsVpcConfiguration, CapacityProviderStrategyItem, Compatibility, ContainerDefinition, ContainerOverride,
    CpuArchitecture, DesiredStatus, EphemeralStorage, KernelCapabilities, KeyValuePair, LaunchType, LinuxParameters,
    LogConfiguration, LogDriver, NetworkConfiguration, NetworkMode, OsFamily, RuntimePlatform, Tag, TaskOverride,
};
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_runtime_api::http::Response;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use base64::Engine;

const CLUSTER: &str = "rules";
const IMAGE: &str = "gocd/gocd-agent-alpine-3.19:v24.1.0";
const ROLE_ARN: &str = "arn:aws:iam::111111111111:role/gocd-agents";
const TASK_ROLE: &str = "arn:aws:iam::123456789012:role/agent-task";
const EXECUTION_ROLE: &str = "arn:aws:iam::123456789012:role/agent-execution";
const AMI: &str = "ami-0abcdef1234567890";

/// moto, the proxy in front of it, the base account straight at moto (`direct`) and through the
/// proxy (`via`, SDK retries off so a refusal is seen once), the default network.
struct Rig {
    _moto: Moto,
    proxy: Proxy,
    direct: SdkConfig,
    via: SdkConfig,
    net: DefaultNetwork,
}

impl Rig {
    async fn new() -> Rig {
        let moto = Moto::start().await;
        let proxy = Proxy::start(moto.addr()).await;
        let direct = moto.base_config().await;
        let via = via(&proxy, &moto::test_credentials(), moto::REGION).await;
        moto::create_cluster(&direct, CLUSTER).await;
        let net = moto::default_network(&direct).await;
        Rig { _moto: moto, proxy, direct, via, net }
    }

    fn ecs(&self) -> aws_sdk_ecs::Client {
        aws_sdk_ecs::Client::new(&self.via)
    }

    fn network(&self) -> NetworkConfiguration {
        network(&self.net.subnet_ids[..1], std::slice::from_ref(&self.net.security_group_id))
    }

    /// A Fargate RunTask of `td` in the test cluster, on the default network.
    fn fargate(&self, td: &str) -> aws_sdk_ecs::operation::run_task::builders::RunTaskFluentBuilder {
        self.ecs()
            .run_task()
            .cluster(CLUSTER)
            .task_definition(td)
            .launch_type(LaunchType::Fargate)
            .network_configuration(self.network())
    }

    /// Registers a task definition straight in moto (not through the proxy).
    async fn task_definition(&self, family: &str, task_role: bool, windows: bool) -> String {
        let mut r = aws_sdk_ecs::Client::new(&self.direct)
            .register_task_definition()
            .family(family)
            .requires_compatibilities(Compatibility::Fargate)
            .network_mode(NetworkMode::Awsvpc)
            .cpu("1024")
            .memory("2048")
            .container_definitions(container("agent"));
        if task_role {
            r = r.task_role_arn(TASK_ROLE);
        }
        if windows {
            r = r.runtime_platform(
                RuntimePlatform::builder().operating_system_family(OsFamily::WindowsServer2019Core).build(),
            );
        }
        let out = r.send().await.unwrap_or_else(|e| panic!("RegisterTaskDefinition: {}", aws_error_text(&e)));
        out.task_definition().and_then(|t| t.task_definition_arn()).unwrap().to_string()
    }
}

/// An SDK config through the proxy, with the SDK's retries off.
async fn via(proxy: &Proxy, creds: &StaticCredentials, region: &str) -> SdkConfig {
    moto::sdk_config_for(&proxy.endpoint(), creds, region)
        .await
        .into_builder()
        .retry_config(RetryConfig::disabled())
        .build()
}

fn network(subnets: &[String], groups: &[String]) -> NetworkConfiguration {
    NetworkConfiguration::builder()
        .awsvpc_configuration(
            AwsVpcConfiguration::builder()
                .set_subnets(Some(subnets.to_vec()))
                .set_security_groups(Some(groups.to_vec()))
                .build()
                .unwrap(),
        )
        .build()
}

fn container(name: &str) -> ContainerDefinition {
    ContainerDefinition::builder().name(name).image(IMAGE).cpu(512).memory(1024).build()
}

fn tag(k: &str, v: &str) -> Tag {
    Tag::builder().key(k).value(v).build()
}

fn strategy(provider: &str) -> CapacityProviderStrategyItem {
    CapacityProviderStrategyItem::builder().capacity_provider(provider).weight(1).build().unwrap()
}

fn env_override(value: &str) -> TaskOverride {
    TaskOverride::builder()
        .container_overrides(
            ContainerOverride::builder()
                .name("agent")
                .environment(KeyValuePair::builder().name("GO_EA_AUTO_REGISTER_KEY").value(value).build())
                .build(),
        )
        .build()
}

/// The call was refused by `rule`, with AWS's `code` and HTTP 400; returns AWS's message.
#[track_caller]
fn refused<O: std::fmt::Debug, E>(
    proxy: &Proxy,
    result: Result<O, SdkError<E, Response>>,
    rule: &str,
    code: &str,
) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    refused_with(proxy, result, rule, code, 400)
}

/// The call was refused by `rule`, with AWS's `code` and HTTP `status`; returns AWS's message.
#[track_caller]
fn refused_with<O: std::fmt::Debug, E>(
    proxy: &Proxy,
    result: Result<O, SdkError<E, Response>>,
    rule: &str,
    code: &str,
    status: u16,
) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let err = match result {
        Ok(o) => panic!("expected {rule} to refuse with {code}, but the call passed: {o:?}"),
        Err(e) => e,
    };
    let answered = err.raw_response().map(|r| r.status().as_u16());
    let text = aws_error_text(&err);
    let service = err.as_service_error().unwrap_or_else(|| panic!("not a service error: {text}"));
    assert_eq!(service.code(), Some(code), "{rule}: {text}");
    assert_eq!(answered, Some(status), "{rule}: {text}");
    let last = proxy.aws_refusals().pop().unwrap_or_else(|| panic!("no refusal recorded for {rule}"));
    assert_eq!(last.rule, rule, "{text}");
    service.message().unwrap_or_default().to_string()
}

/// The call passed the proxy and moto.
#[track_caller]
fn passed<O, E: std::error::Error + 'static>(result: Result<O, SdkError<E, Response>>, what: &str) -> O {
    result.unwrap_or_else(|e| panic!("{what} should pass: {}", aws_error_text(&e)))
}

fn error_code<O, E: ProvideErrorMetadata>(result: &Result<O, SdkError<E, Response>>) -> Option<String> {
    result.as_ref().err().and_then(|e| e.as_service_error()).and_then(|e| e.code()).map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn run_task_rules_refuse_what_aws_refuses() {
    let w = Rig::new().await;
    let p = &w.proxy;
    let plain = w.task_definition("plain", false, false).await;
    let with_role = w.task_definition("with-role", true, false).await;
    let windows = w.task_definition("windows", false, true).await;

    // count 1-10.
    refused(p, w.fargate(&plain).count(11).send().await, aws_rules::RUN_TASK_COUNT, "InvalidParameterException");
    refused(p, w.fargate(&plain).count(0).send().await, aws_rules::RUN_TASK_COUNT, "InvalidParameterException");
    assert_eq!(passed(w.fargate(&plain).count(10).send().await, "count 10").tasks().len(), 10);

    // startedBy: at most 36 of [A-Za-z0-9_-].
    let rule = aws_rules::RUN_TASK_STARTED_BY;
    refused(p, w.fargate(&plain).started_by("x".repeat(37)).send().await, rule, "InvalidParameterException");
    refused(p, w.fargate(&plain).started_by("gocd ecs").send().await, rule, "InvalidParameterException");
    passed(w.fargate(&plain).started_by(format!("gocd-ecs_{}", "7".repeat(27))).send().await, "startedBy of 36");

    // clientToken: at most 64 ASCII; the same token with other parameters is a conflict, with the
    // same parameters the first answer again (no new task), even when both are in flight at once.
    let rule = aws_rules::RUN_TASK_CLIENT_TOKEN;
    refused(p, w.fargate(&plain).client_token("t".repeat(65)).send().await, rule, "InvalidParameterException");
    refused(p, w.fargate(&plain).client_token("tökén").send().await, rule, "InvalidParameterException");
    passed(w.fargate(&plain).client_token("t".repeat(64)).send().await, "a token of 64");
    let first = passed(w.fargate(&plain).started_by("a").client_token("job-1").send().await, "a new token");
    let again = passed(w.fargate(&plain).started_by("a").client_token("job-1").send().await, "the same call");
    let arn = |o: &aws_sdk_ecs::operation::run_task::RunTaskOutput| o.tasks()[0].task_arn().unwrap().to_string();
    assert_eq!(arn(&first), arn(&again), "the same token and parameters answer the same task");
    refused(
        p,
        w.fargate(&plain).started_by("b").client_token("job-1").send().await,
        aws_rules::RUN_TASK_CLIENT_TOKEN_CONFLICT,
        "ConflictException",
    );
    let (x, y) = tokio::join!(
        w.fargate(&plain).started_by("c").client_token("job-2").send(),
        w.fargate(&plain).started_by("c").client_token("job-2").send()
    );
    assert_eq!(arn(&passed(x, "job-2")), arn(&passed(y, "job-2 at the same time")));
    let running = moto::tasks_with_status(&w.direct, CLUSTER, DesiredStatus::Running).await;
    let started_by = |s: &str| running.iter().filter(|t| t.started_by() == Some(s)).count();
    assert_eq!(started_by("a"), 1, "moto started one task for the token job-1");
    assert_eq!(started_by("c"), 1, "moto started one task for the token job-2");

    // overrides: the JSON of containerOverrides at most 8192 characters.
    let message = refused(
        p,
        w.fargate(&plain).overrides(env_override(&"k".repeat(8200))).send().await,
        aws_rules::RUN_TASK_OVERRIDES_LENGTH,
        "InvalidParameterException",
    );
    assert_eq!(message, "Container Overrides length must be at most 8192");
    passed(w.fargate(&plain).overrides(env_override(&"k".repeat(8000))).send().await, "overrides under 8192");

    // tags.
    let rule = aws_rules::RUN_TASK_TAGS;
    let many: Vec<Tag> = (0..51).map(|i| tag(&format!("k{i}"), "v")).collect();
    refused(p, w.fargate(&plain).set_tags(Some(many.clone())).send().await, rule, "InvalidParameterException");
    let message = refused(
        p,
        w.fargate(&plain).tags(tag("gocd:job", "1")).tags(tag("gocd:job", "2")).send().await,
        rule,
        "InvalidParameterException",
    );
    assert_eq!(message, "Multiple tags contain the same key");
    refused(p, w.fargate(&plain).tags(tag(&"k".repeat(129), "v")).send().await, rule, "InvalidParameterException");
    refused(p, w.fargate(&plain).tags(tag("", "v")).send().await, rule, "InvalidParameterException");
    refused(p, w.fargate(&plain).tags(tag("k", &"v".repeat(257))).send().await, rule, "InvalidParameterException");
    refused(p, w.fargate(&plain).tags(tag("job#1", "v")).send().await, rule, "InvalidParameterException");
    refused(p, w.fargate(&plain).tags(tag("k", "a,b")).send().await, rule, "InvalidParameterException");
    refused(p, w.fargate(&plain).tags(tag("AWS:owner", "v")).send().await, rule, "InvalidParameterException");
    let mut fine = many[..48].to_vec();
    fine.push(tag(&"k".repeat(128), &format!("ok +-=._:/@ é {}", "v".repeat(200))));
    fine.push(tag("empty", ""));
    passed(w.fargate(&plain).set_tags(Some(fine)).send().await, "50 good tags");

    // enableExecuteCommand needs a task role, the task definition's or the override's.
    let rule = aws_rules::RUN_TASK_EXEC_NEEDS_TASK_ROLE;
    refused(p, w.fargate(&plain).enable_execute_command(true).send().await, rule, "InvalidParameterException");
    passed(w.fargate(&with_role).enable_execute_command(true).send().await, "exec with the definition's role");
    let role_override = TaskOverride::builder().task_role_arn(TASK_ROLE).build();
    passed(
        w.fargate(&plain).enable_execute_command(true).overrides(role_override).send().await,
        "exec with an override role",
    );

    // Fargate Spot: a capacity provider, not a launch type; never with a launch type; not Windows.
    let spot = || {
        w.ecs()
            .run_task()
            .cluster(CLUSTER)
            .capacity_provider_strategy(strategy("FARGATE_SPOT"))
            .network_configuration(w.network())
    };
    refused(
        p,
        w.fargate(&plain).launch_type(LaunchType::from("FARGATE_SPOT")).send().await,
        aws_rules::RUN_TASK_LAUNCH_TYPE,
        "InvalidParameterException",
    );
    refused(
        p,
        spot().task_definition(&plain).launch_type(LaunchType::Fargate).send().await,
        aws_rules::RUN_TASK_LAUNCH_TYPE_AND_STRATEGY,
        "InvalidParameterException",
    );
    refused(
        p,
        spot().task_definition(&windows).send().await,
        aws_rules::RUN_TASK_SPOT_NOT_WINDOWS,
        "InvalidParameterException",
    );
    passed(spot().task_definition(&plain).send().await, "Fargate Spot by capacity provider");
    passed(w.fargate(&windows).send().await, "Windows on Fargate on-demand");

    // awsvpc: required on Fargate, at most 16 subnets and 5 security groups.
    let rule = aws_rules::RUN_TASK_AWSVPC;
    let no_network = w.ecs().run_task().cluster(CLUSTER).task_definition(&plain).launch_type(LaunchType::Fargate);
    refused(p, no_network.send().await, rule, "InvalidParameterException");
    let subnets: Vec<String> = (0..17).map(|i| format!("subnet-{i:08x}")).collect();
    let group = vec![w.net.security_group_id.clone()];
    refused(
        p,
        w.fargate(&plain).network_configuration(network(&subnets, &group)).send().await,
        rule,
        "InvalidParameterException",
    );
    let groups: Vec<String> = (0..6).map(|i| format!("sg-{i:08x}")).collect();
    refused(
        p,
        w.fargate(&plain).network_configuration(network(&w.net.subnet_ids[..1], &groups)).send().await,
        rule,
        "InvalidParameterException",
    );
    let all_subnets = w.net.subnet_ids.clone();
    passed(w.fargate(&plain).network_configuration(network(&all_subnets, &group)).send().await, "a good network");

    // Nothing refused reached moto: every task there came from a passing call.
    let refused_run_tasks = p.log().iter().filter(|r| r.key() == "ecs:RunTask" && r.rule.is_some()).count();
    assert_eq!(refused_run_tasks, p.aws_refusals().len());
    eprintln!("FIGURES: aws_rules run_task {} refusals, {} tasks", p.aws_refusals().len(), p.ecs_tasks_started());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn task_definition_rules_refuse_what_aws_refuses() {
    let w = Rig::new().await;
    let p = &w.proxy;
    let ecs = w.ecs();
    let fargate = |family: &str| {
        ecs.register_task_definition()
            .family(family)
            .requires_compatibilities(Compatibility::Fargate)
            .network_mode(NetworkMode::Awsvpc)
            .cpu("1024")
            .memory("2048")
    };
    let (client, invalid) = ("ClientException", "InvalidParameterException");

    // Names: at most 255 of [A-Za-z0-9_-], family and containers.
    let rule = aws_rules::TD_NAMES;
    refused(p, fargate("gocd.agents").container_definitions(container("agent")).send().await, rule, client);
    refused(p, fargate(&"f".repeat(256)).container_definitions(container("agent")).send().await, rule, client);
    refused(p, fargate("gocd-agents").container_definitions(container("the agent")).send().await, rule, client);
    passed(fargate(&"f".repeat(255)).container_definitions(container("gocd_agent-1")).send().await, "good names");

    // awslogs on Fargate needs an execution role.
    let logs = LogConfiguration::builder().log_driver(LogDriver::Awslogs).build().unwrap();
    let logged = ContainerDefinition::builder().name("agent").image(IMAGE).log_configuration(logs).build();
    let message = refused(
        p,
        fargate("logged").container_definitions(logged.clone()).send().await,
        aws_rules::TD_AWSLOGS_NEEDS_EXECUTION_ROLE,
        client,
    );
    assert_eq!(message, "Fargate requires task definition to have execution role ARN to support log driver awslogs.");
    passed(
        fargate("logged").container_definitions(logged).execution_role_arn(EXECUTION_ROLE).send().await,
        "awslogs with an execution role",
    );

    // Fargate task sizes.
    let rule = aws_rules::TD_FARGATE_SIZE;
    // The container fits the smallest task: its size is `TD_FARGATE_CONTAINER_SIZES`' business.
    let small = ContainerDefinition::builder().name("agent").image(IMAGE).cpu(128).memory(256).build();
    let sized = |cpu: &str, memory: &str| fargate("sized").cpu(cpu).memory(memory).container_definitions(small.clone());
    refused(p, sized("256", "4096").send().await, rule, client);
    refused(p, sized("1024", "1024").send().await, rule, client);
    refused(p, sized("8192", "18432").send().await, rule, client);
    refused(p, sized("300", "1024").send().await, rule, client);
    let no_cpu = ecs
        .register_task_definition()
        .family("sized")
        .requires_compatibilities(Compatibility::Fargate)
        .network_mode(NetworkMode::Awsvpc)
        .memory("2048")
        .container_definitions(container("agent"));
    refused(p, no_cpu.send().await, rule, client);
    passed(sized("256", "512").send().await, "256/512");
    passed(sized("1 vCPU", "3 GB").send().await, "1 vCPU / 3 GB");
    passed(sized("8192", "20480").send().await, "8192/20480");
    for (cpu, memory, ok) in [
        (512, 4096, true),
        (512, 5120, false),
        (2048, 16384, true),
        (4096, 30720, true),
        (4096, 31744, false),
        (16384, 122880, true),
        (16384, 36864, false),
    ] {
        assert_eq!(aws_rules::fargate_size_ok(cpu, memory), ok, "{cpu}/{memory}");
    }

    // Windows: on Fargate cpu 1024-4096 and 2019/2022 only; never ARM64.
    let rule = aws_rules::TD_WINDOWS;
    let platform = |os: OsFamily, arch: CpuArchitecture| {
        RuntimePlatform::builder().operating_system_family(os).cpu_architecture(arch).build()
    };
    let win = |cpu: &str, memory: &str, os: OsFamily, arch: CpuArchitecture| {
        fargate("windows")
            .cpu(cpu)
            .memory(memory)
            .runtime_platform(platform(os, arch))
            .container_definitions(container("agent"))
    };
    refused(p, win("512", "1024", OsFamily::WindowsServer2022Core, CpuArchitecture::X8664).send().await, rule, client);
    refused(
        p,
        win("8192", "16384", OsFamily::WindowsServer2022Core, CpuArchitecture::X8664).send().await,
        rule,
        client,
    );
    refused(p, win("1024", "2048", OsFamily::WindowsServer2004Core, CpuArchitecture::X8664).send().await, rule, client);
    refused(p, win("1024", "2048", OsFamily::WindowsServer2019Full, CpuArchitecture::Arm64).send().await, rule, client);
    passed(win("2048", "4096", OsFamily::WindowsServer2022Full, CpuArchitecture::X8664).send().await, "Windows 2022");
    passed(
        fargate("arm")
            .runtime_platform(platform(OsFamily::Linux, CpuArchitecture::Arm64))
            .container_definitions(container("agent"))
            .send()
            .await,
        "Linux ARM64",
    );

    // Network mode: no bridge with Windows; Fargate needs awsvpc.
    let rule = aws_rules::TD_NETWORK_MODE;
    let ec2_def = |family: &str| {
        ecs.register_task_definition()
            .family(family)
            .requires_compatibilities(Compatibility::Ec2)
            .container_definitions(container("agent"))
    };
    let win_bridge = ec2_def("win-ec2")
        .network_mode(NetworkMode::Bridge)
        .runtime_platform(platform(OsFamily::WindowsServer2019Core, CpuArchitecture::X8664));
    refused(p, win_bridge.send().await, rule, client);
    refused(
        p,
        fargate("bridged").network_mode(NetworkMode::Bridge).container_definitions(container("agent")).send().await,
        rule,
        client,
    );
    let no_mode = ecs
        .register_task_definition()
        .family("no-mode")
        .requires_compatibilities(Compatibility::Fargate)
        .cpu("1024")
        .memory("2048")
        .container_definitions(container("agent"));
    refused(p, no_mode.send().await, rule, client);
    passed(ec2_def("linux-ec2").network_mode(NetworkMode::Bridge).send().await, "bridge on Linux EC2");

    // Ephemeral storage: 21-200 GiB, Fargate only.
    let rule = aws_rules::TD_EPHEMERAL_STORAGE;
    let storage = |gib: i32| EphemeralStorage::builder().size_in_gib(gib).build();
    refused(
        p,
        fargate("disk").ephemeral_storage(storage(20)).container_definitions(container("agent")).send().await,
        rule,
        client,
    );
    refused(
        p,
        fargate("disk").ephemeral_storage(storage(201)).container_definitions(container("agent")).send().await,
        rule,
        client,
    );
    refused(p, ec2_def("disk-ec2").ephemeral_storage(storage(50)).send().await, rule, client);
    passed(
        fargate("disk").ephemeral_storage(storage(200)).container_definitions(container("agent")).send().await,
        "200 GiB",
    );

    // Registrations so far were under RegisterTaskDefinition's burst of 20 (refused ones spend none).
    let registered = p.log().iter().filter(|r| r.key() == "ecs:RegisterTaskDefinition" && r.rule.is_none()).count();
    assert!(registered <= 12, "{registered} registrations reached moto");

    // Privileged, added capabilities, devices, shared memory and tmpfs are refused on Fargate.
    let rule = aws_rules::TD_FARGATE_PRIVILEGED;
    let with = |c: ContainerDefinition| fargate("privileged").container_definitions(c);
    let base = || ContainerDefinition::builder().name("agent").image(IMAGE);
    let caps =
        |cap: &str| LinuxParameters::builder().capabilities(KernelCapabilities::builder().add(cap).build()).build();
    refused(p, with(base().privileged(true).build()).send().await, rule, client);
    refused(p, with(base().linux_parameters(caps("SYS_ADMIN")).build()).send().await, rule, client);
    refused(
        p,
        with(base().linux_parameters(LinuxParameters::builder().shared_memory_size(64).build()).build()).send().await,
        rule,
        client,
    );
    passed(with(base().linux_parameters(caps("SYS_PTRACE")).build()).send().await, "SYS_PTRACE on Fargate");
    passed(
        ec2_def("privileged-ec2")
            .container_definitions(base().name("side").memory(512).privileged(true).build())
            .send()
            .await,
        "privileged on EC2",
    );

    // DeleteTaskDefinitions: at most 10 a call.
    let arns: Vec<String> =
        (1..=11).map(|i| format!("arn:aws:ecs:us-east-1:123456789012:task-definition/sized:{i}")).collect();
    refused(
        p,
        ecs.delete_task_definitions().set_task_definitions(Some(arns.clone())).send().await,
        aws_rules::DELETE_TD_MAX,
        invalid,
    );
    let before = p.aws_refusals().len();
    let ten = ecs.delete_task_definitions().set_task_definitions(Some(arns[..10].to_vec())).send().await;
    assert_eq!(p.aws_refusals().len(), before, "ten ARNs pass the proxy (moto answers {:?})", error_code(&ten));
}

/// The rules on what a task runs, each refused and passed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn task_contents_rules_refuse_what_aws_refuses() {
    use aws_sdk_ecs::types::{
        EfsAuthorizationConfig, EfsAuthorizationConfigIam, EfsTransitEncryption, EfsVolumeConfiguration, HealthCheck,
        HostVolumeProperties, Volume,
    };
    let w = Rig::new().await;
    let p = &w.proxy;
    let ecs = w.ecs();
    let client = "ClientException";
    let fargate = |family: &str| {
        ecs.register_task_definition()
            .family(family)
            .requires_compatibilities(Compatibility::Fargate)
            .network_mode(NetworkMode::Awsvpc)
            .cpu("1024")
            .memory("2048")
    };
    let sized = |name: &str, cpu: i32, memory: i32, essential: bool| {
        ContainerDefinition::builder().name(name).image(IMAGE).cpu(cpu).memory(memory).essential(essential)
    };

    // At least one essential container.
    let rule = aws_rules::TD_ESSENTIAL;
    refused(
        p,
        fargate("ess").container_definitions(sized("agent", 512, 1024, false).build()).send().await,
        rule,
        client,
    );
    passed(
        fargate("ess")
            .container_definitions(sized("agent", 512, 1024, true).build())
            .container_definitions(sized("side", 256, 512, false).build())
            .send()
            .await,
        "one essential of two",
    );

    // On Fargate the containers fit in the task.
    let rule = aws_rules::TD_FARGATE_CONTAINER_SIZES;
    let two = |agent_memory: i32, agent_cpu: i32| {
        fargate("sizes")
            .container_definitions(sized("agent", agent_cpu, agent_memory, true).build())
            .container_definitions(sized("side", 256, 512, true).build())
    };
    refused(p, two(2048, 512).send().await, rule, client);
    refused(p, two(1024, 1024).send().await, rule, client);
    passed(two(1536, 768).send().await, "containers adding up to the task");

    // stopTimeout at most 120 seconds.
    let rule = aws_rules::TD_STOP_TIMEOUT;
    let stopping =
        |t: i32| fargate("stop").container_definitions(sized("agent", 512, 1024, true).stop_timeout(t).build());
    refused(p, stopping(121).send().await, rule, client);
    passed(stopping(120).send().await, "stopTimeout 120");

    // Health check ranges.
    let rule = aws_rules::TD_HEALTH_CHECK;
    let checked = |interval: i32, timeout: i32, retries: i32, start: i32| {
        let h = HealthCheck::builder()
            .command("CMD-SHELL")
            .command("true")
            .interval(interval)
            .timeout(timeout)
            .retries(retries)
            .start_period(start)
            .build()
            .unwrap();
        fargate("health").container_definitions(sized("agent", 512, 1024, true).health_check(h).build())
    };
    refused(p, checked(4, 5, 3, 0).send().await, rule, client);
    refused(p, checked(30, 61, 3, 0).send().await, rule, client);
    refused(p, checked(30, 5, 11, 0).send().await, rule, client);
    refused(p, checked(30, 5, 3, 301).send().await, rule, client);
    passed(checked(300, 60, 10, 300).send().await, "the largest health check values");

    // No host paths on Fargate; fine on EC2.
    let rule = aws_rules::TD_FARGATE_HOST_PATH;
    let host =
        Volume::builder().name("cache").host(HostVolumeProperties::builder().source_path("/var/cache").build()).build();
    refused(
        p,
        fargate("bind").volumes(host.clone()).container_definitions(container("agent")).send().await,
        rule,
        client,
    );
    passed(
        ecs.register_task_definition()
            .family("bind-ec2")
            .requires_compatibilities(Compatibility::Ec2)
            .volumes(host)
            .container_definitions(container("agent"))
            .send()
            .await,
        "a host path on EC2",
    );

    // EFS: IAM and access points need transit encryption; an access point owns the directory.
    let rule = aws_rules::TD_EFS;
    let efs = |iam: bool, access_point: bool, encrypted: bool, root: Option<&str>| {
        let mut auth = EfsAuthorizationConfig::builder();
        if iam {
            auth = auth.iam(EfsAuthorizationConfigIam::Enabled);
        }
        if access_point {
            auth = auth.access_point_id("fsap-0123456789abcdef0");
        }
        let config = EfsVolumeConfiguration::builder()
            .file_system_id("fs-0a1b2c3d")
            .set_root_directory(root.map(str::to_string))
            .transit_encryption(if encrypted { EfsTransitEncryption::Enabled } else { EfsTransitEncryption::Disabled })
            .authorization_config(auth.build())
            .build()
            .unwrap();
        fargate("efs")
            .volumes(Volume::builder().name("cache").efs_volume_configuration(config).build())
            .container_definitions(container("agent"))
    };
    refused(p, efs(true, false, false, None).send().await, rule, client);
    refused(p, efs(false, true, false, None).send().await, rule, client);
    refused(p, efs(false, true, true, Some("/ci")).send().await, rule, client);
    passed(efs(true, true, true, Some("/")).send().await, "IAM and an access point with TLS");
    passed(efs(false, false, false, Some("/ci")).send().await, "a plain directory without TLS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_rules_and_list_tasks_as_aws_answers() {
    let w = Rig::new().await;
    let p = &w.proxy;
    let ecs = w.ecs();
    let td = w.task_definition("reads", false, false).await;
    let invalid = "InvalidParameterException";

    // 25 tasks in "paged", 2 in "paged-2" (moto's cluster filter matches "paged" in "paged-2"),
    // 5 of "paged" stopped (moto lists them without desiredStatus; AWS does not).
    moto::create_cluster(&w.direct, "paged").await;
    moto::create_cluster(&w.direct, "paged-2").await;
    let run = |cluster: &'static str, count: i32| {
        ecs.run_task()
            .cluster(cluster)
            .task_definition(&td)
            .launch_type(LaunchType::Fargate)
            .network_configuration(w.network())
            .started_by("gocd-reads")
            .count(count)
            .send()
    };
    let mut arns = Vec::new();
    for (cluster, count) in [("paged", 10), ("paged", 10), ("paged", 5), ("paged-2", 2)] {
        let out = passed(run(cluster, count).await, "RunTask");
        if cluster == "paged" {
            arns.extend(out.tasks().iter().filter_map(|t| t.task_arn()).map(str::to_string));
        }
    }
    for arn in &arns[..5] {
        passed(ecs.stop_task().cluster("paged").task(arn).reason("r".repeat(255)).send().await, "StopTask of 255");
    }

    // ListTasks: maxResults 1-100.
    let rule = aws_rules::LIST_TASKS_MAX_RESULTS;
    refused(p, ecs.list_tasks().cluster("paged").max_results(0).send().await, rule, invalid);
    refused(p, ecs.list_tasks().cluster("paged").max_results(101).send().await, rule, invalid);

    // Pages of maxResults with a nextToken; RUNNING only by default; only the cluster's tasks.
    let mut listed = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let out = passed(
            ecs.list_tasks().cluster("paged").max_results(8).set_next_token(token.clone()).send().await,
            "a ListTasks page",
        );
        pages += 1;
        assert!(out.task_arns().len() <= 8);
        listed.extend(out.task_arns().iter().cloned());
        token = out.next_token().map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    assert_eq!((pages, listed.len()), (3, 20), "20 RUNNING tasks of \"paged\" in pages of 8: {listed:?}");
    assert!(listed.iter().all(|a| a.contains(":task/paged/")), "{listed:?}");
    assert!(arns[..5].iter().all(|a| !listed.contains(a)), "stopped tasks are not listed by default");
    let one_page = passed(ecs.list_tasks().cluster("paged").send().await, "ListTasks");
    assert_eq!((one_page.task_arns().len(), one_page.next_token()), (20, None));
    let stopped =
        passed(ecs.list_tasks().cluster("paged").desired_status(DesiredStatus::Stopped).send().await, "STOPPED");
    assert_eq!(stopped.task_arns().len(), 5);
    let forged = ecs.list_tasks().cluster("paged").next_token("forged").send().await;
    assert_eq!(error_code(&forged).as_deref(), Some(invalid), "a nextToken AWS never gave");

    // startedBy must be the only filter.
    let rule = aws_rules::LIST_TASKS_STARTED_BY_ALONE;
    let by = || ecs.list_tasks().cluster("paged").started_by("gocd-reads");
    refused(p, by().desired_status(DesiredStatus::Running).send().await, rule, invalid);
    refused(p, by().family("reads").send().await, rule, invalid);
    refused(p, by().launch_type(LaunchType::Fargate).send().await, rule, invalid);
    let alone = passed(by().send().await, "startedBy alone");
    assert_eq!(alone.task_arns().len(), 20, "startedBy alone lists RUNNING tasks of the cluster");

    // DescribeTasks: at most 100 tasks.
    let mut many: Vec<String> = listed.clone();
    many.extend((many.len()..101).map(|i| format!("arn:aws:ecs:us-east-1:123456789012:task/paged/{i:032x}")));
    let message = refused(
        p,
        ecs.describe_tasks().cluster("paged").set_tasks(Some(many.clone())).send().await,
        aws_rules::DESCRIBE_TASKS_MAX,
        invalid,
    );
    assert_eq!(message, "Tasks cannot be longer than 100.");
    let described =
        passed(ecs.describe_tasks().cluster("paged").set_tasks(Some(many[..100].to_vec())).send().await, "100");
    assert_eq!(described.tasks().len(), 20);

    // StopTask: reason at most 255 characters.
    refused(
        p,
        ecs.stop_task().cluster("paged").task(&listed[0]).reason("r".repeat(256)).send().await,
        aws_rules::STOP_TASK_REASON_LENGTH,
        invalid,
    );

    // Relaxed, moto's own ListTasks shows through (a stopped task, "paged-2"'s tasks).
    p.relax(aws_rules::LIST_TASKS_PAGING, "the test shows what moto answers without the rule");
    let raw = passed(ecs.list_tasks().cluster("paged").send().await, "ListTasks without the rule");
    assert_eq!(raw.task_arns().len(), 27, "moto lists stopped tasks and \"paged-2\"'s: {:?}", raw.task_arns());
}

/// A stopped task is forgotten as AWS forgets it (an hour after it stopped; 2 s here):
/// DescribeTasks lists it under `failures` as `MISSING`, ListTasks no longer lists it. A task
/// stopped through the proxy counts from its StopTask, one stopped behind the proxy's back from
/// the first answer that shows it STOPPED; a running task is never forgotten. A task of another
/// cluster than the one named is `MISSING` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stopped_tasks_are_forgotten_as_aws_forgets_them() {
    let w = Rig::new().await;
    let p = &w.proxy;
    let ecs = w.ecs();
    let td = w.task_definition("forgotten", false, false).await;
    moto::create_cluster(&w.direct, "kept").await;
    p.forget_stopped_tasks_after(Duration::from_secs(2));
    let out = ecs
        .run_task()
        .cluster("kept")
        .task_definition(&td)
        .launch_type(LaunchType::Fargate)
        .network_configuration(w.network())
        .count(4)
        .send()
        .await;
    let arns: Vec<String> =
        passed(out, "RunTask").tasks().iter().filter_map(|t| t.task_arn()).map(str::to_string).collect();
    for arn in &arns[..2] {
        passed(ecs.stop_task().cluster("kept").task(arn).send().await, "StopTask through the proxy");
    }
    let direct = aws_sdk_ecs::Client::new(&w.direct);
    passed(direct.stop_task().cluster("kept").task(&arns[2]).send().await, "StopTask behind the proxy's back");
    let describe = || ecs.describe_tasks().cluster("kept").set_tasks(Some(arns.clone())).send();
    let stopped = || ecs.list_tasks().cluster("kept").desired_status(DesiredStatus::Stopped).send();

    let now = passed(describe().await, "DescribeTasks");
    assert_eq!((now.tasks().len(), now.failures().len()), (4, 0), "just stopped: still described");
    assert_eq!(passed(stopped().await, "ListTasks STOPPED").task_arns().len(), 3);

    tokio::time::sleep(Duration::from_millis(2200)).await;
    let later = passed(describe().await, "DescribeTasks");
    let described: Vec<&str> = later.tasks().iter().filter_map(|t| t.task_arn()).collect();
    assert_eq!(described, [arns[3].as_str()], "only the running task is described");
    let mut missing: Vec<(&str, &str)> =
        later.failures().iter().map(|f| (f.arn().unwrap_or(""), f.reason().unwrap_or(""))).collect();
    missing.sort_unstable();
    let mut expected: Vec<(&str, &str)> = arns[..3].iter().map(|a| (a.as_str(), "MISSING")).collect();
    expected.sort_unstable();
    assert_eq!(missing, expected, "the stopped tasks are MISSING");
    assert!(passed(stopped().await, "ListTasks STOPPED").task_arns().is_empty(), "forgotten tasks are not listed");
    let stop_again = ecs.stop_task().cluster("kept").task(&arns[0]).send().await;
    let err = stop_again.expect_err("StopTask of a forgotten task passed");
    let service = err.as_service_error().unwrap_or_else(|| panic!("not a service error: {}", aws_error_text(&err)));
    assert_eq!(
        (service.code(), service.message()),
        (Some("InvalidParameterException"), Some("The referenced task was not found.")),
        "StopTask of a forgotten task"
    );
    let running = passed(ecs.list_tasks().cluster("kept").send().await, "ListTasks");
    assert_eq!(running.task_arns(), [arns[3].clone()]);

    p.relax(aws_rules::STOPPED_TASKS_FORGOTTEN, "the test shows moto's own answer");
    assert_eq!(passed(describe().await, "DescribeTasks").tasks().len(), 4, "moto keeps every task");

    // Only the named cluster's tasks are described.
    moto::create_cluster(&w.direct, "elsewhere").await;
    let asked_elsewhere = ecs.describe_tasks().cluster("elsewhere").set_tasks(Some(arns.clone())).send().await;
    let asked_elsewhere = passed(asked_elsewhere, "DescribeTasks in another cluster");
    assert!(asked_elsewhere.tasks().is_empty(), "tasks of \"kept\" described in \"elsewhere\"");
    assert_eq!(asked_elsewhere.failures().len(), 4);
    assert!(asked_elsewhere.failures().iter().all(|f| f.reason() == Some("MISSING")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ec2_and_sts_rules_refuse_what_aws_refuses() {
    let w = Rig::new().await;
    let p = &w.proxy;
    p.relax(
        aws_rules::EC2_REQUEST_RATE,
        "this test sends RunInstances back to back to check what EC2 validates; the rates have a test of their own",
    );
    aws_sdk_iam::Client::new(&w.direct)
        .create_instance_profile()
        .instance_profile_name("agents")
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateInstanceProfile: {}", aws_error_text(&e)));
    let ec2 = aws_sdk_ec2::Client::new(&w.via);
    let launch = || {
        ec2.run_instances()
            .image_id(AMI)
            .instance_type(aws_sdk_ec2::types::InstanceType::C5Xlarge)
            .min_count(1)
            .max_count(1)
            .subnet_id(&w.net.subnet_ids[0])
    };
    let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![b'#'; n]);

    // User data: at most 16 KB before base64.
    let rule = aws_rules::EC2_USER_DATA_SIZE;
    refused(p, launch().user_data(b64(16 * 1024 + 1)).send().await, rule, "InvalidParameterValue");
    passed(launch().user_data(b64(16 * 1024)).send().await, "user data of 16 KB");
    passed(launch().user_data(b64(16 * 1024 - 1)).send().await, "user data of 16 KB - 1");

    // The root volume: at least the AMI's 30 GiB, on the AMI's root device.
    use aws_sdk_ec2::types::{BlockDeviceMapping, EbsBlockDevice, IamInstanceProfileSpecification, ResourceType};
    let root = |device: &str, gib: i32| {
        BlockDeviceMapping::builder()
            .device_name(device)
            .ebs(EbsBlockDevice::builder().volume_size(gib).build())
            .build()
    };
    let rule = aws_rules::EC2_ROOT_VOLUME_SIZE;
    refused(p, launch().block_device_mappings(root("/dev/xvda", 20)).send().await, rule, "InvalidBlockDeviceMapping");
    passed(launch().block_device_mappings(root("/dev/xvda", 30)).send().await, "a 30 GiB root volume");
    // On Windows the root device is `/dev/sda1` (as DescribeImages names it), and `/dev/xvda` a
    // data volume, which may be small.
    let windows = world::ec2::windows_ami(&w.via).await;
    let on_windows = |device: &str, gib: i32| launch().image_id(&windows).block_device_mappings(root(device, gib));
    refused(p, on_windows("/dev/sda1", 20).send().await, rule, "InvalidBlockDeviceMapping");
    passed(on_windows("/dev/sda1", 30).send().await, "a 30 GiB Windows root volume");
    passed(on_windows("/dev/xvda", 20).send().await, "a 20 GiB data volume on Windows");

    // The instance profile by ARN or by name, not both.
    let both = IamInstanceProfileSpecification::builder()
        .arn("arn:aws:iam::123456789012:instance-profile/agents")
        .name("agents")
        .build();
    let rule = aws_rules::EC2_INSTANCE_PROFILE_ARN_OR_NAME;
    refused(p, launch().iam_instance_profile(both).send().await, rule, "InvalidParameterCombination");
    let by_name = IamInstanceProfileSpecification::builder().name("agents").build();
    passed(launch().iam_instance_profile(by_name).send().await, "the profile by name");

    // Tags: at most 50 per resource, keys unique.
    let tags = |keys: &[String]| {
        aws_sdk_ec2::types::TagSpecification::builder()
            .resource_type(ResourceType::Instance)
            .set_tags(Some(keys.iter().map(|k| aws_sdk_ec2::types::Tag::builder().key(k).value("v").build()).collect()))
            .build()
    };
    let keys: Vec<String> = (0..51).map(|i| format!("k{i}")).collect();
    let rule = aws_rules::EC2_TAGS;
    refused(p, launch().tag_specifications(tags(&keys)).send().await, rule, "InvalidParameterValue");
    let dup = vec!["gocd:server".to_string(), "gocd:server".to_string()];
    refused(p, launch().tag_specifications(tags(&dup)).send().await, rule, "InvalidParameterValue");
    passed(launch().tag_specifications(tags(&keys[..50])).send().await, "50 tags");

    // The instance type's architecture must be the AMI's.
    let x86 = world::ec2::al2023_ami(&w.via, "x86_64").await;
    let arm = world::ec2::al2023_ami(&w.via, "arm64").await;
    let typed = |ami: &str, t: aws_sdk_ec2::types::InstanceType| launch().image_id(ami).instance_type(t);
    use aws_sdk_ec2::types::InstanceType::{C5Xlarge, C6gXlarge};
    let rule = aws_rules::EC2_ARCHITECTURE;
    let message = refused(p, typed(&x86, C6gXlarge).send().await, rule, "InvalidParameterValue");
    assert!(
        message.contains(
            "The architecture 'arm64' of the specified instance type does not match the architecture 'x86_64' of the specified AMI"
        ),
        "{message}"
    );
    refused(p, typed(&arm, C5Xlarge).send().await, rule, "InvalidParameterValue");
    passed(typed(&arm, C6gXlarge).send().await, "an arm64 type with an arm64 AMI");
    passed(typed(&x86, C5Xlarge).send().await, "an x86_64 type with an x86_64 AMI");
    passed(launch().instance_type(C6gXlarge).send().await, "an AMI moto does not know: not checked");

    // Describe calls: at most 200 filter values, over all of a call's filters.
    use aws_sdk_ec2::types::Filter;
    let ids = |n: usize| (0..n).map(|i| format!("i-{i:017x}")).collect::<Vec<_>>();
    let by_ids = |n: usize| {
        let tag = Filter::builder().name("tag:gocd:server-id").values("s").build();
        let ids = Filter::builder().name("instance-id").set_values(Some(ids(n))).build();
        ec2.describe_instances().filters(tag).filters(ids).send()
    };
    let rule = aws_rules::EC2_FILTER_VALUES;
    let message = refused(p, by_ids(200).await, rule, "FilterLimitExceeded");
    assert!(message.starts_with("The maximum number of filter values specified on a single call is 200"), "{message}");
    passed(by_ids(199).await, "199 instance ids and one tag value");

    // STS AssumeRole: RoleSessionName 2-64 of [\w+=,.@-], ExternalId 2-1224 of [\w+=,.@:/-].
    let sts = aws_sdk_sts::Client::new(&w.via);
    let assume = |name: &str| sts.assume_role().role_arn(ROLE_ARN).role_session_name(name);
    let rule = aws_rules::STS_ROLE_SESSION_NAME;
    let message = refused(p, assume("g").send().await, rule, "ValidationError");
    assert!(message.contains("'roleSessionName' failed to satisfy constraint"), "{message}");
    refused(p, assume(&"g".repeat(65)).send().await, rule, "ValidationError");
    refused(p, assume("gocd agent").send().await, rule, "ValidationError");
    refused(p, assume("gocd/agent").send().await, rule, "ValidationError");
    passed(assume(&format!("gocd_+=,.@-{}", "x".repeat(53))).send().await, "a session name of 64");
    let rule = aws_rules::STS_EXTERNAL_ID;
    refused(p, assume("gocd").external_id("x").send().await, rule, "ValidationError");
    refused(p, assume("gocd").external_id("a b").send().await, rule, "ValidationError");
    refused(p, assume("gocd").external_id("e".repeat(1225)).send().await, rule, "ValidationError");
    passed(assume("gocd").external_id("tenant:42/prod=1,a.b@c-d_e+f").send().await, "a good external id");
    passed(assume("gocd").external_id("e".repeat(1224)).send().await, "an external id of 1224");
}

/// An assumed-role session is refused once its `Expiration` has passed, as AWS refuses it
/// (`ExpiredTokenException`, HTTP 403, in ECS's and EC2's wire formats); moto's hour holds
/// unless a test shortens sessions; a new session from the same role passes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_expired_session_is_refused_with_expired_token() {
    let w = Rig::new().await;
    let p = &w.proxy;
    let rule = aws_rules::STS_SESSION_EXPIRY;
    let (hour, expires) = moto::assume_role_with(&w.via, ROLE_ARN, "hour").await;
    let left = expires.duration_since(SystemTime::now()).unwrap_or_default();
    assert!(left > Duration::from_secs(3500), "moto's default session: an hour, not {left:?}");

    p.shorten_sessions(Duration::from_secs(2));
    let (short, expires) = moto::assume_role_with(&w.via, ROLE_ARN, "short").await;
    let left = expires.duration_since(SystemTime::now()).unwrap_or_default();
    assert!(left <= Duration::from_secs(2), "a shortened session's Expiration is {left:?} away");
    let ecs = aws_sdk_ecs::Client::new(&via(p, &short, moto::REGION).await);
    let ec2 = aws_sdk_ec2::Client::new(&via(p, &short, moto::REGION).await);
    passed(ecs.list_clusters().send().await, "ECS with a live session");
    passed(ec2.describe_instances().send().await, "EC2 with a live session");

    tokio::time::sleep(left + Duration::from_millis(200)).await;
    let message = refused_with(p, ecs.list_clusters().send().await, rule, "ExpiredTokenException", 403);
    assert_eq!(message, "The security token included in the request is expired");
    refused_with(p, ec2.describe_instances().send().await, rule, "ExpiredTokenException", 403);
    let long = aws_sdk_ecs::Client::new(&via(p, &hour, moto::REGION).await);
    passed(long.list_clusters().send().await, "the hour-long session, still live");
    let (fresh, _) = moto::assume_role_with(&w.via, ROLE_ARN, "fresh").await;
    let renewed = aws_sdk_ecs::Client::new(&via(p, &fresh, moto::REGION).await);
    passed(renewed.list_clusters().send().await, "a new session of the same role");
    let base = aws_sdk_ecs::Client::new(&w.via);
    passed(base.list_clusters().send().await, "base keys, which no AssumeRole handed out");

    p.relax(rule, "the test shows the rule can be switched off");
    passed(ecs.list_clusters().send().await, "an expired session, the rule relaxed");
}

/// Sends `n` calls at once; how many were throttled (`ThrottlingException`, EC2's
/// `RequestLimitExceeded`), and how long it took.
async fn burst<F, Fut, O, E>(n: usize, call: F) -> (usize, usize, Duration)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<O, SdkError<E, Response>>> + Send + 'static,
    O: Send + 'static,
    E: ProvideErrorMetadata + Send + 'static,
{
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let fut = call();
        set.spawn(async move {
            matches!(error_code(&fut.await).as_deref(), Some("ThrottlingException" | "RequestLimitExceeded"))
        });
    }
    let mut throttled = 0;
    while let Some(t) = set.join_next().await {
        throttled += usize::from(t.unwrap());
    }
    (n - throttled, throttled, started.elapsed())
}

/// `passed` calls of a bucket of `burst`, refilled at `per_second`, over `elapsed`: at least the
/// burst, at most what the bucket could give, and some throttled.
#[track_caller]
fn bucket_held(what: &str, (passed, throttled, elapsed): (usize, usize, Duration), burst: f64, per_second: f64) {
    let most = burst + per_second * elapsed.as_secs_f64() + 1.0;
    eprintln!("{what}: {passed} passed, {throttled} throttled in {elapsed:?} (burst {burst}, {per_second}/s)");
    assert!(throttled > 0, "{what}: nothing throttled");
    assert!(passed as f64 >= burst && passed as f64 <= most, "{what}: {passed} passed, expected {burst}..{most}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quotas_throttle_per_account_and_region() {
    let w = Rig::new().await;
    let p = &w.proxy;
    let ecs = w.ecs();
    let fake_net = network(&["subnet-00000001".to_string()], &["sg-00000001".to_string()]);

    // RunTask on Fargate: 20 calls at once, 20 a second (us-west-2 here: a region of its own).
    let west = aws_sdk_ecs::Client::new(&via(p, &moto::test_credentials(), "us-west-2").await);
    let fargate_call = {
        let (west, net) = (west.clone(), fake_net.clone());
        move || {
            west.run_task()
                .cluster("nowhere")
                .task_definition("nothing")
                .launch_type(LaunchType::Fargate)
                .network_configuration(net.clone())
                .send()
        }
    };
    bucket_held("Fargate RunTask calls", burst(40, fargate_call).await, 20.0, 20.0);
    assert!(p.aws_refusals().iter().all(|r| r.rule == aws_rules::FARGATE_RUN_TASK_RATE && r.region == "us-west-2"));

    // Fargate launches: 100 tasks at once, 20 a second, on-demand and Spot apart (us-east-1: the
    // west's throttling does not reach it). Calls of 10 tasks until one is throttled.
    let started = Instant::now();
    let mut launched = 0;
    let throttled = loop {
        let r = ecs
            .run_task()
            .cluster("nowhere")
            .task_definition("nothing")
            .count(10)
            .launch_type(LaunchType::Fargate)
            .network_configuration(fake_net.clone())
            .send()
            .await;
        match error_code(&r).as_deref() {
            Some("ThrottlingException") => break p.aws_refusals().pop().unwrap(),
            _ if launched < 200 => launched += 10,
            _ => panic!("200 Fargate launches without a throttle"),
        }
    };
    assert_eq!(throttled.rule, aws_rules::FARGATE_ON_DEMAND_LAUNCH_RATE);
    let most = 100.0 + 20.0 * started.elapsed().as_secs_f64();
    assert!(launched >= 100 && launched as f64 <= most, "{launched} launches before the throttle");
    let spot = ecs
        .run_task()
        .cluster("nowhere")
        .task_definition("nothing")
        .count(10)
        .capacity_provider_strategy(strategy("FARGATE_SPOT"))
        .network_configuration(fake_net.clone())
        .send()
        .await;
    assert_ne!(error_code(&spot).as_deref(), Some("ThrottlingException"), "Spot launches have their own bucket");

    // Reads: 100 at once, 20 a second, per account: another account still reads; relaxed, all do.
    let list = {
        let ecs = ecs.clone();
        move || ecs.list_clusters().send()
    };
    bucket_held("ECS reads", burst(130, list.clone()).await, 100.0, 20.0);
    assert_eq!(p.aws_refusals().pop().unwrap().rule, aws_rules::READ_RATE);
    let (role, _) = moto::assume_role_with(&w.via, ROLE_ARN, "quotas").await;
    let other = aws_sdk_ecs::Client::new(&via(p, &role, moto::REGION).await);
    passed(other.list_clusters().send().await, "a read in the role's account");
    assert_eq!(p.log().last().unwrap().assumed_account.as_deref(), Some("111111111111"));
    p.relax(aws_rules::READ_RATE, "the test shows the rule can be switched off");
    let (_, throttled, _) = burst(50, list).await;
    assert_eq!(throttled, 0, "relaxed, no read is throttled");

    // RegisterTaskDefinition: 20 at once, 1 a second.
    let register = {
        let ecs = ecs.clone();
        move || {
            ecs.register_task_definition()
                .family("burst")
                .requires_compatibilities(Compatibility::Ec2)
                .container_definitions(container("agent"))
                .send()
        }
    };
    bucket_held("RegisterTaskDefinition", burst(26, register).await, 20.0, 1.0);
    assert_eq!(p.aws_refusals().pop().unwrap().rule, aws_rules::REGISTER_TD_RATE);

    // RunTask/StartTask on EC2 and StopTask: 100 at once, 40 a second.
    let stop = {
        let ecs = ecs.clone();
        move || ecs.stop_task().cluster("nowhere").task("0123456789abcdef").reason("quota").send()
    };
    bucket_held("StopTask", burst(150, stop).await, 100.0, 40.0);
    assert_eq!(p.aws_refusals().pop().unwrap().rule, aws_rules::EC2_RUN_START_STOP_RATE);
    // Every throttle in AWS's wire format and never forwarded.
    assert!(p
        .log()
        .iter()
        .filter(|r| r.rule.as_deref().is_some_and(|r| r.starts_with("aws-rules:")))
        .all(|r| r.status == 400 && r.outcome == proxy::Outcome::Answered));
}

/// EC2's own throttling, per action: `RunInstances` 5 at once and 2 a second, another action not
/// held by it; unfiltered and unpaged `DescribeInstances` 50 and 10 a second, apart from the
/// filtered or paged calls' bucket; instances terminated at most 1000 at once. EC2's answer:
/// `RequestLimitExceeded`, HTTP 503, never forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ec2_rates_throttle_per_action_as_ec2_does() {
    let w = Rig::new().await;
    let p = &w.proxy;
    let ec2 = aws_sdk_ec2::Client::new(&w.via);
    let launch = {
        let (ec2, subnet) = (ec2.clone(), w.net.subnet_ids[0].clone());
        move || {
            ec2.run_instances()
                .image_id(AMI)
                .instance_type(aws_sdk_ec2::types::InstanceType::C5Xlarge)
                .min_count(1)
                .max_count(1)
                .subnet_id(subnet.clone())
                .send()
        }
    };
    bucket_held("RunInstances calls", burst(9, launch.clone()).await, 5.0, 2.0);
    let last = p.aws_refusals().pop().unwrap();
    assert_eq!(
        (last.rule, last.code.as_str(), last.status),
        (aws_rules::EC2_REQUEST_RATE, "RequestLimitExceeded", 503)
    );
    let filter = aws_sdk_ec2::types::Filter::builder().name("instance-state-name").values("running").build();
    passed(ec2.describe_instances().filters(filter.clone()).send().await, "another action, its own bucket");

    let unfiltered = {
        let ec2 = ec2.clone();
        move || ec2.describe_instances().send()
    };
    bucket_held("unfiltered, unpaged DescribeInstances", burst(70, unfiltered).await, 50.0, 10.0);
    passed(ec2.describe_instances().filters(filter).send().await, "a filtered DescribeInstances: the larger bucket");
    passed(ec2.describe_instances().max_results(5).send().await, "a paged DescribeInstances: the larger bucket");

    let ids = |n: usize| (0..n).map(|i| format!("i-{i:017x}")).collect::<Vec<_>>();
    let terminate = |n| ec2.terminate_instances().set_instance_ids(Some(ids(n))).send();
    let message = refused_with(p, terminate(1001).await, aws_rules::EC2_RESOURCE_RATE, "RequestLimitExceeded", 503);
    assert_eq!(message, "Request limit exceeded.");
    let under = terminate(20).await;
    assert_ne!(error_code(&under).as_deref(), Some("RequestLimitExceeded"), "20 instances are within the bucket");

    p.relax(aws_rules::EC2_REQUEST_RATE, "the test shows the rule can be switched off");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, throttled, _) = burst(9, launch).await;
    assert_eq!(throttled, 0, "relaxed, no RunInstances is throttled");
    assert!(p
        .log()
        .iter()
        .filter(|r| r.rule.as_deref().is_some_and(|r| r.starts_with("aws-rules:ec2.")))
        .all(|r| r.status == 503 && r.outcome == proxy::Outcome::Answered));
}

#[tokio::test]
async fn relax_names_a_rule() {
    let proxy = Proxy::start(([127, 0, 0, 1], 9).into()).await;
    proxy.relax(aws_rules::RUN_TASK_TAGS, "a test of relax itself");
    let unknown = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| proxy.relax("ecs.no_such_rule", "typo")));
    assert!(unknown.is_err(), "an unknown rule name must panic, not relax nothing");
    assert_eq!(aws_rules::RULES.len(), aws_rules::RULES.iter().collect::<std::collections::HashSet<_>>().len());
}

/// Registers a task definition requiring `compat` (none: moto's and AWS's default, EC2) straight in moto.
async fn task_definition_for(w: &Rig, family: &str, compat: &[Compatibility]) -> String {
    let out = aws_sdk_ecs::Client::new(&w.direct)
        .register_task_definition()
        .family(family)
        .set_requires_compatibilities((!compat.is_empty()).then(|| compat.to_vec()))
        .network_mode(NetworkMode::Awsvpc)
        .cpu("1024")
        .memory("2048")
        .container_definitions(container("agent"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("RegisterTaskDefinition: {}", aws_error_text(&e)));
    out.task_definition().and_then(|t| t.task_definition_arn()).unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn capacity_provider_rules_refuse_what_aws_refuses() {
    use aws_sdk_ecs::types::{AutoScalingGroupProvider, CapacityProviderType, HostVolumeProperties, Resource, Volume};
    let w = Rig::new().await;
    let p = &w.proxy;
    let direct = aws_sdk_ecs::Client::new(&w.direct);
    // The cluster's providers: an Auto Scaling group's (moto knows it) and an ECS Managed
    // Instances one (the world's stand-in), with one container instance for moto to place on.
    let asg = AutoScalingGroupProvider::builder()
        .auto_scaling_group_arn("arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:1:autoScalingGroupName/g")
        .build()
        .unwrap();
    direct.create_capacity_provider().name("ci-asg").auto_scaling_group_provider(asg).send().await.unwrap();
    p.managed_instances_provider("ci-mi");
    direct
        .put_cluster_capacity_providers()
        .cluster(CLUSTER)
        .capacity_providers("ci-asg")
        .capacity_providers("ci-mi")
        .set_default_capacity_provider_strategy(Some(vec![]))
        .send()
        .await
        .unwrap();
    let instance = aws_sdk_ec2::Client::new(&w.direct)
        .run_instances()
        .image_id(AMI)
        .instance_type(aws_sdk_ec2::types::InstanceType::C5Xlarge)
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .unwrap();
    let id = instance.instances()[0].instance_id().unwrap().to_string();
    let resource =
        |name: &str, value: i32| Resource::builder().name(name).r#type("INTEGER").integer_value(value).build();
    direct
        .register_container_instance()
        .cluster(CLUSTER)
        .instance_identity_document(serde_json::json!({ "instanceId": id, "region": "us-east-1" }).to_string())
        .total_resources(resource("CPU", 4096))
        .total_resources(resource("MEMORY", 7482))
        .send()
        .await
        .unwrap();
    let fargate_only = task_definition_for(&w, "fargate-only", &[Compatibility::Fargate]).await;
    let ec2_default = task_definition_for(&w, "ec2-default", &[]).await;
    let both = task_definition_for(&w, "both", &[Compatibility::Fargate, Compatibility::Ec2]).await;
    let managed = task_definition_for(&w, "managed", &[Compatibility::Fargate, Compatibility::ManagedInstances]).await;
    let through = |providers: &[(&str, i32)], td: &str| {
        let items: Vec<CapacityProviderStrategyItem> = providers
            .iter()
            .map(|(name, base)| {
                CapacityProviderStrategyItem::builder().capacity_provider(*name).weight(1).base(*base).build().unwrap()
            })
            .collect();
        w.ecs()
            .run_task()
            .cluster(CLUSTER)
            .task_definition(td)
            .set_capacity_provider_strategy(Some(items))
            .network_configuration(w.network())
    };
    let invalid = "InvalidParameterException";

    // At most 20 providers, at most one with a base.
    let many: Vec<(String, i32)> = (0..21).map(|i| (format!("p{i}"), 0)).collect();
    let many: Vec<(&str, i32)> = many.iter().map(|(n, b)| (n.as_str(), *b)).collect();
    refused(p, through(&many, &both).send().await, aws_rules::RUN_TASK_STRATEGY_LIMITS, invalid);
    let message = refused(
        p,
        through(&[("FARGATE", 1), ("FARGATE_SPOT", 2)], &fargate_only).send().await,
        aws_rules::RUN_TASK_STRATEGY_LIMITS,
        invalid,
    );
    assert!(message.contains("Only one capacity provider"), "{message}");
    passed(through(&[("FARGATE", 1), ("FARGATE_SPOT", 0)], &fargate_only).send().await, "one base, two Fargates");

    // Fargate providers never with an Auto Scaling group's or Managed Instances' in one strategy.
    let message = refused(
        p,
        through(&[("FARGATE", 0), ("ci-asg", 0)], &both).send().await,
        aws_rules::RUN_TASK_STRATEGY_MIX,
        invalid,
    );
    assert!(message.contains("cannot contain a mix of capacity providers"), "{message}");
    refused(
        p,
        through(&[("ci-mi", 0), ("FARGATE_SPOT", 0)], &managed).send().await,
        aws_rules::RUN_TASK_STRATEGY_MIX,
        invalid,
    );

    // A provider must be one of the cluster's.
    refused(p, through(&[("other-asg", 0)], &both).send().await, aws_rules::RUN_TASK_PROVIDER_IN_CLUSTER, invalid);
    let on_asg = passed(through(&[("ci-asg", 0)], &both).send().await, "the cluster's ASG provider");
    assert_eq!(on_asg.tasks()[0].capacity_provider_name(), Some("ci-asg"));

    // The task definition must suit the provider.
    let rule = aws_rules::RUN_TASK_PROVIDER_COMPATIBILITY;
    let message = refused(p, through(&[("ci-asg", 0)], &fargate_only).send().await, rule, invalid);
    assert!(message.starts_with("Task definition does not support launch_type EC2"), "{message}");
    let message = refused(p, through(&[("ci-mi", 0)], &both).send().await, rule, invalid);
    assert!(message.starts_with("Task definition does not support launch_type MANAGED_INSTANCES"), "{message}");
    refused(p, through(&[("FARGATE", 0)], &ec2_default).send().await, rule, invalid);
    passed(through(&[("ci-asg", 0)], &ec2_default).send().await, "no requiresCompatibilities is EC2");
    let on_mi = passed(through(&[("ci-mi", 0)], &managed).send().await, "Managed Instances with its compatibility");
    assert_eq!(on_mi.tasks()[0].capacity_provider_name(), Some("ci-mi"), "moto placed it on the instance");

    // Managed Instances needs awsvpc networking on RunTask.
    let no_network =
        w.ecs().run_task().cluster(CLUSTER).task_definition(&managed).capacity_provider_strategy(strategy("ci-mi"));
    refused(p, no_network.send().await, aws_rules::RUN_TASK_AWSVPC, invalid);

    // DescribeCapacityProviders answers the stand-in as AWS would.
    let described = passed(
        w.ecs().describe_capacity_providers().capacity_providers("ci-mi").capacity_providers("ci-asg").send().await,
        "DescribeCapacityProviders",
    );
    assert!(described.failures().is_empty(), "{:?}", described.failures());
    let mi = described.capacity_providers().iter().find(|c| c.name() == Some("ci-mi")).expect("ci-mi described");
    assert_eq!(mi.r#type(), Some(&CapacityProviderType::ManagedInstances));
    assert!(mi.managed_instances_provider().is_some());
    assert_eq!(mi.status().map(|s| s.as_str()), Some("ACTIVE"));

    // Task definitions for Managed Instances: none of what ECS refuses there.
    let rule = aws_rules::TD_MANAGED_INSTANCES;
    let mi_td = || {
        w.ecs()
            .register_task_definition()
            .family("mi")
            .requires_compatibilities(Compatibility::ManagedInstances)
            .network_mode(NetworkMode::Awsvpc)
            .cpu("1024")
            .memory("2048")
    };
    let message = refused(
        p,
        mi_td()
            .container_definitions(container("agent"))
            .ephemeral_storage(EphemeralStorage::builder().size_in_gib(50).build())
            .send()
            .await,
        rule,
        "ClientException",
    );
    assert!(message.contains("ephemeralStorage") && message.contains("MANAGED_INSTANCES"), "{message}");
    let shm = ContainerDefinition::builder()
        .name("agent")
        .image(IMAGE)
        .cpu(512)
        .memory(1024)
        .linux_parameters(LinuxParameters::builder().shared_memory_size(64).build())
        .build();
    refused(p, mi_td().container_definitions(shm).send().await, rule, "ClientException");
    let labels = ContainerDefinition::builder().name("agent").image(IMAGE).memory(1024).docker_labels("a", "b").build();
    refused(p, mi_td().container_definitions(labels).send().await, rule, "ClientException");
    let host =
        Volume::builder().name("cache").host(HostVolumeProperties::builder().source_path("/cache").build()).build();
    refused(p, mi_td().container_definitions(container("agent")).volumes(host).send().await, rule, "ClientException");
    passed(mi_td().container_definitions(container("agent")).send().await, "a plain Managed Instances task definition");
    eprintln!("FIGURES: aws_rules capacity {} refusals", p.aws_refusals().len());
}

/// `ecs.container_instance_resources`: through the proxy, a container instance registers what
/// ECS registers for its type (1024 CPU units a vCPU, 7482 MiB of each 8192 of its memory), and
/// its remaining resources follow the tasks started and stopped on it; relaxed, moto's own
/// 4096 units and 7482 MiB for every type.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn container_instances_register_what_ecs_registers_for_their_type() {
    use aws_sdk_ec2::types::InstanceType;
    use aws_sdk_ecs::types::{ContainerInstance, Resource};
    let w = Rig::new().await;
    let ec2 = aws_sdk_ec2::Client::new(&w.direct);
    let resource =
        |name: &str, value: i32| Resource::builder().name(name).r#type("INTEGER").integer_value(value).build();
    // An m5.4xlarge (16 vCPUs, 65536 MiB) registered through the proxy, a c5.xlarge (4 vCPUs,
    // 8192 MiB) straight in moto, each with the totals its ECS agent would send.
    let mut arns = Vec::new();
    for (instance_type, cpu, memory) in [(InstanceType::M54xlarge, 16384, 59856), (InstanceType::C5Xlarge, 4096, 7482)]
    {
        let launched = ec2
            .run_instances()
            .image_id(AMI)
            .instance_type(instance_type.clone())
            .min_count(1)
            .max_count(1)
            .send()
            .await
            .unwrap_or_else(|e| panic!("RunInstances: {}", aws_error_text(&e)));
        let id = launched.instances()[0].instance_id().unwrap().to_string();
        let ecs = if instance_type == InstanceType::M54xlarge { w.ecs() } else { aws_sdk_ecs::Client::new(&w.direct) };
        let registered = passed(
            ecs.register_container_instance()
                .cluster(CLUSTER)
                .instance_identity_document(serde_json::json!({ "instanceId": id, "region": "us-east-1" }).to_string())
                .total_resources(resource("CPU", cpu))
                .total_resources(resource("MEMORY", memory))
                .send()
                .await,
            "RegisterContainerInstance",
        );
        let instance = registered.container_instance().unwrap();
        arns.push(instance.container_instance_arn().unwrap().to_string());
        if instance_type == InstanceType::M54xlarge {
            assert_eq!(figures(instance.registered_resources()), (16384, 59856), "the registration's answer");
        }
    }
    let described = || async {
        let out = passed(
            w.ecs()
                .describe_container_instances()
                .cluster(CLUSTER)
                .set_container_instances(Some(arns.clone()))
                .send()
                .await,
            "DescribeContainerInstances",
        );
        let by_arn = |arn: &str| -> ContainerInstance {
            out.container_instances().iter().find(|c| c.container_instance_arn() == Some(arn)).unwrap().clone()
        };
        let (m5, c5) = (by_arn(&arns[0]), by_arn(&arns[1]));
        [m5, c5].map(|c| (figures(c.registered_resources()), figures(c.remaining_resources())))
    };
    assert_eq!(described().await, [((16384, 59856), (16384, 59856)), ((4096, 7482), (4096, 7482))]);

    // A task of 4096 units and 8192 MiB (more than moto's own figures) started on the
    // m5.4xlarge, then stopped.
    let family = aws_sdk_ecs::Client::new(&w.direct)
        .register_task_definition()
        .family("large")
        .container_definitions(ContainerDefinition::builder().name("agent").image(IMAGE).cpu(4096).memory(8192).build())
        .send()
        .await
        .unwrap_or_else(|e| panic!("RegisterTaskDefinition: {}", aws_error_text(&e)));
    let td = family.task_definition().and_then(|t| t.task_definition_arn()).unwrap();
    let started = passed(
        w.ecs().start_task().cluster(CLUSTER).task_definition(td).container_instances(&arns[0]).send().await,
        "StartTask on the m5.4xlarge",
    );
    let task = started.tasks()[0].task_arn().unwrap().to_string();
    assert_eq!(described().await, [((16384, 59856), (12288, 51664)), ((4096, 7482), (4096, 7482))]);
    passed(w.ecs().stop_task().cluster(CLUSTER).task(&task).send().await, "StopTask");
    assert_eq!(described().await, [((16384, 59856), (16384, 59856)), ((4096, 7482), (4096, 7482))]);

    w.proxy.relax(aws_rules::CONTAINER_INSTANCE_RESOURCES, "the test shows what moto answers without the rule");
    assert_eq!(described().await, [((4096, 7482), (4096, 7482)), ((4096, 7482), (4096, 7482))]);
}

/// CPU units and MiB of a `registeredResources` or `remainingResources` list.
fn figures(resources: &[aws_sdk_ecs::types::Resource]) -> (i32, i32) {
    let get = |name: &str| resources.iter().find(|r| r.name() == Some(name)).map_or(-1, |r| r.integer_value());
    (get("CPU"), get("MEMORY"))
}
