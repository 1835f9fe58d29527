//! The Robot part of the admin API (`/_admin/robot`): dedicated servers (add, remove,
//! rename, power), faults, the request limit and the request counters.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::http::RobotRateLimit;
use super::model::{RobotServer, RobotServerSeed, RobotWorld, check_operating_status};
use crate::admin::{counts_route, faults_route, ok_json, respond, seed_one, with_body};
use crate::app::{App, no_content};
use crate::error::{ApiError, ApiResult};

/// Admin routes of the Robot side (mounted under `/_admin/robot`).
pub fn robot_admin_routes() -> Router<Arc<App>> {
    Router::new()
        .route("/servers", get(list_servers).post(add_server))
        .route("/servers/{number}", axum::routing::delete(remove_server))
        .route("/servers/{number}/name", put(rename_server))
        .route(
            "/servers/{number}/operating_status",
            put(set_operating_status),
        )
        .route("/faults", faults_route(|app| &app.robot.faults))
        .route("/rate_limit", get(get_rate_limit).put(set_rate_limit))
        .route("/password", put(set_password))
        .route("/request_counts", counts_route(|app| &app.robot.counts))
}

/// A server as the admin API shows it: the `GET /server` fields plus `operating_status`.
pub fn render_admin(s: &RobotServer) -> Value {
    let mut v = super::model::render_server(s);
    if let Some(obj) = v.as_object_mut() {
        obj.insert(
            "operating_status".to_string(),
            Value::String(s.operating_status.clone()),
        );
    }
    v
}

/// Every dedicated server, for `/_admin/state` and `GET /_admin/robot/servers`.
pub fn robot_state(robot: &RobotWorld) -> Vec<Value> {
    robot.servers.values().map(render_admin).collect()
}

async fn list_servers(State(app): State<Arc<App>>) -> Response {
    let servers = robot_state(&app.world().robot);
    axum::Json(json!({"servers": servers})).into_response()
}

async fn add_server(State(app): State<Arc<App>>, body: Bytes) -> Response {
    seed_one(
        &app,
        &body,
        |w, seed: &RobotServerSeed| w.robot.add(seed),
        |w, number| Ok(json!({"server": render_admin(w.robot.get_mut(number)?)})),
    )
}

async fn remove_server(State(app): State<Arc<App>>, Path(number): Path<u64>) -> Response {
    respond((|| {
        let mut w = app.world();
        w.robot
            .servers
            .remove(&number)
            .ok_or_else(|| ApiError::not_found("robot server"))?;
        no_content()
    })())
}

#[derive(Deserialize)]
struct NameBody {
    name: String,
}

async fn rename_server(
    State(app): State<Arc<App>>,
    Path(number): Path<u64>,
    body: Bytes,
) -> Response {
    update_server(&app, number, &body, |s, b: NameBody| {
        s.name = b.name;
        Ok(())
    })
}

#[derive(Deserialize)]
struct OperatingStatusBody {
    operating_status: String,
}

async fn set_operating_status(
    State(app): State<Arc<App>>,
    Path(number): Path<u64>,
    body: Bytes,
) -> Response {
    update_server(&app, number, &body, |s, b: OperatingStatusBody| {
        check_operating_status(&b.operating_status)?;
        s.operating_status = b.operating_status;
        Ok(())
    })
}

/// Applies the request `body` to server `number` with `change`; answers the server.
fn update_server<B: DeserializeOwned>(
    app: &App,
    number: u64,
    body: &[u8],
    change: impl FnOnce(&mut RobotServer, B) -> ApiResult<()>,
) -> Response {
    with_body(body, |b: B| {
        let mut w = app.world();
        let s = w.robot.get_mut(number)?;
        change(s, b)?;
        ok_json(StatusCode::OK, json!({"server": render_admin(s)}))
    })
}

async fn get_rate_limit(State(app): State<Arc<App>>) -> Response {
    let limit = app.robot.limiter.lock().config();
    axum::Json(json!({ "rate_limit": limit })).into_response()
}

#[derive(Deserialize)]
struct RateLimitBody {
    rate_limit: Option<RobotRateLimit>,
}

/// `PUT /_admin/robot/rate_limit {"rate_limit": {"max_request": 3, "interval": 3600} | null}`:
/// replaces the limit and opens fresh windows.
#[derive(Deserialize)]
struct PasswordBody {
    password: String,
}

/// The account owner sets a new webservice password: from now on only it is accepted.
async fn set_password(State(app): State<Arc<App>>, body: Bytes) -> Response {
    with_body(&body, |b: PasswordBody| {
        if b.password.is_empty() {
            return Err(ApiError::field("password", "must not be empty"));
        }
        *app.robot.password.lock() = b.password;
        no_content()
    })
}

async fn set_rate_limit(State(app): State<Arc<App>>, body: Bytes) -> Response {
    with_body(&body, |b: RateLimitBody| {
        if let Some(limit) = b.rate_limit
            && limit.interval == 0
        {
            return Err(ApiError::field("rate_limit.interval", "must be positive"));
        }
        *app.robot.limiter.lock() = super::http::RobotLimiter::new(b.rate_limit);
        no_content()
    })
}
