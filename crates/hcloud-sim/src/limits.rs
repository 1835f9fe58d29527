//! Hetzner's per-resource limits: servers, routes and subnets per network, networks per
//! server, and each load balancer type's caps on targets, services and certificates.
//!
//! The defaults are the real cloud's. A seed (`"limits"`) or the admin API
//! (`PUT /_admin/limits`) can change them, e.g. lower the route limit to 3 so that a test
//! reaches it with four Nodes. Lowering a limit below what exists keeps what exists and
//! refuses only what would add to it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ApiResult};
use crate::input::{IdOrName, overwrite};
use crate::world::World;

/// The API's code for a limit that is reached (HTTP 403).
pub const LIMIT_CODE: &str = "resource_limit_exceeded";

/// The network and server limits a simulated project has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkLimits {
    /// Servers attached to one network (Hetzner: 100).
    pub servers_per_network: usize,
    /// Routes of one network (Hetzner: 100).
    pub routes_per_network: usize,
    /// Subnets of one network (Hetzner: 50).
    pub subnets_per_network: usize,
    /// Networks one server is attached to (Hetzner: 3).
    pub networks_per_server: usize,
}

impl Default for NetworkLimits {
    fn default() -> Self {
        NetworkLimits {
            servers_per_network: 100,
            routes_per_network: 100,
            subnets_per_network: 50,
            networks_per_server: 3,
        }
    }
}

/// The caps of one load balancer type; unset ones stay as they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LbTypeLimitsSeed {
    /// Targets (a label selector counts the servers it matches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_targets: Option<usize>,
    /// Services.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_services: Option<usize>,
    /// Certificates assigned across the services.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_assigned_certificates: Option<usize>,
}

/// Limits to set (seed `"limits"`, `PUT /_admin/limits`); unset ones stay as they are.
/// `GET /_admin/limits` answers with every field set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSeed {
    /// Servers attached to one network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub servers_per_network: Option<usize>,
    /// Routes of one network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routes_per_network: Option<usize>,
    /// Subnets of one network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnets_per_network: Option<usize>,
    /// Networks one server is attached to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub networks_per_server: Option<usize>,
    /// Caps of load balancer types, by type name (what `GET /load_balancer_types` shows).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub load_balancer_types: BTreeMap<String, LbTypeLimitsSeed>,
}

impl LimitsSeed {
    setters! {
        /// Sets the servers per network.
        servers_per_network(Some usize);
        /// Sets the routes per network.
        routes_per_network(Some usize);
        /// Sets the subnets per network.
        subnets_per_network(Some usize);
        /// Sets the networks per server.
        networks_per_server(Some usize);
    }
    /// The caps of load balancer type `name`, to set.
    fn lb_type(&mut self, name: impl Into<String>) -> &mut LbTypeLimitsSeed {
        self.load_balancer_types.entry(name.into()).or_default()
    }
    /// Sets the target cap of load balancer type `name` (e.g. `lb11`).
    pub fn max_targets(mut self, name: impl Into<String>, n: usize) -> Self {
        self.lb_type(name).max_targets = Some(n);
        self
    }
    /// Sets the service cap of load balancer type `name`.
    pub fn max_services(mut self, name: impl Into<String>, n: usize) -> Self {
        self.lb_type(name).max_services = Some(n);
        self
    }
    /// Sets the certificate cap of load balancer type `name`.
    pub fn max_assigned_certificates(mut self, name: impl Into<String>, n: usize) -> Self {
        self.lb_type(name).max_assigned_certificates = Some(n);
        self
    }
}

/// The limits in force, every field set.
pub fn current(w: &World) -> LimitsSeed {
    let l = w.limits;
    LimitsSeed {
        servers_per_network: Some(l.servers_per_network),
        routes_per_network: Some(l.routes_per_network),
        subnets_per_network: Some(l.subnets_per_network),
        networks_per_server: Some(l.networks_per_server),
        load_balancer_types: w
            .catalog
            .lb_types
            .iter()
            .map(|t| {
                (
                    t.name.to_string(),
                    LbTypeLimitsSeed {
                        max_targets: Some(t.max_targets),
                        max_services: Some(t.max_services),
                        max_assigned_certificates: Some(t.max_assigned_certificates),
                    },
                )
            })
            .collect(),
    }
}

/// Sets the limits `seed` names. An unknown load balancer type is refused before anything
/// changes.
pub fn apply(w: &mut World, seed: &LimitsSeed) -> ApiResult<()> {
    if let Some(unknown) = seed.load_balancer_types.keys().find(|name| {
        w.catalog
            .lb_type(&IdOrName::Name((*name).clone()))
            .is_none()
    }) {
        let problem = format!("unknown load balancer type {unknown:?}");
        let mut err = ApiError::field("load_balancer_types", problem.clone());
        err.message = format!("{}: {problem}", err.message);
        return Err(err);
    }
    let l = &mut w.limits;
    overwrite(&mut l.servers_per_network, seed.servers_per_network);
    overwrite(&mut l.routes_per_network, seed.routes_per_network);
    overwrite(&mut l.subnets_per_network, seed.subnets_per_network);
    overwrite(&mut l.networks_per_server, seed.networks_per_server);
    for t in &mut w.catalog.lb_types {
        if let Some(caps) = seed.load_balancer_types.get(t.name) {
            overwrite(&mut t.max_targets, caps.max_targets);
            overwrite(&mut t.max_services, caps.max_services);
            overwrite(
                &mut t.max_assigned_certificates,
                caps.max_assigned_certificates,
            );
        }
    }
    Ok(())
}

/// 403 `resource_limit_exceeded` with `message`.
pub fn exceeded(message: &str) -> ApiError {
    ApiError::new(LIMIT_CODE, message)
}

/// Refuses a route beyond the network's route limit (`routes` exist already).
pub fn check_routes(w: &World, routes: usize) -> ApiResult<()> {
    if routes >= w.limits.routes_per_network {
        return Err(exceeded("route limit reached"));
    }
    Ok(())
}

/// Refuses a subnet beyond the network's subnet limit (`subnets` exist already).
pub fn check_subnets(w: &World, subnets: usize) -> ApiResult<()> {
    if subnets >= w.limits.subnets_per_network {
        return Err(exceeded("subnet limit reached"));
    }
    Ok(())
}

/// Refuses to attach server `server` (an existing one, or `None` for one being created with
/// `already` networks) to `network` when the network has its most servers or the server its
/// most networks. Attachments whose action still runs count.
pub fn check_attachment(
    w: &World,
    server: Option<i64>,
    already: usize,
    network: i64,
) -> ApiResult<()> {
    let pending = w.pending_attachments();
    let in_network = w
        .servers
        .values()
        .filter(|s| s.private_net.iter().any(|pn| pn.network == network))
        .count()
        + pending.iter().filter(|(_, n)| *n == network).count();
    if in_network >= w.limits.servers_per_network {
        return Err(exceeded("server limit of network reached"));
    }
    let of_server = match server {
        Some(id) => {
            w.servers.get(&id).map_or(0, |s| s.private_net.len())
                + pending.iter().filter(|(s, _)| *s == id).count()
        }
        None => already,
    };
    if of_server >= w.limits.networks_per_server {
        return Err(exceeded("network limit of server reached"));
    }
    Ok(())
}
