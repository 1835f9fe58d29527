//! Private networks and their routes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::common::{Labels, NetworkZone, Protection, null_default};
use crate::macros::string_enum;

string_enum! {
    /// Type of a subnet.
    pub enum SubnetType {
        Cloud = "cloud",
        /// Older name of `cloud`.
        Server = "server",
        Vswitch = "vswitch",
    }
}

/// A private network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// ID of the network.
    pub id: i64,
    /// Name, unique per project.
    pub name: String,
    /// IP range of the whole network (CIDR).
    pub ip_range: String,
    /// Subnets.
    #[serde(default, deserialize_with = "null_default")]
    pub subnets: Vec<Subnet>,
    /// Routes.
    #[serde(default, deserialize_with = "null_default")]
    pub routes: Vec<Route>,
    /// IDs of attached servers.
    #[serde(default, deserialize_with = "null_default")]
    pub servers: Vec<i64>,
    /// IDs of attached load balancers.
    #[serde(default, deserialize_with = "null_default")]
    pub load_balancers: Vec<i64>,
    /// User-defined labels.
    #[serde(default, deserialize_with = "null_default")]
    pub labels: Labels,
    /// Protection flags.
    #[serde(default, deserialize_with = "null_default")]
    pub protection: Protection,
    /// Point in time the network was created.
    #[serde(default)]
    pub created: DateTime<Utc>,
    /// Whether routes are exported to a vSwitch connection.
    #[serde(default, deserialize_with = "null_default")]
    pub expose_routes_to_vswitch: bool,
}

/// A subnet of a network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subnet {
    /// Type of the subnet.
    #[serde(rename = "type")]
    pub kind: SubnetType,
    /// IP range (CIDR).
    #[serde(default)]
    pub ip_range: Option<String>,
    /// Network zone of the subnet.
    pub network_zone: NetworkZone,
    /// Gateway of the subnet.
    #[serde(default)]
    pub gateway: Option<String>,
    /// ID of the connected vSwitch (vswitch subnets only).
    #[serde(default)]
    pub vswitch_id: Option<i64>,
}

/// A route of a network: traffic for `destination` goes to `gateway`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Route {
    /// Destination network (CIDR).
    pub destination: String,
    /// Gateway IP inside the network.
    pub gateway: String,
}

impl Route {
    /// A route for `destination` via `gateway`.
    pub fn new(destination: impl Into<String>, gateway: impl Into<String>) -> Self {
        Self {
            destination: destination.into(),
            gateway: gateway.into(),
        }
    }
}
