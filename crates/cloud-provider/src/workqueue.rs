//! A small work queue with the semantics controllers rely on (as in client-go):
//! a key is queued at most once, never processed by two workers at a time (a key added while
//! it is processed is queued again when [`WorkQueue::done`] is called), may be added after a
//! delay, and has a per-key failure count that drives exponential backoff.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// The longest delay a key can be queued with (one day).
const MAX_DELAY: Duration = Duration::from_secs(24 * 60 * 60);

/// Exponential backoff, `base * 2^failures` capped at `max`: the one backoff of the
/// controllers, the provider and the binary (the queue's per-key retries, route creations
/// that keep failing, locked networks, start-up attempts). The API client crate, which knows
/// nothing of this framework, has its own jittered retry delay (`hcloud_api::retry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// Delay after the first failure.
    pub base: Duration,
    /// Upper bound.
    pub max: Duration,
}

impl Default for Backoff {
    /// client-go's default controller limiter: 5 ms → 1000 s.
    fn default() -> Self {
        Self {
            base: Duration::from_millis(5),
            max: Duration::from_secs(1000),
        }
    }
}

impl Backoff {
    /// Delay before retry number `failures` (0-based).
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 2u32.checked_pow(failures).unwrap_or(u32::MAX);
        self.base
            .checked_mul(factor)
            .map_or(self.max, |d| d.min(self.max))
    }
}

/// client-go's overall retry limiter, combined with the per-item backoff (the longer delay
/// wins): 10 retries per second with a burst of 100, so a mass failure (every Node failing at
/// once) cannot turn into a retry storm against the cloud.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

const BUCKET_PER_SECOND: f64 = 10.0;
const BUCKET_BURST: f64 = 100.0;

impl Bucket {
    fn new(now: Instant) -> Self {
        Self {
            tokens: BUCKET_BURST,
            at: now,
        }
    }

    /// Take a token (possibly one not yet refilled) and return how long to wait for it.
    fn reserve(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * BUCKET_PER_SECOND).min(BUCKET_BURST);
        self.at = now;
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / BUCKET_PER_SECOND)
        }
    }
}

#[derive(Debug)]
struct State<K> {
    queue: VecDeque<K>,
    dirty: HashSet<K>,
    processing: HashSet<K>,
    waiting: HashMap<K, Instant>,
    failures: HashMap<K, u32>,
    bucket: Bucket,
    shut_down: bool,
}

/// The queue. Share it behind an `Arc`.
#[derive(Debug)]
pub struct WorkQueue<K> {
    state: Mutex<State<K>>,
    notify: Notify,
    backoff: Backoff,
}

impl<K: Clone + Eq + Hash> WorkQueue<K> {
    /// An empty queue using `backoff` for [`WorkQueue::add_rate_limited`].
    pub fn new(backoff: Backoff) -> Self {
        Self {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                waiting: HashMap::new(),
                failures: HashMap::new(),
                bucket: Bucket::new(Instant::now()),
                shut_down: false,
            }),
            notify: Notify::new(),
            backoff,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn add_locked(state: &mut State<K>, key: K) -> bool {
        if state.shut_down || state.dirty.contains(&key) {
            return false;
        }
        state.dirty.insert(key.clone());
        if !state.processing.contains(&key) {
            state.queue.push_back(key);
            return true;
        }
        false
    }

    /// Queue `key` now.
    pub fn add(&self, key: K) {
        let queued = Self::add_locked(&mut self.lock(), key);
        if queued {
            self.notify.notify_one();
        }
    }

    /// Queue `key` after `delay` (the earliest pending deadline wins).
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        // Clamped so that no delay (e.g. a provider's retry hint) can overflow the clock.
        let deadline = Instant::now() + delay.min(MAX_DELAY);
        {
            let mut state = self.lock();
            if state.shut_down {
                return;
            }
            let entry = state.waiting.entry(key).or_insert(deadline);
            if deadline < *entry {
                *entry = deadline;
            }
        }
        // Wake a waiting worker so it recomputes its sleep.
        self.notify.notify_one();
    }

    /// Queue `key` exactly `delay` from now, replacing a pending deadline (earlier or later).
    /// Periodic controllers call it after a successful pass, so the next pass comes a full
    /// period after this one ended (sliding, like Go's `wait.Until`), whatever triggered it.
    pub fn reschedule(&self, key: K, delay: Duration) {
        self.lock().waiting.remove(&key);
        self.add_after(key, delay);
    }

    /// Queue `key` after its backoff delay (the longer of its own exponential backoff and the
    /// queue-wide 10/s bucket) and count a failure. Returns the delay.
    pub fn add_rate_limited(&self, key: K) -> Duration {
        self.add_rate_limited_at_least(key, Duration::ZERO)
    }

    /// Like [`WorkQueue::add_rate_limited`], but never sooner than `at_least` (a provider's
    /// retry-after): the delay is `max(at_least, per-key backoff, bucket)`, so a hint can only
    /// lengthen the backoff, never shortcut it. Returns the delay.
    pub fn add_rate_limited_at_least(&self, key: K, at_least: Duration) -> Duration {
        let delay = {
            let mut state = self.lock();
            let failures = state.failures.entry(key.clone()).or_insert(0);
            let per_item = self.backoff.delay(*failures);
            *failures = failures.saturating_add(1);
            per_item
                .max(state.bucket.reserve(Instant::now()))
                .max(at_least)
        };
        self.add_after(key, delay);
        delay
    }

    /// Reset the failure count of `key`.
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// Failures counted for `key` since the last [`WorkQueue::forget`].
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Next key to process; `None` once shut down. Call [`WorkQueue::done`] afterwards.
    pub async fn get(&self) -> Option<K> {
        loop {
            // Registered before the state is checked, so an `add` between the check and the
            // wait is never missed, and every idle worker is woken by its own notification.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_deadline = {
                let mut state = self.lock();
                let now = Instant::now();
                let due: Vec<K> = state
                    .waiting
                    .iter()
                    .filter(|(_, at)| **at <= now)
                    .map(|(k, _)| k.clone())
                    .collect();
                for key in due {
                    state.waiting.remove(&key);
                    Self::add_locked(&mut state, key);
                }
                if let Some(key) = state.queue.pop_front() {
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    return Some(key);
                }
                if state.shut_down {
                    return None;
                }
                state.waiting.values().min().copied()
            };
            match next_deadline {
                Some(at) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Mark `key` processed; it is queued again if it was added meanwhile.
    pub fn done(&self, key: &K) {
        let requeued = {
            let mut state = self.lock();
            state.processing.remove(key);
            if state.dirty.contains(key) && !state.shut_down {
                state.queue.push_back(key.clone());
                true
            } else {
                false
            }
        };
        if requeued {
            self.notify.notify_one();
        }
    }

    /// Stop handing out keys; waiting workers get `None`.
    pub fn shut_down(&self) {
        self.lock().shut_down = true;
        self.notify.notify_waiters();
    }

    /// Number of keys ready now.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// Whether no key is ready now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overall_bucket_allows_a_burst_of_100_then_10_per_second() {
        let start = Instant::now();
        let mut bucket = Bucket::new(start);
        for i in 0..100 {
            assert_eq!(
                bucket.reserve(start),
                Duration::ZERO,
                "retry {i} of the burst"
            );
        }
        assert_eq!(bucket.reserve(start), Duration::from_millis(100));
        assert_eq!(bucket.reserve(start), Duration::from_millis(200));
        // A second later ten tokens are back; two were promised already, eight remain.
        for i in 0..8 {
            let later = start + Duration::from_secs(1);
            assert_eq!(bucket.reserve(later), Duration::ZERO, "refilled token {i}");
        }
        assert_eq!(
            bucket.reserve(start + Duration::from_secs(1)),
            Duration::from_millis(100)
        );
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Backoff {
            base: Duration::from_millis(5),
            max: Duration::from_secs(1),
        };
        assert_eq!(b.delay(0), Duration::from_millis(5));
        assert_eq!(b.delay(1), Duration::from_millis(10));
        assert_eq!(b.delay(3), Duration::from_millis(40));
        assert_eq!(b.delay(20), Duration::from_secs(1));
        assert_eq!(b.delay(200), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn keys_are_deduplicated_and_requeued_after_done() {
        let q = WorkQueue::new(Backoff::default());
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await, Some("a"));
        // Added while processing: not handed out twice at once.
        q.add("a");
        assert_eq!(q.get().await, Some("b"));
        assert!(q.is_empty());
        q.done(&"a");
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        q.done(&"b");
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_and_rate_limited_keys_arrive_in_deadline_order() {
        let q = WorkQueue::new(Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(10),
        });
        q.add_after("late", Duration::from_secs(5));
        assert_eq!(q.add_rate_limited("x"), Duration::from_millis(100));
        let start = Instant::now();
        assert_eq!(q.get().await, Some("x"));
        assert!(start.elapsed() >= Duration::from_millis(100));
        q.done(&"x");
        assert_eq!(q.add_rate_limited("x"), Duration::from_millis(200));
        assert_eq!(q.num_requeues(&"x"), 2);
        q.forget(&"x");
        assert_eq!(q.num_requeues(&"x"), 0);
        assert_eq!(q.get().await, Some("x"));
        q.done(&"x");
        assert_eq!(q.get().await, Some("late"));
        assert!(start.elapsed() >= Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_hint_lengthens_the_backoff_but_never_shortens_it() {
        let q = WorkQueue::new(Backoff {
            base: Duration::from_secs(5),
            max: Duration::from_secs(300),
        });
        // The hint wins while it is longer than the backoff ...
        assert_eq!(
            q.add_rate_limited_at_least("lb", Duration::from_secs(7)),
            Duration::from_secs(7)
        );
        assert_eq!(
            q.add_rate_limited_at_least("lb", Duration::from_secs(7)),
            Duration::from_secs(10)
        );
        // ... and the backoff keeps growing under a constant hint.
        assert_eq!(
            q.add_rate_limited_at_least("lb", Duration::from_secs(7)),
            Duration::from_secs(20)
        );
        assert_eq!(q.num_requeues(&"lb"), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn reschedule_replaces_an_earlier_or_later_deadline() {
        let q = WorkQueue::new(Backoff::default());
        let start = Instant::now();
        q.add_after("routes", Duration::from_secs(1));
        q.reschedule("routes", Duration::from_secs(10));
        assert_eq!(q.get().await, Some("routes"));
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(10),
            "not the earlier 1 s"
        );
        q.done(&"routes");
        q.add_after("routes", Duration::from_secs(60));
        q.reschedule("routes", Duration::from_secs(5));
        let start = Instant::now();
        assert_eq!(q.get().await, Some("routes"));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test]
    async fn shut_down_releases_waiters() {
        let q = std::sync::Arc::new(WorkQueue::<String>::new(Backoff::default()));
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None);
    }
}
