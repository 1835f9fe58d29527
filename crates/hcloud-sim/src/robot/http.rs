//! The Robot webservice endpoints (`/robot/server`, `/robot/server/{number}`,
//! `/robot/reset/{number}`) and their pipeline: count, authenticate (HTTP Basic), rate limit
//! per endpoint, inject faults.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::model::{RobotServer, render_reset, render_server, render_server_detail};
use crate::app::{App, route_template};
use crate::faults::FaultSet;

/// The path the Robot webservice is served under (`ROBOT_ENDPOINT=http://HOST:PORT/robot`).
pub const ROBOT_PREFIX: &str = "/robot";

/// The Robot request limit: at most `max_request` requests to one endpoint (route template,
/// e.g. `GET /reset/{id}`) per `interval` seconds; more get 403 `RATE_LIMIT_EXCEEDED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobotRateLimit {
    /// Requests allowed per interval and endpoint.
    pub max_request: u32,
    /// Interval in seconds.
    pub interval: u64,
}

impl Default for RobotRateLimit {
    /// The documented limit of `GET /server`: 200 requests per hour.
    fn default() -> Self {
        RobotRateLimit {
            max_request: 200,
            interval: 3600,
        }
    }
}

/// Fixed windows per endpoint: a window opens with its first request and lasts `interval`.
#[derive(Debug, Default)]
pub struct RobotLimiter {
    config: Option<RobotRateLimit>,
    windows: HashMap<String, (Instant, u32)>,
}

impl RobotLimiter {
    /// A limiter (`None`: no limit).
    pub fn new(config: Option<RobotRateLimit>) -> Self {
        RobotLimiter {
            config,
            windows: HashMap::new(),
        }
    }

    /// The limit in force.
    pub fn config(&self) -> Option<RobotRateLimit> {
        self.config
    }

    /// Counts a request to `endpoint`; `Some(limit)` when it is over the limit.
    pub fn check(&mut self, endpoint: &str, now: Instant) -> Option<RobotRateLimit> {
        let config = self.config?;
        let interval = Duration::from_secs(config.interval);
        let window = self.windows.entry(endpoint.to_string()).or_insert((now, 0));
        if now.saturating_duration_since(window.0) >= interval {
            *window = (now, 0);
        }
        window.1 = window.1.saturating_add(1);
        (window.1 > config.max_request).then_some(config)
    }
}

/// The Robot side of a simulator: credentials, limiter, faults, counters.
#[derive(Debug)]
pub struct RobotSide {
    /// Webservice user.
    pub user: String,
    /// Webservice password (the account owner may change it: `PUT /_admin/robot/password`).
    pub password: Mutex<String>,
    /// Request limit.
    pub limiter: Mutex<RobotLimiter>,
    /// Active faults (paths below `/robot`).
    pub faults: Mutex<FaultSet>,
    /// Requests per "METHOD /route/template" (paths below `/robot`).
    pub counts: Mutex<BTreeMap<String, u64>>,
}

impl RobotSide {
    /// A Robot side with these credentials and this limit.
    pub fn new(user: String, password: String, rate_limit: Option<RobotRateLimit>) -> Self {
        RobotSide {
            user,
            password: Mutex::new(password),
            limiter: Mutex::new(RobotLimiter::new(rate_limit)),
            faults: Mutex::new(FaultSet::default()),
            counts: Mutex::new(BTreeMap::new()),
        }
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        let expected = format!(
            "Basic {}",
            base64(format!("{}:{}", self.user, self.password.lock()).as_bytes())
        );
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == expected)
    }
}

impl Default for RobotSide {
    fn default() -> Self {
        RobotSide::new(
            "robot-user".to_string(),
            "robot-password".to_string(),
            Some(RobotRateLimit::default()),
        )
    }
}

/// Standard base64 with padding (what HTTP Basic auth carries).
fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A Robot error answer: `{"error": {"status", "code", "message"}}` plus `extra` fields.
pub fn robot_error(status: u16, code: &str, message: &str, extra: Value) -> Response {
    let mut error = json!({"status": status, "code": code, "message": message});
    if let (Some(obj), Value::Object(more)) = (error.as_object_mut(), extra) {
        obj.extend(more);
    }
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(json!({ "error": error }))).into_response()
}

/// The `max_request` and `interval` a rate-limit error names.
fn limit_json(limit: RobotRateLimit) -> Value {
    json!({"max_request": limit.max_request, "interval": limit.interval})
}

fn rate_limited(limit: RobotRateLimit) -> Response {
    robot_error(
        403,
        "RATE_LIMIT_EXCEEDED",
        "rate limit exceeded",
        limit_json(limit),
    )
}

fn server_not_found() -> Response {
    robot_error(404, "SERVER_NOT_FOUND", "server not found", Value::Null)
}

/// Robot's code for a bare status (for faults that name only a status).
pub fn robot_code_for_status(status: u16) -> &'static str {
    match status {
        400 => "INVALID_INPUT",
        401 => "UNAUTHORIZED",
        403 => "RATE_LIMIT_EXCEEDED",
        404 => "NOT_FOUND",
        409 => "CONFLICT",
        503 => "MAINTENANCE",
        _ => "INTERNAL_ERROR",
    }
}

/// The status Robot answers a code with (for faults that name only a code).
pub fn robot_status_for_code(code: &str) -> u16 {
    match code {
        "INVALID_INPUT" => 400,
        "UNAUTHORIZED" => 401,
        "RATE_LIMIT_EXCEEDED" => 403,
        "NOT_FOUND" | "SERVER_NOT_FOUND" | "RESET_NOT_AVAILABLE" => 404,
        "CONFLICT" => 409,
        "MAINTENANCE" => 503,
        _ => 500,
    }
}

/// The pipeline of `/robot`: count, authenticate, rate limit, inject faults.
async fn pipeline(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let robot = &app.robot;
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let endpoint = format!("{method} {}", route_template(&path));
    *robot.counts.lock().entry(endpoint.clone()).or_insert(0) += 1;
    if !robot.authorized(req.headers()) {
        return robot_error(401, "UNAUTHORIZED", "Unable to authenticate", Value::Null);
    }
    if let Some(limit) = robot.limiter.lock().check(&endpoint, Instant::now()) {
        return rate_limited(limit);
    }
    let hit = robot
        .faults
        .lock()
        .take_with(&method, &path, robot_code_for_status, robot_status_for_code)
        .unwrap_or_default();
    if let Some(latency) = hit.latency {
        tokio::time::sleep(latency).await;
    }
    if let Some(status) = hit.proxy_status {
        return crate::app::proxy_page(status);
    }
    if let Some((status, code)) = hit.respond {
        let extra = if code == "RATE_LIMIT_EXCEEDED" {
            limit_json(robot.limiter.lock().config().unwrap_or_default())
        } else {
            Value::Null
        };
        return robot_error(status, &code, &format!("injected fault: {code}"), extra);
    }
    let answer = next.run(req).await;
    if hit.lose_reply {
        crate::app::proxy_page(502)
    } else {
        answer
    }
}

async fn list_servers(State(app): State<Arc<App>>) -> Response {
    let w = app.world();
    if w.robot.servers.is_empty() {
        return server_not_found();
    }
    let list: Vec<Value> = w
        .robot
        .servers
        .values()
        .map(|s| json!({"server": render_server(s)}))
        .collect();
    axum::Json(Value::Array(list)).into_response()
}

async fn get_server(State(app): State<Arc<App>>, Path(number): Path<String>) -> Response {
    answer_for(
        &app,
        &number,
        |s| json!({"server": render_server_detail(s)}),
    )
}

async fn get_reset(State(app): State<Arc<App>>, Path(number): Path<String>) -> Response {
    answer_for(&app, &number, |s| json!({"reset": render_reset(s)}))
}

/// `render` of the server `number` names, or 404 `SERVER_NOT_FOUND`.
fn answer_for(app: &App, number: &str, render: impl Fn(&RobotServer) -> Value) -> Response {
    let w = app.world();
    match number
        .parse::<u64>()
        .ok()
        .and_then(|n| w.robot.servers.get(&n))
    {
        Some(s) => axum::Json(render(s)).into_response(),
        None => server_not_found(),
    }
}

async fn robot_not_found() -> Response {
    robot_error(404, "NOT_FOUND", "Not Found", Value::Null)
}

async fn robot_method_not_allowed() -> Response {
    robot_error(405, "METHOD_NOT_ALLOWED", "Method Not Allowed", Value::Null)
}

/// The Robot routes (mounted under [`ROBOT_PREFIX`]).
pub fn robot_routes(app: Arc<App>) -> Router {
    Router::new()
        .route("/server", get(list_servers))
        .route("/server/{number}", get(get_server))
        .route("/reset/{number}", get(get_reset))
        .fallback(robot_not_found)
        .method_not_allowed_fallback(robot_method_not_allowed)
        .layer(middleware::from_fn_with_state(app.clone(), pipeline))
        .with_state(app)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_as_http_basic_needs_it() {
        assert_eq!(
            base64(b"Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(base64(b"a:b"), "YTpi");
        assert_eq!(base64(b"ab:"), "YWI6");
        assert_eq!(base64(b"ab:cd"), "YWI6Y2Q=");
    }

    #[test]
    fn limiter_counts_per_endpoint_and_window() {
        let mut limiter = RobotLimiter::new(Some(RobotRateLimit {
            max_request: 2,
            interval: 10,
        }));
        let t0 = Instant::now();
        assert_eq!(limiter.check("GET /server", t0), None);
        assert_eq!(limiter.check("GET /server", t0), None);
        assert!(limiter.check("GET /server", t0).is_some());
        assert_eq!(limiter.check("GET /reset/{id}", t0), None);
        assert_eq!(
            limiter.check("GET /server", t0 + Duration::from_secs(10)),
            None
        );
        let mut off = RobotLimiter::new(None);
        assert!((0..1000).all(|_| off.check("GET /server", t0).is_none()));
    }
}
