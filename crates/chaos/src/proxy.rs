//! The fault proxy: an HTTP/1.1 proxy between the CCM (its `HCLOUD_ENDPOINT`) and the
//! simulator that forwards every request unless a fault rule matches it.
//!
//! A rule applies to the next `count` requests whose method (when given) and path below `/v1`
//! match (the simulator's pattern syntax: `*` any characters, `{x}` one segment). What a
//! matching request gets ([`FaultKind`]):
//! - a 5xx answer (the API's JSON error envelope, or the HTML page of a proxy in front of it),
//!   without forwarding;
//! - 429 `rate_limit_exceeded` with `RateLimit-Limit`, `RateLimit-Remaining: 0` and a
//!   `RateLimit-Reset` a few seconds ahead, without forwarding;
//! - a connection reset before forwarding (the cloud never saw the request);
//! - a connection reset after forwarding (the cloud acted, the reply is lost);
//! - a truncated body: forwarded, then half of the answer's body, either with the connection
//!   dropped before the promised length or with a shorter `Content-Length`;
//! - a proxy's HTML 404 page, without forwarding;
//! - added latency, then forwarded.
//!
//! Resets are real TCP resets: the connection's socket is closed with a zero linger time.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::StreamExt as _;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::eventlog::EventLog;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// The body of a proxy's 404 page (what a misrouted request gets from a web server in front
/// of the API).
const HTML_404: &str = "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";

/// What a request that matches a rule gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// This 5xx status, with the API's JSON error envelope or (`html`) a proxy's HTML page.
    ServerError {
        /// 500, 502, 503 or 504.
        status: u16,
        /// An HTML page instead of the JSON envelope.
        html: bool,
    },
    /// 429 `rate_limit_exceeded`, the bucket empty and full again after this many seconds.
    RateLimited {
        /// Seconds until `RateLimit-Reset`.
        reset_after_secs: u64,
    },
    /// The connection is reset before the request is forwarded.
    ResetBeforeForward,
    /// The request is forwarded (the cloud acts), then the connection is reset.
    ReplyLost,
    /// Forwarded; half the body arrives, then the connection drops (`abort`) or the body
    /// simply ends early with a matching `Content-Length`.
    TruncatedBody {
        /// Drop the connection mid-body instead of shortening the declared length.
        abort: bool,
    },
    /// A proxy's HTML 404 page, not forwarded.
    ProxyNotFound,
    /// Forwarded after this delay.
    Latency(Duration),
}

impl FaultKind {
    /// A short name, used for the counts in the report.
    pub fn label(&self) -> &'static str {
        match self {
            FaultKind::ServerError { .. } => "5xx",
            FaultKind::RateLimited { .. } => "429",
            FaultKind::ResetBeforeForward => "reset before forwarding",
            FaultKind::ReplyLost => "reply lost after the cloud acted",
            FaultKind::TruncatedBody { .. } => "truncated body",
            FaultKind::ProxyNotFound => "proxy HTML 404",
            FaultKind::Latency(_) => "latency",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultKind::ServerError { status, html } => {
                write!(f, "{status}{}", if *html { " (HTML page)" } else { "" })
            }
            FaultKind::RateLimited { reset_after_secs } => {
                write!(f, "429 with RateLimit-Reset in {reset_after_secs} s")
            }
            FaultKind::TruncatedBody { abort: true } => {
                f.write_str("truncated body, connection dropped")
            }
            FaultKind::TruncatedBody { abort: false } => {
                f.write_str("truncated body, shorter Content-Length")
            }
            FaultKind::Latency(d) => write!(f, "{} ms latency", d.as_millis()),
            other => f.write_str(other.label()),
        }
    }
}

/// One fault rule of the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyRule {
    /// HTTP method to match; any when `None`.
    pub method: Option<String>,
    /// Path pattern below `/v1`.
    pub path: String,
    /// How many matching requests it affects.
    pub count: u32,
    /// What they get.
    pub kind: FaultKind,
}

impl fmt::Display for ProxyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = if self.count == u32::MAX {
            "every".to_owned()
        } else {
            format!("the next {}", self.count)
        };
        write!(
            f,
            "{count} {} {} get {}",
            self.method.as_deref().unwrap_or("*"),
            self.path,
            self.kind
        )
    }
}

impl ProxyRule {
    fn matches(&self, method: &str, path: &str) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && hcloud_sim::faults::pattern_matches(&self.path, path)
    }
}

#[derive(Debug)]
struct Shared {
    upstream: String,
    http: reqwest::Client,
    rules: Mutex<Vec<ProxyRule>>,
    applied: Mutex<BTreeMap<&'static str, u64>>,
    requests: AtomicU64,
    log: EventLog,
}

impl Shared {
    /// Takes one use of the first rule matching the request.
    fn take(&self, method: &str, path: &str) -> Option<FaultKind> {
        let mut rules = self.rules.lock();
        let index = rules.iter().position(|r| r.matches(method, path))?;
        let rule = rules.get_mut(index)?;
        rule.count = rule.count.saturating_sub(1);
        let kind = rule.kind.clone();
        if rule.count == 0 {
            rules.remove(index);
        }
        drop(rules);
        *self.applied.lock().entry(kind.label()).or_default() += 1;
        Some(kind)
    }
}

/// A running fault proxy. Dropping it stops it and drops its connections.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl FaultProxy {
    /// Starts on a free loopback port, forwarding to `upstream` (`http://host:port`, no path).
    pub async fn start(upstream: &str, log: EventLog) -> anyhow::Result<FaultProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()?,
            rules: Mutex::new(Vec::new()),
            applied: Mutex::new(BTreeMap::new()),
            requests: AtomicU64::new(0),
            log,
        });
        let task = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(FaultProxy { addr, shared, task })
    }

    /// What `HCLOUD_ENDPOINT` is set to: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Adds a rule after the ones already there.
    pub fn add(&self, rule: ProxyRule) {
        self.shared.rules.lock().push(rule);
    }

    /// Removes every rule: from now on every request is forwarded as it is.
    pub fn clear(&self) {
        self.shared.rules.lock().clear();
    }

    /// How many requests got each kind of fault.
    pub fn applied(&self) -> BTreeMap<&'static str, u64> {
        self.shared.applied.lock().clone()
    }

    /// Requests received so far.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    // Owned here, so that aborting this task drops every connection too.
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let reset = Arc::new(AtomicBool::new(false));
        let io = TokioIo::new(Connection {
            stream,
            reset: reset.clone(),
        });
        let shared = shared.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                handle(shared.clone(), reset.clone(), request)
            });
            // A fault that resets the connection ends it with an error: expected.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

/// The error a handler returns to make hyper drop the connection (with a reset).
#[derive(Debug)]
struct Dropped;

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("connection dropped by a fault")
    }
}

impl std::error::Error for Dropped {}

async fn handle(
    shared: Arc<Shared>,
    reset: Arc<AtomicBool>,
    request: http::Request<Incoming>,
) -> Result<Response<ProxyBody>, Dropped> {
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let api_path = path.strip_prefix("/v1").unwrap_or(&path).to_owned();
    let fault = shared.take(&method, &api_path);
    let Some(fault) = fault else {
        return Ok(relay(forward(&shared, request).await));
    };
    let what = format!("proxy: {method} {api_path}: {fault}");
    match fault {
        FaultKind::ServerError { status, html } => {
            shared.log.log(what);
            Ok(server_error(status, html))
        }
        FaultKind::RateLimited { reset_after_secs } => {
            shared.log.log(what);
            Ok(rate_limited(reset_after_secs))
        }
        FaultKind::ProxyNotFound => {
            shared.log.log(what);
            Ok(answer(StatusCode::NOT_FOUND, "text/html", HTML_404.into()))
        }
        FaultKind::ResetBeforeForward => {
            shared.log.log(what);
            reset.store(true, Ordering::SeqCst);
            Err(Dropped)
        }
        FaultKind::Latency(delay) => {
            shared.log.log(what);
            tokio::time::sleep(delay).await;
            Ok(relay(forward(&shared, request).await))
        }
        FaultKind::ReplyLost => {
            let forwarded = forward(&shared, request).await;
            shared.log.log(format_args!(
                "{what} (the cloud answered {})",
                forwarded.status
            ));
            reset.store(true, Ordering::SeqCst);
            Err(Dropped)
        }
        FaultKind::TruncatedBody { abort } => {
            let forwarded = forward(&shared, request).await;
            shared.log.log(format_args!(
                "{what} (the cloud answered {}, {} of {} bytes sent)",
                forwarded.status,
                forwarded.body.len() / 2,
                forwarded.body.len()
            ));
            Ok(truncated(forwarded, abort))
        }
    }
}

/// The upstream's answer, read whole.
struct Forwarded {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

/// Headers that belong to one connection, not to the message.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

async fn forward(shared: &Shared, request: http::Request<Incoming>) -> Forwarded {
    let (parts, body) = request.into_parts();
    let target = format!(
        "{}{}",
        shared.upstream,
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return bad_gateway(&format!("reading the request body: {e}")),
    };
    let mut headers = HeaderMap::new();
    for (name, value) in &parts.headers {
        if !hop_by_hop(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    let sent = shared
        .http
        .request(parts.method, target)
        .headers(headers)
        .body(body)
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(e) => return bad_gateway(&format!("forwarding: {}", e.without_url())),
    };
    let status = response.status();
    let mut headers = HeaderMap::new();
    for (name, value) in response.headers() {
        if !hop_by_hop(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    match response.bytes().await {
        Ok(body) => Forwarded {
            status,
            headers,
            body,
        },
        Err(e) => bad_gateway(&format!("reading the answer: {}", e.without_url())),
    }
}

fn bad_gateway(why: &str) -> Forwarded {
    let body = serde_json::json!({"error": {"code": "bad_gateway", "message": why, "details": {}}});
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Forwarded {
        status: StatusCode::BAD_GATEWAY,
        headers,
        body: Bytes::from(body.to_string()),
    }
}

fn full(body: Bytes) -> ProxyBody {
    Full::new(body)
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn with_headers(mut response: Response<ProxyBody>, headers: HeaderMap) -> Response<ProxyBody> {
    *response.headers_mut() = headers;
    response
}

fn relay(forwarded: Forwarded) -> Response<ProxyBody> {
    let mut response = Response::new(full(forwarded.body));
    *response.status_mut() = forwarded.status;
    with_headers(response, forwarded.headers)
}

fn answer(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<ProxyBody> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn server_error(status: u16, html: bool) -> Response<ProxyBody> {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    if html {
        let reason = code.canonical_reason().unwrap_or("Error");
        let page = format!(
            "<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n<center><h1>{status} {reason}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
        );
        return answer(code, "text/html", page.into());
    }
    let body = serde_json::json!({"error": {
        "code": hcloud_sim::error::code_for_status(status),
        "message": format!("injected {status}"),
        "details": {},
    }});
    answer(code, "application/json", body.to_string().into())
}

fn rate_limited(reset_after_secs: u64) -> Response<ProxyBody> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let body = serde_json::json!({"error": {
        "code": "rate_limit_exceeded",
        "message": "limit of 3600 requests per hour reached",
        "details": {},
    }});
    let mut response = answer(
        StatusCode::TOO_MANY_REQUESTS,
        "application/json",
        body.to_string().into(),
    );
    let headers = response.headers_mut();
    headers.insert("ratelimit-limit", HeaderValue::from(3600_u32));
    headers.insert("ratelimit-remaining", HeaderValue::from(0_u32));
    headers.insert("ratelimit-reset", HeaderValue::from(now + reset_after_secs));
    response
}

fn truncated(forwarded: Forwarded, abort: bool) -> Response<ProxyBody> {
    let full_len = forwarded.body.len();
    let first = forwarded.body.slice(..full_len / 2);
    let mut headers = forwarded.headers;
    let body = if abort {
        // The promised length is the whole body; the stream fails after half of it (a moment
        // later, so that the head and the first half are on the wire), and hyper drops the
        // connection.
        headers.insert(CONTENT_LENGTH, HeaderValue::from(full_len));
        let data = futures::stream::once(async move { Ok::<_, BoxError>(Frame::data(first)) });
        let failure = futures::stream::once(async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Err::<Frame<Bytes>, BoxError>(Box::new(Dropped))
        });
        StreamBody::new(data.chain(failure)).boxed_unsync()
    } else {
        full(first)
    };
    let mut response = Response::new(body);
    *response.status_mut() = forwarded.status;
    with_headers(response, headers)
}

/// A proxied connection that can be reset: once `reset` is set, writes fail, no FIN is sent,
/// and closing the socket (with a zero linger time) sends a TCP reset.
#[derive(Debug)]
struct Connection {
    stream: TcpStream,
    reset: Arc<AtomicBool>,
}

impl Connection {
    fn is_reset(&self) -> bool {
        self.reset.load(Ordering::SeqCst)
    }
}

fn reset_error() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionReset, Dropped)
}

impl AsyncRead for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.is_reset() {
            return Poll::Ready(Err(reset_error()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if this.is_reset() {
            return Poll::Ready(Err(reset_error()));
        }
        Pin::new(&mut this.stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.is_reset() {
            return Poll::Ready(Err(reset_error()));
        }
        Pin::new(&mut this.stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.is_reset() {
            // No FIN: the reset is sent when the socket closes.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_shutdown(cx)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if self.is_reset() {
            // Closing with SO_LINGER 0 sends RST instead of FIN.
            let _ = self.stream.set_zero_linger();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcloud_sim::{SimConfig, Simulator};

    const TOKEN: &str = "proxy-test-token";

    struct Setup {
        sim: Simulator,
        proxy: FaultProxy,
        http: reqwest::Client,
    }

    async fn setup() -> Setup {
        let sim = Simulator::start(SimConfig::default().token(TOKEN))
            .await
            .unwrap();
        let upstream = format!("http://{}", sim.addr());
        let proxy = FaultProxy::start(&upstream, EventLog::new("proxy test"))
            .await
            .unwrap();
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        Setup { sim, proxy, http }
    }

    impl Setup {
        fn rule(&self, method: &str, path: &str, kind: FaultKind) {
            self.proxy.add(ProxyRule {
                method: Some(method.into()),
                path: path.into(),
                count: 1,
                kind,
            });
        }

        async fn create_network(&self, name: &str) -> reqwest::Result<reqwest::Response> {
            self.http
                .post(format!("{}/networks", self.proxy.base_url()))
                .bearer_auth(TOKEN)
                .json(&serde_json::json!({"name": name, "ip_range": "10.0.0.0/16"}))
                .send()
                .await
        }

        async fn network_names(&self) -> Vec<String> {
            let state = self.sim.admin().state().await.unwrap();
            state["networks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["name"].as_str().unwrap().to_owned())
                .collect()
        }

        async fn get_locations(&self) -> reqwest::Result<reqwest::Response> {
            self.http
                .get(format!("{}/locations", self.proxy.base_url()))
                .bearer_auth(TOKEN)
                .send()
                .await
        }
    }

    #[tokio::test]
    async fn forwards_unmatched_requests_with_their_headers() {
        let s = setup().await;
        s.rule("GET", "/servers", FaultKind::ProxyNotFound);
        let answer = s.get_locations().await.unwrap();
        assert_eq!(answer.status(), 200);
        assert!(answer.headers().contains_key("ratelimit-remaining"));
        let body: serde_json::Value = answer.json().await.unwrap();
        assert!(!body["locations"].as_array().unwrap().is_empty());
        // The token went through: without it the simulator answers 401.
        let anonymous = s
            .http
            .get(format!("{}/locations", s.proxy.base_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(anonymous.status(), 401);
        assert!(s.proxy.applied().is_empty());
    }

    #[tokio::test]
    async fn reset_before_forwarding_leaves_the_cloud_untouched() {
        let s = setup().await;
        s.rule("POST", "/networks", FaultKind::ResetBeforeForward);
        let err = s.create_network("lost").await.unwrap_err();
        assert!(!err.is_status(), "{err:?}");
        assert!(s.network_names().await.is_empty());
        // The rule is used up: the next one goes through.
        assert_eq!(s.create_network("second").await.unwrap().status(), 201);
        assert_eq!(s.network_names().await, vec!["second".to_owned()]);
        assert_eq!(s.proxy.applied()["reset before forwarding"], 1);
    }

    #[tokio::test]
    async fn reply_lost_after_the_cloud_acted() {
        let s = setup().await;
        s.rule("POST", "/networks", FaultKind::ReplyLost);
        let err = s.create_network("made").await.unwrap_err();
        assert!(!err.is_status(), "{err:?}");
        assert_eq!(s.network_names().await, vec!["made".to_owned()]);
    }

    /// The connection ends with a TCP reset, not a clean close.
    #[tokio::test]
    async fn resets_are_tcp_resets() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let s = setup().await;
        s.rule("GET", "/locations", FaultKind::ResetBeforeForward);
        let mut tcp = TcpStream::connect(s.proxy.addr).await.unwrap();
        tcp.write_all(b"GET /v1/locations HTTP/1.1\r\nhost: sim\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0_u8; 256];
        let err = tcp.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
    }

    #[tokio::test]
    async fn rate_limited_answers_carry_the_headers() {
        let s = setup().await;
        s.rule(
            "GET",
            "/locations",
            FaultKind::RateLimited {
                reset_after_secs: 3,
            },
        );
        let answer = s.get_locations().await.unwrap();
        assert_eq!(answer.status(), 429);
        let header =
            |name: &str| -> u64 { answer.headers()[name].to_str().unwrap().parse().unwrap() };
        assert_eq!(header("ratelimit-limit"), 3600);
        assert_eq!(header("ratelimit-remaining"), 0);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!((now + 2..=now + 4).contains(&header("ratelimit-reset")));
        let body: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    }

    #[tokio::test]
    async fn server_errors_and_html_pages() {
        let s = setup().await;
        s.rule(
            "GET",
            "/locations",
            FaultKind::ServerError {
                status: 503,
                html: false,
            },
        );
        s.rule(
            "GET",
            "/locations",
            FaultKind::ServerError {
                status: 502,
                html: true,
            },
        );
        s.rule("GET", "/locations", FaultKind::ProxyNotFound);
        let first = s.get_locations().await.unwrap();
        assert_eq!(first.status(), 503);
        let body: serde_json::Value = first.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unavailable");
        let second = s.get_locations().await.unwrap();
        assert_eq!(second.status(), 502);
        assert_eq!(second.headers()[CONTENT_TYPE], "text/html");
        let third = s.get_locations().await.unwrap();
        assert_eq!(third.status(), 404);
        assert_eq!(third.headers()[CONTENT_TYPE], "text/html");
        assert!(third.text().await.unwrap().contains("404 Not Found"));
        assert_eq!(s.get_locations().await.unwrap().status(), 200);
    }

    #[tokio::test]
    async fn truncated_bodies() {
        let s = setup().await;
        let whole = s.get_locations().await.unwrap().bytes().await.unwrap();
        s.rule(
            "GET",
            "/locations",
            FaultKind::TruncatedBody { abort: true },
        );
        let dropped = s.get_locations().await.unwrap();
        assert_eq!(dropped.status(), 200);
        assert!(dropped.bytes().await.is_err());
        s.rule(
            "GET",
            "/locations",
            FaultKind::TruncatedBody { abort: false },
        );
        let short = s.get_locations().await.unwrap().bytes().await.unwrap();
        assert_eq!(short.len(), whole.len() / 2);
        assert!(serde_json::from_slice::<serde_json::Value>(&short).is_err());
    }

    #[tokio::test]
    async fn latency_delays_and_forwards() {
        let s = setup().await;
        s.rule(
            "GET",
            "/locations",
            FaultKind::Latency(Duration::from_millis(300)),
        );
        let started = std::time::Instant::now();
        assert_eq!(s.get_locations().await.unwrap().status(), 200);
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(s.proxy.applied()["latency"], 1);
    }
}
