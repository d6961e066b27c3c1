//! `try` against moto behind the strict proxy, run as an operator runs it: one agent task
//! started for real, watched until RUNNING, then stopped, with its task definition deregistered
//! and deleted and no log group made; and, for each failure the strict world produces, the exit
//! status of its class and the sentence that names the cause: a launch AWS refuses for a
//! missing `ExecutionRoleArn` (awslogs on Fargate), no capacity, RunTask throttled past every
//! retry (a quota), invalid profiles, and tasks that stop before RUNNING for ECS's documented
//! reasons (image not found, execution role denied, no route to the registry; moto pulls
//! nothing, so the proxy answers DescribeTasks as ECS does for them); and, with starts timed as
//! ECS times them, its image pull and the SOCI verdict of an ECR image.
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`).

use std::path::PathBuf;
use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_ecs::types::TaskDefinitionStatus;

use crate::world::aws_rules::TD_AWSLOGS_NEEDS_EXECUTION_ROLE;
use crate::world::http::HttpResponse;
use crate::world::moto::{self, Moto, REGION, TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY};
use crate::world::proxy::{Call, Verdict};
use crate::world::starts::TaskStarts;
use crate::world::Proxy;

const CLUSTER: &str = "ci";
const EXECUTION_ROLE: &str = "arn:aws:iam::123456789012:role/agent-execution";

/// moto, the strict proxy in front of it, and moto's own config for looking.
struct Rig {
    _moto: Moto,
    proxy: Proxy,
    direct: SdkConfig,
}

impl Rig {
    async fn new() -> Rig {
        let moto = Moto::start().await;
        let proxy = Proxy::start(moto.addr()).await;
        let direct = moto.base_config().await;
        moto::create_cluster(&direct, CLUSTER).await;
        Rig { _moto: moto, proxy, direct }
    }

    /// Revisions of try's families (`gocd-<key>-try-<hash>`) that are still ACTIVE.
    async fn active_try_task_definitions(&self) -> Vec<String> {
        let out = aws_sdk_ecs::Client::new(&self.direct)
            .list_task_definitions()
            .status(TaskDefinitionStatus::Active)
            .send()
            .await
            .expect("ListTaskDefinitions");
        out.task_definition_arns().iter().filter(|arn| arn.contains("-try-")).cloned().collect()
    }

    /// Checks that nothing of try's is left: no live task, no ACTIVE revision of its family, no
    /// log group made (no CloudWatch Logs call at all went out).
    async fn assert_nothing_left(&self) {
        let live = moto::live_tasks(&self.direct, CLUSTER).await;
        assert!(live.is_empty(), "a task is left: {live:?}");
        let active = self.active_try_task_definitions().await;
        assert!(active.is_empty(), "task definitions are left: {active:?}");
        let logs: Vec<String> = self.proxy.counts().into_keys().filter(|k| k.starts_with("logs")).collect();
        assert!(logs.is_empty(), "try called CloudWatch Logs: {logs:?}");
    }
}

/// What one run said.
#[derive(Debug)]
struct Tried {
    code: Option<i32>,
    stdout: String,
}

fn file(name: &str, props: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ecs-ea-try-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let map: serde_json::Map<String, serde_json::Value> =
        props.iter().map(|(k, v)| (k.to_string(), (*v).into())).collect();
    std::fs::write(&path, serde_json::Value::Object(map).to_string()).unwrap();
    path
}

/// Runs `try` with the test keys and the proxy as AWS.
async fn try_run(proxy: &Proxy, cluster: &[(&str, &str)], elastic: &[(&str, &str)]) -> Tried {
    try_with(proxy, cluster, elastic, &[]).await
}

fn cluster_profile() -> Vec<(&'static str, &'static str)> {
    vec![("ClusterName", CLUSTER), ("Region", REGION), ("AssignPublicIp", "true"), ("LogGroup", "/gocd/agents")]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_runs_one_task_and_leaves_nothing_behind() {
    let w = Rig::new().await;
    let elastic = [("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0"), ("ExecutionRoleArn", EXECUTION_ROLE)];
    let t = try_run(&w.proxy, &cluster_profile(), &elastic).await;
    assert_eq!(t.code, Some(0), "{}", t.stdout);
    for line in
        ["task definition: registered ", "status: RUNNING after ", "phases: ", "logs: group /gocd/agents, stream gocd/"]
    {
        assert!(t.stdout.contains(line), "no {line:?} in:\n{}", t.stdout);
    }
    assert!(t.stdout.contains("cleanup: stopped task "), "{}", t.stdout);
    assert!(t.stdout.contains("cleanup: deregistered and deleted task definition "), "{}", t.stdout);
    assert!(t.stdout.contains("will not register"), "{}", t.stdout);
    // moto gives no pull times, and a Docker Hub image has no SOCI verdict.
    assert!(t.stdout.contains("\npull: ECS gave no pull times for this task"), "{}", t.stdout);
    assert!(!t.stdout.contains("\nsoci: "), "{}", t.stdout);
    assert!(w.proxy.aws_refusals().is_empty(), "{:?}", w.proxy.aws_refusals());
    w.assert_nothing_left().await;
    // The one task it started carries the plugin's ownership tags with server id `try`, and
    // the try tag; its agent got a fake key.
    let all = moto::all_tasks(&w.direct, CLUSTER).await;
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(moto::task_tag(&all[0], "gocd:server-id"), Some("try"));
    assert_eq!(moto::task_tag(&all[0], "gocd:try"), Some("true"));
    assert!(moto::task_tag(&all[0], "gocd:cluster-profile").is_some_and(|k| k.len() == 12));
    let key = moto::task_override_env(&all[0], "GO_EA_AUTO_REGISTER_KEY").unwrap_or_default();
    assert!(key.starts_with("not-a-key"), "{key}");
    assert_eq!(w.proxy.count("ecs:DeleteTaskDefinitions"), 1, "{:?}", w.proxy.counts());
    let key = moto::task_tag(&all[0], "gocd:cluster-profile").unwrap();
    let td = all[0].task_definition_arn().unwrap();
    assert!(td.contains(&format!(":task-definition/gocd-{key}-try-")), "inside the policy's gocd-<key>-*: {td}");
}

/// Once its task runs, `try` says how long the task's image pull took (ECS's `pullStartedAt` to
/// `pullStoppedAt`: the world times each start as ECS does, [`TaskStarts`], each image's pull
/// taking what the test gives it) and, for an image in the account's ECR, `doctor`'s SOCI
/// verdict: no index, with what one could take off a start like this one (60 % of its pull)
/// and how to add one; or the index v2 found. Neither changes how the run ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_says_its_image_pull_and_what_a_soci_index_would_save() {
    let w = Rig::new().await;
    let manifest = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":7023,"digest":"sha256:1111111111111111111111111111111111111111111111111111111111111111"},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","size":32654,"digest":"sha256:2222222222222222222222222222222222222222222222222222222222222222"}]}"#;
    let index = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:3333333333333333333333333333333333333333333333333333333333333333","size":1024,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"com.amazon.soci.index-digest":"sha256:4444444444444444444444444444444444444444444444444444444444444444"}},{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.amazon.soci.index.v2+json","digest":"sha256:4444444444444444444444444444444444444444444444444444444444444444","size":1000}]}"#;
    let (oci_manifest, oci_index) =
        ("application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json");
    crate::images::push_manifest(&w.direct, "gocd/agent", "plain", manifest, oci_manifest).await;
    crate::images::push_manifest(&w.direct, "gocd/agent", "soci", index, oci_index).await;
    let plain = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gocd/agent:plain";
    let soci = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gocd/agent:soci";
    let secs = Duration::from_secs_f64;
    let starts = TaskStarts {
        provisioning: secs(0.3),
        pulls: vec![(plain.to_string(), vec![secs(2.0)]), (soci.to_string(), vec![secs(0.8)])],
        other_pull: secs(0.1),
        container_start: secs(0.3),
    };
    w.proxy.add_rewrite("ecs.task_starts", starts.rewrite());

    let t = try_run(&w.proxy, &cluster_profile(), &[("Image", plain), ("ExecutionRoleArn", EXECUTION_ROLE)]).await;
    assert_eq!(t.code, Some(0), "{}", t.stdout);
    for line in
        ["status: PROVISIONING after ", "status: PENDING after ", "status: RUNNING after ", ", image pull 2.0 s, "]
    {
        assert!(t.stdout.contains(line), "no {line:?} in:\n{}", t.stdout);
    }
    assert!(
        t.stdout.contains("\npull: the image pull took 2.0 s (ECS's pullStartedAt to pullStoppedAt)\n"),
        "{}",
        t.stdout
    );
    let line =
        t.stdout.lines().find(|l| l.starts_with("soci: ")).unwrap_or_else(|| panic!("no soci line:\n{}", t.stdout));
    assert!(line.starts_with(&format!("soci: {plain} has no SOCI index (a SOCI index v1 was not checked")), "{line}");
    assert!(
        line.contains(
            "This task's pull took 2.0 s: a SOCI index could take up to 1.2 s off each start like it (60 % of the pull"
        ),
        "{line}"
    );
    assert!(
        line.contains(&format!("; fix: add a SOCI index v2 with the SOCI CLI (soci convert {plain} <new tag>")),
        "{line}"
    );
    assert!(line.contains("cfn-ecr-aws-soci-index-builder") && line.contains("set Image"), "{line}");
    w.assert_nothing_left().await;

    let t = try_run(&w.proxy, &cluster_profile(), &[("Image", soci), ("ExecutionRoleArn", EXECUTION_ROLE)]).await;
    assert_eq!(t.code, Some(0), "{}", t.stdout);
    assert!(t.stdout.contains("\npull: the image pull took 0.8 s "), "{}", t.stdout);
    assert!(
        t.stdout.contains(&format!(
            "\nsoci: {soci} has a SOCI index v2 sha256:4444444444444444444444444444444444444444444444444444444444444444: \
             Fargate loads its large layers lazily\n"
        )),
        "{}",
        t.stdout
    );
    w.assert_nothing_left().await;
}

/// Fargate with `LogGroup` and no execution role: the strict world refuses the task definition
/// (`ecs.register_task_definition.awslogs_needs_execution_role`, as AWS does); the plugin's own
/// checks know that rule, so try names `ExecutionRoleArn` before it calls AWS at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_names_the_missing_execution_role_arn_that_aws_would_refuse() {
    let w = Rig::new().await;
    let t = try_run(&w.proxy, &cluster_profile(), &[("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0")]).await;
    assert_eq!(t.code, Some(6), "{}", t.stdout);
    let fail = t.stdout.lines().find(|l| l.starts_with("FAIL ")).expect("a FAIL line");
    assert!(fail.starts_with("FAIL execution role: "), "{fail}");
    assert!(fail.contains("ExecutionRoleArn") && fail.contains("; fix: set ExecutionRoleArn"), "{fail}");
    assert!(fail.ends_with("(exit status 6)"), "{fail}");
    assert_eq!(w.proxy.total(), 0, "refused before any AWS call: {:?}", w.proxy.counts());
    w.assert_nothing_left().await;

    // The launch the profiles describe is one the strict world refuses: the same task
    // definition, registered through it, is refused by the rule that names the execution role.
    let via = moto::sdk_config_for(&w.proxy.endpoint(), &moto::test_credentials(), REGION).await;
    let logs = aws_sdk_ecs::types::LogConfiguration::builder()
        .log_driver(aws_sdk_ecs::types::LogDriver::Awslogs)
        .options("awslogs-group", "/gocd/agents")
        .options("awslogs-region", REGION)
        .options("awslogs-stream-prefix", "gocd")
        .build()
        .unwrap();
    let refused = aws_sdk_ecs::Client::new(&via)
        .register_task_definition()
        .family("gocd-try-refused")
        .requires_compatibilities(aws_sdk_ecs::types::Compatibility::Fargate)
        .network_mode(aws_sdk_ecs::types::NetworkMode::Awsvpc)
        .cpu("1024")
        .memory("2048")
        .container_definitions(
            aws_sdk_ecs::types::ContainerDefinition::builder()
                .name("gocd-agent")
                .image("gocd/gocd-agent-alpine-3.19:v24.1.0")
                .log_configuration(logs)
                .build(),
        )
        .send()
        .await;
    assert!(refused.is_err(), "the strict world takes awslogs on Fargate without an execution role");
    let rules: Vec<&str> = w.proxy.aws_refusals().iter().map(|r| r.rule).collect();
    assert_eq!(rules, [TD_AWSLOGS_NEEDS_EXECUTION_ROLE]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_says_no_capacity_and_bad_profiles_with_their_own_statuses() {
    let w = Rig::new().await;
    // Fargate has no room: RunTask answers with AWS's capacity failure, no task.
    w.proxy.add_rule("no fargate capacity", |call: &Call| {
        if call.is("ecs", "RunTask") {
            let reason =
                "Capacity is unavailable at this time. Please try again later or in a different availability zone";
            let body = serde_json::json!({"tasks": [], "failures": [{"reason": reason}]});
            Verdict::Respond(HttpResponse::aws_json(200, &body))
        } else {
            Verdict::Forward
        }
    });
    let elastic = [("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0"), ("ExecutionRoleArn", EXECUTION_ROLE)];
    let t = try_run(&w.proxy, &cluster_profile(), &elastic).await;
    assert_eq!(t.code, Some(8), "{}", t.stdout);
    assert!(t.stdout.contains("FAIL no capacity: "), "{}", t.stdout);
    assert!(t.stdout.contains("cleanup: deregistered and deleted task definition "), "{}", t.stdout);
    w.assert_nothing_left().await;

    // Profiles that do not validate: nothing is called.
    let before = w.proxy.total();
    let t = try_run(&w.proxy, &[("ClusterName", CLUSTER), ("MaxAgents", "lots")], &elastic).await;
    assert_eq!(t.code, Some(3), "{}", t.stdout);
    assert!(t.stdout.contains("FAIL profile: ") && t.stdout.contains("MaxAgents"), "{}", t.stdout);
    assert_eq!(w.proxy.total(), before, "an invalid profile reaches no AWS");
}

/// RunTask throttled past every retry: the quota class.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_says_quota_when_run_task_stays_throttled() {
    let w = Rig::new().await;
    w.proxy.add_rule("run task throttled", |call: &Call| {
        if call.is("ecs", "RunTask") {
            Verdict::ecs_error(400, "ThrottlingException", "Rate exceeded")
        } else {
            Verdict::Forward
        }
    });
    let elastic = [("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0"), ("ExecutionRoleArn", EXECUTION_ROLE)];
    let t = try_run(&w.proxy, &cluster_profile(), &elastic).await;
    assert_eq!(t.code, Some(9), "{}", t.stdout);
    assert!(t.stdout.contains("FAIL quota: "), "{}", t.stdout);
    assert!(w.proxy.count("ecs:RunTask") > 1, "retried first: {:?}", w.proxy.counts());
    w.assert_nothing_left().await;
}

/// Tasks that stop before RUNNING, as ECS describes them: each cause its class and fix, and the
/// task is stopped and its task definition removed all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_names_why_a_task_stopped_before_it_ran() {
    let w = Rig::new().await;
    let cases = [
        (
            "CannotPullContainerError: pull image manifest has been retried 1 time(s): failed to resolve ref docker.io/gocd/nope:v1: not found",
            5,
            "FAIL image: ",
        ),
        (
            "ResourceInitializationError: unable to pull secrets or registry auth: execution resource retrieval failed: unable to retrieve ecr registry auth: AccessDeniedException: User is not authorized to perform: ecr:GetAuthorizationToken",
            6,
            "FAIL execution role: ",
        ),
        (
            "CannotPullContainerError: pull image manifest has been retried 5 time(s): failed to resolve ref docker.io/gocd/agent:v1: failed to do request: Head \"https://registry-1.docker.io/v2/\": dial tcp 54.1.2.3:443: i/o timeout",
            7,
            "FAIL no route: ",
        ),
    ];
    let elastic = [("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0"), ("ExecutionRoleArn", EXECUTION_ROLE)];
    for (reason, status, fail) in cases {
        w.proxy.add_rule("stopped before running", move |call: &Call| stopped_answer(call, reason));
        let t = try_run(&w.proxy, &cluster_profile(), &elastic).await;
        w.proxy.remove_rule("stopped before running");
        assert_eq!(t.code, Some(status), "{reason}: {}", t.stdout);
        assert!(t.stdout.contains(fail) && t.stdout.contains("; fix: "), "{}", t.stdout);
        assert!(t.stdout.contains("cleanup: stopped task "), "{}", t.stdout);
        w.assert_nothing_left().await;
    }
}

/// DescribeTasks answered as ECS answers it for a task that failed to start with `reason`.
fn stopped_answer(call: &Call, reason: &str) -> Verdict {
    if !call.is("ecs", "DescribeTasks") {
        return Verdict::Forward;
    }
    let asked = call.json().unwrap_or_default();
    let tasks: Vec<serde_json::Value> = asked["tasks"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|arn| {
            serde_json::json!({
                "taskArn": arn,
                "clusterArn": format!("arn:aws:ecs:{REGION}:123456789012:cluster/{CLUSTER}"),
                "lastStatus": "STOPPED",
                "desiredStatus": "STOPPED",
                "launchType": "FARGATE",
                "stopCode": "TaskFailedToStart",
                "stoppedReason": reason,
                "containers": [{"name": "gocd-agent", "image": "gocd/gocd-agent-alpine-3.19:v24.1.0", "lastStatus": "STOPPED"}]
            })
        })
        .collect();
    Verdict::Respond(HttpResponse::aws_json(200, &serde_json::json!({"tasks": tasks, "failures": []})))
}

/// Ctrl-C while the task is still provisioning: try stops it, removes its task definition and
/// exits 130.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_try_removes_what_it_created() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let w = Rig::new().await;
    // The task does not get past PROVISIONING (as a slow capacity provider keeps it) until it
    // is stopped.
    let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen_stop = stopped.clone();
    w.proxy.add_rule("provisioning", move |call: &Call| {
        if call.is("ecs", "StopTask") {
            seen_stop.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if !call.is("ecs", "DescribeTasks") || seen_stop.load(std::sync::atomic::Ordering::SeqCst) {
            return Verdict::Forward;
        }
        let arns = call.json().unwrap_or_default()["tasks"].clone();
        let tasks: Vec<serde_json::Value> = arns
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|arn| serde_json::json!({"taskArn": arn, "lastStatus": "PROVISIONING", "desiredStatus": "RUNNING"}))
            .collect();
        Verdict::Respond(HttpResponse::aws_json(200, &serde_json::json!({"tasks": tasks, "failures": []})))
    });
    let elastic = [("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0"), ("ExecutionRoleArn", EXECUTION_ROLE)];
    let (cluster, elastic) = (file("cluster.json", &cluster_profile()), file("elastic.json", &elastic));
    let mut cmd = crate::world::moto::operator_command(&w.proxy.endpoint(), Some(REGION));
    cmd.arg("try").arg("--cluster-profile").arg(&cluster).arg("--elastic-profile").arg(&elastic);
    cmd.args(["--timeout", "5"]).stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("run try");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    while let Some(line) = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await.unwrap().unwrap() {
        let provisioning = line.starts_with("status: PROVISIONING");
        seen.push(line);
        if provisioning {
            let pid = child.id().unwrap().to_string();
            std::process::Command::new("kill").args(["-INT", &pid]).status().expect("kill -INT");
        }
    }
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait()).await.unwrap().unwrap();
    let out = seen.join("\n");
    eprintln!("try:\n{out}");
    assert_eq!(status.code(), Some(130), "{out}");
    assert!(out.contains("FAIL interrupted: "), "{out}");
    assert!(stopped.load(std::sync::atomic::Ordering::SeqCst), "StopTask was sent");
    assert!(out.contains("cleanup: stopped task "), "{out}");
    assert!(out.contains("cleanup: deregistered and deleted task definition "), "{out}");
    w.proxy.remove_rule("provisioning");
    w.assert_nothing_left().await;
}

/// `try` with its arguments: the profiles as files, and `extra` (`--server-url`, `--material`).
async fn try_with(proxy: &Proxy, cluster: &[(&str, &str)], elastic: &[(&str, &str)], extra: &[&str]) -> Tried {
    let (cluster, elastic) = (file("cluster.json", cluster), file("elastic.json", elastic));
    let mut cmd = crate::world::moto::operator_command(&proxy.endpoint(), Some(REGION));
    cmd.arg("try").arg("--cluster-profile").arg(&cluster).arg("--elastic-profile").arg(&elastic);
    cmd.args(["--timeout", "60"]).args(extra);
    let out = tokio::time::timeout(Duration::from_secs(150), cmd.output())
        .await
        .expect("try finished in time")
        .expect("run try");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("try {extra:?}:\n{stdout}{stderr}");
    for secret in [TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY] {
        assert!(!stdout.contains(secret) && !stderr.contains(secret), "try printed a secret");
    }
    Tried { code: out.status.code(), stdout }
}

/// One failure of the probe: what, the cluster profile, try's flags, the exit status, the start
/// of its FAIL line and a word of its fix.
type ProbeCase = (&'static str, Vec<(&'static str, String)>, Vec<String>, i32, &'static str, &'static str);

/// `try` proves the GoCD server is reachable from where agents run: its task runs the probe in
/// the profile's subnets and security groups, and the world decides each connection from the
/// task's security groups, its subnet's routes, the task's public address, DNS and the server's
/// firewall and TLS, as AWS and a real server would. Each failure the world produces has its own
/// exit status and fix, and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_probes_the_server_and_materials_from_where_agents_run() {
    use crate::world::network::{self, Internet, GIT_HOST, GOCD_HOST, PRIVATE_CA_HOST, WEB_HOST};
    use crate::world::probes::ProbeRunner;
    let w = Rig::new().await;
    let internet = Internet::stock();
    let runner = ProbeRunner::start(&w.proxy, &w.direct, CLUSTER, internet.clone());
    // The default VPC as AWS has it: an internet gateway on the main route table; tasks there
    // need a public address.
    network::default_vpc_as_aws_makes_it(&w.direct).await;
    let vpc = moto::default_network(&w.direct).await.vpc_id;
    let only_https = network::group_letting_out(&w.direct, &vpc, "agents-443", &[443]).await;
    let https_and_gocd = network::group_letting_out(&w.direct, &vpc, "agents-443-8153", &[443, 8153]).await;
    let elastic = [("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0"), ("ExecutionRoleArn", EXECUTION_ROLE)];
    let stock = format!("http://{GOCD_HOST}:8153/go");
    let with = |extra: &[(&'static str, String)]| {
        let mut c: Vec<(&'static str, String)> =
            cluster_profile().into_iter().map(|(k, v)| (k, v.to_string())).collect();
        for (k, v) in extra {
            c.retain(|(key, _)| key != k);
            c.push((k, v.clone()));
        }
        c
    };
    let run = |cluster: Vec<(&'static str, String)>, extra: Vec<String>| {
        let proxy = &w.proxy;
        async move {
            let cluster: Vec<(&str, &str)> = cluster.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            try_with(proxy, &cluster, &elastic, &extra).await
        }
    };

    // Reachable: the stock server URL from the profile, and an SSH material.
    let t = run(
        with(&[("GoServerUrl", stock.clone())]),
        vec!["--material".into(), format!("git@{GIT_HOST}:gocd/gocd.git")],
    )
    .await;
    assert_eq!(t.code, Some(0), "{}", t.stdout);
    assert!(t.stdout.contains("answered as a GoCD server"), "{}", t.stdout);
    assert!(t.stdout.contains(&format!("{GIT_HOST}:22 took a connection")), "{}", t.stdout);
    assert!(t.stdout.contains("the probe exited with status 0"), "{}", t.stdout);
    w.assert_nothing_left().await;

    // Each failure: the profile (or flags), the exit status, the start of its FAIL line, and a
    // word of its fix.
    let cases: Vec<ProbeCase> = vec![
        (
            "the security group lets only 443 out",
            with(&[("GoServerUrl", stock.clone()), ("SecurityGroupIds", only_https.clone())]),
            vec![],
            13,
            "FAIL server unreachable: ",
            "TCP 8153",
        ),
        (
            "no public address behind an internet gateway",
            with(&[("AssignPublicIp", "false".into())]),
            vec!["--server-url".into(), stock.clone()],
            13,
            "FAIL server unreachable: ",
            "route",
        ),
        (
            "the wrong path",
            with(&[]),
            vec!["--server-url".into(), format!("http://{GOCD_HOST}:8153/ci/go")],
            15,
            "FAIL server HTTP: ",
            "ending in /go",
        ),
        (
            "a certificate of a private CA",
            with(&[]),
            vec!["--server-url".into(), format!("https://{PRIVATE_CA_HOST}/go")],
            14,
            "FAIL server TLS: ",
            "rootCertFile",
        ),
        (
            "a name the VPC does not resolve",
            with(&[]),
            vec!["--server-url".into(), "http://gocd.internal.corp:8153/go".into()],
            12,
            "FAIL server name: ",
            "resolves",
        ),
        (
            "not a GoCD server",
            with(&[]),
            vec!["--server-url".into(), format!("http://{WEB_HOST}/go")],
            16,
            "FAIL not GoCD: ",
            "8153",
        ),
        (
            "the material's port not let out",
            with(&[("SecurityGroupIds", https_and_gocd.clone())]),
            vec!["--server-url".into(), stock.clone(), "--material".into(), format!("git@{GIT_HOST}:gocd/gocd.git")],
            17,
            "FAIL material: ",
            "22 for SSH",
        ),
    ];
    for (what, cluster, extra, status, fail, fix) in cases {
        let t = run(cluster, extra).await;
        assert_eq!(t.code, Some(status), "{what}: {}", t.stdout);
        let line = t.stdout.lines().find(|l| l.starts_with("FAIL ")).unwrap_or_else(|| panic!("{what}: no FAIL line"));
        assert!(line.starts_with(fail), "{what}: {line}");
        assert!(line.contains("; fix: ") && line.contains(fix), "{what}: {line}");
        assert!(line.ends_with(&format!("(exit status {status})")), "{what}: {line}");
        assert!(t.stdout.contains("cleanup: stopped task "), "{what}: {}", t.stdout);
        w.assert_nothing_left().await;
    }

    // The server's firewall lets in only another address: the task's traffic (from its public
    // address) is dropped, a timeout.
    internet.admit_only(GOCD_HOST, &["192.0.2.7/32"]);
    let t = run(with(&[]), vec!["--server-url".into(), stock.clone()]).await;
    assert_eq!(t.code, Some(13), "{}", t.stdout);
    w.assert_nothing_left().await;
    assert_eq!(runner.exits().len(), 9, "every run's probe ran in the world: {:?}", runner.exits());
    assert!(w.proxy.aws_refusals().is_empty(), "{:?}", w.proxy.aws_refusals());
}

/// Without a server URL, try says nothing proves the agents reach GoCD, and runs the agent as
/// before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_without_a_server_url_says_the_server_was_not_probed() {
    let w = Rig::new().await;
    let elastic = [("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0"), ("ExecutionRoleArn", EXECUTION_ROLE)];
    let t = try_with(&w.proxy, &cluster_profile(), &elastic, &[]).await;
    assert_eq!(t.code, Some(0), "{}", t.stdout);
    assert!(t.stdout.contains("probe: none: the cluster profile sets no GoServerUrl"), "{}", t.stdout);
    let t = try_with(&w.proxy, &cluster_profile(), &elastic, &["--server-url", "http://gocd.example.com:8153"]).await;
    assert_eq!(t.code, Some(3), "a URL not ending in /go is refused before AWS: {}", t.stdout);
    w.assert_nothing_left().await;
}
