//! HTTP endpoints: `/healthz` (alias `/livez`), `/readyz` and `/metrics`.
//!
//! - The plain-HTTP metrics address of the official Hetzner CCM (`HCLOUD_METRICS_ADDRESS`,
//!   default `:8233`) serves all three without authentication, like upstream's `/metrics`.
//! - The secure port of every cloud-controller-manager (`--secure-port`, default 10258, HTTPS)
//!   serves the same paths; paths outside `--authorization-always-allow-paths` (so `/metrics`)
//!   need a bearer token that the apiserver authenticates (TokenReview) and authorises
//!   (SubjectAccessReview, non-resource path and verb): 401 without or with a rejected token,
//!   403 when not authorised.
//!
//! `?verbose` on a health path lists every check.

pub mod auth;
pub mod health;
pub mod metrics;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use auth::{Authorizer, Decision};
pub use health::{HealthChecks, HealthReport};
pub use metrics::MetricsRegistry;

use crate::config::{ListenAddress, SecureServingSettings};

/// How long a client may take for the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors starting a server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// TLS material problem.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

/// What the endpoints report: liveness checks, readiness checks and the metrics registry.
/// Clone it freely; all clones share state.
#[derive(Debug, Clone)]
pub struct Endpoints {
    /// Checks behind `/healthz` and `/livez` (starts with `ping`).
    pub health: HealthChecks,
    /// Checks behind `/readyz` (starts with `ping`).
    pub readiness: HealthChecks,
    /// The registry behind `/metrics`.
    pub metrics: MetricsRegistry,
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints::new(MetricsRegistry::new())
    }
}

impl Endpoints {
    /// Endpoints with only `ping` checks and the given registry.
    pub fn new(metrics: MetricsRegistry) -> Self {
        Endpoints {
            health: HealthChecks::new(),
            readiness: HealthChecks::new(),
            metrics,
        }
    }

    /// The routes without any authentication.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/healthz", get(healthz))
            .route("/livez", get(healthz))
            .route("/readyz", get(readyz))
            .route("/metrics", get(metrics_handler))
            .with_state(self.clone())
    }

    /// The routes behind delegated authentication/authorisation except `always_allow` paths.
    pub fn secure_router(&self, authorizer: Arc<Authorizer>, always_allow: Vec<String>) -> Router {
        let guard = Arc::new(Guard {
            authorizer,
            always_allow,
        });
        self.router()
            .layer(middleware::from_fn_with_state(guard, authorize))
    }
}

fn wants_verbose(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    })
}

fn health_response(report: &HealthReport, what: &str, verbose: bool) -> Response {
    let status = if report.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    if !report.is_ok() {
        tracing::debug!(check = what, report = %report.render(what, true), "check failed");
    }
    let mut response = (status, report.render(what, verbose)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    response
}

async fn healthz(State(endpoints): State<Endpoints>, request: Request) -> Response {
    let verbose = wants_verbose(request.uri().query());
    health_response(&endpoints.health.evaluate(), "healthz", verbose)
}

async fn readyz(State(endpoints): State<Endpoints>, request: Request) -> Response {
    let verbose = wants_verbose(request.uri().query());
    health_response(&endpoints.readiness.evaluate(), "readyz", verbose)
}

async fn metrics_handler(State(endpoints): State<Endpoints>) -> Response {
    match endpoints.metrics.encode() {
        Ok(text) => (
            [(header::CONTENT_TYPE, metrics::OPENMETRICS_CONTENT_TYPE)],
            text,
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "encoding metrics failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[derive(Debug)]
struct Guard {
    authorizer: Arc<Authorizer>,
    always_allow: Vec<String>,
}

async fn authorize(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    if auth::path_always_allowed(&guard.always_allow, &path) {
        return next.run(request).await;
    }
    let header_value = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let token = auth::bearer_token(header_value);
    let verb = request.method().as_str().to_ascii_lowercase();
    match guard.authorizer.authorize(token, &path, &verb).await {
        Ok(Decision::Allowed { .. }) => next.run(request).await,
        Ok(Decision::Unauthenticated) => {
            (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response()
        }
        Ok(Decision::Forbidden { user, reason }) => {
            tracing::debug!(%user, %path, %verb, %reason, "request forbidden");
            (
                StatusCode::FORBIDDEN,
                format!("forbidden: User {user:?} cannot {verb} path {path:?}\n"),
            )
                .into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, %path, "authorisation check failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "authorisation check failed\n",
            )
                .into_response()
        }
    }
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    /// The bound address (useful when port 0 was asked for).
    pub local_addr: SocketAddr,
    /// Ends when the server stopped after the shutdown token fired (or failed).
    pub task: JoinHandle<()>,
}

/// Binds a Go-style listen address: an empty host means every interface (IPv6 dual-stack,
/// falling back to IPv4 where IPv6 is unavailable).
pub async fn bind(address: &ListenAddress) -> Result<TcpListener, ServeError> {
    let result = match &address.host {
        Some(host) => TcpListener::bind((host.as_str(), address.port)).await,
        None => match TcpListener::bind(("::", address.port)).await {
            Ok(listener) => Ok(listener),
            Err(_) => TcpListener::bind(("0.0.0.0", address.port)).await,
        },
    };
    result.map_err(|source| ServeError::Bind {
        address: address.to_string(),
        source,
    })
}

/// Serves [`Endpoints::router`] on plain HTTP at `address` until `shutdown` fires.
pub async fn serve_plain(
    address: &ListenAddress,
    endpoints: &Endpoints,
    shutdown: CancellationToken,
) -> Result<Server, ServeError> {
    let listener = bind(address).await?;
    let local_addr = listener.local_addr().map_err(|source| ServeError::Bind {
        address: address.to_string(),
        source,
    })?;
    let router = endpoints.router();
    let task = tokio::spawn(async move {
        let result = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "metrics server failed");
        }
    });
    tracing::info!(address = %local_addr, "serving /metrics, /healthz and /readyz over HTTP");
    Ok(Server { local_addr, task })
}

/// Serves [`Endpoints::secure_router`] over HTTPS as configured by `settings`, checking tokens
/// with `client`, until `shutdown` fires.
pub async fn serve_secure(
    settings: &SecureServingSettings,
    endpoints: &Endpoints,
    client: kube::Client,
    shutdown: CancellationToken,
) -> Result<Server, ServeError> {
    let key = match &settings.tls_files {
        Some(files) => tls::load_pem_files(files)?,
        None => tls::self_signed(&tls::self_signed_names(settings.bind_address))?,
    };
    let tls_config = tls::server_config(key)?;
    let address = SocketAddr::new(settings.bind_address, settings.port);
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Bind {
            address: address.to_string(),
            source,
        })?;
    let local_addr = listener.local_addr().map_err(|source| ServeError::Bind {
        address: address.to_string(),
        source,
    })?;
    let router = endpoints.secure_router(
        Arc::new(Authorizer::new(client)),
        settings.always_allow_paths.clone(),
    );
    let task = tokio::spawn(serve_tls(listener, tls_config, router, shutdown));
    tracing::info!(address = %local_addr, "serving /metrics, /healthz and /readyz over HTTPS");
    Ok(Server { local_addr, task })
}

/// Accept loop of the HTTPS server: one task per connection, handshakes bounded in time.
pub async fn serve_tls(
    listener: TcpListener,
    tls_config: Arc<rustls::ServerConfig>,
    router: Router,
    shutdown: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_config);
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // E.g. out of file descriptors: back off instead of spinning.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let tls_stream =
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
            let service = TowerToHyperService::new(router);
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HANDSHAKE_TIMEOUT)
                .serve_connection(TokioIo::new(tls_stream), service);
            tokio::pin!(connection);
            let result = tokio::select! {
                result = connection.as_mut() => result,
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "HTTPS connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use tower::ServiceExt as _;

    use super::*;

    async fn get_text(router: Router, uri: &str) -> (StatusCode, String) {
        let response = router
            .oneshot(
                axum::http::Request::builder()
                    .uri(uri)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn plain_router_reports_health_readiness_and_metrics() {
        let endpoints = Endpoints::default();
        let ready = endpoints
            .readiness
            .add_flag("leader-election", false, "not known yet");
        endpoints.metrics.register(
            "demo_up",
            "Demo",
            prometheus_client::metrics::gauge::Gauge::<i64>::default(),
        );
        let router = endpoints.router();
        assert_eq!(
            get_text(router.clone(), "/healthz").await,
            (StatusCode::OK, "ok".into())
        );
        assert_eq!(get_text(router.clone(), "/livez").await.0, StatusCode::OK);
        let (status, body) = get_text(router.clone(), "/readyz").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            body.contains("[-]leader-election failed: not known yet"),
            "{body}"
        );
        ready.send_replace(true);
        assert_eq!(
            get_text(router.clone(), "/readyz").await,
            (StatusCode::OK, "ok".into())
        );
        let (status, body) = get_text(router.clone(), "/readyz?verbose").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("[+]leader-election ok"), "{body}");
        let (status, body) = get_text(router, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("demo_up 0"), "{body}");
    }

    #[tokio::test]
    async fn plain_server_binds_and_stops() {
        let shutdown = CancellationToken::new();
        let server = serve_plain(
            &"127.0.0.1:0".parse().unwrap(),
            &Endpoints::default(),
            shutdown.clone(),
        )
        .await
        .unwrap();
        let mut stream = tokio::net::TcpStream::connect(server.local_addr)
            .await
            .unwrap();
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.ends_with("ok"), "{response}");
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), server.task)
            .await
            .unwrap()
            .unwrap();
    }
}
