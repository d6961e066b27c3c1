//! Engine tests' AWS: a scripted fake answering the SDK's HTTP calls in memory (kube-rs's
//! `ApiServerVerifier` idea, one layer down: the engine runs its real SDK clients, budget and
//! retries against it). It keeps a small ECS — task definitions, tasks with their tags,
//! `startedBy` and overrides — answers the ECS JSON operations the engine calls, records every
//! call in order, and fails a named operation on demand (`fail_next`). EC2 calls are refused:
//! engine tests name their subnets and security groups. It is the port's HTTP-level test
//! double: the engine's GoCD port of the same tests is `cluster::fake_gocd`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_smithy_runtime_api::client::http::{HttpConnector, HttpConnectorFuture};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use serde_json::{json, Value};

use super::in_process::json_error as error;
pub use super::in_process::{clients_over, ACCOUNT, REGION};
use super::status::TaskStatus;
use super::AwsClients;

/// One task the fake keeps.
#[derive(Debug, Clone)]
pub struct FakeTask {
    /// Its ARN.
    pub arn: String,
    /// `startedBy`.
    pub started_by: String,
    /// `RUNNING` or `STOPPED`.
    pub status: TaskStatus,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
    /// The agent container's environment overrides.
    pub environment: BTreeMap<String, String>,
    /// When it was created.
    pub created_at: SystemTime,
    /// StopTask's reason.
    pub stopped_reason: Option<String>,
    /// The capacity provider RunTask named (`capacityProviderName`).
    pub capacity_provider: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    tasks: Vec<FakeTask>,
    families: BTreeMap<String, (u32, Vec<Value>)>,
    /// Task definitions put in by a test (`seed_task_definition`), by the name it describes them by.
    seeded: BTreeMap<String, Value>,
    calls: Vec<String>,
    failures: HashMap<String, VecDeque<(u16, &'static str, String)>>,
    next_task: u64,
    /// The event queue: (message id, body), oldest first; received messages stay until deleted.
    queue: VecDeque<(String, String)>,
    next_message: u64,
    /// Every RunTask's body, in order.
    run_requests: Vec<Value>,
    /// Every RegisterTaskDefinition's body, in order.
    registered: Vec<Value>,
    /// Capacity providers DescribeCapacityProviders knows, by name.
    providers: BTreeMap<String, Value>,
    /// The cluster's default capacity provider strategy (provider names).
    default_strategy: Vec<String>,
}

/// The fake: clone it freely, every clone sees the same state.
#[derive(Debug, Clone, Default)]
pub struct FakeAws {
    state: Arc<Mutex<State>>,
}

impl FakeAws {
    /// SDK clients of one account whose every call this fake answers.
    pub fn clients(&self) -> Arc<AwsClients> {
        clients_over(self.clone())
    }

    /// A capacity provider of `kind` (`EC2_AUTOSCALING`, `MANAGED_INSTANCES`) in the account.
    pub fn add_capacity_provider(&self, name: &str, kind: &str) {
        let mut provider = json!({ "name": name, "status": "ACTIVE", "type": kind,
            "capacityProviderArn": format!("arn:aws:ecs:{REGION}:{ACCOUNT}:capacity-provider/{name}") });
        if kind == "MANAGED_INSTANCES" {
            provider["managedInstancesProvider"] =
                json!({ "infrastructureRoleArn": "arn:aws:iam::123456789012:role/mi" });
        }
        self.lock().providers.insert(name.to_string(), provider);
    }

    /// The cluster's default capacity provider strategy.
    pub fn set_default_strategy(&self, providers: &[&str]) {
        self.lock().default_strategy = providers.iter().map(|p| p.to_string()).collect();
    }

    /// Every RegisterTaskDefinition's body, in order.
    pub fn registered(&self) -> Vec<Value> {
        self.lock().registered.clone()
    }

    /// Every call so far, by operation name, in order.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// How many calls of `operation` were made.
    pub fn count(&self, operation: &str) -> usize {
        self.lock().calls.iter().filter(|c| *c == operation).count()
    }

    /// The tasks, running and stopped.
    pub fn tasks(&self) -> Vec<FakeTask> {
        self.lock().tasks.clone()
    }

    /// The running tasks.
    pub fn running(&self) -> Vec<FakeTask> {
        self.tasks().into_iter().filter(|t| t.status == TaskStatus::Running).collect()
    }

    /// Puts a running task in the cluster, as an earlier process (or another tool) started it.
    pub fn seed_task(&self, started_by: &str, tags: &[(String, String)], created_at: SystemTime) -> String {
        let mut st = self.lock();
        let arn = new_task_arn(&mut st);
        st.tasks.push(FakeTask {
            arn: arn.clone(),
            started_by: started_by.to_string(),
            status: TaskStatus::Running,
            tags: tags.iter().cloned().collect(),
            environment: BTreeMap::new(),
            created_at,
            stopped_reason: None,
            capacity_provider: None,
        });
        arn
    }

    /// Puts a task definition in the account, as a team registered it outside the plugin:
    /// DescribeTaskDefinition of `name` (an ARN, family:revision or family) answers
    /// `definition` (ECS's JSON: `containerDefinitions`, `taskRoleArn`, `executionRoleArn`,
    /// `volumes`), with its ARN, family, revision and status filled in when missing.
    pub fn seed_task_definition(&self, name: &str, mut definition: Value) {
        let family = name.rsplit('/').next().unwrap_or(name).split(':').next().unwrap_or(name).to_string();
        if let Value::Object(map) = &mut definition {
            for (k, v) in td_json(&family, 1).as_object().into_iter().flatten() {
                map.entry(k.clone()).or_insert(v.clone());
            }
        }
        self.lock().seeded.insert(name.to_string(), definition);
    }

    /// Stops a task as ECS would on its own (Spot reclaim, OOM).
    pub fn stop_by_ecs(&self, arn: &str, reason: &str) {
        if let Some(t) = self.lock().tasks.iter_mut().find(|t| t.arn == arn) {
            t.status = TaskStatus::Stopped;
            t.stopped_reason = Some(reason.into());
        }
    }

    /// Puts a message on the fake's one SQS queue (any queue URL reads it), as EventBridge would.
    pub fn send_event(&self, body: &str) {
        let mut st = self.lock();
        st.next_message += 1;
        let id = format!("m-{}", st.next_message);
        st.queue.push_back((id, body.to_string()));
    }

    /// The bodies of every RunTask so far.
    pub fn run_requests(&self) -> Vec<Value> {
        self.lock().run_requests.clone()
    }

    /// Messages on the queue (received or not, until deleted).
    pub fn queued(&self) -> usize {
        self.lock().queue.len()
    }

    /// The next call of `operation` fails with AWS's `code` (HTTP `status`).
    pub fn fail_next(&self, operation: &str, status: u16, code: &'static str, message: &str) {
        self.lock().failures.entry(operation.into()).or_default().push_back((status, code, message.into()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn answer(&self, request: &HttpRequest) -> (u16, Value) {
        let target = request.headers().get("x-amz-target").unwrap_or_default();
        if let Some(operation) = target.strip_prefix("AmazonSQS.") {
            return self.answer_sqs(operation, request);
        }
        let Some(operation) = target.strip_prefix("AmazonEC2ContainerServiceV20141113.") else {
            self.lock().calls.push(format!("non-ECS {}", request.uri()));
            return (400, error("UnsupportedOperation", "engine tests name their subnets and security groups"));
        };
        let body: Value = request.body().bytes().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or(Value::Null);
        let mut st = self.lock();
        st.calls.push(operation.to_string());
        if let Some((status, code, message)) = st.failures.get_mut(operation).and_then(VecDeque::pop_front) {
            return (status, error(code, &message));
        }
        match operation {
            "RunTask" => run_task(&mut st, &body),
            "ListTasks" => list_tasks(&st, &body),
            "DescribeTasks" => describe_tasks(&st, &body),
            "StopTask" => stop_task(&mut st, &body),
            "DescribeTaskDefinition" => describe_task_definition(&st, &body),
            "RegisterTaskDefinition" => register_task_definition(&mut st, &body),
            "ListTaskDefinitionFamilies" => (200, json!({ "families": st.families.keys().collect::<Vec<_>>() })),
            "ListTaskDefinitions" => (200, json!({ "taskDefinitionArns": [] })),
            "DescribeCapacityProviders" => describe_capacity_providers(&st, &body),
            "DescribeClusters" => {
                let strategy: Vec<Value> =
                    st.default_strategy.iter().map(|p| json!({ "capacityProvider": p, "weight": 1 })).collect();
                let cluster = json!({ "clusterName": "ci", "status": "ACTIVE",
                    "clusterArn": format!("arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/ci"),
                    "defaultCapacityProviderStrategy": strategy });
                (200, json!({ "clusters": [cluster], "failures": [] }))
            }
            other => (400, error("InvalidParameterException", &format!("the fake does not answer {other}"))),
        }
    }
}

impl FakeAws {
    /// SQS's JSON protocol: ReceiveMessage (at most 10, at once: the fake never waits) and
    /// DeleteMessageBatch by receipt handle (the message id here).
    fn answer_sqs(&self, operation: &str, request: &HttpRequest) -> (u16, Value) {
        let body: Value = request.body().bytes().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or(Value::Null);
        let mut st = self.lock();
        st.calls.push(format!("sqs:{operation}"));
        if let Some((status, code, message)) = st.failures.get_mut(operation).and_then(VecDeque::pop_front) {
            return (status, error(code, &message));
        }
        match operation {
            "ReceiveMessage" => {
                let max = body["MaxNumberOfMessages"].as_u64().unwrap_or(1) as usize;
                let messages: Vec<Value> = st
                    .queue
                    .iter()
                    .take(max)
                    .map(|(id, body)| json!({ "MessageId": id, "ReceiptHandle": id, "Body": body }))
                    .collect();
                (200, json!({ "Messages": messages }))
            }
            "DeleteMessageBatch" => {
                let mut ok = Vec::new();
                for entry in body["Entries"].as_array().into_iter().flatten() {
                    let handle = entry["ReceiptHandle"].as_str().unwrap_or_default();
                    st.queue.retain(|(id, _)| id != handle);
                    ok.push(json!({ "Id": entry["Id"] }));
                }
                (200, json!({ "Successful": ok, "Failed": [] }))
            }
            other => (400, error("InvalidAction", &format!("the fake does not answer {other}"))),
        }
    }
}

impl HttpConnector for FakeAws {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let (status, body) = self.answer(&request);
        let status = StatusCode::try_from(status).unwrap_or_else(|_| StatusCode::try_from(500).expect("500"));
        let mut response = HttpResponse::new(status, SdkBody::from(body.to_string()));
        response.headers_mut().insert("content-type", "application/x-amz-json-1.1");
        HttpConnectorFuture::ready(Ok(response))
    }
}

fn new_task_arn(st: &mut State) -> String {
    st.next_task += 1;
    format!("arn:aws:ecs:{REGION}:{ACCOUNT}:task/ci/{:032x}", st.next_task)
}

fn str_of<'a>(body: &'a Value, key: &str) -> &'a str {
    body.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn run_task(st: &mut State, body: &Value) -> (u16, Value) {
    st.run_requests.push(body.clone());
    let arn = new_task_arn(st);
    let tags =
        body["tags"].as_array().into_iter().flatten().map(|t| (str_of(t, "key").into(), str_of(t, "value").into()));
    let environment = body["overrides"]["containerOverrides"][0]["environment"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| (str_of(e, "name").into(), str_of(e, "value").into()))
        .collect();
    let task = FakeTask {
        arn,
        started_by: str_of(body, "startedBy").into(),
        status: TaskStatus::Running,
        tags: tags.collect(),
        environment,
        created_at: SystemTime::now(),
        stopped_reason: None,
        capacity_provider: body["capacityProviderStrategy"][0]["capacityProvider"].as_str().map(str::to_string),
    };
    let launch_type = body.get("launchType").and_then(Value::as_str).unwrap_or("FARGATE");
    let answer = json!({ "tasks": [task_json(&task, launch_type)], "failures": [] });
    st.tasks.push(task);
    (200, answer)
}

fn list_tasks(st: &State, body: &Value) -> (u16, Value) {
    let started_by = str_of(body, "startedBy");
    let arns: Vec<&str> = st
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Running && (started_by.is_empty() || t.started_by == started_by))
        .map(|t| t.arn.as_str())
        .collect();
    (200, json!({ "taskArns": arns }))
}

fn describe_tasks(st: &State, body: &Value) -> (u16, Value) {
    let wanted: Vec<&str> = body["tasks"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if wanted.len() > 100 {
        return (400, error("InvalidParameterException", "Tasks cannot be longer than 100"));
    }
    let tasks: Vec<Value> =
        st.tasks.iter().filter(|t| wanted.contains(&t.arn.as_str())).map(|t| task_json(t, "FARGATE")).collect();
    (200, json!({ "tasks": tasks, "failures": [] }))
}

fn stop_task(st: &mut State, body: &Value) -> (u16, Value) {
    let arn = str_of(body, "task");
    let Some(task) = st.tasks.iter_mut().find(|t| t.arn == arn) else {
        return (400, error("InvalidParameterException", "The referenced task was not found."));
    };
    task.status = TaskStatus::Stopped;
    task.stopped_reason = Some(str_of(body, "reason").into());
    (200, json!({ "task": task_json(task, "FARGATE") }))
}

fn describe_task_definition(st: &State, body: &Value) -> (u16, Value) {
    let family = str_of(body, "taskDefinition");
    if let Some(seeded) = st.seeded.get(family) {
        return (200, json!({ "taskDefinition": seeded, "tags": [] }));
    }
    match st.families.get(family) {
        Some((revision, tags)) => (200, json!({ "taskDefinition": td_json(family, *revision), "tags": tags })),
        None => (400, error("ClientException", "Unable to describe task definition.")),
    }
}

fn register_task_definition(st: &mut State, body: &Value) -> (u16, Value) {
    let family = str_of(body, "family").to_string();
    let tags = body["tags"].as_array().cloned().unwrap_or_default();
    st.registered.push(body.clone());
    let entry = st.families.entry(family.clone()).or_insert((0, Vec::new()));
    entry.0 += 1;
    entry.1 = tags.clone();
    (200, json!({ "taskDefinition": td_json(&family, entry.0), "tags": tags }))
}

fn td_json(family: &str, revision: u32) -> Value {
    json!({
        "taskDefinitionArn": format!("arn:aws:ecs:{REGION}:{ACCOUNT}:task-definition/{family}:{revision}"),
        "family": family,
        "revision": revision,
        "status": "ACTIVE",
    })
}

fn task_json(task: &FakeTask, launch_type: &str) -> Value {
    let tags: Vec<Value> = task.tags.iter().map(|(k, v)| json!({ "key": k, "value": v })).collect();
    let created = task.created_at.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs_f64();
    let mut value = json!({
        "taskArn": task.arn,
        "clusterArn": format!("arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/ci"),
        "lastStatus": task.status.as_str(),
        "desiredStatus": task.status.as_str(),
        "launchType": launch_type,
        "startedBy": task.started_by,
        "createdAt": created,
        "tags": tags,
        "containers": [{ "name": "gocd-agent", "lastStatus": task.status.as_str() }],
    });
    if let Some(reason) = &task.stopped_reason {
        value["stoppedReason"] = json!(reason);
    }
    if let Some(provider) = &task.capacity_provider {
        value["capacityProviderName"] = json!(provider);
    }
    value
}

fn describe_capacity_providers(st: &State, body: &Value) -> (u16, Value) {
    let mut found = Vec::new();
    let mut failures = Vec::new();
    for name in body["capacityProviders"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        match st.providers.get(name) {
            Some(p) => found.push(p.clone()),
            None => failures.push(json!({ "arn": name, "reason": "MISSING" })),
        }
    }
    (200, json!({ "capacityProviders": found, "failures": failures }))
}
