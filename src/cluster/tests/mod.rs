//! Engine tests: the façade (`create_agent`, `should_assign`, `complete`, `ping`) against the
//! in-memory AWS of `aws/fake_aws.rs` and a GoCD port that records what it is told. Each runs in
//! milliseconds; the same paths run against moto in the end-to-end suites. Also here: the GoCD
//! port the engine's tests share ([`fake_gocd`]), their fixtures ([`fixtures`]), and the Fargate
//! launch path against a script of AWS calls ([`launch`]).

pub(crate) mod engine;
pub(crate) mod fake_gocd;
pub(crate) mod fixtures;
mod launch;

use engine::{cluster_profile, TestEngine, SERVER};
use fixtures::props;

use std::sync::Arc;
use std::time::Duration;

use super::agents::Phase;
use super::base::clock::ManualClock;
use super::base::identity::cluster_arn_suffix;
use super::base::identity::{self, task_tags, TaskLabels, TAG_AGENT_ID};
use super::job::create::Created;
use super::{AgentRequest, Cluster, EngineError};
use crate::aws::fake_aws::FakeAws;
use crate::protocol::types::{AgentMetadata, AgentState, BuildState, ConfigState, JobIdentifier};
use crate::settings::ClusterProfile;
use fake_gocd::FakeGocd;
use fixtures::job;

mod cost;
mod job_wait;
mod served_profiles;
mod snapshot;
mod warm;

/// A Fargate cluster profile with its networking named (no EC2 lookups) and `max` agents.
fn profile(max: u32) -> ClusterProfile {
    cluster_profile(&[("MaxAgents", &max.to_string()), ("AgentRegisterTimeoutMinutes", "1")])
}

struct World {
    aws: FakeAws,
    gocd: Arc<FakeGocd>,
    /// The engine's time: it starts at the wall's and moves only when a test advances it.
    clock: Arc<ManualClock>,
    cluster: Arc<Cluster>,
}

impl World {
    fn new(max: u32) -> World {
        World::with(FakeAws::default(), max)
    }

    /// A new process's engine over the same AWS (a restart).
    fn with(aws: FakeAws, max: u32) -> World {
        World::with_profile(aws, profile(max))
    }

    fn with_profile(aws: FakeAws, profile: ClusterProfile) -> World {
        let TestEngine { gocd, clock, cluster } = TestEngine::start(aws.clients(), profile);
        World { aws, gocd, clock, cluster }
    }

    fn request(&self, job_id: i64, key: &str) -> AgentRequest {
        engine::request(&self.cluster, job_id, key)
    }

    fn agent_of(&self, job_id: i64) -> crate::ids::AgentId {
        let registry = self.cluster.registry();
        registry.live_for_job(job_id).map(|a| a.agent_id.clone()).expect("a live agent for the job")
    }
}

/// should-assign-work's offer, for agents that never wait for a next job.
fn no_offer() -> super::agents::reuse::Offer {
    panic!("asked for an offer: no agent here waits for a next job")
}

fn listed(agent_id: &str, state: AgentState, build: BuildState) -> (crate::ids::AgentId, AgentMetadata) {
    let agent = AgentMetadata {
        agent_id: agent_id.into(),
        agent_state: state,
        build_state: build,
        config_state: ConfigState::Enabled,
    };
    (agent_id.into(), agent)
}

#[tokio::test]
async fn create_agent_runs_one_task_with_our_tags_overrides_and_a_console_line() {
    let w = World::new(5);
    let created = w.cluster.create_agent(w.request(7, "key-1")).await.expect("launched");
    assert_eq!(created, Created::Started(super::agents::tasks::Capacity::Fargate));
    let tasks = w.aws.running();
    assert_eq!(tasks.len(), 1);
    let task = &tasks[0];
    let agent_id = w.agent_of(7);
    assert_eq!(task.tags.get(TAG_AGENT_ID).map(String::as_str), Some(agent_id.as_str()));
    assert_eq!(task.tags.get(identity::TAG_SERVER_ID).map(String::as_str), Some(SERVER));
    assert_eq!(task.started_by, w.cluster.started_by());
    assert_eq!(task.environment.get("GO_EA_AUTO_REGISTER_KEY").map(String::as_str), Some("key-1"));
    assert_eq!(task.environment.get("GO_EA_SERVER_URL").map(String::as_str), Some("http://gocd.example:8153/go"));
    let calls = ["ListTasks", "DescribeTaskDefinition", "RegisterTaskDefinition", "RunTask"];
    assert_eq!(w.aws.calls(), calls, "adopt, register the family once, launch");
    assert!(w.gocd.console_of(7).iter().any(|l| l.contains(&task.arn)), "{:?}", w.gocd.console_of(7));
    assert!(w.cluster.should_assign(&agent_id, &job(7), no_offer));
    assert!(!w.cluster.should_assign(&agent_id, &job(8), no_offer), "only for its own job");
}

#[tokio::test]
async fn a_resent_create_agent_starts_nothing_and_the_task_definition_is_reused() {
    let w = World::new(5);
    w.cluster.create_agent(w.request(7, "key-1")).await.expect("launched");
    let again = w.cluster.create_agent(w.request(7, "key-2")).await.expect("answered");
    assert_eq!(again, Created::Existing);
    w.cluster.create_agent(w.request(8, "key-3")).await.expect("launched");
    assert_eq!(w.aws.count("RunTask"), 2);
    assert_eq!(w.aws.count("RegisterTaskDefinition"), 1);
}

#[tokio::test]
async fn max_agents_is_never_exceeded_by_a_burst() {
    let w = World::new(3);
    let burst = (1..=10).map(|id| {
        let (cluster, request) = (w.cluster.clone(), w.request(id, "k"));
        tokio::spawn(async move { cluster.create_agent(request).await })
    });
    let outcomes: Vec<_> = futures_join(burst).await;
    let started = outcomes.iter().filter(|o| matches!(o, Ok(Created::Started(_)))).count();
    let full = outcomes.iter().filter(|o| matches!(o, Ok(Created::Full))).count();
    assert_eq!((started, full), (3, 7));
    assert_eq!(w.aws.running().len(), 3);
    let waits = w.gocd.console.lock().map(|c| c.iter().filter(|(_, l)| l.contains("MaxAgents")).count());
    assert_eq!(waits.ok(), Some(7), "each waiting job is told why");
}

#[tokio::test]
async fn complete_disables_stops_and_deletes_and_a_late_create_agent_starts_nothing() {
    let w = World::new(5);
    w.cluster.create_agent(w.request(7, "k")).await.expect("launched");
    let agent_id = w.agent_of(7);
    let done = w.cluster.complete(&agent_id, &job(7)).await;
    assert_eq!(done, super::job::complete::Completed::Stopped);
    assert!(w.aws.running().is_empty());
    assert_eq!(w.gocd.deleted(), vec![agent_id.clone()]);
    assert_eq!(w.cluster.registry().get(&agent_id).map(|a| a.phase), Some(Phase::Stopped));
    assert_eq!(w.cluster.create_agent(w.request(7, "late")).await.expect("answered"), Created::Finished);
    assert_eq!(w.aws.count("RunTask"), 1);
}

#[tokio::test]
async fn a_failed_stop_leaves_the_agent_stopping_and_the_next_ping_stops_it() {
    let w = World::new(5);
    w.cluster.create_agent(w.request(7, "k")).await.expect("launched");
    let agent_id = w.agent_of(7);
    w.aws.fail_next("StopTask", 400, "AccessDeniedException", "not allowed");
    let later = w.cluster.complete(&agent_id, &job(7)).await;
    assert_eq!(later, super::job::complete::Completed::Later, "recorded; GoCD gets its 200");
    assert_eq!(w.cluster.registry().get(&agent_id).map(|a| a.phase), Some(Phase::Stopping));
    w.cluster.ping(Default::default()).await.expect("pinged");
    assert!(w.aws.running().is_empty(), "the ping retried the stop");
}

#[tokio::test]
async fn a_task_ecs_no_longer_knows_counts_as_stopped_and_its_agent_is_deleted() {
    let w = World::new(5);
    w.cluster.create_agent(w.request(7, "k")).await.expect("launched");
    let agent_id = w.agent_of(7);
    // AWS's answer for a task stopped over an hour ago.
    w.aws.fail_next("StopTask", 400, "InvalidParameterException", "The referenced task was not found.");
    let done = w.cluster.complete(&agent_id, &job(7)).await;
    assert_eq!(done, super::job::complete::Completed::Stopped);
    assert_eq!(w.gocd.deleted(), vec![agent_id.clone()]);
    assert_eq!(w.cluster.registry().get(&agent_id).map(|a| a.phase), Some(Phase::Stopped));
    // Any other refusal still fails the stop.
    w.cluster.create_agent(w.request(8, "k")).await.expect("launched");
    let other = w.agent_of(8);
    w.aws.fail_next("StopTask", 400, "InvalidParameterException", "Task Identifier is invalid");
    assert_eq!(w.cluster.complete(&other, &job(8)).await, super::job::complete::Completed::Later);
}

#[tokio::test]
async fn a_throttled_run_task_stays_a_throttle_and_is_retried() {
    let w = World::new(5);
    w.aws.fail_next("RunTask", 400, "ThrottlingException", "Rate exceeded");
    w.cluster.create_agent(w.request(7, "k")).await.expect("launched on the retry");
    assert_eq!(w.aws.count("RunTask"), 2);
    assert_eq!(w.aws.running().len(), 1);
    let stats = w.cluster.aws().calls.snapshot();
    assert_eq!(stats.get("RunTask").map(|c| c.throttled), Some(1));
}

#[tokio::test]
async fn a_refused_profile_is_told_in_the_console_and_starts_nothing() {
    let w = World::new(5);
    let mut request = w.request(7, "k");
    request.elastic_profile = props(&[("Image", "gocd/gocd-agent:v1"), ("Cpu", "512"), ("Memory", "100000")]);
    let refused = w.cluster.create_agent(request).await;
    assert!(matches!(refused, Err(EngineError::Refused(_))), "{refused:?}");
    assert!(w.gocd.console_of(7).iter().any(|l| l.contains("does not fit")), "{:?}", w.gocd.console_of(7));
    assert_eq!(w.aws.count("RunTask"), 0);
}

#[tokio::test]
async fn a_ping_stops_a_task_whose_agent_never_registered() {
    let w = World::new(5);
    w.cluster.create_agent(w.request(7, "k")).await.expect("launched");
    let agent_id = w.agent_of(7);
    // Registered in GoCD: nothing to do.
    let gocd = [listed(&agent_id, AgentState::Building, BuildState::Building)].into();
    w.cluster.ping(gocd).await.expect("pinged");
    assert_eq!(w.aws.running().len(), 1);
    // A task adopted from before a restart, two hours old, whose agent GoCD never listed.
    let old_job = job(9);
    let tags = our_tags(&w.cluster, "ea-old", &old_job);
    let stale = w.aws.seed_task(w.cluster.started_by(), &tags, w.cluster.now() - Duration::from_secs(7200));
    let gocd = [listed(&agent_id, AgentState::Building, BuildState::Building)].into();
    w.cluster.ping(gocd).await.expect("pinged");
    let running: Vec<String> = w.aws.running().into_iter().map(|t| t.arn).collect();
    assert!(!running.contains(&stale), "the unregistered task was stopped");
    assert_eq!(running.len(), 1, "the registered one runs on");
    assert!(w.gocd.console_of(9).iter().any(|l| l.contains("did not register")), "{:?}", w.gocd.console_of(9));
}

#[tokio::test]
async fn a_task_stopped_by_ecs_is_reported_and_its_agent_removed() {
    let w = World::new(5);
    w.cluster.create_agent(w.request(7, "k")).await.expect("launched");
    let agent_id = w.agent_of(7);
    let arn = w.aws.running()[0].arn.clone();
    w.aws.stop_by_ecs(&arn, "Spot capacity reclaimed");
    let gocd = [listed(&agent_id, AgentState::Building, BuildState::Building)].into();
    w.cluster.ping(gocd).await.expect("pinged");
    assert_eq!(w.gocd.deleted(), vec![agent_id]);
    assert!(w.gocd.console_of(7).iter().any(|l| l.contains("Spot capacity reclaimed")));
}

#[tokio::test]
async fn a_restarted_engine_adopts_its_tasks_and_a_resent_create_agent_finds_them() {
    let aws = FakeAws::default();
    let first = World::with(aws.clone(), 5);
    first.cluster.create_agent(first.request(7, "k")).await.expect("launched");
    let agent_id = first.agent_of(7);
    let foreign = aws.seed_task("someone-else", &[("team".into(), "x".into())], first.cluster.now());
    drop(first);

    let second = World::with(aws.clone(), 5);
    let again = second.cluster.create_agent(second.request(7, "k2")).await.expect("answered");
    assert_eq!(again, Created::Existing, "adopted from the task's tags");
    assert_eq!(second.agent_of(7), agent_id);
    assert!(second.cluster.should_assign(&agent_id, &job(7), no_offer));
    assert_eq!(aws.count("RunTask"), 1);
    second.cluster.ping(Default::default()).await.expect("pinged");
    assert!(aws.running().iter().any(|t| t.arn == foreign), "a task not ours is never touched");
}

#[test]
fn cluster_arn_suffix_from_name_or_arn() {
    assert_eq!(cluster_arn_suffix("ci"), ":cluster/ci");
    assert_eq!(cluster_arn_suffix("arn:aws:ecs:us-east-1:123456789012:cluster/ci"), ":cluster/ci");
}

fn our_tags(cluster: &Cluster, agent_id: &str, job: &JobIdentifier) -> Vec<(String, String)> {
    let labels = TaskLabels {
        server_id: cluster.server_id(),
        cluster_key: cluster.key(),
        agent_id,
        job,
        environment: None,
        elastic_profile: "h",
        attempt: 1,
        settings: "",
    };
    task_tags(&labels, &[])
}

async fn futures_join<T>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.expect("the task finished"));
    }
    out
}

#[tokio::test]
async fn two_teams_on_one_cluster_each_keep_their_own_max_agents() {
    let w = World::new(2);
    let team = |job_id: i64, settings: &str| {
        let mut request = w.request(job_id, "k");
        request.settings = settings.into();
        request
    };
    for id in 1..=4 {
        w.cluster.create_agent(team(id, "team-a")).await.expect("answered");
        w.cluster.create_agent(team(100 + id, "team-b")).await.expect("answered");
    }
    let per_team = |settings: &str| {
        w.aws
            .running()
            .iter()
            .filter(|t| t.tags.get(identity::TAG_CLUSTER_SETTINGS).map(String::as_str) == Some(settings))
            .count()
    };
    assert_eq!((per_team("team-a"), per_team("team-b")), (2, 2), "MaxAgents 2 each, not 2 together");
}

#[tokio::test]
async fn an_edit_that_keeps_the_key_keeps_the_count_under_the_new_settings() {
    let w = World::new(2);
    for id in 1..=2 {
        w.cluster.create_agent(w.request(id, "k")).await.expect("launched");
    }
    w.cluster.registry().settings_changed(&"team-a".into(), &"team-a-edited".into());
    let mut edited = w.request(3, "k");
    edited.settings = "team-a-edited".into();
    assert_eq!(w.cluster.create_agent(edited).await.expect("answered"), Created::Full, "the two still count");
    assert_eq!(w.aws.running().len(), 2);
}

#[tokio::test]
async fn a_deleted_profile_stops_its_tasks_at_the_next_ping_and_drains() {
    let w = World::new(5);
    for id in 1..=3 {
        w.cluster.create_agent(w.request(id, "k")).await.expect("launched");
    }
    w.cluster.retire(super::Retirement::Deleted);
    assert!(matches!(w.cluster.create_agent(w.request(4, "k")).await, Err(EngineError::Refused(_))));
    w.cluster.ping(Default::default()).await.expect("pinged");
    assert!(w.aws.running().is_empty(), "every task stopped");
    assert!(w.cluster.is_drained());
}

#[tokio::test]
async fn deleting_one_teams_profile_stops_only_its_agents_and_the_engine_serves_on() {
    let w = World::new(5);
    let team = |job_id: i64, settings: &str| {
        let mut request = w.request(job_id, "k");
        request.settings = settings.into();
        request
    };
    let profile = w.cluster.profile();
    w.cluster.serve_again(&"team-a".into(), &profile);
    w.cluster.serve_again(&"team-b".into(), &profile);
    for id in 1..=2 {
        w.cluster.create_agent(team(id, "team-a")).await.expect("launched");
        w.cluster.create_agent(team(10 + id, "team-b")).await.expect("launched");
    }
    w.cluster.profile_deleted(&"team-a".into());
    assert_eq!(w.cluster.retired(), None, "team B's profile still uses the engine");
    w.cluster.ping(Default::default()).await.expect("pinged");
    let running: Vec<_> = w.aws.running().iter().map(|t| t.tags["gocd:cluster-settings"].clone()).collect();
    assert_eq!(running, ["team-b", "team-b"], "team A's two tasks stopped, team B's run on");
    assert!(matches!(w.cluster.create_agent(team(13, "team-b")).await, Ok(Created::Started(_))));

    w.cluster.profile_deleted(&"team-b".into());
    assert_eq!(w.cluster.retired(), Some(super::Retirement::Deleted), "no team left");
    w.cluster.ping(Default::default()).await.expect("pinged");
    assert!(w.aws.running().is_empty());
}

#[tokio::test]
async fn a_moved_profile_keeps_running_jobs_and_stops_each_task_as_its_job_completes() {
    let w = World::new(5);
    w.cluster.create_agent(w.request(1, "k")).await.expect("launched");
    let agent_id = w.agent_of(1);
    w.cluster.retire(super::Retirement::Replaced);
    let gocd = [listed(&agent_id, AgentState::Building, BuildState::Building)].into();
    w.cluster.ping(gocd).await.expect("pinged");
    assert_eq!(w.aws.running().len(), 1, "the job runs on");
    assert!(!w.cluster.is_drained());
    w.cluster.complete(&agent_id, &job(1)).await;
    assert!(w.aws.running().is_empty());
    assert!(w.cluster.is_drained());
}

#[tokio::test]
async fn a_job_completed_while_aws_was_unreachable_is_cleaned_up_by_a_later_ping() {
    let aws = FakeAws::default();
    let first = World::with(aws.clone(), 5);
    first.cluster.create_agent(first.request(7, "k")).await.expect("launched");
    let agent_id = first.agent_of(7);
    drop(first);
    // A new process: adoption fails while GoCD reports the job completed.
    let second = World::with(aws.clone(), 5);
    second.aws.fail_next("ListTasks", 400, "AccessDeniedException", "not now");
    let later = second.cluster.complete(&agent_id, &job(7)).await;
    assert_eq!(later, super::job::complete::Completed::Later);
    assert_eq!(aws.running().len(), 1);
    second.cluster.ping(Default::default()).await.expect("pinged");
    assert!(aws.running().is_empty(), "the finished job's task was stopped once adoption found it");
}

#[tokio::test]
async fn strays_of_a_vanished_profile_key_are_stopped_and_nothing_else() {
    let w = World::new(5);
    w.cluster.create_agent(w.request(1, "k")).await.expect("launched");
    let old_job = job(9);
    let mut labels_tags = our_tags(&w.cluster, "ea-000000000000-9-1a2b3c4d", &old_job);
    for (k, v) in labels_tags.iter_mut() {
        if k == identity::TAG_CLUSTER_PROFILE {
            *v = "000000000000".into();
        }
    }
    let stray = w.aws.seed_task(&identity::started_by(SERVER, &"000000000000".into()), &labels_tags, w.cluster.now());
    let mut foreign_tags = labels_tags.clone();
    for (k, v) in foreign_tags.iter_mut() {
        if k == identity::TAG_SERVER_ID {
            *v = "another-server".into();
        }
    }
    let foreign =
        w.aws.seed_task(&identity::started_by(SERVER, &"000000000000".into()), &foreign_tags, w.cluster.now());
    assert_eq!(w.cluster.stop_strays(&"000000000000".into()).await.expect("looked"), 1);
    let running: Vec<String> = w.aws.running().into_iter().map(|t| t.arn).collect();
    assert!(!running.contains(&stray), "the stray is stopped");
    assert!(running.contains(&foreign), "another server's task is never touched");
    assert_eq!(running.len(), 2, "our live agent runs on");
}

#[tokio::test]
async fn the_leftover_sweep_stops_by_tag_what_no_agent_names_and_nothing_else() {
    let w = World::new(5);
    w.cluster.create_agent(w.request(1, "k")).await.expect("launched");
    let with_key = |server: &str, key: &str| {
        let mut tags = our_tags(&w.cluster, "ea-000000000000-9-1a2b3c4d", &job(9));
        for (k, v) in tags.iter_mut() {
            match k.as_str() {
                identity::TAG_CLUSTER_PROFILE => *v = key.into(),
                identity::TAG_SERVER_ID => *v = server.into(),
                _ => {}
            }
        }
        tags
    };
    // Started under another startedBy than the stray's key would give: found by its tags alone.
    let leftover = w.aws.seed_task("an-older-plugin", &with_key(SERVER, "000000000000"), w.cluster.now());
    let foreign = w.aws.seed_task("an-older-plugin", &with_key("another-server", "000000000000"), w.cluster.now());
    let untagged = w.aws.seed_task("someone-else", &[("team".into(), "x".into())], w.cluster.now());
    let live = [w.cluster.key().clone()].into();
    let reads = || (w.aws.count("ListTasks"), w.aws.count("DescribeTasks"));
    let before = reads();
    assert_eq!(w.cluster.stop_leftover_tasks(&live).await.expect("looked"), 1);
    let after = reads();
    let running: Vec<String> = w.aws.running().into_iter().map(|t| t.arn).collect();
    assert!(!running.contains(&leftover), "the leftover is stopped");
    assert!(running.contains(&foreign) && running.contains(&untagged), "other servers' and untagged tasks run on");
    assert_eq!(running.len(), 3, "our live agent runs on");
    assert_eq!((after.0 - before.0, after.1 - before.1), (1, 1), "one page of each for 4 tasks");
}

/// A request of a warm-start elastic profile (`ReuseIdleMinutes` 5, `ReuseMaxJobs` 3).
fn reusing(w: &World, job_id: i64) -> AgentRequest {
    let mut request = w.request(job_id, "k");
    request.elastic_profile.insert("ReuseIdleMinutes".into(), Some("5".into()));
    request.elastic_profile.insert("ReuseMaxJobs".into(), Some("3".into()));
    request
}

/// What should-assign-work offers for a job of `request`'s profiles.
fn offer_of(request: &AgentRequest) -> impl FnOnce() -> super::agents::reuse::Offer {
    let offer = super::agents::reuse::Offer {
        environment: request.environment.clone(),
        elastic_profile: crate::settings::profile_hash(&request.elastic_profile),
        settings: request.settings.clone(),
    };
    move || offer
}

/// Starts job 1's agent and lets a ping see it registered; returns its id.
async fn registered_agent(w: &World, request: AgentRequest) -> crate::ids::AgentId {
    let job_id = request.job.job_id;
    w.cluster.create_agent(request).await.expect("launched");
    let agent_id = w.agent_of(job_id);
    let gocd = [listed(&agent_id, AgentState::Building, BuildState::Building)].into();
    w.cluster.ping(gocd).await.expect("pinged");
    agent_id
}

#[tokio::test]
async fn a_kept_agent_takes_the_next_jobs_until_its_max_and_starts_no_task() {
    let w = World::new(5);
    let agent_id = registered_agent(&w, reusing(&w, 1)).await;
    assert_eq!(w.cluster.complete(&agent_id, &job(1)).await, super::job::complete::Completed::Kept);
    assert!(w.gocd.deleted().is_empty(), "kept, not deleted");
    assert!(w.gocd.console_of(1).iter().any(|l| l.contains("stays for the next job")));

    // Job 2 through create-agent.
    assert_eq!(w.cluster.create_agent(reusing(&w, 2)).await.expect("answered"), Created::Reused);
    assert!(w.gocd.console_of(2).iter().any(|l| l.contains(&format!("reuses agent {agent_id}"))));
    assert!(w.cluster.should_assign(&agent_id, &job(2), no_offer));
    let other = reusing(&w, 9);
    assert!(!w.cluster.should_assign(&agent_id, &job(9), offer_of(&other)), "bound to job 2: no other job");
    assert_eq!(w.cluster.complete(&agent_id, &job(2)).await, super::job::complete::Completed::Kept);

    // Job 3 through should-assign-work; its create-agent then finds it served.
    let third = reusing(&w, 3);
    assert!(w.cluster.should_assign(&agent_id, &job(3), offer_of(&third)));
    assert_eq!(w.cluster.create_agent(third).await.expect("answered"), Created::Existing);
    assert_eq!(w.aws.count("RunTask"), 1, "three jobs, one task");
    assert_eq!(w.cluster.registry().reuse_counts(), (2, 1), "two hits, one miss");

    // ReuseMaxJobs 3: the third job's end stops it.
    assert_eq!(w.cluster.complete(&agent_id, &job(3)).await, super::job::complete::Completed::Stopped);
    assert!(w.aws.running().is_empty());
    assert_eq!(w.cluster.registry().get(&agent_id).map(|a| a.served_jobs.clone()), Some(vec![1, 2, 3]));
}

#[tokio::test]
async fn a_kept_agent_is_never_given_another_profile_or_environment() {
    let w = World::new(5);
    let agent_id = registered_agent(&w, reusing(&w, 1)).await;
    w.cluster.complete(&agent_id, &job(1)).await;
    let mut other_profile = reusing(&w, 2);
    other_profile.elastic_profile.insert("Memory".into(), Some("2048".into()));
    let mut other_environment = reusing(&w, 3);
    other_environment.environment = Some("prod".into());
    let mut other_team = reusing(&w, 4);
    other_team.settings = "team-b".into();
    for request in [other_profile, other_environment, other_team] {
        let job_id = request.job.job_id;
        assert!(!w.cluster.should_assign(&agent_id, &request.job, offer_of(&request)), "job {job_id}");
        assert!(matches!(w.cluster.create_agent(request).await, Ok(Created::Started(_))), "job {job_id}");
    }
    assert_eq!(w.aws.count("RunTask"), 4);
    let one_job_only = reusing(&w, 1);
    assert!(!w.cluster.should_assign(&agent_id, &job(1), offer_of(&one_job_only)), "never its finished job again");
}

/// One kept agent, ten create-agents and ten should-assign-works for twenty other jobs, all at
/// once: exactly one job gets the agent, and only that job's should-assign-work says true.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kept_agent_is_bound_to_exactly_one_job_under_concurrent_asks() {
    let w = World::new(50);
    let agent_id = registered_agent(&w, reusing(&w, 1)).await;
    w.cluster.complete(&agent_id, &job(1)).await;
    // Interleaved and all spawned before any is awaited.
    let mut handles = Vec::new();
    for id in 10..20 {
        let (cluster, request) = (w.cluster.clone(), reusing(&w, id));
        handles.push(tokio::spawn(async move {
            cluster.create_agent(request).await.map(|c| c == Created::Reused).unwrap_or(false)
        }));
        let (cluster, request, agent_id) = (w.cluster.clone(), reusing(&w, id + 10), agent_id.clone());
        handles.push(tokio::spawn(async move { cluster.should_assign(&agent_id, &request.job, offer_of(&request)) }));
    }
    let won: Vec<bool> = futures_join(handles.into_iter()).await;
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "one job got the agent: {won:?}");
    let bound = w.cluster.registry().get(&agent_id).map(|a| a.job.job_id).expect("the agent");
    assert!((10..30).contains(&bound));
    for id in (10..30).filter(|id| *id != bound) {
        assert!(!w.cluster.should_assign(&agent_id, &job(id), offer_of(&reusing(&w, id))), "job {id}");
    }
    assert!(w.cluster.should_assign(&agent_id, &job(bound), no_offer));
}

/// A profile with `CapacityProviderStrategy` set to `strategy`.
fn through_providers(strategy: &str) -> ClusterProfile {
    let p = props(&[
        ("ClusterName", "ci"),
        ("Region", "us-east-1"),
        ("SubnetIds", "subnet-0a1b2c3d"),
        ("SecurityGroupIds", "sg-0a1b2c3d"),
        ("CapacityProviderStrategy", strategy),
    ]);
    ClusterProfile::parse(&p).expect("a valid cluster profile")
}

#[tokio::test]
async fn the_cluster_default_strategy_sends_neither_a_launch_type_nor_a_strategy() {
    let w = World::with_profile(FakeAws::default(), through_providers("default"));
    w.cluster.create_agent(w.request(1, "key-1")).await.expect("launched");
    let bodies = w.aws.run_requests();
    assert_eq!(bodies.len(), 1);
    assert!(bodies[0].get("launchType").is_none(), "{}", bodies[0]);
    assert!(bodies[0].get("capacityProviderStrategy").is_none(), "{}", bodies[0]);
}

#[tokio::test]
async fn a_strategy_sends_one_provider_a_task_following_base_and_weights() {
    let w = World::with_profile(FakeAws::default(), through_providers("my-asg:1:1\nFARGATE:2"));
    for job in 1..=7 {
        w.cluster.create_agent(w.request(job, &format!("key-{job}"))).await.expect("launched");
    }
    let providers: Vec<String> = w
        .aws
        .run_requests()
        .iter()
        .map(|b| {
            assert!(b.get("launchType").is_none(), "{b}");
            assert!(
                b.get("platformVersion").is_none() || b["capacityProviderStrategy"][0]["capacityProvider"] == "FARGATE"
            );
            b["capacityProviderStrategy"][0]["capacityProvider"].as_str().unwrap_or("none").to_string()
        })
        .collect();
    // The base first; then the one furthest behind its weight's share, the first listed on a tie.
    assert_eq!(providers, ["my-asg", "FARGATE", "my-asg", "FARGATE", "FARGATE", "my-asg", "FARGATE"]);
    assert_eq!(
        w.cluster.state.provider_launches.counts(),
        [("FARGATE".to_string(), 4), ("my-asg".to_string(), 3)].into_iter().collect()
    );
}

#[tokio::test]
async fn a_failed_launch_through_a_provider_does_not_count_for_it() {
    let w = World::with_profile(FakeAws::default(), through_providers("FARGATE:1:1\nFARGATE_SPOT:1"));
    w.aws.fail_next("RunTask", 400, "InvalidParameterException", "no such capacity provider");
    assert!(w.cluster.create_agent(w.request(1, "key-1")).await.is_err());
    assert!(w.cluster.state.provider_launches.counts().values().all(|n| *n == 0));
    w.cluster.create_agent(w.request(2, "key-2")).await.expect("launched");
    let last = w.aws.run_requests().last().cloned().expect("a RunTask");
    assert_eq!(last["capacityProviderStrategy"][0]["capacityProvider"], "FARGATE", "the base is still owed");
}

#[tokio::test]
async fn placement_of_the_elastic_profile_is_sent_on_run_task() {
    let w = World::with_profile(FakeAws::default(), through_providers("my-asg"));
    let mut request = w.request(1, "key-1");
    request
        .elastic_profile
        .insert("PlacementStrategy".into(), Some("spread:attribute:ecs.availability-zone\nbinpack:memory".into()));
    request
        .elastic_profile
        .insert("PlacementConstraints".into(), Some("memberOf:attribute:ecs.cpu-architecture == arm64".into()));
    w.cluster.create_agent(request).await.expect("launched");
    let body = w.aws.run_requests().pop().expect("a RunTask");
    assert_eq!(
        body["placementStrategy"],
        serde_json::json!([
            { "type": "spread", "field": "attribute:ecs.availability-zone" },
            { "type": "binpack", "field": "memory" }
        ])
    );
    assert_eq!(
        body["placementConstraints"],
        serde_json::json!([{ "type": "memberOf", "expression": "attribute:ecs.cpu-architecture == arm64" }])
    );
}

#[tokio::test]
async fn placement_on_fargate_is_refused_before_any_run_task() {
    let w = World::new(5);
    let mut request = w.request(1, "key-1");
    request.elastic_profile.insert("PlacementConstraints".into(), Some("distinctInstance".into()));
    let refused = w.cluster.create_agent(request).await.expect_err("refused");
    assert!(refused.to_string().contains("PlacementConstraints only applies where ECS places"), "{refused}");
    assert!(w.aws.run_requests().is_empty());
}

#[tokio::test]
async fn after_a_restart_the_split_goes_on_from_the_running_tasks() {
    let aws = FakeAws::default();
    let strategy = "FARGATE:1:2\nFARGATE_SPOT:3";
    let before = World::with_profile(aws.clone(), through_providers(strategy));
    for job in 1..=3 {
        before.cluster.create_agent(before.request(job, &format!("key-{job}"))).await.expect("launched");
    }
    let first: Vec<String> = aws
        .run_requests()
        .iter()
        .map(|b| b["capacityProviderStrategy"][0]["capacityProvider"].as_str().unwrap_or("none").to_string())
        .collect();
    assert_eq!(first, ["FARGATE", "FARGATE", "FARGATE_SPOT"], "the base of 2, then Spot");
    drop(before);
    // A new process over the same AWS: it adopts the three tasks with their providers.
    let after = World::with_profile(aws.clone(), through_providers(strategy));
    for job in 4..=6 {
        after.cluster.create_agent(after.request(job, &format!("key-{job}"))).await.expect("launched");
    }
    let next: Vec<String> = aws.run_requests()[3..]
        .iter()
        .map(|b| b["capacityProviderStrategy"][0]["capacityProvider"].as_str().unwrap_or("none").to_string())
        .collect();
    // As one process would have gone on (2 base, then 1:3); a restarted base would start FARGATE, FARGATE.
    assert_eq!(next, ["FARGATE_SPOT", "FARGATE", "FARGATE_SPOT"], "the split goes on; the base is not owed again");
    assert_eq!(
        after.cluster.state.provider_launches.counts(),
        [("FARGATE".to_string(), 3), ("FARGATE_SPOT".to_string(), 3)].into_iter().collect()
    );
}

#[tokio::test]
async fn a_managed_instances_provider_gets_its_compatibility_awsvpc_and_one_describe() {
    let aws = FakeAws::default();
    aws.add_capacity_provider("ci-mi", "MANAGED_INSTANCES");
    let w = World::with_profile(aws.clone(), through_providers("ci-mi"));
    for job in 1..=3 {
        w.cluster.create_agent(w.request(job, &format!("key-{job}"))).await.expect("launched");
    }
    assert_eq!(aws.count("DescribeCapacityProviders"), 1, "learned once per engine");
    let registered = aws.registered();
    assert_eq!(registered.len(), 1);
    assert_eq!(registered[0]["requiresCompatibilities"], serde_json::json!(["FARGATE", "MANAGED_INSTANCES"]));
    assert_eq!(registered[0]["networkMode"], "awsvpc");
    for body in aws.run_requests() {
        assert_eq!(body["capacityProviderStrategy"][0]["capacityProvider"], "ci-mi", "{body}");
        assert!(body["networkConfiguration"]["awsvpcConfiguration"].is_object(), "{body}");
        assert!(body.get("launchType").is_none(), "{body}");
    }
    let kinds = w.cluster.kinds(&w.cluster.profile()).expect("learned");
    assert_eq!(kinds.describe(), "ci-mi: ECS Managed Instances, ACTIVE");
}

#[tokio::test]
async fn the_cluster_default_strategy_is_read_once_for_its_kinds() {
    let aws = FakeAws::default();
    aws.add_capacity_provider("ci-mi", "MANAGED_INSTANCES");
    aws.set_default_strategy(&["ci-mi"]);
    let w = World::with_profile(aws.clone(), through_providers("default"));
    w.cluster.create_agent(w.request(1, "key-1")).await.expect("launched");
    w.cluster.create_agent(w.request(2, "key-2")).await.expect("launched");
    assert_eq!((aws.count("DescribeClusters"), aws.count("DescribeCapacityProviders")), (1, 1));
    assert_eq!(aws.registered()[0]["requiresCompatibilities"], serde_json::json!(["FARGATE", "MANAGED_INSTANCES"]));
}

#[tokio::test]
async fn a_key_managed_instances_refuses_is_refused_before_any_launch_naming_the_key() {
    let aws = FakeAws::default();
    aws.add_capacity_provider("ci-mi", "MANAGED_INSTANCES");
    let w = World::with_profile(aws.clone(), through_providers("FARGATE\nci-mi"));
    let mut request = w.request(1, "key-1");
    request.elastic_profile.insert("EphemeralStorageGiB".into(), Some("50".into()));
    let refused = w.cluster.create_agent(request).await.expect_err("refused");
    assert!(matches!(refused, EngineError::Refused(_)), "{refused}");
    assert!(
        refused.to_string().contains("EphemeralStorageGiB cannot be used where ECS Managed Instances"),
        "{refused}"
    );
    assert!(aws.run_requests().is_empty() && aws.registered().is_empty());
    assert!(w.gocd.console_of(1).iter().any(|l| l.contains("EphemeralStorageGiB") && l.contains("ci-mi")));
}

/// `request` naming the task definition `td` (its agent container `agent`) instead of ours.
fn given(mut request: AgentRequest, td: &str) -> AgentRequest {
    request.elastic_profile =
        props(&[("Image", "gocd/gocd-agent:v1"), ("TaskDefinitionArn", td), ("AgentContainerName", "agent")]);
    request
}

fn given_definition(requires: &[&str]) -> serde_json::Value {
    serde_json::json!({
        "containerDefinitions": [{ "name": "agent", "image": "gocd/gocd-agent:v1" }],
        "networkMode": "awsvpc",
        "requiresCompatibilities": requires,
    })
}

#[tokio::test]
async fn a_given_task_definition_without_what_a_provider_needs_is_refused_naming_what_to_add() {
    let aws = FakeAws::default();
    aws.add_capacity_provider("ci-mi", "MANAGED_INSTANCES");
    aws.add_capacity_provider("ci-asg", "EC2_AUTOSCALING");
    aws.seed_task_definition("team-fargate:1", given_definition(&["FARGATE"]));
    aws.seed_task_definition("team-mi:1", given_definition(&["FARGATE", "MANAGED_INSTANCES"]));
    let w = World::with_profile(aws.clone(), through_providers("FARGATE\nci-mi"));

    let refused = w.cluster.create_agent(given(w.request(1, "key-1"), "team-fargate:1")).await.expect_err("refused");
    let EngineError::Refused(why) = &refused else { panic!("refused: {refused:?}") };
    let why = why.to_string();
    let td = "arn:aws:ecs:us-east-1:123456789012:task-definition/team-fargate:1";
    assert_eq!(
        why.as_str(),
        format!(
            "task definition {td} cannot run on every capacity provider of this cluster profile's \
             CapacityProviderStrategy: ci-mi (ECS Managed Instances) needs MANAGED_INSTANCES; its \
             requiresCompatibilities: FARGATE. Add MANAGED_INSTANCES to its requiresCompatibilities (register a \
             revision with requiresCompatibilities FARGATE, MANAGED_INSTANCES and name it in TaskDefinitionArn), or \
             leave those providers out of the strategy"
        )
    );
    assert!(aws.run_requests().is_empty() && aws.registered().is_empty(), "no RunTask to fail on ci-mi's turn");
    let console = w.gocd.console_of(1);
    assert!(console.iter().any(|l| l.contains(td) && l.contains("Add MANAGED_INSTANCES")), "{console:?}");
    let health: Vec<String> = w.cluster.events().recent().into_iter().map(|e| e.message).collect();
    assert!(health.iter().any(|m| m.contains(td) && m.contains("Add MANAGED_INSTANCES")), "{health:?}");

    // With MANAGED_INSTANCES required, both providers take it: the launches go on.
    w.cluster.create_agent(given(w.request(2, "key-2"), "team-mi:1")).await.expect("launched");
    w.cluster.create_agent(given(w.request(3, "key-3"), "team-mi:1")).await.expect("launched");
    let providers: Vec<String> = aws
        .run_requests()
        .iter()
        .map(|b| b["capacityProviderStrategy"][0]["capacityProvider"].as_str().unwrap_or("none").to_string())
        .collect();
    assert_eq!(providers, ["FARGATE", "ci-mi"]);

    // An Auto Scaling group's provider needs EC2: named alongside what a Fargate-only one lacks.
    let w = World::with_profile(aws.clone(), through_providers("ci-asg\nci-mi"));
    let refused = w.cluster.create_agent(given(w.request(4, "key-4"), "team-fargate:1")).await.expect_err("refused");
    assert!(
        refused.to_string().contains(
            "ci-asg (Auto Scaling group) needs EC2; ci-mi (ECS Managed Instances) needs MANAGED_INSTANCES; its \
             requiresCompatibilities: FARGATE. Add EC2 and MANAGED_INSTANCES"
        ),
        "{refused}"
    );
}

/// The soak's first finding: a server-ping beside a job-completion for the same agent
/// stopped its task and removed the agent a second time. Now the ping leaves it to the completion,
/// and takes over only if the completion could not finish.
#[tokio::test]
async fn a_server_ping_during_a_job_completion_leaves_the_agent_to_it() {
    let w = World::new(5);
    w.cluster.create_agent(w.request(7, "key-1")).await.expect("launched");
    let agent_id = w.agent_of(7);
    assert!(w.cluster.should_assign(&agent_id, &job(7), no_offer));
    // The completion has begun: the agent is being disabled, its task stopped, the agent deleted.
    assert!(w.cluster.registry().stopping(&agent_id).is_some());
    let stops = w.aws.count("StopTask");
    let gocd: std::collections::HashMap<crate::ids::AgentId, AgentMetadata> =
        [listed(&agent_id, AgentState::Idle, BuildState::Idle)].into_iter().collect();
    w.cluster.ping(gocd.clone()).await.expect("pinged");
    assert_eq!(w.aws.count("StopTask"), stops, "the ping leaves the stop to the completion");
    assert!(w.gocd.deleted().is_empty(), "and the removal: {:?}", w.gocd.deleted());
    let disabled = w.gocd.disabled.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    assert!(disabled.is_empty(), "{disabled:?}");
    // The completion could not finish (GoCD failed it): the next ping takes over.
    w.cluster.registry().completion_failed(&agent_id);
    w.cluster.ping(gocd.clone()).await.expect("pinged");
    assert_eq!(w.aws.count("StopTask"), stops + 1, "retried by the ping");
    w.cluster.ping(gocd).await.expect("pinged");
    assert_eq!(w.gocd.deleted(), [agent_id], "then removed, once");
}

/// The engine's own state is built from these locks: its documented order (the cost's, then
/// the registry's, then the EC2 pool's) passes, and the reverse of a pair panics.
#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "Found cycle in mutex dependency graph")]
fn the_engines_own_locks_are_checked() {
    use std::sync::PoisonError;
    let state = super::State::new(&super::EngineOptions::default(), std::time::SystemTime::UNIX_EPOCH);
    {
        let _cost = state.cost.lock();
        let _registry = state.registry.lock().unwrap_or_else(PoisonError::into_inner);
        let _pool = state.ec2.state();
    }
    let _pool = state.ec2.state();
    let _registry = state.registry.lock().unwrap_or_else(PoisonError::into_inner);
}
