//! The instances capability (InstancesV2) for Hetzner Cloud servers.

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use cloud_provider::provider::Result;
use cloud_provider::{Error, InstanceMetadata, Instances};
use hcloud_api::models::{Server, ServerStatus};
use k8s_openapi::api::core::v1::Node;

use crate::config::{CacheMode, InstancesConfig};
use crate::events::Events;
use crate::metadata::instance_metadata;
use crate::metrics::{Operations, op};
use crate::provider_id::ProviderId;
use crate::server_cache::{SUBSYSTEM_INSTANCES, ServerCache, ServerKey, StatusCheck};

/// Hetzner Cloud servers as Kubernetes instances.
///
/// Every call is counted in `cloud_controller_manager_operations_total` with the official
/// `hcloud/instancesv2.*` op values (see [`op::instances`]).
#[derive(Clone, Debug)]
pub struct HcloudInstances {
    cache: ServerCache,
    config: InstancesConfig,
    operations: Operations,
    events: Events,
}

impl HcloudInstances {
    /// Instances answered from `cache` (its lookups counted under `subsystem="instances_v2"`)
    /// with `config`, counting into a fresh (unregistered) [`Operations`] and writing no events
    /// until given a handle.
    pub fn new(cache: ServerCache, config: InstancesConfig) -> Self {
        Self {
            cache: cache.with_subsystem(SUBSYSTEM_INSTANCES),
            config,
            operations: Operations::default(),
            events: Events::default(),
        }
    }

    /// Count operations into `operations` (the provider's shared handle).
    #[must_use]
    pub fn with_operations(mut self, operations: Operations) -> Self {
        self.operations = operations;
        self
    }

    /// Write events through `events` (the provider's shared handle).
    #[must_use]
    pub fn with_events(mut self, events: Events) -> Self {
        self.events = events;
        self
    }

    /// The shared server cache.
    pub fn cache(&self) -> &ServerCache {
        &self.cache
    }

    /// The operations counter.
    pub fn operations(&self) -> &Operations {
        &self.operations
    }

    /// The event handle.
    pub fn events(&self) -> &Events {
        &self.events
    }

    /// The status check of the shared cache (mode `all` only).
    async fn status_check(&self) -> Result<Option<StatusCheck>> {
        if self.cache.config().mode != CacheMode::All {
            return Ok(None);
        }
        self.cache
            .status_check()
            .await
            .map(Some)
            .map_err(|err| Error::api("checking which servers are not running", err))
    }

    async fn find(&self, node: &Node) -> Result<Arc<Server>> {
        let key = server_key(node)?;
        match self.cache.get(&key).await {
            Ok(Some(server)) => Ok(server),
            Ok(None) => Err(Error::InstanceNotFound),
            Err(err) => Err(Error::api(format!("looking up {key}"), err)),
        }
    }
}

/// The Node's InternalIP and ExternalIP addresses.
fn node_ips(node: &Node) -> Vec<IpAddr> {
    node.status
        .iter()
        .flat_map(|status| status.addresses.iter().flatten())
        .filter(|a| a.type_ == "InternalIP" || a.type_ == "ExternalIP")
        .filter_map(|a| a.address.parse().ok())
        .collect()
}

/// Whether `ip` is one of `server`'s addresses: public IPv4, an address of its public IPv6
/// network, or a private (or alias) IP in any network.
fn server_has_ip(server: &Server, ip: IpAddr) -> bool {
    let public_net = &server.public_net;
    let public_v4 = public_net
        .ipv4
        .as_ref()
        .and_then(|v4| v4.ip.parse::<IpAddr>().ok())
        == Some(ip);
    let public_v6 = public_net
        .ipv6
        .as_ref()
        .and_then(|v6| v6.ip.parse::<ipnet::IpNet>().ok())
        .is_some_and(|net| net.contains(&ip));
    let private = server.private_net.iter().any(|p| {
        std::iter::once(&p.ip)
            .chain(p.alias_ips.iter())
            .any(|a| a.parse::<IpAddr>().ok() == Some(ip))
    });
    public_v4 || public_v6 || private
}

/// How to find the server behind `node`: its providerID, else its name.
pub fn server_key(node: &Node) -> Result<ServerKey> {
    let provider_id = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default();
    if provider_id.is_empty() {
        let name = node.metadata.name.clone().unwrap_or_default();
        return Ok(ServerKey::Name(name));
    }
    match ProviderId::parse(provider_id) {
        Ok(ProviderId::Cloud(id)) => Ok(ServerKey::Id(id)),
        Ok(ProviderId::Robot(number)) => Err(Error::other(format!(
            "Node has providerID hrobot://{number}: Robot dedicated servers are not handled by this cloud-controller-manager yet; the Node is left as it is"
        ))),
        Err(err) => Err(Error::InvalidInput(err.to_string())),
    }
}

#[async_trait]
impl Instances for HcloudInstances {
    /// More than one lookup coming: the first lists rather than reads its server alone.
    fn expect_lookups(&self, nodes: usize) {
        if nodes > 1 {
            self.cache.expect_many();
        }
    }

    /// For a Node without a providerID, "no server has its name" alone is not taken as gone
    /// (that would let the lifecycle controller delete a Node whose name differs from its
    /// server's, which routes support): the Node exists while a server has one of its
    /// InternalIP/ExternalIP addresses. Only a Node with neither is reported gone.
    ///
    /// With cache mode `all`, the status check runs first (one request per status period):
    /// when the number of running servers changed, the listing is refreshed before answering,
    /// so a deleted server is asked for directly (and confirmed gone by the API's own "not
    /// found") within about a status period.
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        self.operations.count(op::instances::INSTANCE_EXISTS);
        let key = server_key(node)?;
        self.status_check().await?;
        let exists = self
            .cache
            .confirm_exists(&key)
            .await
            .map_err(|err| Error::api(format!("checking whether {key} exists"), err))?;
        if exists || !matches!(key, ServerKey::Name(_)) {
            return Ok(exists);
        }
        let addresses = node_ips(node);
        if addresses.is_empty() {
            return Ok(false);
        }
        let snapshot = self.cache.all_servers().await.map_err(|err| {
            Error::api(
                format!(
                    "looking for a server with the addresses of node without providerID ({key})"
                ),
                err,
            )
        })?;
        match snapshot
            .servers
            .iter()
            .find(|server| addresses.iter().any(|ip| server_has_ip(server, *ip)))
        {
            Some(server) => {
                tracing::warn!(
                    node = node.metadata.name.as_deref().unwrap_or_default(),
                    server = server.name,
                    server_id = server.id,
                    "no server is named like the Node, but server has one of its addresses: the Node is kept"
                );
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// With cache mode `all`, the answer comes from the status check (servers that are not
    /// running, checked every status period with one request): a server is shut down when it
    /// is `off` there. The server itself is found through the listing.
    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        self.operations.count(op::instances::INSTANCE_SHUTDOWN);
        let key = server_key(node)?;
        let check = self.status_check().await?;
        let server = match self.cache.get_for_status(&key).await {
            Ok(Some(server)) => server,
            Ok(None) => return Err(Error::InstanceNotFound),
            Err(err) => return Err(Error::api(format!("looking up {key}"), err)),
        };
        Ok(match check {
            // The status check is younger than the listing (or as young): it decides.
            Some(check) => check.is_off(server.id),
            None => server.status == ServerStatus::Off,
        })
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>> {
        self.operations.count(op::instances::INSTANCE_METADATA);
        let server = self.find(node).await?;
        Ok(Some(instance_metadata(&server, &self.config)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcloud_api::models::{Ipv4, Ipv6, ServerPrivateNet, ServerPublicNet};

    #[test]
    fn server_addresses_cover_public_private_and_alias_ips() {
        let server = Server {
            public_net: ServerPublicNet {
                ipv4: Some(Ipv4 {
                    ip: "203.0.113.5".into(),
                    ..Ipv4::default()
                }),
                ipv6: Some(Ipv6 {
                    ip: "2001:db8:1::/64".into(),
                    ..Ipv6::default()
                }),
                ..ServerPublicNet::default()
            },
            private_net: vec![ServerPrivateNet {
                network: 1,
                ip: "10.0.0.2".into(),
                alias_ips: vec!["10.0.0.9".into()],
                ..ServerPrivateNet::default()
            }],
            ..Server::default()
        };
        for (ip, expected) in [
            ("203.0.113.5", true),
            ("2001:db8:1::1", true),
            ("10.0.0.2", true),
            ("10.0.0.9", true),
            ("10.0.0.3", false),
            ("2001:db8:2::1", false),
        ] {
            let ip: IpAddr = ip.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
            assert_eq!(server_has_ip(&server, ip), expected, "{ip}");
        }
    }
}
