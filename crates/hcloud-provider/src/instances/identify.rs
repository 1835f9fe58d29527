//! Which server is a Node's, decided purely from what the caches hold.
//!
//! - A providerID is trusted: the server it names is the Node's (cloud server `hcloud://ID`,
//!   Robot server `hrobot://N` or `hcloud://bm-N`), also when the kubelet set it
//!   (`--provider-id`) and the server's name is not the Node's. That difference is a
//!   [`NODE_NAME_MISMATCH`] Warning of the Node's initialisation ([`name_mismatch`]), never a
//!   failure.
//! - A Node without a providerID is its server's by name (cloud, then Robot, as upstream),
//!   else by an InternalIP of its `status.addresses` that is the private network IP of exactly
//!   one cloud server (in the configured network, when there is one) or the `server_ip` of
//!   exactly one Robot server ([`match_internal_ip`]). No server, or several, leave it
//!   uninitialised with a [`NO_MATCHING_SERVER`] or [`SEVERAL_MATCHING_SERVERS`] Warning that
//!   names the addresses and the servers. The lists are the caches' (the server listing, the
//!   Robot list): no request is made for one Node.

use std::net::IpAddr;
use std::sync::Arc;

use cloud_provider::change::Warning;
use cloud_provider::well_known::address_type::INTERNAL_IP;
use hcloud_api::models::Server;
use hcloud_api::robot::RobotServer;
use k8s_openapi::api::core::v1::Node;

use crate::provider_id::ProviderId;

/// Warning reason: the server of a Node's providerID is named otherwise than the Node.
pub const NODE_NAME_MISMATCH: &str = "NodeNameMismatch";
/// Warning reason: no server has the name or an InternalIP of a Node without a providerID.
pub const NO_MATCHING_SERVER: &str = "NoMatchingServer";
/// Warning reason: the InternalIPs of a Node without a providerID are several servers'.
pub const SEVERAL_MATCHING_SERVERS: &str = "SeveralMatchingServers";

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// The [`NODE_NAME_MISMATCH`] Warning when the server `provider_id` names is called
/// `server_name` and the Node otherwise; `None` when the names are equal.
pub fn name_mismatch(node: &Node, provider_id: ProviderId, server_name: &str) -> Option<Warning> {
    let name = node_name(node);
    if server_name == name {
        return None;
    }
    let server = match provider_id {
        ProviderId::Cloud(id) => format!("the cloud server {id}"),
        ProviderId::Robot(number) => format!("the Robot server {number}"),
    };
    Some(Warning::new(
        NODE_NAME_MISMATCH,
        format!(
            "Node {name:?} has the providerID of {server}, which is named {server_name:?}: the providerID is trusted and the Node is initialised as that server (its Hostname address is the server's name)"
        ),
    ))
}

/// A server an InternalIP of a Node matched.
#[derive(Clone, Debug, PartialEq)]
pub enum Matched {
    /// A cloud server, by the private IP it has in a network.
    Cloud(Arc<Server>),
    /// A Robot server, by its `server_ip`.
    Robot(RobotServer),
}

impl Matched {
    fn same_server(&self, other: &Matched) -> bool {
        match (self, other) {
            (Self::Cloud(a), Self::Cloud(b)) => a.id == b.id,
            (Self::Robot(a), Self::Robot(b)) => a.server_number == b.server_number,
            _ => false,
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Cloud(server) => format!("cloud server {:?} ({})", server.name, server.id),
            Self::Robot(server) => format!(
                "Robot server {:?} ({})",
                server.server_name, server.server_number
            ),
        }
    }
}

/// The Node's InternalIPs in `status.addresses`, in order, each once.
fn internal_ips(node: &Node) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = Vec::new();
    let addresses = node
        .status
        .iter()
        .flat_map(|status| status.addresses.iter().flatten())
        .filter(|a| a.type_ == INTERNAL_IP)
        .filter_map(|a| a.address.parse().ok());
    for ip in addresses {
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    ips
}

/// Whether `ip` is `server`'s private IP in `network` (any network when `None`).
fn has_private_ip(server: &Server, network: Option<i64>, ip: IpAddr) -> bool {
    server
        .private_net
        .iter()
        .filter(|p| network.is_none_or(|id| p.network == id))
        .any(|p| p.ip.parse::<IpAddr>().ok() == Some(ip))
}

/// The one server whose private network IP (cloud servers in `network`, or any network) or
/// `server_ip` (Robot servers) is an InternalIP of `node`; otherwise the Warning that says why
/// the Node stays uninitialised. `cloud` is `None` when no listing of every cloud server is
/// kept (cache modes `one` and `off`): then only Robot servers are matched.
pub fn match_internal_ip(
    node: &Node,
    cloud: Option<&[Arc<Server>]>,
    network: Option<i64>,
    robot: &[RobotServer],
) -> Result<Matched, Warning> {
    let name = node_name(node);
    let ips = internal_ips(node);
    let unmatched = |why: String| {
        let cloud_note = if cloud.is_none() {
            " (cloud servers are matched by InternalIP only with HCLOUD_SERVER_CACHE_MODE=all)"
        } else {
            ""
        };
        Warning::new(
            NO_MATCHING_SERVER,
            format!(
                "Node {name:?} has no providerID and no server is named like it, and {why}{cloud_note}: it stays uninitialised until a server has its name or an InternalIP, or the kubelet sets its providerID (--provider-id)"
            ),
        )
    };
    if ips.is_empty() {
        return Err(unmatched(
            "it has no InternalIP to find its server by".to_owned(),
        ));
    }
    let mut found: Vec<(IpAddr, Matched)> = Vec::new();
    for &ip in &ips {
        let cloud_hits = cloud
            .unwrap_or_default()
            .iter()
            .filter(|s| has_private_ip(s, network, ip))
            .map(|s| Matched::Cloud(s.clone()));
        let robot_hits = robot
            .iter()
            .filter(|s| s.server_ip.parse::<IpAddr>().ok() == Some(ip))
            .map(|s| Matched::Robot(s.clone()));
        for hit in cloud_hits.chain(robot_hits) {
            if !found.iter().any(|(_, m)| m.same_server(&hit)) {
                found.push((ip, hit));
            }
        }
    }
    match found.len() {
        0 => {
            let listed: Vec<String> = ips.iter().map(IpAddr::to_string).collect();
            let which = match listed.as_slice() {
                [one] => format!("its InternalIP {one} is no server's"),
                many => format!("none of its InternalIPs {} is a server's", many.join(", ")),
            };
            Err(unmatched(format!(
                "{which} private network IP (cloud) or server IP (Robot)"
            )))
        }
        1 => Ok(found.remove(0).1),
        _ => {
            let servers: Vec<String> = found
                .iter()
                .map(|(ip, m)| format!("{ip}: {}", m.describe()))
                .collect();
            Err(Warning::new(
                SEVERAL_MATCHING_SERVERS,
                format!(
                    "Node {name:?} has no providerID and no server is named like it, and its InternalIPs are the addresses of several servers ({}): it cannot be told which one is the Node's, so it stays uninitialised. Name the Node like its server or let the kubelet set its providerID (--provider-id)",
                    servers.join("; ")
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcloud_api::models::ServerPrivateNet;
    use serde_json::json;

    fn node(name: &str, addresses: &[(&str, &str)]) -> Node {
        let addresses: Vec<_> = addresses
            .iter()
            .map(|(type_, ip)| json!({"type": type_, "address": ip}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {"addresses": addresses},
        }))
        .unwrap_or_default()
    }

    fn cloud(id: i64, name: &str, private: &[(i64, &str)]) -> Arc<Server> {
        Arc::new(Server {
            id,
            name: name.to_owned(),
            private_net: private
                .iter()
                .map(|(network, ip)| ServerPrivateNet {
                    network: *network,
                    ip: (*ip).to_owned(),
                    ..ServerPrivateNet::default()
                })
                .collect(),
            ..Server::default()
        })
    }

    fn robot(number: u64, name: &str, ip: &str) -> RobotServer {
        RobotServer {
            server_number: number,
            server_name: name.to_owned(),
            server_ip: ip.to_owned(),
            ..RobotServer::default()
        }
    }

    /// What a match found: `cloud:ID`, `robot:N`, or the Warning's reason.
    fn outcome(result: &Result<Matched, Warning>) -> String {
        match result {
            Ok(Matched::Cloud(s)) => format!("cloud:{}", s.id),
            Ok(Matched::Robot(s)) => format!("robot:{}", s.server_number),
            Err(w) => w.reason.clone(),
        }
    }

    #[test]
    fn internal_ip_matching_table() {
        let servers = vec![
            cloud(1, "a", &[(7, "10.0.0.2")]),
            cloud(2, "b", &[(7, "10.0.0.3"), (8, "10.1.0.3")]),
            // The same IP as `a`, in another network.
            cloud(3, "c", &[(8, "10.0.0.2")]),
        ];
        let dedicated = vec![robot(41, "dedi-41", "198.51.100.41")];
        type Case = (
            &'static str,
            Vec<(&'static str, &'static str)>,
            Option<i64>,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            (
                "one cloud server",
                vec![("InternalIP", "10.0.0.3")],
                None,
                "cloud:2",
            ),
            (
                "no InternalIP",
                vec![("Hostname", "x")],
                None,
                NO_MATCHING_SERVER,
            ),
            (
                "an IP no server has",
                vec![("InternalIP", "10.9.9.9")],
                None,
                NO_MATCHING_SERVER,
            ),
            (
                "ExternalIPs are not matched",
                vec![("ExternalIP", "10.0.0.3")],
                None,
                NO_MATCHING_SERVER,
            ),
            (
                "two servers share the IP in two networks",
                vec![("InternalIP", "10.0.0.2")],
                None,
                SEVERAL_MATCHING_SERVERS,
            ),
            (
                "the configured network decides",
                vec![("InternalIP", "10.0.0.2")],
                Some(7),
                "cloud:1",
            ),
            (
                "two InternalIPs of two servers",
                vec![("InternalIP", "10.0.0.3"), ("InternalIP", "198.51.100.41")],
                None,
                SEVERAL_MATCHING_SERVERS,
            ),
            (
                "two InternalIPs of one server",
                vec![("InternalIP", "10.0.0.3"), ("InternalIP", "10.1.0.3")],
                None,
                "cloud:2",
            ),
            (
                "a Robot server by its server IP",
                vec![("InternalIP", "198.51.100.41")],
                None,
                "robot:41",
            ),
        ];
        for (what, addresses, network, expected) in cases {
            let got =
                match_internal_ip(&node("n", &addresses), Some(&servers), network, &dedicated);
            assert_eq!(outcome(&got), expected, "{what}: {got:?}");
        }
    }

    #[test]
    fn the_warnings_name_the_addresses_and_the_servers() {
        let servers = vec![
            cloud(1, "a", &[(7, "10.0.0.2")]),
            cloud(3, "c", &[(8, "10.0.0.2")]),
        ];
        let several = match_internal_ip(
            &node("n", &[("InternalIP", "10.0.0.2")]),
            Some(&servers),
            None,
            &[],
        )
        .unwrap_err();
        assert!(
            several
                .message
                .contains(r#"10.0.0.2: cloud server "a" (1); 10.0.0.2: cloud server "c" (3)"#),
            "{}",
            several.message
        );
        let none = match_internal_ip(
            &node("n", &[("InternalIP", "10.0.0.9")]),
            Some(&servers),
            None,
            &[],
        )
        .unwrap_err();
        assert!(
            none.message
                .contains("its InternalIP 10.0.0.9 is no server's"),
            "{}",
            none.message
        );
        // Without a listing of every cloud server only Robot servers are matched, and the
        // Warning says so.
        let robot_only = match_internal_ip(
            &node("n", &[("InternalIP", "10.0.0.2")]),
            None,
            None,
            &[robot(41, "dedi-41", "198.51.100.41")],
        )
        .unwrap_err();
        assert!(
            robot_only.message.contains("HCLOUD_SERVER_CACHE_MODE=all"),
            "{}",
            robot_only.message
        );
    }

    #[test]
    fn a_differing_name_is_a_warning_naming_both() {
        let dedicated = node("worker-1", &[]);
        let warning = name_mismatch(&dedicated, ProviderId::Robot(41), "dedi-41");
        let message = warning
            .as_ref()
            .map(|w| w.message.clone())
            .unwrap_or_default();
        assert_eq!(
            warning.map(|w| w.reason),
            Some(NODE_NAME_MISMATCH.to_owned())
        );
        assert!(message.contains(r#""worker-1""#), "{message}");
        assert!(message.contains(r#""dedi-41""#), "{message}");
        assert!(message.contains("Robot server 41"), "{message}");
        assert!(name_mismatch(&dedicated, ProviderId::Cloud(5), "worker-1").is_none());
        assert!(
            name_mismatch(&dedicated, ProviderId::Cloud(5), "cx-5")
                .is_some_and(|w| w.message.contains("cloud server 5"))
        );
    }
}
