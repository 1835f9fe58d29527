//! A small work queue with the semantics controllers rely on (as in client-go):
//! a key is queued at most once, never processed by two workers at a time (a key added while
//! it is processed is queued again when [`WorkQueue::done`] is called), may be added after a
//! delay, and has a per-key failure count that drives exponential backoff.
//!
//! A key that failed remembers the [`Category`] of its last failure. When the cloud answers
//! again after transient failures, [`WorkQueue::expedite_transient`] brings the keys waiting
//! out a backoff after a transient failure forward ([`expedite_on_recovery`] does so on each of
//! a provider's recoveries), so that a backoff grown during an outage does not outlast it.
//!
//! A queue given [`WorkQueueMetrics`] and a name ([`WorkQueue::with_metrics`]) exports
//! client-go's work-queue series under their upstream names, labelled `name`.

use parking_lot::{Mutex, MutexGuard};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::provider::Category;
use crate::runtime::token_bucket::TokenBucket;

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
    /// The same `delay` before every retry (a periodic controller's: a failure is retried
    /// one period later, as its loop would have come back to it).
    pub fn fixed(delay: Duration) -> Self {
        Self {
            base: delay,
            max: delay,
        }
    }

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
fn overall_bucket(now: Instant) -> TokenBucket {
    TokenBucket::full(10.0, 100.0, now)
}

/// Label set `{name}` of the work-queue series (the queue's name).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct QueueLabels {
    name: String,
}

fn queue_histogram() -> Histogram {
    // client-go's buckets: 10 ns … 10 s, factor 10.
    Histogram::new(exponential_buckets(1e-8, 10.0, 10))
}

/// Start times of the work in progress, per queue name; read at scrape time for
/// `workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds`.
type Running = Arc<Mutex<BTreeMap<QueueLabels, Vec<Instant>>>>;

/// client-go's work-queue metrics (`k8s.io/component-base/metrics/prometheus/workqueue`), shared
/// by every queue of one registry and labelled by queue name. Cheap to clone.
#[derive(Clone, Debug)]
pub struct WorkQueueMetrics {
    depth: Family<QueueLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    retries: Family<QueueLabels, Counter>,
    queue_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    work_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    running: Running,
}

impl Default for WorkQueueMetrics {
    fn default() -> Self {
        Self {
            depth: Family::default(),
            adds: Family::default(),
            retries: Family::default(),
            queue_duration: Family::new_with_constructor(queue_histogram),
            work_duration: Family::new_with_constructor(queue_histogram),
            running: Running::default(),
        }
    }
}

impl WorkQueueMetrics {
    /// Register `workqueue_depth`, `workqueue_adds_total`, `workqueue_retries_total`,
    /// `workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`,
    /// `workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            self.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            self.adds.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            self.retries.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            self.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            self.work_duration.clone(),
        );
        registry.register_collector(Box::new(RunningCollector(self.running.clone())));
    }

    fn instruments(&self, name: &str) -> Instruments {
        let labels = QueueLabels {
            name: name.to_owned(),
        };
        self.running.lock().entry(labels.clone()).or_default();
        Instruments {
            depth: self.depth.get_or_create(&labels).clone(),
            adds: self.adds.get_or_create(&labels).clone(),
            retries: self.retries.get_or_create(&labels).clone(),
            queue_duration: self.queue_duration.get_or_create(&labels).clone(),
            work_duration: self.work_duration.get_or_create(&labels).clone(),
            running: self.running.clone(),
            labels,
        }
    }
}

/// Encodes the two gauges that depend on the time of the scrape.
#[derive(Debug)]
struct RunningCollector(Running);

impl Collector for RunningCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let now = Instant::now();
        let running = self.0.lock();
        let series: Vec<(&QueueLabels, f64, f64)> = running
            .iter()
            .map(|(labels, starts)| {
                let ages = starts.iter().map(|at| now.saturating_duration_since(*at));
                let unfinished: f64 = ages.clone().map(|d| d.as_secs_f64()).sum();
                let longest = ages.max().unwrap_or_default().as_secs_f64();
                (labels, unfinished, longest)
            })
            .collect();
        for (name, help, pick) in [
            (
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has done that is in progress and hasn't been observed by \
                 work_duration. Large values indicate stuck threads. One can deduce the number of \
                 stuck threads by observing the rate at which this increases.",
                1,
            ),
            (
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
                2,
            ),
        ] {
            let gauge = ConstGauge::new(0.0f64);
            let mut family = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            for (labels, unfinished, longest) in &series {
                let value = if pick == 1 { *unfinished } else { *longest };
                ConstGauge::new(value).encode(family.encode_family(*labels)?)?;
            }
        }
        Ok(())
    }
}

/// One queue's handles on [`WorkQueueMetrics`].
#[derive(Debug)]
struct Instruments {
    labels: QueueLabels,
    depth: Gauge,
    adds: Counter,
    retries: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    running: Running,
}

impl Instruments {
    fn started(&self, at: Instant) {
        if let Some(starts) = self.running.lock().get_mut(&self.labels) {
            starts.push(at);
        }
    }

    fn finished(&self, started: Instant, now: Instant) {
        self.work_duration
            .observe(now.saturating_duration_since(started).as_secs_f64());
        if let Some(starts) = self.running.lock().get_mut(&self.labels)
            && let Some(i) = starts.iter().position(|at| *at == started)
        {
            starts.swap_remove(i);
        }
    }
}

/// The last failure of a key, kept until [`WorkQueue::forget`].
#[derive(Clone, Copy, Debug)]
struct LastFailure {
    category: Category,
    /// Never retried before this (the failure's retry-after hint).
    not_before: Instant,
    /// Tries brought forward since the key last succeeded (see [`WorkQueue::add_failed`]).
    expedited: u32,
}

/// The delay before the next try of a key that failed again after a recovery brought it
/// forward: it doubles with each such failure, up to `EXPEDITE_SPACING_MAX`.
///
/// The API may answer every call but some (an outage of one kind of request, one load
/// balancer answering 500): then nothing but a try of the failing object tells when it is over,
/// and every success of another call after its failure is a recovery. A key brought forward
/// so is tried 1, 2, 4 and then every 8 seconds after each further failure, so such an outage is
/// over for it at most 8 s before it notices, without a retry on every success.
const EXPEDITE_SPACING: Duration = Duration::from_secs(1);
/// The longest spacing of two expedited retries of one key.
const EXPEDITE_SPACING_MAX: Duration = Duration::from_secs(8);
/// How many tries of a key are brought forward before it succeeds again; after that it waits
/// out its backoff like a key that failed otherwise. Bounds what a persistent failure of one
/// object costs where the API answers every other call (16 tries over about 2 minutes).
const EXPEDITES_PER_FAILURE_STREAK: u32 = 16;

#[derive(Debug)]
struct State<K> {
    queue: VecDeque<K>,
    dirty: HashSet<K>,
    processing: HashSet<K>,
    waiting: HashMap<K, Instant>,
    /// The deadline a key had when it was handed out, held aside while it is processed: the
    /// processing covers what asked for it, so [`WorkQueue::reschedule`] drops it, and
    /// [`WorkQueue::done`] puts it back if nothing rescheduled the key. Deadlines asked for
    /// while a key is processed stay in `waiting`: they are new requests.
    held: HashMap<K, Instant>,
    failures: HashMap<K, u32>,
    last_failure: HashMap<K, LastFailure>,
    bucket: TokenBucket,
    shut_down: bool,
    /// With metrics: when each dirty key was added, and when each processed key was handed out.
    added_at: HashMap<K, Instant>,
    started_at: HashMap<K, Instant>,
}

/// The queue. Share it behind an `Arc`.
#[derive(Debug)]
pub struct WorkQueue<K> {
    state: Mutex<State<K>>,
    notify: Notify,
    backoff: Backoff,
    instruments: Option<Instruments>,
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
                held: HashMap::new(),
                failures: HashMap::new(),
                last_failure: HashMap::new(),
                bucket: overall_bucket(Instant::now()),
                shut_down: false,
                added_at: HashMap::new(),
                started_at: HashMap::new(),
            }),
            notify: Notify::new(),
            backoff,
            instruments: None,
        }
    }

    /// Export this queue's client-go series into `metrics`, labelled `name="<name>"`.
    pub fn with_metrics(mut self, name: &str, metrics: &WorkQueueMetrics) -> Self {
        self.instruments = Some(metrics.instruments(name));
        self
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock()
    }

    fn add_locked(&self, state: &mut State<K>, key: K) -> bool {
        if state.shut_down || state.dirty.contains(&key) {
            return false;
        }
        state.dirty.insert(key.clone());
        if let Some(m) = &self.instruments {
            // As client-go: an add counts when the key becomes dirty, and the depth is the
            // number of dirty keys (those being processed again included).
            m.adds.inc();
            m.depth
                .set(i64::try_from(state.dirty.len()).unwrap_or(i64::MAX));
            state.added_at.insert(key.clone(), Instant::now());
        }
        if !state.processing.contains(&key) {
            state.queue.push_back(key);
            return true;
        }
        false
    }

    /// Queue `key` now.
    pub fn add(&self, key: K) {
        let queued = self.add_locked(&mut self.lock(), key);
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

    /// Queue `key` `delay` from now, replacing the deadline it had when it was handed out
    /// (earlier or later). Periodic controllers call it after a successful pass, so the next
    /// pass comes a full period after this one ended (sliding, like Go's `wait.Until`),
    /// whatever triggered it. A deadline asked for while the key was being processed (a
    /// debounced watch event during the pass) is a new request and is kept if it is earlier.
    /// On a key that is not being processed, any pending deadline is replaced.
    pub fn reschedule(&self, key: K, delay: Duration) {
        {
            let mut state = self.lock();
            if state.processing.contains(&key) {
                state.held.remove(&key);
            } else {
                state.waiting.remove(&key);
            }
        }
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
        self.requeue_failed(key, None, at_least)
    }

    /// [`WorkQueue::add_rate_limited_at_least`] after a failure of `category`, remembered until
    /// [`WorkQueue::forget`]. A key whose last failure was [`Category::Transient`] is brought
    /// forward by [`WorkQueue::expedite_transient`]; once it was, each further transient failure
    /// before it succeeds is retried after `EXPEDITE_SPACING` (doubling, at most
    /// `EXPEDITE_SPACING_MAX`) instead of its backoff, `EXPEDITES_PER_FAILURE_STREAK` times
    /// at most. Returns the delay.
    pub fn add_failed(&self, key: K, category: Category, at_least: Duration) -> Duration {
        self.requeue_failed(key, Some(category), at_least)
    }

    /// Count a failure of `key` (of `category`, remembered, if given) and queue it after
    /// `max(at_least, its own delay, the bucket's)`.
    fn requeue_failed(&self, key: K, category: Option<Category>, at_least: Duration) -> Duration {
        let delay = {
            let now = Instant::now();
            let mut state = self.lock();
            if let Some(m) = &self.instruments {
                m.retries.inc();
            }
            let failures = state.failures.entry(key.clone()).or_insert(0);
            let mut own = self.backoff.delay(*failures);
            *failures = failures.saturating_add(1);
            if let Some(category) = category {
                let mut expedited = state.last_failure.get(&key).map_or(0, |l| l.expedited);
                if category == Category::Transient
                    && (1..EXPEDITES_PER_FAILURE_STREAK).contains(&expedited)
                {
                    own = own.min(Self::spacing(expedited));
                    expedited += 1;
                }
                state.last_failure.insert(
                    key.clone(),
                    LastFailure {
                        category,
                        not_before: now + at_least.min(MAX_DELAY),
                        expedited,
                    },
                );
            }
            own.max(state.bucket.reserve(now)).max(at_least)
        };
        self.add_after(key, delay);
        delay
    }

    /// Bring forward every key waiting out its backoff after a [`Category::Transient`] failure
    /// (see [`WorkQueue::add_failed`]) that was not brought forward since it last succeeded:
    /// call it when the cloud answers again after transient failures. Each key is due at once,
    /// but not before its failure's retry-after hint, and through the queue-wide bucket (10 per
    /// second after a burst of 100), so that a mass outage does not end in a retry storm.
    ///
    /// The failure counts are kept: a key that fails again goes on from where it was (on the
    /// short spacing of `EXPEDITE_SPACING` for a while, then on its backoff), one that
    /// succeeds is forgotten as usual. Keys whose last failure was of another category (a
    /// refusal, a conflict) are left alone: the cloud answering again says nothing about them.
    /// Returns how many keys were brought forward.
    pub fn expedite_transient(&self) -> usize {
        let now = Instant::now();
        let mut moved = 0;
        {
            let mut guard = self.lock();
            let State {
                waiting,
                last_failure,
                bucket,
                ..
            } = &mut *guard;
            for (key, deadline) in waiting.iter_mut() {
                let Some(last) = last_failure.get_mut(key) else {
                    continue;
                };
                if last.category != Category::Transient || last.expedited > 0 {
                    continue;
                }
                let earliest = last.not_before.max(now);
                if earliest >= *deadline {
                    continue;
                }
                let at = earliest.max(now + bucket.reserve(now));
                if at < *deadline {
                    *deadline = at;
                    last.expedited = 1;
                    moved += 1;
                }
            }
        }
        if moved > 0 {
            // Every idle worker recomputes its sleep: several keys may be due now.
            self.notify.notify_waiters();
        }
        moved
    }

    /// The delay after the failure of a key's try number `expedited` (1 for the first) brought
    /// forward: `EXPEDITE_SPACING` doubled for each but the first, at most
    /// `EXPEDITE_SPACING_MAX`.
    fn spacing(expedited: u32) -> Duration {
        Backoff {
            base: EXPEDITE_SPACING,
            max: EXPEDITE_SPACING_MAX,
        }
        .delay(expedited.saturating_sub(1))
    }

    /// Whether `key` failed (since its last [`WorkQueue::forget`]) and waits out the delay.
    pub fn backing_off(&self, key: &K) -> bool {
        let state = self.lock();
        state.waiting.contains_key(key) && state.last_failure.contains_key(key)
    }

    /// Reset the failure count of `key` (and forget its last failure).
    pub fn forget(&self, key: &K) {
        let mut state = self.lock();
        state.failures.remove(key);
        state.last_failure.remove(key);
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
                    self.add_locked(&mut state, key);
                }
                if let Some(key) = state.queue.pop_front() {
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    if let Some(at) = state.waiting.remove(&key) {
                        state.held.insert(key.clone(), at);
                    }
                    if let Some(m) = &self.instruments {
                        m.depth
                            .set(i64::try_from(state.dirty.len()).unwrap_or(i64::MAX));
                        if let Some(added) = state.added_at.remove(&key) {
                            m.queue_duration
                                .observe(now.saturating_duration_since(added).as_secs_f64());
                        }
                        state.started_at.insert(key.clone(), now);
                        m.started(now);
                    }
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
            // Nothing rescheduled the key: its deadline from before stands (a worker asleep
            // until a later one is woken below to see it).
            let restored = state.held.remove(key).is_some_and(|held| {
                let at = state.waiting.entry(key.clone()).or_insert(held);
                if held < *at {
                    *at = held;
                }
                !state.shut_down
            });
            if let (Some(m), Some(started)) = (&self.instruments, state.started_at.remove(key)) {
                m.finished(started, Instant::now());
            }
            if state.dirty.contains(key) && !state.shut_down {
                state.queue.push_back(key.clone());
                true
            } else {
                restored
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

/// Until `shutdown`: on each change of `recoveries` (a provider's count of calls that
/// succeeded after transient failures, see `CloudProvider::recoveries`), bring `queue`'s
/// transiently failed keys forward ([`WorkQueue::expedite_transient`]). Changes that come
/// while one is handled are taken together. Lives until `shutdown` also when the provider
/// drops its end.
pub async fn expedite_on_recovery<K: Clone + Eq + Hash>(
    queue: Arc<WorkQueue<K>>,
    mut recoveries: watch::Receiver<u64>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = recoveries.changed() => {
                if changed.is_err() {
                    shutdown.cancelled().await;
                    return;
                }
            }
        }
        let recovery = *recoveries.borrow_and_update();
        let moved = queue.expedite_transient();
        if moved > 0 {
            tracing::info!(
                recovery,
                keys = moved,
                "the cloud answers again; retrying what failed transiently"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overall_bucket_allows_a_burst_of_100_then_10_per_second() {
        let start = Instant::now();
        let mut bucket = overall_bucket(start);
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
        let fixed = Backoff::fixed(Duration::from_secs(5));
        assert_eq!(fixed.delay(0), Duration::from_secs(5));
        assert_eq!(fixed.delay(7), Duration::from_secs(5));
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
    async fn a_recovery_brings_forward_only_keys_that_failed_transiently() {
        let q = Arc::new(WorkQueue::new(Backoff {
            base: Duration::from_secs(100),
            max: Duration::from_secs(1000),
        }));
        let start = Instant::now();
        for (key, category, hint) in [
            ("transient", Category::Transient, 0),
            ("hinted", Category::Transient, 30),
            ("rejected", Category::Rejected, 0),
            ("conflict", Category::Conflict, 0),
        ] {
            assert_eq!(
                q.add_failed(key, category, Duration::from_secs(hint)),
                Duration::from_secs(100)
            );
        }
        q.add_after("later", Duration::from_secs(50));
        assert!(q.backing_off(&"transient") && !q.backing_off(&"later"));
        let (recovered, recoveries) = watch::channel(0u64);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(expedite_on_recovery(
            q.clone(),
            recoveries,
            shutdown.clone(),
        ));
        tokio::time::sleep(Duration::from_secs(2)).await;
        recovered.send_modify(|n| *n += 1);
        assert_eq!(q.get().await, Some("transient"));
        assert_eq!(start.elapsed(), Duration::from_secs(2), "at the recovery");
        assert_eq!(q.num_requeues(&"transient"), 1, "the failure count is kept");
        assert_eq!(q.get().await, Some("hinted"));
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(30),
            "not before its hint"
        );
        assert_eq!(q.get().await, Some("later"));
        let rest = [q.get().await, q.get().await];
        assert!(
            rest.contains(&Some("rejected")) && rest.contains(&Some("conflict")),
            "{rest:?}"
        );
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(100),
            "keys that failed otherwise wait out their backoff"
        );
        shutdown.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_that_keeps_failing_is_expedited_ever_more_seldom() {
        let q = WorkQueue::new(Backoff {
            base: Duration::from_secs(100),
            max: Duration::from_secs(1000),
        });
        let mut retried_at = Vec::new();
        let start = Instant::now();
        q.add_failed("lb", Category::Transient, Duration::ZERO);
        assert_eq!(q.expedite_transient(), 1);
        for _ in 0..EXPEDITES_PER_FAILURE_STREAK {
            // Brought forward once, and other calls succeed after each failure of this one.
            assert_eq!(q.expedite_transient(), 0, "no retry on every success");
            assert_eq!(q.get().await, Some("lb"));
            retried_at.push(start.elapsed().as_secs());
            q.add_failed("lb", Category::Transient, Duration::ZERO);
            q.done(&"lb");
        }
        assert_eq!(
            retried_at[..6],
            [0, 1, 3, 7, 15, 23],
            "spaced 1, 2, 4, 8, 8 s"
        );
        assert_eq!(retried_at.last(), Some(&103));
        assert_eq!(q.num_requeues(&"lb"), 17);
        // Enough: it waits out its backoff now, whatever the recoveries.
        assert_eq!(q.expedite_transient(), 0);
        let before = Instant::now();
        assert_eq!(q.get().await, Some("lb"));
        assert_eq!(
            before.elapsed(),
            Duration::from_secs(1000),
            "its backoff cap"
        );
        // Once it succeeds, the next outage's end brings it forward at once again.
        q.forget(&"lb");
        q.done(&"lb");
        let now = Instant::now();
        q.add_failed("lb", Category::Transient, Duration::ZERO);
        assert_eq!(q.expedite_transient(), 1);
        assert_eq!(q.get().await, Some("lb"));
        assert_eq!(now.elapsed(), Duration::ZERO);
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

    #[tokio::test(start_paused = true)]
    async fn a_deadline_asked_for_during_processing_survives_the_reschedule() {
        let q = WorkQueue::new(Backoff::default());
        q.add("routes");
        assert_eq!(q.get().await, Some("routes"));
        // A watch event during the pass asks for another pass soon...
        q.add_after("routes", Duration::from_millis(500));
        // ...and the pass, ending, schedules the next periodic one.
        q.reschedule("routes", Duration::from_secs(10));
        q.done(&"routes");
        let start = Instant::now();
        assert_eq!(q.get().await, Some("routes"));
        assert_eq!(start.elapsed(), Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_from_before_the_handout_is_replaced_or_restored() {
        let q = WorkQueue::new(Backoff::default());
        q.add_after("node", Duration::from_secs(3));
        q.add("node");
        assert_eq!(q.get().await, Some("node"));
        // Rescheduled: the 3 s deadline from before the handout goes.
        q.reschedule("node", Duration::from_secs(10));
        q.done(&"node");
        let start = Instant::now();
        assert_eq!(q.get().await, Some("node"));
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        q.done(&"node");
        // Not rescheduled: the deadline from before the handout stands.
        q.add_after("node", Duration::from_secs(3));
        q.add("node");
        assert_eq!(q.get().await, Some("node"));
        q.done(&"node");
        let start = Instant::now();
        assert_eq!(q.get().await, Some("node"));
        assert_eq!(start.elapsed(), Duration::from_secs(3));
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

    fn scrape(metrics: &WorkQueueMetrics) -> String {
        crate::metrics::exposition(|registry| metrics.register(registry))
    }

    /// The value of the series `line_start` (name and labels) in `text`.
    fn value(text: &str, line_start: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(line_start)?.trim().parse().ok())
    }

    /// Assert that each series (name and labels) of `want` has its value in `text`.
    fn expect_series(text: &str, want: &[(&str, f64)]) {
        for (series, expected) in want {
            assert_eq!(value(text, series), Some(*expected), "{series} in\n{text}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_named_queue_exports_client_gos_series() {
        let metrics = WorkQueueMetrics::default();
        let q = WorkQueue::new(Backoff::default()).with_metrics("service", &metrics);
        let other = WorkQueue::<&str>::new(Backoff::default()).with_metrics("route", &metrics);
        other.add("routes");
        q.add("a");
        q.add("a");
        q.add("b");
        let text = scrape(&metrics);
        expect_series(
            &text,
            &[
                ("workqueue_adds_total{name=\"service\"}", 2.0),
                ("workqueue_depth{name=\"service\"}", 2.0),
                ("workqueue_depth{name=\"route\"}", 1.0),
            ],
        );

        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(q.get().await, Some("a"));
        tokio::time::advance(Duration::from_secs(3)).await;
        let text = scrape(&metrics);
        expect_series(
            &text,
            &[
                ("workqueue_depth{name=\"service\"}", 1.0),
                (
                    "workqueue_queue_duration_seconds_sum{name=\"service\"}",
                    2.0,
                ),
                ("workqueue_unfinished_work_seconds{name=\"service\"}", 3.0),
                (
                    "workqueue_longest_running_processor_seconds{name=\"service\"}",
                    3.0,
                ),
                ("workqueue_unfinished_work_seconds{name=\"route\"}", 0.0),
            ],
        );
        // Added again while processed: one more add, processed again after done.
        q.add("a");
        q.done(&"a");
        let text = scrape(&metrics);
        expect_series(
            &text,
            &[
                ("workqueue_work_duration_seconds_sum{name=\"service\"}", 3.0),
                (
                    "workqueue_work_duration_seconds_count{name=\"service\"}",
                    1.0,
                ),
                ("workqueue_unfinished_work_seconds{name=\"service\"}", 0.0),
                ("workqueue_adds_total{name=\"service\"}", 3.0),
                ("workqueue_depth{name=\"service\"}", 2.0),
            ],
        );

        q.add_rate_limited("b");
        q.add_rate_limited("c");
        let text = scrape(&metrics);
        expect_series(&text, &[("workqueue_retries_total{name=\"service\"}", 2.0)]);
        for (name, kind) in [
            ("workqueue_depth", "gauge"),
            ("workqueue_adds", "counter"),
            ("workqueue_retries", "counter"),
            ("workqueue_queue_duration_seconds", "histogram"),
            ("workqueue_work_duration_seconds", "histogram"),
            ("workqueue_unfinished_work_seconds", "gauge"),
            ("workqueue_longest_running_processor_seconds", "gauge"),
        ] {
            assert!(
                text.contains(&format!("# TYPE {name} {kind}\n")),
                "{name}: {text}"
            );
        }
    }

    #[tokio::test]
    async fn a_queue_without_metrics_records_nothing() {
        let q = WorkQueue::new(Backoff::default());
        q.add("a");
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        let state = q.lock();
        assert!(state.added_at.is_empty() && state.started_at.is_empty());
    }
}
