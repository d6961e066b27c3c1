//! An HTTP/1.1 proxy on loopback between the plugin and moto, with rules that can answer, delay or
//! drop a call instead of forwarding it, and a log of every AWS call by service and operation.
//!
//! The plugin is pointed at the proxy (`AWS_ENDPOINT_URL=proxy.endpoint()`), so the log is the
//! ground truth of what the plugin asked AWS, independent of its own counters. The operation of a
//! call comes from `X-Amz-Target` (ECS and other JSON protocols) or the `Action` form field (EC2
//! and STS query protocols); the service from the SigV4 credential scope.
//!
//! Rules are plain closures `Fn(&Call) -> Verdict`, evaluated in the order added; the first verdict
//! other than [`Verdict::Forward`] wins ([`Verdict::Delay`] sleeps and keeps evaluating). Ready-made
//! rules live in [`rules`]; a fault proxy (throttling, 5xx, dropped connections at set rates) is
//! just more rules. Rewrites (`Fn(&Call, &mut HttpResponse)`, [`Proxy::add_rewrite`]) change the
//! answers of forwarded calls into what AWS would add to moto's (a task start's times:
//! [`super::starts`]).
//!
//! Before the test's own rules, every call meets AWS's own rules ([`super::aws_rules`], installed by
//! [`Proxy::start`]): a call that breaks one is answered with AWS's error and never reaches moto;
//! a test may switch one off with [`Proxy::relax`], with a reason.
//!
//! Side records kept for the tests: credentials returned by STS AssumeRole (for the secret scan,
//! and to tell which account a call acted in), and the ECS tasks started (RunTask answers) minus
//! those stopped (StopTask calls) through the proxy, with the high-water mark of that number.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::aws_rules::{self, AwsRules, Emulated, Refusal};
use super::http::{self, HttpRequest, HttpResponse};
use super::moto::StaticCredentials;

/// One AWS call as the proxy sees it.
#[derive(Debug, Clone)]
pub struct Call {
    pub request: HttpRequest,
    /// `ecs`, `ec2`, `sts`, ... (SigV4 scope), or `?`.
    pub service: String,
    /// `RunTask`, `AssumeRole`, ... or `?`.
    pub operation: String,
    /// The access key id that signed the call.
    pub access_key_id: Option<String>,
    /// The account the call acts in: the role's, when its key came from an AssumeRole seen by the
    /// proxy, else moto's base account `123456789012`.
    pub account: String,
    /// The region of the SigV4 scope (`us-east-1` when unsigned).
    pub region: String,
    /// Form fields of a query-protocol call (EC2, STS); empty otherwise.
    pub form: Vec<(String, String)>,
    /// When the whole request had reached the proxy.
    pub received: Instant,
}

impl Call {
    fn new(request: HttpRequest) -> Self {
        let auth = request.header("authorization").unwrap_or("").to_string();
        let scope: Vec<&str> = auth
            .split("Credential=")
            .nth(1)
            .map(|c| c.split([',', ' ']).next().unwrap_or("").split('/').collect())
            .unwrap_or_default();
        let access_key_id = scope.first().filter(|s| !s.is_empty()).map(|s| s.to_string());
        let region = scope.get(2).filter(|s| !s.is_empty()).map_or("us-east-1", |s| s).to_string();
        let is_form =
            request.header("content-type").is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"));
        let form = if is_form { http::form_decode(&request.body) } else { Vec::new() };
        let target_op = request.header("x-amz-target").and_then(|t| t.rsplit('.').next()).map(str::to_string);
        let form_op = form.iter().find(|(k, _)| k == "Action").map(|(_, v)| v.clone());
        let operation = target_op.or(form_op).unwrap_or_else(|| "?".into());
        let mut service = scope.get(3).map(|s| s.to_string()).unwrap_or_else(|| "?".into());
        if service == "?" {
            if let Some(t) = request.header("x-amz-target") {
                if t.starts_with("AmazonEC2ContainerService") {
                    service = "ecs".into();
                }
            }
        }
        let account = aws_rules::DEFAULT_ACCOUNT.to_string();
        Call { request, service, operation, access_key_id, account, region, form, received: Instant::now() }
    }

    /// `service:Operation`, the key of the counters (`ecs:RunTask`, `sts:AssumeRole`).
    pub fn key(&self) -> String {
        format!("{}:{}", self.service, self.operation)
    }

    /// Whether this is that operation of that service.
    pub fn is(&self, service: &str, operation: &str) -> bool {
        self.service == service && self.operation == operation
    }

    /// The JSON body of a JSON-protocol call.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.request.body).ok()
    }

    /// A form field of a query-protocol call.
    pub fn form_param(&self, name: &str) -> Option<&str> {
        self.form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// What a rule decides for a call.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Not this rule's business: keep evaluating, then forward to moto.
    Forward,
    /// Answer this instead of forwarding.
    Respond(HttpResponse),
    /// Close the client connection without an answer.
    Drop,
    /// Wait, then keep evaluating.
    Delay(Duration),
    /// Forward to moto (the call takes effect), then close the client connection without its
    /// answer: the answer is lost on the way back.
    DropAnswer,
    /// Forward to moto, then hold its answer this long before passing it back (while held,
    /// [`Proxy::answers_held`] counts it).
    DelayAnswer(Duration),
}

impl Verdict {
    /// An ECS (awsJson1_1) error such as `{"__type":"ThrottlingException","message":"Rate exceeded"}`.
    pub fn ecs_error(status: u16, error_type: &str, message: &str) -> Verdict {
        Verdict::Respond(HttpResponse::aws_json_error(status, error_type, message))
    }

    /// An STS (awsQuery) error, e.g. `AccessDenied` with 403 or `Throttling` with 400.
    pub fn sts_error(status: u16, code: &str, message: &str) -> Verdict {
        let body = format!(
            "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type><Code>{code}</Code><Message>{}</Message></Error><RequestId>{}</RequestId></ErrorResponse>",
            xml_escape(message),
            uuid::Uuid::new_v4()
        );
        Verdict::Respond(HttpResponse::xml(status, &body))
    }

    /// An EC2 (ec2Query) error, e.g. `RequestLimitExceeded` with 503.
    pub fn ec2_error(status: u16, code: &str, message: &str) -> Verdict {
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error><Code>{code}</Code><Message>{}</Message></Error></Errors><RequestID>{}</RequestID></Response>",
            xml_escape(message),
            uuid::Uuid::new_v4()
        );
        Verdict::Respond(HttpResponse::xml(status, &body))
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A rule: decides per call.
pub type Rule = Arc<dyn Fn(&Call) -> Verdict + Send + Sync>;

/// A rewrite: changes moto's answer to a forwarded call (after AWS's own rules made it AWS's)
/// into what AWS adds to it, such as the times of a task's start ([`super::starts`]).
pub type Rewrite = Arc<dyn Fn(&Call, &mut HttpResponse) + Send + Sync>;

/// How a call ended at the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Forwarded to moto and its answer passed back.
    Forwarded,
    /// Answered by a rule.
    Answered,
    /// Connection dropped by a rule.
    Dropped,
    /// Forwarded to moto, then the connection was dropped instead of answering (answer lost).
    DroppedAfterForward,
    /// moto could not be reached or answered garbage (502 to the client).
    UpstreamFailed,
}

/// One entry of the call log.
#[derive(Debug, Clone)]
pub struct CallRecord {
    /// When the call was answered (or dropped).
    pub at: Instant,
    /// When the request reached the proxy.
    pub received: Instant,
    pub service: String,
    pub operation: String,
    pub access_key_id: Option<String>,
    /// The account the call acted in, when its key came from an AssumeRole seen by the proxy.
    pub assumed_account: Option<String>,
    pub status: u16,
    pub outcome: Outcome,
    /// The rule that answered or dropped it.
    pub rule: Option<String>,
    /// For `sts:AssumeRole`: the `RoleArn` and `ExternalId` asked for.
    pub role_arn: Option<String>,
    pub external_id: Option<String>,
    /// The JSON body of a JSON-protocol call (ECS), as sent.
    pub json: Option<Value>,
}

impl CallRecord {
    /// `service:Operation`.
    pub fn key(&self) -> String {
        format!("{}:{}", self.service, self.operation)
    }
}

/// Credentials an AssumeRole answer carried through the proxy.
#[derive(Debug, Clone)]
pub struct CapturedCredentials {
    pub credentials: StaticCredentials,
    /// The account of the assumed role.
    pub account: String,
    pub role_arn: String,
}

#[derive(Default)]
struct EcsLive {
    live: HashSet<String>,
    high_water: usize,
    started: u64,
}

#[derive(Default)]
struct Shared {
    rules: RwLock<Vec<(String, Rule)>>,
    rewrites: RwLock<Vec<(String, Rewrite)>>,
    log: Mutex<Vec<CallRecord>>,
    captured: Mutex<Vec<CapturedCredentials>>,
    key_accounts: Mutex<HashMap<String, String>>,
    ecs: Mutex<EcsLive>,
    held: std::sync::atomic::AtomicUsize,
    aws: AwsRules,
}

/// The proxy; stops accepting when dropped.
pub struct Proxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy").field("addr", &self.addr).field("upstream", &self.upstream).finish()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl Proxy {
    /// Starts a proxy on a free loopback port forwarding to `upstream` (moto), with every one of
    /// AWS's rules on ([`super::aws_rules`]; `WORLD_AWS_RULES=off` switches them all off, to tell
    /// whether a failure comes from them).
    pub async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let shared = Arc::new(Shared::default());
        if std::env::var("WORLD_AWS_RULES").is_ok_and(|v| v == "off") {
            shared.aws.relax_all("WORLD_AWS_RULES=off (a diagnosis: never in a committed test)");
        }
        let s = shared.clone();
        let accept = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let s = s.clone();
                conns.spawn(serve_connection(stream, upstream, s));
                while conns.try_join_next().is_some() {}
            }
        });
        Proxy { addr, upstream, shared, accept }
    }

    /// `http://127.0.0.1:PORT`: what the plugin's `AWS_ENDPOINT_URL` should be.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Adds a rule (evaluated after those added before it).
    pub fn add_rule(&self, name: &str, rule: impl Fn(&Call) -> Verdict + Send + Sync + 'static) {
        self.shared.rules.write().unwrap().push((name.to_string(), Arc::new(rule)));
    }

    /// Removes every rule of that name.
    pub fn remove_rule(&self, name: &str) {
        self.shared.rules.write().unwrap().retain(|(n, _)| n != name);
    }

    /// Adds a rewrite of the answers to forwarded calls (applied in the order added, after the
    /// side records are taken from moto's answer).
    pub fn add_rewrite(&self, name: &str, rewrite: impl Fn(&Call, &mut HttpResponse) + Send + Sync + 'static) {
        self.shared.rewrites.write().unwrap().push((name.to_string(), Arc::new(rewrite)));
    }

    /// Switches one of AWS's rules off (named as in [`super::aws_rules`], e.g.
    /// `"ecs.run_task.fargate_rate"`), only to prove the plugin copes when AWS itself is
    /// inconsistent; the reason goes to stderr.
    ///
    /// # Panics
    /// When no rule has that name.
    pub fn relax(&self, rule: &str, reason: &str) {
        self.shared.aws.relax(rule, reason);
    }

    /// Switches every one of AWS's rules off (the proxy as it was before them), saying why.
    pub fn relax_all_aws_rules(&self, reason: &str) {
        self.shared.aws.relax_all(reason);
    }

    /// Names `provider` an ECS Managed Instances capacity provider: DescribeCapacityProviders
    /// answers it as AWS would (moto knows no such providers); see `aws_rules/capacity.rs`.
    pub fn managed_instances_provider(&self, provider: &str) {
        self.shared.aws.managed_instances_provider(provider);
    }

    /// Makes every later AssumeRole session last `lifetime` instead of moto's hour, and refuses
    /// calls signed by it after that (`ExpiredTokenException`); see `aws_rules/sessions.rs`.
    pub fn shorten_sessions(&self, lifetime: Duration) {
        self.shared.aws.shorten_sessions(lifetime);
    }

    /// Has ECS forget stopped tasks `kept` after they stop instead of after an hour: DescribeTasks
    /// answers them `MISSING`, ListTasks lists them no more; see `aws_rules/stopped_tasks.rs`.
    pub fn forget_stopped_tasks_after(&self, kept: Duration) {
        self.shared.aws.forget_stopped_tasks_after(kept);
    }

    /// Every call AWS's rules refused so far (rule, operation, AWS's error).
    pub fn aws_refusals(&self) -> Vec<Refusal> {
        self.shared.aws.refusals()
    }

    /// A copy of the whole call log.
    pub fn log(&self) -> Vec<CallRecord> {
        self.shared.log.lock().unwrap().clone()
    }

    /// A mark in the log: counts since it come from [`Proxy::counts_since`].
    pub fn mark(&self) -> usize {
        self.shared.log.lock().unwrap().len()
    }

    /// Calls per `service:Operation` since a mark.
    pub fn counts_since(&self, mark: usize) -> BTreeMap<String, u64> {
        let log = self.shared.log.lock().unwrap();
        let mut counts = BTreeMap::new();
        for r in log.iter().skip(mark) {
            *counts.entry(r.key()).or_insert(0) += 1;
        }
        counts
    }

    /// Calls per `service:Operation` since the start.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.counts_since(0)
    }

    /// How many calls of `service:Operation` (e.g. `"ecs:RunTask"`) the proxy saw.
    pub fn count(&self, key: &str) -> u64 {
        self.shared.log.lock().unwrap().iter().filter(|r| r.key() == key).count() as u64
    }

    /// The JSON bodies of every call of that service and operation (ECS), in order.
    pub fn requests(&self, service: &str, operation: &str) -> Vec<Value> {
        self.shared
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.service == service && r.operation == operation)
            .filter_map(|r| r.json.clone())
            .collect()
    }

    /// Reads the JSON bodies of one operation's calls, like [`Proxy::requests`], from a world
    /// task that outlives a borrow of the proxy.
    pub fn requests_reader(
        &self,
        service: &'static str,
        operation: &'static str,
    ) -> impl Fn() -> Vec<Value> + Send + Sync + 'static {
        let shared = self.shared.clone();
        move || {
            let log = shared.log.lock().unwrap();
            log.iter()
                .filter(|r| r.service == service && r.operation == operation)
                .filter_map(|r| r.json.clone())
                .collect()
        }
    }

    /// The address the proxy forwards to (moto).
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// How many calls the proxy saw in all.
    pub fn total(&self) -> u64 {
        self.shared.log.lock().unwrap().len() as u64
    }

    /// Credentials returned by every AssumeRole that went through the proxy.
    pub fn captured_credentials(&self) -> Vec<CapturedCredentials> {
        self.shared.captured.lock().unwrap().clone()
    }

    /// Tasks started through the proxy and not stopped through it (RunTask answers minus StopTask calls).
    pub fn ecs_live_now(&self) -> usize {
        self.shared.ecs.lock().unwrap().live.len()
    }

    /// The highest [`Proxy::ecs_live_now`] ever reached.
    pub fn ecs_live_high_water(&self) -> usize {
        self.shared.ecs.lock().unwrap().high_water
    }

    /// How many tasks RunTask answers carried.
    pub fn ecs_tasks_started(&self) -> u64 {
        self.shared.ecs.lock().unwrap().started
    }

    /// Answers forwarded by moto and held right now by a [`Verdict::DelayAnswer`].
    pub fn answers_held(&self) -> usize {
        self.shared.held.load(std::sync::atomic::Ordering::SeqCst)
    }
}

async fn serve_connection(stream: TcpStream, upstream: SocketAddr, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    loop {
        let request = match http::read_request(&mut rd).await {
            Ok(Some(r)) => r,
            _ => return,
        };
        let close = request.wants_close();
        let mut call = Call::new(request);
        if let Some(account) =
            call.access_key_id.as_ref().and_then(|k| shared.key_accounts.lock().unwrap().get(k).cloned())
        {
            call.account = account;
        }
        let mut verdict = Verdict::Forward;
        let mut rule_name = None;
        if let Some((name, v)) = shared.aws.check(&call, upstream).await {
            verdict = v;
            rule_name = Some(format!("aws-rules:{name}"));
        } else {
            let rules: Vec<(String, Rule)> = shared.rules.read().unwrap().clone();
            for (name, rule) in rules {
                match rule(&call) {
                    Verdict::Forward => {}
                    Verdict::Delay(d) => tokio::time::sleep(d).await,
                    v => {
                        verdict = v;
                        rule_name = Some(name);
                        break;
                    }
                }
            }
        }
        let mut replayed = false;
        let after = match &verdict {
            Verdict::DropAnswer => Some(Verdict::DropAnswer),
            Verdict::DelayAnswer(d) => Some(Verdict::DelayAnswer(*d)),
            _ => None,
        };
        let (mut response, outcome) = match verdict {
            Verdict::Drop => {
                record(&shared, &call, 0, Outcome::Dropped, rule_name);
                return;
            }
            Verdict::Respond(r) => (r, Outcome::Answered),
            Verdict::Forward | Verdict::Delay(_) | Verdict::DropAnswer | Verdict::DelayAnswer(_) => {
                let sent = match shared.aws.forward(&call, upstream).await {
                    None => http::send(upstream, &call.request).await,
                    Some(Emulated::Answer(answer)) => answer,
                    Some(Emulated::Replay(answer)) => {
                        // AWS's answer to a repeated client token: forwarded as far as the client
                        // can tell, but nothing new happened (no side records).
                        replayed = true;
                        Ok(answer)
                    }
                };
                match sent {
                    Ok(r) => (r, Outcome::Forwarded),
                    Err(e) => (HttpResponse::upstream_failed(&e), Outcome::UpstreamFailed),
                }
            }
        };
        if outcome == Outcome::Forwarded {
            if !replayed {
                observe(&shared, &call, &response);
            }
            let rewrites: Vec<(String, Rewrite)> = shared.rewrites.read().unwrap().clone();
            for (_, rewrite) in rewrites {
                rewrite(&call, &mut response);
            }
            match after {
                Some(Verdict::DropAnswer) => {
                    record(&shared, &call, response.status, Outcome::DroppedAfterForward, rule_name);
                    return;
                }
                Some(Verdict::DelayAnswer(d)) => {
                    shared.held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    tokio::time::sleep(d).await;
                    shared.held.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                }
                _ => {}
            }
        }
        record(&shared, &call, response.status, outcome, rule_name);
        if http::write_response(&mut wr, &response, close).await.is_err() || close {
            return;
        }
    }
}

fn record(shared: &Shared, call: &Call, status: u16, outcome: Outcome, rule: Option<String>) {
    let assumed_account = call.access_key_id.as_ref().and_then(|k| shared.key_accounts.lock().unwrap().get(k).cloned());
    let is_assume = call.is("sts", "AssumeRole");
    let entry = CallRecord {
        at: Instant::now(),
        received: call.received,
        service: call.service.clone(),
        operation: call.operation.clone(),
        access_key_id: call.access_key_id.clone(),
        assumed_account,
        status,
        outcome,
        rule,
        role_arn: is_assume.then(|| call.form_param("RoleArn").map(str::to_string)).flatten(),
        external_id: is_assume.then(|| call.form_param("ExternalId").map(str::to_string)).flatten(),
        json: (call.service == "ecs").then(|| call.json()).flatten(),
    };
    shared.log.lock().unwrap().push(entry);
}

/// The value of an environment variable in a launch's container overrides (RunTask, StartTask),
/// in its JSON body as [`Proxy::requests`] gives it; [`super::moto::task_override_env`] reads the
/// same from a task.
pub fn request_override_env<'a>(body: &'a Value, name: &str) -> Option<&'a str> {
    let containers = body["overrides"]["containerOverrides"].as_array()?;
    let mut env = containers.iter().filter_map(|c| c["environment"].as_array()).flatten();
    env.find(|e| e["name"] == name).and_then(|e| e["value"].as_str())
}

pub(super) fn xml_field<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&close)? + start;
    Some(&xml[start..end])
}

pub(super) fn task_id(arn_or_id: &str) -> String {
    arn_or_id.rsplit('/').next().unwrap_or(arn_or_id).to_string()
}

/// Side records from forwarded answers: AssumeRole credentials, ECS tasks started and stopped.
fn observe(shared: &Shared, call: &Call, response: &HttpResponse) {
    if response.status != 200 {
        return;
    }
    shared.aws.observe(call, response);
    if call.is("sts", "AssumeRole") {
        let text = response.text();
        let (Some(ak), Some(sk), Some(token)) =
            (xml_field(&text, "AccessKeyId"), xml_field(&text, "SecretAccessKey"), xml_field(&text, "SessionToken"))
        else {
            return;
        };
        let role_arn = call.form_param("RoleArn").unwrap_or("").to_string();
        let account = xml_field(&text, "Arn")
            .and_then(|a| a.split(':').nth(4))
            .map(str::to_string)
            .unwrap_or_else(|| role_arn.split(':').nth(4).unwrap_or("").to_string());
        shared.key_accounts.lock().unwrap().insert(ak.to_string(), account.clone());
        shared.captured.lock().unwrap().push(CapturedCredentials {
            credentials: StaticCredentials {
                access_key_id: ak.to_string(),
                secret_access_key: sk.to_string(),
                session_token: Some(token.to_string()),
            },
            account,
            role_arn,
        });
    } else if call.is("ecs", "RunTask") {
        let Ok(v) = serde_json::from_slice::<Value>(&response.body) else {
            return;
        };
        let mut ecs = shared.ecs.lock().unwrap();
        for t in v["tasks"].as_array().into_iter().flatten() {
            if let Some(arn) = t["taskArn"].as_str() {
                ecs.started += 1;
                ecs.live.insert(task_id(arn));
            }
        }
        ecs.high_water = ecs.high_water.max(ecs.live.len());
    } else if call.is("ecs", "StopTask") {
        if let Some(task) = call.json().and_then(|v| v["task"].as_str().map(task_id)) {
            shared.ecs.lock().unwrap().live.remove(&task);
        }
    }
}

/// Ready-made rules.
pub mod rules {
    use super::{Call, HttpResponse, Verdict};
    use serde_json::json;

    /// The reason AWS gives when Fargate Spot has no capacity.
    pub const SPOT_CAPACITY_REASON: &str =
        "Capacity is unavailable at this time. Please try again later or in a different availability zone";

    /// Whether a RunTask asks for FARGATE_SPOT in its capacity provider strategy.
    pub fn asks_fargate_spot(call: &Call) -> bool {
        call.is("ecs", "RunTask")
            && call.json().is_some_and(|v| {
                v["capacityProviderStrategy"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|i| i["capacityProvider"] == "FARGATE_SPOT"))
            })
    }

    /// Answers DescribeSpotPriceHistory as EC2 does, with `price` (USD an hour, as EC2 writes
    /// it) for the type and zone asked (moto's is a fixed 0.00001).
    pub fn spot_price_history(price: &'static str) -> impl Fn(&Call) -> Verdict + Send + Sync + 'static {
        move |call: &Call| {
            if !call.is("ec2", "DescribeSpotPriceHistory") {
                return Verdict::Forward;
            }
            let zone = call.form_param("AvailabilityZone").unwrap_or_default();
            let instance_type = call.form_param("InstanceType.1").unwrap_or_default();
            let item = format!(
                "<item><instanceType>{instance_type}</instanceType><productDescription>Linux/UNIX</productDescription><spotPrice>{price}</spotPrice><timestamp>2026-12-06T01:00:00.000Z</timestamp><availabilityZone>{zone}</availabilityZone></item>"
            );
            let body = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><DescribeSpotPriceHistoryResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>5b1d7f0e-0000-4000-8000-000000000001</requestId><spotPriceHistorySet>{item}</spotPriceHistorySet><nextToken/></DescribeSpotPriceHistoryResponse>"
            );
            Verdict::Respond(HttpResponse::xml(200, &body))
        }
    }

    /// Answers every RunTask that asks for FARGATE_SPOT with AWS's capacity failure (HTTP 200,
    /// no task), without forwarding it.
    pub fn fargate_spot_capacity_refused() -> impl Fn(&Call) -> Verdict + Send + Sync + 'static {
        |call: &Call| {
            if asks_fargate_spot(call) {
                let body = json!({"tasks": [], "failures": [{"reason": SPOT_CAPACITY_REASON}]});
                Verdict::Respond(HttpResponse::aws_json(200, &body))
            } else {
                Verdict::Forward
            }
        }
    }

    /// Refuses AssumeRole into `role_arn` with STS's `AccessDenied` (HTTP 403).
    pub fn deny_assume_role(role_arn: &str) -> impl Fn(&Call) -> Verdict + Send + Sync + 'static {
        let role_arn = role_arn.to_string();
        move |call: &Call| {
            if call.is("sts", "AssumeRole") && call.form_param("RoleArn") == Some(role_arn.as_str()) {
                let message = format!(
                    "User: arn:aws:iam::123456789012:user/gocd is not authorized to perform: sts:AssumeRole on resource: {role_arn}"
                );
                Verdict::sts_error(403, "AccessDenied", &message)
            } else {
                Verdict::Forward
            }
        }
    }
}

/// Rules that make moto answer as AWS does where it does not (`tests/world/README.md`, "Where moto differs from
/// AWS"): ListTasks in pages with a `nextToken`, AWS's request-size limits, and ECS's per-action
/// rate limits. With them, the proxy's call counts are the counts AWS would see.
pub mod aws_like {
    use std::collections::HashMap;
    use std::net::SocketAddr;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use serde_json::{json, Value};

    use super::{aws_rules, http, Call, HttpRequest, HttpResponse, Verdict};

    /// AWS's largest (and default) ListTasks page.
    pub const LIST_TASKS_PAGE: usize = 100;
    /// AWS's most task ARNs per DescribeTasks.
    pub const DESCRIBE_TASKS_MAX: usize = 100;
    /// AWS's most tasks per RunTask.
    pub const RUN_TASK_MAX_COUNT: u64 = 10;

    /// ListTasks as AWS pages it (moto returns every ARN at once and never a `nextToken`): a call
    /// without `nextToken` fetches moto's whole answer, answers its first `maxResults` (at most
    /// 100) ARNs and keeps the rest under a fresh `nextToken`; a call with a token answers the next
    /// page from what was kept. Every page is one ListTasks call in the log, as in AWS. As AWS,
    /// a call without `desiredStatus` lists RUNNING tasks only, and only the named cluster's.
    /// (The proxy's own `ecs.list_tasks.paging` rule does the same for every proxy; this rule,
    /// added by the benchmarks, answers first.)
    pub fn list_tasks_paging(upstream: SocketAddr) -> impl Fn(&Call) -> Verdict + Send + Sync + 'static {
        let kept: Arc<Mutex<HashMap<String, Vec<Value>>>> = Arc::default();
        move |call: &Call| {
            if !call.is("ecs", "ListTasks") {
                return Verdict::Forward;
            }
            let body = call.json().unwrap_or(Value::Null);
            let arns = match body["nextToken"].as_str() {
                Some(token) => match kept.lock().unwrap().remove(token) {
                    Some(rest) => rest,
                    None => return Verdict::Respond(aws_rules::invalid_next_token()),
                },
                None => {
                    let answer = match fetch_blocking(upstream, &aws_rules::list_tasks_request(call)) {
                        Ok(answer) => answer,
                        Err(e) => return Verdict::Respond(HttpResponse::upstream_failed(&e)),
                    };
                    match aws_rules::list_tasks_arns(call, &answer) {
                        Some(all) => all,
                        None => return Verdict::Respond(answer),
                    }
                }
            };
            Verdict::Respond(aws_rules::list_tasks_answer(&body, arns, &kept))
        }
    }

    /// The times ECS gives a task and moto does not (`createdAt`, `pullStartedAt`,
    /// `pullStoppedAt`, `startedAt`), added to moto's DescribeTasks answers so that a task's
    /// start shows its phases as on AWS. moto runs a task at once; here the start is spread over
    /// the time between the latest RunTask the proxy saw and the task's first DescribeTasks (at
    /// most 0.8 s): created at 1/16 of it, the pull from 1/4 to 3/4, started at its end. Each
    /// task's times are fixed at its first sight, so every later answer agrees, and none is in
    /// the future.
    pub fn ecs_task_times(upstream: SocketAddr) -> impl Fn(&Call) -> Verdict + Send + Sync + 'static {
        let last_run_task: Arc<Mutex<Option<std::time::SystemTime>>> = Arc::default();
        let times: Arc<Mutex<HashMap<String, [f64; 4]>>> = Arc::default();
        move |call: &Call| {
            if call.is("ecs", "RunTask") {
                *last_run_task.lock().unwrap() = Some(std::time::SystemTime::now());
                return Verdict::Forward;
            }
            if !call.is("ecs", "DescribeTasks") {
                return Verdict::Forward;
            }
            let mut answer = match fetch_blocking(upstream, &call.request) {
                Ok(answer) => answer,
                Err(e) => return Verdict::Respond(HttpResponse::upstream_failed(&e)),
            };
            let Ok(mut body) = serde_json::from_slice::<Value>(&answer.body) else {
                return Verdict::Respond(answer);
            };
            let now = std::time::SystemTime::now();
            let epoch =
                |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64();
            let run = (*last_run_task.lock().unwrap()).unwrap_or(now).min(now);
            let mut times = times.lock().unwrap();
            for task in body["tasks"].as_array_mut().into_iter().flatten() {
                let Some(arn) = task["taskArn"].as_str().map(str::to_string) else { continue };
                let [created, pull_started, pull_stopped, started] = *times.entry(arn).or_insert_with(|| {
                    let d = now.duration_since(run).unwrap_or_default().min(Duration::from_millis(800)).as_secs_f64();
                    let t0 = epoch(run);
                    [t0 + d / 16.0, t0 + d / 4.0, t0 + d * 3.0 / 4.0, t0 + d]
                });
                let Some(fields) = task.as_object_mut() else { continue };
                for (key, at) in [
                    ("createdAt", created),
                    ("pullStartedAt", pull_started),
                    ("pullStoppedAt", pull_stopped),
                    ("startedAt", started),
                ] {
                    fields.entry(key).or_insert(json!(at));
                }
            }
            answer.body = body.to_string().into_bytes();
            Verdict::Respond(answer)
        }
    }

    /// Refuses what AWS refuses and moto accepts: DescribeTasks with more than 100 ARNs, RunTask
    /// with a `count` above 10 (both `InvalidParameterException`, HTTP 400).
    pub fn ecs_request_limits() -> impl Fn(&Call) -> Verdict + Send + Sync + 'static {
        |call: &Call| {
            let Some(body) = (call.service == "ecs").then(|| call.json()).flatten() else {
                return Verdict::Forward;
            };
            match call.operation.as_str() {
                "DescribeTasks" if body["tasks"].as_array().is_some_and(|t| t.len() > DESCRIBE_TASKS_MAX) => {
                    Verdict::ecs_error(400, "InvalidParameterException", "Tasks cannot be longer than 100.")
                }
                "RunTask" if body["count"].as_u64().is_some_and(|c| c > RUN_TASK_MAX_COUNT) => {
                    Verdict::ecs_error(400, "InvalidParameterException", "count must be between 1 and 10.")
                }
                _ => Verdict::Forward,
            }
        }
    }

    /// ECS's rate limit for `operations` (one token bucket shared by them): `burst` calls at once,
    /// refilled at `per_second`; a call over it is answered `ThrottlingException` "Rate exceeded"
    /// with HTTP 400, as AWS does, and never reaches moto.
    pub fn ecs_rate_limit(
        operations: &[&str],
        burst: f64,
        per_second: f64,
    ) -> impl Fn(&Call) -> Verdict + Send + Sync + 'static {
        let operations: Vec<String> = operations.iter().map(|o| o.to_string()).collect();
        let bucket = Mutex::new((burst, Instant::now()));
        move |call: &Call| {
            if call.service != "ecs" || !operations.contains(&call.operation) {
                return Verdict::Forward;
            }
            let mut bucket = bucket.lock().unwrap();
            let now = Instant::now();
            let (tokens, at) = *bucket;
            let tokens = (tokens + now.duration_since(at).as_secs_f64() * per_second).min(burst);
            if tokens >= 1.0 {
                *bucket = (tokens - 1.0, now);
                Verdict::Forward
            } else {
                *bucket = (tokens, now);
                Verdict::ecs_error(400, "ThrottlingException", "Rate exceeded")
            }
        }
    }

    /// AWS's RunTask budget: burst 100, 40 calls a second (`docs/aws-rules.md`, "Quotas").
    pub fn run_task_budget() -> impl Fn(&Call) -> Verdict + Send + Sync + 'static {
        ecs_rate_limit(&["RunTask"], 100.0, 40.0)
    }

    /// One request to moto from inside a (synchronous) rule: on its own thread and runtime, so it
    /// works under either tokio flavor; a multi-thread runtime moves its other tasks off this
    /// worker meanwhile.
    pub fn fetch_blocking(upstream: SocketAddr, request: &HttpRequest) -> std::io::Result<HttpResponse> {
        let run = || {
            std::thread::scope(|s| {
                s.spawn(|| {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?
                        .block_on(http::send(upstream, request))
                })
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the fetch thread panicked")))
            })
        };
        match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(run),
            _ => run(),
        }
    }
}

/// A fault-injection rule (`docs/design.md`, "The test world"): at set rates, per call, AWS's throttling errors in their
/// wire formats (ECS `ThrottlingException` HTTP 400, EC2 `RequestLimitExceeded` XML HTTP 503,
/// STS `Throttling` HTTP 400), HTTP 500/503 server errors in each service's format, added
/// latency, and dropped connections (closed without an answer, before forwarding or after it, so
/// the call took effect but its answer is lost).
///
/// Deterministic given a seed: the n-th call the rule sees gets the same decision in every run
/// (SplitMix64 of seed and n). Switchable at run time through the [`Faults`] handle:
/// `faults.set(FaultRates::all(1.0))`, a minute later `faults.set(FaultRates::NONE)`.
pub mod faults {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::{Call, Verdict};

    /// Per-call probabilities (each 0.0 to 1.0; the faults are exclusive and tried in this order).
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct FaultRates {
        /// Answer with the service's throttling error.
        pub throttle: f64,
        /// Answer HTTP 500 or 503 (half each) in the service's error format.
        pub server_error: f64,
        /// Close the connection without an answer.
        pub drop: f64,
        /// Of the drops, the share that happen after forwarding (the call took effect).
        pub drop_after_forward: f64,
        /// Of the calls not faulted, the share delayed by up to `latency_max` before forwarding.
        pub latency: f64,
        /// The longest added latency.
        pub latency_max: Duration,
    }

    impl FaultRates {
        /// No faults.
        pub const NONE: FaultRates = FaultRates {
            throttle: 0.0,
            server_error: 0.0,
            drop: 0.0,
            drop_after_forward: 0.0,
            latency: 0.0,
            latency_max: Duration::ZERO,
        };

        /// Throttling, 5xx and drops at these rates, half the drops after forwarding, no latency.
        pub fn new(throttle: f64, server_error: f64, drop: f64) -> FaultRates {
            FaultRates { throttle, server_error, drop, drop_after_forward: 0.5, ..FaultRates::NONE }
        }

        /// Every call faulted: `throttle` share throttled, the rest split between 5xx and drops.
        pub fn all(throttle: f64) -> FaultRates {
            let rest = (1.0 - throttle).max(0.0);
            FaultRates::new(throttle, rest * 0.6, rest * 0.4)
        }

        /// The same rates plus latency on `rate` of the other calls, up to `max`.
        pub fn with_latency(mut self, rate: f64, max: Duration) -> FaultRates {
            self.latency = rate;
            self.latency_max = max;
            self
        }

        /// The same rates with this share of drops after forwarding.
        pub fn with_drop_after_forward(mut self, share: f64) -> FaultRates {
            self.drop_after_forward = share;
            self
        }
    }

    /// What the rule did, by kind.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct FaultCounts {
        /// Calls the rule saw (in scope).
        pub calls: u64,
        /// Answered with a throttling error.
        pub throttled: u64,
        /// Answered 500 or 503.
        pub server_errors: u64,
        /// Dropped before reaching moto.
        pub dropped: u64,
        /// Forwarded, then their answer dropped.
        pub dropped_after_forward: u64,
        /// Delayed before forwarding.
        pub delayed: u64,
    }

    impl FaultCounts {
        /// Every call that failed because of the rule.
        pub fn faulted(&self) -> u64 {
            self.throttled + self.server_errors + self.dropped + self.dropped_after_forward
        }

        /// What happened since `earlier` (a snapshot of the same rule).
        pub fn since(&self, earlier: &FaultCounts) -> FaultCounts {
            FaultCounts {
                calls: self.calls - earlier.calls,
                throttled: self.throttled - earlier.throttled,
                server_errors: self.server_errors - earlier.server_errors,
                dropped: self.dropped - earlier.dropped,
                dropped_after_forward: self.dropped_after_forward - earlier.dropped_after_forward,
                delayed: self.delayed - earlier.delayed,
            }
        }
    }

    struct State {
        rates: FaultRates,
        seed: u64,
        n: u64,
        counts: FaultCounts,
        by_operation: std::collections::BTreeMap<String, FaultCounts>,
        services: Vec<String>,
        operations: Vec<String>,
    }

    /// The handle of one fault rule: change its rates at run time, read what it did.
    #[derive(Clone)]
    pub struct Faults {
        state: Arc<Mutex<State>>,
    }

    impl std::fmt::Debug for Faults {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            let s = self.state.lock().unwrap();
            f.debug_struct("Faults").field("rates", &s.rates).field("seed", &s.seed).field("counts", &s.counts).finish()
        }
    }

    /// SplitMix64: a tiny, good-enough deterministic mixer.
    pub fn splitmix64(mut x: u64) -> u64 {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(x: u64) -> f64 {
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    impl Faults {
        /// A fault rule with these rates and seed, for every call.
        pub fn new(seed: u64, rates: FaultRates) -> Faults {
            Faults {
                state: Arc::new(Mutex::new(State {
                    rates,
                    seed,
                    n: 0,
                    counts: FaultCounts::default(),
                    by_operation: Default::default(),
                    services: Vec::new(),
                    operations: Vec::new(),
                })),
            }
        }

        /// Only calls of these services (`ecs`, `ec2`, `sts`) are faulted.
        pub fn only_services(self, services: &[&str]) -> Faults {
            self.state.lock().unwrap().services = services.iter().map(|s| s.to_string()).collect();
            self
        }

        /// Only calls of these operations (`RunTask`, ...) are faulted.
        pub fn only_operations(self, operations: &[&str]) -> Faults {
            self.state.lock().unwrap().operations = operations.iter().map(|s| s.to_string()).collect();
            self
        }

        /// New rates from the next call on.
        pub fn set(&self, rates: FaultRates) {
            self.state.lock().unwrap().rates = rates;
        }

        /// The rates now.
        pub fn rates(&self) -> FaultRates {
            self.state.lock().unwrap().rates
        }

        /// What the rule did so far.
        pub fn counts(&self) -> FaultCounts {
            self.state.lock().unwrap().counts
        }

        /// What the rule did so far, by `service:Operation`.
        pub fn counts_by_operation(&self) -> std::collections::BTreeMap<String, FaultCounts> {
            self.state.lock().unwrap().by_operation.clone()
        }

        /// The rule to add to a proxy (`proxy.add_rule("faults", faults.rule())`).
        pub fn rule(&self) -> impl Fn(&Call) -> Verdict + Send + Sync + 'static {
            let state = self.state.clone();
            move |call: &Call| {
                let mut s = state.lock().unwrap();
                let in_scope = (s.services.is_empty() || s.services.contains(&call.service))
                    && (s.operations.is_empty() || s.operations.contains(&call.operation));
                if !in_scope {
                    return Verdict::Forward;
                }
                let n = s.n;
                s.n += 1;
                let base = splitmix64(s.seed ^ splitmix64(n));
                let (pick, variant, wait) = (unit(base), unit(splitmix64(base)), unit(splitmix64(base ^ 0x5555)));
                let r = s.rates;
                let (verdict, kind) = if pick < r.throttle {
                    (throttle(&call.service), Kind::Throttled)
                } else if pick < r.throttle + r.server_error {
                    (server_error(&call.service, variant < 0.5), Kind::ServerError)
                } else if pick < r.throttle + r.server_error + r.drop {
                    if variant < r.drop_after_forward {
                        (Verdict::DropAnswer, Kind::DroppedAfterForward)
                    } else {
                        (Verdict::Drop, Kind::Dropped)
                    }
                } else if r.latency > 0.0 && variant < r.latency && !r.latency_max.is_zero() {
                    (Verdict::Delay(r.latency_max.mul_f64(wait)), Kind::Delayed)
                } else {
                    (Verdict::Forward, Kind::None)
                };
                count(&mut s.counts, kind);
                count(s.by_operation.entry(call.key()).or_default(), kind);
                verdict
            }
        }
    }

    #[derive(Clone, Copy)]
    enum Kind {
        None,
        Throttled,
        ServerError,
        Dropped,
        DroppedAfterForward,
        Delayed,
    }

    fn count(c: &mut FaultCounts, kind: Kind) {
        c.calls += 1;
        match kind {
            Kind::None => {}
            Kind::Throttled => c.throttled += 1,
            Kind::ServerError => c.server_errors += 1,
            Kind::Dropped => c.dropped += 1,
            Kind::DroppedAfterForward => c.dropped_after_forward += 1,
            Kind::Delayed => c.delayed += 1,
        }
    }

    /// The service's throttling answer, as AWS sends it.
    pub fn throttle(service: &str) -> Verdict {
        match service {
            "ec2" => Verdict::ec2_error(503, "RequestLimitExceeded", "Request limit exceeded."),
            "sts" => Verdict::sts_error(400, "Throttling", "Rate exceeded"),
            _ => Verdict::ecs_error(400, "ThrottlingException", "Rate exceeded"),
        }
    }

    /// The service's 500 (or 503) answer, as AWS sends it.
    pub fn server_error(service: &str, unavailable: bool) -> Verdict {
        match (service, unavailable) {
            ("ec2", false) => Verdict::ec2_error(500, "InternalError", "An internal error has occurred"),
            ("ec2", true) => {
                Verdict::ec2_error(503, "Unavailable", "The server is overloaded and can't handle the request")
            }
            ("sts", false) => Verdict::sts_error(500, "InternalFailure", "An internal error occurred"),
            ("sts", true) => Verdict::sts_error(503, "ServiceUnavailable", "Service is unavailable"),
            (_, false) => Verdict::ecs_error(500, "ServerException", "Service encountered an internal error"),
            (_, true) => Verdict::ecs_error(503, "ServiceUnavailableException", "Service Unavailable"),
        }
    }
}
