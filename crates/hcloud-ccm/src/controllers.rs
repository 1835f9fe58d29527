//! The point where controllers start once this replica leads: [`start_controllers`].
//!
//! Reads (the shared Node cache) run from process start on every replica; the controllers,
//! which write, start only here. A controller whose provider capability is missing is logged
//! and skipped, as upstream does.

use std::sync::Arc;
use std::time::Duration;

use cloud_provider::{
    CloudProvider, EventRecorder, Heartbeat, NodeCache, NodeController, NodeControllerConfig,
    NodeLifecycleController, NodeLifecycleControllerConfig, RouteController, RouteControllerConfig,
    RouteMetrics, ServiceController, ServiceControllerConfig, ServiceMetrics,
};
use futures::FutureExt;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Controller};
use crate::http::Endpoints;
use crate::kube_client::{ClientError, KubeClients};

/// The name (user agent) of the client that writes the node controller's events.
pub const NODE_EVENTS_CLIENT: &str = "node-controller-events";

/// Everything a controller needs from the process.
#[derive(Clone)]
pub struct ControllerContext {
    /// Makes the Kubernetes clients (CCM credentials): one per controller, each with its own
    /// rate limit, as upstream.
    pub clients: KubeClients,
    /// The validated configuration (controllers, periods, concurrency, hcloud settings).
    pub config: Config,
    /// Health/readiness checks and the metrics registry. Controllers register a named
    /// `/healthz` check each and a `/readyz` check that passes once their caches synced.
    pub endpoints: Endpoints,
    /// Fires when the controllers must stop (shutdown or lost leadership).
    pub stop: CancellationToken,
    /// The cloud provider.
    pub provider: Arc<dyn CloudProvider>,
    /// The shared Node cache (started before leader election).
    pub nodes: NodeCache,
    /// The framework controllers' metrics (registered once by the caller).
    pub metrics: cloud_provider::Metrics,
    /// `route_controller_route_sync_total` (registered once by the caller).
    pub route_metrics: RouteMetrics,
    /// The service controller's upstream metrics (registered once by the caller).
    pub service_metrics: ServiceMetrics,
}

impl std::fmt::Debug for ControllerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerContext")
            .field("config", &self.config)
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

/// Why controllers could not start (fatal: the process exits non-zero).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The provider's initialization failed.
    #[error("cannot initialize the cloud provider: {0}")]
    Provider(String),
    /// A controller's configuration is unusable (e.g. route CIDRs).
    #[error("cannot start {controller}: {message}")]
    Controller {
        /// Which controller.
        controller: Controller,
        /// Why.
        message: String,
    },
}

/// The started controllers; each runs as a task until the context's stop token fires.
#[derive(Debug, Default)]
pub struct RunningControllers {
    tasks: JoinSet<(Controller, Result<(), String>)>,
}

impl RunningControllers {
    /// Adds a controller task.
    pub fn spawn(
        &mut self,
        controller: Controller,
        task: impl Future<Output = Result<(), String>> + Send + 'static,
    ) {
        self.tasks.spawn(async move { (controller, task.await) });
    }

    /// How many controllers run.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether none runs.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Resolves when the first controller ends (its name and result); never when none runs.
    pub async fn first_exit(&mut self) -> (Controller, Result<(), String>) {
        loop {
            match self.tasks.join_next().await {
                Some(Ok(exit)) => return exit,
                Some(Err(e)) => tracing::error!(error = %e, "a controller task panicked"),
                None => std::future::pending::<()>().await,
            }
        }
    }

    /// Waits up to `grace` for every controller to end (after the stop token fired), then
    /// aborts the rest.
    pub async fn shutdown(mut self, grace: Duration) {
        let drained = tokio::time::timeout(grace, async {
            while let Some(result) = self.tasks.join_next().await {
                if let Ok((controller, Err(e))) = result {
                    tracing::warn!(%controller, error = %e, "controller ended with an error");
                }
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                remaining = self.tasks.len(),
                "controllers did not stop in time"
            );
            self.tasks.abort_all();
        }
    }
}

/// Run a controller; its ending before `stop` fired is an error naming why (a dead task, as
/// its heartbeat recorded), so the process exits non-zero and the Deployment restarts it.
async fn supervised(
    heartbeat: Heartbeat,
    stop: CancellationToken,
    run: impl Future<Output = ()>,
) -> Result<(), String> {
    run.await;
    if stop.is_cancelled() {
        return Ok(());
    }
    let why = heartbeat
        .death()
        .unwrap_or_else(|| "it returned without being asked to stop".to_owned());
    tracing::error!(controller = heartbeat.controller(), reason = %why, "controller ended unexpectedly");
    Err(format!(
        "controller {} ended: {why}",
        heartbeat.controller()
    ))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ManagedLabels {
    name: &'static str,
    manager: &'static str,
}

/// Starts every enabled controller. Called once leadership is won (or at once with
/// `--leader-elect=false`).
pub async fn start_controllers(ctx: ControllerContext) -> Result<RunningControllers, StartError> {
    let mut running = RunningControllers::default();
    let config = &ctx.config;
    let provider_client = ctx
        .clients
        .client("cloud-provider")
        .map_err(|err| StartError::Provider(err.to_string()))?;
    if let Err(err) = ctx
        .provider
        .initialize(provider_client, ctx.stop.clone())
        .await
    {
        return Err(StartError::Provider(err.to_string()));
    }
    let managed = Family::<ManagedLabels, Gauge>::default();
    ctx.endpoints.metrics.register(
        "running_managed_controllers",
        "Controllers running in this process (1 = running)",
        managed.clone(),
    );
    let instances = ctx.provider.instances();
    for controller in Controller::ALL {
        if !config.controller_wanted(controller) {
            tracing::info!(%controller, "controller disabled by configuration");
            continue;
        }
        let heartbeat = Heartbeat::new(controller.metric_name());
        let client = ctx
            .clients
            .client(controller.client_name())
            .map_err(|err: ClientError| StartError::Controller {
                controller,
                message: err.to_string(),
            })?;
        // The node controller's events go through a client (and token bucket) of their own,
        // as upstream's event broadcaster has: a burst of joining Nodes is then paced by its
        // two writes per Node, not by its `Synced` events as well.
        let events = match controller {
            Controller::CloudNode => Some(ctx.clients.client(NODE_EVENTS_CLIENT).map_err(
                |err: ClientError| StartError::Controller {
                    controller,
                    message: err.to_string(),
                },
            )?),
            _ => None,
        };
        let started = match controller {
            Controller::CloudNode => instances.as_ref().map(|instances| {
                let recorder = EventRecorder::new(
                    events.unwrap_or_else(|| client.clone()),
                    cloud_provider::node::COMPONENT,
                );
                NodeController::new(
                    client,
                    ctx.nodes.clone(),
                    instances.clone(),
                    ctx.metrics.clone(),
                    NodeControllerConfig {
                        workers: config.concurrent_node_syncs,
                        status_update_workers: config.concurrent_node_status_updates,
                        node_status_update_frequency: config.node_status_update_frequency,
                        ..NodeControllerConfig::default()
                    },
                )
                .with_recorder(recorder)
                .with_heartbeat(heartbeat.clone())
                .with_recoveries(ctx.provider.recoveries())
                .run(ctx.stop.clone())
                .boxed()
            }),
            Controller::CloudNodeLifecycle => instances.as_ref().map(|instances| {
                NodeLifecycleController::new(
                    client,
                    ctx.nodes.clone(),
                    instances.clone(),
                    ctx.metrics.clone(),
                    lifecycle_config(config),
                )
                .with_heartbeat(heartbeat.clone())
                .run(ctx.stop.clone())
                .boxed()
            }),
            Controller::NodeRoute => ctx.provider.routes().map(|routes| {
                RouteController::new(
                    client,
                    ctx.nodes.clone(),
                    routes,
                    ctx.metrics.clone(),
                    RouteControllerConfig {
                        cluster_name: config.cluster_name.clone(),
                        cluster_cidrs: config.cluster_cidrs.clone(),
                        reconciliation_period: config.route_reconciliation_period,
                        watch_nodes: config.feature_gates.watch_based_routes,
                        resync_period: config.min_resync_period,
                        ..RouteControllerConfig::default()
                    },
                )
                .with_route_metrics(ctx.route_metrics.clone())
                .with_heartbeat(heartbeat.clone())
                .run(ctx.stop.clone())
                .boxed()
            }),
            Controller::ServiceLb => ctx.provider.load_balancer().map(|lb| {
                ServiceController::new(
                    client,
                    ctx.nodes.clone(),
                    lb,
                    ctx.metrics.clone(),
                    ServiceControllerConfig {
                        cluster_name: config.cluster_name.clone(),
                        workers: config.concurrent_service_syncs,
                        node_sync_period: config.node_sync_period,
                        class: load_balancer_class(config),
                        nodes: config.load_balancer_nodes,
                        secrets: config.load_balancer_secrets,
                        ..ServiceControllerConfig::default()
                    },
                )
                .with_service_metrics(ctx.service_metrics.clone())
                .with_heartbeat(heartbeat.clone())
                .with_recoveries(ctx.provider.recoveries())
                .run(ctx.stop.clone())
                .boxed()
            }),
        };
        if let Some(run) = started {
            running.spawn(
                controller,
                supervised(heartbeat.clone(), ctx.stop.clone(), run),
            );
            tracing::info!(%controller, "controller started");
            // /healthz fails once a task of the controller died or its watch is stuck while
            // the apiserver answers; /readyz once its caches synced.
            let live = heartbeat.clone();
            ctx.endpoints
                .health
                .add(controller.metric_name(), move || live.liveness());
            let ready = heartbeat.clone();
            ctx.endpoints
                .readiness
                .add(controller.metric_name(), move || ready.readiness());
            managed
                .get_or_create(&ManagedLabels {
                    name: controller.metric_name(),
                    manager: "cloud-controller-manager",
                })
                .set(1);
        } else {
            tracing::warn!(
                %controller,
                "controller skipped: the hcloud provider does not implement it yet"
            );
        }
    }
    Ok(running)
}

/// The load balancer class the service controller owns (also what `plan` filters by).
pub fn load_balancer_class(config: &Config) -> cloud_provider::service::OwnedClass {
    config
        .load_balancer_class
        .as_deref()
        .map(cloud_provider::service::OwnedClass::named)
        .unwrap_or_default()
}

/// The lifecycle controller's settings (also what `plan` applies the deletion brake with).
pub fn lifecycle_config(config: &Config) -> NodeLifecycleControllerConfig {
    NodeLifecycleControllerConfig {
        node_monitor_period: config.node_monitor_period,
        deletion_max_share: f64::from(config.hcloud.node_deletion_max_percent) / 100.0,
        cloud_provider_id_prefix: Some(format!("{}://", hcloud_provider::PROVIDER_NAME)),
    }
}
