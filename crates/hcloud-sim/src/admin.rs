//! The admin API (`/_admin`, no authentication): seeding, status changes, health, faults,
//! delays, counters and a state dump. Not rate limited and not counted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post, put};
use parking_lot::Mutex;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::admin_client::CertificateIssuance;
use crate::app::{App, no_content};
use crate::error::{ApiError, ApiResult};
use crate::faults::{Fault, FaultSet};
use crate::limits::LimitsSeed;
use crate::model::TargetKind;
use crate::ratelimit::RateLimitConfig;
use crate::render;
use crate::routes::servers::STATUSES;
use crate::seed::{
    SeedFile, apply, apply_certificate, apply_load_balancer, apply_network, apply_primary_ip,
    apply_server,
};
use crate::world::{CertIssuance, World};

/// Admin routes (mounted under `/_admin`).
pub fn admin_routes() -> Router<Arc<App>> {
    Router::new()
        .route("/networks", post(create_network))
        .route("/servers", post(create_server))
        .route("/servers/{id}", axum::routing::delete(delete_server))
        .route("/servers/{id}/status", post(set_server_status))
        .route(
            "/load_balancers/{id}/target_health",
            post(set_target_health),
        )
        .route("/primary_ips", post(create_primary_ip))
        .route("/certificates", post(create_certificate))
        .route("/load_balancers", post(create_load_balancer))
        .route(
            "/certificate_issuance",
            get(get_certificate_issuance).put(set_certificate_issuance),
        )
        .route(
            "/metadata_server",
            get(get_metadata_server).put(set_metadata_server),
        )
        .route("/seed", post(seed))
        .route("/faults", faults_route(|app| &app.faults))
        .route("/action_delay", get(get_action_delay).put(set_action_delay))
        .route("/limits", get(get_limits).put(set_limits))
        .route("/rate_limit", put(set_rate_limit))
        .route("/request_counts", counts_route(|app| &app.counts))
        .route("/state", get(state))
        .route("/tokens", post(add_token))
        .route("/tokens/revoke", post(revoke_token))
        .route("/token_counts", counts_route(|app| &app.token_counts))
        .nest("/robot", crate::robot::admin::robot_admin_routes())
}

pub(crate) fn parse<T: DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::new("invalid_input", format!("invalid admin request: {e}")))
}

pub(crate) fn respond(r: ApiResult<Response>) -> Response {
    r.unwrap_or_else(IntoResponse::into_response)
}

/// Answers a request whose `body` is a `B` with what `handle` makes of it; an error, a body
/// that does not parse included, is its own answer.
pub(crate) fn with_body<B: DeserializeOwned>(
    body: &[u8],
    handle: impl FnOnce(B) -> ApiResult<Response>,
) -> Response {
    respond(parse(body).and_then(handle))
}

pub(crate) fn ok_json(status: StatusCode, v: Value) -> ApiResult<Response> {
    Ok((status, axum::Json(v)).into_response())
}

/// Seeds one resource from the request `body` with `apply`; answers 201 with what `show`
/// makes of the new resource's ID.
pub(crate) fn seed_one<S: DeserializeOwned, I>(
    app: &App,
    body: &[u8],
    apply: fn(&mut World, &S) -> ApiResult<I>,
    show: fn(&mut World, I) -> ApiResult<Value>,
) -> Response {
    with_body(body, |seed: S| {
        let mut w = app.world();
        let id = apply(&mut w, &seed)?;
        ok_json(StatusCode::CREATED, show(&mut w, id)?)
    })
}

async fn create_network(State(app): State<Arc<App>>, body: Bytes) -> Response {
    seed_one(&app, &body, apply_network, |w, id| {
        Ok(json!({"network": render::network(w, w.network(id)?)}))
    })
}

async fn create_server(State(app): State<Arc<App>>, body: Bytes) -> Response {
    seed_one(&app, &body, apply_server, |w, id| {
        Ok(json!({"server": render::server(w, w.server(id)?)}))
    })
}

async fn create_primary_ip(State(app): State<Arc<App>>, body: Bytes) -> Response {
    seed_one(&app, &body, apply_primary_ip, |w, id| {
        Ok(json!({"primary_ip": render::primary_ip(w, w.primary_ip(id)?)}))
    })
}

async fn create_certificate(State(app): State<Arc<App>>, body: Bytes) -> Response {
    seed_one(&app, &body, apply_certificate, |w, id| {
        let c = w
            .certificates
            .get(&id)
            .ok_or_else(|| ApiError::not_found("certificate"))?;
        Ok(json!({"certificate": render::certificate(w, c)}))
    })
}

async fn create_load_balancer(State(app): State<Arc<App>>, body: Bytes) -> Response {
    seed_one(&app, &body, apply_load_balancer, |w, id| {
        Ok(json!({"load_balancer": render::load_balancer(w, w.load_balancer(id)?)}))
    })
}

fn issuance_view(c: &CertIssuance) -> CertificateIssuance {
    CertificateIssuance {
        delay_ms: c.delay.map(|d| d.as_millis() as u64),
        fail_all: c.fail_all,
        fail_domains: c.fail_domains.iter().cloned().collect(),
    }
}

async fn get_certificate_issuance(State(app): State<Arc<App>>) -> Response {
    let view = issuance_view(&app.world().cert_issuance);
    axum::Json(view).into_response()
}

async fn set_certificate_issuance(State(app): State<Arc<App>>, body: Bytes) -> Response {
    with_body(&body, |b: CertificateIssuance| {
        app.world().cert_issuance = CertIssuance {
            delay: b.delay_ms.map(Duration::from_millis),
            fail_all: b.fail_all,
            fail_domains: b.fail_domains.into_iter().collect(),
        };
        no_content()
    })
}

#[derive(Deserialize)]
struct MetadataServerBody {
    server_id: Option<i64>,
}

async fn get_metadata_server(State(app): State<Arc<App>>) -> Response {
    let id = app.world().metadata_server;
    axum::Json(json!({"server_id": id})).into_response()
}

async fn set_metadata_server(State(app): State<Arc<App>>, body: Bytes) -> Response {
    with_body(&body, |b: MetadataServerBody| {
        let mut w = app.world();
        if let Some(id) = b.server_id {
            w.server(id)?;
        }
        w.metadata_server = b.server_id;
        no_content()
    })
}

async fn seed(State(app): State<Arc<App>>, body: Bytes) -> Response {
    with_body(&body, |seed: SeedFile| {
        let mut w = app.world();
        apply(&mut w, &seed)?;
        no_content()
    })
}

#[derive(Deserialize)]
struct StatusBody {
    status: String,
}

async fn set_server_status(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
    body: Bytes,
) -> Response {
    with_body(&body, |b: StatusBody| {
        if !STATUSES.contains(&b.status.as_str()) {
            return Err(ApiError::field("status", "unknown server status"));
        }
        let mut w = app.world();
        w.server(id)?;
        if let Some(s) = w.servers.get_mut(&id) {
            s.status = b.status;
        }
        let s = w.server(id)?;
        ok_json(StatusCode::OK, json!({"server": render::server(&w, s)}))
    })
}

async fn delete_server(State(app): State<Arc<App>>, Path(id): Path<i64>) -> Response {
    respond((|| {
        let mut w = app.world();
        w.server(id)?;
        w.remove_server(id);
        no_content()
    })())
}

#[derive(Deserialize)]
struct HealthBody {
    target: HealthTarget,
    listen_port: Option<u16>,
    status: String,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum HealthTarget {
    Server { server: IdRef },
    Ip { ip: IpRef },
}

#[derive(Deserialize)]
struct IdRef {
    id: i64,
}

#[derive(Deserialize)]
struct IpRef {
    ip: String,
}

async fn set_target_health(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
    body: Bytes,
) -> Response {
    with_body(&body, |b: HealthBody| {
        if !["healthy", "unhealthy", "unknown"].contains(&b.status.as_str()) {
            return Err(ApiError::field(
                "status",
                "Must be healthy, unhealthy or unknown.",
            ));
        }
        let key = match b.target {
            HealthTarget::Server { server } => TargetKind::Server(server.id),
            HealthTarget::Ip { ip } => TargetKind::Ip(ip.ip),
        };
        let mut w = app.world();
        let lb = w.load_balancer(id)?;
        let ports: Vec<u16> = match b.listen_port {
            Some(p) => {
                if !lb.services.iter().any(|s| s.listen_port == p) {
                    return Err(ApiError::not_found("service"));
                }
                vec![p]
            }
            None => lb.services.iter().map(|s| s.listen_port).collect(),
        };
        for p in ports {
            w.health.insert((id, key.clone(), p), b.status.clone());
        }
        no_content()
    })
}

/// The `/faults` route over the fault set `set` picks: `GET` lists the rules still active,
/// `POST` adds one, `PUT` replaces them all at once (so that no request slips through between
/// clearing the old rules and adding the new ones), `DELETE` clears them.
pub(crate) fn faults_route(set: fn(&App) -> &Mutex<FaultSet>) -> MethodRouter<Arc<App>> {
    get(move |State(app): State<Arc<App>>| async move { faults_list(set(&app)) })
        .post(move |State(app): State<Arc<App>>, body: Bytes| async move {
            faults_add(set(&app), &body)
        })
        .put(move |State(app): State<Arc<App>>, body: Bytes| async move {
            faults_replace(set(&app), &body)
        })
        .delete(move |State(app): State<Arc<App>>| async move {
            set(&app).lock().clear();
            StatusCode::NO_CONTENT.into_response()
        })
}

/// `{"faults": [...]}`: the rules of `set` still active.
fn faults_list(set: &Mutex<FaultSet>) -> Response {
    let faults = set.lock().rules().to_vec();
    axum::Json(json!({"faults": faults})).into_response()
}

/// Adds the rule in `body` to `set`.
fn faults_add(set: &Mutex<FaultSet>, body: &[u8]) -> Response {
    with_body(body, |f: Fault| {
        if f.path.is_empty() {
            return Err(ApiError::field("path", "Missing data for required field."));
        }
        set.lock().add(f);
        no_content()
    })
}

/// Replaces the rules of `set` with the list in `body`, in one step.
fn faults_replace(set: &Mutex<FaultSet>, body: &[u8]) -> Response {
    with_body(body, |faults: Vec<Fault>| {
        if faults.iter().any(|f| f.path.is_empty()) {
            return Err(ApiError::field("path", "Missing data for required field."));
        }
        let mut set = set.lock();
        set.clear();
        for fault in faults {
            set.add(fault);
        }
        no_content()
    })
}

#[derive(Deserialize)]
struct DelayBody {
    ms: u64,
}

async fn get_action_delay(State(app): State<Arc<App>>) -> Response {
    let ms = app.world().action_delay.as_millis() as u64;
    axum::Json(json!({"ms": ms})).into_response()
}

async fn set_action_delay(State(app): State<Arc<App>>, body: Bytes) -> Response {
    with_body(&body, |b: DelayBody| {
        app.world().action_delay = Duration::from_millis(b.ms);
        no_content()
    })
}

async fn get_limits(State(app): State<Arc<App>>) -> Response {
    let limits = crate::limits::current(&app.world());
    axum::Json(limits).into_response()
}

async fn set_limits(State(app): State<Arc<App>>, body: Bytes) -> Response {
    with_body(&body, |seed: LimitsSeed| {
        let mut w = app.world();
        crate::limits::apply(&mut w, &seed)?;
        let limits = crate::limits::current(&w);
        Ok((StatusCode::OK, axum::Json(limits)).into_response())
    })
}

async fn set_rate_limit(State(app): State<Arc<App>>, body: Bytes) -> Response {
    with_body(&body, |cfg: RateLimitConfig| {
        app.limiter.lock().reconfigure(cfg);
        no_content()
    })
}

/// A token for `POST /tokens` and `POST /tokens/revoke`.
#[derive(Deserialize)]
struct TokenBody {
    token: String,
    #[serde(default)]
    project: crate::app::Project,
}

/// Accept one more token (of the simulated project or of another one).
async fn add_token(State(app): State<Arc<App>>, body: Bytes) -> Response {
    with_body(&body, |b: TokenBody| {
        if b.token.trim().is_empty() {
            return Err(ApiError::field("token", "must not be empty"));
        }
        app.tokens
            .lock()
            .insert(b.token.trim().to_owned(), b.project);
        no_content()
    })
}

/// Stop accepting a token: its requests are answered 401 `unauthorized` from now on.
async fn revoke_token(State(app): State<Arc<App>>, body: Bytes) -> Response {
    with_body(&body, |b: TokenBody| {
        app.tokens.lock().remove(b.token.trim());
        no_content()
    })
}

/// The `/request_counts` route over the counter `counts` picks: `GET` answers
/// `{"counts": {...}}`, `DELETE` resets it.
pub(crate) fn counts_route(
    counts: fn(&App) -> &Mutex<BTreeMap<String, u64>>,
) -> MethodRouter<Arc<App>> {
    get(move |State(app): State<Arc<App>>| async move {
        let body = json!({"counts": counts(&app).lock().clone()});
        axum::Json(body).into_response()
    })
    .delete(move |State(app): State<Arc<App>>| async move {
        counts(&app).lock().clear();
        StatusCode::NO_CONTENT.into_response()
    })
}

async fn state(State(app): State<Arc<App>>) -> Response {
    let w = app.world();
    let dump = json!({
        "servers": w.servers.values().map(|s| render::server(&w, s)).collect::<Vec<_>>(),
        "networks": w.networks.values().map(|n| render::network(&w, n)).collect::<Vec<_>>(),
        "load_balancers": w.load_balancers.values()
            .map(|lb| render::load_balancer(&w, lb)).collect::<Vec<_>>(),
        "certificates": w.certificates.values()
            .map(|c| render::certificate(&w, c)).collect::<Vec<_>>(),
        "primary_ips": w.primary_ips.values()
            .map(|p| render::primary_ip(&w, p)).collect::<Vec<_>>(),
        "actions": w.actions.values().map(render::action).collect::<Vec<_>>(),
        "running_actions": w.running_actions(),
        "action_delay_ms": w.action_delay.as_millis() as u64,
        "robot_servers": crate::robot::admin::robot_state(&w.robot),
    });
    drop(w);
    axum::Json(dump).into_response()
}
