//! The HTTP application: shared state, the request pipeline of `/v1` (counters, rate limit,
//! auth, faults) and the glue between axum and the synchronous handlers. The Robot
//! webservice under `/robot` has its own pipeline (`crate::robot`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawPathParams, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use parking_lot::{Mutex, MutexGuard};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::faults::FaultSet;
use crate::pagination::{PageInfo, Query};
use crate::ratelimit::{RateLimitConfig, RateLimiter};
use crate::world::World;

/// Shared state of one simulator.
#[derive(Debug)]
pub struct App {
    world: Mutex<World>,
    /// Rate limiter of `/v1`.
    pub limiter: Mutex<RateLimiter>,
    /// Active faults.
    pub faults: Mutex<FaultSet>,
    /// Requests per "METHOD /route/template".
    pub counts: Mutex<BTreeMap<String, u64>>,
    /// The bearer tokens the API accepts, each with the project it belongs to.
    pub tokens: Mutex<BTreeMap<String, Project>>,
    /// Requests of `/v1` per token that was accepted.
    pub token_counts: Mutex<BTreeMap<String, u64>>,
    /// The project of the tokens of [`Project::Other`]: empty at start, its own servers.
    other_world: Mutex<World>,
    /// The Robot webservice: credentials, request limit, faults and counters.
    pub robot: crate::robot::RobotSide,
}

impl App {
    /// New application state.
    pub fn new(world: World, token: String, rate_limit: RateLimitConfig) -> App {
        App {
            other_world: Mutex::new(World::new(world.action_delay)),
            world: Mutex::new(world),
            limiter: Mutex::new(RateLimiter::new(rate_limit)),
            faults: Mutex::new(FaultSet::default()),
            counts: Mutex::new(BTreeMap::new()),
            tokens: Mutex::new(BTreeMap::from([(token, Project::Own)])),
            token_counts: Mutex::new(BTreeMap::new()),
            robot: crate::robot::RobotSide::default(),
        }
    }

    /// The world with all due actions completed.
    pub fn world(&self) -> MutexGuard<'_, World> {
        let mut w = self.world.lock();
        w.advance(Utc::now());
        w
    }

    /// The world of `project`, all due actions completed.
    pub fn world_of(&self, project: Project) -> MutexGuard<'_, World> {
        match project {
            Project::Own => self.world(),
            Project::Other => {
                let mut w = self.other_world.lock();
                w.advance(Utc::now());
                w
            }
        }
    }
}

/// The project a token belongs to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Project {
    /// The simulated project: the world the admin API seeds and shows.
    #[default]
    Own,
    /// Another project of the same account: its own (empty) world, so the servers and load
    /// balancers of the simulated project are not found through its tokens.
    Other,
}

/// Per-request information the pipeline hands to handlers.
#[derive(Debug, Clone, Default)]
pub struct Ctx {
    /// Error code for the actions this request starts (fault injection).
    pub fail_action: Option<String>,
    /// `http://host/v1` as the client addressed us.
    pub base_url: String,
    /// Path below `/v1`.
    pub path: String,
    /// The project of the request's token.
    pub project: Project,
}

/// A request as the synchronous handlers see it.
#[derive(Debug)]
pub struct Req {
    /// Path parameters in order.
    pub params: Vec<String>,
    /// Query string.
    pub query: Query,
    /// Body.
    pub body: Bytes,
    /// Pipeline context.
    pub ctx: Ctx,
}

impl Req {
    /// The n-th path parameter as an ID.
    pub fn id(&self, n: usize) -> ApiResult<i64> {
        let raw = self.params.get(n).map(String::as_str).unwrap_or("");
        raw.parse::<i64>()
            .map_err(|_| ApiError::field("id", format!("invalid ID {raw:?}")))
    }

    /// The error code injected for actions, if any.
    pub fn fail(&self) -> Option<&str> {
        self.ctx.fail_action.as_deref()
    }

    /// A list answer: `{key: items, meta}` and a `Link` header.
    pub fn list(&self, key: &str, items: Vec<Value>, info: PageInfo) -> Response {
        let mut body = serde_json::Map::new();
        body.insert(key.to_string(), Value::Array(items));
        body.insert("meta".to_string(), info.meta());
        let mut resp = axum::Json(Value::Object(body)).into_response();
        let url = format!("{}{}", self.ctx.base_url, self.ctx.path);
        if let Some(link) = info.link_header(&url, &self.query)
            && let Ok(v) = HeaderValue::from_str(&link)
        {
            resp.headers_mut().insert("link", v);
        }
        resp
    }
}

/// A synchronous handler over the world.
pub type Handler = fn(&mut World, &Req) -> ApiResult<Response>;

/// JSON answer with a status.
pub fn reply(status: u16, body: Value) -> ApiResult<Response> {
    let status = axum::http::StatusCode::from_u16(status)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    Ok((status, axum::Json(body)).into_response())
}

/// 204 No Content.
pub fn no_content() -> ApiResult<Response> {
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}

impl<S: Send + Sync> axum::extract::FromRequest<S> for Req {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        use axum::extract::FromRequestParts;
        let (mut parts, body) = req.into_parts();
        let params = RawPathParams::from_request_parts(&mut parts, state)
            .await
            .map(|p| p.iter().map(|(_, v)| v.to_string()).collect())
            .unwrap_or_default();
        let ctx = parts.extensions.get::<Ctx>().cloned().unwrap_or_default();
        let query = Query::parse(parts.uri.query());
        let body = Bytes::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(|e| {
                ApiError::new("json_error", format!("cannot read request body: {e}"))
                    .into_response()
            })?;
        Ok(Req {
            params,
            query,
            body,
            ctx,
        })
    }
}

/// Wraps a synchronous handler into an axum handler.
pub fn h(
    f: Handler,
) -> impl Fn(State<Arc<App>>, Req) -> std::future::Ready<Response> + Clone + Send + Sync + 'static {
    move |State(app), req| {
        let mut world = app.world_of(req.ctx.project);
        let resp = match f(&mut world, &req) {
            Ok(r) => r,
            Err(e) => e.into_response(),
        };
        std::future::ready(resp)
    }
}

/// Route template of a `/v1` path: numeric segments become `{id}`.
pub fn route_template(path: &str) -> String {
    path.split('/')
        .map(|seg| {
            if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
                "{id}"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn set_rate_headers(headers: &mut HeaderMap, d: &crate::ratelimit::Decision) {
    for (name, value) in [
        ("ratelimit-limit", d.limit.to_string()),
        ("ratelimit-remaining", d.remaining.to_string()),
        ("ratelimit-reset", d.reset.to_string()),
    ] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    }
}

/// The `/v1` pipeline: count, rate limit, authenticate, inject faults.
pub async fn api_pipeline(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let key = format!("{} {}", method.as_str(), route_template(&path));
    *app.counts.lock().entry(key).or_insert(0) += 1;

    let decision = app
        .limiter
        .lock()
        .check(Instant::now(), Utc::now().timestamp());
    let project = authorized(&app, req.headers());
    let mut resp = if !decision.allowed {
        ApiError::new("rate_limit_exceeded", "limit of requests per hour reached").into_response()
    } else if let Some(project) = project {
        let hit = app.faults.lock().take(method.as_str(), &path);
        let hit = hit.unwrap_or_default();
        if let Some(latency) = hit.latency {
            tokio::time::sleep(latency).await;
        }
        if let Some(status) = hit.proxy_status {
            proxy_page(status)
        } else if let Some((status, code)) = hit.respond {
            ApiError::new(&code, format!("injected fault: {code}"))
                .with_status(status)
                .into_response()
        } else {
            let host = req
                .headers()
                .get("host")
                .and_then(|h| h.to_str().ok())
                .unwrap_or("localhost")
                .to_string();
            req.extensions_mut().insert(Ctx {
                fail_action: hit.fail_action,
                base_url: format!("http://{host}/v1"),
                path: path.clone(),
                project,
            });
            let answer = next.run(req).await;
            if hit.lose_reply {
                proxy_page(502)
            } else {
                answer
            }
        }
    } else {
        ApiError::new("unauthorized", "unable to authenticate").into_response()
    };
    set_rate_headers(resp.headers_mut(), &decision);
    resp
}

/// What a client sees from a proxy in front of the API (a lost answer is its 502): an HTML
/// page, no error envelope.
pub(crate) fn proxy_page(status: u16) -> Response {
    let status =
        axum::http::StatusCode::from_u16(status).unwrap_or(axum::http::StatusCode::BAD_GATEWAY);
    let mut resp = (
        status,
        format!("<html><body><h1>{status}</h1></body></html>"),
    )
        .into_response();
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/html"),
    );
    resp
}

/// The project of the request's token, counting the request for the token; `None` when the
/// token is not accepted (unknown or revoked).
fn authorized(app: &App, headers: &HeaderMap) -> Option<Project> {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))?
        .trim();
    let project = *app.tokens.lock().get(token)?;
    *app.token_counts.lock().entry(token.to_owned()).or_insert(0) += 1;
    Some(project)
}

/// 404 for unknown paths.
pub async fn not_found_fallback() -> Response {
    ApiError::new("not_found", "the requested resource does not exist").into_response()
}

/// 405 for known paths with the wrong method.
pub async fn method_not_allowed_fallback(method: Method) -> Response {
    ApiError::new(
        "method_not_allowed",
        format!("method {method} is not allowed for this resource"),
    )
    .into_response()
}

/// The full router: `/v1` (public API), `/_admin` (test control) and the metadata service.
pub fn router(app: Arc<App>) -> Router {
    let api = crate::routes::api_routes()
        .fallback(not_found_fallback)
        .method_not_allowed_fallback(method_not_allowed_fallback)
        .layer(middleware::from_fn_with_state(app.clone(), api_pipeline))
        .with_state(app.clone());
    let admin = crate::admin::admin_routes().with_state(app.clone());
    let robot = crate::robot::robot_routes(app.clone());
    let metadata = crate::metadata::metadata_routes().with_state(app);
    Router::new()
        .nest("/v1", api)
        .nest(crate::robot::ROBOT_PREFIX, robot)
        .nest("/_admin", admin)
        .nest(crate::metadata::METADATA_PREFIX, metadata)
        .fallback(not_found_fallback)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates() {
        assert_eq!(route_template("/servers"), "/servers");
        assert_eq!(route_template("/servers/42"), "/servers/{id}");
        assert_eq!(
            route_template("/networks/7/actions/add_route"),
            "/networks/{id}/actions/add_route"
        );
    }
}
