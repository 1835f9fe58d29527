//! client-go's token bucket (`golang.org/x/time/rate`'s `Limiter` with `Reserve`), the one
//! pacing rule of the framework and the binary: the work queue's overall retry bucket and
//! the Kubernetes client's `--kube-api-qps` / `--kube-api-burst` limit.

use std::time::Duration;

use tokio::time::Instant;

/// A token bucket's level `elapsed` after it held `tokens`: refilled at `per_second`, at most
/// `burst` (also the event spam filter's refill).
pub(crate) fn refilled(tokens: f64, elapsed: Duration, per_second: f64, burst: f64) -> f64 {
    (tokens + elapsed.as_secs_f64() * per_second).min(burst)
}

/// Starts full with `burst` tokens and gains `per_second` tokens a second, never more than
/// `burst`. Each [`TokenBucket::reserve`] takes one token; when none is left it takes the
/// next one to come and says how long to wait for it, so waiting callers are served in order.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    per_second: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`. `per_second` must be above zero; `burst` is at least one.
    pub fn full(per_second: f64, burst: f64, now: Instant) -> Self {
        let burst = burst.max(1.0);
        Self {
            per_second,
            burst,
            tokens: burst,
            at: now,
        }
    }

    /// Take a token at `now` (possibly one not yet refilled) and return how long to wait for
    /// it: zero while the bucket holds tokens.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        if now > self.at {
            self.tokens = refilled(
                self.tokens,
                now.duration_since(self.at),
                self.per_second,
                self.burst,
            );
            self.at = now;
        }
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::try_from_secs_f64(-self.tokens / self.per_second).unwrap_or(Duration::MAX)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_burst_passes_then_reservations_queue_up_and_the_bucket_refills() {
        let start = Instant::now();
        let mut bucket = TokenBucket::full(20.0, 3.0, start);
        let waits: Vec<Duration> = (0..5).map(|_| bucket.reserve(start)).collect();
        assert_eq!(waits[..3], [Duration::ZERO; 3], "the burst passes at once");
        assert_eq!(
            waits[3..],
            [Duration::from_millis(50), Duration::from_millis(100)]
        );
        // After a quiet while the bucket is full again, never fuller than the burst.
        let later = start + Duration::from_secs(10);
        let waits: Vec<Duration> = (0..4).map(|_| bucket.reserve(later)).collect();
        assert_eq!(waits[..3], [Duration::ZERO; 3]);
        assert_eq!(waits[3], Duration::from_millis(50));
    }

    #[test]
    fn a_reserved_token_is_spent_before_the_next_one_comes() {
        let start = Instant::now();
        let mut bucket = TokenBucket::full(2.0, 1.0, start);
        assert_eq!(bucket.reserve(start), Duration::ZERO);
        assert_eq!(bucket.reserve(start), Duration::from_millis(500));
        let t = start + Duration::from_millis(500);
        assert_eq!(bucket.reserve(t), Duration::from_millis(500));
        assert_eq!(
            bucket.reserve(start + Duration::from_secs(2)),
            Duration::ZERO
        );
    }

    #[test]
    fn an_empty_rate_waits_forever_instead_of_panicking() {
        let start = Instant::now();
        let mut bucket = TokenBucket::full(0.0, 1.0, start);
        assert_eq!(bucket.reserve(start), Duration::ZERO);
        assert_eq!(bucket.reserve(start), Duration::MAX);
    }
}
