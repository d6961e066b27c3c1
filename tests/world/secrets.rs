//! `SecretScanner`: fails a test when a secret shows up where people can read it.
//!
//! Collect the secrets of a run (the plugin's access and secret keys, the session tokens and keys
//! that AssumeRole handed out through the proxy, every auto-register key GoCD issued) and scan
//! every text an operator could see: the plugin's stderr, status report views, error answers,
//! server-health messages and console logs. A finding names the kind of secret and where it was,
//! never the secret itself.

use std::collections::{HashMap, HashSet};

use super::host::GoCdHost;
use super::proxy::Proxy;

/// What a secret is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    AccessKeyId,
    SecretAccessKey,
    SessionToken,
    AutoRegisterKey,
    Other,
}

/// A leak: which kind of secret, where, at which byte. Holds no secret.
#[derive(Debug, Clone)]
pub struct Leak {
    pub kind: SecretKind,
    /// Index of the secret in the scanner (to tell several of one kind apart).
    pub index: usize,
    pub place: String,
    pub offset: usize,
}

impl std::fmt::Display for Leak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a secret of kind {:?} (#{}) leaked into {} at byte {}",
            self.kind, self.index, self.place, self.offset
        )
    }
}

/// A set of secrets to look for.
#[derive(Debug, Clone, Default)]
pub struct SecretScanner {
    secrets: Vec<(SecretKind, String)>,
    /// The values in `secrets`, so adding one is not a walk through all (a soak issues tens of
    /// thousands of auto-register keys).
    known: HashSet<String>,
}

impl SecretScanner {
    /// An empty scanner.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a secret (values shorter than 8 characters are ignored: too likely to match by chance).
    pub fn add(&mut self, kind: SecretKind, value: &str) -> &mut Self {
        if value.len() >= 8 && self.known.insert(value.to_string()) {
            self.secrets.push((kind, value.to_string()));
        }
        self
    }

    /// The plugin's base keys, every key AssumeRole returned through the proxy, every
    /// auto-register key the host issued.
    pub fn from_world(host: &GoCdHost, proxy: Option<&Proxy>) -> Self {
        let mut s = Self::new();
        s.add(SecretKind::AccessKeyId, &host.config().access_key_id);
        s.add(SecretKind::SecretAccessKey, &host.config().secret_access_key);
        for (k, v) in &host.config().env {
            match k.as_str() {
                "AWS_ACCESS_KEY_ID" => s.add(SecretKind::AccessKeyId, v),
                "AWS_SECRET_ACCESS_KEY" => s.add(SecretKind::SecretAccessKey, v),
                "AWS_SESSION_TOKEN" => s.add(SecretKind::SessionToken, v),
                _ => &mut s,
            };
        }
        for profile in &host.config().cluster_profiles {
            if let Some(v) = profile.properties.get("AccessKeyId") {
                s.add(SecretKind::AccessKeyId, v);
            }
            if let Some(v) = profile.properties.get("SecretAccessKey") {
                s.add(SecretKind::SecretAccessKey, v);
            }
        }
        if let Some(p) = proxy {
            for c in p.captured_credentials() {
                s.add(SecretKind::AccessKeyId, &c.credentials.access_key_id);
                s.add(SecretKind::SecretAccessKey, &c.credentials.secret_access_key);
                if let Some(t) = &c.credentials.session_token {
                    s.add(SecretKind::SessionToken, t);
                }
            }
        }
        for k in host.issued_keys() {
            s.add(SecretKind::AutoRegisterKey, &k);
        }
        s
    }

    /// How many secrets it looks for.
    pub fn len(&self) -> usize {
        self.secrets.len()
    }

    /// Whether it looks for none.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Every leak of any secret in `text`.
    pub fn scan(&self, place: &str, text: &str) -> Vec<Leak> {
        // UUID-shaped secrets (auto-register keys, hundreds per run) are looked up by token,
        // everything else by substring search.
        let uuids = uuid_windows(text);
        self.secrets
            .iter()
            .enumerate()
            .filter_map(|(index, (kind, v))| {
                let offset = if is_uuid(v) { uuids.get(v.as_str()).copied() } else { text.find(v.as_str()) };
                offset.map(|offset| Leak { kind: *kind, index, place: place.to_string(), offset })
            })
            .collect()
    }

    /// Panics on a leak in `text`, naming the kind and place only.
    pub fn assert_clean(&self, place: &str, text: &str) {
        let leaks = self.scan(place, text);
        assert!(leaks.is_empty(), "{}", leaks.iter().map(Leak::to_string).collect::<Vec<_>>().join("\n"));
    }

    /// Scans everything the host saw of the plugin: stderr, stdout (when the host kept it),
    /// status report views, error answers, server-health messages, console logs. Panics on a leak.
    pub fn assert_host_clean(&self, host: &GoCdHost) {
        let (stderr, stdout, views, errors, health, console) = host.with_state(|s| {
            (
                s.stderr.clone(),
                s.stdout.clone(),
                s.views.clone(),
                s.error_responses.iter().map(|e| format!("{}: {}", e.name, e.body)).collect::<Vec<_>>(),
                s.health_history.iter().map(|m| m.message.clone()).collect::<Vec<_>>(),
                s.console.iter().map(|c| c.text.clone()).collect::<Vec<_>>(),
            )
        });
        let mut leaks = self.scan("the plugin's stderr", &stderr);
        leaks.extend(self.scan("the plugin's stdout", &stdout));
        for (i, v) in views.iter().enumerate() {
            leaks.extend(self.scan(&format!("status report view #{i}"), v));
        }
        leaks.extend(self.scan("the plugin's error answers", &errors.join("\n")));
        leaks.extend(self.scan("server-health messages", &health.join("\n")));
        leaks.extend(self.scan("console logs", &console.join("\n")));
        assert!(leaks.is_empty(), "{}", leaks.iter().map(Leak::to_string).collect::<Vec<_>>().join("\n"));
    }
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36 && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

/// Every 36-character window of every run of hex digits and dashes, with its first offset.
fn uuid_windows(text: &str) -> HashMap<&str, usize> {
    let mut found = HashMap::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !(bytes[i].is_ascii_hexdigit() || bytes[i] == b'-') {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_hexdigit() || bytes[i] == b'-') {
            i += 1;
        }
        if i - start >= 36 {
            for w in start..=i - 36 {
                found.entry(&text[w..w + 36]).or_insert(w);
            }
        }
    }
    found
}
