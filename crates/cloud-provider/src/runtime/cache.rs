//! The shared Node reflector: one watch for every controller, running from process start.
//!
//! Leadership gates writes, not reads: the binary starts the [`NodeReflector`] right away (so a
//! standby keeps its cache warm) and starts the controllers only once it holds the lease. The
//! controllers read the [`NodeCache`] and subscribe to its change feed. Both are the generic
//! [`Informer`] of the runtime, typed for Nodes.
//!
//! The cache holds every Node unless it is created with a [`WatchScope`] whose labels narrow
//! it ([`NodeCache::new_scoped`]); the controllers read Nodes only through their cache, so a
//! scoped cache scopes them all.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeStatus};
use kube::{Api, Client};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::runtime::health::Heartbeat;
use crate::runtime::informer::{Informer, InformerDriver, WatchEvent, WatchProgress};
use crate::runtime::scope::WatchScope;
use crate::runtime::workqueue::WorkQueue;

pub use crate::runtime::informer::CHANGE_FEED_CAPACITY;

/// A change seen by the Node reflector, after the cache was updated.
pub type NodeEvent = WatchEvent<Node>;

/// How long the Node watch may fail (while the apiserver answers) before the cache stops
/// counting as ready.
pub const NODE_WATCH_STUCK_AFTER: Duration = Duration::from_secs(60);

/// Read side of the shared Node reflector. Cheap to clone.
#[derive(Clone, Debug)]
pub struct NodeCache {
    informer: Informer<Node>,
}

/// Write side: drives the watch and fills the [`NodeCache`]. Run it with [`NodeReflector::run`].
#[derive(Debug)]
pub struct NodeReflector {
    driver: InformerDriver<Node>,
}

/// Keep only what the controllers read: the metadata without its managed fields, the spec,
/// and of the status only the addresses and conditions. The rest of a kubelet's status
/// (images, capacity, system info, volumes) is large, changes often and is read by nobody here.
/// Nothing writes a cached Node back: every write is a patch of the fields it sets.
fn strip(node: &mut Node) {
    node.metadata.managed_fields = None;
    if let Some(status) = node.status.take() {
        node.status = Some(NodeStatus {
            addresses: status.addresses,
            conditions: status.conditions,
            ..NodeStatus::default()
        });
    }
}

impl NodeCache {
    /// Create a cache of every Node and the reflector that fills it (not yet running).
    pub fn new(client: Client) -> (NodeCache, NodeReflector) {
        Self::new_scoped(client, &WatchScope::all())
    }

    /// Create a cache of the Nodes whose labels match `scope` (its namespace does not apply to
    /// Nodes) and the reflector that fills it. A framework option for library users and
    /// tests; the binary caches every Node ([`NodeCache::new`]). See [`WatchScope`] for what
    /// the controllers reading this cache then leave alone.
    pub fn new_scoped(client: Client, scope: &WatchScope) -> (NodeCache, NodeReflector) {
        let (informer, driver) = Informer::new(Api::all(client), "nodes", strip);
        let driver = driver.with_scope(scope);
        (NodeCache { informer }, NodeReflector { driver })
    }

    /// Create a cache of every Node and spawn its reflector on the current runtime until
    /// `shutdown`.
    pub fn spawn(client: Client, shutdown: CancellationToken) -> NodeCache {
        Self::spawn_scoped(client, shutdown, &WatchScope::all())
    }

    /// [`NodeCache::new_scoped`], with the reflector spawned on the current runtime until
    /// `shutdown`.
    pub fn spawn_scoped(
        client: Client,
        shutdown: CancellationToken,
        scope: &WatchScope,
    ) -> NodeCache {
        let (cache, reflector) = Self::new_scoped(client, scope);
        tokio::spawn(reflector.run(shutdown));
        cache
    }

    /// The cached Node called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Node>> {
        self.informer.get(None, name)
    }

    /// Every cached Node.
    pub fn list(&self) -> Vec<Arc<Node>> {
        self.informer.list()
    }

    /// Whether the initial list has completed ("caches synced") and the watch is not stuck
    /// (failing for longer than [`NODE_WATCH_STUCK_AFTER`] while the apiserver answers): a
    /// cache frozen by a broken watch is not ready.
    pub fn is_ready(&self) -> bool {
        self.informer.has_synced() && self.progress().stuck(NODE_WATCH_STUCK_AFTER).is_none()
    }

    /// Whether the initial list has completed; never goes back to false.
    pub fn has_synced(&self) -> bool {
        self.informer.has_synced()
    }

    /// Wait until the initial list has completed. Never returns if the reflector was dropped
    /// before that.
    pub async fn wait_until_ready(&self) {
        self.informer.wait_until_synced().await;
    }

    /// Subscribe to changes. Subscribe first, then list, to miss nothing.
    pub fn subscribe(&self) -> broadcast::Receiver<NodeEvent> {
        self.informer.subscribe()
    }

    /// The Node watch's progress, for health checks.
    pub fn progress(&self) -> &WatchProgress {
        self.informer.progress()
    }

    /// Queue the name of every cached Node.
    pub(crate) fn queue_all(&self, queue: &WorkQueue<String>) {
        for node in self.list() {
            if let Some(name) = node.metadata.name.clone() {
                queue.add(name);
            }
        }
    }

    /// The start of a controller keyed by Node name: report the Node watch into `heartbeat`
    /// (stuck after `stuck_after`), wait for the first list, mark the controller synced,
    /// subscribe to the changes and only then queue every cached Node into `queue`, so that no
    /// change falls between the two. `None` when `shutdown` comes first.
    pub(crate) async fn start_keyed(
        &self,
        queue: &WorkQueue<String>,
        heartbeat: &Heartbeat,
        stuck_after: Duration,
        shutdown: &CancellationToken,
    ) -> Option<broadcast::Receiver<NodeEvent>> {
        heartbeat.watch(self.progress().clone(), stuck_after);
        tokio::select! {
            () = shutdown.cancelled() => return None,
            () = self.wait_until_ready() => {}
        }
        heartbeat.set_synced();
        let changes = self.subscribe();
        self.queue_all(queue);
        Some(changes)
    }
}

impl NodeReflector {
    /// Watch Nodes until `shutdown`, keeping the cache current and publishing changes.
    pub async fn run(self, shutdown: CancellationToken) {
        self.driver.run(shutdown).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_node_keeps_what_the_controllers_read() {
        let mut node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "n1",
                "labels": {"a": "b"},
                "annotations": {"alpha.kubernetes.io/provided-node-ip": "10.0.0.2"},
                "managedFields": [{"manager": "kubelet", "operation": "Update"}],
            },
            "spec": {"providerID": "hcloud://1", "podCIDR": "10.244.0.0/24",
                     "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
                "conditions": [{"type": "Ready", "status": "True"}],
                "capacity": {"cpu": "2"},
                "allocatable": {"cpu": "2"},
                "images": [{"names": ["registry/image:1"], "sizeBytes": 1}],
                "nodeInfo": {"architecture": "amd64", "bootID": "", "containerRuntimeVersion": "",
                             "kernelVersion": "", "kubeProxyVersion": "", "kubeletVersion": "",
                             "machineID": "", "operatingSystem": "linux", "osImage": "",
                             "systemUUID": ""},
            },
        }))
        .unwrap();
        let spec = node.spec.clone();
        let labels = node.metadata.labels.clone();
        let annotations = node.metadata.annotations.clone();
        strip(&mut node);
        assert_eq!(node.metadata.managed_fields, None);
        assert_eq!(node.metadata.labels, labels);
        assert_eq!(node.metadata.annotations, annotations);
        assert_eq!(node.spec, spec);
        let status = node.status.expect("status kept");
        assert_eq!(status.addresses.map(|a| a.len()), Some(1));
        assert_eq!(status.conditions.map(|c| c.len()), Some(1));
        assert_eq!(status.capacity, None);
        assert_eq!(status.allocatable, None);
        assert_eq!(status.images, None);
        assert_eq!(status.node_info, None);
    }
}
