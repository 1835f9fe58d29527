//! The simulator's resources. The simulator keeps its own model of the API, sharing none with
//! the client: it is the independent model the client is tested against.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use chrono::{DateTime, Utc};
use ipnet::{Ipv4Net, Ipv6Net};

use crate::pagination::Sortable;

/// Labels of a resource.
pub type Labels = BTreeMap<String, String>;

/// A location of the catalog.
#[derive(Debug, Clone)]
pub struct Location {
    /// ID.
    pub id: i64,
    /// Name, e.g. `fsn1`.
    pub name: &'static str,
    /// Description.
    pub description: &'static str,
    /// ISO country code.
    pub country: &'static str,
    /// City.
    pub city: &'static str,
    /// Latitude.
    pub latitude: f64,
    /// Longitude.
    pub longitude: f64,
    /// Network zone, e.g. `eu-central`.
    pub network_zone: &'static str,
}

/// A server type of the catalog.
#[derive(Debug, Clone)]
pub struct ServerType {
    /// ID.
    pub id: i64,
    /// Name, e.g. `cx23`.
    pub name: &'static str,
    /// Description.
    pub description: &'static str,
    /// vCPUs.
    pub cores: u32,
    /// Memory in GB.
    pub memory: f64,
    /// Disk in GB.
    pub disk: u32,
    /// `shared` or `dedicated`.
    pub cpu_type: &'static str,
    /// `x86` or `arm`.
    pub architecture: &'static str,
    /// Category shown in the console.
    pub category: &'static str,
    /// Locations where it can be ordered (`available`); the type lists every location of
    /// the catalog, the others with `available: false`.
    pub locations: &'static [&'static str],
    /// Whether it is deprecated.
    pub deprecated: bool,
    /// Monthly net price in EUR.
    pub price_monthly: f64,
}

/// A load balancer type of the catalog.
#[derive(Debug, Clone)]
pub struct LbType {
    /// ID.
    pub id: i64,
    /// Name, e.g. `lb11`.
    pub name: &'static str,
    /// Description.
    pub description: &'static str,
    /// Maximum concurrent connections.
    pub max_connections: u32,
    /// Maximum services.
    pub max_services: usize,
    /// Maximum targets.
    pub max_targets: usize,
    /// Maximum certificates assigned across services.
    pub max_assigned_certificates: usize,
    /// Monthly net price in EUR.
    pub price_monthly: f64,
}

/// A system image.
#[derive(Debug, Clone)]
pub struct Image {
    /// ID.
    pub id: i64,
    /// Name, e.g. `ubuntu-24.04`.
    pub name: &'static str,
    /// Description.
    pub description: &'static str,
    /// OS flavor.
    pub os_flavor: &'static str,
    /// OS version.
    pub os_version: &'static str,
    /// `x86` or `arm`.
    pub architecture: &'static str,
    /// Creation time.
    pub created: DateTime<Utc>,
}

/// Public IPv4 of a server.
#[derive(Debug, Clone)]
pub struct PublicIpv4 {
    /// Primary IP ID.
    pub id: i64,
    /// Address.
    pub ip: Ipv4Addr,
    /// Reverse DNS.
    pub dns_ptr: String,
}

/// Public IPv6 network of a server.
#[derive(Debug, Clone)]
pub struct PublicIpv6 {
    /// Primary IP ID.
    pub id: i64,
    /// The /64.
    pub net: Ipv6Net,
}

/// A server's attachment to a network.
#[derive(Debug, Clone)]
pub struct ServerNet {
    /// Network ID.
    pub network: i64,
    /// Primary private IP.
    pub ip: Ipv4Addr,
    /// Alias IPs.
    pub alias_ips: Vec<Ipv4Addr>,
    /// MAC address.
    pub mac_address: String,
}

/// A server.
#[derive(Debug, Clone)]
pub struct Server {
    /// ID.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Status.
    pub status: String,
    /// Creation time.
    pub created: DateTime<Utc>,
    /// Labels.
    pub labels: Labels,
    /// Location ID.
    pub location: i64,
    /// Server type ID.
    pub server_type: i64,
    /// Image ID.
    pub image: Option<i64>,
    /// Public IPv4.
    pub ipv4: Option<PublicIpv4>,
    /// Public IPv6.
    pub ipv6: Option<PublicIpv6>,
    /// Private networks.
    pub private_net: Vec<ServerNet>,
    /// Delete protection.
    pub protect_delete: bool,
    /// Rebuild protection.
    pub protect_rebuild: bool,
}

/// A subnet.
#[derive(Debug, Clone)]
pub struct Subnet {
    /// `cloud`, `server` or `vswitch`.
    pub kind: String,
    /// Range.
    pub ip_range: Ipv4Net,
    /// Network zone.
    pub network_zone: String,
    /// vSwitch ID for `vswitch` subnets.
    pub vswitch_id: Option<i64>,
}

/// A route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Destination.
    pub destination: Ipv4Net,
    /// Gateway.
    pub gateway: Ipv4Addr,
}

/// A network.
#[derive(Debug, Clone)]
pub struct Network {
    /// ID.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Range.
    pub ip_range: Ipv4Net,
    /// Subnets.
    pub subnets: Vec<Subnet>,
    /// Routes.
    pub routes: Vec<Route>,
    /// Labels.
    pub labels: Labels,
    /// Delete protection.
    pub protect_delete: bool,
    /// Expose routes to the vSwitch.
    pub expose_routes_to_vswitch: bool,
    /// Creation time.
    pub created: DateTime<Utc>,
}

/// HTTP settings of a service.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceHttp {
    /// Sticky session cookie name.
    pub cookie_name: String,
    /// Sticky session cookie lifetime (s).
    pub cookie_lifetime: i64,
    /// Certificate IDs (https).
    pub certificates: Vec<i64>,
    /// Redirect HTTP to HTTPS.
    pub redirect_http: bool,
    /// Sticky sessions.
    pub sticky_sessions: bool,
    /// Idle timeout (s).
    pub timeout_idle: i64,
}

/// HTTP settings of a health check.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthCheckHttp {
    /// Host header.
    pub domain: Option<String>,
    /// Path.
    pub path: String,
    /// Expected response body.
    pub response: Option<String>,
    /// Expected status codes.
    pub status_codes: Vec<String>,
    /// Use TLS.
    pub tls: bool,
}

/// A health check.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthCheck {
    /// `tcp`, `http` or `https`.
    pub protocol: String,
    /// Port.
    pub port: u16,
    /// Interval (s).
    pub interval: i64,
    /// Timeout (s).
    pub timeout: i64,
    /// Retries.
    pub retries: i64,
    /// HTTP settings.
    pub http: Option<HealthCheckHttp>,
}

/// A load balancer service.
#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    /// `tcp`, `http` or `https`.
    pub protocol: String,
    /// Listen port.
    pub listen_port: u16,
    /// Destination port.
    pub destination_port: u16,
    /// PROXY protocol.
    pub proxyprotocol: bool,
    /// HTTP settings (http/https only).
    pub http: Option<ServiceHttp>,
    /// Health check.
    pub health_check: HealthCheck,
}

/// What a target points at.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetKind {
    /// A server by ID.
    Server(i64),
    /// All servers matching a selector.
    LabelSelector(String),
    /// An IP.
    Ip(String),
}

/// A load balancer target.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Kind.
    pub kind: TargetKind,
    /// Reach it over the private network.
    pub use_private_ip: bool,
}

/// A load balancer.
#[derive(Debug, Clone)]
pub struct LoadBalancer {
    /// ID.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: Labels,
    /// Creation time.
    pub created: DateTime<Utc>,
    /// Location ID.
    pub location: i64,
    /// Type ID.
    pub lb_type: i64,
    /// `round_robin` or `least_connections`.
    pub algorithm: String,
    /// Public interface enabled.
    pub public_enabled: bool,
    /// Primary IP holding the public IPv4 (given on create, or allocated when the create
    /// action succeeded).
    pub ipv4_id: Option<i64>,
    /// Primary IP holding the public IPv6.
    pub ipv6_id: Option<i64>,
    /// Public IPv4 (None until the create action succeeded).
    pub ipv4: Option<Ipv4Addr>,
    /// Reverse DNS of the IPv4.
    pub ipv4_ptr: Option<String>,
    /// Public IPv6.
    pub ipv6: Option<Ipv6Addr>,
    /// Reverse DNS of the IPv6.
    pub ipv6_ptr: Option<String>,
    /// Private networks: (network ID, IP).
    pub private_net: Vec<(i64, Ipv4Addr)>,
    /// Services.
    pub services: Vec<Service>,
    /// Targets.
    pub targets: Vec<Target>,
    /// Delete protection.
    pub protect_delete: bool,
}

/// What a Primary IP is assigned to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignee {
    /// A server.
    Server(i64),
    /// A load balancer.
    LoadBalancer(i64),
}

impl Assignee {
    /// (id, `assignee_type`) as the API shows them.
    pub fn parts(self) -> (i64, &'static str) {
        match self {
            Assignee::Server(id) => (id, "server"),
            Assignee::LoadBalancer(id) => (id, "load_balancer"),
        }
    }
}

/// A Primary IP: a public IPv4 address or IPv6 /64 of a location.
#[derive(Debug, Clone)]
pub struct PrimaryIp {
    /// ID.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: Labels,
    /// Creation time.
    pub created: DateTime<Utc>,
    /// The address: an IPv4 address or an IPv6 /64 network.
    pub ip: PrimaryAddr,
    /// Location ID.
    pub location: i64,
    /// What it is assigned to.
    pub assignee: Option<Assignee>,
    /// Deleted together with its assignee.
    pub auto_delete: bool,
    /// Delete protection.
    pub protect_delete: bool,
    /// Reverse DNS of an unassigned address (an assigned one shows its assignee's).
    pub dns_ptr: Option<String>,
}

/// Address of a Primary IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrimaryAddr {
    /// IPv4 address.
    V4(Ipv4Addr),
    /// IPv6 /64.
    V6(Ipv6Net),
}

impl PrimaryAddr {
    /// `ipv4` or `ipv6`.
    pub fn kind(self) -> &'static str {
        match self {
            PrimaryAddr::V4(_) => "ipv4",
            PrimaryAddr::V6(_) => "ipv6",
        }
    }
}

/// Issuance status of a managed certificate.
#[derive(Debug, Clone)]
pub struct CertStatus {
    /// `pending`, `completed` or `failed`.
    pub issuance: String,
    /// `scheduled`, `pending`, `failed` or `unavailable`.
    pub renewal: String,
    /// Error (code, message).
    pub error: Option<(String, String)>,
}

/// A certificate.
#[derive(Debug, Clone)]
pub struct Certificate {
    /// ID.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: Labels,
    /// `uploaded` or `managed`.
    pub kind: String,
    /// PEM certificate (None while a managed one is pending).
    pub certificate: Option<String>,
    /// Domain names.
    pub domain_names: Vec<String>,
    /// SHA-256 style fingerprint.
    pub fingerprint: Option<String>,
    /// Validity start.
    pub not_valid_before: Option<DateTime<Utc>>,
    /// Validity end.
    pub not_valid_after: Option<DateTime<Utc>>,
    /// Creation time.
    pub created: DateTime<Utc>,
    /// Status (managed only).
    pub status: Option<CertStatus>,
}

/// A resource an action refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Res {
    /// Server.
    Server(i64),
    /// Network.
    Network(i64),
    /// Load balancer.
    LoadBalancer(i64),
    /// Certificate.
    Certificate(i64),
}

impl Res {
    /// (id, type) as actions show them.
    pub fn parts(self) -> (i64, &'static str) {
        match self {
            Res::Server(id) => (id, "server"),
            Res::Network(id) => (id, "network"),
            Res::LoadBalancer(id) => (id, "load_balancer"),
            Res::Certificate(id) => (id, "certificate"),
        }
    }
}

/// An action.
#[derive(Debug, Clone)]
pub struct Action {
    /// ID.
    pub id: i64,
    /// Command, e.g. `create_server`.
    pub command: String,
    /// `running`, `success` or `error`.
    pub status: String,
    /// 0..=100.
    pub progress: u8,
    /// Start time.
    pub started: DateTime<Utc>,
    /// End time.
    pub finished: Option<DateTime<Utc>>,
    /// Resources.
    pub resources: Vec<Res>,
    /// Error (code, message).
    pub error: Option<(String, String)>,
}

/// A resource of the project with its own name and labels (servers, networks, load
/// balancers, certificates, Primary IPs): what the list filters read and `PUT` changes.
pub trait Labelled: Sortable {
    /// Labels.
    fn labels(&self) -> &Labels;
    /// Name and labels, to change.
    fn name_and_labels_mut(&mut self) -> (&mut String, &mut Labels);
}

macro_rules! resource {
    ($t:ty) => {
        impl Sortable for $t {
            fn sort_id(&self) -> i64 {
                self.id
            }
            fn sort_name(&self) -> &str {
                &self.name
            }
            fn sort_created(&self) -> DateTime<Utc> {
                self.created
            }
        }
        impl Labelled for $t {
            fn labels(&self) -> &Labels {
                &self.labels
            }
            fn name_and_labels_mut(&mut self) -> (&mut String, &mut Labels) {
                (&mut self.name, &mut self.labels)
            }
        }
    };
}
resource!(Server);
resource!(Network);
resource!(LoadBalancer);
resource!(Certificate);
resource!(PrimaryIp);

impl Sortable for Image {
    fn sort_id(&self) -> i64 {
        self.id
    }
    fn sort_name(&self) -> &str {
        self.name
    }
    fn sort_created(&self) -> DateTime<Utc> {
        self.created
    }
}
