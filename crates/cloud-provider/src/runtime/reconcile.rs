//! The `Reconciler` shape and the worker pool that drives it from a [`WorkQueue`].
//!
//! A reconcile returns `Ok` or an error with a [`Category`] ([`ReconcileError`]); the pool
//! decides what happens next, the same way for every controller:
//!
//! - `Ok`: the key's backoff is reset.
//! - transient, conflict, not found: the key is queued again after
//!   `max(retry-after, per-key backoff)`, through the queue-wide bucket, and the retry is
//!   counted (`cloud_controller_retries_total{controller, category}`).
//! - user: [`Reconciler::user_error`] is called once (it writes the Warning) and the key is
//!   **not** queued again: it waits for the object to change.
//!
//! Every reconcile runs in the span of [`Reconciler::span`] (`service = "ns/name"`,
//! `node = "name"`), so each request logged below it names the object it was made for.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::events::error_chain;
use crate::metrics::Metrics;
use crate::provider::{self, Category};
use crate::workqueue::WorkQueue;

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
    match err {
        kube::Error::Api(status) if status.is_conflict() => Category::Conflict,
        kube::Error::Api(status) if status.is_not_found() => Category::NotFound,
        _ => Category::Transient,
    }
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
    Retry::After(queue.add_rate_limited_at_least(key.to_owned(), retry_after.unwrap_or_default()))
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

/// One worker: take keys from `queue` and reconcile them until the queue shuts down or
/// `shutdown` fires.
pub async fn worker<R: Reconciler + ?Sized>(
    reconciler: Arc<R>,
    queue: Arc<WorkQueue<String>>,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    loop {
        let next = tokio::select! {
            () = shutdown.cancelled() => return,
            next = queue.get() => next,
        };
        let Some(key) = next else { return };
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = process(reconciler.as_ref(), &queue, &metrics, &key) => {}
        }
        queue.done(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workqueue::Backoff;
    use std::sync::Mutex;

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
                .unwrap()
                .push((key.to_owned(), reason.to_owned()));
        }
    }

    fn queue() -> WorkQueue<String> {
        WorkQueue::new(Backoff {
            base: Duration::from_secs(5),
            max: Duration::from_secs(300),
        })
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
        assert_eq!(m.error_count("test", "retry"), 4);
        assert!(r.user_errors.lock().unwrap().is_empty());
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
            *r.user_errors.lock().unwrap(),
            [("a/b".to_owned(), "InvalidConfiguration".to_owned())]
        );
    }
}
