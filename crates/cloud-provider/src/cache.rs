//! The shared Node reflector: one watch for every controller, running from process start.
//!
//! Leadership gates writes, not reads: the binary starts the [`NodeReflector`] right away (so a
//! standby keeps its cache warm) and starts the controllers only once it holds the lease. The
//! controllers read the [`NodeCache`] and subscribe to its change feed.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

/// Capacity of the change feed; a subscriber that falls further behind gets `Lagged` and must
/// resynchronise from [`NodeCache::list`].
pub const CHANGE_FEED_CAPACITY: usize = 4096;

/// A change seen by the reflector, after the cache was updated.
#[derive(Clone, Debug)]
pub enum NodeChange {
    /// A Node was added (`old` is `None`) or modified.
    Applied {
        /// The previous version, if the cache had one.
        old: Option<Arc<Node>>,
        /// The current version (as cached).
        new: Arc<Node>,
    },
    /// A Node disappeared.
    Deleted(Arc<Node>),
}

impl NodeChange {
    /// Name of the Node concerned.
    pub fn name(&self) -> &str {
        let node = match self {
            Self::Applied { new, .. } => new,
            Self::Deleted(node) => node,
        };
        node.metadata.name.as_deref().unwrap_or_default()
    }
}

/// Read side of the shared Node reflector. Cheap to clone.
#[derive(Clone, Debug)]
pub struct NodeCache {
    store: Store<Node>,
    changes: broadcast::Sender<NodeChange>,
    ready: watch::Receiver<bool>,
}

/// Write side: drives the watch and fills the [`NodeCache`]. Run it with [`NodeReflector::run`].
#[derive(Debug)]
pub struct NodeReflector {
    api: Api<Node>,
    writer: reflector::store::Writer<Node>,
    store: Store<Node>,
    changes: broadcast::Sender<NodeChange>,
    ready: watch::Sender<bool>,
}

impl NodeCache {
    /// Create a cache and the reflector that fills it (not yet running).
    pub fn new(client: Client) -> (NodeCache, NodeReflector) {
        let (store, writer) = reflector::store();
        let (changes, _) = broadcast::channel(CHANGE_FEED_CAPACITY);
        let (ready_tx, ready_rx) = watch::channel(false);
        let cache = NodeCache {
            store: store.clone(),
            changes: changes.clone(),
            ready: ready_rx,
        };
        let reflector = NodeReflector {
            api: Api::all(client),
            writer,
            store,
            changes,
            ready: ready_tx,
        };
        (cache, reflector)
    }

    /// Create a cache and spawn its reflector on the current runtime until `shutdown`.
    pub fn spawn(client: Client, shutdown: CancellationToken) -> NodeCache {
        let (cache, reflector) = Self::new(client);
        tokio::spawn(reflector.run(shutdown));
        cache
    }

    /// The underlying kube-runtime store.
    pub fn store(&self) -> &Store<Node> {
        &self.store
    }

    /// The cached Node called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Node>> {
        self.store.get(&ObjectRef::new(name))
    }

    /// Every cached Node.
    pub fn list(&self) -> Vec<Arc<Node>> {
        self.store.state()
    }

    /// Whether the initial list has completed ("caches synced").
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Wait until the initial list has completed. Never returns if the reflector was dropped
    /// before that.
    pub async fn wait_until_ready(&self) {
        let mut ready = self.ready.clone();
        if ready.wait_for(|synced| *synced).await.is_err() {
            futures::future::pending::<()>().await;
        }
    }

    /// Subscribe to changes. Subscribe first, then list, to miss nothing.
    pub fn subscribe(&self) -> broadcast::Receiver<NodeChange> {
        self.changes.subscribe()
    }
}

/// Keep only what the controllers read: managed fields and image lists are large and unused.
fn strip(node: &mut Node) {
    node.metadata.managed_fields = None;
    if let Some(status) = node.status.as_mut() {
        status.images = None;
    }
}

impl NodeReflector {
    /// Watch Nodes until `shutdown`, keeping the cache current and publishing changes.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let stream = watcher::watcher(self.api.clone(), watcher::Config::default())
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
                Some(Err(err)) => tracing::warn!(error = %err, "node watch failed; retrying"),
                Some(Ok(event)) => self.apply(event),
            }
        }
    }

    fn apply(&mut self, event: Event<Node>) {
        match &event {
            Event::Apply(node) => {
                let key = ObjectRef::from(node);
                let old = self.store.get(&key);
                self.writer.apply_watcher_event(&event);
                if let Some(new) = self.store.get(&key) {
                    self.publish(NodeChange::Applied { old, new });
                }
            }
            Event::Delete(node) => {
                self.writer.apply_watcher_event(&event);
                self.publish(NodeChange::Deleted(Arc::new(node.clone())));
            }
            Event::Init | Event::InitApply(_) => self.writer.apply_watcher_event(&event),
            Event::InitDone => {
                let mut before: HashMap<String, Arc<Node>> = self
                    .store
                    .state()
                    .into_iter()
                    .map(|n| (n.metadata.name.clone().unwrap_or_default(), n))
                    .collect();
                self.writer.apply_watcher_event(&event);
                for new in self.store.state() {
                    let old = before.remove(new.metadata.name.as_deref().unwrap_or_default());
                    self.publish(NodeChange::Applied { old, new });
                }
                for (_, gone) in before {
                    self.publish(NodeChange::Deleted(gone));
                }
                self.ready.send_replace(true);
            }
        }
    }

    fn publish(&self, change: NodeChange) {
        // No subscribers is fine: controllers may not have started yet.
        let _ = self.changes.send(change);
    }
}
