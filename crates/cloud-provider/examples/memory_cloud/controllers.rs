//! Wiring: the one function that runs the framework's controllers for a provider,
//! [`run_controllers`]. Nothing in it is specific to the memory cloud.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use cloud_provider::{
    CloudProvider, Heartbeat, Metrics, NodeCache, NodeController, NodeControllerConfig,
    NodeLifecycleController, NodeLifecycleControllerConfig, RouteController, RouteControllerConfig,
    RouteMetrics, ServiceController, ServiceControllerConfig, ServiceMetrics, WatchScope,
};
use ipnet::{IpNet, Ipv4Net};
use kube::Client;
use prometheus_client::registry::Registry;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The settings a binary takes from its flags.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `--cluster-name`: handed to every load balancer and route call.
    pub cluster_name: String,
    /// `--cluster-cidr`: the route controller deletes only routes within these.
    pub cluster_cidrs: Vec<IpNet>,
    /// `--node-monitor-period`: how often the lifecycle controller checks NotReady Nodes. A
    /// Node whose instance is gone is deleted when a check at least a period later confirms it.
    pub node_monitor_period: Duration,
    /// `--route-reconciliation-period`.
    pub route_reconciliation_period: Duration,
    /// The providerID prefix of the cluster's cloud Nodes (e.g. `memory://`): the lifecycle
    /// controller's deletion brake counts those (`None`: every Node with a providerID).
    pub provider_id_prefix: Option<String>,
    /// Which Services the service controller watches (every one in a real cluster).
    pub services: WatchScope,
}

impl Default for Settings {
    /// The framework's defaults, for the cluster CIDR of many CNI setups (10.244.0.0/16).
    fn default() -> Self {
        Self {
            cluster_name: RouteControllerConfig::default().cluster_name,
            cluster_cidrs: vec![IpNet::V4(Ipv4Net::new_assert(
                Ipv4Addr::new(10, 244, 0, 0),
                16,
            ))],
            node_monitor_period: NodeLifecycleControllerConfig::default().node_monitor_period,
            route_reconciliation_period: RouteControllerConfig::default().reconciliation_period,
            provider_id_prefix: None,
            services: WatchScope::all(),
        }
    }
}

/// The framework's metrics. Register them once, at process start, so that `/metrics` answers
/// before (and without) the controllers running.
#[derive(Clone, Debug, Default)]
pub struct AllMetrics {
    /// Reconciles, errors, retries, durations and the work queues of every controller.
    pub controllers: Metrics,
    /// `route_controller_route_sync_total`.
    pub routes: RouteMetrics,
    /// The service controller's `service_controller_*` series.
    pub services: ServiceMetrics,
}

impl AllMetrics {
    /// Register every series into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        self.controllers.register(registry);
        self.routes.register(registry);
        self.services.register(registry);
    }
}

/// Why [`run_controllers`] returned before `shutdown`.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// [`CloudProvider::initialize`] failed.
    #[error("cannot initialize the cloud provider")]
    Initialize(#[source] cloud_provider::Error),
    /// A controller panicked.
    #[error("a controller panicked: {0}")]
    Panicked(String),
    /// A controller ended on its own (a task of it died).
    #[error("controller {controller} ended: {why}")]
    Ended {
        /// Its metric name, e.g. `cloud-node`.
        controller: String,
        /// What its heartbeat recorded.
        why: String,
    },
}

/// Initialise `provider`, start every controller it has the capabilities for, and run them
/// until `shutdown` fires. Call it once this replica may write (it leads, or runs alone);
/// `nodes` is the shared Node cache, started at process start.
pub async fn run_controllers(
    client: Client,
    nodes: NodeCache,
    provider: Arc<dyn CloudProvider>,
    settings: Settings,
    metrics: AllMetrics,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    provider
        .initialize(client.clone(), shutdown.clone())
        .await
        .map_err(RunError::Initialize)?;
    let mut running = JoinSet::new();
    if let Some(instances) = provider.instances() {
        let heartbeat = Heartbeat::new(cloud_provider::node::CONTROLLER);
        let node = NodeController::new(
            client.clone(),
            nodes.clone(),
            instances.clone(),
            metrics.controllers.clone(),
            NodeControllerConfig::default(),
        );
        running.spawn(until_ended(
            heartbeat.clone(),
            node.with_heartbeat(heartbeat).run(shutdown.clone()),
        ));
        let heartbeat = Heartbeat::new(cloud_provider::nodelifecycle::CONTROLLER);
        let lifecycle = NodeLifecycleController::new(
            client.clone(),
            nodes.clone(),
            instances,
            metrics.controllers.clone(),
            NodeLifecycleControllerConfig {
                node_monitor_period: settings.node_monitor_period,
                cloud_provider_id_prefix: settings.provider_id_prefix.clone(),
                ..NodeLifecycleControllerConfig::default()
            },
        );
        running.spawn(until_ended(
            heartbeat.clone(),
            lifecycle.with_heartbeat(heartbeat).run(shutdown.clone()),
        ));
    }
    if let Some(lb) = provider.load_balancer() {
        let heartbeat = Heartbeat::new(cloud_provider::service::CONTROLLER);
        let service = ServiceController::new(
            client.clone(),
            nodes.clone(),
            lb,
            metrics.controllers.clone(),
            ServiceControllerConfig {
                cluster_name: settings.cluster_name.clone(),
                scope: settings.services.clone(),
                ..ServiceControllerConfig::default()
            },
        )
        .with_service_metrics(metrics.services.clone());
        running.spawn(until_ended(
            heartbeat.clone(),
            service.with_heartbeat(heartbeat).run(shutdown.clone()),
        ));
    }
    if let Some(routes) = provider.routes() {
        let heartbeat = Heartbeat::new(cloud_provider::route::CONTROLLER);
        let route = RouteController::new(
            client,
            nodes,
            routes,
            metrics.controllers.clone(),
            RouteControllerConfig {
                cluster_name: settings.cluster_name,
                cluster_cidrs: settings.cluster_cidrs,
                reconciliation_period: settings.route_reconciliation_period,
                ..RouteControllerConfig::default()
            },
        )
        .with_route_metrics(metrics.routes.clone());
        running.spawn(until_ended(
            heartbeat.clone(),
            route.with_heartbeat(heartbeat).run(shutdown.clone()),
        ));
    }
    while let Some(ended) = running.join_next().await {
        // A controller ends by itself only when one of its tasks died: the process must end
        // too, so that it is restarted.
        let heartbeat = ended.map_err(|err| RunError::Panicked(err.to_string()))?;
        if !shutdown.is_cancelled() {
            let why = heartbeat
                .death()
                .unwrap_or_else(|| "it returned without being asked to stop".to_owned());
            return Err(RunError::Ended {
                controller: heartbeat.controller().to_owned(),
                why,
            });
        }
    }
    // Also with no capability at all: run until asked to stop.
    shutdown.cancelled().await;
    Ok(())
}

/// Run a controller; its heartbeat once it ended.
async fn until_ended(heartbeat: Heartbeat, run: impl Future<Output = ()>) -> Heartbeat {
    run.await;
    heartbeat
}
