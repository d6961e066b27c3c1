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
//! [`EventBridge::start_with`] delivers as EventBridge may on a bad day ([`Delivery`], the soak):
//! every event twice, each copy after its own random delay (so out of order), some messages on
//! the queue that are not task events or not JSON at all, and only live tasks watched (a soak's
//! thousands of stopped tasks are not described again every 100 ms).
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
    /// Messages sent that are copies of an event already sent ([`Delivery::twice`]).
    pub copies: u64,
    /// Events sent after a later event of the same task had been sent.
    pub out_of_order: u64,
    /// Poison messages sent, by kind (`not-json`, `not-a-task-event`, `not-an-event`).
    pub poison: BTreeMap<&'static str, u64>,
    /// Highest status sequence sent per task (for `out_of_order`).
    sent_seq: HashMap<String, u64>,
    /// Next status sequence per task.
    next_seq: HashMap<String, u64>,
}

/// How the rule delivers (the default: each event once, at once).
#[derive(Debug, Clone, Default)]
pub struct Delivery {
    /// Every event is sent twice.
    pub twice: bool,
    /// Each message waits a random time up to this before it is sent.
    pub max_delay: Duration,
    /// Share of the queue's messages that are poison (not task events, or not JSON).
    pub poison_share: f64,
    /// Seed of the delays and poison draws.
    pub seed: u64,
    /// Watch only live tasks (listed RUNNING, or live when last seen), not every stopped one.
    pub live_only: bool,
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
    delivery: Delivery,
    rng: Mutex<u64>,
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
        EventBridge::start_with(fleets, queue_cfg, queue_url, Delivery::default()).await
    }

    /// [`EventBridge::start`] delivering as `delivery` says.
    pub async fn start_with(
        fleets: Vec<Fleet>,
        queue_cfg: &SdkConfig,
        queue_url: &str,
        delivery: Delivery,
    ) -> EventBridge {
        let inner = Arc::new(Inner {
            fleets,
            sqs: aws_sdk_sqs::Client::new(queue_cfg),
            queue_url: queue_url.to_string(),
            state: Mutex::new(BridgeState::default()),
            rng: Mutex::new(delivery.seed),
            delivery,
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
    async fn look(self: &Arc<Self>, send: bool) {
        for fleet in &self.fleets {
            let tasks = if self.delivery.live_only {
                self.live_and_just_stopped(fleet).await
            } else {
                moto::all_tasks(&fleet.config, &fleet.cluster).await
            };
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
                    self.deliver(&task, &now).await;
                }
            }
        }
    }

    /// The fleet's tasks listed RUNNING, and those that were live when last seen (to see them stop).
    async fn live_and_just_stopped(&self, fleet: &Fleet) -> Vec<Task> {
        let ecs = aws_sdk_ecs::Client::new(&fleet.config);
        let Ok(list) = ecs.list_tasks().cluster(&fleet.cluster).send().await else { return Vec::new() };
        let mut arns: Vec<String> = list.task_arns().to_vec();
        let was_live: Vec<String> = {
            let st = self.state.lock().unwrap();
            st.seen.iter().filter(|(_, (last, _))| last != "STOPPED").map(|(a, _)| a.clone()).collect()
        };
        for arn in was_live {
            if !arns.contains(&arn) {
                arns.push(arn);
            }
        }
        let mut tasks = Vec::new();
        for chunk in arns.chunks(100) {
            if let Ok(out) = ecs
                .describe_tasks()
                .cluster(&fleet.cluster)
                .set_tasks(Some(chunk.to_vec()))
                .include(aws_sdk_ecs::types::TaskField::Tags)
                .send()
                .await
            {
                tasks.extend(
                    out.tasks()
                        .iter()
                        .filter(|t| t.cluster_arn().is_some_and(|c| c.ends_with(&format!("/{}", fleet.cluster))))
                        .cloned(),
                );
            }
        }
        tasks
    }

    /// Sends the event of a task's change as the delivery says: once or twice, at once or later.
    async fn deliver(self: &Arc<Self>, task: &Task, status: &(String, String)) {
        let arn = task.task_arn().unwrap_or_default().to_string();
        let (stop_code, seq) = {
            let mut st = self.state.lock().unwrap();
            let seq = st.next_seq.entry(arn.clone()).or_insert(0);
            *seq += 1;
            let seq = *seq;
            (st.stop_codes.get(&arn).cloned(), seq)
        };
        let body = event_json(task, stop_code.as_deref()).to_string();
        let d = &self.delivery;
        if !d.twice && d.max_delay.is_zero() && d.poison_share <= 0.0 {
            self.send(&arn, status, seq, body, false).await;
            return;
        }
        let copies = if d.twice { 2 } else { 1 };
        for copy in 0..copies {
            let delay = d.max_delay.mul_f64(self.draw());
            let (me, arn, status, body) = (self.clone(), arn.clone(), status.clone(), body.clone());
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                me.send(&arn, &status, seq, body, copy > 0).await;
            });
        }
        // Poison at `poison_share` of all messages: p / (1 - p) per message sent.
        let share = d.poison_share.clamp(0.0, 0.5);
        for _ in 0..copies {
            if self.draw() < share / (1.0 - share) {
                self.poison().await;
            }
        }
    }

    async fn send(&self, arn: &str, status: &(String, String), seq: u64, body: String, copy: bool) {
        match self.sqs.send_message().queue_url(&self.queue_url).message_body(body).send().await {
            Ok(_) => {
                let sent = (status.0.clone(), status.1.clone(), Instant::now());
                let mut st = self.state.lock().unwrap();
                st.sent.entry(arn.to_string()).or_default().push(sent);
                st.copies += u64::from(copy);
                let highest = st.sent_seq.entry(arn.to_string()).or_insert(0);
                if *highest > seq {
                    st.out_of_order += 1;
                } else {
                    *highest = seq;
                }
            }
            Err(e) => self.state.lock().unwrap().errors.push(format!("SendMessage: {}", aws_error_text(&e))),
        }
    }

    /// A message that is not a task state change: not JSON, another event, or JSON that is no event.
    async fn poison(&self) {
        let pick = (self.draw() * 3.0) as usize;
        let (kind, body) = match pick {
            0 => ("not-json", "{\"detail-type\": \"ECS Task State Change\", \"detail\": {\"taskArn\": ".to_string()),
            1 => (
                "not-a-task-event",
                json!({"version": "0", "id": uuid::Uuid::new_v4().to_string(),
                    "detail-type": "ECS Container Instance State Change", "source": "aws.ecs",
                    "region": REGION, "resources": [], "detail": {"status": "ACTIVE"}})
                .to_string(),
            ),
            _ => ("not-an-event", json!([1, "two", {"three": null}]).to_string()),
        };
        match self.sqs.send_message().queue_url(&self.queue_url).message_body(body).send().await {
            Ok(_) => *self.state.lock().unwrap().poison.entry(kind).or_insert(0) += 1,
            Err(e) => self.state.lock().unwrap().errors.push(format!("SendMessage: {}", aws_error_text(&e))),
        }
    }

    /// A draw in [0, 1).
    fn draw(&self) -> f64 {
        let mut rng = self.rng.lock().unwrap();
        *rng = super::proxy::faults::splitmix64(*rng);
        (*rng >> 11) as f64 / (1u64 << 53) as f64
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
