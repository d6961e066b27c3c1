//! A minimal HTTP/1.1 codec over tokio streams: just enough for the proxy in front of moto and for
//! the test world's calls to `/moto-api/`.
//!
//! Bodies are read by `Content-Length`, by `Transfer-Encoding: chunked`, or (responses only) until
//! the peer closes. Everything is buffered whole: the AWS calls of these tests are small.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 64 * 1024 * 1024;

/// Headers in wire order; names compared case-insensitively.
pub type Headers = Vec<(String, String)>;

/// One HTTP request, body decoded.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub method: String,
    pub target: String,
    pub version: String,
    pub headers: Headers,
    pub body: Vec<u8>,
}

/// One HTTP response, body decoded.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub reason: String,
    pub headers: Headers,
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// Whether the client asked to close the connection after this exchange.
    pub fn wants_close(&self) -> bool {
        let conn = self.header("connection").unwrap_or("").to_ascii_lowercase();
        conn.contains("close") || (self.version == "HTTP/1.0" && !conn.contains("keep-alive"))
    }
}

impl HttpResponse {
    /// A response with a body and a content type.
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            reason: reason_phrase(status).to_string(),
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
        }
    }

    /// A JSON response in the `awsJson1_1` content type ECS uses.
    pub fn aws_json(status: u16, value: &serde_json::Value) -> Self {
        let mut r = Self::new(status, "application/x-amz-json-1.1", value.to_string());
        r.headers.push(("x-amzn-RequestId".into(), uuid::Uuid::new_v4().to_string()));
        r
    }

    /// An error of the JSON protocols (ECS, SQS, EventBridge, Pricing) as AWS writes it:
    /// `{"__type":"ThrottlingException","message":"Rate exceeded"}`.
    pub fn aws_json_error(status: u16, error_type: &str, message: &str) -> Self {
        Self::aws_json(status, &serde_json::json!({ "__type": error_type, "message": message }))
    }

    /// The proxy's 502 when moto could not be reached or answered nothing.
    pub fn upstream_failed(e: &io::Error) -> Self {
        Self::new(502, "text/plain", format!("proxy: upstream failed: {e}"))
    }

    /// An XML response (query protocols: STS, EC2).
    pub fn xml(status: u16, body: &str) -> Self {
        Self::new(status, "text/xml", body.to_string())
    }

    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// The body as (lossy) UTF-8 text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The first header of that name (case-insensitive).
pub fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

fn is_hop_by_hop(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "content-length",
    ]
    .iter()
    .any(|h| name.eq_ignore_ascii_case(h))
}

/// The standard reason phrase of a status code (only the codes the world uses).
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Reads the start line and headers. `Ok(None)` on a clean EOF before the first byte.
async fn read_head<R: AsyncBufRead + Unpin>(r: &mut R) -> io::Result<Option<(String, Headers)>> {
    let mut start = String::new();
    // Tolerate stray empty lines between messages (RFC 9112 §2.2).
    loop {
        start.clear();
        if r.read_line(&mut start).await? == 0 {
            return Ok(None);
        }
        if !start.trim().is_empty() {
            break;
        }
    }
    let mut total = start.len();
    let mut headers = Headers::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await? == 0 {
            return Err(invalid("EOF inside HTTP headers"));
        }
        total += line.len();
        if total > MAX_HEAD {
            return Err(invalid("HTTP head too large"));
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':').ok_or_else(|| invalid(format!("bad header line {line:?}")))?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(Some((start.trim_end_matches(['\r', '\n']).to_string(), headers)))
}

async fn read_chunked<R: AsyncBufRead + Unpin>(r: &mut R) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await? == 0 {
            return Err(invalid("EOF inside chunked body"));
        }
        let size_text = line.trim().split(';').next().unwrap_or("").trim().to_string();
        let size =
            usize::from_str_radix(&size_text, 16).map_err(|_| invalid(format!("bad chunk size {size_text:?}")))?;
        if size == 0 {
            // Trailers, up to the empty line.
            loop {
                let mut t = String::new();
                if r.read_line(&mut t).await? == 0 || t.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        if body.len() + size > MAX_BODY {
            return Err(invalid("chunked body too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..]).await?;
        let mut crlf = [0u8; 2];
        r.read_exact(&mut crlf).await?;
    }
}

/// Reads a body framed by the headers; `until_eof` allows an unframed (response) body.
async fn read_body<R: AsyncBufRead + Unpin>(r: &mut R, headers: &Headers, until_eof: bool) -> io::Result<Vec<u8>> {
    if header(headers, "transfer-encoding").is_some_and(|te| te.to_ascii_lowercase().contains("chunked")) {
        return read_chunked(r).await;
    }
    if let Some(len) = header(headers, "content-length") {
        let len: usize = len.trim().parse().map_err(|_| invalid(format!("bad content-length {len:?}")))?;
        if len > MAX_BODY {
            return Err(invalid("body too large"));
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).await?;
        return Ok(body);
    }
    let mut body = Vec::new();
    if until_eof {
        r.read_to_end(&mut body).await?;
    }
    Ok(body)
}

/// Reads one request. `Ok(None)` when the client closed the connection between requests.
pub async fn read_request<R: AsyncBufRead + Unpin>(r: &mut R) -> io::Result<Option<HttpRequest>> {
    let Some((start, headers)) = read_head(r).await? else {
        return Ok(None);
    };
    let mut parts = start.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(invalid(format!("bad request line {start:?}")));
    };
    let body = read_body(r, &headers, false).await?;
    Ok(Some(HttpRequest {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
        body,
    }))
}

/// Reads one response (skipping `100 Continue`). `head_request` means no body follows.
pub async fn read_response<R: AsyncBufRead + Unpin>(r: &mut R, head_request: bool) -> io::Result<HttpResponse> {
    loop {
        let (start, headers) = read_head(r).await?.ok_or_else(|| invalid("connection closed before the response"))?;
        let mut parts = start.splitn(3, ' ');
        let _version = parts.next();
        let status: u16 =
            parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| invalid(format!("bad status line {start:?}")))?;
        let reason = parts.next().unwrap_or("").to_string();
        if status == 100 {
            continue;
        }
        let no_body = head_request || status == 204 || status == 304 || (100..200).contains(&status);
        let body = if no_body { Vec::new() } else { read_body(r, &headers, true).await? };
        return Ok(HttpResponse { status, reason, headers, body });
    }
}

/// Writes a request with its body framed by `Content-Length`; `close` adds `Connection: close`.
pub async fn write_request<W: AsyncWrite + Unpin>(w: &mut W, req: &HttpRequest, close: bool) -> io::Result<()> {
    let mut head = format!("{} {} HTTP/1.1\r\n", req.method, req.target);
    for (k, v) in req.headers.iter().filter(|(k, _)| !is_hop_by_hop(k)) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !req.body.is_empty() || !matches!(req.method.as_str(), "GET" | "HEAD" | "DELETE" | "OPTIONS") {
        head.push_str(&format!("Content-Length: {}\r\n", req.body.len()));
    }
    head.push_str(if close { "Connection: close\r\n\r\n" } else { "Connection: keep-alive\r\n\r\n" });
    w.write_all(head.as_bytes()).await?;
    w.write_all(&req.body).await?;
    w.flush().await
}

/// Writes a response with its body framed by `Content-Length`.
pub async fn write_response<W: AsyncWrite + Unpin>(w: &mut W, resp: &HttpResponse, close: bool) -> io::Result<()> {
    let reason = if resp.reason.is_empty() { reason_phrase(resp.status) } else { resp.reason.as_str() };
    let mut head = format!("HTTP/1.1 {} {}\r\n", resp.status, reason);
    for (k, v) in resp.headers.iter().filter(|(k, _)| !is_hop_by_hop(k)) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n", resp.body.len()));
    head.push_str(if close { "Connection: close\r\n\r\n" } else { "Connection: keep-alive\r\n\r\n" });
    w.write_all(head.as_bytes()).await?;
    w.write_all(&resp.body).await?;
    w.flush().await
}

/// One request on a fresh connection (`Connection: close`), the whole response back.
pub async fn send(addr: SocketAddr, req: &HttpRequest) -> io::Result<HttpResponse> {
    let stream = TcpStream::connect(addr).await?;
    let (rd, mut wr) = stream.into_split();
    write_request(&mut wr, req, true).await?;
    let mut rd = BufReader::new(rd);
    read_response(&mut rd, req.method == "HEAD").await
}

/// A simple request to `addr` with a `Host` header, optional JSON body.
pub async fn simple(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> io::Result<HttpResponse> {
    let mut headers = vec![("Host".to_string(), addr.to_string())];
    if body.is_some() {
        headers.push(("Content-Type".into(), "application/json".into()));
    }
    let req = HttpRequest {
        method: method.to_string(),
        target: path.to_string(),
        version: "HTTP/1.1".into(),
        headers,
        body: body.unwrap_or("").as_bytes().to_vec(),
    };
    send(addr, &req).await
}

/// Decodes an `application/x-www-form-urlencoded` body (the AWS query protocols: STS, EC2).
pub fn form_decode(body: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(body);
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
