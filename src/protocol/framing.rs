//! One line, one message: decoding a line into an [`Incoming`] and encoding an [`Outgoing`]
//! into exactly one `\n`-terminated line (NDJSON, as cargo's credential protocol and nushell use).
//!
//! Decoding never panics and never gives up on the connection: a bad line becomes a
//! [`BadLine`] that says, in one sentence, what was wrong, and carries the id when one could
//! be read, so the server can answer it with a 400.

use serde_json::{Map, Value};

use super::{Incoming, MessageId, Outgoing, Request, Response, MAX_LINE_BYTES};

/// A line we could not accept, and what to answer it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// The id, if the line was an object with a readable id.
    pub id: Option<MessageId>,
    /// Whether the line claimed to be a response (those are logged, never answered).
    pub was_response: bool,
    /// One sentence for the operator.
    pub message: String,
}

impl BadLine {
    fn new(id: Option<MessageId>, message: impl Into<String>) -> Self {
        BadLine { id, was_response: false, message: message.into() }
    }
}

/// The answer for a line longer than [`MAX_LINE_BYTES`].
pub fn too_long(len: usize) -> BadLine {
    BadLine::new(
        None,
        format!("line of {len} bytes or more is longer than the limit of {MAX_LINE_BYTES} bytes; it was skipped"),
    )
}

/// Decodes one line (without its `\n`; a trailing `\r` is tolerated).
///
/// # Errors
/// [`BadLine`] for anything that is not a request or response object as `docs/protocol.md`
/// ("Request", "Response") says.
pub fn decode(line: &[u8]) -> Result<Incoming, BadLine> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let value: Value =
        serde_json::from_slice(line).map_err(|e| BadLine::new(None, format!("line is not JSON: {e}")))?;
    let Value::Object(mut obj) = value else {
        return Err(BadLine::new(None, format!("line is JSON but not an object (it is {})", kind(&value))));
    };
    let id = read_id(&obj)?;
    let kind_field = obj.get("type").cloned();
    match kind_field.as_ref().and_then(Value::as_str) {
        Some("request") => decode_request(id, &mut obj).map(Incoming::Request),
        Some("response") => decode_response(id, &mut obj).map(Incoming::Response).map_err(|mut bad| {
            bad.was_response = true;
            bad
        }),
        Some(other) => Err(BadLine::new(
            Some(id),
            format!("message type {:?} is not one of \"request\" or \"response\"", truncate(other)),
        )),
        None => Err(BadLine::new(Some(id), "message has no string field \"type\" (\"request\" or \"response\")")),
    }
}

/// Encodes one message as one line: compact JSON (which escapes every newline inside strings)
/// plus exactly one `\n`.
pub fn encode(message: &Outgoing) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).unwrap_or_else(|e| {
        // Only non-string map keys can fail here, which our types never have; answer 500 anyway.
        let fallback = Outgoing::Response {
            id: None,
            code: 500,
            body: serde_json::json!({ "message": format!("could not encode a message: {e}") }),
        };
        serde_json::to_vec(&fallback).unwrap_or_default()
    });
    line.push(b'\n');
    line
}

fn read_id(obj: &Map<String, Value>) -> Result<MessageId, BadLine> {
    match obj.get("id") {
        Some(Value::Number(n)) => n
            .as_i64()
            .map(MessageId::Int)
            .ok_or_else(|| BadLine::new(None, format!("message id {n} is not an integer or a string"))),
        Some(Value::String(s)) => Ok(MessageId::Str(s.clone())),
        Some(other) => Err(BadLine::new(None, format!("message id is {}, not an integer or a string", kind(other)))),
        None => Err(BadLine::new(None, "message has no \"id\"")),
    }
}

fn decode_request(id: MessageId, obj: &mut Map<String, Value>) -> Result<Request, BadLine> {
    let name = match obj.remove("name") {
        Some(Value::String(name)) if !name.is_empty() => name,
        Some(Value::String(_)) => return Err(BadLine::new(Some(id), "request \"name\" is empty")),
        Some(other) => {
            return Err(BadLine::new(Some(id), format!("request \"name\" is {}, not a string", kind(&other))))
        }
        None => return Err(BadLine::new(Some(id), "request has no \"name\"")),
    };
    let version = match obj.remove("version") {
        None | Some(Value::Null) => None,
        Some(Value::String(v)) => Some(v),
        Some(other) => {
            return Err(BadLine::new(Some(id), format!("request \"version\" is {}, not a string", kind(&other))))
        }
    };
    let body = obj.remove("body").unwrap_or(Value::Null);
    Ok(Request { id, name, version, body })
}

fn decode_response(id: MessageId, obj: &mut Map<String, Value>) -> Result<Response, BadLine> {
    let code = match obj.get("code") {
        Some(Value::Number(n)) => n.as_u64().and_then(|c| u16::try_from(c).ok()),
        _ => None,
    };
    let Some(code) = code else {
        return Err(BadLine::new(Some(id), "response has no integer \"code\""));
    };
    let body = obj.remove("body").unwrap_or(Value::Null);
    Ok(Response { id: Some(id), code, body })
}

/// What a log may say about one line: its type, id, name (or code) and size, never its body
/// (a create-agent carries the auto-register key and the cluster profile's secret key; a
/// callback carries console text). At every level, trace included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineSummary {
    kind: String,
    id: Option<String>,
    name: Option<String>,
    code: Option<u64>,
    bytes: usize,
}

impl std::fmt::Display for LineSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.kind)?;
        if let Some(id) = &self.id {
            write!(f, " id={id}")?;
        }
        if let Some(name) = &self.name {
            write!(f, " name={name}")?;
        }
        if let Some(code) = self.code {
            write!(f, " code={code}")?;
        }
        write!(f, " bytes={}", self.bytes)
    }
}

/// Summarises a line read from the host (without its `\n`) for the log.
pub fn summarize(line: &[u8]) -> LineSummary {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(rename = "type", default)]
        kind: Option<Value>,
        #[serde(default)]
        id: Option<Value>,
        #[serde(default)]
        name: Option<Value>,
        #[serde(default)]
        code: Option<Value>,
    }
    let head = serde_json::from_slice::<Head>(line).ok();
    let text = |v: Option<&Value>, max: usize| match v {
        Some(Value::String(s)) => Some(s.chars().take(max).collect::<String>()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    match head {
        Some(h) => LineSummary {
            kind: text(h.kind.as_ref(), 16).unwrap_or_else(|| "untyped".into()),
            id: text(h.id.as_ref(), 64),
            name: text(h.name.as_ref(), 100),
            code: h.code.as_ref().and_then(Value::as_u64),
            bytes: line.len(),
        },
        None => LineSummary { kind: "unreadable".into(), id: None, name: None, code: None, bytes: line.len() },
    }
}

/// Summarises a line we write (of `bytes` bytes) for the log.
pub fn summarize_outgoing(message: &Outgoing, bytes: usize) -> LineSummary {
    let id_text = |id: &MessageId| match id {
        MessageId::Int(n) => n.to_string(),
        MessageId::Str(s) => s.chars().take(64).collect(),
    };
    let (kind, id, name, code) = match message {
        Outgoing::Hello { .. } => ("hello", None, None, None),
        Outgoing::Request { id, name, .. } => ("request", Some(id_text(id)), Some(name.clone()), None),
        Outgoing::Response { id, code, .. } => ("response", id.as_ref().map(id_text), None, Some(u64::from(*code))),
    };
    LineSummary { kind: kind.into(), id, name, code, bytes }
}

/// `message` with the content of every double-quoted string replaced by `…`: serde's messages
/// quote the value that did not fit (`invalid type: string "…", expected a map`), and a body
/// of the wrong shape may be a whole profile, secret key included, sent as one string.
pub fn without_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c != '"' {
            continue;
        }
        // Skip to the closing quote (serde quotes with Rust's escapes: `\"` inside).
        let mut closed = false;
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    closed = true;
                    break;
                }
                _ => {}
            }
        }
        out.push('…');
        if closed {
            out.push('"');
        }
    }
    out
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quoted_values_are_dropped_from_messages() {
        let err = serde_json::from_value::<std::collections::BTreeMap<String, String>>(json!(
            "{\"SecretAccessKey\":\"SECRET/abc+def\"}"
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("SECRET"), "serde quotes the value: {err}");
        let clean = without_quoted(&err);
        assert!(!clean.contains("SECRET") && clean.contains("invalid type: string \"…\""), "{clean}");
        assert_eq!(without_quoted("a \"b\\\"c\" d \"e"), "a \"…\" d \"…");
    }

    #[test]
    fn summaries_name_the_line_but_never_its_body() {
        let line = br#"{"type":"request","id":7,"name":"cd.go.elastic-agent.create-agent","version":"5.0","body":{"auto_register_key":"KEY-0123456789","cluster_profile_properties":{"SecretAccessKey":"SECRET/abc+def"}}}"#;
        let s = summarize(line).to_string();
        assert_eq!(s, format!("request id=7 name=cd.go.elastic-agent.create-agent bytes={}", line.len()));
        assert_eq!(summarize(b"not json SECRET/abc+def").to_string(), "unreadable bytes=23");
        let r: Outgoing = Response::error(Some(MessageId::Str("s1".into())), 400, "SECRET/abc+def").into();
        assert_eq!(summarize_outgoing(&r, 99).to_string(), "response id=s1 code=400 bytes=99");
        let c = Outgoing::Request {
            id: MessageId::Int(3),
            name: "go.processor.elastic-agents.append-to-console-log".into(),
            version: "1.0".into(),
            body: json!({"text": "SECRET/abc+def"}),
        };
        assert!(!summarize_outgoing(&c, 10).to_string().contains("SECRET"));
    }

    #[test]
    fn decodes_a_request_with_body() {
        let line =
            br#"{"type":"request","id":7,"name":"cd.go.elastic-agent.get-icon","version":"5.0","body":null,"extra":1}"#;
        assert_eq!(
            decode(line).unwrap(),
            Incoming::Request(Request {
                id: MessageId::Int(7),
                name: "cd.go.elastic-agent.get-icon".into(),
                version: Some("5.0".into()),
                body: Value::Null,
            })
        );
    }

    #[test]
    fn missing_body_is_null_and_string_ids_work() {
        let Incoming::Request(r) = decode(br#"{"type":"request","id":"x-1","name":"n"}"#).unwrap() else {
            panic!("not a request")
        };
        assert_eq!(r.id, MessageId::Str("x-1".into()));
        assert_eq!(r.body, Value::Null);
        assert_eq!(r.version, None);
    }

    #[test]
    fn decodes_a_response_and_tolerates_crlf() {
        let got = decode(b"{\"type\":\"response\",\"id\":3,\"code\":200,\"body\":[1]}\r").unwrap();
        assert_eq!(got, Incoming::Response(Response { id: Some(MessageId::Int(3)), code: 200, body: json!([1]) }));
    }

    #[test]
    fn gibberish_is_a_bad_line_without_id() {
        let bad = decode(b"hello there").unwrap_err();
        assert_eq!(bad.id, None);
        assert!(bad.message.starts_with("line is not JSON"), "{}", bad.message);
    }

    #[test]
    fn non_objects_and_missing_fields_are_named() {
        assert!(decode(b"[1,2]").unwrap_err().message.contains("not an object"));
        assert!(decode(b"42").unwrap_err().message.contains("not an object"));
        assert_eq!(decode(br#"{"type":"request","name":"n"}"#).unwrap_err().message, "message has no \"id\"");
        let bad = decode(br#"{"id":5,"name":"n"}"#).unwrap_err();
        assert_eq!(bad.id, Some(MessageId::Int(5)));
        assert!(bad.message.contains("\"type\""));
        let bad = decode(br#"{"type":"request","id":5}"#).unwrap_err();
        assert_eq!((bad.id, bad.message.as_str()), (Some(MessageId::Int(5)), "request has no \"name\""));
        assert!(decode(br#"{"type":"request","id":5,"name":3}"#).unwrap_err().message.contains("not a string"));
        assert!(decode(br#"{"type":"request","id":1.5,"name":"n"}"#).unwrap_err().message.contains("not an integer"));
        assert!(decode(br#"{"type":"request","id":[1],"name":"n"}"#).unwrap_err().message.contains("an array"));
        assert!(decode(br#"{"type":"hello","id":1}"#).unwrap_err().message.contains("\"hello\""));
        let bad = decode(br#"{"type":"response","id":1}"#).unwrap_err();
        assert!(bad.was_response);
    }

    #[test]
    fn too_long_names_the_limit() {
        assert!(too_long(MAX_LINE_BYTES + 1).message.contains("16777216"));
    }

    #[test]
    fn encode_ends_in_exactly_one_newline_and_has_no_other() {
        let msg = Outgoing::Response {
            id: Some(MessageId::Int(1)),
            code: 200,
            body: json!({"view": "<div>\n<p>two\nlines</p>\r\n</div>"}),
        };
        let line = encode(&msg);
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        assert!(!line.contains(&b'\r'));
        let back = decode(&line[..line.len() - 1]).unwrap();
        let Incoming::Response(r) = back else { panic!("not a response") };
        assert_eq!(r.body["view"], "<div>\n<p>two\nlines</p>\r\n</div>");
    }
}
