//! I/O of the lifecycle controller; decisions live in [`super::decisions`].

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use super::decisions::{
    ExistenceVerdict, FirstStep, TaintChange, apply_taint_change, existence_verdict, first_step,
    shutdown_verdict,
};
use crate::cache::NodeCache;
use crate::events::{EventRecorder, EventType, error_chain};
use crate::metrics::Metrics;
use crate::provider::{self, Instances};

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
}

impl Default for NodeLifecycleControllerConfig {
    fn default() -> Self {
        Self {
            node_monitor_period: Duration::from_secs(5),
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

/// What the lifecycle controller does with one Node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LifecycleAction {
    /// Leave the Node as it is.
    Nothing,
    /// The cloud confirmed the instance is gone: delete the Node.
    DeleteNode,
    /// Add or remove the shutdown taint.
    ChangeTaint(TaintChange),
}

/// Decide what to do with `node`, asking the cloud only what the decisions need (reads only).
///
/// The controller executes the answer; a dry run (`plan`) prints it. Ready Nodes cost no cloud
/// call; only `Ok(false)` from `instance_exists` leads to [`LifecycleAction::DeleteNode`].
pub async fn decide(
    node: &Node,
    instances: &dyn Instances,
) -> Result<LifecycleAction, LifecycleError> {
    match first_step(node) {
        FirstStep::Nothing => return Ok(LifecycleAction::Nothing),
        FirstStep::RemoveShutdownTaint => {
            return Ok(LifecycleAction::ChangeTaint(TaintChange::RemoveShutdown));
        }
        FirstStep::CheckExistence => {}
    }
    let exists = instances.instance_exists(node).await;
    match existence_verdict(&exists) {
        ExistenceVerdict::DeleteNode => Ok(LifecycleAction::DeleteNode),
        ExistenceVerdict::LeaveUntouched => match exists {
            Err(err) => Err(LifecycleError::Exists(err)),
            Ok(_) => Ok(LifecycleAction::Nothing),
        },
        ExistenceVerdict::CheckShutdown => {
            let shutdown = instances.instance_shutdown(node).await;
            if let Some(change) = shutdown_verdict(node, &shutdown) {
                return Ok(LifecycleAction::ChangeTaint(change));
            }
            shutdown
                .map(|_| LifecycleAction::Nothing)
                .map_err(LifecycleError::Shutdown)
        }
    }
}

/// The cloud node lifecycle controller.
pub struct NodeLifecycleController {
    nodes: Api<Node>,
    cache: NodeCache,
    instances: Arc<dyn Instances>,
    recorder: EventRecorder,
    metrics: Metrics,
    config: NodeLifecycleControllerConfig,
    heartbeat: crate::runtime::Heartbeat,
}

impl std::fmt::Debug for NodeLifecycleController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeLifecycleController")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.is_conflict())
}

fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.is_not_found())
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
        let recorder = EventRecorder::new(client.clone(), COMPONENT);
        Self::with_recorder(client, cache, instances, recorder, metrics, config)
    }

    /// Like [`NodeLifecycleController::new`] with a recorder of your own.
    pub fn with_recorder(
        client: Client,
        cache: NodeCache,
        instances: Arc<dyn Instances>,
        recorder: EventRecorder,
        metrics: Metrics,
        config: NodeLifecycleControllerConfig,
    ) -> Self {
        Self {
            nodes: Api::all(client),
            cache,
            instances,
            recorder,
            metrics,
            config,
            heartbeat: crate::runtime::Heartbeat::new(CONTROLLER),
        }
    }

    /// Report liveness and readiness into `heartbeat` (e.g. one the binary checks).
    #[must_use]
    pub fn with_heartbeat(mut self, heartbeat: crate::runtime::Heartbeat) -> Self {
        self.heartbeat = heartbeat;
        self
    }

    /// Monitor every cached Node each period until `shutdown`. An empty or unsynced cache is a
    /// no-op pass.
    pub async fn run(self, shutdown: CancellationToken) {
        tracing::info!(controller = CONTROLLER, "starting");
        // Sliding, like Go's wait.Until: the period is waited after each pass ends, so a slow
        // pass (a slow cloud) never makes the next one start at once.
        let period = crate::period(self.config.node_monitor_period);
        self.heartbeat.watch(
            self.cache.progress().clone(),
            crate::cache::NODE_WATCH_STUCK_AFTER.max(period),
        );
        self.heartbeat.set_synced();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = self.monitor_nodes() => {}
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(period) => {}
            }
        }
        tracing::info!(controller = CONTROLLER, "stopped");
    }

    async fn monitor_nodes(&self) {
        for node in self.cache.list() {
            let _timer = self.metrics.reconcile_timer(CONTROLLER);
            let span = tracing::info_span!(
                "reconcile",
                node = node.metadata.name.as_deref().unwrap_or_default()
            );
            let result = tracing::Instrument::instrument(self.monitor_node(&node), span).await;
            if let Err(err) = result {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                let chain = error_chain(&err);
                self.metrics.record_error(CONTROLLER, err.metric_label());
                tracing::warn!(node = name, error = %chain, "node lifecycle check failed");
                self.recorder
                    .publish(
                        node.as_ref(),
                        EventType::Warning,
                        err.event_reason(),
                        &chain,
                    )
                    .await;
            }
        }
    }

    async fn monitor_node(&self, node: &Node) -> Result<(), LifecycleError> {
        match decide(node, self.instances.as_ref()).await? {
            LifecycleAction::Nothing => Ok(()),
            LifecycleAction::DeleteNode => self.delete_node(node).await,
            LifecycleAction::ChangeTaint(change) => self.change_taint(node, change).await,
        }
    }

    async fn delete_node(&self, node: &Node) -> Result<(), LifecycleError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        tracing::info!(node = name, "deleting node: its instance no longer exists");
        self.recorder
            .publish(
                node,
                EventType::Normal,
                "DeletingNode",
                &format!("Deleting node {name} because it does not exist in the cloud provider"),
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
        assert_eq!(e.metric_label(), "cloud_api");
        assert_eq!(
            error_chain(&e),
            "failed to check whether the instance exists: cloud API call failed: down"
        );
    }
}
