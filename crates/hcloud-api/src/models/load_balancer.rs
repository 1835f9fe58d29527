//! Load balancers, their services, targets and types.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::action::Action;
use super::common::{Deprecation, Labels, Protection, ResourceId, null_default};
use super::location::Location;
use crate::macros::string_enum;

string_enum! {
    /// Algorithm distributing connections over targets.
    pub enum AlgorithmType {
        RoundRobin = "round_robin",
        LeastConnections = "least_connections",
    }
}

string_enum! {
    /// Protocol of a load balancer service.
    pub enum ServiceProtocol {
        Tcp = "tcp",
        Http = "http",
        Https = "https",
    }
}

string_enum! {
    /// Protocol of a health check: the values of [`ServiceProtocol`], but another field of the
    /// API (whose schema allows only `tcp` and `http` here).
    pub enum HealthCheckProtocol {
        Tcp = "tcp",
        Http = "http",
        Https = "https",
    }
}

string_enum! {
    /// Kind of a load balancer target.
    pub enum TargetType {
        Server = "server",
        LabelSelector = "label_selector",
        Ip = "ip",
    }
}

string_enum! {
    /// Health of a target for one service.
    pub enum HealthStatusValue {
        Healthy = "healthy",
        Unhealthy = "unhealthy",
        /// The API itself reports `unknown`.
        StatusUnknown = "unknown",
    }
}

/// A load balancer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadBalancer {
    /// ID of the load balancer.
    pub id: i64,
    /// Name, unique per project.
    pub name: String,
    /// User-defined labels.
    #[serde(default, deserialize_with = "null_default")]
    pub labels: Labels,
    /// Protection flags.
    #[serde(default, deserialize_with = "null_default")]
    pub protection: Protection,
    /// Point in time the load balancer was created.
    #[serde(default)]
    pub created: DateTime<Utc>,
    /// Location of the load balancer.
    pub location: Location,
    /// Type (size) of the load balancer.
    pub load_balancer_type: LoadBalancerType,
    /// Balancing algorithm.
    #[serde(default, deserialize_with = "null_default")]
    pub algorithm: Algorithm,
    /// Public interface.
    #[serde(default, deserialize_with = "null_default")]
    pub public_net: LoadBalancerPublicNet,
    /// Attachments to private networks.
    #[serde(default, deserialize_with = "null_default")]
    pub private_net: Vec<LoadBalancerPrivateNet>,
    /// Services (listeners).
    #[serde(default, deserialize_with = "null_default")]
    pub services: Vec<LoadBalancerService>,
    /// Targets.
    #[serde(default, deserialize_with = "null_default")]
    pub targets: Vec<LoadBalancerTarget>,
    /// Free traffic per month in bytes.
    #[serde(default)]
    pub included_traffic: Option<u64>,
    /// Inbound traffic of the current billing period in bytes.
    #[serde(default)]
    pub ingoing_traffic: Option<u64>,
    /// Outbound traffic of the current billing period in bytes.
    #[serde(default)]
    pub outgoing_traffic: Option<u64>,
}

/// A load balancer type (e.g. `lb11`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerType {
    /// ID of the type.
    pub id: i64,
    /// Unique name, e.g. `lb11`.
    pub name: String,
    /// Human readable description.
    #[serde(default, deserialize_with = "null_default")]
    pub description: String,
    /// Maximum number of simultaneous open connections.
    #[serde(default, deserialize_with = "null_default")]
    pub max_connections: u64,
    /// Maximum number of services.
    #[serde(default, deserialize_with = "null_default")]
    pub max_services: u32,
    /// Maximum number of targets.
    #[serde(default, deserialize_with = "null_default")]
    pub max_targets: u32,
    /// Maximum number of certificates assigned over all services.
    #[serde(default, deserialize_with = "null_default")]
    pub max_assigned_certificates: u32,
    /// Point in time the type was deprecated (older field).
    #[serde(default)]
    pub deprecated: Option<String>,
    /// Deprecation details, if deprecated.
    #[serde(default)]
    pub deprecation: Option<Deprecation>,
}

/// The balancing algorithm.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Algorithm {
    /// Algorithm type.
    #[serde(rename = "type")]
    pub kind: AlgorithmType,
}

impl Algorithm {
    /// An algorithm of the given type.
    pub fn new(kind: AlgorithmType) -> Self {
        Self { kind }
    }
}

/// Public interface of a load balancer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerPublicNet {
    /// Whether the public interface is enabled.
    #[serde(default, deserialize_with = "null_default")]
    pub enabled: bool,
    /// Public IPv4 (its `ip` is `None` until creation finished).
    #[serde(default, deserialize_with = "null_default")]
    pub ipv4: LoadBalancerIp,
    /// Public IPv6 (its `ip` is `None` until creation finished).
    #[serde(default, deserialize_with = "null_default")]
    pub ipv6: LoadBalancerIp,
}

/// A public address of a load balancer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerIp {
    /// ID of the Primary IP holding the address (sent since October 2026).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// The address.
    #[serde(default)]
    pub ip: Option<String>,
    /// Reverse DNS entry.
    #[serde(default)]
    pub dns_ptr: Option<String>,
}

/// A load balancer's attachment to a private network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerPrivateNet {
    /// ID of the network.
    pub network: i64,
    /// The load balancer's IP in the network.
    #[serde(default, deserialize_with = "null_default")]
    pub ip: String,
}

/// A service (listener) of a load balancer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerService {
    /// Protocol.
    pub protocol: ServiceProtocol,
    /// Port the load balancer listens on; the key of the service.
    pub listen_port: u16,
    /// Port traffic is forwarded to on the targets.
    pub destination_port: u16,
    /// Whether the PROXY protocol is spoken to the targets.
    #[serde(default, deserialize_with = "null_default")]
    pub proxyprotocol: bool,
    /// HTTP settings (http/https services).
    #[serde(default)]
    pub http: Option<ServiceHttp>,
    /// Health check.
    #[serde(default)]
    pub health_check: Option<HealthCheck>,
}

/// HTTP settings of a service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceHttp {
    /// Name of the sticky-session cookie.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie_name: Option<String>,
    /// Lifetime of the sticky-session cookie in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie_lifetime: Option<u32>,
    /// IDs of certificates (https only).
    #[serde(default, deserialize_with = "null_default")]
    pub certificates: Vec<i64>,
    /// Redirect plain HTTP to HTTPS.
    #[serde(default, deserialize_with = "null_default")]
    pub redirect_http: bool,
    /// Sticky sessions.
    #[serde(default, deserialize_with = "null_default")]
    pub sticky_sessions: bool,
    /// Idle timeout in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_idle: Option<u32>,
}

/// Health check of a service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthCheck {
    /// Protocol.
    pub protocol: HealthCheckProtocol,
    /// Port checked on the targets.
    pub port: u16,
    /// Interval in seconds.
    pub interval: u32,
    /// Timeout in seconds.
    pub timeout: u32,
    /// Failed checks before a target counts as unhealthy.
    pub retries: u32,
    /// HTTP settings (http/https checks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HealthCheckHttp>,
}

/// HTTP settings of a health check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthCheckHttp {
    /// Host header sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Request path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Expected response body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// Accepted status codes, e.g. `2??`.
    #[serde(default, deserialize_with = "null_default")]
    pub status_codes: Vec<String>,
    /// Whether the certificate is validated (https checks).
    #[serde(default, deserialize_with = "null_default")]
    pub tls: bool,
}

/// A target of a load balancer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerTarget {
    /// Kind of target.
    #[serde(rename = "type")]
    pub kind: TargetType,
    /// The server (server targets).
    #[serde(default)]
    pub server: Option<ResourceId>,
    /// The selector (label selector targets).
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    /// The address (IP targets).
    #[serde(default)]
    pub ip: Option<TargetIp>,
    /// Whether traffic goes over the private network.
    #[serde(default, deserialize_with = "null_default")]
    pub use_private_ip: bool,
    /// Health per service.
    #[serde(default, deserialize_with = "null_default")]
    pub health_status: Vec<HealthStatus>,
    /// Servers matched by a label selector target.
    #[serde(default, deserialize_with = "null_default")]
    pub targets: Vec<LoadBalancerTarget>,
}

/// A label selector (`{"selector": "k=v"}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelSelector {
    /// The selector expression.
    pub selector: String,
}

/// An IP target address (`{"ip": "203.0.113.1"}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetIp {
    /// The address.
    pub ip: String,
}

/// Health of a target for one service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthStatus {
    /// Listen port of the service.
    pub listen_port: u16,
    /// Health.
    pub status: HealthStatusValue,
}

// ---------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------

/// Body of `POST /load_balancers`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CreateLoadBalancerRequest {
    /// Name of the load balancer.
    pub name: String,
    /// Type, by ID or name (e.g. `lb11`).
    pub load_balancer_type: String,
    /// Location by ID or name; mutually exclusive with `network_zone`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Network zone; mutually exclusive with `location`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_zone: Option<String>,
    /// Balancing algorithm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<Algorithm>,
    /// Services to create.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceSpec>,
    /// Targets to add.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetSpec>,
    /// Labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
    /// Whether the public interface is enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_interface: Option<bool>,
    /// Network to attach to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<i64>,
    /// Existing Primary IPs to use; `None` (or an unset address) allocates new ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_net: Option<CreateLoadBalancerPublicNet>,
}

/// `public_net` of `POST /load_balancers`: IDs of existing, unassigned Primary IPs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CreateLoadBalancerPublicNet {
    /// Primary IP (IPv4) to use; `None` allocates a new one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<i64>,
    /// Primary IP (IPv6) to use; `None` allocates a new one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<i64>,
}

/// Answer of `POST /load_balancers`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CreateLoadBalancerResponse {
    /// The new load balancer (public IPs are `None` until `action` succeeded).
    pub load_balancer: LoadBalancer,
    /// The create action.
    pub action: Action,
}

/// Body of `PUT /load_balancers/{id}` and `PUT /certificates/{id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateRequest {
    /// New name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// New labels (replaces the whole map).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
}

/// A full service definition, for `add_service` and create.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServiceSpec {
    /// Protocol.
    pub protocol: ServiceProtocol,
    /// Listen port.
    pub listen_port: u16,
    /// Destination port on the targets.
    pub destination_port: u16,
    /// PROXY protocol.
    pub proxyprotocol: bool,
    /// HTTP settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<ServiceHttp>,
    /// Health check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
}

/// A partial service update for `update_service`; unset fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServiceUpdate {
    /// Listen port: selects the service to update.
    pub listen_port: u16,
    /// New protocol.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ServiceProtocol>,
    /// New destination port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_port: Option<u16>,
    /// New PROXY protocol flag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxyprotocol: Option<bool>,
    /// New HTTP settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<ServiceHttp>,
    /// New health check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
}

/// A target for `add_target`, `remove_target` and create.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TargetSpec {
    /// Kind of target.
    #[serde(rename = "type")]
    pub kind: TargetType,
    /// The server (server targets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ResourceId>,
    /// The selector (label selector targets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// The address (IP targets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<TargetIp>,
    /// Use the private network (not sent by `remove_target`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_private_ip: Option<bool>,
}

impl TargetSpec {
    /// A server target.
    pub fn server(id: i64, use_private_ip: bool) -> Self {
        Self {
            kind: TargetType::Server,
            server: Some(ResourceId { id }),
            use_private_ip: Some(use_private_ip),
            ..Self::default()
        }
    }

    /// An IP target.
    pub fn ip(ip: impl Into<String>) -> Self {
        Self {
            kind: TargetType::Ip,
            ip: Some(TargetIp { ip: ip.into() }),
            ..Self::default()
        }
    }

    /// A label selector target.
    pub fn label_selector(selector: impl Into<String>, use_private_ip: bool) -> Self {
        Self {
            kind: TargetType::LabelSelector,
            label_selector: Some(LabelSelector {
                selector: selector.into(),
            }),
            use_private_ip: Some(use_private_ip),
            ..Self::default()
        }
    }
}

/// Body of `attach_to_network`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AttachToNetworkRequest {
    /// ID of the network.
    pub network: i64,
    /// Fixed IP in the network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// Subnet to pick the IP from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_range: Option<String>,
}

/// Body of `change_dns_ptr`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ChangeDnsPtrRequest {
    /// Public IP of the load balancer.
    pub ip: String,
    /// Host name; `None` resets to the default.
    pub dns_ptr: Option<String>,
}
