//! Assumed-role sessions expire (`docs/aws-rules.md`, "STS": "credentials expire (default 1 hour);
//! refresh before expiry, one AssumeRole per session"). moto accepts a session's keys forever; AWS
//! answers a call signed with them after the session's `Expiration` with `ExpiredTokenException`,
//! HTTP 403, "The security token included in the request is expired" (the common errors of every
//! service's API reference), and so does the proxy, in the service's wire format.
//!
//! The proxy learns each session's expiry from the AssumeRole answers it forwards (moto's
//! `Expiration`: the request's `DurationSeconds`, by default an hour). An hour outlasts every
//! test, so a test that wants sessions to run out while it watches compresses time with
//! [`AwsRules::shorten_sessions`] (`Proxy::shorten_sessions`): every later AssumeRole answer
//! carries an `Expiration` that many seconds away (AWS's shortest is 15 minutes), and the rule
//! holds the session to it. The plugin sees nothing else: it must renew the session before that
//! time, as it must on AWS.
//!
//! The test's own sessions (`Moto::assume_role_config`) go to moto directly and never expire.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::super::http::{self, HttpResponse};
use super::super::proxy::{xml_field, Call};
use super::*;

/// AWS's answer to a call signed by an expired session.
const EXPIRED: &str = "The security token included in the request is expired";

/// A session's lifetime when the answer's `Expiration` cannot be read: AWS's default.
const DEFAULT_SESSION: Duration = Duration::from_secs(3600);

impl AwsRules {
    /// Makes every later AssumeRole answer's session last `lifetime` (whole seconds).
    pub fn shorten_sessions(&self, lifetime: Duration) {
        eprintln!("aws-rules: {STS_SESSION_EXPIRY}: sessions from now on last {lifetime:?}");
        *self.session_lifetime.lock().unwrap() = Some(lifetime);
    }

    /// `ExpiredTokenException` when `call` is signed by a session the proxy handed out that has
    /// expired.
    pub(super) fn session_expiry(&self, call: &Call) -> Result<(), Broken> {
        let Some(key) = &call.access_key_id else {
            return Ok(());
        };
        let Some(expires) = self.sessions.lock().unwrap().get(key).copied() else {
            return Ok(());
        };
        if self.on(STS_SESSION_EXPIRY) && SystemTime::now() >= expires {
            return Err(Broken {
                rule: STS_SESSION_EXPIRY,
                status: 403,
                code: "ExpiredTokenException",
                message: EXPIRED.into(),
            });
        }
        Ok(())
    }

    /// Forwards an AssumeRole and learns when its session expires, giving it the shortened
    /// lifetime when a test asked for one.
    pub(super) async fn assume_role_answer(&self, call: &Call, upstream: SocketAddr) -> Emulated {
        let mut answer = match http::send(upstream, &call.request).await {
            Ok(answer) if answer.status == 200 => answer,
            other => return Emulated::Answer(other),
        };
        let text = answer.text();
        let Some(key) = xml_field(&text, "AccessKeyId") else {
            return Emulated::Answer(Ok(answer));
        };
        let now = SystemTime::now();
        let lifetime = *self.session_lifetime.lock().unwrap();
        let expires = match lifetime {
            Some(lifetime) => whole_seconds(now + lifetime),
            None => xml_field(&text, "Expiration")
                .and_then(|e| humantime::parse_rfc3339_weak(e).ok())
                .unwrap_or(now + DEFAULT_SESSION),
        };
        self.sessions.lock().unwrap().insert(key.to_string(), expires);
        if lifetime.is_some() {
            answer = with_expiration(&answer, &text, expires);
        }
        Emulated::Answer(Ok(answer))
    }
}

fn whole_seconds(t: SystemTime) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs())
}

/// The answer with its `<Expiration>` set to `expires`.
fn with_expiration(answer: &HttpResponse, text: &str, expires: SystemTime) -> HttpResponse {
    let Some(old) = xml_field(text, "Expiration") else {
        return answer.clone();
    };
    let new = humantime::format_rfc3339_seconds(expires).to_string();
    let body = text.replacen(&format!("<Expiration>{old}</Expiration>"), &format!("<Expiration>{new}</Expiration>"), 1);
    let mut answer = answer.clone();
    answer.body = body.into_bytes();
    answer
}
