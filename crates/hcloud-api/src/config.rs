//! Client configuration.

use std::fmt;
use std::time::Duration;

use crate::error::ConfigError;
use crate::metrics::Metrics;

/// Default endpoint of the public API.
pub const DEFAULT_ENDPOINT: &str = "https://api.hetzner.cloud/v1";

/// User agent sent with every request: `hcloud-ccm-rs/<crate version>`.
pub const USER_AGENT: &str = concat!("hcloud-ccm-rs/", env!("CARGO_PKG_VERSION"));

/// An API token. Its `Debug` output is redacted and it has no `Display`, so it cannot end up
/// in logs or error messages by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wraps a token (surrounding whitespace is trimmed).
    pub fn new(token: impl Into<String>) -> Self {
        Token(token.into().trim().to_owned())
    }

    /// The secret value, for the `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True if the token is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Retry policy for failed requests (the official client's policy by default).
///
/// Retried: codes `conflict`, `rate_limit_exceeded`, `bad_gateway`, `timeout`, bare 502 and
/// 504 answers, failed connects, and timeouts of GET, PUT and DELETE requests. A POST that
/// timed out is not retried (it may have been carried out; re-read the state instead).
/// Never retried: `locked` and everything else. Delays
/// grow from `base` by ×2 up to `cap`, with jitter between `base` and the computed delay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryConfig {
    /// Maximum number of tries of one request, including the first (default 5).
    pub max_tries: u32,
    /// First backoff delay (default 1 s).
    pub base: Duration,
    /// Largest backoff delay (default 60 s).
    pub cap: Duration,
    /// Randomise delays (default true).
    pub jitter: bool,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_tries: 5,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
            jitter: true,
        }
    }
}

/// Default of [`ClientConfig::rate_limit_reserve`]: 600 of the API's 3600 requests per hour.
pub const DEFAULT_RATE_LIMIT_RESERVE: u32 = 600;

/// Configuration of a [`crate::Client`].
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// API token.
    pub token: Token,
    /// Endpoint, e.g. `https://api.hetzner.cloud/v1` (no trailing slash needed).
    pub endpoint: String,
    /// User agent.
    pub user_agent: String,
    /// Retry policy.
    pub retry: RetryConfig,
    /// Requests per hour of the API's budget left to other tools (CSI driver, autoscaler,
    /// humans; default 600 of 3600). The client spends freely while the API reports more than
    /// this remaining and paces itself to the rest of the API's refill rate once it reports
    /// this much or less (at most half of `RateLimit-Limit` is reserved). 0: pace only once the
    /// API reports an empty bucket.
    pub rate_limit_reserve: u32,
    /// Longest wait for the API's own bucket after `RateLimit-Remaining: 0` (default 60 s).
    pub max_rate_limit_wait: Duration,
    /// Poll interval of the action waiter (default 500 ms).
    pub poll_interval: Duration,
    /// Timeout of one HTTP request, from sending it to its whole answer (default 15 s, the
    /// official CCM's `apiClientTimeout`).
    pub request_timeout: Duration,
    /// Connect timeout (default 10 s).
    pub connect_timeout: Duration,
    /// Metrics to record into; a fresh set when `None`.
    pub metrics: Option<Metrics>,
}

impl ClientConfig {
    /// A configuration for `token` with every other setting at its default.
    pub fn new(token: Token) -> Self {
        ClientConfig {
            token,
            endpoint: DEFAULT_ENDPOINT.to_owned(),
            user_agent: USER_AGENT.to_owned(),
            retry: RetryConfig::default(),
            rate_limit_reserve: DEFAULT_RATE_LIMIT_RESERVE,
            max_rate_limit_wait: Duration::from_secs(60),
            poll_interval: Duration::from_millis(500),
            request_timeout: Duration::from_secs(15),
            connect_timeout: Duration::from_secs(10),
            metrics: None,
        }
    }

    /// Sets the endpoint.
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = endpoint.into();
        self
    }

    /// Sets the retry policy.
    pub fn with_retry(mut self, retry: RetryConfig) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the requests per hour left to other tools (see
    /// [`ClientConfig::rate_limit_reserve`]).
    pub fn with_rate_limit_reserve(mut self, per_hour: u32) -> Self {
        self.rate_limit_reserve = per_hour;
        self
    }

    /// Sets the action poll interval.
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Sets the per-request timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the longest wait for the API's bucket after `RateLimit-Remaining: 0`.
    pub fn with_max_rate_limit_wait(mut self, wait: Duration) -> Self {
        self.max_rate_limit_wait = wait;
        self
    }
}

/// Validates an endpoint URL and strips a trailing slash.
pub(crate) fn normalize_endpoint(
    value: &str,
    variable: &'static str,
) -> Result<String, ConfigError> {
    let trimmed = value.trim().trim_end_matches('/');
    let invalid = |reason: String| ConfigError::InvalidEndpoint {
        variable,
        value: value.to_owned(),
        reason,
    };
    let url = url::Url::parse(trimmed).map_err(|e| invalid(e.to_string()))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(invalid("scheme must be http or https".to_owned()));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("must not have a query or fragment".to_owned()));
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_debug_is_redacted() {
        let token = Token::new("supersecret-token-value");
        let shown = format!("{token:?}");
        assert!(!shown.contains("supersecret"), "{shown}");
        let config = ClientConfig::new(token);
        assert!(!format!("{config:?}").contains("supersecret"));
    }
}
