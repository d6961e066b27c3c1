//! The engine every unit-test world drives, built one way: a cluster profile's engine on an
//! in-memory AWS (the fake ECS, or a script of expected calls), an in-memory GoCD, and a clock
//! that stands still until a test advances it. Each test world (the façade's, the launch path's,
//! the EC2 driver's, the event queue's) keeps only what is its own: which AWS double, which
//! profile, which helpers.

use std::sync::Arc;

use super::fake_gocd::FakeGocd;
use super::fixtures::{job, props};
use crate::aws::AwsClients;
use crate::cluster::base::clock::ManualClock;
use crate::cluster::base::identity::cluster_key;
use crate::cluster::{AgentRequest, Cluster, EngineOptions};
use crate::secret::Secret;
use crate::settings::ClusterProfile;

/// GoCD's server id in every test world.
pub(crate) const SERVER: &str = "server-1";

/// One engine and the doubles around it.
pub(crate) struct TestEngine {
    /// The GoCD it reports to, recording what it is told.
    pub(crate) gocd: Arc<FakeGocd>,
    /// The engine's time: it starts at the wall's and moves only when a test advances it.
    pub(crate) clock: Arc<ManualClock>,
    /// The engine.
    pub(crate) cluster: Arc<Cluster>,
}

impl TestEngine {
    /// The engine of `profile` (ECS cluster `ci` in the fake account, `us-east-1`) over `aws`.
    pub(crate) fn start(aws: Arc<AwsClients>, profile: ClusterProfile) -> TestEngine {
        let gocd = Arc::new(FakeGocd::default());
        let clock = Arc::new(ManualClock::from_the_wall());
        let key = cluster_key(crate::aws::fake_aws::ACCOUNT, "us-east-1", "ci", None);
        let cluster = Arc::new(Cluster::with_clock(
            key,
            SERVER.into(),
            aws,
            profile,
            gocd.clone(),
            &EngineOptions::default(),
            clock.clone(),
        ));
        TestEngine { gocd, clock, cluster }
    }
}

/// A cluster profile on ECS cluster `ci` in `us-east-1` with one subnet and group, plus `extra`
/// (which may override those).
pub(crate) fn cluster_profile(extra: &[(&str, &str)]) -> ClusterProfile {
    let mut p = props(&[
        ("ClusterName", "ci"),
        ("Region", "us-east-1"),
        ("SubnetIds", "subnet-0a1b2c3d"),
        ("SecurityGroupIds", "sg-0a1b2c3d"),
    ]);
    p.extend(props(extra));
    ClusterProfile::parse(&p).expect("a valid cluster profile")
}

/// team-a's create-agent for job `job_id` with registration key `key`, for a small agent, as
/// GoCD sends it with the engine's current profile.
pub(crate) fn request(cluster: &Cluster, job_id: i64, key: &str) -> AgentRequest {
    AgentRequest {
        profile: Arc::new(cluster.profile().as_ref().clone()),
        settings: "team-a".into(),
        job: job(job_id),
        environment: None,
        auto_register_key: Secret::new(key.to_string()),
        elastic_profile: props(&[("Image", "gocd/gocd-agent:v1"), ("Cpu", "512"), ("Memory", "1024")]),
        site_url: Some("http://gocd.example:8153/go".into()),
    }
}
