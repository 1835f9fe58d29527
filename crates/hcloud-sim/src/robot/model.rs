//! Dedicated servers as the Robot webservice knows them, their seeds and their JSON.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::ipalloc::{robot_ipv4, robot_ipv6_net};

/// The power states `GET /reset/{number}` reports as `operating_status`. Only `shut off`
/// means powered off.
pub const OPERATING_STATUSES: [&str; 4] = ["running", "shut off", "shut down", "not supported"];

/// The first server number handed out (numbers are far from the Cloud server IDs, which
/// start at 10001; a seed may pick any number, also a colliding one).
pub const FIRST_SERVER_NUMBER: u64 = 1_000_001;

/// A dedicated server to seed (seed file `robot_servers`, `POST /_admin/robot/servers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RobotServerSeed {
    /// Server number; the next free one from 1000001 when absent.
    pub server_number: Option<u64>,
    /// Server name (a Node of this name is this server).
    pub name: String,
    /// Product (default `EX44`).
    pub product: String,
    /// Data centre (default `FSN1-DC14`).
    pub dc: String,
    /// Main IPv4; allocated from 203.0.113.101–254 when absent, none (`null`) when empty.
    pub server_ip: Option<String>,
    /// Main IPv6 network, e.g. `2a01:4f8:111:4221::`; allocated when absent, none when empty.
    pub server_ipv6_net: Option<String>,
    /// Power state (default `running`; see [`OPERATING_STATUSES`]).
    pub operating_status: String,
    /// Order status: `ready` (default) or `in process`.
    pub status: String,
    /// Cancelled (default false).
    pub cancelled: bool,
}

impl Default for RobotServerSeed {
    fn default() -> Self {
        RobotServerSeed {
            server_number: None,
            name: String::new(),
            product: "EX44".to_string(),
            dc: "FSN1-DC14".to_string(),
            server_ip: None,
            server_ipv6_net: None,
            operating_status: "running".to_string(),
            status: "ready".to_string(),
            cancelled: false,
        }
    }
}

impl RobotServerSeed {
    /// A running EX44 in FSN1-DC14 with allocated addresses.
    pub fn new(name: impl Into<String>) -> Self {
        RobotServerSeed {
            name: name.into(),
            ..RobotServerSeed::default()
        }
    }
    setters! {
        /// Server number.
        number(Some u64) => server_number;
        /// Product, e.g. `Server Auction`.
        product(into String);
        /// Data centre, e.g. `HEL1-DC5`.
        dc(into String);
        /// Main IPv4 (`""`: none).
        server_ip(Some into String);
        /// Main IPv6 network (`""`: none).
        server_ipv6_net(Some into String);
        /// Power state.
        operating_status(into String);
    }
    /// Powered off (`shut off`).
    pub fn powered_off(self) -> Self {
        self.operating_status("shut off")
    }
}

/// A dedicated server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotServer {
    /// Server number.
    pub number: u64,
    /// Name.
    pub name: String,
    /// Product.
    pub product: String,
    /// Data centre.
    pub dc: String,
    /// Main IPv4.
    pub ip: Option<Ipv4Addr>,
    /// Main IPv6 network (`2001:db8:ffee:1::`).
    pub ipv6_net: Option<String>,
    /// Power state.
    pub operating_status: String,
    /// Order status.
    pub status: String,
    /// Cancelled.
    pub cancelled: bool,
}

/// Every dedicated server of the Robot account.
#[derive(Debug, Clone, Default)]
pub struct RobotWorld {
    /// Servers by number.
    pub servers: BTreeMap<u64, RobotServer>,
    ipv4_seq: u32,
    ipv6_seq: u32,
}

/// Checks a power state.
pub fn check_operating_status(status: &str) -> ApiResult<()> {
    if OPERATING_STATUSES.contains(&status) {
        Ok(())
    } else {
        Err(ApiError::field(
            "operating_status",
            format!("must be one of: {}", OPERATING_STATUSES.join(", ")),
        ))
    }
}

impl RobotWorld {
    /// Adds a server; returns its number.
    pub fn add(&mut self, seed: &RobotServerSeed) -> ApiResult<u64> {
        check_operating_status(&seed.operating_status)?;
        if !["ready", "in process"].contains(&seed.status.as_str()) {
            return Err(ApiError::field("status", "must be ready or in process"));
        }
        let number = match seed.server_number {
            Some(0) => return Err(ApiError::field("server_number", "must be positive")),
            Some(n) if self.servers.contains_key(&n) => {
                return Err(ApiError::field(
                    "server_number",
                    format!("server {n} already exists"),
                ));
            }
            Some(n) => n,
            None => self.next_number(),
        };
        let taken = |ip: Ipv4Addr| self.servers.values().any(|s| s.ip == Some(ip));
        let ip = match seed.server_ip.as_deref() {
            Some("") => None,
            Some(text) => {
                let ip = text
                    .parse::<Ipv4Addr>()
                    .map_err(|_| ApiError::field("server_ip", "not an IPv4 address"))?;
                if taken(ip) {
                    return Err(ApiError::field(
                        "server_ip",
                        format!("{ip} belongs to another server"),
                    ));
                }
                Some(ip)
            }
            None => loop {
                let ip = robot_ipv4(self.ipv4_seq).ok_or_else(|| {
                    ApiError::field("server_ip", "no free address left; give one")
                })?;
                self.ipv4_seq += 1;
                if !taken(ip) {
                    break Some(ip);
                }
            },
        };
        let ipv6_net = match seed.server_ipv6_net.as_deref() {
            Some("") => None,
            Some(text) => {
                text.parse::<Ipv6Addr>()
                    .map_err(|_| ApiError::field("server_ipv6_net", "not an IPv6 network"))?;
                Some(text.to_string())
            }
            None => {
                self.ipv6_seq += 1;
                Some(robot_ipv6_net(self.ipv6_seq - 1))
            }
        };
        self.servers.insert(
            number,
            RobotServer {
                number,
                name: seed.name.clone(),
                product: seed.product.clone(),
                dc: seed.dc.clone(),
                ip,
                ipv6_net,
                operating_status: seed.operating_status.clone(),
                status: seed.status.clone(),
                cancelled: seed.cancelled,
            },
        );
        Ok(number)
    }

    fn next_number(&self) -> u64 {
        self.servers
            .keys()
            .next_back()
            .map_or(FIRST_SERVER_NUMBER, |last| {
                (last + 1).max(FIRST_SERVER_NUMBER)
            })
    }

    /// The server of this number, or the admin API's 404.
    pub fn get_mut(&mut self, number: u64) -> ApiResult<&mut RobotServer> {
        self.servers
            .get_mut(&number)
            .ok_or_else(|| ApiError::not_found("robot server"))
    }
}

fn ip_text(s: &RobotServer) -> Value {
    s.ip.map_or(Value::Null, |ip| Value::String(ip.to_string()))
}

/// A server as `GET /server` lists it (the object inside `{"server": …}`).
pub fn render_server(s: &RobotServer) -> Value {
    let subnets: Vec<Value> = s
        .ipv6_net
        .iter()
        .map(|net| json!({"ip": net, "mask": "64"}))
        .collect();
    json!({
        "server_ip": ip_text(s),
        "server_ipv6_net": s.ipv6_net,
        "server_number": s.number,
        "server_name": s.name,
        "product": s.product,
        "dc": s.dc,
        "traffic": "unlimited",
        "status": s.status,
        "cancelled": s.cancelled,
        "paid_until": "2030-12-31",
        "ip": s.ip.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "subnet": if subnets.is_empty() { Value::Null } else { Value::Array(subnets) },
    })
}

/// A server as `GET /server/{number}` shows it: the list fields plus the service flags.
pub fn render_server_detail(s: &RobotServer) -> Value {
    let mut v = render_server(s);
    if let Some(obj) = v.as_object_mut() {
        for flag in ["reset", "rescue", "vnc", "wol", "hot_swap"] {
            obj.insert(flag.to_string(), Value::Bool(true));
        }
        for flag in ["windows", "plesk", "cpanel"] {
            obj.insert(flag.to_string(), Value::Bool(false));
        }
        obj.insert("linked_storagebox".to_string(), Value::Null);
    }
    v
}

/// The reset object of `GET /reset/{number}` (inside `{"reset": …}`).
pub fn render_reset(s: &RobotServer) -> Value {
    json!({
        "server_ip": ip_text(s),
        "server_ipv6_net": s.ipv6_net,
        "server_number": s.number,
        "type": ["sw", "hw", "man", "power", "power_long"],
        "operating_status": s.operating_status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_get_numbers_and_addresses() {
        let mut w = RobotWorld::default();
        let a = w.add(&RobotServerSeed::new("a")).unwrap();
        let b = w.add(&RobotServerSeed::new("b").server_ip("")).unwrap();
        assert_eq!((a, b), (FIRST_SERVER_NUMBER, FIRST_SERVER_NUMBER + 1));
        assert_eq!(
            render_server(&w.servers[&a])["server_ip"],
            json!("203.0.113.101")
        );
        assert_eq!(render_server(&w.servers[&b])["server_ip"], Value::Null);
        assert_eq!(
            render_server(&w.servers[&b])["server_ipv6_net"],
            json!("2001:db8:ffee:2::")
        );
        // An address a seed took is skipped; a second seed cannot take it again.
        let c = w
            .add(&RobotServerSeed::new("c").server_ip("203.0.113.102"))
            .unwrap();
        let d = w.add(&RobotServerSeed::new("d")).unwrap();
        assert_eq!(w.servers[&c].ip, Some(Ipv4Addr::new(203, 0, 113, 102)));
        assert_eq!(w.servers[&d].ip, Some(Ipv4Addr::new(203, 0, 113, 103)));
        let twice = w
            .add(&RobotServerSeed::new("e").server_ip("203.0.113.103"))
            .unwrap_err();
        assert!(twice.message.contains("server_ip"), "{twice:?}");
        let taken = w.add(&RobotServerSeed::new("c").number(a)).unwrap_err();
        assert!(taken.message.contains("server_number"), "{taken:?}");
        let bad = w
            .add(&RobotServerSeed::new("d").operating_status("off"))
            .unwrap_err();
        assert!(bad.message.contains("operating_status"), "{bad:?}");
        assert_eq!(
            render_reset(&w.servers[&a])["operating_status"],
            json!("running")
        );
    }
}
