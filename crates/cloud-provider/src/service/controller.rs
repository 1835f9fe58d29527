//! I/O of the service controller; decisions live in [`super::decisions`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};
use kube::api::{Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::sync::Notify;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::decisions::{
    add_finalizer_patch, current_status, has_finalizer, load_balancer_status_equal, needs_cleanup,
    node_names_for_log, node_update_needs_sync, nodes_sufficiently_equal, remove_finalizer_patch,
    select_nodes, service_key, should_enqueue_added, should_enqueue_updated, status_patch,
    wants_load_balancer,
};
use crate::cache::{NodeCache, NodeChange};
use crate::events::{EventRecorder, EventType, error_chain};
use crate::metrics::Metrics;
use crate::provider::{self, LoadBalancer};
use crate::workqueue::{Backoff, WorkQueue};

/// Event source component (as upstream).
pub const COMPONENT: &str = "service-controller";
/// Controller label of service syncs in metrics.
pub const CONTROLLER: &str = "service";
/// Controller label of node-driven backend syncs in metrics.
pub const NODE_SYNC_CONTROLLER: &str = "service-nodesync";
/// First retry delay of a failed service sync.
pub const MIN_RETRY_DELAY: Duration = Duration::from_secs(5);
/// Longest retry delay of a failed service sync.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);
/// How often cached Services are re-examined (only cleanups are queued by it).
pub const SERVICE_RESYNC_PERIOD: Duration = Duration::from_secs(30);

/// Settings of the service controller.
#[derive(Clone, Debug)]
pub struct ServiceControllerConfig {
    /// `--cluster-name`, passed to every load balancer call.
    pub cluster_name: String,
    /// `--concurrent-service-syncs` (default 1): service workers, and the parallelism of the
    /// node-driven backend pass.
    pub workers: usize,
    /// Per-service retry backoff (upstream: 5 s → 300 s).
    pub backoff: Backoff,
    /// Period of the informer-style resync (default 30 s).
    pub resync_period: Duration,
    /// `--node-sync-period`: every period, one backend pass re-sends every load balancer's
    /// Nodes even when no Node changed (repairing targets changed behind the controller's back,
    /// or a backend update that was recorded but failed). Zero (the default) = backend passes
    /// run only on Node changes, as upstream.
    pub node_sync_period: Duration,
}

impl Default for ServiceControllerConfig {
    fn default() -> Self {
        Self {
            cluster_name: "kubernetes".to_owned(),
            workers: 1,
            backoff: Backoff {
                base: MIN_RETRY_DELAY,
                max: MAX_RETRY_DELAY,
            },
            resync_period: SERVICE_RESYNC_PERIOD,
            node_sync_period: Duration::ZERO,
        }
    }
}

fn latency_histogram() -> Histogram {
    // 1 s … ~4.5 h, as upstream's buckets.
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

/// The service controller's own metrics (upstream names). Cheap to clone.
#[derive(Clone, Debug)]
pub struct ServiceMetrics {
    loadbalancer_syncs: Counter,
    nodesync_errors: Counter,
    nodesync_latency: Histogram,
    update_host_latency: Histogram,
}

impl Default for ServiceMetrics {
    fn default() -> Self {
        Self {
            loadbalancer_syncs: Counter::default(),
            nodesync_errors: Counter::default(),
            nodesync_latency: latency_histogram(),
            update_host_latency: latency_histogram(),
        }
    }
}

impl ServiceMetrics {
    /// Fresh, unregistered metrics.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register `service_controller_loadbalancer_sync_total`,
    /// `service_controller_nodesync_error_total`, `service_controller_nodesync_latency_seconds`
    /// and `service_controller_update_loadbalancer_host_latency_seconds`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "service_controller_loadbalancer_sync",
            "A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster",
            self.loadbalancer_syncs.clone(),
        );
        registry.register(
            "service_controller_nodesync_error",
            "A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster",
            self.nodesync_errors.clone(),
        );
        registry.register(
            "service_controller_nodesync_latency_seconds",
            "A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates",
            self.nodesync_latency.clone(),
        );
        registry.register(
            "service_controller_update_loadbalancer_host_latency_seconds",
            "A metric measuring the latency for updating each load balancer hosts",
            self.update_host_latency.clone(),
        );
    }

    /// Load balancer configurations (ensure and backend updates) counted so far.
    pub fn loadbalancer_sync_count(&self) -> u64 {
        self.loadbalancer_syncs.get()
    }

    /// Failed node-driven backend updates counted so far.
    pub fn nodesync_error_count(&self) -> u64 {
        self.nodesync_errors.get()
    }
}

/// Why a service sync failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceSyncError {
    /// `GetLoadBalancer` failed before a cleanup.
    #[error("failed to check if load balancer exists before cleanup")]
    GetLoadBalancer(#[source] provider::Error),
    /// `EnsureLoadBalancerDeleted` failed.
    #[error("failed to delete load balancer")]
    DeleteLoadBalancer(#[source] provider::Error),
    /// `EnsureLoadBalancer` failed.
    #[error("failed to ensure load balancer")]
    EnsureLoadBalancer(#[source] provider::Error),
    /// The finalizer could not be added.
    #[error("failed to add load balancer cleanup finalizer")]
    AddFinalizer(#[source] kube::Error),
    /// The finalizer could not be removed.
    #[error("failed to remove load balancer cleanup finalizer")]
    RemoveFinalizer(#[source] kube::Error),
    /// `status.loadBalancer` could not be written.
    #[error("failed to update load balancer status")]
    UpdateStatus(#[source] kube::Error),
}

impl ServiceSyncError {
    /// The provider's fixed retry delay, when a [`provider::Error::Retry`] is in the chain.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::GetLoadBalancer(err)
            | Self::DeleteLoadBalancer(err)
            | Self::EnsureLoadBalancer(err) => err.retry_after(),
            Self::AddFinalizer(_) | Self::RemoveFinalizer(_) | Self::UpdateStatus(_) => None,
        }
    }

    /// A short, stable label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::GetLoadBalancer(err)
            | Self::DeleteLoadBalancer(err)
            | Self::EnsureLoadBalancer(err) => err.metric_label(),
            Self::AddFinalizer(_) | Self::RemoveFinalizer(_) | Self::UpdateStatus(_) => "kube_api",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Ensure,
    Delete,
}

fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.is_not_found())
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

struct Inner {
    client: Client,
    store: Store<Service>,
    nodes: NodeCache,
    lb: Arc<dyn LoadBalancer>,
    recorder: EventRecorder,
    metrics: Metrics,
    service_metrics: ServiceMetrics,
    config: ServiceControllerConfig,
    queue: WorkQueue<String>,
    /// The last version of every synced Service (upstream's `cachedService.state`), kept until
    /// its load balancer is known to be gone.
    remembered: Mutex<HashMap<String, Arc<Service>>>,
    /// The backend set each load balancer was last given.
    last_synced_nodes: Mutex<HashMap<String, Vec<Arc<Node>>>>,
    node_sync: Notify,
    /// Set by the periodic trigger: the next backend pass updates every load balancer.
    full_node_sync: std::sync::atomic::AtomicBool,
}

/// The service controller. Build it when leadership is won, then [`ServiceController::run`] it.
pub struct ServiceController {
    inner: Arc<Inner>,
    writer: reflector::store::Writer<Service>,
}

impl std::fmt::Debug for ServiceController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceController")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl ServiceController {
    /// A controller watching Services through `client`, reading Nodes from `nodes` and
    /// programming `lb`.
    pub fn new(
        client: Client,
        nodes: NodeCache,
        lb: Arc<dyn LoadBalancer>,
        metrics: Metrics,
        config: ServiceControllerConfig,
    ) -> Self {
        let (store, writer) = reflector::store();
        let recorder = EventRecorder::new(client.clone(), COMPONENT);
        let queue = WorkQueue::new(config.backoff);
        Self {
            inner: Arc::new(Inner {
                client,
                store,
                nodes,
                lb,
                recorder,
                metrics,
                service_metrics: ServiceMetrics::new(),
                config,
                queue,
                remembered: Mutex::default(),
                last_synced_nodes: Mutex::default(),
                node_sync: Notify::new(),
                full_node_sync: std::sync::atomic::AtomicBool::new(false),
            }),
            writer,
        }
    }

    fn inner_mut(&mut self) -> Option<&mut Inner> {
        Arc::get_mut(&mut self.inner)
    }

    /// Use `service_metrics` (e.g. one registered before leader election) instead of a private
    /// one.
    #[must_use]
    pub fn with_service_metrics(mut self, service_metrics: ServiceMetrics) -> Self {
        if let Some(inner) = self.inner_mut() {
            inner.service_metrics = service_metrics;
        }
        self
    }

    /// Use an event recorder of your own.
    #[must_use]
    pub fn with_recorder(mut self, recorder: EventRecorder) -> Self {
        if let Some(inner) = self.inner_mut() {
            inner.recorder = recorder;
        }
        self
    }

    /// The controller's own metrics.
    pub fn service_metrics(&self) -> &ServiceMetrics {
        &self.inner.service_metrics
    }

    /// Run until `shutdown` is cancelled: waits for the Node cache, then watches Services and
    /// Nodes and runs `workers` service workers plus one node-sync worker.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self { inner, writer } = self;
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = inner.nodes.wait_until_ready() => {}
        }
        let changes = inner.nodes.subscribe();
        tracing::info!(controller = CONTROLLER, "starting");
        let mut tasks = JoinSet::new();
        tasks.spawn(watch_services(inner.clone(), writer, shutdown.clone()));
        tasks.spawn(node_feed(inner.clone(), changes, shutdown.clone()));
        tasks.spawn(node_worker(inner.clone(), shutdown.clone()));
        tasks.spawn(resync_loop(inner.clone(), shutdown.clone()));
        if !inner.config.node_sync_period.is_zero() {
            tasks.spawn(periodic_node_sync(inner.clone(), shutdown.clone()));
        }
        for _ in 0..inner.config.workers.max(1) {
            tasks.spawn(worker(inner.clone(), shutdown.clone()));
        }
        shutdown.cancelled().await;
        inner.queue.shut_down();
        while tasks.join_next().await.is_some() {}
        tracing::info!(controller = CONTROLLER, "stopped");
    }
}

fn strip(service: &mut Service) {
    service.metadata.managed_fields = None;
}

async fn watch_services(
    inner: Arc<Inner>,
    mut writer: reflector::store::Writer<Service>,
    shutdown: CancellationToken,
) {
    let api: Api<Service> = Api::all(inner.client.clone());
    let stream = watcher::watcher(api, watcher::Config::default())
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
            Some(Err(err)) => tracing::warn!(error = %err, "service watch failed; retrying"),
            Some(Ok(event)) => inner.apply_service_event(&mut writer, event),
        }
    }
}

impl Inner {
    fn apply_service_event(
        &self,
        writer: &mut reflector::store::Writer<Service>,
        event: Event<Service>,
    ) {
        match &event {
            Event::Apply(service) => {
                let key = ObjectRef::from(service);
                let old = self.store.get(&key);
                writer.apply_watcher_event(&event);
                if let Some(new) = self.store.get(&key) {
                    self.on_service(old.as_deref(), &new);
                }
            }
            Event::Delete(service) => {
                writer.apply_watcher_event(&event);
                self.on_service_deleted(service);
            }
            Event::Init | Event::InitApply(_) => writer.apply_watcher_event(&event),
            Event::InitDone => {
                let mut before: HashMap<String, Arc<Service>> = self
                    .store
                    .state()
                    .into_iter()
                    .map(|s| (service_key(&s), s))
                    .collect();
                writer.apply_watcher_event(&event);
                for new in self.store.state() {
                    let old = before.remove(&service_key(&new));
                    self.on_service(old.as_deref(), &new);
                }
                for gone in before.values() {
                    self.on_service_deleted(gone);
                }
            }
        }
    }

    fn on_service(&self, old: Option<&Service>, new: &Service) {
        let enqueue = match old {
            None => should_enqueue_added(new),
            Some(old) => should_enqueue_updated(old, new),
        };
        if enqueue {
            self.queue.add(service_key(new));
        }
    }

    /// Upstream has no delete handler; a Service that vanished while remembered as wanting a
    /// load balancer (no finalizer, e.g. removed by someone else) is queued so that the legacy
    /// path deletes its load balancer.
    fn on_service_deleted(&self, service: &Service) {
        let key = service_key(service);
        let remembered = lock(&self.remembered)
            .get(&key)
            .is_some_and(|s| wants_load_balancer(s));
        if remembered {
            self.queue.add(key);
        }
    }

    fn cached_service(&self, key: &str) -> Option<Arc<Service>> {
        let (namespace, name) = key.split_once('/')?;
        self.store.get(&ObjectRef::new(name).within(namespace))
    }
}

async fn resync_loop(inner: Arc<Inner>, shutdown: CancellationToken) {
    let period = crate::period(inner.config.resync_period);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(period) => {}
        }
        // A resync delivers old == new: needsUpdate is false, only cleanups are queued.
        for service in inner.store.state() {
            if needs_cleanup(&service) {
                inner.queue.add(service_key(&service));
            }
        }
    }
}

/// Every `node_sync_period`: ask for a full backend pass (coalescing with a pending one).
async fn periodic_node_sync(inner: Arc<Inner>, shutdown: CancellationToken) {
    let period = crate::period(inner.config.node_sync_period);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(period) => {}
        }
        inner
            .full_node_sync
            .store(true, std::sync::atomic::Ordering::SeqCst);
        inner.node_sync.notify_one();
    }
}

async fn node_feed(
    inner: Arc<Inner>,
    mut changes: tokio::sync::broadcast::Receiver<NodeChange>,
    shutdown: CancellationToken,
) {
    loop {
        let change = tokio::select! {
            () = shutdown.cancelled() => return,
            change = changes.recv() => change,
        };
        let trigger = match change {
            Ok(NodeChange::Applied { old: None, .. } | NodeChange::Deleted(_)) => true,
            Ok(NodeChange::Applied {
                old: Some(old),
                new,
            }) => node_update_needs_sync(&old, &new),
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "node change feed lagged; resyncing load balancer backends"
                );
                true
            }
            Err(RecvError::Closed) => return,
        };
        if trigger {
            // Coalesces: a pass already requested runs once.
            inner.node_sync.notify_one();
        }
    }
}

async fn node_worker(inner: Arc<Inner>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = inner.node_sync.notified() => {}
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = inner.node_sync_pass() => {}
        }
    }
}

async fn worker(inner: Arc<Inner>, shutdown: CancellationToken) {
    loop {
        let next = tokio::select! {
            () = shutdown.cancelled() => return,
            next = inner.queue.get() => next,
        };
        let Some(key) = next else { return };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = inner.process(&key) => {}
        }
        inner.queue.done(&key);
    }
}

impl Inner {
    fn cluster(&self) -> &str {
        &self.config.cluster_name
    }

    async fn event(&self, service: &Service, type_: EventType, reason: &str, message: &str) {
        self.recorder.publish(service, type_, reason, message).await;
    }

    async fn process(&self, key: &str) {
        let _timer = self.metrics.reconcile_timer(CONTROLLER);
        let result = match self.cached_service(key) {
            None => self.process_deletion(key).await,
            Some(service) => self.process_create_or_update(service, key).await,
        };
        let owned = key.to_owned();
        match result {
            Ok(()) => self.queue.forget(&owned),
            Err(err) => {
                self.metrics.record_error(CONTROLLER, err.metric_label());
                let chain = error_chain(&err);
                if let Some(delay) = err.retry_after() {
                    tracing::warn!(service = key, error = %chain, retry_in = ?delay, "service sync asked for a fixed-delay retry");
                    self.queue.add_after(owned, delay);
                } else {
                    let delay = self.queue.add_rate_limited(owned);
                    tracing::warn!(service = key, error = %chain, retry_in = ?delay, "service sync failed");
                }
            }
        }
    }

    fn forget(&self, key: &str) {
        lock(&self.remembered).remove(key);
        lock(&self.last_synced_nodes).remove(key);
    }

    /// The Service is gone from the cache: delete the load balancer of the remembered version
    /// (the legacy path for Services without the finalizer).
    async fn process_deletion(&self, key: &str) -> Result<(), ServiceSyncError> {
        let Some(previous) = lock(&self.remembered).get(key).cloned() else {
            return Ok(());
        };
        tracing::info!(
            service = key,
            "service has been deleted; cleaning up its load balancer"
        );
        self.process_load_balancer_delete(&previous).await?;
        self.forget(key);
        Ok(())
    }

    async fn process_load_balancer_delete(
        &self,
        service: &Service,
    ) -> Result<(), ServiceSyncError> {
        if !wants_load_balancer(service) {
            return Ok(());
        }
        self.event(
            service,
            EventType::Normal,
            "DeletingLoadBalancer",
            "Deleting load balancer",
        )
        .await;
        if let Err(err) = self
            .lb
            .ensure_load_balancer_deleted(self.cluster(), service)
            .await
        {
            let message = format!("Error deleting load balancer: {}", error_chain(&err));
            self.event(
                service,
                EventType::Warning,
                "DeleteLoadBalancerFailed",
                &message,
            )
            .await;
            return Err(ServiceSyncError::DeleteLoadBalancer(err));
        }
        self.event(
            service,
            EventType::Normal,
            "DeletedLoadBalancer",
            "Deleted load balancer",
        )
        .await;
        Ok(())
    }

    async fn process_create_or_update(
        &self,
        service: Arc<Service>,
        key: &str,
    ) -> Result<(), ServiceSyncError> {
        let previous = lock(&self.remembered).get(key).cloned();
        if let Some(previous) = previous
            && previous.metadata.uid != service.metadata.uid
        {
            // Deleted and re-created without the finalizer: clean up the old one first.
            self.process_load_balancer_delete(&previous).await?;
        }
        lock(&self.remembered).insert(key.to_owned(), service.clone());
        match self.sync_load_balancer(&service, key).await {
            Err(err) => {
                let message = format!("Error syncing load balancer: {}", error_chain(&err));
                self.event(
                    &service,
                    EventType::Warning,
                    "SyncLoadBalancerFailed",
                    &message,
                )
                .await;
                Err(err)
            }
            Ok(Operation::Delete) => {
                self.forget(key);
                Ok(())
            }
            Ok(Operation::Ensure) => Ok(()),
        }
    }

    fn services_api(&self, service: &Service) -> Api<Service> {
        let namespace = service.metadata.namespace.as_deref().unwrap_or("default");
        Api::namespaced(self.client.clone(), namespace)
    }

    async fn patch_status(
        &self,
        service: &Service,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error> {
        let name = service.metadata.name.as_deref().unwrap_or_default();
        self.services_api(service)
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map(|_| ())
    }

    async fn sync_load_balancer(
        &self,
        service: &Service,
        key: &str,
    ) -> Result<Operation, ServiceSyncError> {
        let previous_status = current_status(service).cloned();
        let (operation, new_status) = if !wants_load_balancer(service) || needs_cleanup(service) {
            let existing = self
                .lb
                .get_load_balancer(self.cluster(), service)
                .await
                .map_err(ServiceSyncError::GetLoadBalancer)?;
            if existing.is_some() {
                tracing::info!(service = key, "deleting existing load balancer");
                self.event(
                    service,
                    EventType::Normal,
                    "DeletingLoadBalancer",
                    "Deleting load balancer",
                )
                .await;
                match self
                    .lb
                    .ensure_load_balancer_deleted(self.cluster(), service)
                    .await
                {
                    Ok(()) => {}
                    Err(err) if err.is_implemented_elsewhere() => {
                        tracing::debug!(
                            service = key,
                            "load balancer implemented elsewhere; ignoring on deletion"
                        );
                    }
                    Err(err) => return Err(ServiceSyncError::DeleteLoadBalancer(err)),
                }
            }
            // Always removed once the load balancer is gone, so the Service can be deleted.
            self.remove_finalizer(service)
                .await
                .map_err(ServiceSyncError::RemoveFinalizer)?;
            self.event(
                service,
                EventType::Normal,
                "DeletedLoadBalancer",
                "Deleted load balancer",
            )
            .await;
            (Operation::Delete, LoadBalancerStatus::default())
        } else {
            tracing::info!(service = key, "ensuring load balancer");
            self.event(
                service,
                EventType::Normal,
                "EnsuringLoadBalancer",
                "Ensuring load balancer",
            )
            .await;
            // Before any cloud call: the Service cannot vanish while its load balancer exists.
            self.add_finalizer(service)
                .await
                .map_err(ServiceSyncError::AddFinalizer)?;
            let status = match self.ensure_load_balancer(service, key).await {
                Ok(status) => status,
                Err(err) if err.is_implemented_elsewhere() => {
                    tracing::debug!(
                        service = key,
                        "load balancer implemented elsewhere; nothing to do"
                    );
                    return Ok(Operation::Ensure);
                }
                Err(err) => return Err(ServiceSyncError::EnsureLoadBalancer(err)),
            };
            self.event(
                service,
                EventType::Normal,
                "EnsuredLoadBalancer",
                "Ensured load balancer",
            )
            .await;
            (Operation::Ensure, status)
        };
        if !load_balancer_status_equal(previous_status.as_ref(), Some(&new_status)) {
            match self.patch_status(service, &status_patch(&new_status)).await {
                Ok(()) => {}
                // Mostly a Service that disappeared right after its finalizer was removed.
                Err(err) if is_not_found(&err) => {}
                Err(err) => return Err(ServiceSyncError::UpdateStatus(err)),
            }
        }
        Ok(operation)
    }

    async fn add_finalizer(&self, service: &Service) -> Result<(), kube::Error> {
        if has_finalizer(service) {
            return Ok(());
        }
        self.patch_status(service, &add_finalizer_patch()).await
    }

    async fn remove_finalizer(&self, service: &Service) -> Result<(), kube::Error> {
        if !has_finalizer(service) {
            return Ok(());
        }
        match self.patch_status(service, &remove_finalizer_patch()).await {
            Err(err) if is_not_found(&err) => Ok(()),
            other => other,
        }
    }

    async fn ensure_load_balancer(
        &self,
        service: &Service,
        key: &str,
    ) -> provider::Result<LoadBalancerStatus> {
        let nodes = select_nodes(&self.nodes.list());
        if nodes.is_empty() {
            self.event(
                service,
                EventType::Warning,
                "UnAvailableLoadBalancer",
                "There are no available nodes for LoadBalancer",
            )
            .await;
        }
        lock(&self.last_synced_nodes).insert(key.to_owned(), nodes.clone());
        self.service_metrics.loadbalancer_syncs.inc();
        self.lb
            .ensure_load_balancer(self.cluster(), service, &nodes)
            .await
    }

    /// One node-driven pass over every remembered Service wanting a load balancer.
    async fn node_sync_pass(&self) {
        let _timer = self.metrics.reconcile_timer(NODE_SYNC_CONTROLLER);
        let started = Instant::now();
        let services: Vec<(String, Arc<Service>)> = lock(&self.remembered)
            .iter()
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        let all_nodes = self.nodes.list();
        let all_nodes = &all_nodes;
        let full = self
            .full_node_sync
            .swap(false, std::sync::atomic::Ordering::SeqCst);
        if full {
            tracing::debug!(
                services = services.len(),
                "periodic backend pass over every load balancer"
            );
        }
        let retry: Vec<String> = futures::stream::iter(services)
            .map(|(key, service)| async move {
                self.node_sync_service(&key, &service, all_nodes, full)
                    .await
                    .then_some(key)
            })
            .buffer_unordered(self.config.workers.max(1))
            .filter_map(std::future::ready)
            .collect()
            .await;
        for key in retry {
            // Unthrottled: the full ensure fixes what the backend update could not.
            self.queue.add(key);
        }
        self.service_metrics
            .nodesync_latency
            .observe(started.elapsed().as_secs_f64());
    }

    /// Returns whether the Service must be retried with a full sync. `full`: update the load
    /// balancer even when its Nodes did not change.
    async fn node_sync_service(
        &self,
        key: &str,
        service: &Service,
        all_nodes: &[Arc<Node>],
        full: bool,
    ) -> bool {
        if !wants_load_balancer(service) {
            return false;
        }
        let new_nodes = select_nodes(all_nodes);
        let old_nodes = {
            let mut last = lock(&self.last_synced_nodes);
            let old = last.get(key).map(|n| select_nodes(n)).unwrap_or_default();
            // Stored before the call: a failure is retried through the service queue.
            last.insert(key.to_owned(), new_nodes.clone());
            old
        };
        if !full && nodes_sufficiently_equal(&old_nodes, &new_nodes) {
            return false;
        }
        match self.update_load_balancer_hosts(service, &new_nodes).await {
            Ok(()) => false,
            Err(err) => {
                tracing::warn!(service = key, error = %error_chain(&err), "failed to update load balancer hosts");
                self.metrics
                    .record_error(NODE_SYNC_CONTROLLER, err.metric_label());
                self.service_metrics.nodesync_errors.inc();
                true
            }
        }
    }

    async fn update_load_balancer_hosts(
        &self,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> provider::Result<()> {
        let started = Instant::now();
        self.service_metrics.loadbalancer_syncs.inc();
        let result = self
            .lb
            .update_load_balancer(self.cluster(), service, nodes)
            .await;
        self.service_metrics
            .update_host_latency
            .observe(started.elapsed().as_secs_f64());
        let err = match result {
            Ok(()) => {
                if nodes.is_empty() {
                    self.event(
                        service,
                        EventType::Warning,
                        "UnAvailableLoadBalancer",
                        "There are no available nodes for LoadBalancer",
                    )
                    .await;
                } else {
                    self.event(
                        service,
                        EventType::Normal,
                        "UpdatedLoadBalancer",
                        "Updated load balancer with new hosts",
                    )
                    .await;
                }
                return Ok(());
            }
            Err(err) if err.is_implemented_elsewhere() => return Ok(()),
            Err(err) => err,
        };
        // Only an error if the load balancer still exists.
        match self.lb.get_load_balancer(self.cluster(), service).await {
            Ok(None) => return Ok(()),
            Ok(Some(_)) => {}
            Err(get_err) => {
                tracing::warn!(error = %error_chain(&get_err), "failed to check whether the load balancer exists");
            }
        }
        let message = format!(
            "Error updating load balancer with new hosts [{}] [node names limited, total number of nodes: {}], error: {}",
            node_names_for_log(nodes).join(" "),
            nodes.len(),
            error_chain(&err)
        );
        self.event(
            service,
            EventType::Warning,
            "UpdateLoadBalancerFailed",
            &message,
        )
        .await;
        Err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn metrics_have_upstream_names() {
        let metrics = ServiceMetrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        metrics.loadbalancer_syncs.inc();
        metrics.nodesync_errors.inc();
        metrics.nodesync_latency.observe(0.5);
        metrics.update_host_latency.observe(0.5);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for needle in [
            "service_controller_loadbalancer_sync_total 1",
            "service_controller_nodesync_error_total 1",
            "service_controller_nodesync_latency_seconds_count 1",
            "service_controller_update_loadbalancer_host_latency_seconds_count 1",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
        assert_eq!(metrics.loadbalancer_sync_count(), 1);
        assert_eq!(metrics.nodesync_error_count(), 1);
    }

    #[test]
    fn default_config_matches_upstream() {
        let config = ServiceControllerConfig::default();
        assert_eq!(config.workers, 1);
        assert_eq!(config.backoff.delay(0), Duration::from_secs(5));
        assert_eq!(config.backoff.delay(10), Duration::from_secs(300));
        assert_eq!(config.resync_period, Duration::from_secs(30));
        assert_eq!(
            config.node_sync_period,
            Duration::ZERO,
            "no periodic full pass"
        );
    }

    #[test]
    fn retry_errors_are_found_through_wrapping() {
        let wrapped = provider::Error::Other {
            message: "ensure".into(),
            source: Some(Box::new(provider::Error::retry(
                "locked",
                Duration::from_secs(7),
            ))),
        };
        let err = ServiceSyncError::EnsureLoadBalancer(wrapped);
        assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(err.metric_label(), "other");
        let plain = ServiceSyncError::EnsureLoadBalancer(provider::Error::api_msg("503"));
        assert_eq!(plain.retry_after(), None);
        let deleted = ServiceSyncError::DeleteLoadBalancer(provider::Error::retry(
            "busy",
            Duration::from_secs(2),
        ));
        assert_eq!(deleted.retry_after(), Some(Duration::from_secs(2)));
        assert_eq!(
            error_chain(&plain),
            "failed to ensure load balancer: cloud API call failed: 503"
        );
    }
}
