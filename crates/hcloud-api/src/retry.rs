//! Which failures are retried, and how long to wait in between.

use std::time::Duration;

use rand::Rng;

use crate::config::RetryConfig;
use crate::error::{ApiError, ErrorCode};

/// True for API errors of a `method` request worth retrying: `conflict`,
/// `rate_limit_exceeded`, `bad_gateway`, `timeout`, and 502/504 answers without an error body.
/// `locked` is never retried here: the caller has to wait for the running action instead.
///
/// A POST is retried only on `conflict` and `rate_limit_exceeded`, the answers that say it
/// was not carried out. A gateway error or timeout may come after the API acted (the answer
/// was lost on the way back), and a second POST could create a second load balancer or add a
/// route twice; the caller reads the state again instead.
pub fn is_retryable_api_error(error: &ApiError, method: &reqwest::Method) -> bool {
    match &error.code {
        ErrorCode::Conflict | ErrorCode::RateLimitExceeded => true,
        _ if *method == reqwest::Method::POST => false,
        ErrorCode::BadGateway | ErrorCode::Timeout => true,
        _ => error.is_bare() && matches!(error.status, 502 | 504),
    }
}

/// True for transport failures worth retrying.
///
/// A failed connect never reached the API, so it is retried for every method. A request
/// that timed out may have been carried out: it is retried only for idempotent methods
/// (GET, PUT, DELETE, …). A POST that timed out is not, since repeating it could create a
/// second load balancer or add a target twice; the caller re-reads the state instead.
pub fn is_retryable_transport_error(error: &reqwest::Error, method: &reqwest::Method) -> bool {
    retryable_transport(error.is_connect(), error.is_timeout(), method)
}

/// The decision of [`is_retryable_transport_error`] on its inputs.
pub fn retryable_transport(connect: bool, timeout: bool, method: &reqwest::Method) -> bool {
    connect || (timeout && *method != reqwest::Method::POST)
}

/// True for an answer status that may go away by itself: 429 and every 5xx. Whether such an
/// answer is retried depends on the method and code ([`is_retryable_api_error`]); either way,
/// the next success after it counts as a recovery ([`crate::Metrics::recoveries`]).
pub fn is_transient_status(status: u16) -> bool {
    status == 429 || status >= 500
}

/// Delay before retry number `retry` (0 for the first retry): `base * 2^retry`, at most
/// `cap`; with jitter, a uniformly random point between `base` and that value, so that many
/// clients failing together do not retry together. (This crate stands alone; the controllers
/// above it share `cloud_provider::runtime::workqueue::Backoff`.)
pub fn backoff_delay(config: &RetryConfig, retry: u32) -> Duration {
    let factor = 2u32.checked_pow(retry.min(31)).unwrap_or(u32::MAX);
    let delay = config
        .base
        .checked_mul(factor)
        .unwrap_or(config.cap)
        .min(config.cap);
    if !config.jitter || delay <= config.base {
        return delay;
    }
    let spread = (delay - config.base).as_secs_f64();
    config.base + Duration::from_secs_f64(rand::rng().random_range(0.0..=spread))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorDetails;

    fn api(status: u16, code: &str) -> ApiError {
        ApiError {
            status,
            code: ErrorCode::from(code),
            message: String::new(),
            details: ErrorDetails::default(),
            method: "GET".into(),
            path: "/servers".into(),
        }
    }

    #[test]
    fn classifies_api_errors() {
        for (status, code) in [
            (409, "conflict"),
            (429, "rate_limit_exceeded"),
            (502, "bad_gateway"),
            (504, "timeout"),
            (502, ""),
            (504, ""),
        ] {
            assert!(
                is_retryable_api_error(&api(status, code), &reqwest::Method::GET),
                "{status} {code}"
            );
        }
        for (status, code) in [(502, "bad_gateway"), (504, "timeout"), (502, ""), (504, "")] {
            assert!(
                !is_retryable_api_error(&api(status, code), &reqwest::Method::POST),
                "POST {status} {code}: the API may have acted"
            );
        }
        for (status, code) in [(409, "conflict"), (429, "rate_limit_exceeded")] {
            assert!(
                is_retryable_api_error(&api(status, code), &reqwest::Method::POST),
                "POST {status} {code}"
            );
        }
        for (status, code) in [
            (423, "locked"),
            (404, "not_found"),
            (401, "unauthorized"),
            (500, "server_error"),
            (503, "unavailable"),
            (500, ""),
            (422, "invalid_input"),
            (409, "uniqueness_error"),
        ] {
            assert!(
                !is_retryable_api_error(&api(status, code), &reqwest::Method::GET),
                "{status} {code}"
            );
        }
    }

    #[test]
    fn transient_statuses_are_429_and_5xx() {
        for status in [429, 500, 502, 503, 504] {
            assert!(is_transient_status(status), "{status}");
        }
        for status in [200, 201, 204, 400, 401, 404, 409, 422, 423] {
            assert!(!is_transient_status(status), "{status}");
        }
    }

    #[test]
    fn timeouts_of_posts_are_not_retried_connect_failures_are() {
        use reqwest::Method;
        for method in [Method::GET, Method::PUT, Method::DELETE] {
            assert!(
                retryable_transport(false, true, &method),
                "{method} timeout"
            );
            assert!(
                retryable_transport(true, false, &method),
                "{method} connect"
            );
        }
        assert!(!retryable_transport(false, true, &Method::POST));
        assert!(retryable_transport(true, false, &Method::POST));
        assert!(
            retryable_transport(true, true, &Method::POST),
            "connect timeout"
        );
        assert!(
            !retryable_transport(false, false, &Method::GET),
            "e.g. a broken body"
        );
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let config = RetryConfig {
            max_tries: 10,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
            jitter: false,
        };
        let delays: Vec<u64> = (0..8)
            .map(|r| backoff_delay(&config, r).as_secs())
            .collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff_delay(&config, 40), Duration::from_secs(60));
    }

    #[test]
    fn jitter_stays_between_base_and_delay() {
        let config = RetryConfig {
            jitter: true,
            ..RetryConfig::default()
        };
        for retry in 0..10 {
            let d = backoff_delay(&config, retry);
            assert!(d >= config.base, "{d:?}");
            let ceiling = (config.base * 2u32.pow(retry)).min(config.cap);
            assert!(d <= ceiling, "{d:?} > {ceiling:?}");
        }
    }
}
