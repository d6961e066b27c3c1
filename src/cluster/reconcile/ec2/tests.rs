//! EC2 capacity through the port, in milliseconds: create-agent queues the work, then the test
//! runs the driver's passes itself against a script of the AWS calls they must make, in order
//! ([`crate::aws::verifier`]), with AWS's answers — capacity refused, access denied, an answer
//! lost. Every test ends with `done()`: no call it did not expect, none it expected missing.

use crate::cluster::tests::fixtures::props;
use std::sync::Arc;

use serde_json::json;

use super::driver;
use crate::aws::verifier::{ec2_answer, Verifier};
use crate::cluster::base::clock::ManualClock;
use crate::cluster::capacity::ec2::pool::PoolState;
use crate::cluster::capacity::ec2::pools::Counters;
use crate::cluster::capacity::ec2::pools::{pool_key, Group};
use crate::cluster::job::create::Created;
use crate::cluster::tests::engine::{self, TestEngine};
use crate::cluster::tests::fake_gocd::FakeGocd;
use crate::cluster::{AgentRequest, Cluster};
use crate::ids::Ec2PoolKey;
use crate::secret::Secret;
use crate::settings::ClusterProfile;

const SERVER: &str = "server-1";

struct World {
    aws: Verifier,
    gocd: Arc<FakeGocd>,
    /// The engine's time: it starts at the wall's and moves only when a test advances it.
    clock: Arc<ManualClock>,
    cluster: Arc<Cluster>,
    /// The pool of the world's own cluster profile.
    pool: Ec2PoolKey,
}

impl World {
    fn new(extra: &[(&str, &str)]) -> World {
        let profile = ec2_profile(extra);
        let served = profile.clone();
        let aws = Verifier::default();
        let TestEngine { gocd, clock, cluster } = TestEngine::start(aws.clients(), profile);
        cluster.ec2().hold_loop_for_test();
        // GoCD sent the profile (its requests are team-a's).
        cluster.serve_again(&"team-a".into(), &served);
        let pool = pool_key(&served).expect("an EC2 profile");
        World { aws, gocd, clock, cluster, pool }
    }

    /// The pool of the world's own cluster profile.
    fn pool(&self) -> Ec2PoolKey {
        self.pool.clone()
    }

    /// One Linux m5.large of the world's pool as DescribeInstances lists it.
    fn instance_xml(&self, id: &str, state: &str) -> String {
        instance_xml(id, state, Some(&self.pool()), "m5.large", "linux")
    }

    /// [`World::instance_xml`], tagged with the fingerprint of its launch settings.
    fn instance_with_spec(&self, id: &str, state: &str, spec: &str) -> String {
        self.instance_xml(id, state)
            .replace("<tagSet>", &format!("<tagSet><item><key>gocd:launch-spec</key><value>{spec}</value></item>"))
    }

    fn request(&self, job_id: i64) -> AgentRequest {
        engine::request(&self.cluster, job_id, &format!("key-{job_id}"))
    }
}

/// The world's EC2 cluster profile (a Linux m5.large, ECS cluster `ci`), with `extra`.
fn ec2_profile(extra: &[(&str, &str)]) -> ClusterProfile {
    let mut p = props(&[
        ("ClusterName", "ci"),
        ("Region", "us-east-1"),
        ("LaunchType", "EC2"),
        ("SubnetIds", "subnet-0a1b2c3d,subnet-1a1b2c3d"),
        ("SecurityGroupIds", "sg-0a1b2c3d"),
        ("Ec2InstanceType", "m5.large"),
        ("Ec2AmiId", "ami-0abcdef1234567890"),
        ("Ec2InstanceProfile", "ecs-agents"),
        ("Ec2ScaleOutWaitSeconds", "0"),
        ("MaxAgents", "5"),
    ]);
    p.extend(props(extra));
    ClusterProfile::parse(&p).expect("a valid EC2 cluster profile")
}

/// The totals of the world's own pool.
fn totals(st: &PoolState, w: &World) -> Counters {
    st.memory(Some(&w.pool)).map(|m| m.counters()).unwrap_or_default()
}

/// The calls of a first create-agent: adopt what runs (nothing), look for the family (none
/// yet), register it.
fn expect_first_create_agent(aws: &Verifier) {
    aws.expect("ListTasks").answers(json!({ "taskArns": [] }).to_string());
    aws.expect("DescribeTaskDefinition").fails(400, "ClientException", "Unable to describe task definition.");
    aws.expect("RegisterTaskDefinition")
        .with(|call| {
            let compat = &call.json["requiresCompatibilities"];
            assert_eq!(compat, &json!(["EC2"]), "an EC2 profile's family suits EC2: {compat}");
        })
        .answers(
            json!({ "taskDefinition": { "taskDefinitionArn": "arn:aws:ecs:us-east-1:123456789012:task-definition/gocd-ci:1",
                "family": "gocd-ci", "revision": 1, "status": "ACTIVE" } })
            .to_string(),
        );
}

/// One instance of ours as DescribeInstances lists it: of `pool` (its `gocd:ec2-pool` tag, when
/// given), type and OS (`linux` or `windows`).
fn instance_xml(id: &str, state: &str, pool: Option<&Ec2PoolKey>, instance_type: &str, os: &str) -> String {
    let pool = pool.map(|p| format!("<item><key>gocd:ec2-pool</key><value>{p}</value></item>")).unwrap_or_default();
    format!(
        "<item><instanceId>{id}</instanceId><instanceType>{instance_type}</instanceType><instanceState><code>16</code><name>{state}</name></instanceState>\
         <launchTime>2026-12-03T10:00:00.000Z</launchTime><tagSet><item><key>gocd:os</key><value>{os}</value></item>{pool}</tagSet></item>"
    )
}

/// DescribeInstances by our tags, answering these instances.
fn expect_described(aws: &Verifier, instances: &[String]) {
    let set = format!(
        "<reservationSet><item><reservationId>r-1</reservationId><ownerId>123456789012</ownerId><instancesSet>{}</instancesSet></item></reservationSet>",
        instances.concat()
    );
    aws.expect("DescribeInstances")
        .with(|call| {
            let filters = call.fields_under("Filter.");
            assert!(filters.contains(&("Filter.1.Name", "tag:gocd:server-id")), "only our instances: {filters:?}");
            assert!(filters.contains(&("Filter.1.Value.1", SERVER)), "{filters:?}");
            assert!(filters.iter().any(|(_, v)| *v == "tag:gocd:cluster-profile"), "{filters:?}");
        })
        .answers(ec2_answer("DescribeInstances", &set));
}

/// The cluster's container instances: (ARN, EC2 id, free CPU, free MiB, running tasks).
fn expect_containers(aws: &Verifier, containers: &[(&str, &str, u32, u32, u32)]) {
    let arns: Vec<&str> = containers.iter().map(|c| c.0).collect();
    aws.expect("ListContainerInstances").answers(json!({ "containerInstanceArns": arns }).to_string());
    if containers.is_empty() {
        return;
    }
    let described: Vec<serde_json::Value> = containers
        .iter()
        .map(|(arn, id, cpu, mib, tasks)| {
            json!({ "containerInstanceArn": arn, "ec2InstanceId": id, "status": "ACTIVE", "agentConnected": true,
                "registeredResources": [{ "name": "CPU", "type": "INTEGER", "integerValue": 2048 },
                                        { "name": "MEMORY", "type": "INTEGER", "integerValue": 7680 }],
                "remainingResources": [{ "name": "CPU", "type": "INTEGER", "integerValue": cpu },
                                       { "name": "MEMORY", "type": "INTEGER", "integerValue": mib }],
                "runningTasksCount": tasks, "pendingTasksCount": 0 })
        })
        .collect();
    aws.expect("DescribeContainerInstances").answers(json!({ "containerInstances": described }).to_string());
}

/// The first pass's catalog: the listed type and AMI as EC2 describes them.
fn expect_catalog(aws: &Verifier) {
    let types = "<instanceTypeSet><item><instanceType>m5.large</instanceType><vCpuInfo><defaultVCpus>2</defaultVCpus></vCpuInfo>\
        <memoryInfo><sizeInMiB>8192</sizeInMiB></memoryInfo><processorInfo><supportedArchitectures><item>x86_64</item></supportedArchitectures></processorInfo></item></instanceTypeSet>";
    aws.expect("DescribeInstanceTypes").answers(ec2_answer("DescribeInstanceTypes", types));
    let images = "<imagesSet><item><imageId>ami-0abcdef1234567890</imageId><architecture>x86_64</architecture><rootDeviceName>/dev/xvda</rootDeviceName>\
        <blockDeviceMapping><item><deviceName>/dev/xvda</deviceName><ebs><volumeSize>30</volumeSize></ebs></item></blockDeviceMapping></item></imagesSet>";
    aws.expect("DescribeImages").answers(ec2_answer("DescribeImages", images));
}

/// RunInstances' answer: these instances, pending.
fn launched(ids: &[&str]) -> String {
    let items: Vec<String> = ids.iter().map(|id| instance_xml(id, "pending", None, "m5.large", "linux")).collect();
    ec2_answer(
        "RunInstances",
        &format!(
            "<reservationId>r-2</reservationId><ownerId>123456789012</ownerId><instancesSet>{}</instancesSet>",
            items.concat()
        ),
    )
}

#[tokio::test]
async fn a_queued_agent_gets_an_instance_launched_then_starts_on_it() {
    let w = World::new(&[]);
    expect_first_create_agent(&w.aws);
    let created = w.cluster.create_agent(w.request(7)).await.expect("queued");
    assert_eq!(created, Created::Queued);

    // Pass 1: nothing of ours yet; the catalog is read; one instance is launched.
    expect_described(&w.aws, &[]);
    expect_containers(&w.aws, &[]);
    expect_catalog(&w.aws);
    w.aws
        .expect("RunInstances")
        .with(|call| {
            assert_eq!(call.field("InstanceType"), "m5.large");
            assert_eq!(call.field("ImageId"), "ami-0abcdef1234567890");
            assert_eq!(call.field("IamInstanceProfile.Name"), "ecs-agents");
            assert_eq!(call.field("MetadataOptions.HttpTokens"), "required", "IMDSv2 only");
            assert_eq!(
                call.field("MetadataOptions.HttpPutResponseHopLimit"),
                "1",
                "no container reads the instance role"
            );
            assert_eq!(call.field("BlockDeviceMapping.1.Ebs.Encrypted"), "true");
            assert_eq!(call.field("NetworkInterface.1.SubnetId"), "subnet-0a1b2c3d", "the first subnet first");
            assert_eq!(call.field("NetworkInterface.1.AssociatePublicIpAddress"), "false");
            assert_eq!(call.field("InstanceMarketOptions.MarketType"), "", "on-demand unless Ec2Spot");
            let tags = call.fields_under("TagSpecification.1.Tag.");
            assert!(tags.iter().any(|(_, v)| *v == SERVER), "tagged with our server id: {tags:?}");
            assert!(!call.field("UserData").is_empty(), "user data joins the instance to the cluster");
            assert!(call.field("ClientToken").starts_with("gocd-"), "idempotent: {}", call.field("ClientToken"));
        })
        .answers(launched(&["i-0000000000000001"]));
    driver::pass(&w.cluster).await.expect("pass 1");
    {
        let st = w.cluster.ec2().state();
        assert_eq!(totals(&st, &w).launched, 1);
        assert!(
            st.instance("i-0000000000000001").is_some(),
            "{:?}",
            st.instances().map(|r| r.id()).collect::<Vec<_>>()
        );
        assert_eq!(st.waiting().len(), 1, "the work waits for the instance to register");
    }

    // Pass 2: the instance registered with room; the task starts on it.
    let container = "arn:aws:ecs:us-east-1:123456789012:container-instance/ci/0001";
    expect_described(&w.aws, &[w.instance_xml("i-0000000000000001", "running")]);
    expect_containers(&w.aws, &[(container, "i-0000000000000001", 2048, 7680, 0)]);
    w.aws
        .expect("StartTask")
        .with(move |call| {
            assert_eq!(call.json["containerInstances"], json!([container]));
            let env = call.json["overrides"]["containerOverrides"][0]["environment"].to_string();
            assert!(env.contains("key-7"), "the job's auto-register key: {env}");
        })
        .answers(
            json!({ "tasks": [{ "taskArn": "arn:aws:ecs:us-east-1:123456789012:task/ci/t1",
                "clusterArn": "arn:aws:ecs:us-east-1:123456789012:cluster/ci", "lastStatus": "PENDING",
                "desiredStatus": "RUNNING", "launchType": "EC2", "containerInstanceArn": container }], "failures": [] })
            .to_string(),
        );
    driver::pass(&w.cluster).await.expect("pass 2");
    w.aws.done();
    assert!(w.cluster.ec2().state().waiting().is_empty(), "started");
    let console = w.gocd.console_of(7);
    assert!(console.iter().any(|l| l.contains("task/ci/t1") && l.contains("i-0000000000000001")), "{console:?}");
}

/// create-agent and a first pass up to its RunInstances, which the caller scripts.
async fn queued_and_described(w: &World) {
    expect_first_create_agent(&w.aws);
    w.cluster.create_agent(w.request(7)).await.expect("queued");
    expect_described(&w.aws, &[]);
    expect_containers(&w.aws, &[]);
    expect_catalog(&w.aws);
}

/// The cluster's recent events (server health), as one text.
fn health(w: &World) -> String {
    w.cluster.events().recent().iter().map(|e| e.message.clone()).collect::<Vec<_>>().join("\n")
}

/// GoCD re-sends create-agent for a job whose agent still waits for room: the waiting work
/// takes the newer key (it registers with it), so that key is not held for a warm agent too,
/// which would register with a key already used.
#[tokio::test]
async fn a_re_sent_create_agent_gives_its_key_to_the_waiting_agent_not_to_the_warm_pool() {
    let w = World::new(&[]);
    expect_first_create_agent(&w.aws);
    let warm = |key: &str| {
        let mut r = w.request(7);
        r.elastic_profile.insert("WarmAgents".into(), Some("2".into()));
        r.auto_register_key = Secret::new(key.to_string());
        r
    };
    assert_eq!(w.cluster.create_agent(warm("key-7")).await.expect("queued"), Created::Queued);
    assert_eq!(w.cluster.create_agent(warm("key-7-again")).await.expect("answered"), Created::Existing);
    // The warm pool's pass runs in the background after each request: let it run.
    w.cluster.tend_warm_pools().await;
    let st = w.cluster.ec2().state();
    let keys: Vec<&str> = st.waiting().iter().map(|t| t.spec.work.auto_register_key.expose().as_str()).collect();
    assert_eq!(keys, ["key-7-again"], "one waiting agent, with the newest key; no warm agent on it");
}

#[tokio::test]
async fn spot_refused_falls_back_to_on_demand_in_the_same_subnet_and_says_so() {
    let w = World::new(&[("Ec2Spot", "true")]);
    queued_and_described(&w).await;
    w.aws.expect("RunInstances").with(|call| assert_eq!(call.field("InstanceMarketOptions.MarketType"), "spot")).fails(
        500,
        "InsufficientInstanceCapacity",
        "There is no Spot capacity available that matches your request.",
    );
    w.aws
        .expect("RunInstances")
        .with(|call| {
            assert_eq!(call.field("InstanceMarketOptions.MarketType"), "", "on-demand");
            assert_eq!(
                call.field("NetworkInterface.1.SubnetId"),
                "subnet-0a1b2c3d",
                "same subnet: only spot was short"
            );
        })
        .answers(launched(&["i-0000000000000002"]));
    driver::pass(&w.cluster).await.expect("pass");
    w.aws.done();
    assert_eq!(totals(&w.cluster.ec2().state(), &w).spot_fallbacks, 1);
    let health = health(&w);
    assert!(
        health.contains("EC2 spot capacity was refused (m5.large: InsufficientInstanceCapacity")
            && health.contains("launched 1 on-demand m5.large instance(s) instead"),
        "{health}"
    );
}

#[tokio::test]
async fn capacity_refused_in_one_zone_launches_in_the_next_subnet() {
    let w = World::new(&[]);
    queued_and_described(&w).await;
    w.aws
        .expect("RunInstances")
        .with(|call| assert_eq!(call.field("NetworkInterface.1.SubnetId"), "subnet-0a1b2c3d"))
        .fails(
            500,
            "InsufficientInstanceCapacity",
            "We currently do not have sufficient m5.large capacity in us-east-1a.",
        );
    w.aws
        .expect("RunInstances")
        .with(|call| assert_eq!(call.field("NetworkInterface.1.SubnetId"), "subnet-1a1b2c3d", "another zone"))
        .answers(launched(&["i-0000000000000003"]));
    driver::pass(&w.cluster).await.expect("pass");
    w.aws.done();
    let st = w.cluster.ec2().state();
    let memory = st.memory(Some(&w.pool())).expect("the pool's");
    assert_eq!((totals(&st, &w).launched, memory.launch_backoff()), (1, None));
    assert_eq!(memory.next_subnet(2), 0, "the next launch starts past the subnet that launched");
}

#[tokio::test]
async fn a_refused_launch_backs_off_and_the_next_pass_launches_nothing() {
    let w = World::new(&[]);
    queued_and_described(&w).await;
    w.aws.expect("RunInstances").fails(
        403,
        "UnauthorizedOperation",
        "You are not authorized to perform this operation. User: arn:aws:sts::123456789012:assumed-role/gocd/x is not authorized to perform: ec2:RunInstances",
    );
    driver::pass(&w.cluster).await.expect("pass 1");
    let health = health(&w);
    assert!(health.contains("could not launch EC2 instances (next try in 10 s)"), "{health}");
    assert!(health.contains("UnauthorizedOperation"), "{health}");
    // Within the backoff: the pass observes, and launches nothing (no RunInstances scripted).
    expect_described(&w.aws, &[]);
    expect_containers(&w.aws, &[]);
    driver::pass(&w.cluster).await.expect("pass 2");
    w.aws.done();
    let st = w.cluster.ec2().state();
    assert_eq!(st.waiting().len(), 1, "the work still waits");
    let backoff = st.memory(Some(&w.pool())).and_then(|m| m.launch_backoff());
    assert_eq!(backoff.map(|b| b.as_secs()), Some(10));
}

/// An instance of ours, registered with a container instance, empty, idle since `idle_for` ago.
fn registered_instance(w: &World, id: &str, container: &str, idle_for: std::time::Duration) {
    let now = w.cluster.now();
    let mut st = w.cluster.ec2().state();
    let instance = crate::cluster::capacity::ec2::pool::Ec2Instance {
        id: id.into(),
        instance_type: "m5.large".into(),
        state: crate::cluster::capacity::ec2::Ec2State::Running,
        launched_at: Some(now - idle_for),
        spot: false,
        os: crate::cluster::capacity::ec2::OsClass::Linux,
        spot_warned_at: None,
        launch_spec: None,
        pool: None,
    };
    st.launched(&w.pool(), std::slice::from_ref(&instance), now - idle_for);
    let record = st.instance_mut(id).expect("recorded");
    record.described(instance);
    let container = crate::aws::ec2_types::ContainerInstance {
        arn: container.into(),
        ec2_id: Some(id.into()),
        instance_type: Some("c5.xlarge".into()),
        zone: Some("us-east-1a".into()),
        status: crate::cluster::capacity::ec2::ContainerInstanceStatus::Active,
        connected: true,
        total: crate::cluster::capacity::ec2::Resources::new(2048, 7680),
        remaining: crate::cluster::capacity::ec2::Resources::new(2048, 7680),
        tasks: 0,
    };
    // Registered, and idle, since `idle_for` ago.
    record.refold(Some(container), now - idle_for, now - idle_for);
}

#[tokio::test]
async fn an_instance_idle_past_its_minutes_is_drained_deregistered_and_terminated() {
    // No stopped pool (the default keeps five): an idle instance is terminated.
    let w = World::new(&[("Ec2IdleMinutes", "10"), ("Ec2StoppedInstances", "0")]);
    let container = "arn:aws:ecs:us-east-1:123456789012:container-instance/ci/0004";
    // Idle since it registered, 11 minutes ago (Ec2IdleMinutes 10).
    registered_instance(&w, "i-0000000000000004", container, std::time::Duration::ZERO);
    w.clock.advance(std::time::Duration::from_secs(11 * 60));
    w.cluster.ec2().state().memory_mut(&w.pool()).set_catalog(None);
    expect_described(&w.aws, &[w.instance_xml("i-0000000000000004", "running")]);
    expect_containers(&w.aws, &[(container, "i-0000000000000004", 2048, 7680, 0)]);
    expect_catalog(&w.aws);
    w.aws
        .expect("UpdateContainerInstancesState")
        .with(move |call| {
            assert_eq!(call.json["status"], "DRAINING");
            assert_eq!(call.json["containerInstances"], json!([container]));
        })
        .answers(json!({ "containerInstances": [], "failures": [] }).to_string());
    w.aws
        .expect("DeregisterContainerInstance")
        .with(|call| assert_eq!(call.json["force"], json!(false), "never forced: a task that arrived keeps it"))
        .answers(json!({ "containerInstance": { "containerInstanceArn": container } }).to_string());
    w.aws
        .expect("TerminateInstances")
        .with(|call| assert_eq!(call.field("InstanceId.1"), "i-0000000000000004"))
        .answers(ec2_answer("TerminateInstances", "<instancesSet/>"));
    driver::pass(&w.cluster).await.expect("pass");
    w.aws.done();
    let st = w.cluster.ec2().state();
    assert_eq!(totals(&st, &w).terminated, 1);
    assert!(st.is_gone("i-0000000000000004"));
}

#[tokio::test]
async fn an_instance_that_cannot_be_deregistered_is_set_active_again_and_kept() {
    let w = World::new(&[]);
    let container = "arn:aws:ecs:us-east-1:123456789012:container-instance/ci/0005";
    registered_instance(&w, "i-0000000000000005", container, std::time::Duration::from_secs(3600));
    let profile = w.cluster.profile();
    w.aws
        .expect("UpdateContainerInstancesState")
        .answers(json!({ "containerInstances": [], "failures": [] }).to_string());
    w.aws.expect("DeregisterContainerInstance").fails(
        400,
        "InvalidParameterException",
        "The specified container instance has tasks running on it.",
    );
    w.aws
        .expect("UpdateContainerInstancesState")
        .with(|call| assert_eq!(call.json["status"], "ACTIVE", "back in service"))
        .answers(json!({ "containerInstances": [], "failures": [] }).to_string());
    let retire = crate::cluster::capacity::ec2::plan::Retirement {
        instance: "i-0000000000000005".into(),
        reason: crate::cluster::capacity::ec2::plan::RetireReason::Idle,
    };
    super::apply::retire(&w.cluster, &profile, &retire).await;
    w.aws.done();
    let st = w.cluster.ec2().state();
    let record = &st.instance("i-0000000000000005").expect("recorded");
    assert_eq!((record.retiring(), totals(&st, &w).terminated), (None, 0), "kept, not terminated");
}

/// Job 7 queued, an empty registered instance `i-…{n}` of ours beside it, and the next pass's
/// reads up to its StartTask scripted. Returns the container instance's ARN.
async fn queued_beside_an_empty_instance(w: &World, n: &str) -> String {
    expect_first_create_agent(&w.aws);
    w.cluster.create_agent(w.request(7)).await.expect("queued");
    let container = format!("arn:aws:ecs:us-east-1:123456789012:container-instance/ci/000{n}");
    let id = format!("i-000000000000000{n}");
    registered_instance(w, &id, &container, std::time::Duration::ZERO);
    w.cluster.ec2().state().memory_mut(&w.pool()).set_catalog(None);
    expect_described(&w.aws, &[w.instance_xml(&id, "running")]);
    expect_containers(&w.aws, &[(&container, &id, 2048, 7680, 0)]);
    expect_catalog(&w.aws);
    container
}

#[tokio::test]
async fn start_task_refused_releases_the_agent_and_tells_the_job() {
    let w = World::new(&[]);
    queued_beside_an_empty_instance(&w, "6").await;
    w.aws.expect("StartTask").fails(
        400,
        "AccessDeniedException",
        "User: arn:aws:sts::123456789012:assumed-role/gocd/x is not authorized to perform: ecs:StartTask",
    );
    driver::pass(&w.cluster).await.expect("pass");
    w.aws.done();
    assert!(w.cluster.ec2().state().waiting().is_empty(), "no longer waits");
    let console = w.gocd.console_of(7).join("\n");
    assert!(console.contains("could not start an agent for job") && console.contains("ecs:StartTask"), "{console}");
    assert!(health(&w).contains("could not start an agent for job"), "{}", health(&w));
}

#[tokio::test]
async fn start_task_that_places_nothing_leaves_the_work_waiting() {
    let w = World::new(&[]);
    let container = queued_beside_an_empty_instance(&w, "7").await;
    w.aws
        .expect("StartTask")
        .answers(json!({ "tasks": [], "failures": [{ "arn": container, "reason": "RESOURCE:MEMORY" }] }).to_string());
    driver::pass(&w.cluster).await.expect("pass");
    w.aws.done();
    assert_eq!(w.cluster.ec2().state().waiting().len(), 1, "the work waits for room");
    assert!(w.gocd.console_of(7).iter().all(|l| !l.contains("could not start")));
}

#[tokio::test]
async fn a_container_instance_of_our_terminated_instance_is_deregistered_and_a_foreign_one_never_touched() {
    let w = World::new(&[]);
    let ours = "arn:aws:ecs:us-east-1:123456789012:container-instance/ci/0008";
    let foreign = "arn:aws:ecs:us-east-1:123456789012:container-instance/ci/0009";
    w.cluster.ec2().state().memory_mut(&w.pool()).set_catalog(None);
    expect_described(&w.aws, &[]);
    expect_containers(
        &w.aws,
        &[(ours, "i-0000000000000008", 2048, 7680, 0), (foreign, "i-0000000000000009", 2048, 7680, 1)],
    );
    // Which of the unknown instances are ours, by our tags and their ids (a filter, not
    // InstanceIds: EC2 fails a call naming an id it forgot).
    expect_described_by_id(&w.aws, &[w.instance_xml("i-0000000000000008", "terminated")]);
    w.aws
        .expect("DeregisterContainerInstance")
        .with(move |call| assert_eq!(call.json["containerInstance"], ours))
        .answers(json!({ "containerInstance": { "containerInstanceArn": ours } }).to_string());
    expect_catalog(&w.aws);
    driver::pass(&w.cluster).await.expect("pass 1");
    assert!(w.cluster.ec2().state().is_foreign("i-0000000000000009"), "remembered as not ours");
    // The next pass asks nothing about the foreign instance again.
    expect_described(&w.aws, &[]);
    expect_containers(&w.aws, &[(foreign, "i-0000000000000009", 2048, 7680, 1)]);
    driver::pass(&w.cluster).await.expect("pass 2");
    w.aws.done();
}

/// DescribeInstances of some ids, by our tags and an `instance-id` filter.
fn expect_described_by_id(aws: &Verifier, instances: &[String]) {
    let set = format!(
        "<reservationSet><item><reservationId>r-1</reservationId><ownerId>123456789012</ownerId><instancesSet>{}</instancesSet></item></reservationSet>",
        instances.concat()
    );
    aws.expect("DescribeInstances")
        .with(|call| {
            let filters = call.fields_under("Filter.");
            assert!(filters.iter().any(|(_, v)| *v == "instance-id"), "{filters:?}");
            assert!(filters.contains(&("Filter.1.Value.1", SERVER)), "only ours: {filters:?}");
            assert!(!call.form.keys().any(|k| k.starts_with("InstanceId")), "no InstanceIds: {:?}", call.form);
        })
        .answers(ec2_answer("DescribeInstances", &set));
}

// The stopped-instance pool (`Ec2StoppedInstances`).

/// The catalog the first pass would read (m5.large, the AMI), set without its calls; returns the
/// fingerprint of the launch settings a new Linux instance gets now (`gocd:launch-spec`).
fn catalog_read(w: &World) -> String {
    use crate::cluster::capacity::ec2::catalog::{AmiInfo, Catalog, TypeInfo};
    let cfg = w.cluster.profile().ec2.clone().expect("EC2 settings");
    let catalog = Catalog {
        types: vec![TypeInfo {
            name: "m5.large".into(),
            arch: crate::cluster::capacity::ec2::Arch::X86_64,
            capacity: Some(crate::cluster::capacity::ec2::Resources::new(2048, 7680)),
        }],
        amis: vec![AmiInfo {
            id: "ami-0abcdef1234567890".into(),
            arch: Some(crate::cluster::capacity::ec2::Arch::X86_64),
            os: crate::cluster::capacity::ec2::OsClass::Linux,
            root_gib: 30,
        }],
        estimated: None,
        problems: vec![],
        read_at: w.cluster.now(),
        key: Catalog::key_of(&cfg),
    };
    let profile = w.cluster.profile();
    let spec = super::launch::current_fingerprint(
        &w.cluster,
        &profile,
        &cfg,
        &catalog,
        crate::cluster::capacity::ec2::OsClass::Linux,
        crate::cluster::capacity::ec2::Arch::X86_64,
    )
    .expect("an AMI of the architecture");
    w.cluster.ec2().state().memory_mut(&w.pool()).set_catalog(Some(catalog));
    spec
}

/// The container instance a stopped instance left: DRAINING, its agent disconnected.
fn expect_containers_json(aws: &Verifier, containers: &[serde_json::Value]) {
    let arns: Vec<&serde_json::Value> = containers.iter().map(|c| &c["containerInstanceArn"]).collect();
    aws.expect("ListContainerInstances").answers(json!({ "containerInstanceArns": arns }).to_string());
    aws.expect("DescribeContainerInstances").answers(json!({ "containerInstances": containers }).to_string());
}

fn container_json(arn: &str, id: &str, status: &str, connected: bool) -> serde_json::Value {
    json!({ "containerInstanceArn": arn, "ec2InstanceId": id, "status": status, "agentConnected": connected,
        "registeredResources": [{ "name": "CPU", "type": "INTEGER", "integerValue": 2048 },
                                { "name": "MEMORY", "type": "INTEGER", "integerValue": 7680 }],
        "remainingResources": [{ "name": "CPU", "type": "INTEGER", "integerValue": 2048 },
                               { "name": "MEMORY", "type": "INTEGER", "integerValue": 7680 }],
        "runningTasksCount": 0, "pendingTasksCount": 0 })
}

#[tokio::test]
async fn an_idle_instance_is_stopped_while_the_stopped_pool_has_room() {
    let w = World::new(&[("Ec2IdleMinutes", "10"), ("Ec2StoppedInstances", "1")]);
    let container = "arn:aws:ecs:us-east-1:123456789012:container-instance/ci/0010";
    registered_instance(&w, "i-0000000000000010", container, std::time::Duration::ZERO);
    w.clock.advance(std::time::Duration::from_secs(11 * 60));
    catalog_read(&w);
    expect_described(&w.aws, &[w.instance_xml("i-0000000000000010", "running")]);
    expect_containers(&w.aws, &[(container, "i-0000000000000010", 2048, 7680, 0)]);
    w.aws
        .expect("UpdateContainerInstancesState")
        .with(move |call| {
            assert_eq!(call.json["status"], "DRAINING", "nothing is placed on it while it stops");
            assert_eq!(call.json["containerInstances"], json!([container]));
        })
        .answers(json!({ "containerInstances": [], "failures": [] }).to_string());
    // Not deregistered: its ECS agent comes back as the same container instance on start.
    w.aws
        .expect("StopInstances")
        .with(|call| assert_eq!(call.field("InstanceId.1"), "i-0000000000000010"))
        .answers(ec2_answer("StopInstances", "<instancesSet/>"));
    driver::pass(&w.cluster).await.expect("pass");
    w.aws.done();
    let st = w.cluster.ec2().state();
    assert_eq!((totals(&st, &w).stopped, totals(&st, &w).terminated), (1, 0));
    let record = &st.instance("i-0000000000000010").expect("recorded");
    assert!(record.parked() && record.retiring().is_none(), "{record:?}");
    assert!(st.slots(&Group::Pool(&w.pool())).is_empty(), "a stopped instance is neither placed on nor counted");
}

#[tokio::test]
async fn an_idle_instance_is_terminated_when_the_stopped_pool_is_full() {
    let w = World::new(&[("Ec2IdleMinutes", "10"), ("Ec2StoppedInstances", "1")]);
    let container = "arn:aws:ecs:us-east-1:123456789012:container-instance/ci/0011";
    registered_instance(&w, "i-0000000000000011", container, std::time::Duration::ZERO);
    w.clock.advance(std::time::Duration::from_secs(11 * 60));
    let spec = catalog_read(&w);
    expect_described(
        &w.aws,
        &[
            w.instance_with_spec("i-0000000000000012", "stopped", &spec),
            w.instance_xml("i-0000000000000011", "running"),
        ],
    );
    expect_containers(&w.aws, &[(container, "i-0000000000000011", 2048, 7680, 0)]);
    w.aws
        .expect("UpdateContainerInstancesState")
        .answers(json!({ "containerInstances": [], "failures": [] }).to_string());
    w.aws
        .expect("DeregisterContainerInstance")
        .answers(json!({ "containerInstance": { "containerInstanceArn": container } }).to_string());
    w.aws
        .expect("TerminateInstances")
        .with(|call| assert_eq!(call.field("InstanceId.1"), "i-0000000000000011"))
        .answers(ec2_answer("TerminateInstances", "<instancesSet/>"));
    driver::pass(&w.cluster).await.expect("pass");
    w.aws.done();
    let st = w.cluster.ec2().state();
    assert_eq!((totals(&st, &w).stopped, totals(&st, &w).terminated), (0, 1));
    assert!(st.instance("i-0000000000000012").expect("recorded").parked(), "the one stopped already is kept");
}

#[tokio::test]
async fn a_stopped_instance_is_started_for_waiting_work_instead_of_a_launch() {
    let w = World::new(&[("Ec2StoppedInstances", "1")]);
    expect_first_create_agent(&w.aws);
    w.cluster.create_agent(w.request(7)).await.expect("queued");
    let spec = catalog_read(&w);
    let container = "arn:aws:ecs:us-east-1:123456789012:container-instance/ci/0013";
    expect_described(&w.aws, &[w.instance_with_spec("i-0000000000000013", "stopped", &spec)]);
    expect_containers_json(&w.aws, &[container_json(container, "i-0000000000000013", "DRAINING", false)]);
    // No RunInstances: the stopped instance is started.
    w.aws
        .expect("StartInstances")
        .with(|call| assert_eq!(call.field("InstanceId.1"), "i-0000000000000013"))
        .answers(ec2_answer("StartInstances", "<instancesSet/>"));
    w.aws
        .expect("UpdateContainerInstancesState")
        .with(move |call| {
            assert_eq!(call.json["status"], "ACTIVE", "back in service for its agent's return");
            assert_eq!(call.json["containerInstances"], json!([container]));
        })
        .answers(json!({ "containerInstances": [], "failures": [] }).to_string());
    driver::pass(&w.cluster).await.expect("pass 1");
    {
        let st = w.cluster.ec2().state();
        assert_eq!((totals(&st, &w).restarted, totals(&st, &w).launched), (1, 0));
        let slots = st.slots(&Group::Pool(&w.pool()));
        assert!(slots.len() == 1 && slots[0].registered.is_none(), "starting until its agent is back: {slots:?}");
        assert_eq!(st.waiting().len(), 1);
    }
    // Its agent reconnects as the same container instance: the task starts on it.
    expect_described(&w.aws, &[w.instance_with_spec("i-0000000000000013", "running", &spec)]);
    expect_containers_json(&w.aws, &[container_json(container, "i-0000000000000013", "ACTIVE", true)]);
    w.aws
        .expect("StartTask")
        .with(move |call| assert_eq!(call.json["containerInstances"], json!([container])))
        .answers(
            json!({ "tasks": [{ "taskArn": "arn:aws:ecs:us-east-1:123456789012:task/ci/t13",
                "clusterArn": "arn:aws:ecs:us-east-1:123456789012:cluster/ci", "lastStatus": "PENDING",
                "desiredStatus": "RUNNING", "launchType": "EC2", "containerInstanceArn": container }], "failures": [] })
            .to_string(),
        );
    driver::pass(&w.cluster).await.expect("pass 2");
    w.aws.done();
    let st = w.cluster.ec2().state();
    assert!(st.waiting().is_empty(), "started");
    assert!(!st.instance("i-0000000000000013").expect("recorded").restarting(), "registered like any other now");
}

#[tokio::test]
async fn a_stopped_instance_with_stale_launch_settings_is_terminated_not_started() {
    let w = World::new(&[("Ec2StoppedInstances", "2")]);
    catalog_read(&w);
    expect_described(&w.aws, &[w.instance_with_spec("i-0000000000000014", "stopped", "0000000000000000")]);
    expect_containers(&w.aws, &[]);
    w.aws
        .expect("TerminateInstances")
        .with(|call| assert_eq!(call.field("InstanceId.1"), "i-0000000000000014"))
        .answers(ec2_answer("TerminateInstances", "<instancesSet/>"));
    driver::pass(&w.cluster).await.expect("pass");
    w.aws.done();
    let health = health(&w);
    assert!(
        health.contains("terminated EC2 instance i-0000000000000014") && health.contains("launch settings"),
        "{health}"
    );
}

#[tokio::test]
async fn a_start_refused_for_capacity_launches_a_new_instance_instead() {
    let w = World::new(&[("Ec2StoppedInstances", "1")]);
    expect_first_create_agent(&w.aws);
    w.cluster.create_agent(w.request(7)).await.expect("queued");
    let spec = catalog_read(&w);
    expect_described(&w.aws, &[w.instance_with_spec("i-0000000000000015", "stopped", &spec)]);
    expect_containers(&w.aws, &[]);
    w.aws.expect("StartInstances").fails(
        500,
        "InsufficientInstanceCapacity",
        "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a).",
    );
    // The subnets and groups the launch resolves (none cached yet).
    let launched_spec = spec.clone();
    w.aws
        .expect("RunInstances")
        .with(move |call| {
            let tags = call.fields_under("TagSpecification.1.Tag.");
            let at = tags.iter().position(|(_, v)| *v == "gocd:launch-spec").expect("the launch-spec tag");
            assert_eq!(tags[at + 1].1, launched_spec, "tagged with the current settings' fingerprint: {tags:?}");
        })
        .answers(launched(&["i-0000000000000016"]));
    driver::pass(&w.cluster).await.expect("pass");
    w.aws.done();
    let st = w.cluster.ec2().state();
    assert_eq!((totals(&st, &w).restarted, totals(&st, &w).launched), (0, 1));
    assert!(st.instance("i-0000000000000015").expect("recorded").parked(), "still stopped, started another time");
}

#[tokio::test]
async fn stopped_instances_are_adopted_after_a_restart_and_the_surplus_terminated() {
    // A new engine (the plugin restarted) with Ec2StoppedInstances lowered to 1: both stopped
    // instances are adopted by their tags; the longest stopped goes.
    let w = World::new(&[("Ec2StoppedInstances", "1")]);
    let spec = catalog_read(&w);
    let older = w.instance_with_spec("i-0000000000000017", "stopped", &spec);
    let newer = w
        .instance_with_spec("i-0000000000000018", "stopped", &spec)
        .replace("2026-12-03T10:00:00.000Z", "2026-12-03T11:00:00.000Z");
    expect_described(&w.aws, &[older, newer]);
    expect_containers(&w.aws, &[]);
    w.aws
        .expect("TerminateInstances")
        .with(|call| assert_eq!(call.field("InstanceId.1"), "i-0000000000000017"))
        .answers(ec2_answer("TerminateInstances", "<instancesSet/>"));
    driver::pass(&w.cluster).await.expect("pass");
    w.aws.done();
    let cfg = w.cluster.profile().ec2.clone().expect("EC2 settings");
    let report = w.cluster.ec2().snapshot(&w.cluster.profile(), &cfg, |t| t);
    assert_eq!((report.stopped, report.counted, report.stopped_instances), (1, 0, 1));
    assert_eq!(report.stopped_ebs_month, "2.40 USD a month", "30 GiB of gp3");
    let row = report.instances.iter().find(|r| r.id == "i-0000000000000018").expect("listed");
    assert!(row.state.starts_with("stopped"), "{}", row.state);
}

// Two EC2 cluster profiles on one ECS cluster: one engine, a pool each.

/// The Windows profile beside the world's Linux one: its own AMI, type and OS, on the same ECS
/// cluster (one engine), as `import` writes them from GoCD's ECS plugin.
const WINDOWS_AMI: &str = "ami-0fedcba9876543210";

fn windows_profile() -> ClusterProfile {
    ec2_profile(&[("Ec2InstanceType", "m5.4xlarge"), ("Ec2AmiId", WINDOWS_AMI), ("Ec2IdleMinutes", "30")])
}

impl World {
    /// create-agent as the plugin serves it: GoCD's profile becomes the engine's last sent and a
    /// served one, then the engine creates the agent with the request's own.
    async fn ask(&self, request: AgentRequest) -> Created {
        self.cluster.set_profile(request.profile.as_ref().clone());
        self.cluster.serve_again(&request.settings, &request.profile);
        self.cluster.create_agent(request).await.expect("queued")
    }

    /// A Windows job (4096 CPU units, 8 GiB: more than the Linux m5.large holds) of the Windows
    /// profile.
    fn windows_request(&self, job_id: i64) -> AgentRequest {
        let elastic = [
            ("Image", "mcr.microsoft.com/dotnet/framework/sdk:4.8"),
            ("OperatingSystemFamily", "WINDOWS_SERVER_2019_FULL"),
            ("Cpu", "4096"),
            ("Memory", "8192"),
        ];
        AgentRequest {
            profile: Arc::new(windows_profile()),
            settings: "team-windows".into(),
            elastic_profile: props(&elastic),
            ..self.request(job_id)
        }
    }
}

/// A second create-agent: its elastic profile's family, looked up (none yet) and registered.
fn expect_another_family(aws: &Verifier) {
    aws.expect("DescribeTaskDefinition").fails(400, "ClientException", "Unable to describe task definition.");
    aws.expect("RegisterTaskDefinition").answers(
        json!({ "taskDefinition": { "taskDefinitionArn": "arn:aws:ecs:us-east-1:123456789012:task-definition/gocd-ci-2:1",
            "family": "gocd-ci-2", "revision": 1, "status": "ACTIVE" } })
        .to_string(),
    );
}

/// One pool's catalog read: its one type, with these vCPUs and MiB, and its one AMI.
fn expect_catalog_of(
    aws: &Verifier,
    instance_type: &'static str,
    (vcpus, mib): (u32, u32),
    ami: &'static str,
    platform: &str,
) {
    let types = format!(
        "<instanceTypeSet><item><instanceType>{instance_type}</instanceType><vCpuInfo><defaultVCpus>{vcpus}</defaultVCpus></vCpuInfo>\
         <memoryInfo><sizeInMiB>{mib}</sizeInMiB></memoryInfo><processorInfo><supportedArchitectures><item>x86_64</item></supportedArchitectures></processorInfo></item></instanceTypeSet>"
    );
    aws.expect("DescribeInstanceTypes")
        .with(move |call| assert_eq!(call.field("InstanceType.1"), instance_type, "the pool's own types"))
        .answers(ec2_answer("DescribeInstanceTypes", &types));
    let images = format!(
        "<imagesSet><item><imageId>{ami}</imageId><architecture>x86_64</architecture>{platform}<rootDeviceName>/dev/xvda</rootDeviceName>\
         <blockDeviceMapping><item><deviceName>/dev/xvda</deviceName><ebs><volumeSize>50</volumeSize></ebs></item></blockDeviceMapping></item></imagesSet>"
    );
    aws.expect("DescribeImages")
        .with(move |call| assert_eq!(call.field("ImageId.1"), ami, "the pool's own AMIs"))
        .answers(ec2_answer("DescribeImages", &images));
}

/// The value of tag `key` a RunInstances asks for.
fn launch_tag(call: &crate::aws::verifier::Call, key: &str) -> String {
    let tags = call.fields_under("TagSpecification.1.Tag.");
    let (name, _) =
        tags.iter().find(|(k, v)| k.ends_with(".Key") && *v == key).unwrap_or_else(|| panic!("{key}: {tags:?}"));
    call.field(&name.replace(".Key", ".Value")).to_string()
}

/// A RunInstances of one pool: its type, AMI, OS (by its user data) and `gocd:ec2-pool` tag.
fn expect_launch_of(
    aws: &Verifier,
    pool: Ec2PoolKey,
    (instance_type, ami, joins): (&'static str, &'static str, &'static str),
    id: &str,
    os: &str,
) {
    aws.expect("RunInstances")
        .with(move |call| {
            assert_eq!((call.field("InstanceType"), call.field("ImageId")), (instance_type, ami));
            assert_eq!(launch_tag(call, "gocd:ec2-pool"), pool.as_str(), "tagged with its pool");
            assert!(
                call.field("BlockDeviceMapping.1.Ebs.VolumeSize").parse::<u32>().unwrap_or(0) >= 50,
                "the AMI's root"
            );
            use base64::Engine;
            let script = base64::engine::general_purpose::STANDARD.decode(call.field("UserData")).expect("base64");
            let script = String::from_utf8_lossy(&script);
            assert!(script.contains(joins), "{instance_type} joins as its OS does: {script}");
        })
        .answers(ec2_answer(
            "RunInstances",
            &format!(
                "<reservationId>r-2</reservationId><ownerId>123456789012</ownerId><instancesSet>{}</instancesSet>",
                instance_xml(id, "pending", None, instance_type, os)
            ),
        ));
}

/// A registered container instance with this much room, empty.
fn container_with(arn: &str, id: &str, (cpu, mib): (u32, u32)) -> serde_json::Value {
    let mut c = container_json(arn, id, "ACTIVE", true);
    for field in ["registeredResources", "remainingResources"] {
        c[field] = json!([{ "name": "CPU", "type": "INTEGER", "integerValue": cpu },
                          { "name": "MEMORY", "type": "INTEGER", "integerValue": mib }]);
    }
    c
}

/// StartTask of job `job_id`'s agent, on this container instance.
fn expect_started_on(aws: &Verifier, job_id: i64, container: &'static str) {
    aws.expect("StartTask")
        .with(move |call| {
            assert_eq!(call.json["containerInstances"], json!([container]), "job {job_id} on its own pool's instance");
            let env = call.json["overrides"]["containerOverrides"][0]["environment"].to_string();
            assert!(env.contains(&format!("key-{job_id}")), "job {job_id}'s agent: {env}");
        })
        .answers(
            json!({ "tasks": [{ "taskArn": format!("arn:aws:ecs:us-east-1:123456789012:task/ci/t{job_id}"),
                "clusterArn": "arn:aws:ecs:us-east-1:123456789012:cluster/ci", "lastStatus": "PENDING",
                "desiredStatus": "RUNNING", "launchType": "EC2", "containerInstanceArn": container }], "failures": [] })
            .to_string(),
        );
}

/// A Linux job (job 7) of the world's profile and a Windows job (job 8) of the Windows profile,
/// asked in this order: each is queued in its own profile's pool, whose catalog is read once,
/// and launched from its own AMI with its own type; once registered, each starts on its own
/// pool's instance. Whichever profile GoCD sent last, nothing is planned with the other's.
async fn two_profiles_each_plan_and_launch_their_own(windows_first: bool) {
    let w = World::new(&[]);
    let (linux, windows) = (w.pool(), pool_key(&windows_profile()).expect("an EC2 profile"));
    assert_ne!(linux, windows);
    let asks = if windows_first { [w.windows_request(8), w.request(7)] } else { [w.request(7), w.windows_request(8)] };
    expect_first_create_agent(&w.aws);
    expect_another_family(&w.aws);
    for request in asks {
        assert_eq!(w.ask(request).await, Created::Queued, "the Windows job fits its own profile's m5.4xlarge");
    }

    // Pass 1: the cluster described once; each pool reads its own catalog and launches its own.
    // The pools go in the order of their profiles' settings (team-a, then team-windows).
    expect_described(&w.aws, &[]);
    expect_containers(&w.aws, &[]);
    expect_catalog_of(&w.aws, "m5.large", (2, 8192), "ami-0abcdef1234567890", "");
    expect_catalog_of(&w.aws, "m5.4xlarge", (16, 65536), WINDOWS_AMI, "<platform>windows</platform>");
    let linux_launch = ("m5.large", "ami-0abcdef1234567890", "ECS_CLUSTER=ci");
    expect_launch_of(&w.aws, linux.clone(), linux_launch, "i-0000000000000031", "linux");
    let windows_launch = ("m5.4xlarge", WINDOWS_AMI, "Initialize-ECSAgent -Cluster 'ci'");
    expect_launch_of(&w.aws, windows.clone(), windows_launch, "i-0000000000000032", "windows");
    driver::pass(&w.cluster).await.expect("pass 1");
    {
        let st = w.cluster.ec2().state();
        let pool_of = |id: &str| st.instance(id).expect("recorded").pool().cloned();
        assert_eq!(
            (pool_of("i-0000000000000031"), pool_of("i-0000000000000032")),
            (Some(linux.clone()), Some(windows.clone()))
        );
        assert_eq!(st.waiting().len(), 2, "both wait for their instances to register");
        let launched = |key: &Ec2PoolKey| st.memory(Some(key)).map(|m| m.counters().launched);
        assert_eq!((launched(&linux), launched(&windows)), (Some(1), Some(1)), "each pool counts its own");
    }

    // Pass 2: both registered; each job starts on its own pool's instance.
    let (linux_ci, windows_ci) = (
        "arn:aws:ecs:us-east-1:123456789012:container-instance/ci/0031",
        "arn:aws:ecs:us-east-1:123456789012:container-instance/ci/0032",
    );
    expect_described(
        &w.aws,
        &[
            instance_xml("i-0000000000000031", "running", Some(&linux), "m5.large", "linux"),
            instance_xml("i-0000000000000032", "running", Some(&windows), "m5.4xlarge", "windows"),
        ],
    );
    expect_containers_json(
        &w.aws,
        &[
            container_with(linux_ci, "i-0000000000000031", (2048, 7680)),
            container_with(windows_ci, "i-0000000000000032", (16384, 63795)),
        ],
    );
    expect_started_on(&w.aws, 7, linux_ci);
    expect_started_on(&w.aws, 8, windows_ci);
    driver::pass(&w.cluster).await.expect("pass 2");
    w.aws.done();
    assert!(w.cluster.ec2().state().waiting().is_empty(), "both started");
    assert!(w.gocd.console_of(8).iter().any(|l| l.contains("i-0000000000000032")), "{:?}", w.gocd.console_of(8));
    // Each profile's status report shows its own pool.
    let report = |profile: &ClusterProfile| {
        let cfg = profile.ec2.clone().expect("EC2 settings");
        let snapshot = w.cluster.ec2().snapshot(profile, &cfg, |t| t);
        snapshot.instances.iter().map(|r| r.instance_type.clone()).collect::<Vec<_>>()
    };
    assert_eq!(report(&ec2_profile(&[])), ["m5.large"]);
    assert_eq!(report(&windows_profile()), ["m5.4xlarge"]);
}

#[tokio::test]
async fn two_ec2_profiles_on_one_cluster_plan_and_launch_each_job_with_its_own_settings() {
    two_profiles_each_plan_and_launch_their_own(false).await;
}

#[tokio::test]
async fn two_ec2_profiles_on_one_cluster_plan_and_launch_their_own_whichever_asks_first() {
    two_profiles_each_plan_and_launch_their_own(true).await;
}

/// An instance of EC2 settings no served profile has (its profile was edited: here
/// `i-…41`'s pool, idle) is left alone until every profile was heard (after a restart, the
/// first server-ping), then retired once it has no task; one launched without a pool tag
/// (`i-…42`) goes the same way, but not while it runs a task. The served profile's own
/// instance (`i-…43`, idle within its Ec2IdleMinutes) stays.
#[tokio::test]
async fn an_instance_of_settings_no_profile_has_is_retired_once_every_profile_was_heard_and_it_is_empty() {
    let w = World::new(&[]);
    catalog_read(&w);
    let gone: Ec2PoolKey = "0123456789ab".into();
    let (left, untagged, ours) = ("i-0000000000000041", "i-0000000000000042", "i-0000000000000043");
    let ci = |n: &str| format!("arn:aws:ecs:us-east-1:123456789012:container-instance/ci/00{n}");
    let (left_ci, untagged_ci, ours_ci) = (ci("41"), ci("42"), ci("43"));
    let describe = |w: &World, untagged_tasks: u32| {
        expect_described(
            &w.aws,
            &[
                instance_xml(left, "running", Some(&gone), "m5.large", "linux"),
                instance_xml(untagged, "running", None, "m5.large", "linux"),
                w.instance_xml(ours, "running"),
            ],
        );
        expect_containers(
            &w.aws,
            &[
                (left_ci.as_str(), left, 2048, 7680, 0),
                (untagged_ci.as_str(), untagged, 1536, 6656, untagged_tasks),
                (ours_ci.as_str(), ours, 2048, 7680, 0),
            ],
        );
    };
    // A restart: nothing but the reads until every profile was heard.
    describe(&w, 1);
    driver::pass(&w.cluster).await.expect("pass 1");
    w.clock.advance(std::time::Duration::from_secs(120));
    describe(&w, 1);
    driver::pass(&w.cluster).await.expect("pass 2");
    assert!(w.cluster.ec2().state().instances().all(|r| r.retiring().is_none()), "left alone");

    // The first server-ping: every profile heard. The empty left-over instance goes (never
    // stopped into a pool), the busy one stays until it empties.
    w.cluster.heard_every_profile();
    describe(&w, 1);
    w.aws
        .expect("UpdateContainerInstancesState")
        .with({
            let arn = left_ci.clone();
            move |call| assert_eq!(call.json["containerInstances"], json!([arn]))
        })
        .answers(json!({ "containerInstances": [], "failures": [] }).to_string());
    w.aws
        .expect("DeregisterContainerInstance")
        .answers(json!({ "containerInstance": { "containerInstanceArn": left_ci } }).to_string());
    w.aws
        .expect("TerminateInstances")
        .with(move |call| assert_eq!(call.field("InstanceId.1"), left))
        .answers(ec2_answer("TerminateInstances", "<instancesSet/>"));
    driver::pass(&w.cluster).await.expect("pass 3");
    w.aws.done();
    let st = w.cluster.ec2().state();
    assert_eq!(
        st.instance(left).expect("recorded").retiring(),
        Some(crate::cluster::capacity::ec2::plan::RetireReason::LeftOver),
        "terminated as left over"
    );
    assert!(st.is_gone(left));
    assert!(
        st.instance(untagged).expect("recorded").retiring().is_none()
            && st.instance(ours).expect("recorded").retiring().is_none()
    );
    assert_eq!(totals(&st, &w).stopped, 0);
}

/// GoCD edits the profile's EC2 settings while a job's agent waits for room: the work queued
/// under the old settings is dropped (GoCD asks again, and it waits under the new ones), never
/// launched with settings no profile has.
#[tokio::test]
async fn work_waiting_under_edited_ec2_settings_is_dropped_not_launched() {
    let w = World::new(&[]);
    expect_first_create_agent(&w.aws);
    assert_eq!(w.ask(w.request(7)).await, Created::Queued);
    let edited = ec2_profile(&[("Ec2InstanceType", "m5.xlarge")]);
    w.cluster.serve_again(&"team-a-edited".into(), &edited);
    w.cluster.settings_edited(&"team-a".into(), &"team-a-edited".into());
    // The edited profile's pool reads its catalog; nothing waits in it, so nothing launches.
    expect_described(&w.aws, &[]);
    expect_containers(&w.aws, &[]);
    expect_catalog_of(&w.aws, "m5.xlarge", (4, 16384), "ami-0abcdef1234567890", "");
    driver::pass(&w.cluster).await.expect("pass");
    w.aws.done();
    assert!(w.cluster.ec2().state().waiting().is_empty(), "dropped");
    let agent = w.cluster.registry().all().next().cloned().expect("the agent's record");
    assert!(agent.phase != crate::cluster::agents::Phase::Launching, "released: {:?}", agent.phase);
}
