//! Per-controller liveness and readiness: the [`Heartbeat`].
//!
//! A controller reports into its heartbeat when its caches synced, which watches it depends on
//! and when one of its tasks died. The binary turns each heartbeat into a `/healthz` check
//! ([`Heartbeat::liveness`]) and a `/readyz` check ([`Heartbeat::readiness`]); a controller
//! whose task died also returns from `run` early, so the process can exit non-zero.

use parking_lot::{Mutex, MutexGuard};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::informer::WatchProgress;
use super::reconcile::{self, Reconciler, Workers};
use crate::metrics::Metrics;
use crate::runtime::workqueue::WorkQueue;

#[derive(Debug, Default)]
struct State {
    synced: bool,
    dead: Option<String>,
    watches: Vec<(WatchProgress, Duration)>,
}

/// Liveness and readiness of one controller. Cheap to clone; all clones share the state.
#[derive(Clone, Debug)]
pub struct Heartbeat {
    controller: Arc<str>,
    state: Arc<Mutex<State>>,
}

impl Heartbeat {
    /// A heartbeat for `controller` (live, not yet ready).
    pub fn new(controller: &str) -> Self {
        Self {
            controller: controller.into(),
            state: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// The controller's name.
    pub fn controller(&self) -> &str {
        &self.controller
    }

    /// The controller's caches synced; it is ready.
    pub fn set_synced(&self) {
        self.lock().synced = true;
    }

    /// The controller depends on this watch: liveness fails once it is stuck (failing while the
    /// apiserver answers) for longer than `stuck_after` (the controller's resync period).
    pub fn watch(&self, progress: WatchProgress, stuck_after: Duration) {
        self.lock().watches.push((progress, stuck_after));
    }

    /// A task of the controller ended unexpectedly: liveness fails from now on.
    pub fn died(&self, why: impl Into<String>) {
        let why = why.into();
        tracing::error!(controller = %self.controller, reason = %why, "controller task died");
        let mut state = self.lock();
        if state.dead.is_none() {
            state.dead = Some(why);
        }
    }

    /// Why the controller died, if it did.
    pub fn death(&self) -> Option<String> {
        self.lock().dead.clone()
    }

    /// `Ok` while every task runs and no watch is stuck; otherwise why not.
    pub fn liveness(&self) -> Result<(), String> {
        let state = self.lock();
        if let Some(why) = &state.dead {
            return Err(format!("controller {} died: {why}", self.controller));
        }
        for (watch, after) in &state.watches {
            if let Some(why) = watch.stuck(*after) {
                return Err(why);
            }
        }
        Ok(())
    }

    /// `Ok` once the controller's caches synced.
    pub fn readiness(&self) -> Result<(), String> {
        if self.lock().synced {
            Ok(())
        } else {
            Err(format!(
                "controller {} has not synced its caches yet",
                self.controller
            ))
        }
    }
}

/// The tasks of one controller, watched: the first one to end before `shutdown` (returning or
/// panicking) is reported to the heartbeat and ends the controller.
#[derive(Debug)]
pub struct Tasks {
    heartbeat: Heartbeat,
    set: JoinSet<&'static str>,
}

impl Tasks {
    /// No tasks yet.
    pub fn new(heartbeat: Heartbeat) -> Self {
        Self {
            heartbeat,
            set: JoinSet::new(),
        }
    }

    /// Run `task`, called `name` in the report if it ends early.
    pub fn spawn(&mut self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) {
        self.set.spawn(async move {
            task.await;
            name
        });
    }

    /// Spawn the worker pool of `reconciler` over `queue` ([`reconcile::pool`], `workers` at a
    /// time) as the task `workers`, then run the controller as [`Tasks::run_until_stopped`].
    pub async fn run_pool_until_stopped<R: Reconciler + ?Sized>(
        mut self,
        reconciler: Arc<R>,
        queue: Arc<WorkQueue<String>>,
        metrics: Metrics,
        workers: Workers,
        shutdown: &CancellationToken,
    ) {
        let controller = reconciler.controller();
        let pool = reconcile::pool(
            reconciler,
            queue.clone(),
            metrics,
            shutdown.clone(),
            workers,
        );
        self.spawn("workers", pool);
        self.run_until_stopped(shutdown, &queue, controller).await;
    }

    /// Run the controller `controller` until `shutdown` or until a task ends early
    /// ([`Tasks::supervise`]), then shut its `queue` down; a clean stop is logged.
    pub async fn run_until_stopped(
        self,
        shutdown: &CancellationToken,
        queue: &crate::runtime::workqueue::WorkQueue<String>,
        controller: &'static str,
    ) {
        let clean = self.supervise(shutdown).await;
        queue.shut_down();
        if clean {
            tracing::info!(controller, "stopped");
        }
    }

    /// Wait for `shutdown` (then wait for every task and return `true`) or for a task to end
    /// early (then report it, stop the rest and return `false`).
    pub async fn supervise(mut self, shutdown: &CancellationToken) -> bool {
        let early = tokio::select! {
            () = shutdown.cancelled() => None,
            ended = self.set.join_next() => Some(ended),
        };
        let Some(ended) = early else {
            while self.set.join_next().await.is_some() {}
            return true;
        };
        if shutdown.is_cancelled() {
            while self.set.join_next().await.is_some() {}
            return true;
        }
        let why = match ended {
            Some(Ok(name)) => format!("task {name} ended"),
            Some(Err(err)) if err.is_panic() => format!("a task panicked: {err}"),
            Some(Err(err)) => format!("a task was cancelled: {err}"),
            None => "no task was running".to_owned(),
        };
        self.heartbeat.died(why);
        self.set.abort_all();
        while self.set.join_next().await.is_some() {}
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_sync_and_liveness_follows_death() {
        let beat = Heartbeat::new("service");
        assert!(beat.readiness().is_err());
        assert_eq!(beat.liveness(), Ok(()));
        beat.set_synced();
        assert_eq!(beat.readiness(), Ok(()));
        beat.died("task worker ended");
        beat.died("a later reason is not the cause");
        let err = beat.liveness().unwrap_err();
        assert!(
            err.contains("service") && err.contains("task worker ended"),
            "{err}"
        );
    }

    #[test]
    fn a_stuck_watch_fails_liveness() {
        let beat = Heartbeat::new("service");
        let progress = WatchProgress::new("services");
        beat.watch(progress.clone(), Duration::ZERO);
        progress.failed("403 Forbidden".into(), true);
        std::thread::sleep(Duration::from_millis(5));
        let err = beat.liveness().unwrap_err();
        assert!(err.contains("watch of services"), "{err}");
    }

    #[tokio::test]
    async fn a_panicking_task_is_reported_and_ends_the_rest() {
        let beat = Heartbeat::new("node");
        let mut tasks = Tasks::new(beat.clone());
        tasks.spawn("idle", std::future::pending());
        tasks.spawn("worker", async { panic!("boom") });
        let shutdown = CancellationToken::new();
        assert!(!tasks.supervise(&shutdown).await);
        let err = beat.liveness().unwrap_err();
        assert!(err.contains("panicked"), "{err}");
    }

    #[tokio::test]
    async fn shutdown_is_no_death() {
        let beat = Heartbeat::new("node");
        let mut tasks = Tasks::new(beat.clone());
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        tasks.spawn("worker", async move { token.cancelled().await });
        shutdown.cancel();
        assert!(tasks.supervise(&shutdown).await);
        assert_eq!(beat.liveness(), Ok(()));
    }
}
