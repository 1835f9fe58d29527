//! The diffing informer: kube-runtime's watcher and reflector store, and a feed of
//! `(old, new)` changes published after the store was updated.
//!
//! Every controller's view of the cluster comes from an [`Informer`]: the shared Node cache
//! ([`crate::NodeCache`]) and the service controller's Service watch. The informer also keeps
//! the watch's health ([`WatchProgress`]): a watch that fails while the apiserver answers (a
//! 403 after an RBAC change, say) leaves the controllers on a frozen snapshot, and that must
//! show up in `/healthz` instead of only in a log line.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::scope::WatchScope;

/// Capacity of a change feed; a subscriber that falls further behind gets `Lagged` and must
/// resynchronise from the store. Subscribers only queue keys, so they fall behind only when a
/// re-list of a larger cluster publishes every object at once, and resynchronising is then the
/// same work. Every slot costs memory whether used or not (about 50 bytes).
pub const CHANGE_FEED_CAPACITY: usize = 1024;

/// Objects per page of a (re-)list. Smaller than kube's default of 500: a page is read whole
/// and decoded with its managed fields before they are stripped, and during a re-list it comes
/// on top of the full store. 100 Nodes cost well under a megabyte; a cluster of 1000 lists in
/// 10 requests instead of 2.
pub const LIST_PAGE_SIZE: u32 = 100;

/// A change seen by an informer, published after its store was updated.
#[derive(Clone, Debug)]
pub enum WatchEvent<K> {
    /// An object was added (`old` is `None`) or modified.
    Applied {
        /// The previous version, if the store had one.
        old: Option<Arc<K>>,
        /// The current version (as stored).
        new: Arc<K>,
    },
    /// An object disappeared.
    Deleted(Arc<K>),
}

impl<K: Resource> WatchEvent<K> {
    /// The object concerned (the new version for an apply).
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Applied { new, .. } => new,
            Self::Deleted(object) => object,
        }
    }

    /// Name of the object concerned.
    pub fn name(&self) -> &str {
        self.object().meta().name.as_deref().unwrap_or_default()
    }
}

/// The next change of a feed, or `None` once `shutdown` fires first: the head of every
/// controller's feed loop.
pub async fn next_change<T: Clone>(
    changes: &mut broadcast::Receiver<T>,
    shutdown: &CancellationToken,
) -> Option<Result<T, broadcast::error::RecvError>> {
    tokio::select! {
        () = shutdown.cancelled() => None,
        change = changes.recv() => Some(change),
    }
}

/// What a controller's feed gets from an informer: one watch event, or word that it missed
/// some (the broadcast lagged), after which it must look at everything again.
#[derive(Clone, Debug)]
pub enum Feed<T> {
    /// The next watch event.
    Event(T),
    /// This many events were missed.
    Lagged(u64),
}

/// The feed loop every controller runs over an informer's events: hand each event (or a lag)
/// to `on` until `shutdown`. When the informer closes (its cache stopped), the feed waits for
/// `shutdown`: what the controller already knows is still reconciled.
pub async fn feed<T: Clone>(
    mut events: broadcast::Receiver<T>,
    shutdown: CancellationToken,
    mut on: impl FnMut(Feed<T>),
) {
    loop {
        match next_change(&mut events, &shutdown).await {
            None => return,
            Some(Ok(event)) => on(Feed::Event(event)),
            Some(Err(broadcast::error::RecvError::Lagged(missed))) => on(Feed::Lagged(missed)),
            Some(Err(broadcast::error::RecvError::Closed)) => {
                tracing::warn!("the watch feed closed; known objects are still reconciled");
                shutdown.cancelled().await;
                return;
            }
        }
    }
}

/// Where a watch stands: while it fails, since when and why.
#[derive(Clone, Debug, Default)]
pub struct WatchStatus {
    /// Set while every attempt since the last progress (a list, watch event or re-list)
    /// failed.
    pub failing: Option<WatchFailure>,
}

/// A failing watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchFailure {
    /// First failure since the last progress.
    pub since: Instant,
    /// The latest error.
    pub error: String,
    /// Whether the apiserver answered (an HTTP error such as 403) rather than being
    /// unreachable. Only an answering apiserver makes a stuck watch this process's fault.
    pub apiserver_answered: bool,
}

/// Shared, cheap-to-clone view of one watch's progress.
#[derive(Clone, Debug)]
pub struct WatchProgress {
    name: Arc<str>,
    status: Arc<Mutex<WatchStatus>>,
}

impl WatchProgress {
    /// A watch called `name` (e.g. `nodes`), not failing.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            status: Arc::new(Mutex::new(WatchStatus::default())),
        }
    }

    /// The watch's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A copy of the current status.
    pub fn status(&self) -> WatchStatus {
        self.status.lock().clone()
    }

    /// Record progress (clears a failure).
    pub fn progressed(&self) {
        self.status.lock().failing = None;
    }

    /// Record a failed attempt.
    pub fn failed(&self, error: String, apiserver_answered: bool) {
        let mut status = self.status.lock();
        let since = status
            .failing
            .as_ref()
            .map_or_else(Instant::now, |f| f.since);
        status.failing = Some(WatchFailure {
            since,
            error,
            apiserver_answered,
        });
    }

    /// Why the watch counts as stuck: it has failed for longer than `longer_than` while the
    /// apiserver answered. `None` while it works, fails only briefly, or cannot reach the
    /// apiserver (then every replica is equally stuck and restarting helps nobody).
    pub fn stuck(&self, longer_than: Duration) -> Option<String> {
        let status = self.status();
        let failing = status.failing?;
        let for_ = failing.since.elapsed();
        (failing.apiserver_answered && for_ > longer_than).then(|| {
            format!(
                "watch of {} has failed for {}s (longer than {}s): {}",
                self.name,
                for_.as_secs(),
                longer_than.as_secs(),
                failing.error
            )
        })
    }
}

/// Whether a watcher error came from an answering apiserver.
pub fn apiserver_answered(err: &watcher::Error) -> bool {
    match err {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => matches!(e, kube::Error::Api(_)),
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => true,
    }
}

/// Read side of an informer. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store: Store<K>,
    changes: broadcast::Sender<WatchEvent<K>>,
    synced: watch::Receiver<bool>,
    progress: WatchProgress,
}

/// Write side: drives the watch and fills the [`Informer`]'s store. Run it with
/// [`InformerDriver::run`].
#[derive(Debug)]
pub struct InformerDriver<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    api: Api<K>,
    /// kube-runtime's reflector store, written here and read through [`Informer`]'s
    /// [`Store`]. It keeps a clone of each object it is given and a key that repeats the name,
    /// UID and resource version: for 1000 stripped Nodes 4.1 % more than a map of the watched
    /// objects by name (`examples/node_store_memory.rs`; `docs/architecture.md`), too little
    /// to keep a store of our own for.
    writer: Writer<K>,
    changes: broadcast::Sender<WatchEvent<K>>,
    synced: watch::Sender<bool>,
    progress: WatchProgress,
    strip: fn(&mut K),
    /// The scope whose labels narrow the watch (its namespace is already in `api`).
    scope: WatchScope,
    /// A field selector narrowing the watch further (e.g. a Secret's type).
    fields: Option<&'static str>,
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// An informer over `api` (not yet running), called `name` in logs and health checks.
    /// `strip` trims every object before it is stored (e.g. drops managed fields).
    pub fn new(api: Api<K>, name: &str, strip: fn(&mut K)) -> (Self, InformerDriver<K>) {
        let writer = Writer::default();
        let (changes, _) = broadcast::channel(CHANGE_FEED_CAPACITY);
        let (synced_tx, synced_rx) = watch::channel(false);
        let progress = WatchProgress::new(name);
        let informer = Self {
            store: writer.as_reader(),
            changes: changes.clone(),
            synced: synced_rx,
            progress: progress.clone(),
        };
        let driver = InformerDriver {
            api,
            writer,
            changes,
            synced: synced_tx,
            progress,
            strip,
            scope: WatchScope::all(),
            fields: None,
        };
        (informer, driver)
    }

    /// Every stored object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    /// The stored object with this name (and namespace, for namespaced kinds).
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let key = ObjectRef::new(name);
        self.store.get(&match namespace {
            Some(ns) => key.within(ns),
            None => key,
        })
    }

    /// Whether the initial list has completed ("caches synced"). Never goes back to false; see
    /// [`Informer::progress`] for a watch that broke later.
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Wait until the initial list has completed. Never returns if the driver was dropped
    /// before that.
    pub async fn wait_until_synced(&self) {
        let mut synced = self.synced.clone();
        if synced.wait_for(|synced| *synced).await.is_err() {
            futures::future::pending::<()>().await;
        }
    }

    /// Subscribe to changes. Subscribe first, then list, to miss nothing.
    pub fn subscribe(&self) -> broadcast::Receiver<WatchEvent<K>> {
        self.changes.subscribe()
    }

    /// The watch's progress, for health checks.
    pub fn progress(&self) -> &WatchProgress {
        &self.progress
    }
}

impl<K> InformerDriver<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Watch only the objects whose labels match `scope`'s selector. The namespace of a scope
    /// is the `Api` the informer was created with ([`WatchScope::namespaced_api`]).
    #[must_use]
    pub fn with_scope(mut self, scope: &WatchScope) -> Self {
        self.scope = scope.clone();
        self
    }

    /// Watch only the objects that match the field selector `fields` too.
    #[must_use]
    pub fn with_fields(mut self, fields: &'static str) -> Self {
        self.fields = Some(fields);
        self
    }

    /// Watch until `shutdown`, keeping the store current, publishing changes and recording
    /// the watch's progress.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let strip = self.strip;
        let mut config = self
            .scope
            .watcher_config(watcher::Config::default().page_size(LIST_PAGE_SIZE));
        if let Some(fields) = self.fields {
            config = config.fields(fields);
        }
        let stream = watcher::watcher(self.api.clone(), config)
            .default_backoff()
            .modify(strip);
        let mut stream = std::pin::pin!(stream);
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return,
                event = stream.next() => event,
            };
            match event {
                None => return,
                Some(Err(err)) => {
                    let answered = apiserver_answered(&err);
                    tracing::warn!(watch = self.progress.name(), error = %err, apiserver_answered = answered, "watch failed; retrying");
                    self.progress.failed(err.to_string(), answered);
                }
                Some(Ok(event)) => {
                    // `Init` only announces a (re-)list: the watcher emits it before every
                    // attempt, also before each one that then fails, so it is no progress.
                    if !matches!(event, Event::Init) {
                        self.progress.progressed();
                    }
                    self.apply(event);
                }
            }
        }
    }

    /// Update the store with `event` and publish what changed (after the store, so that a
    /// subscriber reading the store sees at least the published state).
    fn apply(&mut self, event: Event<K>) {
        let store = self.writer.as_reader();
        let key = match &event {
            Event::Apply(object) => Some(ObjectRef::from_obj(object)),
            _ => None,
        };
        let old = key.as_ref().and_then(|key| store.get(key));
        // A (re-)list replaces the store: what was there before, to diff against.
        let before: Option<HashMap<ObjectRef<K>, Arc<K>>> =
            matches!(event, Event::InitDone).then(|| {
                store
                    .state()
                    .into_iter()
                    .map(|object| (ObjectRef::from_obj(&*object), object))
                    .collect()
            });
        self.writer.apply_watcher_event(&event);
        match event {
            Event::Apply(_) => {
                if let Some(new) = key.and_then(|key| store.get(&key)) {
                    self.publish(WatchEvent::Applied { old, new });
                }
            }
            Event::Delete(object) => self.publish(WatchEvent::Deleted(Arc::new(object))),
            Event::Init | Event::InitApply(_) => {}
            Event::InitDone => {
                let mut before = before.unwrap_or_default();
                for new in store.state() {
                    let old = before.remove(&ObjectRef::from_obj(&*new));
                    self.publish(WatchEvent::Applied { old, new });
                }
                for (_, gone) in before {
                    self.publish(WatchEvent::Deleted(gone));
                }
                self.synced.send_replace(true);
            }
        }
    }

    fn publish(&self, change: WatchEvent<K>) {
        // No subscribers is fine: controllers may not have started yet.
        let _ = self.changes.send(change);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_is_stuck_only_when_the_apiserver_answers_for_too_long() {
        let progress = WatchProgress::new("nodes");
        assert_eq!(progress.stuck(Duration::ZERO), None, "fresh watch");
        progress.failed("connection refused".into(), false);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            progress.stuck(Duration::ZERO),
            None,
            "an unreachable apiserver is not this process's fault"
        );
        progress.failed("403 Forbidden".into(), true);
        std::thread::sleep(Duration::from_millis(5));
        let stuck = progress.stuck(Duration::ZERO).expect("stuck");
        assert!(
            stuck.contains("watch of nodes") && stuck.contains("403"),
            "{stuck}"
        );
        assert_eq!(
            progress.stuck(Duration::from_secs(60)),
            None,
            "not for long yet"
        );
        progress.progressed();
        assert_eq!(progress.stuck(Duration::ZERO), None, "progress clears it");
    }
}
