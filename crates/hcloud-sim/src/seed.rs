//! Seeds: resources created directly (no actions), from a seed file, the admin API or Rust.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ApiResult};
use crate::input::IdOrName;
use crate::model::Route;
use crate::routes::networks::{NETWORK_ZONES, NetworkSpec, create_network};
use crate::routes::servers::{ServerSpec, create_server};
use crate::world::World;

/// A network referenced by ID or by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NetworkRef {
    /// By ID.
    Id(i64),
    /// By name.
    Name(String),
}

impl From<i64> for NetworkRef {
    fn from(id: i64) -> Self {
        NetworkRef::Id(id)
    }
}
impl From<&str> for NetworkRef {
    fn from(name: &str) -> Self {
        NetworkRef::Name(name.to_string())
    }
}
impl From<String> for NetworkRef {
    fn from(name: String) -> Self {
        NetworkRef::Name(name)
    }
}

/// A subnet of a seeded network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubnetSeed {
    /// Range, e.g. `10.0.0.0/24`.
    pub ip_range: String,
    /// Network zone (default `eu-central`).
    pub network_zone: String,
    /// `cloud` (default), `server` or `vswitch`.
    #[serde(rename = "type")]
    pub kind: String,
}

impl Default for SubnetSeed {
    fn default() -> Self {
        SubnetSeed {
            ip_range: String::new(),
            network_zone: "eu-central".to_string(),
            kind: "cloud".to_string(),
        }
    }
}

impl SubnetSeed {
    /// A cloud subnet.
    pub fn new(ip_range: impl Into<String>, network_zone: impl Into<String>) -> SubnetSeed {
        SubnetSeed {
            ip_range: ip_range.into(),
            network_zone: network_zone.into(),
            kind: "cloud".to_string(),
        }
    }
}

/// A route of a seeded network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSeed {
    /// Destination CIDR.
    pub destination: String,
    /// Gateway IP.
    pub gateway: String,
}

/// A network to seed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NetworkSeed {
    /// Name.
    pub name: String,
    /// Range, e.g. `10.0.0.0/16`.
    pub ip_range: String,
    /// Subnets.
    pub subnets: Vec<SubnetSeed>,
    /// Routes.
    pub routes: Vec<RouteSeed>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

impl NetworkSeed {
    /// A network without subnets.
    pub fn new(name: impl Into<String>, ip_range: impl Into<String>) -> NetworkSeed {
        NetworkSeed {
            name: name.into(),
            ip_range: ip_range.into(),
            ..NetworkSeed::default()
        }
    }
    /// Adds a cloud subnet.
    pub fn subnet(mut self, ip_range: impl Into<String>, network_zone: impl Into<String>) -> Self {
        self.subnets.push(SubnetSeed::new(ip_range, network_zone));
        self
    }
    /// Adds a route.
    pub fn route(mut self, destination: impl Into<String>, gateway: impl Into<String>) -> Self {
        self.routes.push(RouteSeed {
            destination: destination.into(),
            gateway: gateway.into(),
        });
        self
    }
    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
}

/// A server to seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerSeed {
    /// Name (a hostname).
    pub name: String,
    /// Server type name or ID (default `cx23`).
    pub server_type: String,
    /// Location name or ID (default `fsn1`).
    pub location: String,
    /// Image name or ID (default `ubuntu-24.04`).
    pub image: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Status (default `running`).
    pub status: String,
    /// Public IPv4 (default true).
    pub public_ipv4: bool,
    /// Public IPv6 (default true).
    pub public_ipv6: bool,
    /// Networks to attach, by ID or name.
    pub networks: Vec<NetworkRef>,
}

impl Default for ServerSeed {
    fn default() -> Self {
        ServerSeed {
            name: String::new(),
            server_type: "cx23".to_string(),
            location: "fsn1".to_string(),
            image: "ubuntu-24.04".to_string(),
            labels: BTreeMap::new(),
            status: "running".to_string(),
            public_ipv4: true,
            public_ipv6: true,
            networks: Vec::new(),
        }
    }
}

impl ServerSeed {
    /// A running cx23 in fsn1 with public IPv4 and IPv6.
    pub fn new(name: impl Into<String>) -> ServerSeed {
        ServerSeed {
            name: name.into(),
            ..ServerSeed::default()
        }
    }
    /// Server type.
    pub fn server_type(mut self, t: impl Into<String>) -> Self {
        self.server_type = t.into();
        self
    }
    /// Location.
    pub fn location(mut self, l: impl Into<String>) -> Self {
        self.location = l.into();
        self
    }
    /// Image.
    pub fn image(mut self, i: impl Into<String>) -> Self {
        self.image = i.into();
        self
    }
    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
    /// Replaces the labels.
    pub fn labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.labels = labels;
        self
    }
    /// Status (`running`, `off`, ...).
    pub fn status(mut self, s: impl Into<String>) -> Self {
        self.status = s.into();
        self
    }
    /// Public IPv4 on/off.
    pub fn public_ipv4(mut self, on: bool) -> Self {
        self.public_ipv4 = on;
        self
    }
    /// Public IPv6 on/off.
    pub fn public_ipv6(mut self, on: bool) -> Self {
        self.public_ipv6 = on;
        self
    }
    /// Attaches to a network (ID or name).
    pub fn network(mut self, n: impl Into<NetworkRef>) -> Self {
        self.networks.push(n.into());
        self
    }
}

/// A seed file: networks first, then servers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SeedFile {
    /// Networks.
    pub networks: Vec<NetworkSeed>,
    /// Servers.
    pub servers: Vec<ServerSeed>,
}

fn id_or_name(s: &str) -> IdOrName {
    match s.parse::<i64>() {
        Ok(id) => IdOrName::Id(id),
        Err(_) => IdOrName::Name(s.to_string()),
    }
}

/// Creates a seeded network; returns its ID.
pub fn apply_network(w: &mut World, seed: &NetworkSeed) -> ApiResult<i64> {
    if seed.name.trim().is_empty() {
        return Err(ApiError::field("name", "Missing data for required field."));
    }
    let ip_range: Ipv4Net = seed
        .ip_range
        .parse()
        .map_err(|_| ApiError::field("ip_range", "Not a valid IPv4 CIDR."))?;
    let mut subnets = Vec::new();
    for s in &seed.subnets {
        let range: Ipv4Net = s
            .ip_range
            .parse()
            .map_err(|_| ApiError::field("subnets.ip_range", "Not a valid IPv4 CIDR."))?;
        if !NETWORK_ZONES.contains(&s.network_zone.as_str()) {
            return Err(ApiError::field(
                "subnets.network_zone",
                "unknown network zone",
            ));
        }
        subnets.push((s.kind.clone(), Some(range), s.network_zone.clone(), None));
    }
    let mut routes = Vec::new();
    for r in &seed.routes {
        let destination: Ipv4Net = r
            .destination
            .parse()
            .map_err(|_| ApiError::field("routes.destination", "Not a valid IPv4 CIDR."))?;
        let gateway: Ipv4Addr = r
            .gateway
            .parse()
            .map_err(|_| ApiError::field("routes.gateway", "Not a valid IPv4 address."))?;
        routes.push(Route {
            destination,
            gateway,
        });
    }
    create_network(
        w,
        NetworkSpec {
            name: seed.name.clone(),
            ip_range,
            subnets,
            routes,
            labels: seed.labels.clone(),
            expose_routes_to_vswitch: false,
        },
    )
}

/// Creates a seeded server; returns its ID.
pub fn apply_server(w: &mut World, seed: &ServerSeed) -> ApiResult<i64> {
    for (k, v) in &seed.labels {
        if !crate::label_selector::is_label_key(k) || !crate::label_selector::is_label_value(v) {
            return Err(ApiError::field("labels", format!("invalid label {k}={v}")));
        }
    }
    create_server(
        w,
        ServerSpec {
            name: seed.name.clone(),
            server_type: id_or_name(&seed.server_type),
            location: Some(id_or_name(&seed.location)),
            image: Some(id_or_name(&seed.image)),
            labels: seed.labels.clone(),
            status: seed.status.clone(),
            ipv4: seed.public_ipv4,
            ipv6: seed.public_ipv6,
            networks: seed
                .networks
                .iter()
                .map(|n| match n {
                    NetworkRef::Id(id) => IdOrName::Id(*id),
                    NetworkRef::Name(name) => IdOrName::Name(name.clone()),
                })
                .collect(),
        },
    )
}

/// Applies a whole seed file.
pub fn apply(w: &mut World, seed: &SeedFile) -> ApiResult<()> {
    for n in &seed.networks {
        apply_network(w, n).map_err(|e| prefix(e, &format!("network {:?}", n.name)))?;
    }
    for s in &seed.servers {
        apply_server(w, s).map_err(|e| prefix(e, &format!("server {:?}", s.name)))?;
    }
    Ok(())
}

fn prefix(mut e: ApiError, what: &str) -> ApiError {
    e.message = format!("{what}: {}", e.message);
    e
}
