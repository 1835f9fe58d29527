//! The Kubernetes client, configured like client-go's `BuildConfigFromFlags`: `--kubeconfig`
//! when given, otherwise the in-cluster service account (falling back to `KUBECONFIG` /
//! the default kubeconfig outside a cluster); `--master` overrides the server URL. Requests are
//! limited by a client-side token bucket (`--kube-api-qps`, `--kube-api-burst`), as client-go's,
//! and counted in client-go's `rest_client_requests_total` and
//! `rest_client_request_duration_seconds` ([`RestClientMetrics`]).

use parking_lot::Mutex;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use std::future::Future;

use cloud_provider::runtime::token_bucket::TokenBucket;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use tokio::time::{Instant, Sleep};

use crate::config::{KubeRateLimit, KubeSettings};
use crate::http::MetricsRegistry;

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig file could not be read or used.
    #[error("--kubeconfig {path}: {reason}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// The innermost cause (kube's errors name the path again at every level).
        reason: String,
    },
    /// Neither in-cluster configuration nor a default kubeconfig is available.
    #[error(
        "no Kubernetes configuration: not running in a cluster ({in_cluster}) and no usable \
         default kubeconfig ({kubeconfig}); pass --kubeconfig"
    )]
    NoConfig {
        /// Why the in-cluster configuration failed.
        in_cluster: String,
        /// Why the default kubeconfig failed.
        kubeconfig: String,
    },
    /// `--master` is not a URI.
    #[error("--master {0:?} is not a valid URL")]
    Master(String),
    /// The client could not be constructed (e.g. TLS setup).
    #[error("cannot create the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// The display of the last error in `error`'s chain of sources.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut last = error;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

/// Builds the client configuration.
pub async fn build_config(settings: &KubeSettings) -> Result<kube::Config, ClientError> {
    let mut config = match &settings.kubeconfig {
        Some(path) => {
            let wrap = |source: kube::config::KubeconfigError| ClientError::Kubeconfig {
                path: path.display().to_string(),
                reason: innermost(&source),
            };
            let kubeconfig = Kubeconfig::read_from(path).map_err(wrap)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(wrap)?
        }
        None => match kube::Config::incluster() {
            Ok(config) => config,
            Err(in_cluster) => kube::Config::from_kubeconfig(&KubeConfigOptions::default())
                .await
                .map_err(|kubeconfig| ClientError::NoConfig {
                    in_cluster: in_cluster.to_string(),
                    kubeconfig: kubeconfig.to_string(),
                })?,
        },
    };
    if let Some(master) = &settings.master {
        config.cluster_url = master
            .parse()
            .map_err(|_| ClientError::Master(master.clone()))?;
    }
    Ok(config)
}

/// Builds one client named `name`, rate limited by `settings.rate_limit`.
pub async fn build_client(
    settings: &KubeSettings,
    name: &str,
) -> Result<kube::Client, ClientError> {
    KubeClients::new(settings).await?.client(name)
}

/// The `User-Agent` of the client named `name`, in client-go's shape
/// (`binary/version (os/arch) name`), so the apiserver's audit log tells the users apart.
pub fn user_agent(name: &str) -> String {
    format!(
        "hcloud-ccm/v{} ({}/{}) {name}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// Makes Kubernetes clients from one configuration, as client-go's
/// `ClientBuilder.ClientOrDie(name)`: every client gets its own token bucket
/// (`--kube-api-qps`, `--kube-api-burst`) and its own user agent. So one controller's burst
/// (a route pass writing the conditions of 1000 Nodes) never queues another controller's
/// requests (a Service's status).
#[derive(Clone)]
pub struct KubeClients {
    config: kube::Config,
    rate_limit: Option<KubeRateLimit>,
    metrics: Option<RestClientMetrics>,
}

impl std::fmt::Debug for KubeClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClients")
            .field("cluster_url", &self.config.cluster_url)
            .field("rate_limit", &self.rate_limit)
            .finish_non_exhaustive()
    }
}

impl KubeClients {
    /// Reads the configuration once (kubeconfig, in-cluster account, `--master`).
    pub async fn new(settings: &KubeSettings) -> Result<Self, ClientError> {
        Ok(Self {
            config: build_config(settings).await?,
            rate_limit: settings.rate_limit,
            metrics: None,
        })
    }

    /// Count every request of the clients made from now on in `registry` (one set of series for
    /// all clients, as client-go's).
    pub fn with_metrics(mut self, registry: &MetricsRegistry) -> Self {
        let metrics = RestClientMetrics::default();
        registry.with(|r| metrics.register(r));
        self.metrics = Some(metrics);
        self
    }

    /// A new client named `name` with a full bucket of its own.
    pub fn client(&self, name: &str) -> Result<kube::Client, ClientError> {
        let mut config = self.config.clone();
        if let Ok(agent) = http::HeaderValue::from_str(&user_agent(name)) {
            config.headers.push((http::header::USER_AGENT, agent));
        }
        let host = config
            .cluster_url
            .authority()
            .map(ToString::to_string)
            .unwrap_or_default();
        let builder = ClientBuilder::try_from(config)?;
        let metrics = self.metrics.as_ref().map(|m| m.layer(&host));
        Ok(match (self.rate_limit, metrics) {
            (Some(limit), Some(metrics)) => builder
                .with_layer(&RateLimitLayer::new(limit))
                .with_layer(&metrics)
                .build(),
            (Some(limit), None) => builder.with_layer(&RateLimitLayer::new(limit)).build(),
            (None, Some(metrics)) => builder.with_layer(&metrics).build(),
            (None, None) => builder.build(),
        })
    }
}

/// Label set `{code, host, method}` of `rest_client_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    host: String,
    method: String,
}

/// Label set `{host, verb}` of `rest_client_request_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    host: String,
    verb: String,
}

fn latency_histogram() -> Histogram {
    // client-go's buckets.
    Histogram::new([
        0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
    ])
}

/// client-go's REST client metrics (`k8s.io/component-base/metrics/prometheus/restclient`) for
/// the Kubernetes clients: requests by status code (`<error>` when no response came), method and
/// apiserver host, and their latency (from sending the request to the response's headers; a
/// watch counts until its stream starts). Cheap to clone.
#[derive(Clone, Debug)]
pub struct RestClientMetrics {
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram, fn() -> Histogram>,
}

impl Default for RestClientMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
        }
    }
}

impl RestClientMetrics {
    /// Register `rest_client_requests_total` and `rest_client_request_duration_seconds`.
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            self.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            self.latency.clone(),
        );
    }

    /// A layer counting the requests of a client of the apiserver at `host`.
    pub fn layer(&self, host: &str) -> RestClientMetricsLayer {
        RestClientMetricsLayer {
            metrics: self.clone(),
            host: host.to_owned(),
        }
    }
}

/// Tower layer made by [`RestClientMetrics::layer`].
#[derive(Clone, Debug)]
pub struct RestClientMetricsLayer {
    metrics: RestClientMetrics,
    host: String,
}

impl<S> tower::Layer<S> for RestClientMetricsLayer {
    type Service = RestClientMetered<S>;

    fn layer(&self, inner: S) -> RestClientMetered<S> {
        RestClientMetered {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service made by [`RestClientMetricsLayer`].
#[derive(Clone)]
pub struct RestClientMetered<S> {
    inner: S,
    layer: RestClientMetricsLayer,
}

impl<S> std::fmt::Debug for RestClientMetered<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestClientMetered")
            .field("host", &self.layer.host)
            .finish_non_exhaustive()
    }
}

impl<S, B, R> tower::Service<http::Request<B>> for RestClientMetered<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.method().as_str().to_owned();
        let layer = self.layer.clone();
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_owned(),
            };
            let metrics = &layer.metrics;
            metrics
                .latency
                .get_or_create(&LatencyLabels {
                    host: layer.host.clone(),
                    verb: method.clone(),
                })
                .observe(started.elapsed().as_secs_f64());
            metrics
                .requests
                .get_or_create(&RequestLabels {
                    code,
                    host: layer.host,
                    method,
                })
                .inc();
            result
        })
    }
}

/// client-go's token bucket (`flowcontrol.NewTokenBucketRateLimiter`) for `limit`: starts full
/// with `burst` tokens and gains `qps` per second; a request takes one token or waits for the
/// next one, in order.
fn token_bucket(limit: KubeRateLimit, now: Instant) -> TokenBucket {
    TokenBucket::full(limit.qps, f64::from(limit.burst), now)
}

/// Tower layer putting a [`TokenBucket`] in front of the Kubernetes client's HTTP stack. Every
/// request takes one token when it starts; a watch is one request however long its stream
/// runs (a re-watch is a new request).
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Arc<Mutex<TokenBucket>>,
}

impl RateLimitLayer {
    /// A layer sharing one full bucket among the services it wraps.
    pub fn new(limit: KubeRateLimit) -> Self {
        Self {
            bucket: Arc::new(Mutex::new(token_bucket(limit, Instant::now()))),
        }
    }
}

impl<S> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            permitted: false,
        }
    }
}

/// The service made by [`RateLimitLayer`]: `poll_ready` waits for a token.
pub struct RateLimited<S> {
    inner: S,
    bucket: Arc<Mutex<TokenBucket>>,
    wait: Option<Pin<Box<Sleep>>>,
    permitted: bool,
}

impl<S> std::fmt::Debug for RateLimited<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimited")
            .field("permitted", &self.permitted)
            .finish_non_exhaustive()
    }
}

impl<S, Req> tower::Service<Req> for RateLimited<S>
where
    S: tower::Service<Req>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.permitted {
            if self.wait.is_none() {
                let delay = self.bucket.lock().reserve(Instant::now());
                if delay.is_zero() {
                    self.permitted = true;
                } else {
                    self.wait = Some(Box::pin(tokio::time::sleep(delay)));
                }
            }
            if let Some(wait) = self.wait.as_mut() {
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
                self.permitted = true;
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        self.permitted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use tower::Layer as _;

    fn limit(qps: f64, burst: u32) -> KubeRateLimit {
        KubeRateLimit { qps, burst }
    }

    /// Clients from `KubeClients` put the limit in front of every request, each with its own
    /// bucket and user agent: a client built from a kubeconfig pointing at a local stub server
    /// waits for tokens beyond its burst while a second client is served at once.
    #[tokio::test]
    async fn a_missing_kubeconfig_is_named_once_with_its_cause() {
        let settings = KubeSettings {
            kubeconfig: Some("/nonexistent/kubeconfig".into()),
            master: None,
            rate_limit: None,
        };
        let Err(err) = build_config(&settings).await else {
            panic!("a missing kubeconfig was accepted");
        };
        let text = format!("{:#}", anyhow::Error::from(err));
        assert_eq!(text.matches("/nonexistent/kubeconfig").count(), 1, "{text}");
        assert!(
            text.starts_with("--kubeconfig /nonexistent/kubeconfig: "),
            "{text}"
        );
        assert!(text.contains("No such file or directory"), "{text}");
    }

    #[tokio::test]
    async fn every_client_has_its_own_bucket_and_user_agent() {
        let agents = Arc::new(Mutex::new(Vec::<String>::new()));
        let seen = agents.clone();
        let app = axum::Router::new().fallback(move |headers: http::HeaderMap| {
            let agent = headers
                .get(http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            seen.lock().push(agent);
            async { axum::Json(serde_json::json!({"major": "1", "minor": "33"})) }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: \
                 http://{addr}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n\
                 current-context: c\nusers:\n- name: u\n  user: {{}}\n"
            ),
        )
        .unwrap();
        let settings = KubeSettings {
            kubeconfig: Some(path),
            master: None,
            rate_limit: Some(limit(10.0, 2)),
        };
        let clients = KubeClients::new(&settings).await.unwrap();
        let routes = clients.client("route-controller").unwrap();
        let services = clients.client("service-controller").unwrap();
        let started = std::time::Instant::now();
        for _ in 0..5 {
            routes.apiserver_version().await.unwrap();
        }
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(290), "{elapsed:?}");

        // The route client's bucket is empty now; the service client's is full.
        let started = std::time::Instant::now();
        services.apiserver_version().await.unwrap();
        services.apiserver_version().await.unwrap();
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_millis(150), "{elapsed:?}");

        let agents = agents.lock().clone();
        assert_eq!(agents.len(), 7);
        assert!(
            agents[..5]
                .iter()
                .all(|a| a == &user_agent("route-controller")),
            "{agents:?}"
        );
        assert!(
            agents[5..]
                .iter()
                .all(|a| a.ends_with(") service-controller")),
            "{agents:?}"
        );
        assert!(agents[0].starts_with("hcloud-ccm/v"), "{agents:?}");
    }

    /// A kube client over a stub HTTP service, built with the layer the way `build_client` adds
    /// it: requests beyond the burst wait for tokens.
    #[tokio::test]
    async fn client_requests_beyond_the_burst_wait_for_tokens() {
        let served = Arc::new(AtomicUsize::new(0));
        let counter = served.clone();
        let stub = tower::service_fn(move |_req: http::Request<kube::client::Body>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async {
                Ok::<_, Infallible>(
                    http::Response::builder()
                        .header("content-type", "application/json")
                        .body(kube::client::Body::from(b"{}".to_vec()))
                        .unwrap(),
                )
            }
        });
        let service = RateLimitLayer::new(limit(10.0, 2)).layer(stub);
        let client = ClientBuilder::new(service, "default").build();
        let started = std::time::Instant::now();
        for _ in 0..5 {
            let request = http::Request::get("/version").body(Vec::new()).unwrap();
            client.request_text(request).await.ok();
        }
        let elapsed = started.elapsed();
        assert_eq!(served.load(Ordering::SeqCst), 5);
        // 2 at once, then 3 more at 10/s.
        assert!(elapsed >= Duration::from_millis(290), "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    }
}
