//! I/O of the lifecycle controller; decisions live in [`super::decisions`].

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use super::brake::{self, DeletionBrake};
use super::decisions::{
    FirstStep, LifecycleDecision, REASON_DELETING_NODE, Reading, TaintChange, apply_taint_change,
    decide, first_step,
};
use crate::events::{EventRecorder, EventType, LastWarnings, error_chain};
use crate::metrics::Metrics;
use crate::provider::{self, Category, Instances};
use crate::runtime::cache::{NodeCache, NodeEvent};
use crate::runtime::health::{Heartbeat, Tasks};
use crate::runtime::informer::{self, Feed};
use crate::runtime::reconcile::{
    self, ReconcileError, Reconciler, is_conflict, is_not_found, kube_category,
};
use crate::runtime::workqueue::{Backoff, WorkQueue};

/// Event source component.
pub const COMPONENT: &str = "cloud-node-lifecycle-controller";
/// Controller label in metrics.
pub const CONTROLLER: &str = "cloud-node-lifecycle";

const TAINT_RETRIES: u32 = 5;

/// Settings of the lifecycle controller.
#[derive(Clone, Debug)]
pub struct NodeLifecycleControllerConfig {
    /// `--node-monitor-period` (default 5 s).
    pub node_monitor_period: Duration,
    /// The share of the cluster's cloud Nodes that one pass may delete (default
    /// [`brake::DEFAULT_MAX_SHARE`]); more Nodes reported gone at once are all held (see
    /// [`brake`]).
    pub deletion_max_share: f64,
    /// The providerID prefix of the cluster's cloud Nodes (e.g. `hcloud://`), which the share
    /// counts; `None` counts every Node with a providerID.
    pub cloud_provider_id_prefix: Option<String>,
}

impl Default for NodeLifecycleControllerConfig {
    fn default() -> Self {
        Self {
            node_monitor_period: Duration::from_secs(5),
            deletion_max_share: brake::DEFAULT_MAX_SHARE,
            cloud_provider_id_prefix: None,
        }
    }
}

/// Why a lifecycle check failed.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    /// `instance_exists` failed; the Node is left untouched.
    #[error("failed to check whether the instance exists")]
    Exists(#[source] provider::Error),
    /// `instance_shutdown` failed; the Node is left untouched.
    #[error("failed to check whether the instance is shut down")]
    Shutdown(#[source] provider::Error),
    /// Deleting the Node failed.
    #[error("failed to delete node")]
    Delete(#[source] kube::Error),
    /// Updating the shutdown taint failed.
    #[error("failed to update the shutdown taint")]
    Taint(#[source] kube::Error),
}

impl LifecycleError {
    /// A short, stable label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Exists(err) | Self::Shutdown(err) => err.metric_label(),
            Self::Delete(_) | Self::Taint(_) => "kube_api",
        }
    }

    /// The reason of the Warning event.
    pub fn event_reason(&self) -> &'static str {
        match self {
            Self::Exists(_) | Self::Shutdown(_) => "InstanceLookupFailed",
            Self::Delete(_) => "DeletingNodeFailed",
            Self::Taint(_) => "TaintUpdateFailed",
        }
    }
}

impl ReconcileError for LifecycleError {
    /// The provider's category for lookups; Kubernetes errors by status (409 conflict, 404 not
    /// found, else transient).
    fn category(&self) -> Category {
        match self {
            Self::Exists(err) | Self::Shutdown(err) => err.category(),
            Self::Delete(err) | Self::Taint(err) => kube_category(err),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Exists(err) | Self::Shutdown(err) => err.retry_after(),
            Self::Delete(_) | Self::Taint(_) => None,
        }
    }

    fn metric_label(&self) -> &'static str {
        LifecycleError::metric_label(self)
    }

    fn user_reason(&self) -> Option<&str> {
        Some(self.event_reason())
    }
}

/// The read step: ask the cloud what [`decide`] needs to know of `node` (nothing for a Ready
/// Node; whether the instance exists, then whether it is shut down). Only `Ok(false)` from
/// `instance_exists` reads as [`Reading::Gone`]; a failed question is an error.
pub async fn read(node: &Node, instances: &dyn Instances) -> Result<Reading, LifecycleError> {
    match first_step(node) {
        FirstStep::Nothing | FirstStep::RemoveShutdownTaint => return Ok(Reading::Ready),
        FirstStep::CheckExistence => {}
    }
    match instances.instance_exists(node).await {
        Ok(false) => Ok(Reading::Gone),
        Err(err) => Err(LifecycleError::Exists(err)),
        Ok(true) => {
            let shut_down = instances
                .instance_shutdown(node)
                .await
                .map_err(LifecycleError::Shutdown)?;
            Ok(Reading::Exists { shut_down })
        }
    }
}

struct LifecycleReconciler {
    nodes: Api<Node>,
    cache: NodeCache,
    instances: Arc<dyn Instances>,
    recorder: EventRecorder,
    metrics: Metrics,
    config: NodeLifecycleControllerConfig,
    queue: Arc<WorkQueue<String>>,
    brake: Mutex<DeletionBrake>,
    /// Per Node, the message of the last Warning while its checks keep failing (or while its
    /// deletion is held): the same failure again adds no event.
    last_warning: LastWarnings,
}

/// The cloud node lifecycle controller.
pub struct NodeLifecycleController {
    inner: LifecycleReconciler,
    heartbeat: Heartbeat,
}

impl std::fmt::Debug for NodeLifecycleController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeLifecycleController")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl NodeLifecycleController {
    /// A controller writing through `client` and reading `cache`.
    pub fn new(
        client: Client,
        cache: NodeCache,
        instances: Arc<dyn Instances>,
        metrics: Metrics,
        config: NodeLifecycleControllerConfig,
    ) -> Self {
        // A failed check is retried after one period (or the provider's longer retry-after),
        // as the periodic loop did; the queue's bucket still caps a mass failure.
        let period = crate::period(config.node_monitor_period);
        let queue = Arc::new(
            WorkQueue::new(Backoff::fixed(period)).with_metrics(CONTROLLER, metrics.workqueues()),
        );
        let brake = DeletionBrake::new(config.deletion_max_share, period);
        Self {
            inner: LifecycleReconciler {
                recorder: EventRecorder::new(client.clone(), COMPONENT),
                nodes: Api::all(client),
                cache,
                instances,
                metrics,
                config,
                queue,
                brake: Mutex::new(brake),
                last_warning: LastWarnings::default(),
            },
            heartbeat: Heartbeat::new(CONTROLLER),
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

    /// Check every Node once per `--node-monitor-period` until `shutdown`, on the shared
    /// runtime: each Node is a key of a work queue with one worker (one check at a time, as
    /// upstream's loop). After a check the Node is due again a full period later (sliding, so
    /// a slow cloud never makes checks pile up); a failed check is retried after the longer of
    /// the provider's retry-after and the period, counted in
    /// `cloud_controller_retries_total{controller="cloud-node-lifecycle"}`, with a Warning on
    /// the Node. New Nodes are queued as they appear. Ready Nodes cost no cloud call. Returns
    /// early, reported to the heartbeat, if one of its tasks dies.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self { inner, heartbeat } = self;
        let inner = Arc::new(inner);
        tracing::info!(controller = CONTROLLER, "starting");
        let period = crate::period(inner.config.node_monitor_period);
        let stuck_after = crate::runtime::cache::NODE_WATCH_STUCK_AFTER.max(period);
        let start = inner
            .cache
            .start_keyed(&inner.queue, &heartbeat, stuck_after, &shutdown);
        let Some(changes) = start.await else { return };
        let mut tasks = Tasks::new(heartbeat);
        tasks.spawn("node-feed", feed(inner.clone(), changes, shutdown.clone()));
        let workers = reconcile::Workers::new(1);
        let (queue, metrics) = (inner.queue.clone(), inner.metrics.clone());
        tasks
            .run_pool_until_stopped(inner, queue, metrics, workers, &shutdown)
            .await;
    }
}

/// Queue Nodes as they appear (the periodic re-checks queue themselves).
async fn feed(
    inner: Arc<LifecycleReconciler>,
    changes: tokio::sync::broadcast::Receiver<NodeEvent>,
    shutdown: CancellationToken,
) {
    informer::feed(changes, shutdown, |event| match event {
        Feed::Event(NodeEvent::Applied { old: None, new }) => {
            if let Some(name) = new.metadata.name.clone() {
                inner.queue.add(name);
            }
        }
        Feed::Event(_) => {}
        Feed::Lagged(missed) => {
            tracing::warn!(missed, "node change feed lagged; checking every node");
            inner.cache.queue_all(&inner.queue);
        }
    })
    .await;
}

#[async_trait]
impl Reconciler for LifecycleReconciler {
    type Error = LifecycleError;

    fn controller(&self) -> &'static str {
        CONTROLLER
    }

    fn span(&self, key: &str) -> tracing::Span {
        tracing::info_span!("reconcile", node = key)
    }

    /// Check one Node; a Node no longer cached is dropped from the rotation.
    async fn reconcile(&self, name: &str) -> Result<(), LifecycleError> {
        let Some(node) = self.cache.get(name) else {
            self.forget(name);
            return Ok(());
        };
        self.monitor_node(&node).await?;
        self.queue.reschedule(
            name.to_owned(),
            crate::period(self.config.node_monitor_period),
        );
        Ok(())
    }

    async fn user_error(&self, name: &str, reason: &str, err: &LifecycleError) {
        self.warn(name, reason, err).await;
        // Checked again next period all the same: the cloud's answer may change.
        self.queue.add_after(
            name.to_owned(),
            crate::period(self.config.node_monitor_period),
        );
    }

    async fn retried_error(&self, name: &str, err: &LifecycleError, _delay: Duration) {
        self.warn(name, err.event_reason(), err).await;
    }
}

impl LifecycleReconciler {
    async fn warn(&self, name: &str, reason: &str, err: &LifecycleError) {
        self.warn_once(name, reason, &error_chain(err)).await;
    }

    /// A Warning on the Node, unless the last one of its failing checks said the same.
    async fn warn_once(&self, name: &str, reason: &str, message: &str) {
        let said = format!("{reason}: {message}");
        if !self.last_warning.is_news(name, &said) {
            return;
        }
        if let Some(node) = self.cache.get(name) {
            self.recorder
                .publish(node.as_ref(), EventType::Warning, reason, message)
                .await;
        }
    }

    /// The Node is fine (or gone from the cluster): no failure and no report of it stays.
    fn forget(&self, name: &str) {
        self.last_warning.forget(name);
        if self.brake.lock().forget(name) {
            let nodes = self.cloud_nodes();
            let held = self.brake.lock().held(tokio::time::Instant::now(), nodes);
            self.metrics.set_node_deletions_held(held);
        }
    }

    /// The cluster's cloud Nodes, which the brake's share counts.
    fn cloud_nodes(&self) -> usize {
        let nodes = self.cache.list();
        brake::cloud_nodes(
            nodes.iter().map(AsRef::as_ref),
            self.config.cloud_provider_id_prefix.as_deref(),
        )
    }

    /// Read, decide, apply: the brake's verdict on a Node reported gone is part of the read
    /// (it is the controller's memory of earlier reports).
    async fn monitor_node(&self, node: &Node) -> Result<(), LifecycleError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let reading = read(node, self.instances.as_ref()).await?;
        let verdict = (reading == Reading::Gone).then(|| {
            let nodes = self.cloud_nodes();
            let now = tokio::time::Instant::now();
            let mut brake = self.brake.lock();
            let verdict = brake.gone(name, now, nodes);
            self.metrics.set_node_deletions_held(brake.held(now, nodes));
            verdict
        });
        let decision = decide(node, reading, verdict, self.config.deletion_max_share);
        self.apply(node, &decision).await
    }

    /// Carry out `decision` on `node`.
    async fn apply(&self, node: &Node, decision: &LifecycleDecision) -> Result<(), LifecycleError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        match decision {
            LifecycleDecision::Nothing => {
                self.forget(name);
                Ok(())
            }
            LifecycleDecision::ChangeTaint(change) => {
                self.forget(name);
                self.change_taint(node, *change).await
            }
            LifecycleDecision::DeleteNode => self.delete_node(node).await,
            LifecycleDecision::ConfirmDeletion => {
                tracing::info!(
                    node = name,
                    "the cloud reports the instance gone; the Node is deleted if it still is in the next pass"
                );
                Ok(())
            }
            LifecycleDecision::HoldDeletion { .. } => {
                if let Some(warning) = decision.warning(name) {
                    tracing::warn!(node = name, "{}", warning.message);
                    self.warn_once(name, &warning.reason, &warning.message)
                        .await;
                }
                Ok(())
            }
        }
    }

    async fn delete_node(&self, node: &Node) -> Result<(), LifecycleError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        tracing::info!(node = name, "deleting node: its instance no longer exists");
        self.recorder
            .publish(
                node,
                EventType::Normal,
                REASON_DELETING_NODE,
                &LifecycleDecision::deleting_message(name),
            )
            .await;
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: node.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.nodes.delete(name, &params).await {
            Ok(_) => {
                self.metrics.record_node_deleted();
                Ok(())
            }
            Err(err) if is_not_found(&err) => Ok(()),
            Err(err) => Err(LifecycleError::Delete(err)),
        }
    }

    /// Write a taint change with an optimistic lock; on conflict re-read and recompute.
    async fn change_taint(&self, node: &Node, change: TaintChange) -> Result<(), LifecycleError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let mut current = node.clone();
        for attempt in 1..=TAINT_RETRIES {
            let Some(taints) = apply_taint_change(&current, change) else {
                return Ok(());
            };
            let patch = serde_json::json!({
                "metadata": { "resourceVersion": current.metadata.resource_version },
                "spec": { "taints": taints },
            });
            match self
                .nodes
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    tracing::info!(node = name, ?change, "updated shutdown taint");
                    return Ok(());
                }
                Err(err) if is_conflict(&err) && attempt < TAINT_RETRIES => {
                    current = self.nodes.get(name).await.map_err(LifecycleError::Taint)?;
                }
                Err(err) => return Err(LifecycleError::Taint(err)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_reasons_and_labels() {
        let e = LifecycleError::Exists(provider::Error::api_msg("down"));
        assert_eq!(e.event_reason(), "InstanceLookupFailed");
        assert_eq!(e.metric_label(), "transient");
        assert_eq!(
            error_chain(&e),
            "failed to check whether the instance exists: cloud API call failed: down"
        );
    }
}
