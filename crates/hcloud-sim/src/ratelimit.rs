//! The API's token bucket: 3600 requests, refilled one per second.

use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Rate limit configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum RateLimitConfig {
    /// No limit; headers still report a full bucket of 3600.
    Off,
    /// A token bucket.
    Bucket {
        /// Bucket size (`RateLimit-Limit`).
        capacity: u32,
        /// Tokens added per second.
        refill_per_second: f64,
    },
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig::Bucket {
            capacity: 3600,
            refill_per_second: 1.0,
        }
    }
}

/// What the limiter decided for one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// `RateLimit-Limit`.
    pub limit: u32,
    /// `RateLimit-Remaining`.
    pub remaining: u32,
    /// `RateLimit-Reset`: unix time (seconds) when the bucket is full again.
    pub reset: i64,
}

/// A token bucket.
#[derive(Debug)]
pub struct RateLimiter {
    config: RateLimitConfig,
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    /// A full bucket.
    pub fn new(config: RateLimitConfig) -> RateLimiter {
        let tokens = match config {
            RateLimitConfig::Off => 0.0,
            RateLimitConfig::Bucket { capacity, .. } => f64::from(capacity),
        };
        RateLimiter {
            config,
            tokens,
            last: Instant::now(),
        }
    }

    /// Replaces the configuration and refills the bucket.
    pub fn reconfigure(&mut self, config: RateLimitConfig) {
        *self = RateLimiter::new(config);
    }

    /// Takes one token if there is one.
    pub fn check(&mut self, now: Instant, unix_now: i64) -> Decision {
        match self.config {
            RateLimitConfig::Off => Decision {
                allowed: true,
                limit: 3600,
                remaining: 3600,
                reset: unix_now,
            },
            RateLimitConfig::Bucket {
                capacity,
                refill_per_second,
            } => {
                let cap = f64::from(capacity);
                let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
                self.last = now;
                self.tokens = (self.tokens + elapsed * refill_per_second).min(cap);
                let allowed = self.tokens >= 1.0;
                if allowed {
                    self.tokens -= 1.0;
                }
                let missing = cap - self.tokens;
                let secs_to_full = if missing <= 0.0 {
                    0
                } else if refill_per_second > 0.0 {
                    (missing / refill_per_second).ceil() as i64
                } else {
                    i64::from(u32::MAX)
                };
                Decision {
                    allowed,
                    limit: capacity,
                    remaining: self.tokens.floor().max(0.0) as u32,
                    reset: unix_now + secs_to_full,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn bucket_drains_and_refills() {
        let mut rl = RateLimiter::new(RateLimitConfig::Bucket {
            capacity: 3,
            refill_per_second: 1.0,
        });
        let t0 = Instant::now();
        let d = rl.check(t0, 1000);
        assert!(d.allowed);
        assert_eq!(d.remaining, 2);
        assert_eq!(d.reset, 1001);
        assert!(rl.check(t0, 1000).allowed);
        assert!(rl.check(t0, 1000).allowed);
        let d = rl.check(t0, 1000);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(d.reset, 1003);
        let d = rl.check(t0 + Duration::from_millis(1500), 1001);
        assert!(d.allowed);
        assert_eq!(d.remaining, 0);
    }

    #[test]
    fn off_always_allows() {
        let mut rl = RateLimiter::new(RateLimitConfig::Off);
        for _ in 0..10_000 {
            assert!(rl.check(Instant::now(), 0).allowed);
        }
    }
}
