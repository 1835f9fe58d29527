//! Seeds: resources created directly (no actions), from a seed file, the admin API or Rust.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use chrono::Utc;

use crate::error::{ApiError, ApiResult};
use crate::input::{IdOrName, Input};
use crate::label_selector::Selector;
use crate::limits::LimitsSeed;
use crate::model::{CertStatus, Certificate, LoadBalancer, Route, Service, Target, TargetKind};
use crate::pagination::Sortable;
use crate::routes::certificates::{fake_pem, fingerprint};
use crate::routes::lb_parts::{
    check_service, check_services, check_target, check_target_limit, read_service,
};
use crate::routes::load_balancers::assign_public_ips;
use crate::routes::networks::{NETWORK_ZONES, NetworkSpec, create_network, pick_private_ip};
use crate::routes::primary_ips::create_unassigned;
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

/// Any resource referenced by ID or by name (servers, certificates, Primary IPs).
pub type ResourceRef = NetworkRef;

/// An unassigned Primary IP to seed (to create a load balancer with).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PrimaryIpSeed {
    /// Name.
    pub name: String,
    /// `ipv4` (default) or `ipv6`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Location name or ID (default `fsn1`).
    pub location: String,
    /// Deleted together with the resource it gets assigned to.
    pub auto_delete: bool,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

impl Default for PrimaryIpSeed {
    fn default() -> Self {
        PrimaryIpSeed {
            name: String::new(),
            kind: "ipv4".to_string(),
            location: "fsn1".to_string(),
            auto_delete: false,
            labels: BTreeMap::new(),
        }
    }
}

impl PrimaryIpSeed {
    /// An unassigned IPv4 in fsn1.
    pub fn ipv4(name: impl Into<String>) -> PrimaryIpSeed {
        PrimaryIpSeed {
            name: name.into(),
            ..PrimaryIpSeed::default()
        }
    }
    /// An unassigned IPv6 /64 in fsn1.
    pub fn ipv6(name: impl Into<String>) -> PrimaryIpSeed {
        PrimaryIpSeed {
            name: name.into(),
            kind: "ipv6".to_string(),
            ..PrimaryIpSeed::default()
        }
    }
    /// Location.
    pub fn location(mut self, l: impl Into<String>) -> Self {
        self.location = l.into();
        self
    }
    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
}

/// A certificate to seed: `uploaded` (default) or `managed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CertificateSeed {
    /// Name.
    pub name: String,
    /// `uploaded` or `managed`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Domain names (required for managed certificates).
    pub domain_names: Vec<String>,
    /// PEM of an uploaded certificate (a generated one when absent).
    pub certificate: Option<String>,
    /// Issuance status of a managed certificate: `completed` (default), `pending` (stays
    /// pending: no action runs for it) or `failed` (can be retried).
    pub issuance: String,
}

impl Default for CertificateSeed {
    fn default() -> Self {
        CertificateSeed {
            name: String::new(),
            kind: "uploaded".to_string(),
            labels: BTreeMap::new(),
            domain_names: Vec::new(),
            certificate: None,
            issuance: "completed".to_string(),
        }
    }
}

impl CertificateSeed {
    /// An uploaded certificate (with a generated PEM).
    pub fn uploaded(name: impl Into<String>) -> CertificateSeed {
        CertificateSeed {
            name: name.into(),
            ..CertificateSeed::default()
        }
    }
    /// A managed certificate for `domains`, issued.
    pub fn managed<S: Into<String>>(
        name: impl Into<String>,
        domains: impl IntoIterator<Item = S>,
    ) -> CertificateSeed {
        CertificateSeed {
            name: name.into(),
            kind: "managed".to_string(),
            domain_names: domains.into_iter().map(Into::into).collect(),
            ..CertificateSeed::default()
        }
    }
    /// Issuance status of a managed certificate (`completed`, `pending`, `failed`).
    pub fn issuance(mut self, status: impl Into<String>) -> Self {
        self.issuance = status.into();
        self
    }
    /// Domain names (of an uploaded certificate).
    pub fn domain_names<S: Into<String>>(mut self, domains: impl IntoIterator<Item = S>) -> Self {
        self.domain_names = domains.into_iter().map(Into::into).collect();
        self
    }
    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
}

/// HTTP settings of a seeded service; unset fields get the API's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HttpSeed {
    /// Sticky-session cookie name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cookie_name: Option<String>,
    /// Sticky-session cookie lifetime in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cookie_lifetime: Option<i64>,
    /// Certificates by ID or name (https).
    pub certificates: Vec<ResourceRef>,
    /// Redirect HTTP to HTTPS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_http: Option<bool>,
    /// Sticky sessions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sticky_sessions: Option<bool>,
    /// Idle timeout in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_idle: Option<i64>,
}

/// HTTP settings of a seeded health check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HealthCheckHttpSeed {
    /// Host header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Expected body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// Accepted status codes, e.g. `2??`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_codes: Option<Vec<String>>,
    /// Validate the certificate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<bool>,
}

/// A seeded health check; unset fields get the API's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HealthCheckSeed {
    /// `tcp`, `http` or `https`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Interval in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<i64>,
    /// Timeout in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i64>,
    /// Retries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<i64>,
    /// HTTP settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<HealthCheckHttpSeed>,
}

/// A service of a seeded load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServiceSeed {
    /// `tcp` (default), `http` or `https`.
    pub protocol: String,
    /// Listen port.
    pub listen_port: u16,
    /// Destination port (default: the listen port; 80 for https).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_port: Option<u16>,
    /// PROXY protocol.
    pub proxyprotocol: bool,
    /// HTTP settings (http/https).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSeed>,
    /// Health check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheckSeed>,
}

impl Default for ServiceSeed {
    fn default() -> Self {
        ServiceSeed {
            protocol: "tcp".to_string(),
            listen_port: 0,
            destination_port: None,
            proxyprotocol: false,
            http: None,
            health_check: None,
        }
    }
}

impl ServiceSeed {
    /// A TCP service.
    pub fn tcp(listen_port: u16, destination_port: u16) -> ServiceSeed {
        ServiceSeed {
            listen_port,
            destination_port: Some(destination_port),
            ..ServiceSeed::default()
        }
    }
}

/// A target of a seeded load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TargetSeed {
    /// A server by ID or name.
    Server {
        /// The server.
        server: ResourceRef,
        /// Reach it over the load balancer's network.
        #[serde(default)]
        use_private_ip: bool,
    },
    /// Every server matching a label selector.
    LabelSelector {
        /// The selector, e.g. `role=worker`.
        label_selector: String,
        /// Reach them over the load balancer's network.
        #[serde(default)]
        use_private_ip: bool,
    },
    /// An IP outside Hetzner Cloud.
    Ip {
        /// The address.
        ip: String,
    },
}

/// The network a seeded load balancer is attached to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LbNetworkSeed {
    /// The network by ID or name.
    pub network: NetworkRef,
    /// Its IP in the network (default: the lowest free one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
}

/// Protection flags of a seeded resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProtectionSeed {
    /// Delete protection.
    pub delete: bool,
}

/// Reverse DNS of a seeded load balancer's public IPs (default: generated names).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LbDnsPtrSeed {
    /// Of the IPv4.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<String>,
    /// Of the IPv6.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<String>,
}

/// A load balancer to seed, e.g. one the official cloud controller left behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadBalancerSeed {
    /// Name.
    pub name: String,
    /// Type name or ID (default `lb11`).
    pub load_balancer_type: String,
    /// Location name or ID (default `fsn1` when `network_zone` is unset too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Network zone (the zone's first location).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_zone: Option<String>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// `round_robin` (default) or `least_connections`.
    pub algorithm: String,
    /// Public interface on (default) or off.
    pub public_interface: bool,
    /// Services.
    pub services: Vec<ServiceSeed>,
    /// Targets.
    pub targets: Vec<TargetSeed>,
    /// Network attachment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<LbNetworkSeed>,
    /// Protection.
    pub protection: ProtectionSeed,
    /// Reverse DNS of the public IPs.
    pub dns_ptr: LbDnsPtrSeed,
}

impl Default for LoadBalancerSeed {
    fn default() -> Self {
        LoadBalancerSeed {
            name: String::new(),
            load_balancer_type: "lb11".to_string(),
            location: None,
            network_zone: None,
            labels: BTreeMap::new(),
            algorithm: "round_robin".to_string(),
            public_interface: true,
            services: Vec::new(),
            targets: Vec::new(),
            network: None,
            protection: ProtectionSeed::default(),
            dns_ptr: LbDnsPtrSeed::default(),
        }
    }
}

impl LoadBalancerSeed {
    /// An lb11 in fsn1 with a public interface and nothing else.
    pub fn new(name: impl Into<String>) -> LoadBalancerSeed {
        LoadBalancerSeed {
            name: name.into(),
            ..LoadBalancerSeed::default()
        }
    }
    /// Type.
    pub fn load_balancer_type(mut self, t: impl Into<String>) -> Self {
        self.load_balancer_type = t.into();
        self
    }
    /// Location.
    pub fn location(mut self, l: impl Into<String>) -> Self {
        self.location = Some(l.into());
        self
    }
    /// Network zone instead of a location.
    pub fn network_zone(mut self, z: impl Into<String>) -> Self {
        self.network_zone = Some(z.into());
        self
    }
    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
    /// Algorithm.
    pub fn algorithm(mut self, a: impl Into<String>) -> Self {
        self.algorithm = a.into();
        self
    }
    /// Public interface on/off.
    pub fn public_interface(mut self, on: bool) -> Self {
        self.public_interface = on;
        self
    }
    /// Adds a service.
    pub fn service(mut self, s: ServiceSeed) -> Self {
        self.services.push(s);
        self
    }
    /// Adds a target.
    pub fn target(mut self, t: TargetSeed) -> Self {
        self.targets.push(t);
        self
    }
    /// Attaches to a network, optionally with a fixed IP.
    pub fn network(mut self, n: impl Into<NetworkRef>, ip: Option<&str>) -> Self {
        self.network = Some(LbNetworkSeed {
            network: n.into(),
            ip: ip.map(str::to_string),
        });
        self
    }
    /// Delete protection.
    pub fn protect_delete(mut self, on: bool) -> Self {
        self.protection.delete = on;
        self
    }
}

/// A seed file: limits, networks, servers, Primary IPs, certificates, load balancers, then
/// Robot dedicated servers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SeedFile {
    /// Limits to set before anything is created (unset ones stay Hetzner's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsSeed>,
    /// Networks.
    pub networks: Vec<NetworkSeed>,
    /// Servers.
    pub servers: Vec<ServerSeed>,
    /// Unassigned Primary IPs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub primary_ips: Vec<PrimaryIpSeed>,
    /// Certificates.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub certificates: Vec<CertificateSeed>,
    /// Load balancers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub load_balancers: Vec<LoadBalancerSeed>,
    /// Dedicated servers of the Robot account (served under `/robot`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub robot_servers: Vec<crate::robot::RobotServerSeed>,
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
    check_labels(&seed.labels)?;
    create_server(
        w,
        ServerSpec {
            name: seed.name.clone(),
            server_type: IdOrName::parse(&seed.server_type),
            location: Some(IdOrName::parse(&seed.location)),
            image: Some(IdOrName::parse(&seed.image)),
            labels: seed.labels.clone(),
            status: seed.status.clone(),
            ipv4: seed.public_ipv4,
            ipv6: seed.public_ipv6,
            networks: seed.networks.iter().map(to_id_or_name).collect(),
        },
    )
}

fn check_labels(labels: &BTreeMap<String, String>) -> ApiResult<()> {
    for (k, v) in labels {
        if !crate::label_selector::is_label_key(k) || !crate::label_selector::is_label_value(v) {
            return Err(ApiError::field("labels", format!("invalid label {k}={v}")));
        }
    }
    Ok(())
}

/// The name (1 to 128 characters), the labels, then that the name is not one of `taken`.
fn check_name_and_labels<'a>(
    name: &str,
    labels: &BTreeMap<String, String>,
    mut taken: impl Iterator<Item = &'a str>,
) -> ApiResult<()> {
    if name.trim().is_empty() || name.len() > 128 {
        return Err(ApiError::field(
            "name",
            "Must be between 1 and 128 characters.",
        ));
    }
    check_labels(labels)?;
    if taken.any(|t| t == name) {
        return Err(crate::routes::not_unique("name"));
    }
    Ok(())
}

fn to_id_or_name(r: &NetworkRef) -> IdOrName {
    match r {
        NetworkRef::Id(id) => IdOrName::Id(*id),
        NetworkRef::Name(name) => IdOrName::Name(name.clone()),
    }
}

/// Creates a seeded, unassigned Primary IP; returns its ID.
pub fn apply_primary_ip(w: &mut World, seed: &PrimaryIpSeed) -> ApiResult<i64> {
    check_labels(&seed.labels)?;
    create_unassigned(
        w,
        seed.name.clone(),
        &seed.kind,
        &IdOrName::parse(&seed.location),
        seed.auto_delete,
        seed.labels.clone(),
    )
}

/// Creates a seeded certificate (issued, pending or failed as the seed says); returns its ID.
pub fn apply_certificate(w: &mut World, seed: &CertificateSeed) -> ApiResult<i64> {
    let taken = w.certificates.values().map(|c| c.name.as_str());
    check_name_and_labels(&seed.name, &seed.labels, taken)?;
    let now = Utc::now();
    let (pem, status) = match seed.kind.as_str() {
        "uploaded" => (
            Some(
                seed.certificate
                    .clone()
                    .unwrap_or_else(|| fake_pem(&seed.domain_names)),
            ),
            None,
        ),
        "managed" => {
            if seed.domain_names.is_empty() {
                return Err(ApiError::field(
                    "domain_names",
                    "At least one domain name is required.",
                ));
            }
            let status = match seed.issuance.as_str() {
                "completed" => CertStatus {
                    issuance: "completed".to_string(),
                    renewal: "scheduled".to_string(),
                    error: None,
                },
                "pending" => CertStatus {
                    issuance: "pending".to_string(),
                    renewal: "unavailable".to_string(),
                    error: None,
                },
                "failed" => CertStatus {
                    issuance: "failed".to_string(),
                    renewal: "unavailable".to_string(),
                    error: Some((
                        "ca_dns_validation_failed".to_string(),
                        "Certificate Authority: DNS validation failed".to_string(),
                    )),
                },
                _ => {
                    return Err(ApiError::field(
                        "issuance",
                        "Must be one of: completed, pending, failed.",
                    ));
                }
            };
            let pem = (status.issuance == "completed").then(|| fake_pem(&seed.domain_names));
            (pem, Some(status))
        }
        _ => {
            return Err(ApiError::field(
                "type",
                "Must be one of: uploaded, managed.",
            ));
        }
    };
    let id = w.cert_ids.take();
    w.certificates.insert(
        id,
        Certificate {
            id,
            name: seed.name.clone(),
            labels: seed.labels.clone(),
            kind: seed.kind.clone(),
            fingerprint: pem.as_deref().map(|p| fingerprint(&format!("{p}{id}"))),
            not_valid_before: pem.as_ref().map(|_| now),
            not_valid_after: pem.as_ref().map(|_| now + chrono::Duration::days(90)),
            certificate: pem,
            domain_names: seed.domain_names.clone(),
            created: now,
            status,
        },
    );
    Ok(id)
}

/// The ID of the resource of `items` that `r` names; an error on `field` when there is none.
fn resource_id<T: Sortable>(
    items: &BTreeMap<i64, T>,
    r: &ResourceRef,
    field: &str,
    what: &str,
) -> ApiResult<i64> {
    let found = match r {
        NetworkRef::Id(id) => items.contains_key(id).then_some(*id),
        NetworkRef::Name(n) => items.values().find(|x| x.sort_name() == n).map(T::sort_id),
    };
    found.ok_or_else(|| ApiError::field(field, format!("{what} {r:?} not found")))
}

/// A seeded service, read like an `add_service` body (same defaults and checks).
fn service_of(w: &World, i: usize, seed: &ServiceSeed) -> ApiResult<Service> {
    let mut value = serde_json::to_value(seed)
        .map_err(|e| ApiError::field("services", format!("cannot read service: {e}")))?;
    if let Some(http) = &seed.http {
        let ids = http
            .certificates
            .iter()
            .map(|c| resource_id(&w.certificates, c, "http.certificates", "certificate"))
            .collect::<ApiResult<Vec<i64>>>()?;
        value["http"]["certificates"] = serde_json::json!(ids);
    }
    let mut input = Input::from_value(&value, format!("services[{i}]"))
        .map_err(|(name, message)| ApiError::field(&name, message))?;
    let svc = read_service(&mut input, None);
    input.finish()?;
    svc.ok_or_else(|| ApiError::field("services", "invalid service"))
}

fn target_of(w: &World, seed: &TargetSeed) -> ApiResult<Target> {
    let kind_and_private = match seed {
        TargetSeed::Server {
            server,
            use_private_ip,
        } => {
            let id = resource_id(&w.servers, server, "targets.server", "server")?;
            (TargetKind::Server(id), *use_private_ip)
        }
        TargetSeed::LabelSelector {
            label_selector,
            use_private_ip,
        } => {
            Selector::parse(label_selector)
                .map_err(|e| ApiError::field("targets.label_selector", e))?;
            (
                TargetKind::LabelSelector(label_selector.clone()),
                *use_private_ip,
            )
        }
        TargetSeed::Ip { ip } => {
            ip.parse::<std::net::IpAddr>()
                .map_err(|_| ApiError::field("targets.ip", "Not a valid IP address."))?;
            (TargetKind::Ip(ip.clone()), false)
        }
    };
    Ok(Target {
        kind: kind_and_private.0,
        use_private_ip: kind_and_private.1,
    })
}

/// Creates a seeded load balancer, complete at once (public IPs, network, services,
/// targets); returns its ID.
pub fn apply_load_balancer(w: &mut World, seed: &LoadBalancerSeed) -> ApiResult<i64> {
    let taken = w.load_balancers.values().map(|lb| lb.name.as_str());
    check_name_and_labels(&seed.name, &seed.labels, taken)?;
    let lb_type = w
        .catalog
        .lb_type(&IdOrName::parse(&seed.load_balancer_type))
        .ok_or_else(|| ApiError::field("load_balancer_type", "load balancer type not found"))?
        .clone();
    let location = match (&seed.location, &seed.network_zone) {
        (Some(_), Some(_)) => {
            return Err(ApiError::field(
                "location",
                "Only one of location and network_zone may be given.",
            ));
        }
        (Some(l), None) => w.catalog.location(&IdOrName::parse(l)),
        (None, Some(z)) => w.catalog.locations.iter().find(|l| l.network_zone == z),
        (None, None) => w.catalog.location(&IdOrName::Name("fsn1".to_string())),
    }
    .ok_or_else(|| ApiError::field("location", "location not found"))?
    .clone();
    if !["round_robin", "least_connections"].contains(&seed.algorithm.as_str()) {
        return Err(ApiError::field(
            "algorithm",
            "Must be one of: round_robin, least_connections.",
        ));
    }
    let mut services = Vec::new();
    for (i, s) in seed.services.iter().enumerate() {
        let svc = service_of(w, i, s)?;
        check_service(w, &svc)?;
        services.push(svc);
    }
    check_services(&services, &lb_type)?;
    let attachment = match &seed.network {
        Some(n) => {
            let network = w.network_id(&to_id_or_name(&n.network)).ok_or_else(|| {
                ApiError::field("network", format!("network {:?} not found", n.network))
            })?;
            let ip =
                n.ip.as_deref()
                    .map(|ip| {
                        ip.parse::<Ipv4Addr>()
                            .map_err(|_| ApiError::field("network.ip", "Not a valid IPv4 address."))
                    })
                    .transpose()?;
            Some((
                network,
                pick_private_ip(w, network, location.network_zone, ip, None)?,
            ))
        }
        None => None,
    };
    let mut lb = LoadBalancer {
        id: 0,
        name: seed.name.clone(),
        labels: seed.labels.clone(),
        created: Utc::now(),
        location: location.id,
        lb_type: lb_type.id,
        algorithm: seed.algorithm.clone(),
        public_enabled: seed.public_interface,
        ipv4_id: None,
        ipv6_id: None,
        ipv4: None,
        ipv4_ptr: None,
        ipv6: None,
        ipv6_ptr: None,
        private_net: attachment.into_iter().collect(),
        services,
        targets: Vec::new(),
        protect_delete: seed.protection.delete,
    };
    let networks: Vec<i64> = lb.private_net.iter().map(|(n, _)| *n).collect();
    for t in &seed.targets {
        let target = target_of(w, t)?;
        check_target(w, &lb, &networks, &lb.targets, &target)?;
        lb.targets.push(target);
    }
    check_target_limit(w, &lb.targets, &lb_type)?;
    let id = w.lb_ids.take();
    lb.id = id;
    w.load_balancers.insert(id, lb);
    assign_public_ips(w, id);
    if let Some(lb) = w.load_balancers.get_mut(&id) {
        if let Some(ptr) = &seed.dns_ptr.ipv4 {
            lb.ipv4_ptr = Some(ptr.clone());
        }
        if let Some(ptr) = &seed.dns_ptr.ipv6 {
            lb.ipv6_ptr = Some(ptr.clone());
        }
    }
    Ok(id)
}

/// Applies a whole seed file: limits, networks, servers, Primary IPs, certificates, then load
/// balancers (which may name all of those).
pub fn apply(w: &mut World, seed: &SeedFile) -> ApiResult<()> {
    if let Some(limits) = &seed.limits {
        crate::limits::apply(w, limits).map_err(|e| prefix(e, "limits"))?;
    }
    for n in &seed.networks {
        apply_network(w, n).map_err(|e| prefix(e, &format!("network {:?}", n.name)))?;
    }
    for s in &seed.servers {
        apply_server(w, s).map_err(|e| prefix(e, &format!("server {:?}", s.name)))?;
    }
    for p in &seed.primary_ips {
        apply_primary_ip(w, p).map_err(|e| prefix(e, &format!("primary IP {:?}", p.name)))?;
    }
    for c in &seed.certificates {
        apply_certificate(w, c).map_err(|e| prefix(e, &format!("certificate {:?}", c.name)))?;
    }
    for lb in &seed.load_balancers {
        apply_load_balancer(w, lb)
            .map_err(|e| prefix(e, &format!("load balancer {:?}", lb.name)))?;
    }
    for r in &seed.robot_servers {
        w.robot
            .add(r)
            .map_err(|e| prefix(e, &format!("robot server {:?}", r.name)))?;
    }
    Ok(())
}

fn prefix(mut e: ApiError, what: &str) -> ApiError {
    e.message = format!("{what}: {}", e.message);
    e
}
