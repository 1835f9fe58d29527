//! Rate limiting: the client's own request budget and the API's bucket.
//!
//! [`RequestBudget`] is a token bucket on the client side, shared by every clone of a
//! client, so that a burst of work waits in the client instead of being answered with 429.
//! The client's view of the API bucket follows the API's `RateLimit-*` headers: once the API reports
//! `RateLimit-Remaining: 0`, requests are paced to the API's refill rate (derived from
//! `RateLimit-Limit` and `RateLimit-Reset`; one per second for the real API) until it
//! reports budget again.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use crate::config::RateLimitConfig;
use crate::error::ConfigError;

/// A client-side token bucket. Cloning shares the bucket.
#[derive(Clone)]
pub struct RequestBudget {
    limiter: Arc<DefaultDirectRateLimiter>,
    config: RateLimitConfig,
}

impl RequestBudget {
    /// A bucket refilling `requests_per_hour` evenly, holding at most `burst` requests.
    pub fn new(config: &RateLimitConfig) -> Result<Self, ConfigError> {
        if config.requests_per_hour == 0 {
            return Err(ConfigError::InvalidSetting {
                setting: "rate_limit.requests_per_hour",
                reason: "must be at least 1".to_owned(),
            });
        }
        let period = Duration::from_secs(3600) / config.requests_per_hour;
        let burst = NonZeroU32::new(config.burst).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::with_period(period)
            .ok_or_else(|| ConfigError::InvalidSetting {
                setting: "rate_limit.requests_per_hour",
                reason: "too large".to_owned(),
            })?
            .allow_burst(burst);
        Ok(RequestBudget {
            limiter: Arc::new(RateLimiter::direct(quota)),
            config: config.clone(),
        })
    }

    /// Waits until the budget allows one more request, and takes it.
    pub async fn acquire(&self) {
        self.limiter.until_ready().await;
    }

    /// Takes one request from the budget if available now.
    pub fn try_acquire(&self) -> bool {
        self.limiter.check().is_ok()
    }

    /// The configuration the budget was built from.
    pub fn config(&self) -> &RateLimitConfig {
        &self.config
    }
}

impl fmt::Debug for RequestBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestBudget")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Rate-limit headers of one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateLimitHeaders {
    /// `RateLimit-Limit`: size of the API's bucket.
    pub limit: Option<u64>,
    /// `RateLimit-Remaining`: requests left in the bucket.
    pub remaining: Option<u64>,
    /// `RateLimit-Reset`: unix time at which the bucket is full again.
    pub reset: Option<u64>,
}

impl RateLimitHeaders {
    /// Reads the headers (case-insensitive); missing or malformed ones are `None`.
    pub fn from_headers(headers: &http::HeaderMap) -> Self {
        let number = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        RateLimitHeaders {
            limit: number("ratelimit-limit"),
            remaining: number("ratelimit-remaining"),
            reset: number("ratelimit-reset"),
        }
    }

    /// How long until the API's bucket holds at least one request again; zero when budget
    /// remains.
    ///
    /// The bucket refills evenly and is full at `RateLimit-Reset`, so with `limit` requests
    /// missing, one comes back every `(reset - now) / limit`. `RateLimit-Reset` has whole
    /// seconds, so one second of slack is added before dividing (for the real API that is
    /// 3601 s / 3600 ≈ 1 s per request). Without a usable `RateLimit-Limit` the wait is
    /// `refill`.
    pub fn wait_for_token(&self, now: SystemTime, refill: Duration) -> Duration {
        if self.remaining != Some(0) {
            return Duration::ZERO;
        }
        let Some(reset) = self.reset else {
            return refill;
        };
        let now_secs = now
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs();
        let until_reset = Duration::from_secs(reset.saturating_sub(now_secs).saturating_add(1));
        match self.limit {
            Some(limit) if limit > 0 => until_reset / u32::try_from(limit).unwrap_or(u32::MAX),
            _ => until_reset.min(refill),
        }
    }
}

/// The API's bucket as seen through its answers. Shared by the clones of a client.
#[derive(Debug, Clone)]
pub(crate) struct ServerBucket {
    state: Arc<Mutex<BucketState>>,
    refill: Duration,
    max_wait: Duration,
}

#[derive(Debug, Default)]
struct BucketState {
    /// The last answer reported an empty bucket.
    exhausted: bool,
    /// Earliest time the next request may go out while exhausted.
    next_slot: Option<Instant>,
    /// Last reported remaining budget.
    remaining: Option<u64>,
    /// Time the API needs to refill one request, as last derived from its headers.
    interval: Duration,
}

impl ServerBucket {
    /// A tracker for a bucket refilling one request per `refill` unless its headers say
    /// otherwise; waits are capped at `max_wait`.
    pub(crate) fn new(refill: Duration, max_wait: Duration) -> Self {
        ServerBucket {
            state: Arc::new(Mutex::new(BucketState::default())),
            refill,
            max_wait,
        }
    }

    /// Records the headers of an answer.
    pub(crate) fn observe(&self, headers: &RateLimitHeaders) {
        let Some(remaining) = headers.remaining else {
            return;
        };
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.remaining = Some(remaining);
        if remaining == 0 {
            let wait = headers
                .wait_for_token(SystemTime::now(), self.refill)
                .min(self.max_wait);
            let slot = Instant::now() + wait;
            state.exhausted = true;
            state.interval = wait;
            state.next_slot = Some(state.next_slot.map_or(slot, |s| s.max(slot)));
        } else {
            state.exhausted = false;
            state.next_slot = None;
        }
    }

    /// Reserves a slot for the next request: `None` to go now, or the instant to wait for.
    /// While the bucket is exhausted, consecutive reservations are one refill apart, so
    /// concurrent callers queue instead of all hitting the API at once.
    pub(crate) fn reserve(&self) -> Option<Instant> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if !state.exhausted {
            return None;
        }
        let now = Instant::now();
        let slot = state.next_slot.map_or(now, |s| s.max(now));
        let latest = now + self.max_wait;
        state.next_slot = Some((slot + state.interval).min(latest));
        if slot > now { Some(slot) } else { None }
    }

    /// Last remaining budget reported by the API.
    pub(crate) fn remaining(&self) -> Option<u64> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remaining
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_headers() {
        let mut headers = http::HeaderMap::new();
        headers.insert("RateLimit-Limit", http::HeaderValue::from_static("3600"));
        headers.insert("ratelimit-remaining", http::HeaderValue::from_static("0"));
        headers.insert(
            "RateLimit-Reset",
            http::HeaderValue::from_static("1700000000"),
        );
        let parsed = RateLimitHeaders::from_headers(&headers);
        assert_eq!(
            parsed,
            RateLimitHeaders {
                limit: Some(3600),
                remaining: Some(0),
                reset: Some(1_700_000_000)
            }
        );
    }

    #[test]
    fn wait_for_token_uses_reset_and_refill() {
        let now = UNIX_EPOCH + Duration::from_secs(1000);
        let refill = Duration::from_secs(1);
        // The real API: 3600 requests, full again in 3600 s: one request per second.
        let api = RateLimitHeaders {
            limit: Some(3600),
            remaining: Some(0),
            reset: Some(4600),
        };
        let wait = api.wait_for_token(now, refill);
        assert!(
            wait >= Duration::from_secs(1) && wait < Duration::from_millis(1001),
            "{wait:?}"
        );
        // A small bucket refilling faster.
        let small = RateLimitHeaders {
            limit: Some(4),
            remaining: Some(0),
            reset: Some(1001),
        };
        assert_eq!(
            small.wait_for_token(now, refill),
            Duration::from_millis(500)
        );
        let no_limit = RateLimitHeaders {
            remaining: Some(0),
            reset: Some(4000),
            ..Default::default()
        };
        assert_eq!(no_limit.wait_for_token(now, refill), refill);
        let reset_now = RateLimitHeaders {
            remaining: Some(0),
            reset: Some(1000),
            ..Default::default()
        };
        assert_eq!(reset_now.wait_for_token(now, refill), refill);
        let left = RateLimitHeaders {
            remaining: Some(5),
            reset: Some(4000),
            limit: Some(3600),
        };
        assert_eq!(left.wait_for_token(now, refill), Duration::ZERO);
    }

    #[test]
    fn exhausted_bucket_paces_reservations() {
        let bucket = ServerBucket::new(Duration::from_millis(100), Duration::from_secs(5));
        assert!(bucket.reserve().is_none());
        bucket.observe(&RateLimitHeaders {
            remaining: Some(0),
            reset: None,
            limit: None,
        });
        let first = bucket.reserve().expect("wait while exhausted");
        let second = bucket.reserve().expect("queued behind the first");
        assert!(second >= first + Duration::from_millis(100));
        bucket.observe(&RateLimitHeaders {
            remaining: Some(10),
            ..Default::default()
        });
        assert!(bucket.reserve().is_none());
        assert_eq!(bucket.remaining(), Some(10));
    }

    #[tokio::test]
    async fn budget_queues_beyond_burst() {
        let budget = RequestBudget::new(&RateLimitConfig {
            requests_per_hour: 36_000, // one per 100 ms
            burst: 2,
        })
        .expect("budget");
        let shared = budget.clone();
        let start = std::time::Instant::now();
        for _ in 0..4 {
            shared.acquire().await;
        }
        // Two from the burst, then two more at 100 ms each.
        assert!(
            start.elapsed() >= Duration::from_millis(180),
            "{:?}",
            start.elapsed()
        );
        assert!(!budget.try_acquire(), "clones share one bucket");
    }

    #[test]
    fn zero_rate_is_rejected() {
        assert!(
            RequestBudget::new(&RateLimitConfig {
                requests_per_hour: 0,
                burst: 1
            })
            .is_err()
        );
    }
}
