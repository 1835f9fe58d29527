//! Servers and server types.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::common::{Architecture, Deprecation, Labels, null_default};
use super::location::Location;
use crate::macros::string_enum;

string_enum! {
    /// Lifecycle status of a server.
    pub enum ServerStatus {
        Initializing = "initializing",
        Starting = "starting",
        Running = "running",
        Stopping = "stopping",
        Off = "off",
        Deleting = "deleting",
        Migrating = "migrating",
        Rebuilding = "rebuilding",
        /// The API itself reports `unknown`.
        StatusUnknown = "unknown",
    }
}

/// A cloud server. Zone and region come from [`Server::location`]; the API no longer sends
/// a data centre.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Server {
    /// ID of the server.
    pub id: i64,
    /// Name of the server, unique per project.
    pub name: String,
    /// Current status.
    pub status: ServerStatus,
    /// Point in time the server was created.
    #[serde(default)]
    pub created: DateTime<Utc>,
    /// User-defined labels.
    #[serde(default, deserialize_with = "null_default")]
    pub labels: Labels,
    /// True while an action locks the server.
    #[serde(default, deserialize_with = "null_default")]
    pub locked: bool,
    /// Protection flags.
    #[serde(default, deserialize_with = "null_default")]
    pub protection: ServerProtection,
    /// Type (size) of the server.
    pub server_type: ServerType,
    /// Location the server runs in.
    pub location: Location,
    /// Public network configuration.
    #[serde(default, deserialize_with = "null_default")]
    pub public_net: ServerPublicNet,
    /// Attachments to private networks.
    #[serde(default, deserialize_with = "null_default")]
    pub private_net: Vec<ServerPrivateNet>,
    /// IDs of load balancers targeting this server directly.
    #[serde(default, deserialize_with = "null_default")]
    pub load_balancers: Vec<i64>,
}

/// Protection flags of a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerProtection {
    /// The server cannot be deleted.
    #[serde(default, deserialize_with = "null_default")]
    pub delete: bool,
    /// The server cannot be rebuilt.
    #[serde(default, deserialize_with = "null_default")]
    pub rebuild: bool,
}

/// A server type (e.g. `cpx22`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerType {
    /// ID of the server type.
    pub id: i64,
    /// Unique name, e.g. `cpx22`; used as the node's instance type.
    pub name: String,
    /// Human readable description.
    #[serde(default, deserialize_with = "null_default")]
    pub description: String,
    /// Number of CPU cores.
    #[serde(default, deserialize_with = "null_default")]
    pub cores: u32,
    /// Memory in GB.
    #[serde(default, deserialize_with = "null_default")]
    pub memory: f64,
    /// Disk size in GB.
    #[serde(default, deserialize_with = "null_default")]
    pub disk: f64,
    /// CPU architecture.
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// `shared` or `dedicated`.
    #[serde(default)]
    pub cpu_type: Option<String>,
    /// `local` or `network`.
    #[serde(default)]
    pub storage_type: Option<String>,
    /// Category, e.g. `regular_purpose`.
    #[serde(default)]
    pub category: Option<String>,
    /// Whether the type is deprecated (older field).
    #[serde(default)]
    pub deprecated: Option<bool>,
    /// Deprecation details, if deprecated.
    #[serde(default)]
    pub deprecation: Option<Deprecation>,
    /// The locations the type is offered in, with whether it can be ordered there.
    #[serde(default, deserialize_with = "null_default")]
    pub locations: Vec<ServerTypeLocation>,
}

impl ServerType {
    /// The entry of `location` (by name), if the type lists it.
    pub fn location(&self, location: &str) -> Option<&ServerTypeLocation> {
        self.locations.iter().find(|l| l.name == location)
    }

    /// Whether the type can be ordered in `location` (by name): listed there, and
    /// `available` there.
    pub fn available_in(&self, location: &str) -> bool {
        self.location(location).is_some_and(|l| l.available)
    }
}

/// One location of a server type (`server_type.locations[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerTypeLocation {
    /// ID of the location.
    pub id: i64,
    /// Name of the location, e.g. `fsn1`.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// Deprecation of the type in this location, if any.
    #[serde(default)]
    pub deprecation: Option<Deprecation>,
    /// Whether the type can be ordered in this location (since April 2026). An answer
    /// without the field predates it: a listed location counted as orderable, so absent or
    /// `null` reads `true`.
    #[serde(default = "yes", deserialize_with = "null_true")]
    pub available: bool,
    /// Whether Hetzner recommends the type in this location (since April 2026); absent or
    /// `null` reads `false`.
    #[serde(default, deserialize_with = "null_default")]
    pub recommended: bool,
}

fn yes() -> bool {
    true
}

fn null_true<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(deserializer)?.unwrap_or(true))
}

/// Public network configuration of a server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerPublicNet {
    /// Primary public IPv4, if any.
    #[serde(default)]
    pub ipv4: Option<Ipv4>,
    /// Primary public IPv6 network, if any.
    #[serde(default)]
    pub ipv6: Option<Ipv6>,
    /// IDs of floating IPs assigned to the server.
    #[serde(default, deserialize_with = "null_default")]
    pub floating_ips: Vec<i64>,
    /// Firewalls applied to the public interface.
    #[serde(default, deserialize_with = "null_default")]
    pub firewalls: Vec<ServerFirewall>,
}

/// A firewall applied to a server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerFirewall {
    /// ID of the firewall.
    pub id: i64,
    /// `applied` or `pending`.
    #[serde(default, deserialize_with = "null_default")]
    pub status: String,
}

/// A public IPv4 address of a server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ipv4 {
    /// ID of the primary IP, when the API sends one.
    #[serde(default)]
    pub id: Option<i64>,
    /// The address, e.g. `1.2.3.4`.
    pub ip: String,
    /// Whether the address is blocked.
    #[serde(default, deserialize_with = "null_default")]
    pub blocked: bool,
    /// Reverse DNS entry.
    #[serde(default)]
    pub dns_ptr: Option<String>,
}

/// The public IPv6 network of a server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ipv6 {
    /// ID of the primary IP, when the API sends one.
    #[serde(default)]
    pub id: Option<i64>,
    /// The network in CIDR notation, e.g. `2001:db8::/64`.
    pub ip: String,
    /// Whether the network is blocked.
    #[serde(default, deserialize_with = "null_default")]
    pub blocked: bool,
    /// Reverse DNS entries of addresses in the network.
    #[serde(default, deserialize_with = "null_default")]
    pub dns_ptr: Vec<DnsPtr>,
}

/// A reverse DNS entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsPtr {
    /// The address.
    pub ip: String,
    /// The host name it points to.
    pub dns_ptr: String,
}

/// A server's attachment to a private network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerPrivateNet {
    /// ID of the network.
    pub network: i64,
    /// The server's primary IP in the network.
    #[serde(default, deserialize_with = "null_default")]
    pub ip: String,
    /// Additional IPs of the server in the network.
    #[serde(default, deserialize_with = "null_default")]
    pub alias_ips: Vec<String>,
    /// MAC address of the interface.
    #[serde(default, deserialize_with = "null_default")]
    pub mac_address: String,
}
