//! Seeds: resources created directly (no actions), from a seed file, the admin API or Rust.
//! This module holds the seed types and their builders; [`apply()`] and its
//! helpers create what they describe.

mod apply;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::limits::LimitsSeed;

pub use apply::{
    apply, apply_certificate, apply_load_balancer, apply_network, apply_primary_ip, apply_server,
};

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
    setters! {
        /// Server type.
        server_type(into String);
        /// Location.
        location(into String);
        /// Image.
        image(into String);
    }
    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
    setters! {
        /// Replaces the labels.
        labels(BTreeMap<String, String>);
        /// Status (`running`, `off`, ...).
        status(into String);
        /// Public IPv4 on/off.
        public_ipv4(bool);
        /// Public IPv6 on/off.
        public_ipv6(bool);
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
    setters! {
        /// Type.
        load_balancer_type(into String);
        /// Location.
        location(Some into String);
        /// Network zone instead of a location.
        network_zone(Some into String);
    }
    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
    setters! {
        /// Algorithm.
        algorithm(into String);
        /// Public interface on/off.
        public_interface(bool);
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
