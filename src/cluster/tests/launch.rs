//! The Fargate launch path through the port, in milliseconds: create-agent against a script of
//! the AWS calls it must make, in order ([`crate::aws::verifier`]), with AWS's answers — Spot
//! capacity refused, a throttle, an answer lost on the way, access denied. Backoffs run on
//! tokio's paused clock: no test sleeps in real time. Every test ends with `done()`.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{json, Value};

use super::engine::{self, cluster_profile, TestEngine};
use super::fake_gocd::FakeGocd;
use crate::aws::verifier::{Call, Verifier};
use crate::cluster::agents::tasks::Capacity;
use crate::cluster::job::create::Created;
use crate::cluster::{AgentRequest, Cluster};

const TASK: &str = "arn:aws:ecs:us-east-1:123456789012:task/ci/0123456789abcdef";

struct World {
    aws: Verifier,
    gocd: Arc<FakeGocd>,
    cluster: Arc<Cluster>,
}

impl World {
    fn new(launch_type: &str) -> World {
        let profile = cluster_profile(&[("LaunchType", launch_type), ("MaxAgents", "5")]);
        let aws = Verifier::default();
        let TestEngine { gocd, cluster, .. } = TestEngine::start(aws.clients(), profile);
        World { aws, gocd, cluster }
    }

    fn request(&self, job_id: i64) -> AgentRequest {
        engine::request(&self.cluster, job_id, &format!("key-{job_id}"))
    }

    /// The calls before the first RunTask: adopt (nothing runs), the family (none yet), register it.
    fn expect_first_launch(&self) {
        self.aws.expect("ListTasks").answers(json!({ "taskArns": [] }).to_string());
        self.aws.expect("DescribeTaskDefinition").fails(400, "ClientException", "Unable to describe task definition.");
        self.aws.expect("RegisterTaskDefinition").answers(
            json!({ "taskDefinition": { "taskDefinitionArn": "arn:aws:ecs:us-east-1:123456789012:task-definition/gocd-ci:1",
                "family": "gocd-ci", "revision": 1, "status": "ACTIVE" } })
            .to_string(),
        );
    }

    fn console(&self, job_id: i64) -> String {
        self.gocd.console_of(job_id).join("\n")
    }

    fn health(&self) -> String {
        self.cluster.events().recent().iter().map(|e| e.message.clone()).collect::<Vec<_>>().join("\n")
    }
}

/// RunTask's answer: the task started, with the tags it was asked for.
fn started(call: &Call) -> String {
    json!({ "tasks": [task_json(&call.json["tags"], "PROVISIONING")], "failures": [] }).to_string()
}

fn task_json(tags: &Value, status: &str) -> Value {
    json!({ "taskArn": TASK, "clusterArn": "arn:aws:ecs:us-east-1:123456789012:cluster/ci", "lastStatus": status,
        "desiredStatus": "RUNNING", "launchType": "FARGATE", "tags": tags })
}

/// What one request said, kept for a later answer or assertion.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Value>>>);

impl Seen {
    fn keep(&self, v: &Value) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(v.clone());
    }
    fn all(&self) -> Vec<Value> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[tokio::test]
async fn fargate_spot_refused_runs_on_fargate_under_its_own_client_token() {
    let w = World::new("FARGATE_SPOT");
    w.expect_first_launch();
    let tokens = Seen::default();
    let t = tokens.clone();
    w.aws
        .expect("RunTask")
        .with(move |call| {
            assert_eq!(call.json["capacityProviderStrategy"][0]["capacityProvider"], "FARGATE_SPOT");
            t.keep(&call.json["clientToken"]);
        })
        .answers(
            json!({ "tasks": [], "failures": [{ "reason": "Capacity is unavailable at this time. Please try again later or in a different availability zone" }] })
                .to_string(),
        );
    let t = tokens.clone();
    w.aws
        .expect("RunTask")
        .with(move |call| {
            assert_eq!(call.json["launchType"], "FARGATE", "{}", call.json);
            t.keep(&call.json["clientToken"]);
        })
        .answers_with(started);
    let created = w.cluster.create_agent(w.request(7)).await.expect("started");
    w.aws.done();
    assert_eq!(created, Created::Started(Capacity::Fargate));
    let tokens = tokens.all();
    assert_eq!(tokens[1], json!(format!("{}-od", tokens[0].as_str().unwrap_or_default())), "a token of its own");
    assert!(w.health().contains("FARGATE_SPOT capacity was refused"), "{}", w.health());
    assert!(w.console(7).contains("on FARGATE"), "{}", w.console(7));
}

#[tokio::test(start_paused = true)]
async fn a_throttled_run_task_backs_off_and_tries_again() {
    let w = World::new("FARGATE");
    w.expect_first_launch();
    w.aws.expect("RunTask").fails(400, "ThrottlingException", "Rate exceeded");
    w.aws.expect("RunTask").answers_with(started);
    let created = w.cluster.create_agent(w.request(7)).await.expect("started");
    w.aws.done();
    assert_eq!(created, Created::Started(Capacity::Fargate));
}

#[tokio::test(start_paused = true)]
async fn a_lost_run_task_answer_is_looked_for_then_sent_again_with_the_same_token() {
    let w = World::new("FARGATE");
    w.expect_first_launch();
    let tokens = Seen::default();
    let t = tokens.clone();
    w.aws.expect("RunTask").with(move |call| t.keep(&call.json["clientToken"])).is_lost();
    w.aws
        .expect("ListTasks")
        .with(|call| assert!(call.json["startedBy"].is_string(), "our startedBy: {}", call.json))
        .answers(json!({ "taskArns": [] }).to_string());
    let t = tokens.clone();
    w.aws.expect("RunTask").with(move |call| t.keep(&call.json["clientToken"])).answers_with(started);
    w.cluster.create_agent(w.request(7)).await.expect("started");
    w.aws.done();
    let tokens = tokens.all();
    assert_eq!(tokens[0], tokens[1], "the same token: AWS starts no second task");
}

#[tokio::test]
async fn a_lost_answer_whose_task_started_is_used_not_run_twice() {
    let w = World::new("FARGATE");
    w.expect_first_launch();
    let tags = Seen::default();
    let t = tags.clone();
    w.aws.expect("RunTask").with(move |call| t.keep(&call.json["tags"])).is_lost();
    w.aws.expect("ListTasks").answers(json!({ "taskArns": [TASK] }).to_string());
    let t = tags.clone();
    w.aws
        .expect("DescribeTasks")
        .answers_with(move |_| json!({ "tasks": [task_json(&t.all()[0], "PENDING")], "failures": [] }).to_string());
    let created = w.cluster.create_agent(w.request(7)).await.expect("started");
    w.aws.done();
    assert_eq!(created, Created::Started(Capacity::Fargate));
    assert!(w.console(7).contains(TASK), "{}", w.console(7));
}

#[tokio::test(start_paused = true)]
async fn a_lost_answer_that_cannot_be_looked_for_keeps_the_jobs_slot() {
    let w = World::new("FARGATE");
    w.expect_first_launch();
    w.aws.expect("RunTask").is_lost();
    // The look is a read: the port tries it MAX_ATTEMPTS times, backing off between.
    for _ in 0..crate::aws::calls::MAX_ATTEMPTS {
        w.aws.expect("ListTasks").fails(503, "ServiceUnavailableException", "Service Unavailable");
    }
    let error = w.cluster.create_agent(w.request(7)).await.expect_err("outcome unknown");
    assert!(error.to_string().contains("RunTask"), "{error}");
    // GoCD asks again: the task may exist, so nothing is started twice for the job.
    let again = w.cluster.create_agent(w.request(7)).await.expect("answered");
    w.aws.done();
    assert_eq!(again, Created::Existing);
}

#[tokio::test]
async fn access_denied_is_not_retried_and_the_next_create_agent_launches_again() {
    let w = World::new("FARGATE");
    w.expect_first_launch();
    w.aws.expect("RunTask").fails(
        400,
        "AccessDeniedException",
        "User: arn:aws:sts::123456789012:assumed-role/gocd/x is not authorized to perform: ecs:RunTask",
    );
    let error = w.cluster.create_agent(w.request(7)).await.expect_err("refused");
    assert!(error.to_string().contains("ecs:RunTask"), "{error}");
    assert!(w.console(7).contains("could not start an agent"), "{}", w.console(7));
    assert!(w.cluster.registry().live_for_job(7).is_none(), "the slot is free again");
    w.aws.expect("RunTask").answers_with(started);
    let created = w.cluster.create_agent(w.request(7)).await.expect("started");
    w.aws.done();
    assert_eq!(created, Created::Started(Capacity::Fargate));
}
