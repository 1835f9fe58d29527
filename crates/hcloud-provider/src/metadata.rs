//! Pure mapping from a Hetzner server to the Node metadata the framework applies.

use std::collections::BTreeMap;
use std::net::IpAddr;

use cloud_provider::InstanceMetadata;
use cloud_provider::well_known::address_type::{EXTERNAL_IP, HOSTNAME, INTERNAL_IP};
use hcloud_api::models::Server;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::NodeAddress;

use crate::config::{AddressFamily, InstancesConfig};
use crate::provider_id::ProviderId;

/// Label naming where the Node's machine comes from (`cloud` or `robot`).
pub const PROVIDED_BY_LABEL: &str = "instance.hetzner.cloud/provided-by";

/// The zone label value the official CCM derives from a location: the legacy datacenter name
/// for the original locations, else the location name itself.
pub fn legacy_zone(location: &str) -> String {
    match location {
        "nbg1" => "nbg1-dc3",
        "fsn1" => "fsn1-dc14",
        "hel1" => "hel1-dc2",
        "ash" => "ash-dc1",
        "hil" => "hil-dc1",
        "sin" => "sin-dc1",
        other => other,
    }
    .to_owned()
}

/// Addresses in the official CCM's order: Hostname, ExternalIP v4, ExternalIP v6 (`<net>::1`),
/// then the InternalIP in the configured network.
pub fn node_addresses(
    server: &Server,
    family: AddressFamily,
    network_id: Option<i64>,
) -> Vec<NodeAddress> {
    let address = |type_: &str, address: String| NodeAddress {
        type_: type_.to_owned(),
        address,
    };
    let mut out = vec![address(HOSTNAME, server.name.clone())];
    if family.includes_ipv4()
        && let Some(ipv4) = &server.public_net.ipv4
        && !ipv4.ip.is_empty()
    {
        out.push(address(EXTERNAL_IP, ipv4.ip.clone()));
    }
    if family.includes_ipv6()
        && let Some(ipv6) = &server.public_net.ipv6
        && let Some(first) = first_host_of(&ipv6.ip)
    {
        out.push(address(EXTERNAL_IP, first.to_string()));
    }
    if let Some(network_id) = network_id {
        for private in server
            .private_net
            .iter()
            .filter(|p| p.network == network_id)
        {
            if !private.ip.is_empty() {
                out.push(address(INTERNAL_IP, private.ip.clone()));
            }
        }
    }
    out
}

/// `2001:db8:1:2::/64` → `2001:db8:1:2::1`.
fn first_host_of(network: &str) -> Option<IpAddr> {
    let net: IpNet = network.parse().ok()?;
    match net.network() {
        IpAddr::V6(v6) => Some(IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) | 1))),
        IpAddr::V4(_) => None,
    }
}

/// Everything the node controller sets from one server.
pub fn instance_metadata(server: &Server, config: &InstancesConfig) -> InstanceMetadata {
    let location = server.location.name.clone();
    InstanceMetadata {
        provider_id: ProviderId::Cloud(server.id).to_string(),
        instance_type: server.server_type.name.clone(),
        node_addresses: node_addresses(server, config.address_family, config.network_id),
        zone: if config.zone_label_enabled {
            legacy_zone(&location)
        } else {
            String::new()
        },
        region: location,
        additional_labels: BTreeMap::from([(PROVIDED_BY_LABEL.to_owned(), "cloud".to_owned())]),
        warnings: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::address_pairs;
    use serde_json::json;

    fn server() -> Server {
        serde_json::from_value(json!({
            "id": 42, "name": "worker-1", "status": "running",
            "created": "2026-01-01T00:00:00+00:00",
            "server_type": {"id": 1, "name": "cpx22"},
            "location": {"id": 1, "name": "fsn1", "network_zone": "eu-central"},
            "public_net": {
                "ipv4": {"id": 1, "ip": "203.0.113.5", "blocked": false, "dns_ptr": "x"},
                "ipv6": {"id": 2, "ip": "2001:db8:0:7::/64", "blocked": false, "dns_ptr": []},
            },
            "private_net": [
                {"network": 7, "ip": "10.0.0.2", "alias_ips": [], "mac_address": "86:00:00:00:00:01"},
                {"network": 8, "ip": "10.1.0.2", "alias_ips": [], "mac_address": "86:00:00:00:00:02"},
            ],
        }))
        .unwrap()
    }

    #[test]
    fn addresses_follow_family_and_network() {
        let s = server();
        type Case = (
            AddressFamily,
            Option<i64>,
            Vec<(&'static str, &'static str)>,
        );
        let cases: [Case; 5] = [
            (
                AddressFamily::Ipv4,
                None,
                vec![("Hostname", "worker-1"), ("ExternalIP", "203.0.113.5")],
            ),
            (
                AddressFamily::Ipv6,
                None,
                vec![("Hostname", "worker-1"), ("ExternalIP", "2001:db8:0:7::1")],
            ),
            (
                AddressFamily::DualStack,
                None,
                vec![
                    ("Hostname", "worker-1"),
                    ("ExternalIP", "203.0.113.5"),
                    ("ExternalIP", "2001:db8:0:7::1"),
                ],
            ),
            (
                AddressFamily::Ipv4,
                Some(8),
                vec![
                    ("Hostname", "worker-1"),
                    ("ExternalIP", "203.0.113.5"),
                    ("InternalIP", "10.1.0.2"),
                ],
            ),
            (
                AddressFamily::Ipv4,
                Some(99),
                vec![("Hostname", "worker-1"), ("ExternalIP", "203.0.113.5")],
            ),
        ];
        for (family, network, expected) in cases {
            assert_eq!(
                address_pairs(&node_addresses(&s, family, network)),
                expected,
                "{family:?} {network:?}"
            );
        }
    }

    #[test]
    fn a_server_without_public_ips_has_only_hostname_and_private_address() {
        let mut s = server();
        s.public_net.ipv4 = None;
        s.public_net.ipv6 = None;
        assert_eq!(
            address_pairs(&node_addresses(&s, AddressFamily::DualStack, Some(7))),
            vec![("Hostname", "worker-1"), ("InternalIP", "10.0.0.2")]
        );
    }

    #[test]
    fn zones_use_the_legacy_datacenter_names() {
        for (location, zone) in [
            ("nbg1", "nbg1-dc3"),
            ("fsn1", "fsn1-dc14"),
            ("hel1", "hel1-dc2"),
            ("ash", "ash-dc1"),
            ("hil", "hil-dc1"),
            ("sin", "sin-dc1"),
            ("new1", "new1"),
        ] {
            assert_eq!(legacy_zone(location), zone);
        }
    }

    #[test]
    fn metadata_carries_type_region_zone_and_provenance() {
        let mut config = InstancesConfig::default();
        let m = instance_metadata(&server(), &config);
        assert_eq!(m.provider_id, "hcloud://42");
        assert_eq!(m.instance_type, "cpx22");
        assert_eq!(m.region, "fsn1");
        assert_eq!(m.zone, "fsn1-dc14");
        assert_eq!(m.additional_labels[PROVIDED_BY_LABEL], "cloud");

        config.zone_label_enabled = false;
        assert_eq!(instance_metadata(&server(), &config).zone, "");
    }
}
