//! The `Reconciler` shape and the worker pool that drives it from a [`WorkQueue`].
//!
//! A reconcile returns `Ok` or an error with a [`Category`] ([`ReconcileError`]); the pool
//! decides what happens next, the same way for every controller:
//!
//! - `Ok`: the key's backoff is reset.
//! - transient, conflict, not found, rejected: the key is queued again after
//!   `max(retry-after, per-key backoff)`, through the queue-wide bucket, and the retry is
//!   counted (`cloud_controller_retries_total{controller, category}`).
//! - user: [`Reconciler::user_error`] is called once (it writes the Warning) and the key is
//!   **not** queued again: it waits for the object to change.
//!
//! Every reconcile runs in the span of [`Reconciler::span`] (`service = "ns/name"`,
//! `node = "name"`), so each request logged below it names the object it was made for.
//!
//! The [`pool`] runs each reconcile as its own task, at most [`Workers`] at a time. A
//! reconcile that waits for something slow outside the process (a cloud action to finish)
//! wraps that wait in [`Workers::waiting`] of the pool's handle, which the controller hands to
//! the code it calls (see `LoadBalancer::use_workers`): the wait lends a slot to the pool, so
//! the next key starts instead of a worker sitting idle, and a slot is taken back before the
//! reconcile goes on. With one worker, a burst of Services whose load balancers each wait a
//! second for an action then takes about a second, not a second per Service.

#[cfg(test)]
use parking_lot::Mutex;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::events::error_chain;
use crate::metrics::Metrics;
use crate::provider::{self, Category};
use crate::runtime::workqueue::WorkQueue;

/// An error a reconcile can end with: what the runtime needs to know to react.
pub trait ReconcileError: std::error::Error + Send + Sync + 'static {
    /// Whether and how to retry.
    fn category(&self) -> Category;
    /// The shortest delay before the next attempt, if the cause named one.
    fn retry_after(&self) -> Option<Duration> {
        None
    }
    /// A short, stable label for `cloud_controller_reconcile_errors_total`.
    fn metric_label(&self) -> &'static str;
    /// The Warning reason of a user error.
    fn user_reason(&self) -> Option<&str> {
        None
    }
}

impl ReconcileError for provider::Error {
    fn category(&self) -> Category {
        provider::Error::category(self)
    }
    fn retry_after(&self) -> Option<Duration> {
        provider::Error::retry_after(self)
    }
    fn metric_label(&self) -> &'static str {
        provider::Error::metric_label(self)
    }
    fn user_reason(&self) -> Option<&str> {
        provider::Error::user_reason(self)
    }
}

/// The category of a Kubernetes API error: 409 is a conflict, 404 not found, anything else
/// transient.
pub fn kube_category(err: &kube::Error) -> Category {
    if is_conflict(err) {
        Category::Conflict
    } else if is_not_found(err) {
        Category::NotFound
    } else {
        Category::Transient
    }
}

/// Whether the apiserver answered 409 Conflict (a stale `resourceVersion`).
pub(crate) fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.is_conflict())
}

/// Whether the apiserver answered 404 Not Found.
pub(crate) fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.is_not_found())
}

/// What the pool did after a failed reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Queued again after this delay.
    After(Duration),
    /// Not queued again: a user error waits for the object to change.
    WaitForChange,
}

/// Queue `key` again as its error's category asks; count the retry.
pub fn requeue(
    queue: &WorkQueue<String>,
    metrics: &Metrics,
    controller: &str,
    key: &str,
    category: Category,
    retry_after: Option<Duration>,
) -> Retry {
    if !category.is_retried() {
        queue.forget(&key.to_owned());
        return Retry::WaitForChange;
    }
    metrics.record_retry(controller, category);
    Retry::After(queue.add_failed(key.to_owned(), category, retry_after.unwrap_or_default()))
}

/// One controller's reconcile of one key.
#[async_trait]
pub trait Reconciler: Send + Sync + 'static {
    /// The error a reconcile ends with.
    type Error: ReconcileError;

    /// The controller label in metrics and logs.
    fn controller(&self) -> &'static str;

    /// The span a reconcile of `key` runs in.
    fn span(&self, key: &str) -> tracing::Span {
        tracing::info_span!("reconcile", controller = self.controller(), key)
    }

    /// Bring `key` to its desired state.
    async fn reconcile(&self, key: &str) -> Result<(), Self::Error>;

    /// A user error ended the reconcile of `key`; the runtime will not retry it. Write the one
    /// Warning here.
    async fn user_error(&self, key: &str, reason: &str, err: &Self::Error);

    /// A retried error ended the reconcile of `key` (log / events beyond the runtime's own
    /// warning line). Does nothing by default.
    async fn retried_error(&self, _key: &str, _err: &Self::Error, _delay: Duration) {}
}

/// Reconcile `key` once and handle the outcome; returns what happened on failure.
pub async fn process<R: Reconciler + ?Sized>(
    reconciler: &R,
    queue: &WorkQueue<String>,
    metrics: &Metrics,
    key: &str,
) -> Option<Retry> {
    let controller = reconciler.controller();
    let span = reconciler.span(key);
    async {
        let _timer = metrics.reconcile_timer(controller);
        match reconciler.reconcile(key).await {
            Ok(()) => {
                queue.forget(&key.to_owned());
                None
            }
            Err(err) => {
                metrics.record_error(controller, err.metric_label());
                let category = err.category();
                let chain = error_chain(&err);
                let retry = requeue(queue, metrics, controller, key, category, err.retry_after());
                match retry {
                    Retry::After(delay) => {
                        tracing::warn!(error = %chain, %category, retry_in = ?delay, "reconcile failed");
                        reconciler.retried_error(key, &err, delay).await;
                    }
                    Retry::WaitForChange => {
                        let reason = err
                            .user_reason()
                            .unwrap_or(provider::REASON_INVALID_CONFIGURATION)
                            .to_owned();
                        tracing::warn!(error = %chain, %category, %reason, "reconcile failed; waiting for the object to change");
                        reconciler.user_error(key, &reason, &err).await;
                    }
                }
                Some(retry)
            }
        }
    }
    .instrument(span)
    .await
}

/// The slots of one controller's worker pool: how many of its reconciles run at once outside
/// waits for the cloud. The pool and the code its reconciles call (a provider, given the
/// handle by the controller) share it.
#[derive(Clone, Debug)]
pub struct Workers {
    slots: Arc<Semaphore>,
    count: usize,
}

impl Workers {
    /// `count` slots (at least 1).
    pub fn new(count: usize) -> Self {
        let count = count.max(1);
        Self {
            slots: Arc::new(Semaphore::new(count)),
            count,
        }
    }

    /// The number of slots.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Run `fut`, a wait for something outside this process (a cloud action, a delay), while
    /// lending one slot to the pool: the pool can start the next key, and a slot is taken back
    /// (waiting for one if need be) before this returns, so at most [`Workers::count`]
    /// reconciles work outside waits at a time. Dropped before it ends, the wait takes its
    /// loan back as soon as a slot is free.
    pub async fn waiting<F: Future>(&self, fut: F) -> F::Output {
        self.slots.add_permits(1);
        let mut loan = Loan {
            slots: &self.slots,
            open: true,
        };
        let output = fut.await;
        // The semaphore is never closed; should it be, the reconcile goes on without a slot
        // rather than failing.
        if let Ok(permit) = self.slots.acquire().await {
            permit.forget();
        }
        loan.open = false;
        output
    }
}

/// A slot lent by [`Workers::waiting`]; taken back when the wait is dropped unfinished.
struct Loan<'a> {
    slots: &'a Semaphore,
    open: bool,
}

impl Drop for Loan<'_> {
    fn drop(&mut self) {
        if self.open && self.slots.forget_permits(1) == 0 {
            // Every slot is in use: the pool keeps one more until the next loan ends. The
            // only cancellations are a shutdown's, so this does not add up.
            tracing::debug!("a cancelled wait could not take its slot back at once");
        }
    }
}

/// The worker pool of one controller: take keys from `queue` and reconcile each in its own
/// task, at most `workers` (at least 1) at a time outside [`Workers::waiting`], until `shutdown` fires
/// or the queue shuts down.
///
/// A key's reconcile is marked done ([`WorkQueue::done`]) when it ends, also when it panics
/// (logged as an error in the reconcile's span; the pool keeps running). The queue never
/// hands out a key that is being reconciled, so one key is never reconciled twice at once.
///
/// On `shutdown`, the reconciles in flight are cancelled and the pool returns once they are
/// gone. When the queue shuts down, the pool stops taking keys and returns after the
/// reconciles in flight have ended (or `shutdown` fires).
pub async fn pool<R: Reconciler + ?Sized>(
    reconciler: Arc<R>,
    queue: Arc<WorkQueue<String>>,
    metrics: Metrics,
    shutdown: CancellationToken,
    workers: Workers,
) {
    let semaphore = workers.slots.clone();
    let mut running = JoinSet::new();
    loop {
        while let Some(ended) = running.try_join_next() {
            log_join_error(reconciler.controller(), ended);
        }
        // The key is taken before a slot is free, so the pool never sits on a slot while the
        // queue is empty: a reconcile coming back from a wait could not get it.
        let next = tokio::select! {
            () = shutdown.cancelled() => break,
            next = queue.get() => next,
        };
        let Some(key) = next else {
            let drained = tokio::select! {
                () = shutdown.cancelled() => false,
                () = drain(&mut running, reconciler.controller()) => true,
            };
            if drained {
                return;
            }
            break;
        };
        let acquired = tokio::select! {
            () = shutdown.cancelled() => break,
            acquired = semaphore.clone().acquire_owned() => acquired,
        };
        let Ok(permit) = acquired else {
            // Never closed; treat it as the end of the pool rather than fail.
            queue.done(&key);
            break;
        };
        running.spawn(run_one(
            reconciler.clone(),
            queue.clone(),
            metrics.clone(),
            key,
            permit,
        ));
    }
    running.abort_all();
    while let Some(ended) = running.join_next().await {
        if let Err(err) = ended
            && !err.is_cancelled()
        {
            log_join_error(reconciler.controller(), Err(err));
        }
    }
}

/// Wait for every reconcile in `running` to end.
async fn drain(running: &mut JoinSet<()>, controller: &'static str) {
    while let Some(ended) = running.join_next().await {
        log_join_error(controller, ended);
    }
}

/// Log a reconcile task that ended other than by returning (its own panics are caught in
/// [`run_one`], so this is not expected).
fn log_join_error(controller: &'static str, ended: Result<(), JoinError>) {
    if let Err(err) = ended {
        tracing::error!(controller, error = %err, "reconcile task failed");
    }
}

/// One reconcile task: [`process`] `key` holding a slot (`permit`), then mark it done, also on
/// a panic.
async fn run_one<R: Reconciler + ?Sized>(
    reconciler: Arc<R>,
    queue: Arc<WorkQueue<String>>,
    metrics: Metrics,
    key: String,
    permit: OwnedSemaphorePermit,
) {
    let outcome = AssertUnwindSafe(process(reconciler.as_ref(), &queue, &metrics, &key))
        .catch_unwind()
        .await;
    drop(permit);
    if let Err(payload) = outcome {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".to_owned());
        reconciler.span(&key).in_scope(|| {
            tracing::error!(panic = %message, "reconcile panicked; the key is done until it is queued again");
        });
    }
    queue.done(&key);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::workqueue::Backoff;
    use std::collections::{HashMap, HashSet};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::watch;
    use tokio::time::Instant;

    struct Fails {
        error: fn() -> provider::Error,
        user_errors: Mutex<Vec<(String, String)>>,
    }

    #[async_trait]
    impl Reconciler for Fails {
        type Error = provider::Error;
        fn controller(&self) -> &'static str {
            "test"
        }
        async fn reconcile(&self, _key: &str) -> Result<(), provider::Error> {
            Err((self.error)())
        }
        async fn user_error(&self, key: &str, reason: &str, _err: &provider::Error) {
            self.user_errors
                .lock()
                .push((key.to_owned(), reason.to_owned()));
        }
    }

    fn queue() -> WorkQueue<String> {
        WorkQueue::new(Backoff {
            base: Duration::from_secs(5),
            max: Duration::from_secs(300),
        })
    }

    /// A reconcile that works `before`, waits `wait` inside [`Workers::waiting`] (if set),
    /// then works `after`, recording how many reconciles work (are outside waits) at once and
    /// whether one key was ever reconciled twice at once.
    #[derive(Default)]
    struct Timed {
        workers: std::sync::OnceLock<Workers>,
        before: Duration,
        wait: Option<Duration>,
        after: Duration,
        panic_on: Option<&'static str>,
        working: AtomicUsize,
        max_working: AtomicUsize,
        live: AtomicUsize,
        in_flight: Mutex<HashSet<String>>,
        overlaps: AtomicUsize,
        runs: Mutex<HashMap<String, usize>>,
        started: watch::Sender<usize>,
        finished: watch::Sender<usize>,
    }

    /// Counts a reconcile as working while alive.
    struct Working<'a>(&'a Timed);

    impl<'a> Working<'a> {
        fn start(t: &'a Timed) -> Self {
            let now = t.working.fetch_add(1, Ordering::SeqCst) + 1;
            t.max_working.fetch_max(now, Ordering::SeqCst);
            Self(t)
        }
    }

    impl Drop for Working<'_> {
        fn drop(&mut self) {
            self.0.working.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Marks a reconcile of `key` as running until it ends, panics or is cancelled.
    struct Live<'a>(&'a Timed, String);

    impl Drop for Live<'_> {
        fn drop(&mut self) {
            self.0.live.fetch_sub(1, Ordering::SeqCst);
            self.0.in_flight.lock().remove(&self.1);
        }
    }

    impl Timed {
        async fn work(&self, how_long: Duration) {
            let _working = Working::start(self);
            tokio::time::sleep(how_long).await;
        }
    }

    #[async_trait]
    impl Reconciler for Timed {
        type Error = provider::Error;
        fn controller(&self) -> &'static str {
            "test"
        }
        async fn reconcile(&self, key: &str) -> Result<(), provider::Error> {
            self.live.fetch_add(1, Ordering::SeqCst);
            let _live = Live(self, key.to_owned());
            if !self.in_flight.lock().insert(key.to_owned()) {
                self.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            *self.runs.lock().entry(key.to_owned()).or_default() += 1;
            self.started.send_modify(|n| *n += 1);
            if self.panic_on == Some(key) {
                panic!("reconcile of {key} panicked on purpose");
            }
            self.work(self.before).await;
            if let Some(wait) = self.wait {
                let workers = self.workers.get().expect("the pool's handle");
                workers.waiting(tokio::time::sleep(wait)).await;
            }
            self.work(self.after).await;
            self.finished.send_modify(|n| *n += 1);
            Ok(())
        }
        async fn user_error(&self, _key: &str, _reason: &str, _err: &provider::Error) {}
    }

    impl Timed {
        fn runs(&self, key: &str) -> usize {
            self.runs.lock().get(key).copied().unwrap_or(0)
        }
    }

    /// A running pool: its queue, its shutdown and its task.
    struct Running {
        queue: Arc<WorkQueue<String>>,
        shutdown: CancellationToken,
        handle: tokio::task::JoinHandle<()>,
    }

    impl Running {
        /// Shut the pool down and wait for it to return.
        async fn stop(self) {
            self.shutdown.cancel();
            self.handle.await.unwrap();
        }
    }

    /// A pool of `workers` over a fresh queue holding `keys`.
    fn start(reconciler: &Arc<Timed>, workers: usize, keys: &[impl AsRef<str>]) -> Running {
        let q = Arc::new(queue());
        for key in keys {
            q.add(key.as_ref().to_owned());
        }
        let shutdown = CancellationToken::new();
        let workers = Workers::new(workers);
        let _ = reconciler.workers.set(workers.clone());
        let handle = tokio::spawn(pool(
            reconciler.clone(),
            q.clone(),
            Metrics::new(),
            shutdown.clone(),
            workers,
        ));
        Running {
            queue: q,
            shutdown,
            handle,
        }
    }

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("ns/svc-{i}")).collect()
    }

    /// Wait (at most a minute of test time) until `counter` reaches `n`.
    async fn until(counter: &watch::Sender<usize>, n: usize) {
        let mut rx = counter.subscribe();
        tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|done| *done >= n))
            .await
            .unwrap_or_else(|_| panic!("counter stuck at {} before {n}", *counter.borrow()))
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_frees_the_only_worker_for_the_next_key() {
        let r = Arc::new(Timed {
            wait: Some(Duration::from_secs(1)),
            ..Timed::default()
        });
        let t0 = Instant::now();
        let pool = start(&r, 1, &keys(20));
        until(&r.finished, 20).await;
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_millis(1500),
            "20 reconciles waiting 1 s each took {took:?} with one worker"
        );
        assert_eq!(r.max_working.load(Ordering::SeqCst), 1);
        assert_eq!(r.overlaps.load(Ordering::SeqCst), 0);
        pool.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn one_worker_runs_reconciles_that_do_not_wait_one_at_a_time() {
        let r = Arc::new(Timed {
            before: Duration::from_millis(100),
            ..Timed::default()
        });
        let t0 = Instant::now();
        let pool = start(&r, 1, &["a", "b", "c", "d", "e"]);
        until(&r.finished, 5).await;
        assert_eq!(r.max_working.load(Ordering::SeqCst), 1);
        assert!(t0.elapsed() >= Duration::from_millis(500));
        pool.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_workers_reconciles_run_outside_waiting() {
        let r = Arc::new(Timed {
            before: Duration::from_millis(10),
            wait: Some(Duration::from_secs(1)),
            after: Duration::from_millis(10),
            ..Timed::default()
        });
        let t0 = Instant::now();
        let pool = start(&r, 2, &keys(10));
        until(&r.finished, 10).await;
        let took = t0.elapsed();
        assert_eq!(r.max_working.load(Ordering::SeqCst), 2);
        assert!(
            took < Duration::from_millis(1500),
            "10 reconciles waiting 1 s each took {took:?} with two workers"
        );
        pool.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_queued_during_its_reconcile_runs_again_only_after_it() {
        let r = Arc::new(Timed {
            wait: Some(Duration::from_secs(1)),
            ..Timed::default()
        });
        let t0 = Instant::now();
        let pool = start(&r, 2, &["a"]);
        until(&r.started, 1).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        for key in ["a", "b", "a"] {
            pool.queue.add(key.to_owned());
        }
        until(&r.finished, 3).await;
        assert_eq!(r.overlaps.load(Ordering::SeqCst), 0);
        assert_eq!((r.runs("a"), r.runs("b")), (2, 1));
        assert!(
            t0.elapsed() >= Duration::from_secs(2),
            "the second reconcile of a started before the first ended"
        );
        pool.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_cancels_reconciles_in_flight_and_returns() {
        let r = Arc::new(Timed {
            wait: Some(Duration::from_secs(10)),
            after: Duration::from_secs(3600),
            ..Timed::default()
        });
        let q = Arc::new(queue());
        for key in ["a", "b", "c"] {
            q.add(key.to_owned());
        }
        let shutdown = CancellationToken::new();
        let workers = Workers::new(1);
        let _ = r.workers.set(workers.clone());
        let run = pool(r.clone(), q, Metrics::new(), shutdown.clone(), workers);
        let stop = async {
            // At 20 s one reconcile works for an hour and two wait for its slot.
            tokio::time::sleep(Duration::from_secs(20)).await;
            assert_eq!(r.live.load(Ordering::SeqCst), 3);
            assert_eq!(r.working.load(Ordering::SeqCst), 1);
            shutdown.cancel();
        };
        // Polled here rather than spawned, so nothing runs between the pool's return and the
        // check below.
        tokio::time::timeout(Duration::from_secs(21), async { tokio::join!(run, stop) })
            .await
            .expect("the pool returns promptly on shutdown");
        assert_eq!(
            r.live.load(Ordering::SeqCst),
            0,
            "reconciles still running when the pool returned"
        );
        assert_eq!(*r.finished.borrow(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_pool_ends_with_the_queue_after_reconciles_in_flight() {
        let r = Arc::new(Timed {
            wait: Some(Duration::from_secs(1)),
            ..Timed::default()
        });
        let pool = start(&r, 1, &["a"]);
        until(&r.started, 1).await;
        pool.queue.shut_down();
        tokio::time::timeout(Duration::from_secs(5), pool.handle)
            .await
            .expect("the pool ends once the queue shut down")
            .unwrap();
        assert_eq!(*r.finished.borrow(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_reconcile_marks_its_key_done_and_the_pool_goes_on() {
        let r = Arc::new(Timed {
            panic_on: Some("boom"),
            ..Timed::default()
        });
        let pool = start(&r, 1, &["boom", "ok"]);
        until(&r.finished, 1).await;
        pool.queue.add("boom".to_owned());
        until(&r.started, 3).await;
        assert_eq!(
            r.runs("boom"),
            2,
            "the key was not marked done after the panic"
        );
        assert_eq!(r.runs("ok"), 1);
        assert!(!pool.handle.is_finished());
        pool.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_wait_takes_its_slot_back() {
        let workers = Workers::new(1);
        let held = workers.slots.clone().acquire_owned().await.unwrap();
        let wait = workers.waiting(tokio::time::sleep(Duration::from_secs(10)));
        // Lent while it waits, gone with it.
        tokio::select! {
            () = wait => panic!("the wait ended early"),
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        assert_eq!(workers.slots.available_permits(), 0);
        drop(held);
        assert_eq!(workers.slots.available_permits(), 1);
        let out = workers.waiting(async { 7 }).await;
        assert_eq!(out, 7);
        assert_eq!(
            workers.slots.available_permits(),
            1,
            "a finished wait gives back its loan"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn transient_errors_back_off_past_the_retry_hint() {
        let r = Fails {
            error: || provider::Error::retry("locked", Duration::from_secs(5)),
            user_errors: Mutex::default(),
        };
        let (q, m) = (queue(), Metrics::new());
        let delays: Vec<_> = futures::future::join_all((0..4).map(|_| process(&r, &q, &m, "a/b")))
            .await
            .into_iter()
            .collect();
        assert_eq!(
            delays,
            [5, 10, 20, 40].map(|s| Some(Retry::After(Duration::from_secs(s))))
        );
        assert_eq!(m.retry_count("test", Category::Transient), 4);
        assert_eq!(m.error_count("test", "transient"), 4);
        assert!(r.user_errors.lock().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn user_errors_warn_once_and_wait_for_a_change() {
        let r = Fails {
            error: || provider::Error::user("InvalidConfiguration", "annotation x: bad"),
            user_errors: Mutex::default(),
        };
        let (q, m) = (queue(), Metrics::new());
        assert_eq!(process(&r, &q, &m, "a/b").await, Some(Retry::WaitForChange));
        assert!(q.is_empty());
        assert_eq!(q.num_requeues(&"a/b".to_owned()), 0);
        assert_eq!(m.retry_count("test", Category::User), 0);
        assert_eq!(
            *r.user_errors.lock(),
            [("a/b".to_owned(), "InvalidConfiguration".to_owned())]
        );
    }
}
