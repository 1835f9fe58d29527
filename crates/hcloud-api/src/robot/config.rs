//! Configuration of the Robot client: endpoint, credentials, timeouts, metrics.

use std::fmt;
use std::time::Duration;

use prometheus_client::registry::Registry;

use crate::config::{USER_AGENT, normalize_endpoint};
use crate::error::{ConfigError, Error};
use crate::metrics::{MetricNames, Metrics};

/// The real Robot webservice.
pub const DEFAULT_ROBOT_ENDPOINT: &str = "https://robot-ws.your-server.de";

/// The Robot password. Its `Debug` output is redacted and it has no `Display`, so it cannot
/// end up in a log line or an error text by accident. Kept as given (not trimmed: an
/// environment variable's value is used as it is; trimming a file's content is the caller's
/// business, as for `ROBOT_PASSWORD_FILE`).
#[derive(Clone, PartialEq, Eq)]
pub struct RobotPassword(String);

impl RobotPassword {
    /// Wraps a password.
    pub fn new(password: impl Into<String>) -> Self {
        RobotPassword(password.into())
    }

    /// The secret value, for the `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True if the password is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for RobotPassword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RobotPassword(<redacted>)")
    }
}

/// The Robot client's request metrics: the Cloud client's families under their own names.
///
/// - `robot_api_requests_total{code,method,api_endpoint}`: answered requests by HTTP status
///   (`api_endpoint` with numbers as `-`, e.g. `/reset/-`)
/// - `robot_api_in_flight_requests`: requests waiting for an answer
/// - `robot_api_request_duration_seconds{method}`: request latency histogram
///
/// Cloning shares the values; register once with [`RobotMetrics::register`].
#[derive(Debug, Clone, Default)]
pub struct RobotMetrics(Metrics);

const ROBOT_NAMES: MetricNames = MetricNames {
    requests: "robot_api_requests",
    requests_help: "A counter for requests to the Robot webservice",
    in_flight: "robot_api_in_flight_requests",
    in_flight_help: "A gauge of in-flight requests to the Robot webservice",
    duration: "robot_api_request_duration_seconds",
    duration_help: "A histogram of Robot webservice request latencies",
    rate_limit_remaining: None,
};

impl RobotMetrics {
    /// A fresh, unregistered set.
    pub fn new() -> Self {
        RobotMetrics::default()
    }

    /// Registers the families in `registry` (unprefixed gives the names above).
    pub fn register(&self, registry: &mut Registry) {
        self.0.register_as(registry, &ROBOT_NAMES);
    }

    /// Count of answered requests with these labels, e.g. `("200", "get", "/server")`.
    pub fn requests_total(&self, code: &str, method: &str, api_endpoint: &str) -> u64 {
        self.0.requests_total(code, method, api_endpoint)
    }

    /// Requests currently waiting for an answer.
    pub fn in_flight(&self) -> i64 {
        self.0.in_flight()
    }

    pub(crate) fn inner(&self) -> &Metrics {
        &self.0
    }
}

/// Configuration of a [`crate::robot::RobotClient`].
#[derive(Clone)]
pub struct RobotConfig {
    /// Base URL, e.g. `https://robot-ws.your-server.de` (`ROBOT_ENDPOINT`; no trailing slash
    /// needed).
    pub endpoint: String,
    /// Webservice user (`ROBOT_USER`).
    pub user: String,
    /// Webservice password (`ROBOT_PASSWORD`).
    pub password: RobotPassword,
    /// Timeout of one request, from sending it to its whole answer (default 15 s, the
    /// official CCM's client-side timeout).
    pub timeout: Duration,
    /// Connect timeout (default 10 s).
    pub connect_timeout: Duration,
    /// User agent.
    pub user_agent: String,
    /// Metrics to record into; a fresh set when `None`.
    pub metrics: Option<RobotMetrics>,
}

impl fmt::Debug for RobotConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotConfig")
            .field("endpoint", &self.endpoint)
            .field("user", &self.user)
            .field("password", &self.password)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("user_agent", &self.user_agent)
            .finish_non_exhaustive()
    }
}

impl RobotConfig {
    /// A configuration for these credentials against the real webservice, every other
    /// setting at its default.
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Self {
        RobotConfig {
            endpoint: DEFAULT_ROBOT_ENDPOINT.to_owned(),
            user: user.into(),
            password: RobotPassword::new(password),
            timeout: Duration::from_secs(15),
            connect_timeout: Duration::from_secs(10),
            user_agent: USER_AGENT.to_owned(),
            metrics: None,
        }
    }

    /// Sets the base URL (`ROBOT_ENDPOINT`): an absolute http(s) URL without query,
    /// fragment or credentials.
    pub fn endpoint(mut self, url: &str) -> Result<Self, Error> {
        self.endpoint = robot_endpoint(url)?;
        Ok(self)
    }

    /// Sets the per-request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Records into the given metrics (clones share their values).
    pub fn with_metrics(mut self, metrics: RobotMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

/// Validates a Robot base URL. A URL with credentials in it is refused without echoing it
/// (its password would end up in the error text).
pub(crate) fn robot_endpoint(value: &str) -> Result<String, ConfigError> {
    if let Ok(url) = url::Url::parse(value.trim())
        && (!url.username().is_empty() || url.password().is_some())
    {
        return Err(ConfigError::InvalidEndpoint {
            variable: "ROBOT_ENDPOINT",
            value: "<redacted>".to_owned(),
            reason: "must not contain credentials (set ROBOT_USER and ROBOT_PASSWORD)".to_owned(),
        });
    }
    normalize_endpoint(value, "ROBOT_ENDPOINT")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_is_redacted_everywhere() {
        let config = RobotConfig::new("#ws+user", "hunter2-secret");
        let shown = format!("{config:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("#ws+user"), "{shown}");
        let refused = robot_endpoint("https://u:hunter2-secret@robot.example").map(|_| ());
        let text = refused.as_ref().map_err(ToString::to_string);
        assert!(
            matches!(&text, Err(t) if !t.contains("hunter2") && t.contains("ROBOT_ENDPOINT")),
            "{text:?}"
        );
    }

    #[test]
    fn endpoints_are_checked() {
        assert_eq!(
            robot_endpoint("http://127.0.0.1:8080/robot/")
                .ok()
                .as_deref(),
            Some("http://127.0.0.1:8080/robot")
        );
        for bad in ["robot-ws.your-server.de", "ftp://x", "https://x/?a=b"] {
            let err = robot_endpoint(bad).map(|_| ()).map_err(|e| e.to_string());
            assert!(
                matches!(&err, Err(t) if t.contains("ROBOT_ENDPOINT")),
                "{bad}: {err:?}"
            );
        }
    }
}
