//! The port's scripted test double: a test writes the AWS calls it expects, in order, each with
//! the answer AWS gives (kube-runtime's `ApiServerVerifier`, at the SDK's HTTP boundary). The
//! engine runs its real SDK clients, budget and error classification against it, so a test
//! checks the requests the port builds and the engine's reaction to every typed outcome —
//! capacity refused, access denied, a 5xx, an answer lost on the way — in milliseconds.
//!
//! A call the script did not expect next is an error twice over: the engine gets an
//! `UnexpectedCall` error answer, and [`Verifier::done`] fails the test naming it. `done` also
//! fails when expected calls were never made. Checks on a request (`with`) run in the caller's
//! task, so an `assert!` in one fails the test where the call was made.
//!
//! ECS and SQS speak JSON (the operation in `x-amz-target`), EC2 the query protocol (form
//! fields in, XML out): [`Call`] gives both as the same flat view.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use aws_smithy_runtime_api::client::http::{HttpConnector, HttpConnectorFuture};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use serde_json::Value;

use super::in_process::json_error;
use super::AwsClients;

/// One request the engine sent, as the verifier read it.
#[derive(Debug, Clone)]
pub struct Call {
    /// The operation (`RunTask`, `RunInstances`, `ReceiveMessage`).
    pub operation: String,
    /// A JSON request's body (ECS, SQS); `Null` for EC2.
    pub json: Value,
    /// An EC2 request's form fields (`InstanceType`, `TagSpecification.1.Tag.2.Key`); empty
    /// for JSON requests.
    pub form: BTreeMap<String, String>,
}

impl Call {
    /// An EC2 form field, or "" when absent.
    pub fn field(&self, name: &str) -> &str {
        self.form.get(name).map_or("", String::as_str)
    }

    /// The form fields whose name starts with `prefix`.
    pub fn fields_under(&self, prefix: &str) -> Vec<(&str, &str)> {
        self.form.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }
}

/// What AWS answers one expected call.
enum Answer {
    /// 200 with this body (JSON or XML as the service speaks).
    Ok(String),
    /// 200 with the body this makes of the request and what the test saw before.
    Computed(Check<String>),
    /// An error answer: HTTP status, code, message.
    Error(u16, String, String),
    /// The request left and no answer came back (a connection reset).
    Lost,
}

type Check<T = ()> = Box<dyn Fn(&Call) -> T + Send>;

struct Step {
    operation: String,
    check: Option<Check>,
    answer: Answer,
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Step>,
    calls: Vec<String>,
    problems: Vec<String>,
}

/// The verifier: clone it freely, every clone shares the script.
#[derive(Clone, Default)]
pub struct Verifier {
    inner: Arc<Mutex<Inner>>,
}

/// One expectation being written: `verifier.expect("RunInstances").with(check).answers(xml)`.
#[allow(missing_debug_implementations)] // holds a closure; lives for one statement
pub struct Expect<'a> {
    verifier: &'a Verifier,
    operation: String,
    check: Option<Check>,
}

impl Expect<'_> {
    /// Checks the request when it comes (asserts inside fail the test at the call).
    #[must_use]
    pub fn with(mut self, check: impl Fn(&Call) + Send + 'static) -> Self {
        self.check = Some(Box::new(check));
        self
    }

    /// AWS accepts the call and answers `body` (JSON for ECS and SQS, XML for EC2).
    pub fn answers(self, body: impl Into<String>) {
        self.push(Answer::Ok(body.into()));
    }

    /// AWS accepts the call and answers what `body` makes of it (and of what the test saw
    /// earlier: the id the engine chose in an earlier request, say).
    pub fn answers_with(self, body: impl Fn(&Call) -> String + Send + 'static) {
        self.push(Answer::Computed(Box::new(body)));
    }

    /// AWS refuses the call with HTTP `status`, error `code` and `message`.
    pub fn fails(self, status: u16, code: &str, message: &str) {
        self.push(Answer::Error(status, code.into(), message.into()));
    }

    /// The call leaves and its answer never comes back.
    pub fn is_lost(self) {
        self.push(Answer::Lost);
    }

    fn push(self, answer: Answer) {
        let step = Step { operation: self.operation, check: self.check, answer };
        self.verifier.lock().script.push_back(step);
    }
}

impl Verifier {
    /// The next call the engine is to make.
    pub fn expect(&self, operation: &str) -> Expect<'_> {
        Expect { verifier: self, operation: operation.into(), check: None }
    }

    /// SDK clients of one account whose every call goes through this script.
    pub fn clients(&self) -> Arc<AwsClients> {
        super::in_process::clients_over(self.clone())
    }

    /// Every call made so far, by operation, in order.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// Fails the test if a call came that the script did not expect, or an expected call never
    /// came.
    ///
    /// # Panics
    /// On either, naming the calls.
    pub fn done(&self) {
        let inner = self.lock();
        let left: Vec<&str> = inner.script.iter().map(|s| s.operation.as_str()).collect();
        assert!(
            inner.problems.is_empty(),
            "unexpected AWS calls: {:?} (calls made: {:?})",
            inner.problems,
            inner.calls
        );
        assert!(left.is_empty(), "expected AWS calls never made: {left:?} (calls made: {:?})", inner.calls);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads one request and takes the next step of the script for it.
    fn take(&self, request: &HttpRequest) -> (Call, Result<Step, String>) {
        let call = read(request);
        let mut inner = self.lock();
        inner.calls.push(call.operation.clone());
        let step = match inner.script.front() {
            Some(next) if next.operation == call.operation => Ok(inner.script.pop_front().expect("a step")),
            Some(next) => Err(format!("{} (expected {})", call.operation, next.operation)),
            None => Err(format!("{} (the script had ended)", call.operation)),
        };
        if let Err(problem) = &step {
            inner.problems.push(problem.clone());
        }
        (call, step)
    }
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        let left: Vec<&str> = inner.script.iter().map(|s| s.operation.as_str()).collect();
        f.debug_struct("Verifier").field("calls", &inner.calls).field("expected", &left).finish()
    }
}

impl HttpConnector for Verifier {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let (call, step) = self.take(&request);
        let ec2 = call.json.is_null() && !call.form.is_empty();
        let answer = match step {
            Ok(step) => {
                if let Some(check) = &step.check {
                    check(&call);
                }
                step.answer
            }
            Err(problem) => Answer::Error(400, "UnexpectedCall".into(), format!("the test did not expect {problem}")),
        };
        let (status, body) = match answer {
            Answer::Ok(body) => (200, body),
            Answer::Computed(body) => (200, body(&call)),
            Answer::Error(status, code, message) if ec2 => (status, ec2_error(&code, &message)),
            Answer::Error(status, code, message) => (status, json_error(&code, &message).to_string()),
            Answer::Lost => {
                let lost = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection reset by peer");
                return HttpConnectorFuture::ready(Err(ConnectorError::io(lost.into())));
            }
        };
        let status = StatusCode::try_from(status).unwrap_or_else(|_| StatusCode::try_from(500).expect("500"));
        let mut response = HttpResponse::new(status, SdkBody::from(body));
        let content_type = if ec2 { "text/xml;charset=UTF-8" } else { "application/x-amz-json-1.1" };
        response.headers_mut().insert("content-type", content_type);
        HttpConnectorFuture::ready(Ok(response))
    }
}

/// The operation and parameters of one request.
fn read(request: &HttpRequest) -> Call {
    let bytes = request.body().bytes().unwrap_or_default();
    let target = request.headers().get("x-amz-target").unwrap_or_default();
    if let Some((_, operation)) = target.rsplit_once('.') {
        let json = serde_json::from_slice(bytes).unwrap_or(Value::Null);
        return Call { operation: operation.into(), json, form: BTreeMap::new() };
    }
    let form: BTreeMap<String, String> = form_urlencoded::parse(bytes).into_owned().collect();
    let operation = form.get("Action").cloned().unwrap_or_else(|| format!("unknown request to {}", request.uri()));
    Call { operation, json: Value::Null, form }
}

/// EC2's error body.
fn ec2_error(code: &str, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>req-1</RequestID></Response>"
    )
}

/// An EC2 answer: `<{Operation}Response>` around `inner`.
pub fn ec2_answer(operation: &str, inner: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{operation}Response xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>req-1</requestId>{inner}</{operation}Response>"
    )
}
