//! The instances capability (InstancesV2) for Hetzner Cloud servers.

use std::sync::Arc;

use async_trait::async_trait;
use cloud_provider::provider::Result;
use cloud_provider::{Error, InstanceMetadata, Instances};
use hcloud_api::models::{Server, ServerStatus};
use k8s_openapi::api::core::v1::Node;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::config::InstancesConfig;
use crate::metadata::instance_metadata;
use crate::provider_id::ProviderId;
use crate::server_cache::{ServerCache, ServerKey};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    op: &'static str,
}

/// Hetzner Cloud servers as Kubernetes instances.
#[derive(Clone, Debug)]
pub struct HcloudInstances {
    cache: ServerCache,
    config: InstancesConfig,
    operations: Family<OpLabels, Counter>,
}

impl HcloudInstances {
    /// Instances answered from `cache` with `config`.
    pub fn new(cache: ServerCache, config: InstancesConfig) -> Self {
        Self {
            cache,
            config,
            operations: Family::default(),
        }
    }

    /// Register `cloud_controller_manager_operations_total{op}` (with the official CCM's `op`
    /// values, e.g. `hcloud/instancesv2.InstanceExists`) and the cache counters.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "cloud_controller_manager_operations",
            "Cloud provider operations by name",
            self.operations.clone(),
        );
        self.cache.metrics().register(registry);
    }

    /// The shared server cache.
    pub fn cache(&self) -> &ServerCache {
        &self.cache
    }

    fn count(&self, op: &'static str) {
        self.operations.get_or_create(&OpLabels { op }).inc();
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
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        self.count("hcloud/instancesv2.InstanceExists");
        let key = server_key(node)?;
        self.cache
            .confirm_exists(&key)
            .await
            .map_err(|err| Error::api(format!("checking whether {key} exists"), err))
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        self.count("hcloud/instancesv2.InstanceShutdown");
        let key = server_key(node)?;
        let server = match self.cache.get_for_status(&key).await {
            Ok(Some(server)) => server,
            Ok(None) => return Err(Error::InstanceNotFound),
            Err(err) => return Err(Error::api(format!("looking up {key}"), err)),
        };
        Ok(server.status == ServerStatus::Off)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>> {
        self.count("hcloud/instancesv2.InstanceMetadata");
        let server = self.find(node).await?;
        Ok(Some(instance_metadata(&server, &self.config)))
    }
}
