//! A stand-in for the parts of GoCD's API that `import --apply` calls: cluster profiles (v1) and
//! elastic agent profiles (v2), each `GET`/`POST`/`PUT` by id with GoCD's `ETag`/`If-Match`
//! rules (a `PUT` without the current `ETag` is refused with 412), cluster profiles also
//! `DELETE` (with the current `ETag`; refused with 422 while an elastic profile uses it, as GoCD
//! does), behind a bearer token. Elastic profiles chosen by id are refused as GoCD refuses one its
//! plugin does not validate: 422 with GoCD's body (`message`, and `data` with the profile and its
//! `errors`). It serves on a loopback port from a thread, one request a connection, and keeps a
//! log of calls.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// One call as the server saw it: method, path, the `If-Match` sent.
pub type Call = (String, String, Option<String>);

#[derive(Debug, Default)]
pub struct State {
    /// Profiles by API path (`/go/api/admin/elastic/cluster_profiles/<id>`,
    /// `/go/api/elastic/profiles/<id>`): body and revision.
    pub profiles: BTreeMap<String, (Value, u32)>,
    /// Every call, in order.
    pub calls: Vec<Call>,
    /// Every `Authorization` header value received.
    pub authorizations: Vec<String>,
    /// Ids of elastic profiles whose `POST` or `PUT` is refused with GoCD's 422.
    pub refuse: BTreeSet<String>,
    /// Every profile deleted: its path and the `If-Match` sent.
    pub deleted: Vec<(String, Option<String>)>,
}

/// The message GoCD's 422 carries for an elastic profile its plugin does not validate.
pub fn refusal_message(id: &str) -> String {
    format!(
        "Validations failed for elasticProfile '{id}'. Error(s): [Image must be an image this GoCD may pull.]. \
         Please correct and resubmit."
    )
}

const CLUSTERS: &str = "/go/api/admin/elastic/cluster_profiles";
const ELASTICS: &str = "/go/api/elastic/profiles";

/// Starts the server; returns its base URL (`http://127.0.0.1:PORT/go`) and its state.
pub fn start(token: &str, seed: &[(&str, Value)]) -> (String, Arc<Mutex<State>>) {
    start_refusing(token, seed, &[])
}

/// As [`start`], refusing the elastic profiles `refuse` (by id) with GoCD's 422.
pub fn start_refusing(token: &str, seed: &[(&str, Value)], refuse: &[&str]) -> (String, Arc<Mutex<State>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/go", listener.local_addr().unwrap());
    let state = Arc::new(Mutex::new(State::default()));
    state.lock().unwrap().refuse = refuse.iter().map(|id| (*id).to_string()).collect();
    for (path, body) in seed {
        state.lock().unwrap().profiles.insert((*path).to_string(), (body.clone(), 1));
    }
    let (served, token) = (Arc::clone(&state), format!("Bearer {token}"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            serve(stream, &served, &token);
        }
    });
    (url, state)
}

fn serve(mut stream: TcpStream, state: &Mutex<State>, token: &str) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or_default().to_string(), parts.next().unwrap_or_default().to_string());
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let length: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let (status, etag, answer) = answer(state, token, &method, &path, &headers, &body);
    let text = answer.to_string();
    let etag = etag.map(|e| format!("ETag: {e}\r\n")).unwrap_or_default();
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{etag}\r\n{text}",
        text.len()
    );
}

fn message(text: &str) -> Value {
    json!({ "message": text })
}

fn answer(
    state: &Mutex<State>,
    token: &str,
    method: &str,
    path: &str,
    headers: &BTreeMap<String, String>,
    body: &[u8],
) -> (u16, Option<String>, Value) {
    let mut state = state.lock().unwrap();
    state.calls.push((method.to_string(), path.to_string(), headers.get("if-match").cloned()));
    let authorization = headers.get("authorization").cloned().unwrap_or_default();
    state.authorizations.push(authorization.clone());
    if authorization != token {
        return (401, None, message("You are not authenticated!"));
    }
    let (collection, version) = if path.starts_with(CLUSTERS) {
        (CLUSTERS, "application/vnd.go.cd.v1+json")
    } else if path.starts_with(ELASTICS) {
        (ELASTICS, "application/vnd.go.cd.v2+json")
    } else {
        return (404, None, message("not found"));
    };
    if headers.get("accept").map(String::as_str) != Some(version) {
        return (404, None, message("The url you are trying to reach appears to be incorrect."));
    }
    let etag = |rev: u32| Some(format!("\"rev-{rev}\""));
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let refused = |id: &str| {
        let mut data = body.clone();
        data["errors"] = json!({});
        if let Some(properties) = data["properties"].as_array_mut() {
            for p in properties.iter_mut().filter(|p| p["key"] == "Image") {
                p["errors"] = json!({"Image": ["Image must be an image this GoCD may pull."]});
            }
        }
        (422, None, json!({"message": refusal_message(id), "data": data}))
    };
    match method {
        "POST" | "PUT" if collection == ELASTICS && state.refuse.contains(body["id"].as_str().unwrap_or_default()) => {
            refused(body["id"].as_str().unwrap_or_default())
        }
        "GET" => match state.profiles.get(path) {
            Some((profile, rev)) => (200, etag(*rev), profile.clone()),
            None => (404, None, message("Either the resource you requested was not found, or you are not authorized")),
        },
        "POST" if path == collection => {
            let id = body["id"].as_str().unwrap_or_default();
            let at = format!("{collection}/{id}");
            if state.profiles.contains_key(&at) {
                return (422, None, message(&format!("Profile id '{id}' already exists")));
            }
            state.profiles.insert(at, (body.clone(), 1));
            (200, etag(1), body)
        }
        "PUT" => {
            let Some((_, rev)) = state.profiles.get(path).cloned() else {
                return (404, None, message("not found"));
            };
            if headers.get("if-match") != etag(rev).as_ref() {
                return (412, None, message("Someone has modified the configuration for this profile. Please update your copy of the config with the changes and try again."));
            }
            state.profiles.insert(path.to_string(), (body.clone(), rev + 1));
            (200, etag(rev + 1), body)
        }
        "DELETE" if collection == CLUSTERS => {
            let Some((_, rev)) = state.profiles.get(path).cloned() else {
                return (404, None, message("not found"));
            };
            if headers.get("if-match") != etag(rev).as_ref() {
                return (412, None, message("Someone has modified the configuration for this profile. Please update your copy of the config with the changes and try again."));
            }
            let id = path.rsplit('/').next().unwrap_or_default().to_string();
            let users: Vec<String> = state
                .profiles
                .iter()
                .filter(|(p, (b, _))| p.starts_with(ELASTICS) && b["cluster_profile_id"] == id.as_str())
                .map(|(_, (b, _))| b["id"].as_str().unwrap_or_default().to_string())
                .collect();
            if !users.is_empty() {
                return (
                    422,
                    None,
                    message(&format!(
                        "Cannot delete cluster profile '{id}' as it is referenced from elastic agent profile(s) [{}]",
                        users.join(", ")
                    )),
                );
            }
            state.profiles.remove(path);
            state.deleted.push((path.to_string(), headers.get("if-match").cloned()));
            (200, None, message(&format!("The cluster profile '{id}' was deleted successfully.")))
        }
        _ => (405, None, message("method not allowed")),
    }
}
