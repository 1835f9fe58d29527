//! Rate limiting: pacing by the API's own bucket, with a reserve for other tools.
//!
//! The API reports its bucket in every answer (`RateLimit-Limit`, `RateLimit-Remaining`,
//! `RateLimit-Reset`). The client spends freely while the API reports plenty left. Once the
//! remaining budget falls to the reserve (default 600 of the API's 3600 per hour, see
//! [`crate::config::ClientConfig::rate_limit_reserve`]), requests are spaced so that this
//! client uses only the API's refill rate minus the reserve's share (for the real API: one
//! request per 1.2 s instead of one per second), leaving the rest to the CSI driver, the
//! autoscaler and humans. Once the API reports `RateLimit-Remaining: 0`, requests wait for the
//! API's refill. Concurrent callers queue one slot apart instead of all hitting the API.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

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
        let until_reset = Duration::from_secs(secs_until(reset, now).saturating_add(1));
        match self.limit {
            Some(limit) if limit > 0 => until_reset / u32::try_from(limit).unwrap_or(u32::MAX),
            _ => until_reset.min(refill),
        }
    }
}

/// The share of the API's bucket kept for other tools, and the pace that keeps it.
///
/// `reserve_per_hour` is counted against the API's hourly budget of 3600 requests. For a
/// reported `RateLimit-Limit` the threshold is that reserve, at most half the bucket; at or
/// below it, requests are spaced by the API's refill interval times `limit / (limit -
/// threshold)`: this client then takes only its share of the refill and the bucket grows
/// back by the reserve's share. Pacing ends once the API reports half the reserve more than
/// the threshold (so the client does not spend each refilled request at once and hover at
/// the threshold with the full refill rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserve {
    /// Requests per hour kept for other users of the project (0: none).
    pub per_hour: u32,
}

impl Reserve {
    /// The remaining budget at or below which pacing starts, for a bucket of `limit`.
    pub fn threshold(&self, limit: u64) -> u64 {
        u64::from(self.per_hour).min(limit / 2)
    }

    /// The spacing of requests while `remaining` is at or below the threshold (or, while
    /// `pacing` already, below the threshold plus half of it), or `None` while the API reports
    /// plenty. `api_interval` is the API's time to refill one request.
    pub fn pace(
        &self,
        headers: &RateLimitHeaders,
        api_interval: Duration,
        pacing: bool,
    ) -> Option<Duration> {
        let (Some(limit), Some(remaining)) = (headers.limit, headers.remaining) else {
            return None;
        };
        let threshold = self.threshold(limit);
        let resume_above = if pacing {
            threshold + threshold / 2
        } else {
            threshold
        };
        if threshold == 0 || remaining > resume_above {
            return None;
        }
        Some(self.spacing(limit, api_interval))
    }

    /// The spacing that leaves the reserve's share of a bucket of `limit` to others: the
    /// API's refill interval times `limit / (limit - threshold)`. The one pacing formula,
    /// for answers ([`Reserve::pace`]) and for the client's own estimate between them.
    pub fn spacing(&self, limit: u64, api_interval: Duration) -> Duration {
        // threshold <= limit / 2, so the divisor is at least half the bucket (at least 1).
        let share = limit.saturating_sub(self.threshold(limit)).max(1);
        let factor = limit as f64 / share as f64;
        // A reset centuries ahead (only a broken answer has one) must not overflow.
        Duration::try_from_secs_f64(api_interval.as_secs_f64() * factor).unwrap_or(Duration::MAX)
    }
}

/// The API's time to refill one request, from the headers: the bucket is full at
/// `RateLimit-Reset`, `limit - remaining` requests from now. `fallback` when they do not tell
/// (a full bucket, or missing headers).
pub fn refill_interval(
    headers: &RateLimitHeaders,
    now: SystemTime,
    fallback: Duration,
) -> Duration {
    let (Some(limit), Some(remaining), Some(reset)) =
        (headers.limit, headers.remaining, headers.reset)
    else {
        return fallback;
    };
    let missing = limit.saturating_sub(remaining);
    let until_full = secs_until(reset, now);
    if missing == 0 || until_full == 0 {
        return fallback;
    }
    Duration::from_secs(until_full) / u32::try_from(missing).unwrap_or(u32::MAX)
}

/// Whole seconds from `now` until the unix time `reset` (`RateLimit-Reset`); 0 once passed.
fn secs_until(reset: u64, now: SystemTime) -> u64 {
    let now_secs = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    reset.saturating_sub(now_secs)
}

/// The API's bucket as seen through its answers. Shared by the clones of a client.
#[derive(Debug, Clone)]
pub(crate) struct ServerBucket {
    state: Arc<Mutex<BucketState>>,
    refill: Duration,
    max_wait: Duration,
    reserve: Reserve,
}

#[derive(Debug, Default)]
struct BucketState {
    /// The last answer reported an empty bucket.
    exhausted: bool,
    /// Earliest time the next request may go out while pacing.
    next_slot: Option<Instant>,
    /// Last reported remaining budget.
    remaining: Option<u64>,
    /// Last reported remaining budget minus the requests sent since (an estimate, so that a
    /// burst of concurrent requests notices the reserve before the answers tell).
    estimate: Option<u64>,
    /// Last reported bucket size.
    limit: Option<u64>,
    /// Spacing of requests while pacing (exhausted bucket or reserve reached).
    interval: Duration,
    /// Pacing to keep the reserve.
    reserving: bool,
}

impl ServerBucket {
    /// A tracker for a bucket refilling one request per `refill` unless its headers say
    /// otherwise; waits are capped at `max_wait`; `reserve` is kept for other tools.
    pub(crate) fn new(refill: Duration, max_wait: Duration, reserve: Reserve) -> Self {
        ServerBucket {
            state: Arc::new(Mutex::new(BucketState::default())),
            refill,
            max_wait,
            reserve,
        }
    }

    /// Records the headers of an answer.
    pub(crate) fn observe(&self, headers: &RateLimitHeaders) {
        let Some(remaining) = headers.remaining else {
            return;
        };
        let now = SystemTime::now();
        let mut state = self.state.lock();
        state.remaining = Some(remaining);
        state.estimate = Some(remaining);
        state.limit = headers.limit.or(state.limit);
        if remaining == 0 {
            let wait = headers.wait_for_token(now, self.refill).min(self.max_wait);
            let slot = Instant::now() + wait;
            state.exhausted = true;
            state.interval = wait;
            state.next_slot = Some(state.next_slot.map_or(slot, |s| s.max(slot)));
            return;
        }
        state.exhausted = false;
        let api_interval = refill_interval(headers, now, self.refill);
        match self.reserve.pace(headers, api_interval, state.reserving) {
            Some(pace) => {
                if !state.reserving {
                    tracing::debug!(
                        remaining,
                        pace_ms = pace.as_millis() as u64,
                        "hcloud API budget at the reserve; pacing requests"
                    );
                }
                state.reserving = true;
                state.interval = pace.min(self.max_wait);
            }
            None => {
                state.reserving = false;
                state.next_slot = None;
            }
        }
    }

    /// Reserves a slot for the next request: `None` to go now, or the instant to wait for.
    /// While the bucket is exhausted or at the reserve, consecutive reservations are one
    /// interval apart, so concurrent callers queue instead of all hitting the API at once.
    pub(crate) fn reserve(&self) -> Option<Instant> {
        let mut state = self.state.lock();
        if !state.exhausted && !state.reserving {
            // Count the request against the estimate; once the estimate reaches the reserve,
            // pace from here on (until an answer reports plenty again).
            if let (Some(estimate), Some(limit)) = (state.estimate, state.limit) {
                let next = estimate.saturating_sub(1);
                state.estimate = Some(next);
                let threshold = self.reserve.threshold(limit);
                if threshold > 0 && next <= threshold {
                    state.reserving = true;
                    state.interval = self.reserve.spacing(limit, self.refill).min(self.max_wait);
                }
            }
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
        self.state.lock().remaining
    }

    /// Whether requests are being paced to keep the reserve.
    pub(crate) fn reserving(&self) -> bool {
        self.state.lock().reserving
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

    /// Found by fuzzing (`crates/hcloud-api/tests/fuzz.rs`): a tiny bucket whose reset lies
    /// centuries ahead made the pace overflow `Duration` and panic while recording the answer.
    #[test]
    fn a_reset_centuries_ahead_paces_at_the_longest_wait() {
        let headers = RateLimitHeaders {
            limit: Some(2),
            remaining: Some(1),
            reset: Some(u64::MAX),
        };
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let interval = refill_interval(&headers, now, Duration::from_secs(1));
        let reserve = Reserve { per_hour: 600 };
        assert_eq!(reserve.pace(&headers, interval, false), Some(Duration::MAX));
        let max_wait = Duration::from_millis(50);
        let bucket = ServerBucket::new(Duration::from_secs(1), max_wait, reserve);
        bucket.observe(&headers);
        assert!(bucket.reserving());
        let state = bucket.state.lock();
        assert_eq!(state.interval, max_wait);
    }

    #[test]
    fn exhausted_bucket_paces_reservations() {
        let bucket = test_bucket(0);
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

    /// A bucket refilling one request per 100 ms, waiting at most 5 s, keeping `per_hour`.
    fn test_bucket(per_hour: u32) -> ServerBucket {
        ServerBucket::new(
            Duration::from_millis(100),
            Duration::from_secs(5),
            Reserve { per_hour },
        )
    }

    fn headers(limit: u64, remaining: u64, reset: u64) -> RateLimitHeaders {
        RateLimitHeaders {
            limit: Some(limit),
            remaining: Some(remaining),
            reset: Some(reset),
        }
    }

    #[test]
    fn reserve_paces_only_near_the_threshold() {
        let reserve = Reserve { per_hour: 600 };
        let second = Duration::from_secs(1);
        // Plenty left: no pacing, whatever the refill.
        for remaining in [3600, 3000, 601] {
            assert_eq!(
                reserve.pace(&headers(3600, remaining, 0), second, false),
                None
            );
        }
        // At the reserve and below: 3000 of the API's 3600 per hour, one per 1.2 s.
        for remaining in [600, 300, 1] {
            let pace = reserve.pace(&headers(3600, remaining, 0), second, false);
            assert_eq!(pace, Some(Duration::from_millis(1200)), "{remaining}");
        }
        // Once pacing, it goes on until the API reports 900 left.
        for (remaining, paced) in [(601, true), (900, true), (901, false)] {
            let pace = reserve.pace(&headers(3600, remaining, 0), second, true);
            assert_eq!(pace.is_some(), paced, "{remaining}");
        }
        // A small bucket: at most half of it is reserved.
        assert_eq!(reserve.threshold(10), 5);
        assert_eq!(reserve.pace(&headers(10, 6, 0), second, false), None);
        assert_eq!(
            reserve.pace(&headers(10, 5, 0), Duration::from_millis(100), false),
            Some(Duration::from_millis(200))
        );
        // No reserve, or no headers: never paced here.
        assert_eq!(
            Reserve { per_hour: 0 }.pace(&headers(3600, 1, 0), second, true),
            None
        );
        assert_eq!(
            reserve.pace(&RateLimitHeaders::default(), second, true),
            None
        );
    }

    #[test]
    fn refill_interval_follows_the_headers() {
        let now = UNIX_EPOCH + Duration::from_secs(1000);
        let fallback = Duration::from_secs(1);
        // The real API: 3000 missing, full in 3000 s.
        assert_eq!(
            refill_interval(&headers(3600, 600, 4000), now, fallback),
            Duration::from_secs(1)
        );
        // 10 missing, full in 1 s: 100 ms each.
        assert_eq!(
            refill_interval(&headers(20, 10, 1001), now, fallback),
            Duration::from_millis(100)
        );
        assert_eq!(
            refill_interval(&headers(3600, 3600, 1000), now, fallback),
            fallback
        );
        assert_eq!(
            refill_interval(&RateLimitHeaders::default(), now, fallback),
            fallback
        );
    }

    #[test]
    fn bucket_paces_at_the_reserve_and_stops_when_budget_returns() {
        let bucket = test_bucket(600);
        bucket.observe(&headers(3600, 2000, 0));
        assert!(bucket.reserve().is_none(), "plenty left");
        assert!(!bucket.reserving());
        // The API reports the reserve reached: consecutive slots are spaced.
        bucket.observe(&headers(3600, 600, 0));
        assert!(bucket.reserving());
        let _first = bucket.reserve();
        let second = bucket.reserve().expect("second waits");
        let third = bucket.reserve().expect("third waits");
        assert!(third >= second + Duration::from_millis(100), "spaced");
        // Budget back (the bucket refilled, e.g. other tools went quiet).
        bucket.observe(&headers(3600, 1500, 0));
        assert!(!bucket.reserving());
        assert!(bucket.reserve().is_none());
    }

    #[test]
    fn concurrent_requests_count_against_the_estimate() {
        let bucket = test_bucket(600);
        bucket.observe(&headers(3600, 605, 0));
        // Five requests go before any answer; the sixth would reach the reserve.
        for _ in 0..4 {
            assert!(bucket.reserve().is_none());
        }
        assert!(!bucket.reserving());
        assert!(bucket.reserve().is_none(), "the fifth still goes at once");
        assert!(bucket.reserving(), "the estimate reached the reserve");
        let _first_paced = bucket.reserve();
        assert!(bucket.reserve().is_some(), "the next one waits");
    }
}
