//! I/O of the route controller; decisions live in [`super::decisions`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use tokio::sync::{Semaphore, broadcast};
use tokio_util::sync::CancellationToken;

use super::backoff::{CreateBackoff, FailedCreations};
use super::decisions::{
    CONDITION_NETWORK_UNAVAILABLE, CidrAction, NetworkCondition, NodeWork, NotRouted,
    RouteCreation, decide,
};
use crate::events::{EventRecorder, EventType, error_chain};
use crate::metrics::Metrics;
use crate::provider::{self, Category, Route, Routes};
use crate::runtime::cache::{NodeCache, NodeEvent};
use crate::runtime::health::{Heartbeat, Tasks};
use crate::runtime::informer::{self, Feed};
use crate::runtime::reconcile::{self, Reconciler, is_conflict, is_not_found};
use crate::runtime::workqueue::{Backoff, WorkQueue};

/// Event source component (as upstream).
pub const COMPONENT: &str = "route_controller";
/// Controller label in metrics.
pub const CONTROLLER: &str = "route";
/// Most cloud route calls (creations and deletions together) in flight at once.
pub const MAX_CONCURRENT_ROUTE_OPERATIONS: usize = 200;
/// Attempts of one creation within a cycle (only conflict-like errors are retried).
pub const CREATE_ATTEMPTS: u32 = 5;
/// Attempts of one condition write (retried on API conflicts).
pub const CONDITION_ATTEMPTS: u32 = 5;
/// Concurrent condition writes.
const CONCURRENT_CONDITION_WRITES: usize = 20;
/// Base delay between retries (upstream: 100 ms, jitter 1.0).
const RETRY_DELAY: Duration = Duration::from_millis(100);
/// The one work-queue key of the route controller: a pass reconciles the whole table.
pub const PASS_KEY: &str = "routes";
/// Default of [`RouteControllerConfig::watch_debounce`].
pub const WATCH_DEBOUNCE: Duration = Duration::from_millis(500);
/// Default of [`RouteControllerConfig::create_backoff_max`].
pub const CREATE_BACKOFF_MAX: Duration = Duration::from_secs(300);

/// Whether a Node change can change the routes (watch-based reconciliation): a Node added or
/// deleted, or a change of its pod CIDRs or addresses.
pub fn node_change_affects_routes(change: &NodeEvent) -> bool {
    match change {
        NodeEvent::Applied { old: None, .. } | NodeEvent::Deleted(_) => true,
        NodeEvent::Applied {
            old: Some(old),
            new,
        } => {
            let spec = |n: &Node| {
                n.spec
                    .as_ref()
                    .map(|s| (s.pod_cidr.clone(), s.pod_cidrs.clone()))
            };
            let addresses = |n: &Node| n.status.as_ref().and_then(|s| s.addresses.clone());
            spec(old) != spec(new) || addresses(old) != addresses(new)
        }
    }
}

/// Queue a pass `debounce` after a Node change that affects routes (or a lag, which may have
/// hidden one), until `shutdown`. The queue keeps the earliest deadline, so a burst of changes
/// is one pass; a change during a pass asks for one more after it.
async fn route_feed(
    queue: Arc<WorkQueue<String>>,
    changes: broadcast::Receiver<NodeEvent>,
    debounce: Duration,
    shutdown: CancellationToken,
) {
    informer::feed(changes, shutdown, |fed| {
        match &fed {
            Feed::Event(change) if node_change_affects_routes(change) => {
                tracing::debug!(node = change.name(), "node change affects routes");
            }
            Feed::Event(_) => return,
            Feed::Lagged(missed) => {
                tracing::debug!(missed, "node change feed lagged; reconciling routes");
            }
        }
        queue.add_after(PASS_KEY.to_owned(), debounce);
    })
    .await;
}

/// The per-pass backoff: a failed pass is retried after one period (or the provider's longer
/// retry-after), as the periodic loop did; the queue's bucket still applies.
fn pass_backoff(config: &RouteControllerConfig) -> Backoff {
    Backoff::fixed(crate::period(config.reconciliation_period))
}

/// Settings of the route controller.
#[derive(Clone, Debug)]
pub struct RouteControllerConfig {
    /// `--cluster-name`, passed to every route call.
    pub cluster_name: String,
    /// `--cluster-cidr`: routes are owned (and may be deleted) only when their CIDR overlaps one
    /// of these by its first or last address. Validate with
    /// [`super::decisions::parse_cluster_cidrs`].
    pub cluster_cidrs: Vec<IpNet>,
    /// `--route-reconciliation-period` (default 10 s), waited after each pass.
    pub reconciliation_period: Duration,
    /// The `CloudControllerManagerWatchBasedRoutesReconciliation` feature gate (default off):
    /// also reconcile soon after a Node is added or deleted or changes its pod CIDRs or
    /// addresses, not only every period.
    pub watch_nodes: bool,
    /// With `watch_nodes`: how long a pass waits after the first Node change, so that a burst
    /// of changes is handled by one pass (default 500 ms).
    pub watch_debounce: Duration,
    /// With `watch_nodes`: the full pass that repairs routes changed behind the controller's
    /// back comes this long × a random factor in [1, 2) after the last one instead of every
    /// `reconciliation_period`, as upstream's watch-based controller resyncs with its shared
    /// informer (`--min-resync-period`, default 12 h).
    pub resync_period: Duration,
    /// A route whose creation failed is tried again after one `reconciliation_period`, then
    /// after twice as long each time, at most this long apart (default 5 min), rather than on
    /// every pass; at once when the Node's addresses or providerID change. Upstream retries
    /// on every pass.
    pub create_backoff_max: Duration,
}

impl Default for RouteControllerConfig {
    fn default() -> Self {
        Self {
            cluster_name: "kubernetes".to_owned(),
            cluster_cidrs: Vec::new(),
            reconciliation_period: Duration::from_secs(10),
            watch_nodes: false,
            watch_debounce: WATCH_DEBOUNCE,
            resync_period: Duration::from_secs(12 * 3600),
            create_backoff_max: CREATE_BACKOFF_MAX,
        }
    }
}

impl RouteControllerConfig {
    fn create_backoff(&self) -> CreateBackoff {
        let first = crate::period(self.reconciliation_period);
        CreateBackoff {
            base: first,
            max: self.create_backoff_max.max(first),
        }
    }
}

/// The route controller's own metric: `route_controller_route_sync_total`. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct RouteMetrics {
    route_syncs: Counter,
}

impl RouteMetrics {
    /// A fresh, unregistered counter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register `route_controller_route_sync_total` into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "route_controller_route_sync",
            "A metric counting the amount of times routes have been synced with the cloud provider",
            self.route_syncs.clone(),
        );
    }

    /// Reconcile passes counted so far.
    pub fn route_sync_count(&self) -> u64 {
        self.route_syncs.get()
    }
}

/// The outcome of one successful reconcile (one whose route listing worked).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReconcileSummary {
    /// Routes deleted.
    pub deleted: usize,
    /// Deletions that failed (logged only).
    pub delete_failures: usize,
    /// Routes created.
    pub created: usize,
    /// Creations that failed (Warning event on the Node, once per distinct reason).
    pub create_failures: usize,
    /// Creations not tried in this pass: they failed before and their backoff is not over.
    pub backed_off: usize,
    /// `NetworkUnavailable` conditions written.
    pub conditions_written: usize,
}

/// What one Node's share of a pass did.
struct NodeOutcome {
    created: usize,
    failed: usize,
    backed_off: usize,
    condition_written: bool,
}

/// What became of one creation in a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Creation {
    Created,
    Failed,
    /// Not tried: it failed before and its backoff is not over.
    BackedOff,
}

/// The route controller: keeps one cloud route per (Node, pod CIDR) and reports the outcome in
/// the Nodes' `NetworkUnavailable` condition.
pub struct RouteController {
    nodes: Api<Node>,
    cache: NodeCache,
    routes: Arc<dyn Routes>,
    recorder: EventRecorder,
    metrics: Metrics,
    route_metrics: RouteMetrics,
    config: RouteControllerConfig,
    heartbeat: Heartbeat,
    queue: Arc<WorkQueue<String>>,
    /// Creations that failed, each with its backoff and the reason last reported.
    failed: FailedCreations,
    /// The Nodes (name, UID) the cloud does not route that were warned about, once each.
    warned_not_routed: parking_lot::Mutex<std::collections::BTreeSet<(String, String)>>,
}

impl std::fmt::Debug for RouteController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteController")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The delay before retrying a failed creation within the cycle, or `None` when it must wait
/// for the next cycle.
///
/// Upstream retries `CreateRoute` only on a conflict. Here the provider's typed category
/// decides: a [`Category::Conflict`] is retried after its retry-after (or 100–200 ms, as
/// upstream's backoff), a transient error with a retry-after after that delay; both capped at
/// `cap`. Every other error is final for this cycle.
pub fn create_retry_delay(err: &provider::Error, cap: Duration) -> Option<Duration> {
    match (err.category(), err.retry_after()) {
        (Category::Conflict, after) => Some(
            after
                .unwrap_or_else(|| crate::jittered(RETRY_DELAY))
                .min(cap),
        ),
        (Category::Transient, Some(after)) => Some(after.min(cap)),
        _ => None,
    }
}

/// When the next pass is due after a successful one: every period, or with the watch-based
/// gate (passes come with Node changes) at the jittered resync, but no later than when a
/// failed creation is to be tried again (`retry_in`; never sooner than a period).
fn next_pass(config: &RouteControllerConfig, retry_in: Option<Duration>) -> Duration {
    let period = crate::period(config.reconciliation_period);
    let next = if config.watch_nodes {
        crate::jittered(crate::period(config.resync_period))
    } else {
        period
    };
    retry_in.map_or(next, |retry| next.min(retry.max(period)))
}

/// The strategic-merge status patch carrying only the `NetworkUnavailable` condition.
/// `status.conditions` merges by `type`, so the Node's other conditions stay.
pub fn condition_patch(condition: &NetworkCondition, now: &Time) -> serde_json::Value {
    serde_json::json!({
        "status": {
            "conditions": [{
                "type": CONDITION_NETWORK_UNAVAILABLE,
                "status": condition.status,
                "reason": condition.reason,
                "message": condition.message,
                "lastTransitionTime": now,
                "lastHeartbeatTime": now,
            }]
        }
    })
}

impl RouteController {
    /// A controller writing through `client`, reading `cache` and programming `routes`.
    pub fn new(
        client: Client,
        cache: NodeCache,
        routes: Arc<dyn Routes>,
        metrics: Metrics,
        config: RouteControllerConfig,
    ) -> Self {
        let recorder = EventRecorder::new(client.clone(), COMPONENT);
        Self {
            nodes: Api::all(client),
            cache,
            routes,
            recorder,
            queue: Arc::new(
                WorkQueue::new(pass_backoff(&config))
                    .with_metrics(CONTROLLER, metrics.workqueues()),
            ),
            metrics,
            route_metrics: RouteMetrics::new(),
            config,
            heartbeat: Heartbeat::new(CONTROLLER),
            failed: FailedCreations::default(),
            warned_not_routed: parking_lot::Mutex::default(),
        }
    }

    /// Report liveness and readiness into `heartbeat` (e.g. one the binary checks).
    #[must_use]
    pub fn with_heartbeat(mut self, heartbeat: Heartbeat) -> Self {
        self.heartbeat = heartbeat;
        self
    }

    /// Use `route_metrics` (e.g. one registered before leader election) instead of a private one.
    #[must_use]
    pub fn with_route_metrics(mut self, route_metrics: RouteMetrics) -> Self {
        self.route_metrics = route_metrics;
        self
    }

    /// Use an event recorder of your own.
    #[must_use]
    pub fn with_recorder(mut self, recorder: EventRecorder) -> Self {
        self.recorder = recorder;
        self
    }

    /// The `route_controller_route_sync_total` counter of this controller.
    pub fn route_metrics(&self) -> &RouteMetrics {
        &self.route_metrics
    }

    /// Wait for the Node cache, then reconcile every period until `shutdown`, on the shared
    /// runtime: the whole route table is one key (`PASS_KEY`) of a work queue with one
    /// worker, so one pass runs at a time and a request during a pass leads to one more pass
    /// right after it. After a successful pass the next is due a full period later (sliding,
    /// so a slow cloud never makes passes pile up); a failed pass is retried after the longer
    /// of the provider's retry-after and the period, counted in
    /// `cloud_controller_retries_total{controller="route"}`. With
    /// [`RouteControllerConfig::watch_nodes`], a Node change that affects routes queues a pass
    /// (after the debounce). Returns early, reported to the heartbeat, if one of its tasks
    /// dies.
    pub async fn run(self, shutdown: CancellationToken) {
        tracing::info!(controller = CONTROLLER, "starting");
        if self.config.cluster_cidrs.is_empty() {
            tracing::warn!(
                controller = CONTROLLER,
                "no cluster CIDRs configured: no route will ever be deleted"
            );
        }
        tokio::select! {
            () = shutdown.cancelled() => {
                tracing::info!(controller = CONTROLLER, "stopped");
                return;
            }
            () = self.cache.wait_until_ready() => {}
        }
        let heartbeat = self.heartbeat.clone();
        heartbeat.watch(
            self.cache.progress().clone(),
            crate::runtime::cache::NODE_WATCH_STUCK_AFTER.max(self.config.reconciliation_period),
        );
        heartbeat.set_synced();
        // Subscribed before the first pass lists the Nodes, so no change is missed.
        let changes = self.config.watch_nodes.then(|| self.cache.subscribe());
        let this = Arc::new(self);
        let queue = this.queue.clone();
        queue.add(PASS_KEY.to_owned());
        let mut tasks = Tasks::new(heartbeat);
        if let Some(changes) = changes {
            tasks.spawn(
                "node-feed",
                route_feed(
                    queue.clone(),
                    changes,
                    this.config.watch_debounce,
                    shutdown.clone(),
                ),
            );
        }
        let metrics = this.metrics.clone();
        let workers = reconcile::Workers::new(1);
        tasks
            .run_pool_until_stopped(this, queue, metrics, workers, &shutdown)
            .await;
    }

    /// One reconcile pass. A failing `list_routes` aborts it before any change (no deletions,
    /// creations or condition writes) and is returned; failed deletions, creations and condition
    /// writes are logged (creations also as events) and the pass still succeeds.
    ///
    /// Timing, error counts and retries are the runtime's ([`Reconciler`]); call this directly
    /// only for a pass outside [`RouteController::run`].
    pub async fn reconcile(&self) -> Result<ReconcileSummary, provider::Error> {
        self.route_metrics.route_syncs.inc();
        let listed = self.routes.list_routes(&self.config.cluster_name).await?;
        // The listed Nodes are needed only to plan: the work names its Nodes (see `NodeWork`).
        let (plan, work) = {
            let nodes = self.cache.list();
            let plan = decide(
                &nodes,
                &listed,
                &self.config.cluster_cidrs,
                &|cidr| self.routes.can_route(cidr),
                &|node| self.routes.routes_node(node),
            );
            let work = plan.node_work(&nodes);
            (plan, work)
        };
        // Failures of routes no longer wanted are forgotten.
        self.failed.retain(&plan.to_create);
        self.warn_not_routed(&plan.not_routed).await;
        for (name, cidr) in &plan.unroutable {
            tracing::debug!(node = %name, %cidr, "pod CIDR the cloud cannot route; no route for it");
        }
        for (name, entry) in &plan.nodes {
            for pod in &entry.pod_cidrs {
                if pod.action == CidrAction::Unparsable {
                    tracing::warn!(node = %name, cidr = %pod.text, "ignoring unparsable pod CIDR");
                } else {
                    tracing::debug!(node = %name, cidr = %pod.text, action = ?pod.action, "route action");
                }
            }
        }
        let mut summary = ReconcileSummary::default();

        let concurrency = self
            .routes
            .concurrent_operations()
            .clamp(1, MAX_CONCURRENT_ROUTE_OPERATIONS);
        let limiter = Semaphore::new(concurrency);
        let writers = Semaphore::new(CONCURRENT_CONDITION_WRITES);
        let deletions = futures::future::join_all(plan.to_delete.iter().map(|route| {
            let span = tracing::info_span!(
                "reconcile",
                route = %route.destination_cidr,
                node = %route.target_node
            );
            tracing::Instrument::instrument(self.delete_route(&limiter, route), span)
        }));
        // Each Node's creations, then its condition, as soon as its own routes are in place.
        // A bounded stream: at most as many Nodes in flight as cloud calls may run.
        let node_passes = futures::stream::iter(work)
            .map(|work| self.node_pass(&limiter, &writers, work))
            .buffer_unordered(concurrency)
            .collect::<Vec<NodeOutcome>>();
        let (deleted, outcomes) = if plan.wait_for_deletions {
            let deleted = deletions.await;
            (deleted, node_passes.await)
        } else {
            futures::join!(deletions, node_passes)
        };
        summary.deleted = deleted.iter().filter(|ok| **ok).count();
        summary.delete_failures = deleted.len() - summary.deleted;
        for outcome in outcomes {
            summary.created += outcome.created;
            summary.create_failures += outcome.failed;
            summary.backed_off += outcome.backed_off;
            summary.conditions_written += usize::from(outcome.condition_written);
        }
        tracing::debug!(?summary, "reconciled node routes");
        Ok(summary)
    }

    /// One Node's share of a pass: its creations (each under `limiter`), then its condition
    /// (under `writers`).
    async fn node_pass(
        &self,
        limiter: &Semaphore,
        writers: &Semaphore,
        work: NodeWork,
    ) -> NodeOutcome {
        let name = work.name.as_str();
        let results = futures::future::join_all(work.creations.iter().map(|creation| {
            let span = tracing::info_span!(
                "reconcile",
                route = %creation.route.destination_cidr,
                node = %creation.node
            );
            tracing::Instrument::instrument(self.create_route(limiter, creation), span)
        }))
        .await;
        let created: Vec<IpNet> = work
            .creations
            .iter()
            .zip(&results)
            .filter(|(_, outcome)| **outcome == Creation::Created)
            .map(|(c, _)| c.route.destination_cidr)
            .collect();
        let backed_off = results
            .iter()
            .filter(|outcome| **outcome == Creation::BackedOff)
            .count();
        // The Node as it is now (the pass may have taken minutes); a Node gone meanwhile gets
        // no condition.
        let condition = self
            .cache
            .get(name)
            .and_then(|node| work.condition_after(&node, &created));
        let condition_written = match condition {
            Some(condition) => {
                let _permit = writers.acquire().await.ok();
                self.write_condition(name, &condition).await
            }
            None => false,
        };
        NodeOutcome {
            created: created.len(),
            failed: results.len() - created.len() - backed_off,
            backed_off,
            condition_written,
        }
    }

    /// One Warning on each Node the cloud does not route, the first time a pass sees it.
    async fn warn_not_routed(&self, not_routed: &[NotRouted]) {
        let fresh: Vec<&NotRouted> = {
            let mut warned = self.warned_not_routed.lock();
            let key = |n: &NotRouted| (n.node.clone(), n.uid.clone());
            warned.retain(|known| not_routed.iter().any(|n| key(n) == *known));
            not_routed
                .iter()
                .filter(|n| warned.insert(key(n)))
                .collect()
        };
        for node in fresh {
            let warning = node.warning();
            if let Some(target) = self.cache.get(&node.node) {
                self.recorder
                    .publish(
                        target.as_ref(),
                        EventType::Warning,
                        &warning.reason,
                        &warning.message,
                    )
                    .await;
            }
        }
    }

    async fn delete_route(&self, limiter: &Semaphore, route: &Route) -> bool {
        let started = Instant::now();
        let _permit = limiter.acquire().await.ok();
        tracing::info!(route = %route.name, cidr = %route.destination_cidr, target = %route.target_node, "deleting route");
        match self
            .routes
            .delete_route(&self.config.cluster_name, route)
            .await
        {
            Ok(()) => {
                tracing::info!(route = %route.name, cidr = %route.destination_cidr, elapsed = ?started.elapsed(), "deleted route");
                true
            }
            Err(err) => {
                tracing::error!(route = %route.name, cidr = %route.destination_cidr, elapsed = ?started.elapsed(), error = %error_chain(&err), "could not delete route");
                false
            }
        }
    }

    /// Create one route, unless it failed before and its backoff is not over. Conflict-like
    /// errors are retried within the pass ([`create_retry_delay`]); a creation that still
    /// fails is backed off, and reported with a Warning event on the Node when its reason
    /// differs from the one reported last.
    async fn create_route(&self, limiter: &Semaphore, creation: &RouteCreation) -> Creation {
        let cidr = creation.route.destination_cidr;
        if !self.failed.due(creation, tokio::time::Instant::now()) {
            tracing::debug!(node = %creation.node, %cidr, "route creation failed before; backing off");
            return Creation::BackedOff;
        }
        let cap = crate::period(self.config.reconciliation_period);
        let mut attempt = 1;
        let err = loop {
            let started = Instant::now();
            let result = {
                let _permit = limiter.acquire().await.ok();
                tracing::info!(node = %creation.node, %cidr, hint = %creation.name_hint, "creating route");
                self.routes
                    .create_route(
                        &self.config.cluster_name,
                        &creation.name_hint,
                        &creation.route,
                    )
                    .await
            };
            let err = match result {
                Ok(()) => {
                    tracing::info!(node = %creation.node, %cidr, elapsed = ?started.elapsed(), "created route");
                    self.failed.succeeded(creation);
                    return Creation::Created;
                }
                Err(err) => err,
            };
            tracing::warn!(node = %creation.node, %cidr, attempt, elapsed = ?started.elapsed(), error = %error_chain(&err), "could not create route");
            match create_retry_delay(&err, cap) {
                Some(delay) if attempt < CREATE_ATTEMPTS => tokio::time::sleep(delay).await,
                _ => break err,
            }
            attempt += 1;
        };
        // No elapsed time or attempt in the message: it names the reason, reported once.
        let message = format!(
            "Could not create route {} {} for node {}: {}",
            creation.name_hint,
            cidr,
            creation.node,
            error_chain(&err)
        );
        let backoff = self.config.create_backoff();
        // A transient failure (network, 5xx, rate limit) says nothing about this route: it is
        // tried again on the next pass, without a growing delay.
        let transient = matches!(err.category(), Category::Transient | Category::Conflict);
        if self.failed.failed(
            creation,
            &message,
            transient,
            &backoff,
            tokio::time::Instant::now(),
        ) {
            let node = self.event_node(creation);
            self.recorder
                .publish(
                    node.as_ref(),
                    EventType::Warning,
                    "FailedToCreateRoute",
                    &message,
                )
                .await;
        }
        Creation::Failed
    }

    /// The Node an event about `creation` is recorded on: the cached one, or (when it is gone)
    /// a reference built from its name and UID.
    fn event_node(&self, creation: &RouteCreation) -> Arc<Node> {
        self.cache.get(&creation.node).unwrap_or_else(|| {
            Arc::new(Node {
                metadata: ObjectMeta {
                    name: Some(creation.node.clone()),
                    uid: Some(creation.name_hint.clone()),
                    ..ObjectMeta::default()
                },
                ..Node::default()
            })
        })
    }

    async fn write_condition(&self, name: &str, condition: &NetworkCondition) -> bool {
        for attempt in 1..=CONDITION_ATTEMPTS {
            let patch = condition_patch(condition, &Time(Timestamp::now()));
            match self
                .nodes
                .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                Ok(_) => {
                    tracing::info!(
                        node = name,
                        status = condition.status,
                        reason = condition.reason,
                        "set NetworkUnavailable"
                    );
                    return true;
                }
                Err(err) if is_conflict(&err) && attempt < CONDITION_ATTEMPTS => {
                    tokio::time::sleep(crate::jittered(RETRY_DELAY)).await;
                }
                Err(err) if is_not_found(&err) => {
                    tracing::debug!(
                        node = name,
                        "node vanished before its condition was written"
                    );
                    return false;
                }
                Err(err) => {
                    tracing::error!(node = name, error = %error_chain(&err), "error updating node network condition");
                    return false;
                }
            }
        }
        false
    }
}

#[async_trait]
impl Reconciler for RouteController {
    type Error = provider::Error;

    fn controller(&self) -> &'static str {
        CONTROLLER
    }

    fn span(&self, _key: &str) -> tracing::Span {
        tracing::info_span!("reconcile", controller = CONTROLLER)
    }

    async fn reconcile(&self, _key: &str) -> Result<(), provider::Error> {
        let summary = RouteController::reconcile(self).await?;
        tracing::debug!(?summary, "route pass done");
        let now = tokio::time::Instant::now();
        let retry_in = self
            .failed
            .next_retry()
            .map(|at| at.saturating_duration_since(now));
        // A deletion that failed is tried again on the next pass, one period on (`next_pass`
        // never comes sooner): with the watch-based gate no Node change may come to start it.
        let retry_in = if summary.delete_failures > 0 {
            Some(Duration::ZERO)
        } else {
            retry_in
        };
        self.queue
            .reschedule(PASS_KEY.to_owned(), next_pass(&self.config, retry_in));
        Ok(())
    }

    /// A user error of the listing has no object to wait for: the whole table is tried again
    /// after a period, as any failed pass.
    async fn user_error(&self, _key: &str, _reason: &str, _err: &provider::Error) {
        self.queue.add_after(
            PASS_KEY.to_owned(),
            crate::period(self.config.reconciliation_period),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::decisions::{NO_ROUTE_CREATED, ROUTE_CREATED};

    #[test]
    fn passes_follow_the_period_or_with_watches_the_jittered_resync() {
        let periodic = RouteControllerConfig::default();
        assert_eq!(next_pass(&periodic, None), Duration::from_secs(10));
        // A pending retry never makes passes more frequent than the period.
        assert_eq!(
            next_pass(&periodic, Some(Duration::from_secs(1))),
            Duration::from_secs(10)
        );
        let watched = RouteControllerConfig {
            watch_nodes: true,
            resync_period: Duration::from_secs(3600),
            ..RouteControllerConfig::default()
        };
        // With watches, a failed creation is tried again when due, not at the next resync.
        assert_eq!(
            next_pass(&watched, Some(Duration::from_secs(80))),
            Duration::from_secs(80)
        );
        assert_eq!(
            next_pass(&watched, Some(Duration::ZERO)),
            Duration::from_secs(10)
        );
        for _ in 0..50 {
            let next = next_pass(&watched, None);
            assert!(
                next >= Duration::from_secs(3600) && next < Duration::from_secs(7200),
                "{next:?}"
            );
        }
    }

    #[test]
    fn only_conflict_like_errors_are_retried_within_the_cycle() {
        let cap = Duration::from_secs(10);
        assert_eq!(
            create_retry_delay(
                &provider::Error::retry("locked", Duration::from_secs(2)),
                cap
            ),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            create_retry_delay(
                &provider::Error::retry("locked", Duration::from_secs(60)),
                cap
            ),
            Some(cap),
            "long delays are cut to the period"
        );
        // No downcasting: a hint wrapped in another error is not found.
        let wrapped = provider::Error::transient(
            "create route",
            provider::Error::retry("locked", Duration::ZERO),
        );
        assert_eq!(create_retry_delay(&wrapped, cap), None);

        let delay = create_retry_delay(&provider::Error::conflict("create route", None), cap)
            .expect("a conflict is retried");
        assert!(
            delay >= RETRY_DELAY && delay <= RETRY_DELAY * 2,
            "{delay:?}"
        );

        for err in [
            provider::Error::api_msg("503"),
            provider::Error::not_implemented(),
            provider::Error::invalid_input("cidr"),
            provider::Error::api(
                "create route",
                kube::Error::Api(
                    kube::core::Status::failure("nope", "Forbidden")
                        .with_code(403)
                        .boxed(),
                ),
            ),
        ] {
            assert_eq!(create_retry_delay(&err, cap), None, "{err}");
        }
    }

    #[test]
    fn condition_patch_carries_only_network_unavailable() {
        let now: Time = Time("2024-01-02T03:04:05Z".parse().unwrap());
        assert_eq!(
            condition_patch(&ROUTE_CREATED, &now),
            serde_json::json!({"status": {"conditions": [{
                "type": "NetworkUnavailable",
                "status": "False",
                "reason": "RouteCreated",
                "message": "RouteController created a route",
                "lastTransitionTime": "2024-01-02T03:04:05Z",
                "lastHeartbeatTime": "2024-01-02T03:04:05Z",
            }]}})
        );
        let patch = condition_patch(&NO_ROUTE_CREATED, &now);
        assert_eq!(patch["status"]["conditions"][0]["status"], "True");
        assert_eq!(patch["status"]["conditions"][0]["reason"], "NoRouteCreated");
    }

    #[test]
    fn route_sync_metric_has_the_upstream_name() {
        let metrics = RouteMetrics::new();
        metrics.route_syncs.inc();
        let text = crate::metrics::exposition(|registry| metrics.register(registry));
        crate::metrics::assert_exposes(&text, &["route_controller_route_sync_total 1"]);
        assert_eq!(metrics.route_sync_count(), 1);
    }

    #[test]
    fn default_config() {
        let config = RouteControllerConfig::default();
        assert_eq!(config.reconciliation_period, Duration::from_secs(10));
        assert_eq!(config.cluster_name, "kubernetes");
        assert_eq!(
            config.create_backoff(),
            CreateBackoff {
                base: Duration::from_secs(10),
                max: Duration::from_secs(300),
            }
        );
        assert!(
            !config.watch_nodes,
            "watch-based reconciliation is behind a gate"
        );
    }

    fn node(pod_cidr: Option<&str>, address: Option<&str>) -> Arc<Node> {
        use k8s_openapi::api::core::v1::{NodeAddress, NodeSpec, NodeStatus};
        Arc::new(Node {
            metadata: kube::api::ObjectMeta {
                name: Some("n1".into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                pod_cidr: pod_cidr.map(Into::into),
                pod_cidrs: pod_cidr.map(|c| vec![c.into()]),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                addresses: address.map(|a| {
                    vec![NodeAddress {
                        type_: "InternalIP".into(),
                        address: a.into(),
                    }]
                }),
                ..Default::default()
            }),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_node_changes_is_one_pass_after_the_debounce() {
        let queue = Arc::new(WorkQueue::new(Backoff::default()));
        let (changes, feed) = broadcast::channel(16);
        let shutdown = CancellationToken::new();
        let debounce = Duration::from_millis(500);
        let task = tokio::spawn(route_feed(queue.clone(), feed, debounce, shutdown.clone()));
        let base = node(Some("10.244.1.0/24"), Some("10.0.0.2"));
        let start = tokio::time::Instant::now();
        // A heartbeat asks for nothing; five additions and a deletion make one pass.
        changes
            .send(NodeEvent::Applied {
                old: Some(base.clone()),
                new: base.clone(),
            })
            .unwrap();
        for _ in 0..5 {
            changes
                .send(NodeEvent::Applied {
                    old: None,
                    new: base.clone(),
                })
                .unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        changes.send(NodeEvent::Deleted(base.clone())).unwrap();
        assert_eq!(queue.get().await.as_deref(), Some(PASS_KEY));
        assert_eq!(start.elapsed(), debounce, "the first change's debounce");
        // A change during the pass asks for one more after it, whatever the pass schedules.
        let during = tokio::time::Instant::now();
        changes.send(NodeEvent::Deleted(base.clone())).unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        queue.reschedule(PASS_KEY.to_owned(), Duration::from_secs(3600));
        queue.done(&PASS_KEY.to_owned());
        assert_eq!(queue.get().await.as_deref(), Some(PASS_KEY));
        assert_eq!(during.elapsed(), debounce);
        queue.done(&PASS_KEY.to_owned());
        assert!(queue.is_empty());
        shutdown.cancel();
        task.await.unwrap();
    }

    #[test]
    fn node_changes_that_affect_routes() {
        let base = node(Some("10.244.1.0/24"), Some("10.0.0.2"));
        let update = |new: Arc<Node>| NodeEvent::Applied {
            old: Some(base.clone()),
            new,
        };
        let cases = [
            (
                "added",
                NodeEvent::Applied {
                    old: None,
                    new: base.clone(),
                },
                true,
            ),
            ("deleted", NodeEvent::Deleted(base.clone()), true),
            (
                "pod CIDR set",
                update(node(Some("10.244.2.0/24"), Some("10.0.0.2"))),
                true,
            ),
            (
                "pod CIDR removed",
                update(node(None, Some("10.0.0.2"))),
                true,
            ),
            (
                "address changed",
                update(node(Some("10.244.1.0/24"), Some("10.0.0.3"))),
                true,
            ),
            ("heartbeat only", update(base.clone()), false),
        ];
        for (name, change, expected) in cases {
            assert_eq!(node_change_affects_routes(&change), expected, "{name}");
        }
        let mut labelled = (*base).clone();
        labelled
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("a".into(), "b".into());
        assert!(!node_change_affects_routes(&update(Arc::new(labelled))));
    }
}
