//! One snapshot per create-agent: the family a request keeps registered, the task definition
//! it runs and the launch it sends (RunTask now, StartTask later on EC2) all come from the
//! request's own profiles, whatever profile the engine stores meanwhile.

use std::sync::Arc;

use super::{props, World};
use crate::aws::fake_aws::{FakeAws, REGION};
use crate::cluster::cleanup::plan::family_of;
use crate::cluster::job::create::Created;
use crate::cluster::launch::snapshot::{override_environment, RequestSnapshot};
use crate::cluster::launch::task_definition::family;
use crate::settings::{ClusterProfile, ElasticProfile};

/// The Fargate profile of the tests with these properties added (another team's edit).
fn profile_with(extra: &[(&str, &str)]) -> ClusterProfile {
    let mut p = props(&[
        ("ClusterName", "ci"),
        ("Region", "us-east-1"),
        ("SubnetIds", "subnet-0a1b2c3d"),
        ("SecurityGroupIds", "sg-0a1b2c3d"),
        ("MaxAgents", "5"),
    ]);
    p.extend(props(extra));
    ClusterProfile::parse(&p).expect("a valid cluster profile")
}

/// An EC2 cluster profile with these properties added.
fn ec2_profile_with(extra: &[(&str, &str)]) -> ClusterProfile {
    let mut p = props(&[
        ("ClusterName", "ci"),
        ("Region", "us-east-1"),
        ("MaxAgents", "5"),
        ("LaunchType", "EC2"),
        ("Ec2InstanceType", "c5.xlarge"),
        ("Ec2AmiId", "ami-0abcdef1234567890"),
        ("Ec2InstanceProfile", "ecsInstanceRole"),
    ]);
    p.extend(props(extra));
    ClusterProfile::parse(&p).expect("a valid EC2 cluster profile")
}

/// The family of the request's profiles, as its snapshot computes it.
fn family_of_request(w: &World, request: &crate::cluster::AgentRequest) -> String {
    let elastic = ElasticProfile::parse(&request.elastic_profile).expect("valid");
    family(w.cluster.key(), &request.profile, &elastic, REGION, None)
}

#[tokio::test]
async fn run_task_uses_the_family_of_the_requests_profile_though_the_stored_one_changed() {
    let w = World::with_profile(FakeAws::default(), profile_with(&[("EnvironmentVariables", "TEAM=a")]));
    let request = w.request(7, "key-1");
    // Another team's profile on the same cluster arrives before this request is served.
    let theirs = profile_with(&[("EnvironmentVariables", "TEAM=b")]);
    w.cluster.set_profile(theirs.clone());
    let ours = family_of_request(&w, &request);
    let elastic = ElasticProfile::parse(&request.elastic_profile).expect("valid");
    let stored = family(w.cluster.key(), &theirs, &elastic, REGION, None);
    assert_ne!(ours, stored, "another shared environment, another family");

    let created = w.cluster.create_agent(request).await.expect("launched");
    assert!(matches!(created, Created::Started(_)), "{created:?}");
    let runs = w.aws.run_requests();
    assert_eq!(runs.len(), 1);
    let task_definition = runs[0]["taskDefinition"].as_str().expect("a task definition");
    assert_eq!(family_of(task_definition), ours, "RunTask runs the request's family");
    let seen = w.cluster.state.task_definition_sweep.recent(w.cluster.now());
    assert!(seen.contains(&ours), "the request's family stays registered: {seen:?}");
    assert!(!seen.contains(&stored), "the stored profile's family was never asked for: {seen:?}");
}

#[tokio::test]
async fn saw_elastic_profile_records_the_family_of_the_requests_snapshot() {
    let w = World::with_profile(FakeAws::default(), profile_with(&[("EnvironmentVariables", "TEAM=b")]));
    let request = w.request(7, "key-1");
    let mine = Arc::new(profile_with(&[("EnvironmentVariables", "TEAM=a")]));
    let elastic = Arc::new(ElasticProfile::parse(&request.elastic_profile).expect("valid"));
    let snapshot = RequestSnapshot::new(w.cluster.key(), REGION, mine, "team-a".into(), elastic.clone(), None);
    w.cluster.saw_elastic_profile(&snapshot);
    let stored = family(w.cluster.key(), &w.cluster.profile(), &elastic, REGION, None);
    let seen = w.cluster.state.task_definition_sweep.recent(w.cluster.now());
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![snapshot.family.clone()]);
    assert_ne!(snapshot.family, stored);
}

#[tokio::test]
async fn queued_ec2_work_keeps_the_launch_its_request_built() {
    let w = World::with_profile(FakeAws::default(), ec2_profile_with(&[("Tags", "team=a")]));
    let request = w.request(7, "key-1");
    w.cluster.set_profile(ec2_profile_with(&[("Tags", "team=b")]));
    let ours = family_of_request(&w, &request);
    let profile = request.profile.clone();

    let created = w.cluster.create_agent(request).await.expect("queued");
    assert_eq!(created, Created::Queued);
    let spec = {
        let st = w.cluster.ec2().state();
        assert_eq!(st.waiting().len(), 1);
        st.waiting()[0].spec.clone()
    };
    assert!(Arc::ptr_eq(&spec.profile, &profile), "StartTask will send the request's profile");
    assert!(spec.tags.contains(&("team".to_string(), "a".to_string())), "{:?}", spec.tags);
    assert!(!spec.tags.iter().any(|(_, v)| v == "b"), "{:?}", spec.tags);
    assert_eq!(spec.work.settings, "team-a", "the request's fingerprint is tagged");
    assert_eq!(family_of(&spec.work.task_definition.arn), ours);

    // GoCD asks again with a new key: the waiting launch is the same, with the newest key.
    let again = w.request(7, "key-2");
    assert_eq!(w.cluster.create_agent(again).await.expect("answered"), Created::Existing);
    let renewed = w.cluster.ec2().state().waiting()[0].spec.clone();
    assert_eq!((&renewed.tags, &renewed.client_token), (&spec.tags, &spec.client_token));
    let env = override_environment(&renewed);
    assert!(env.contains(&("GO_EA_AUTO_REGISTER_KEY".to_string(), "key-2".to_string())), "{env:?}");
}
