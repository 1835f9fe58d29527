//! Robot Nodes as IP targets of a load balancer (pure: the Robot list is read by the caller).
//!
//! As the official CCM chooses them: a Robot Node's target is its server's public IPv4
//! (`server_ip`, never IPv6), or with `use-private-ip` the Node's first InternalIP (a vSwitch
//! address). Without Robot credentials only the InternalIP can be known, so only
//! `use-private-ip` makes Robot Nodes targets. Every IP target that is not the chosen IP of a
//! selected Robot Node is removed, also every IP target while Robot support is off.
//!
//! Differs on purpose: a Robot Node has one target. The official CCM keeps a Node's
//! public-IP target when `use-private-ip` is turned on and adds the private one beside it;
//! here the public one goes, as a cloud server's target changes to its private IP.

use std::collections::BTreeSet;

use hcloud_api::robot::RobotServer;

use super::desired::Desired;
use super::steps::{Notice, reasons};
use crate::robot::find_number;

/// A selected Node with a Robot providerID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RobotNode {
    /// The Robot server number of its providerID.
    pub number: u64,
    /// The Node's name.
    pub node: String,
    /// The Node's first InternalIP, if it has one.
    pub internal_ip: Option<String>,
}

/// An IP target and the Node it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredIpTarget {
    /// The target's IP.
    pub ip: String,
    /// Node name (for events).
    pub node: String,
}

/// What is known of Robot when the targets are chosen.
#[derive(Clone, Copy, Debug)]
pub enum RobotView<'a> {
    /// Robot support is off (`ROBOT_ENABLED` false): no IP targets at all.
    Off,
    /// Robot support is on without credentials: only InternalIPs can be targets.
    WithoutClient,
    /// Robot support is on and Robot lists these servers.
    Listed(&'a [RobotServer]),
}

impl Desired {
    /// Choose the IP targets of the selected Robot Nodes ([`Desired::robot_nodes`]) and the
    /// Warnings for those that cannot be targets.
    pub fn choose_robot_targets(&mut self, robot: RobotView<'_>) {
        let mut chosen = Vec::new();
        for node in &self.robot_nodes.clone() {
            let ip = match robot {
                RobotView::Off => {
                    self.notices.push(Notice::log(format!(
                        "node {}: Robot servers are not load balancer targets (Robot support is off)",
                        node.node
                    )));
                    None
                }
                RobotView::WithoutClient => self.without_client(node),
                RobotView::Listed(servers) => self.listed(node, find_number(servers, node.number)),
            };
            if let Some(ip) = ip {
                chosen.push(DesiredIpTarget {
                    ip,
                    node: node.node.clone(),
                });
            }
        }
        let mut seen = BTreeSet::new();
        chosen.retain(|t| seen.insert(t.ip.clone()));
        self.ip_targets = chosen;
    }

    fn without_client(&mut self, node: &RobotNode) -> Option<String> {
        if !self.use_private_ip {
            self.notices.push(Notice::warn_node(
                &node.node,
                reasons::SERVER_NOT_FOUND,
                format!(
                    "The public IP of Robot server {} is unknown without Robot credentials (ROBOT_USER, ROBOT_PASSWORD), so the Node is no target of the load balancer for service {}; set them, or use-private-ip with the Node's InternalIP",
                    node.number, self.service
                ),
            ));
            return None;
        }
        if node.internal_ip.is_none() {
            self.notices.push(Notice::warn(
                reasons::INTERNAL_IP_NOT_CONFIGURED,
                format!(
                    "Robot Node {} (server {}) has no InternalIP, the only target use-private-ip can take without Robot credentials: it is left out",
                    node.node, node.number
                ),
            ));
        }
        node.internal_ip.clone()
    }

    fn listed(&mut self, node: &RobotNode, server: Option<&RobotServer>) -> Option<String> {
        let Some(server) = server.filter(|s| !s.server_ip.is_empty()) else {
            self.notices.push(Notice::warn_node(
                &node.node,
                reasons::SERVER_NOT_FOUND,
                format!(
                    "Robot lists no server {} with a public IPv4, so the Node is no target of the load balancer for service {}",
                    node.number, self.service
                ),
            ));
            return None;
        };
        if !self.use_private_ip {
            return Some(server.server_ip.clone());
        }
        match &node.internal_ip {
            Some(ip) => Some(ip.clone()),
            None => {
                self.notices.push(Notice::warn(
                    reasons::INTERNAL_IP_NOT_CONFIGURED,
                    format!(
                        "use-private-ip is set, but Robot Node {} has no InternalIP: its public IP {} is the target instead",
                        node.node, server.server_ip
                    ),
                ));
                Some(server.server_ip.clone())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use hcloud_api::models::{
        LoadBalancer, LoadBalancerTarget, LoadBalancerType, TargetIp, TargetSpec, TargetType,
    };
    use k8s_openapi::api::core::v1::{Node, Service};
    use serde_json::json;

    use super::*;
    use crate::load_balancers::annotations::{Annotations, keys};
    use crate::load_balancers::settings::LoadBalancerSettings;

    fn service(annotations: &[(&str, &str)]) -> Service {
        let annotations: serde_json::Map<_, _> = annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "web", "uid": "u-1", "annotations": annotations},
            "spec": {"ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]},
        }))
        .unwrap()
    }

    fn node(name: &str, provider_id: &str, internal_ip: Option<&str>) -> Arc<Node> {
        let addresses: Vec<_> = internal_ip
            .iter()
            .map(|ip| json!({"type": "InternalIP", "address": ip}))
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"kind": if provider_id.starts_with("hcloud://") && !provider_id.contains("bm-") { "cloud" } else { "robot" }}},
                "spec": {"providerID": provider_id},
                "status": {"addresses": addresses},
            }))
            .unwrap(),
        )
    }

    fn robot_server(number: u64, ip: &str) -> RobotServer {
        RobotServer {
            server_number: number,
            server_name: format!("dedi-{number}"),
            server_ip: ip.into(),
            ..RobotServer::default()
        }
    }

    fn desired(annotations: &[(&str, &str)], nodes: &[Arc<Node>], network: Option<i64>) -> Desired {
        let svc = service(annotations);
        Desired::new(
            &svc,
            &Annotations::of(&svc),
            &LoadBalancerSettings::default(),
            network,
            nodes,
        )
        .unwrap()
    }

    fn ips(d: &Desired) -> Vec<(&str, &str)> {
        d.ip_targets
            .iter()
            .map(|t| (t.ip.as_str(), t.node.as_str()))
            .collect()
    }

    fn warnings(d: &Desired) -> Vec<(&'static str, String)> {
        d.notices
            .iter()
            .filter_map(|n| {
                let subject = match &n.subject {
                    super::super::desired::Subject::Service => "service".to_owned(),
                    super::super::desired::Subject::Node(node) => node.clone(),
                };
                Some((n.reason?, subject))
            })
            .filter(|(r, _)| *r != reasons::LOAD_BALANCER_TYPE_UNCONFIGURED)
            .collect()
    }

    fn nodes() -> Vec<Arc<Node>> {
        vec![
            node("cloud-1", "hcloud://11", Some("10.0.0.2")),
            node("dedi-1", "hrobot://1", Some("10.1.0.1")),
            node("dedi-2", "hcloud://bm-2", None),
            node("dedi-3", "hrobot://3", Some("10.1.0.3")),
        ]
    }

    #[test]
    fn targets_are_chosen_as_officially() {
        let listed = [
            robot_server(1, "198.51.100.1"),
            robot_server(2, "198.51.100.2"),
            robot_server(9, "198.51.100.9"),
        ];
        let private = [(keys::USE_PRIVATE_IP, "true")];
        type Case<'a> = (
            &'a [(&'a str, &'a str)],
            RobotView<'a>,
            Vec<(&'a str, &'a str)>,
            Vec<(&'static str, &'a str)>,
        );
        let cases: Vec<Case<'_>> = vec![
            // Public IPv4 of the listed servers; server 3 is not listed.
            (
                &[],
                RobotView::Listed(&listed),
                vec![("198.51.100.1", "dedi-1"), ("198.51.100.2", "dedi-2")],
                vec![(reasons::SERVER_NOT_FOUND, "dedi-3")],
            ),
            // use-private-ip: the InternalIP, else the public IP with a Warning on the Service.
            (
                &private,
                RobotView::Listed(&listed),
                vec![("10.1.0.1", "dedi-1"), ("198.51.100.2", "dedi-2")],
                vec![
                    (reasons::INTERNAL_IP_NOT_CONFIGURED, "service"),
                    (reasons::SERVER_NOT_FOUND, "dedi-3"),
                ],
            ),
            // Without credentials only InternalIPs, and only with use-private-ip.
            (
                &private,
                RobotView::WithoutClient,
                vec![("10.1.0.1", "dedi-1"), ("10.1.0.3", "dedi-3")],
                vec![(reasons::INTERNAL_IP_NOT_CONFIGURED, "service")],
            ),
            (
                &[],
                RobotView::WithoutClient,
                vec![],
                vec![
                    (reasons::SERVER_NOT_FOUND, "dedi-1"),
                    (reasons::SERVER_NOT_FOUND, "dedi-2"),
                    (reasons::SERVER_NOT_FOUND, "dedi-3"),
                ],
            ),
            // Robot support off: no IP targets, no Warnings (a log line each).
            (&private, RobotView::Off, vec![], vec![]),
        ];
        for (annotations, view, want, warned) in cases {
            let mut d = desired(annotations, &nodes(), Some(7));
            d.choose_robot_targets(view);
            assert_eq!(ips(&d), want, "{annotations:?} {view:?}");
            let warned: Vec<_> = warned.into_iter().map(|(r, s)| (r, s.to_owned())).collect();
            assert_eq!(warnings(&d), warned, "{annotations:?} {view:?}");
            assert_eq!(d.targets.len(), 1, "the cloud Node stays a server target");
        }
    }

    #[test]
    fn a_node_selector_picks_only_robot_nodes() {
        let listed = [
            robot_server(1, "198.51.100.1"),
            robot_server(3, "198.51.100.3"),
        ];
        let mut d = desired(&[(keys::NODE_SELECTOR, "kind=robot")], &nodes(), None);
        d.choose_robot_targets(RobotView::Listed(&listed));
        assert!(d.targets.is_empty());
        assert_eq!(
            ips(&d),
            vec![("198.51.100.1", "dedi-1"), ("198.51.100.3", "dedi-3")]
        );
    }

    fn lb_with(targets: &[(&str, bool)], max_targets: u32) -> LoadBalancer {
        let mut lb = LoadBalancer {
            load_balancer_type: LoadBalancerType {
                max_targets,
                ..LoadBalancerType::default()
            },
            ..LoadBalancer::default()
        };
        for (target, ip) in targets {
            lb.targets.push(if *ip {
                LoadBalancerTarget {
                    kind: TargetType::Ip,
                    ip: Some(TargetIp {
                        ip: (*target).to_owned(),
                    }),
                    ..LoadBalancerTarget::default()
                }
            } else {
                LoadBalancerTarget {
                    kind: TargetType::Server,
                    server: TargetSpec::server(target.parse().unwrap(), false).server,
                    ..LoadBalancerTarget::default()
                }
            });
        }
        lb
    }

    fn target_steps(d: &Desired, lb: &LoadBalancer) -> Vec<String> {
        d.diff(lb)
            .iter()
            .filter(|s| s.is_target_step())
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn ip_targets_are_added_after_servers_removed_when_unwanted_and_limited() {
        let listed = [
            robot_server(1, "198.51.100.1"),
            robot_server(3, "198.51.100.3"),
        ];
        let mut d = desired(&[], &nodes(), None);
        d.choose_robot_targets(RobotView::Listed(&listed));
        // Kept: server 11 and dedi-1's IP; removed: a manual IP target; added: dedi-3.
        let lb = lb_with(
            &[("11", false), ("198.51.100.1", true), ("203.0.113.5", true)],
            25,
        );
        assert_eq!(
            target_steps(&d, &lb),
            vec!["remove target ip 203.0.113.5", "add target ip 198.51.100.3"]
        );
        // A new load balancer: the server first, then the Robot Nodes, up to the limit.
        let empty = lb_with(&[], 2);
        assert_eq!(
            target_steps(&d, &empty),
            vec!["add target server 11", "add target ip 198.51.100.1"]
        );
        let left_out = d.left_out(&empty);
        assert_eq!(left_out.len(), 1);
        assert_eq!(left_out[0].reason, Some(reasons::MAX_TARGETS_REACHED));
        assert_eq!(
            left_out[0].subject,
            super::super::desired::Subject::Node("dedi-3".into())
        );
        let request = d.create_request(
            &super::super::desired::Placement::Location("fsn1".into()),
            2,
        );
        assert_eq!(request.targets.len(), 2);
        assert_eq!(request.targets[1], TargetSpec::ip("198.51.100.1"));
        // Turning use-private-ip on replaces a Robot Node's public target by its InternalIP.
        let mut private = desired(&[(keys::USE_PRIVATE_IP, "true")], &nodes(), Some(7));
        private.choose_robot_targets(RobotView::Listed(&listed));
        let public = lb_with(&[("198.51.100.1", true)], 25);
        let steps = target_steps(&private, &public);
        assert!(
            steps.contains(&"remove target ip 198.51.100.1".to_owned()),
            "{steps:?}"
        );
        assert!(
            steps.contains(&"add target ip 10.1.0.1".to_owned()),
            "{steps:?}"
        );
        // Robot support off: every IP target goes.
        let mut off = desired(&[], &nodes(), None);
        off.choose_robot_targets(RobotView::Off);
        assert_eq!(
            target_steps(&off, &lb),
            vec![
                "remove target ip 198.51.100.1",
                "remove target ip 203.0.113.5"
            ]
        );
    }
}
