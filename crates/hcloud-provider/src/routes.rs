//! The routes capability: pod CIDRs routed to Nodes through the routes of one Hetzner network.
//!
//! - [`Routes::list_routes`] reads the network (one `GET /networks/{id}`; a copy younger than
//!   [`network_max_age`] that includes this process's own changes answers instead)
//!   and maps each route's gateway to the server whose private IP in this network it
//!   is, using the shared [`ServerCache`] listing (accepting a listing as old as the status max
//!   age). A gateway no server has is a blackhole. When such a gateway is seen for the first
//!   time and the listing predates that, a listing within the cache's normal max age is asked
//!   for, so a server created after the listing is not mistaken for a blackhole (which would
//!   make the route controller delete its route). A gateway that a listing made after its first
//!   sighting did not know costs no further listings. Routes are named
//!   `<gateway>-<destination>`, as the official CCM names them, and carry the providerID of
//!   the gateway's server, so that the route controller can tell a route via another server
//!   than the Node's from the Node's own.
//! - [`Routes::create_route`] finds the gateway (see [`HcloudRoutes`]), deletes a route for the
//!   same destination via another gateway first, adds the route and waits for the actions. A
//!   network at its route limit ([`NETWORK_ROUTE_LIMIT`]; the API answers
//!   `resource_limit_exceeded`) refuses the route with an error that names the limit
//!   ([`cloud_provider::Category::Rejected`]: tried again later, not within the pass), and a
//!   server outside a full network ([`NETWORK_SERVER_LIMIT`] servers) is said to be unable to
//!   join it.
//!   IPv6 destinations ([`Routes::can_route`] says so up front) and Robot nodes are rejected
//!   without a request. A destination outside
//!   [`RoutesConfig::cluster_cidrs`] gets a `ClusterCIDRMisconfigured` Warning event on the
//!   Node (the route is still created, as the official CCM does).
//! - [`Routes::delete_route`] re-reads the network and deletes the route for the destination
//!   only while it still has the gateway it was listed with (taken from the route's name); a
//!   route that was replaced since the listing is left for the next sync, and an absent route
//!   is success.
//!
//! Route changes are batched: the API accepts one change of a network at a time (a second
//! `add_route` while one runs gets 409 `conflict`), so concurrent `create_route` and
//! `delete_route` calls are queued and carried out by one worker, one after another. The route
//! controller is asked for [`CONCURRENT_ROUTE_CALLS`] calls at once instead of upstream's 200:
//! enough to keep the worker busy, while each waiting call holds its state in memory. The
//! worker plans against the network as last read (by `list_routes` or by itself, at most
//! [`network_plan_max_age`] old) and keeps that copy up to date with its own changes, so
//! a batch of N new routes costs one POST and about one action check per route; the first
//! check waits about as long as route actions have taken so far, and comes then even right
//! after another wait's check, so that the next change follows the action's end promptly. The network is read again
//! only after an unexpected answer: a `conflict` or `locked` answer (another actor changed the
//! network; retried a few times with a short backoff), a rejected change, or a POST that timed
//! out (the state is read instead of repeating it).
//!
//! The copy of the network is a snapshot cache and follows the freshness policy of
//! [`crate::snapshot_cache`]: concurrent reads share one request, this process's changes amend
//! the copy in place, an unexpected answer forgets it, and a POST without an answer reads the
//! network anew rather than join a read that may have started before the POST.
//!
//! [`network_max_age`]: crate::CacheConfig::network_max_age
//! [`network_plan_max_age`]: crate::CacheConfig::network_plan_max_age

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use cloud_provider::change::Write;
use cloud_provider::provider::Result;
use cloud_provider::provider::RouteWrites;
use cloud_provider::{Error, Route, Routes};
use hcloud_api::models::{Action, Network, Server};
use hcloud_api::{Client, ErrorCode, models};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::errors::categorize;
use crate::events::Events;
// The Node address type the gateway must be one of (as the official CCM checks).
use cloud_provider::well_known::address_type::INTERNAL_IP;

use crate::metrics::{Operations, op};
use crate::provider_id::ProviderId;
use crate::server_cache::{SUBSYSTEM_ROUTES, ServerCache, ServerKey};
use crate::snapshot_cache::{Snapshot, SnapshotCache};

/// One read of the network, as the copy's refresh makes it.
type NetworkRead = futures::future::BoxFuture<'static, Result<Network, Arc<hcloud_api::Error>>>;

/// Route calls the controller makes at once ([`Routes::concurrent_operations`]): the worker
/// carries out one change after another, and a queue this long never runs dry (a change takes
/// a POST and an action, a new batch is planned in no time).
pub const CONCURRENT_ROUTE_CALLS: usize = 32;

/// When the first route action is checked, before any was measured.
const FIRST_ACTION_CHECK: Duration = Duration::from_millis(250);

/// The shortest the first check of a route action waits.
const MIN_ACTION_RECHECK: Duration = Duration::from_millis(20);

/// How the first check of a route action is timed: about as long after the POST's answer as
/// route actions take, so that one check usually finds the action done and the next change
/// follows at once (the network takes one at a time).
///
/// Action timestamps have whole seconds, too coarse to learn from, so the timer learns from
/// its own checks. After a first check that found the action done, the next comes 1 % sooner
/// (10 % while it is more than 30 % after the floor), but not sooner than 20 % after the floor:
/// the latest first check that found an action still running, forgotten by 0.2 % an action
/// (in case actions became shorter). After one that found it running, that check is the
/// floor and the next comes later: at the last check before the one that found it done, at
/// least a quarter and at most twice as late as this one. So actions of a steady length cost
/// a second check about once in 90 (the first after about 33, shrinking from the
/// initial guess), a first check is on average about a tenth late, and one
/// slow action delays the next first checks little and briefly.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ActionTimer {
    /// When the next first check comes, after the POST's answer.
    expected: Duration,
    /// A first check this long after the answer found an action running (zero: none yet).
    floor: Duration,
}

impl ActionTimer {
    fn new() -> Self {
        Self {
            expected: FIRST_ACTION_CHECK,
            floor: Duration::ZERO,
        }
    }

    /// Learn from a wait whose first check came `expected` after the answer and that ended
    /// `took` after it, with later checks `interval` apart; the timer stays within `cap`.
    fn learn(&mut self, expected: Duration, took: Duration, interval: Duration, cap: Duration) {
        // A later check comes at least a poll interval after the first.
        let first_found_done = took < expected + interval / 2;
        if first_found_done {
            self.floor = self.floor.mul_f64(0.998);
            let far = !self.floor.is_zero() && expected > self.floor.mul_f64(1.3);
            self.expected = expected
                .mul_f64(if far { 0.9 } else { 0.99 })
                .max(self.floor.mul_f64(1.2))
                .max(MIN_ACTION_RECHECK);
        } else {
            self.floor = expected;
            self.expected = took
                .saturating_sub(interval)
                .clamp(expected.mul_f64(1.25), expected * 2)
                .min(cap);
        }
    }
}

/// Reason of the Warning event for a route outside the cluster CIDR (official value).
pub const CLUSTER_CIDR_MISCONFIGURED: &str = "ClusterCIDRMisconfigured";

/// Routes a Hetzner network holds at most (networks FAQ); the API answers a route beyond it
/// with `resource_limit_exceeded`.
pub const NETWORK_ROUTE_LIMIT: usize = 100;

/// Servers a Hetzner network takes at most (networks FAQ).
pub const NETWORK_SERVER_LIMIT: usize = 100;

/// Settings of [`HcloudRoutes`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutesConfig {
    /// The network (`HCLOUD_NETWORK`, resolved to its ID) whose routes are managed.
    pub network_id: i64,
    /// How often a route action answered with `locked` or `conflict` is retried (after the
    /// API client's own retries).
    pub lock_retries: u32,
    /// First delay between those retries; it doubles up to [`RoutesConfig::retry_cap`].
    pub retry_base: Duration,
    /// Longest delay between those retries.
    pub retry_cap: Duration,
    /// How long to wait for one route action to finish.
    pub action_timeout: Duration,
    /// `--cluster-cidr` (one CIDR, or an IPv4 and an IPv6 one). A route whose destination is
    /// not inside it gets a `ClusterCIDRMisconfigured` event; empty: no check.
    pub cluster_cidrs: Vec<IpNet>,
}

impl RoutesConfig {
    /// Defaults for `network_id`: 5 retries, 1 s doubling up to 5 s (the official CCM waits
    /// 5 s between attempts), actions waited for up to 2 min. How long the copy of the network
    /// is used comes with the server cache's settings ([`crate::CacheConfig::network_max_age`]).
    pub fn new(network_id: i64) -> Self {
        Self {
            network_id,
            lock_retries: 5,
            retry_base: Duration::from_secs(1),
            retry_cap: Duration::from_secs(5),
            action_timeout: Duration::from_secs(120),
            cluster_cidrs: Vec::new(),
        }
    }

    /// The same with `cluster_cidrs` checked on creation.
    #[must_use]
    pub fn with_cluster_cidrs(mut self, cluster_cidrs: Vec<IpNet>) -> Self {
        self.cluster_cidrs = cluster_cidrs;
        self
    }

    fn backoff(&self, retry: u32) -> Duration {
        cloud_provider::runtime::workqueue::Backoff {
            base: self.retry_base,
            max: self.retry_cap,
        }
        .delay(retry)
    }
}

/// A gateway learned by [`Routes::create_route`] for a Node whose name is not its server's
/// (found by providerID).
#[derive(Clone, Debug)]
struct Learned {
    server_id: i64,
    node: String,
}

/// Routes of one Hetzner network as Kubernetes routes.
///
/// The gateway of a new route is the private IP in the network of the target Node's own
/// server, as the official CCM resolves it: the server of the Node's providerID
/// (`route.target_provider_id`), or for a Node without one the server named like the Node,
/// looked up through the shared cache (a listing up to the status max age old, looked up again
/// within the normal max age when the server is not attached there or has another IP). That
/// IP must be one of the Node's `InternalIP`s (`route.target_node_addresses`), so a server
/// that merely has the Node's name never becomes the gateway. A Robot providerID is refused
/// without a request.
///
/// When the server's name is not the Node's, listing maps the gateway back to the Node's name
/// (remembered in memory), so the route controller sees the route it asked for; after a
/// restart the route is listed with the server's name until the controller's next creation
/// for the Node, which finds it in place and costs no change.
#[derive(Debug)]
pub struct HcloudRoutes {
    core: Core,
    /// Route changes waiting for the worker.
    queue: Arc<parking_lot::Mutex<Queue>>,
    /// Gateways of listed routes that no server had, and when each was first seen.
    unknown_gateways: parking_lot::Mutex<HashMap<IpAddr, Instant>>,
}

/// What the worker and the callers share. Cheap to clone.
#[derive(Clone, Debug)]
struct Core {
    client: Client,
    cache: ServerCache,
    config: Arc<RoutesConfig>,
    /// Gateway IP → Node name, for Nodes whose server has another name.
    learned: Arc<parking_lot::Mutex<HashMap<IpAddr, Learned>>>,
    /// The network as last read, with this process's changes since applied (shared with its
    /// readers; see the freshness policy in [`crate::snapshot_cache`]).
    network_copy: SnapshotCache<Network, Arc<hcloud_api::Error>>,
    /// When the first check of a route action comes.
    action_time: Arc<parking_lot::Mutex<ActionTimer>>,
    /// Until when a change whose request got no answer may still land (its action may be
    /// running, or the request itself still under way): meanwhile every read of the network
    /// is a fresh one, so that a route added (or deleted) behind the copy's back is seen.
    uncertain_until: Arc<parking_lot::Mutex<Option<tokio::time::Instant>>>,
    operations: Operations,
    events: Events,
}

/// A route change asked for by the route controller.
#[derive(Debug)]
enum Change {
    Create { name_hint: String, route: Route },
    Delete { route: Route },
}

#[derive(Debug)]
struct Job {
    change: Change,
    reply: tokio::sync::oneshot::Sender<Result<()>>,
}

#[derive(Debug, Default)]
struct Queue {
    jobs: Vec<Job>,
    /// A worker is draining the queue.
    running: bool,
}

impl HcloudRoutes {
    /// Routes of `config.network_id`, with servers looked up through `cache` (share the
    /// instances' cache to share its listing). The copy of the network is kept as long as
    /// `cache`'s settings say ([`crate::CacheConfig::network_max_age`]).
    pub fn new(client: Client, cache: ServerCache, config: RoutesConfig) -> Self {
        Self {
            core: Core {
                client,
                cache: cache.with_subsystem(SUBSYSTEM_ROUTES),
                config: Arc::new(config),
                learned: Arc::default(),
                network_copy: SnapshotCache::default(),
                action_time: Arc::new(parking_lot::Mutex::new(ActionTimer::new())),
                uncertain_until: Arc::default(),
                operations: Operations::default(),
                events: Events::default(),
            },
            queue: Arc::default(),
            unknown_gateways: parking_lot::Mutex::default(),
        }
    }

    /// Count operations into `operations` (the provider's shared handle).
    #[must_use]
    pub fn with_operations(mut self, operations: Operations) -> Self {
        self.core.operations = operations;
        self
    }

    /// Write events through `events` (the provider's shared handle).
    #[must_use]
    pub fn with_events(mut self, events: Events) -> Self {
        self.core.events = events;
        self
    }

    /// The operations counter.
    pub fn operations(&self) -> &Operations {
        &self.core.operations
    }

    /// The event handle.
    pub fn events(&self) -> &Events {
        &self.core.events
    }

    /// The settings.
    pub fn config(&self) -> &RoutesConfig {
        &self.core.config
    }

    /// Queue `change` for the worker (starting one when none runs) and wait for its outcome.
    async fn submit(&self, change: Change) -> Result<()> {
        let (reply, outcome) = tokio::sync::oneshot::channel();
        let start = {
            let mut queue = self.queue.lock();
            queue.jobs.push(Job { change, reply });
            !std::mem::replace(&mut queue.running, true)
        };
        if start {
            tokio::spawn(self.core.clone().drain(self.queue.clone()));
        }
        outcome
            .await
            .unwrap_or_else(|_| Err(Error::other("the route worker stopped before this change")))
    }

    /// Remember when each gateway in `unknown` was first seen (forgetting gateways no longer
    /// listed) and say whether one of them was first seen after the listing at `listed_at`:
    /// only then may a fresher listing know its server.
    fn needs_fresher_listing(&self, unknown: &[IpAddr], now: Instant, listed_at: Instant) -> bool {
        let mut seen = self.unknown_gateways.lock();
        seen.retain(|ip, _| unknown.contains(ip));
        let mut fresher = false;
        for ip in unknown {
            let first_seen = *seen.entry(*ip).or_insert(now);
            fresher |= first_seen > listed_at;
        }
        fresher
    }
}

impl Core {
    /// Carry out queued changes until the queue is empty: deletions of a batch first (a
    /// deleted Node's CIDR may go to a new Node), then creations, in the order asked.
    async fn drain(self, queue: Arc<parking_lot::Mutex<Queue>>) {
        loop {
            let jobs = {
                let mut queue = queue.lock();
                if queue.jobs.is_empty() {
                    queue.running = false;
                    return;
                }
                std::mem::take(&mut queue.jobs)
            };
            let (deletions, creations): (Vec<Job>, Vec<Job>) = jobs
                .into_iter()
                .partition(|job| matches!(job.change, Change::Delete { .. }));
            tracing::debug!(
                deletions = deletions.len(),
                creations = creations.len(),
                "route changes"
            );
            for job in deletions.into_iter().chain(creations) {
                let outcome = match &job.change {
                    Change::Create { name_hint, route } => self.create(name_hint, route).await,
                    Change::Delete { route } => self.delete(route).await,
                };
                // The caller may have gone; the change stands either way.
                let _ = job.reply.send(outcome);
            }
        }
    }

    /// The network: the copy if younger than `max_age`, else read (and kept).
    async fn network_within(&self, max_age: Duration) -> Result<Snapshot<Network>> {
        let uncertain = self
            .uncertain_until
            .lock()
            .is_some_and(|until| tokio::time::Instant::now() < until);
        let max_age = if uncertain { Duration::ZERO } else { max_age };
        let read = self.network_copy.get(max_age, self.read_network());
        read.await.map_err(|err| self.read_error(err))
    }

    /// The network read from now on (and kept), even while another read is under way.
    async fn network(&self) -> Result<Snapshot<Network>> {
        let read = self.network_copy.reload(self.read_network());
        read.await.map_err(|err| self.read_error(err))
    }

    /// One read of the network.
    fn read_network(&self) -> impl FnOnce() -> NetworkRead + Send + 'static {
        let client = self.client.clone();
        let operations = self.operations.clone();
        let id = self.config.network_id;
        move || {
            Box::pin(async move {
                operations.count(op::routes::RELOAD_NETWORK);
                client.networks().get(id).await.map_err(Arc::new)
            })
        }
    }

    fn read_error(&self, err: Arc<hcloud_api::Error>) -> Error {
        categorize(format!("reading network {}", self.config.network_id), err)
    }

    /// A change got no answer: it may land during the next action timeout, so until then the
    /// copy answers nothing (this read may predate it, and so may the next few).
    fn uncertain_for_a_while(&self) {
        let until = tokio::time::Instant::now() + self.config.action_timeout;
        *self.uncertain_until.lock() = Some(until);
        self.forget_network();
    }

    /// Forget the copy: the next plan reads the network.
    fn forget_network(&self) {
        self.network_copy.forget();
    }

    /// Apply a change of this process to the copy (keeping its age). The copy is shared with
    /// readers rather than cloned for each (it holds every route of the cluster); it is changed
    /// in place unless a reader still holds it.
    fn update_view(&self, change: impl FnOnce(&mut Vec<models::Route>)) {
        self.network_copy
            .modify(|network| change(&mut network.routes));
    }

    fn learned(&self) -> parking_lot::MutexGuard<'_, HashMap<IpAddr, Learned>> {
        self.learned.lock()
    }

    /// Run a route action, retrying `locked` / `conflict` answers.
    async fn retrying<F, Fut>(&self, what: &str, mut call: F) -> Result<Action, hcloud_api::Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Action, hcloud_api::Error>>,
    {
        let mut retry = 0;
        loop {
            match call().await {
                Err(err) if err.is_locked_or_conflict() && retry < self.config.lock_retries => {
                    // Another actor changes the network: plan the next change on a fresh read.
                    self.forget_network();
                    let delay = self.config.backoff(retry);
                    tracing::debug!(%err, ?delay, retry, "{what}: network busy, retrying");
                    tokio::time::sleep(delay).await;
                    retry += 1;
                }
                other => return other,
            }
        }
    }

    async fn wait(&self, what: &str, action: &Action) -> Result<()> {
        match tokio::time::timeout(self.config.action_timeout, self.poll(action)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(categorize(format!("{what}: action {}", action.id), err)),
            // No answer of the API to look at: the wait itself ran out (transient).
            Err(_) => Err(Error::other(format!(
                "{what}: action {} did not finish within {:?}",
                action.id, self.config.action_timeout
            ))),
        }
    }

    /// Wait for a route action, through the client's one action waiter: the first check when
    /// the action should be done ([`ActionTimer`]), even if another wait's check just ended,
    /// so that the next change follows this one's end promptly.
    async fn poll(&self, action: &Action) -> Result<(), hcloud_api::Error> {
        let actions = self.client.actions();
        if action.is_finished() {
            return actions.wait(action).await;
        }
        let answered = Instant::now();
        let expected = self.action_time.lock().expected;
        let waited = actions.wait_checking_after(action, expected).await;
        let took = answered.elapsed();
        self.action_time.lock().learn(
            expected,
            took,
            self.client.poll_interval(),
            self.config.action_timeout,
        );
        waited
    }

    /// Delete `route` from the network and wait; `Ok(false)` when the API no longer has it.
    async fn remove(&self, route: &models::Route) -> Result<bool> {
        let id = self.config.network_id;
        let what = format!(
            "deleting route {} via {} from network {id}",
            route.destination, route.gateway
        );
        let action = match self
            .retrying(&what, || async move {
                self.client.networks().delete_route(id, route).await
            })
            .await
        {
            Ok(action) => action,
            // The route went away since the network was read.
            Err(err) if err.is_not_found() => {
                self.forget_network();
                return Ok(false);
            }
            Err(err) => {
                self.forget_network();
                return Err(categorize(what, err));
            }
        };
        self.update_view(|routes| {
            routes.retain(|r| !(r.destination == route.destination && r.gateway == route.gateway));
        });
        // A failed action changed nothing: the copy, which already shows the change, goes.
        self.wait(&what, &action)
            .await
            .inspect_err(|_| self.forget_network())?;
        if let Ok(gateway) = route.gateway.parse::<IpAddr>() {
            self.learned().remove(&gateway);
        }
        Ok(true)
    }

    /// The gateway for `route`: the private IP in the network of the target Node's own
    /// server, which must be one of the Node's InternalIPs (see [`HcloudRoutes`]).
    async fn gateway(&self, route: &Route) -> Result<(IpAddr, Arc<Server>)> {
        let node = &route.target_node;
        let key = match route.target_provider_id.as_str() {
            "" => ServerKey::Name(node.clone()),
            provider_id => match ProviderId::parse(provider_id) {
                Ok(ProviderId::Cloud(id)) => ServerKey::Id(id),
                Ok(ProviderId::Robot(_)) => {
                    return Err(Error::invalid_input(format!(
                        "node {node} is not a cloud server, routes are only supported for cloud servers (providerID {provider_id} is a Robot dedicated server)"
                    )));
                }
                Err(err) => return Err(Error::invalid_input(format!("node {node:?}: {err}"))),
            },
        };
        let internal_ips: Vec<IpAddr> = route
            .target_node_addresses
            .iter()
            .filter(|a| a.type_ == INTERNAL_IP)
            .filter_map(|a| a.address.parse::<IpAddr>().ok())
            .collect();
        let network_id = self.config.network_id;
        let lookup_error = |err| categorize(format!("looking up {key} for node {node:?}"), err);
        let usable = |server: &Server| {
            private_ip(server, network_id).is_some_and(|ip| internal_ips.contains(&ip))
        };
        // A listing as old as the status max age (the one `list_routes` keeps) usually
        // answers. A server that is not attached there, or attached with another IP than the
        // Node's, is looked up again within the normal max age: the listing may predate
        // the attachment. Both go through the cache, so a stuck route costs at most one
        // request per attempt.
        let mut server = self
            .cache
            .get_for_status(&key)
            .await
            .map_err(lookup_error)?;
        if server.as_deref().is_some_and(|s| !usable(s)) {
            server = self.cache.get(&key).await.map_err(lookup_error)?;
        }
        let net = self.network_label();
        let Some(server) = server else {
            // Rejected, not transient: the world outside the Node fixes it (a server created
            // or attached later), so the route controller backs the creation off.
            return Err(Error::rejected(match &key {
                ServerKey::Id(id) => format!(
                    "node {node:?}: no Hetzner Cloud server has the ID {id} of its providerID"
                ),
                ServerKey::Name(_) => format!(
                    "node {node:?} has no providerID and no Hetzner Cloud server is named {node:?}; routes are only supported for Hetzner Cloud servers"
                ),
            }));
        };
        let Some(ip) = private_ip(&server, network_id) else {
            return Err(Error::rejected(format!(
                "node {node:?}: server {:?} (ID {}) is not attached to {net}; {}",
                server.name,
                server.id,
                self.attach_advice()
            )));
        };
        if !internal_ips.contains(&ip) {
            let listed = if internal_ips.is_empty() {
                "none".to_owned()
            } else {
                join(&internal_ips)
            };
            return Err(Error::rejected(format!(
                "node {node:?}: the private IP {ip} of server {:?} (ID {}) in {net} is not one of the node's InternalIPs ({listed})",
                server.name, server.id
            )));
        }
        Ok((ip, server))
    }

    /// Why a route to `node` was refused with `resource_limit_exceeded`: the network is at its
    /// route limit. The same words every time, so that it is reported once.
    fn route_limit_message(&self, destination: IpNet, node: &str) -> String {
        format!(
            "{} is at its route limit (a Hetzner network holds at most {NETWORK_ROUTE_LIMIT} routes): route {destination} for node {node:?} was not added; delete routes no Node needs, or run clusters of more Nodes without routes",
            self.network_label()
        )
    }

    /// What to do about a server outside the network: attach it, unless the copy of the
    /// network shows it full ([`NETWORK_SERVER_LIMIT`]), when no server can join it.
    fn attach_advice(&self) -> String {
        match self.network_copy.latest() {
            Some(network) if network.servers.len() >= NETWORK_SERVER_LIMIT => format!(
                "it cannot join: the network is full, with the {NETWORK_SERVER_LIMIT} servers a Hetzner network takes at most; clusters of more Nodes run without routes in a network"
            ),
            _ => "attach it to route pod traffic to it".to_owned(),
        }
    }

    /// `network "name" (ID n)` as last read, or `network n` before the first read.
    fn network_label(&self) -> String {
        let id = self.config.network_id;
        match self.network_copy.latest() {
            Some(network) => format!("network {:?} (ID {id})", network.name),
            None => format!("network {id}"),
        }
    }

    /// Warn on the Node when `destination` is outside the cluster CIDR.
    async fn check_cluster_cidr(&self, destination: IpNet, node: &str, node_uid: &str) {
        let Some(message) = cluster_cidr_mismatch(&self.config.cluster_cidrs, destination) else {
            return;
        };
        let node = Node {
            metadata: ObjectMeta {
                name: Some(node.to_owned()),
                uid: (!node_uid.is_empty()).then(|| node_uid.to_owned()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        self.events
            .warn(&node, CLUSTER_CIDR_MISCONFIGURED, &message)
            .await;
    }

    /// The Node name listed for a route via `server`.
    fn target_name(&self, gateway: IpAddr, server: &Server) -> String {
        match self.learned().get(&gateway) {
            Some(learned) if learned.server_id == server.id => learned.node.clone(),
            _ => server.name.clone(),
        }
    }
}

/// The primary private IP of `server` in `network_id`.
fn private_ip(server: &Server, network_id: i64) -> Option<IpAddr> {
    server
        .private_net
        .iter()
        .find(|p| p.network == network_id)
        .and_then(|p| p.ip.parse().ok())
}

fn server_with_ip(servers: &[Arc<Server>], network_id: i64, ip: IpAddr) -> Option<&Arc<Server>> {
    servers
        .iter()
        .find(|s| private_ip(s, network_id) == Some(ip))
}

fn join(ips: &[IpAddr]) -> String {
    ips.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A route's destination, normalised (host bits cleared); `None` when it does not parse.
fn destination(route: &models::Route) -> Option<IpNet> {
    route.destination.parse::<IpNet>().ok().map(|n| n.trunc())
}

/// Why `destination` does not fit `cluster_cidrs` (it must lie inside one of them, as a range
/// no larger than it); `None` when it fits or nothing is configured.
fn cluster_cidr_mismatch(cluster_cidrs: &[IpNet], destination: IpNet) -> Option<String> {
    if cluster_cidrs.is_empty() || cluster_cidrs.iter().any(|c| c.contains(&destination)) {
        return None;
    }
    let configured = cluster_cidrs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    Some(format!(
        "route CIDR {destination} is not inside the cluster CIDR {configured} (--cluster-cidr)"
    ))
}

/// The gateway a listed route had: [`Routes::list_routes`] names routes
/// `<gateway>-<destination>`. `None` for other names.
fn listed_gateway(route: &Route) -> Option<IpAddr> {
    let (gateway, destination) = route.name.split_once('-')?;
    let destination = destination.parse::<IpNet>().ok()?;
    (destination.trunc() == route.destination_cidr.trunc())
        .then(|| gateway.parse().ok())
        .flatten()
}

#[async_trait]
impl Routes for HcloudRoutes {
    fn concurrent_operations(&self) -> usize {
        CONCURRENT_ROUTE_CALLS
    }

    /// Hetzner Cloud networks route IPv4 only.
    fn can_route(&self, destination: &IpNet) -> bool {
        matches!(destination, IpNet::V4(_))
    }

    /// Network routes lead to cloud servers only: a Robot dedicated server gets none.
    fn routes_node(&self, node: &Node) -> bool {
        crate::robot::robot_number(node).is_none()
    }

    async fn list_routes(&self, _cluster_name: &str) -> Result<Vec<Route>> {
        let core = &self.core;
        core.operations.count(op::routes::LIST_ROUTES);
        let network = core
            .network_within(core.cache.config().network_max_age)
            .await?;
        if network.routes.is_empty() {
            return Ok(Vec::new());
        }
        let listing_error = |err| categorize("listing servers to map route gateways", err);
        let started = Instant::now();
        let mut snapshot = core
            .cache
            .all_servers_for_status()
            .await
            .map_err(listing_error)?;
        let listed_at = Instant::now().checked_sub(snapshot.age).unwrap_or(started);
        let unknown: Vec<IpAddr> = network
            .routes
            .iter()
            .filter_map(|r| r.gateway.parse::<IpAddr>().ok())
            .filter(|ip| server_with_ip(&snapshot.servers, network.id, *ip).is_none())
            .collect();
        if self.needs_fresher_listing(&unknown, started, listed_at) {
            // Free when the cached listing is within the normal max age already.
            snapshot = core.cache.all_servers().await.map_err(listing_error)?;
        }

        let mut routes = Vec::with_capacity(network.routes.len());
        for route in &network.routes {
            let Some(destination_cidr) = destination(route) else {
                tracing::warn!(
                    network = network.id,
                    destination = route.destination,
                    "ignoring a route with an unparsable destination"
                );
                continue;
            };
            let target = route.gateway.parse::<IpAddr>().ok().and_then(|ip| {
                server_with_ip(&snapshot.servers, network.id, ip).map(|server| {
                    (
                        core.target_name(ip, server),
                        ProviderId::Cloud(server.id).to_string(),
                    )
                })
            });
            let blackhole = target.is_none();
            let (target_node, target_provider_id) = target.unwrap_or_default();
            routes.push(Route {
                name: format!("{}-{destination_cidr}", route.gateway),
                blackhole,
                target_node,
                target_provider_id,
                destination_cidr,
                enable_node_addresses: false,
                target_node_addresses: Vec::new(),
            });
        }
        Ok(routes)
    }

    async fn create_route(
        &self,
        _cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<()> {
        self.core.operations.count(op::routes::CREATE_ROUTE);
        let destination_cidr = route.destination_cidr.trunc();
        let node = &route.target_node;
        if let IpNet::V6(_) = destination_cidr {
            return Err(Error::invalid_input(format!(
                "route {destination_cidr} to node {node:?}: IPv6 routes are not supported by Hetzner Cloud networks"
            )));
        }
        if node.is_empty() {
            return Err(Error::invalid_input(format!(
                "route {destination_cidr}: no target node"
            )));
        }
        self.submit(Change::Create {
            name_hint: name_hint.to_owned(),
            route: route.clone(),
        })
        .await
    }

    fn route_writes(&self) -> RouteWrites {
        RouteWrites {
            create: Some(Write::cloud("POST /networks/{id}/actions/add_route")),
            delete: Some(Write::cloud("POST /networks/{id}/actions/delete_route")),
        }
    }

    async fn delete_route(&self, _cluster_name: &str, route: &Route) -> Result<()> {
        self.core.operations.count(op::routes::DELETE_ROUTE);
        self.submit(Change::Delete {
            route: route.clone(),
        })
        .await
    }
}

impl Core {
    /// Create one route (in the worker).
    async fn create(&self, name_hint: &str, route: &Route) -> Result<()> {
        let destination_cidr = route.destination_cidr.trunc();
        let node = &route.target_node;
        // The gateway first: a route that cannot be created costs no network read.
        let (gateway, server) = self.gateway(route).await?;
        let plan_age = self.cache.config().network_plan_age();
        let network = self.network_within(plan_age).await?;
        self.check_cluster_cidr(destination_cidr, node, name_hint)
            .await;

        let mut exists = false;
        let mut replaced = Vec::new();
        for existing in network
            .routes
            .iter()
            .filter(|r| destination(r) == Some(destination_cidr))
        {
            if existing.gateway.parse::<IpAddr>().ok() == Some(gateway) {
                exists = true;
            } else {
                replaced.push(existing.clone());
            }
        }
        // Let go of the copy before changing it: the change is then made in place.
        let network_id = network.id;
        drop(network);
        for existing in &replaced {
            tracing::info!(
                destination = %destination_cidr,
                old_gateway = existing.gateway,
                %gateway,
                node,
                "replacing a route via another gateway"
            );
            self.remove(existing).await?;
        }
        if !exists {
            self.add(network_id, destination_cidr, gateway, node)
                .await?;
        }
        let mut learned = self.learned();
        if server.name == *node {
            learned.remove(&gateway);
        } else {
            learned.insert(
                gateway,
                Learned {
                    server_id: server.id,
                    node: node.clone(),
                },
            );
        }
        Ok(())
    }

    /// Add a route and wait for its action. A POST without an answer is not repeated: the
    /// network is read instead, and the route counts as added when it is there.
    async fn add(
        &self,
        id: i64,
        destination_cidr: IpNet,
        gateway: IpAddr,
        node: &str,
    ) -> Result<()> {
        let api_route = models::Route::new(destination_cidr.to_string(), gateway.to_string());
        let what = format!(
            "adding route {destination_cidr} via {gateway} (node {node:?}) to network {id}"
        );
        let answer = self
            .retrying(&what, || {
                let api_route = &api_route;
                async move { self.client.networks().add_route(id, api_route).await }
            })
            .await;
        let action = match answer {
            Ok(action) => action,
            Err(hcloud_api::Error::Transport(err)) => {
                // Maybe carried out: look instead of repeating it.
                tracing::warn!(%err, "{what}: no answer; reading the network");
                let fresh = self.network().await?;
                let there = fresh.routes.iter().any(|r| {
                    destination(r) == Some(destination_cidr)
                        && r.gateway.parse::<IpAddr>().ok() == Some(gateway)
                });
                if there {
                    return Ok(());
                }
                self.uncertain_for_a_while();
                return Err(categorize(what, hcloud_api::Error::Transport(err)));
            }
            // Call-site knowledge: `resource_limit_exceeded` on `add_route` means the network
            // is at its route limit. `categorize` rejects it too; only the words are the
            // route's own (the same every time, so the route controller reports it once and
            // backs the creation off instead of retrying it within the pass).
            Err(err) if err.code() == Some(&ErrorCode::ResourceLimitExceeded) => {
                let message = self.route_limit_message(destination_cidr, node);
                return Err(Error::rejected_by(message, err));
            }
            Err(err) => {
                // Refused (e.g. the route exists since our copy was made) or failed: plan the
                // next change on a fresh read.
                self.forget_network();
                return Err(categorize(what, err));
            }
        };
        self.update_view(|routes| routes.push(api_route.clone()));
        // A failed action added nothing: the copy, which already shows the route, goes.
        self.wait(&what, &action)
            .await
            .inspect_err(|_| self.forget_network())
    }

    /// Delete one route as listed (in the worker).
    async fn delete(&self, route: &Route) -> Result<()> {
        let destination_cidr = route.destination_cidr.trunc();
        let plan_age = self.cache.config().network_plan_age();
        let network = self.network_within(plan_age).await?;
        let current: Vec<&models::Route> = network
            .routes
            .iter()
            .filter(|r| destination(r) == Some(destination_cidr))
            .collect();
        if current.is_empty() {
            return Ok(());
        }
        // Only the route as it was listed: a route replaced since (e.g. by create_route for a
        // new Node with this CIDR) is the next sync's business.
        let listed = match listed_gateway(route) {
            Some(gateway) => Some(gateway),
            None => {
                tracing::debug!(
                    route = route.name,
                    destination = %destination_cidr,
                    "route name does not carry its gateway; deleting only a route that still maps to the listed target"
                );
                None
            }
        };
        for existing in current {
            let gateway = existing.gateway.parse::<IpAddr>().ok();
            let same = match listed {
                Some(listed) => gateway == Some(listed),
                None => self.maps_to_listed_target(&network, gateway, route).await?,
            };
            if same {
                self.remove(existing).await?;
            } else {
                tracing::info!(
                    destination = %destination_cidr,
                    gateway = existing.gateway,
                    listed = route.name,
                    "not deleting the route: its gateway changed since it was listed"
                );
            }
        }
        Ok(())
    }

    /// Whether `gateway` still leads where `route` was listed to lead: nowhere (a blackhole)
    /// or to `route.target_node`.
    async fn maps_to_listed_target(
        &self,
        network: &Network,
        gateway: Option<IpAddr>,
        route: &Route,
    ) -> Result<bool> {
        let snapshot = self
            .cache
            .all_servers_for_status()
            .await
            .map_err(|err| categorize("listing servers to check a route's gateway", err))?;
        let target = gateway.and_then(|ip| {
            server_with_ip(&snapshot.servers, network.id, ip)
                .map(|server| self.target_name(ip, server))
        });
        Ok(match target {
            None => route.blackhole,
            Some(name) => !route.blackhole && name == route.target_node,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Route actions of the `lengths`, one after another, each checked as `timer` says and
    /// then every 500 ms (the POST's answer and the checks at the same moment as the action's
    /// start and the API's look): the checks each took, and when the first came.
    fn run(timer: &mut ActionTimer, lengths: &[Duration]) -> Vec<(u32, Duration)> {
        let interval = Duration::from_millis(500);
        lengths
            .iter()
            .map(|length| {
                let expected = timer.expected;
                let mut took = expected;
                let mut checks = 1;
                while took < *length {
                    took += interval;
                    checks += 1;
                }
                timer.learn(expected, took, interval, Duration::from_secs(120));
                (checks, expected)
            })
            .collect()
    }

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn misses(checks: &[(u32, Duration)]) -> usize {
        checks.iter().filter(|(c, _)| *c > 1).count()
    }

    #[test]
    fn the_first_check_of_steady_actions_rarely_misses_and_is_rarely_late() {
        let mut timer = ActionTimer::new();
        let checks = run(&mut timer, &[ms(180); 200]);
        // Shrinking from the initial 250 ms, the first miss comes after about 33 actions,
        // then about one in 90.
        assert_eq!(misses(&checks[..30]), 0, "{checks:?}");
        assert!((2..=3).contains(&misses(&checks)), "{checks:?}");
        // Each miss costs one check more, never two.
        assert!(checks.iter().all(|(c, _)| *c <= 2), "{checks:?}");
        let late: Duration = checks[100..].iter().map(|(_, e)| *e).sum::<Duration>() / 100;
        assert!(late < ms(180).mul_f64(1.15), "{late:?}");
    }

    #[test]
    fn the_first_check_follows_longer_actions_and_shrugs_off_a_slow_one() {
        let mut timer = ActionTimer::new();
        // Actions of 3 s: the timer reaches them within a few actions, then one check
        // usually does.
        let checks = run(&mut timer, &[ms(3000); 30]);
        assert_eq!(misses(&checks[..4]), 4, "{checks:?}");
        assert!(misses(&checks[8..]) <= 1, "{checks:?}");
        assert!(timer.expected < ms(3500), "{timer:?}");

        // One slow action among short ones: the next first checks are at most twice as late,
        // and back within a quarter after twenty actions.
        let mut timer = ActionTimer::new();
        run(&mut timer, &[ms(180); 40]);
        let before = timer.expected;
        let mut lengths = vec![ms(2000)];
        lengths.extend([ms(180); 30]);
        let checks = run(&mut timer, &lengths);
        assert!(
            checks[1..].iter().all(|(_, e)| *e <= before * 2),
            "{checks:?}"
        );
        assert!(checks[21].1 < before.mul_f64(1.25), "{checks:?}");
        assert_eq!(misses(&checks[1..]), 0, "{checks:?}");
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let config = RoutesConfig::new(1);
        let delays: Vec<u64> = (0..6).map(|r| config.backoff(r).as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 5, 5, 5]);
        assert_eq!(config.backoff(40), Duration::from_secs(5));
    }

    fn net(s: &str) -> IpNet {
        s.parse()
            .unwrap_or_else(|_| IpNet::V4(ipnet::Ipv4Net::default()))
    }

    #[test]
    fn cluster_cidr_check_follows_the_official_rule() {
        let v4 = vec![net("10.244.0.0/16")];
        let dual = vec![net("10.244.0.0/16"), net("fd00:10::/56")];
        let cases: [(&[IpNet], &str, bool); 8] = [
            (&[], "192.168.0.0/24", false),
            (&v4, "10.244.3.0/24", false),
            (&v4, "10.244.0.0/16", false),
            // Larger than the cluster CIDR, though starting inside it.
            (&v4, "10.244.0.0/15", true),
            (&v4, "10.245.0.0/24", true),
            (&v4, "fd00:10::/64", true),
            (&dual, "fd00:10::/64", false),
            (&dual, "192.168.1.0/24", true),
        ];
        for (cluster, destination, warn) in cases {
            let message = cluster_cidr_mismatch(cluster, net(destination));
            assert_eq!(
                message.is_some(),
                warn,
                "{cluster:?} {destination}: {message:?}"
            );
        }
        let message = cluster_cidr_mismatch(&dual, net("192.168.1.0/24")).unwrap_or_default();
        assert!(message.contains("192.168.1.0/24"), "{message}");
        assert!(message.contains("10.244.0.0/16,fd00:10::/56"), "{message}");
    }

    #[test]
    fn listed_names_carry_the_gateway() {
        let route = |name: &str, cidr: &str| Route {
            name: name.into(),
            target_node: String::new(),
            target_provider_id: String::new(),
            destination_cidr: net(cidr),
            blackhole: false,
            enable_node_addresses: false,
            target_node_addresses: Vec::new(),
        };
        assert_eq!(
            listed_gateway(&route("10.0.0.2-10.244.1.0/24", "10.244.1.0/24")),
            "10.0.0.2".parse().ok()
        );
        // Another route's name, a plain CIDR or garbage carry no gateway.
        assert_eq!(
            listed_gateway(&route("10.0.0.2-10.244.2.0/24", "10.244.1.0/24")),
            None
        );
        assert_eq!(
            listed_gateway(&route("10.244.1.0/24", "10.244.1.0/24")),
            None
        );
        assert_eq!(
            listed_gateway(&route("x-10.244.1.0/24", "10.244.1.0/24")),
            None
        );
    }

    #[test]
    fn destinations_are_normalised() {
        let route = models::Route::new("10.244.1.7/24", "10.0.0.2");
        assert_eq!(destination(&route), "10.244.1.0/24".parse().ok());
        assert_eq!(destination(&models::Route::new("nope", "10.0.0.2")), None);
    }
}
