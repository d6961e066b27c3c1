//! The wire, as pure data: the envelope of every stdio line, the v5 request bodies and the
//! callbacks we send to the host. No I/O, no tokio, no AWS here (nu-plugin-protocol's rule).
//!
//! `docs/protocol.md` has the framing ("Framing") and the messages ("The v5 messages"). Host
//! messages are parsed leniently (unknown fields ignored, GoCD may add some); what we write is
//! exact.

pub mod framing;
pub mod host_calls;
pub mod profiles;
pub mod requests;
pub mod types;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Our plugin id, as GoCD knows it.
pub const PLUGIN_ID: &str = "cd.go.contrib.elastic-agent.ecs";
/// Human name sent in the hello line.
pub const PLUGIN_NAME: &str = "ECS and Fargate elastic agents";
/// The GoCD extension this plugin implements.
pub const EXTENSION: &str = "elastic-agent";
/// The only extension version we speak.
pub const EXTENSION_VERSION: &str = "5.0";
/// Version of this project's stdio framing (`docs/protocol.md`, "Hello").
pub const WIRE_PROTOCOL: u32 = 1;
/// A line longer than this is a protocol error (`docs/protocol.md`, "Framing").
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// A message id: an integer or a string, as the sender chose.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageId {
    /// Integer ids (what we use for our own calls).
    Int(i64),
    /// String ids.
    Str(String),
}

impl From<u64> for MessageId {
    fn from(value: u64) -> Self {
        MessageId::Int(i64::try_from(value).unwrap_or(i64::MAX))
    }
}

/// A request in either direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Unique among the sender's requests in flight.
    pub id: MessageId,
    /// A v5 request name, or a `go.processor.*` callback name.
    pub name: String,
    /// `"5.0"` host→plugin; the callback's API version plugin→host.
    pub version: Option<String>,
    /// The JSON body itself, `null` where GoCD sends none.
    pub body: Value,
}

/// A response in either direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id of the request answered; `None` for a line whose id could not be read.
    pub id: Option<MessageId>,
    /// GoCD's response code: 200, 400, 404, 412 or 500.
    pub code: u16,
    /// The body; `{"message": ...}` for any code but 200.
    pub body: Value,
}

impl Response {
    /// A 200 response.
    pub fn ok(id: MessageId, body: Value) -> Self {
        Response { id: Some(id), code: 200, body }
    }

    /// An error response whose body is `{"message": message}`.
    pub fn error(id: Option<MessageId>, code: u16, message: &str) -> Self {
        Response { id, code, body: serde_json::json!({ "message": message }) }
    }

    /// The `message` of an error body, if any.
    pub fn message(&self) -> Option<&str> {
        self.body.get("message").and_then(Value::as_str)
    }
}

/// Everything a peer can send us on one line.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request to handle.
    Request(Request),
    /// The answer to one of our calls.
    Response(Response),
}

/// Everything we write on one line.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Outgoing {
    /// The first line we write (`docs/protocol.md`, "Hello").
    Hello {
        /// [`WIRE_PROTOCOL`].
        protocol: u32,
        /// [`PLUGIN_ID`].
        plugin_id: &'static str,
        /// [`PLUGIN_NAME`].
        name: &'static str,
        /// This crate's version.
        version: &'static str,
        /// [`EXTENSION`].
        extension: &'static str,
        /// `["5.0"]`.
        extension_versions: [&'static str; 1],
    },
    /// A callback to the host.
    Request {
        /// Our id for it.
        id: MessageId,
        /// The `go.processor.*` name.
        name: String,
        /// The callback's API version.
        version: String,
        /// Its body.
        body: Value,
    },
    /// Our answer to a host request.
    Response {
        /// The id answered, `null` when none could be read.
        id: Option<MessageId>,
        /// GoCD's response code.
        code: u16,
        /// The body.
        body: Value,
    },
}

impl Outgoing {
    /// The hello line for this build.
    pub fn hello() -> Self {
        Outgoing::Hello {
            protocol: WIRE_PROTOCOL,
            plugin_id: PLUGIN_ID,
            name: PLUGIN_NAME,
            version: env!("CARGO_PKG_VERSION"),
            extension: EXTENSION,
            extension_versions: [EXTENSION_VERSION],
        }
    }
}

impl From<Response> for Outgoing {
    fn from(r: Response) -> Self {
        Outgoing::Response { id: r.id, code: r.code, body: r.body }
    }
}

impl From<Request> for Outgoing {
    fn from(r: Request) -> Self {
        Outgoing::Request { id: r.id, name: r.name, version: r.version.unwrap_or_default(), body: r.body }
    }
}

/// Checks the version a host request carries against the one we speak.
///
/// # Errors
/// A sentence naming both versions, for a 400 answer.
pub fn check_request_version(name: &str, version: Option<&str>) -> Result<(), String> {
    match version {
        Some(v) if name.starts_with("cd.go.elastic-agent.") && v != EXTENSION_VERSION => Err(format!(
            "request {name} came with extension version {v:?}, but this plugin speaks {EXTENSION} {EXTENSION_VERSION} only"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_line_is_exact() {
        let line = serde_json::to_string(&Outgoing::hello()).unwrap();
        assert_eq!(
            line,
            format!(
                r#"{{"type":"hello","protocol":1,"plugin_id":"cd.go.contrib.elastic-agent.ecs","name":"ECS and Fargate elastic agents","version":"{}","extension":"elastic-agent","extension_versions":["5.0"]}}"#,
                env!("CARGO_PKG_VERSION")
            )
        );
    }

    #[test]
    fn responses_encode_with_type_first_and_null_id() {
        let r: Outgoing = Response::error(None, 400, "bad").into();
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"type":"response","id":null,"code":400,"body":{"message":"bad"}}"#
        );
        let r: Outgoing = Response::ok(MessageId::Str("a".into()), Value::Bool(true)).into();
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"type":"response","id":"a","code":200,"body":true}"#);
    }

    #[test]
    fn callbacks_encode_exactly() {
        let r = Outgoing::Request {
            id: MessageId::Int(3),
            name: "go.processor.server-info.get".into(),
            version: "1.0".into(),
            body: Value::Null,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"type":"request","id":3,"name":"go.processor.server-info.get","version":"1.0","body":null}"#
        );
    }

    #[test]
    fn version_mismatch_names_both_sides() {
        let err = check_request_version("cd.go.elastic-agent.get-icon", Some("4.0")).unwrap_err();
        assert_eq!(
            err,
            "request cd.go.elastic-agent.get-icon came with extension version \"4.0\", but this plugin speaks elastic-agent 5.0 only"
        );
        assert!(check_request_version("cd.go.elastic-agent.get-icon", Some("5.0")).is_ok());
        assert!(check_request_version("cd.go.elastic-agent.get-icon", None).is_ok());
        assert!(check_request_version("go.plugin-settings.get-view", Some("1.0")).is_ok());
    }
}
