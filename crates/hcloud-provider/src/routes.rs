//! The routes capability: pod CIDRs routed to Nodes through the routes of one Hetzner network.
//!
//! - [`Routes::list_routes`] reads the network freshly (one `GET /networks/{id}`; routes change
//!   under us) and maps each route's gateway to the server whose private IP in this network it
//!   is, using the shared [`ServerCache`] listing (accepting a listing as old as the status max
//!   age). A gateway no server has is a blackhole. When such a gateway is seen for the first
//!   time and the listing predates that, a listing within the cache's normal max age is asked
//!   for, so a server created after the listing is not mistaken for a blackhole (which would
//!   make the route controller delete its route). A gateway that a listing made after its first
//!   sighting did not know costs no further listings. Routes are named
//!   `<gateway>-<destination>`, as the official CCM names them.
//! - [`Routes::create_route`] finds the gateway (see [`HcloudRoutes`] for the order), deletes a
//!   route for the same destination via another gateway first, adds the route and waits for
//!   the actions. IPv6 destinations and Robot nodes are rejected. A destination outside
//!   [`RoutesConfig::cluster_cidrs`] gets a `ClusterCIDRMisconfigured` Warning event on the
//!   Node (the route is still created, as the official CCM does).
//! - [`Routes::delete_route`] re-reads the network and deletes the route for the destination
//!   only while it still has the gateway it was listed with (taken from the route's name); a
//!   route that was replaced since the listing is left for the next sync, and an absent route
//!   is success.
//!
//! Route changes of this process are serialised: the API locks the network while a route
//! action runs (409 `conflict`), so concurrent changes would only fight each other. `locked` and
//! `conflict` answers (from other actors) are retried a few times with a short backoff.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use cloud_provider::provider::Result;
use cloud_provider::{Error, Route, Routes};
use hcloud_api::models::{Action, Network, Server};
use hcloud_api::{Client, models};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::events::Events;
use crate::metrics::{Operations, op};
use crate::server_cache::{SUBSYSTEM_ROUTES, ServerCache, ServerKey};

/// Node address type whose addresses may serve as the gateway when no server is named like the
/// Node.
const INTERNAL_IP: &str = "InternalIP";

/// Reason of the Warning event for a route outside the cluster CIDR (official value).
pub const CLUSTER_CIDR_MISCONFIGURED: &str = "ClusterCIDRMisconfigured";

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
    /// 5 s between attempts), actions waited for up to 2 min.
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
        let factor = 2u32.checked_pow(retry.min(31)).unwrap_or(u32::MAX);
        self.retry_base
            .checked_mul(factor)
            .unwrap_or(self.retry_cap)
            .min(self.retry_cap)
    }
}

/// A gateway learned by [`Routes::create_route`] for a Node whose name is not its server's.
#[derive(Clone, Debug)]
struct Learned {
    server_id: i64,
    node: String,
}

/// Routes of one Hetzner network as Kubernetes routes.
///
/// The gateway of a new route is the private IP in the network of the target Node's server,
/// found in this order:
/// 1. the server named like the Node (`route.target_node`) through the shared cache; when the
///    cached server is not attached to the network, the server is read once more directly, in
///    case it was attached after the listing;
/// 2. otherwise each `InternalIP` of `route.target_node_addresses` that lies inside the
///    network's IP range, in the Node's order, when it is the private IP of a cloud server in
///    this network (so an address of a Robot server behind a vSwitch is never used).
///
/// When step 2 finds the server, listing maps the gateway back to the Node's name (remembered
/// in memory), so the route controller sees the route it asked for.
#[derive(Debug)]
pub struct HcloudRoutes {
    client: Client,
    cache: ServerCache,
    config: RoutesConfig,
    /// Route changes of this process, one at a time.
    mutations: tokio::sync::Mutex<()>,
    /// Gateway IP → Node name, for Nodes found by their InternalIP (step 2).
    learned: std::sync::Mutex<HashMap<IpAddr, Learned>>,
    /// Gateways of listed routes that no server had, and when each was first seen.
    unknown_gateways: std::sync::Mutex<HashMap<IpAddr, Instant>>,
    operations: Operations,
    events: Events,
}

impl HcloudRoutes {
    /// Routes of `config.network_id`, with servers looked up through `cache` (share the
    /// instances' cache to share its listing).
    pub fn new(client: Client, cache: ServerCache, config: RoutesConfig) -> Self {
        Self {
            client,
            cache: cache.with_subsystem(SUBSYSTEM_ROUTES),
            config,
            mutations: tokio::sync::Mutex::new(()),
            learned: std::sync::Mutex::default(),
            unknown_gateways: std::sync::Mutex::default(),
            operations: Operations::default(),
            events: Events::default(),
        }
    }

    /// Count operations into `operations` (the provider's shared handle).
    #[must_use]
    pub fn with_operations(mut self, operations: Operations) -> Self {
        self.operations = operations;
        self
    }

    /// Write events through `events` (the provider's shared handle).
    #[must_use]
    pub fn with_events(mut self, events: Events) -> Self {
        self.events = events;
        self
    }

    /// The operations counter.
    pub fn operations(&self) -> &Operations {
        &self.operations
    }

    /// The event handle.
    pub fn events(&self) -> &Events {
        &self.events
    }

    /// The settings.
    pub fn config(&self) -> &RoutesConfig {
        &self.config
    }

    async fn network(&self) -> Result<Network> {
        self.operations.count(op::routes::RELOAD_NETWORK);
        let id = self.config.network_id;
        self.client
            .networks()
            .get(id)
            .await
            .map_err(|err| Error::api(format!("reading network {id}"), err))
    }

    fn learned(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Learned>> {
        self.learned.lock().unwrap_or_else(PoisonError::into_inner)
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
        match tokio::time::timeout(
            self.config.action_timeout,
            self.client.actions().wait(action),
        )
        .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(Error::api(format!("{what}: action {}", action.id), err)),
            Err(_) => Err(Error::api_msg(format!(
                "{what}: action {} did not finish within {:?}",
                action.id, self.config.action_timeout
            ))),
        }
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
            Err(err) if err.is_not_found() => return Ok(false),
            Err(err) => return Err(Error::api(what, err)),
        };
        self.wait(&what, &action).await?;
        if let Ok(gateway) = route.gateway.parse::<IpAddr>() {
            self.learned().remove(&gateway);
        }
        Ok(true)
    }

    /// The gateway for `route` (see the type's documentation for the order).
    async fn gateway(&self, network: &Network, route: &Route) -> Result<(IpAddr, Arc<Server>)> {
        let node = &route.target_node;
        let key = ServerKey::Name(node.clone());
        let by_name = self
            .cache
            .get(&key)
            .await
            .map_err(|err| Error::api(format!("looking up {key} for node {node:?}"), err))?;
        if let Some(server) = &by_name {
            if let Some(ip) = private_ip(server, network.id) {
                return Ok((ip, server.clone()));
            }
            // The listing may predate the attachment: ask for this server once more.
            match self.client.servers().get(server.id).await {
                Ok(fresh) => {
                    if let Some(ip) = private_ip(&fresh, network.id) {
                        return Ok((ip, Arc::new(fresh)));
                    }
                }
                Err(err) if err.is_not_found() => {}
                Err(err) => {
                    return Err(Error::api(
                        format!("reading server {} for node {node:?}", server.id),
                        err,
                    ));
                }
            }
        }

        let range = network.ip_range.parse::<IpNet>().ok();
        let candidates: Vec<IpAddr> = route
            .target_node_addresses
            .iter()
            .filter(|a| a.type_ == INTERNAL_IP)
            .filter_map(|a| a.address.parse::<IpAddr>().ok())
            .filter(|ip| range.is_some_and(|r| r.contains(ip)))
            .collect();
        if !candidates.is_empty() {
            let snapshot = self
                .cache
                .all_servers()
                .await
                .map_err(|err| Error::api(format!("listing servers for node {node:?}"), err))?;
            for ip in &candidates {
                if let Some(server) = server_with_ip(&snapshot.servers, network.id, *ip) {
                    return Ok((*ip, server.clone()));
                }
            }
        }

        let net = format!("network {:?} (ID {})", network.name, network.id);
        Err(match by_name {
            Some(server) => Error::other(format!(
                "node {node:?}: server {:?} (ID {}) is not attached to {net}; attach it to route pod traffic to it",
                server.name, server.id
            )),
            None if candidates.is_empty() => Error::other(format!(
                "node {node:?}: no Hetzner Cloud server is named {node:?} and the node has no InternalIP in {net}; routes to Robot dedicated servers are not supported"
            )),
            None => Error::other(format!(
                "node {node:?}: no Hetzner Cloud server is named {node:?} or has the node's InternalIP {} in {net}; routes to Robot dedicated servers are not supported",
                join(&candidates)
            )),
        })
    }

    /// Remember when each gateway in `unknown` was first seen (forgetting gateways no longer
    /// listed) and say whether one of them was first seen after the listing at `listed_at`:
    /// only then may a fresher listing know its server.
    fn needs_fresher_listing(&self, unknown: &[IpAddr], now: Instant, listed_at: Instant) -> bool {
        let mut seen = self
            .unknown_gateways
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        seen.retain(|ip, _| unknown.contains(ip));
        let mut fresher = false;
        for ip in unknown {
            let first_seen = *seen.entry(*ip).or_insert(now);
            fresher |= first_seen > listed_at;
        }
        fresher
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
    async fn list_routes(&self, _cluster_name: &str) -> Result<Vec<Route>> {
        self.operations.count(op::routes::LIST_ROUTES);
        let network = self.network().await?;
        if network.routes.is_empty() {
            return Ok(Vec::new());
        }
        let listing_error = |err| Error::api("listing servers to map route gateways", err);
        let started = Instant::now();
        let mut snapshot = self
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
            snapshot = self.cache.all_servers().await.map_err(listing_error)?;
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
                server_with_ip(&snapshot.servers, network.id, ip)
                    .map(|server| self.target_name(ip, server))
            });
            routes.push(Route {
                name: format!("{}-{destination_cidr}", route.gateway),
                blackhole: target.is_none(),
                target_node: target.unwrap_or_default(),
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
        self.operations.count(op::routes::CREATE_ROUTE);
        let destination_cidr = route.destination_cidr.trunc();
        let node = &route.target_node;
        if let IpNet::V6(_) = destination_cidr {
            return Err(Error::InvalidInput(format!(
                "route {destination_cidr} to node {node:?}: IPv6 routes are not supported by Hetzner Cloud networks"
            )));
        }
        if node.is_empty() {
            return Err(Error::InvalidInput(format!(
                "route {destination_cidr}: no target node"
            )));
        }
        let _serialised = self.mutations.lock().await;
        let network = self.network().await?;
        let (gateway, server) = self.gateway(&network, route).await?;
        self.check_cluster_cidr(destination_cidr, node, name_hint)
            .await;

        let mut exists = false;
        for existing in network
            .routes
            .iter()
            .filter(|r| destination(r) == Some(destination_cidr))
        {
            if existing.gateway.parse::<IpAddr>().ok() == Some(gateway) {
                exists = true;
            } else {
                tracing::info!(
                    destination = %destination_cidr,
                    old_gateway = existing.gateway,
                    %gateway,
                    node,
                    "replacing a route via another gateway"
                );
                self.remove(existing).await?;
            }
        }
        if !exists {
            let id = network.id;
            let api_route = models::Route::new(destination_cidr.to_string(), gateway.to_string());
            let what = format!(
                "adding route {destination_cidr} via {gateway} (node {node:?}) to network {id}"
            );
            let action = self
                .retrying(&what, || {
                    let api_route = &api_route;
                    async move { self.client.networks().add_route(id, api_route).await }
                })
                .await
                .map_err(|err| Error::api(what.clone(), err))?;
            self.wait(&what, &action).await?;
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

    async fn delete_route(&self, _cluster_name: &str, route: &Route) -> Result<()> {
        self.operations.count(op::routes::DELETE_ROUTE);
        let destination_cidr = route.destination_cidr.trunc();
        let _serialised = self.mutations.lock().await;
        let network = self.network().await?;
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
}

impl HcloudRoutes {
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
            .map_err(|err| Error::api("listing servers to check a route's gateway", err))?;
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
