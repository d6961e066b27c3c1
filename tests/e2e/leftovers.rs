//! `leftovers` against moto behind the strict proxy, run as an operator runs it: tasks,
//! instances and a task definition carrying the plugin's owner tags for two GoCD servers, beside
//! ones that carry none or only one of them, all made in moto directly. A listing names exactly
//! the tagged ones and changes nothing; `--server-id` keeps one server's; `--cluster` one
//! cluster's tasks; `--remove` stops, terminates and deregisters the tagged ones and leaves the
//! rest as it was.
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`).

use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_ecs::types::{AssignPublicIp, AwsVpcConfiguration, LaunchType, NetworkConfiguration, Tag};
use ecs_elastic_agent::cluster::base::identity::{TAG_CLUSTER_PROFILE, TAG_SERVER_ID};

use crate::world::moto::{self, Moto, REGION, TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY};
use crate::world::proxy::Call;
use crate::world::{Proxy, Verdict};

const IMAGE: &str = "gocd/gocd-agent-alpine-3.19:v24.1.0";
const AMI: &str = "ami-0abcdef1234567890";
const SERVER_A: &str = "6f1c2a3e-0000-4000-8000-00000000000a";
const SERVER_B: &str = "6f1c2a3e-0000-4000-8000-00000000000b";
const KEY_A: &str = "0123456789ab";
const KEY_B: &str = "ba9876543210";

/// moto, the strict proxy in front of it, and moto's own config for making and looking.
struct Rig {
    moto: Moto,
    proxy: Proxy,
    direct: SdkConfig,
}

/// What the rig made: the plugin's (tagged) and the rest.
struct Made {
    task_a: String,
    task_b: String,
    untagged_task: String,
    half_tagged_task: String,
    instance_a: String,
    untagged_instance: String,
    half_tagged_instance: String,
    task_definition_a: String,
    untagged_task_definition: String,
}

impl Rig {
    async fn new() -> Rig {
        let moto = Moto::start().await;
        let proxy = Proxy::start(moto.addr()).await;
        let direct = moto.base_config().await;
        Rig { moto, proxy, direct }
    }

    /// Clusters `ci` and `ci-b`; in `ci` a task of server A, one without tags and one with only
    /// the server id; in `ci-b` a task of server B; instances of A, without tags and with only
    /// the server id; a `gocd-` revision of A and one without tags.
    async fn make(&self) -> Made {
        moto::create_cluster(&self.direct, "ci").await;
        moto::create_cluster(&self.direct, "ci-b").await;
        let td = moto::register_team_task_definition(&self.direct, "team-app", IMAGE, &["FARGATE"]).await;
        let ours = |server: &'static str, key: &'static str| vec![(TAG_SERVER_ID, server), (TAG_CLUSTER_PROFILE, key)];
        Made {
            task_a: self.run_task("ci", &td, &ours(SERVER_A, KEY_A)).await,
            task_b: self.run_task("ci-b", &td, &ours(SERVER_B, KEY_B)).await,
            untagged_task: self.run_task("ci", &td, &[("team", "web")]).await,
            half_tagged_task: self.run_task("ci", &td, &[(TAG_SERVER_ID, SERVER_A)]).await,
            instance_a: self.run_instance(&ours(SERVER_A, KEY_A)).await,
            untagged_instance: self.run_instance(&[("team", "web")]).await,
            half_tagged_instance: self.run_instance(&[(TAG_SERVER_ID, SERVER_A)]).await,
            task_definition_a: self.register(&format!("gocd-{KEY_A}-0a1b2c3d4e5f"), &ours(SERVER_A, KEY_A)).await,
            untagged_task_definition: self.register("gocd-not-the-plugins", &[]).await,
        }
    }

    async fn run_task(&self, cluster: &str, td: &str, tags: &[(&str, &str)]) -> String {
        let network = moto::default_network(&self.direct).await;
        let vpc = AwsVpcConfiguration::builder()
            .subnets(&network.subnet_ids[0])
            .security_groups(&network.security_group_id)
            .assign_public_ip(AssignPublicIp::Disabled)
            .build()
            .expect("awsvpc");
        let out = aws_sdk_ecs::Client::new(&self.direct)
            .run_task()
            .cluster(cluster)
            .task_definition(td)
            .launch_type(LaunchType::Fargate)
            .network_configuration(NetworkConfiguration::builder().awsvpc_configuration(vpc).build())
            .set_tags(Some(tags.iter().map(|(k, v)| Tag::builder().key(*k).value(*v).build()).collect()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("RunTask: {}", moto::aws_error_text(&e)));
        out.tasks()[0].task_arn().expect("a task ARN").to_string()
    }

    async fn run_instance(&self, tags: &[(&str, &str)]) -> String {
        launch_instance(&self.direct, tags).await
    }

    async fn register(&self, family: &str, tags: &[(&str, &str)]) -> String {
        let container =
            aws_sdk_ecs::types::ContainerDefinition::builder().name("gocd-agent").image(IMAGE).memory(1024).build();
        let out = aws_sdk_ecs::Client::new(&self.direct)
            .register_task_definition()
            .family(family)
            .container_definitions(container)
            .set_tags(Some(tags.iter().map(|(k, v)| Tag::builder().key(*k).value(*v).build()).collect()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("RegisterTaskDefinition {family}: {}", moto::aws_error_text(&e)));
        out.task_definition().and_then(|t| t.task_definition_arn()).expect("an ARN").to_string()
    }

    /// The ARNs of the live tasks of a cluster.
    async fn live(&self, cluster: &str) -> Vec<String> {
        moto::live_tasks(&self.direct, cluster).await.iter().filter_map(|t| t.task_arn()).map(str::to_string).collect()
    }

    async fn instance_state(&self, id: &str) -> String {
        let out = aws_sdk_ec2::Client::new(&self.direct)
            .describe_instances()
            .instance_ids(id)
            .send()
            .await
            .unwrap_or_else(|e| panic!("DescribeInstances: {}", moto::aws_error_text(&e)));
        let instance = out.reservations().iter().flat_map(|r| r.instances()).next().expect("the instance");
        instance.state().and_then(|s| s.name()).map(|n| n.as_str().to_string()).unwrap_or_default()
    }

    async fn task_definition_status(&self, arn: &str) -> String {
        let out = aws_sdk_ecs::Client::new(&self.direct)
            .describe_task_definition()
            .task_definition(arn)
            .send()
            .await
            .unwrap_or_else(|e| panic!("DescribeTaskDefinition: {}", moto::aws_error_text(&e)));
        out.task_definition().and_then(|t| t.status()).map(|s| s.as_str().to_string()).unwrap_or_default()
    }

    /// Nothing was changed: every task live, every instance running, both revisions ACTIVE,
    /// and no write went through the proxy.
    async fn assert_unchanged(&self, made: &Made) {
        let ci = self.live("ci").await;
        for task in [&made.task_a, &made.untagged_task, &made.half_tagged_task] {
            assert!(ci.contains(task), "{task} is not live: {ci:?}");
        }
        assert!(self.live("ci-b").await.contains(&made.task_b));
        for id in [&made.instance_a, &made.untagged_instance, &made.half_tagged_instance] {
            assert_eq!(self.instance_state(id).await, "running", "{id}");
        }
        for arn in [&made.task_definition_a, &made.untagged_task_definition] {
            assert_eq!(self.task_definition_status(arn).await, "ACTIVE", "{arn}");
        }
        for write in ["ecs:StopTask", "ec2:TerminateInstances", "ecs:DeregisterTaskDefinition"] {
            assert_eq!(self.proxy.count(write), 0, "{write}: {:?}", self.proxy.counts());
        }
    }
}

/// Launches one instance with these tags in the config's account.
async fn launch_instance(cfg: &SdkConfig, tags: &[(&str, &str)]) -> String {
    use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
    let mut spec = TagSpecification::builder().resource_type(ResourceType::Instance);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(*k).value(*v).build());
    }
    let out = aws_sdk_ec2::Client::new(cfg)
        .run_instances()
        .image_id(AMI)
        .instance_type(InstanceType::C5Large)
        .min_count(1)
        .max_count(1)
        .tag_specifications(spec.build())
        .send()
        .await
        .unwrap_or_else(|e| panic!("RunInstances: {}", moto::aws_error_text(&e)));
    out.instances()[0].instance_id().expect("an instance id").to_string()
}

/// What one run said.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    stdout: String,
}

impl Ran {
    /// The lines about things found (`task ...`, `instance ...`, `task-definition ...`).
    fn found(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| ["task ", "instance ", "task-definition "].iter().any(|k| l.starts_with(k)))
            .collect()
    }

    fn last_line(&self) -> &str {
        self.stdout.lines().last().unwrap_or_default()
    }
}

/// Runs `leftovers` with the test keys, the region in AWS_REGION and the proxy as AWS.
async fn leftovers(proxy: &Proxy, args: &[&str]) -> Ran {
    let mut cmd = crate::world::moto::operator_command(&proxy.endpoint(), Some(REGION));
    cmd.arg("leftovers").args(args);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("leftovers finished in time")
        .expect("run leftovers");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("leftovers {args:?}:\n{stdout}{stderr}");
    for secret in [TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY] {
        assert!(!stdout.contains(secret) && !stderr.contains(secret), "leftovers printed a secret");
    }
    Ran { code: out.status.code(), stdout }
}

/// The line found for `id`, which must be there once.
fn line_of<'a>(ran: &'a Ran, id: &str) -> &'a str {
    let lines: Vec<&str> = ran.found().into_iter().filter(|l| l.split(' ').nth(1) == Some(id)).collect();
    assert_eq!(lines.len(), 1, "{id} once in:\n{}", ran.stdout);
    lines[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_lists_exactly_the_plugins_and_removes_only_them() {
    let w = Rig::new().await;
    let m = w.make().await;

    // A listing: exactly the tagged ones, with their owners, state and age; nothing changed.
    let all = leftovers(&w.proxy, &[]).await;
    assert_eq!(all.code, Some(0), "{}", all.stdout);
    assert!(all.stdout.starts_with(&format!("leftovers in {REGION} (account ")), "{}", all.stdout);
    assert_eq!(all.found().len(), 4, "{}", all.stdout);
    let a = line_of(&all, &m.task_a);
    assert!(
        a.starts_with("task ") && a.contains(&format!(" gocd:server-id={SERVER_A} gocd:cluster-profile={KEY_A} ")),
        "{a}"
    );
    assert!(a.contains(" state=RUNNING age=") && a.ends_with(" cluster=ci"), "{a}");
    assert!(line_of(&all, &m.task_b).contains(&format!("gocd:server-id={SERVER_B} gocd:cluster-profile={KEY_B}")));
    let i = line_of(&all, &m.instance_a);
    assert!(i.starts_with("instance ") && i.contains(" state=running ") && i.ends_with(" type=c5.large"), "{i}");
    let td = line_of(&all, &m.task_definition_a);
    assert!(td.starts_with("task-definition ") && td.contains(" state=ACTIVE "), "{td}");
    for other in [&m.untagged_task, &m.half_tagged_task, &m.untagged_instance, &m.half_tagged_instance] {
        assert!(!all.stdout.contains(other.as_str()), "{other} is not the plugin's:\n{}", all.stdout);
    }
    assert!(!all.stdout.contains(&m.untagged_task_definition), "{}", all.stdout);
    assert_eq!(all.last_line(), "2 tasks, 1 instance, 1 task definition; run again with --remove to remove them");
    w.assert_unchanged(&m).await;

    // One server's.
    let only_a = leftovers(&w.proxy, &["--server-id", SERVER_A]).await;
    assert_eq!(only_a.code, Some(0), "{}", only_a.stdout);
    assert_eq!(only_a.found().len(), 3, "{}", only_a.stdout);
    for id in [&m.task_a, &m.instance_a, &m.task_definition_a] {
        line_of(&only_a, id);
    }
    assert!(!only_a.stdout.contains(&m.task_b), "{}", only_a.stdout);
    assert_eq!(only_a.last_line(), "1 task, 1 instance, 1 task definition; run again with --remove to remove them");

    // One cluster's tasks (moto's ListTasks of `ci` also finds `ci-b`'s: the clusterArn decides).
    let ci = leftovers(&w.proxy, &["--cluster", "ci"]).await;
    assert_eq!(ci.code, Some(0), "{}", ci.stdout);
    line_of(&ci, &m.task_a);
    assert!(!ci.stdout.contains(&m.task_b), "{}", ci.stdout);

    // A cluster that does not exist: said with the fix, the rest still listed, exit status 1.
    let none = leftovers(&w.proxy, &["--cluster", "nope"]).await;
    assert_eq!(none.code, Some(1), "{}", none.stdout);
    let fail = none.stdout.lines().find(|l| l.starts_with("FAIL ")).expect("a FAIL line");
    assert!(
        fail.starts_with("FAIL list tasks of cluster nope: ") && fail.contains("; fix: no cluster nope in "),
        "{fail}"
    );
    line_of(&none, &m.instance_a);
    w.assert_unchanged(&m).await;

    // Removal: the tagged ones go, the rest stays.
    let removed = leftovers(&w.proxy, &["--remove"]).await;
    assert_eq!(removed.code, Some(0), "{}", removed.stdout);
    for line in [
        format!("stopped task {}", m.task_a),
        format!("stopped task {}", m.task_b),
        format!("terminated instance {} (was running, now ", m.instance_a),
        format!("deregistered task-definition {}", m.task_definition_a),
    ] {
        assert!(removed.stdout.lines().any(|l| l.starts_with(&line)), "no {line:?} in:\n{}", removed.stdout);
    }
    assert_eq!(removed.last_line(), "removed 2 tasks, 1 instance, 1 task definition");
    let ci = w.live("ci").await;
    assert!(!ci.contains(&m.task_a), "{ci:?}");
    assert!(ci.contains(&m.untagged_task) && ci.contains(&m.half_tagged_task), "{ci:?}");
    assert!(!w.live("ci-b").await.contains(&m.task_b));
    let stopped = moto::all_tasks(&w.direct, "ci").await;
    let a = stopped.iter().find(|t| t.task_arn() == Some(m.task_a.as_str())).expect("task A");
    assert_eq!(a.stopped_reason(), Some("stopped by ecs-elastic-agent leftovers --remove"));
    assert!(["shutting-down", "terminated"].contains(&w.instance_state(&m.instance_a).await.as_str()));
    assert_eq!(w.instance_state(&m.untagged_instance).await, "running");
    assert_eq!(w.instance_state(&m.half_tagged_instance).await, "running");
    assert_eq!(w.task_definition_status(&m.task_definition_a).await, "INACTIVE");
    assert_eq!(w.task_definition_status(&m.untagged_task_definition).await, "ACTIVE");
    assert_eq!(w.proxy.count("ecs:StopTask"), 2, "{:?}", w.proxy.counts());
    assert!(w.proxy.aws_refusals().is_empty(), "{:?}", w.proxy.aws_refusals());

    // Nothing left of the plugin's.
    let after = leftovers(&w.proxy, &[]).await;
    assert_eq!(after.code, Some(0), "{}", after.stdout);
    assert!(after.found().is_empty(), "{}", after.stdout);
    assert_eq!(after.last_line(), "0 tasks, 0 instances, 0 task definitions: nothing of the plugin's is left");
}

/// A removal AWS refuses (StopTask denied for one task): its line says AWS's reason and the
/// permission to grant, the rest is removed all the same, and the exit status is 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_says_what_it_could_not_remove_and_goes_on() {
    let w = Rig::new().await;
    let m = w.make().await;
    let denied = m.task_b.clone();
    w.proxy.add_rule("stop task denied", move |call: &Call| {
        if call.is("ecs", "StopTask") && call.json().is_some_and(|j| j["task"] == denied.as_str()) {
            let message = "User: arn:aws:iam::123456789012:user/ops is not authorized to perform: ecs:StopTask";
            Verdict::ecs_error(400, "AccessDeniedException", message)
        } else {
            Verdict::Forward
        }
    });
    let removed = leftovers(&w.proxy, &["--remove"]).await;
    assert_eq!(removed.code, Some(1), "{}", removed.stdout);
    let fail = removed.stdout.lines().find(|l| l.starts_with("FAIL ")).expect("a FAIL line");
    assert!(
        fail.starts_with(&format!("FAIL stop task {}: AWS StopTask failed: AccessDeniedException: ", m.task_b)),
        "{fail}"
    );
    assert!(fail.contains("; fix: grant ecs:StopTask to the identity running the command"), "{fail}");
    for line in [
        format!("stopped task {}", m.task_a),
        format!("terminated instance {} ", m.instance_a),
        format!("deregistered task-definition {}", m.task_definition_a),
    ] {
        assert!(removed.stdout.lines().any(|l| l.starts_with(&line)), "no {line:?} in:\n{}", removed.stdout);
    }
    assert_eq!(
        removed.last_line(),
        "removed 1 task, 1 instance, 1 task definition; 1 thing could not be removed (FAIL lines say why)"
    );
    assert!(w.live("ci-b").await.contains(&m.task_b), "the denied task still runs");
    assert!(!w.live("ci").await.contains(&m.task_a));
}

/// With a cluster profile, its role's account is read (moto keeps each account's resources
/// apart); a RoleArn without ExternalId needs the server id for the external id, as the plugin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_acts_with_a_cluster_profiles_role() {
    let w = Rig::new().await;
    let m = w.make().await;
    let role_arn = "arn:aws:iam::210987654321:role/gocd-agents";
    let member = w.moto.assume_role_config(role_arn).await;
    let instance = launch_instance(&member.config, &[(TAG_SERVER_ID, SERVER_A), (TAG_CLUSTER_PROFILE, KEY_B)]).await;

    let dir = std::env::temp_dir().join(format!("ecs-ea-leftovers-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("cluster.json");
    let props = serde_json::json!({"ClusterName": "ci", "Region": REGION, "RoleArn": role_arn});
    std::fs::write(&profile, props.to_string()).unwrap();
    let profile = profile.to_str().unwrap();

    let refused = leftovers(&w.proxy, &["--cluster-profile", profile]).await;
    assert_eq!(refused.code, Some(1), "{}", refused.stdout);
    assert!(refused.stdout.starts_with("FAIL credentials: ") && refused.stdout.contains("fix: pass --server-id"));
    assert_eq!(w.proxy.total(), 0, "nothing called: {:?}", w.proxy.counts());

    let listed = leftovers(&w.proxy, &["--cluster-profile", profile, "--server-id", SERVER_A]).await;
    assert_eq!(listed.code, Some(0), "{}", listed.stdout);
    assert!(listed.stdout.starts_with(&format!("leftovers in {REGION} (account 210987654321)")), "{}", listed.stdout);
    assert_eq!(listed.found(), vec![line_of(&listed, &instance)], "only the role's account's");
    assert!(!listed.stdout.contains(&m.instance_a), "{}", listed.stdout);
}
