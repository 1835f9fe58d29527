//! Prometheus metrics of API usage, named as the official CCM names them.
//!
//! - `hcloud_api_requests_total{code,method,api_endpoint}`: answered requests by HTTP status
//!   (every try counts; tries without an answer, e.g. timeouts, only show in the histogram)
//! - `hcloud_api_in_flight_requests`: requests waiting for an answer
//! - `hcloud_api_request_duration_seconds{method}`: request latency histogram
//! - `hcloud_api_rate_limit_remaining`: the API's remaining budget as last reported
//!
//! Beside them the client counts **recoveries** ([`Metrics::recoveries`]): an answer after one or
//! more transient failures (5xx, 429, timeouts, connection errors), the sign that the API
//! answers again. Callers that back off after transient failures watch it to retry at once.
//!
//! `api_endpoint` is a route template: numeric path segments become `-`
//! (`/servers/42/actions/poweron` → `/servers/-/actions/poweron`), so its cardinality is
//! bounded.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

/// The names (and help texts) a set of request metrics is registered under.
#[derive(Debug)]
pub(crate) struct MetricNames {
    pub(crate) requests: &'static str,
    pub(crate) requests_help: &'static str,
    pub(crate) in_flight: &'static str,
    pub(crate) in_flight_help: &'static str,
    pub(crate) duration: &'static str,
    pub(crate) duration_help: &'static str,
    pub(crate) rate_limit_remaining: Option<(&'static str, &'static str)>,
}

/// The Cloud client's families, named as hcloud-go names them.
const CLOUD_NAMES: MetricNames = MetricNames {
    requests: "hcloud_api_requests",
    requests_help: "A counter for requests to the hcloud api.",
    in_flight: "hcloud_api_in_flight_requests",
    in_flight_help: "A gauge of in-flight requests to the hcloud api.",
    duration: "hcloud_api_request_duration_seconds",
    duration_help: "A histogram of request latencies.",
    rate_limit_remaining: Some((
        "hcloud_api_rate_limit_remaining",
        "Remaining requests in the API's rate-limit bucket, as last reported.",
    )),
};

/// Labels of `hcloud_api_requests_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    /// HTTP status code, e.g. `200`.
    pub code: String,
    /// HTTP method, lower case as in the official CCM (e.g. `get`).
    pub method: String,
    /// Route template, e.g. `/servers/-`.
    pub api_endpoint: String,
}

/// Labels of `hcloud_api_request_duration_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct MethodLabels {
    /// HTTP method, lower case.
    pub method: String,
}

type HistogramFamily = Family<MethodLabels, Histogram, fn() -> Histogram>;

/// The client's metrics. Cloning shares the values; register once with
/// [`Metrics::register`].
#[derive(Debug, Clone)]
pub struct Metrics {
    requests: Family<RequestLabels, Counter>,
    in_flight: Gauge,
    duration: HistogramFamily,
    rate_limit_remaining: Gauge,
    health: Arc<Health>,
}

/// Whether the last tries failed transiently, and the recoveries counted so far.
#[derive(Debug)]
struct Health {
    failing: AtomicBool,
    recoveries: watch::Sender<u64>,
}

fn duration_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh, unregistered set of metrics.
    pub fn new() -> Self {
        Metrics {
            requests: Family::default(),
            in_flight: Gauge::default(),
            duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            rate_limit_remaining: Gauge::default(),
            health: Arc::new(Health {
                failing: AtomicBool::new(false),
                recoveries: watch::Sender::new(0),
            }),
        }
    }

    /// Registers the metrics in `registry` (use an unprefixed registry to get the official
    /// names).
    pub fn register(&self, registry: &mut Registry) {
        self.register_as(registry, &CLOUD_NAMES);
    }

    /// Registers the metrics under `names` (the Robot client's families use other names).
    pub(crate) fn register_as(&self, registry: &mut Registry, names: &MetricNames) {
        registry.register(names.requests, names.requests_help, self.requests.clone());
        registry.register(
            names.in_flight,
            names.in_flight_help,
            self.in_flight.clone(),
        );
        registry.register(names.duration, names.duration_help, self.duration.clone());
        if let Some((name, help)) = names.rate_limit_remaining {
            registry.register(name, help, self.rate_limit_remaining.clone());
        }
    }

    pub(crate) fn request_started(&self) -> InFlightGuard {
        self.in_flight.inc();
        InFlightGuard {
            gauge: self.in_flight.clone(),
        }
    }

    pub(crate) fn observe(&self, method: &str, path: &str, status: Option<u16>, seconds: f64) {
        let method = method.to_ascii_lowercase();
        if let Some(status) = status {
            self.requests
                .get_or_create(&RequestLabels {
                    code: status.to_string(),
                    method: method.clone(),
                    api_endpoint: endpoint_template(path),
                })
                .inc();
        }
        self.duration
            .get_or_create(&MethodLabels { method })
            .observe(seconds);
    }

    pub(crate) fn set_rate_limit_remaining(&self, remaining: u64) {
        self.rate_limit_remaining
            .set(i64::try_from(remaining).unwrap_or(i64::MAX));
    }

    /// A try failed in a way that may go away by itself (a 5xx or 429 answer, a timeout, a
    /// connection error).
    pub(crate) fn record_transient_failure(&self) {
        self.health.failing.store(true, Ordering::Relaxed);
    }

    /// A try was answered with success: after transient failures, that is a recovery.
    pub(crate) fn record_success(&self) {
        if self.health.failing.swap(false, Ordering::Relaxed) {
            self.health.recoveries.send_modify(|count| *count += 1);
        }
    }

    /// The number of recoveries so far, changing with each new one: a success after one or
    /// more transient failures of any request of this client (and its clones). A caller that
    /// backs off after transient failures waits for a change to retry promptly.
    pub fn recoveries(&self) -> watch::Receiver<u64> {
        self.health.recoveries.subscribe()
    }

    /// Count of answered requests with these labels (for tests and diagnostics).
    pub fn requests_total(&self, code: &str, method: &str, api_endpoint: &str) -> u64 {
        self.requests
            .get_or_create(&RequestLabels {
                code: code.to_owned(),
                method: method.to_ascii_lowercase(),
                api_endpoint: api_endpoint.to_owned(),
            })
            .get()
    }

    /// Requests currently waiting for an answer.
    pub fn in_flight(&self) -> i64 {
        self.in_flight.get()
    }

    /// Remaining API budget as last reported (0 before the first answer).
    pub fn rate_limit_remaining(&self) -> i64 {
        self.rate_limit_remaining.get()
    }
}

/// Decrements the in-flight gauge when dropped (also when the request future is cancelled).
#[derive(Debug)]
pub(crate) struct InFlightGuard {
    gauge: Gauge,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// Turns a request path into a route template: numeric segments become `-`, the query is
/// dropped.
pub fn endpoint_template(path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let mut out = String::with_capacity(path.len());
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            out.push('-');
        } else {
            out.push_str(segment);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    // These cases are the `api_endpoint` label values of the official CCM.
    #[test]
    fn templates_replace_ids() {
        assert_eq!(endpoint_template("/servers"), "/servers");
        assert_eq!(endpoint_template("/servers/42"), "/servers/-");
        assert_eq!(
            endpoint_template("/load_balancers/7/actions/add_service"),
            "/load_balancers/-/actions/add_service"
        );
        assert_eq!(endpoint_template("/actions?id=1&id=2"), "/actions");
        assert_eq!(
            endpoint_template("/load_balancer_types"),
            "/load_balancer_types"
        );
    }

    #[tokio::test]
    async fn a_success_after_transient_failures_is_one_recovery() {
        let metrics = Metrics::new();
        let mut recoveries = metrics.recoveries();
        metrics.record_success();
        assert!(!recoveries.has_changed().unwrap(), "nothing failed before");
        metrics.record_transient_failure();
        metrics.record_transient_failure();
        assert!(!recoveries.has_changed().unwrap(), "no success yet");
        metrics.record_success();
        metrics.record_success();
        assert_eq!(*recoveries.borrow_and_update(), 1);
        let clone = metrics.clone();
        clone.record_transient_failure();
        metrics.record_success();
        assert!(recoveries.has_changed().unwrap(), "clones share the count");
        assert_eq!(*recoveries.borrow_and_update(), 2);
    }

    #[test]
    fn exposes_official_names() {
        let metrics = Metrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        {
            let _guard = metrics.request_started();
            assert_eq!(metrics.in_flight(), 1);
        }
        assert_eq!(metrics.in_flight(), 0);
        metrics.observe("GET", "/servers/42", Some(200), 0.02);
        metrics.set_rate_limit_remaining(3599);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encode");
        assert!(
            text.contains(
                "hcloud_api_requests_total{code=\"200\",method=\"get\",api_endpoint=\"/servers/-\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("hcloud_api_in_flight_requests 0"), "{text}");
        assert!(
            text.contains("hcloud_api_request_duration_seconds_count{method=\"get\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("hcloud_api_rate_limit_remaining 3599"),
            "{text}"
        );
    }
}
