//! The per-profile settings of an engine that several cluster profiles share: each agent is
//! judged by its own profile's `AgentRegisterTimeoutMinutes`, and a job on an EC2 instance pays
//! the root volume of its instance's own pool, whichever profile GoCD sent last.

use std::sync::Arc;
use std::time::Duration;

use super::engine::cluster_profile;
use super::{job, World};
use crate::aws::ec2_types::{ContainerInstance, Ec2Instance};
use crate::aws::fake_aws::FakeAws;
use crate::cluster::agents::tasks::TaskStatus;
use crate::cluster::agents::{NewAgent, Reservation};
use crate::cluster::capacity::ec2::pools::pool_key;
use crate::cluster::capacity::ec2::{ContainerInstanceStatus, Ec2State, OsClass, Resources};
use crate::cluster::tests::fixtures;
use crate::cluster::AgentRequest;
use crate::ids::{AgentId, SettingsFingerprint};
use crate::settings::ClusterProfile;

/// A Fargate profile on the world's cluster whose agents must register within `minutes`.
fn register_within(minutes: u32) -> ClusterProfile {
    cluster_profile(&[("MaxAgents", "5"), ("AgentRegisterTimeoutMinutes", &minutes.to_string())])
}

/// GoCD sends `profile` (settings fingerprint `settings`): the engine serves it, and it is the
/// profile sent last.
fn sent(w: &World, settings: &SettingsFingerprint, profile: &ClusterProfile) {
    w.cluster.serve_again(settings, profile);
    w.cluster.set_profile(profile.clone());
}

/// The create-agent of job `job_id` under `profile`, whose settings fingerprint is `settings`.
fn request_of(w: &World, job_id: i64, settings: &str, profile: &ClusterProfile) -> AgentRequest {
    AgentRequest { profile: Arc::new(profile.clone()), settings: settings.into(), ..w.request(job_id, "k") }
}

#[tokio::test]
async fn each_agent_waits_for_registration_as_long_as_its_own_profile_says() {
    let (slow, fast) = (register_within(15), register_within(3));
    let w = World::with_profile(FakeAws::default(), slow.clone());
    sent(&w, &"team-slow".into(), &slow);
    w.cluster.create_agent(request_of(&w, 1, "team-slow", &slow)).await.expect("launched");
    // The other team's profile is the one GoCD sent last.
    sent(&w, &"team-fast".into(), &fast);
    w.cluster.create_agent(request_of(&w, 2, "team-fast", &fast)).await.expect("launched");
    assert_eq!(w.aws.running().len(), 2);

    // Neither registered after 4 minutes: past the fast profile's 3, within the slow one's 15.
    w.clock.advance(Duration::from_secs(4 * 60));
    w.cluster.ping(Default::default()).await.expect("pinged");
    assert_eq!(w.aws.running().len(), 1, "only the fast profile's agent was stopped");
    assert!(w.gocd.console_of(2).iter().any(|l| l.contains("within 3 minutes")), "{:?}", w.gocd.console_of(2));
    assert!(w.gocd.console_of(1).iter().all(|l| !l.contains("did not register")), "{:?}", w.gocd.console_of(1));

    // Past the slow profile's 15 minutes, its agent goes too.
    w.clock.advance(Duration::from_secs(12 * 60));
    w.cluster.ping(Default::default()).await.expect("pinged");
    assert!(w.aws.running().is_empty());
    assert!(w.gocd.console_of(1).iter().any(|l| l.contains("within 15 minutes")), "{:?}", w.gocd.console_of(1));
}

#[tokio::test]
async fn an_agent_of_a_profile_not_heard_since_the_start_waits_as_the_profile_sent_last_says() {
    let aws = FakeAws::default();
    let before = World::with_profile(aws.clone(), register_within(15));
    let slow = before.cluster.profile().as_ref().clone();
    sent(&before, &"team-slow".into(), &slow);
    before.cluster.create_agent(request_of(&before, 1, "team-slow", &slow)).await.expect("launched");
    drop(before);

    // A restart: the first profile GoCD sends is another team's; the adopted agent's own is
    // not heard yet, so the one sent last decides.
    let w = World::with_profile(aws.clone(), register_within(3));
    let fast = w.cluster.profile().as_ref().clone();
    w.cluster.serve_again(&"team-fast".into(), &fast);
    w.cluster.ping(Default::default()).await.expect("pinged");
    assert_eq!(aws.running().len(), 1, "adopted, within the timeout");
    w.clock.advance(Duration::from_secs(4 * 60));
    w.cluster.ping(Default::default()).await.expect("pinged");
    assert!(aws.running().is_empty(), "judged by the profile sent last");
}

/// An EC2 profile on the world's cluster whose instances have a `gib` GiB root volume.
fn ec2_with_volume(gib: u32) -> ClusterProfile {
    cluster_profile(&[
        ("LaunchType", "EC2"),
        ("Ec2InstanceType", "c5.xlarge"),
        ("Ec2AmiId", "ami-0abcdef1234567890"),
        ("Ec2InstanceProfile", "ecs-agents"),
        ("Ec2RootVolumeGiB", &gib.to_string()),
        ("MaxAgents", "5"),
    ])
}

/// A registered c5.xlarge of `profile`'s pool, launched an hour ago, with agent `agent` of
/// settings fingerprint `settings` running job `job_id` on it for the last 10 minutes.
fn agent_on_instance(w: &World, profile: &ClusterProfile, settings: &str, agent: &str, job_id: i64) -> AgentId {
    let now = w.cluster.now();
    let (id, container) =
        (format!("i-{job_id:017}"), format!("arn:aws:ecs:us-east-1:123456789012:container-instance/ci/{job_id}"));
    {
        let mut st = w.cluster.ec2().state();
        let pool = pool_key(profile).expect("an EC2 profile");
        let instance = Ec2Instance {
            id: id.clone(),
            instance_type: "c5.xlarge".into(),
            state: Ec2State::Running,
            launched_at: Some(now - Duration::from_secs(3600)),
            spot: false,
            os: OsClass::Linux,
            spot_warned_at: None,
            launch_spec: None,
            pool: Some(pool.clone()),
        };
        st.launched(&pool, std::slice::from_ref(&instance), now);
        let record = st.instance_mut(&id).expect("recorded");
        record.described(instance);
        let container = ContainerInstance {
            arn: container.clone(),
            ec2_id: Some(id.clone()),
            instance_type: Some("c5.xlarge".into()),
            zone: Some("us-east-1a".into()),
            status: ContainerInstanceStatus::Active,
            connected: true,
            total: Resources::new(4096, 7680),
            remaining: Resources::new(2048, 5632),
            tasks: 1,
        };
        record.refold(Some(container), now, now);
    }
    let mut registry = w.cluster.registry();
    let new = NewAgent {
        environment: None,
        elastic_profile: "h".into(),
        settings: settings.into(),
        image: "gocd/gocd-agent:v1".into(),
        reuse: None,
    };
    let Reservation::Reserved { agent_id, .. } = registry.reserve(&job(job_id), agent.into(), 5, new, now) else {
        panic!("reserved")
    };
    let mut task =
        fixtures::task(&format!("arn:aws:ecs:us-east-1:123456789012:task/ci/{agent}"), vec![], TaskStatus::Running);
    task.capacity = "EC2".into();
    task.container_instance_arn = Some(container);
    (task.cpu, task.memory) = (Some("1024".into()), Some("2048".into()));
    (task.created_at, task.started_at) = (Some(now - Duration::from_secs(600)), Some(now - Duration::from_secs(600)));
    registry.started_on_instance(&agent_id, task, now - Duration::from_secs(600));
    agent_id
}

#[tokio::test]
async fn a_job_on_ec2_pays_the_root_volume_of_its_instances_own_pool() {
    let (small, big) = (ec2_with_volume(40), ec2_with_volume(200));
    let w = World::with_profile(FakeAws::default(), small.clone());
    w.cluster.ec2().hold_loop_for_test();
    sent(&w, &"team-small".into(), &small);
    let on_small = agent_on_instance(&w, &small, "team-small", "ea-small", 7);
    // The other team's profile, with another pool, is the one GoCD sent last.
    sent(&w, &"team-big".into(), &big);
    let on_big = agent_on_instance(&w, &big, "team-big", "ea-big", 8);

    let now = w.cluster.now();
    let line = w
        .cluster
        .state
        .cost
        .job_cost(&w.cluster.pricing_sources(), &on_small, &job(7), now, true)
        .expect("a known agent");
    assert!(line.contains("(c5.xlarge, 40 GiB gp3, us-east-1)"), "{line}");
    let line = w
        .cluster
        .state
        .cost
        .job_cost(&w.cluster.pricing_sources(), &on_big, &job(8), now, true)
        .expect("a known agent");
    assert!(line.contains("(c5.xlarge, 200 GiB gp3, us-east-1)"), "{line}");
}

#[tokio::test]
async fn a_job_on_ec2_pays_its_amis_root_when_it_is_larger_than_the_setting() {
    use crate::cluster::capacity::ec2::catalog::{AmiInfo, Catalog, TypeInfo};
    use crate::cluster::capacity::ec2::Arch;
    let profile = ec2_with_volume(30);
    let w = World::with_profile(FakeAws::default(), profile.clone());
    w.cluster.ec2().hold_loop_for_test();
    sent(&w, &"team".into(), &profile);
    let agent = agent_on_instance(&w, &profile, "team", "ea-team", 9);
    // The pool's catalog: its AMI's root is 100 GiB, so the launch made a 100 GiB volume.
    let cfg = profile.ec2.clone().expect("EC2 settings");
    let catalog = Catalog {
        types: vec![TypeInfo { name: "c5.xlarge".into(), arch: Arch::X86_64, capacity: None }],
        amis: vec![AmiInfo {
            id: "ami-0abcdef1234567890".into(),
            arch: Some(Arch::X86_64),
            os: OsClass::Linux,
            root_gib: 100,
        }],
        estimated: None,
        problems: vec![],
        read_at: w.cluster.now(),
        key: Catalog::key_of(&cfg),
    };
    let key = pool_key(&profile).expect("an EC2 profile");
    w.cluster.ec2().state().memory_mut(&key).set_catalog(Some(catalog));

    let now = w.cluster.now();
    let line =
        w.cluster.state.cost.job_cost(&w.cluster.pricing_sources(), &agent, &job(9), now, true).expect("a known agent");
    assert!(line.contains("(c5.xlarge, 100 GiB gp3, us-east-1)"), "{line}");
}
