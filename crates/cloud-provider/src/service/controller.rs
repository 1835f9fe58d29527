//! I/O of the service controller: its informers, queue and workers. The sync itself lives in
//! [`super::sync`], the node-driven target update in [`super::node_sync`], decisions in
//! [`super::decisions`].
//!
//! Every action on a Service runs on the Service's own queue key, so one Service never has two
//! actions at once: a full sync (ensure or cleanup) and the node-driven "update targets"
//! action are both queued, and the latter builds its target set from the Node cache when it
//! runs, not when the Node changed.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Secret, Service};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::class::OwnedClass;
use super::decisions::{
    NodeFilter, ServiceEvent, needs_cleanup, service_key, should_enqueue_added,
    should_enqueue_updated, wants_load_balancer,
};
use super::errors::ServiceSyncError;
use super::metrics::ServiceMetrics;
use crate::events::{EventRecorder, EventType, LastWarnings, error_chain};
use crate::metrics::Metrics;
use crate::provider::LoadBalancer;
use crate::runtime::cache::{NodeCache, NodeEvent};
use crate::runtime::health::{Heartbeat, Tasks};
use crate::runtime::informer::{self, Feed, Informer, WatchEvent};
use crate::runtime::reconcile::{self, Reconciler};
use crate::runtime::scope::WatchScope;
use crate::runtime::workqueue::{Backoff, WorkQueue, expedite_on_recovery};

/// Event source component (as upstream).
pub const COMPONENT: &str = "service-controller";
/// Controller label of service syncs in metrics.
pub const CONTROLLER: &str = "service";
/// Controller label of node-driven backend updates in metrics.
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
    /// `--concurrent-service-syncs` (default 1): service workers.
    pub workers: usize,
    /// Per-service retry backoff (upstream: 5 s → 300 s).
    pub backoff: Backoff,
    /// Period of the informer-style resync (default 30 s); also how long the Service watch may
    /// fail (while the apiserver answers) before the controller counts as unhealthy.
    pub resync_period: Duration,
    /// `--node-sync-period`: every period, every load balancer's targets are set again from
    /// the current Nodes even when no Node changed (repairing targets changed behind the
    /// controller's back). Zero (the default) = target updates run only on Node changes.
    pub node_sync_period: Duration,
    /// Which Services are watched (namespace and labels); every Service by default, as the
    /// binary needs. A framework option for library users and tests, see [`WatchScope`]. The
    /// Nodes come from the [`NodeCache`] the controller is given, with its own scope.
    pub scope: WatchScope,
    /// The `spec.loadBalancerClass` of the Services this controller owns (default: none, the
    /// Services without a class, as upstream). Services of any other class are never touched.
    pub class: OwnedClass,
    /// Which Nodes back the load balancers (default: upstream's choice; opt-in: no cordoned
    /// Node).
    pub nodes: NodeFilter,
    /// Read the TLS Secrets load balancers are made from ([`LoadBalancer::secrets_of`]): the
    /// provider gets a reader ([`crate::secrets::ApiTlsSecrets`]) and, once a Service names a
    /// Secret, the controller watches the TLS Secrets (their metadata only) to sync a Service
    /// again when one it names changes. Needs `get`, `list` and `watch` on `secrets` then;
    /// off by default.
    pub secrets: bool,
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
            scope: WatchScope::all(),
            class: OwnedClass::default(),
            nodes: NodeFilter::default(),
            secrets: false,
        }
    }
}

/// The next action queued for a Service key. A full sync includes the targets, so it wins
/// when both are asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Work {
    /// Set the load balancer's targets from the current Nodes; `force`: even when they equal
    /// the last set sent.
    UpdateTargets { force: bool },
    /// Ensure (or clean up) the load balancer as a whole.
    Sync,
}

impl Work {
    fn merge(self, other: Work) -> Work {
        match (self, other) {
            (Work::Sync, _) | (_, Work::Sync) => Work::Sync,
            (Work::UpdateTargets { force: a }, Work::UpdateTargets { force: b }) => {
                Work::UpdateTargets { force: a || b }
            }
        }
    }
}

pub(super) struct ServiceReconciler {
    pub(super) client: Client,
    pub(super) services: Informer<Service>,
    pub(super) nodes: NodeCache,
    pub(super) lb: Arc<dyn LoadBalancer>,
    pub(super) recorder: EventRecorder,
    pub(super) metrics: Metrics,
    pub(super) service_metrics: ServiceMetrics,
    pub(super) config: ServiceControllerConfig,
    pub(super) queue: Arc<WorkQueue<String>>,
    /// The action each queued key is waiting for (absent = a full sync).
    pub(super) pending: Mutex<HashMap<String, Work>>,
    /// The last version of every synced Service (upstream's `cachedService.state`), kept until
    /// its load balancer is known to be gone.
    pub(super) remembered: Mutex<HashMap<String, Arc<Service>>>,
    /// The targets each load balancer was last given successfully.
    pub(super) last_synced_nodes: Mutex<HashMap<String, Vec<Arc<Node>>>>,
    /// The message of the last `SyncLoadBalancerFailed` Warning of each Service still failing:
    /// a failure retried with the same message warns once, not once per retry.
    pub(super) last_warning: LastWarnings,
    /// Whether a Service names a Secret (see `watch_secrets`).
    pub(super) secrets_named: watch::Sender<bool>,
}

/// The service controller. Build it when leadership is won, then [`ServiceController::run`] it.
pub struct ServiceController {
    client: Client,
    nodes: NodeCache,
    lb: Arc<dyn LoadBalancer>,
    recorder: EventRecorder,
    metrics: Metrics,
    service_metrics: ServiceMetrics,
    config: ServiceControllerConfig,
    heartbeat: Heartbeat,
    recoveries: Option<watch::Receiver<u64>>,
}

impl std::fmt::Debug for ServiceController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceController")
            .field("config", &self.config)
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
        let recorder = EventRecorder::new(client.clone(), COMPONENT);
        Self {
            client,
            nodes,
            lb,
            recorder,
            metrics,
            service_metrics: ServiceMetrics::new(),
            config,
            heartbeat: Heartbeat::new(CONTROLLER),
            recoveries: None,
        }
    }

    /// Use `service_metrics` (e.g. one registered before leader election) instead of a private
    /// one.
    #[must_use]
    pub fn with_service_metrics(mut self, service_metrics: ServiceMetrics) -> Self {
        self.service_metrics = service_metrics;
        self
    }

    /// Use an event recorder of your own.
    #[must_use]
    pub fn with_recorder(mut self, recorder: EventRecorder) -> Self {
        self.recorder = recorder;
        self
    }

    /// Report liveness and readiness into `heartbeat` (e.g. one the binary checks).
    #[must_use]
    pub fn with_heartbeat(mut self, heartbeat: Heartbeat) -> Self {
        self.heartbeat = heartbeat;
        self
    }

    /// Retry the Services whose last failure was transient as soon as `recoveries` (the
    /// provider's, see `CloudProvider::recoveries`) counts a recovery of the cloud API.
    #[must_use]
    pub fn with_recoveries(mut self, recoveries: Option<watch::Receiver<u64>>) -> Self {
        self.recoveries = recoveries;
        self
    }

    /// The controller's own metrics.
    pub fn service_metrics(&self) -> &ServiceMetrics {
        &self.service_metrics
    }

    /// The controller's heartbeat.
    pub fn heartbeat(&self) -> &Heartbeat {
        &self.heartbeat
    }

    /// Run until `shutdown` is cancelled, or until one of its tasks dies (reported to the
    /// heartbeat first). Waits for the Node cache, then watches Services and Nodes and runs
    /// `workers` workers.
    pub async fn run(self, shutdown: CancellationToken) {
        let api: Api<Service> = self.config.scope.namespaced_api(self.client.clone());
        let (services, driver) = Informer::new(api, "services", strip);
        let driver = driver.with_scope(&self.config.scope);
        let heartbeat = self.heartbeat.clone();
        heartbeat.watch(services.progress().clone(), self.config.resync_period);
        heartbeat.watch(self.nodes.progress().clone(), self.config.resync_period);
        let inner = Arc::new(ServiceReconciler {
            client: self.client,
            services,
            nodes: self.nodes,
            lb: self.lb,
            recorder: self.recorder,
            queue: Arc::new(
                WorkQueue::new(self.config.backoff)
                    .with_metrics(CONTROLLER, self.metrics.workqueues()),
            ),
            metrics: self.metrics,
            service_metrics: self.service_metrics,
            config: self.config,
            pending: Mutex::default(),
            remembered: Mutex::default(),
            last_synced_nodes: Mutex::default(),
            last_warning: LastWarnings::default(),
            secrets_named: watch::Sender::new(false),
        });
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = inner.nodes.wait_until_ready() => {}
        }
        // The provider waits for the cloud through the pool's handle, lending its slot.
        let workers = reconcile::Workers::new(inner.config.workers);
        inner.lb.use_workers(workers.clone());
        // The provider asks the informer whether a Service still exists, never the apiserver.
        inner
            .lb
            .use_services(Arc::new(InformedServices(inner.services.clone())));
        let node_changes = inner.nodes.subscribe();
        let service_changes = inner.services.subscribe();
        tracing::info!(controller = CONTROLLER, "starting");
        let mut tasks = Tasks::new(heartbeat.clone());
        tasks.spawn("service-watch", driver.run(shutdown.clone()));
        tasks.spawn(
            "service-feed",
            service_feed(inner.clone(), service_changes, shutdown.clone()),
        );
        tasks.spawn(
            "node-feed",
            node_feed(inner.clone(), node_changes, shutdown.clone()),
        );
        tasks.spawn("resync", resync_loop(inner.clone(), shutdown.clone()));
        if inner.config.secrets {
            inner
                .lb
                .use_secrets(Arc::new(crate::secrets::ApiTlsSecrets::new(
                    inner.client.clone(),
                )));
            tasks.spawn(
                "secret-watch",
                watch_secrets(inner.clone(), shutdown.clone()),
            );
        }
        if let Some(recoveries) = self.recoveries {
            tasks.spawn(
                "recovery",
                expedite_on_recovery(inner.queue.clone(), recoveries, shutdown.clone()),
            );
        }
        if !inner.config.node_sync_period.is_zero() {
            tasks.spawn(
                "periodic-node-sync",
                periodic_node_sync(inner.clone(), shutdown.clone()),
            );
        }
        let synced = {
            let inner = inner.clone();
            let heartbeat = heartbeat.clone();
            let shutdown = shutdown.clone();
            // Lives until shutdown (a task that ends early counts as a death), and ends with it.
            async move {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = inner.services.wait_until_synced() => heartbeat.set_synced(),
                }
                shutdown.cancelled().await;
            }
        };
        tasks.spawn("sync-marker", synced);
        let (queue, metrics) = (inner.queue.clone(), inner.metrics.clone());
        tasks
            .run_pool_until_stopped(inner, queue, metrics, workers, &shutdown)
            .await;
    }
}

/// The Services of the controller's informer, as [`crate::KnownServices`]: a scan of the
/// store, made only when the provider asks (when it considers adopting a load balancer).
#[derive(Debug)]
struct InformedServices(Informer<Service>);

impl crate::KnownServices for InformedServices {
    fn exists(&self, uid: &str) -> Option<bool> {
        if !self.0.has_synced() {
            return None;
        }
        Some(
            self.0
                .list()
                .iter()
                .any(|s| s.metadata.uid.as_deref() == Some(uid)),
        )
    }

    fn name_of(&self, uid: &str) -> Option<String> {
        self.0
            .list()
            .iter()
            .find(|s| s.metadata.uid.as_deref() == Some(uid))
            .map(|s| service_key(s))
    }
}

fn strip(service: &mut Service) {
    service.metadata.managed_fields = None;
}

impl ServiceReconciler {
    pub(super) fn cluster(&self) -> &str {
        &self.config.cluster_name
    }

    pub(super) fn class(&self) -> &OwnedClass {
        &self.config.class
    }

    /// Record one of the controller's events on `service`.
    pub(super) async fn event(&self, service: &Service, event: ServiceEvent) {
        let type_ = if event.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        self.recorder
            .publish(service, type_, event.reason, event.message)
            .await;
    }

    /// Queue `action` for `key` (merged with one already waiting).
    pub(super) fn enqueue(&self, key: String, action: Work) {
        {
            let mut pending = self.pending.lock();
            let merged = pending
                .get(&key)
                .map_or(action, |waiting| waiting.merge(action));
            pending.insert(key.clone(), merged);
        }
        self.queue.add(key);
    }

    /// Queue a target update for every remembered Service with a load balancer. One already
    /// waiting for a full sync gets that sync (which sets the targets) now if it is backing off
    /// after a failure (see [`ServiceReconciler::sync_now_for_nodes`]).
    fn enqueue_target_updates(&self, force: bool) {
        let keys: Vec<String> = self
            .remembered
            .lock()
            .iter()
            .filter(|(_, s)| wants_load_balancer(s, self.class()))
            .map(|(k, _)| k.clone())
            .collect();
        if keys.len() > 1 {
            self.lb.expect_lookups(keys.len());
        }
        for key in keys {
            if self.pending.lock().get(&key) == Some(&Work::Sync) {
                self.sync_now_for_nodes(key);
                continue;
            }
            self.enqueue(key, Work::UpdateTargets { force });
        }
    }

    fn on_service(&self, old: Option<&Service>, new: &Service) {
        if self.config.secrets
            && !*self.secrets_named.borrow()
            && !self.lb.secrets_of(new).is_empty()
        {
            self.secrets_named.send_replace(true);
        }
        let enqueue = match old {
            None => should_enqueue_added(new, self.class()),
            Some(old) => should_enqueue_updated(old, new, self.class()),
        };
        if enqueue {
            self.enqueue(service_key(new), Work::Sync);
        }
    }

    /// Queue a sync of every Service this controller syncs whose load balancer names
    /// `secret` (every Secret: `None`).
    fn enqueue_naming(&self, secret: Option<&Secret>) {
        for service in self.services.list() {
            if !should_enqueue_added(&service, self.class()) {
                continue;
            }
            let names = self.lb.secrets_of(&service);
            let named = match secret {
                None => !names.is_empty(),
                Some(secret) => {
                    secret.metadata.namespace == service.metadata.namespace
                        && names
                            .iter()
                            .any(|name| secret.metadata.name.as_deref() == Some(name.as_str()))
                }
            };
            if named {
                self.enqueue(service_key(&service), Work::Sync);
            }
        }
    }

    /// Upstream has no delete handler; a Service that vanished while remembered as wanting a
    /// load balancer (no finalizer, e.g. removed by someone else) is queued so that the legacy
    /// path deletes its load balancer.
    fn on_service_deleted(&self, service: &Service) {
        let key = service_key(service);
        let remembered = self
            .remembered
            .lock()
            .get(&key)
            .is_some_and(|s| wants_load_balancer(s, self.class()));
        if remembered {
            self.enqueue(key, Work::Sync);
        }
    }

    pub(super) fn cached_service(&self, key: &str) -> Option<Arc<Service>> {
        let (namespace, name) = key.split_once('/')?;
        self.services.get(Some(namespace), name)
    }

    /// The cached Service of `key` if this controller may write to it (events included); a
    /// Service of another class gets nothing, not even the Warning of a failed cleanup.
    fn touchable_service(&self, key: &str) -> Option<Arc<Service>> {
        self.cached_service(key)
            .filter(|s| self.class().may_touch(s))
    }

    pub(super) fn forget(&self, key: &str) {
        self.remembered.lock().remove(key);
        self.last_synced_nodes.lock().remove(key);
        self.last_warning.forget(key);
    }
}

async fn service_feed(
    inner: Arc<ServiceReconciler>,
    changes: tokio::sync::broadcast::Receiver<WatchEvent<Service>>,
    shutdown: CancellationToken,
) {
    informer::feed(changes, shutdown, |event| match event {
        Feed::Event(WatchEvent::Applied { old, new }) => inner.on_service(old.as_deref(), &new),
        Feed::Event(WatchEvent::Deleted(gone)) => inner.on_service_deleted(&gone),
        Feed::Lagged(missed) => {
            tracing::warn!(missed, "service change feed lagged; syncing every service");
            for service in inner.services.list() {
                if should_enqueue_added(&service, inner.class()) {
                    inner.enqueue(service_key(&service), Work::Sync);
                }
            }
        }
    })
    .await;
}

/// Once a Service names a Secret ([`LoadBalancer::secrets_of`]), watch the TLS Secrets (their
/// metadata only), and sync every Service whose load balancer names one that was added,
/// changed or deleted; a re-list that finds a Secret unchanged queues nothing. A cluster
/// whose Services name none has no Secret watch (and needs no right to one). Not watched by
/// the heartbeat: a Secret watch the role refuses must not stop the load balancers that name
/// no Secret (the syncs of those that do say why).
async fn watch_secrets(inner: Arc<ServiceReconciler>, shutdown: CancellationToken) {
    let mut named = inner.secrets_named.subscribe();
    tokio::select! {
        () = shutdown.cancelled() => return,
        changed = named.wait_for(|named| *named) => if changed.is_err() { return },
    }
    let api: Api<Secret> = match inner.config.scope.namespace() {
        Some(namespace) => Api::namespaced(inner.client.clone(), namespace),
        None => Api::all(inner.client.clone()),
    };
    let (secrets, driver) = Informer::new(api, "secrets", crate::secrets::strip);
    let changes = secrets.subscribe();
    tracing::info!(
        controller = CONTROLLER,
        "a Service names a Secret; watching TLS Secrets"
    );
    let feed = informer::feed(changes, shutdown.clone(), |event| match event {
        Feed::Event(WatchEvent::Applied { old, new }) => {
            let version = |s: &Secret| s.metadata.resource_version.clone();
            if old.as_deref().map(version) != Some(version(&new)) {
                inner.enqueue_naming(Some(&new));
            }
        }
        Feed::Event(WatchEvent::Deleted(gone)) => inner.enqueue_naming(Some(&gone)),
        Feed::Lagged(missed) => {
            tracing::warn!(
                missed,
                "secret change feed lagged; syncing every service that names a secret"
            );
            inner.enqueue_naming(None);
        }
    });
    let watch = driver
        .with_fields(crate::secrets::TLS_SECRETS)
        .run(shutdown.clone());
    tokio::join!(watch, feed);
}

/// Run `pass` once a `period` (the first after one period) until `shutdown`.
async fn every(period: Duration, shutdown: CancellationToken, mut pass: impl FnMut()) {
    let period = crate::period(period);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(period) => {}
        }
        pass();
    }
}

async fn resync_loop(inner: Arc<ServiceReconciler>, shutdown: CancellationToken) {
    every(inner.config.resync_period, shutdown, || {
        // A resync delivers old == new: needsUpdate is false, only cleanups are queued.
        for service in inner.services.list() {
            if needs_cleanup(&service, inner.class()) {
                inner.enqueue(service_key(&service), Work::Sync);
            }
        }
    })
    .await;
}

/// Every `node_sync_period`: a forced target update for every load balancer.
async fn periodic_node_sync(inner: Arc<ServiceReconciler>, shutdown: CancellationToken) {
    every(inner.config.node_sync_period, shutdown, || {
        tracing::debug!("periodic node sync of every load balancer");
        inner.enqueue_target_updates(true);
    })
    .await;
}

async fn node_feed(
    inner: Arc<ServiceReconciler>,
    changes: tokio::sync::broadcast::Receiver<NodeEvent>,
    shutdown: CancellationToken,
) {
    informer::feed(changes, shutdown, |event| {
        // `Some(force)`: update the targets; forced when only labels changed (the set of
        // eligible Nodes is the same, what the provider selects from it may not be).
        let trigger = match event {
            Feed::Event(NodeEvent::Applied { old: None, .. } | NodeEvent::Deleted(_)) => {
                Some(false)
            }
            Feed::Event(NodeEvent::Applied {
                old: Some(old),
                new,
            }) => {
                if inner.config.nodes.update_needs_sync(&old, &new) {
                    Some(false)
                } else {
                    (inner.lb.selects_nodes_by_label()
                        && old.metadata.labels != new.metadata.labels)
                        .then_some(true)
                }
            }
            Feed::Lagged(missed) => {
                tracing::warn!(
                    missed,
                    "node change feed lagged; resyncing load balancer targets"
                );
                Some(false)
            }
        };
        if let Some(force) = trigger {
            // Queued per Service: keys already waiting coalesce.
            inner.enqueue_target_updates(force);
        }
    })
    .await;
}

#[async_trait]
impl Reconciler for ServiceReconciler {
    type Error = ServiceSyncError;

    fn controller(&self) -> &'static str {
        CONTROLLER
    }

    fn span(&self, key: &str) -> tracing::Span {
        tracing::info_span!("reconcile", service = key)
    }

    async fn reconcile(&self, key: &str) -> Result<(), ServiceSyncError> {
        let action = self.pending.lock().remove(key).unwrap_or(Work::Sync);
        let result = match (self.cached_service(key), action) {
            (None, _) => self.process_deletion(key).await,
            (Some(service), Work::Sync) => self.process_create_or_update(service, key).await,
            (Some(service), Work::UpdateTargets { force }) => {
                self.update_targets(&service, key, force).await
            }
        };
        if result.is_ok() {
            self.last_warning.forget(key);
        }
        if result.is_err() {
            // The retry repeats a full sync: it also sets the targets, and it repairs what a
            // failed target update could not (e.g. a load balancer deleted behind our back).
            let mut pending = self.pending.lock();
            let merged = pending.get(key).map_or(Work::Sync, |p| p.merge(Work::Sync));
            pending.insert(key.to_owned(), merged);
        }
        result
    }

    async fn user_error(&self, key: &str, reason: &str, err: &ServiceSyncError) {
        if let Some(service) = self.touchable_service(key) {
            let message = format!("Error syncing load balancer: {}", error_chain(err));
            self.recorder
                .publish(service.as_ref(), EventType::Warning, reason, &message)
                .await;
        }
    }

    async fn retried_error(&self, key: &str, err: &ServiceSyncError, _delay: Duration) {
        // A failed target update wrote its own UpdateLoadBalancerFailed; a Service that is gone
        // (the legacy deletion path) gets no event.
        if matches!(err, ServiceSyncError::UpdateLoadBalancer(_)) {
            return;
        }
        if let Some(service) = self.touchable_service(key) {
            let message = format!("Error syncing load balancer: {}", error_chain(err));
            // One Warning per distinct failure: a retry that fails the same way again (every
            // few minutes while a certificate is missing, say) adds nothing to it.
            if !self.last_warning.is_news(key, &message) {
                return;
            }
            self.recorder
                .publish(
                    service.as_ref(),
                    EventType::Warning,
                    "SyncLoadBalancerFailed",
                    &message,
                )
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_sync_wins_over_a_target_update() {
        let targets = Work::UpdateTargets { force: false };
        let forced = Work::UpdateTargets { force: true };
        assert_eq!(targets.merge(Work::Sync), Work::Sync);
        assert_eq!(Work::Sync.merge(forced), Work::Sync);
        assert_eq!(targets.merge(forced), forced);
        assert_eq!(targets.merge(targets), targets);
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
        assert_eq!(config.class.name(), None, "Services without a class");
    }
}
