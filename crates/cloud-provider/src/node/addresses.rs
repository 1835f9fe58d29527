//! Pure address decisions: the provided-node-ip filter and address reconciliation.

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, Ipv4Addr};

use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::well_known::{ANNOTATION_PROVIDED_NODE_IP, address_type};

/// Why the provided node IP could not be applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NodeIpError {
    /// A part of the annotation is not an IP address.
    #[error("failed to parse node IP {annotation:?}: could not parse {part:?}")]
    Unparsable {
        /// The whole annotation value.
        annotation: String,
        /// The offending part.
        part: String,
    },
    /// More than two IPs, or two of the same family.
    #[error(
        "failed to parse node IP {0:?}: must contain either a single IP or a dual-stack pair of IPs"
    )]
    NotSingleOrDualStack(String),
    /// A dual-stack pair containing `0.0.0.0` or `::`.
    #[error("failed to parse node IP {0:?}: dual-stack node IP cannot include '0.0.0.0' or '::'")]
    UnspecifiedInPair(String),
    /// No cloud address equals this node IP.
    #[error("failed to get node address from cloud provider that matches ip: {0}")]
    NoMatch(IpAddr),
}

/// Parse an IP the way Go's sloppy parser does: IPv4 octets may carry leading zeros
/// (read as decimal) and IPv4-mapped IPv6 addresses count as IPv4.
pub fn parse_ip_sloppy(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    let octets: Vec<&str> = text.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    let mut parsed = [0u8; 4];
    for (slot, octet) in parsed.iter_mut().zip(&octets) {
        if octet.is_empty() || octet.len() > 3 || !octet.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *slot = octet.parse().ok()?;
    }
    Some(IpAddr::V4(Ipv4Addr::from(parsed)))
}

/// Parse the `alpha.kubernetes.io/provided-node-ip` value: one IP or a dual-stack pair.
pub fn parse_provided_node_ips(annotation: &str) -> Result<Vec<IpAddr>, NodeIpError> {
    let mut ips = Vec::new();
    for part in annotation.split(',') {
        let ip = parse_ip_sloppy(part).ok_or_else(|| NodeIpError::Unparsable {
            annotation: annotation.to_owned(),
            part: part.to_owned(),
        })?;
        ips.push(ip);
    }
    match ips.as_slice() {
        [a, b] if a.is_ipv6() == b.is_ipv6() => {
            Err(NodeIpError::NotSingleOrDualStack(annotation.to_owned()))
        }
        [a, b] if a.is_unspecified() || b.is_unspecified() => {
            Err(NodeIpError::UnspecifiedInPair(annotation.to_owned()))
        }
        [_] | [_, _] => Ok(ips),
        _ => Err(NodeIpError::NotSingleOrDualStack(annotation.to_owned())),
    }
}

/// Apply the provided node IPs to `addresses`: every address equal to a node IP moves to the
/// front (in annotation order) and fixes its type; other addresses of those types are dropped;
/// the rest keep their order. A node IP that matches nothing is an error.
pub fn filter_by_node_ips(
    annotation: &str,
    addresses: &[NodeAddress],
) -> Result<Vec<NodeAddress>, NodeIpError> {
    let node_ips = parse_provided_node_ips(annotation)?;
    let mut enforced = Vec::with_capacity(addresses.len());
    let mut enforced_types: HashSet<&str> = HashSet::new();
    for node_ip in node_ips {
        let mut matched = false;
        for address in addresses {
            if parse_ip_sloppy(&address.address) == Some(node_ip) {
                enforced.push(address.clone());
                enforced_types.insert(address.type_.as_str());
                matched = true;
            }
        }
        if !matched {
            return Err(NodeIpError::NoMatch(node_ip));
        }
    }
    enforced.extend(
        addresses
            .iter()
            .filter(|a| !enforced_types.contains(a.type_.as_str()))
            .cloned(),
    );
    Ok(enforced)
}

/// The provided-node-ip annotation, if the Node carries one.
pub fn provided_node_ip(node: &Node) -> Option<&str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_PROVIDED_NODE_IP)
        .map(String::as_str)
}

/// The Node's current `status.addresses`.
pub fn current_addresses(node: &Node) -> &[NodeAddress] {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_deref())
        .unwrap_or_default()
}

/// Upstream's change test: a different length, or any new entry differing from the old value of
/// its type (old entries indexed by type, last one wins).
pub fn addresses_changed(old: &[NodeAddress], new: &[NodeAddress]) -> bool {
    if old.len() != new.len() {
        return true;
    }
    let by_type: BTreeMap<&str, &str> = old
        .iter()
        .map(|a| (a.type_.as_str(), a.address.as_str()))
        .collect();
    new.iter()
        .any(|a| by_type.get(a.type_.as_str()) != Some(&a.address.as_str()))
}

/// The address list the Node should get from `cloud`, or `Ok(None)` when nothing must be written.
///
/// An empty cloud answer never clears addresses; the kubelet's Hostname entries are kept when the
/// cloud reports none; the provided node IP (if annotated) is enforced.
pub fn desired_addresses(
    node: &Node,
    cloud: &[NodeAddress],
) -> Result<Option<Vec<NodeAddress>>, NodeIpError> {
    if cloud.is_empty() {
        return Ok(None);
    }
    let current = current_addresses(node);
    let mut wanted = cloud.to_vec();
    if !cloud.iter().any(|a| a.type_ == address_type::HOSTNAME) {
        wanted.extend(
            current
                .iter()
                .filter(|a| a.type_ == address_type::HOSTNAME)
                .cloned(),
        );
    }
    if let Some(annotation) = provided_node_ip(node) {
        wanted = filter_by_node_ips(annotation, &wanted)?;
    }
    Ok(addresses_changed(current, &wanted).then_some(wanted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::test_support::{addr, node_with};
    use std::net::Ipv6Addr;

    #[test]
    fn parse_node_ip_table() {
        let v4 = |s: &str| s.parse::<IpAddr>().unwrap();
        let cases: Vec<(&str, Result<Vec<IpAddr>, &str>)> = vec![
            ("10.0.0.1", Ok(vec![v4("10.0.0.1")])),
            ("2001:db8::1", Ok(vec![v4("2001:db8::1")])),
            (
                "10.0.0.1,2001:db8::1",
                Ok(vec![v4("10.0.0.1"), v4("2001:db8::1")]),
            ),
            (
                "2001:db8::1,10.0.0.1",
                Ok(vec![v4("2001:db8::1"), v4("10.0.0.1")]),
            ),
            ("010.000.000.001", Ok(vec![v4("10.0.0.1")])),
            ("::ffff:10.0.0.1", Ok(vec![v4("10.0.0.1")])),
            ("0.0.0.0", Ok(vec![IpAddr::V4(Ipv4Addr::UNSPECIFIED)])),
            ("", Err("unparsable")),
            ("10.0.0.1, 2001:db8::1", Err("unparsable")),
            ("node-a", Err("unparsable")),
            ("10.0.0.1,10.0.0.2", Err("pair")),
            ("2001:db8::1,2001:db8::2", Err("pair")),
            ("10.0.0.1,2001:db8::1,10.0.0.2", Err("pair")),
            ("0.0.0.0,2001:db8::1", Err("unspecified")),
            ("10.0.0.1,::", Err("unspecified")),
        ];
        for (input, want) in cases {
            let got = parse_provided_node_ips(input);
            match (want, got) {
                (Ok(w), Ok(g)) => assert_eq!(g, w, "{input}"),
                (Err("unparsable"), Err(NodeIpError::Unparsable { .. })) => {}
                (Err("pair"), Err(NodeIpError::NotSingleOrDualStack(_))) => {}
                (Err("unspecified"), Err(NodeIpError::UnspecifiedInPair(_))) => {}
                (w, g) => panic!("{input}: want {w:?}, got {g:?}"),
            }
        }
        assert_eq!(
            parse_ip_sloppy("::"),
            Some(IpAddr::V6(Ipv6Addr::UNSPECIFIED))
        );
    }

    #[test]
    fn filter_by_node_ips_table() {
        let cloud = vec![
            addr("Hostname", "node-a"),
            addr("ExternalIP", "203.0.113.5"),
            addr("InternalIP", "10.0.0.2"),
            addr("InternalIP", "10.0.0.3"),
            addr("ExternalIP", "2001:db8::1"),
        ];
        let cases: Vec<(&str, Result<Vec<NodeAddress>, NodeIpError>)> = vec![
            (
                "10.0.0.3",
                Ok(vec![
                    addr("InternalIP", "10.0.0.3"),
                    addr("Hostname", "node-a"),
                    addr("ExternalIP", "203.0.113.5"),
                    addr("ExternalIP", "2001:db8::1"),
                ]),
            ),
            (
                "203.0.113.5",
                Ok(vec![
                    addr("ExternalIP", "203.0.113.5"),
                    addr("Hostname", "node-a"),
                    addr("InternalIP", "10.0.0.2"),
                    addr("InternalIP", "10.0.0.3"),
                ]),
            ),
            (
                "10.0.0.2,2001:db8::1",
                Ok(vec![
                    addr("InternalIP", "10.0.0.2"),
                    addr("ExternalIP", "2001:db8::1"),
                    addr("Hostname", "node-a"),
                ]),
            ),
            (
                "10.0.0.9",
                Err(NodeIpError::NoMatch("10.0.0.9".parse().unwrap())),
            ),
            (
                "2001:db8:0:0::1",
                Ok(vec![
                    addr("ExternalIP", "2001:db8::1"),
                    addr("Hostname", "node-a"),
                    addr("InternalIP", "10.0.0.2"),
                    addr("InternalIP", "10.0.0.3"),
                ]),
            ),
        ];
        for (annotation, want) in cases {
            assert_eq!(filter_by_node_ips(annotation, &cloud), want, "{annotation}");
        }
    }

    #[test]
    fn change_detection_is_length_and_type_keyed() {
        let a = vec![addr("InternalIP", "10.0.0.2"), addr("Hostname", "n")];
        let reordered = vec![addr("Hostname", "n"), addr("InternalIP", "10.0.0.2")];
        let other_ip = vec![addr("InternalIP", "10.0.0.3"), addr("Hostname", "n")];
        let longer = vec![
            addr("InternalIP", "10.0.0.2"),
            addr("Hostname", "n"),
            addr("ExternalIP", "1.2.3.4"),
        ];
        assert!(!addresses_changed(&a, &a));
        assert!(!addresses_changed(&a, &reordered));
        assert!(addresses_changed(&a, &other_ip));
        assert!(addresses_changed(&a, &longer));
        assert!(addresses_changed(&[], &a));
    }

    #[test]
    fn desired_addresses_table() {
        let kubelet = vec![addr("Hostname", "node-a")];
        let cloud = vec![
            addr("InternalIP", "10.0.0.2"),
            addr("ExternalIP", "203.0.113.5"),
        ];
        let cloud_with_hostname = vec![
            addr("Hostname", "cloud-name"),
            addr("ExternalIP", "203.0.113.5"),
        ];
        struct Case {
            name: &'static str,
            current: Vec<NodeAddress>,
            annotation: Option<&'static str>,
            cloud: Vec<NodeAddress>,
            want: Result<Option<Vec<NodeAddress>>, ()>,
        }
        let cases = vec![
            Case {
                name: "empty cloud answer never clears",
                current: kubelet.clone(),
                annotation: None,
                cloud: vec![],
                want: Ok(None),
            },
            Case {
                name: "kubelet hostname appended after cloud addresses",
                current: kubelet.clone(),
                annotation: None,
                cloud: cloud.clone(),
                want: Ok(Some(vec![
                    addr("InternalIP", "10.0.0.2"),
                    addr("ExternalIP", "203.0.113.5"),
                    addr("Hostname", "node-a"),
                ])),
            },
            Case {
                name: "cloud hostname wins over kubelet's",
                current: kubelet.clone(),
                annotation: None,
                cloud: cloud_with_hostname.clone(),
                want: Ok(Some(cloud_with_hostname.clone())),
            },
            Case {
                name: "unchanged means no write",
                current: vec![
                    addr("InternalIP", "10.0.0.2"),
                    addr("ExternalIP", "203.0.113.5"),
                    addr("Hostname", "node-a"),
                ],
                annotation: None,
                cloud: cloud.clone(),
                want: Ok(None),
            },
            Case {
                name: "node ip moves its match to the front",
                current: kubelet.clone(),
                annotation: Some("203.0.113.5"),
                cloud: cloud.clone(),
                want: Ok(Some(vec![
                    addr("ExternalIP", "203.0.113.5"),
                    addr("InternalIP", "10.0.0.2"),
                    addr("Hostname", "node-a"),
                ])),
            },
            Case {
                name: "node ip mismatch is an error",
                current: kubelet.clone(),
                annotation: Some("192.0.2.1"),
                cloud: cloud.clone(),
                want: Err(()),
            },
            Case {
                name: "empty cloud answer ignores even a bad annotation",
                current: kubelet.clone(),
                annotation: Some("192.0.2.1"),
                cloud: vec![],
                want: Ok(None),
            },
        ];
        for case in cases {
            let node = node_with(&case.current, case.annotation);
            let got = desired_addresses(&node, &case.cloud).map_err(|_| ());
            assert_eq!(got, case.want, "{}", case.name);
        }
    }
}
