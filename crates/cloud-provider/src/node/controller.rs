//! I/O of the cloud node controller; every decision lives in [`super::decisions`] and
//! [`super::addresses`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeAddress};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::addresses::NodeIpError;
use super::decisions::{
    InitError, Initialization, NodeDecision, SkippedLabel, decide, is_uninitialized,
};
use crate::change::Warning;
use crate::events::{EventRecorder, EventType, LastWarnings, error_chain};
use crate::metrics::Metrics;
use crate::provider::{self, Category, InstanceMetadata, Instances};
use crate::runtime::cache::{NodeCache, NodeEvent};
use crate::runtime::health::{Heartbeat, Tasks};
use crate::runtime::informer::{self, Feed};
use crate::runtime::reconcile::{self, ReconcileError, Reconciler, is_conflict, kube_category};
use crate::runtime::workqueue::{Backoff, WorkQueue, expedite_on_recovery};

/// Event source component.
pub const COMPONENT: &str = "cloud-node-controller";
/// Controller label of node syncs in metrics.
pub const CONTROLLER: &str = "cloud-node";
/// Controller label of the periodic address refresh in metrics.
pub const ADDRESS_CONTROLLER: &str = "cloud-node-addresses";

const UPDATE_RETRIES: u32 = 20;
const UPDATE_RETRY_DELAY: Duration = Duration::from_millis(50);

/// Settings of the cloud node controller.
#[derive(Clone, Debug)]
pub struct NodeControllerConfig {
    /// `--concurrent-node-syncs` (default 1).
    pub workers: usize,
    /// `--concurrent-node-status-updates`; 0 means the same as `workers`.
    pub status_update_workers: usize,
    /// `--node-status-update-frequency` (default 5 min).
    pub node_status_update_frequency: Duration,
    /// Per-node retry backoff after failures.
    pub backoff: Backoff,
}

impl Default for NodeControllerConfig {
    fn default() -> Self {
        Self {
            workers: 1,
            status_update_workers: 0,
            node_status_update_frequency: Duration::from_secs(300),
            backoff: Backoff::default(),
        }
    }
}

/// Why a node sync failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeSyncError {
    /// The cloud provider could not say what the instance is.
    #[error("failed to get instance metadata")]
    Metadata(#[source] provider::Error),
    /// The metadata cannot initialize the Node.
    #[error("failed to initialize node")]
    Init(#[source] InitError),
    /// The provided node IP does not fit the cloud addresses.
    #[error("failed to reconcile node addresses")]
    Addresses(#[source] NodeIpError),
    /// A Kubernetes API call failed.
    #[error("failed to update node")]
    Kube(#[source] kube::Error),
}

impl ReconcileError for NodeSyncError {
    /// The provider's category for lookups; a providedIP that the cloud does not report is the
    /// Node's (user) error; Kubernetes conflicts are conflicts.
    fn category(&self) -> Category {
        match self {
            Self::Metadata(err) => err.category(),
            Self::Init(InitError::MissingProviderId) => Category::Transient,
            Self::Init(InitError::NodeIp(_)) | Self::Addresses(_) => Category::User,
            Self::Kube(err) => kube_category(err),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Metadata(err) => err.retry_after(),
            _ => None,
        }
    }

    fn metric_label(&self) -> &'static str {
        NodeSyncError::metric_label(self)
    }

    fn user_reason(&self) -> Option<&str> {
        (self.category() == Category::User).then(|| self.event_reason())
    }
}

impl NodeSyncError {
    /// A short, stable label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Metadata(err) => err.metric_label(),
            Self::Init(InitError::MissingProviderId) => "missing_provider_id",
            Self::Init(InitError::NodeIp(_)) | Self::Addresses(_) => "provided_node_ip",
            Self::Kube(_) => "kube_api",
        }
    }

    /// The reason of the Warning event.
    pub fn event_reason(&self) -> &'static str {
        match self {
            Self::Metadata(_) => "InstanceLookupFailed",
            _ => "SyncFailed",
        }
    }

    /// The Warning recorded on the Node for this failure: the provider's own when it gave one
    /// (e.g. why no server is the Node's), else [`NodeSyncError::event_reason`] with the error
    /// chain.
    pub fn warning(&self) -> Warning {
        if let Self::Metadata(err) = self
            && let Some(warning) = err.warning()
        {
            return warning.clone();
        }
        Warning::new(self.event_reason(), error_chain(self))
    }
}

/// The JSON merge patch that applies `plan` with an optimistic lock on `resource_version`.
pub fn initialization_patch(
    resource_version: Option<&str>,
    plan: &Initialization,
) -> serde_json::Value {
    let mut metadata = serde_json::Map::new();
    if let Some(rv) = resource_version {
        metadata.insert("resourceVersion".into(), rv.into());
    }
    if !plan.labels.is_empty() {
        metadata.insert("labels".into(), serde_json::json!(plan.labels));
    }
    let mut spec = serde_json::Map::new();
    if let Some(id) = &plan.provider_id {
        spec.insert("providerID".into(), id.clone().into());
    }
    let taints = if plan.taints.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::json!(plan.taints)
    };
    spec.insert("taints".into(), taints);
    serde_json::json!({ "metadata": metadata, "spec": spec })
}

/// The status merge patch replacing `status.addresses` as a whole (a JSON merge patch replaces
/// lists; a strategic merge would merge them by type).
pub fn addresses_patch(addresses: &[NodeAddress]) -> serde_json::Value {
    serde_json::json!({ "status": { "addresses": addresses } })
}

fn seconds_since_creation(node: &Node) -> Option<f64> {
    let created = node.metadata.creation_timestamp.as_ref()?;
    let elapsed = Timestamp::now().duration_since(created.0).as_secs_f64();
    Some(elapsed.max(0.0))
}

struct NodeReconciler {
    nodes: Api<Node>,
    cache: NodeCache,
    instances: Arc<dyn Instances>,
    recorder: EventRecorder,
    metrics: Metrics,
    config: NodeControllerConfig,
    queue: Arc<WorkQueue<String>>,
    /// The user-error Warning last written per Node, so a Node that keeps changing (kubelet
    /// status updates) with the same problem is not warned about again.
    warned: LastWarnings,
    /// The versions of Nodes this controller's own initialization replaced.
    superseded: Superseded,
}

/// The resource versions of each Node that this controller's own later writes replaced, kept
/// until the cache holds another. Initialising a Node takes two writes (its addresses, then the
/// Node); the watch event of the first queues the Node again, and that sync can start before the
/// second's event arrives. Acting on the cached Node then would repeat a finished
/// initialisation and conflict, so the sync waits for the newer version's event instead.
#[derive(Default)]
struct Superseded(parking_lot::Mutex<HashMap<String, Vec<String>>>);

impl Superseded {
    /// `versions` of the Node `name` are replaced by a write of ours.
    fn record(&self, name: &str, versions: impl IntoIterator<Item = Option<String>>) {
        let versions: Vec<String> = versions.into_iter().flatten().collect();
        if !versions.is_empty() {
            self.0.lock().insert(name.to_owned(), versions);
        }
    }

    /// Whether the cache holds `node` at a version our own write replaced (its event is on the
    /// way); the first other version ends the record.
    fn is_behind(&self, node: &Node) -> bool {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let mut superseded = self.0.lock();
        let Some(versions) = superseded.get(name) else {
            return false;
        };
        if node
            .metadata
            .resource_version
            .as_ref()
            .is_some_and(|v| versions.contains(v))
        {
            return true;
        }
        superseded.remove(name);
        false
    }

    fn forget(&self, name: &str) {
        self.0.lock().remove(name);
    }
}

/// The cloud node controller. Build it when leadership is won, then [`NodeController::run`] it.
pub struct NodeController {
    inner: NodeReconciler,
    heartbeat: Heartbeat,
    recoveries: Option<watch::Receiver<u64>>,
}

impl std::fmt::Debug for NodeController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeController")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl NodeController {
    /// A controller writing through `client` and reading `cache`.
    pub fn new(
        client: Client,
        cache: NodeCache,
        instances: Arc<dyn Instances>,
        metrics: Metrics,
        config: NodeControllerConfig,
    ) -> Self {
        let queue =
            Arc::new(WorkQueue::new(config.backoff).with_metrics(CONTROLLER, metrics.workqueues()));
        Self {
            inner: NodeReconciler {
                recorder: EventRecorder::new(client.clone(), COMPONENT),
                nodes: Api::all(client),
                cache,
                instances,
                metrics,
                config,
                queue,
                warned: LastWarnings::default(),
                superseded: Superseded::default(),
            },
            heartbeat: Heartbeat::new(CONTROLLER),
            recoveries: None,
        }
    }

    /// Record events through `recorder` (e.g. one shared by the binary's controllers).
    #[must_use]
    pub fn with_recorder(mut self, recorder: EventRecorder) -> Self {
        self.inner.recorder = recorder;
        self
    }

    /// Report liveness and readiness into `heartbeat` (e.g. one the binary checks).
    #[must_use]
    pub fn with_heartbeat(mut self, heartbeat: Heartbeat) -> Self {
        self.heartbeat = heartbeat;
        self
    }

    /// Retry the Nodes whose last failure was transient as soon as `recoveries` (the
    /// provider's, see `CloudProvider::recoveries`) counts a recovery of the cloud API.
    #[must_use]
    pub fn with_recoveries(mut self, recoveries: Option<watch::Receiver<u64>>) -> Self {
        self.recoveries = recoveries;
        self
    }

    /// Run until `shutdown` is cancelled, or until one of its tasks dies (reported to the
    /// heartbeat first). Waits for the cache to sync first.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self {
            inner,
            heartbeat,
            recoveries,
        } = self;
        let inner = Arc::new(inner);
        let stuck_after = crate::runtime::cache::NODE_WATCH_STUCK_AFTER;
        let start = inner
            .cache
            .start_keyed(&inner.queue, &heartbeat, stuck_after, &shutdown);
        let Some(changes) = start.await else { return };
        tracing::info!(controller = CONTROLLER, "starting");
        let mut tasks = Tasks::new(heartbeat);
        tasks.spawn("node-feed", feed(inner.clone(), changes, shutdown.clone()));
        if let Some(recoveries) = recoveries {
            tasks.spawn(
                "recovery",
                expedite_on_recovery(inner.queue.clone(), recoveries, shutdown.clone()),
            );
        }
        tasks.spawn(
            "address-refresh",
            address_loop(inner.clone(), shutdown.clone()),
        );
        let workers = reconcile::Workers::new(inner.config.workers);
        let (queue, metrics) = (inner.queue.clone(), inner.metrics.clone());
        tasks
            .run_pool_until_stopped(inner, queue, metrics, workers, &shutdown)
            .await;
    }
}

/// Queue every Node that appears or changes; forget the warnings of a Node that is gone.
async fn feed(
    inner: Arc<NodeReconciler>,
    changes: tokio::sync::broadcast::Receiver<NodeEvent>,
    shutdown: CancellationToken,
) {
    informer::feed(changes, shutdown, |event| match event {
        Feed::Event(NodeEvent::Applied { new, .. }) => {
            if let Some(name) = new.metadata.name.clone() {
                inner.queue.add(name);
            }
        }
        Feed::Event(NodeEvent::Deleted(gone)) => {
            if let Some(name) = gone.metadata.name.as_deref() {
                inner.warned.forget(name);
                inner.superseded.forget(name);
            }
        }
        Feed::Lagged(missed) => {
            tracing::warn!(missed, "node change feed lagged; resyncing all nodes");
            inner.cache.queue_all(&inner.queue);
        }
    })
    .await;
}

#[async_trait]
impl Reconciler for NodeReconciler {
    type Error = NodeSyncError;

    fn controller(&self) -> &'static str {
        CONTROLLER
    }

    fn span(&self, key: &str) -> tracing::Span {
        tracing::info_span!("reconcile", node = key)
    }

    async fn reconcile(&self, name: &str) -> Result<(), NodeSyncError> {
        let result = self.sync_node(name).await;
        if result.is_ok() {
            self.warned.forget(name);
        }
        result
    }

    async fn user_error(&self, name: &str, reason: &str, err: &NodeSyncError) {
        let chain = error_chain(err);
        if !self.warned.is_news(name, &chain) {
            return;
        }
        if let Some(node) = self.cache.get(name) {
            self.recorder
                .publish(node.as_ref(), EventType::Warning, reason, &chain)
                .await;
        }
    }

    async fn retried_error(&self, name: &str, err: &NodeSyncError, _delay: Duration) {
        if let Some(node) = self.cache.get(name) {
            self.warn(node.as_ref(), &err.warning()).await;
        }
    }
}

impl NodeReconciler {
    /// Record `warning` on `node` (and log it).
    async fn warn(&self, node: &Node, warning: &Warning) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        tracing::warn!(node = name, reason = warning.reason, "{}", warning.message);
        self.recorder
            .publish(node, EventType::Warning, &warning.reason, &warning.message)
            .await;
    }

    /// Read (the cached Node; the cloud's metadata only for a tainted one), decide
    /// ([`decide`]), apply.
    async fn sync_node(&self, name: &str) -> Result<(), NodeSyncError> {
        let Some(node) = self.cache.get(name) else {
            return Ok(());
        };
        if self.superseded.is_behind(&node) {
            tracing::debug!(
                node = name,
                "the cache has not seen this controller's last write yet"
            );
            return Ok(());
        }
        if !is_uninitialized(&node) {
            let decision = decide(&node, None).map_err(NodeSyncError::Init)?;
            return self.write_labels(&node, &decision.labels).await;
        }
        let metadata = self
            .instances
            .instance_metadata(&node)
            .await
            .map_err(NodeSyncError::Metadata)?;
        let Some(metadata) = metadata else {
            tracing::info!(
                node = name,
                "cloud provider has no metadata yet; leaving node tainted"
            );
            return Ok(());
        };
        let decision = decide(&node, Some(&metadata)).map_err(NodeSyncError::Init)?;
        let Some(init) = decision.initialization.clone() else {
            return Ok(());
        };
        for warning in &decision.warnings {
            self.warn(&node, warning).await;
        }
        // The addresses first (upstream writes them after the taint goes): whoever sees the
        // Node without the uninitialized taint sees its addresses too (the route controller
        // checks a route's target against them). The initialization then patches the Node the
        // status write returned, so its resource version is current and it does not conflict.
        let written = match self.write_addresses(&node, &decision).await {
            Ok(written) => written,
            Err(err) => {
                tracing::warn!(node = name, error = %error_chain(&err), "failed to set node addresses");
                None
            }
        };
        let base = written.as_ref().unwrap_or(&node);
        let Some(updated) = self.initialize(base, init, &metadata).await? else {
            tracing::debug!(node = name, "node was initialized concurrently");
            return Ok(());
        };
        let replaced = |n: &Node| n.metadata.resource_version.clone();
        self.superseded
            .record(name, [replaced(&node), written.as_ref().and_then(replaced)]);
        if let Some(seconds) = seconds_since_creation(&updated) {
            self.metrics.observe_taint_removal_delay(seconds);
        }
        tracing::info!(node = name, "node initialized");
        self.recorder
            .publish(
                &updated,
                EventType::Normal,
                "Synced",
                "Node synced successfully",
            )
            .await;
        if let Some(seconds) = seconds_since_creation(&updated) {
            self.metrics.observe_initial_sync_delay(seconds);
        }
        Ok(())
    }

    /// Apply the initialization `init` (decided for `node`); on a conflict the Node is read
    /// again and the initialization decided again. `None` when someone else initialized the
    /// Node meanwhile.
    async fn initialize(
        &self,
        node: &Node,
        mut init: Initialization,
        metadata: &InstanceMetadata,
    ) -> Result<Option<Node>, NodeSyncError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let mut current = node.clone();
        let mut attempt = 1;
        loop {
            log_skipped_labels(name, &init.skipped_labels);
            let patch = initialization_patch(current.metadata.resource_version.as_deref(), &init);
            match self
                .nodes
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(updated) => return Ok(Some(updated)),
                Err(err) if is_conflict(&err) && attempt < UPDATE_RETRIES => {
                    attempt += 1;
                    tokio::time::sleep(crate::jittered(UPDATE_RETRY_DELAY)).await;
                    current = self.nodes.get(name).await.map_err(NodeSyncError::Kube)?;
                    match decide(&current, Some(metadata))
                        .map_err(NodeSyncError::Init)?
                        .initialization
                    {
                        Some(again) => init = again,
                        None => return Ok(None),
                    }
                }
                Err(err) => return Err(NodeSyncError::Kube(err)),
            }
        }
    }

    /// Write the decided addresses, if they differ. Returns the Node as written, if it wrote.
    async fn write_addresses(
        &self,
        node: &Node,
        decision: &NodeDecision,
    ) -> Result<Option<Node>, NodeSyncError> {
        if let Some(err) = &decision.address_error {
            return Err(NodeSyncError::Addresses(err.clone()));
        }
        let Some(addresses) = &decision.addresses else {
            return Ok(None);
        };
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let written = self
            .nodes
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&addresses_patch(addresses)),
            )
            .await
            .map_err(NodeSyncError::Kube)?;
        tracing::info!(node = name, ?addresses, "updated node addresses");
        Ok(Some(written))
    }

    /// Write the decided GA labels, if any.
    async fn write_labels(
        &self,
        node: &Node,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), NodeSyncError> {
        if labels.is_empty() {
            return Ok(());
        }
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let patch = serde_json::json!({ "metadata": { "labels": labels } });
        self.nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(NodeSyncError::Kube)?;
        tracing::info!(
            node = name,
            ?labels,
            "reconciled GA labels from beta labels"
        );
        Ok(())
    }

    /// The periodic pass over one initialized Node (upstream's `UpdateNodeStatus`): read its
    /// metadata, decide, write its GA labels and its addresses.
    async fn refresh_addresses(&self, node: Arc<Node>) {
        let _timer = self.metrics.reconcile_timer(ADDRESS_CONTROLLER);
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let result = async {
            let metadata = self
                .instances
                .instance_metadata(&node)
                .await
                .map_err(NodeSyncError::Metadata)?;
            let decision = decide(&node, metadata.as_ref()).map_err(NodeSyncError::Init)?;
            self.write_labels(&node, &decision.labels).await?;
            self.write_addresses(&node, &decision).await.map(|_| ())
        }
        .await;
        let Err(err) = result else { return };
        self.metrics
            .record_error(ADDRESS_CONTROLLER, err.metric_label());
        let chain = error_chain(&err);
        tracing::warn!(node = name, error = %chain, "periodic address update failed");
        // A provided-node-ip mismatch after initialization only logs; other failures are
        // also reported on the Node.
        if !matches!(err, NodeSyncError::Addresses(_)) {
            self.warn(node.as_ref(), &err.warning()).await;
        }
    }
}

fn log_skipped_labels(name: &str, skipped: &[SkippedLabel]) {
    for skipped in skipped {
        match skipped {
            SkippedLabel::ReservedDomain(key) => {
                tracing::warn!(
                    node = name,
                    key,
                    "ignoring additional label in a reserved domain"
                );
            }
            SkippedLabel::Conflict {
                key,
                existing,
                wanted,
            } => {
                tracing::warn!(
                    node = name,
                    key,
                    existing,
                    wanted,
                    "not overwriting existing label"
                );
            }
        }
    }
}

async fn address_loop(inner: Arc<NodeReconciler>, shutdown: CancellationToken) {
    let period = crate::period(inner.config.node_status_update_frequency);
    let workers = match inner.config.status_update_workers {
        0 => inner.config.workers.max(1),
        n => n,
    };
    // Sliding, like Go's wait.Until: a pass, then the full period.
    let mut first = true;
    loop {
        if !first {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(period) => {}
            }
        }
        first = false;
        let nodes: Vec<Arc<Node>> = inner
            .cache
            .list()
            .into_iter()
            .filter(|n| !is_uninitialized(n))
            .collect();
        inner.instances.expect_lookups(nodes.len());
        let pass = futures::stream::iter(nodes)
            .for_each_concurrent(workers, |node| inner.refresh_addresses(node));
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = pass => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::test_support::{addr, taint};
    use std::collections::BTreeMap;

    #[test]
    fn a_version_our_write_replaced_is_behind_until_another_is_cached() {
        let at = |version: &str| Node {
            metadata: kube::api::ObjectMeta {
                name: Some("n1".into()),
                resource_version: Some(version.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let superseded = Superseded::default();
        assert!(!superseded.is_behind(&at("1")), "nothing recorded");
        superseded.record("n1", [Some("1".to_owned()), Some("2".to_owned()), None]);
        assert!(superseded.is_behind(&at("1")));
        assert!(superseded.is_behind(&at("2")));
        assert!(!superseded.is_behind(&at("3")), "the write's own version");
        assert!(
            !superseded.is_behind(&at("1")),
            "forgotten once another version was seen"
        );
        superseded.record("n1", [Some("4".to_owned())]);
        superseded.forget("n1");
        assert!(!superseded.is_behind(&at("4")), "forgotten with the Node");
    }

    #[test]
    fn initialization_patch_shapes() {
        let plan = Initialization {
            provider_id: Some("cloud://1".into()),
            labels: BTreeMap::from([("a".to_owned(), "b".to_owned())]),
            skipped_labels: vec![],
            taints: vec![],
        };
        assert_eq!(
            initialization_patch(Some("42"), &plan),
            serde_json::json!({
                "metadata": { "resourceVersion": "42", "labels": { "a": "b" } },
                "spec": { "providerID": "cloud://1", "taints": null }
            })
        );
        let keep = Initialization {
            provider_id: None,
            labels: BTreeMap::new(),
            skipped_labels: vec![],
            taints: vec![taint("other", "NoExecute")],
        };
        assert_eq!(
            initialization_patch(None, &keep),
            serde_json::json!({
                "metadata": {},
                "spec": { "taints": [ { "key": "other", "effect": "NoExecute" } ] }
            })
        );
    }

    #[test]
    fn addresses_patch_sends_the_whole_list() {
        assert_eq!(
            addresses_patch(&[addr("InternalIP", "10.0.0.2"), addr("Hostname", "n")]),
            serde_json::json!({ "status": { "addresses": [
                { "type": "InternalIP", "address": "10.0.0.2" },
                { "type": "Hostname", "address": "n" }
            ] } })
        );
    }

    #[test]
    fn error_labels_and_reasons() {
        let metadata = NodeSyncError::Metadata(provider::Error::api_msg("down"));
        assert_eq!(metadata.metric_label(), "transient");
        assert_eq!(metadata.event_reason(), "InstanceLookupFailed");
        let init = NodeSyncError::Init(InitError::MissingProviderId);
        assert_eq!(init.metric_label(), "missing_provider_id");
        assert_eq!(init.event_reason(), "SyncFailed");
        assert_eq!(
            error_chain(&metadata),
            "failed to get instance metadata: cloud API call failed: down"
        );
        assert_eq!(
            metadata.warning(),
            Warning::new(
                "InstanceLookupFailed",
                "failed to get instance metadata: cloud API call failed: down"
            )
        );
        let why = Warning::new("NoMatchingServer", "no server has the InternalIP 10.0.0.9");
        let unmatched = NodeSyncError::Metadata(
            provider::Error::instance_not_found().with_warning(why.clone()),
        );
        assert_eq!(unmatched.warning(), why);
        assert_eq!(unmatched.metric_label(), "instance_not_found");
    }
}
