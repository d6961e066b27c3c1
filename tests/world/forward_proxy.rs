//! The GoCD server's outbound HTTP proxy (what `HTTP_PROXY`/`HTTPS_PROXY` name), on loopback:
//! a forward proxy that counts what it carried, per target `host:port`.
//!
//! - An absolute-form request (`POST http://127.0.0.1:PORT/ HTTP/1.1`, what a client sends a
//!   proxy for an `http://` URL) goes on to its origin in origin form (`POST / HTTP/1.1`, its
//!   `Host` kept, the proxy's own headers dropped) on a connection of its own, and the answer
//!   comes back on the client's connection, which stays open for the next request.
//! - `CONNECT host:port` (what a client sends for an `https://` URL) opens a TCP tunnel to the
//!   target and carries the bytes both ways, unread, until either side closes.
//!
//! With credentials ([`ForwardProxy::with_credentials`]) it is an authenticating proxy: a
//! request or tunnel without their `Proxy-Authorization: Basic ...` is answered 407 and counted
//! as refused, never carried. In front of the world's recording proxy ([`super::proxy`]), a
//! request counted here as carried is one call the recording proxy logged; so when the two
//! totals are equal, no call reached AWS around this proxy.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::http::{self, HttpRequest, HttpResponse};

/// What the proxy carried for one target `host:port`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Carried {
    /// Absolute-form requests forwarded and answered by the target.
    pub requests: u64,
    /// CONNECT tunnels opened.
    pub tunnels: u64,
    /// Requests and tunnels answered 407 (no or wrong `Proxy-Authorization`).
    pub refused: u64,
    /// Requests forwarded that the target did not answer (502 to the client).
    pub failed: u64,
    /// The AWS operation of each request carried (`X-Amz-Target`'s last part, or the query
    /// protocols' `Action`), `?` when it names none: per operation, how many.
    pub operations: BTreeMap<String, u64>,
}

#[derive(Default)]
struct Shared {
    carried: Mutex<BTreeMap<String, Carried>>,
    /// `Basic base64(user:password)` when the proxy asks for credentials.
    authorization: Option<String>,
}

impl Shared {
    fn count(&self, target: &str, f: impl FnOnce(&mut Carried)) {
        f(self.carried.lock().unwrap().entry(target.to_string()).or_default());
    }

    fn authorized(&self, request: &HttpRequest) -> bool {
        self.authorization.as_deref().is_none_or(|expected| request.header("proxy-authorization") == Some(expected))
    }
}

/// The proxy; stops accepting when dropped.
pub struct ForwardProxy {
    addr: SocketAddr,
    credentials: Option<(String, String)>,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl std::fmt::Debug for ForwardProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForwardProxy")
            .field("addr", &self.addr)
            .field("authenticating", &self.credentials.is_some())
            .finish()
    }
}

impl Drop for ForwardProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl ForwardProxy {
    /// A proxy on a free loopback port that asks for no credentials.
    pub async fn start() -> ForwardProxy {
        Self::listen(None).await
    }

    /// A proxy that carries only what comes with `Proxy-Authorization: Basic` of `user` and
    /// `password` (what a client sends when the proxy URL is `http://user:password@host:port`).
    pub async fn with_credentials(user: &str, password: &str) -> ForwardProxy {
        Self::listen(Some((user.to_string(), password.to_string()))).await
    }

    async fn listen(credentials: Option<(String, String)>) -> ForwardProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the forward proxy");
        let addr = listener.local_addr().expect("forward proxy addr");
        let authorization = credentials.as_ref().map(|(user, password)| basic(user, password));
        let shared = Arc::new(Shared { carried: Mutex::default(), authorization });
        let s = shared.clone();
        let accept = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                conns.spawn(serve_connection(stream, s.clone()));
                while conns.try_join_next().is_some() {}
            }
        });
        ForwardProxy { addr, credentials, shared, accept }
    }

    /// The proxy's URL as `HTTP_PROXY` takes it: `http://127.0.0.1:PORT`, with `user:password@`
    /// when it asks for credentials.
    pub fn url(&self) -> String {
        match &self.credentials {
            Some((user, password)) => format!("http://{user}:{password}@{}", self.addr),
            None => format!("http://{}", self.addr),
        }
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The `Proxy-Authorization` value it expects (`Basic ...`), when it asks for credentials.
    pub fn authorization(&self) -> Option<&str> {
        self.shared.authorization.as_deref()
    }

    /// What it carried so far, per target `host:port`.
    pub fn carried(&self) -> BTreeMap<String, Carried> {
        self.shared.carried.lock().unwrap().clone()
    }

    /// What it carried so far to `target` (`host:port`).
    pub fn carried_to(&self, target: &str) -> Carried {
        self.shared.carried.lock().unwrap().get(target).cloned().unwrap_or_default()
    }

    /// Requests and tunnels it carried to any target, and those it refused.
    pub fn totals(&self) -> Carried {
        let carried = self.shared.carried.lock().unwrap();
        let mut total = Carried::default();
        for c in carried.values() {
            total.requests += c.requests;
            total.tunnels += c.tunnels;
            total.refused += c.refused;
            total.failed += c.failed;
            for (op, n) in &c.operations {
                *total.operations.entry(op.clone()).or_default() += n;
            }
        }
        total
    }
}

/// `Basic base64(user:password)`.
fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
}

/// The AWS operation a request names: `X-Amz-Target`'s last part (JSON protocols) or the
/// `Action` form field (query protocols), else `?`.
fn operation(request: &HttpRequest) -> String {
    if let Some(target) = request.header("x-amz-target") {
        return target.rsplit('.').next().unwrap_or(target).to_string();
    }
    let is_form = request.header("content-type").is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"));
    let form = if is_form { http::form_decode(&request.body) } else { Vec::new() };
    form.into_iter().find(|(k, _)| k == "Action").map_or_else(|| "?".to_string(), |(_, v)| v)
}

/// `http://host:port/path?query` as (`host:port`, `/path?query`); port 80 when the URL names none.
fn absolute_form(target: &str) -> Option<(String, String)> {
    let rest = target.strip_prefix("http://").or_else(|| target.strip_prefix("HTTP://"))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('/') => (&rest[..i], rest[i..].to_string()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_string()),
    };
    let authority = authority.rsplit('@').next()?;
    if authority.is_empty() {
        return None;
    }
    let has_port = authority.rsplit_once(':').is_some_and(|(_, p)| !p.is_empty() && !p.contains(']'));
    let authority = if has_port { authority.to_string() } else { format!("{authority}:80") };
    Some((authority, path))
}

async fn resolve(target: &str) -> io::Result<SocketAddr> {
    tokio::net::lookup_host(target)
        .await?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{target} resolves to no address")))
}

fn refusal() -> HttpResponse {
    let mut r = HttpResponse::new(407, "text/plain", "proxy authentication required");
    r.reason = "Proxy Authentication Required".into();
    r.headers.push(("Proxy-Authenticate".into(), "Basic realm=\"world\"".into()));
    r
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let mut conn = BufReader::new(stream);
    loop {
        let request = match http::read_request(&mut conn).await {
            Ok(Some(r)) => r,
            _ => return,
        };
        let close = request.wants_close();
        if request.method.eq_ignore_ascii_case("CONNECT") {
            tunnel(conn, request, &shared).await;
            return;
        }
        let Some((target, path)) = absolute_form(&request.target) else {
            let answer = HttpResponse::new(400, "text/plain", "a proxy takes absolute-form requests and CONNECT");
            let _ = http::write_response(conn.get_mut(), &answer, true).await;
            return;
        };
        if !shared.authorized(&request) {
            shared.count(&target, |c| c.refused += 1);
            if http::write_response(conn.get_mut(), &refusal(), close).await.is_err() || close {
                return;
            }
            continue;
        }
        let op = operation(&request);
        let mut forwarded = request;
        forwarded.target = path;
        forwarded.headers.retain(|(k, _)| {
            !k.eq_ignore_ascii_case("proxy-authorization") && !k.eq_ignore_ascii_case("proxy-connection")
        });
        forwarded.headers.push(("Via".into(), "1.1 world-forward-proxy".into()));
        let answer = match resolve(&target).await {
            Ok(addr) => http::send(addr, &forwarded).await,
            Err(e) => Err(e),
        };
        let answer = match answer {
            Ok(answer) => {
                shared.count(&target, |c| {
                    c.requests += 1;
                    *c.operations.entry(op).or_default() += 1;
                });
                answer
            }
            Err(e) => {
                shared.count(&target, |c| c.failed += 1);
                HttpResponse::upstream_failed(&e)
            }
        };
        if http::write_response(conn.get_mut(), &answer, close).await.is_err() || close {
            return;
        }
    }
}

/// Answers a CONNECT: 407 without the credentials, 502 when the target cannot be reached, else
/// 200 and the bytes both ways until either side closes.
async fn tunnel(mut conn: BufReader<TcpStream>, request: HttpRequest, shared: &Shared) {
    let target = request.target.clone();
    if !shared.authorized(&request) {
        shared.count(&target, |c| c.refused += 1);
        let _ = http::write_response(conn.get_mut(), &refusal(), true).await;
        return;
    }
    let upstream = match resolve(&target).await {
        Ok(addr) => TcpStream::connect(addr).await,
        Err(e) => Err(e),
    };
    let mut upstream = match upstream {
        Ok(s) => s,
        Err(e) => {
            shared.count(&target, |c| c.failed += 1);
            let _ = http::write_response(conn.get_mut(), &HttpResponse::upstream_failed(&e), true).await;
            return;
        }
    };
    let _ = upstream.set_nodelay(true);
    shared.count(&target, |c| c.tunnels += 1);
    if conn.get_mut().write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n").await.is_err() {
        return;
    }
    // The BufReader hands on whatever the client sent after its CONNECT before reading more.
    let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
}

/// Whether `name` is one of the proxy variables HTTP clients read (`HTTP_PROXY`, `HTTPS_PROXY`,
/// `ALL_PROXY`, `NO_PROXY`, in either case): the world starts the plugin without the test
/// process's own, so a test's plugin meets a proxy only when the test sets one.
pub fn is_proxy_variable(name: &str) -> bool {
    ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"].iter().any(|v| v.eq_ignore_ascii_case(name))
}
