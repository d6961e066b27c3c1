//! `EventBridge`: the test world's stand-in for an EventBridge rule whose target is an SQS queue.
//!
//! moto has ECS and SQS but no EventBridge delivery, so this watches the rule's ECS clusters
//! (each through the test's own SDK client for that account) every 100 ms and, whenever a
//! task's `lastStatus` or `desiredStatus` changes — the plugin's RunTask and StopTask, a test
//! stopping one by hand, the world interrupting Spot capacity — sends the "ECS Task State
//! Change" event that AWS documents (ECS developer guide, "Amazon ECS task state change
//! events": the envelope, and `detail` in the shape of DescribeTasks' task, overrides included)
//! to a moto SQS queue, as the rule's target would. Only tasks of the rule's clusters are sent:
//! the rule pattern filters on `clusterArn`.
//!
//! [`EventBridge::interrupt_spot`] plays a Fargate Spot reclaim: the task is stopped with
//! "Your Spot Task was interrupted." and its event carries stop code `SpotInterruption` (moto
//! keeps no stop code of its own).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use aws_sdk_ecs::types::Task;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::agents::Fleet;
use super::moto::{self, aws_error_text, REGION};

const POLL: Duration = Duration::from_millis(100);

/// What the stand-in did.
#[derive(Debug, Default)]
pub struct BridgeState {
    /// Events sent, by task ARN: (lastStatus, desiredStatus, when sent).
    pub sent: BTreeMap<String, Vec<(String, String, Instant)>>,
    /// Last seen (lastStatus, desiredStatus) per task.
    seen: HashMap<String, (String, String)>,
    /// Stop codes the world decided (Spot interruptions), by task ARN.
    stop_codes: HashMap<String, String>,
    pub errors: Vec<String>,
}

impl BridgeState {
    /// Events sent in all.
    pub fn total(&self) -> usize {
        self.sent.values().map(Vec::len).sum()
    }
}

struct Inner {
    fleets: Vec<Fleet>,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    state: Mutex<BridgeState>,
}

/// The rule and its delivery; stops when dropped.
pub struct EventBridge {
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for EventBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBridge").field("queue_url", &self.inner.queue_url).finish()
    }
}

impl Drop for EventBridge {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Creates a standard SQS queue in the account of `cfg` (straight at moto); returns its URL.
pub async fn create_queue(cfg: &SdkConfig, name: &str) -> String {
    let sqs = aws_sdk_sqs::Client::new(cfg);
    let out = sqs
        .create_queue()
        .queue_name(name)
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateQueue {name}: {}", aws_error_text(&e)));
    out.queue_url().expect("a queue URL").to_string()
}

/// Messages on the queue, visible or in flight (SQS's approximate counts; exact in moto).
pub async fn queued(cfg: &SdkConfig, queue_url: &str) -> u64 {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let sqs = aws_sdk_sqs::Client::new(cfg);
    let out = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GetQueueAttributes: {}", aws_error_text(&e)));
    let n = |a: A| out.attributes().and_then(|m| m.get(&a)).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    n(A::ApproximateNumberOfMessages) + n(A::ApproximateNumberOfMessagesNotVisible)
}

impl EventBridge {
    /// A rule on `fleets` (their clusters' task state changes) targeting the queue at
    /// `queue_url`, sent with `queue_cfg` (the queue's account).
    pub async fn start(fleets: Vec<Fleet>, queue_cfg: &SdkConfig, queue_url: &str) -> EventBridge {
        let inner = Arc::new(Inner {
            fleets,
            sqs: aws_sdk_sqs::Client::new(queue_cfg),
            queue_url: queue_url.to_string(),
            state: Mutex::new(BridgeState::default()),
        });
        inner.look(false).await; // tasks that exist already: no events for them
        let i = inner.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(POLL).await;
                i.look(true).await;
            }
        });
        EventBridge { inner, task }
    }

    /// Reads the state.
    pub fn with_state<R>(&self, f: impl FnOnce(&BridgeState) -> R) -> R {
        f(&self.inner.state.lock().unwrap())
    }

    /// Fargate Spot reclaims the task: stopped with AWS's reason, its event with stop code
    /// `SpotInterruption`.
    pub async fn interrupt_spot(&self, fleet: &Fleet, task_arn: &str) {
        self.inner.state.lock().unwrap().stop_codes.insert(task_arn.to_string(), "SpotInterruption".into());
        aws_sdk_ecs::Client::new(&fleet.config)
            .stop_task()
            .cluster(&fleet.cluster)
            .task(task_arn)
            .reason("Your Spot Task was interrupted.")
            .send()
            .await
            .unwrap_or_else(|e| panic!("StopTask {task_arn}: {}", aws_error_text(&e)));
    }
}

impl EventBridge {
    /// EC2 warns that Spot reclaims `instance_id` (of the account `account`) in two minutes:
    /// the "EC2 Spot Instance Interruption Warning" event AWS documents, sent to the queue.
    pub async fn spot_warning(&self, account: &str, instance_id: &str) {
        let now = aws_smithy_types::DateTime::from(std::time::SystemTime::now())
            .fmt(aws_smithy_types::date_time::Format::DateTime)
            .unwrap_or_default();
        let body = json!({
            "version": "0",
            "id": uuid::Uuid::new_v4().to_string(),
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "account": account,
            "time": now,
            "region": REGION,
            "resources": [format!("arn:aws:ec2:{REGION}:{account}:instance/{instance_id}")],
            "detail": { "instance-id": instance_id, "instance-action": "terminate" },
        });
        self.inner
            .sqs
            .send_message()
            .queue_url(&self.inner.queue_url)
            .message_body(body.to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("SendMessage: {}", aws_error_text(&e)));
    }
}

impl Inner {
    async fn look(&self, send: bool) {
        for fleet in &self.fleets {
            let tasks = moto::all_tasks(&fleet.config, &fleet.cluster).await;
            for task in tasks {
                let Some(arn) = task.task_arn().map(str::to_string) else { continue };
                let now = (
                    task.last_status().unwrap_or_default().to_string(),
                    task.desired_status().unwrap_or_default().to_string(),
                );
                let changed = {
                    let mut st = self.state.lock().unwrap();
                    st.seen.insert(arn.clone(), now.clone()).as_ref() != Some(&now)
                };
                if changed && send {
                    self.send(&task, &now).await;
                }
            }
        }
    }

    async fn send(&self, task: &Task, status: &(String, String)) {
        let arn = task.task_arn().unwrap_or_default().to_string();
        let stop_code = self.state.lock().unwrap().stop_codes.get(&arn).cloned();
        let body = event_json(task, stop_code.as_deref()).to_string();
        match self.sqs.send_message().queue_url(&self.queue_url).message_body(body).send().await {
            Ok(_) => {
                let sent = (status.0.clone(), status.1.clone(), Instant::now());
                self.state.lock().unwrap().sent.entry(arn).or_default().push(sent);
            }
            Err(e) => self.state.lock().unwrap().errors.push(format!("SendMessage: {}", aws_error_text(&e))),
        }
    }
}

/// The "ECS Task State Change" event of a task, as EventBridge delivers it.
pub fn event_json(task: &Task, stop_code: Option<&str>) -> Value {
    let time = |t: Option<&aws_smithy_types::DateTime>| {
        t.and_then(|t| t.fmt(aws_smithy_types::date_time::Format::DateTime).ok())
    };
    let arn = task.task_arn().unwrap_or_default();
    let account = arn.split(':').nth(4).unwrap_or_default();
    let containers: Vec<Value> = task
        .containers()
        .iter()
        .map(|c| {
            json!({
                "containerArn": c.container_arn(),
                "lastStatus": c.last_status(),
                "name": c.name(),
                "image": c.image(),
                "taskArn": arn,
                "exitCode": c.exit_code(),
                "reason": c.reason(),
            })
        })
        .collect();
    // AWS sends the overrides too, auto-register keys and all: the plugin must never echo them.
    let overrides: Vec<Value> = task
        .overrides()
        .map(|o| o.container_overrides())
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let environment: Vec<Value> =
                c.environment().iter().map(|kv| json!({ "name": kv.name(), "value": kv.value() })).collect();
            json!({ "name": c.name(), "environment": environment })
        })
        .collect();
    let launch_type = task.launch_type().map(|l| l.as_str().to_string()).filter(|l| !l.is_empty());
    let detail = json!({
        "clusterArn": task.cluster_arn(),
        "containerInstanceArn": task.container_instance_arn(),
        "containers": containers,
        "createdAt": time(task.created_at()),
        "desiredStatus": task.desired_status(),
        "group": task.group(),
        "lastStatus": task.last_status(),
        "overrides": { "containerOverrides": overrides },
        // moto answers "" for a FARGATE_SPOT task's launch type; AWS says FARGATE.
        "launchType": launch_type.or_else(|| task.capacity_provider_name().map(|_| "FARGATE".to_string())),
        "capacityProviderName": task.capacity_provider_name(),
        "startedAt": time(task.started_at()),
        "startedBy": task.started_by(),
        "stoppedAt": time(task.stopped_at()),
        "stoppedReason": task.stopped_reason(),
        "stopCode": stop_code.map(str::to_string).or_else(|| task.stop_code().map(|c| c.as_str().to_string())),
        "taskArn": arn,
        "taskDefinitionArn": task.task_definition_arn(),
        "availabilityZone": task.availability_zone(),
        "cpu": task.cpu(),
        "memory": task.memory(),
        "version": task.version(),
    });
    json!({
        "version": "0",
        "id": uuid::Uuid::new_v4().to_string(),
        "detail-type": "ECS Task State Change",
        "source": "aws.ecs",
        "account": account,
        "time": aws_smithy_types::DateTime::from(std::time::SystemTime::now())
            .fmt(aws_smithy_types::date_time::Format::DateTime)
            .unwrap_or_default(),
        "region": REGION,
        "resources": [arn],
        "detail": detail,
    })
}
