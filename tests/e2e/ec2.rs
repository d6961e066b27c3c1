//! End-to-end scenarios of `LaunchType` `EC2`: the plugin launches container
//! instances into the cluster profile's account, packs agent tasks onto them with StartTask and
//! retires them when idle. Each scenario has its own world: a fresh moto, a proxy in front of it
//! (the plugin's `AWS_ENDPOINT_URL`), the real plugin driven by the GoCD host simulator, the
//! agent simulator registering the agents of its tasks, and the instance simulator playing the
//! ECS agent of every instance the plugin launches.
//!
//! Every scenario ends in [`Scenario::finish_ec2`]: every instance of ours terminated and its
//! container instance deregistered, no task left RUNNING, no secret in what operators read, a
//! clean plugin shutdown, and one `FIGURES:` line on stderr (`-- --nocapture` shows them).
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`); without it the tests panic, never skip.

use crate::world;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::world::ec2::{create_instance_profile, Ec2Policy, InstanceSimulator};
use crate::world::host::{HostState, JobHandle, Props};
use crate::world::moto::{self, REGION, TEST_ACCESS_KEY_ID};
use crate::world::profiles::{cluster_props, elastic_props, IMAGE};
use crate::world::proxy::{Outcome, Verdict};
use crate::world::*;
use aws_config::SdkConfig;

const AMI: &str = "ami-0abcdef1234567890";
const INSTANCE_PROFILE: &str = "gocd-ecs-instance";
const ROLE_ARN: &str = "arn:aws:iam::111111111111:role/gocd-agents";
/// Idle instances retire after `Ec2IdleMinutes` (at most 1) plus a pass or two.
const RETIRE_WITHIN: Duration = Duration::from_secs(100);

/// `Ec2IdleMinutes` of the scenarios about the idle time itself, and of those whose later jobs
/// must find the instances of the earlier ones.
const IDLE_A_MINUTE: (&str, &str) = ("Ec2IdleMinutes", "1");

/// An EC2 cluster profile: c5.xlarge (4096 CPU, 7482 MiB), plus extra keys. An instance goes as
/// soon as it runs no task (`Ec2IdleMinutes` 0): a scenario ends once every instance is gone,
/// and waiting out an idle time would check nothing it is about ([`IDLE_A_MINUTE`] for those
/// it is about).
pub(crate) fn ec2_props(cluster: &str, extra: &[(&str, &str)]) -> Props {
    let mut p = props(&[
        ("ClusterName", cluster),
        ("Region", REGION),
        ("LaunchType", "EC2"),
        ("Ec2InstanceType", "c5.xlarge"),
        ("Ec2InstanceProfile", INSTANCE_PROFILE),
        ("Ec2AmiId", AMI),
        ("Ec2IdleMinutes", "0"),
        ("Ec2MaxInstances", "10"),
        ("MaxAgents", "40"),
        // These tests follow an instance's whole life to its termination; the stopped pool
        // (five by default) has its own test, which sets it.
        ("Ec2StoppedInstances", "0"),
    ]);
    p.extend(props(extra));
    p
}

/// Tasks of 1024 CPU units and 1800 MiB: four fit a c5.xlarge.
pub(crate) fn quarter_props() -> Props {
    props(&[("Image", IMAGE), ("Cpu", "1024"), ("Memory", "1800")])
}

/// What these tests do with a scenario, beside what the test world gives.
pub(crate) trait Ec2Scenario {
    /// Creates an ECS cluster and the instance profile in the account of `cfg` (whose access key
    /// is `access_key_id`) and watches it.
    async fn ec2_cluster(&mut self, label: &str, cfg: &SdkConfig, access_key_id: &str, cluster: &str);
    fn instances(&self, host: &GoCdHost, policy: Ec2Policy) -> InstanceSimulator;
    /// Container instances still ACTIVE or DRAINING in each fleet's cluster.
    async fn registered_container_instances(&self) -> Vec<String>;
    /// Waits for every instance to be terminated, then checks nothing is left.
    async fn finish_ec2(self, host: GoCdHost, sim: AgentSimulator, ec2: InstanceSimulator, extra: &str);
}

impl Ec2Scenario for Scenario {
    /// Creates an ECS cluster and the instance profile in the account of `cfg` (whose access key
    /// is `access_key_id`) and watches it.
    async fn ec2_cluster(&mut self, label: &str, cfg: &SdkConfig, access_key_id: &str, cluster: &str) {
        self.cluster(label, cfg, cluster).await;
        create_instance_profile(self.moto.addr(), access_key_id, INSTANCE_PROFILE).await;
    }

    fn instances(&self, host: &GoCdHost, policy: Ec2Policy) -> InstanceSimulator {
        InstanceSimulator::start(self.fleets.clone(), host.server_id(), policy)
    }

    /// Container instances still ACTIVE or DRAINING in each fleet's cluster.
    async fn registered_container_instances(&self) -> Vec<String> {
        let mut left = Vec::new();
        for f in &self.fleets {
            let ecs = aws_sdk_ecs::Client::new(&f.config);
            let out = ecs.list_container_instances().cluster(&f.cluster).send().await.expect("ListContainerInstances");
            left.extend(out.container_instance_arns().iter().map(|a| format!("{}: {a}", f.label)));
        }
        left
    }

    /// Waits for every instance to be terminated, then checks nothing is left.
    async fn finish_ec2(self, host: GoCdHost, sim: AgentSimulator, ec2: InstanceSimulator, extra: &str) {
        self.assert_no_aws_rule_broken();
        ec2.wait_until("every instance terminated after the idle time", RETIRE_WITHIN, |s| s.alive().is_empty()).await;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = self.registered_container_instances().await;
            if left.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "container instances left registered: {left:?}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        for f in &self.fleets {
            let live = moto::live_tasks(&f.config, &f.cluster).await;
            assert!(live.is_empty(), "{}: {} tasks still RUNNING", f.label, live.len());
        }
        // The cluster report (with its instance table) is rendered for the secret scan.
        let ids: Vec<String> = host.config().cluster_profiles.iter().map(|c| c.id.clone()).collect();
        for id in &ids {
            let r = host.cluster_status_report(id).await.expect("cluster status report");
            assert_eq!(r.code, 200, "cluster status report answered {}", r.code);
        }
        let scanner = SecretScanner::from_world(&host, Some(&self.proxy));
        scanner.assert_host_clean(&host);
        let counts = self.proxy.counts();
        let count = |k: &str| counts.get(k).copied().unwrap_or(0);
        let instances = ec2.instances();
        eprintln!(
            "FIGURES: test={} secs={} jobs={} instances_launched={} max_instances_alive={} run_instances_calls={} terminate_calls={} start_task={} describe_instances={} describe_container_instances={} max_live_tasks={} {} all_calls={:?}",
            self.name,
            self.started.elapsed().as_secs(),
            host.with_state(|s| s.jobs.len()),
            instances.len(),
            ec2.max_alive(),
            count("ec2:RunInstances"),
            count("ec2:TerminateInstances"),
            count("ecs:StartTask"),
            count("ec2:DescribeInstances"),
            count("ecs:DescribeContainerInstances"),
            sim.max_live(),
            extra,
            counts,
        );
        drop(sim);
        drop(ec2);
        host.shutdown().await;
        drop(self.moto);
    }
}

/// Agents register 300 ms after their task starts.
fn quick_registration() -> SimPolicy {
    SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() }
}

/// Every job completed, every agent deleted, no registration refused, one task per job.
async fn assert_all_done(host: &GoCdHost, sim: &AgentSimulator) {
    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    let (rejections, ids) = host.with_state(|s: &HostState| {
        (s.rejections.clone(), s.jobs.iter().map(|j| j.identifier.job_id).collect::<Vec<_>>())
    });
    assert!(rejections.is_empty(), "GoCD refused registrations: {rejections:?}");
    for id in ids {
        assert_eq!(sim.tasks_for_job(id), 1, "job {id} ran in {} tasks", sim.tasks_for_job(id));
    }
}

/// (a) 30 jobs whose tasks fit four to an instance are served by at most 8 instances (packed,
/// launched with the profile's AMI, type, instance profile, IMDSv2, tags and user data), and
/// every instance is terminated once idle for `Ec2IdleMinutes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_jobs_pack_four_to_an_instance_and_every_instance_retires_when_idle() {
    let mut w = Scenario::new("thirty_jobs_packed").await;
    let base = w.base.clone();
    w.ec2_cluster("base", &base, TEST_ACCESS_KEY_ID, "gocd-ec2").await;
    let cfg = w
        .host_config()
        .cluster_profile("ec2", ec2_props("gocd-ec2", &[("Tags", "team=ci"), ("Ec2KeyPair", "ops"), IDLE_A_MINUTE]))
        .elastic_profile("quarter", "ec2", quarter_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, quick_registration());
    let ec2 = w.instances(&host, Ec2Policy::default());

    host.add_jobs(JobSpec::new("quarter", Duration::from_secs(8)), 30).await;
    host.wait_until("all 30 jobs completed", Duration::from_secs(180), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;
    let all_done_at = Instant::now();

    let instances = ec2.instances();
    assert!(
        !instances.is_empty() && instances.len() <= 8,
        "{} instances served 30 quarter-instance tasks",
        instances.len()
    );
    let server_id = host.server_id().to_string();
    let keys: BTreeSet<Option<&String>> = instances.iter().map(|i| i.tags.get("gocd:cluster-profile")).collect();
    assert_eq!(keys.len(), 1, "one cluster profile key on every instance: {keys:?}");
    for i in &instances {
        assert_eq!(i.instance_type, "c5.xlarge");
        assert!(!i.spot, "on-demand unless Ec2Spot");
        assert_eq!(i.tags.get("gocd:server-id"), Some(&server_id), "tags {:?}", i.tags);
        assert_eq!(i.tags.get("team").map(String::as_str), Some("ci"), "the profile's Tags: {:?}", i.tags);
        assert!(i.tags.get("Name").is_some_and(|n| n.contains("gocd-ec2")), "Name tag: {:?}", i.tags);
        assert!(
            i.iam_instance_profile.as_deref().is_some_and(|p| p.ends_with(INSTANCE_PROFILE)),
            "{:?}",
            i.iam_instance_profile
        );
        assert_eq!(i.key_name.as_deref(), Some("ops"));
        assert_eq!(i.http_tokens.as_deref(), Some("required"), "IMDSv2 required");
        assert_eq!(i.cluster.as_deref(), Some("gocd-ec2"), "user data joins the cluster:\n{}", i.user_data);
        assert!(i.user_data.contains(&server_id), "user data names the server in the attributes:\n{}", i.user_data);
        assert!(i.registered_at.is_some(), "instance {} never registered", i.id);
    }
    // Every task ran on one of them (StartTask on a container instance).
    let tasks = sim.with_state(|s| s.tasks.len());
    assert_eq!(tasks, 30);
    // The cluster report lists the instances, counted against min and max: every instance still
    // up after the report was up during it (one whose jobs ended early may have retired already,
    // after its own idle minute, on a slow machine).
    let report = host.cluster_status_report("ec2").await.expect("cluster status report");
    let view = report.body["view"].as_str().unwrap_or_default().to_string();
    assert!(view.contains("EC2 instances"), "no instance table in the cluster report");
    // The instance watcher polls every 300 ms: two seconds lets it see a termination the
    // report already left out.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let up: Vec<String> = ec2.instances().into_iter().filter(|i| i.gone_at.is_none()).map(|i| i.id).collect();
    assert!(!up.is_empty(), "every instance retired before the report: the last job's ended under a minute ago");
    for id in &up {
        assert!(view.contains(id), "instance {id} missing from the cluster report");
    }
    assert!(view.contains("(min 0, max 10)"), "counts against min and max");
    // Each job paid its share of its instance (README "Cost per job").
    let handles = host.with_state(|s| s.jobs.iter().map(|j| j.handle).collect::<Vec<_>>());
    for h in handles {
        let console = host.console_log(h);
        assert!(
            console.iter().any(|l| l.contains("on EC2 instance i-")
                && l.contains("(c5.xlarge, 30 GiB gp3, us-east-1), reserving 25 % of it: $")
                && l.contains("its share of the instance's boot and idle time")),
            "no cost line: {console:#?}"
        );
    }
    assert!(view.contains("30 jobs"), "the report counts the 30 jobs' cost");

    ec2.wait_until("every instance terminated after the idle time", RETIRE_WITHIN, |s| s.alive().is_empty()).await;
    let retired_after = all_done_at.elapsed();
    assert!(
        retired_after >= Duration::from_secs(50),
        "instances retired {retired_after:?} after the last job: before Ec2IdleMinutes"
    );
    let extra = format!("retired_after_last_job_s={}", retired_after.as_secs());
    w.finish_ec2(host, sim, ec2, &extra).await;
}

/// The EC2 instance type each task ran on, read from AWS as an operator would: DescribeTasks →
/// its container instance → DescribeContainerInstances → its EC2 instance → DescribeInstances.
async fn instance_type_of_tasks(cfg: &SdkConfig, cluster: &str, arns: &[String]) -> BTreeMap<String, String> {
    let ecs = aws_sdk_ecs::Client::new(cfg);
    let ec2 = aws_sdk_ec2::Client::new(cfg);
    let mut container_of = BTreeMap::new();
    for chunk in arns.chunks(100) {
        let out =
            ecs.describe_tasks().cluster(cluster).set_tasks(Some(chunk.to_vec())).send().await.expect("DescribeTasks");
        for t in out.tasks() {
            let (Some(arn), Some(ci)) = (t.task_arn(), t.container_instance_arn()) else { continue };
            container_of.insert(arn.to_string(), ci.to_string());
        }
    }
    let cis: Vec<String> = container_of.values().cloned().collect::<BTreeSet<_>>().into_iter().collect();
    let out = ecs
        .describe_container_instances()
        .cluster(cluster)
        .set_container_instances(Some(cis))
        .send()
        .await
        .expect("DescribeContainerInstances");
    let ec2_of: BTreeMap<String, String> = out
        .container_instances()
        .iter()
        .filter_map(|c| Some((c.container_instance_arn()?.to_string(), c.ec2_instance_id()?.to_string())))
        .collect();
    let ids: Vec<String> = ec2_of.values().cloned().collect::<BTreeSet<_>>().into_iter().collect();
    let out = ec2.describe_instances().set_instance_ids(Some(ids)).send().await.expect("DescribeInstances");
    let type_of: BTreeMap<String, String> = out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| Some((i.instance_id()?.to_string(), i.instance_type()?.as_str().to_string())))
        .collect();
    container_of.into_iter().filter_map(|(task, ci)| Some((task, type_of.get(ec2_of.get(&ci)?)?.clone()))).collect()
}

/// Windows jobs on a profile that also serves Linux: each runs on an instance launched with the
/// Windows AMI and joined by the PowerShell script, from a task definition ECS accepts for
/// Windows (the proxy refuses the `bridge` network mode for Windows, as ECS does); the Linux job
/// gets a Linux instance, and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn windows_jobs_run_on_windows_instances_from_a_task_definition_ecs_accepts() {
    let mut w = Scenario::new("ec2_windows").await;
    let base = w.base.clone();
    w.ec2_cluster("base", &base, TEST_ACCESS_KEY_ID, "gocd-ec2").await;
    let linux_ami = world::ec2::al2023_ami(&base, "x86_64").await;
    let windows_ami = world::ec2::windows_ami(&base).await;
    // The image of every RunInstances and the network mode of every task definition, in order.
    let seen = Arc::new(Mutex::new((Vec::<String>::new(), Vec::<Option<String>>::new())));
    let record = seen.clone();
    w.proxy.add_rule("windows", move |call| {
        if call.is("ec2", "RunInstances") {
            record.lock().unwrap().0.push(call.form_param("ImageId").unwrap_or_default().to_string());
        }
        if call.is("ecs", "RegisterTaskDefinition") {
            let mode = call.json().and_then(|v| v["networkMode"].as_str().map(str::to_string));
            record.lock().unwrap().1.push(mode);
        }
        Verdict::Forward
    });
    let cluster = ec2_props("gocd-ec2", &[("Ec2AmiId", &format!("{linux_ami}, {windows_ami}"))]);
    let mut windows = quarter_props();
    windows.extend(props(&[("OperatingSystemFamily", "WINDOWS_SERVER_2022_CORE")]));
    let cfg = w
        .host_config()
        .cluster_profile("ec2", cluster)
        .elastic_profile("windows", "ec2", windows)
        .elastic_profile("linux", "ec2", quarter_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, quick_registration());
    let ec2 = w.instances(&host, Ec2Policy::default());

    host.add_jobs(JobSpec::new("windows", Duration::from_secs(5)), 2).await;
    host.add_job(JobSpec::new("linux", Duration::from_secs(5))).await;
    host.wait_until("all 3 jobs completed", Duration::from_secs(180), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;
    let (images, modes) = seen.lock().unwrap().clone();
    let mut images_sorted = images.clone();
    images_sorted.sort();
    let mut expected = vec![linux_ami.clone(), windows_ami.clone()];
    expected.sort();
    assert_eq!(images_sorted, expected, "one Windows instance (both jobs) and one Linux instance: {images:?}");
    let mut modes_sorted = modes.clone();
    modes_sorted.sort();
    assert_eq!(modes_sorted, [None, Some("bridge".to_string())], "Windows: ECS's default mode; Linux: bridge");
    w.finish_ec2(host, sim, ec2, &format!("windows_ami={windows_ami}")).await;
}

/// (a2) One cluster profile lists an x86 and a Graviton type (`c5.xlarge, c6g.xlarge`) with an
/// x86_64 and an arm64 AMI; x86 and ARM64 elastic profiles each run their jobs on instances of
/// their architecture only, every instance launched with the AMI of its type's architecture
/// (the proxy refuses a mismatch, as AWS does), and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn x86_and_arm64_jobs_of_one_profile_run_on_instances_of_their_architecture() {
    let mut w = Scenario::new("two_architectures").await;
    let base = w.base.clone();
    w.ec2_cluster("base", &base, TEST_ACCESS_KEY_ID, "gocd-ec2").await;
    let x86_ami = world::ec2::al2023_ami(&base, "x86_64").await;
    let arm_ami = world::ec2::al2023_ami(&base, "arm64").await;
    let amis = format!("{x86_ami}, {arm_ami}");
    let cluster = ec2_props("gocd-ec2", &[("Ec2InstanceType", "c5.xlarge,\nc6g.xlarge"), ("Ec2AmiId", &amis)]);
    let mut arm = quarter_props();
    arm.extend(props(&[("CpuArchitecture", "ARM64")]));
    let mut x86 = quarter_props();
    x86.extend(props(&[("CpuArchitecture", "X86_64")]));
    let cfg = w
        .host_config()
        .cluster_profile("ec2", cluster)
        .elastic_profile("x86", "ec2", x86)
        .elastic_profile("arm", "ec2", arm);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, quick_registration());
    let ec2 = w.instances(&host, Ec2Policy::default());

    host.add_jobs(JobSpec::new("x86", Duration::from_secs(8)), 6).await;
    host.add_jobs(JobSpec::new("arm", Duration::from_secs(8)), 6).await;
    host.wait_until("all 12 jobs completed", Duration::from_secs(180), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;

    // Each job's task, and the instance type AWS says it ran on.
    let profile_of: BTreeMap<String, String> = host.with_state(|s| {
        s.jobs.iter().map(|j| (j.identifier.job_id.to_string(), j.spec.elastic_profile.clone())).collect()
    });
    let tasks: Vec<(String, String)> =
        sim.with_state(|s| s.tasks.values().filter_map(|t| Some((t.task_arn.clone(), t.job_id.clone()?))).collect());
    assert_eq!(tasks.len(), 12, "one task per job");
    let arns: Vec<String> = tasks.iter().map(|(arn, _)| arn.clone()).collect();
    let ran_on = instance_type_of_tasks(&base, "gocd-ec2", &arns).await;
    let mut per_type: BTreeMap<&str, usize> = BTreeMap::new();
    for (arn, job) in &tasks {
        let profile = profile_of.get(job).map(String::as_str).unwrap_or_else(|| panic!("job {job} unknown"));
        let instance_type =
            ran_on.get(arn).map(String::as_str).unwrap_or_else(|| panic!("task {arn} ran on no instance"));
        let expected = if profile == "arm" { "c6g.xlarge" } else { "c5.xlarge" };
        assert_eq!(instance_type, expected, "job {job} ({profile}) ran on a {instance_type}");
        *per_type.entry(instance_type).or_default() += 1;
    }
    assert_eq!(per_type, BTreeMap::from([("c5.xlarge", 6), ("c6g.xlarge", 6)]));
    let instances = ec2.instances();
    let launched: BTreeSet<&str> = instances.iter().map(|i| i.instance_type.as_str()).collect();
    assert_eq!(launched, BTreeSet::from(["c5.xlarge", "c6g.xlarge"]));
    assert!(instances.len() <= 4, "6 quarter tasks of each architecture need 2 instances each: {}", instances.len());

    // The cluster report counts the instances by type, with their architecture.
    let report = host.cluster_status_report("ec2").await.expect("cluster status report");
    let view = report.body["view"].as_str().unwrap_or_default().to_string();
    assert!(view.contains("c6g.xlarge (arm64)") && view.contains("c5.xlarge (x86_64)"), "no count by type:\n{view}");
    let extra = format!(
        "x86_instances={} arm_instances={}",
        instances.iter().filter(|i| i.instance_type == "c5.xlarge").count(),
        instances.iter().filter(|i| i.instance_type == "c6g.xlarge").count()
    );
    w.finish_ec2(host, sim, ec2, &extra).await;
}

/// (b) An instance that never registers is terminated after `Ec2RegisterTimeoutMinutes` (1), and
/// the work that waited for it runs on a new instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_instance_that_never_registers_is_terminated_and_its_work_placed_elsewhere() {
    let mut w = Scenario::new("never_registers").await;
    let base = w.base.clone();
    w.ec2_cluster("base", &base, TEST_ACCESS_KEY_ID, "gocd-ec2").await;
    let cfg = w
        .host_config()
        .cluster_profile("ec2", ec2_props("gocd-ec2", &[("Ec2RegisterTimeoutMinutes", "1")]))
        .elastic_profile("quarter", "ec2", quarter_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, quick_registration());
    let ec2 = w.instances(&host, Ec2Policy { never_register_first: 1, ..Ec2Policy::default() });

    host.add_jobs(JobSpec::new("quarter", Duration::from_secs(3)), 2).await;
    ec2.wait_until("the first instance seen", Duration::from_secs(30), |s| !s.instances.is_empty()).await;
    let first = ec2.with_state(|s| s.instances.values().find(|i| i.order == 0).cloned()).expect("first instance");
    assert!(first.never_registers);
    ec2.wait_until("the unregistered instance terminated", Duration::from_secs(120), |s| {
        s.instances.get(&first.id).is_some_and(|i| i.gone_at.is_some())
    })
    .await;
    // From EC2's LaunchTime, which the plugin's timeout counts from too: the simulator's first
    // sighting can lag the launch by tens of seconds on a loaded machine. The simulator's sighting
    // of the termination lags too, so the upper bound leaves room for it.
    let launched = first.launched_at.expect("EC2's LaunchTime");
    let terminated_after = std::time::SystemTime::now().duration_since(launched).unwrap_or_default();
    assert!(
        terminated_after >= Duration::from_secs(55),
        "terminated after {terminated_after:?}, before the 1-minute timeout"
    );
    assert!(terminated_after <= Duration::from_secs(120), "terminated only after {terminated_after:?}");

    host.wait_until("both jobs completed on another instance", Duration::from_secs(90), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;
    let instances = ec2.instances();
    assert_eq!(instances.len(), 2, "one replacement: {:?}", instances.iter().map(|i| &i.id).collect::<Vec<_>>());
    host.wait_until("a server-health warning names the instance", Duration::from_secs(10), |s| {
        s.health_ever_mentions(&first.id)
    })
    .await;
    let extra = format!("terminated_after_s={}", terminated_after.as_secs());
    w.finish_ec2(host, sim, ec2, &extra).await;
}

/// Whether a RunInstances asks for spot.
fn asks_spot(call: &world::proxy::Call) -> bool {
    call.is("ec2", "RunInstances") && call.form_param("InstanceMarketOptions.MarketType") == Some("spot")
}

/// (c) With `Ec2Spot`, a spot RunInstances refused for capacity (EC2's
/// `InsufficientInstanceCapacity`, HTTP 500) is followed by an on-demand launch, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn spot_refused_for_capacity_falls_back_to_on_demand() {
    let mut w = Scenario::new("spot_falls_back").await;
    let base = w.base.clone();
    w.ec2_cluster("base", &base, TEST_ACCESS_KEY_ID, "gocd-ec2").await;
    w.proxy.add_rule("no-spot", |call| {
        if asks_spot(call) {
            Verdict::ec2_error(
                500,
                "InsufficientInstanceCapacity",
                "There is no Spot capacity available that matches your request.",
            )
        } else {
            Verdict::Forward
        }
    });
    let cfg = w.host_config().cluster_profile("ec2", ec2_props("gocd-ec2", &[("Ec2Spot", "true")])).elastic_profile(
        "quarter",
        "ec2",
        quarter_props(),
    );
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, quick_registration());
    let ec2 = w.instances(&host, Ec2Policy::default());

    host.add_jobs(JobSpec::new("quarter", Duration::from_secs(3)), 4).await;
    host.wait_until("the 4 jobs completed", Duration::from_secs(90), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;

    let log = w.proxy.log();
    let refused = log.iter().filter(|r| r.key() == "ec2:RunInstances" && r.outcome == Outcome::Answered).count();
    let launched = log.iter().filter(|r| r.key() == "ec2:RunInstances" && r.outcome == Outcome::Forwarded).count();
    assert_eq!(refused, 1, "one spot attempt, not retried: a capacity refusal is not transient");
    assert_eq!(launched, 1, "then one on-demand launch");
    let instances = ec2.instances();
    assert_eq!(instances.len(), 1, "4 quarter tasks fit one instance");
    assert!(instances.iter().all(|i| !i.spot), "the fallback is on-demand");
    host.wait_until("a server-health warning about spot", Duration::from_secs(10), |s| {
        s.health_ever_mentions("InsufficientInstanceCapacity")
    })
    .await;
    w.finish_ec2(host, sim, ec2, &format!("spot_refused={refused}")).await;
}

/// (c2) Several types with `Ec2Spot`: spot capacity refused for the first type falls to the next
/// fitting type, still spot, before any on-demand launch.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_type_refused_for_spot_capacity_falls_to_the_next_type_before_on_demand() {
    let mut w = Scenario::new("spot_next_type").await;
    let base = w.base.clone();
    w.ec2_cluster("base", &base, TEST_ACCESS_KEY_ID, "gocd-ec2").await;
    // Every RunInstances: (instance type, spot, refused).
    let runs: Arc<Mutex<Vec<(String, bool, bool)>>> = Arc::default();
    let seen = runs.clone();
    w.proxy.add_rule("no-c5-spot", move |call| {
        if !call.is("ec2", "RunInstances") {
            return Verdict::Forward;
        }
        let instance_type = call.form_param("InstanceType").unwrap_or_default().to_string();
        let refuse = asks_spot(call) && instance_type == "c5.xlarge";
        seen.lock().unwrap().push((instance_type, asks_spot(call), refuse));
        if refuse {
            Verdict::ec2_error(500, "InsufficientInstanceCapacity", "There is no Spot capacity for c5.xlarge.")
        } else {
            Verdict::Forward
        }
    });
    // EC2's Spot price for the instance's type and zone, as AWS answers.
    w.proxy.add_rule("spot-price", world::proxy::rules::spot_price_history("0.061200"));
    let cluster = ec2_props("gocd-ec2", &[("Ec2Spot", "true"), ("Ec2InstanceType", "c5.xlarge, c5a.xlarge")]);
    let cfg = w.host_config().cluster_profile("ec2", cluster).elastic_profile("quarter", "ec2", quarter_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, quick_registration());
    let ec2 = w.instances(&host, Ec2Policy::default());

    host.add_jobs(JobSpec::new("quarter", Duration::from_secs(3)), 4).await;
    host.wait_until("the 4 jobs completed", Duration::from_secs(90), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;

    let runs = runs.lock().unwrap().clone();
    let expected = [("c5.xlarge".to_string(), true, true), ("c5a.xlarge".to_string(), true, false)];
    assert_eq!(runs, expected, "c5.xlarge spot refused, then c5a.xlarge spot, no on-demand");
    let instances = ec2.instances();
    assert_eq!(instances.len(), 1, "4 quarter tasks fit one instance");
    assert_eq!((instances[0].instance_type.as_str(), instances[0].spot), ("c5a.xlarge", true));
    // Each job is priced at the instance's Spot price, read once for the four.
    let line = host.cost_line(JobHandle(0)).await;
    assert!(line.contains("(c5a.xlarge, Spot at $0.0612 an hour"), "{line}");
    assert_eq!(w.proxy.count("ec2:DescribeSpotPriceHistory"), 1, "one read for the four jobs");
    host.wait_until("a server-health warning names the refused type", Duration::from_secs(10), |s| {
        s.health_ever_mentions("c5.xlarge: InsufficientInstanceCapacity")
    })
    .await;
    w.finish_ec2(host, sim, ec2, "").await;
}

/// (c3) Capacity refused for every spot type and, in the first zone, on demand too: the plugin
/// walks types, markets and zones (three types spot and three on demand in the first subnet,
/// three spot and one on demand in the second: 10 RunInstances calls) within EC2's RunInstances rate, 5 at once and 2 a second
/// (`ec2.request_rate`, which `Scenario::finish` holds it to), and lands on demand in the
/// second zone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn capacity_refused_everywhere_but_one_zone_is_walked_within_ec2s_launch_rate() {
    let mut w = Scenario::new("launch_rate").await;
    let base = w.base.clone();
    w.ec2_cluster("base", &base, TEST_ACCESS_KEY_ID, "gocd-ec2").await;
    // Every RunInstances that reached the test's rule: (when, subnet, spot).
    let runs: Arc<Mutex<Vec<(Instant, String, bool)>>> = Arc::default();
    let seen = runs.clone();
    w.proxy.add_rule("no-capacity", move |call| {
        if !call.is("ec2", "RunInstances") {
            return Verdict::Forward;
        }
        let subnet = call.form_param("NetworkInterface.1.SubnetId").unwrap_or_default().to_string();
        let mut runs = seen.lock().unwrap();
        let first_zone = runs.first().is_none_or(|(_, first, _)| *first == subnet);
        runs.push((Instant::now(), subnet, asks_spot(call)));
        if asks_spot(call) || first_zone {
            Verdict::ec2_error(500, "InsufficientInstanceCapacity", "There is no capacity in this zone.")
        } else {
            Verdict::Forward
        }
    });
    let types = ("Ec2InstanceType", "c5.xlarge, c5a.xlarge, m5.xlarge");
    let cluster = ec2_props("gocd-ec2", &[("Ec2Spot", "true"), types]);
    let cfg = w.host_config().cluster_profile("ec2", cluster).elastic_profile("quarter", "ec2", quarter_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, quick_registration());
    let ec2 = w.instances(&host, Ec2Policy::default());

    host.add_jobs(JobSpec::new("quarter", Duration::from_secs(3)), 2).await;
    host.wait_until("the 2 jobs completed", Duration::from_secs(120), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;

    let runs = runs.lock().unwrap().clone();
    let markets: Vec<bool> = runs.iter().map(|(_, _, spot)| *spot).collect();
    let walk = [true, true, true, false, false, false, true, true, true, false];
    assert_eq!(
        markets, walk,
        "3 types spot, then on demand, in the first zone; the first on-demand type passes in the second"
    );
    assert_ne!(runs[0].1, runs[9].1, "the second zone");
    let span = runs[9].0 - runs[0].0;
    // EC2's bucket: 5 at once, then 2 a second; 10 calls need at least 2.5 s.
    assert!(span >= Duration::from_millis(2500), "10 RunInstances calls in {span:?}: faster than EC2 allows");
    let rate: Vec<_> = w.proxy.aws_refusals().into_iter().filter(|r| r.key == "ec2:RunInstances").collect();
    assert!(rate.is_empty(), "RunInstances refused by EC2's own rules: {rate:#?}");
    let instances = ec2.instances();
    assert_eq!(instances.len(), 1, "2 quarter tasks fit one instance: {instances:?}");
    assert_eq!((instances[0].instance_type.as_str(), instances[0].spot), ("c5.xlarge", false));
    w.finish_ec2(host, sim, ec2, &format!("run_instances=10 walk_ms={}", span.as_millis())).await;
}

/// (d) The plugin is killed with 8 jobs running on 2 instances and 4 waiting for room; the new
/// process adopts the instances (by tag) and the tasks, GoCD's re-sent create-agent brings the
/// waiting work back, and every job finishes on the same 2 instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restart_adopts_instances_and_waiting_work_and_finishes_every_job() {
    let mut w = Scenario::new("restart_adopts").await;
    let base = w.base.clone();
    w.ec2_cluster("base", &base, TEST_ACCESS_KEY_ID, "gocd-ec2").await;
    let cfg = w
        .host_config()
        .cluster_profile("ec2", ec2_props("gocd-ec2", &[("Ec2MaxInstances", "2"), IDLE_A_MINUTE]))
        .elastic_profile("quarter", "ec2", quarter_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, quick_registration());
    let ec2 = w.instances(&host, Ec2Policy::default());

    host.add_jobs(JobSpec::new("quarter", Duration::from_secs(20)), 12).await;
    host.wait_until("8 jobs building", Duration::from_secs(90), |s| {
        s.count_jobs(|j| matches!(j, JobState::Running { .. })) == 8
    })
    .await;
    let waiting = host.with_state(|s| s.count_jobs(|j| *j == JobState::Waiting));
    assert_eq!(waiting, 4, "two instances hold 8 quarter tasks; 4 wait in the plugin");
    host.kill().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    host.restart().await;

    host.wait_until("all 12 jobs completed after the restart", Duration::from_secs(150), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;
    let instances = ec2.instances();
    assert_eq!(instances.len(), 2, "the new process adopts the 2 instances instead of launching: {instances:?}");
    assert_eq!(w.proxy.count("ecs:StartTask"), 12);
    w.finish_ec2(host, sim, ec2, "plugin_processes=2").await;
}

/// A TerminateInstances the proxy saw: the access key that signed it and the instance ids.
type Termination = (Option<String>, Vec<String>);

/// A RunInstances the proxy saw: the access key that signed it, and its form fields about the
/// network (`SubnetId`, `SecurityGroupId.N`, `NetworkInterface.1.*`), the metadata service
/// (`MetadataOptions.*`) and the volumes (`BlockDeviceMapping.*`).
type NetworkAsked = (Option<String>, BTreeMap<String, String>);

/// (e) Two EC2 cluster profiles in two accounts (one through AssumeRole) each launch, use and
/// terminate their own instances, and never touch the other's. Every third StartTask is lost on
/// the way (the connection drops): the retry still starts exactly one task per job. Profile B
/// asks for public IPs (`AssignPublicIp`): its instances get them on their network interface;
/// profile A's are asked for none. Every launch asks for IMDSv2 with hop limit 1 and an
/// encrypted root volume.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_ec2_profiles_in_two_accounts_keep_to_their_own_instances() {
    let mut w = Scenario::new("two_accounts").await;
    let role = w.moto.assume_role_config(ROLE_ARN).await;
    let base = w.base.clone();
    w.ec2_cluster("base", &base, TEST_ACCESS_KEY_ID, "gocd-a").await;
    w.ec2_cluster("role", &role.config, &role.credentials.access_key_id, "gocd-b").await;
    let terminated: Arc<Mutex<Vec<Termination>>> = Arc::default();
    let seen = terminated.clone();
    w.proxy.add_rule("record-terminations", move |call| {
        if call.is("ec2", "TerminateInstances") {
            let ids = call.form.iter().filter(|(k, _)| k.starts_with("InstanceId.")).map(|(_, v)| v.clone()).collect();
            seen.lock().unwrap().push((call.access_key_id.clone(), ids));
        }
        Verdict::Forward
    });
    let launches: Arc<Mutex<Vec<NetworkAsked>>> = Arc::default();
    let asked = launches.clone();
    w.proxy.add_rule("record-launch-networks", move |call| {
        if call.is("ec2", "RunInstances") {
            let network = call
                .form
                .iter()
                .filter(|(k, _)| {
                    k == "SubnetId"
                        || k.starts_with("SecurityGroupId.")
                        || k.starts_with("NetworkInterface.")
                        || k.starts_with("MetadataOptions.")
                        || k.starts_with("BlockDeviceMapping.")
                })
                .cloned()
                .collect();
            asked.lock().unwrap().push((call.access_key_id.clone(), network));
        }
        Verdict::Forward
    });
    let start_tasks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = start_tasks.clone();
    w.proxy.add_rule("lose-start-tasks", move |call| {
        if call.is("ecs", "StartTask") && counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 3 == 0 {
            Verdict::Drop
        } else {
            Verdict::Forward
        }
    });
    let cfg = w
        .host_config()
        .cluster_profile("a", ec2_props("gocd-a", &[]))
        .cluster_profile("b", ec2_props("gocd-b", &[("RoleArn", ROLE_ARN), ("AssignPublicIp", "true")]))
        .elastic_profile("quarter-a", "a", quarter_props())
        .elastic_profile("quarter-b", "b", quarter_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, quick_registration());
    let ec2 = w.instances(&host, Ec2Policy::default());

    for _ in 0..5 {
        host.add_job(JobSpec::new("quarter-a", Duration::from_secs(4))).await;
        host.add_job(JobSpec::new("quarter-b", Duration::from_secs(4))).await;
    }
    host.wait_until("all 10 jobs completed", Duration::from_secs(120), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;
    for t in sim.with_state(|s| s.tasks.values().cloned().collect::<Vec<_>>()) {
        let profile = host.with_state(|s| {
            s.jobs
                .iter()
                .find(|j| Some(j.identifier.job_id.to_string()) == t.job_id)
                .map(|j| j.spec.elastic_profile.clone())
        });
        let want = if profile.as_deref() == Some("quarter-b") { 1 } else { 0 };
        assert_eq!(t.fleet, want, "task {} ran in the wrong account", t.task_arn);
    }
    ec2.wait_until("every instance terminated after the idle time", RETIRE_WITHIN, |s| s.alive().is_empty()).await;

    let instances = ec2.instances();
    let by_fleet: BTreeMap<usize, BTreeSet<String>> = instances.iter().fold(BTreeMap::new(), |mut m, i| {
        m.entry(i.fleet).or_default().insert(i.id.clone());
        m
    });
    assert_eq!(
        by_fleet.get(&0).map(BTreeSet::len),
        Some(2),
        "5 quarter tasks need 2 instances in account A: {by_fleet:?}"
    );
    assert_eq!(by_fleet.get(&1).map(BTreeSet::len), Some(2), "and 2 in account B: {by_fleet:?}");
    let key_of = |fleet: usize| -> BTreeSet<String> {
        instances
            .iter()
            .filter(|i| i.fleet == fleet)
            .filter_map(|i| i.tags.get("gocd:cluster-profile").cloned())
            .collect()
    };
    let (ka, kb) = (key_of(0), key_of(1));
    assert!(ka.len() == 1 && kb.len() == 1 && ka != kb, "each profile tags its own instances: {ka:?} {kb:?}");
    let role_keys: BTreeSet<String> =
        w.proxy.captured_credentials().into_iter().map(|c| c.credentials.access_key_id).collect();
    let launches = launches.lock().unwrap().clone();
    assert!(launches.len() >= 2, "RunInstances in both accounts: {launches:?}");
    for (key, network) in &launches {
        let get = |k: &str| network.get(k).map(String::as_str);
        // Hardened by default: IMDSv2 one hop away (bridge-mode containers cannot
        // reach the instance role), an encrypted root volume, a public IP only when asked.
        assert_eq!(get("MetadataOptions.HttpTokens"), Some("required"), "{network:?}");
        assert_eq!(get("MetadataOptions.HttpPutResponseHopLimit"), Some("1"), "{network:?}");
        assert_eq!(get("BlockDeviceMapping.1.Ebs.Encrypted"), Some("true"), "{network:?}");
        let public = if key.as_deref() == Some(TEST_ACCESS_KEY_ID) { "false" } else { "true" };
        assert_eq!(
            get("NetworkInterface.1.AssociatePublicIpAddress"),
            Some(public),
            "AssignPublicIp decides, never the subnet's default: {network:?}"
        );
        assert_eq!(get("NetworkInterface.1.DeviceIndex"), Some("0"), "{network:?}");
        assert!(get("NetworkInterface.1.SubnetId").is_some() && get("SubnetId").is_none(), "{network:?}");
        assert!(get("NetworkInterface.1.SecurityGroupId.1").is_some(), "the groups go on the interface: {network:?}");
    }
    for (key, ids) in terminated.lock().unwrap().iter() {
        let fleet = if key.as_deref() == Some(TEST_ACCESS_KEY_ID) {
            0
        } else {
            assert!(key.as_ref().is_some_and(|k| role_keys.contains(k)), "TerminateInstances signed by an unknown key");
            1
        };
        for id in ids {
            assert!(
                by_fleet.get(&fleet).is_some_and(|own| own.contains(id)),
                "a TerminateInstances in account {fleet} named instance {id} of the other account"
            );
        }
    }
    let terminations = terminated.lock().unwrap().len();
    w.finish_ec2(host, sim, ec2, &format!("terminate_calls={terminations}")).await;
}

/// A deleted EC2 cluster profile leaves nothing behind: its instances (kept up by
/// `Ec2MinInstances`) are terminated with the credentials it had, and no task of it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_ec2_profile_leaves_no_task_and_no_instance() {
    let mut w = Scenario::new("deleted_ec2_profile").await;
    let base = w.base.clone();
    w.ec2_cluster("base", &base, TEST_ACCESS_KEY_ID, "gocd-ec2").await;
    let cfg = w
        .host_config()
        .cluster_profile("ec2", ec2_props("gocd-ec2", &[("Ec2MinInstances", "1")]))
        .elastic_profile("quarter", "ec2", quarter_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, quick_registration());
    let ec2 = w.instances(&host, Ec2Policy::default());
    host.add_jobs(JobSpec::new("quarter", Duration::from_secs(4)), 3).await;
    host.wait_until("all 3 jobs completed", Duration::from_secs(180), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;
    assert!(!ec2.instances().is_empty(), "the minimum instance runs");

    let reply = host.delete_cluster_profile("ec2").await.expect("cluster-profile-changed answered");
    assert_eq!(reply.code, 200);
    ec2.wait_until("the deleted profile's instances terminated", Duration::from_secs(180), |s| s.alive().is_empty())
        .await;
    for f in &w.fleets {
        assert!(moto::live_tasks(&f.config, &f.cluster).await.is_empty(), "{}: a task still runs", f.label);
    }
    w.assert_no_aws_rule_broken();
    let launched = ec2.instances().len();
    eprintln!(
        "FIGURES: test=deleted_ec2_profile secs={} instances_launched={launched} instances_left=0 tasks_left=0",
        w.started.elapsed().as_secs()
    );
    drop(sim);
    drop(ec2);
    host.shutdown().await;
}

/// An EC2 cluster profile deleted while the plugin was down (the deletion never reached it):
/// the new process's first server-ping sweeps for leftovers by the server's own tag, through
/// the live Fargate profile of the same account, and terminates the deleted profile's idle
/// minimum instance; the live profile serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_profile_deleted_while_the_plugin_was_down_leaves_no_instance_after_a_restart() {
    let mut w = Scenario::new("deleted_while_down").await;
    let base = w.base.clone();
    w.ec2_cluster("ec2", &base, TEST_ACCESS_KEY_ID, "gocd-ec2").await;
    w.cluster("fargate", &base, "gocd-f").await;
    let cfg = w
        .host_config()
        .cluster_profile("ec2", ec2_props("gocd-ec2", &[("Ec2MinInstances", "1")]))
        .cluster_profile("fargate", cluster_props("gocd-f", &[]))
        .elastic_profile("quarter", "ec2", quarter_props())
        .elastic_profile("small", "fargate", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, quick_registration());
    let ec2 = w.instances(&host, Ec2Policy::default());
    host.add_jobs(JobSpec::new("quarter", Duration::from_secs(4)), 2).await;
    host.wait_until("both EC2 jobs completed", Duration::from_secs(180), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;
    let before = ec2.with_state(|s| s.alive().len());
    assert_eq!(before, 1, "the minimum instance runs idle");

    host.kill().await;
    host.delete_cluster_profile_unheard("ec2");
    host.restart().await;
    ec2.wait_until("the deleted profile's instance terminated", Duration::from_secs(120), |s| s.alive().is_empty())
        .await;
    host.add_jobs(JobSpec::new("small", Duration::from_secs(2)), 2).await;
    host.wait_until("the Fargate jobs completed", Duration::from_secs(120), |s| s.all_completed()).await;
    assert_all_done(&host, &sim).await;
    assert!(
        host.with_state(|s| s.health_ever_mentions("leftover instance")),
        "server health tells the operator what was terminated"
    );
    for f in &w.fleets {
        assert!(moto::live_tasks(&f.config, &f.cluster).await.is_empty(), "{}: a task still runs", f.label);
    }
    w.assert_no_aws_rule_broken();
    eprintln!(
        "FIGURES: test=deleted_while_down secs={} instances_before_restart={before} instances_left=0 tasks_left=0",
        w.started.elapsed().as_secs()
    );
    drop(sim);
    drop(ec2);
    host.shutdown().await;
}

/// Not a whole scenario: the plugin's own `states_of_ours` against the proxy. The plugin asks EC2
/// which unknown container instances of the cluster are its own, by instance id. EC2 fails a
/// whole DescribeInstances that names, in `InstanceIds`, an id it no longer knows: an instance
/// terminated over an hour ago, whose container instance a shared cluster may still list (the
/// proxy answers that for one foreign id here, as AWS does; moto keeps every instance). Such an
/// id must not hide the state of ours asked about with it: here, one of ours terminated behind
/// the plugin's back, which the plugin must see as ours and gone to deregister its container
/// instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_instance_ec2_no_longer_knows_does_not_hide_the_state_of_ours() {
    use ecs_elastic_agent::aws::status::Ec2State;
    use ecs_elastic_agent::aws::AwsClients;
    use ecs_elastic_agent::cluster::base::identity::{TAG_CLUSTER_PROFILE, TAG_SERVER_ID};
    use ecs_elastic_agent::cluster::capacity::ec2::api::states_of_ours;

    let w = Scenario::new("forgotten_instance").await;
    let ec2 = aws_sdk_ec2::Client::new(&w.base);
    let launch = |tags: &[(&str, &str)]| {
        let mut spec =
            aws_sdk_ec2::types::TagSpecification::builder().resource_type(aws_sdk_ec2::types::ResourceType::Instance);
        for (k, v) in tags {
            spec = spec.tags(aws_sdk_ec2::types::Tag::builder().key(*k).value(*v).build());
        }
        ec2.run_instances()
            .image_id(AMI)
            .instance_type(aws_sdk_ec2::types::InstanceType::C5Xlarge)
            .min_count(1)
            .max_count(1)
            .tag_specifications(spec.build())
            .send()
    };
    let id_of = |out: aws_sdk_ec2::operation::run_instances::RunInstancesOutput| {
        out.instances()[0].instance_id().expect("an instance id").to_string()
    };
    let ours =
        id_of(launch(&[(TAG_SERVER_ID, "server-1"), (TAG_CLUSTER_PROFILE, "profile-1")]).await.expect("RunInstances"));
    let forgotten = id_of(launch(&[("team", "another-ci")]).await.expect("RunInstances"));
    ec2.terminate_instances().instance_ids(&ours).send().await.expect("TerminateInstances");
    let gone = forgotten.clone();
    w.proxy.add_rule("ec2-forgot-an-instance", move |call| {
        if call.is("ec2", "DescribeInstances")
            && call.form.iter().any(|(k, v)| k.starts_with("InstanceId.") && *v == gone)
        {
            Verdict::ec2_error(400, "InvalidInstanceID.NotFound", &format!("The instance ID '{gone}' does not exist"))
        } else {
            Verdict::Forward
        }
    });
    let cfg = moto::base_config_at(&w.proxy.endpoint()).await;
    let by_ids = aws_sdk_ec2::Client::new(&cfg).describe_instances().instance_ids(&ours).instance_ids(&forgotten);
    let refused = by_ids.send().await.expect_err("DescribeInstances naming a forgotten id must fail, as on AWS");
    assert!(
        moto::aws_error_text(&refused).contains("InvalidInstanceID.NotFound"),
        "{}",
        moto::aws_error_text(&refused)
    );

    let aws = AwsClients {
        ecs: aws_sdk_ecs::Client::new(&cfg),
        ec2: aws_sdk_ec2::Client::new(&cfg),
        sqs: aws_sdk_sqs::Client::new(&cfg),
        ecr: aws_sdk_ecr::Client::new(&cfg),
        pricing: aws_sdk_pricing::Client::new(&cfg),
        region: REGION.to_string(),
        role_arn: None,
        role: Arc::default(),
        calls: Arc::default(),
        account_id: None,
    };
    let asked = [forgotten.clone(), ours.clone()];
    let states = states_of_ours(&aws, &asked, "server-1", "profile-1").await.expect("DescribeInstances");
    assert_eq!(states, [(ours, Ec2State::Terminated)], "ours, terminated; the forgotten one is not ours");
}

/// The stopped-instance pool: with `Ec2StoppedInstances` 1, the instance idle for
/// `Ec2IdleMinutes` is stopped (not terminated), and the next job starts it again instead of
/// launching one; its container instance is the one it had (the ECS agent's re-registration),
/// the cluster report shows the pool, and lowering the setting to 0 lets it go for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_instance_is_stopped_and_the_next_job_starts_it_instead_of_launching() {
    let mut w = Scenario::new("stopped_pool").await;
    let base = w.base.clone();
    w.ec2_cluster("base", &base, TEST_ACCESS_KEY_ID, "gocd-ec2").await;
    let pooled = ec2_props("gocd-ec2", &[("Ec2StoppedInstances", "1"), ("Ec2ScaleOutWaitSeconds", "0"), IDLE_A_MINUTE]);
    let cfg = w.host_config().cluster_profile("ec2", pooled.clone()).elastic_profile("quarter", "ec2", quarter_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, quick_registration());
    let ec2 = w.instances(&host, Ec2Policy::default());

    host.add_jobs(JobSpec::new("quarter", Duration::from_secs(3)), 1).await;
    host.wait_until("the first job completed", Duration::from_secs(90), |s| s.all_completed()).await;
    ec2.wait_until("the idle instance stopped", RETIRE_WITHIN, |s| s.instances.values().any(|i| i.stops == 1)).await;
    let first = ec2.instances().into_iter().next().expect("the instance");
    let container = first.container_instance_arn.clone().expect("registered before it stopped");
    assert_eq!(w.proxy.count("ec2:StopInstances"), 1);
    assert_eq!(w.proxy.count("ec2:TerminateInstances"), 0, "stopped, not terminated");
    let report = host.cluster_status_report("ec2").await.expect("cluster status report");
    let view = report.body["view"].as_str().unwrap_or_default().to_string();
    assert!(view.contains("1 stopped of Ec2StoppedInstances 1"), "the report shows the stopped pool");
    assert!(view.contains("2.40 USD a month"), "and what its root volume costs");

    let started = Instant::now();
    host.add_jobs(JobSpec::new("quarter", Duration::from_secs(3)), 1).await;
    host.wait_until("the second job completed", Duration::from_secs(90), |s| s.all_completed()).await;
    let took = started.elapsed();
    assert_all_done(&host, &sim).await;
    let instances = ec2.instances();
    assert_eq!(instances.len(), 1, "started again, nothing launched: {instances:?}");
    assert_eq!((instances[0].starts, w.proxy.count("ec2:StartInstances")), (1, 1));
    assert_eq!(w.proxy.count("ec2:RunInstances"), 1, "the first job's launch only");
    assert_eq!(instances[0].container_instance_arn.as_deref(), Some(container.as_str()), "the same container instance");

    // The operator lowers the pool to 0: the instance retires for good when idle.
    let mut none = pooled;
    none.insert("Ec2StoppedInstances".into(), "0".into());
    host.edit_cluster_profile("ec2", none).await.expect("cluster-profile-changed");
    let extra = format!("second_job_s={}", took.as_secs());
    w.finish_ec2(host, sim, ec2, &extra).await;
}

/// Warm agents on EC2: with `WarmAgents` 2, the agent kept after the first job takes
/// the second, whose unused key starts a second warm agent by StartTask on the instance; the third job
/// finds an idle agent whose task was there before it (no StartTask in its path), and a
/// replacement starts on a job's key. No registration is refused; taking `WarmAgents` out
/// retires the pool and the instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_warm_agent_on_ec2_takes_a_job_with_no_task_started_for_it() {
    use crate::warm::{run_one, started_before};
    let mut w = Scenario::new("ec2_warm").await;
    let base = w.base.clone();
    w.ec2_cluster("base", &base, TEST_ACCESS_KEY_ID, "gocd-ec2").await;
    let mut warm = quarter_props();
    warm.extend(props(&[("WarmAgents", "2")]));
    let cfg = w.host_config().cluster_profile("ec2", ec2_props("gocd-ec2", &[])).elastic_profile("warm", "ec2", warm);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_secs(2), ..SimPolicy::default() });
    let ec2 = w.instances(&host, Ec2Policy::default());

    run_one(&host, "warm").await;
    let (second, _) = run_one(&host, "warm").await;
    assert!(started_before(&host, &sim, second), "the kept agent took the second job");
    sim.wait_until("a warm agent registered beside the kept one", Duration::from_secs(60), |s| {
        s.tasks.values().filter(|t| !t.stopped && matches!(t.registration, Some(Ok(())))).count() >= 2
    })
    .await;
    host.wait_until("the pool settled at its idle agents", Duration::from_secs(60), |s| {
        !s.agents.is_empty() && s.agents.iter().all(|a| a.agent_state == "Idle")
    })
    .await;

    // How many agents the pool holds before the third job depends on how the first starts went
    // (a create-agent GoCD sent again while the first task started brings one more key), so the
    // test reads it instead of assuming it: the idle agents, and the tasks started but not yet
    // registered (on a slow machine one may still be on its way; it joins the pool without a
    // replacement). Work the plugin has not started yet is started after the third job: it counts
    // as the replacement below.
    let registered = host.with_state(|s| s.agents.len());
    let on_their_way = sim.with_state(|s| s.tasks.values().filter(|t| !t.stopped && t.registration.is_none()).count());
    let pool_before = registered + on_their_way;
    let start_tasks = w.proxy.count("ecs:StartTask");
    let (third, third_wait) = run_one(&host, "warm").await;
    assert!(started_before(&host, &sim, third), "an idle agent took the third job, not a task started for it");
    if pool_before <= 2 {
        // The third job left the pool under `WarmAgents`: a replacement starts on a job's key.
        let added = host.with_state(|s| s.job(third).added_at);
        let keys: Vec<String> = host.with_state(|s| s.jobs.iter().flat_map(|j| j.keys.clone()).collect());
        sim.wait_until("a replacement started after the third job, on a job's key", Duration::from_secs(60), |s| {
            s.tasks
                .values()
                .any(|t| t.first_seen > added && t.auto_register_key.as_ref().is_some_and(|k| keys.contains(k)))
        })
        .await;
        assert!(w.proxy.count("ecs:StartTask") > start_tasks, "the replacement's StartTask");
    }
    host.wait_until("the pool back at WarmAgents 2 idle agents", Duration::from_secs(60), |s| {
        s.agents.iter().filter(|a| a.agent_state == "Idle").count() >= 2
    })
    .await;
    assert_eq!(w.proxy.count("ecs:RunTask"), 0, "EC2 agents start by StartTask only");

    // WarmAgents taken out: the next job's request carries it, and the pool retires.
    host.edit_elastic_profile("warm", quarter_props());
    run_one(&host, "warm").await;
    host.wait_until("every agent retired", Duration::from_secs(90), |s| s.agents.is_empty()).await;
    let rejections = host.rejections();
    assert!(rejections.is_empty(), "no agent registered with a used or expired key: {rejections:?}");
    let extra = format!("third_wait_ms={}", third_wait.as_millis());
    w.finish_ec2(host, sim, ec2, &extra).await;
}
