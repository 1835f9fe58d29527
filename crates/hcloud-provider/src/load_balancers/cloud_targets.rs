//! Cloud servers without a public IPv4 as load balancer targets (pure: what this process last
//! saw of the servers is given by the caller, from the shared server cache, without a request).
//!
//! A cloud target is public unless `use-private-ip` is set, and the API refuses a public
//! target whose server has no public IPv4 (`missing_ipv4`); the official CCM then fails the
//! whole target update, for every Node. Here such a server is reached over the private network
//! when it is attached to the load balancer's network (`HCLOUD_NETWORK`), and otherwise its
//! Node is left out with a `ServerWithoutPublicIPv4` Warning on it while the other targets are
//! reconciled. A server this process has not seen yet is a public target, as before; if the
//! API then refuses it, the apply leaves it out with the same Warning.

use std::sync::Arc;

use hcloud_api::models::Server;

use super::desired::Desired;
use super::steps::{Notice, reasons};

impl Desired {
    /// Reach the target servers that `seen` shows without a public IPv4 over the network they
    /// share with the load balancer, or leave their Nodes out with a Warning. Nothing changes
    /// with `use-private-ip` (every target is private then).
    pub fn reach_servers_without_public_ipv4(&mut self, seen: impl Fn(i64) -> Option<Arc<Server>>) {
        if self.use_private_ip {
            return;
        }
        let network = self.network.as_ref().map(|n| n.id);
        let mut notices = Vec::new();
        self.targets.retain_mut(|target| {
            let Some(server) = seen(target.server) else {
                return true;
            };
            if server.public_net.ipv4.is_some() {
                return true;
            }
            if let Some(id) = network
                && server.private_net.iter().any(|p| p.network == id)
            {
                target.private = true;
                return true;
            }
            notices.push(left_out(&target.node, &server, network, &self.service));
            false
        });
        self.notices.extend(notices);
    }
}

/// The Warning for the Node of `server`, which has no public IPv4 and is not in `network`.
fn left_out(node: &str, server: &Server, network: Option<i64>, service: &str) -> Notice {
    let why = match network {
        Some(id) => format!("is not attached to the load balancer's network {id}"),
        None => "no network is configured (HCLOUD_NETWORK) to reach it through".to_owned(),
    };
    Notice::warn_node(
        node,
        reasons::SERVER_WITHOUT_PUBLIC_IPV4,
        format!(
            "Node {node} is no target of the load balancer for service {service}: its server {:?} (ID {}) has no public IPv4 and {why}; give the server a public IPv4, attach it to the network, or set load-balancer.hetzner.cloud/use-private-ip",
            server.name, server.id
        ),
    )
}

/// The Warning for a Node whose public target the API refused: its server has no public IPv4
/// (a server this process had not seen without one).
pub(super) fn refused(node: &str, server: i64, service: &str) -> Notice {
    Notice::warn_node(
        node,
        reasons::SERVER_WITHOUT_PUBLIC_IPV4,
        format!(
            "Node {node} is no target of the load balancer for service {service}: the API refused its server (ID {server}) as a public target, it has no public IPv4; give the server a public IPv4, attach it to the load balancer's network, or set load-balancer.hetzner.cloud/use-private-ip"
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use hcloud_api::models::{
        Ipv4, LoadBalancer, LoadBalancerPrivateNet, LoadBalancerTarget, LoadBalancerType,
        ResourceId, ServerPrivateNet, ServerPublicNet, TargetSpec, TargetType,
    };
    use k8s_openapi::api::core::v1::{Node, NodeSpec, ServicePort};

    use super::*;
    use crate::load_balancers::desired::{Placement, Step};
    use crate::load_balancers::settings::LoadBalancerSettings;
    use crate::test_support::{annotations, web_service};

    const NETWORK: i64 = 7;

    fn node(name: &str, server: i64) -> Arc<Node> {
        let mut node = Node::default();
        node.metadata.name = Some(name.to_owned());
        node.spec = Some(NodeSpec {
            provider_id: Some(format!("hcloud://{server}")),
            ..NodeSpec::default()
        });
        Arc::new(node)
    }

    fn server(id: i64, public_ipv4: bool, networks: &[i64]) -> Arc<Server> {
        Arc::new(Server {
            id,
            name: format!("srv-{id}"),
            public_net: ServerPublicNet {
                ipv4: public_ipv4.then(|| Ipv4 {
                    ip: format!("203.0.113.{id}"),
                    ..Ipv4::default()
                }),
                ..ServerPublicNet::default()
            },
            private_net: networks
                .iter()
                .map(|&network| ServerPrivateNet {
                    network,
                    ip: format!("10.0.0.{id}"),
                    ..ServerPrivateNet::default()
                })
                .collect(),
            ..Server::default()
        })
    }

    /// Nodes a (public IPv4), b (none, in the network), c (none, in no network) and d (a
    /// server not seen yet), with `pairs` as the Service's annotations.
    fn desired(network: Option<i64>, pairs: &[(&str, &str)]) -> Desired {
        let svc = web_service(
            "0f2f6c0e-1b2a-4c3d-9e8f-0123456789ab",
            [ServicePort {
                port: 80,
                protocol: Some("TCP".into()),
                node_port: Some(30080),
                ..ServicePort::default()
            }],
        );
        let nodes = [node("a", 1), node("b", 2), node("c", 3), node("d", 4)];
        let mut desired = Desired::new(
            &svc,
            &annotations(pairs),
            &LoadBalancerSettings::default(),
            network,
            &nodes,
        )
        .unwrap();
        let seen: BTreeMap<i64, Arc<Server>> = [
            server(1, true, &[]),
            server(2, false, &[NETWORK]),
            server(3, false, &[]),
        ]
        .into_iter()
        .map(|s| (s.id, s))
        .collect();
        desired.reach_servers_without_public_ipv4(|id| seen.get(&id).cloned());
        desired
    }

    /// The server targets of `specs`: (server ID, over the private network).
    fn servers(specs: impl IntoIterator<Item = TargetSpec>) -> Vec<(i64, bool)> {
        specs
            .into_iter()
            .filter_map(|t| Some((t.server?.id, t.use_private_ip == Some(true))))
            .collect()
    }

    fn warnings(desired: &Desired) -> Vec<(String, String)> {
        desired
            .notices
            .iter()
            .filter(|n| n.reason == Some(reasons::SERVER_WITHOUT_PUBLIC_IPV4))
            .map(|n| (format!("{:?}", n.subject), n.message.clone()))
            .collect()
    }

    #[test]
    fn a_server_without_a_public_ipv4_is_reached_through_the_shared_network() {
        let desired = desired(Some(NETWORK), &[]);
        let create = desired.create_request(&Placement::Location("fsn1".into()), usize::MAX);
        assert_eq!(
            servers(create.targets),
            [(1, false), (2, true), (4, false)],
            "b over the network, c left out, d (not seen) public as before"
        );
        let [(subject, message)] = warnings(&desired).try_into().unwrap();
        assert_eq!(subject, "Node(\"c\")");
        assert!(
            message.contains("srv-3")
                && message.contains("not attached to the load balancer's network 7"),
            "{message}"
        );

        // An existing load balancer with b as a public target: b becomes private, a stays.
        let lb = LoadBalancer {
            load_balancer_type: LoadBalancerType {
                max_targets: 25,
                ..LoadBalancerType::default()
            },
            private_net: vec![LoadBalancerPrivateNet {
                network: NETWORK,
                ip: "10.0.0.100".into(),
            }],
            targets: [1, 2]
                .into_iter()
                .map(|id| LoadBalancerTarget {
                    kind: TargetType::Server,
                    server: Some(ResourceId { id }),
                    ..LoadBalancerTarget::default()
                })
                .collect(),
            ..LoadBalancer::default()
        };
        let steps = desired.diff(&lb);
        let removed = servers(steps.iter().filter_map(|s| match s {
            Step::RemoveTarget(t) => Some(t.clone()),
            _ => None,
        }));
        let added = servers(steps.iter().filter_map(|s| match s {
            Step::AddTarget(t) => Some(t.clone()),
            _ => None,
        }));
        assert_eq!(removed, [(2, false)], "{steps:?}");
        assert_eq!(added, [(2, true), (4, false)], "{steps:?}");
    }

    #[test]
    fn without_a_network_a_server_without_a_public_ipv4_is_left_out_with_a_warning() {
        let desired = desired(None, &[]);
        let create = desired.create_request(&Placement::Location("fsn1".into()), usize::MAX);
        assert_eq!(servers(create.targets), [(1, false), (4, false)]);
        let left: Vec<String> = warnings(&desired).into_iter().map(|(s, _)| s).collect();
        assert_eq!(left, ["Node(\"b\")", "Node(\"c\")"]);
        assert!(
            warnings(&desired)[0]
                .1
                .contains("no network is configured (HCLOUD_NETWORK)"),
            "{:?}",
            warnings(&desired)
        );
    }

    #[test]
    fn with_use_private_ip_every_target_is_private_and_none_is_left_out() {
        let desired = desired(
            Some(NETWORK),
            &[("load-balancer.hetzner.cloud/use-private-ip", "true")],
        );
        let create = desired.create_request(&Placement::Location("fsn1".into()), usize::MAX);
        assert_eq!(
            servers(create.targets),
            [(1, true), (2, true), (3, true), (4, true)]
        );
        assert!(warnings(&desired).is_empty());
    }
}
